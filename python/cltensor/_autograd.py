"""Grad mode and autocast as PyTorch's context managers (per thread, as in libcltensor)."""
import functools

from . import _core
from ._core import check, lib


class _GradMode:
    """Base of no_grad / enable_grad / set_grad_enabled: a context manager and a decorator."""

    _mode = None

    def __enter__(self):
        self._prev = lib.ct_set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        lib.ct_set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = lib.ct_set_grad_enabled(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                lib.ct_set_grad_enabled(prev)
        return wrapper


class no_grad(_GradMode):
    """with cltensor.no_grad(): ... records nothing (ct_set_grad_enabled(false))."""
    _mode = False


class enable_grad(_GradMode):
    _mode = True


inference_mode = no_grad


class set_grad_enabled(_GradMode):
    """set_grad_enabled(False) turns recording off at once (as torch's function form) and, used
    as a context manager, restores the previous mode on exit."""

    def __init__(self, mode):
        self._mode = bool(mode)
        self._prev = lib.ct_set_grad_enabled(self._mode)

    def __enter__(self):
        return self


def is_grad_enabled():
    return bool(lib.ct_is_grad_enabled())


class autocast:
    """Mixed precision as torch.autocast (ct_autocast_set_dtype): matmul, linear, conv and attention
    run in `dtype` (float16 or bfloat16), reductions, norms and losses in float32.
    device_type is accepted for PyTorch's signature ("cuda", "gpu", "cpu"); the setting is per
    thread, for every device. dtype defaults to float16, bfloat16 for device_type "cpu" (as
    PyTorch's)."""

    def __init__(self, device_type="gpu", dtype=None, enabled=True, cache_enabled=None):
        if dtype is None:
            dtype = _core.bfloat16 if device_type == "cpu" else _core.float16
        self._dtype = _core.as_dtype(dtype)
        self._enabled = bool(enabled)

    def __enter__(self):
        self._prev = lib.ct_autocast_get_dtype()
        check(lib.ct_autocast_set_dtype(self._dtype.ct if self._enabled else lib.CT_F32))
        return self

    def __exit__(self, *exc):
        check(lib.ct_autocast_set_dtype(self._prev))
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(dtype=self._dtype, enabled=self._enabled):
                return fn(*args, **kwargs)
        return wrapper
