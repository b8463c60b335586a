"""setuptools glue: the extension is cltensor_build.py's cffi builder; the version is the C
library's (include/cltensor/version.h in the source tree, else pkg-config's)."""
import os
import re
import subprocess

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    header = os.path.join(HERE, "..", "include", "cltensor", "version.h")
    if os.path.exists(header):
        text = open(header, encoding="utf-8").read()
        return re.search(r'#define CT_VERSION_STRING "([^"]+)"', text).group(1)
    return subprocess.run(["pkg-config", "--modversion", "cltensor"], check=True, capture_output=True,
                          text=True).stdout.strip()


setup(version=version(), cffi_modules=["cltensor_build.py:ffibuilder"])
