"""The cffi declarations are the public headers' (python/gen_cdef.py --check): no drift."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C preprocessor")
def test_cdef_matches_headers():
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "gen_cdef.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_public_function_is_bound():
    """Each CT_API function of the headers is reachable as cltensor._lib.<name>."""
    import re
    import cltensor
    include = os.path.join(HERE, "..", "..", "include", "cltensor")
    names = set()
    for f in os.listdir(include):
        if f == "deprecated.h":  # the old names, for one release: the package calls only the new
            continue
        text = open(os.path.join(include, f), encoding="utf-8").read()
        names.update(re.findall(r"CT_API[^;(]*?\b(ct_[a-z0-9_]+)\s*\(", text))
    assert len(names) > 300
    missing = sorted(n for n in names if not hasattr(cltensor._lib, n))
    assert not missing, missing
