#!/usr/bin/env python3
"""Figure of issue #32: a 1024-element f32 add called from Python, against the same from C (and
from PyTorch, when a Python with torch is given), in one sitting on one device.

    CLTENSOR_BUILD_DIR=build python3 python/bench/small_op.py [--torch-python /path/to/python]

(the package importable, e.g. PYTHONPATH=build/python after python/run_tests.py). Two figures,
microseconds per iteration, median of 7 runs:
  dispatch      c = a + b; del c   N times, then synchronize   (what a call costs)
  dispatch cpu  the same loop's CPU time on the calling thread (time.thread_time,
                CLOCK_THREAD_CPUTIME_ID), without the synchronize: what the call costs the
                caller, much less exposed than wall time to other processes on a loaded machine
  roundtrip     c = a + b; c.numpy()                          (a result read every time)
Ratios are against C's figure of the same column. The cltensor side runs under this interpreter
(the one the extension was built for, e.g. /usr/bin/python3 after run_tests.py); PyTorch under
--torch-python (e.g. /work/venv/bin/python, whose python has torch but no cffi).
The C program is python/bench/small_op.c, compiled here against CLTENSOR_BUILD_DIR (or
pkg-config's cltensor). Timings are figures for docs, never test assertions."""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ITERS = 5000

PY = r"""
import statistics, sys, time
ITERS = int(sys.argv[1])
def bench(add, sync, read, a, b):
    out = [[], [], []]
    for r in range(8):
        t0 = time.perf_counter()
        c0 = time.thread_time()
        for _ in range(ITERS):
            c = add(a, b)
            del c
        c1 = time.thread_time()
        sync()
        t1 = time.perf_counter()
        for _ in range(ITERS // 4):
            c = add(a, b)
            read(c)
            del c
        t2 = time.perf_counter()
        if r:
            out[0].append((t1 - t0) / ITERS * 1e6)
            out[1].append((c1 - c0) / ITERS * 1e6)
            out[2].append((t2 - t1) / (ITERS // 4) * 1e6)
    print("dispatch %.3f\ndispatch_cpu %.3f\nroundtrip %.3f" % tuple(statistics.median(o) for o in out))
"""

CLTENSOR = PY + r"""
import operator, numpy as np, cltensor
a = cltensor.tensor(np.arange(1024, dtype=np.float32)); b = cltensor.tensor(np.arange(1024, dtype=np.float32))
bench(operator.add, cltensor.synchronize, lambda c: c.numpy(), a, b)
"""

TORCH = PY + r"""
import operator, torch
torch.set_num_threads(1)
a = torch.arange(1024, dtype=torch.float32); b = torch.arange(1024, dtype=torch.float32)
bench(operator.add, lambda: None, lambda c: c.numpy(), a, b)
"""


def parse(out):
    return {k: float(v) for k, v in (line.split() for line in out.strip().splitlines())}


def run_c(tmp):
    exe = os.path.join(tmp, "small_op")
    build = os.environ.get("CLTENSOR_BUILD_DIR")
    if build:
        lib = os.path.join(os.path.abspath(build), "src")
        flags = ["-I", os.path.join(HERE, "..", "..", "include"), "-L", lib, "-Wl,-rpath," + lib, "-lcltensor"]
    else:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "cltensor"], capture_output=True, text=True,
                               check=True).stdout.split()
    subprocess.run(["cc", "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", os.path.join(HERE, "small_op.c"), "-o",
                    exe] + flags, check=True)
    return parse(subprocess.run([exe, str(ITERS)], capture_output=True, text=True, check=True).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-python", help="a Python with torch, for PyTorch's figures")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = {"C (libcltensor)": run_c(tmp)}
    rows["Python (cltensor)"] = parse(subprocess.run([sys.executable, "-c", CLTENSOR, str(ITERS)],
                                                     capture_output=True, text=True, check=True).stdout)
    if args.torch_python:
        rows["Python (PyTorch CPU, 1 thread)"] = parse(subprocess.run(
            [args.torch_python, "-c", TORCH, str(ITERS)], capture_output=True, text=True, check=True).stdout)
    c = rows["C (libcltensor)"]
    cols = ("dispatch", "dispatch_cpu", "roundtrip")
    print("%-32s" % "1024-element f32 add, us/iter" + "".join("%17s" % k for k in cols))
    for name, r in rows.items():
        print("%-32s" % name + "".join("%8.2f (%5.2fx)" % (r[k], r[k] / c[k]) for k in cols))


if __name__ == "__main__":
    main()
