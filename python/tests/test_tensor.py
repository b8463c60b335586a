"""Tensors: creation, dtypes, properties, moving data, printing."""
import numpy as np
import pytest

import cltensor
from conftest import close


def test_tensor_infers_pytorch_dtypes(dev):
    assert cltensor.tensor([1.5, 2]).dtype is cltensor.float32
    assert cltensor.tensor([1, 2]).dtype is cltensor.int64
    assert cltensor.tensor([True, False]).dtype is cltensor.bool
    assert cltensor.tensor(np.arange(3, dtype=np.int32)).dtype is cltensor.int32
    assert cltensor.tensor(np.zeros(2, np.float16)).dtype is cltensor.float16
    assert cltensor.tensor([1, 2], dtype=cltensor.float16).dtype is cltensor.float16
    assert cltensor.tensor(3.0).shape == ()
    assert repr(cltensor.float32) == "cltensor.float32" and cltensor.float is cltensor.float32
    assert cltensor.long is cltensor.int64 and cltensor.half is cltensor.float16


def test_creation_functions(dev):
    assert cltensor.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert cltensor.ones((2,), dtype=cltensor.int32).tolist() == [1, 1]
    assert cltensor.empty([4, 0]).shape == (4, 0)
    assert cltensor.full((2,), 7).dtype is cltensor.int64
    assert cltensor.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert cltensor.arange(0, 1, 0.25).dtype is cltensor.float32
    close(cltensor.linspace(0, 1, 5), [0, 0.25, 0.5, 0.75, 1])
    assert cltensor.eye(2).tolist() == [[1, 0], [0, 1]]
    cltensor.manual_seed(1)
    a = cltensor.rand(100)
    cltensor.manual_seed(1)
    assert np.array_equal(a.numpy(), cltensor.rand(100).numpy())
    assert 0 <= a.numpy().min() and a.numpy().max() < 1
    r = cltensor.randint(0, 5, (50,))
    assert r.dtype is cltensor.int64 and 0 <= r.numpy().min() and r.numpy().max() < 5
    assert cltensor.randn(3, 4).shape == (3, 4)
    assert cltensor.zeros_like(a).shape == (100,) and cltensor.ones_like(r).dtype is cltensor.int64


def test_from_numpy_and_back(dev):
    for dt in (np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_, np.float16):
        if dt is np.float64 and not dev.properties["fp64"]:
            continue
        a = (np.arange(12).reshape(3, 4) % 3).astype(dt)
        t = cltensor.from_numpy(a)
        assert t.dtype.numpy_dtype == a.dtype
        assert np.array_equal(t.numpy(), a)
    nc = np.arange(12, dtype=np.float32).reshape(3, 4).T
    assert np.array_equal(cltensor.from_numpy(nc).numpy(), nc)


def test_bfloat16_round_trip(dev):
    t = cltensor.tensor([1.0, 2.5, -3.0], dtype=cltensor.bfloat16)
    assert t.dtype is cltensor.bfloat16
    assert t.numpy().dtype == np.float32 and t.tolist() == [1.0, 2.5, -3.0]


def test_properties(dev):
    t = cltensor.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(1) == 3
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24 and len(t) == 2
    assert t.stride() == (12, 4, 1) and t.is_contiguous()
    assert t.transpose(0, 2).stride() == (1, 4, 12) and not t.transpose(0, 2).is_contiguous()
    assert t.device == dev and str(t.device) == str(dev)
    assert t.element_size() == 4 and t.nbytes == 96


def test_item_tolist_scalars(dev):
    assert cltensor.tensor([[2.5]]).item() == 2.5
    assert isinstance(cltensor.tensor(3).item(), int)
    assert float(cltensor.tensor(1.5)) == 1.5 and int(cltensor.tensor(7)) == 7
    assert bool(cltensor.tensor(True))
    with pytest.raises(cltensor.InvalidArgumentError):
        cltensor.zeros(2).item()
    with pytest.raises(RuntimeError):
        bool(cltensor.zeros(2))


def test_to_and_cpu(dev):
    t = cltensor.tensor([1.7, -2.2])
    assert t.to(dev) is t and t.to(cltensor.float32) is t
    assert t.to(cltensor.int32).tolist() == [1, -2]
    assert t.to("float16").dtype is cltensor.float16
    assert t.to(dev, cltensor.int64).dtype is cltensor.int64
    assert t.to(cltensor.zeros(1, dtype=cltensor.int8)).dtype is cltensor.int8
    assert t.float() is t and t.long().tolist() == [1, -2]
    if any(d.type == "cpu" for d in cltensor.devices()):
        c = t.cpu()
        assert c.device.type == "cpu" and c.tolist() == t.tolist()
    else:
        assert t.cpu() is t


def test_repr_is_the_c_printer(dev):
    r = repr(cltensor.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert r.startswith("tensor([[1., 2.],\n        [3., 4.]]")
    assert "dtype=f32" in r and str(dev) in r
    big = repr(cltensor.zeros(5000))
    assert "..." in big


def test_none_comparisons_and_cuda_namespace(dev):
    t = cltensor.zeros(2)
    assert (t == None) is False and (t != None) is True  # noqa: E711
    with pytest.raises(TypeError):
        t + None
    gpus = [d for d in cltensor.devices() if d.type == "gpu"]
    assert cltensor.cuda.is_available() == bool(gpus) and cltensor.cuda.device_count() == len(gpus)


def test_devices(dev):
    ds = cltensor.devices()
    assert ds and dev in ds
    d = cltensor.device(str(dev))
    assert d == dev and hash(d) == hash(dev) and d.type in ("gpu", "cpu", "accelerator", "other")
    assert repr(d) == "device(type='%s', index=%d)" % (d.type, d.index)
    assert isinstance(d.name, str) and d.properties["compute_units"] >= 1
    with pytest.raises(cltensor.InvalidArgumentError):
        cltensor.device("nonsense:spec:x")
    with pytest.raises(cltensor.DeviceNotFoundError):
        cltensor.device("cpu:99")
    assert cltensor.zeros(1, device=str(dev)).device == dev
