#!/bin/sh
# End to end on a fresh cache folder: cltensor-tune (a short search) writes the device's tuning
# file, and the library then applies it and multiplies correctly with it. The search evaluates
# only the shipped set (--candidates 0): each candidate is a CLBlast program build, which costs
# seconds to minutes on a busy PoCL machine. A device with no shipped set tries one candidate.
set -u
tool=$1
check=$2
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
no() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CLTENSOR_CACHE_DIR="$tmp/cache"

# Where nothing is shipped for the device (any implementation but PoCL's CPU driver, e.g.
# rusticl's llvmpipe), the search tries one random candidate instead.
"$tool" --seconds 5 --size 64 --seed 3 --candidates 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && grep -q 'no shipped or stored set' "$tmp/err" "$tmp/out"; then
  echo "# no shipped tuning for this device: one random candidate instead"
  "$tool" --seconds 5 --size 64 --seed 3 --candidates 1 >"$tmp/out" 2>"$tmp/err"
  rc=$?
fi
if [ $rc -eq 0 ]; then
  ok "cltensor-tune completes a short search"
else
  sed 's/^/# /' "$tmp/err" "$tmp/out"
  no "cltensor-tune completes a short search"
fi
file=$(ls "$tmp"/cache/gemm-*.txt 2>/dev/null | head -n 1)
if [ -n "$file" ] && grep -q '^f32 Xgemm ' "$file" && grep -q "written: $file" "$tmp/out"; then
  ok "it wrote the device's file in the cache folder"
else
  sed 's/^/# /' "$tmp/out"
  no "it wrote the device's file in the cache folder"
fi
if grep -q 'ETA' "$tmp/err" && grep -q 'CLBlast built-in' "$tmp/err"; then
  ok "progress with an ETA on stderr"
else
  no "progress with an ETA on stderr"
fi
ls -A "$tmp"/cache | grep -q '\.tmp$' && no "no temporary file left" || ok "no temporary file left"
if CK_TAP_LOG_FILE_NAME=/dev/null "$check" stored >"$tmp/check" 2>&1; then
  ok "the library applies the stored file"
else
  sed 's/^/# /' "$tmp/check"
  no "the library applies the stored file"
fi
"$tool" --seconds -1 >/dev/null 2>&1
[ $? -eq 2 ] && ok "a bad --seconds is a usage error" || no "a bad --seconds is a usage error"
"$tool" --dtype i32 >/dev/null 2>&1
[ $? -eq 2 ] && ok "a bad --dtype is a usage error" || no "a bad --dtype is a usage error"
"$tool" --candidates x >/dev/null 2>&1
[ $? -eq 2 ] && ok "a bad --candidates is a usage error" || no "a bad --candidates is a usage error"
echo "1..$n"
exit $fail
