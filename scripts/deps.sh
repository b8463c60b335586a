#!/bin/sh
# Installs the Debian 12 packages libcltensor needs that are missing (Open MPI for the process
# groups of include/cltensor/dist.h and the mpirun tests of tests/dist; the library builds
# without it, meson's feature `mpi` being auto); does nothing (and needs
# no network) when all are present. Run as root, or with sudo available.
set -eu
pkgs="gcc g++ pkg-config meson ninja-build python3
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev
libopenblas-dev libcjson-dev libdlpack-dev check python3-numpy
openmpi-bin libopenmpi-dev"
# Extra tools for the full test suite (sanitizers, fuzzing, Oclgrind, valgrind).
if [ "${1:-}" = "--test" ]; then
  # mesa-opencl-icd: Mesa's rusticl, the second OpenCL implementation the suites run on
  # (scripts/rusticl.sh).
  pkgs="$pkgs clang libclang-rt-14-dev oclgrind valgrind mesa-opencl-icd"
fi
missing=""
for p in $pkgs; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0
echo "Installing:$missing" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
