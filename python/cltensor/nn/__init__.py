"""A small torch.nn: Parameter, Module and the common layers, over cltensor.nn.functional.

Enough for the models PyTorch tutorials build (MLPs, small CNNs, embeddings with layer norm):
parameters are registered by assignment, Module.to() moves them in place (the Parameter objects
stay the same, as in PyTorch; create the optimizer after moving the model), train()/eval()
reach every child, state_dict()/load_state_dict() use PyTorch's names. Initializations follow
PyTorch's defaults (uniform in +-1/sqrt(fan_in) for Linear and Conv2d), drawn from libcltensor's
generator (cltensor.manual_seed), so the values differ from PyTorch's."""
import collections
import math

from .. import _core, _ops
from .._autograd import no_grad
from .._core import lib
from .._tensor import Tensor, _call, ones, rand, randn, zeros
from . import functional
from . import functional as F


class Parameter(Tensor):
    """A tensor that is a module's parameter: a leaf sharing data's memory, requiring grad."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = zeros(0)
        d = _call(lib.ct_detach, data._h)
        p = Tensor.__new__(cls)
        p._h, d._h = d._h, None
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def _swap(self, other):
        """Takes over other's handle (other is left empty): the same Parameter, new data."""
        old, self._h, other._h = self._h, other._h, None
        lib.ct_release(old)


def _uniform(shape, bound):
    return rand(shape) * (2 * bound) - bound


class Module:
    training = True

    def __init__(self):
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign to %s before Module.__init__() call" % name)
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def register_buffer(self, name, tensor, persistent=True):
        object.__setattr__(self, name, tensor)
        self._buffers[name] = tensor

    def register_parameter(self, name, param):
        setattr(self, name, param)

    def add_module(self, name, module):
        setattr(self, name, module)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("%s has no forward()" % type(self).__name__)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- traversal ----
    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(prefix + ("." if prefix else "") + name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def children(self):
        return iter(m for m in self._modules.values() if m is not None)

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield mp + ("." if mp else "") + name, p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix=""):
        for mp, m in self.named_modules(prefix):
            for name, b in m._buffers.items():
                if b is not None:
                    yield mp + ("." if mp else "") + name, b

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    # ---- modes ----
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g is not None:
                    g.zero_()

    # ---- moving ----
    def to(self, *args, **kwargs):
        """Moves (and with a dtype casts the float) parameters and buffers in place."""
        for m in self.modules():
            for name, p in list(m._parameters.items()):
                if p is None:
                    continue
                new = p.to(*args, **kwargs) if p.is_floating_point() else p.to(
                    *[a for a in args if not isinstance(a, _core.dtype)], device=kwargs.get("device"))
                if new is not p:
                    d = new.detach()
                    rg = p.requires_grad
                    p._swap(d)
                    if rg:
                        p.requires_grad_(True)
            for name, b in list(m._buffers.items()):
                if b is None:
                    continue
                new = b.to(*args, **kwargs) if b.is_floating_point() else b.to(
                    *[a for a in args if not isinstance(a, _core.dtype)], device=kwargs.get("device"))
                if new is not b:
                    m._buffers[name] = new
                    object.__setattr__(m, name, new)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("gpu" if device is None else device)

    def float(self):
        return self.to(_core.float32)

    def double(self):
        return self.to(_core.float64)

    def half(self):
        return self.to(_core.float16)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- checkpoints ----
    def state_dict(self):
        out = collections.OrderedDict()
        for name, p in self.named_parameters():
            out[name] = p.detach()
        for name, b in self.named_buffers():
            out[name] = b
        return out

    def load_state_dict(self, state_dict, strict=True):
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise _core.error_classes["InvalidArgumentError"](
                "load_state_dict: missing keys %s, unexpected keys %s" % (missing, unexpected))
        with no_grad():
            for k, v in state_dict.items():
                if k in own:
                    own[k].copy_(v)
        return missing, unexpected

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [type(self).__name__ + "(" + self.extra_repr()]
        for name, m in self._modules.items():
            lines.append("  (%s): %s" % (name, repr(m).replace("\n", "\n  ")))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features) if in_features else 0
        self.weight = Parameter(_uniform((out_features, in_features), bound).to(device=device, dtype=dtype))
        self.bias = Parameter(_uniform((out_features,), bound).to(device=device, dtype=dtype)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                             self.bias is not None)


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, device=None, dtype=None):
        super().__init__()
        k = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        fan_in = in_channels // groups * k[0] * k[1]
        bound = 1 / math.sqrt(fan_in) if fan_in else 0
        self.weight = Parameter(_uniform((out_channels, in_channels // groups) + k, bound).to(device=device,
                                                                                                dtype=dtype))
        self.bias = Parameter(_uniform((out_channels,), bound).to(device=device, dtype=dtype)) if bias else None

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = Parameter(randn(num_embeddings, embedding_dim).to(device=device, dtype=dtype))

    def forward(self, x):
        return F.embedding(x, self.weight)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(ones(self.normalized_shape).to(device=device, dtype=dtype)) \
            if elementwise_affine else None
        self.bias = Parameter(zeros(self.normalized_shape).to(device=device, dtype=dtype)) \
            if elementwise_affine and bias else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class _BatchNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = Parameter(ones(num_features).to(device=device, dtype=dtype)) if affine else None
        self.bias = Parameter(zeros(num_features).to(device=device, dtype=dtype)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features).to(device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features).to(device=device, dtype=dtype))
        else:
            self.running_mean = self.running_var = None

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or self.running_mean is None, self.momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    pass


class BatchNorm2d(_BatchNorm):
    pass


def _simple(name, fn, doc):
    def forward(self, x):
        return fn(x)
    return type(name, (Module,), {"forward": forward, "__doc__": doc,
                                  "__init__": lambda self, *a, **k: Module.__init__(self)})


ReLU = _simple("ReLU", F.relu, "F.relu as a module")
GELU = type("GELU", (Module,), {
    "__init__": lambda self, approximate="none": (Module.__init__(self),
                                                  object.__setattr__(self, "approximate", approximate))[0],
    "forward": lambda self, x: F.gelu(x, self.approximate)})
SiLU = _simple("SiLU", F.silu, "F.silu as a module")
Tanh = _simple("Tanh", F.tanh, "F.tanh as a module")
Sigmoid = _simple("Sigmoid", F.sigmoid, "F.sigmoid as a module")
Identity = _simple("Identity", lambda x: x, "the identity")


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, x):
        return F.softmax(x, self.dim)


class LogSoftmax(Softmax):
    def forward(self, x):
        return F.log_softmax(x, self.dim)


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return _ops.flatten(x, self.start_dim, self.end_dim)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(MaxPool2d):
    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], collections.OrderedDict):
            modules = modules[0].items()
        else:
            modules = ((str(i), m) for i, m in enumerate(modules))
        for name, m in modules:
            setattr(self, name, m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        setattr(self, str(len(self._modules)), m)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class CrossEntropyLoss(Module):
    def __init__(self, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class NLLLoss(CrossEntropyLoss):
    def forward(self, input, target):
        return F.nll_loss(input, target, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


__all__ = ["functional", "Parameter", "Module", "Linear", "Conv2d", "Embedding", "LayerNorm", "BatchNorm1d",
           "BatchNorm2d", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Identity", "Softmax", "LogSoftmax",
           "Dropout", "Flatten", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Sequential", "ModuleList",
           "CrossEntropyLoss", "NLLLoss", "MSELoss"]
