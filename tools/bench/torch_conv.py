#!/usr/bin/env python3
"""Times a conv2d in PyTorch on the CPU, for cltensor-bench's nn group (tools/bench/group_nn.c),
which runs it in the same sitting as its own figure when $CLTENSOR_BENCH_PYTHON names a Python
with PyTorch. Standalone:

    python tools/bench/torch_conv.py                # the ResNet layer of the nn group
    python tools/bench/torch_conv.py --shape 32,64,56,56 --cout 64 --k 3 --pad 1 --runs 9

PyTorch from PyPI in a virtualenv (pip install torch) is enough. Prints one line,
`torch_conv2d median_ms=<m> min_ms=<a> max_ms=<b> gflops=<g> threads=<t>`: the median of --runs
timed runs after a warm-up, each run repeating the conv until it lasts about --run-seconds,
with torch.set_num_threads() set to the machine's cores (os.cpu_count(), or --threads).
"""
import argparse
import os
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="32,64,56,56", help="N,C,H,W of x")
    ap.add_argument("--cout", type=int, default=64)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--pad", type=int, default=1)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--run-seconds", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    n, c, h, w = (int(v) for v in a.shape.split(","))
    g = torch.Generator().manual_seed(1)
    x = torch.rand(n, c, h, w, generator=g) * 2 - 1
    wt = (torch.rand(a.cout, c, a.k, a.k, generator=g) * 2 - 1) * 0.05
    b = torch.rand(a.cout, generator=g) * 0.1
    conv = lambda: torch.nn.functional.conv2d(x, wt, b, stride=a.stride, padding=a.pad)
    with torch.no_grad():
        y = conv()
        for _ in range(2):
            conv()
        t0 = time.perf_counter()
        conv()
        once = time.perf_counter() - t0
        reps = max(1, int(a.run_seconds / max(once, 1e-6)))
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            for _ in range(reps):
                conv()
            times.append((time.perf_counter() - t0) / reps)
    oh, ow = y.shape[2], y.shape[3]
    flops = 2.0 * n * a.cout * oh * ow * c * a.k * a.k
    med = statistics.median(times)
    print(f"torch_conv2d median_ms={med * 1e3:.3f} min_ms={min(times) * 1e3:.3f} max_ms={max(times) * 1e3:.3f} "
          f"gflops={flops / med / 1e9:.2f} threads={torch.get_num_threads()}")


if __name__ == "__main__":
    main()
