/* Indexing kernels that only move elements, so they are specialised by element size alone
 * (-DCT_BITS=uchar|ushort|uint|ulong), whatever the dtype: one program serves every dtype of a
 * size. Index tensors are read as i64 or i32 by a runtime flag (idx64), not a build option.
 *
 * Geometry: the output is contiguous, of shape `shape` (ndim >= 1, the host pads 0-dim to [1]).
 * A work-item owns a chunk of at most CT_CHUNK elements of one output row (the innermost dim):
 * it decomposes the row number once (divisions are the cost of strided addressing) and then
 * walks the chunk with the innermost strides.
 *
 * Out-of-range indices are found here: the first work-item to see one wins err[0] (a 32-bit
 * atomic compare-exchange, OpenCL 1.1 core) and records the output position and the value in
 * err[1] and err[2] (err starts at element err_off of its buffer); the host reads the record
 * after the kernel. A bad index is not dereferenced. */
#define T CT_BITS
#define CT_CHUNK 256

inline void ct_report_bad(__global long *err, long pos, long v) {
  if (atomic_cmpxchg((volatile __global int *)err, 0, 1) == 0) {
    err[1] = pos;
    err[2] = v;
  }
}

/* Work-item gid's chunk [*e0, *e1) of `chunk` elements of a row of `inner`; returns the row. */
inline long ct_chunk(long gid, long inner, long chunk, long *e0, long *e1) {
  long per_row = (inner + chunk - 1) / chunk;
  long row = gid / per_row;
  *e0 = (gid - row * per_row) * chunk;
  *e1 = min(*e0 + chunk, inner);
  return row;
}

inline long ct_load_index(__global const uchar *idx, long i, int idx64) {
  return idx64 ? ((__global const long *)idx)[i] : (long)((__global const int *)idx)[i];
}

/* Element offsets, in two layouts, of row `row` of shape (all dims but the last). */
inline void ct_row_offsets(long row, int ndim, long8 shape, long8 s1, long8 s2, long *o1, long *o2) {
  long sh[8], a[8], b[8];
  vstore8(shape, 0, sh);
  vstore8(s1, 0, a);
  vstore8(s2, 0, b);
  long r1 = 0, r2 = 0;
  for (int d = ndim - 2; d >= 0; d--) {
    long q = row / sh[d];
    long c = row - q * sh[d];
    r1 += c * a[d];
    r2 += c * b[d];
    row = q;
  }
  *o1 = r1;
  *o2 = r2;
}

/* out[p] = x[sum_d c_d xstr_d + index[sum_d c_d istr_d] * sel_stride] over the output's
 * coordinates c: index_select (istr zero but at the selected dim), gather (istr the index's
 * strides) and embedding (the weight row chosen by the index, the last coordinate the column).
 * xstr is zero at the selected dim. Each index must lie in [0, sel_size). touch: read the row's
 * span of x first (gather along the last dim on CPUs; gather.c's touch_span() says when). */
__kernel void gather_bits(__global T *out, long out_off, __global const T *x, long x_off, long8 xstr,
                          __global const uchar *idx, long idx_off, long8 istr, int idx64,
                          long sel_stride, long sel_size, int touch, int ndim, long8 shape, long nitems,
                          __global long *err, long err_off) {
  long gid = get_global_id(0);
  if (gid >= nitems) return;
  err += err_off;
  long xs[8], is[8], sh[8];
  vstore8(xstr, 0, xs);
  vstore8(istr, 0, is);
  vstore8(shape, 0, sh);
  long inner = sh[ndim - 1];
  long e0, e1;
  long row = ct_chunk(gid, inner, CT_CHUNK, &e0, &e1);
  long xb, ib;
  ct_row_offsets(row, ndim, shape, xstr, istr, &xb, &ib);
  xb += x_off;
  ib += idx_off;
  long ob = out_off + row * inner;
  long xi = xs[ndim - 1], ii = is[ndim - 1];
  if (ii == 0) {
    /* One index for the whole chunk (index_select along an outer dim, embedding): a strided
     * copy of a row, contiguous in the common case. */
    long v = ct_load_index(idx, ib, idx64);
    if (v < 0 || v >= sel_size) {
      ct_report_bad(err, row * inner + e0, v);
      for (long e = e0; e < e1; e++) out[ob + e] = (T)0;
      return;
    }
    __global const T *src = x + xb + v * sel_stride;
    if (xi == 1) {
      for (long e = e0; e < e1; e++) out[ob + e] = src[e];
    } else {
      for (long e = e0; e < e1; e++) out[ob + e] = src[e * xi];
    }
    return;
  }
  __global const T *xr = x + xb;
  if (touch && e0 == 0) {
    /* The row's first chunk reads the row's span of x (x + [0, sel_size): the host sets touch
     * only then, and only for a span that fits the cache) in order, one element per 64-byte
     * line, so that the hardware prefetcher streams it in; in the random order of the chunk
     * loops each line's first read waits for memory (gather of random columns: about 1.1x
     * faster with this read on PoCL). Volatile: the compiler keeps these unused reads. */
    volatile __global const T *span = xr;
    for (long j = 0; j < sel_size; j += 64 / (long)sizeof(T)) (void)span[j];
  }
  if (idx64 && ii == 1 && sel_stride == 1) {
    /* The common case (contiguous index rows, selecting along a contiguous dim of x) without
     * the multiplications; one unsigned comparison checks both bounds. */
    __global const long *ip = (__global const long *)idx + ib;
    for (long e = e0; e < e1; e++) {
      ulong v = (ulong)ip[e];
      if (v >= (ulong)sel_size) {
        ct_report_bad(err, row * inner + e, (long)v);
        out[ob + e] = (T)0;
      } else {
        out[ob + e] = xr[e * xi + (long)v];
      }
    }
  } else if (idx64) {
    __global const long *ip = (__global const long *)idx + ib;
    for (long e = e0; e < e1; e++) {
      long v = ip[e * ii];
      if (v < 0 || v >= sel_size) {
        ct_report_bad(err, row * inner + e, v);
        out[ob + e] = (T)0;
      } else {
        out[ob + e] = xr[e * xi + v * sel_stride];
      }
    }
  } else {
    __global const int *ip = (__global const int *)idx + ib;
    for (long e = e0; e < e1; e++) {
      long v = ip[e * ii];
      if (v < 0 || v >= sel_size) {
        ct_report_bad(err, row * inner + e, v);
        out[ob + e] = (T)0;
      } else {
        out[ob + e] = xr[e * xi + v * sel_stride];
      }
    }
  }
}

/* Only checks the indices (of shape `shape`, strided): for ops whose result is empty although
 * the index is not (PyTorch still checks them). err records the index's linear position. */
__kernel void index_check(__global const uchar *idx, long idx_off, long8 istr, int idx64, int ndim,
                          long8 shape, long sel_size, long nitems, __global long *err, long err_off) {
  long i = get_global_id(0);
  if (i >= nitems) return;
  long v = ct_load_index(idx, idx_off + ct_offset(i, ndim, shape, istr), idx64);
  if (v < 0 || v >= sel_size) ct_report_bad(err + err_off, i, v);
}

/* out[p] = mask[p] ? value : x[p], x and mask strided (zero strides broadcast). */
__kernel void masked_fill_bits(__global T *out, long out_off, __global const T *x, long x_off, long8 xstr,
                               __global const uchar *mask, long mask_off, long8 mstr, T value, int ndim,
                               long8 shape, long nitems) {
  long gid = get_global_id(0);
  if (gid >= nitems) return;
  long xs[8], ms[8], sh[8];
  vstore8(xstr, 0, xs);
  vstore8(mstr, 0, ms);
  vstore8(shape, 0, sh);
  long inner = sh[ndim - 1];
  long e0, e1;
  long row = ct_chunk(gid, inner, CT_CHUNK, &e0, &e1);
  long xb, mb;
  ct_row_offsets(row, ndim, shape, xstr, mstr, &xb, &mb);
  xb += x_off;
  mb += mask_off;
  long ob = out_off + row * inner;
  long xi = xs[ndim - 1], mi = ms[ndim - 1];
  for (long e = e0; e < e1; e++) out[ob + e] = mask[mb + e * mi] ? value : x[xb + e * xi];
}
