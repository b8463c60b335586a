"""cltensor.save / cltensor.load: a Tensor as a NumPy .npy file, a dict of tensors (a
state_dict) as a safetensors file (libcltensor's io.h, ct_npy_* and ct_safetensors_*).

    cltensor.save(x, "x.npy")              # what numpy.save writes: numpy.load reads it
    x = cltensor.load("x.npy")             # a Tensor on the default device
    cltensor.save(model.state_dict(), "m.safetensors")
    model.load_state_dict(cltensor.load("m.safetensors"))

The format follows what is saved (a Tensor or a dict) and, on loading, the file's first bytes
(NumPy's magic string, else safetensors), whatever the file's name: PyTorch's pickle format is
not offered, so torch.save files do not load and cltensor's files are not torch.load's."""
from . import _core
from ._core import check, lib
from ._tensor import Tensor, _call
from .safetensors import _path, load_file, save_file

_NPY_MAGIC = b"\x93NUMPY"


def save(obj, f):
    """A Tensor to a .npy file (ct_npy_save: what numpy.save writes; not bf16), or a dict
    name -> Tensor (a state_dict) to a safetensors file."""
    if isinstance(obj, Tensor):
        check(lib.ct_npy_save(_path(f), obj._h))
    elif isinstance(obj, dict):
        save_file(obj, f)
    else:
        raise TypeError("cltensor.save: expected a Tensor (.npy) or a dict of tensors (safetensors), got %s"
                        % type(obj).__name__)


def load(f, device=None, dtype=None):
    """A .npy file as a Tensor, or a safetensors file as a dict name -> Tensor, on device (the
    default device when None), told apart by NumPy's magic string at the file's start. dtype, a
    floating-point dtype, converts the values on the host before they reach the device
    (ct_npy_load_as; for a safetensors file: its f64 tensors, as load_file's cast)."""
    try:
        with open(f, "rb") as fh:
            npy = fh.read(len(_NPY_MAGIC)) == _NPY_MAGIC
    except OSError:
        npy = True  # libcltensor's CT_ERR_IO below says why, with the path
    if not npy:
        return load_file(f, device, None if dtype is None else (_core.float64, dtype))
    dev = _core.as_device(device)
    if dtype is None:
        return _call(lib.ct_npy_load, _path(f), dev.ptr)
    return _call(lib.ct_npy_load_as, _path(f), dev.ptr, _core.as_dtype(dtype).ct)
