/* The storage and accumulator types of a floating-point program specialised by -DCT_IN (f16,
 * bf16, f32, f64), shared by conv.cl, pool.cl and norm.cl. Not in common.cl, so that only these programs
 * rebuild when it changes: a program takes it with the line `//#include "acc_types.cl"`, which
 * the kernel engine (src/kernel/engine.c) replaces by this file.
 *   io_t               the storage type of CT_IN
 *   acc_t              the computing type: double for f64, float for the others
 *   acc8_t             8 lanes of acc_t (for kernels/cascade.cl)
 *   LOADA(p, i)        element i of p as acc_t
 *   STOREA(p, i, v)    stores acc_t v as CT_IN (rounding to nearest even) */
#if CT_IN == CT_DT_F64
typedef double acc_t;
typedef double8 acc8_t;
#define LOADA(p, i) ((p)[i])
#define STOREA(p, i, v) ((p)[i] = (v))
#else
typedef float acc_t;
typedef float8 acc8_t;
#define LOADA(p, i) CT_LOADF(CT_IN, p, i)
#define STOREA(p, i, v) CT_STOREF(CT_IN, p, i, v)
#endif
typedef CT_T(CT_IN) io_t;
