#!/usr/bin/env python3
"""Builds the extensions against a meson build folder and runs the package's pytest suite.

    python3 python/run_tests.py BUILD_DIR [pytest arguments]

What `meson test --suite python` runs. The package's sources are copied to BUILD_DIR/python,
the extensions are compiled there (the cffi module in API mode and cltensor._fast, against
BUILD_DIR/src/libcltensor.so and the source tree's headers; recompiled only when their C source
changes), and pytest runs python/tests with that folder first on sys.path. Nothing is installed.

The interpreter: $CLTENSOR_PYTHON when set, else this one, else /usr/bin/python3 -- the first
that imports cffi, pytest and numpy (Debian: python3-cffi python3-pytest python3-numpy; or a venv
with `pip install cffi pytest numpy`). Without one the test is skipped (exit 77) and says why.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NEEDED = "import cffi, pytest, numpy"


def pick_python():
    for py in (os.environ.get("CLTENSOR_PYTHON"), sys.executable, "/usr/bin/python3"):
        if py and shutil.which(py) and subprocess.run([py, "-c", NEEDED], capture_output=True).returncode == 0:
            return py
    return None


def build_fast(out):
    """Compiles cltensor._fast (cltensor/_fast.c) into out/cltensor, again only when its source or
    the library flags change."""
    import glob
    import cltensor_build
    from setuptools import Distribution
    from setuptools.command.build_ext import build_ext
    ext = cltensor_build.fast_extension()
    with open(ext.sources[0], encoding="utf-8") as f:
        key = f.read() + repr(cltensor_build.library_kwargs())
    stamp = os.path.join(out, "_fast.stamp")
    if glob.glob(os.path.join(out, "cltensor", "_fast.*.so")) and os.path.exists(stamp) \
            and open(stamp, encoding="utf-8").read() == key:
        return
    cmd = build_ext(Distribution({"ext_modules": [ext]}))
    cmd.build_lib, cmd.build_temp, cmd.force = out, os.path.join(out, "_fast_build"), True
    cmd.ensure_finalized()
    cmd.run()
    with open(stamp, "w", encoding="utf-8") as f:
        f.write(key)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    py = pick_python()
    if py is None:
        print("skipped: no Python with cffi, pytest and numpy (set CLTENSOR_PYTHON, or install "
              "python3-cffi python3-pytest python3-numpy)")
        return 77
    if os.path.abspath(py) != os.path.abspath(sys.executable) and not os.environ.get("CLTENSOR_RUN_TESTS_CHILD"):
        env = dict(os.environ, CLTENSOR_RUN_TESTS_CHILD="1")
        return subprocess.run([py, os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode
    out = os.path.join(build, "python")
    pkg = os.path.join(out, "cltensor")
    # A fresh copy of the package's Python files (the compiled module stays).
    for root, _, files in os.walk(os.path.join(HERE, "cltensor")):
        dst = os.path.join(pkg, os.path.relpath(root, os.path.join(HERE, "cltensor")))
        os.makedirs(dst, exist_ok=True)
        for f in files:
            if f.endswith((".py", ".h")):
                shutil.copy2(os.path.join(root, f), os.path.join(dst, f))
    os.environ["CLTENSOR_BUILD_DIR"] = build
    sys.path.insert(0, HERE)
    import cltensor_build
    # Compiled again only when the C source cffi generates (declarations, helpers, paths) changes.
    import glob
    ffi = cltensor_build.make_ffi()
    src = os.path.join(out, "_cltensor_cffi.c.next")
    ffi.emit_c_code(src)
    stamp = os.path.join(pkg, "_cltensor_cffi.c")  # where compile() writes it
    built = glob.glob(os.path.join(pkg, "_cltensor_cffi.*.so"))
    if not (built and os.path.exists(stamp) and open(stamp).read() == open(src).read()):
        ffi.compile(tmpdir=out, verbose=False)
    os.remove(src)
    build_fast(out)
    env = dict(os.environ, PYTHONPATH=out + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONDONTWRITEBYTECODE="1")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(HERE, "tests")]
    return subprocess.run(args + sys.argv[2:], env=env, cwd=out).returncode


if __name__ == "__main__":
    sys.exit(main())
