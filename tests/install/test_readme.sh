#!/bin/sh
# The C program in README.md must be examples/readme.c (which runs as a test), line for line.
set -u
src=$1
awk '/^```c$/ {on = 1; next} /^```$/ {if (on) exit} on' "$src/README.md" >"${TMPDIR:-/tmp}/readme-block.$$"
tail -n +2 "$src/examples/readme.c" | diff -u "${TMPDIR:-/tmp}/readme-block.$$" - >"${TMPDIR:-/tmp}/readme-diff.$$"
rc=$?
sed 's/^/# /' "${TMPDIR:-/tmp}/readme-diff.$$"
rm -f "${TMPDIR:-/tmp}/readme-block.$$" "${TMPDIR:-/tmp}/readme-diff.$$"
if [ $rc -eq 0 ]; then echo "ok 1 - README example matches examples/readme.c"; else echo "not ok 1 - README example differs from examples/readme.c"; fi
echo "1..1"
exit $rc
