"""cltensor.Tensor: one reference to a ct_tensor, with PyTorch's methods and operators."""
import collections
import numbers

from . import _core, _fast
from ._core import check, ffi, lib, raise_status

_PP = ffi.typeof("ct_tensor **")
_I64 = ffi.typeof("int64_t[]")
_INT = ffi.typeof("int[]")
_NAN = float("nan")

values_indices = collections.namedtuple("values_indices", ["values", "indices"])


def _wrap(h):
    t = Tensor.__new__(Tensor)
    t._h = h
    return t


def _call(fn, *args):
    """fn(&out, *args) -> a Tensor owning out's reference, or the status's exception."""
    out = ffi.new(_PP)
    st = fn(out, *args)
    if st:
        raise_status(st)
    return _wrap(out[0])


def _is_scalar(x):
    t = type(x)
    if t is float or t is int:  # the common case, before the ABC check
        return True
    return isinstance(x, numbers.Number) and not isinstance(x, complex)


def _shape_args(size):
    """zeros(2, 3), zeros((2, 3)) and zeros([2, 3]) alike."""
    if len(size) == 1 and not isinstance(size[0], numbers.Integral):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _dims(dim):
    if dim is None:
        return 0, ffi.NULL
    if isinstance(dim, numbers.Integral):
        return 1, ffi.new(_INT, [int(dim)])
    dim = [int(d) for d in dim]
    return len(dim), ffi.new(_INT, dim)


def _scalar_tensor(s, dev):
    """A 0-d tensor for a Python scalar on the other operand's device: bool, int64 or float32 (the
    dtype the scalar rule of elementwise.h gives a Python scalar), so that it promotes as a
    scalar does."""
    if isinstance(s, bool):
        t = _core.bool_
    elif isinstance(s, numbers.Integral):
        t = _core.int64
    else:
        t = _core.float32
    return _call(lib.ct_full, dev.ptr, t.ct, 0, ffi.NULL, float(s))


def _as_operand(x, like):
    if isinstance(x, Tensor):
        return x
    if _is_scalar(x):
        return _scalar_tensor(x, like.device)
    return tensor(x, device=like.device)


def _binary(name, scalar):
    """The operator self OP other through the fast forms ct_py_<name> and ct_py_<name>_scalar
    (cltensor_build.py): the result comes back as the return value, so the call needs no
    out-parameter cell; _call and _wrap are inlined here. The operators are the calls a Python
    program makes most, and each Python-level step costs a sizeable part of libcltensor's own
    call (python/bench/small_op.py). (+ - * / @ between two tensors don't come here: _fast.c's
    TensorBase does them in C, and calls these for the other operands.)"""
    fast = getattr(lib, "ct_py_" + name)
    fast_scalar = getattr(lib, "ct_py_%s_scalar" % name) if scalar else None
    obj_new, status = _fast.TensorBase.__new__, lib.ct_py_status

    def op(self, other):
        if isinstance(other, Tensor):
            h = fast(self._h, other._h)
        elif fast_scalar is not None and _is_scalar(other):
            h = fast_scalar(self._h, float(other))
        elif other is None:
            return NotImplemented  # t == None is False, t + None a TypeError, as in PyTorch
        else:
            other = _as_operand(other, self)  # bound: a dropped temporary releases its handle
            h = fast(self._h, other._h)
        if not h:  # a NULL pointer is false
            raise_status(status())
        t = obj_new(Tensor)
        t._h = h
        return t
    return op


def _rbinary(fn, fn_rscalar):
    """other OP self, other not a Tensor."""
    def op(self, other):
        if other is None:
            return NotImplemented
        if fn_rscalar is not None and _is_scalar(other):
            return _call(fn_rscalar, self._h, float(other))
        other = _as_operand(other, self)
        return _call(fn, other._h, self._h)
    return op


def _inplace(fn_out, fn_scalar_out):
    def op(self, other):
        if isinstance(other, Tensor):
            check(fn_out(self._h, self._h, other._h))
        elif fn_scalar_out is not None and _is_scalar(other):
            check(fn_scalar_out(self._h, self._h, float(other)))
        else:
            other = _as_operand(other, self)
            check(fn_out(self._h, self._h, other._h))
        return self
    return op


class Tensor(_fast.TensorBase):
    """A tensor on an OpenCL device, owning one reference to a ct_tensor.

    Made by cltensor.tensor(), zeros(), the ops, ...; never by calling Tensor() with data (use
    cltensor.tensor). The reference is released when the object is collected, in any order, also
    after cltensor.shutdown() (which libcltensor allows: only host memory is freed then).

    The C base (cltensor/_fast.c) holds the reference (._h is the cffi pointer to it; assigning
    ._h hands the object another reference without releasing the old one), releases it in its
    deallocator, supports weak references, and does + - * / @ between two tensors in C; the
    other operands of those five go to the Python operators in _BINARY_FALLBACKS below."""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        raise TypeError("cltensor.Tensor is not constructed directly: use cltensor.tensor(data), "
                        "cltensor.zeros(shape), ...")

    # ---- properties ----
    @property
    def shape(self):
        h = self._h
        return tuple(lib.ct_tensor_shape(h)[0:lib.ct_tensor_ndim(h)])

    def size(self, dim=None):
        s = self.shape
        return s if dim is None else s[dim]

    def stride(self, dim=None):
        s = tuple(lib.ct_tensor_strides(self._h)[0:lib.ct_tensor_ndim(self._h)])
        return s if dim is None else s[dim]

    def storage_offset(self):
        return lib.ct_tensor_offset(self._h)

    @property
    def ndim(self):
        return lib.ct_tensor_ndim(self._h)

    def dim(self):
        return lib.ct_tensor_ndim(self._h)

    def numel(self):
        return lib.ct_numel(self._h)

    nelement = numel

    def element_size(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return lib.ct_tensor_nbytes(self._h)

    @property
    def dtype(self):
        return _core.from_ct(lib.ct_tensor_dtype(self._h))

    @property
    def device(self):
        return _core._device_from_ptr(lib.ct_tensor_device(self._h))

    @property
    def is_cuda(self):
        return False

    def is_contiguous(self):
        return bool(lib.ct_tensor_is_contiguous(self._h))

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def __len__(self):
        if lib.ct_tensor_ndim(self._h) == 0:
            raise TypeError("len() of a 0-d tensor")
        return lib.ct_tensor_shape(self._h)[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self)))

    # ---- autograd ----
    @property
    def requires_grad(self):
        return bool(lib.ct_requires_grad(self._h))

    @requires_grad.setter
    def requires_grad(self, on):
        check(lib.ct_set_requires_grad(self._h, bool(on)))

    def requires_grad_(self, requires_grad=True):
        check(lib.ct_set_requires_grad(self._h, bool(requires_grad)))
        return self

    @property
    def is_leaf(self):
        return bool(lib.ct_is_leaf(self._h))

    @property
    def grad(self):
        out = ffi.new(_PP)
        check(lib.ct_grad(out, self._h))
        return None if out[0] == ffi.NULL else _wrap(out[0])

    @grad.setter
    def grad(self, value):
        if value is not None:
            raise _core.error_classes["UnsupportedError"](
                "Tensor.grad: only None can be assigned (libcltensor owns the gradient)")
        check(lib.ct_grad_clear(self._h))

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """ct_backward: accumulates into the .grad of every leaf that requires grad. The graph is
        freed (retain_graph and create_graph are not supported)."""
        if retain_graph or create_graph:
            raise _core.error_classes["UnsupportedError"](
                "Tensor.backward: retain_graph and create_graph are not supported by libcltensor")
        g = None if gradient is None else _as_operand(gradient, self)
        check(lib.ct_backward(self._h, ffi.NULL if g is None else g._h))

    def detach(self):
        return _call(lib.ct_detach, self._h)

    # ---- the copy module ----
    def _like(self, t):
        """t (a new tensor) as self's class (a Parameter stays one) with self's requires_grad."""
        if type(self) is not Tensor:
            return type(self)(t, self.requires_grad)
        return t.requires_grad_(True) if self.requires_grad else t

    def __copy__(self):
        """copy.copy: a new tensor over the same memory (PyTorch's copy.copy shares the storage
        too), detached from the graph, with self's class and requires_grad."""
        return self._like(self.detach())

    def __deepcopy__(self, memo):
        """copy.deepcopy: a new leaf holding a copy of the elements, with self's class and
        requires_grad (copy.deepcopy(model) copies every Parameter once, shared ones stay shared).
        As PyTorch: only leaves (a non-leaf is RuntimeError). The gradient is not copied."""
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol")
        detached = self.detach()  # held until the clone is made: its handle is released with it
        out = memo[id(self)] = self._like(_call(lib.ct_clone, detached._h))
        return out

    @property
    def data(self):
        return _call(lib.ct_detach, self._h)

    # ---- moving data ----
    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(other_tensor), with keywords device=,
        dtype=, copy=. Returns self when nothing changes (PyTorch's rule)."""
        dev = kwargs.pop("device", None)
        dt = kwargs.pop("dtype", None)
        copy = kwargs.pop("copy", False)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError("Tensor.to: unexpected keywords %s" % sorted(kwargs))
        for a in args:
            if isinstance(a, Tensor):
                dev, dt = a.device, a.dtype
            elif isinstance(a, _core.dtype) or (isinstance(a, str) and a in _core._by_name):
                dt = a
            elif isinstance(a, (str, _core.device)):
                dev = a
            else:
                raise TypeError("Tensor.to: unexpected argument %r" % (a,))
        t = self
        if dt is not None:
            dt = _core.as_dtype(dt)
            if dt is not t.dtype:
                t = _call(lib.ct_cast, t._h, dt.ct)
        if dev is not None:
            dev = _core.device(dev)
            if dev != t.device:
                t = _call(lib.ct_to_device, t._h, dev.ptr)
        if copy and t is self:
            t = _call(lib.ct_clone, self._h)
        return t

    def cpu(self):
        """The tensor on the OpenCL CPU device ("cpu"), as PyTorch's .cpu() moves it to the CPU;
        where OpenCL has no CPU device, the tensor itself (it stays where it is). Either way
        .numpy() and .tolist() then bring it to host memory, so x.cpu().numpy() works
        everywhere."""
        cpu = _core.cpu_device()
        return self if cpu is None else self.to(cpu)

    def cuda(self, device=None):
        """The tensor on a GPU ("gpu", or "gpu:N")."""
        return self.to(_core.device("gpu" if device is None else "gpu:%d" % device
                                    if isinstance(device, int) else device))

    def numpy(self, force=False):
        """A NumPy copy of the elements (blocking; bfloat16 comes back as float32)."""
        import numpy as np
        t = self
        if t.dtype is _core.bfloat16:
            t = _call(lib.ct_cast, t._h, lib.CT_F32)
        arr = np.empty(t.shape, dtype=t.dtype.numpy_dtype)
        if arr.nbytes:
            check(lib.ct_to_host(t._h, ffi.from_buffer(arr), arr.nbytes))
        return arr

    def __array__(self, dtype=None, copy=None):
        """NumPy 2's protocol: always a copy (the elements live in device memory), so copy=False
        raises ValueError as NumPy 2 asks."""
        if copy is False:
            raise ValueError("cltensor.Tensor: the elements are in device memory; a NumPy array "
                             "of them is always a copy (copy=False cannot be honoured)")
        arr = self.numpy()
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        return arr

    def item(self):
        if lib.ct_numel(self._h) != 1:
            raise _core.error_classes["InvalidArgumentError"](
                "Tensor.item: a tensor of %d elements cannot be converted to a Python scalar"
                % lib.ct_numel(self._h))
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.dtype is _core.bool_:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if lib.ct_numel(self._h) != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __repr__(self):
        if self._h is None or self._h == ffi.NULL:
            return "tensor(<released by cltensor.shutdown()>)"
        needed = ffi.new("size_t *")
        buf = ffi.new("char[]", 256)
        st = lib.ct_format(buf, 256, needed, self._h)
        if st and needed[0] >= 256:
            buf = ffi.new("char[]", needed[0] + 1)
            st = lib.ct_format(buf, needed[0] + 1, needed, self._h)
        check(st)
        return ffi.string(buf).decode("utf-8", "replace")

    __str__ = __repr__

    __hash__ = object.__hash__

    # ---- DLPack ----
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        from . import _dlpack
        return _dlpack.export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        from . import _dlpack
        return _dlpack.device_of(self)

    # ---- operators ----
    # + - * / @ and their reflected forms are TensorBase's (C) slots: defining __add__ or
    # __radd__ here would replace the C slot for every call. Their Python forms are in
    # _BINARY_FALLBACKS.
    __floordiv__ = _binary("floor_divide", True)
    __rfloordiv__ = _rbinary(lib.ct_floor_divide, None)
    __mod__ = _binary("remainder", True)
    __rmod__ = _rbinary(lib.ct_remainder, None)
    __pow__ = _binary("pow", True)
    __rpow__ = _rbinary(lib.ct_pow, lib.ct_rpow_scalar)
    __and__ = _binary("bitwise_and", False)
    __rand__ = _rbinary(lib.ct_bitwise_and, None)
    __or__ = _binary("bitwise_or", False)
    __ror__ = _rbinary(lib.ct_bitwise_or, None)
    __xor__ = _binary("bitwise_xor", False)
    __rxor__ = _rbinary(lib.ct_bitwise_xor, None)
    __eq__ = _binary("eq", True)
    __ne__ = _binary("ne", True)
    __lt__ = _binary("lt", True)
    __le__ = _binary("le", True)
    __gt__ = _binary("gt", True)
    __ge__ = _binary("ge", True)

    __iadd__ = _inplace(lib.ct_add_out, lib.ct_add_scalar_out)
    __isub__ = _inplace(lib.ct_sub_out, lib.ct_sub_scalar_out)
    __imul__ = _inplace(lib.ct_mul_out, lib.ct_mul_scalar_out)
    __itruediv__ = _inplace(lib.ct_div_out, lib.ct_div_scalar_out)
    __ipow__ = _inplace(lib.ct_pow_out, lib.ct_pow_scalar_out)
    __ifloordiv__ = _inplace(lib.ct_floor_divide_out, lib.ct_floor_divide_scalar_out)
    __imod__ = _inplace(lib.ct_remainder_out, lib.ct_remainder_scalar_out)
    __iand__ = _inplace(lib.ct_bitwise_and_out, None)
    __ior__ = _inplace(lib.ct_bitwise_or_out, None)
    __ixor__ = _inplace(lib.ct_bitwise_xor_out, None)
    add_ = __iadd__
    sub_ = __isub__
    mul_ = __imul__
    div_ = __itruediv__
    pow_ = __ipow__

    def __neg__(self):
        return _call(lib.ct_neg, self._h)

    def __pos__(self):
        return self

    def __abs__(self):
        return _call(lib.ct_abs, self._h)

    def __invert__(self):
        return _call(lib.ct_bitwise_not, self._h)

    # ---- indexing ----
    def __getitem__(self, key):
        from ._indexing import getitem
        return getitem(self, key)

    def __setitem__(self, key, value):
        from ._indexing import setitem
        setitem(self, key, value)

    # ---- in-place ----
    def fill_(self, value):
        if isinstance(value, Tensor):
            value = value.item()
        check(lib.ct_fill_(self._h, float(value)))
        return self

    def zero_(self):
        check(lib.ct_zero_(self._h))
        return self

    def copy_(self, src, non_blocking=False):
        src = _as_operand(src, self)
        check(lib.ct_copy(self._h, src._h))
        return self

    def clamp_(self, min=None, max=None):
        check(lib.ct_clamp_out(self._h, self._h, _NAN if min is None else float(min),
                               _NAN if max is None else float(max)))
        return self


# The operators TensorBase's C slots call for what they leave to Python (a scalar, an array, None,
# a tensor without a handle): (self OP other, other OP self), as the class defined them before.
_BINARY_FALLBACKS = {
    "add": (_binary("add", True), _rbinary(lib.ct_add, lib.ct_add_scalar)),
    "sub": (_binary("sub", True), _rbinary(lib.ct_sub, lib.ct_rsub_scalar)),
    "mul": (_binary("mul", True), _rbinary(lib.ct_mul, lib.ct_mul_scalar)),
    "truediv": (_binary("div", True), _rbinary(lib.ct_div, lib.ct_rdiv_scalar)),
    "matmul": (_binary("matmul", False), _rbinary(lib.ct_matmul, None)),
}
_fast.setup(Tensor, ffi.typeof("ct_tensor *"), raise_status, _BINARY_FALLBACKS)


# ---- creation ----------------------------------------------------------------------------------

def _from_numpy(arr, dt, dev):
    """A tensor of dtype dt on dev from a NumPy array (copied)."""
    import numpy as np
    if dt is _core.bfloat16:
        t = _from_numpy(arr, _core.float32, dev)
        return _call(lib.ct_cast, t._h, lib.CT_BF16)
    arr = np.asarray(arr, dtype=dt.numpy_dtype, order="C")  # (ascontiguousarray makes 0-d 1-d)
    shape = ffi.new(_I64, arr.shape) if arr.ndim else ffi.NULL
    data = ffi.from_buffer(arr) if arr.size else ffi.NULL
    return _call(lib.ct_from_host, dev.ptr, dt.ct, arr.ndim, shape, data)


def _default_dtype_for(arr, explicit_numpy):
    kind = arr.dtype.kind
    if kind == "b":
        return _core.bool_
    if explicit_numpy:
        return _core.as_dtype(arr.dtype)
    if kind in "iu":
        return _core.int64
    if kind == "f":
        return _core.float32
    raise TypeError("cltensor.tensor: can't make a tensor of %s data" % arr.dtype)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of data (nested lists, scalars, NumPy arrays, tensors).
    dtype as PyTorch infers it: Python floats give float32, ints int64, bools bool; a NumPy
    array keeps its dtype. device: libcltensor's default device when None (default_device())."""
    import numpy as np
    if isinstance(data, Tensor):
        t = data.detach()
        t = _call(lib.ct_clone, t._h)
        if dtype is not None or device is not None:
            t = t.to(device=device, dtype=dtype)
    else:
        explicit = isinstance(data, (np.ndarray, np.generic))
        arr = np.asarray(data)
        dt = _core.as_dtype(dtype) if dtype is not None else _default_dtype_for(arr, explicit)
        t = _from_numpy(arr, dt, _core.as_device(device))
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None):
    """data itself when it is a tensor of that dtype and device, else tensor(data, ...)."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr):
    """A tensor with a copy of arr's elements and its dtype, on the default device. (PyTorch
    shares the array's memory; a device tensor cannot.)"""
    import numpy as np
    if not isinstance(arr, np.ndarray):
        raise TypeError("from_numpy: expected a numpy.ndarray, got %s" % type(arr).__name__)
    return _from_numpy(arr, _core.as_dtype(arr.dtype), _core.default_device())


def _make(fn, size, dtype, device, requires_grad, *extra):
    size = _shape_args(size)
    dt = _core.float32 if dtype is None else _core.as_dtype(dtype)
    dev = _core.as_device(device)
    t = _call(fn, dev.ptr, dt.ct, len(size), ffi.new(_I64, size) if size else ffi.NULL, *extra)
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _make(lib.ct_zeros, size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _make(lib.ct_ones, size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _make(lib.ct_empty, size, dtype, device, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Uniform [0, 1) from libcltensor's Philox generator (manual_seed sets it)."""
    if generator is not None:
        raise _core.error_classes["UnsupportedError"]("rand: generator= is not supported")
    return _make(lib.ct_rand, size, dtype, device, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    if generator is not None:
        raise _core.error_classes["UnsupportedError"]("randn: generator= is not supported")
    return _make(lib.ct_randn, size, dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = _core.bool_ if isinstance(fill_value, bool) else \
            _core.int64 if isinstance(fill_value, numbers.Integral) else _core.float32
    size = _shape_args((size,)) if not isinstance(size, numbers.Integral) else (int(size),)
    return _make(lib.ct_full, size, dtype, device, requires_grad, float(fill_value))


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = _core.int64 if ints else _core.float32
    dt = _core.as_dtype(dtype)
    t = _call(lib.ct_arange, _core.as_device(device).ptr, dt.ct, float(start), float(end), float(step))
    if requires_grad:
        t.requires_grad_(True)
    return t


def linspace(start, end, steps, dtype=None, device=None):
    dt = _core.float32 if dtype is None else _core.as_dtype(dtype)
    return _call(lib.ct_linspace, _core.as_device(device).ptr, dt.ct, float(start), float(end), int(steps))


def eye(n, m=None, dtype=None, device=None):
    dt = _core.float32 if dtype is None else _core.as_dtype(dtype)
    return _call(lib.ct_eye, _core.as_device(device).ptr, dt.ct, int(n), int(n if m is None else m))


def randint(low, high=None, size=None, dtype=None, device=None):
    """randint(high, size) or randint(low, high, size), as torch.randint (int64 by default)."""
    if size is None:
        low, high, size = 0, low, high
    size = _shape_args((size,))
    dt = _core.int64 if dtype is None else _core.as_dtype(dtype)
    return _call(lib.ct_randint, _core.as_device(device).ptr, dt.ct, int(low), int(high), len(size),
                 ffi.new(_I64, size) if size else ffi.NULL)


def _like(fn):
    def make(input, dtype=None, device=None, requires_grad=False):
        if dtype is None and device is None:
            t = _call(fn, input._h)
        else:
            t = zeros(input.shape, dtype=dtype or input.dtype, device=device or input.device)
            if fn is lib.ct_ones_like:
                t.fill_(1)
        if requires_grad:
            t.requires_grad_(True)
        return t
    return make


zeros_like = _like(lib.ct_zeros_like)
ones_like = _like(lib.ct_ones_like)
empty_like = _like(lib.ct_empty_like)


def full_like(input, fill_value, dtype=None, device=None):
    return full(input.shape, fill_value, dtype=dtype or input.dtype, device=device or input.device)


def rand_like(input, dtype=None, device=None):
    return rand(input.shape, dtype=dtype or input.dtype, device=device or input.device)


def randn_like(input, dtype=None, device=None):
    return randn(input.shape, dtype=dtype or input.dtype, device=device or input.device)


def manual_seed(seed):
    """Seeds libcltensor's global Philox state (ct_manual_seed)."""
    lib.ct_manual_seed(int(seed) & 0xFFFFFFFFFFFFFFFF)


def is_tensor(obj):
    return isinstance(obj, Tensor)

