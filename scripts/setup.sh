#!/bin/sh
# README command 1: install what is missing, configure, build, list the devices, run the demo.
# Idempotent: a second run only rebuilds what changed.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=release
ninja -C build
./build/tools/info/cltensor-info
if [ -x build/examples/walkthrough ]; then
  echo
  ./build/examples/walkthrough
fi
