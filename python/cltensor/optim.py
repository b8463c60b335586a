"""torch.optim's SGD, Adam and AdamW over libcltensor's fused optimizers (include/cltensor/optim.h):
the same formulas, arguments and defaults; step() and zero_grad().

One parameter group: param_groups[0]["lr"] may be changed between steps (as schedulers do) and
is applied at the next step(). The optimizer holds its own reference to each parameter: create
it after moving the model to its device (as PyTorch's documentation advises too)."""
from . import _core
from ._core import check, ffi, lib


class Optimizer:
    _free = lib.ct_optimizer_free

    def __init__(self, params, defaults):
        self._h = None
        params = list(params)
        if params and isinstance(params[0], dict):
            if len(params) != 1:
                raise _core.error_classes["UnsupportedError"](
                    "%s: one parameter group only (libcltensor's optimizers have one set of "
                    "hyperparameters)" % type(self).__name__)
            group = dict(params[0])
            params = list(group.pop("params"))
            defaults = dict(defaults, **group)
        self.defaults = defaults
        self.param_groups = [dict(defaults, params=params)]
        self.state = {}
        self._params = ffi.new("ct_tensor *[]", [p._h for p in params])
        self._n = len(params)
        self._lr = defaults["lr"]

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        lr = self.param_groups[0]["lr"]
        if lr != self._lr:
            check(lib.ct_optimizer_set_lr(self._h, float(lr)))
            self._lr = lr
        check(lib.ct_optimizer_step(self._h))
        return loss

    def zero_grad(self, set_to_none=True):
        if set_to_none:
            check(lib.ct_optimizer_zero_grad(self._h))
        else:
            for p in self.param_groups[0]["params"]:
                g = p.grad
                if g is not None:
                    g.zero_()

    def __copy__(self):
        # A copy would own the same handle and free it twice; make a new optimizer instead.
        raise TypeError("%s cannot be copied: make a new one over the parameters" % type(self).__name__)

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __del__(self):
        h = getattr(self, "_h", None)
        if h is not None:
            self._h = None
            self._free(h)

    def __repr__(self):
        hp = ", ".join("%s=%r" % kv for kv in sorted(self.defaults.items()))
        return "%s(%s)" % (type(self).__name__, hp)


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if dampening or maximize:
            raise _core.error_classes["UnsupportedError"]("SGD: dampening and maximize are not supported")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=0, weight_decay=weight_decay,
                                      nesterov=nesterov))
        d = self.param_groups[0]
        out = ffi.new("ct_optimizer **")
        check(lib.ct_sgd_new(out, self._params, self._n, float(d["lr"]), float(d["momentum"]),
                             float(d["weight_decay"]), bool(d["nesterov"])))
        self._h = out[0]


class Adam(Optimizer):
    _decoupled = False
    _default_wd = 0.0

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=None, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None):
        if amsgrad or maximize:
            raise _core.error_classes["UnsupportedError"]("%s: amsgrad and maximize are not supported"
                                                          % type(self).__name__)
        wd = self._default_wd if weight_decay is None else weight_decay
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=wd, amsgrad=False))
        d = self.param_groups[0]
        out = ffi.new("ct_optimizer **")
        check(lib.ct_adam_new(out, self._params, self._n, float(d["lr"]), float(d["betas"][0]),
                              float(d["betas"][1]), float(d["eps"]), float(d["weight_decay"]), self._decoupled))
        self._h = out[0]


class AdamW(Adam):
    _decoupled = True
    _default_wd = 1e-2


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """torch.nn.utils.clip_grad_norm_ (norm_type 2): returns the total norm as a float."""
    if norm_type != 2:
        raise _core.error_classes["UnsupportedError"]("clip_grad_norm_: only norm_type=2")
    params = [parameters] if hasattr(parameters, "_h") else list(parameters)
    total = ffi.new("double *")
    check(lib.ct_clip_grad_norm(total, ffi.new("ct_tensor *[]", [p._h for p in params]), len(params),
                                float(max_norm)))
    return total[0]


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm_"]
