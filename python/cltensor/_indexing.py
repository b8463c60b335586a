"""Tensor.__getitem__ and __setitem__: PyTorch's (NumPy's) indexing over libcltensor's views and
index ops.

Basic indices (ints, slices with positive steps, None, ...) give views (ct_slice, ct_squeeze,
ct_unsqueeze): no copy, writes through them reach the tensor. Advanced indices (integer tensors,
lists or arrays; bool masks) give a copy through ct_index_select, placed as NumPy/PyTorch place
them: several advanced indices broadcast together; their result dims stand where the indexed dims
were when those are adjacent, else first. Once an advanced index is present, ints count as 0-d
advanced indices (as in PyTorch). A bool mask is turned into coordinates on the host (the
result's size depends on its values, so it has to be read)."""
import numbers

from . import _core
from ._core import check, ffi, lib
from ._tensor import Tensor, _I64, _as_operand, _call, _from_numpy


def _is_advanced(k):
    if isinstance(k, Tensor):
        return True
    if isinstance(k, (list, tuple)):
        return True
    return type(k).__module__ == "numpy" and hasattr(k, "ndim") and not isinstance(k, numbers.Number)


def _consumed(k):
    if k is None or k is Ellipsis:
        return 0
    if isinstance(k, Tensor) and k.dtype is _core.bool_:
        return max(k.ndim, 1) if k.ndim else 1
    if type(k).__module__ == "numpy" and getattr(k, "dtype", None) is not None and k.dtype.kind == "b":
        return max(k.ndim, 1)
    return 1


def _host_index(k, size, dim):
    """An integer index given on the host, checked and wrapped: an int64 NumPy array."""
    import numpy as np
    a = np.asarray(k)
    if a.dtype.kind not in "iu" and not (a.size == 0 and a.dtype.kind == "f"):
        raise IndexError("tensors used as indices must be integer or bool, got %s" % a.dtype)
    a = a.astype(np.int64)
    bad = (a < -size) | (a >= size)
    if bad.any():
        raise IndexError("index %d is out of bounds for dimension %d with size %d" % (a[bad].flat[0], dim, size))
    return np.where(a < 0, a + size, a)


def _device_index(k, size, check_range):
    """An integer index tensor with negative entries wrapped (PyTorch wraps them)."""
    if k.dtype.is_floating_point or k.dtype is _core.bool_:
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    neg = _call(lib.ct_lt_scalar, k._h, 0.0)
    # Temporaries stay bound while a call uses their handles (a dropped Tensor releases its own).
    plus = _call(lib.ct_add_scalar, k._h, float(size))
    k = _call(lib.ct_where, neg._h, plus._h, k._h)
    if k.dtype not in (_core.int64, _core.int32):
        k = k.to(_core.int64)
    if check_range:
        # The merged index of several dims could land in range although one part does not.
        low = _call(lib.ct_lt_scalar, k._h, 0.0)
        high = _call(lib.ct_ge_scalar, k._h, float(size))
        bad = _call(lib.ct_logical_or, low._h, high._h)
        if _call(lib.ct_any, bad._h, 0, ffi.NULL, False).item():
            raise IndexError("an index is out of bounds for a dimension of size %d" % size)
    return k


def _expand_key(t, key):
    if not isinstance(key, tuple):
        key = (key,)
    key = tuple(__import__("numpy").asarray(k) if isinstance(k, (list, tuple)) else k for k in key)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumed(k) for k in key)
    if used > t.ndim:
        raise IndexError("too many indices for tensor of dimension %d" % t.ndim)
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (t.ndim - used))
        else:
            out.append(k)
    return out


def _basic(t, key, advanced):
    """Applies the basic indices; returns the view and [(dim in the view, index)] of the
    advanced ones (ints among them when `advanced`)."""
    v, d, adv = t, 0, []
    for k in key:
        if k is None:
            v = _call(lib.ct_unsqueeze, v._h, d)
            d += 1
        elif isinstance(k, slice):
            size = v.shape[d]
            start, stop, step = k.indices(size) if (k.step is None or k.step > 0) else (0, 0, 0)
            if k.step is not None and k.step <= 0:
                raise _core.error_classes["InvalidArgumentError"]("step must be greater than zero")
            if (start, stop, step) != (0, size, 1):
                v = _call(lib.ct_slice, v._h, d, start, max(stop, start), step)
            d += 1
        elif isinstance(k, numbers.Integral) and not isinstance(k, bool) and not advanced:
            size = v.shape[d]
            i = int(k)
            if not -size <= i < size:
                raise IndexError("index %d is out of range for dimension %d with size %d" % (i, d, size))
            if i < 0:
                i += size
            s = _call(lib.ct_slice, v._h, d, i, i + 1, 1)
            v = _call(lib.ct_squeeze, s._h, d)
        elif _consumed(k) > 1 or (isinstance(k, Tensor) and k.dtype is _core.bool_) or \
                (not isinstance(k, Tensor) and getattr(k, "dtype", None) is not None and k.dtype.kind == "b"):
            import numpy as np
            m = k.numpy() if isinstance(k, Tensor) else np.asarray(k)
            m = m.reshape(1) if m.ndim == 0 else m
            if tuple(m.shape) != v.shape[d:d + m.ndim]:
                raise IndexError("the shape of the mask %s does not match the shape of the indexed tensor %s "
                                 "at dim %d" % (list(m.shape), list(v.shape), d))
            for coords in np.nonzero(m):
                adv.append((d, coords.astype(np.int64)))
                d += 1
        elif isinstance(k, bool):
            raise IndexError("bool scalar indices are not supported")
        else:
            adv.append((d, k))
            d += 1
    return v, adv


def getitem(t, key):
    key = _expand_key(t, key)
    advanced = any(_is_advanced(k) for k in key)
    v, adv = _basic(t, key, advanced)
    if not adv:
        return v if v is not t else _call(lib.ct_view, t._h, t.ndim, ffi.new(_I64, t.shape) if t.ndim else ffi.NULL)
    import numpy as np
    positions = [p for p, _ in adv]
    m = len(adv)
    if positions != list(range(positions[0], positions[0] + m)):
        rest = [i for i in range(v.ndim) if i not in positions]
        v = _call(lib.ct_permute, v._h, ffi.new("int[]", positions + rest))
        q = 0
    else:
        q = positions[0]
    shape = v.shape
    sizes = shape[q:q + m]
    dev = v.device
    idx = []
    for i, (_, k) in enumerate(adv):
        if isinstance(k, Tensor):
            k = k if k.device == dev else k.to(dev)
            idx.append(_device_index(k, sizes[i], check_range=m > 1))
        else:
            idx.append(_from_numpy(_host_index(k, sizes[i], q + i), _core.int64, dev))
    bshape = tuple(np.broadcast_shapes(*[k.shape for k in idx]))
    lin, mult = None, 1
    for i in reversed(range(m)):
        term = idx[i] if mult == 1 else _call(lib.ct_mul_scalar, idx[i]._h, float(mult))
        lin = term if lin is None else _call(lib.ct_add, lin._h, term._h)
        mult *= sizes[i]
    if lin.shape != bshape:
        lin = _call(lib.ct_expand, lin._h, len(bshape), ffi.new(_I64, bshape) if bshape else ffi.NULL)
    merged_shape = shape[:q] + (mult,) + shape[q + m:]
    merged = _call(lib.ct_reshape, v._h, len(merged_shape), ffi.new(_I64, merged_shape))
    n = 1
    for s in bshape:
        n *= s
    flat = _call(lib.ct_reshape, lin._h, 1, ffi.new(_I64, [n]))
    sel = _call(lib.ct_index_select, merged._h, q, flat._h)
    out_shape = shape[:q] + bshape + shape[q + m:]
    return _call(lib.ct_reshape, sel._h, len(out_shape), ffi.new(_I64, out_shape) if out_shape else ffi.NULL)


def setitem(t, key, value):
    """t[key] = value: basic keys write into the view (ct_copy, ct_fill_); a bool mask with a
    scalar or 0-d value is ct_masked_fill written back. Other advanced keys are not supported."""
    key_t = _expand_key(t, key)
    if any(_is_advanced(k) for k in key_t):
        mask = key if isinstance(key, Tensor) else None
        if mask is not None and mask.dtype is _core.bool_ and (
                not isinstance(value, Tensor) or value.numel() == 1):
            if isinstance(value, Tensor):
                value = value.item()
            filled = _call(lib.ct_masked_fill, t._h, mask._h, float(value))
            check(lib.ct_copy(t._h, filled._h))
            return
        raise _core.error_classes["UnsupportedError"](
            "Tensor.__setitem__: only basic indices (ints, slices, None, ...) and a bool mask with a "
            "scalar value are supported")
    v, _ = _basic(t, key_t, False)
    if isinstance(value, Tensor):
        check(lib.ct_copy(v._h, value._h))
    elif isinstance(value, numbers.Number):
        check(lib.ct_fill_(v._h, float(value)))
    else:
        value = _as_operand(value, v)
        check(lib.ct_copy(v._h, value._h))
