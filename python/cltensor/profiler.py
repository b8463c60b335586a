"""cltensor.profiler: device time per kernel and per transfer (libcltensor's profile.h).

    import cltensor.profiler
    cltensor.profiler.start()          # optional: before the first use of a device, see below
    with cltensor.profiler.profile() as prof:
        y = model(x)
        cltensor.synchronize()
    print(prof.table())                # libcltensor's table: op, calls, total ms, mean us, share
    for e in prof.entries():           # the same rows as ProfileEntry tuples, largest first
        print(e.device, e.op, e.calls, e.total_ms)

Times are device times from OpenCL event profiling (host overhead is not counted). OpenCL only
times commands on a queue created with profiling enabled, and a device's queue is made at its
first use: a device used before profiling was first turned on (start(), a profile() block, or
CLTENSOR_PROFILE=1 in the environment) has its commands counted but not timed (timed_calls 0;
the table says so). Call start() at the beginning of a program to have every device's times.

The recorder is libcltensor's, one per process: a profile() block starts from a reset (entries
recorded before it are discarded) and, on leaving, keeps its rows and turns recording off again
unless it was on before. Blocks do not nest."""
import collections
import os
import tempfile

from . import _core
from ._core import check, ffi, lib

__all__ = ["ProfileEntry", "profile", "start", "stop", "enabled", "reset", "entries", "table", "export"]

ProfileEntry = collections.namedtuple("ProfileEntry", ["device", "op", "calls", "timed_calls", "total_ms"])
ProfileEntry.__doc__ = ("One row of the profile: device (a cltensor.device), op (a kernel's name or a "
                        "transfer such as 'h2d'), calls, timed_calls (those with a device time), "
                        "total_ms (device time of the timed calls).")


def start():
    """Turns recording on (ct_profile_start); devices first used from now on get timed queues."""
    check(lib.ct_profile_start())


def stop():
    """Turns recording off; what was recorded stays (also overrides CLTENSOR_PROFILE=1)."""
    lib.ct_profile_stop()


def enabled():
    return bool(lib.ct_profile_is_enabled())


def reset():
    """Discards every recorded row (recording stays on or off)."""
    lib.ct_profile_reset()


def entries():
    """The recorded rows, grouped by device, each device's largest first (waits for the recorded
    commands to finish)."""
    count = ffi.new("size_t *")
    check(lib.ct_profile_get_entries(ffi.NULL, 0, count))
    while True:
        cap = count[0]
        rows = ffi.new("ct_profile_entry[]", max(cap, 1))
        rows[0].size = ffi.sizeof("ct_profile_entry")  # caller-filled: the size (and stride) first
        check(lib.ct_profile_get_entries(rows, cap, count))
        if count[0] <= cap:  # rows may have been added by other threads between the calls
            break
    return [ProfileEntry(_core._device_from_ptr(r.device), ffi.string(r.op).decode("utf-8", "replace"),
                         r.calls, r.timed_calls, r.total_ms) for r in rows[0:count[0]]]


def export(path):
    """Writes the table to path (ct_profile_dump_to_file; created or truncated)."""
    check(lib.ct_profile_dump_to_file(os.fsencode(path)))


def table():
    """The table as text (what ct_profile_dump prints)."""
    fd, path = tempfile.mkstemp(prefix="cltensor-profile-", suffix=".txt")
    os.close(fd)
    try:
        export(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    finally:
        os.unlink(path)


class profile:
    """A block whose device work is recorded: `with cltensor.profiler.profile() as prof:`.

    On leaving, prof.entries() and prof.table() are the block's rows (kept in the object, so
    later work does not change them). Work still queued when the block ends is waited for and
    counted."""

    def __init__(self):
        self._entries = None
        self._table = None
        self._was_on = False

    def __enter__(self):
        self._was_on = enabled()
        reset()
        start()
        return self

    def __exit__(self, *exc):
        try:
            self._entries = entries()
            self._table = table()
        finally:
            if not self._was_on:
                stop()
        return False

    def entries(self):
        return list(self._entries if self._entries is not None else entries())

    def table(self):
        return self._table if self._table is not None else table()

    def __str__(self):
        return self.table()
