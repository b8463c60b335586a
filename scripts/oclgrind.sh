#!/bin/sh
# Runs the project's kernels on Oclgrind, the OpenCL device simulator that checks every memory
# access: out-of-bounds reads and writes, uninitialized values, data races, invalid API use.
#
#   scripts/oclgrind.sh [SUITE...]     run `meson test --setup=oclgrind` on the suites (default:
#                                      the kernel suites listed below, which CI runs) in the
#                                      plain build $BUILD_DIR (default build-test, the folder of
#                                      scripts/test.sh; configured here if missing)
#   scripts/oclgrind.sh --wrap CMD...  run one command with Oclgrind as the only OpenCL platform
#                                      (the wrapper of the meson setup); its exit status is
#                                      CMD's, or 1 when Oclgrind reported anything
#
# Oclgrind is a GPU in the library's device order, and the only platform here (OCL_ICD_VENDORS
# names a folder holding just its ICD), so the default device is Oclgrind. Tests that need
# POCL_DEVICES="pthread pthread" or no platform at all see one Oclgrind device instead; run only
# the op suites here. Oclgrind's own OCLGRIND_* variables (see `oclgrind --help`) pass through;
# OCLGRIND_NUM_THREADS defaults to 1 (the 2-core CI machine), OCLGRIND_GLOBAL_MEM_SIZE to 1 GiB.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = "--wrap" ]; then
  shift
  bin=$(command -v oclgrind) || { echo "oclgrind.sh: oclgrind is not installed (apt-get install oclgrind)" >&2; exit 1; }
  icd=""
  for dir in "$(dirname "$bin")/../lib/oclgrind" "$(dirname "$bin")/../lib/x86_64-linux-gnu/oclgrind" \
             "$(dirname "$bin")/../lib64/oclgrind" "$(dirname "$bin")/../lib"; do
    if [ -f "$dir/liboclgrind-rt-icd.so" ]; then icd=$(cd "$dir" && pwd)/liboclgrind-rt-icd.so; break; fi
  done
  [ -n "$icd" ] || { echo "oclgrind.sh: liboclgrind-rt-icd.so not found next to $bin" >&2; exit 1; }
  work=$(mktemp -d "${TMPDIR:-/tmp}/cltensor-oclgrind.XXXXXX")
  trap 'rm -rf "$work"' EXIT INT TERM
  mkdir "$work/vendors"
  echo "$icd" > "$work/vendors/oclgrind.icd"
  export OCL_ICD_VENDORS="$work/vendors"
  export OCLGRIND_CHECK_API=1 OCLGRIND_DATA_RACES=1 OCLGRIND_UNINITIALIZED=1
  export OCLGRIND_NUM_THREADS="${OCLGRIND_NUM_THREADS:-1}"
  export OCLGRIND_GLOBAL_MEM_SIZE="${OCLGRIND_GLOBAL_MEM_SIZE:-1073741824}"
  # A kernel cache of its own: Oclgrind's binaries are LLVM bitcode, of no use to PoCL.
  export CLTENSOR_CACHE_DIR="${CLTENSOR_CACHE_DIR:-$work}/oclgrind"
  unset CLTENSOR_DEVICE POCL_DEVICES
  # Oclgrind 21.10 marks the wrong bytes initialized when the host writes a buffer at a nonzero
  # offset (clEnqueueWriteBuffer at byte 512 cleans bytes 16..80 of the shadow, not 512..592),
  # so every read of data uploaded into a caching-allocator block that does not start its
  # buffer is reported as uninitialized. Without caching each block is a buffer of its own at
  # offset 0, which keeps the uninitialized-value check meaningful.
  export CLTENSOR_NO_CACHING=1
  # Oclgrind reports on stderr: keep stderr flowing to the caller, scan a copy, and keep the
  # command's stdout (TAP for meson) untouched.
  echo 1 > "$work/status"
  { ( set +e; "$@" 2>&1 1>&3 3>&-; echo $? > "$work/status" ) | tee "$work/stderr" >&2; } 3>&1
  status=$(cat "$work/status")
  if grep -q -E '^Oclgrind - |^	Kernel: |^	Function: ' "$work/stderr"; then
    echo "oclgrind.sh: Oclgrind reported errors (above) for: $*" >&2
    exit 1
  fi
  exit "$status"
fi

suites=${*:-"elementwise reduce random linalg tensor"}
build="$root/${BUILD_DIR:-build-test}"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dwerror=true
fi
ninja -C "$build" -j "${NINJA_JOBS:-2}"
args=""
for s in $suites; do args="$args --suite $s"; done
# shellcheck disable=SC2086
meson test -C "$build" --setup=oclgrind --print-errorlogs --num-processes "${MESON_TEST_PROCESSES:-2}" $args
