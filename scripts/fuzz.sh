#!/bin/sh
# Builds the libFuzzer harnesses of tests/fuzz (clang, ASan + UBSan, libFuzzer's coverage over
# the whole library) in build-fuzz and runs each for a while (see docs/RELIABILITY.md).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS defaults to 30 (what CI runs); TARGETs default to every harness (fuzz_<target>.c).
# Each target runs on a working corpus build-fuzz/corpus/<target>, which starts from the seed
# corpus tests/fuzz/corpus/<target> and keeps what libFuzzer finds between runs. A crash stops
# the run, leaves its input in build-fuzz/crashes/<target>/ and makes the script fail: commit
# that file to tests/fuzz/corpus/<target>/ with the fix, so every build replays it.
# FUZZ_JOBS=N runs N targets at once (default 1: the machine has 2 cores shared with others).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
[ $# -gt 0 ] && shift
build="$root/build-fuzz"

if [ $# -eq 0 ]; then
  set --
  for f in "$root"/tests/fuzz/fuzz_*.c; do
    name=$(basename "$f" .c)
    set -- "$@" "${name#fuzz_}"
  done
fi

if [ ! -f "$build/build.ninja" ]; then
  CC=${CC_FUZZ:-clang} meson setup "$build" "$root" -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dc_args="-fsanitize=fuzzer-no-link -fno-omit-frame-pointer"
fi
targets=""
for t in "$@"; do targets="$targets tests/fuzz/fuzz_$t"; done
# shellcheck disable=SC2086
ninja -C "$build" -j "${NINJA_JOBS:-2}" $targets

run_one() {
  t=$1
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  dict=""
  [ -f "$root/tests/fuzz/$t.dict" ] && dict="-dict=$root/tests/fuzz/$t.dict"
  log="$build/fuzz-$t.log"
  # detect_leaks stays on: a parser that leaks on some input is a finding too.
  # shellcheck disable=SC2086
  if ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1 \
     UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
     "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$build/crashes/$t/" $dict \
       "$build/corpus/$t" "$root/tests/fuzz/corpus/$t" > "$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    corpus=$(find "$build/corpus/$t" -type f | wc -l)
    echo "fuzz $t: $execs executions in ${seconds} s, no finding (working corpus: $corpus inputs; log: $log)"
  else
    echo "fuzz $t: FINDING, see $log and $build/crashes/$t/" >&2
    tail -40 "$log" >&2
    return 1
  fi
}

jobs=${FUZZ_JOBS:-1}
failed=0
running=0
pids=""
for t in "$@"; do
  if [ "$jobs" -le 1 ]; then
    run_one "$t" || failed=1
  else
    run_one "$t" &
    pids="$pids $!"
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
      for p in $pids; do wait "$p" || failed=1; done
      pids=""
      running=0
    fi
  fi
done
for p in $pids; do wait "$p" || failed=1; done
exit "$failed"
