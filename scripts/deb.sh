#!/bin/sh
# Builds the Debian packages (libcltensor0, libcltensor-dev, cltensor-tools) from debian/,
# checks them with lintian, installs them on this machine, builds and runs the README example
# against the installed files with pkg-config (shared and static) and with CMake, then removes
# them again. A release-time check, not a CI stage: it compiles the whole library once more,
# and it installs into /usr (docs/PACKAGING.md says why and what lintian reports).
#
#   scripts/deb.sh            build, lintian, install, check, remove
#   scripts/deb.sh --keep     leave the packages installed
#   scripts/deb.sh --build    build and lintian only (no root needed past scripts/deps.sh)
#
# The packages end in build-deb/ (a copy of the working tree is built there, so the checkout
# stays clean). Run as root, or with sudo available. Uses ccache when it is installed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-all}
case $mode in all|--keep|--build) ;; *) echo "usage: scripts/deb.sh [--keep|--build]" >&2; exit 2 ;; esac
sh "$root/scripts/deps.sh" --package
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
upstream=${version%-*}
if [ "$upstream" != "$(python3 "$root/scripts/version.py")" ]; then
  echo "scripts/deb.sh: debian/changelog is at $version, the library at $(python3 "$root/scripts/version.py"):" \
       "add a changelog entry (dch -v VERSION-1)" >&2
  exit 1
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# ---- Build, in a copy of the working tree (tracked and untracked files, not the build
# folders), so that debian/'s build products never land in the checkout.
out=$root/build-deb
rm -rf "$out"
mkdir -p "$out/cltensor-$upstream"
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar cf -) |
    tar xf - -C "$out/cltensor-$upstream"
else
  (cd "$root" && tar cf - --exclude='./build*' .) | tar xf - -C "$out/cltensor-$upstream"
fi
[ -d /usr/lib/ccache ] && PATH=/usr/lib/ccache:$PATH && export PATH
# nocheck: the tests are off in the package build anyway (debian/rules says why).
export DEB_BUILD_OPTIONS="nocheck parallel=${NINJA_JOBS:-2} ${DEB_BUILD_OPTIONS:-}"
start=$(date +%s)
(cd "$out/cltensor-$upstream" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 || {
  tail -n 40 "$out/build.log" >&2; echo "scripts/deb.sh: dpkg-buildpackage failed ($out/build.log)" >&2; exit 1; }
echo "built in $(($(date +%s) - start)) s:"
ls -l "$out"/*.deb

# ---- lintian: no error allowed; the warnings left are listed in docs/PACKAGING.md.
changes=$out/cltensor_${version}_${arch}.changes
lintian --fail-on error --display-info "$changes" | tee "$out/lintian.log" || {
  echo "scripts/deb.sh: lintian found errors" >&2; exit 1; }
echo "lintian: $(grep -c '^E:' "$out/lintian.log" || true) errors, $(grep -c '^W:' "$out/lintian.log" || true) warnings"
[ "$mode" = --build ] && exit 0

# ---- Install, then use only the installed files.
pkgs="cltensor-tools libcltensor-dev libcltensor0"
remove() { $sudo dpkg -r $pkgs >/dev/null; echo "removed: $pkgs"; }
$sudo dpkg -i "$out"/libcltensor0_"${version}"_"$arch".deb "$out"/libcltensor-dev_"${version}"_"$arch".deb \
  "$out"/cltensor-tools_"${version}"_"$arch".deb
tmp=$(mktemp -d)
trap '[ "$mode" = --keep ] || remove; rm -rf "$tmp"' EXIT
export CLTENSOR_CACHE_DIR="$tmp/kernel-cache"
fail=0
check() { if "$@" >"$tmp/out" 2>&1; then echo "ok: $desc"; else sed 's/^/  /' "$tmp/out"; echo "FAILED: $desc"; fail=1; fi; }
readme=$root/examples/readme.c
# A libcltensor under /usr/local (a `meson install`) would shadow the packages' files: pin them.
desc="pkg-config finds the packaged cltensor.pc"
check test "$(pkg-config --variable=libdir cltensor)" = "/usr/lib/$triplet"
desc="the README example builds with pkg-config --cflags --libs cltensor, and runs"
check sh -c "cc -std=c11 -Wall -Wextra -Werror '$readme' -o '$tmp/readme' \$(pkg-config --cflags --libs cltensor) &&
  '$tmp/readme' | grep -q 403.4288 && readelf -d '$tmp/readme' | grep -q 'NEEDED.*libcltensor.so.0'"
desc="it links statically with pkg-config --static --libs, and runs"
check sh -c "cc -std=c11 -Wall -Wextra -Werror '$readme' -o '$tmp/readme-static' \$(pkg-config --cflags cltensor) \
  \$(pkg-config --static --libs cltensor | sed 's/-lcltensor\\( \\|\$\\)/-l:libcltensor.a /') &&
  '$tmp/readme-static' | grep -q 403.4288 && ! readelf -d '$tmp/readme-static' | grep -q 'NEEDED.*libcltensor'"
for kind in shared static; do
  desc="the CMake consumer (tests/install/cmake) builds with find_package(cltensor), $kind, and runs"
  check sh -c "cmake -S '$root/tests/install/cmake' -B '$tmp/cmake-$kind' -G Ninja \
      -Dcltensor_DIR=/usr/lib/$triplet/cmake/cltensor -DCLTENSOR_EXAMPLE='$readme' \
      -Dcltensor_USE_STATIC_LIBS=$([ $kind = static ] && echo ON || echo OFF) &&
    cmake --build '$tmp/cmake-$kind' && '$tmp/cmake-$kind/readme' | grep -q 403.4288"
done
desc="cltensor-info lists a device"
check sh -c "cltensor-info | grep -q cpu:0"
desc="man finds cltensor(3) and cltensor-info(1)"
check sh -c "man -w 3 cltensor && man -w cltensor-info"
[ $fail -eq 0 ] && echo "scripts/deb.sh: the packages build, pass lintian and work installed" || exit 1
