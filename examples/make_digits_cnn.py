#!/usr/bin/env python3
# Makes examples/data/digits_cnn.safetensors for examples/digits_cnn.c: a small CNN trained with
# PyTorch on scikit-learn's handwritten digits, its weights, the test split, and PyTorch's test
# logits and accuracy, in one safetensors file (all f32, labels and predictions i64).
#
# Rerun (PyTorch from PyPI in a virtualenv; CPU only: about 2 CPU-minutes with the imports, so
# about a minute on 2 idle cores):
#
#   python3 -m venv venv && venv/bin/pip install torch numpy safetensors scikit-learn
#   venv/bin/python examples/make_digits_cnn.py [OUT]   (default examples/data/digits_cnn.safetensors)
#
# (On the project's build machine /work/venv is such a virtualenv.)
#
# Data: sklearn.datasets.load_digits (1797 8x8 images, pixel values 0..16, shipped inside
# scikit-learn), scaled to [0, 1] by /16, split with train_test_split(test_size=0.25,
# random_state=0, stratify=labels): 1347 training and 450 test images.
#
# Model (PyTorch's layouts: conv weight [out, in, kh, kw], linear weight [out, in]):
#   conv1 1->16 3x3 pad 1, bn1, relu                      [N, 16, 8, 8]
#   conv2 16->32 3x3 pad 1, bn2, relu, max_pool 2x2       [N, 32, 4, 4]
#   dropout(0.25) (identity in eval)
#   conv3 32->64 3x3 pad 1, bn3, relu                     [N, 64, 4, 4]
#   adaptive_avg_pool (1, 1), flatten                     [N, 64]
#   fc 64->10                                             [N, 10] logits
#
# Reproducible classes. Another correct f32 implementation rounds differently (summation
# order, FMA) by about 1e-6 relative on these logits; a test image whose two largest logits
# were that close could change class. The script prints and stores the smallest top-2 margin
# over the test split (metadata "min_margin"); it is checked to be above MIN_MARGIN, so every
# correct implementation predicts PyTorch's class for every test image.
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 0
EPOCHS = 30
BATCH = 64
MIN_MARGIN = 1e-3


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.drop = nn.Dropout(0.25)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.bn3 = nn.BatchNorm2d(64)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = self.drop(x)
        x = F.relu(self.bn3(self.conv3(x)))
        x = F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)
        return self.fc(x)


def numpy_forward(sd, x):
    """A second implementation from the saved tensors (float64), to check the layouts the C
    example relies on: the conv weight order, batch norm with the running statistics, the
    pooling windows, the flatten order."""
    def conv(x, w, b):
        n, c, h, wd = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2)  # n c 9 h w
        return np.einsum("nckhw,ock->nohw", cols, w.reshape(w.shape[0], c, 9)) + b[None, :, None, None]

    def bn(x, p):
        m, v, g, b = (sd[p + k] for k in (".running_mean", ".running_var", ".weight", ".bias"))
        return (x - m[None, :, None, None]) / np.sqrt(v[None, :, None, None] + 1e-5) * g[None, :, None, None] + b[None, :, None, None]

    relu = lambda t: np.maximum(t, 0)
    x = relu(bn(conv(x, sd["conv1.weight"], sd["conv1.bias"]), "bn1"))
    x = relu(bn(conv(x, sd["conv2.weight"], sd["conv2.bias"]), "bn2"))
    n, c, h, w = x.shape
    x = x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
    x = relu(bn(conv(x, sd["conv3.weight"], sd["conv3.bias"]), "bn3"))
    x = x.mean(axis=(2, 3))
    return x @ sd["fc.weight"].T + sd["fc.bias"]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits_cnn.safetensors")
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)

    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(SEED)
    for epoch in range(EPOCHS):
        model.train()
        order = torch.randperm(len(yt), generator=gen)
        total = 0.0
        for i in range(0, len(yt), BATCH):
            idx = order[i:i + BATCH]
            loss = F.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        if (epoch + 1) % 10 == 0:
            print("epoch %d: loss %.4f" % (epoch + 1, total / len(yt)), file=sys.stderr)

    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(x_test))
    pred = logits.argmax(dim=1)
    correct = int((pred.numpy() == y_test).sum())
    top2 = logits.topk(2, dim=1).values
    margins = top2[:, 0] - top2[:, 1]
    min_margin = float(margins.min())
    print("test accuracy (PyTorch f32): %d/%d = %.4f; smallest top-2 logit margin %.4g"
          % (correct, len(y_test), correct / len(y_test), min_margin), file=sys.stderr)
    if min_margin < MIN_MARGIN:
        sys.exit("a test image is too close to a decision boundary (margin %.3g); change SEED" % min_margin)

    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    ref = numpy_forward({k: v.double().numpy() for k, v in sd.items()}, x_test.astype(np.float64))
    err = np.abs(ref - logits.double().numpy()).max() / np.abs(ref).max()
    print("NumPy float64 re-implementation vs PyTorch: max relative difference %.3g" % err, file=sys.stderr)
    if err > 1e-5 or (ref.argmax(axis=1) != pred.numpy()).any():
        sys.exit("the NumPy re-implementation disagrees with PyTorch")

    tensors = dict(sd)
    tensors["test.x"] = torch.from_numpy(np.ascontiguousarray(x_test))
    tensors["test.y"] = torch.from_numpy(y_test)
    tensors["torch.logits"] = logits.contiguous()
    tensors["torch.pred"] = pred.contiguous()
    save_file(tensors, out, metadata={
        "description": "sklearn digits CNN: conv-bn-relu x2, max_pool 2, dropout, conv-bn-relu, adaptive_avg_pool 1x1, linear 64->10",
        "made_by": "examples/make_digits_cnn.py (PyTorch %s, seed %d)" % (torch.__version__, SEED),
        "torch_correct": str(correct),
        "test_count": str(len(y_test)),
        "torch_accuracy": "%.6f" % (correct / len(y_test)),
        "min_margin": "%.6g" % min_margin,
        "bn_eps": "1e-05",
    })
    print("wrote %s (%d bytes)" % (out, os.path.getsize(out)), file=sys.stderr)


if __name__ == "__main__":
    main()
