#!/bin/sh
# Runs the project's suites on a second OpenCL implementation, Mesa's rusticl on llvmpipe
# (Debian's mesa-opencl-icd), as the only platform: `meson test --setup=rusticl` in the plain
# build $BUILD_DIR (default build-test, scripts/test.sh's folder; configured here if missing).
#
#   scripts/rusticl.sh              the CI subset below: every kernel program at least once
#   scripts/rusticl.sh ARGS...      meson test's own arguments instead (test names, --suite S;
#                                   no arguments after `--all` runs every suite)
#
# rusticl 22.3 launches cost about 0.6 ms and it compiles each kernel at its first launch, so the
# subset is the op suites whose cases are sized for that; it takes a few minutes cold on the
# 2-core CI machine. What it found, and the suites that cannot pass there (f64, two devices,
# PoCL's native kernels), are in docs/PORTABILITY.md.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build-test}
icd=/etc/OpenCL/vendors/rusticl.icd
if [ ! -f "$icd" ]; then
  echo "scripts/rusticl.sh: $icd is missing: install mesa-opencl-icd (scripts/deps.sh --test)" >&2
  exit 1
fi
[ -f "$build/build.ninja" ] || meson setup "$build" -Dwerror=true
ninja -C "$build"
# The CI subset: together they build every program of kernels/ (copy and elementwise through
# the elementwise and differential suites, reduce and reduce_logic, softmax, shape, index and
# order, conv, pool, norm, attention, loss, random, optim, linalg) and run the driver
# reproducers of tests/portability. The autograd, fusion, elementwise and train-digits suites below
# run without f64 on the device (their f32 form; f64-only parts say "# skip" in the TAP output)
# and take 1-12 s each there.
ci_tests="driver-quirks elementwise-binary elementwise-unary elementwise-scalar elementwise-promote
reduce reduce-gpu-layout reduce_large softmax logsumexp random shape order index nn-conv-auto
nn-pool nn-norm nn-batch-norm attention loss dropout optim linalg-matmul-auto models-charlm
differential-binary fusion-random
autograd-engine autograd-ew autograd-reduce autograd-view autograd-shape autograd-linalg
autograd-index autograd-conv autograd-nn autograd-composite autograd-backward
fusion-graph fusion-reduce fusion-errors elementwise-layout elementwise-dtypes
models-train-digits-check models-train-digits-resume
tensor-cast differential-tensor kernel elementwise-sweep models-train-charlm-check tensor-views
fusion-cast init module module-mha scope dataloader sched tensor-utils module-checkpoint python-package"
if [ $# -eq 0 ]; then
  # shellcheck disable=SC2086
  set -- $ci_tests
elif [ "$1" = "--all" ]; then
  shift
fi
exec meson test -C "$build" --setup=rusticl --no-rebuild --print-errorlogs \
  --num-processes "${MESON_TEST_PROCESSES:-2}" "$@"
