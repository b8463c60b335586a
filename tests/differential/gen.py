#!/usr/bin/env python3
"""Writes randomized differential cases for libcltensor, with PyTorch's results as the reference.

    /work/venv/bin/python tests/differential/gen.py [--seed N] [--cases K] [--out DIR]

The committed fixtures (tests/differential/cases) are `--seed 1 --cases 1`; `--cases K` repeats
every op/dtype combination K times with fresh shapes and values; `--large` adds GEMMs of a few
hundred rows (megabytes, for local runs). The C test (test_differential.c) reads the folder named
by $CT_DIFF_DIR, else the committed one; $CT_DIFF_BIG_POOLS=1 makes it place every input inside a
device storage of over 2 MiB (the caching allocator's large-block path).

Output: DIR/manifest.txt (one case a line, format below) and per dtype two 1-D .npy pools:
in_<dt>.npy (the cases' contiguous base tensors, concatenated) and want_<dt>.npy (the expected
results). bf16 has no NumPy dtype: its pools are f32 files holding bf16-exact values, and the C
test casts them (the `pool` lines say which file dtype each pool has).

Manifest lines (whitespace-separated; `key=value` arguments):
    pool <dtype> <file dtype>
    divergence <tag> <reason, to the end of the line>
    case <id> <group> <op> [a=T] [b=T] [c=T] [params...] want=R [alt=R div=<tag>] [ulp=N] [atol=X]
A tensor T is <dtype>:<offset into in_<dtype>>:<base shape>[/view...]: the C test loads the
contiguous base and applies the views in order, so the library computes on real strided inputs:
    /t<d0>,<d1>           ct_transpose        /p<d,d,...>     ct_permute
    /s<d>,<start>,<stop>,<step>  ct_slice     /e<shape>       ct_expand
A shape is its dims joined by '.', or '-' for 0 dims. A result R is <dtype>:<offset into
want_<dtype>>:<shape>, or `error` (PyTorch raises; the library must return an error).
`alt` is what the library documents instead where it deliberately differs from PyTorch (the
reason is the `divergence` line of the tag): the case passes when the library gives `want` (and
the C test then notes that the divergence is gone) or `alt`. `alt=error` is an expected error:
the library documents a refusal where PyTorch computes (e.g. `scalar-range`: uint8 + 1000 wraps
in PyTorch, ct_add_scalar returns CT_ERR_INVALID_ARGUMENT).

Tolerance: a float result element passes when |got - want| <= ulp * ulp_of(want) + atol, in the
result dtype's ulps (NaN must meet NaN, an infinity the same infinity; with ulp = atol = 0 the
values must be identical, the sign of zero included). Integers and bools compare exactly.
Per op (ULP and the *_tol functions below): +, -, *, /, sqrt, floor/ceil/round, min/max, remainder, comparisons are
exact (IEEE, correctly rounded on CPU devices); transcendental functions get OpenCL 1.2's bound
for the builtin plus one ulp for the reference's own rounding (the reference is computed in f64
from the same inputs and rounded once); f16/bf16 results get one ulp of their own (the library
computes them in f32 and rounds once; so does PyTorch's CPU); reductions and GEMMs get an
absolute bound from the summation's error analysis, computed per case from the inputs.

Reference per op: PyTorch (CPU), in the result dtype, except where noted in the op tables:
integer floor_divide/remainder use NumPy (PyTorch traps with SIGFPE on MIN // -1 and raises on
a zero divisor; elsewhere both give Python's floor semantics), integer GEMMs use NumPy's int64
matmul (PyTorch's CPU has no integer GEMM for every dtype; wrapping mod 2^bits is the same).
The storage dtypes u16, u32, u64 (STORAGE) run a few ops each, in gen_storage(), which names the
reference per op (PyTorch's CPU lacks add, sub, lt, arange and eye for them).

Adding a dtype: add its name to TESTED (it must be in DTYPES), regenerate; each new dtype costs a
cold run one kernel build per (op, dtype) it adds. The flags in
LIB_RULES say which deliberate differences the library has today; switch one off when the
library adopts PyTorch's rule and regenerate.
"""
import argparse
import warnings
import math
import os
import sys

import numpy as np
import torch

# name -> (torch dtype, numpy dtype of its pool file, integer/float kind)
DTYPES = {
    'bool': (torch.bool, np.bool_),
    'u8': (torch.uint8, np.uint8),
    'i8': (torch.int8, np.int8),
    'i16': (torch.int16, np.int16),
    'u16': (getattr(torch, 'uint16', None), np.uint16),
    'i32': (torch.int32, np.int32),
    'u32': (getattr(torch, 'uint32', None), np.uint32),
    'i64': (torch.int64, np.int64),
    'u64': (getattr(torch, 'uint64', None), np.uint64),
    'f16': (torch.float16, np.float16),
    'bf16': (torch.bfloat16, np.float32),
    'f32': (torch.float32, np.float32),
    'f64': (torch.float64, np.float64),
}
# The dtypes every op is tested on (adding one is this line plus a regenerate).
TESTED = ['bool', 'u8', 'i8', 'i16', 'i32', 'i64', 'f16', 'bf16', 'f32', 'f64']
# The storage dtypes: libcltensor takes them in every op (alone or with floats), but PyTorch's CPU
# implements only some ops on them, so gen_storage() tests a chosen few ops, each with the
# reference it names (PyTorch where it computes the op, else NumPy / exact Python integers under
# PyTorch's promotion rules). Their (op, dtype) kernels are kept few: a cold run builds each once.
STORAGE = ['u16', 'u32', 'u64']

# The library's deliberate differences from PyTorch today (docs/OPS.md, "Deliberate divergences
# from PyTorch", lists the same tags).
LIB_RULES = {
    'integral-scalar': True,           # a double with an integral value is an integer scalar
    'scalar-range': True,              # an integer dtype refuses a scalar it cannot represent
    'full-float-range': True,          # ct_full into a float dtype takes every value (overflow is inf)
    'int-div-zero': True,              # integer x // 0 and x % 0 give 0
    'neg-int-scalar-pow': True,        # integer tensor ** negative integer scalar follows the tensor rule
    'bool-pow': True,                  # bool ** bool is a or not b
    'where-cond': True,                # where's cond may be any dtype (nonzero is true)
    'float-int-cast': True,            # float -> integer casts saturate, NaN gives 0
    'bool-arg': True,                  # argmax/argmin take bool
    'bool-sub': True,                  # bool - integer/float computes in the promoted dtype
    'bool-unary': True,                # abs, relu, floor, ceil, round are the identity on bool
    'scalar-unrounded': True,          # an f16/bf16 op's scalar enters the f32 computation unrounded
    'u64-reduce': True,                # reductions refuse u64
    'relu-neg-zero': True,             # relu(-0.0) is +0.0
    'zero-dim-rounded': True,          # a 0-d operand is rounded to an f16/bf16 result dtype first
}
REASONS = {
    'integral-scalar': 'a double scalar with an integral value counts as an integer scalar '
                       '(i32 tensor * 2.0 stays i32; PyTorch gives f32 for a Python float)',
    'scalar-range': 'an integer dtype refuses a value it cannot represent (CT_ERR_INVALID_ARGUMENT): '
                    'ct_full\'s value, ct_arange\'s start and last value, a tensor-scalar op\'s scalar, '
                    'ct_clamp\'s bounds; PyTorch wraps (uint8 + 1000, arange(-2, 3) in uint8, full(-1) in '
                    'uint8 is 255) and takes any clamp bound',
    'full-float-range': 'ct_full into f16/bf16/f32 takes every value (beyond the largest finite is inf); '
                        'torch.full refuses a value outside float\'s range',
    'int-div-zero': 'integer floor_divide/remainder by 0 give 0 (as NumPy); PyTorch raises ZeroDivisionError',
    'neg-int-scalar-pow': 'an integer tensor to a negative integer scalar power follows the tensor rule '
                          '(1, +-1 or 0); PyTorch refuses it',
    'bool-pow': 'bool ** bool is (a or not b); PyTorch has no bool pow',
    'where-cond': 'ct_where takes a cond of any dtype (nonzero is true); PyTorch wants bool',
    'float-int-cast': 'float -> integer casts saturate and NaN gives 0; PyTorch leaves out-of-range '
                      'values undefined (x86 gives MIN)',
    'bool-arg': 'argmax/argmin of bool compare false < true; PyTorch has no bool argmax',
    'bool-sub': 'sub with one bool operand computes in the promoted dtype (bool - i32 is i32); '
                'PyTorch refuses any bool operand of -',
    'bool-unary': 'abs, relu, floor, ceil and round are the identity on bool; PyTorch raises',
    'scalar-unrounded': 'an f16/bf16 tensor-scalar op computes in f32 with the scalar unrounded; PyTorch '
                        'first rounds the scalar to f16/bf16 in some ops (remainder, floor_divide, comparisons)',
    'relu-neg-zero': 'relu is max(x, 0): relu(-0.0) is +0.0; PyTorch keeps -0.0',
    'zero-dim-rounded': 'a 0-d tensor operand of another dtype is converted to an f16/bf16 result dtype '
                        'before the op, as every operand; PyTorch\'s CPU add/sub/mul/div take a 0-d '
                        'operand\'s original value, unrounded, into the f32 computation',
    'u64-reduce': 'reductions refuse u64 (CT_ERR_UNSUPPORTED; cast to i64 or f64 first); PyTorch sums '
                  'uint64 into int64, wrapping',
}

FLOATS = ('f16', 'bf16', 'f32', 'f64')
MANT = {'f16': 11, 'bf16': 8, 'f32': 24, 'f64': 53}
MAX_NUMEL = 96


def tdt(name):
    return DTYPES[name][0]


def dname(torch_dtype):
    for k, v in DTYPES.items():
        if v[0] == torch_dtype:
            return k
    raise KeyError(torch_dtype)


def is_float(name):
    return name in FLOATS


def eps(name):
    return 2.0 ** (1 - MANT[name])


def int_range(name):
    if name == 'bool':
        return 0, 1
    info = np.iinfo(DTYPES[name][1])
    return int(info.min), int(info.max)


class Raised(Exception):
    """PyTorch (or the documented rule) raises for this case."""


# ---------------------------------------------------------------- values

def values(rng, name, n, kind='edge'):
    """n values of dtype name, as float64/int64 numpy, mixing edge cases with random ones.
    kind: 'edge' (specials included), 'finite' (no NaN/inf, moderate), 'small' (GEMM inputs)."""
    if name == 'bool':
        return rng.integers(0, 2, n).astype(np.int64)
    if not is_float(name):
        lo, hi = int_range(name)
        if kind == 'small':
            return rng.integers(max(lo, -4), min(hi, 4) + 1, n).astype(np.int64)
        special = [v for v in (0, 1, -1, 2, -2, 3, 7, lo, hi, lo + 1, hi - 1) if lo <= v <= hi]
        out = np.empty(n, dtype=np.int64) if hi < 2 ** 63 else np.empty(n, dtype=np.uint64)
        for i in range(n):
            r = rng.random()
            if kind == 'edge' and r < 0.3:
                out[i] = special[rng.integers(len(special))]
            elif r < 0.7:
                out[i] = rng.integers(max(lo, -10), min(hi, 10) + 1)
            else:
                out[i] = rng.integers(lo, hi, endpoint=True, dtype=np.int64 if hi < 2 ** 63 else np.uint64)
        return out
    fmax = float(torch.finfo(tdt(name)).max)
    tiny = float(torch.finfo(tdt(name)).tiny)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, fmax, -fmax, tiny, -tiny, tiny / 4,
               math.nan, math.inf, -math.inf]
    out = np.empty(n)
    for i in range(n):
        r = rng.random()
        if kind == 'small':
            out[i] = rng.normal()
        elif kind == 'edge' and r < 0.3:
            out[i] = special[rng.integers(len(special))]
        elif r < 0.5:
            out[i] = float(rng.integers(-8, 9)) / (1 if rng.random() < 0.5 else 2)
        else:
            out[i] = rng.normal() * 10.0 ** rng.uniform(-3, 3 if kind == 'edge' else 1)
    return out


def make_base(rng, name, shape, kind):
    n = int(np.prod(shape)) if shape else 1
    v = values(rng, name, n, kind)
    if name == 'bool':
        t = torch.tensor(v.astype(np.bool_))
    elif is_float(name):
        t = torch.tensor(v, dtype=torch.float64).to(tdt(name))
    else:
        t = torch.tensor(v.astype(DTYPES[name][1]))
    return t.reshape(shape)


# ---------------------------------------------------------------- shapes and views

def numel(shape):
    return int(np.prod(shape)) if shape else 1


def rand_shape(rng, ndim=None):
    while True:
        nd = int(rng.integers(0, 5)) if ndim is None else ndim
        shape = [int(rng.choice([1, 2, 3, 4, 5, 7], p=[0.2, 0.25, 0.2, 0.15, 0.1, 0.1])) for _ in range(nd)]
        if nd and rng.random() < 0.06:
            shape[int(rng.integers(nd))] = 0
        if numel(shape) <= MAX_NUMEL:
            return shape


def operand_shape(rng, out):
    """A shape that broadcasts to out: a suffix of it with some dims made 1."""
    k = int(rng.integers(0, len(out) + 1)) if rng.random() < 0.4 else len(out)
    s = list(out[len(out) - k:])
    for i in range(len(s)):
        if rng.random() < 0.25:
            s[i] = 1
    return s


def plan_views(rng, target, allow_expand=True):
    """(base shape, views) such that applying the views to a contiguous base gives target."""
    shape = list(target)
    views = []
    for _ in range(int(rng.choice([0, 1, 2], p=[0.35, 0.45, 0.2]))):
        nd = len(shape)
        kinds = ['s'] if nd else []
        if nd >= 2:
            kinds += ['t', 't']
        if nd >= 3:
            kinds.append('p')
        if allow_expand and nd and not any(v[0] == 'e' for v in views):
            kinds += ['e', 'e']
        if not kinds:
            break
        k = kinds[int(rng.integers(len(kinds)))]
        if k == 't':
            d0, d1 = sorted(int(x) for x in rng.choice(nd, 2, replace=False))
            views.append(('t', d0, d1))
            shape[d0], shape[d1] = shape[d1], shape[d0]
        elif k == 'p':
            perm = [int(x) for x in rng.permutation(nd)]
            views.append(('p',) + tuple(perm))
            pre = [0] * nd
            for i in range(nd):
                pre[perm[i]] = shape[i]
            shape = pre
        elif k == 's':
            d = int(rng.integers(nd))
            step = int(rng.choice([1, 2, 3]))
            start = int(rng.integers(0, 3))
            span = (shape[d] - 1) * step + 1 if shape[d] else 0
            extra = int(rng.integers(0, 3))
            views.append(('s', d, start, start + span, step))
            shape[d] = start + span + extra
        else:
            pre = list(shape)
            for i in range(nd):
                if rng.random() < 0.5:
                    pre[i] = 1
            drop = int(rng.integers(0, nd + 1)) if rng.random() < 0.3 else 0
            views.append(('e',) + tuple(shape))
            shape = pre[drop:]
    views.reverse()
    return shape, views


def apply_views(t, views):
    for v in views:
        if v[0] == 't':
            t = t.transpose(v[1], v[2])
        elif v[0] == 'p':
            t = t.permute(*v[1:])
        elif v[0] == 's':
            idx = [slice(None)] * t.dim()
            idx[v[1]] = slice(v[2], v[3], v[4])
            t = t[tuple(idx)]
        else:
            t = t.expand(*v[1:])
    return t


def fmt_shape(s):
    return '.'.join(str(int(x)) for x in s) if len(s) else '-'


def fmt_views(views):
    out = ''
    for v in views:
        if v[0] == 'e':
            out += '/e' + fmt_shape(v[1:])
        else:
            out += '/' + v[0] + ','.join(str(x) for x in v[1:])
    return out


def fmt_num(x):
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return repr(float(x))


# ---------------------------------------------------------------- pools and manifest

class Writer:
    def __init__(self):
        self.pools = {'in': {}, 'want': {}}
        self.lines = []

    def _add(self, which, name, t):
        t = t.contiguous().reshape(-1)
        if name == 'bf16':
            arr = t.to(torch.float32).numpy()
        elif name == 'bool':
            arr = t.numpy().astype(np.bool_)
        else:
            arr = t.numpy().astype(DTYPES[name][1])
        pool = self.pools[which].setdefault(name, [])
        off = sum(len(p) for p in pool)
        pool.append(arr)
        return off

    def tensor(self, base, views):
        name = dname(base.dtype)
        off = self._add('in', name, base)
        return '%s:%d:%s%s' % (name, off, fmt_shape(base.shape), fmt_views(views))

    def result(self, r):
        if r is None:
            return 'error'
        name = dname(r.dtype)
        off = self._add('want', name, r)
        return '%s:%d:%s' % (name, off, fmt_shape(r.shape))

    def write(self, out, header):
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            if f.endswith('.npy') or f == 'manifest.txt':
                os.remove(os.path.join(out, f))
        lines = ['# ' + header]
        for name in TESTED + STORAGE:
            lines.append('pool %s %s' % (name, 'f32' if name == 'bf16' else name))
        for tag, on in LIB_RULES.items():
            if on:
                lines.append('divergence %s %s' % (tag, REASONS[tag]))
        for which in ('in', 'want'):
            for name in TESTED + STORAGE:
                parts = self.pools[which].get(name, [])
                arr = np.concatenate(parts) if parts else np.zeros(0, DTYPES[name][1])
                np.save(os.path.join(out, '%s_%s.npy' % (which, name)), arr)
        with open(os.path.join(out, 'manifest.txt'), 'w') as f:
            f.write('\n'.join(lines + self.lines) + '\n')


def same(x, y):
    """Results identical (dtype, shape, values with NaN equal to NaN, the sign of zero included, as
    the C test compares), or both errors."""
    if x is None or y is None:
        return x is None and y is None
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype.is_floating_point:
        a, b = x.double(), y.double()
        return bool(torch.all(((a == b) & (torch.signbit(a) == torch.signbit(b))) | (torch.isnan(a) & torch.isnan(b))))
    return bool(torch.equal(x, y))


def run(fn):
    try:
        return fn()
    except (RuntimeError, ZeroDivisionError, TypeError, ValueError, OverflowError, NotImplementedError):
        return None


# ---------------------------------------------------------------- promotion

def to_lib_common(ts, rules):
    """Casts tensor operands to the library's common dtype, PyTorch's torch.result_type (the
    table and the zero-dim ranking), so PyTorch then computes as the library documents."""
    common = torch.result_type(*ts) if len(ts) == 2 else ts[0].dtype
    return [t.to(common) for t in ts]


# ---------------------------------------------------------------- ops

def f64_then(fn, out_dtype):
    """fn evaluated in f64 on the (already converted) operands, rounded once to out_dtype."""
    return lambda *xs: fn(*[x.double() for x in xs]).to(out_dtype)


def float_result(x):
    return x.dtype if x.dtype.is_floating_point else torch.float32


BINARY = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'floor_divide', 'remainder',
          'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logical_and', 'logical_or']
UNARY = ['neg', 'abs', 'relu', 'floor', 'ceil', 'round', 'exp', 'log', 'sqrt', 'rsqrt', 'sin', 'cos',
         'tanh', 'sigmoid', 'gelu', 'logical_not']
SCALAR = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'floor_divide', 'remainder',
          'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'rsub', 'rdiv', 'rpow']
# OpenCL 1.2 full-profile ulp bounds of the builtins (docs/OPS.md), f32 and f64 alike.
ULP = {'pow': 16, 'exp': 3, 'log': 3, 'rsqrt': 2, 'sin': 4, 'cos': 4, 'tanh': 5, 'sigmoid': 16}

TORCH_BIN = {
    'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div, 'pow': torch.pow,
    'maximum': torch.maximum, 'minimum': torch.minimum, 'floor_divide': torch.floor_divide,
    'remainder': torch.remainder, 'eq': torch.eq, 'ne': torch.ne, 'lt': torch.lt, 'le': torch.le,
    'gt': torch.gt, 'ge': torch.ge, 'logical_and': torch.logical_and, 'logical_or': torch.logical_or,
}


def int_floordiv(a, b, op):
    """Integer floor_divide / remainder with NumPy (PyTorch traps on MIN // -1, see the top);
    a zero divisor raises as PyTorch does, unless rules allow the library's 0."""
    an, bn = np.broadcast_arrays(a.numpy(), b.numpy())
    with np.errstate(all='ignore'):
        r = np.floor_divide(an, bn) if op == 'floor_divide' else np.remainder(an, bn)
    return torch.from_numpy(np.array(r, dtype=an.dtype))


def binary(op, x, y, lib, rules):
    """op(x, y) as PyTorch computes it (lib False) or as the library documents (lib True)."""
    if lib:
        if op == 'sub' and torch.bool in (x.dtype, y.dtype) and x.dtype != y.dtype:
            rules.add('bool-sub')
        common = torch.result_type(x, y)
        if common in (torch.float16, torch.bfloat16) and any(t.dim() == 0 and t.dtype != common for t in (x, y)):
            rules.add('zero-dim-rounded')
        x, y = to_lib_common([x, y], rules)
    common = torch.result_type(x, y)
    if op in ('floor_divide', 'remainder') and not common.is_floating_point:
        if common == torch.bool:
            raise Raised()
        xc, yc = x.to(common), y.to(common)
        if bool((yc == 0).any()):
            if not (lib and LIB_RULES['int-div-zero']):
                raise Raised()
            rules.add('int-div-zero')
        return int_floordiv(xc, yc, op)
    if op == 'pow' and common == torch.bool:
        if not lib or not LIB_RULES['bool-pow']:
            return TORCH_BIN[op](x, y)
        rules.add('bool-pow')
        return torch.logical_or(*torch.broadcast_tensors(x, torch.logical_not(y)))
    if op == 'pow' and common.is_floating_point:
        return f64_then(torch.pow, common)(x.to(common), y.to(common))
    return TORCH_BIN[op](x, y)


def binary_tol(op, out):
    name = dname(out)
    if not is_float(name) or op not in ULP:
        return 0
    return 1 if name in ('f16', 'bf16') else ULP[op] + 1


def scalar_op(op, x, s, lib, rules):
    """x op s with s a C double: PyTorch takes it as a Python float (so lib False calls PyTorch's
    own operators); the library as an integer scalar when integral (LIB_RULES['integral-scalar'])
    and an integer scalar outside an integer result's range as an error."""
    sv = s
    cmp = op in ('eq', 'ne', 'lt', 'le', 'gt', 'ge')
    if lib and LIB_RULES['integral-scalar'] and math.isfinite(s) and s == int(s) and -2 ** 63 <= s < 2 ** 63:
        sv = int(s)
        if not x.dtype.is_floating_point:
            rules.add('integral-scalar')
    rt = torch.result_type(x, sv)
    if lib and LIB_RULES['scalar-unrounded'] and rt in (torch.float16, torch.bfloat16) and x.dtype == rt:
        # f16/bf16 compute in f32 with the scalar as f32, rounded once at the end
        rules.add('scalar-unrounded')
        r = scalar_op(op, x.float(), float(s), True, set())
        return r if r.dtype == torch.bool else r.to(rt)
    if lib and cmp and isinstance(sv, int) and not x.dtype.is_floating_point:
        return TORCH_BIN[op](x.to(torch.int64), sv)  # "compare such scalars exactly (in i64)"
    if lib and op in ('div', 'rdiv') and not rt.is_floating_point:
        rt = torch.float32  # true division: integer operands give f32, no range check
        x = x.to(rt)
    if lib and not cmp:
        if isinstance(sv, int) and not rt.is_floating_point and rt != torch.bool:
            lo, hi = int_range(dname(rt))
            if not lo <= sv <= hi:
                rules.add('scalar-range')
                raise Raised()  # "cannot be converted to u8 without overflow"
        if x.dtype == torch.bool and rt != torch.bool and op in ('sub', 'rsub'):
            rules.add('bool-sub')
        x = x.to(rt)
        if dname(rt) in STORAGE and op in ('add', 'sub', 'rsub'):
            # PyTorch's CPU has no add for the storage dtypes: exact integers, wrapped as its others
            sign = {'add': (1, 1), 'sub': (1, -1), 'rsub': (-1, 1)}[op]
            return int_tensor([(sign[0] * v + sign[1] * sv) % (int_range(dname(rt))[1] + 1)
                               for v in x.reshape(-1).tolist()], dname(rt), list(x.shape))
        if op in ('floor_divide', 'remainder') and not rt.is_floating_point and rt != torch.bool:
            if sv == 0:
                rules.add('int-div-zero')
            return int_floordiv(x, torch.tensor(sv, dtype=rt), op)
        if op == 'pow' and not rt.is_floating_point and rt != torch.bool and sv < 0:
            rules.add('neg-int-scalar-pow')
            return torch.pow(x, torch.tensor(sv, dtype=rt))
    if op in ('maximum', 'minimum'):
        return TORCH_BIN[op](x.to(rt), torch.tensor(sv, dtype=rt)) if not rt.is_floating_point else \
            TORCH_BIN[op](x.to(rt).double(), torch.tensor(float(sv), dtype=torch.float64)).to(rt)
    f = {'add': lambda: x + sv, 'sub': lambda: x - sv, 'mul': lambda: x * sv, 'div': lambda: x / sv,
         'pow': lambda: x ** sv, 'floor_divide': lambda: torch.floor_divide(x, sv),
         'remainder': lambda: torch.remainder(x, sv), 'eq': lambda: x == sv, 'ne': lambda: x != sv,
         'lt': lambda: x < sv, 'le': lambda: x <= sv, 'gt': lambda: x > sv, 'ge': lambda: x >= sv,
         'rsub': lambda: sv - x, 'rdiv': lambda: rdiv(sv, x, rt), 'rpow': lambda: sv ** x}[op]
    return f()


def rdiv(s, x, rt):
    """s / x. PyTorch's Python `s / t` multiplies s by t.reciprocal() (two roundings); the
    reference is the division itself, torch.div in the compute dtype (f32 for f16/bf16, whose
    result is rounded once, as torch.div of two f16 tensors does)."""
    ct = torch.float64 if rt == torch.float64 else torch.float32
    return torch.div(torch.tensor(s, dtype=ct), x.to(ct)).to(rt)


def storage_binary(op, x, y):
    """x op y for two tensors of one storage dtype where PyTorch's CPU lacks the kernel (add, sub,
    lt): NumPy, which wraps integers as PyTorch does; the result dtype is PyTorch's (u + u is u)."""
    xn, yn = np.broadcast_arrays(x.numpy(), y.numpy())
    with np.errstate(all='ignore'):
        r = {'add': np.add, 'sub': np.subtract, 'lt': np.less}[op](xn, yn)
    return torch.from_numpy(np.array(r, dtype=np.bool_ if op == 'lt' else xn.dtype))


def gelu_ref(x):
    """gelu, x/2 * erfc(-x/sqrt(2)), evaluated with mpmath at 40 digits and rounded once: PyTorch's
    own x/2 * (1 + erf(x/sqrt(2))) cancels for x < -5 even in f64 (1 + erf is ~1e-15 there,
    from terms of 1), and an f64 erfc of a rounded x/sqrt(2) is off by 2 z^2 ulp, as much as the
    library's bound. The infinities and NaN keep PyTorch's values."""
    import mpmath
    mpmath.mp.dps = 40
    flat = x.reshape(-1).tolist()
    out = [float(mpmath.mpf(v) / 2 * mpmath.erfc(-mpmath.mpf(v) / mpmath.sqrt(2))) if math.isfinite(v) else v
           for v in flat]
    exact = torch.tensor(out, dtype=torch.float64).reshape(x.shape)
    return torch.where(torch.isfinite(x), exact, torch.nn.functional.gelu(x))


def unary(op, x, lib, rules):
    if op == 'neg':
        return torch.neg(x)
    if op in ('abs', 'floor', 'ceil', 'round', 'relu'):
        if x.dtype == torch.bool and lib and LIB_RULES['bool-unary']:
            rules.add('bool-unary')
            return x.clone()
        if op == 'relu' and lib and x.dtype.is_floating_point and bool((x == 0).any()):
            rules.add('relu-neg-zero')  # max(x, 0): -0.0 gives +0.0, where PyTorch keeps -0.0
            return torch.relu(x).masked_fill(x == 0, 0.0)
        return getattr(torch, op)(x)
    if op == 'logical_not':
        return torch.logical_not(x)
    out = float_result(x)
    xd = x.to(out).double()
    # sqrt from NumPy (IEEE's correctly rounded sqrt): PyTorch 2.15's CPU f64 sqrt is not, its
    # sqrt(0.5) is one ulp low; for f32 and below the f64 result rounded once is exact as well.
    f = {'exp': torch.exp, 'log': torch.log, 'sqrt': lambda t: torch.from_numpy(np.asarray(np.sqrt(t.numpy()))),
         'rsqrt': torch.rsqrt, 'sin': torch.sin,
         'cos': torch.cos, 'tanh': torch.tanh, 'sigmoid': torch.sigmoid,
         'gelu': gelu_ref}[op]
    return f(xd).to(out)


def unary_tol(op, x, out):
    name = dname(out)
    if not is_float(name) or op in ('neg', 'abs', 'relu', 'floor', 'ceil', 'round', 'sqrt', 'logical_not'):
        return 0
    if name in ('f16', 'bf16'):
        return 1
    if op == 'gelu':
        xs = x.double()
        xs = xs[torch.isfinite(xs) & (xs > -40)]  # below -40 gelu is 0 or a subnormal either way
        xs = xs[xs < 0] if bool((xs < 0).any()) else xs[:0]  # gelu(x >= 0) is well conditioned
        z2 = float((xs * xs).max()) / 2 if xs.numel() else 0.0
        return int(math.ceil(2 * (19 + 2 * z2))) + 1
    return ULP[op] + 1


# ---------------------------------------------------------------- case builders

class Gen:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.w = Writer()
        self.n = 0

    def operand(self, name, shape, kind='edge', allow_expand=True):
        base_shape, views = plan_views(self.rng, shape, allow_expand)
        base = make_base(self.rng, name, base_shape, kind)
        return apply_views(base, views), self.w.tensor(base, views)

    def emit(self, group, op, args, torch_fn, lib_fn=None, tol=None):
        """Computes PyTorch's result and the library's documented one; writes the case."""
        want = run(torch_fn)
        rules = set()
        alt = None
        if lib_fn is not None:
            try:
                alt = lib_fn(rules)
            except (Raised, RuntimeError, ZeroDivisionError, TypeError, ValueError, OverflowError):
                alt = None
        fields = ['case', str(self.n), group, op] + args
        fields.append('want=' + self.w.result(want))
        if lib_fn is not None and not same(want, alt):
            tag = '+'.join(sorted(rules)) if rules else None
            if tag is None:
                raise SystemExit('gen.py: %s case %d: the library rule differs from PyTorch without a named '
                                 'rule (want %s, alt %s)' % (op, self.n, want, alt))
            fields += ['alt=' + self.w.result(alt), 'div=' + tag]
        ref = want if want is not None else alt
        ulp, atol = tol(ref) if tol and ref is not None else (0, 0.0)
        if ulp:
            fields.append('ulp=%d' % ulp)
        if atol:
            fields.append('atol=%s' % repr(float(atol)))
        self.w.lines.append(' '.join(fields))
        self.n += 1


def wrap_raise(fn):
    def g():
        try:
            return fn()
        except Raised:
            return None
    return g


def gen_binary(g, reps):
    pairs = [(a, b) for a in TESTED for b in TESTED if a != b]
    for _ in range(reps):
        g.rng.shuffle(pairs)
        deal = {op: [] for op in BINARY}
        for i, p in enumerate(pairs):
            deal[BINARY[i % len(BINARY)]].append(p)
        for op in BINARY:
            for a, b in [(d, d) for d in TESTED] + deal[op]:
                out = rand_shape(g.rng)
                x, xs = g.operand(a, operand_shape(g.rng, out))
                y, ys = g.operand(b, operand_shape(g.rng, out))
                g.emit('binary', op, ['a=' + xs, 'b=' + ys],
                       wrap_raise(lambda: binary(op, x, y, False, set())),
                       lambda rules: binary(op, x, y, True, rules),
                       lambda r: (binary_tol(op, r.dtype), 0.0))


SCALARS = [0.0, 1.0, -1.0, 2.0, 3.0, -7.0, 2.5, -0.5, 0.1, 1000.0, 127.0, 255.0, -128.0, 2.0 ** 31,
           math.nan, math.inf, -math.inf, 1e10, 65504.0, 1e-3]


def gen_scalar(g, reps):
    for _ in range(reps):
        for op in SCALAR:
            for a in TESTED:
                s = float(SCALARS[int(g.rng.integers(len(SCALARS)))])
                x, xs = g.operand(a, rand_shape(g.rng))
                g.emit('scalar', op, ['a=' + xs, 's=' + fmt_num(s)],
                       wrap_raise(lambda: scalar_op(op, x, s, False, set())),
                       lambda rules: scalar_op(op, x, s, True, rules),
                       lambda r: (binary_tol('pow' if op in ('pow', 'rpow') else op, r.dtype), 0.0))


def gen_unary(g, reps):
    for _ in range(reps):
        for op in UNARY:
            for a in TESTED:
                x, xs = g.operand(a, rand_shape(g.rng), 'edge')
                g.emit('unary', op, ['a=' + xs], wrap_raise(lambda: unary(op, x, False, set())),
                       lambda rules: unary(op, x, True, rules), lambda r: (unary_tol(op, x, r.dtype), 0.0))


def gen_where_clamp(g, reps):
    for _ in range(reps):
        for i, a in enumerate(TESTED):
            out = rand_shape(g.rng)
            cname = 'bool' if i % 2 == 0 else TESTED[int(g.rng.integers(len(TESTED)))]
            b = TESTED[int(g.rng.integers(len(TESTED)))]
            c, cs = g.operand(cname, operand_shape(g.rng, out))
            x, xs = g.operand(a, operand_shape(g.rng, out))
            y, ys = g.operand(b, operand_shape(g.rng, out))

            def lib_where(rules):
                cc = c
                if cc.dtype != torch.bool:
                    rules.add('where-cond')
                    cc = cc != 0
                xx, yy = to_lib_common([x, y], rules)
                return torch.where(cc, xx, yy)
            g.emit('where', 'where', ['a=' + cs, 'b=' + xs, 'c=' + ys], lambda: torch.where(c, x, y), lib_where)
        for a in TESTED:
            lo = float(g.rng.choice([math.nan, -1.0, 0.0, 0.5, -2.5, -300.0, 2.0]))
            hi = float(g.rng.choice([math.nan, 1.0, 3.0, 2.5, 300.0, -1.0]))
            if math.isnan(lo) and math.isnan(hi):
                hi = 1.0
            x, xs = g.operand(a, rand_shape(g.rng))

            def clamp(lib, rules):
                lv = None if math.isnan(lo) else lo
                hv = None if math.isnan(hi) else hi
                if not lib:  # PyTorch itself (a NaN bound is the library's spelling of None)
                    return torch.clamp(x, lv, hv)
                if LIB_RULES['integral-scalar']:
                    lv = int(lv) if lv is not None and lv == int(lv) else lv
                    hv = int(hv) if hv is not None and hv == int(hv) else hv
                    if not x.dtype.is_floating_point:
                        rules.add('integral-scalar')
                rt = x.dtype
                for v in (lv, hv):
                    if v is not None:
                        rt = torch.result_type(torch.empty(0, dtype=rt), v)
                xx = x.to(rt)
                if not rt.is_floating_point:
                    if rt != torch.bool:
                        lo_r, hi_r = int_range(dname(rt))
                        if any(v is not None and not lo_r <= v <= hi_r for v in (lv, hv)):
                            rules.add('scalar-range')
                            raise Raised()  # the bound cannot be converted to the dtype
                    if rt == torch.bool:
                        lv = None if lv is None else bool(lv)
                        hv = None if hv is None else bool(hv)
                        r = xx
                        if lv is not None:
                            r = torch.logical_or(r, torch.tensor(lv))
                        if hv is not None:
                            r = torch.logical_and(r, torch.tensor(hv))
                        return r
                    return torch.clamp(xx, lv, hv)
                xd = xx.double()
                r = torch.clamp(xd, lv, hv) if (lv is None or hv is None or lv <= hv) else torch.full_like(
                    xd, hv).masked_fill(torch.isnan(xd), math.nan)
                return r.to(rt)
            g.emit('clamp', 'clamp', ['a=' + xs, 'lo=' + fmt_num(lo), 'hi=' + fmt_num(hi)],
                   wrap_raise(lambda: clamp(False, set())), lambda rules: clamp(True, rules))


def int_tensor(vals, name, shape):
    """A tensor of dtype name holding the exact Python integers vals (torch cannot build every
    storage dtype from Python ints, NumPy can)."""
    return torch.from_numpy(np.array(vals, dtype=DTYPES[name][1]).reshape(shape))


def sat_cast(x, to, rules):
    """ct_cast's documented float -> integer rule: truncate, saturate, NaN -> 0 (exact in Python
    integers, as f64 cannot hold the u64/i64 bounds)."""
    if x.dtype.is_floating_point and not to.is_floating_point and to != torch.bool:
        lo, hi = int_range(dname(to))
        out = []
        for v in x.double().reshape(-1).tolist():
            iv = 0 if math.isnan(v) else (hi if v > 0 else lo) if math.isinf(v) else int(v)
            if not math.isfinite(v) or not lo <= iv <= hi:
                rules.add('float-int-cast')
            out.append(min(max(iv, lo), hi))
        return int_tensor(out, dname(to), list(x.shape))
    return x.to(to)


def full_ref(a, shape, v, lib, rules):
    """torch.full with the value as the library reads the double (an integral value is an integer,
    so -1 into uint8 is PyTorch's 255), or the library's documented ct_full."""
    if not is_float(a) and a != 'bool':
        if not lib:
            return torch.full(shape, int(v) if math.isfinite(v) and v == int(v) else v, dtype=tdt(a))
        lo, hi = int_range(a)
        if not (math.isfinite(v) and lo <= v <= hi):
            rules.add('scalar-range')
            raise Raised()
        return int_tensor([int(v)] * numel(shape), a, shape)  # a fraction truncates toward zero
    if a == 'bool':
        return torch.full(shape, v, dtype=torch.bool) if not lib else torch.full(shape, v != 0)
    if not lib:
        return torch.full(shape, v, dtype=tdt(a))
    if run(lambda: torch.full(shape, v, dtype=tdt(a))) is None:
        rules.add('full-float-range')
    return torch.full(shape, v, dtype=torch.float64).to(tdt(a))


def arange_ref(a, start, end, step, lib, rules):
    """arange: floats in f64 rounded once; integers exact, wrapping as PyTorch's arange does
    (computed here for the storage dtypes, whose arange PyTorch's CPU lacks); the library
    refuses a start or last value the dtype cannot hold."""
    if is_float(a):
        return torch.arange(start, end, step, dtype=torch.float64).to(tdt(a))
    n = max(0, math.ceil((end - start) / step))
    vals = [int(start) + i * int(step) for i in range(n)]
    lo, hi = int_range(a)
    if lib and vals and not (lo <= vals[0] <= hi and lo <= vals[-1] <= hi):
        rules.add('scalar-range')
        raise Raised()
    if a in STORAGE:
        return int_tensor([v % (hi + 1) for v in vals], a, [n])
    return torch.arange(start, end, step, dtype=tdt(a))


def eye_ref(a, n, m):
    if a in STORAGE:  # PyTorch's CPU has no eye for them
        return torch.from_numpy(np.eye(n, m, dtype=DTYPES[a][1]))
    return torch.eye(n, m, dtype=tdt(a))


def gen_tensor(g, reps):
    for _ in range(reps):
        for a in TESTED:
            for b in TESTED:
                x, xs = g.operand(a, rand_shape(g.rng))
                g.emit('tensor', 'cast', ['a=' + xs, 'to=' + b], lambda: x.to(tdt(b)),
                       lambda rules: sat_cast(x, tdt(b), rules))
        for a in TESTED:
            x, xs = g.operand(a, rand_shape(g.rng))
            g.emit('tensor', 'contiguous', ['a=' + xs], lambda: x.contiguous())
            emit_full(g, a)
        for a in TESTED:
            if a == 'bool':
                continue
            emit_arange_eye(g, a)


def emit_full(g, a):
    shape = rand_shape(g.rng)
    v = float(values(g.rng, 'f64' if g.rng.random() < 0.5 else 'i32', 1)[0])
    g.emit('tensor', 'full', ['to=' + a, 'shape=' + fmt_shape(shape), 'value=' + fmt_num(v)],
           wrap_raise(lambda: full_ref(a, shape, v, False, set())), lambda rules: full_ref(a, shape, v, True, rules))


def emit_arange_eye(g, a):
    start = float(g.rng.integers(-5, 5))
    step = float(g.rng.choice([1, 2, -1, 3, 0.5] if is_float(a) else [1, 2, -1, 3]))
    end = start + step * float(g.rng.integers(0, 12)) + (0.5 * step if g.rng.random() < 0.3 else 0)
    g.emit('tensor', 'arange', ['to=' + a, 'start=' + fmt_num(start), 'end=' + fmt_num(end),
                                'step=' + fmt_num(step)],
           wrap_raise(lambda: arange_ref(a, start, end, step, False, set())),
           lambda rules: arange_ref(a, start, end, step, True, rules))
    n, m = int(g.rng.integers(0, 5)), int(g.rng.integers(0, 5))
    g.emit('tensor', 'eye', ['to=' + a, 'n=%d' % n, 'm=%d' % m], lambda: eye_ref(a, n, m))


def gen_storage(g, reps):
    """The storage dtypes u16, u32, u64 on a few ops each (their kernels cost a cold run time).
    References: PyTorch where its CPU has the op (mul, div, maximum, eq, where, casts, contiguous,
    full, sum, adding a float tensor); NumPy for add, sub and lt of two storage tensors, exact
    Python integers for add_scalar, arange and eye (PyTorch's CPU lacks those kernels; the values
    follow its promotion and wrapping, as for its other integer dtypes). Mixing with another
    integer or bool dtype is an error in both; matmul is refused by both."""
    others = [d for d in TESTED if not is_float(d)]
    floats = [d for d in FLOATS if d in TESTED]
    for _ in range(reps):
        for k, u in enumerate(STORAGE):
            for op in ('add', 'sub', 'mul', 'div', 'maximum', 'eq', 'lt'):
                out = rand_shape(g.rng)
                x, xs = g.operand(u, operand_shape(g.rng, out))
                y, ys = g.operand(u, operand_shape(g.rng, out))
                ref = (lambda: storage_binary(op, x, y)) if op in ('add', 'sub', 'lt') else \
                    (lambda: binary(op, x, y, False, set()))
                g.emit('binary', op, ['a=' + xs, 'b=' + ys], ref, None, lambda r: (binary_tol(op, r.dtype), 0.0))
            for b in (floats[k % len(floats)], others[(2 * k + 1) % len(others)]):
                out = rand_shape(g.rng)
                x, xs = g.operand(u, operand_shape(g.rng, out))
                y, ys = g.operand(b, operand_shape(g.rng, out))
                g.emit('binary', 'add', ['a=' + xs, 'b=' + ys], wrap_raise(lambda: binary('add', x, y, False, set())),
                       lambda rules: binary('add', x, y, True, rules))
            for op in ('add', 'mul'):
                sc = float(SCALARS[int(g.rng.integers(len(SCALARS)))])
                x, xs = g.operand(u, rand_shape(g.rng))
                g.emit('scalar', op, ['a=' + xs, 's=' + fmt_num(sc)],
                       wrap_raise(lambda: scalar_op(op, x, sc, False, set())),
                       lambda rules: scalar_op(op, x, sc, True, rules))
            out = rand_shape(g.rng)
            c, cs = g.operand('bool', operand_shape(g.rng, out))
            x, xs = g.operand(u, operand_shape(g.rng, out))
            y, ys = g.operand(u, operand_shape(g.rng, out))
            g.emit('where', 'where', ['a=' + cs, 'b=' + xs, 'c=' + ys], lambda: torch.where(c, x, y))
            for a, b in [(u, 'f32'), (u, 'f64'), (u, 'i64'), ('f32', u), ('f64', u), ('i64', u), ('bool', u)]:
                x, xs = g.operand(a, rand_shape(g.rng))
                g.emit('tensor', 'cast', ['a=' + xs, 'to=' + b], lambda: x.to(tdt(b)),
                       lambda rules: sat_cast(x, tdt(b), rules))
            x, xs = g.operand(u, rand_shape(g.rng))
            g.emit('tensor', 'contiguous', ['a=' + xs], lambda: x.contiguous())
            emit_full(g, u)
            emit_arange_eye(g, u)
            x, xs = g.operand(u, rand_shape(g.rng))
            dims = red_dims(g.rng, x.dim())
            keep = int(g.rng.integers(0, 2))

            def storage_sum(rules):
                if u == 'u64':
                    rules.add('u64-reduce')
                    raise Raised()
                return reduce_ref('sum', x, dims, bool(keep), 0)
            g.emit('reduce', 'sum', ['a=' + xs, 'dims=' + (','.join(str(d) for d in dims) if dims else 'all'),
                                     'keep=%d' % keep],
                   lambda: reduce_ref('sum', x, dims, bool(keep), 0), storage_sum)
            x, xs = g.operand(u, [2, 3], 'small')
            y, ys = g.operand(u, [3, 2], 'small')
            g.emit('linalg', 'matmul', ['a=' + xs, 'b=' + ys], lambda: None)


# ---- reductions ----

def red_dims(rng, nd):
    if nd == 0:
        return [] if rng.random() < 0.5 else [int(rng.choice([0, -1]))]
    if rng.random() < 0.3:
        return []
    k = int(rng.integers(1, nd + 1))
    dims = [int(d) for d in rng.choice(nd, k, replace=False)]
    return [d - nd if rng.random() < 0.3 else d for d in dims]


def norm_dims(dims, nd):
    if nd == 0:
        return []
    return sorted(set((d + nd) % nd for d in dims)) if dims else list(range(nd))


def reduce_ref(op, x, dims, keep, corr):
    """Reference reductions: floats in f64 rounded once to the result dtype; integers exact."""
    nd = x.dim()
    nds = norm_dims(dims, nd)
    if op in ('mean', 'var', 'std') and not x.dtype.is_floating_point:
        raise Raised()
    out = x.dtype if x.dtype.is_floating_point or op in ('max', 'min') else torch.int64
    if op in ('max', 'min'):
        if any(x.shape[d] == 0 for d in nds):
            raise Raised()
        if nd == 0:
            return x.clone()
        xx = x.to(torch.uint8) if x.dtype == torch.bool else x
        r = (torch.amax if op == 'max' else torch.amin)(xx, dim=nds, keepdim=keep)
        return r.to(x.dtype)
    xd = x.double() if x.dtype.is_floating_point else x.to(torch.int64)
    if nd == 0:
        red = xd
        n = 1
    else:
        n = int(np.prod([x.shape[d] for d in nds])) if nds else 1
    if op == 'sum':
        r = xd.sum(dim=nds, keepdim=keep) if nd else xd.clone()
    elif op == 'mean':
        r = xd.mean(dim=nds, keepdim=keep) if nd else xd.clone()
    elif op == 'prod':
        if nd == 0:
            r = xd.clone()
        elif x.dtype.is_floating_point:
            r = xd
            for d in reversed(nds):
                r = r.prod(dim=d, keepdim=True)
            if not keep:
                r = r.squeeze(nds) if nds else r
        else:
            # exact wrapping product mod 2^64
            v = np.moveaxis(x.to(torch.int64).numpy(), nds, list(range(nd - len(nds), nd)))
            v = v.reshape(v.shape[:nd - len(nds)] + (-1,))
            with np.errstate(all='ignore'):
                p = np.multiply.reduce(v.astype(np.int64), axis=-1)
            r = torch.from_numpy(np.array(p, dtype=np.int64))
            if keep:
                for d in nds:
                    r = r.unsqueeze(d)
    else:
        if nd == 0:
            r = torch.var(xd.reshape(1), correction=corr) if op == 'var' else torch.std(xd.reshape(1), correction=corr)
            r = r.reshape(())
        else:
            f = torch.var if op == 'var' else torch.std
            r = f(xd, dim=nds, correction=corr, keepdim=keep)
    return r.to(out)


def reduce_tol(op, x, dims, r):
    if not x.dtype.is_floating_point or op in ('max', 'min', 'argmax', 'argmin'):
        return 0, 0.0
    name = dname(x.dtype)
    e = eps('f64' if name == 'f64' else 'f32')
    nds = norm_dims(dims, x.dim())
    n = int(np.prod([x.shape[d] for d in nds])) if x.dim() and nds else 1
    xd = x.double()
    fin = torch.where(torch.isfinite(xd), xd.abs(), torch.zeros_like(xd))
    s = float(fin.sum()) if fin.numel() else 0.0
    ulp = 1  # the final rounding to the result dtype (the reference rounds once too)
    g = 16 + 2 * math.log2(max(n, 2)) + 8  # reduce.h's bound for the pairwise sums
    if op == 'sum':
        return ulp, g * e * s
    if op == 'mean':
        return ulp + 1, g * e * s / max(n, 1)
    if op == 'prod':
        return 2 * n + 2 + ulp, 0.0
    m = float(fin.max()) if fin.numel() else 0.0
    # var/std: two passes; the deviations' error is about g eps max|x|, squared terms relative.
    if op == 'var':
        return 4 * int(g) + ulp, 4 * g * e * m * m
    return 4 * int(g) + ulp, 4 * g * e * m


def gen_reduce(g, reps):
    ops = ['sum', 'mean', 'prod', 'max', 'min', 'var', 'std', 'argmax', 'argmin']
    for _ in range(reps):
        for op in ops:
            for a in TESTED:
                shape = rand_shape(g.rng)
                if op == 'prod' and is_float(a):
                    kind = 'finite'
                else:
                    kind = 'edge' if g.rng.random() < 0.7 else 'finite'
                x, xs = g.operand(a, shape, kind)
                keep = int(g.rng.integers(0, 2))
                if op in ('argmax', 'argmin'):
                    nd = x.dim()
                    dim = None if nd == 0 or g.rng.random() < 0.3 else int(g.rng.integers(-nd, nd))

                    def arg(lib, rules):
                        xx = x
                        if xx.dtype == torch.bool:
                            if not (lib and LIB_RULES['bool-arg']):
                                return (torch.argmax if op == 'argmax' else torch.argmin)(xx, dim=dim, keepdim=bool(keep))
                            rules.add('bool-arg')
                            xx = xx.to(torch.uint8)
                        if (dim is None and xx.numel() == 0) or (dim is not None and xx.shape[dim] == 0):
                            raise Raised()
                        f = torch.argmax if op == 'argmax' else torch.argmin
                        if dim is None and keep:
                            return f(xx).reshape([1] * xx.dim())
                        return f(xx, dim=dim, keepdim=bool(keep))
                    g.emit('reduce', op, ['a=' + xs, 'dim=' + ('none' if dim is None else str(dim)),
                                          'keep=%d' % keep],
                           wrap_raise(lambda: arg(False, set())), lambda rules: arg(True, rules))
                    continue
                dims = red_dims(g.rng, x.dim())
                corr = int(g.rng.integers(0, 2))
                args = ['a=' + xs, 'dims=' + (','.join(str(d) for d in dims) if dims else 'all'), 'keep=%d' % keep]
                if op in ('var', 'std'):
                    args.append('corr=%d' % corr)
                g.emit('reduce', op, args, wrap_raise(lambda: reduce_ref(op, x, dims, bool(keep), corr)), None,
                       lambda r: reduce_tol(op, x, dims, r))
        for op in ('softmax', 'log_softmax'):
            for a in FLOATS:
                if a not in TESTED:
                    continue
                x, xs = g.operand(a, rand_shape(g.rng), 'edge' if g.rng.random() < 0.3 else 'finite')
                nd = x.dim()
                dim = int(g.rng.integers(-nd, nd)) if nd else int(g.rng.choice([0, -1]))

                def sm():
                    f = torch.softmax if op == 'softmax' else torch.log_softmax
                    return f(x.double(), dim=dim if nd else 0).to(x.dtype)

                def sm_tol(r):
                    name = dname(x.dtype)
                    e = eps('f64' if name == 'f64' else 'f32')
                    xd = x.double()
                    fin = xd[torch.isfinite(xd)]
                    rng_ = float(fin.max() - fin.min()) if fin.numel() else 0.0
                    n = x.shape[dim] if nd else 1
                    g_ = 16 + 2 * math.log2(max(n, 2)) + 8
                    u = 1 if name in ('f16', 'bf16') else 0
                    if op == 'softmax':
                        return u + 8, (g_ + 4 + 2 * rng_) * e
                    m = float(fin.abs().max()) if fin.numel() else 0.0
                    return u + 8, (g_ + 8) * e * (m + rng_ + math.log(max(n, 1)) + 1)
                g.emit('reduce', op, ['a=' + xs, 'dim=%d' % dim], wrap_raise(sm), None, sm_tol)


# ---- GEMM ----

def mm_shapes(rng):
    kind = rng.choice(['dot', 'mv', 'vm', 'mm', 'bmm', 'bcast'])
    m, k, n = (int(rng.choice([0, 1, 2, 3, 5, 8, 17])) if rng.random() < 0.2 else int(rng.integers(1, 9))
               for _ in range(3))
    if kind == 'dot':
        return [k], [k]
    if kind == 'mv':
        return [m, k], [k]
    if kind == 'vm':
        return [k], [k, n]
    if kind == 'mm':
        return [m, k], [k, n]
    b = int(rng.integers(1, 4))
    if kind == 'bmm':
        return [b, m, k], [b, k, n]
    return ([2, 1, m, k], [b, k, n]) if rng.random() < 0.5 else ([m, k], [b, k, n])


def mm_ref(x, y, exact=False):
    """x @ y: floats in f64, rounded to x's dtype unless exact (addmm and linear round once, after
    adding c or the bias); integers in int64 with NumPy, wrapped to x's dtype."""
    if x.dtype.is_floating_point:
        r = torch.matmul(x.double(), y.double())
        return r if exact else r.to(x.dtype)
    xn, yn = x.to(torch.int64).numpy(), y.to(torch.int64).numpy()
    with np.errstate(all='ignore'):
        r = np.matmul(xn, yn)
    return torch.from_numpy(np.array(r, dtype=np.int64)).to(x.dtype)


def mm_tol(x, y, k):
    if not x.dtype.is_floating_point:
        return 0, 0.0
    name = dname(x.dtype)
    e = eps('f64' if name == 'f64' else 'f32')
    bound = torch.matmul(x.double().abs(), y.double().abs())
    m = float(bound.max()) if bound.numel() else 0.0
    return (1 if name in ('f16', 'bf16') else 0), (k + 2) * e * m


def gen_linalg(g, reps):
    mm_dtypes = [d for d in TESTED if d != 'bool']
    for _ in range(reps):
        for i in range(3):
            for a in mm_dtypes:
                sa, sb = mm_shapes(g.rng)
                x, xs = g.operand(a, sa, 'small', allow_expand=True)
                y, ys = g.operand(a, sb, 'small', allow_expand=True)
                g.emit('linalg', 'matmul', ['a=' + xs, 'b=' + ys], lambda: mm_ref(x, y), None,
                       lambda r: mm_tol(x, y, sa[-1]))
        x, xs = g.operand('f32', [2, 3], 'small')
        y, ys = g.operand('bool', [3, 2], 'small')
        g.emit('linalg', 'matmul', ['a=' + xs, 'b=' + ys], lambda: None)
        for a in FLOATS + ('i32',):
            if a not in TESTED:
                continue
            bsz, kin, kout = int(g.rng.integers(1, 4)), int(g.rng.integers(1, 6)), int(g.rng.integers(1, 6))
            x, xs = g.operand(a, [bsz, kin], 'small')
            w, ws = g.operand(a, [kout, kin], 'small')
            bias, bs = g.operand(a, [kout], 'small')
            wt = w.transpose(0, 1)

            def linear_tol(r):
                u, t = mm_tol(x, wt, kin)
                return (u + 1, t + 2 * eps('f32') * float(bias.double().abs().max())) if is_float(a) else (0, 0.0)
            g.emit('linalg', 'linear', ['a=' + xs, 'b=' + ws, 'c=' + bs],
                   lambda: (mm_ref(x, wt, True) + bias.double()).to(x.dtype) if is_float(a)
                   else mm_ref(x, wt) + bias, None, linear_tol)
            m, k, n = (int(g.rng.integers(1, 6)) for _ in range(3))
            c, cs = g.operand(a, operand_shape(g.rng, [m, n]), 'small')
            x, xs = g.operand(a, [m, k], 'small')
            y, ys = g.operand(a, [k, n], 'small')
            beta, alpha = (float(g.rng.choice([0.0, 1.0, 2.0, -1.0])), float(g.rng.choice([1.0, 0.5, -2.0, 3.0])))
            if not is_float(a):
                alpha = float(int(alpha) or 1)

            def addmm():
                p = mm_ref(x, y, x.dtype.is_floating_point)
                if x.dtype.is_floating_point:
                    cc = torch.zeros_like(c.double()) if beta == 0 else beta * c.double()
                    return (cc + alpha * p).to(x.dtype)
                return (int(beta) * c.to(torch.int64) + int(alpha) * p.to(torch.int64)).to(x.dtype)

            def addmm_tol(r):
                if not is_float(a):
                    return 0, 0.0
                u, t = mm_tol(x, y, k)
                return u + 1, abs(alpha) * t + 2 * eps('f32') * (abs(beta) * float(c.double().abs().max()) +
                                                                 abs(alpha) * float(mm_ref(x, y).double().abs().max()))
            g.emit('linalg', 'addmm', ['a=' + cs, 'b=' + xs, 'c=' + ys, 'beta=' + fmt_num(beta),
                                       'alpha=' + fmt_num(alpha)], addmm, None, addmm_tol)


LARGE_GEMMS = [([2, 256, 256], [256, 256]), ([3, 300, 200], [200, 100]), ([3, 300, 200], [200, 64]),
               ([4, 100, 100], [100, 100]), ([300, 200], [3, 200, 64]), ([2, 1, 128, 96], [3, 96, 130])]


def gen_large(g, reps):
    """GEMMs past the routes' size thresholds (direct/indirect kernels, BLAS threading, batch
    folding): megabytes of fixtures, so only with --large, for local runs."""
    for _ in range(reps):
        for sa, sb in LARGE_GEMMS:
            for a in ('f32', 'f64', 'bf16'):
                if a not in TESTED:
                    continue
                x, xs = g.operand(a, sa, 'small', allow_expand=False)
                y, ys = g.operand(a, sb, 'small', allow_expand=False)
                g.emit('linalg', 'matmul', ['a=' + xs, 'b=' + ys], lambda: mm_ref(x, y), None,
                       lambda r: mm_tol(x, y, sa[-1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--cases', type=int, default=1, help='repetitions of every op/dtype combination')
    ap.add_argument('--out', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cases'))
    ap.add_argument('--large', action='store_true', help='add GEMMs of a few hundred rows (megabytes; local runs)')
    ap.add_argument('--only', default='', help='comma-separated groups (binary, scalar, unary, where, '
                                                'clamp, tensor, reduce, linalg, storage); default all')
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    warnings.filterwarnings('ignore')  # PyTorch's deprecation notes for the cases it still accepts
    g = Gen(args.seed)
    groups = set(args.only.split(',')) if args.only else None
    for name, fn in (('binary', gen_binary), ('scalar', gen_scalar), ('unary', gen_unary),
                     ('where', gen_where_clamp), ('tensor', gen_tensor), ('reduce', gen_reduce),
                     ('linalg', gen_linalg), ('storage', gen_storage)):
        if groups is None or name in groups:
            fn(g, args.cases)
    if args.large:
        gen_large(g, args.cases)
    g.w.write(args.out, 'libcltensor differential cases: gen.py --seed %d --cases %d (torch %s, numpy %s); '
                        '%d cases' % (args.seed, args.cases, torch.__version__, np.__version__, g.n))
    print('gen.py: %d cases in %s' % (g.n, args.out))


if __name__ == '__main__':
    sys.exit(main())
