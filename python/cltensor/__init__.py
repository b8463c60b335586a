"""cltensor: PyTorch-style tensors on any OpenCL device, from Python.

The Python package of libcltensor (a C11 library): the same names as PyTorch where the C library
has the op.

    import cltensor
    import cltensor.nn.functional as F

    dev = cltensor.device("gpu") if any(d.type == "gpu" for d in cltensor.devices()) \\
        else cltensor.device("cpu")
    x = cltensor.randn(64, 10, device=dev)
    w = cltensor.zeros(3, 10, device=dev, requires_grad=True)
    loss = F.cross_entropy(x @ w.T, cltensor.randint(0, 3, (64,), device=dev))
    loss.backward()
    print(loss.item(), w.grad.numpy().shape)

Every failing libcltensor call raises a subclass of cltensor.Error named after its status
(cltensor.OutOfMemoryError, DeviceMismatchError, ...), whose text is ct_last_error().
python/README.md lists what differs from PyTorch.
"""
import atexit as _atexit
import builtins as _builtins  # any, sum, max, ... below are the op set's

from . import _core, _fast
from ._core import (Error, bfloat16, default_device, device, devices, dtype, float16, float32, float64, int8,
                    int16, int32, int64, set_default_device, uint8, uint16, uint32, uint64)
from ._core import ffi as _ffi, lib as _lib
from ._tensor import (Tensor, arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                      is_tensor, linspace, manual_seed, ones, ones_like, rand, rand_like, randint, randn,
                      randn_like, tensor, zeros, zeros_like)
from ._ops import *  # noqa: F401,F403  (the op set: exp, sum, matmul, ...)
from ._ops import __all__ as _ops_all
from ._autograd import autocast, enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from ._dlpack import from_dlpack
from ._files import load, save
from . import nn, optim, profiler, safetensors  # noqa: E402

globals().update(_core.error_classes)

# PyTorch's dtype names, aliases included (cltensor.float is float32, cltensor.long int64).
bool = _core.bool_
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64

__version__ = _ffi.string(_lib.ct_version()).decode()
version = __version__


def is_available():
    """Whether an OpenCL device is there (ct_device_count > 0)."""
    n = _ffi.new("int *")
    return _lib.ct_device_count(n) == 0 and n[0] > 0


def synchronize(device=None):
    """Waits for the device's queued work (every device used so far when None)."""
    for d in ([_core.device(device)] if device is not None else list(_core._devices.values())):
        d.synchronize()


def shutdown():
    """ct_shutdown(): releases every OpenCL object and all device memory of libcltensor.

    The tensors and optimizers that exist then are released too (their handles become NULL, and
    a later use raises an error saying so); dropping them stays safe. The library can be used
    again afterwards (devices are enumerated anew). Called at interpreter exit, so that no device
    still runs work when the process ends (docs/PORTABILITY.md: PoCL can crash otherwise)."""
    import gc
    _lib.ct_shutdown()
    _core._shutdowns[0] += 1
    _core._default[0] = None
    # The tensors are not tracked by the garbage collector (_fast.c keeps the list of them).
    for obj in _fast.live():
        try:
            h = obj._h
        except AttributeError:  # never given a handle
            continue
        if h is not None and h != _ffi.NULL:
            obj._h = _ffi.NULL
            _lib.ct_release(h)
    for obj in gc.get_objects():
        if isinstance(obj, optim.Optimizer):
            h = obj._h
            if h is not None:
                obj._h = None
                _lib.ct_optimizer_free(h)


_atexit.register(shutdown)


class _Cuda:
    """cltensor.cuda: the few torch.cuda calls device-picking code makes, answered for the
    OpenCL GPUs ("cuda" device specs are read as "gpu")."""

    @staticmethod
    def is_available():
        return _builtins.any(d.type == "gpu" for d in devices())

    @staticmethod
    def device_count():
        return _builtins.sum(1 for d in devices() if d.type == "gpu")

    @staticmethod
    def synchronize(device=None):
        for d in devices():
            if d.type == "gpu" and (device is None or d == _core.device(device)):
                d.synchronize()


cuda = _Cuda()

__all__ = (["Error", "Tensor", "device", "devices", "dtype", "default_device", "set_default_device", "tensor",
            "as_tensor", "from_numpy", "from_dlpack", "zeros", "ones", "empty", "full", "arange", "linspace",
            "eye", "rand", "randn", "randint", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
            "randn_like", "manual_seed", "is_tensor", "no_grad", "enable_grad", "set_grad_enabled",
            "is_grad_enabled", "inference_mode", "autocast", "shutdown", "synchronize", "is_available", "cuda", "nn",
            "optim", "profiler", "safetensors", "save", "load",
            "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
            "float16", "bfloat16", "float32", "float64", "half", "float", "double", "short", "int", "long"]
           + list(_ops_all) + list(_core.error_classes))
