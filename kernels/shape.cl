/* Shape ops that are not plain strided copies: pad (constant, reflect, replicate), repeat,
 * tril/triu. One generic gather: each work-item writes one element of the contiguous result,
 * decomposes its index into coordinates over `oshape`, maps each coordinate to a source
 * coordinate by the mode, and reads the source through its strides (any layout, stride 0
 * included), or stores `value` where the mode says the element is not taken from the source.
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

kernel void shape_gather(global CT_BITS *dst, long dst_off, global const CT_BITS *src, long src_off, long8 oshape8,
                         long8 sshape8, long8 sstr8, long8 lo8, int ndim, int mode, long diag, CT_BITS value,
                         long n) {
  long i = get_global_id(0);
  if (i >= n) return;
  long osh[8], ssh[8], sst[8], lo[8];
  vstore8(oshape8, 0, osh);
  vstore8(sshape8, 0, ssh);
  vstore8(sstr8, 0, sst);
  vstore8(lo8, 0, lo);
  long rem = i, off = src_off, row = 0, col = 0;
  int outside = 0;
  for (int d = ndim - 1; d >= 0; d--) {
    long q = rem / osh[d];
    long c = rem - q * osh[d];
    rem = q;
    long s = ssh[d];
    long x = c - lo[d];
    if (mode == CT_GATHER_MOD) {
      x %= s;
      if (x < 0) x += s;
    } else if (mode == CT_GATHER_CONSTANT) {
      if (x < 0 || x >= s) outside = 1;
    } else if (mode == CT_GATHER_REFLECT) {
      if (x < 0) x = -x;
      if (x >= s) x = 2 * (s - 1) - x;
    } else if (mode == CT_GATHER_REPLICATE) {
      x = clamp(x, 0L, s - 1);
    }
    if (d == ndim - 1) col = c;
    if (d == ndim - 2) row = c;
    off += x * sst[d];
  }
  if (mode == CT_GATHER_TRIL) outside = col - row > diag;
  if (mode == CT_GATHER_TRIU) outside = col - row < diag;
  /* A branch, not a select: an element outside the source must not be read (an empty source
   * has no element at all). */
  if (outside)
    dst[dst_off + i] = value;
  else
    dst[dst_off + i] = src[off];
}
