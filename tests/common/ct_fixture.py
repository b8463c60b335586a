"""Helpers of the fixture generators (tests/*/data/gen_*.py): values as C literals, so that the
generated headers hold exact doubles, infinities and NaN."""
import math


def c_double(v):
    """One value as a C double literal (NAN, INFINITY, -INFINITY or the exact repr)."""
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(float(v))


def c_values(t):
    """A tensor's (or a list's) values, row-major, as a C initializer list (never empty)."""
    vals = t.double().flatten().tolist() if hasattr(t, "double") else list(t)
    return ", ".join(c_double(v) for v in vals) or "0"


def c_shape(t):
    """`ndim, {d0, d1, ...}` for a struct initializer."""
    return "%d, {%s}" % (t.dim(), ", ".join(map(str, t.shape)) or "0")
