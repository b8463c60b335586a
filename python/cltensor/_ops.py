"""The op set under PyTorch's names, as functions (cltensor.exp(x)) and methods (x.exp()).

Each is a direct call of the libcltensor op of the same name (include/cltensor/*.h has the
semantics, which follow PyTorch's)."""
import numbers

from . import _core
from ._core import check, ffi, lib
from ._tensor import (_INT, _I64, _NAN, _PP, Tensor, _as_operand, _call, _dims, _is_scalar, _scalar_tensor,
                      _shape_args, _wrap, values_indices)

__all__ = []


def _export(fn, name=None, method=True):
    name = name or fn.__name__
    __all__.append(name)
    if method:
        setattr(Tensor, name, fn)
    return fn


# ---- elementwise ----

def _unary(cname, name=None):
    cfn = getattr(lib, "ct_" + cname)

    def op(input):
        return _call(cfn, input._h)
    op.__name__ = name or cname
    op.__doc__ = "ct_%s (include/cltensor/elementwise.h)" % cname
    return op


for _n in ("neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign", "isnan", "isinf", "isfinite",
           "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "log1p", "expm1", "tan",
           "atan", "logical_not", "bitwise_not"):
    globals()[_n] = _export(_unary(_n))
negative = _export(_unary("neg", "negative"))
absolute = _export(_unary("abs", "absolute"))


def _binary_fn(cname, scalar=True, rscalar=None):
    cfn = getattr(lib, "ct_" + cname)
    sfn = getattr(lib, "ct_%s_scalar" % cname) if scalar else None
    rfn = getattr(lib, "ct_%s_scalar" % rscalar) if rscalar else None

    def op(input, other):
        if not isinstance(input, Tensor):
            if rfn is not None and _is_scalar(input) and isinstance(other, Tensor):
                return _call(rfn, other._h, float(input))
            input = _as_operand(input, other)
        if isinstance(other, Tensor):
            return _call(cfn, input._h, other._h)
        if sfn is not None and _is_scalar(other):
            return _call(sfn, input._h, float(other))
        other = _as_operand(other, input)
        return _call(cfn, input._h, other._h)
    op.__name__ = cname
    op.__doc__ = "ct_%s (include/cltensor/elementwise.h); either operand may be a Python scalar" % cname
    return op


for _n, _s in (("add", True), ("sub", True), ("mul", True), ("div", True), ("pow", True), ("maximum", True),
               ("minimum", True), ("floor_divide", True), ("remainder", True), ("fmod", False), ("atan2", False),
               ("bitwise_and", False), ("bitwise_or", False), ("bitwise_xor", False), ("eq", True), ("ne", True),
               ("lt", True), ("le", True), ("gt", True), ("ge", True), ("logical_and", False),
               ("logical_or", False)):
    globals()[_n] = _binary_fn(_n, _s)
_add, _sub = globals()["add"], globals()["sub"]


@_export
def add(input, other, alpha=1):
    return _add(input, other if alpha == 1 else other * alpha)


@_export
def sub(input, other, alpha=1):
    return _sub(input, other if alpha == 1 else other * alpha)


for _n in ("mul", "div", "pow", "maximum", "minimum", "floor_divide", "remainder", "fmod", "atan2",
           "bitwise_and", "bitwise_or", "bitwise_xor", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
           "logical_or"):
    _export(globals()[_n], _n)
multiply = _export(globals()["mul"], "multiply")
divide = _export(globals()["div"], "divide")
subtract = _export(globals()["sub"], "subtract")
greater = _export(globals()["gt"], "greater")
less = _export(globals()["lt"], "less")
true_divide = _export(globals()["div"], "true_divide")


@_export
def where(condition, input, other):
    if not isinstance(input, Tensor):
        input = _scalar_tensor(input, condition.device)
    if not isinstance(other, Tensor):
        other = _scalar_tensor(other, condition.device)
    return _call(lib.ct_where, condition._h, input._h, other._h)


@_export
def clamp(input, min=None, max=None):
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = input
        if min is not None:
            out = globals()["maximum"](out, min)
        if max is not None:
            out = globals()["minimum"](out, max)
        return out
    return _call(lib.ct_clamp, input._h, _NAN if min is None else float(min), _NAN if max is None else float(max))


clip = _export(clamp, "clip")


@_export
def clamp_min(input, min):
    return clamp(input, min=min)


@_export
def clamp_max(input, max):
    return clamp(input, max=max)


@_export
def square(input):
    return _call(lib.ct_mul, input._h, input._h)


@_export
def reciprocal(input):
    return _call(lib.ct_rdiv_scalar, input._h, 1.0)


@_export
def lerp(input, end, weight):
    return input + weight * (end - input)


def promote_types(type1, type2):
    out = ffi.new("ct_dtype *")
    check(lib.ct_promote_types(out, _core.as_dtype(type1).ct, _core.as_dtype(type2).ct))
    return _core.from_ct(out[0])


def result_type(a, b):
    return promote_types(a.dtype if isinstance(a, Tensor) else _core.as_dtype(type(a)),
                         b.dtype if isinstance(b, Tensor) else _core.as_dtype(type(b)))


__all__ += ["promote_types", "result_type"]


# ---- reductions ----

def _reduction(cname):
    cfn = getattr(lib, "ct_" + cname)

    def op(input, dim=None, keepdim=False, *, dtype=None):
        if dtype is not None:
            input = input.to(dtype)
        n, dims = _dims(dim)
        return _call(cfn, input._h, n, dims, bool(keepdim))
    op.__name__ = cname
    op.__doc__ = "ct_%s (include/cltensor/reduce.h): over dim (an int, a tuple, None for all)" % cname
    return op


for _n in ("sum", "mean", "prod", "logsumexp", "any", "all"):
    globals()[_n] = _export(_reduction(_n))
amax = _export(_reduction("max"), "amax")
amin = _export(_reduction("min"), "amin")


def _minmax(cname, argname, elementwise):
    cfn, afn, efn = getattr(lib, "ct_" + cname), getattr(lib, "ct_" + argname), elementwise

    def op(input, dim=None, keepdim=False):
        if isinstance(dim, Tensor):
            return globals()[efn](input, dim)
        if dim is None:
            return _call(cfn, input._h, 0, ffi.NULL, False)
        d = ffi.new(_INT, [int(dim)])
        return values_indices(_call(cfn, input._h, 1, d, bool(keepdim)),
                              _call(afn, input._h, int(dim), bool(keepdim)))
    op.__name__ = cname
    op.__doc__ = ("max(x): the largest element; max(x, dim, keepdim): (values, indices); max(x, y): "
                  "the elementwise maximum (torch.max's three forms)")
    return op


max = _export(_minmax("max", "argmax", "maximum"), "max")
min = _export(_minmax("min", "argmin", "minimum"), "min")


@_export
def argmax(input, dim=None, keepdim=False):
    return _call(lib.ct_argmax, input._h, lib.CT_DIM_NONE if dim is None else int(dim), bool(keepdim))


@_export
def argmin(input, dim=None, keepdim=False):
    return _call(lib.ct_argmin, input._h, lib.CT_DIM_NONE if dim is None else int(dim), bool(keepdim))


def _correction(unbiased, correction):
    if correction is not None:
        return int(correction)
    return 0 if unbiased is False else 1


@_export
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    n, dims = _dims(dim)
    return _call(lib.ct_var, input._h, n, dims, _correction(unbiased, correction), bool(keepdim))


@_export
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    n, dims = _dims(dim)
    return _call(lib.ct_std, input._h, n, dims, _correction(unbiased, correction), bool(keepdim))


@_export
def softmax(input, dim, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _call(lib.ct_softmax, input._h, int(dim))


@_export
def log_softmax(input, dim, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _call(lib.ct_log_softmax, input._h, int(dim))


@_export
def cumsum(input, dim, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _call(lib.ct_cumsum, input._h, int(dim))


@_export
def cumprod(input, dim, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _call(lib.ct_cumprod, input._h, int(dim))


@_export
def sort(input, dim=-1, descending=False, stable=True):
    v, i = ffi.new(_PP), ffi.new(_PP)
    check(lib.ct_sort(v, i, input._h, int(dim), bool(descending)))
    return values_indices(_wrap(v[0]), _wrap(i[0]))


@_export
def argsort(input, dim=-1, descending=False, stable=True):
    return _call(lib.ct_argsort, input._h, int(dim), bool(descending))


@_export
def topk(input, k, dim=-1, largest=True, sorted=True):
    v, i = ffi.new(_PP), ffi.new(_PP)
    check(lib.ct_topk(v, i, input._h, int(k), int(dim), bool(largest)))
    return values_indices(_wrap(v[0]), _wrap(i[0]))


# ---- linear algebra ----

@_export
def matmul(input, other):
    return _call(lib.ct_matmul, input._h, other._h)


mm = _export(matmul, "mm")
bmm = _export(matmul, "bmm")
dot = _export(matmul, "dot")


@_export
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    return _call(lib.ct_addmm, input._h, mat1._h, mat2._h, float(beta), float(alpha))


# ---- shapes and views ----

def _shape(shape):
    shape = _shape_args(shape)
    return len(shape), ffi.new(_I64, shape) if shape else ffi.NULL


@_export
def reshape(input, *shape):
    return _call(lib.ct_reshape, input._h, *_shape(shape))


def view(input, *shape):
    return _call(lib.ct_view, input._h, *_shape(shape))


Tensor.view = view


@_export
def flatten(input, start_dim=0, end_dim=-1):
    shape = input.shape
    if not shape:
        return reshape(input, 1)
    s, e = start_dim % len(shape), end_dim % len(shape)
    n = 1
    for v in shape[s:e + 1]:
        n *= v
    return reshape(input, shape[:s] + (n,) + shape[e + 1:])


@_export
def unflatten(input, dim, sizes):
    shape = input.shape
    dim %= len(shape)
    return reshape(input, shape[:dim] + tuple(sizes) + shape[dim + 1:])


@_export
def permute(input, *dims):
    dims = _shape_args(dims)
    if len(dims) != input.ndim:
        raise _core.error_classes["InvalidArgumentError"](
            "permute: %d dims given for a tensor of %d dims" % (len(dims), input.ndim))
    return _call(lib.ct_permute, input._h, ffi.new(_INT, dims) if dims else ffi.NULL)


@_export
def transpose(input, dim0, dim1):
    return _call(lib.ct_transpose, input._h, int(dim0), int(dim1))


swapaxes = _export(transpose, "swapaxes")


def t(input):
    if input.ndim < 2:
        return input
    return transpose(input, 0, 1)


Tensor.t = t
__all__.append("t")
Tensor.T = property(lambda self: self if self.ndim < 2 else permute(self, *reversed(range(self.ndim))))
Tensor.mT = property(lambda self: transpose(self, -2, -1))


@_export
def squeeze(input, dim=None):
    if dim is None:
        out = input
        for d in reversed(range(input.ndim)):
            if input.shape[d] == 1:
                out = _call(lib.ct_squeeze, out._h, d)
        # Nothing to squeeze: still a new view, as PyTorch returns.
        return out if out is not input else _call(lib.ct_view, input._h, *_shape(input.shape))
    if isinstance(dim, (tuple, list)):
        out = input
        for d in sorted((d % input.ndim for d in dim), reverse=True):
            out = _call(lib.ct_squeeze, out._h, d)
        return out
    return _call(lib.ct_squeeze, input._h, int(dim))


@_export
def unsqueeze(input, dim):
    return _call(lib.ct_unsqueeze, input._h, int(dim))


def expand(input, *sizes):
    return _call(lib.ct_expand, input._h, *_shape(sizes))


Tensor.expand = expand
Tensor.expand_as = lambda self, other: expand(self, other.shape)
Tensor.view_as = lambda self, other: view(self, other.shape)
Tensor.reshape_as = lambda self, other: reshape(self, other.shape)
Tensor.type_as = lambda self, other: self.to(other.dtype)


def broadcast_to(input, shape):
    return expand(input, shape)


__all__.append("broadcast_to")


def contiguous(input):
    return _call(lib.ct_contiguous, input._h)


Tensor.contiguous = contiguous


@_export
def clone(input):
    return _call(lib.ct_clone, input._h)


@_export
def narrow(input, dim, start, length):
    if start < 0:
        start += input.shape[dim]
    return _call(lib.ct_slice, input._h, int(dim), int(start), int(start + length), 1)


@_export
def select(input, dim, index):
    size = input.shape[dim]
    if index < 0:
        index += size
    if not 0 <= index < size:
        raise IndexError("select: index %d is out of range for dim %d of size %d" % (index, dim, size))
    s = _call(lib.ct_slice, input._h, int(dim), int(index), int(index) + 1, 1)
    return _call(lib.ct_squeeze, s._h, int(dim))


def cat(tensors, dim=0):
    tensors = list(tensors)
    arr = ffi.new("ct_tensor *[]", [x._h for x in tensors])
    return _call(lib.ct_cat, arr, len(tensors), int(dim))


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    arr = ffi.new("ct_tensor *[]", [x._h for x in tensors])
    return _call(lib.ct_stack, arr, len(tensors), int(dim))


__all__ += ["cat", "concat", "concatenate", "stack"]


@_export
def chunk(input, chunks, dim=0):
    outs = ffi.new("ct_tensor *[]", int(chunks))
    n = ffi.new("int *")
    check(lib.ct_chunk(outs, n, input._h, int(chunks), int(dim)))
    return tuple(_wrap(outs[i]) for i in range(n[0]))


@_export
def split(input, split_size_or_sections, dim=0):
    if isinstance(split_size_or_sections, numbers.Integral):
        size = int(split_size_or_sections)
        extent = input.shape[dim]
        cap = builtins_max(1, -(-extent // size)) if size > 0 else 1
        outs = ffi.new("ct_tensor *[]", cap)
        n = ffi.new("int *")
        check(lib.ct_split(outs, n, input._h, size, int(dim)))
        return tuple(_wrap(outs[i]) for i in range(n[0]))
    out, start = [], 0
    for s in split_size_or_sections:
        out.append(narrow(input, dim, start, s))
        start += s
    if start != input.shape[dim]:
        raise _core.error_classes["InvalidArgumentError"](
            "split: sections sum to %d, dim %d has size %d" % (start, dim, input.shape[dim]))
    return tuple(out)


def unbind(input, dim=0):
    return tuple(select(input, dim, i) for i in range(input.shape[dim]))


Tensor.unbind = unbind
__all__.append("unbind")


@_export
def flip(input, dims):
    if isinstance(dims, numbers.Integral):
        dims = (dims,)
    n, d = _dims(tuple(dims))
    return _call(lib.ct_flip, input._h, n, d)


@_export
def roll(input, shifts, dims=None):
    if dims is None:
        return reshape(roll(flatten(input), shifts, 0), input.shape)
    if isinstance(shifts, numbers.Integral):
        return _call(lib.ct_roll, input._h, int(shifts), int(dims))
    out = input
    for s, d in zip(shifts, dims):
        out = _call(lib.ct_roll, out._h, int(s), int(d))
    return out


def repeat(input, *sizes):
    sizes = _shape_args(sizes)
    return _call(lib.ct_repeat, input._h, len(sizes), ffi.new(_I64, sizes))


Tensor.repeat = repeat


@_export
def tril(input, diagonal=0):
    return _call(lib.ct_tril, input._h, int(diagonal))


@_export
def triu(input, diagonal=0):
    return _call(lib.ct_triu, input._h, int(diagonal))


# ---- indexing ----

@_export
def index_select(input, dim, index):
    return _call(lib.ct_index_select, input._h, int(dim), index._h)


@_export
def gather(input, dim, index):
    return _call(lib.ct_gather, input._h, int(dim), index._h)


@_export
def scatter_add(input, dim, index, src):
    return _call(lib.ct_scatter_add, input._h, int(dim), index._h, src._h)


@_export
def masked_fill(input, mask, value):
    if isinstance(value, Tensor):
        value = value.item()
    return _call(lib.ct_masked_fill, input._h, mask._h, float(value))


def masked_fill_(self, mask, value):
    return self.copy_(masked_fill(self, mask, value))


Tensor.masked_fill_ = masked_fill_


# ---- casts ----

def _cast_method(dt):
    def m(self):
        return self.to(dt)
    return m


for _n, _d in (("float", _core.float32), ("double", _core.float64), ("half", _core.float16),
               ("bfloat16", _core.bfloat16), ("int", _core.int32), ("long", _core.int64),
               ("short", _core.int16), ("bool", _core.bool_), ("byte", _core.uint8), ("char", _core.int8)):
    setattr(Tensor, _n, _cast_method(_d))


def _type(self, dtype=None):
    if dtype is None:
        return "cltensor." + self.dtype.name
    return self.to(dtype)


Tensor.type = _type

import builtins as _builtins  # noqa: E402

builtins_max = _builtins.max
