#!/usr/bin/python3
# Makes examples/data/mlp.safetensors for examples/mlp.c: a small MLP classifier trained with
# NumPy (Debian's python3-numpy; run with /usr/bin/python3, not a pyenv python without numpy),
# its weights, a test set and the accuracy NumPy gets on it, in one safetensors file.
#
#   /usr/bin/python3 examples/make_mlp_model.py [OUT]      (default examples/data/mlp.safetensors)
#
# Data: three interleaved 2-D spirals with noise (learnable, not linearly separable).
# Model: 2 -> 64 -> 64 -> 3, ReLU, weights in PyTorch's nn.Linear layout (weight [out, in],
# bias [out]), so mlp.c runs y = relu(x @ W1^T + b1) ... with ct_linear. Trained in float64
# with Adam on softmax cross-entropy, stored as float32.
#
# Reproducible accuracy. NumPy's float32 forward pass and cltensor's on any device round
# differently (summation order, FMA), by about 1e-5 on these logits. A test point whose two
# largest logits are closer than MARGIN could flip class between the two, so such points are
# left out of the test set (their count is in the metadata); for every point kept, any device
# must predict what NumPy predicts, and mlp.c checks that its accuracy equals NumPy's exactly.
import json
import os
import struct
import sys

import numpy as np

SEED = 7
CLASSES = 3
HIDDEN = 64
TRAIN_PER_CLASS = 1000
TEST_PER_CLASS = 1000
STEPS = 2000
MARGIN = 1e-3


def spirals(rng, per_class):
    xs, ys = [], []
    for c in range(CLASSES):
        r = rng.uniform(0.05, 1.0, per_class)
        theta = 4.0 * r + c * 2.0 * np.pi / CLASSES + rng.normal(0.0, 0.35, per_class)
        xs.append(np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1) + rng.normal(0.0, 0.04, (per_class, 2)))
        ys.append(np.full(per_class, c))
    x, y = np.concatenate(xs), np.concatenate(ys)
    order = rng.permutation(len(y))
    return x[order], y[order]


def forward(params, x, dtype):
    w1, b1, w2, b2, w3, b3 = (p.astype(dtype) for p in params)
    x = x.astype(dtype)
    h1 = np.maximum(x @ w1.T + b1, 0)
    h2 = np.maximum(h1 @ w2.T + b2, 0)
    return h1, h2, h2 @ w3.T + b3


def train(x, y, rng):
    def init(fan_out, fan_in):
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), (fan_out, fan_in)), np.zeros(fan_out)
    w1, b1 = init(HIDDEN, 2)
    w2, b2 = init(HIDDEN, HIDDEN)
    w3, b3 = init(CLASSES, HIDDEN)
    params = [w1, b1, w2, b2, w3, b3]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    onehot = np.eye(CLASSES)[y]
    lr, beta1, beta2, eps = 0.01, 0.9, 0.999, 1e-8
    for step in range(1, STEPS + 1):
        h1, h2, logits = forward(params, x, np.float64)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        g3 = (p - onehot) / len(y)
        g2 = (g3 @ params[4]) * (h2 > 0)
        g1 = (g2 @ params[2]) * (h1 > 0)
        grads = [g1.T @ x, g1.sum(0), g2.T @ h1, g2.sum(0), g3.T @ h2, g3.sum(0)]
        for i, g in enumerate(grads):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            params[i] -= lr * (m[i] / (1 - beta1**step)) / (np.sqrt(v[i] / (1 - beta2**step)) + eps)
        if step % 500 == 0:
            loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
            print("step %d: loss %.4f" % (step, loss), file=sys.stderr)
    return [p.astype(np.float32) for p in params]


def save_safetensors(path, tensors, metadata):
    """The safetensors layout (8-byte header length, JSON header, data), larger elements first."""
    order = sorted(tensors, key=lambda name: (-tensors[name].itemsize, name))
    names = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name in order:
        a = np.ascontiguousarray(tensors[name])
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    os.replace(tmp, path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data", "mlp.safetensors")
    rng = np.random.default_rng(SEED)
    x_train, y_train = spirals(rng, TRAIN_PER_CLASS)
    x_test, y_test = spirals(rng, TEST_PER_CLASS)
    params = train(x_train, y_train, rng)

    x_test = x_test.astype(np.float32)
    _, _, logits = forward(params, x_test, np.float32)
    top2 = np.sort(logits, axis=1)[:, -2:]
    keep = (top2[:, 1] - top2[:, 0]) >= MARGIN
    x_test, y_test, logits = x_test[keep], y_test[keep], logits[keep]
    correct = int((logits.argmax(axis=1) == y_test).sum())
    n = len(y_test)
    print("test accuracy (float32 NumPy): %d/%d = %.4f, %d ambiguous points left out"
          % (correct, n, correct / n, int((~keep).sum())), file=sys.stderr)

    names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
    tensors = dict(zip(names, params))
    tensors["test.x"] = x_test
    tensors["test.y"] = y_test.astype(np.int64)
    save_safetensors(out, tensors, {
        "description": "3-class 2-D spirals classifier: MLP 2-64-64-3 with ReLU, nn.Linear layout",
        "made_by": "examples/make_mlp_model.py (NumPy %s, seed %d)" % (np.__version__, SEED),
        "numpy_correct": str(correct),
        "test_count": str(n),
        "numpy_accuracy": "%.6f" % (correct / n),
        "excluded_ambiguous": str(int((~keep).sum())),
        "margin": repr(MARGIN),
    })


if __name__ == "__main__":
    main()
