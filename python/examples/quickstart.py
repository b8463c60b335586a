#!/usr/bin/env python3
"""The seed scenario in Python, as a PyTorch user writes it: pick the GPU or fall back to the
CPU, move a model there, train it, bring the results back.

    python3 python/examples/quickstart.py [--steps N]

A small MLP learns to tell three interleaved spirals apart (data made with NumPy, so nothing
is downloaded). It prints the device, the loss every 50 steps and the final accuracy."""
import argparse

import numpy as np

import cltensor
import cltensor.nn as nn
import cltensor.nn.functional as F


def spirals(n_per_class, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.0, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, 0.2, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


class MLP(nn.Module):
    def __init__(self, hidden=64, classes=3):
        super().__init__()
        self.fc1 = nn.Linear(2, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.out(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()

    # The GPU when there is one, else the CPU (as `"cuda" if torch.cuda.is_available() else "cpu"`).
    has_gpu = any(d.type == "gpu" for d in cltensor.devices())
    device = cltensor.device("gpu" if has_gpu else "cpu")
    print("device:", device, "-", device.name)

    cltensor.manual_seed(0)
    x_np, y_np = spirals(200)
    x = cltensor.tensor(x_np, device=device)
    y = cltensor.tensor(y_np, device=device)

    model = MLP().to(device)
    optimizer = cltensor.optim.Adam(model.parameters(), lr=1e-2)

    model.train()
    for step in range(args.steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 50 == 0 or step == args.steps - 1:
            print("step %4d  loss %.4f" % (step, loss.item()))

    model.eval()
    with cltensor.no_grad():
        pred = model(x).argmax(dim=1)
    pred_np = pred.cpu().numpy()  # results back in host memory, as a NumPy array
    accuracy = float((pred_np == y_np).mean())
    print("accuracy: %.3f" % accuracy)
    return 0 if accuracy > 0.9 or args.steps < 300 else 1


if __name__ == "__main__":
    raise SystemExit(main())
