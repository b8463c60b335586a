"""setuptools glue: the extensions are cltensor_build.py's cffi builder and cltensor._fast (its
fast_extension()); the version is the C library's (include/cltensor/version.h in the source tree,
else pkg-config's)."""
import os
import re
import subprocess
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cltensor_build  # noqa: E402


def version():
    header = os.path.join(HERE, "..", "include", "cltensor", "version.h")
    if os.path.exists(header):
        text = open(header, encoding="utf-8").read()
        return re.search(r'#define CT_VERSION_STRING "([^"]+)"', text).group(1)
    return subprocess.run(["pkg-config", "--modversion", "cltensor"], check=True, capture_output=True,
                          text=True).stdout.strip()


setup(version=version(), cffi_modules=["cltensor_build.py:ffibuilder"],
      ext_modules=[cltensor_build.fast_extension(os.path.join("cltensor", "_fast.c"))])
