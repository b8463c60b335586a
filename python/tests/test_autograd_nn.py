"""Autograd, grad mode, autocast, nn.functional, nn modules and optimizers."""
import numpy as np
import pytest

import cltensor
import cltensor.nn as nn
import cltensor.nn.functional as F
from conftest import close


def test_backward_grad_detach(dev):
    x = cltensor.tensor([1.0, -2.0, 3.0], requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None
    y = (x * x + 2 * x).sum()
    assert y.requires_grad and not y.is_leaf
    y.backward()
    close(x.grad, 2 * np.array([1.0, -2.0, 3.0]) + 2)
    (x * 3).sum().backward()
    close(x.grad, 2 * np.array([1.0, -2.0, 3.0]) + 5)
    x.grad = None
    assert x.grad is None
    d = x.detach()
    assert not d.requires_grad
    z = cltensor.ones(3).requires_grad_()
    (z * cltensor.tensor([1.0, 2, 3])).backward(cltensor.tensor([1.0, 1, 2]))
    close(z.grad, [1, 2, 6])
    with pytest.raises(cltensor.InvalidArgumentError):
        y.backward()


def test_no_grad_and_set_grad_enabled(dev):
    x = cltensor.ones(2, requires_grad=True)
    with cltensor.no_grad():
        assert not cltensor.is_grad_enabled()
        assert not (x * 2).requires_grad
        x -= 1  # in-place update of a leaf is allowed without recording
    assert cltensor.is_grad_enabled() and (x * 2).requires_grad

    @cltensor.no_grad()
    def f():
        return (x * 2).requires_grad
    assert not f()
    with cltensor.set_grad_enabled(False):
        assert not cltensor.is_grad_enabled()
    assert cltensor.is_grad_enabled()


def test_autocast(dev):
    a = cltensor.randn(4, 8)
    b = cltensor.randn(8, 3)
    with cltensor.autocast(dtype=cltensor.bfloat16):
        assert (a @ b).dtype is cltensor.bfloat16
        assert (a @ b).sum().dtype is cltensor.float32
    assert (a @ b).dtype is cltensor.float32


def test_functional_against_numpy(dev):
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    t = cltensor.tensor(x)
    close(F.relu(t), np.maximum(x, 0))
    close(F.leaky_relu(t, 0.1), np.where(x > 0, x, 0.1 * x))
    close(F.softmax(t, dim=1), np.exp(x) / np.exp(x).sum(1, keepdims=True))
    close(F.log_softmax(t, -1), x - np.log(np.exp(x).sum(1, keepdims=True)), 1e-5)
    w = np.arange(8, dtype=np.float32).reshape(2, 4) / 10
    bias = np.array([0.5, -0.5], dtype=np.float32)
    close(F.linear(t, cltensor.tensor(w), cltensor.tensor(bias)), x @ w.T + bias, 1e-5)
    target = np.array([1, 0, 3])
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    close(F.cross_entropy(t, cltensor.tensor(target)), -logp[np.arange(3), target].mean(), 1e-5)
    close(F.mse_loss(t, cltensor.zeros(3, 4)), (x ** 2).mean(), 1e-5)
    ln = F.layer_norm(t, (4,))
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    close(ln, ref, 1e-4)
    img = np.arange(2 * 1 * 5 * 5, dtype=np.float32).reshape(2, 1, 5, 5)
    k = np.ones((3, 1, 3, 3), dtype=np.float32)
    out = F.conv2d(cltensor.tensor(img), cltensor.tensor(k), padding=1)
    assert out.shape == (2, 3, 5, 5)
    close(out[0, 0, 2, 2], img[0, 0, 1:4, 1:4].sum())
    assert F.max_pool2d(cltensor.tensor(img), 2).shape == (2, 1, 2, 2)
    d = F.dropout(cltensor.ones(1000), 0.5, training=True)
    vals = set(np.unique(d.numpy()).tolist())
    assert vals <= {0.0, 2.0}
    assert F.dropout(t, 0.5, training=False).tolist() == t.tolist()


def test_sgd_step_is_pytorchs_formula(dev):
    p = cltensor.tensor([1.0, 2.0], requires_grad=True)
    opt = cltensor.optim.SGD([p], lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
    # step 1: g = 2p0, b = g, p1 = p0 - 0.1 g; step 2: g = 2 p1, b = 0.9 b + g, p2 = p1 - 0.1 b
    p0 = np.array([1.0, 2.0])
    b = 2 * p0
    p1 = p0 - 0.1 * b
    b = 0.9 * b + 2 * p1
    close(p, p1 - 0.1 * b, 1e-6)
    opt.param_groups[0]["lr"] = 0.0
    opt.zero_grad()
    assert p.grad is None


def test_module_training_loop(dev):
    cltensor.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    model.to(dev)
    names = [n for n, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    opt = cltensor.optim.AdamW(model.parameters(), lr=0.05)
    x = cltensor.randn(32, 4, device=dev)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    model.eval()
    with cltensor.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    assert acc > 0.8
    sd = model.state_dict()
    other = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    other.load_state_dict(sd)
    close(other(x), model(x), 1e-5)


def test_module_to_keeps_parameter_identity(dev):
    lin = nn.Linear(3, 2)
    w = lin.weight
    lin.to(cltensor.float16)
    assert lin.weight is w and w.dtype is cltensor.float16 and w.requires_grad and w.is_leaf
