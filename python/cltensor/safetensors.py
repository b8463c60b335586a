"""cltensor.safetensors: safetensors files of named tensors (libcltensor's io.h, ct_safetensors_*).

    import cltensor, cltensor.safetensors
    cltensor.safetensors.save_file({"w": w, "b": b}, "model.safetensors", metadata={"step": "10"})
    state = cltensor.safetensors.load_file("model.safetensors", device="cpu")   # {"w": ..., "b": ...}

save_file/load_file are the names of the safetensors package's torch API (safetensors.torch);
cltensor.save/cltensor.load (_files.py) also write and read .npy files. Loading reads the file
into host memory and copies it onto the device (the default device when device is None); saving
copies the tensors back and writes the file atomically. A failing call raises the status's
exception: cltensor.IOError (also an OSError) for a missing or unwritable file,
cltensor.FormatError for a malformed one, cltensor.UnsupportedError for what the format or the
library lacks (bf16 in .npy; include/cltensor/io.h lists the dtypes)."""
import os

from . import _core
from ._core import check, ffi, lib
from ._tensor import Tensor, _wrap

_ST = ffi.typeof("ct_safetensors **")

__all__ = ["save_file", "load_file", "load_metadata"]


def _path(p):
    return os.fsencode(p)  # str, bytes or os.PathLike, in the file system's encoding


def _collection_to_dict(st):
    out = {}
    p = ffi.new("ct_tensor **")
    for i in range(lib.ct_safetensors_count(st)):
        check(lib.ct_safetensors_at(p, st, i))
        out[ffi.string(lib.ct_safetensors_name(st, i)).decode("utf-8")] = _wrap(p[0])
    return out


def _metadata(st):
    keys = (ffi.string(lib.ct_safetensors_metadata_key(st, i)).decode("utf-8")
            for i in range(lib.ct_safetensors_metadata_count(st)))
    return {k: ffi.string(lib.ct_safetensors_metadata_get(st, k.encode("utf-8"))).decode("utf-8") for k in keys}


def _load_collection(filename, device, cast):
    out = ffi.new(_ST)
    dev = _core.as_device(device)
    if cast is None:
        check(lib.ct_safetensors_load(out, _path(filename), dev.ptr))
    else:
        src, dst = cast
        check(lib.ct_safetensors_load_as(out, _path(filename), dev.ptr, _core.as_dtype(src).ct,
                                         _core.as_dtype(dst).ct))
    return out[0]


def load_file(filename, device=None, cast=None):
    """A dict name -> Tensor of every tensor in the safetensors file, in the file's order, on
    device (the default device when None). cast=(from_dtype, to_dtype) converts every tensor of
    from_dtype to the floating-point to_dtype on the host before it reaches the device
    (ct_safetensors_load_as): cast=(cltensor.float64, cltensor.float32) loads a file with f64
    entries onto a device without fp64."""
    st = _load_collection(filename, device, cast)
    try:
        return _collection_to_dict(st)
    finally:
        lib.ct_safetensors_free(st)


def load_metadata(filename):
    """The file's "__metadata__" map (str -> str); {} when it has none. (The C library reads the
    whole file: the tensors are loaded onto the default device and dropped; f64 ones as f32, so
    that a device without fp64 reads the metadata of any file.)"""
    st = _load_collection(filename, None, ("float64", "float32"))
    try:
        return _metadata(st)
    finally:
        lib.ct_safetensors_free(st)


def save_file(tensors, filename, metadata=None):
    """Writes the dict name -> Tensor (any devices, any strides) and the str -> str metadata
    to filename as a safetensors file, atomically. Names keep the dict's order in the header."""
    if not isinstance(tensors, dict):
        raise TypeError("save_file: expected a dict of name -> Tensor, got %s" % type(tensors).__name__)
    out = ffi.new(_ST)
    check(lib.ct_safetensors_new(out))
    st = out[0]
    try:
        for name, t in tensors.items():
            if not isinstance(name, str) or not isinstance(t, Tensor):
                raise TypeError("save_file: expected str -> Tensor entries, got %r -> %s"
                                % (name, type(t).__name__))
            check(lib.ct_safetensors_set(st, name.encode("utf-8"), t._h))
        for k, v in (metadata or {}).items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("save_file: metadata must map str to str, got %r -> %r" % (k, v))
            check(lib.ct_safetensors_metadata_set(st, k.encode("utf-8"), v.encode("utf-8")))
        check(lib.ct_safetensors_save(st, _path(filename)))
    finally:
        lib.ct_safetensors_free(st)
