#!/usr/bin/env python3
"""Makes data/utils_ref.safetensors: PyTorch's 1-D pools for tests/tensor/test_utils.c.

Run: /work/venv/bin/python tests/tensor/make_utils_fixtures.py   (PyTorch CPU, f32; 2.15 made
the committed file)

Contents (f32):
  x [2, 3, 11], x2 [3, 11] (unbatched; ties on purpose: values rounded to halves)
  <case>.y                 F.max_pool1d / F.avg_pool1d of x (x2 for the *_u cases) with the
                           arguments in CASES (which the C test repeats)
  <case>.gy, <case>.gx     a random output gradient and x's gradient for it
"""
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

# name: (max?, kernel, stride (None: the kernel), padding, dilation, ceil_mode, count_include_pad, unbatched)
CASES = {
    "max_k2": (True, 2, None, 0, 1, False, True, False),
    "max_k3s2p1d2_ceil": (True, 3, 2, 1, 2, True, True, False),
    "max_k4s3p2_ceil": (True, 4, 3, 2, 1, True, True, False),
    "max_k3s1p1d3": (True, 3, 1, 1, 3, False, True, False),
    "max_k2s2_ceil_u": (True, 2, 2, 0, 1, True, True, True),
    "avg_k2": (False, 2, None, 0, 1, False, True, False),
    "avg_k3s2p1_ceil_cip": (False, 3, 2, 1, 1, True, True, False),
    "avg_k3s2p1_ceil_excl": (False, 3, 2, 1, 1, True, False, False),
    "avg_k4s3p2_excl": (False, 4, 3, 2, 1, False, False, False),
    "avg_k4s3p2_ceil_cip_u": (False, 4, 3, 2, 1, True, True, True),
}


def main():
    torch.manual_seed(30)
    x = (torch.randn(2, 3, 11) * 2).round() / 2
    x2 = (torch.randn(3, 11) * 2).round() / 2
    out = {"x": x, "x2": x2}
    for name, (is_max, k, s, p, d, ceil, cip, unb) in CASES.items():
        xi = (x2 if unb else x).clone().requires_grad_(True)
        if is_max:
            y = F.max_pool1d(xi, k, s, p, d, ceil_mode=ceil)
        else:
            y = F.avg_pool1d(xi, k, s, p, ceil_mode=ceil, count_include_pad=cip)
        gy = torch.randn_like(y)
        y.backward(gy)
        out[name + ".y"] = y.detach()
        out[name + ".gy"] = gy
        out[name + ".gx"] = xi.grad
    here = os.path.dirname(os.path.abspath(__file__))
    save_file(out, os.path.join(here, "data", "utils_ref.safetensors"))


if __name__ == "__main__":
    main()
