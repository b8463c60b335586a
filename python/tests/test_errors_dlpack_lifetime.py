"""Statuses as exceptions, the array protocols, DLPack, and releasing tensors in any order."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cltensor
from cltensor import _lib, _ffi


def test_one_exception_class_per_status():
    expected = {"InvalidArgumentError": 1, "NoPlatformError": 2, "DeviceNotFoundError": 3,
                "DeviceMismatchError": 4, "DtypeMismatchError": 5, "ShapeMismatchError": 6,
                "OutOfMemoryError": 7, "UnsupportedError": 8, "KernelBuildError": 9, "OpenCLError": 10,
                "IOError": 11, "FormatError": 12, "InternalError": 13}
    for name, code in expected.items():
        cls = getattr(cltensor, name)
        assert issubclass(cls, cltensor.Error) and issubclass(cls, RuntimeError)
        assert cls.status == code and cls.status_name == _ffi.string(_lib.ct_status_name(code)).decode()
    assert issubclass(cltensor.InvalidArgumentError, ValueError)
    assert issubclass(cltensor.OutOfMemoryError, MemoryError)


def test_message_is_ct_last_error(dev):
    with pytest.raises(cltensor.ShapeMismatchError) as e:
        cltensor.zeros(2, 3) @ cltensor.zeros(4, 5)
    assert str(e.value) == _ffi.string(_lib.ct_last_error()).decode()
    assert "[2, 3]" in str(e.value) and "[4, 5]" in str(e.value)
    with pytest.raises(cltensor.DtypeMismatchError):
        cltensor.tensor([1, 2]).mean()
    with pytest.raises(cltensor.IOError):
        _lib.ct_clear_error()
        out = _ffi.new("ct_tensor **")
        cltensor._core.check(_lib.ct_npy_load(out, b"/nonexistent/x.npy", dev.ptr))


def test_array_protocol(dev):
    t = cltensor.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.tolist() == [[1, 2], [3, 4]]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert t.__array__(copy=True).tolist() == a.tolist()
    with pytest.raises(ValueError):
        t.__array__(copy=False)
    assert np.add(t, 1).tolist() == [[2, 3], [4, 5]]


def test_dlpack_round_trip_shares_memory(dev):
    t = cltensor.arange(6, dtype=cltensor.float32).reshape(2, 3)
    assert t.__dlpack_device__() == (4, _lib.ct_device_index(dev.ptr))
    u = cltensor.from_dlpack(t.__dlpack__())
    assert u.shape == (2, 3) and u.tolist() == t.tolist()
    u.fill_(5)
    assert t.tolist() == [[5.0] * 3] * 2  # the same OpenCL memory
    v = cltensor.from_dlpack(t[:, 1:].__dlpack__())
    assert v.tolist() == [[5.0, 5.0]] * 2


def test_dlpack_host_copy_for_cpu_consumers(dev):
    t = cltensor.tensor([1.0, 2.0, 3.0])
    cap = t.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(1, 0), copy=False)
    if np.lib.NumpyVersion(np.__version__) >= "2.1.0":
        assert np.from_dlpack(t, device="cpu").tolist() == [1, 2, 3]
    del cap
    # A kDLCPU producer (NumPy) is copied onto the device.
    src = np.arange(4, dtype=np.int32)
    assert cltensor.from_dlpack(src).tolist() == [0, 1, 2, 3]
    assert cltensor.from_dlpack(src).device == dev


def _managed(deleted):
    """A DLManagedTensor over a host array whose deleter counts its calls."""
    arr = np.arange(3, dtype=np.float32)
    m = _ffi.new("ct_py_dlmanaged *")
    shape = _ffi.new("int64_t[1]", [3])
    m.dl_tensor.data = _ffi.cast("void *", arr.ctypes.data)
    m.dl_tensor.device.device_type = 1
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes = 2, 32, 1
    m.dl_tensor.shape = shape

    @_ffi.callback("void(ct_py_dlmanaged *)")
    def deleter(p):
        deleted.append(1)
    m.deleter = deleter
    return m, (arr, shape, deleter)


def test_capsule_deleter_runs_exactly_once(dev):
    from cltensor import _dlpack
    # Exported and never consumed: the capsule's destructor deletes it once.
    t = cltensor.ones(4)
    before = dev.memory_stats()["allocated_bytes"]
    cap = t.__dlpack__()
    del t
    assert dev.memory_stats()["allocated_bytes"] == before  # the export holds the storage
    del cap
    assert dev.memory_stats()["allocated_bytes"] < before
    # Imported: the library calls the deleter once (kDLCPU: right after the copy), the capsule not.
    deleted = []
    m, keep = _managed(deleted)
    cap = _dlpack._api.PyCapsule_New(int(_ffi.cast("uintptr_t", m)), _dlpack._NAME,
                                     _lib.ct_py_capsule_destructor(0))
    x = cltensor.from_dlpack(cap)
    assert x.tolist() == [0, 1, 2] and deleted == [1]
    del cap
    assert deleted == [1]
    # Never imported: the capsule's destructor calls it once.
    deleted2 = []
    m2, keep2 = _managed(deleted2)
    cap = _dlpack._api.PyCapsule_New(int(_ffi.cast("uintptr_t", m2)), _dlpack._NAME,
                                     _lib.ct_py_capsule_destructor(0))
    del cap
    assert deleted2 == [1]
    with pytest.raises(ValueError):
        cltensor.from_dlpack(object.__new__(type("NotACapsule", (), {})))


SCRIPT = textwrap.dedent("""
    import gc, cltensor
    from cltensor import _lib
    import cltensor.nn as nn
    a = cltensor.ones(3)
    b = a[1:]                      # a view keeping a's storage
    c = a * 2
    opt = cltensor.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    cap = c.__dlpack__()
    MODE
    print("ok")
""")


@pytest.mark.parametrize("mode", [
    # the C library shut down under the Python objects: they are dropped afterwards, in any order
    "_lib.ct_shutdown(); del c; del a; del opt; del cap; gc.collect(); del b",
    # cltensor.shutdown() releases them; a later use raises, dropping is fine; the library works again
    "cltensor.shutdown()\n"
    "try:\n    b + 1\nexcept cltensor.InvalidArgumentError as e:\n    assert 'shutdown' in str(e), e\n"
    "del a, b\nassert cltensor.ones(2).sum().item() == 2",
    # nothing released by hand: the exit handler and the collector do it
    "pass",
])
def test_release_in_any_order_also_after_shutdown(mode):
    r = subprocess.run([sys.executable, "-c", SCRIPT.replace("MODE", mode)], capture_output=True, text=True,
                       env=dict(os.environ), timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
