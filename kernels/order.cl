/* Kernels of the ops whose arithmetic or ordering depends on the dtype: scatter_add, cumsum /
 * cumprod, sort. One program per dtype (-DCT_IN=<dtype>) holds them all.
 *
 * Lines: these ops walk "lines", the elements along one dim at fixed other coordinates. A line
 * number enumerates those coordinates row-major over the shape with the walked dim set to 1,
 * and ct_offset() (common.cl) turns it into each tensor's element offset. */
#define TIN CT_T(CT_IN)

/* Raw elements for moving bits (half is not dereferenceable without cl_khr_fp16). */
#if CT_IN == CT_DT_F16
#define RAW ushort
#else
#define RAW TIN
#endif

/* ct_report_bad, ct_chunk, ct_load_index. */
//#include "indexing_common.cl"

/* ---- scatter_add ---------------------------------------------------------------------- */

/* One work-item per line of the index (all its coordinates but `dim`): out (a contiguous copy
 * of x) gets src[.., k, ..] added at out[.., index[.., k, ..], ..] for k = 0, 1, ... in order,
 * each addition rounded to the dtype. Two index entries of one line may name the same
 * destination, and lines never share destinations, so the order is fixed and the result is
 * deterministic. */
#if CT_IN == CT_DT_BOOL
#define ADD_TO(p, i, s, j) ((p)[i] = (uchar)((p)[i] != 0 || (s)[j] != 0))
#elif CT_IN == CT_DT_F16 || CT_IN == CT_DT_BF16
#define ADD_TO(p, i, s, j) CT_STOREF(CT_IN, p, i, CT_LOADF(CT_IN, p, i) + CT_LOADF(CT_IN, s, j))
#elif CT_IN == CT_DT_F32 || CT_IN == CT_DT_F64
#define ADD_TO(p, i, s, j) ((p)[i] += (s)[j])
#else
/* Integers wrap: add as unsigned bits of the same width. */
#define ADD_TO(p, i, s, j) ((p)[i] = (TIN)((ulong)(p)[i] + (ulong)(s)[j]))
#endif

/* vec (f32, f64): a work-item takes 16 consecutive lines, which the host found contiguous in
 * out and src and sharing one index (index_select's and embedding's backward, whose index is
 * expanded across the lines: a work-item per line walked all of src once per line, 64 times a
 * 512 KB gradient for a [2048, 64] embedding). Each element still gets its additions in k
 * order, so the results are the same bits. */
#if CT_IN == CT_DT_F32 || CT_IN == CT_DT_F64
#define CT_SCATTER_VEC 1
#endif
__kernel void scatter_add_lines(__global TIN *out, long out_off, long8 ostr, __global const TIN *src,
                                long src_off, long8 sstr, __global const uchar *idx, long idx_off,
                                long8 istr, int idx64, int ndim, long8 lshape, long klen, long o_step,
                                long s_step, long i_step, long dim_size, long nlines, int vec,
                                __global long *err, long err_off) {
  long line = get_global_id(0);
#ifdef CT_SCATTER_VEC
  if (vec) line *= 16;
#endif
  if (line >= nlines) return;
  err += err_off;
  long ob = out_off + ct_offset(line, ndim, lshape, ostr);
  long sb = src_off + ct_offset(line, ndim, lshape, sstr);
  long ib = idx_off + ct_offset(line, ndim, lshape, istr);
  for (long k = 0; k < klen; k++) {
    long v = ct_load_index(idx, ib + k * i_step, idx64);
    if (v < 0 || v >= dim_size) {
      if (ct_report_bad(err, line, v)) err[3] = k;
      continue;
    }
#ifdef CT_SCATTER_VEC
    if (vec) {
      __global TIN *o = out + ob + v * o_step;
      vstore16(vload16(0, o) + vload16(0, src + sb + k * s_step), 0, o);
      continue;
    }
#endif
    ADD_TO(out, ob + v * o_step, src, sb + k * s_step);
  }
}

/* ---- cumsum / cumprod ----------------------------------------------------------------- */

/* Accumulator and result: integers and bool in long (the result is i64), f16/bf16/f32 in
 * float (the result keeps the dtype), f64 in double. */
#if CT_ISFLOAT(CT_IN)
#if CT_IN == CT_DT_F64
#define ACC double
#define CT_OUT CT_DT_F64
#define LOADA(p, i) ((p)[i])
#define STOREA(p, i, v) ((p)[i] = (v))
#else
#define ACC float
#define CT_OUT CT_IN
#define LOADA(p, i) CT_LOADF(CT_IN, p, i)
#define STOREA(p, i, v) CT_STOREF(CT_IN, p, i, v)
#endif
#define ACC_ADD(a, b) ((a) + (b))
#define ACC_MUL(a, b) ((a) * (b))
#else
#define ACC long
#define CT_OUT CT_DT_I64
#define LOADA(p, i) ((long)(p)[i])
#define STOREA(p, i, v) ((p)[i] = (v))
#define ACC_ADD(a, b) ((long)((ulong)(a) + (ulong)(b)))
#define ACC_MUL(a, b) ((long)((ulong)(a) * (ulong)(b)))
#endif

/* One work-item per line: out[.., k, ..] = x[.., 0, ..] op ... op x[.., k, ..], in order; for
 * scans along the innermost dim, where a line is contiguous. prod selects cumprod. */
__kernel void cum_lines(__global CT_T(CT_OUT) *out, long out_off, long8 ostr, __global const TIN *x,
                        long x_off, long8 xstr, int ndim, long8 lshape, long n, long o_step,
                        long x_step, int prod, long nlines) {
  long line = get_global_id(0);
  if (line >= nlines) return;
  long ob = out_off + ct_offset(line, ndim, lshape, ostr);
  long xb = x_off + ct_offset(line, ndim, lshape, xstr);
  ACC acc = prod ? (ACC)1 : (ACC)0;
  if (prod) {
    for (long k = 0; k < n; k++) {
      acc = ACC_MUL(acc, LOADA(x, xb + k * x_step));
      STOREA(out, ob + k * o_step, acc);
    }
  } else {
    for (long k = 0; k < n; k++) {
      acc = ACC_ADD(acc, LOADA(x, xb + k * x_step));
      STOREA(out, ob + k * o_step, acc);
    }
  }
}

#if !(CT_IN == CT_DT_F16 || CT_IN == CT_DT_BF16)
/* Scans along an outer dim, for dtypes whose accumulator is the result's dtype: a work-item owns
 * up to CT_CUM_CHUNK neighbouring lines (along the innermost dim, of size inner) and walks
 * them together, k outermost, so that it reads and writes whole rows; the previous result is
 * read back from out as the accumulator (the same value, exactly). */
#define CT_CUM_CHUNK 256
__kernel void cum_cols(__global CT_T(CT_OUT) *restrict out, long out_off, long8 ostr,
                       __global const TIN *restrict x, long x_off, long8 xstr, int ndim, long8 lshape,
                       long n, long o_step, long x_step, int prod, long inner, long o_in, long x_in,
                       long nitems) {
  long gid = get_global_id(0);
  if (gid >= nitems) return;
  long e0, e1;
  long row = ct_chunk(gid, inner, CT_CUM_CHUNK, &e0, &e1);
  long ob = out_off + ct_offset(row * inner + e0, ndim, lshape, ostr);
  long xb = x_off + ct_offset(row * inner + e0, ndim, lshape, xstr);
  long m = e1 - e0;
  __global CT_T(CT_OUT) *o = out + ob;
  __global const TIN *xx = x + xb;
  /* The first step as cum_lines makes it (0 + -0.0 is +0.0). */
  for (long e = 0; e < m; e++)
    o[e * o_in] = prod ? ACC_MUL((ACC)1, LOADA(xx, e * x_in)) : ACC_ADD((ACC)0, LOADA(xx, e * x_in));
  for (long k = 1; k < n; k++) {
    __global CT_T(CT_OUT) *op = o + (k - 1) * o_step, *oc = o + k * o_step;
    __global const TIN *xk = xx + k * x_step;
    if (prod) {
      for (long e = 0; e < m; e++) oc[e * o_in] = ACC_MUL(op[e * o_in], LOADA(xk, e * x_in));
    } else {
      for (long e = 0; e < m; e++) oc[e * o_in] = ACC_ADD(op[e * o_in], LOADA(xk, e * x_in));
    }
  }
}
#endif

/* ---- sort ------------------------------------------------------------------------------ */

/* Keys are compared as KT: float for f16/bf16/f32 (exact), double for f64, the dtype itself
 * for integers and bool. The sort moves (key, position) pairs through two work buffers whose
 * slices are contiguous (slice s at s * n); values are finally read back from x through the
 * positions, so their bits (NaN payloads, -0.0) are x's. */
#if CT_ISFLOAT(CT_IN)
#if CT_IN == CT_DT_F64
#define KT double
#define LOADK(p, i) ((p)[i])
#else
#define KT float
#define LOADK(p, i) CT_LOADF(CT_IN, p, i)
#endif
/* NaN is greater than everything. */
inline bool ct_before(KT a, KT b, int desc) {
  return desc ? (a > b || (isnan(a) && !isnan(b))) : (a < b || (isnan(b) && !isnan(a)));
}
#else
#define KT TIN
#define LOADK(p, i) ((p)[i])
inline bool ct_before(KT a, KT b, int desc) { return desc ? a > b : a < b; }
#endif

#define CT_SORT_BLOCK 16

/* Copies the m (<= CT_SORT_BLOCK) keys x[xb + i * x_step] into k[0..m) and their positions
 * p0 + i into q, sorted by stable insertion (only a strictly earlier key moves past another).
 * The block stays in the cache; private arrays would not (PoCL keeps a work-group's private
 * arrays side by side in memory). */
inline void ct_sort_block(__global KT *k, __global long *q, __global const TIN *x, long xb, long x_step,
                          long p0, int m, int desc) {
  for (int i = 0; i < m; i++) {
    KT v = LOADK(x, xb + i * x_step);
    int j = i;
    while (j > 0 && ct_before(v, k[j - 1], desc)) {
      k[j] = k[j - 1];
      q[j] = q[j - 1];
      j--;
    }
    k[j] = v;
    q[j] = p0 + i;
  }
}

/* cnt outputs ko/po of the merge of the runs L (lenl keys, positions pl) and R (lenr, pr),
 * starting at L[i], R[j]. Ties go to L, which keeps the sort stable. The next key of each run
 * stays in a register. */
inline void ct_merge(__global const KT *L, __global const long *pl, long lenl, __global const KT *R,
                     __global const long *pr, long lenr, long i, long j, long cnt, __global KT *ko,
                     __global long *po, int desc) {
  KT a = i < lenl ? L[i] : (KT)0, b = j < lenr ? R[j] : (KT)0;
  for (long c = 0; c < cnt; c++) {
    if (j >= lenr || (i < lenl && !ct_before(b, a, desc))) {
      ko[c] = a;
      po[c] = pl[i];
      i++;
      if (i < lenl) a = L[i];
    } else {
      ko[c] = b;
      po[c] = pr[j];
      j++;
      if (j < lenr) b = R[j];
    }
  }
}

/* Work-item per block of CT_SORT_BLOCK positions of a slice, sorted into the work buffers. */
__kernel void sort_blocks(__global KT *keys, long k_off, __global long *pos, long p_off,
                          __global const TIN *x, long x_off, long8 xstr, int ndim, long8 lshape,
                          long n, long x_step, int desc, long nblocks, long nitems) {
  long gid = get_global_id(0);
  if (gid >= nitems) return;
  long s = gid / nblocks;
  long p0 = (gid - s * nblocks) * CT_SORT_BLOCK;
  int m = (int)min((long)CT_SORT_BLOCK, n - p0);
  long xb = x_off + ct_offset(s, ndim, lshape, xstr) + p0 * x_step;
  ct_sort_block(keys + k_off + s * n + p0, pos + p_off + s * n + p0, x, xb, x_step, p0, m, desc);
}

/* One merge pass: runs of `width` sorted positions are merged in pairs into runs of 2 width.
 * A work-item makes `tile` consecutive outputs (tile divides 2 width): it finds where its first
 * output's merge path crosses the two runs by binary search, then merges sequentially. */
__kernel void sort_merge(__global const KT *kin, long kin_off, __global const long *pin, long pin_off,
                         __global KT *kout, long kout_off, __global long *pout, long pout_off, long n,
                         long width, long tile, long ntiles, int desc, long nitems) {
  long gid = get_global_id(0);
  if (gid >= nitems) return;
  kin += kin_off;
  pin += pin_off;
  kout += kout_off;
  pout += pout_off;
  long s = gid / ntiles;
  long p0 = (gid - s * ntiles) * tile;
  long ps = p0 / (2 * width) * (2 * width);
  long lenl = min(width, n - ps);
  long lenr = max(0L, min(width, n - ps - lenl));
  long base = s * n + ps;
  __global const KT *L = kin + base, *R = kin + base + lenl;
  long k = p0 - ps;
  long lo = max(0L, k - lenr), hi = min(k, lenl);
  while (lo < hi) {
    long mid = (lo + hi) / 2;
    /* L[mid] is among the first k outputs when it goes before R[k - 1 - mid]. */
    if (!ct_before(R[k - 1 - mid], L[mid], desc))
      lo = mid + 1;
    else
      hi = mid;
  }
  ct_merge(L, pin + base, lenl, R, pin + base + lenl, lenr, lo, k - lo, min(tile, lenl + lenr - k),
           kout + base + k, pout + base + k, desc);
}

/* A whole sort per work-item, for many slices: blocks by insertion, then every merge pass within
 * the slice, ping-ponging between buffer 0 (k0, p0) and 1; the result ends in buffer
 * (number of passes) % 2, as with sort_blocks and sort_merge. The slice stays in the cache. */
__kernel void sort_slices(__global KT *k0, long k0_off, __global long *p0, long p0_off, __global KT *k1,
                          long k1_off, __global long *p1, long p1_off, __global const TIN *x, long x_off,
                          long8 xstr, int ndim, long8 lshape, long n, long x_step, int desc, long nslices) {
  long s = get_global_id(0);
  if (s >= nslices) return;
  __global KT *ka = k0 + k0_off + s * n, *kb = k1 + k1_off + s * n;
  __global long *pa = p0 + p0_off + s * n, *pb = p1 + p1_off + s * n;
  long xb = x_off + ct_offset(s, ndim, lshape, xstr);
  for (long b0 = 0; b0 < n; b0 += CT_SORT_BLOCK)
    ct_sort_block(ka + b0, pa + b0, x, xb + b0 * x_step, x_step, b0, (int)min((long)CT_SORT_BLOCK, n - b0), desc);
  for (long w = CT_SORT_BLOCK; w < n; w *= 2) {
    for (long ps = 0; ps < n; ps += 2 * w) {
      long lenl = min(w, n - ps), lenr = max(0L, min(w, n - ps - lenl));
      ct_merge(ka + ps, pa + ps, lenl, ka + ps + lenl, pa + ps + lenl, lenr, 0, 0, lenl + lenr, kb + ps, pb + ps,
               desc);
    }
    __global KT *tk = ka;
    ka = kb;
    kb = tk;
    __global long *tp = pa;
    pa = pb;
    pb = tp;
  }
}

/* The first kout positions of each sorted slice into the outputs (contiguous, walked dim of
 * size kout): indices, and values read from x at those positions. Either output may be absent
 * (has_vals / has_idx 0). A work-item per CT_WRITE_CHUNK positions of a slice. */
#define CT_WRITE_CHUNK 256
__kernel void sort_write(__global RAW *vals, long o_off, __global long *oidx, long io_off, long8 ostr,
                         int has_vals, int has_idx, __global const long *pos, long p_off,
                         __global const RAW *x, long x_off, long8 xstr, int ndim, long8 lshape, long n,
                         long x_step, long kout, long o_step, long nitems) {
  long gid = get_global_id(0);
  if (gid >= nitems) return;
  long p0, p1;
  long s = ct_chunk(gid, kout, CT_WRITE_CHUNK, &p0, &p1);
  __global const long *q = pos + p_off + s * n;
  long ob = ct_offset(s, ndim, lshape, ostr);
  if (has_vals) {
    __global const RAW *xs = x + x_off + ct_offset(s, ndim, lshape, xstr);
    __global RAW *vo = vals + o_off + ob;
    for (long p = p0; p < p1; p++) vo[p * o_step] = xs[q[p] * x_step];
  }
  if (has_idx) {
    __global long *io = oidx + io_off + ob;
    for (long p = p0; p < p1; p++) io[p * o_step] = q[p];
  }
}
