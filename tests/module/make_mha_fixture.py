#!/usr/bin/env python3
"""Makes the MultiheadAttention fixtures of tests/module/test_mha.c with PyTorch (CPU, f32).

Run: /work/venv/bin/python tests/module/make_mha_fixture.py

data/mha_state.safetensors  safetensors.torch.save_file(mha.state_dict(), path) of
                            nn.MultiheadAttention(16, 4, batch_first=True) with its parameters
                            drawn at random (not the defaults: zero biases would hide a mix-up)
data/mha_ref.safetensors
  x [2, 5, 16], g [2, 5, 16]         self-attention input and the output's upstream gradient
  causal.y                           mha(x, x, x, attn_mask=causal mask, is_causal=True,
                                     need_weights=False)[0]
  causal.grad.<name>, causal.grad.x  the gradients of sum(causal.y * g)
  q [2, 5, 16], kv [2, 7, 16]        cross attention: key = value = kv
  cross.y                            mha(q, kv, kv, need_weights=False)[0]
  bmask [5, 7] (bool), bmask.y       the same with attn_mask=bmask (True: not allowed)
  fmask [8, 5, 7] (f32), fmask.y    the same with a float mask of [N * heads, L, S]
  cross.grad.<name>                  the gradients of sum(bmask.y * g) (over q and kv too:
                                     cross.grad.q, cross.grad.kv)
  seq.y                              mha(x[0], x[0], x[0]) unbatched [5, 16], no mask
"""
import os

import torch
import torch.nn as nn
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    torch.manual_seed(30)
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    with torch.no_grad():
        for p in mha.parameters():
            p.uniform_(-0.5, 0.5)
    state = {k: v.detach().contiguous() for k, v in mha.state_dict().items()}
    assert list(state) == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"], list(state)
    save_file(state, os.path.join(HERE, "data", "mha_state.safetensors"))

    ref = {}
    x = torch.randn(2, 5, 16, requires_grad=True)
    g = torch.randn(2, 5, 16)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    y, _ = mha(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    (y * g).sum().backward()
    ref.update({"x": x, "g": g, "causal.y": y, "causal.grad.x": x.grad})
    for name, p in mha.named_parameters():
        ref["causal.grad." + name] = p.grad.clone()
    mha.zero_grad()

    q = torch.randn(2, 5, 16, requires_grad=True)
    kv = torch.randn(2, 7, 16, requires_grad=True)
    ref["q"], ref["kv"] = q, kv
    with torch.no_grad():
        ref["cross.y"] = mha(q, kv, kv, need_weights=False)[0]
        fmask = torch.randn(8, 5, 7)
        ref["fmask"], ref["fmask.y"] = fmask, mha(q, kv, kv, attn_mask=fmask, need_weights=False)[0]
        ref["seq.y"] = mha(x[0], x[0], x[0], need_weights=False)[0]
    bmask = torch.rand(5, 7) < 0.4
    bmask[:, 0] = False  # every query keeps a key: no fully masked row
    y, _ = mha(q, kv, kv, attn_mask=bmask, need_weights=False)
    (y * g).sum().backward()
    ref.update({"bmask": bmask, "bmask.y": y, "cross.grad.q": q.grad, "cross.grad.kv": kv.grad})
    for name, p in mha.named_parameters():
        ref["cross.grad." + name] = p.grad.clone()
    save_file({k: v.detach().contiguous() for k, v in ref.items()}, os.path.join(HERE, "data", "mha_ref.safetensors"))


if __name__ == "__main__":
    main()
