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

/* ct_report_bad, ct_chunk, ct_load_index. */
//#include "indexing_common.cl"

/* A work-item's part of the output in the kernels below: a chunk [e0, e1) of output row `row`
 * (the innermost dim, of `inner` elements), and the row's start (b1, b2) and innermost stride
 * (i1, i2) in two strided operands. */
struct ct_rowpart {
  long row, inner, e0, e1, b1, b2, i1, i2;
};

/* Work-item gid's part, the operands' strides s1, s2 (element offsets off1, off2 added). */
inline struct ct_rowpart ct_row_part(long gid, int ndim, long8 shape, long8 s1, long8 s2, long off1,
                                     long off2) {
  long sh[8], a[8], b[8];
  vstore8(shape, 0, sh);
  vstore8(s1, 0, a);
  vstore8(s2, 0, b);
  struct ct_rowpart p;
  p.inner = sh[ndim - 1];
  p.i1 = a[ndim - 1];
  p.i2 = b[ndim - 1];
  long row = ct_chunk(gid, p.inner, CT_CHUNK, &p.e0, &p.e1);
  p.row = row;
  long r1 = off1, r2 = off2;
  for (int d = ndim - 2; d >= 0; d--) {
    long q = row / sh[d];
    long c = row - q * sh[d];
    r1 += c * a[d];
    r2 += c * b[d];
    row = q;
  }
  p.b1 = r1;
  p.b2 = r2;
  return p;
}

/* An index element as long: i32 ones through ct_sext32 (common.cl says why). */
#define CT_WIDEN_INDEX(x) (sizeof(x) == 4 ? ct_sext32((int)(x)) : (long)(x))

/* gather_bits' loop over a strided index row of type IT (i64 or i32): one source for both
 * index types, each expanded on its own so the hot loop has no per-element type branch. */
#define CT_GATHER_STRIDED(IT)                                          \
  do {                                                                 \
    __global const IT *ip = (__global const IT *)idx + ib;             \
    for (long e = e0; e < e1; e++) {                                   \
      long v = CT_WIDEN_INDEX(ip[e * ii]);                             \
      if (v < 0 || v >= sel_size) {                                    \
        ct_report_bad(err, row * inner + e, v);                        \
        out[ob + e] = (T)0;                                            \
      } else {                                                         \
        out[ob + e] = xr[e * xi + v * sel_stride];                     \
      }                                                                \
    }                                                                  \
  } while (0)

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
  struct ct_rowpart rp = ct_row_part(gid, ndim, shape, xstr, istr, x_off, idx_off);
  long row = rp.row, inner = rp.inner, e0 = rp.e0, e1 = rp.e1;
  long xb = rp.b1, ib = rp.b2, xi = rp.i1, ii = rp.i2;
  long ob = out_off + row * inner;
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
    CT_GATHER_STRIDED(long);
  } else {
    CT_GATHER_STRIDED(int);
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
  struct ct_rowpart rp = ct_row_part(gid, ndim, shape, xstr, mstr, x_off, mask_off);
  long ob = out_off + rp.row * rp.inner;
  for (long e = rp.e0; e < rp.e1; e++) out[ob + e] = mask[rp.b2 + e * rp.i2] ? value : x[rp.b1 + e * rp.i1];
}
