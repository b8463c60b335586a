/* Kernels of the matmul front end (src/linalg/matmul.c). Float products go to CLBlast or the
 * host BLAS; these kernels prepare their C operand and multiply integers.
 *
 * Geometry arguments are long8 shape/stride pairs as ct_offset() reads them (common.cl). */

/* gemm_init: out[i] = beta * src[broadcast index of i] over a contiguous out of nd dims whose
 * shape is `shape`; `strides` are src's strides expanded to that shape (0 on broadcast dims).
 * Built with -DCT_OUT=<f16|f32|f64 code> (out's dtype) and -DCT_SRC=<float code> (src's).
 * beta == 0 writes zeros without reading src, so NaN in src does not propagate (as PyTorch). */
#ifdef CT_OUT
#if CT_OUT == CT_DT_F64
#define CT_ACC double
#define CT_LOAD_SRC(p, i) ((double)(p)[i])
#define CT_STORE_OUT(p, i, v) ((p)[i] = (v))
#else
#define CT_ACC float
#define CT_LOAD_SRC(p, i) CT_LOADF(CT_SRC, p, i)
#define CT_STORE_OUT(p, i, v) CT_STOREF(CT_OUT, p, i, v)
#endif

__kernel void gemm_init(__global CT_T(CT_OUT) *out, long out_off, __global const CT_T(CT_SRC) *src,
                        long src_off, int nd, long8 shape, long8 strides, CT_ACC beta, long n) {
  long i = get_global_id(0);
  if (i >= n) return; /* the NDRange is rounded up to a whole number of work-groups */
  CT_ACC v = 0;
  if (beta != 0) v = beta * CT_LOAD_SRC(src, src_off + ct_offset(i, nd, shape, strides));
  CT_STORE_OUT(out, out_off + i, v);
}
#endif

/* matmul_int: out[b, i, j] = beta * c[b, i, j] + alpha * sum_p a[b, i, p] * b[b, p, j] for an
 * integer dtype CT_DT, over a contiguous out [batch..., m, n]. Arithmetic is unsigned 32-bit
 * (64-bit for i64), so results wrap modulo 2^bits exactly as PyTorch's CPU integer matmul, and
 * the narrowing store keeps the low bits. Batch dims: `nb` dims of shape `bshape`, with
 * a_bstrides/b_bstrides (0 where broadcast). c (when has_c) is given with its strides expanded
 * to out's full shape `oshape` (od dims). One work-item per output element: integer products
 * are rare and this keeps every stride and broadcast exact. */
#ifdef CT_DT
#if CT_DT == CT_DT_I64
#define CT_IACC ulong
#define CT_ISTORE(v) as_long(v)
#elif CT_DT == CT_DT_I32
#define CT_IACC uint
#define CT_ISTORE(v) as_int(v)
#elif CT_DT == CT_DT_I8
#define CT_IACC uint
#define CT_ISTORE(v) as_char((uchar)(v))
#elif CT_DT == CT_DT_I16
#define CT_IACC uint
#define CT_ISTORE(v) as_short((ushort)(v))
#else
#define CT_IACC uint
#define CT_ISTORE(v) ((uchar)(v))
#endif

__kernel void matmul_int(__global CT_T(CT_DT) *out, long out_off,
                         __global const CT_T(CT_DT) *a, long a_off, long a_rs, long a_cs, long8 a_bstrides,
                         __global const CT_T(CT_DT) *b, long b_off, long b_rs, long b_cs, long8 b_bstrides,
                         int nb, long8 bshape, long m, long n, long k, long alpha, long beta,
                         __global const CT_T(CT_DT) *c, long c_off, int od, long8 oshape, long8 c_strides,
                         int has_c) {
  long j = get_global_id(0), i = get_global_id(1), bi = get_global_id(2);
  if (j >= n || i >= m) return; /* the NDRange is rounded up to whole work-groups */
  __global const CT_T(CT_DT) *pa = a + a_off + ct_offset(bi, nb, bshape, a_bstrides) + i * a_rs;
  __global const CT_T(CT_DT) *pb = b + b_off + ct_offset(bi, nb, bshape, b_bstrides) + j * b_cs;
  CT_IACC acc = 0;
  for (long p = 0; p < k; p++) acc += (CT_IACC)pa[p * a_cs] * (CT_IACC)pb[p * b_rs];
  acc *= (CT_IACC)alpha;
  long o = (bi * m + i) * n + j;
  if (has_c && beta != 0) acc += (CT_IACC)beta * (CT_IACC)c[c_off + ct_offset(o, od, oshape, c_strides)];
  out[out_off + o] = CT_ISTORE(acc); /* keeps the low bits: defined for signed types too */
}
#endif
