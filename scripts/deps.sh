#!/bin/sh
# Installs the Debian 12 packages libcltensor needs that are missing (Open MPI for the process
# groups of include/cltensor/dist.h and the mpirun tests of tests/dist; the library builds
# without it, meson's feature `mpi` being auto); does nothing (and needs
# no network) when all are present. Run as root, or with sudo available.
set -eu
pkgs="gcc g++ pkg-config meson ninja-build python3
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev
libopenblas-dev libcjson-dev libdlpack-dev check python3-numpy
python3-dev python3-cffi python3-setuptools python3-pip python3-venv openmpi-bin libopenmpi-dev"
# (The python3-* packages build and run the Python package offline: python/README.md.)
for opt in "$@"; do
  case $opt in
    # Extra tools for the full test suite (sanitizers, fuzzing, Oclgrind, valgrind).
    # mesa-opencl-icd: Mesa's rusticl, the second OpenCL implementation the suites run on
    # (scripts/rusticl.sh). cmake: the install test's find_package(cltensor) consumer;
    # groff-base, man-db, mandoc: the man pages' checks (tests/man). python3-pytest: the Python
    # package's tests (suite 'python', python/run_tests.py).
    --test) pkgs="$pkgs clang libclang-rt-14-dev oclgrind valgrind mesa-opencl-icd cmake groff-base man-db mandoc python3-pytest" ;;
    # The Debian packages' build and checks (scripts/deb.sh, docs/PACKAGING.md): not needed to
    # build or test the library.
    --package) pkgs="$pkgs dpkg-dev debhelper lintian cmake" ;;
    *) echo "usage: deps.sh [--test] [--package]" >&2; exit 2 ;;
  esac
done
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
