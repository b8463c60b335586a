#!/bin/sh
# cltensor-info as a user sees it: the table, --json (valid JSON), --device, --help,
# --version, two PoCL devices (skipped, and said, where the implementation has one), an invalid $CLTENSOR_DEVICE (listed anyway, with a warning), and
# no ICD at all (nonzero exit with the install hint).
set -u
info=$1
fail=0
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
no() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
check() { if eval "$2"; then ok "$1"; else no "$1"; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

POCL_DEVICES=pthread "$info" >"$tmp/one" 2>&1
check "table exits 0" "[ $? -eq 0 ]"
check "table lists cpu:0 as default" "grep -q '^\* cpu:0' '$tmp/one'"
check "table has one device" "[ \$(grep -c 'cpu:' '$tmp/one') -eq 1 ]"

# Two devices where the implementation gives two (PoCL with POCL_DEVICES); one with a single
# device (rusticl's llvmpipe) skips the checks that need a second, naming the device.
POCL_DEVICES="pthread pthread" "$info" --json >"$tmp/json" 2>&1
check "--json exits 0" "[ $? -eq 0 ]"
ndev=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$tmp/json" 2>/dev/null || echo 0)
first=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["name"])' "$tmp/json" 2>/dev/null)
two() {
  if [ "$ndev" -ge 2 ]; then check "$1" "$2"
  else n=$((n + 1)); echo "ok $n - $1 # SKIP needs a second device: $first has none"; fi
}
POCL_DEVICES="pthread pthread" "$info" >"$tmp/two" 2>&1
check "every device listed" "[ \$(grep -c '^[* ] cpu:' '$tmp/two') -eq $ndev ]"
two "two PoCL devices listed" "grep -q 'cpu:0' '$tmp/two' && grep -q 'cpu:1' '$tmp/two'"
check "--json is valid JSON, its first device the default" \
  "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d)>=1 and d[0][\"spec\"]==\"cpu:0\" and d[0][\"default\"] and \"extensions\" in d[0]' '$tmp/json'"

POCL_DEVICES="pthread pthread" "$info" --device cpu:1 >"$tmp/dev" 2>&1
two "--device cpu:1 lists only cpu:1" "grep -q 'cpu:1' '$tmp/dev' && ! grep -q 'cpu:0' '$tmp/dev'"

"$info" --device bogus >"$tmp/bad" 2>&1
check "--device with a malformed spec fails" "[ $? -ne 0 ]"
check "  and quotes the spec" "grep -q \"'bogus'\" '$tmp/bad'"

"$info" --device gpu:0 >"$tmp/nf" 2>&1
check "--device gpu:0 fails with the device list" "[ $? -ne 0 ] && grep -q 'available' '$tmp/nf'"

"$info" --verbose >"$tmp/verbose" 2>&1
check "--verbose shows extensions" "grep -q 'extensions:' '$tmp/verbose'"

"$info" --help >"$tmp/help" 2>&1
check "--help" "[ $? -eq 0 ] && grep -q 'Usage' '$tmp/help'"

"$info" --version >"$tmp/ver" 2>&1
check "--version" "[ $? -eq 0 ] && grep -q 'cltensor-info [0-9]' '$tmp/ver'"

# An invalid $CLTENSOR_DEVICE: everything is still listed (this is the tool that finds a valid
# spec), no device is marked, and a warning on stderr names the value.
POCL_DEVICES="pthread pthread" CLTENSOR_DEVICE=nonsense "$info" >"$tmp/envbad" 2>"$tmp/envbad.err"
check "an invalid CLTENSOR_DEVICE: exit 0" "[ $? -eq 0 ]"
check "  every device listed" "[ \$(grep -c 'cpu:' '$tmp/envbad') -eq $ndev ]"
check "  no default marked" "! grep -q '^\*' '$tmp/envbad'"
check "  a warning naming the value" "grep -q \"warning: \\\$CLTENSOR_DEVICE='nonsense'\" '$tmp/envbad.err'"

# A well-formed spec that selects no device on any machine (the highest index a spec takes;
# plain 'gpu' is valid where there is a GPU).
CLTENSOR_DEVICE=gpu:999999999 "$info" --device cpu >"$tmp/envgpu" 2>"$tmp/envgpu.err"
check "CLTENSOR_DEVICE=gpu:999999999 --device cpu: exit 0" "[ $? -eq 0 ]"
check "  lists cpu:0 unmarked" "grep -q '^  cpu:0' '$tmp/envgpu'"
check "  warns about 'gpu:999999999'" "grep -q \"CLTENSOR_DEVICE='gpu:999999999'\" '$tmp/envgpu.err'"

CLTENSOR_DEVICE=gpu:999999999 "$info" --json >"$tmp/envjson" 2>/dev/null
check "  --json: valid, no default" \
  "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d and not any(x[\"default\"] for x in d)' '$tmp/envjson'"

CLTENSOR_DEVICE="$(printf 'gpu\033[31m\nX')" "$info" >"$tmp/envesc" 2>"$tmp/envesc.err"
check "  control bytes in the value are escaped" \
  "python3 -c 'import sys; e=open(sys.argv[1],\"rb\").read(); assert e.count(b\"\\n\")==1 and b\"\\x1b\" not in e and br\"gpu\\x1b[31m\\x0aX\" in e' '$tmp/envesc.err'"

mkdir "$tmp/empty"
OCL_ICD_VENDORS="$tmp/empty" "$info" >"$tmp/none.out" 2>"$tmp/none.err"
rc=$?
check "no ICD: nonzero exit" "[ $rc -ne 0 ]"
check "no ICD: install hint on stderr" "grep -q 'pocl-opencl-icd' '$tmp/none.err'"
check "no ICD: nothing on stdout" "[ ! -s '$tmp/none.out' ]"

echo "1..$n"
exit $fail
