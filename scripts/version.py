#!/usr/bin/env python3
"""Prints the version defined in include/cltensor/version.h (the single source of truth)."""
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
text = open(os.path.join(here, '..', 'include', 'cltensor', 'version.h')).read()
parts = [re.search(r'#define CT_VERSION_%s (\d+)' % k, text).group(1) for k in ('MAJOR', 'MINOR', 'PATCH')]
sys.stdout.write('.'.join(parts))
