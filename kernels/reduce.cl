/* Reductions: sum, prod, max, min, argmax, argmin, with the mean/var/std epilogues.
 *
 * Build options: CT_IN, the input's storage dtype; CT_ACC, the accumulator's dtype (the host's
 * ct__reduce_acc_dtype: double for f64, float for the other floats, long for integers and bool);
 * CT_CHUNKED, 1 on CPU devices. One program per
 * input dtype holds every op (reduce_rows_<op>, reduce_cols_<op>): each kernel calls an inline
 * body with a constant op, which the compiler folds, so the op costs nothing at run time and
 * the number of programs built stays small. Everything else (the output dtype, whether this
 * pass writes final values or partials, the epilogue) is a run-time argument: it is only read
 * once per output.
 *
 * Geometry. The host splits the input's dims into kept dims (the outputs, row-major) and
 * reduced dims, each passed as long8 shape/strides plus a count: output o starts at element
 * in_off + ct_offset(o, kept...) and its j-th reduced element lies ct_offset(j, red...) further.
 * A reduction may run in parts: part p of `parts` covers reduced indices
 * [p * chunk, min(nred, (p + 1) * chunk)), and the partials (acc type, plus i64 indices for
 * argmax/argmin) are laid out [output][part] for the next pass, which reads them with
 * idx_in set.
 *
 * Two shapes of parallelism:
 *  reduce_rows  for reduced extents of small stride: per (output, part), a work-group whose
 *               work-items share the elements and combine in a local-memory tree (GPUs), or
 *               one work-item (CPUs).
 *  reduce_cols  for reductions over outer dims: one work-item per 8 (GPUs) or 64 (CPUs)
 *               consecutive outputs and part, looping over the reduced extent; the outputs are
 *               then usually adjacent in memory and load as vectors.
 *
 * Accuracy. Float sums (including the squared deviations of var) add at most CT_BLOCK elements
 * per lane serially, then merge block sums in a binary cascade: the k-th block sum is pushed
 * onto a stack whose level l holds the sum of 2^l blocks, merging equal levels like a binary
 * counter. That is pairwise summation with blocks, so a work-item's error grows with
 * log2(blocks), not with the number of elements. Lanes, work-items and partials then combine in
 * trees. f16/bf16 accumulate in float, f64 in double, integers in long (exact). */

/* The ops' codes, identities and combining steps: one row each in reduce_ops.h, which the fused
 * kernels of the fusion graph read too. */
//#include "reduce_ops.h"
#define CT_OP_CODE(NAME, name, fid, fcomb, lid, lcomb, lcomb8) CT_OP_##NAME,
enum { CT_REDUCE_OPS(CT_OP_CODE) };

#define CT_EPI_NONE 0
#define CT_EPI_MEAN 1
#define CT_EPI_VAR 2
#define CT_EPI_STD 3

#define CT_BLOCK 16
#define CT_LANES 8

/* The accumulator type the host chose (CT_ACC). */
#if CT_ACC == CT_DT_F64
#define CT_ACC_DOUBLE 1
typedef double acc_t;
typedef double8 acc8_t;
#elif CT_ACC == CT_DT_F32
#define CT_ACC_FLOAT 1
typedef float acc_t;
typedef float8 acc8_t;
#else
#define CT_ACC_LONG 1
typedef long acc_t;
typedef long8 acc8_t;
#endif

typedef CT_T(CT_IN) in_t;

/* One element / 8 consecutive elements as the accumulator type. */
#if CT_IN == CT_DT_F16
#define LOAD1(p, i) vload_half((size_t)(i), (p))
#define LOAD8(p, i) vload_half8(0, (p) + (i))
#elif CT_IN == CT_DT_BF16
#define LOAD1(p, i) ct_bf16_to_f32((p)[i])
#define LOAD8(p, i) as_float8(convert_uint8(vload8(0, (p) + (i))) << 16)
#elif defined(CT_ACC_LONG)
#define LOAD1(p, i) ((long)(p)[i])
#define LOAD8(p, i) convert_long8(vload8(0, (p) + (i)))
#else
#define LOAD1(p, i) ((p)[i])
#define LOAD8(p, i) vload8(0, (p) + (i))
#endif

#if defined(CT_ACC_LONG)
#define ISNAN(x) 0
#else
#define ISNAN(x) isnan(x)
#endif

/* Lane-wise "x beats the current best v" for a forward scan (ties keep the earlier element):
 * NaN beats every number and no NaN beats a NaN. The mask has the comparison's type
 * (int8 for float8); ARG_MASK_L widens it for selecting long8 indices. */
#if defined(CT_ACC_LONG)
#define ARG_BETTER8(op, x, v) ((op) == CT_OP_ARGMAX ? (x) > (v) : (x) < (v))
#else
#define ARG_BETTER8(op, x, v) \
  (!isnan(v) & (isnan(x) | ((op) == CT_OP_ARGMAX ? (x) > (v) : (x) < (v))))
#endif
#if defined(CT_ACC_FLOAT)
typedef int8 ARG_MASK_T;
/* "!= 0", not convert_long8(m) alone: Mesa's rusticl 22.3 (llvmpipe) compiles
 * select(long8, long8, convert_long8(int8 mask)) as if the mask were all false, so argmax and
 * argmin kept each lane's first index (docs/PORTABILITY.md, tests/portability). */
#define ARG_MASK_L(m) (convert_long8(m) != 0)
#else
typedef long8 ARG_MASK_T;
#define ARG_MASK_L(m) (m)
#endif

/* True when (va, ia) should be chosen over (vb, ib) for argmax (dir 1) or argmin (dir -1):
 * NaN beats everything, then the larger (smaller) value, then the lower index. The relation
 * is a total order, so the result doesn't depend on the order of combination. */
inline bool ct_arg_better(int op, acc_t va, long ia, acc_t vb, long ib) {
  bool na = ISNAN(va), nb = ISNAN(vb);
  if (na || nb) return na && (!nb || ia < ib);
  if (va == vb) return ia < ib;
  return op == CT_OP_ARGMAX ? va > vb : va < vb;
}

/* Each row's identity and combining step for this accumulator (scalars, and 8 lanes), then the
 * op-indexed forms the kernels call with a constant op, which the compiler folds. */
#if defined(CT_ACC_LONG)
#define CT_OP_RULES(NAME, name, fid, fcomb, lid, lcomb, lcomb8)                \
  inline acc_t ct_identity_##name(void) { return (acc_t)(lid); }              \
  inline acc_t ct_comb_##name(acc_t a, acc_t b) { return lcomb; }            \
  inline acc8_t ct_comb8_##name(acc8_t a, acc8_t b) { return lcomb8; }
#else
#define CT_OP_RULES(NAME, name, fid, fcomb, lid, lcomb, lcomb8)                \
  inline acc_t ct_identity_##name(void) { return (acc_t)(fid); }              \
  inline acc_t ct_comb_##name(acc_t a, acc_t b) { return fcomb; }            \
  inline acc8_t ct_comb8_##name(acc8_t a, acc8_t b) { return fcomb; }
#endif
CT_REDUCE_OPS(CT_OP_RULES)

#define CT_OP_IDENTITY(NAME, name, ...) if (op == CT_OP_##NAME) return ct_identity_##name();
#define CT_OP_COMB(NAME, name, ...) if (op == CT_OP_##NAME) return ct_comb_##name(a, b);
#define CT_OP_COMB8(NAME, name, ...) if (op == CT_OP_##NAME) return ct_comb8_##name(a, b);
inline acc_t ct_identity(int op) {
  CT_REDUCE_OPS(CT_OP_IDENTITY)
  return (acc_t)0;
}
inline acc_t ct_comb(int op, acc_t a, acc_t b) {
  CT_REDUCE_OPS(CT_OP_COMB)
  return a;
}
inline acc8_t ct_comb8(int op, acc8_t a, acc8_t b) {
  CT_REDUCE_OPS(CT_OP_COMB8)
  return a;
}
/* Combination of two scalars / two acc8_t vectors. */
#define COMB_S(op, a, b) ct_comb((op), (a), (b))
#define COMB_V(op, a, b) ct_comb8((op), (a), (b))

/* Pairwise cascade only where it matters: float sums. */
#if defined(CT_ACC_LONG)
#define CT_CASCADE(op) 0
#else
#define CT_CASCADE(op) ((op) == CT_OP_SUM)
#endif

/* ct_push8/ct_pop8, the cascade of block sums (CT_LEVELS levels of CT_BLOCK elements). */
//#include "cascade.cl"

/* Tree combination of a vector's lanes. */
inline acc_t ct_hcomb8(int op, acc8_t v) {
  acc_t t[CT_LANES];
  vstore8(v, 0, t);
  for (int s = CT_LANES / 2; s > 0; s >>= 1)
    for (int l = 0; l < s; l++) t[l] = COMB_S(op, t[l], t[l + s]);
  return t[0];
}

/* Final value of an output: the epilogue, then the store as dtype out_dt. */
inline acc_t ct_epilogue(int epi, acc_t v, long count, long corr) {
#if defined(CT_ACC_LONG)
  (void)epi; (void)count; (void)corr;
  return v;
#else
  if (epi == CT_EPI_MEAN) return v / (acc_t)count;
  if (epi == CT_EPI_VAR || epi == CT_EPI_STD) {
    acc_t r = v / (acc_t)max(0l, count - corr);
    return epi == CT_EPI_STD ? sqrt(r) : r;
  }
  return v;
#endif
}

inline void ct_store_out(__global void *out, long i, int out_dt, acc_t v) {
  switch (out_dt) {
    CT_STORE_CASES(out, i, v, (float), (double))
    default: break;
  }
}

/* Writes output o's result: final (epilogue + store, or the index for argmax/argmin) or the
 * partial for part p. */
inline void ct_write(int op, int final_, __global void *out, long out_off, __global long *idx_out,
                     long idx_off, int out_dt, int epi, long count, long corr, long parts, long o,
                     long p, acc_t v, long vi) {
  bool arg = op == CT_OP_ARGMAX || op == CT_OP_ARGMIN;
  if (final_) {
    if (arg)
      idx_out[idx_off + o] = vi;
    else
      ct_store_out(out, out_off + o, out_dt, ct_epilogue(epi, v, count, corr));
  } else {
    long k = o * parts + p;
    ((__global acc_t *)out)[out_off + k] = v;
    if (arg) idx_out[idx_off + k] = vi;
  }
}

/* Element j's value, squared deviation from center when pre is set. */
#define CT_PRE_LOAD(pre, p, i, c) \
  ((pre) ? (LOAD1(p, i) - (c)) * (LOAD1(p, i) - (c)) : LOAD1(p, i))

inline long ct_red_offset(long j, int rndim, long8 rshape, long8 rstride) {
  return rndim == 1 ? j * rstride.s0 : ct_offset(j, rndim, rshape, rstride);
}

/* The arguments of every reduce kernel (src/reduce/reduce.c sets them in this order), and of
 * the bodies ct_rows and ct_cols after the op. */
#define CT_ROWS_ARGS                                                                        \
  __global const in_t *in, long in_off, __global const long *idx_in, long idx_in_off,       \
      int has_idx_in, __global const acc_t *center, long center_off, int pre,               \
      __global void *out, long out_off, __global long *idx_out, long idx_out_off,           \
      int final_, int out_dt, int epi, long count, long corr, long parts, long chunk,       \
      long nred, long nout, int kndim, long8 kshape, long8 kstride, int rndim,              \
      long8 rshape, long8 rstride

/* ---- reduce_rows ----
 * GPUs: one work-group per (output, part); its work-items take interleaved vectors (so that
 * neighbours read neighbouring addresses) and combine in a local-memory tree.
 * CPUs (CT_CHUNKED): one work-item per (output, part), streaming its extent alone: a CPU runs
 * a work-group's items one after another on one core, so sharing an extent among them buys
 * nothing, and no barriers or local memory are needed. */
inline void ct_rows(int op, CT_ROWS_ARGS, __local acc_t *lv, __local long *li) {
  bool arg = op == CT_OP_ARGMAX || op == CT_OP_ARGMIN;
  CT_UNIT(g, nout * parts);
#if CT_CHUNKED
  (void)lv;
  (void)li;
#endif
  long o = g / parts, p = g - o * parts;
  long lo = p * chunk, hi = min(nred, lo + chunk);
  long base = in_off + ct_offset(o, kndim, kshape, kstride);
  acc_t c = pre ? center[center_off + o] : (acc_t)0;
  acc_t v = ct_identity(op);
  long vi = LONG_MAX;

  if (arg && !has_idx_in && rndim == 1 && rstride.s0 == 1) {
    /* argmax/argmin of a contiguous extent: per lane, the best value and its index; a lane
     * sees increasing indices, so only a strictly better element replaces its best. */
    __global const in_t *q = in + base + lo;
    long n = hi - lo, nv = n / CT_LANES;
    const long8 lane = (long8)(0, 1, 2, 3, 4, 5, 6, 7);
    acc8_t bv = (acc8_t)ct_identity(op);
    long8 bi = (long8)LONG_MAX;
    if (lid < nv) {
      bv = LOAD8(q, lid * CT_LANES);
      bi = (long8)(lo + lid * CT_LANES) + lane;
    }
    for (long k = lid + L; k < nv; k += L) {
      acc8_t x = LOAD8(q, k * CT_LANES);
      ARG_MASK_T better = ARG_BETTER8(op, x, bv);
      bv = select(bv, x, better);
      bi = select(bi, (long8)(lo + k * CT_LANES) + lane, ARG_MASK_L(better));
    }
    acc_t tv[CT_LANES];
    long ti[CT_LANES];
    vstore8(bv, 0, tv);
    vstore8(bi, 0, ti);
    for (int l = 0; l < CT_LANES; l++)
      if (ct_arg_better(op, tv[l], ti[l], v, vi)) {
        v = tv[l];
        vi = ti[l];
      }
    for (long t = nv * CT_LANES + lid; t < n; t += L) {
      acc_t x = LOAD1(q, t);
      if (ct_arg_better(op, x, lo + t, v, vi)) {
        v = x;
        vi = lo + t;
      }
    }
  } else if (!arg && rndim == 1 && rstride.s0 == 1) {
    /* Contiguous extent: 8-wide loads of vectors v0, v0 + step, ... < v1. */
    __global const in_t *q = in + base + lo;
    long n = hi - lo, nv = n / CT_LANES;
    long v0 = lid, v1 = nv, step = L;
    acc8_t c8 = (acc8_t)c;
    acc8_t acc;
    long k = v0;
    /* Four independent accumulators: one chain of dependent adds can't keep up with memory. */
    if (CT_CASCADE(op)) {
      acc8_t st[CT_LEVELS];
      ulong cnt = 0;
      /* Full blocks of 4 x CT_BLOCK vectors: each accumulator adds CT_BLOCK of them, and the
       * block's sum goes through the cascade. */
      for (; k + 4 * CT_BLOCK * step <= v1;) {
        acc8_t a0 = (acc8_t)0, a1 = (acc8_t)0, a2 = (acc8_t)0, a3 = (acc8_t)0;
        if (pre) {
          for (int t = 0; t < CT_BLOCK; t++, k += 4 * step) {
            acc8_t x0 = LOAD8(q, k * CT_LANES) - c8, x1 = LOAD8(q, (k + step) * CT_LANES) - c8;
            acc8_t x2 = LOAD8(q, (k + 2 * step) * CT_LANES) - c8;
            acc8_t x3 = LOAD8(q, (k + 3 * step) * CT_LANES) - c8;
            a0 += x0 * x0;
            a1 += x1 * x1;
            a2 += x2 * x2;
            a3 += x3 * x3;
          }
        } else {
          for (int t = 0; t < CT_BLOCK; t++, k += 4 * step) {
            a0 += LOAD8(q, k * CT_LANES);
            a1 += LOAD8(q, (k + step) * CT_LANES);
            a2 += LOAD8(q, (k + 2 * step) * CT_LANES);
            a3 += LOAD8(q, (k + 3 * step) * CT_LANES);
          }
        }
        ct_push8(st, &cnt, (a0 + a1) + (a2 + a3));
      }
      /* The rest in blocks of CT_BLOCK. */
      while (k < v1) {
        acc8_t b = (acc8_t)0;
        long kend = min(v1, k + (long)CT_BLOCK * step);
        for (; k < kend; k += step) {
          acc8_t x = LOAD8(q, k * CT_LANES);
          if (pre) x = (x - c8) * (x - c8);
          b += x;
        }
        ct_push8(st, &cnt, b);
      }
      acc = ct_pop8(st, cnt);
    } else {
      acc8_t a0 = (acc8_t)ct_identity(op), a1 = a0, a2 = a0, a3 = a0;
      for (; k + 4 * step <= v1; k += 4 * step) {
        a0 = COMB_V(op, a0, LOAD8(q, k * CT_LANES));
        a1 = COMB_V(op, a1, LOAD8(q, (k + step) * CT_LANES));
        a2 = COMB_V(op, a2, LOAD8(q, (k + 2 * step) * CT_LANES));
        a3 = COMB_V(op, a3, LOAD8(q, (k + 3 * step) * CT_LANES));
      }
      for (; k < v1; k += step) a0 = COMB_V(op, a0, LOAD8(q, k * CT_LANES));
      acc = COMB_V(op, COMB_V(op, a0, a1), COMB_V(op, a2, a3));
    }
    v = ct_hcomb8(op, acc);
    /* The n % 8 leftover elements. */
    for (long t = nv * CT_LANES + lid; t < n; t += L) {
      acc_t x = CT_PRE_LOAD(pre, q, t, c);
      v = COMB_S(op, v, x);
    }
  } else {
    /* General extent: each element's offset from the reduced geometry. */
    long j0 = lo + lid, j1 = hi, step = L;
    if (arg) {
      for (long j = j0; j < j1; j += step) {
        long e = base + ct_red_offset(j, rndim, rshape, rstride);
        acc_t x = LOAD1(in, e);
        long xi = has_idx_in ? idx_in[idx_in_off + (e - in_off)] : j;
        if (ct_arg_better(op, x, xi, v, vi)) {
          v = x;
          vi = xi;
        }
      }
    } else if (CT_CASCADE(op)) {
      acc8_t st[CT_LEVELS];
      ulong cnt = 0;
      long j = j0;
      /* Blocks of 8 x CT_BLOCK elements through the vector cascade, lane by lane. */
      while (j < j1) {
        acc_t b[CT_LANES];
        for (int l = 0; l < CT_LANES; l++) b[l] = (acc_t)0;
        for (int s = 0; s < CT_BLOCK && j < j1; s++)
          for (int l = 0; l < CT_LANES && j < j1; l++, j += step) {
            long e = base + ct_red_offset(j, rndim, rshape, rstride);
            b[l] += CT_PRE_LOAD(pre, in, e, c);
          }
        ct_push8(st, &cnt, vload8(0, b));
      }
      v = ct_hcomb8(op, ct_pop8(st, cnt));
    } else {
      for (long j = j0; j < j1; j += step) {
        long e = base + ct_red_offset(j, rndim, rshape, rstride);
        v = COMB_S(op, v, LOAD1(in, e));
      }
    }
  }

#if CT_CHUNKED
  ct_write(op, final_, out, out_off, idx_out, idx_out_off, out_dt, epi, count, corr, parts, o, p, v,
           vi);
#else
  /* Work-group tree (L is a power of two). */
  lv[lid] = v;
  if (arg) li[lid] = vi;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L / 2; s > 0; s >>= 1) {
    if (lid < s) {
      if (arg) {
        if (ct_arg_better(op, lv[lid + s], li[lid + s], lv[lid], li[lid])) {
          lv[lid] = lv[lid + s];
          li[lid] = li[lid + s];
        }
      } else {
        lv[lid] = COMB_S(op, lv[lid], lv[lid + s]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0)
    ct_write(op, final_, out, out_off, idx_out, idx_out_off, out_dt, epi, count, corr, parts, o, p,
             lv[0], arg ? li[0] : 0);
#endif
}

/* ---- reduce_cols: one work-item per CT_COLS_OUT consecutive outputs and part ----
 * The work-item walks the reduced extent, loading its outputs' elements at each reduced index:
 * one 8-wide load per vector when the outputs are adjacent in memory (reductions over an outer
 * dim), a gather otherwise. CPUs take 8 vectors (64 outputs, 256 bytes of f32 per row) per
 * work-item, so each row visit reads whole cache lines and pages are visited 8 times less
 * often; GPUs one vector, for more work-items. */
#if CT_CHUNKED
#define CT_COLV 8
#else
#define CT_COLV 1
#endif
#define CT_COLS_OUT (CT_LANES * CT_COLV)

inline void ct_push_n(acc8_t (*st)[CT_COLV], ulong *cnt, acc8_t *b) {
  int l = 0;
  for (ulong c = *cnt; c & 1ul; c >>= 1, l++)
    for (int w = 0; w < CT_COLV; w++) b[w] = st[l][w] + b[w];
  for (int w = 0; w < CT_COLV; w++) st[l][w] = b[w];
  *cnt += 1ul;
}

inline void ct_cols(int op, CT_ROWS_ARGS) {
  bool arg = op == CT_OP_ARGMAX || op == CT_OP_ARGMIN;
  long o0 = (long)get_global_id(0) * CT_COLS_OUT;
  long p = get_global_id(1);
  if (o0 >= nout || p >= parts) return;
  int nl = (int)min((long)CT_COLS_OUT, nout - o0);
  long lo = p * chunk, hi = min(nred, lo + chunk);
  /* The outputs are adjacent in memory when they lie in one run of the innermost kept dim,
   * and that dim has stride 1. */
  long ks[8], kt[8];
  vstore8(kshape, 0, ks);
  vstore8(kstride, 0, kt);
  bool adj = kndim >= 1 && kt[kndim - 1] == 1 && o0 % ks[kndim - 1] + nl <= ks[kndim - 1];
  long koff[CT_COLS_OUT];
  long k0 = in_off + ct_offset(o0, kndim, kshape, kstride);
  for (int l = 0; l < CT_COLS_OUT; l++)
    koff[l] = adj && l < nl ? k0 + l
                            : in_off + ct_offset(o0 + min(l, nl - 1), kndim, kshape, kstride);
  /* Vectors in use, and how many of them load whole (the rest gather, lanes past nl
   * repeating the last output, whose results are dropped). */
  int nw = (nl + CT_LANES - 1) / CT_LANES, nfull = adj ? nl / CT_LANES : 0;
  /* Every vector whole and one reduced dim: a loop the compiler unrolls into registers. */
  bool fast = nfull == CT_COLV && rndim == 1;
  long rs = rstride.s0;
  __global const in_t *q = in + k0;

  if (arg) {
    acc_t v[CT_COLS_OUT];
    long vi[CT_COLS_OUT];
    for (int l = 0; l < CT_COLS_OUT; l++) {
      v[l] = ct_identity(op);
      vi[l] = LONG_MAX;
    }
    for (long j = lo; j < hi; j++) {
      long r = ct_red_offset(j, rndim, rshape, rstride);
      for (int l = 0; l < nl; l++) {
        long e = koff[l] + r;
        acc_t x = LOAD1(in, e);
        long xi = has_idx_in ? idx_in[idx_in_off + (e - in_off)] : j;
        if (ct_arg_better(op, x, xi, v[l], vi[l])) {
          v[l] = x;
          vi[l] = xi;
        }
      }
    }
    for (int l = 0; l < nl; l++)
      ct_write(op, final_, out, out_off, idx_out, idx_out_off, out_dt, epi, count, corr, parts,
               o0 + l, p, v[l], vi[l]);
    return;
  }

  acc8_t c8[CT_COLV], acc[CT_COLV];
  for (int w = 0; w < CT_COLV; w++) {
    acc_t t[CT_LANES];
    for (int l = 0; l < CT_LANES; l++)
      t[l] = pre ? center[center_off + o0 + min(w * CT_LANES + l, nl - 1)] : (acc_t)0;
    c8[w] = vload8(0, t);
  }
/* The 8 elements of vector w at reduced offset r. */
#define CT_COLS_LOAD(x, w, r)                                             \
  do {                                                                    \
    if ((w) < nfull) {                                                    \
      x = LOAD8(in, k0 + (r) + (w) * CT_LANES);                           \
    } else {                                                              \
      acc_t t_[CT_LANES];                                                 \
      for (int l_ = 0; l_ < CT_LANES; l_++)                               \
        t_[l_] = LOAD1(in, koff[(w) * CT_LANES + l_] + (r));              \
      x = vload8(0, t_);                                                  \
    }                                                                     \
  } while (0)
  if (CT_CASCADE(op)) {
    acc8_t st[CT_LEVELS][CT_COLV];
    ulong cnt = 0;
    long j = lo;
    while (j < hi) {
      acc8_t b[CT_COLV];
      for (int w = 0; w < CT_COLV; w++) b[w] = (acc8_t)0;
      long jend = min(hi, j + CT_BLOCK);
      if (fast) {
        for (; j < jend; j++) {
          for (int w = 0; w < CT_COLV; w++) {
            acc8_t x = LOAD8(q, j * rs + w * CT_LANES);
            if (pre) x = (x - c8[w]) * (x - c8[w]);
            b[w] += x;
          }
        }
      } else {
        for (; j < jend; j++) {
          long r = ct_red_offset(j, rndim, rshape, rstride);
          for (int w = 0; w < nw; w++) {
            acc8_t x;
            CT_COLS_LOAD(x, w, r);
            if (pre) x = (x - c8[w]) * (x - c8[w]);
            b[w] += x;
          }
        }
      }
      ct_push_n(st, &cnt, b);
    }
    for (int w = 0; w < CT_COLV; w++) acc[w] = (acc8_t)0;
    for (int l = 0; cnt; cnt >>= 1, l++)
      if (cnt & 1ul)
        for (int w = 0; w < CT_COLV; w++) acc[w] = st[l][w] + acc[w];
  } else {
    for (int w = 0; w < CT_COLV; w++) acc[w] = (acc8_t)ct_identity(op);
    if (fast) {
      for (long j = lo; j < hi; j++)
        for (int w = 0; w < CT_COLV; w++) acc[w] = COMB_V(op, acc[w], LOAD8(q, j * rs + w * CT_LANES));
    } else {
      for (long j = lo; j < hi; j++) {
        long r = ct_red_offset(j, rndim, rshape, rstride);
        for (int w = 0; w < nw; w++) {
          acc8_t x;
          CT_COLS_LOAD(x, w, r);
          acc[w] = COMB_V(op, acc[w], x);
        }
      }
    }
  }
#undef CT_COLS_LOAD
  acc_t res[CT_COLS_OUT];
  for (int w = 0; w < CT_COLV; w++) vstore8(acc[w], w, res);
  for (int l = 0; l < nl; l++)
    ct_write(op, final_, out, out_off, idx_out, idx_out_off, out_dt, epi, count, corr, parts,
             o0 + l, p, res[l], 0);
}

#define CT_PASS_ARGS                                                                        \
  in, in_off, idx_in, idx_in_off, has_idx_in, center, center_off, pre, out, out_off,        \
      idx_out, idx_out_off, final_, out_dt, epi, count, corr, parts, chunk, nred

/* Each row's two kernels. name is pasted here, never passed on: a macro argument not pasted is
 * expanded first, and an implementation may define max or min as a macro. */
#define CT_OP_KERNELS(NAME, name, ...)                                                           \
  __kernel void reduce_rows_##name(CT_ROWS_ARGS, __local acc_t *lv, __local long *li) {         \
    ct_rows(CT_OP_##NAME, CT_PASS_ARGS, nout, kndim, kshape, kstride, rndim, rshape, rstride, lv, \
            li);                                                                                \
  }                                                                                             \
  __kernel void reduce_cols_##name(CT_ROWS_ARGS) {                                              \
    ct_cols(CT_OP_##NAME, CT_PASS_ARGS, nout, kndim, kshape, kstride, rndim, rshape, rstride);  \
  }
CT_REDUCE_OPS(CT_OP_KERNELS)
