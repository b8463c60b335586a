#!/bin/sh
# Usage: test_install.sh BUILD_DIR SOURCE_DIR  (TAP)
# A new user's view of the installed library: install into a staging folder, build a ten-line
# program with `cc prog.c $(pkg-config --cflags --libs cltensor)`, run it; and check that the
# shared library exports only the ct_ API. Then the packaging of docs/PACKAGING.md: the CMake
# package (tests/install/cmake, a find_package(cltensor) project, builds and runs the README
# example), the man pages, and, when the build made libcltensor.a (-Ddefault_library=both, as
# scripts/test.sh configures), a statically linked consumer from `pkg-config --static` and from
# CMake. Without cmake those checks are skips (scripts/deps.sh --test installs it).
set -u
build=$1
src=$2
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
no() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if meson install -C "$build" --destdir "$tmp/stage" --no-rebuild --quiet >"$tmp/install.log" 2>&1; then
  ok "meson install"
else
  cat "$tmp/install.log" | sed 's/^/# /'
  no "meson install"
  echo "1..$n"; exit 1
fi
pc=$(find "$tmp/stage" -name cltensor.pc | head -n 1)
if [ -n "$pc" ]; then ok "cltensor.pc installed"; else no "cltensor.pc installed"; echo "1..$n"; exit 1; fi
pcdir=$(dirname "$pc")
prefix=$(cd "$pcdir/../.." && pwd)
# The .pc says prefix=/usr/local; point it at the staging folder.
case "$pcdir" in */lib/*/pkgconfig) prefix=$(cd "$pcdir/../../.." && pwd) ;; esac
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$prefix" --cflags --libs cltensor)
cat >"$tmp/prog.c" <<'PROG'
#include <stdio.h>
#include <cltensor/cltensor.h>
int main(void) {
  int n = 0;
  if (ct_device_count(&n) != CT_OK) { fprintf(stderr, "%s\n", ct_last_error()); return 1; }
  for (int i = 0; i < n; i++) {
    ct_device *d;
    if (ct_device_get(&d, i) == CT_OK) printf("%s %s\n", ct_device_spec(d), ct_device_properties(d)->name);
  }
  ct_shutdown();
  return 0;
}
PROG
if cc -std=c11 -Wall -Wextra -pedantic -Werror "$tmp/prog.c" -o "$tmp/prog" $flags 2>"$tmp/cc.log"; then
  ok "a user program builds with pkg-config cltensor"
else
  sed 's/^/# /' "$tmp/cc.log"; no "a user program builds with pkg-config cltensor"
fi
libdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$prefix" --variable=libdir cltensor)
if LD_LIBRARY_PATH="$libdir" "$tmp/prog" >"$tmp/prog.out" 2>&1 && grep -q 'cpu:0' "$tmp/prog.out"; then
  ok "it lists the devices"
else
  sed 's/^/# /' "$tmp/prog.out"; no "it lists the devices"
fi
[ -x "$prefix/bin/cltensor-info" ] && ok "cltensor-info installed to bin/" || no "cltensor-info installed to bin/"
[ -f "$prefix/include/cltensor/cltensor.h" ] && ok "headers installed under include/cltensor/" || no "headers installed"
so=$(find "$libdir" -name 'libcltensor.so.*' | head -n 1)
bad=$(nm -D --defined-only "$so" | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^ct_' | grep -v '^_' || true)
if [ -z "$bad" ]; then ok "only ct_ symbols are exported"; else echo "$bad" | sed 's/^/# /'; no "only ct_ symbols are exported"; fi
soname=$(readelf -d "$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
case "$soname" in libcltensor.so.*) ok "versioned soname $soname" ;; *) no "versioned soname ($soname)" ;; esac
[ -f "$prefix/share/man/man3/cltensor.3" ] && ok "cltensor(3) installed under share/man/" || no "cltensor(3) installed"
[ -f "$prefix/share/man/man1/cltensor-info.1" ] && ok "cltensor-info(1) installed under share/man/" ||
  no "cltensor-info(1) installed"

# A program's link against libcltensor: "shared" when it needs libcltensor.so.0 at run time,
# "static" when it carries the library.
linkage() { if readelf -d "$1" | grep -q 'NEEDED.*libcltensor\.so'; then echo shared; else echo static; fi; }
# Runs the README example ($1) and checks it printed exp of the transposed tensor.
runs_readme() { LD_LIBRARY_PATH="$libdir" "$1" >"$tmp/readme.out" 2>&1 && grep -q '403.4288' "$tmp/readme.out"; }

# ---- CMake: find_package(cltensor) and cltensor::cltensor
cmakedir=$libdir/cmake/cltensor
if [ -f "$cmakedir/cltensorConfig.cmake" ] && [ -f "$cmakedir/cltensorConfigVersion.cmake" ]; then
  ok "CMake package installed in lib/.../cmake/cltensor/"
else
  no "CMake package installed in lib/.../cmake/cltensor/"
fi
# $1: build folder, $2...: more cmake arguments. The project refuses a wrong version itself.
cmake_build() {
  out=$1; shift
  cmake -S "$src/tests/install/cmake" -B "$out" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DCLTENSOR_EXAMPLE="$src/examples/readme.c" "$@" >"$tmp/cmake.log" 2>&1 &&
    cmake --build "$out" >>"$tmp/cmake.log" 2>&1
}
if command -v cmake >/dev/null 2>&1; then
  if cmake_build "$tmp/cmake-shared"; then
    ok "a CMake project builds the README example with find_package(cltensor)"
    if [ "$(linkage "$tmp/cmake-shared/readme")" = shared ] && runs_readme "$tmp/cmake-shared/readme"; then
      ok "it links the shared library and runs"
    else
      sed 's/^/# /' "$tmp/readme.out"; no "it links the shared library and runs"
    fi
  else
    sed 's/^/# /' "$tmp/cmake.log"; no "a CMake project builds the README example with find_package(cltensor)"
    no "it links the shared library and runs"
  fi
else
  skip "a CMake project builds the README example with find_package(cltensor)" "cmake not installed"
  skip "it links the shared library and runs" "cmake not installed"
fi

# ---- The static library
archive=$libdir/libcltensor.a
if [ -f "$archive" ]; then
  # Hidden visibility only shapes a shared object's dynamic table: inside a program every
  # global symbol of the archive meets the program's own, so all must carry the ct_ prefix
  # (ct__ for the internals).
  bad=$(nm -g --defined-only "$archive" 2>/dev/null | awk 'NF == 3 {print $3}' | grep -v '^ct_' | sort -u || true)
  if [ -z "$bad" ]; then ok "libcltensor.a defines only ct_ global symbols"
  else echo "$bad" | sed 's/^/# /'; no "libcltensor.a defines only ct_ global symbols"; fi
  # Beside libcltensor.so, -lcltensor finds the shared library; -l:libcltensor.a names the
  # archive (docs/PACKAGING.md gives this line).
  sflags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$prefix" --static --libs cltensor |
    sed 's/-lcltensor\( \|$\)/-l:libcltensor.a /')
  cflags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$prefix" --cflags cltensor)
  if cc -std=c11 -Wall -Wextra -pedantic -Werror $cflags "$src/examples/readme.c" -o "$tmp/readme-static" \
       $sflags 2>"$tmp/cc.log"; then
    ok "the README example links statically with pkg-config --static --libs"
    if [ "$(linkage "$tmp/readme-static")" = static ] && runs_readme "$tmp/readme-static"; then
      ok "it carries the library and runs"
    else
      sed 's/^/# /' "$tmp/readme.out"; no "it carries the library and runs"
    fi
  else
    sed 's/^/# /' "$tmp/cc.log"; no "the README example links statically with pkg-config --static --libs"
    no "it carries the library and runs"
  fi
  if command -v cmake >/dev/null 2>&1; then
    if cmake_build "$tmp/cmake-static" -Dcltensor_USE_STATIC_LIBS=ON; then
      ok "the CMake project links it with cltensor_USE_STATIC_LIBS=ON"
      if [ "$(linkage "$tmp/cmake-static/readme")" = static ] && runs_readme "$tmp/cmake-static/readme"; then
        ok "that program carries the library and runs"
      else
        sed 's/^/# /' "$tmp/readme.out"; no "that program carries the library and runs"
      fi
    else
      sed 's/^/# /' "$tmp/cmake.log"; no "the CMake project links it with cltensor_USE_STATIC_LIBS=ON"
      no "that program carries the library and runs"
    fi
  else
    skip "the CMake project links it with cltensor_USE_STATIC_LIBS=ON" "cmake not installed"
    skip "that program carries the library and runs" "cmake not installed"
  fi
else
  why="no libcltensor.a: the build is not -Ddefault_library=both or static"
  for t in "libcltensor.a defines only ct_ global symbols" \
           "the README example links statically with pkg-config --static --libs" \
           "it carries the library and runs" \
           "the CMake project links it with cltensor_USE_STATIC_LIBS=ON" \
           "that program carries the library and runs"; do
    skip "$t" "$why"
  done
fi
echo "1..$n"
exit $fail
