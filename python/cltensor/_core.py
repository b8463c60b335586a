"""The C library, its statuses as exceptions, dtypes and devices.

Everything here is a thin layer over libcltensor's public API (include/cltensor/*.h); the rest of
the package builds on it.
"""
from ._cltensor_cffi import ffi, lib

# ---- errors ---------------------------------------------------------------------------------


class Error(RuntimeError):
    """Base of every cltensor error: a libcltensor call returned a failing ct_status.

    str(e) is ct_last_error(): the failing function, the cause and the values involved.
    e.status is the ct_status code, e.status_name its identifier ("CT_ERR_OUT_OF_MEMORY")."""

    status = None
    status_name = None


Error.__module__ = "cltensor"

# One class per status, named after the status table (src/core's CT_STATUS_MAP, through
# ct_status_name()): CT_ERR_OUT_OF_MEMORY is OutOfMemoryError. The builtin exception a Python
# programmer would catch for the same condition is a second base where there is one.
_ACRONYMS = {"OPENCL": "OpenCL", "IO": "IO"}
_EXTRA_BASES = {"CT_ERR_INVALID_ARGUMENT": (ValueError,), "CT_ERR_OUT_OF_MEMORY": (MemoryError,),
                "CT_ERR_UNSUPPORTED": (NotImplementedError,), "CT_ERR_DTYPE_MISMATCH": (TypeError,),
                "CT_ERR_IO": (OSError,)}
_by_status = {}
error_classes = {}


def _class_name(status_name):
    words = status_name[len("CT_ERR_"):].split("_")
    return "".join(_ACRONYMS.get(w, w.capitalize()) for w in words) + "Error"


def _make_error_classes():
    code = 1
    while True:
        name = ffi.string(lib.ct_status_name(code)).decode()
        if not name.startswith("CT_ERR_") or name == "CT_ERR_UNKNOWN":
            break
        desc = ffi.string(lib.ct_status_description(code)).decode()
        cls_name = _class_name(name)
        try:
            cls = type(cls_name, (Error,) + _EXTRA_BASES.get(name, ()),
                       {"status": code, "status_name": name, "__module__": "cltensor",
                        "__doc__": "%s: %s." % (name, desc)})
        except TypeError:  # an instance layout conflict with the builtin base
            cls = type(cls_name, (Error,), {"status": code, "status_name": name, "__module__": "cltensor",
                                            "__doc__": "%s: %s." % (name, desc)})
        _by_status[code] = cls
        error_classes[cls_name] = cls
        code += 1


_make_error_classes()

# Counts cltensor.shutdown() calls: device pointers of an earlier count are looked up again, and
# a failing call may have been given a handle shutdown released.
_shutdowns = [0]


def raise_status(st):
    """Raises the exception of status st with the calling thread's ct_last_error()."""
    msg = ffi.string(lib.ct_last_error()).decode("utf-8", "replace")
    if _shutdowns[0] and "NULL" in msg:
        msg += (" (cltensor.shutdown() released every tensor, device and optimizer made before it: "
                "they can only be dropped)")
    cls = _by_status.get(int(st), Error)
    raise cls(msg)


def check(st):
    if st:
        raise_status(st)


# ---- dtypes ---------------------------------------------------------------------------------


class dtype:
    """An element type, named as PyTorch names it (cltensor.float32 is torch.float32).

    ct: the ct_dtype code; itemsize: bytes per element; is_floating_point; name: "float32"."""

    __slots__ = ("name", "ct", "itemsize", "is_floating_point", "is_signed", "_np")

    def __init__(self, name, ct, np_name, signed):
        self.name = name
        self.ct = ct
        self.itemsize = lib.ct_dtype_size(ct)
        self.is_floating_point = bool(lib.ct_dtype_is_floating_point(ct))
        self.is_signed = signed
        self._np = np_name

    def __repr__(self):
        return "cltensor." + self.name

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))

    @property
    def numpy_dtype(self):
        """The NumPy dtype holding the same values (bfloat16, which NumPy lacks: float32)."""
        import numpy
        return numpy.dtype(self._np)


bool_ = dtype("bool", lib.CT_BOOL, "bool", False)
uint8 = dtype("uint8", lib.CT_U8, "uint8", False)
int8 = dtype("int8", lib.CT_I8, "int8", True)
int16 = dtype("int16", lib.CT_I16, "int16", True)
int32 = dtype("int32", lib.CT_I32, "int32", True)
int64 = dtype("int64", lib.CT_I64, "int64", True)
uint16 = dtype("uint16", lib.CT_U16, "uint16", False)
uint32 = dtype("uint32", lib.CT_U32, "uint32", False)
uint64 = dtype("uint64", lib.CT_U64, "uint64", False)
float16 = dtype("float16", lib.CT_F16, "float16", True)
bfloat16 = dtype("bfloat16", lib.CT_BF16, "float32", True)
float32 = dtype("float32", lib.CT_F32, "float32", True)
float64 = dtype("float64", lib.CT_F64, "float64", True)

DTYPES = [bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, bfloat16, float32,
          float64]
_by_ct = {d.ct: d for d in DTYPES}
_by_name = {d.name: d for d in DTYPES}
# PyTorch's other names for the same dtypes.
ALIASES = {"half": float16, "float": float32, "double": float64, "short": int16, "int": int32,
           "long": int64}
_by_name.update(ALIASES)


def _dtype_by_name(name):
    return _by_name[name]


def from_ct(ct):
    return _by_ct[int(ct)]


def as_dtype(x):
    """A cltensor dtype from a dtype, its name ("float32", "f32"), a NumPy dtype or a type."""
    if isinstance(x, dtype):
        return x
    if isinstance(x, str):
        if x in _by_name:
            return _by_name[x]
        out = ffi.new("ct_dtype *")
        check(lib.ct_dtype_from_name(out, x.encode()))
        return from_ct(out[0])
    if x is bool:
        return bool_
    if x is int:
        return int64
    if x is float:
        return float32
    import numpy
    nd = numpy.dtype(x)
    if nd == numpy.bool_:
        return bool_
    for d in DTYPES:
        if d is not bfloat16 and numpy.dtype(d._np) == nd:
            return d
    raise error_classes["UnsupportedError"]("cltensor has no dtype for NumPy's %s" % nd)


# ---- devices --------------------------------------------------------------------------------


class device:
    """An OpenCL device, by its spec: "gpu", "gpu:1", "cpu", "cl:0:1", "name:...", "auto"
    (device.h). "cuda" and "cuda:N" are accepted as "gpu" and "gpu:N" for PyTorch programs.

    type: "gpu", "cpu", "accelerator" or "other"; index: N of the canonical spec "type:N";
    str(d) is the canonical spec. Equal when they name the same device."""

    __slots__ = ("_spec", "_ptr", "_gen")

    def __new__(cls, spec="auto", index=None):
        if isinstance(spec, device):
            return spec
        if not isinstance(spec, str):
            raise TypeError("cltensor.device: expected a spec string, got %r" % (spec,))
        if index is not None:
            spec = "%s:%d" % (spec, index)
        if spec.startswith("cuda"):
            spec = "gpu" + spec[4:]
        out = ffi.new("ct_device **")
        check(lib.ct_device_find(out, spec.encode()))
        return _device_from_ptr(out[0])

    @property
    def ptr(self):
        """The ct_device * (looked up again after cltensor.shutdown() by the spec)."""
        if self._gen != _shutdowns[0]:
            out = ffi.new("ct_device **")
            check(lib.ct_device_find(out, self._spec.encode()))
            self._ptr = out[0]
            self._gen = _shutdowns[0]
        return self._ptr

    @property
    def type(self):
        return self._spec.split(":")[0]

    @property
    def index(self):
        return int(self._spec.split(":")[1])

    @property
    def properties(self):
        """The device's ct_device_props as a dict (name, vendor, compute_units, fp64, ...)."""
        p = lib.ct_device_properties(self.ptr)
        out = {}
        for field, _ in ffi.typeof("ct_device_props").fields:
            v = getattr(p, field)
            if isinstance(v, ffi.CData):
                v = ffi.string(v).decode("utf-8", "replace") if v != ffi.NULL else None
            out[field] = v
        return out

    @property
    def name(self):
        return ffi.string(lib.ct_device_properties(self.ptr).name).decode("utf-8", "replace")

    def synchronize(self):
        """Waits for every command queued on the device (ct_device_synchronize)."""
        check(lib.ct_device_synchronize(self.ptr))

    def memory_stats(self):
        """The caching allocator's ct_memory_stats as a dict."""
        s = ffi.new("ct_memory_stats *")
        s.size = ffi.sizeof("ct_memory_stats")  # caller-filled struct: its size first
        check(lib.ct_device_get_memory_stats(s, self.ptr))
        return {f: getattr(s, f) for f, _ in ffi.typeof("ct_memory_stats").fields if f != "size"}

    def empty_cache(self):
        check(lib.ct_empty_cache(self.ptr))

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except Error:
                return False
        return isinstance(other, device) and other._spec == self._spec

    def __hash__(self):
        return hash(self._spec)

    def __str__(self):
        return self._spec

    def __repr__(self):
        return "device(type='%s', index=%d)" % (self.type, self.index)

    def __reduce__(self):
        return (device, (self._spec,))


_devices = {}


def _device_from_ptr(p):
    spec = ffi.string(lib.ct_device_spec(p)).decode()
    d = _devices.get(spec)
    if d is None or d._gen != _shutdowns[0]:
        d = object.__new__(device)
        d._spec, d._ptr, d._gen = spec, p, _shutdowns[0]
        _devices[spec] = d
    return d


def devices():
    """Every OpenCL device, in libcltensor's order (GPUs first, then accelerators, then CPUs)."""
    n = ffi.new("int *")
    check(lib.ct_device_count(n))
    out = []
    p = ffi.new("ct_device **")
    for i in range(n[0]):
        check(lib.ct_device_get(p, i))
        out.append(_device_from_ptr(p[0]))
    return out


_default = [None]


def default_device():
    """The device tensors are created on when no device is given: set_default_device()'s, else
    libcltensor's default (ct_device_default: $CLTENSOR_DEVICE, else the first GPU, else an
    accelerator, else the CPU). PyTorch's default is the CPU; this library's is its best
    device."""
    d = _default[0]
    if d is None or d._gen != _shutdowns[0]:
        if d is not None:
            d = device(d._spec)
        else:
            out = ffi.new("ct_device **")
            check(lib.ct_device_default(out))
            d = _device_from_ptr(out[0])
        _default[0] = d
    return d


def cpu_device():
    """The first OpenCL CPU device, or None when there is none."""
    out = ffi.new("ct_device **")
    st = lib.ct_device_find(out, b"cpu")
    if st == lib.CT_ERR_DEVICE_NOT_FOUND:
        lib.ct_clear_error()
        return None
    check(st)
    return _device_from_ptr(out[0])


def set_default_device(dev):
    """Sets the device of new tensors (None: libcltensor's default again)."""
    _default[0] = None if dev is None else device(dev)


def as_device(dev):
    if dev is None:
        return default_device()
    return device(dev)
