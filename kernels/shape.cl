/* Shape ops that are not plain strided copies: pad (constant, reflect, replicate), repeat,
 * tril/triu. One generic gather into a contiguous result: each output coordinate is mapped to
 * a source coordinate by the mode, per dim, and the source read through its strides (any
 * layout, stride 0 included), or `value` stored where the mode takes nothing from the source.
 * Each work-item writes a run of one output row (see shape_gather: a kernel with one element
 * per work-item paid 64-bit divisions per element and ran 20-30x slower than a copy on PoCL).
 *
 * Elements are moved as bits: -DCT_BITS=<uchar|ushort|uint|ulong> by element size, so one
 * program serves every dtype of a size (NaN payloads and -0 survive). The geometry and the
 * mode are runtime arguments, so every shape and mode shares the program.
 *
 * Modes (per dim d, c the output coordinate, x = c - lo[d], s = sshape[d]):
 *   CT_GATHER_MOD        x mod s (non-negative): repeat (lo = 0)
 *   CT_GATHER_CONSTANT   x outside [0, s) stores value: constant pad (lo = left pad)
 *   CT_GATHER_REFLECT    -x below 0, 2(s-1) - x at or past s (host checks pad < s)
 *   CT_GATHER_REPLICATE  x clamped to [0, s-1]
 *   CT_GATHER_TRIL/TRIU  x = c; value where col - row > diag (tril) or < diag (triu), over the
 *                        last two dims */
#define CT_GATHER_MOD 0
#define CT_GATHER_CONSTANT 1
#define CT_GATHER_REFLECT 2
#define CT_GATHER_REPLICATE 3
#define CT_GATHER_TRIL 4
#define CT_GATHER_TRIU 5

/* Source coordinate of output coordinate c along a dim (lo, source size s); sets *outside when
 * the mode takes nothing from the source there. */
inline long ct_gather_map(long c, long lo, long s, int mode, int *outside) {
  long x = c - lo;
  if (mode == CT_GATHER_MOD) {
    x %= s;
    if (x < 0) x += s;
  } else if (mode == CT_GATHER_CONSTANT) {
    if (x < 0 || x >= s) *outside = 1;
  } else if (mode == CT_GATHER_REFLECT) {
    /* abs() rather than `if (x < 0) x = -x`, which compilers turn into the llvm.abs intrinsic
     * that Oclgrind 21.10 cannot run. */
    x = (long)abs(x);
    if (x >= s) x = 2 * (s - 1) - x;
  } else if (mode == CT_GATHER_REPLICATE) {
    x = clamp(x, 0L, s - 1);
  }
  return x;
}

/* One work-item per run of an output row (the innermost dim; rows longer than `chunk` are cut
 * into nchunks runs): id 0 enumerates (row coordinate along the second-innermost output dim,
 * run), id 1 the n2 positions of the nouter outer dims (long8s, outermost first), so the
 * divisions that locate a run are paid once per run, and each work-item writes contiguous
 * memory. The innermost dim's
 * geometry is scalar: output extent n0, source size s0, stride st0, offset lo0; likewise n1,
 * s1, st1, lo1 for the second. The host pads to at least 2 dims. */
kernel void shape_gather(global CT_BITS *dst, long dst_off, global const CT_BITS *src, long src_off, long8 oshape8,
                         long8 sshape8, long8 sstr8, long8 lo8, int nouter, long n0, long s0, long st0, long lo0,
                         long n1, long s1, long st1, long lo1, long chunk, long nchunks, long n2, int mode,
                         long diag, CT_BITS value) {
  /* The host rounds both NDRange dims up to whole work-groups: ids past the rows (n1 * nchunks)
   * or past the outer count n2 write nothing. */
  long id = get_global_id(0), i2 = get_global_id(1);
  long i1 = id / nchunks;
  if (i1 >= n1 || i2 >= n2) return;
  long first = (id - i1 * nchunks) * chunk, end = min(first + chunk, n0);
  long off = src_off;
  int outside = 0;
  if (nouter > 0) {
    long osh[8], ssh[8], sst[8], lo[8];
    vstore8(oshape8, 0, osh);
    vstore8(sshape8, 0, ssh);
    vstore8(sstr8, 0, sst);
    vstore8(lo8, 0, lo);
    long rem = i2;
    for (int d = nouter - 1; d >= 0; d--) {
      long q = rem / osh[d];
      off += ct_gather_map(rem - q * osh[d], lo[d], ssh[d], mode, &outside) * sst[d];
      rem = q;
    }
  }
  off += ct_gather_map(i1, lo1, s1, mode, &outside) * st1;
  global CT_BITS *row = dst + dst_off + (i2 * n1 + i1) * n0;
  if (outside) { /* a constant pad's whole row */
    for (long i0 = first; i0 < end; i0++) row[i0] = value;
  } else if (mode == CT_GATHER_TRIL || mode == CT_GATHER_TRIU) {
    /* Kept: col <= i1 + diag (tril), col >= i1 + diag (triu). The host clamps diag to
     * [-rows, cols], so the sum cannot overflow. */
    long edge = i1 + diag;
    for (long i0 = first; i0 < end; i0++) {
      int keep = mode == CT_GATHER_TRIL ? i0 <= edge : i0 >= edge;
      row[i0] = keep ? src[off + i0 * st0] : value;
    }
  } else if (mode == CT_GATHER_CONSTANT) {
    /* Three runs: value, the source (x = i0 - lo0 in [0, s0)), value. */
    long a = clamp(lo0, first, end), b = clamp(lo0 + s0, a, end);
    for (long i0 = first; i0 < a; i0++) row[i0] = value;
    for (long i0 = a; i0 < b; i0++) row[i0] = src[off + (i0 - lo0) * st0];
    for (long i0 = b; i0 < end; i0++) row[i0] = value;
  } else if (mode == CT_GATHER_MOD) {
    /* One division per run, then a wrapping counter. */
    long x = ct_gather_map(first, lo0, s0, mode, &outside);
    for (long i0 = first; i0 < end; i0++) {
      row[i0] = src[off + x * st0];
      if (++x == s0) x = 0;
    }
  } else {
    for (long i0 = first; i0 < end; i0++) row[i0] = src[off + ct_gather_map(i0, lo0, s0, mode, &outside) * st0];
  }
}
