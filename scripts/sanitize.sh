#!/bin/sh
# Builds the library and tests with a sanitizer in a build folder of their own and runs
# `meson test` under the matching setup (see docs/RELIABILITY.md).
#
#   scripts/sanitize.sh asan [MESON-TEST-ARGS...]   AddressSanitizer + UndefinedBehaviorSanitizer
#                                                   + LeakSanitizer, in build-asan
#   scripts/sanitize.sh tsan [MESON-TEST-ARGS...]   ThreadSanitizer, in build-tsan
#
# Without test arguments, asan runs what CI runs: every test of the setup (all but the suites
# 'soak' and 'install') except the few in asan_skip below (the elementwise ones: 25-99 s each
# under ASan on 2 cores with their 852 programs to build, 5-6 s warm, docs/RELIABILITY.md);
# `scripts/sanitize.sh asan --all` runs those too. tsan runs the suites with
# threads ('stress' and 'device'). Extra arguments go to `meson test`, e.g.
# `scripts/sanitize.sh asan --suite tensor`. CC picks the compiler (gcc by default; with clang
# the build also needs -Db_lundef=false, which is always set here because ASan's runtime is
# linked into executables only).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-asan}
[ $# -gt 0 ] && shift

# asan: UBSan findings abort (-fno-sanitize-recover) whatever UBSAN_OPTIONS says, so that a
# `meson test -C build-asan` without --setup=asan (whose halt_on_error=1 does the same) cannot
# pass a test that UBSan reported; Check's forked child then exits early and the test fails.
case "$kind" in
  asan) sanitize=address,undefined; extra_cflags=" -fno-sanitize-recover=undefined"; default_args="" ;;
  tsan) sanitize=thread; extra_cflags=""; default_args="--suite stress --suite device" ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan [meson test arguments]" >&2; exit 2 ;;
esac
build="$root/build-$kind"

if [ ! -f "$build/build.ninja" ]; then
  # Frame pointers make the fast unwinder's stacks (leak reports, TSan's) complete.
  meson setup "$build" "$root" -Dwerror=true -Db_sanitize="$sanitize" -Db_lundef=false \
    -Dc_args="-fno-omit-frame-pointer$extra_cflags"
fi
ninja -C "$build" -j "${NINJA_JOBS:-2}"

# The exhaustive every-op x every-dtype elementwise tests (their kernels and host paths are run
# under ASan by elementwise-binary and elementwise-layout at CI size) and the benchmark.
# two-implementations loads Mesa's rusticl with its device enabled, whose JIT (LLVM inside
# libRusticlOpenCL) is not instrumented and has not been checked under ASan; stage 1 and the
# rusticl stage run it and its library code paths are the ones ASan covers on PoCL.
asan_skip="elementwise-scalar elementwise-unary elementwise-promote cltensor-bench two-implementations"
if [ "$kind" = asan ] && [ "${1:-}" = "--all" ]; then
  shift
elif [ "$kind" = asan ] && [ $# -eq 0 ]; then
  for t in $(meson test -C "$build" --setup=asan --list 2>/dev/null | sed -n 's/^.* \/ //p'); do
    case " $asan_skip " in *" $t "*) ;; *) set -- "$@" "$t" ;; esac
  done
elif [ $# -eq 0 ]; then
  # shellcheck disable=SC2086
  set -- $default_args
fi
rm -f "$build"/meson-logs/lsan-retry*.json
if meson test -C "$build" --setup="$kind" --print-errorlogs --num-processes "${MESON_TEST_PROCESSES:-2}" "$@"; then
  exit 0
fi
# LeakSanitizer's stop-the-world tracer itself sometimes segfaults at exit ("Tracer caught
# signal 11 ... LeakSanitizer has encountered a fatal error", google/sanitizers#1353): the test
# passed and no leak was reported, the checker crashed. Such tests, and only when every failure
# is one, run again twice with the leak check, the reruns logging LSan's threads
# (verbosity=1:log_threads=1) so that the log shows where the tracer was. Session 14's CI saw the
# tracer crash at the same address in the run and in all three reruns of attention-kernels, as
# session 10's did for nn-conv-clblast, and never here: such a test then runs once more under
# the 'asannoleak' setup, every ASan and UBSan check but the leak check, and its result counts
# (the summary says which tests lost the leak check). A leak report or any other failure fails
# the stage as it is.
log="$build/meson-logs/testlog-$kind.json"
for attempt in 1 2 3; do
  retry=$(python3 - "$log" <<'PY'
import json, sys
bad, crashed = [], []
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    r = json.loads(line)
    if r["result"] in ("OK", "EXPECTEDFAIL", "SKIP"):
        continue
    err = (r.get("stderr") or "") + (r.get("stdout") or "")
    tracer = "Tracer caught signal" in err and "LeakSanitizer has encountered a fatal error" in err
    # Check runs each test in a forked child, so a crash at the child's exit shows as "Early
    # exit with return value 1"; a real leak says "detected memory leaks" (exit code 23).
    fails = [l for l in err.splitlines() if l.startswith("not ok")]
    if tracer and "detected memory leaks" not in err and all("Early exit with return value 1" in l for l in fails):
        crashed.append(r["name"].split(" / ")[-1])
    else:
        bad.append(r["name"])
print(" ".join(crashed) if crashed and not bad else "")
PY
)
  [ -n "$retry" ] || exit 1
  setup=$kind
  if [ "$attempt" -lt 3 ]; then
    echo "== LeakSanitizer's tracer crashed in: $retry; running those again (attempt $attempt of 2)"
    diag="LSAN_OPTIONS=verbosity=1:log_threads=1"
  else
    echo "== LeakSanitizer's tracer crashed in every rerun of: $retry; running those under ASan and UBSan without the leak check"
    setup=asannoleak
    diag=""
  fi
  # shellcheck disable=SC2086
  if env $diag meson test -C "$build" --setup="$setup" --print-errorlogs --logbase "lsan-retry$attempt" $retry; then
    exit 0
  fi
  log="$build/meson-logs/lsan-retry$attempt-$setup.json"
done
exit 1
