#!/usr/bin/env python3
"""The polynomials of kernels/ew_ops.cl's f32 tanh, erf and erfc (gelu), refitted.

Near-minimax fits of relative error (Lawson's iteration: weighted least squares whose weights
grow where the error is largest) on 4000 Chebyshev points, against mpmath at 40 digits:

  tanh(z) = z + z^3 P(z^2),                      0 <= z < 0.625, P of degree 4
  erf(x)  = x T(x^2),                            |x| <= 1,       T of degree 6
  erfc(z) = exp(-z^2) / z * R(1 / z^2),          1 <= z < 2 (degree 9) and 2 <= z <= 10.1 (degree 8)

Prints the coefficients, lowest power first, and the fit's largest relative error (the f32
result's error is dominated by its own roundings: see the comment in ew_ops.cl). Needs numpy
and mpmath (pip install numpy mpmath); about 15 s.
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40


def lawson(t, f, w, deg, iters=200):
    """Coefficients c (lowest first) minimizing max |w (sum c_i t^i - f)| over the points t."""
    a = np.vander(t, deg + 1, increasing=True)
    u = np.ones_like(t) / len(t)
    for _ in range(iters):
        sw = np.sqrt(u) * w
        c, *_ = np.linalg.lstsq(a * sw[:, None], f * sw, rcond=None)
        e = np.abs(w * (a @ c - f))
        u = u * e
        u /= u.sum()
    return c, e.max()


def cheb(a, b, n=4000):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


def show(name, c, err):
    print(f"{name} (max relative error of the fit {err:.2e}):")
    print("  " + ", ".join(f"{v:.9e}f" for v in c))


def main():
    s = cheb(1e-12, 0.625**2)
    z = np.sqrt(s)
    tz = np.array([float(mp.tanh(mp.mpf(v))) for v in z])
    f = np.array([float((mp.tanh(mp.mpf(v)) - mp.mpf(v)) / mp.mpf(v) ** 3) for v in z])
    show("tanh P", *lawson(s, f, z * s / tz, 4))

    s = cheb(1e-12, 1.0)
    x = np.sqrt(s)
    f = np.array([float(mp.erf(mp.mpf(v)) / mp.mpf(v)) for v in x])
    show("erf T", *lawson(s, f, 1 / f, 6))

    for name, a, b, deg in (("erfc R, [1, 2)", 1.0, 2.0, 9), ("erfc R, [2, 10.1]", 2.0, 10.1, 8)):
        y = cheb(1 / b**2, 1 / a**2)
        z = 1 / np.sqrt(y)
        f = np.array([float(mp.erfc(mp.mpf(v)) * mp.mpf(v) * mp.exp(mp.mpf(v) ** 2)) for v in z])
        show(name, *lawson(y, f, 1 / f, deg))


if __name__ == "__main__":
    main()
