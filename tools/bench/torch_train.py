#!/usr/bin/env python3
"""PyTorch CPU's times for one training step of each example model (cltensor-bench's "train" group).

The same work as tools/bench/group_train.c, from the same committed fixtures: the digits CNN
(examples/make_digits_cnn.py's module, training mode with PyTorch's own dropout) on the first
batch of 64 training images with Adam (lr 3e-3), and the character GPT (examples/make_charlm.py's
module) on step 0's 32 windows of 64 tokens with AdamW (the fixture's lr and weight decay):
forward, cross entropy, zero_grad, backward, step, loss.item(). torch.set_num_threads(N) with
--threads N, else PyTorch's default. With --bench PATH it then runs `PATH --only train --json`
in the same sitting and prints, per figure, cltensor's median, PyTorch's median and the ratio
(PyTorch's time / cltensor's: above 1 means cltensor is faster). cltensor-bench runs
`torch_train.py --figure NAME [--threads 1]` before and after its own figure when
$CLTENSOR_BENCH_PYTHON names a Python with PyTorch; that prints one line, `torch_train NAME
median_ms=<m> min_ms=<a> max_ms=<b> threads=<t>`.

  /work/venv/bin/python tools/bench/torch_train.py [--bench build/tools/bench/cltensor-bench]
      [--device SPEC] [--runs N] [--threads N] [--figure digits_cnn_train_step|charlm_train_step]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_charlm  # noqa: E402
import make_digits_cnn  # noqa: E402
from torch_models import run_bench, time_ms  # noqa: E402


def digits_step(data):
    f = load_file(os.path.join(data, "train_digits.safetensors"))
    model = make_digits_cnn.DigitsCNN()
    model.load_state_dict({k: v for k, v in f.items() if not k.startswith(("train.", "test.", "torch.", "order"))},
                          strict=False)
    model.train()
    idx = f["order"][0, :64].long()
    x = f["train.x"][idx].float() / 16.0
    y = f["train.y"][idx]
    opt = torch.optim.Adam(model.parameters(), lr=float(3e-3))

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def charlm_step(data):
    f = load_file(os.path.join(data, "train_charlm.safetensors"))
    text, starts = f["text"].long(), f["starts"][0].long()
    model = make_charlm.CharGPT(int(f["wte.weight"].shape[0]))
    model.load_state_dict({k: v for k, v in f.items() if k in make_charlm.weight_names()})
    model.train()
    t = make_charlm.CONTEXT
    xb = torch.stack([text[s:s + t] for s in starts])
    yb = torch.stack([text[s + 1:s + t + 1] for s in starts])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step():
        loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", help="cltensor-bench to run in the same sitting")
    ap.add_argument("--device", help="cltensor-bench's --device")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (default: PyTorch's)")
    ap.add_argument("--data", default=os.path.join(ROOT, "examples", "data"))
    ap.add_argument("--figure", choices=["digits_cnn_train_step", "charlm_train_step"],
                    help="time this one and print it as one line, for cltensor-bench")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    makers = {"digits_cnn_train_step": digits_step, "charlm_train_step": charlm_step}
    if args.figure:
        med, lo, hi = time_ms(makers[args.figure](args.data), args.runs)
        print("torch_train %s median_ms=%.6g min_ms=%.6g max_ms=%.6g threads=%d"
              % (args.figure, med, lo, hi, torch.get_num_threads()))
        return 0
    torch_ms = {name: time_ms(make(args.data), args.runs) for name, make in makers.items()}
    print("PyTorch %s CPU, %d threads:" % (torch.__version__, torch.get_num_threads()))
    for name, (med, lo, hi) in torch_ms.items():
        print("  %-22s %9.3f ms (min %.3f, max %.3f)" % (name, med, lo, hi))
    if not args.bench:
        return 0
    return run_bench(args, "train", torch_ms)


if __name__ == "__main__":
    sys.exit(main())
