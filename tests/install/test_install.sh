#!/bin/sh
# A new user's view of the installed library: install into a staging folder, build a ten-line
# program with `cc prog.c $(pkg-config --cflags --libs cltensor)`, run it; and check that the
# shared library exports only the ct_ API.
set -u
build=$1
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
no() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
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
echo "1..$n"
exit $fail
