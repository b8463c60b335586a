#!/bin/sh
# Runs an example program on the second device (its last argument is the spec cpu:1). Where the
# implementation has one device (rusticl's llvmpipe: POCL_DEVICES gives PoCL two), the program
# fails to find it: that is a skip (exit 77, meson's), with the reason and the device list on
# stderr, not a failure. Any other failure stays a failure.
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$@" 2>"$err"
rc=$?
cat "$err" >&2
if [ $rc -ne 0 ] && grep -q "no device matches 'cpu:1'" "$err"; then
  echo "skip: needs a second device: $(sed -n 's/.*(available: \(.*\))$/\1/p' "$err" | head -n 1) has none" >&2
  exit 77
fi
exit $rc
