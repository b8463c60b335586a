#!/bin/sh
# Runs the project's kernels on Oclgrind, the OpenCL device simulator that checks every memory
# access: out-of-bounds reads and writes, uninitialized values, data races, invalid API use.
#
#   scripts/oclgrind.sh [ARGS...]      run `meson test --setup=oclgrind ARGS` in the plain build
#                                      $BUILD_DIR (default build-test, the folder of
#                                      scripts/test.sh; configured here if missing). ARGS are
#                                      meson test's (test names, --suite S); without them, the
#                                      CI subset: the kernel tests that take seconds to a minute
#                                      or two on Oclgrind (ci_tests below)
#   scripts/oclgrind.sh --wrap CMD...  run one command with Oclgrind as the only OpenCL platform
#                                      (the wrapper of the meson setup); its exit status is
#                                      CMD's, or 1 when Oclgrind reported anything
#
# Oclgrind is a GPU in the library's device order, and the only platform here (OCL_ICD_VENDORS
# names a folder holding just its ICD), so the default device is Oclgrind. Tests that need
# POCL_DEVICES="pthread pthread" or no platform at all see one Oclgrind device instead; run only
# the op suites here.
#
# Checks: every global/local/private access in bounds (always on in Oclgrind), data races
# (OCLGRIND_DATA_RACES) and the API use (OCLGRIND_CHECK_API). Not by default: uninitialized
# values (OCLGRIND_UNINITIALIZED=1 turns it on), because Oclgrind 21.10 gets the shadow state of
# host-side writes wrong and reports every value that came from them: clEnqueueFillBuffer
# (ct_full, ct_zeros, ct_ones) marks nothing initialized, and clEnqueueWriteBuffer at a nonzero
# offset marks the wrong bytes (docs/RELIABILITY.md has the reproducers).
# Three API errors are the library's own handled failures, exercised on purpose by the tests,
# and are not findings: CL_BUILD_PROGRAM_FAILURE (a kernel that does not compile gives
# CT_ERR_KERNEL_BUILD), CL_INVALID_KERNEL_NAME (a kernel missing from a program) and
# CL_INVALID_BINARY (a cache file the driver refuses, then built from source). Any other API
# error, and every kernel diagnostic, fails the test.
# Oclgrind runs one kernel at a time per context and asserts when two host threads launch at
# once, and it is one device, so the setup sets CK_EXCLUDE_TAGS="threads two-devices": test
# cases with either tag are skipped.
# Environment: Oclgrind's OCLGRIND_* variables pass through (see `oclgrind --help`);
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
  export OCLGRIND_CHECK_API=1 OCLGRIND_DATA_RACES=1 OCLGRIND_UNINITIALIZED="${OCLGRIND_UNINITIALIZED:-0}"
  export OCLGRIND_NUM_THREADS="${OCLGRIND_NUM_THREADS:-1}"
  export OCLGRIND_GLOBAL_MEM_SIZE="${OCLGRIND_GLOBAL_MEM_SIZE:-1073741824}"
  # A kernel cache of its own: Oclgrind's binaries are LLVM bitcode, of no use to PoCL.
  export CLTENSOR_CACHE_DIR="${CLTENSOR_CACHE_DIR:-$work}/oclgrind"
  unset CLTENSOR_DEVICE POCL_DEVICES
  # Without caching every tensor is an OpenCL buffer of its own (rounded to 512 bytes) instead
  # of a range of a shared 2 MiB segment, so an access past a tensor's end leaves its buffer,
  # which is what Oclgrind can see; it also keeps blocks at offset 0 (see above).
  export CLTENSOR_NO_CACHING=1
  # Oclgrind reports on stderr: keep stderr flowing to the caller, scan a copy, and keep the
  # command's stdout (TAP for meson) untouched.
  echo 1 > "$work/status"
  { ( set +e; "$@" 2>&1 1>&3 3>&-; echo $? > "$work/status" ) | tee "$work/stderr" >&2; } 3>&1
  status=$(cat "$work/status")
  if ! awk '
    /^Oclgrind - OpenCL runtime error detected/ { api = 1; next }
    api && /^\tError:/ {
      if ($2 !~ /^(CL_BUILD_PROGRAM_FAILURE|CL_INVALID_KERNEL_NAME|CL_INVALID_BINARY)$/) bad++
      api = 0; next
    }
    /^\tKernel: / { bad++ }
    END { exit bad ? 1 : 0 }' "$work/stderr"; then
    echo "oclgrind.sh: Oclgrind reported errors (above) for: $*" >&2
    exit 1
  fi
  exit "$status"
fi

# The CI subset: every kernel family that is quick enough on the simulator (the reduce and
# random suites take 7-12 minutes there; run them by hand with --suite reduce --suite random).
ci_tests="tensor-basic tensor-views tensor-cast tensor-transfer tensor-print softmax linalg-matmul-clblast
  elementwise-binary elementwise-unary elementwise-scalar elementwise-promote elementwise-layout shape fusion-cast"
build="$root/${BUILD_DIR:-build-test}"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dwerror=true
fi
ninja -C "$build" -j "${NINJA_JOBS:-2}"
if [ $# -eq 0 ]; then
  # Only the CI tests this build has.
  available=$(meson test -C "$build" --list 2>/dev/null | sed 's/.* \/ //')
  for t in $ci_tests; do
    if echo "$available" | grep -qx "$t"; then set -- "$@" "$t"; fi
  done
fi
exec meson test -C "$build" --setup=oclgrind --print-errorlogs --num-processes "${MESON_TEST_PROCESSES:-2}" "$@"
