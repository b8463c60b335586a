"""DLPack: Tensor.__dlpack__ / __dlpack_device__ and cltensor.from_dlpack, over libcltensor's
interop (include/cltensor/interop.h).

cltensor tensors are kDLOpenCL tensors: the capsule's data is the cl_mem, not a host pointer, so
only a consumer that speaks OpenCL (cltensor itself, or a program with the same OpenCL context)
can use it without a copy. A consumer that wants host memory asks for it with
dl_device=(kDLCPU, 0) (NumPy 2: numpy.from_dlpack(t, device="cpu")) and gets a host copy;
copy=False then raises BufferError. numpy.asarray(t) goes through __array__, also a copy.

Capsules follow the protocol: "dltensor" (or "dltensor_versioned" for DLPack 1.x, when the
consumer passes max_version >= (1, 0) and libcltensor was built with a DLPack 1.x header), renamed
"used_..." by the consumer that takes them; the package's capsule destructor calls the deleter
only for a capsule nobody took, so the deleter runs exactly once. Capsules are made and read
through CPython's capsule API (ctypes.pythonapi): this module needs CPython.
"""
import ctypes

from . import _core
from ._core import check, ffi, lib
from ._tensor import Tensor, _call, _wrap

kDLCPU = 1
kDLOpenCL = 4

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# A capsule keeps the pointer to its name, not a copy: these live as long as the module.
_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"
_USED = b"used_dltensor"
_USED_V = b"used_dltensor_versioned"

_versioned = []


def versioned_supported():
    """Whether libcltensor was built with DLPack 1.x (ct_to_dlpack_versioned works)."""
    if not _versioned:
        p = ffi.new("struct DLManagedTensorVersioned **")
        st = lib.ct_to_dlpack_versioned(p, ffi.NULL)
        lib.ct_clear_error()
        _versioned.append(st != lib.CT_ERR_UNSUPPORTED)
    return _versioned[0]


def device_of(t):
    return (kDLOpenCL, lib.ct_device_index(lib.ct_tensor_device(t._h)))


def _host_copy(t, max_version, copy):
    if copy is False:
        raise BufferError("cltensor: the tensor is in OpenCL memory; handing it to a kDLCPU consumer "
                          "needs a copy (copy=False was asked)")
    arr = t.numpy()
    try:
        return arr.__dlpack__(max_version=max_version)
    except TypeError:  # NumPy 1.x: no keywords
        return arr.__dlpack__()


def export(t, stream, max_version, dl_device, copy):
    if dl_device is not None:
        dl_device = (int(dl_device[0]), int(dl_device[1]))
        if dl_device[0] == kDLCPU:
            return _host_copy(t, max_version, copy)
        if dl_device != device_of(t):
            raise BufferError("cltensor: can't export a tensor of device %s to DLPack device %s"
                              % (device_of(t), dl_device))
    if copy:
        t = _call(lib.ct_clone, t._h)
    # The consumer reads on a queue of its own: everything queued for t finishes first.
    check(lib.ct_device_synchronize(lib.ct_tensor_device(t._h)))
    if max_version is not None and tuple(max_version)[0] >= 1 and versioned_supported():
        p = ffi.new("struct DLManagedTensorVersioned **")
        check(lib.ct_to_dlpack_versioned(p, t._h))
        ptr, name, versioned = p[0], _NAME_V, 1
    else:
        p = ffi.new("struct DLManagedTensor **")
        check(lib.ct_to_dlpack(p, t._h))
        ptr, name, versioned = p[0], _NAME, 0
    addr = int(ffi.cast("uintptr_t", ptr))
    try:
        return _api.PyCapsule_New(addr, name, lib.ct_py_capsule_destructor(versioned))
    except BaseException:
        if versioned:
            m = ffi.cast("ct_py_dlversioned *", ptr)
        else:
            m = ffi.cast("ct_py_dlmanaged *", ptr)
        m.deleter(m)
        raise


def from_dlpack(ext, device=None):
    """A tensor from an object with __dlpack__ (or a DLPack capsule): a kDLOpenCL tensor is
    wrapped without a copy (on `device`, else the device its device_id names); a kDLCPU one
    (NumPy, PyTorch CPU tensors) is copied onto `device`, else the default device."""
    if isinstance(ext, Tensor) and device is None:
        return _call(lib.ct_detach, ext._h)
    if hasattr(ext, "__dlpack__"):
        cap = None
        if versioned_supported():
            try:
                cap = ext.__dlpack__(max_version=(1, 0))
            except TypeError:
                cap = None
        if cap is None:
            cap = ext.__dlpack__()
    else:
        cap = ext
    name = _api.PyCapsule_GetName(cap)
    if name not in (_NAME, _NAME_V):
        raise ValueError("from_dlpack: expected a DLPack capsule named 'dltensor' or "
                         "'dltensor_versioned' (not consumed yet), got %r" % (name,))
    versioned = name == _NAME_V
    addr = _api.PyCapsule_GetPointer(cap, name)
    if versioned:
        m = ffi.cast("ct_py_dlversioned *", addr)
        dl_type = m.dl_tensor.device.device_type
    else:
        m = ffi.cast("ct_py_dlmanaged *", addr)
        dl_type = m.dl_tensor.device.device_type
    if device is not None:
        dev = _core.device(device).ptr
    elif dl_type == kDLCPU:
        dev = _core.default_device().ptr
    else:
        dev = ffi.NULL
    out = ffi.new("ct_tensor **")
    if versioned:
        st = lib.ct_from_dlpack_versioned(out, ffi.cast("struct DLManagedTensorVersioned *", addr), dev)
    else:
        st = lib.ct_from_dlpack(out, ffi.cast("struct DLManagedTensor *", addr), dev)
    if st:
        _core.raise_status(st)  # the capsule still owns the tensor: its destructor deletes it
    # libcltensor owns the DLManagedTensor now (it calls the deleter): the capsule must not.
    _api.PyCapsule_SetName(cap, _USED_V if versioned else _USED)
    return _wrap(out[0])
