#!/usr/bin/env python3
"""Makes data/sched_ref.safetensors: PyTorch's learning rates for tests/optim/test_sched.c.

Run: /work/venv/bin/python tests/optim/make_sched_fixtures.py   (PyTorch CPU; 2.15 made the
committed file)

Every schedule below drives torch.optim.SGD (or the optimizer of OPTIMIZERS) over two parameter
groups (lr 0.1 and 0.01) for 1000 steps (optimizer.step() then scheduler.step(), as a training
loop does). Contents (f64):
  <name>.lr [1001, 2]        each group's lr after construction (row 0) and after each step
  <name>.momentum [1001, 2]  the same for SGD's momentum / Adam's beta1, for the one-cycle
                             schedules that cycle it
  metric [1000]              the metric given to the plateau schedulers at each step
The C test builds the same schedulers (ct_lr_*_new with the arguments listed in SCHEDULES, which
it repeats) and compares every value.
"""
import math
import os

import torch
from safetensors.torch import save_file

S = torch.optim.lr_scheduler
STEPS = 1000

# A metric that falls with noise and plateaus, so that the plateau schedulers reduce several
# times and go through their cooldowns.
METRIC = [1.0 / (1.0 + t / 40.0) + 0.02 * math.sin(t * 0.7) + (0.05 if (t // 150) % 2 else 0.0)
          for t in range(STEPS)]

SCHEDULES = {
    "step": lambda o: S.StepLR(o, step_size=30, gamma=0.5),
    "multistep": lambda o: S.MultiStepLR(o, milestones=[700, 100, 300, 300], gamma=0.3),
    "exponential": lambda o: S.ExponentialLR(o, gamma=0.995),
    "cosine": lambda o: S.CosineAnnealingLR(o, T_max=300, eta_min=1e-4),
    "cosine_full": lambda o: S.CosineAnnealingLR(o, T_max=1000, eta_min=0.0),
    "linear": lambda o: S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=200),
    "linear_down": lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=1000),
    "one_cycle": lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=1000, pct_start=0.3, anneal_strategy="cos",
                                        cycle_momentum=False, div_factor=25.0, final_div_factor=1e4),
    "one_cycle3": lambda o: S.OneCycleLR(o, max_lr=0.2, total_steps=1000, pct_start=0.25,
                                         anneal_strategy="linear", cycle_momentum=False, div_factor=10.0,
                                         final_div_factor=100.0, three_phase=True),
    "one_cycle_mom": lambda o: S.OneCycleLR(o, max_lr=0.3, total_steps=1000),  # PyTorch's defaults
    "one_cycle_adam3": lambda o: S.OneCycleLR(o, max_lr=0.01, total_steps=1000, pct_start=0.2,
                                              anneal_strategy="linear", base_momentum=0.8, max_momentum=0.9,
                                              three_phase=True),
    # Linear warmup then cosine, and three schedulers (the last one a one-cycle without closed form).
    "sequential": lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.01, end_factor=1.0, total_iters=100),
                                               S.CosineAnnealingLR(o, T_max=900, eta_min=1e-5)], milestones=[100]),
    "sequential3": lambda o: S.SequentialLR(o, [S.ExponentialLR(o, gamma=0.99), S.StepLR(o, step_size=50, gamma=0.5),
                                                S.OneCycleLR(o, max_lr=0.2, total_steps=500, cycle_momentum=False)],
                                            milestones=[200, 500]),
    "plateau_min": lambda o: S.ReduceLROnPlateau(o, mode="min", factor=0.5, patience=5, threshold=1e-3,
                                                 threshold_mode="rel", cooldown=3, min_lr=1e-4, eps=1e-8),
    "plateau_max": lambda o: S.ReduceLROnPlateau(o, mode="max", factor=0.7, patience=3, threshold=0.01,
                                                 threshold_mode="abs", cooldown=0, min_lr=0.0, eps=1e-8),
}


# Optimizers other than plain SGD (the C test makes the same ones).
OPTIMIZERS = {
    "one_cycle_mom": lambda groups: torch.optim.SGD(groups, lr=0.1, momentum=0.9),
    "one_cycle_adam3": lambda groups: torch.optim.Adam(groups, lr=0.1),
}


def momentum(g):
    return g["betas"][0] if "betas" in g else g["momentum"]


def run(name, make):
    p0 = torch.nn.Parameter(torch.zeros(2))
    p1 = torch.nn.Parameter(torch.zeros(3))
    groups = [{"params": [p0]}, {"params": [p1], "lr": 0.01}]
    opt = OPTIMIZERS[name](groups) if name in OPTIMIZERS else torch.optim.SGD(groups, lr=0.1)
    sched = make(opt)
    plateau = isinstance(sched, S.ReduceLROnPlateau)
    rows = [[g["lr"] for g in opt.param_groups]]
    moms = [[momentum(g) for g in opt.param_groups]]
    for t in range(STEPS):
        opt.step()  # no gradients: changes nothing, keeps PyTorch's order check quiet
        if plateau:
            sched.step(METRIC[-t - 1] if "max" in sched.mode else METRIC[t])
        else:
            sched.step()
        rows.append([float(g["lr"]) for g in opt.param_groups])
        moms.append([float(momentum(g)) for g in opt.param_groups])
    return torch.tensor(rows, dtype=torch.float64), torch.tensor(moms, dtype=torch.float64)


def main():
    out = {}
    for name, make in SCHEDULES.items():
        out[name + ".lr"], mom = run(name, make)
        if name in OPTIMIZERS:
            out[name + ".momentum"] = mom
    out["metric"] = torch.tensor(METRIC, dtype=torch.float64)
    here = os.path.dirname(os.path.abspath(__file__))
    save_file(out, os.path.join(here, "data", "sched_ref.safetensors"))


if __name__ == "__main__":
    main()
