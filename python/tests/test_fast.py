"""cltensor._fast (issue #32): Tensor's C base, whose + - * / @ between two tensors call the
library directly. The same results, exceptions and fallbacks as the Python operators, and each
reference released exactly once."""
import gc
import operator
import sys
import weakref

import numpy as np
import pytest

import cltensor
from cltensor import _fast, _ffi, _lib
from cltensor._tensor import _BINARY_FALLBACKS

from conftest import close

OPS = [(operator.add, np.add), (operator.sub, np.subtract), (operator.mul, np.multiply),
       (operator.truediv, np.divide)]


def test_the_c_slots_are_used():
    assert issubclass(cltensor.Tensor, _fast.TensorBase)
    for name in ("add", "sub", "mul", "truediv", "matmul"):
        # A Python __add__ or __radd__ on Tensor would replace the C slot.
        assert "__%s__" % name not in vars(cltensor.Tensor) and "__r%s__" % name not in vars(cltensor.Tensor)
        assert name in _BINARY_FALLBACKS
    assert cltensor.Tensor.__add__ is _fast.TensorBase.__add__


@pytest.mark.parametrize("op,ref", OPS)
def test_tensor_tensor_as_before(dev, op, ref):
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    y = np.array([0.5, 2.0, -3.0], dtype=np.float32)
    a, b = cltensor.tensor(x), cltensor.tensor(y)
    c = op(a, b)  # broadcast
    assert type(c) is cltensor.Tensor and c.shape == (2, 3) and c.dtype is cltensor.float32
    close(c, ref(x, y))
    close(op(b, a), ref(y, x))
    i = cltensor.tensor([1, 2, 3])  # int64 with float32: float32, as before
    assert op(i, b).dtype is cltensor.float32
    close(op(i, b), ref(np.array([1, 2, 3], np.float32), y))


def test_matmul(dev):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.arange(12, dtype=np.float32).reshape(3, 4)
    close(cltensor.tensor(x) @ cltensor.tensor(y), x @ y)
    close(cltensor.tensor(x) @ y, x @ y)  # an array: the Python fallback


def test_errors_raise_the_package_exception_with_the_message(dev):
    a, b = cltensor.zeros(2, 3), cltensor.zeros(4, 5)
    for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.matmul):
        with pytest.raises(cltensor.ShapeMismatchError) as e:
            op(a, b)
        assert str(e.value) == _ffi.string(_lib.ct_last_error()).decode()
        assert "[2, 3]" in str(e.value) and "[4, 5]" in str(e.value)


def test_other_operands_take_the_python_path(dev):
    t = cltensor.tensor([1.0, 2.0, 4.0])
    close(t + 1, [2, 3, 5])
    close(1 + t, [2, 3, 5])
    close(10 - t, [9, 8, 6])
    close(t - 1.5, [-0.5, 0.5, 2.5])
    close(2 * t, [2, 4, 8])
    close(8 / t, [8, 4, 2])
    close(t / 2, [0.5, 1, 2])
    close(t * np.float32(3), [3, 6, 12])
    close(t + np.array([1, 1, 1], dtype=np.float32), [2, 3, 5])
    close(t - [1, 1, 1], [0, 1, 3])
    assert type(t + 1) is cltensor.Tensor
    for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.matmul):
        with pytest.raises(TypeError):
            op(t, None)
        with pytest.raises(TypeError):
            op(None, t)
        with pytest.raises(TypeError):
            op(t, object())
    # Reflected operators through the slot wrappers, as Python calls them.
    close(t.__radd__(1), [2, 3, 5])
    close(t.__rsub__(1), [0, -1, -3])
    assert t.__add__(None) is NotImplemented


def test_autograd_through_the_c_operators(dev):
    a = cltensor.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = cltensor.tensor([4.0, 5.0, 6.0])
    ((a * b + a - b / a) @ cltensor.ones(3)).backward()
    close(a.grad, [4 + 1 + 4 / 1, 5 + 1 + 5 / 4, 6 + 1 + 6 / 9])
    p = cltensor.nn.Parameter(cltensor.tensor([1.0, 2.0]))
    y = p + cltensor.tensor([1.0, 1.0])
    assert type(y) is cltensor.Tensor and y.requires_grad


def test_no_leak_over_10000_adds(dev):
    a, b = cltensor.ones(1024), cltensor.ones(1024)
    c = a + b  # kernels built, pools warm
    del c
    gc.collect()
    before = dev.memory_stats()["allocated_bytes"]
    refs = sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(cltensor.Tensor)
    live = len(_fast.live())
    for _ in range(10000):
        c = a + b
        del c
    bad = cltensor.zeros(3)
    for _ in range(100):  # the error path too
        with pytest.raises(cltensor.ShapeMismatchError):
            a + bad
    del bad
    cltensor.synchronize()
    assert dev.memory_stats()["allocated_bytes"] == before
    assert (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(cltensor.Tensor)) == refs
    assert len(_fast.live()) == live


def test_a_result_is_released_exactly_once(dev):
    a, b = cltensor.ones(1000), cltensor.ones(1000)
    base = dev.memory_stats()["allocated_bytes"]
    c = a + b
    grown = dev.memory_stats()["allocated_bytes"]
    assert grown > base
    gone = []
    w = weakref.ref(c, lambda r: gone.append(1))  # weak references, as before
    v = c[1:]  # a view: c's storage lives on
    assert any(x is c for x in _fast.live())
    del c
    assert gone == [1] and w() is None
    assert dev.memory_stats()["allocated_bytes"] == grown
    del v
    assert dev.memory_stats()["allocated_bytes"] == base
    # ._h handed over (nn.Parameter's way): the new owner releases it, the old one does not.
    c = a + b
    h = c._h
    assert c._h == h and _ffi.typeof(h) is _ffi.typeof("ct_tensor *")
    c._h = None
    del c
    assert dev.memory_stats()["allocated_bytes"] == grown
    _lib.ct_release(h)
    assert dev.memory_stats()["allocated_bytes"] == base


def test_a_tensor_without_handle(dev):
    with pytest.raises(TypeError):
        cltensor.Tensor()
    t = _fast.TensorBase.__new__(cltensor.Tensor)
    with pytest.raises(AttributeError):
        t._h
    with pytest.raises(TypeError):
        t._h = 3  # not a cffi pointer
    t._h = None
    with pytest.raises(TypeError):  # the Python path: cffi refuses None, as before
        t + cltensor.ones(1)
    t._h = _ffi.NULL  # as cltensor.shutdown() leaves it
    with pytest.raises(cltensor.InvalidArgumentError) as e:  # the Python path, ct_add's message
        t + cltensor.ones(1)
    assert "NULL" in str(e.value)
    del t


def test_copy_and_deepcopy(dev):
    # copy.copy: a new owner over the same memory (not a second owner of the same reference, which
    # would be released twice); deepcopy: new memory. Both keep the class and requires_grad.
    import copy
    import cltensor.nn as nn
    t = cltensor.ones(2)
    c = copy.copy(t)
    assert c is not t and c._h != t._h
    c.copy_(cltensor.full((2,), 3.0))
    assert t.tolist() == [3, 3]
    d = copy.deepcopy(t)
    d.copy_(cltensor.zeros(2))
    assert t.tolist() == [3, 3] and d.tolist() == [0, 0]
    del c, d
    w = cltensor.ones(2).requires_grad_()
    assert copy.copy(w).requires_grad and copy.deepcopy(w).is_leaf
    with pytest.raises(RuntimeError, match="leaves"):
        copy.deepcopy(w * 2)
    lin = nn.Linear(3, 2)
    lin2 = copy.deepcopy(lin)
    assert type(lin2.weight) is nn.Parameter and lin2.weight.requires_grad
    assert lin2.weight.tolist() == lin.weight.tolist() and lin2.weight._h != lin.weight._h
    x = cltensor.ones(1, 3)
    assert lin2(x).tolist() == lin(x).tolist()
    tied = [w, w]
    a, b = copy.deepcopy(tied)
    assert a is b
    opt = cltensor.optim.SGD(lin.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="cannot be copied"):
        copy.copy(opt)
    opt.step()


def test_live_skips_a_tensor_being_deallocated(dev):
    # A subclass instance's __dict__ is cleared while it is still listed; a __del__ running then
    # (here: one calling live()) must not get the dying tensor back (it was freed twice).
    from cltensor import _fast

    class T(cltensor.Tensor):
        pass

    seen = []

    class Hook:
        def __del__(self):
            seen.append(len(_fast.live()))

    t = T.__new__(T)
    t.hook = Hook()
    del t
    assert len(seen) == 1


def test_threads_call_the_c_operators_at_once(dev):
    # The GIL is released around the library call, as cffi does; each thread's error is its own.
    import threading
    a, b = cltensor.ones(64), cltensor.full((64,), 2.0)
    bad = cltensor.zeros(3)
    errors = []

    def work():
        try:
            for _ in range(200):
                c = a + b * a
                with pytest.raises(cltensor.ShapeMismatchError, match=r"\[64\].*\[3\]"):
                    a - bad
            assert c.tolist() == [3.0] * 64
        except BaseException as e:  # noqa: B902 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
