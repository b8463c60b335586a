#!/usr/bin/env python3
"""Makes torch_ops_fixture.h: PyTorch's results for the elementwise ops of issue #14 (erf, log1p,
expm1, tan, atan, silu, softplus, gelu_tanh, leaky_relu, sign, trunc, isnan, isinf, isfinite,
bitwise ops, atan2, fmod), which test_torch.c compares libcltensor's against. CI has no PyTorch;
the header is committed. Rerun (PyTorch from PyPI in a virtualenv):

    python3 tests/elementwise/gen_torch_ops.py > tests/elementwise/torch_ops_fixture.h

Inputs are fixed: special values (signed zeros, the softplus threshold, where gelu_tanh's
PyTorch form cancels, large, tiny, infinite, NaN) and values from a seeded generator."""
import math

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(20261201)
SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-3, -1e-3, 1e-30, -2.5, 2.5, 3.0, -7.0, 19.5, 20.0, 20.5,
            -20.0, 30.0, 88.0, -88.0, 100.0, -100.0, 1.5707963, -1.5707964, 6.0, -6.0, 1e30, -1e30,
            math.inf, -math.inf, math.nan]
X = SPECIALS + list(rng.normal(0, 4, 64 - len(SPECIALS)))
# second operand of the binary ops: zeros of both signs, infinities, NaN, negatives
Y = [2.0, 2.0, -0.0, 0.0, 3.0, -3.0, 1.0, -1.0, 0.25, math.inf, -math.inf, 2.0, math.nan, 7.0, -7.0, 0.5]
Y = (Y * 4)[:len(SPECIALS)] + list(rng.normal(0, 3, 64 - len(SPECIALS)))
# every float input is an f32 value, so that each dtype's input is one rounding away (as the test
# makes them: f32, then f16/bf16 or exactly f64)
X = [float(np.float32(v)) for v in X]
Y = [float(np.float32(v)) for v in Y]
XI = [0, 1, -1, 7, -7, 8, -8, 127, -128, 100, -100, 2**31 - 1, -2**31, 2**40 + 3, -(2**40) - 3, 5]
XI = XI + [int(v) for v in rng.integers(-1000, 1000, 64 - len(XI))]
YI = [3, -3, 2, 2, 3, -3, -1, 5, 7, -5, 9, 1000, -1000, 2**20, 3, -4]
YI = YI + [int(v) if v != 0 else 1 for v in rng.integers(-50, 50, 64 - len(YI))]  # no zero divisor

UNARY_F = {
    'erf': torch.erf, 'log1p': torch.log1p, 'expm1': torch.expm1, 'tan': torch.tan, 'atan': torch.atan,
    'silu': F.silu, 'softplus': F.softplus, 'gelu_tanh': lambda t: F.gelu(t, approximate='tanh'),
    'leaky_relu': lambda t: F.leaky_relu(t, 0.01), 'sign': torch.sign, 'trunc': torch.trunc,
    'isnan': torch.isnan, 'isinf': torch.isinf, 'isfinite': torch.isfinite,
}
BINARY_F = {'atan2': torch.atan2, 'fmod': torch.fmod}
UNARY_I = {'sign': torch.sign, 'trunc': torch.trunc, 'bitwise_not': torch.bitwise_not, 'isnan': torch.isnan,
           'isinf': torch.isinf, 'isfinite': torch.isfinite}
BINARY_I = {'fmod': torch.fmod, 'bitwise_and': torch.bitwise_and, 'bitwise_or': torch.bitwise_or,
            'bitwise_xor': torch.bitwise_xor}
# dtypes: codes of ct_dtype; f16/bf16 for the ops a transformer uses
DT = {'f32': (7, torch.float32), 'f64': (8, torch.float64), 'f16': (5, torch.float16), 'bf16': (6, torch.bfloat16),
      'i64': (4, torch.int64)}
SMALL = ['silu', 'gelu_tanh', 'leaky_relu', 'erf']


def num(v):
    v = float(v)
    if math.isnan(v):
        return 'NAN'
    if math.isinf(v):
        return 'INFINITY' if v > 0 else '-INFINITY'
    return v.hex()


def arr(name, vals):
    body = ', '.join(num(v) for v in vals)
    return f'static const double {name}[{len(vals)}] = {{{body}}};'


def iarr(name, vals):
    body = ', '.join(f'INT64_C({int(v)})' for v in vals)
    return f'static const int64_t {name}[{len(vals)}] = {{{body}}};'


out = ['/* Made by gen_torch_ops.py (PyTorch %s); do not edit. */' % torch.__version__,
       '#ifndef TORCH_OPS_FIXTURE_H', '#define TORCH_OPS_FIXTURE_H', '#include <math.h>', '#include <stdint.h>',
       f'#define TF_N {len(X)}', arr('tf_x', X), arr('tf_y', Y), iarr('tf_xi', XI), iarr('tf_yi', YI)]
cases = []
n = 0
for dtn, (code, tdt) in DT.items():
    if dtn == 'i64':
        continue
    x = torch.tensor(X, dtype=torch.float64).to(tdt)
    y = torch.tensor(Y, dtype=torch.float64).to(tdt)
    for op, f in list(UNARY_F.items()) + list(BINARY_F.items()):
        if dtn in ('f16', 'bf16') and op not in SMALL:
            continue
        if dtn == 'f64' and op in ('isnan', 'isinf', 'isfinite', 'sign', 'trunc', 'leaky_relu'):
            continue  # exact ops: f32 shows the semantics; the host references cover f64
        r = f(x, y) if op in BINARY_F else f(x)
        odt = 0 if r.dtype == torch.bool else code
        name = f'tf_want_{n}'
        out.append(arr(name, r.to(torch.float64).tolist()))
        cases.append((op, code, odt, 'b' if op in BINARY_F else 'u', name))
        n += 1
xi = torch.tensor(XI, dtype=torch.int64)
yi = torch.tensor(YI, dtype=torch.int64)
for op, f in list(UNARY_I.items()) + list(BINARY_I.items()):
    r = f(xi, yi) if op in BINARY_I else f(xi)
    odt = 0 if r.dtype == torch.bool else 4
    name = f'tf_want_{n}'
    out.append(iarr(name, r.to(torch.int64).tolist()))
    cases.append((op, 4, odt, 'B' if op in BINARY_I else 'U', name))
    n += 1
out.append('/* op, input dtype, result dtype (ct_dtype codes), form (u/b: float data as double; U/B: i64 '
           'data), expected */')
out.append('typedef struct { const char *op; int dt, odt; char form; const double *want; const int64_t *iwant; } '
           'tf_case;')
out.append('static const tf_case tf_cases[] = {')
for op, code, odt, form, name in cases:
    if form in 'ub':
        out.append(f'    {{"{op}", {code}, {odt}, \'{form}\', {name}, NULL}},')
    else:
        out.append(f'    {{"{op}", {code}, {odt}, \'{form}\', NULL, {name}}},')
out.append('};')
out.append('#endif')
print('\n'.join(out))
