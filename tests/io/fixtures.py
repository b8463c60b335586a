#!/usr/bin/python3
# Test data for tests/io, made and checked with NumPy (Debian's python3-numpy: /usr/bin/python3,
# not a pyenv python without numpy).
#
#   fixtures.py write DIR   NumPy writes the .npy files (and all.safetensors, with the reference
#                           `safetensors` package when it is importable, else with the writer
#                           below) that test_npy/test_safetensors load and compare bit-exactly.
#                           tests/io/fixtures/ holds the committed output, so the tests run
#                           without Python.
#   fixtures.py check DIR   loads the files cltensor wrote into DIR (test_numpy) with NumPy and
#                           checks values bit-exactly and .npy bytes against numpy.save's.
#
# Values: element k (C order) of every test array follows value(dtype, k) below; test_io.h
# computes the same numbers in C.
import json
import os
import struct
import sys

import numpy as np

DTYPES = ["bool", "u8", "i8", "i32", "i64", "f16", "bf16", "f32", "f64", "i16", "u16", "u32", "u64"]
NP = {"bool": np.bool_, "u8": np.uint8, "i8": np.int8, "i32": np.int32, "i64": np.int64,
      "f16": np.float16, "f32": np.float32, "f64": np.float64, "i16": np.int16, "u16": np.uint16,
      "u32": np.uint32, "u64": np.uint64}
ST = {"bool": "BOOL", "u8": "U8", "i8": "I8", "i32": "I32", "i64": "I64", "f16": "F16",
      "bf16": "BF16", "f32": "F32", "f64": "F64", "i16": "I16", "u16": "U16", "u32": "U32",
      "u64": "U64"}
ST_NUMPY_NAME = {"bool": "bool", "u8": "uint8", "i8": "int8", "i32": "int32", "i64": "int64",
                 "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
                 "i16": "int16", "u16": "uint16", "u32": "uint32", "u64": "uint64"}


def values(dt, n):
    """Element k of the test arrays; bf16 as its uint16 bit patterns."""
    k = np.arange(n, dtype=np.int64)
    if dt == "bool":
        return k % 3 == 0
    if dt == "u8":
        return ((k * 37 + 11) % 256).astype(np.uint8)
    if dt == "i8":
        return ((k * 37 + 11) % 256 - 128).astype(np.int8)
    if dt == "i32":
        return (k * 100003 - 700000).astype(np.int32)
    if dt == "i64":
        return k * 3000000000017 - 10**14
    if dt == "f16":
        return ((k - 7) * 0.375).astype(np.float16)
    if dt == "bf16":
        # (k - 7) * 0.25 is exact in bf16: its bits are the top half of the f32 bits.
        return (((k - 7) * 0.25).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if dt == "f32":
        return ((k - 7) * 0.1).astype(np.float32)
    if dt == "f64":
        return (k - 7) * 0.1
    if dt == "i16":
        return (k * 1009 - 7000).astype(np.int16)
    if dt == "u16":
        return ((k * 4099 + 5) % 65536).astype(np.uint16)
    if dt == "u32":
        return ((k * 300000007 + 11) % 2**32).astype(np.uint32)
    if dt == "u64":
        return np.uint64(2**63) + k.astype(np.uint64) * np.uint64(3000000000017)
    raise ValueError(dt)


def array(dt, shape):
    n = int(np.prod(shape, dtype=np.int64))
    return values(dt, n).reshape(shape)


SPECIAL_F32 = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4028235e38], dtype=np.float32)


def write_safetensors_fallback(path, tensors, metadata):
    """The format as the reference writer lays it out (a stand-in when it is not installed)."""
    order = sorted(tensors, key=lambda name: (-tensors[name][2].itemsize, name))
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name in order:
        dtype, shape, arr = tensors[name]
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_safetensors(path, tensors, metadata):
    try:
        from safetensors import TensorSpec, serialize
    except ImportError:
        return write_safetensors_fallback(path, tensors, metadata)
    keep = {}
    specs = {}
    for name, (dtype, shape, arr) in tensors.items():
        keep[name] = np.ascontiguousarray(arr)
        specs[name] = TensorSpec(dtype=ST_NUMPY_NAME[[k for k, v in ST.items() if v == dtype][0]],
                                 shape=list(shape), data_ptr=keep[name].ctypes.data,
                                 data_len=keep[name].nbytes)
    with open(path, "wb") as f:
        f.write(bytes(serialize(specs, metadata=metadata)))


def write(out):
    os.makedirs(out, exist_ok=True)
    for dt in DTYPES:
        if dt != "bf16":
            np.save(os.path.join(out, dt + ".npy"), array(dt, (3, 5)))
    f32 = array("f32", (3, 5))
    for version in [(2, 0), (3, 0)]:
        with open(os.path.join(out, "f32_v%d.npy" % version[0]), "wb") as f:
            np.lib.format.write_array(f, f32, version=version)
    for dt in ["i32", "f16", "f64"]:
        np.save(os.path.join(out, dt + "_be.npy"), array(dt, (3, 5)).astype(NP[dt]().dtype.newbyteorder(">")))
    np.save(os.path.join(out, "i32_fortran.npy"), np.asfortranarray(array("i32", (3, 5))))
    np.save(os.path.join(out, "f32_fortran3d.npy"), np.asfortranarray(array("f32", (2, 3, 4))))
    np.save(os.path.join(out, "f32_scalar.npy"), array("f32", ()))
    np.save(os.path.join(out, "f32_empty.npy"), array("f32", (0, 4)))
    np.save(os.path.join(out, "i64_1d.npy"), array("i64", (7,)))
    np.save(os.path.join(out, "f32_special.npy"), SPECIAL_F32)
    tensors = {dt: (ST[dt], (3, 5), array(dt, (3, 5))) for dt in DTYPES}
    tensors["scalar"] = ("F32", (), array("f32", ()))
    tensors["empty"] = ("F32", (0, 4), array("f32", (0, 4)))
    write_safetensors(os.path.join(out, "all.safetensors"), tensors,
                      {"format": "np", "source": "tests/io/fixtures.py"})


def read_safetensors(path):
    """name -> (dtype, shape, raw bytes), and the metadata; the reference reader when present."""
    with open(path, "rb") as f:
        blob = f.read()
    try:
        from safetensors import deserialize
        entries = {name: (info["dtype"].upper(), tuple(info["shape"]), bytes(info["data"]))
                   for name, info in deserialize(blob)}
    except ImportError:
        entries = None
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    if entries is None:
        entries = {name: (e["dtype"], tuple(e["shape"]), blob[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
                   for name, e in header.items()}
    return entries, metadata


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check(out):
    bad = []
    for dt in DTYPES:
        if dt == "bf16":
            continue
        path = os.path.join(out, dt + ".npy")
        want = array(dt, (3, 5))
        got = np.load(path)
        if not same_bits(got, want):
            bad.append("%s: values differ: %r vs %r" % (path, got, want))
        ref = os.path.join(out, dt + ".numpy-ref.npy")
        np.save(ref, want)
        with open(path, "rb") as f1, open(ref, "rb") as f2:
            if f1.read() != f2.read():
                bad.append("%s: bytes differ from numpy.save's" % path)
    for name, want in [("f32_t.npy", array("f32", (3, 5)).T.copy()),
                       ("f32_scalar.npy", array("f32", ())),
                       ("f32_empty.npy", array("f32", (0, 4))),
                       ("f32_special.npy", SPECIAL_F32)]:
        got = np.load(os.path.join(out, name))
        if not same_bits(got, want):
            bad.append("%s: %r vs %r" % (name, got, want))
    entries, metadata = read_safetensors(os.path.join(out, "all.safetensors"))
    if metadata != {"format": "np", "writer": "cltensor"}:
        bad.append("all.safetensors: metadata %r" % metadata)
    for dt in DTYPES:
        want = array(dt, (3, 5))
        got = entries.get(dt)
        if got is None or got[0] != ST[dt] or got[1] != (3, 5) or got[2] != want.astype(want.dtype.newbyteorder("<")).tobytes():
            bad.append("all.safetensors: tensor %s: %r" % (dt, got and got[:2]))
    if set(entries) != set(DTYPES):
        bad.append("all.safetensors: names %r" % sorted(entries))
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit("usage: fixtures.py write|check DIR")
    sys.exit(write(sys.argv[2]) or 0 if sys.argv[1] == "write" else check(sys.argv[2]))
