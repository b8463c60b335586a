#!/bin/sh
# README command 2: the whole test suite (what CI runs).
# Idempotent: reuses the build folders and rebuilds only what changed.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh --test
[ -f build-test/build.ninja ] || meson setup build-test -Dwerror=true
meson test -C build-test --print-errorlogs --num-processes 2
