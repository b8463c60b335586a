#!/usr/bin/env python3
"""Makes nn_ref.safetensors, PyTorch's results for the nn tests (tests/nn/test_conv.c,
test_pool.c, test_norm.c: the "torch" cases, whose parameters are repeated there).

Rerun (PyTorch from PyPI in a virtualenv: pip install torch safetensors numpy):
    python tests/nn/data/gen_nn.py
Seeded, so a rerun with the same PyTorch gives the same file."""
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

torch.manual_seed(14)
t = {}


def u(*shape, dtype=torch.float32):
    return (torch.rand(*shape) * 2 - 1).to(dtype)


# conv2d: groups, stride, padding, dilation, bias (the GEMM path: stride 2)
x, w, b = u(2, 6, 9, 8), u(4, 3, 3, 2), u(4)
t.update({"conv_a.x": x, "conv_a.w": w, "conv_a.b": b,
          "conv_a.y": F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)})
# a stride-1 3x3 (the blocked path on CPU devices)
x, w, b = u(2, 16, 7, 7), u(8, 16, 3, 3), u(8)
t.update({"conv_b.x": x, "conv_b.w": w, "conv_b.b": b, "conv_b.y": F.conv2d(x, w, b, padding=1)})
# depthwise, stride 2, no bias (the direct kernel)
x, w = u(2, 4, 6, 6), u(4, 1, 3, 3)
t.update({"conv_c.x": x, "conv_c.w": w, "conv_c.y": F.conv2d(x, w, None, stride=2, padding=1, groups=4)})
# conv1d
x, w, b = u(2, 4, 15), u(6, 2, 3), u(6)
t.update({"conv1d.x": x, "conv1d.w": w, "conv1d.b": b,
          "conv1d.y": F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2)})

# pooling
x = u(2, 3, 9, 9)
t.update({"pool.x": x, "pool.max": F.max_pool2d(x, 3, 2, 1), "pool.avg": F.avg_pool2d(x, 3, 2, 1),
          "pool.avg_k2": F.avg_pool2d(x, 2)})
x = u(2, 3, 7, 9)
t.update({"pool.ax": x, "pool.adaptive": F.adaptive_avg_pool2d(x, (3, 4))})

# layer_norm in bf16 (PyTorch's CPU computes in f32 and rounds once) and f32
x, w, b = u(4, 10, dtype=torch.bfloat16), u(10, dtype=torch.bfloat16), u(10, dtype=torch.bfloat16)
t.update({"ln_bf16.x": x, "ln_bf16.w": w, "ln_bf16.b": b, "ln_bf16.y": F.layer_norm(x, (10,), w, b, 1e-5)})
x, w, b = u(3, 4, 5) * 3, u(4, 5), u(4, 5)
t.update({"ln.x": x, "ln.w": w, "ln.b": b, "ln.y": F.layer_norm(x, (4, 5), w, b, 1e-5)})
# rms_norm with PyTorch's default eps
x, w = u(3, 8) * 2, u(8)
t.update({"rms.x": x, "rms.w": w, "rms.y": F.rms_norm(x, (8,), w)})

# batch_norm: training (the running stats updated in place) then eval
x, w, b = u(4, 3, 5, 5) * 2 + 0.5, u(3), u(3)
rm, rv = u(3) * 0.1, torch.rand(3) + 0.5
t.update({"bn.x": x, "bn.w": w, "bn.b": b, "bn.rm": rm.clone(), "bn.rv": rv.clone()})
t["bn.y_train"] = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
t.update({"bn.rm_after": rm.clone(), "bn.rv_after": rv.clone()})
t["bn.y_eval"] = F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-5)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_ref.safetensors")
save_file({k: v.contiguous() for k, v in t.items()}, out, metadata={"torch": torch.__version__})
print(f"wrote {out} ({len(t)} tensors, PyTorch {torch.__version__})")
