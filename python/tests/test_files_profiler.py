"""Files (cltensor.save/load, cltensor.safetensors) and the profiler (cltensor.profiler)."""
import numpy as np
import pytest

import cltensor
import cltensor.nn as nn
from conftest import close


def test_npy_round_trip_with_numpy(dev, tmp_path):
    x = cltensor.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    p = tmp_path / "x.npy"
    cltensor.save(x.T, p)  # strided: written in C order
    assert np.array_equal(np.load(p), np.arange(12, dtype=np.float32).reshape(3, 4).T)
    np.save(tmp_path / "i.npy", np.array([[1, -2], [3, 4]], dtype=np.int32))
    y = cltensor.load(str(tmp_path / "i.npy"))
    assert y.dtype is cltensor.int32 and y.tolist() == [[1, -2], [3, 4]]
    z = cltensor.load(tmp_path / "i.npy", dtype=cltensor.float32)  # ct_npy_load_as
    assert z.dtype is cltensor.float32 and z.tolist() == [[1, -2], [3, 4]]
    assert cltensor.load(p, device=dev).device == dev


def test_safetensors_round_trip_keeps_order_dtypes_and_metadata(dev, tmp_path):
    p = tmp_path / "m.safetensors"
    tensors = {"z.weight": cltensor.randn(3, 2), "a.bias": cltensor.arange(4, dtype=cltensor.int64),
               "mask": cltensor.tensor([True, False]), "h": cltensor.ones(2, dtype=cltensor.float16)}
    cltensor.safetensors.save_file(tensors, p, metadata={"format": "pt", "step": "7"})
    back = cltensor.safetensors.load_file(p)
    assert list(back) == list(tensors)
    for k, v in tensors.items():
        assert back[k].dtype is v.dtype and np.array_equal(back[k].numpy(), v.numpy())
    assert cltensor.safetensors.load_metadata(p) == {"format": "pt", "step": "7"}
    assert isinstance(cltensor.load(p), dict)  # told apart from .npy by the first bytes


def test_safetensors_cast_on_load(dev, tmp_path):
    # An f64 tensor written from the host side (the device may lack fp64): load_file's cast
    # converts it on the host.
    import json
    import struct
    data = np.array([1.5, -2.25], dtype="<f8").tobytes()
    header = json.dumps({"x": {"dtype": "F64", "shape": [2], "data_offsets": [0, len(data)]}}).encode()
    p = tmp_path / "f64.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header + data)
    x = cltensor.safetensors.load_file(p, cast=(cltensor.float64, cltensor.float32))["x"]
    assert x.dtype is cltensor.float32 and x.tolist() == [1.5, -2.25]
    assert cltensor.load(p, dtype=cltensor.float32)["x"].dtype is cltensor.float32


def test_state_dict_through_a_file(dev, tmp_path):
    cltensor.manual_seed(3)
    a = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    b = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    cltensor.save(a.state_dict(), tmp_path / "m.safetensors")
    b.load_state_dict(cltensor.load(tmp_path / "m.safetensors"))
    x = cltensor.randn(5, 4)
    close(b(x), a(x).numpy())


def test_file_errors_are_the_status_exceptions(dev, tmp_path):
    with pytest.raises(cltensor.IOError) as e:
        cltensor.load(tmp_path / "missing.npy")
    assert isinstance(e.value, OSError) and "missing.npy" in str(e.value)
    (tmp_path / "bad.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{nojson}")
    with pytest.raises(cltensor.FormatError):
        cltensor.safetensors.load_file(tmp_path / "bad.safetensors")
    with pytest.raises(cltensor.UnsupportedError):
        cltensor.save(cltensor.ones(2, dtype=cltensor.bfloat16), tmp_path / "b.npy")
    with pytest.raises(TypeError):
        cltensor.save([1, 2], tmp_path / "l.npy")
    with pytest.raises(TypeError):
        cltensor.safetensors.save_file({"x": np.zeros(2)}, tmp_path / "n.safetensors")


def test_profiler_block_records_the_ops(dev):
    a = cltensor.randn(256)
    was_on = cltensor.profiler.enabled()
    with cltensor.profiler.profile() as prof:
        b = (a * 2).exp() + a
        b.numpy()
    assert cltensor.profiler.enabled() == was_on
    rows = prof.entries()
    assert rows and all(isinstance(r, cltensor.profiler.ProfileEntry) for r in rows)
    assert all(r.device == dev for r in rows)
    assert sum(r.calls for r in rows) >= 2  # at least a kernel and the read back
    assert all(0 <= r.timed_calls <= r.calls and r.total_ms >= 0 for r in rows)
    text = prof.table()
    assert "cltensor profile" in text and rows[0].op in text
    assert str(prof) == text
    # the rows stay the block's: later work does not change them
    (a + 1).numpy()
    assert prof.entries() == rows


def test_profiler_functions_and_export(dev, tmp_path):
    was_on = cltensor.profiler.enabled()
    cltensor.profiler.start()
    try:
        cltensor.profiler.reset()
        (cltensor.ones(8) + 1).numpy()
        assert cltensor.profiler.entries()
        cltensor.profiler.export(tmp_path / "p.txt")
        assert "total" in (tmp_path / "p.txt").read_text()
        cltensor.profiler.reset()
        assert cltensor.profiler.entries() == []
    finally:
        if not was_on:
            cltensor.profiler.stop()
    with pytest.raises(cltensor.IOError):
        cltensor.profiler.export(tmp_path / "no" / "such" / "dir.txt")


def test_profiler_started_before_first_use_times_the_commands():
    # A fresh process: the device's queue is made after start(), so every command has a time.
    import subprocess
    import sys
    code = ("import cltensor\n"
            "cltensor.profiler.start()\n"
            "with cltensor.profiler.profile() as prof:\n"
            "    (cltensor.ones(64) * 3).numpy()\n"
            "rows = prof.entries()\n"
            # PoCL gives every command driver times; rusticl 22.3 gives none (zero timestamps,
            # which the library counts as untimed), so there the rows are counted, not timed.
            "pocl = 'PoCL' in cltensor.device('auto').properties['platform_version']\n"
            "assert rows and all(r.timed_calls == (r.calls if pocl else 0) for r in rows), rows\n"
            "assert cltensor.profiler.enabled()  # on before the block, so still on after it\n"
            "print('ok', len(rows))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
