#!/bin/sh
# README command 2: the whole test suite (what CI runs). Idempotent: reuses the build folders
# and rebuilds only what changed.
#
#   1. every suite, warnings as errors          (build-test)
#   2. the unit tests under ASan + UBSan + LSan (build-asan, scripts/sanitize.sh)
#   3. the kernel subset on Oclgrind            (scripts/oclgrind.sh)
#   4. each libFuzzer harness for 30 seconds    (build-fuzz, scripts/fuzz.sh; two at a time)
#   5. the CI subset on Mesa's rusticl          (build-test, scripts/rusticl.sh)
#
# CT_TEST_STAGES="1 2" runs only some stages (default: all). See docs/RELIABILITY.md.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh --test
stages=${CT_TEST_STAGES:-1 2 3 4 5}
summary=""

# Prints "N passed, M failed" for the last meson test run of a build folder (meson names the
# log testlog-SETUP.json under a test setup).
count() {
  python3 - "$1/meson-logs" <<'PY' || echo "(no test log)"
import glob, json, os, sys
log = max(glob.glob(os.path.join(sys.argv[1], 'testlog*.json')), key=os.path.getmtime)
rows = [json.loads(l) for l in open(log) if l.strip()]
# Tests scripts/sanitize.sh reran after LeakSanitizer's tracer crashed count by their rerun.
# The last rerun may have been under the 'asannoleak' setup: those tests lost the leak check.
again, noleak = {}, set()
for retry in sorted(glob.glob(os.path.join(sys.argv[1], 'lsan-retry*.json')), key=os.path.getmtime):
    if os.path.getmtime(retry) >= os.path.getmtime(log):
        for r in map(json.loads, filter(str.strip, open(retry))):
            again[r['name']] = r['result']
            if retry.endswith('-asannoleak.json'):
                noleak.add(r['name'].split(' / ')[-1])
for r in rows:
    r['result'] = again.get(r['name'], r['result'])
ok = sum(r['result'] in ('OK', 'EXPECTEDFAIL') for r in rows)
skip = sum(r['result'] == 'SKIP' for r in rows)
note = f" ({len(again)} rerun after a LeakSanitizer tracer crash" if again else ""
note += f"; without the leak check: {' '.join(sorted(noleak))})" if noleak else ")" if again else ""
print(f"{ok} passed, {len(rows) - ok - skip} failed, {skip} skipped{note}")
PY
}

for s in $stages; do
  # Each stage's wall time goes into the summary (docs/RELIABILITY.md keeps the figures).
  start=$(date +%s)
  case $s in
    1)
      echo "== 1. every suite (build-test)"
      # default_library=both: the install test also links a consumer with the static library
      # (docs/PACKAGING.md); a build-test folder from before that gets the option once.
      [ -f build-test/build.ninja ] || meson setup build-test -Dwerror=true -Ddefault_library=both
      lib=$(meson introspect build-test --buildoptions |
        python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "default_library"))')
      [ "$lib" = both ] || meson configure build-test -Ddefault_library=both
      # Everything, not only what the tests link: tools and examples must build warning-free
      # too, and the install test installs them.
      ninja -C build-test
      meson test -C build-test --print-errorlogs --num-processes 2
      summary="$summary
suites: $(count build-test)" ;;
    2)
      echo "== 2. ASan + UBSan + LSan (build-asan)"
      sh scripts/sanitize.sh asan
      summary="$summary
asan: $(count build-asan)" ;;
    3)
      echo "== 3. kernels on Oclgrind"
      BUILD_DIR=build-test sh scripts/oclgrind.sh
      summary="$summary
oclgrind: $(count build-test)" ;;
    4)
      echo "== 4. fuzzing, 30 s per harness (build-fuzz)"
      # Two harnesses at a time (each libFuzzer process is single-threaded): the same 30 s of
      # wall time each on the 2-core machine, the stage in half the time.
      FUZZ_JOBS=${FUZZ_JOBS:-2} sh scripts/fuzz.sh 30
      summary="$summary
fuzz: every harness ran 30 s without a finding" ;;
    5)
      echo "== 5. the CI subset on Mesa's rusticl (llvmpipe)"
      BUILD_DIR=build-test sh scripts/rusticl.sh
      summary="$summary
rusticl: $(count build-test)" ;;
    *) echo "unknown stage $s" >&2; exit 2 ;;
  esac
  summary="$summary ($(($(date +%s) - start)) s)"
done
echo "$summary"
