#!/usr/bin/env python3
"""PyTorch CPU's (and tinygrad's) times for cltensor-bench's "fusion" group, and the ratios.

The same work as tools/bench/group_fusion.c: the chain tanh(z * 0.5 + 1) * z on n f32 (figure
fusion.tanh_chain, z uniform in [-2, 2)) and GELU written out with the tanh formula, PyTorch's
NewGELU, 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3)))) (fusion.gelu_tanh, x in
[-4, 4)), n = 2^25 unless --n. PyTorch runs eagerly, op by op, as its users write these lines;
torch.set_num_threads(N) with --threads N, else PyTorch's default. --lib tinygrad_cl runs the
same expression in tinygrad on its OpenCL backend (the PoCL device cltensor uses here),
--lib tinygrad_cpu on its CPU backend; each call builds the lazy expression, realizes it and
waits for the device, as cltensor's figure does.

cltensor-bench runs `torch_fusion.py --figure NAME --n N --lib LIB [--threads 1]` before and
after its own figure when $CLTENSOR_BENCH_PYTHON names a Python with PyTorch; that prints one
line, `torch_fusion NAME median_ms=<m> min_ms=<a> max_ms=<b> threads=<t> lib=<lib>`. Without
--figure it prints PyTorch's times (one thread and the default) and tinygrad's, when installed;
with --bench PATH it then runs `PATH --only fusion --json` in the same sitting and prints, per
figure, cltensor's median and PyTorch's / cltensor's time.

  /work/venv/bin/python tools/bench/torch_fusion.py [--bench build/tools/bench/cltensor-bench]
      [--device SPEC] [--runs N] [--n N] [--threads N] [--lib torch|tinygrad_cl|tinygrad_cpu]
      [--figure fusion.tanh_chain|fusion.gelu_tanh]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FIGURES = ("fusion.tanh_chain", "fusion.gelu_tanh")
K = math.sqrt(2.0 / math.pi)


def inputs(name, n):
    """The figure's input as float32 NumPy data (a fixed seed; the range as group_fusion.c's)."""
    import numpy as np
    lo, hi = (-2.0, 2.0) if name == "fusion.tanh_chain" else (-4.0, 4.0)
    return np.random.default_rng(131).uniform(lo, hi, n).astype(np.float32)


def torch_work(name, data):
    import torch
    x = torch.from_numpy(data)
    if name == "fusion.tanh_chain":
        return lambda: torch.tanh(x * 0.5 + 1) * x
    return lambda: 0.5 * x * (1.0 + torch.tanh(K * (x + 0.044715 * torch.pow(x, 3.0))))


def tinygrad_work(name, data, backend):
    from tinygrad import Device, Tensor
    x = Tensor(data, device=backend).realize()
    dev = Device[backend]

    def chain():
        if name == "fusion.tanh_chain":
            y = (x * 0.5 + 1).tanh() * x
        else:
            y = 0.5 * x * (1.0 + (K * (x + 0.044715 * x.pow(3.0))).tanh())
        y.realize()
        dev.synchronize()
        return y
    return chain


def work(name, lib, n):
    data = inputs(name, n)
    if lib == "torch":
        return torch_work(name, data)
    return tinygrad_work(name, data, "CL" if lib == "tinygrad_cl" else "CPU")


def threads_now(lib):
    if lib != "torch":
        return 0
    import torch
    return torch.get_num_threads()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", help="cltensor-bench to run in the same sitting")
    ap.add_argument("--device", help="cltensor-bench's --device")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--n", type=int, default=1 << 25, help="elements (default 2^25)")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (default: PyTorch's)")
    ap.add_argument("--lib", default="torch", choices=["torch", "tinygrad_cl", "tinygrad_cpu"])
    ap.add_argument("--data", help="ignored (cltensor-bench passes its fixtures' folder)")
    ap.add_argument("--figure", choices=FIGURES, help="time this one and print it as one line, for cltensor-bench")
    args = ap.parse_args()
    from torch_models import run_bench, time_ms
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    if args.figure:
        med, lo, hi = time_ms(work(args.figure, args.lib, args.n), args.runs)
        print("torch_fusion %s median_ms=%.6g min_ms=%.6g max_ms=%.6g threads=%d lib=%s"
              % (args.figure, med, lo, hi, threads_now(args.lib), args.lib))
        return 0
    import torch
    torch_ms = {}
    for threads in (1, torch.get_num_threads() if not args.threads else args.threads):
        torch.set_num_threads(threads)
        for name in FIGURES:
            med, lo, hi = time_ms(work(name, "torch", args.n), args.runs)
            print("PyTorch %s CPU, %d thread(s): %-18s %9.3f ms (min %.3f, max %.3f)"
                  % (torch.__version__, threads, name, med, lo, hi))
            torch_ms[name] = (med, lo, hi)
    for lib in ("tinygrad_cl", "tinygrad_cpu"):
        try:
            med, lo, hi = time_ms(work(FIGURES[0], lib, args.n), args.runs)
        except ImportError as e:
            print("%s: not measured (%s)" % (lib, e))
            break
        print("%-12s %-18s %9.3f ms (min %.3f, max %.3f)" % (lib, FIGURES[0], med, lo, hi))
    if not args.bench:
        return 0
    return run_bench(args, "fusion", torch_ms)


if __name__ == "__main__":
    sys.exit(main())
