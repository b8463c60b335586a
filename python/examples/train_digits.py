#!/usr/bin/env python3
"""examples/train_digits.c in Python, step for step: trains the digits CNN from PyTorch's initial
weights with Adam and checks the losses against PyTorch's.

    python3 python/examples/train_digits.py [FIXTURE] [--device SPEC] [--epochs N | --steps N]
                                            [--check] [--quiet]

FIXTURE (default examples/data/train_digits.safetensors, made by examples/train_digits.py): the
initial weights, the training and test splits, the batch order of every epoch and PyTorch's
losses. As the C program: batches of 64 in the stored order, cross entropy, Adam (the fixture's
lr), batch norm in training mode, dropout masks from cltensor.manual_seed(seed) (the same draws
as the C program's, so the losses match it as well as PyTorch's), one line per epoch: the mean
training loss, the test accuracy (eval mode) and the training examples per second over the
steps' time (what the C program prints, for python/bench/train_digits.py to compare).

  --check   compares each of the first check_steps losses (or --steps N) with PyTorch's, with the
            C program's limits (1e-4 relative, or 4 times the spread of PyTorch's own runs up to
            that step); exits 1 on a mismatch
The device is --device SPEC, else $CLTENSOR_DEVICE or the default."""
import argparse
import os
import sys
import time

import numpy as np

import cltensor
import cltensor.nn as nn
import cltensor.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FIXTURE = os.path.join(HERE, "..", "..", "examples", "data", "train_digits.safetensors")


class DigitsCNN(nn.Module):
    """make_digits_cnn.py's DigitsCNN (examples/digits_cnn_model.c), children in its order."""

    def __init__(self, eps, device):
        super().__init__()
        for i, (cin, cout) in enumerate(((1, 16), (16, 32), (32, 64)), 1):
            setattr(self, "conv%d" % i, nn.Conv2d(cin, cout, 3, padding=1, device=device))
            setattr(self, "bn%d" % i, nn.BatchNorm2d(cout, eps=eps, momentum=0.1, device=device))
            if i == 2:
                self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(64, 10, device=device)

    def forward(self, x):
        a1 = F.relu(self.bn1(self.conv1(x)))
        a2 = F.relu(self.bn2(self.conv2(a1)))
        d2 = self.drop(F.max_pool2d(a2, 2))
        a3 = F.relu(self.bn3(self.conv3(d2)))
        g = F.adaptive_avg_pool2d(a3, (1, 1))
        return self.fc(g.view(g.shape[0], g.shape[1]))


class Trainer:
    def __init__(self, fix, meta, device):
        self.batch, self.seed, self.epochs = int(meta["batch"]), int(meta["seed"]), int(meta["epochs"])
        self.model = DigitsCNN(float(meta["bn_eps"]), device)
        self.model.load_state_dict({k: fix[k] for k in self.model.state_dict()})
        self.model.train()
        # PyTorch's Adam defaults: betas (0.9, 0.999), eps 1e-8, no weight decay.
        self.opt = cltensor.optim.Adam(self.model.parameters(), lr=float(meta["lr"]))
        self.x, self.tx = (fix[k].to(cltensor.float32) * (1.0 / 16.0) for k in ("train.x", "test.x"))  # exact
        self.y, self.ty = fix["train.y"], fix["test.y"]
        self.n = self.y.shape[0]
        self.order = fix["order"].numpy().astype(np.int64).reshape(-1)
        self.steps_per_epoch = (self.n + self.batch - 1) // self.batch
        self.step = 0
        cltensor.manual_seed(self.seed)

    def train_step(self):
        """One step: forward on batch self.step, cross entropy, backward, Adam. Returns the loss
        and the batch size."""
        e, b = (self.step // self.steps_per_epoch) % self.epochs, self.step % self.steps_per_epoch
        lo = b * self.batch
        hi = min(lo + self.batch, self.n)
        ix = cltensor.tensor(self.order[e * self.n + lo:e * self.n + hi], device=self.x.device)
        xb = cltensor.index_select(self.x, 0, ix)
        yb = cltensor.index_select(self.y, 0, ix)
        logits = self.model(xb)
        loss = F.cross_entropy(logits, yb)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        value = loss.item()
        self.step += 1
        return value, hi - lo

    def test_accuracy(self):
        self.model.eval()
        with cltensor.no_grad():
            pred = self.model(self.tx).argmax(1)
            correct = (pred == self.ty).sum(0).item()
        self.model.train()
        return correct / self.ty.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixture", nargs="?", default=DEFAULT_FIXTURE)
    ap.add_argument("--device")
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    dev = cltensor.device(args.device) if args.device else cltensor.default_device()
    print("device: %s (%s)" % (dev, dev.name))
    # f64 entries (PyTorch's f64 losses) as f32 where the device has no fp64, as the C program.
    wide = cltensor.float64 if dev.properties["fp64"] else cltensor.float32
    fix = cltensor.safetensors.load_file(args.fixture, device=dev, cast=(cltensor.float64, wide))
    meta = cltensor.safetensors.load_metadata(args.fixture)
    t = Trainer(fix, meta, dev)
    check_steps = int(meta["check_steps"])
    if args.steps is not None:
        until = args.steps
    elif args.epochs is not None:
        until = args.epochs * t.steps_per_epoch
    elif args.check:
        until = check_steps
    else:
        until = t.epochs * t.steps_per_epoch
    if args.check:
        until = min(until, check_steps)
        # PyTorch's losses and each step's relative limit (examples/train_digits.py's tolerances())
        losses, tol = (fix[k].numpy().astype(np.float64) for k in ("torch.losses", "torch.tol"))
    print("train_digits: %d training images, batch %d, %d steps per epoch; steps 0 to %d"
          % (t.n, t.batch, t.steps_per_epoch, until))
    mismatches = 0
    ep_loss, ep_s, ep_count = 0.0, 0.0, 0
    while t.step < until:
        s = t.step
        t0 = time.perf_counter()
        loss, count = t.train_step()
        ep_s += time.perf_counter() - t0
        if args.check and s < check_steps:
            rel = abs(loss - losses[s]) / abs(losses[s])
            ok = rel <= tol[s]
            mismatches += not ok
            if not args.quiet or not ok:
                print("train_digits: step %3d: loss %.7f, PyTorch %.7f, relative difference %.2e (limit %.0e)%s"
                      % (s, loss, losses[s], rel, tol[s], "" if ok else "  MISMATCH"))
        ep_loss += loss * count
        ep_count += count
        if t.step % t.steps_per_epoch == 0 or t.step == until:
            print("epoch %d%s (step %d): loss %.4f, test accuracy %.2f%%, %.0f examples/s"
                  % ((t.step - 1) // t.steps_per_epoch + 1, " (partial)" if t.step % t.steps_per_epoch else "",
                     t.step, ep_loss / ep_count, 100 * t.test_accuracy(), ep_count / ep_s), flush=True)
            ep_loss, ep_s, ep_count = 0.0, 0.0, 0
    if args.check:
        print("train_digits: %d mismatches with PyTorch's losses" % mismatches)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
