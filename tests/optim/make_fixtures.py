#!/usr/bin/env python3
"""Makes data/optim_ref.safetensors, PyTorch's results for tests/optim/test_optim.c.

Run: /work/venv/bin/python tests/optim/make_fixtures.py   (PyTorch CPU, f32)

Contents (all f32):
  p.0 [3, 5], p.1 [7]                 the initial parameters
  g.<k>.0, g.<k>.1                    the gradients of step k (k = 0..3)
  <cfg>.<k>.0, <cfg>.<k>.1            the parameters after step k of each configuration below
  clip.g.0, clip.g.1, clip.total,     clip_grad_norm_(max_norm=1): the gradients before, the
  clip.out.0, clip.out.1              total norm, the gradients after
  sc.p [4], sc.g.<k> [4] (k = 0..5),  GradScaler(init 1024, growth 2, backoff 0.5, interval 2)
  sc.p.<k>, sc.scale [6],             over SGD(lr 0.1, momentum 0.9): loss = sum(p * g_k), an inf
  sc.skipped [6]                      at step 1 and a NaN at step 4; the parameters and the
                                      scale after each update, and whether the step was skipped
The C test sets each gradient by ct_backward on sum(p * g), which gives exactly g.
"""
import os

import torch
from safetensors.torch import save_file

K = 4
CONFIGS = {
    # name: (constructor, lr per step, which parameters get no gradient at which step)
    "sgd": (lambda ps: torch.optim.SGD(ps, lr=0.1), None, {}),
    "sgd_wd": (lambda ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.1), None, {}),
    "sgd_mom": (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), None, {}),
    "sgd_nest": (lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True), None, {}),
    "adam": (lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.9, 0.999), eps=1e-8), None, {}),
    "adam_wd": (lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1), None, {}),
    # beta1 0.5: lerp's weight 0.5 takes PyTorch's other branch.
    "adamw": (lambda ps: torch.optim.AdamW(ps, lr=1e-2, betas=(0.5, 0.99), eps=1e-6, weight_decay=0.1), None, {}),
    # lr changed after two steps (a scheduler), and parameter 1 without a gradient at step 2.
    "adam_sched": (lambda ps: torch.optim.Adam(ps, lr=1e-2), [1e-2, 1e-2, 3e-3, 3e-3], {2: [1]}),
}


def main():
    torch.manual_seed(15)
    out = {}
    p0 = [torch.randn(3, 5), torch.randn(7)]
    grads = [[torch.randn(3, 5), torch.randn(7)] for _ in range(K)]
    for i, p in enumerate(p0):
        out[f"p.{i}"] = p
    for k in range(K):
        for i in range(2):
            out[f"g.{k}.{i}"] = grads[k][i]
    for name, (make, lrs, nograd) in CONFIGS.items():
        ps = [torch.nn.Parameter(p.clone()) for p in p0]
        opt = make(ps)
        for k in range(K):
            if lrs:
                for group in opt.param_groups:
                    group["lr"] = lrs[k]
            for i, p in enumerate(ps):
                p.grad = None if i in nograd.get(k, []) else grads[k][i].clone()
            opt.step()
            for i, p in enumerate(ps):
                out[f"{name}.{k}.{i}"] = p.detach().clone()

    cg = [torch.randn(3, 5), torch.randn(7) * 0.5]
    ps = [torch.nn.Parameter(torch.zeros(3, 5)), torch.nn.Parameter(torch.zeros(7))]
    for p, g in zip(ps, cg):
        p.grad = g.clone()
    total = torch.nn.utils.clip_grad_norm_(ps, max_norm=1.0, foreach=False)
    for i in range(2):
        out[f"clip.g.{i}"] = cg[i]
        out[f"clip.out.{i}"] = ps[i].grad.clone()
    out["clip.total"] = total.reshape(1).clone()

    sp = torch.randn(4)
    sg = [torch.randn(4) for _ in range(6)]
    sg[1][2] = float("inf")
    sg[4][0] = float("nan")
    out["sc.p"] = sp
    p = torch.nn.Parameter(sp.clone())
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=2)
    scales, skipped = [], []
    for k in range(6):
        out[f"sc.g.{k}"] = sg[k]
        opt.zero_grad()
        scaler.scale((p * sg[k]).sum()).backward()
        scaler.step(opt)
        skipped.append(0.0 if torch.isfinite(sg[k]).all() else 1.0)
        scaler.update()
        scales.append(scaler.get_scale())
        out[f"sc.p.{k}"] = p.detach().clone()
    out["sc.scale"] = torch.tensor(scales, dtype=torch.float32)
    out["sc.skipped"] = torch.tensor(skipped, dtype=torch.float32)

    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(os.path.join(here, "data"), exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(here, "data", "optim_ref.safetensors"))


if __name__ == "__main__":
    main()
