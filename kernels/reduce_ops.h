/* The reductions, one row each: the one statement of their rules (issue #29), read by C and by
 * OpenCL alike. C includes it as "reduce_ops.h" (src/reduce/reduce.h: the op codes and names);
 * a program takes it with the line //#include "reduce_ops.h" (kernels/reduce.cl, and the fused
 * kernels that src/fusion/codegen.c generates with a trailing reduction), so that reduce.cl's
 * kernels and the fused ones start from the same identities and combine with the same steps.
 *
 * CT_REDUCE_OPS(X) calls X(NAME, name, fid, fcomb, lid, lcomb, lcomb8) once per row:
 *   NAME, name   the code (CT__RED_<NAME> in C, CT_OP_<NAME> in reduce.cl, in row order) and the
 *                name (ct_<name>, the kernels reduce_rows_<name> / reduce_cols_<name>)
 *   fid, fcomb   the identity and the combining step of a float or double accumulator; fcomb
 *                combines accumulators a and b, and holds for scalars and vectors alike
 *   lid, lcomb   the same for a long accumulator; lcomb8 is lcomb on long8 lanes
 * The accumulator is chosen by the reduced dtype, once, on the host: double for f64, float for
 * the other floats (f16 and bf16 accumulate in float), long for integers and bool
 * (ct__reduce_acc_dtype in src/reduce/reduce.h; reduce.cl gets it as -DCT_ACC).
 *
 * Rules: max and min keep a NaN once seen (a NaN in a is kept; a NaN in b wins because the
 * comparison fails), as PyTorch's. Integer sums and products wrap modulo 2^64, as PyTorch's:
 * computed unsigned, where overflow is defined (signed overflow is not, in OpenCL C as in C).
 * argmax and argmin carry max's and min's values; which index wins a tie is reduce.cl's
 * ct_arg_better, not a combining step.
 *
 * Only the rows' text is here: nothing expands until a user calls CT_REDUCE_OPS, so the OpenCL
 * expressions never reach a C compiler. */
#ifndef CT_REDUCE_OPS_H
#define CT_REDUCE_OPS_H

/* clang-format off */
#define CT_REDUCE_OPS(X)                                                                            \
  X(SUM,    sum,    0,         (a) + (b),                           0,        as_long(as_ulong(a) + as_ulong(b)),   \
                                                                              as_long8(as_ulong8(a) + as_ulong8(b))) \
  X(PROD,   prod,   1,         (a) * (b),                           1,        as_long(as_ulong(a) * as_ulong(b)),   \
                                                                              as_long8(as_ulong8(a) * as_ulong8(b))) \
  X(MAX,    max,    -INFINITY, ((a) > (b) || isnan(a)) ? (a) : (b), LONG_MIN, max(a, b), max(a, b))                  \
  X(MIN,    min,    INFINITY,  ((a) < (b) || isnan(a)) ? (a) : (b), LONG_MAX, min(a, b), min(a, b))                  \
  X(ARGMAX, argmax, -INFINITY, ((a) > (b) || isnan(a)) ? (a) : (b), LONG_MIN, max(a, b), max(a, b))                  \
  X(ARGMIN, argmin, INFINITY,  ((a) < (b) || isnan(a)) ? (a) : (b), LONG_MAX, min(a, b), min(a, b))
/* clang-format on */

#endif
