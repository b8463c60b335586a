"""Operators and the op set, against NumPy."""
import operator

import numpy as np
import pytest

import cltensor
from conftest import close

A = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], dtype=np.float32)
B = np.array([[2.0, 1.0, -0.5], [3.0, -2.0, 0.25]], dtype=np.float32)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
                                operator.lt, operator.le, operator.eq, operator.ne, operator.gt,
                                operator.ge])
def test_binary_operators(dev, op):
    a, b = cltensor.tensor(A), cltensor.tensor(B)
    base = np.abs(A) if op is operator.pow else A
    ta = cltensor.tensor(base)
    close(op(ta, b), op(base, B), 1e-4)
    close(op(ta, 2), op(base, np.float32(2)), 1e-4)
    close(op(3, ta), op(np.float32(3), base), 1e-4)
    close(op(ta, 2.5), op(base, np.float32(2.5)), 1e-4)
    assert op(a, b).shape == (2, 3)


def test_scalar_forms_keep_pytorch_dtypes(dev):
    i = cltensor.tensor([1, 2, 3], dtype=cltensor.int32)
    assert (i + 2).dtype is cltensor.int32
    assert (i * 2.5).dtype is cltensor.float32
    assert (i / 2).dtype is cltensor.float32
    assert (i < 2).dtype is cltensor.bool
    assert (7 // i).tolist() == [7, 3, 2] and (7 % i).tolist() == [0, 1, 1]
    assert (i // 2).tolist() == [0, 1, 1] and (-i).tolist() == [-1, -2, -3]
    assert (2 ** i).tolist() == [2, 4, 8]


def test_unary_and_bitwise(dev):
    a = cltensor.tensor(A)
    close(-a, -A)
    close(abs(a), np.abs(A))
    b = cltensor.tensor([True, False])
    assert (~b).tolist() == [False, True]
    i = cltensor.tensor([6, 3])
    assert (i & 5).tolist() == [4, 1] and (i | 1).tolist() == [7, 3] and (i ^ i).tolist() == [0, 0]


def test_inplace_operators(dev):
    a = cltensor.tensor(A)
    keep = a
    a += 1
    a *= cltensor.tensor(B)
    a -= 0.5
    a /= 2
    assert a is keep
    close(a, ((A + 1) * B - 0.5) / 2)
    with pytest.raises(cltensor.DtypeMismatchError):
        i = cltensor.tensor([1, 2])
        i += 0.5


def test_matmul(dev):
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    n = np.arange(12, dtype=np.float32).reshape(3, 4)
    close(cltensor.tensor(m) @ cltensor.tensor(n), m @ n)
    close(cltensor.matmul(cltensor.tensor(m), cltensor.tensor(n)), m @ n)
    v = np.arange(3, dtype=np.float32)
    close(cltensor.tensor(v) @ cltensor.tensor(v), v @ v)
    close(cltensor.tensor(m).T @ cltensor.tensor(m), m.T @ m)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "abs", "floor", "relu"])
def test_unary_functions(dev, name):
    x = np.abs(A) + 0.1
    ref = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0)}.get(name, getattr(np, name,
                                                                                                              None))
    t = cltensor.tensor(x)
    close(getattr(cltensor, name)(t), ref(x), 1e-5)
    close(getattr(t, name)(), ref(x), 1e-5)


def test_reductions(dev):
    a = cltensor.tensor(A)
    close(a.sum(), A.sum())
    close(cltensor.sum(a, dim=1), A.sum(1))
    close(a.sum(dim=(0, 1), keepdim=True), A.sum(keepdims=True))
    assert a.sum(dim=1, keepdim=True).shape == (2, 1)
    close(a.mean(0), A.mean(0))
    close(a.var(1), A.var(1, ddof=1), 1e-5)
    close(a.std(1, unbiased=False), A.std(1), 1e-5)
    close(a.max(), A.max())
    v, i = a.max(dim=1)
    close(v, A.max(1))
    assert i.tolist() == A.argmax(1).tolist()
    m = a.min(1, keepdim=True)
    assert m.values.shape == (2, 1) and m.indices.dtype is cltensor.int64
    close(cltensor.max(a, cltensor.tensor(B)), np.maximum(A, B))
    assert a.argmax().item() == A.argmax()
    close(a.softmax(-1), np.exp(A) / np.exp(A).sum(-1, keepdims=True))
    close(cltensor.logsumexp(a, 1), np.log(np.exp(A).sum(1)), 1e-5)
    assert (a > 0).any().item() and not (a > 10).all().item()
    close(a.cumsum(1), A.cumsum(1))
    s = a.sort(dim=1, descending=True)
    close(s.values, -np.sort(-A, 1))
    tk = a.topk(2, dim=1)
    close(tk.values, -np.sort(-A, 1)[:, :2])


def test_shape_ops(dev):
    a = cltensor.tensor(A)
    assert a.reshape(3, 2).shape == (3, 2) and a.view(-1).shape == (6,)
    assert a.permute(1, 0).shape == (3, 2) and a.t().shape == (3, 2) and a.T.shape == (3, 2)
    assert a.unsqueeze(0).shape == (1, 2, 3) and a.unsqueeze(0).squeeze().shape == (2, 3)
    assert a.unsqueeze(1).expand(2, 4, 3).shape == (2, 4, 3)
    assert a.flatten().shape == (6,)
    close(cltensor.cat([a, a], dim=1), np.concatenate([A, A], 1))
    close(cltensor.stack([a, a]), np.stack([A, A]))
    parts = a.chunk(3, dim=1)
    assert len(parts) == 3 and parts[0].shape == (2, 1)
    assert [p.shape for p in a.split([1, 2], dim=1)] == [(2, 1), (2, 2)]
    close(a.flip(0), A[::-1])
    close(a.roll(1, 1), np.roll(A, 1, 1))
    close(a.repeat(2, 1), np.tile(A, (2, 1)))
    close(cltensor.where(a > 0, a, 0.0), np.where(A > 0, A, 0))
    close(a.clamp(min=0, max=2), np.clip(A, 0, 2))
    close(cltensor.tril(cltensor.ones(3, 3)), np.tril(np.ones((3, 3))))
    close(a.contiguous(), A)
    close(a.clone(), A)
