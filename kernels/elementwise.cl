/* Elementwise kernels: one small program per (op, dtypes), selected by build options.
 *
 *   -DEW_FN=<function>  the op's function (ew_add, ew_exp, ew_where, ...; src/elementwise/ops.def
 *                       names them, "the ops" below defines them)
 *   -DEW_NP=n           the op's parameters after its operands: 2 (clamp), 1 (leaky_relu), 0
 *   -DEW_NIN=n          tensor inputs: 1 (unary, tensor-scalar, clamp), 2 (binary), 3 (where)
 *   -DEW_A/B/C=dt       input dtypes (where: A is the condition, B and C the values)
 *   -DEW_K=dt           common dtype: value inputs are converted to it first, as PyTorch casts
 *                       operands to the promoted dtype; f16 and bf16 then compute in float
 *   -DEW_O=dt           output dtype: EW_K, or bool for comparisons and logical ops
 *   -DEW_SPOS=p         tensor-scalar ops: 2 for "a op s", 1 for "s op a" (s is s0)
 *   -DEW_LO/EW_HI=0|1   clamp: which bound (s0 = lo, s1 = hi) is present
 *   -DEW_BA/BB/BC=0|1   contiguous kernel: that input is one element broadcast to all
 *   -DEW_FULL=0|1       contiguous kernel: launched over exactly n work-items, so no bounds
 *                       check (see ew_contig)
 *   -DEW_VEC=0|1        contiguous kernel: 8 elements per work-item in 8-wide vector types
 *                       (chosen by the host for f16 arithmetic on CPUs), or one element per
 *                       work-item in scalar code
 *   -DEW_SOFT16=0|1     f16 converted with integer/float operations instead of the half
 *                       builtins (CPUs; see below)
 *   -DEW_SPER=n         strided kernel: elements of the innermost dim per work-item
 *   -DEW_IO/IA/IB/IC=k  strided kernel: innermost stride of each operand is 1 (k=1), 0 (k=2)
 *                       or other (k=0, from the ist argument)
 *
 * ew_contig serves dense, identically laid out operands (the host collapses dims first);
 * ew_strided reads any layout in place (views, transposes, stride-0 broadcasts).
 *
 * The op functions are written without branches: select() on masks. PoCL vectorises scalar
 * code across work-items, and turns a data-dependent branch there into very slow code. Masks follow OpenCL: a scalar comparison
 * gives 0/1, a vector one 0/-1; select() accepts both, and "& 1" turns either into 0/1. */

/* The op functions, the compute types and the load conversions (the fused kernels of
 * src/elementwise/fuse.c take the same file). It sets FP_CONTRACT OFF: results must not depend
 * on the compiler's choice to fuse a*b+c. */
//#include "ew_ops.cl"

#ifndef EW_FN
#error "elementwise.cl: no -DEW_FN=<function> given"
#endif

/* EW_STORE: a result (compute type, or a mask for bool outputs) into element i of p (EW_O);
 * EW_STORE8: eight of them into elements i..i+7. */
#if EW_O == CT_DT_BOOL
#define EW_STORE(p, i, v) ((p)[i] = (uchar)((v) & 1))
#elif EW_O == CT_DT_F16
#define EW_STORE(p, i, v) EW_STH(p, i, v)
#define EW_STORE8(p, i, v) vstore_half8_rte((v), 0, (p) + (i))
#elif EW_O == CT_DT_BF16
#define EW_STORE(p, i, v) EW_STBF(p, i, v)
#else
#define EW_STORE(p, i, v) ((p)[i] = (v))
#define EW_STORE8(p, i, v) vstore8((v), 0, (p) + (i))
#endif

/* ---- operands ---- */
#if EW_SPOS == 1
#define EW_X(ai, bi) s0
#define EW_Y(ai, bi) EW_LOAD(EW_A, a, ai)
#elif EW_SPOS == 2
#define EW_X(ai, bi) EW_LOAD(EW_A, a, ai)
#define EW_Y(ai, bi) s0
#elif EW_NIN == 2
#define EW_X(ai, bi) EW_LOAD(EW_A, a, ai)
#define EW_Y(ai, bi) EW_LOAD(EW_B, b, bi)
#else
#define EW_X(ai, bi) EW_LOAD(EW_A, a, ai)
#define EW_Y(ai, bi) EW_CST(, 0)
#endif

/* The call of the op's function F on operands x, y and parameters s0, s1, by the op's form:
 * parameters after x (EW_NP: clamp 2, leaky_relu 1), binary (two tensors, or a tensor and the
 * scalar s0), unary. where (a condition and two values) is called in EW_DO itself. */
#if EW_NP == 2
#define EW_CALL(F, x, y, s0, s1) F(x, s0, s1)
#elif EW_NP == 1
#define EW_CALL(F, x, y, s0, s1) F(x, s0)
#elif EW_NIN == 2 || EW_SPOS
#define EW_CALL(F, x, y, s0, s1) F(x, y)
#else
#define EW_CALL(F, x, y, s0, s1) F(x)
#endif

#if EW_NIN == 3
#define EW_DO(oi, ai, bi, ci) \
  EW_STORE(o, oi, EW_FN(EW_NZ(EW_A, a, ai), EW_LOAD(EW_B, b, bi), EW_LOAD(EW_C, c, ci)))
#else
#define EW_DO(oi, ai, bi, ci) EW_STORE(o, oi, EW_CALL(EW_FN, EW_X(ai, bi), EW_Y(ai, bi), s0, s1))
#endif

/* Vector operands of the contiguous kernel: 8 elements from i, or one broadcast element. */
#if EW_BA
#define EW_VA(i) ((EW_WT(8))(EW_LOAD(EW_A, a, a_off)))
#else
#define EW_VA(i) EW_LOAD8(EW_A, a, a_off + (i))
#endif
#if EW_BB
#define EW_VB(i) ((EW_WT(8))(EW_LOAD(EW_B, b, b_off)))
#else
#define EW_VB(i) EW_LOAD8(EW_B, b, b_off + (i))
#endif

#if EW_SPOS == 1
#define EW_VX(i) s0v
#define EW_VY(i) EW_VA(i)
#elif EW_SPOS == 2
#define EW_VX(i) EW_VA(i)
#define EW_VY(i) s0v
#elif EW_NIN == 2
#define EW_VX(i) EW_VA(i)
#define EW_VY(i) EW_VB(i)
#else
#define EW_VX(i) EW_VA(i)
#define EW_VY(i) EW_CST(8, 0)
#endif

#define EW_DO8(i) EW_STORE8(o, o_off + (i), EW_CALL(CT_CAT(EW_FN, 8), EW_VX(i), EW_VY(i), s0v, s1v))

/* ---- kernel parameters ---- */
#if EW_NIN >= 2
#define EW_PB , __global const CT_T(EW_B) *b, long b_off
#else
#define EW_PB
#endif
#if EW_NIN >= 3
#define EW_PC , __global const CT_T(EW_C) *c, long c_off
#else
#define EW_PC
#endif
#if EW_SPOS || EW_NP >= 1
#define EW_HAS_S0 1
#define EW_PS0 , EW_WB s0_arg
#else
#define EW_HAS_S0 0
#define EW_PS0
#endif
#if EW_NP >= 2
#define EW_HAS_S1 1
#define EW_PS1 , EW_WB s1_arg
#else
#define EW_HAS_S1 0
#define EW_PS1
#endif
#define EW_PARAMS \
  __global CT_T(EW_O) *o, long o_off, __global const CT_T(EW_A) *a, long a_off EW_PB EW_PC EW_PS0 EW_PS1

#if EW_HAS_S0
#define EW_S0 s0_arg
#else
#define EW_S0 0
#endif
#if EW_HAS_S1
#define EW_S1 s1_arg
#else
#define EW_S1 0
#endif

/* Dense operands: element i of every operand at its offset + i (a broadcast input at its
 * offset). */
__kernel void ew_contig(EW_PARAMS, long n) {
  const EW_WB s0 = EW_S0, s1 = EW_S1;
#if EW_NIN < 2
  const long b_off = 0;
#endif
#if EW_NIN < 3
  const long c_off = 0;
#endif
  (void)s0;
  (void)s1;
  (void)b_off;
  (void)c_off;
#if EW_VEC
  const EW_WT(8) s0v = (EW_WT(8))(s0), s1v = (EW_WT(8))(s1);
  (void)s0v;
  (void)s1v;
  long base = (long)get_global_id(0) * 8;
  if (base + 8 <= n) {
    EW_DO8(base);
  } else {
    for (long i = base; i < n; i++)
      EW_DO(o_off + i, a_off + (EW_BA ? 0 : i), b_off + (EW_BB ? 0 : i), c_off + (EW_BC ? 0 : i));
  }
#else
  long i = get_global_id(0);
  /* On CPUs a bounds check is a branch inside the loop PoCL makes over a work-group's items,
   * and LLVM then cannot vectorise a call under it (nor does it when the branch is uniform):
   * exp ran at 0.65-0.75x the one-line kernel with the check, 0.94-1.03x without. So large
   * launches use an EW_FULL program over an exact multiple of the group size; the host covers
   * the remainder by a last full group that overlaps the part before, or by this kernel. */
#if EW_FULL
  (void)n;
  EW_DO(o_off + i, a_off + (EW_BA ? 0 : i), b_off + (EW_BB ? 0 : i), c_off + (EW_BC ? 0 : i));
#else
  if (i < n) EW_DO(o_off + i, a_off + (EW_BA ? 0 : i), b_off + (EW_BB ? 0 : i), c_off + (EW_BC ? 0 : i));
#endif
#endif
}

/* Any layout, as a 2-D range: dim 0 walks the innermost dim (n0 elements, EW_SPER per
 * work-item, strides ist = (out, a, b, c)), dim 1 the flattened outer dims (ond dims of shape
 * oshape, strides so/sa/sb/sc), decomposed once per work-item, in 32-bit arithmetic when the
 * count allows (64-bit division is several times slower on most devices). */
#define EW_DIM(k, T)                          \
  if (ond > k) {                              \
    T q = r / (T)oshape.s##k;                 \
    long c_ = (long)(r - q * (T)oshape.s##k); \
    oo += c_ * so.s##k;                       \
    ao += c_ * sa.s##k;                       \
    bo += c_ * sb.s##k;                       \
    co += c_ * sc.s##k;                       \
    r = q;                                    \
  }
#define EW_DIMS(T) \
  EW_DIM(6, T) EW_DIM(5, T) EW_DIM(4, T) EW_DIM(3, T) EW_DIM(2, T) EW_DIM(1, T) EW_DIM(0, T)

/* Innermost strides known at build time (-DEW_IO/IA/IB/IC = 1 for unit stride, 2 for a
 * broadcast, 0 for any other: ist), so a run of unit-stride elements compiles to plain
 * consecutive accesses, which CPU compilers vectorise. */
#ifndef EW_IO
#define EW_IO 0
#endif
#ifndef EW_IA
#define EW_IA 0
#endif
#ifndef EW_IB
#define EW_IB 0
#endif
#ifndef EW_IC
#define EW_IC 0
#endif
#define EW_IST_0(k, t) ((t) * ist.s##k)
#define EW_IST_1(k, t) (t)
#define EW_IST_2(k, t) 0
#define EW_IST(X, k, t) CT_CAT(EW_IST_, EW_I##X)(k, t)

#if EW_NIN >= 2
#define EW_SB , long8 sb
#else
#define EW_SB
#endif
#if EW_NIN >= 3
#define EW_SC , long8 sc
#else
#define EW_SC
#endif

__kernel void ew_strided(EW_PARAMS, long n0, long4 ist, long nouter, int ond, long8 oshape, long8 so,
                         long8 sa EW_SB EW_SC) {
  const EW_WB s0 = EW_S0, s1 = EW_S1;
  (void)s0;
  (void)s1;
#if EW_NIN < 2
  const long8 sb = (long8)(0);
  const long b_off = 0;
#endif
#if EW_NIN < 3
  const long8 sc = (long8)(0);
  const long c_off = 0;
#endif
  long j = (long)get_global_id(0) * EW_SPER;
  long k = get_global_id(1);
  if (j >= n0 || k >= nouter) return;
  long oo = o_off + j * ist.s0, ao = a_off + j * ist.s1, bo = b_off + j * ist.s2, co = c_off + j * ist.s3;
  if (nouter <= (long)UINT_MAX) {
    uint r = (uint)k;
    EW_DIMS(uint)
  } else {
    long r = k;
    EW_DIMS(long)
  }
  (void)bo;
  (void)co;
#if EW_SPER > 1
  if (j + EW_SPER <= n0) {
    for (int t = 0; t < EW_SPER; t++) EW_DO(oo + EW_IST(O, 0, t), ao + EW_IST(A, 1, t), bo + EW_IST(B, 2, t), co + EW_IST(C, 3, t));
  } else {
    for (long t = 0; t < n0 - j; t++)
      EW_DO(oo + EW_IST(O, 0, t), ao + EW_IST(A, 1, t), bo + EW_IST(B, 2, t), co + EW_IST(C, 3, t));
  }
#else
  EW_DO(oo, ao, bo, co);
#endif
}
