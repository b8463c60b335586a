#!/usr/bin/env python3
"""Makes the fixtures of tests/module/test_module.c and test_init.c with PyTorch (CPU, f32).

Run: /work/venv/bin/python tests/module/make_fixtures.py

data/net_state.safetensors  safetensors.torch.save_file(net.state_dict(), path) of Net below,
                            exactly as a PyTorch user writes a checkpoint: the C test builds the
                            same architecture with modules and loads it strictly.
data/module_ref.safetensors
  net.x [2, 1, 8, 8], net.y [2, 3]         Net in eval mode: input and output
  net.g [2, 3], grad.<name>                the gradients of sum(net(x) * g) for every parameter
  metadata "net.names"                     the state_dict's "name:dtype:d0,d1;..." in order
  metadata "net.params"                    named_parameters()'s names, in order
  metadata "net.buffers"                   named_buffers()'s names, in order
  <mod>.<param>, <mod>.x, <mod>.y          each module alone (weights drawn at random, not the
                                           defaults, so that a swapped weight and bias shows):
                                           its state_dict entries, an input, the eval output
  bn1d/bn2d/bnmom: .y_train, .running_mean_after, .running_var_after, .nbt_after, .y_eval
                                           one training forward (two for bnmom, momentum None,
                                           inputs .x and .x2) and then an eval forward of .x
  act.x [3, 7], act.<name>                 every activation module on act.x
  fans [n, 2] (f64), fan_shapes metadata   torch.nn.init._calculate_fan_in_and_fan_out
  gains [12 + 2] (f64)                     calculate_gain for each ct_nonlinearity in enum order
                                           (leaky_relu with param None), then leaky_relu 0.2 and
                                           sqrt(5)
"""
import math
import os

import torch
import torch.nn as nn
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(nn.Module):
    """A nested model: named children, Sequentials inside, every buffer kind."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 6, (3, 3), stride=(2, 2), padding=(1, 1), bias=False), nn.GELU())
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.flat = nn.Flatten()
        self.head = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Dropout(0.5), nn.SiLU(),
                                  nn.Linear(8, 3))

    def forward(self, x):
        return self.head(self.flat(self.pool(self.features(x))))


def randomize(m):
    """Non-default values for every parameter and buffer, so that a mix-up shows."""
    with torch.no_grad():
        for name, t in m.state_dict().items():
            if name.endswith("num_batches_tracked"):
                t.fill_(7)
            elif name.endswith("running_var"):
                t.uniform_(0.5, 2.0)
            elif t.is_floating_point():
                t.normal_(0.0, 0.5)


def entries(prefix, m, out):
    for name, t in m.state_dict().items():
        out[f"{prefix}.{name}"] = t.detach().clone().contiguous()


def main():
    torch.manual_seed(30)
    out, meta = {}, {}

    net = Net()
    randomize(net)
    net.eval()
    sd = net.state_dict()
    save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(HERE, "data", "net_state.safetensors"))
    meta["net.names"] = ";".join(
        f"{k}:{str(v.dtype).replace('torch.', '')}:{','.join(map(str, v.shape))}" for k, v in sd.items())
    meta["net.params"] = ";".join(k for k, _ in net.named_parameters())
    meta["net.buffers"] = ";".join(k for k, _ in net.named_buffers())
    x = torch.randn(2, 1, 8, 8)
    y = net(x)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    out["net.x"], out["net.y"], out["net.g"] = x, y.detach(), g
    for k, p in net.named_parameters():
        out[f"grad.{k}"] = p.grad.clone()

    # Each module alone, in eval mode (training where it says).
    single = {
        "linear": (nn.Linear(5, 3), torch.randn(4, 5)),
        "linear_nobias": (nn.Linear(5, 3, bias=False), torch.randn(2, 3, 5)),
        "conv1d": (nn.Conv1d(2, 4, 3, stride=2, padding=1), torch.randn(2, 2, 9)),
        "conv2d": (nn.Conv2d(2, 4, (3, 2), stride=(2, 1), padding=(1, 0), groups=2), torch.randn(2, 2, 7, 6)),
        "conv2d_dil": (nn.Conv2d(3, 2, 3, dilation=2, padding=2), torch.randn(1, 3, 7, 7)),
        "layer_norm": (nn.LayerNorm([4, 5]), torch.randn(3, 4, 5)),
        "layer_norm_nobias": (nn.LayerNorm(5, eps=1e-3, bias=False), torch.randn(3, 5)),
        "rms_norm": (nn.RMSNorm(6), torch.randn(2, 6)),
        "rms_norm_eps": (nn.RMSNorm([2, 3], eps=1e-2), torch.randn(4, 2, 3)),
        "max_pool2d": (nn.MaxPool2d(2), torch.randn(2, 3, 6, 7)),
        "max_pool2d_s": (nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 1)), torch.randn(1, 2, 7, 5)),
        "avg_pool2d": (nn.AvgPool2d(3, stride=2, padding=1), torch.randn(1, 2, 7, 5)),
        "adaptive": (nn.AdaptiveAvgPool2d((2, 3)), torch.randn(2, 2, 5, 7)),
        "flatten": (nn.Flatten(), torch.randn(2, 3, 4, 5)),
        "flatten_02": (nn.Flatten(0, 2), torch.randn(2, 3, 4, 5)),
    }
    for name, (m, xin) in single.items():
        randomize(m)
        m.eval()
        entries(name, m, out)
        out[f"{name}.x"], out[f"{name}.y"] = xin, m(xin).detach()
    emb = nn.Embedding(10, 4)
    entries("embedding", emb, out)
    idx = torch.tensor([[1, 0, 9], [3, 3, 7]])
    out["embedding.x"], out["embedding.y"] = idx, emb(idx).detach()

    # Batch norm: a training forward, then eval.
    for name, m, xs in (("bn1d", nn.BatchNorm1d(3), [torch.randn(6, 3)]),
                        ("bn1d3", nn.BatchNorm1d(3, eps=1e-3, momentum=0.3), [torch.randn(4, 3, 5)]),
                        ("bn2d", nn.BatchNorm2d(3), [torch.randn(4, 3, 2, 2)]),
                        ("bnmom", nn.BatchNorm1d(2, momentum=None), [torch.randn(5, 2), torch.randn(5, 2)])):
        randomize(m)
        entries(name, m, out)
        m.train()
        for i, xin in enumerate(xs):
            out[f"{name}.x" if i == 0 else f"{name}.x{i + 1}"] = xin
            ytr = m(xin).detach()
        out[f"{name}.y_train"] = ytr
        out[f"{name}.running_mean_after"] = m.running_mean.clone()
        out[f"{name}.running_var_after"] = m.running_var.clone()
        out[f"{name}.nbt_after"] = m.num_batches_tracked.clone()
        m.eval()
        out[f"{name}.y_eval"] = m(xs[0]).detach()

    ax = torch.randn(3, 7) * 3
    out["act.x"] = ax
    acts = {"relu": nn.ReLU(), "gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh"), "silu": nn.SiLU(),
            "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(), "softplus": nn.Softplus(),
            "leaky_relu": nn.LeakyReLU(0.2), "softmax": nn.Softmax(dim=1), "log_softmax": nn.LogSoftmax(dim=-1),
            "identity": nn.Identity()}
    for name, m in acts.items():
        out[f"act.{name}"] = m(ax)

    # Fans and gains.
    shapes = [(3, 4), (16, 3, 5, 5), (8, 2, 7), (5, 6, 1, 1, 2), (1, 1)]
    fans = [nn.init._calculate_fan_in_and_fan_out(torch.empty(s)) for s in shapes]
    out["fans"] = torch.tensor(fans, dtype=torch.float64)
    meta["fan_shapes"] = ";".join(",".join(map(str, s)) for s in shapes)
    names = ["leaky_relu", "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "sigmoid", "tanh", "relu", "selu"]
    gains = [nn.init.calculate_gain(n) for n in names]
    gains += [nn.init.calculate_gain("leaky_relu", 0.2), nn.init.calculate_gain("leaky_relu", math.sqrt(5))]
    out["gains"] = torch.tensor(gains, dtype=torch.float64)

    save_file({k: v.detach().clone().contiguous() for k, v in out.items()},
              os.path.join(HERE, "data", "module_ref.safetensors"),
              metadata=meta)


if __name__ == "__main__":
    main()
