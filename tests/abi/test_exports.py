#!/usr/bin/env python3
"""The shared library exports exactly the public API: the defined dynamic symbols of
libcltensor.so (nm -D --defined-only) are the ct_ functions declared with CT_API in
include/cltensor/*.h, nothing more (no ct__ internal, no symbol of a dependency) and nothing
less (no declared function missing). TAP output; a TAP skip ("1..0 # SKIP", exit 0) without nm
($NM names another).

  test_exports.py LIBRARY HEADER..."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts'))
import public_symbols  # noqa: E402


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    lib, headers = argv[0], argv[1:]
    nm_name = os.environ.get('NM') or 'nm'  # $NM as build tools take it: another nm, or none
    nm = shutil.which(nm_name)
    if not nm:
        # meson's TAP protocol takes a non-zero exit as an error, even 77: a TAP skip is the
        # plan "1..0 # SKIP" and exit 0.
        print('1..0 # SKIP %s not found' % nm_name)
        return 0
    out = subprocess.run([nm, '-D', '--defined-only', lib], check=True, capture_output=True, text=True).stdout
    exported = set()
    for line in out.splitlines():
        parts = line.split()
        # "<address> <type> <name>[@version]"; absolute version-node symbols (type A) are not code.
        if len(parts) >= 3 and parts[1] != 'A':
            exported.add(parts[2].split('@')[0])
    declared = set(public_symbols.symbols(headers))
    n = 0
    fail = False

    def check(ok, what, names):
        nonlocal n, fail
        n += 1
        print('%s %d - %s' % ('ok' if ok else 'not ok', n, what))
        for name in sorted(names):
            print('#   ' + name)
        fail |= not ok

    check(len(declared) > 100, 'the headers declare the public API (%d functions)' % len(declared), [])
    extra = exported - declared
    check(not extra, 'nothing but the declared API is exported (%d extra)' % len(extra), extra)
    missing = declared - exported
    check(not missing, 'every declared function is exported (%d missing)' % len(missing), missing)
    internal = [s for s in exported if s.startswith('ct__')]
    check(not internal, 'no ct__ internal is exported', internal)
    print('1..%d' % n)
    return 1 if fail else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
