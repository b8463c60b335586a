"""torch.nn.functional's ops over libcltensor's nn ops (include/cltensor/nn.h, elementwise.h,
reduce.h, linalg.h): the same names, arguments and defaults."""
import math
import numbers

from .. import _core
from .._core import ffi, lib
from .._tensor import _I64, _NAN, _call
from .._ops import log_softmax, softmax  # noqa: F401  (F.softmax(x, dim), F.log_softmax(x, dim))

_REDUCTIONS = {"none": lib.CT_REDUCTION_NONE, "mean": lib.CT_REDUCTION_MEAN, "sum": lib.CT_REDUCTION_SUM}


def _pair(v, name):
    if isinstance(v, numbers.Integral):
        return ffi.new("int[2]", [int(v), int(v)])
    v = tuple(int(x) for x in v)
    if len(v) != 2:
        raise _core.error_classes["InvalidArgumentError"]("%s: expected an int or 2 ints, got %r" % (name, v))
    return ffi.new("int[2]", v)


def _reduction(reduction):
    try:
        return _REDUCTIONS[reduction]
    except KeyError:
        raise _core.error_classes["InvalidArgumentError"](
            "reduction must be 'none', 'mean' or 'sum', got %r" % (reduction,)) from None


def relu(input, inplace=False):
    return _call(lib.ct_relu, input._h)


def gelu(input, approximate="none"):
    if approximate == "tanh":
        return _call(lib.ct_gelu_tanh, input._h)
    if approximate != "none":
        raise _core.error_classes["InvalidArgumentError"]("gelu: approximate must be 'none' or 'tanh'")
    return _call(lib.ct_gelu, input._h)


def silu(input, inplace=False):
    return _call(lib.ct_silu, input._h)


def sigmoid(input):
    return _call(lib.ct_sigmoid, input._h)


def tanh(input):
    return _call(lib.ct_tanh, input._h)


def softplus(input, beta=1.0, threshold=20.0):
    if beta != 1 or threshold != 20:
        raise _core.error_classes["UnsupportedError"]("softplus: only beta=1, threshold=20 (the defaults)")
    return _call(lib.ct_softplus, input._h)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _call(lib.ct_leaky_relu, input._h, float(negative_slope))


def linear(input, weight, bias=None):
    return _call(lib.ct_linear, input._h, weight._h, ffi.NULL if bias is None else bias._h)


def _conv_padding(padding, weight, dilation, nd):
    if padding == "valid":
        return 0
    if padding == "same":
        ks = weight.shape[2:]
        dil = (dilation,) * nd if isinstance(dilation, numbers.Integral) else tuple(dilation)
        pads = []
        for k, d in zip(ks, dil):
            total = d * (k - 1)
            if total % 2:
                raise _core.error_classes["UnsupportedError"](
                    "padding='same' needs an even total padding here (an odd kernel extent)")
            pads.append(total // 2)
        return pads[0] if nd == 1 else tuple(pads)
    return padding


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    padding = _conv_padding(padding, weight, dilation, 2)
    return _call(lib.ct_conv2d, input._h, weight._h, ffi.NULL if bias is None else bias._h,
                 _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation"), int(groups))


def _one(v, name):
    if isinstance(v, numbers.Integral):
        return int(v)
    v = tuple(v)
    if len(v) != 1:
        raise _core.error_classes["InvalidArgumentError"]("%s: expected an int or 1 int, got %r" % (name, v))
    return int(v[0])


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    padding = _conv_padding(padding, weight, dilation, 1)
    return _call(lib.ct_conv1d, input._h, weight._h, ffi.NULL if bias is None else bias._h,
                 _one(stride, "stride"), _one(padding, "padding"), _one(dilation, "dilation"), int(groups))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if dilation not in (1, (1, 1)) or ceil_mode or return_indices:
        raise _core.error_classes["UnsupportedError"](
            "max_pool2d: dilation, ceil_mode and return_indices are not supported")
    return _call(lib.ct_max_pool2d, input._h, _pair(kernel_size, "kernel_size"),
                 ffi.NULL if stride is None else _pair(stride, "stride"), _pair(padding, "padding"))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if ceil_mode or not count_include_pad or divisor_override is not None:
        raise _core.error_classes["UnsupportedError"](
            "avg_pool2d: only ceil_mode=False, count_include_pad=True, divisor_override=None")
    return _call(lib.ct_avg_pool2d, input._h, _pair(kernel_size, "kernel_size"),
                 ffi.NULL if stride is None else _pair(stride, "stride"), _pair(padding, "padding"))


def adaptive_avg_pool2d(input, output_size):
    if isinstance(output_size, numbers.Integral):
        output_size = (output_size, output_size)
    return _call(lib.ct_adaptive_avg_pool2d, input._h, ffi.new("int64_t[2]", [int(v) for v in output_size]))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    return _call(lib.ct_layer_norm, input._h, len(tuple(normalized_shape)),
                 ffi.NULL if weight is None else weight._h, ffi.NULL if bias is None else bias._h, float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    return _call(lib.ct_rms_norm, input._h, len(tuple(normalized_shape)),
                 ffi.NULL if weight is None else weight._h, _NAN if eps is None else float(eps))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    n = ffi.NULL
    return _call(lib.ct_batch_norm, input._h, n if running_mean is None else running_mean._h,
                 n if running_var is None else running_var._h, n if weight is None else weight._h,
                 n if bias is None else bias._h, bool(training), float(momentum), float(eps))


def dropout(input, p=0.5, training=True, inplace=False):
    return _call(lib.ct_dropout, input._h, float(p), bool(training))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if dropout_p:
        raise _core.error_classes["UnsupportedError"]("scaled_dot_product_attention: dropout_p must be 0")
    return _call(lib.ct_scaled_dot_product_attention, query._h, key._h, value._h,
                 ffi.NULL if attn_mask is None else attn_mask._h, bool(is_causal),
                 _NAN if scale is None else float(scale))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    if weight is not None:
        raise _core.error_classes["UnsupportedError"]("cross_entropy: class weights are not supported")
    return _call(lib.ct_cross_entropy, input._h, target._h, int(ignore_index), float(label_smoothing),
                 _reduction(reduction))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    if weight is not None:
        raise _core.error_classes["UnsupportedError"]("nll_loss: class weights are not supported")
    return _call(lib.ct_nll_loss, input._h, target._h, int(ignore_index), _reduction(reduction))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _call(lib.ct_mse_loss, input._h, target._h, _reduction(reduction))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise _core.error_classes["UnsupportedError"]("embedding: max_norm, scale_grad_by_freq and sparse "
                                                      "are not supported")
    return _call(lib.ct_embedding, weight._h, input._h)


_PAD_MODES = {"constant": lib.CT_PAD_CONSTANT, "reflect": lib.CT_PAD_REFLECT, "replicate": lib.CT_PAD_REPLICATE}


def pad(input, pad, mode="constant", value=None):
    pad = [int(v) for v in pad]
    if mode not in _PAD_MODES:
        raise _core.error_classes["UnsupportedError"]("pad: mode %r is not supported" % (mode,))
    return _call(lib.ct_pad, input._h, len(pad), ffi.new(_I64, pad), _PAD_MODES[mode],
                 0.0 if value is None else float(value))


def one_hot(tensor, num_classes=-1):
    from .._ops import eq, unsqueeze
    from .._tensor import arange
    if num_classes < 0:
        num_classes = int(tensor.max().item()) + 1
    classes = arange(num_classes, device=tensor.device)
    return eq(unsqueeze(tensor, -1), classes).long()


def normalize(input, p=2.0, dim=1, eps=1e-12):
    if p != 2:
        raise _core.error_classes["UnsupportedError"]("normalize: only p=2")
    norm = (input * input).sum(dim, keepdim=True).sqrt().clamp(min=eps)
    return input / norm


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("math", "numbers", "ffi", "lib")]
del math
