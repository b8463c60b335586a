#!/usr/bin/env python3
# Makes tests/autograd/data/composite.safetensors for test_composite.c: inputs, parameters and
# PyTorch's gradients (f64) of a few composite functions that chain many differentiable ops, so
# that the formulas are checked together against an independent implementation, not only one by
# one against finite differences.
#
# Rerun (PyTorch from PyPI in a virtualenv; seconds):
#   python3 -m venv venv && venv/bin/pip install torch numpy safetensors
#   venv/bin/python tests/autograd/make_composite.py [OUT]
#
# Every tensor is stored as "<case>.<name>"; gradients as "<case>.grad.<name>"; the loss as
# "<case>.loss". Integer tensors (targets, indices) are i64. Everything else is f64, and the test
# computes in f64, so the only differences are summation order (about 1e-15 relative).
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
out = {}


def leaf(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).requires_grad_(True)


def record(case, loss, tensors, ints=None):
    loss.backward()
    out[case + ".loss"] = loss.detach().reshape(1).clone()
    for name, t in tensors.items():
        out[case + "." + name] = t.detach().clone()
        if t.requires_grad:
            out[case + ".grad." + name] = t.grad.detach().clone()
    for name, t in (ints or {}).items():
        out[case + "." + name] = t.clone()


# mlp: linear -> gelu (tanh) -> layer_norm -> linear -> cross_entropy (label smoothing, ignore_index)
x = leaf(4, 6)
w1, b1 = leaf(8, 6, scale=0.5), leaf(8)
lnw, lnb = leaf(8), leaf(8)
w2, b2 = leaf(5, 8, scale=0.5), leaf(5)
target = torch.tensor([1, 4, -100, 0])
h = F.gelu(F.linear(x, w1, b1), approximate="tanh")
h = F.layer_norm(h, (8,), lnw, lnb, 1e-5)
loss = F.cross_entropy(F.linear(h, w2, b2), target, ignore_index=-100, label_smoothing=0.1)
record("mlp", loss, dict(x=x, w1=w1, b1=b1, lnw=lnw, lnb=lnb, w2=w2, b2=b2), dict(target=target))

# cnn: conv2d -> batch_norm (training) -> relu -> max_pool -> flatten -> linear -> log_softmax -> nll (sum)
x = leaf(2, 1, 6, 6)
cw, cb = leaf(3, 1, 3, 3, scale=0.5), leaf(3)
bnw, bnb = leaf(3), leaf(3)
fw, fb = leaf(4, 27, scale=0.3), leaf(4)
target = torch.tensor([3, 1])
rm, rv = torch.zeros(3), torch.ones(3)
h = F.conv2d(x, cw, cb, stride=1, padding=1)
h = F.batch_norm(h, rm, rv, bnw, bnb, training=True, momentum=0.1, eps=1e-5)
h = F.max_pool2d(F.relu(h), 2, 2)
logits = F.linear(h.flatten(1), fw, fb)
loss = F.nll_loss(F.log_softmax(logits, dim=1), target, reduction="sum")
record("cnn", loss, dict(x=x, cw=cw, cb=cb, bnw=bnw, bnb=bnb, fw=fw, fb=fb), dict(target=target))

# attn: one causal self-attention block with two heads, a residual and an mse loss
x = leaf(2, 5, 8)
wq, wk, wv, wo = (leaf(8, 8, scale=0.4) for _ in range(4))
tgt = torch.randn(2, 5, 8)


def heads(t):
    return t.reshape(2, 5, 2, 4).transpose(1, 2)


q, k, v = heads(F.linear(x, wq)), heads(F.linear(x, wk)), heads(F.linear(x, wv))
a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
y = x + F.linear(a.transpose(1, 2).reshape(2, 5, 8), wo)
loss = F.mse_loss(y, tgt)
record("attn", loss, dict(x=x, wq=wq, wk=wk, wv=wv, wo=wo, tgt=tgt))

# misc: embedding, cat, index_select, cumsum, softmax, where, clamp, keepdim reductions, broadcasting
emb = leaf(7, 4)
idx = torch.tensor([[1, 3, 3], [6, 0, 1]])
p = leaf(3, 4)
e = F.embedding(idx, emb)                                  # [2, 3, 4]
c = torch.cat([e, p.unsqueeze(0).expand(2, 3, 4)], dim=1)  # [2, 6, 4]
sel = torch.tensor([5, 0, 2, 2])
s = torch.index_select(c, 1, sel)                          # [2, 4, 4]
s = torch.cumsum(s, dim=2) * torch.softmax(s, dim=-1)
s = torch.where(s > 0, s, 0.1 * s).clamp(-1.5, 2.0)
m = s.mean(dim=(0, 2), keepdim=True)                       # [1, 4, 1]
loss = ((s - m) ** 2).sum() + s.amax(dim=1).sum()
record("misc", loss, dict(emb=emb, p=p), dict(idx=idx, sel=sel))

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data", "composite.safetensors")
os.makedirs(os.path.dirname(path), exist_ok=True)
save_file({k: v.contiguous() for k, v in out.items()}, path)
print("wrote", path, len(out), "tensors")
