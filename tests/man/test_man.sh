#!/bin/sh
# Usage: test_man.sh PAGE... [TOOL...]  (TAP)
# Each page must render with groff and with man-db's man without one warning, have a NAME
# section lexgrog can read (what mandb indexes and lintian's bad-whatis-entry checks), and
# pass `mandoc -Tlint` when mandoc is installed; for each TOOL, the page named after it must
# mention every long option of `TOOL --help`, so that a new option cannot be left out of it.
# A checker that is not installed is a skip (scripts/deps.sh --test installs them all).
set -u
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
no() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
have() { command -v "$1" >/dev/null 2>&1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Warnings name the line; keep the renderers' output stable across terminals.
export LC_ALL=C.UTF-8 MANWIDTH=80

pages=""
tools=""
for a in "$@"; do
  case "$a" in
    *.[1-8]) pages="$pages $a" ;;
    *) tools="$tools $a" ;;
  esac
done
[ -n "$pages" ] || { echo "Bail out! no man pages given"; exit 1; }

for p in $pages; do
  name=$(basename "$p")
  if have groff; then
    # -ww: every warning; -rCHECKSTYLE: the an macros' own style checks; -z: no output.
    groff -man -Tutf8 -ww -rCHECKSTYLE=10 -z "$p" >"$tmp/groff.log" 2>&1
    if [ ! -s "$tmp/groff.log" ]; then ok "$name: groff renders it without a warning"
    else sed 's/^/# /' "$tmp/groff.log"; no "$name: groff renders it without a warning"; fi
  else
    skip "$name: groff renders it without a warning" "groff not installed"
  fi
  if have man; then
    man --warnings -E UTF-8 -l "$p" >"$tmp/man.out" 2>"$tmp/man.log"
    if [ ! -s "$tmp/man.log" ] && [ -s "$tmp/man.out" ]; then ok "$name: man -l renders it without a warning"
    else sed 's/^/# /' "$tmp/man.log"; no "$name: man -l renders it without a warning"; fi
  else
    skip "$name: man -l renders it without a warning" "man-db not installed"
  fi
  if have lexgrog; then
    # lexgrog prints `FILE: "name - description"`; the name must be the page's own.
    stem=${name%.*}
    if lexgrog "$p" 2>&1 | grep -q "^$p: \"$stem - ."; then ok "$name: lexgrog reads its NAME line"
    else lexgrog "$p" 2>&1 | sed 's/^/# /'; no "$name: lexgrog reads its NAME line"; fi
  else
    skip "$name: lexgrog reads its NAME line" "man-db not installed"
  fi
  if have mandoc; then
    # -W warning: warnings and worse (style notes are left out: mandoc flags, e.g., a
    # hand-written date that is not today's, which is what a man page's date is).
    if mandoc -Tlint -W warning "$p" >"$tmp/mandoc.log" 2>&1; then ok "$name: mandoc -Tlint finds nothing"
    else sed 's/^/# /' "$tmp/mandoc.log"; no "$name: mandoc -Tlint finds nothing"; fi
  else
    skip "$name: mandoc -Tlint finds nothing" "mandoc not installed"
  fi
done

for t in $tools; do
  tname=$(basename "$t")
  page=""
  for p in $pages; do [ "$(basename "$p")" = "$tname.1" ] && page=$p; done
  if [ -z "$page" ]; then no "$tname has a man page"; continue; fi
  missing=""
  for opt in $("$t" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    # roff writes a minus as \- (a bare - may become a hyphen).
    esc=$(printf '%s' "$opt" | sed 's/-/\\\\-/g')
    grep -q -- "$esc" "$page" || missing="$missing $opt"
  done
  if [ -z "$missing" ]; then ok "$tname.1 documents every option of $tname --help"
  else echo "# not in $page:$missing"; no "$tname.1 documents every option of $tname --help"; fi
done
echo "1..$n"
exit $fail
