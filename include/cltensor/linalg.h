/* Matrix multiply: matmul, linear, addmm; the GEMM route and its per-device tuning.
 *
 * Semantics are PyTorch's torch.matmul:
 *   1-D x 1-D          dot product, a 0-d result
 *   2-D x 2-D          the matrix product [m, k] x [k, n] -> [m, n]
 *   1-D x N-D, N-D x 1-D  the 1-D operand becomes a matrix ([1, k] on the left, [k, 1] on the
 *                      right) and the added dim is removed from the result
 *   N-D x M-D (>= 3-D) batched: the dims before the last two broadcast (NumPy rules), e.g.
 *                      [5, 1, m, k] x [3, k, n] -> [5, 3, m, n]
 * Any strides work. Transposed views (e.g. ct_transpose of a contiguous matrix) are passed to
 * the GEMM as transpose flags without a copy; other layouts are copied to contiguous first.
 *
 * dtypes. Operands have one dtype (else CT_ERR_DTYPE_MISMATCH), which the result keeps.
 *  - f32; f64 on devices with cl_khr_fp64.
 *  - f16: CLBlast's half GEMM on devices with cl_khr_fp16 (which accumulates in half); elsewhere,
 *    and always for bf16, converted to f32, multiplied with f32 accumulation, rounded once.
 *  - u8, i8, i16, i32, i64: exact integer arithmetic wrapping modulo 2^bits as C unsigned
 *    arithmetic does (as PyTorch on the CPU), by a kernel of this library.
 *  - bool, and the storage dtypes u16, u32, u64: CT_ERR_UNSUPPORTED (PyTorch has no bool
 *    matmul either, nor one for the unsigned storage dtypes).
 *
 * Empty dims: k = 0 gives zeros (beta * c for addmm, the bias for linear); m, n or a batch dim
 * of 0 gives an empty result.
 *
 * Routes. Float GEMMs run through CLBlast, or, on a CPU device with host-unified memory when the
 * library was built with a host CBLAS (OpenBLAS), through that CBLAS on the buffers' memory: as
 * a native kernel on the device's queue where the device runs them (PoCL), so the call returns
 * once the GEMM is enqueued as on the CLBlast route; elsewhere on blocking maps, returning after
 * the product.
 * $CLTENSOR_GEMM picks the route, read when a device does its first GEMM:
 *   auto (or unset)  host BLAS on unified-memory CPU devices when built with it, else CLBlast
 *   clblast          always CLBlast
 *   host             the host BLAS; CT_ERR_UNSUPPORTED on a device without host-unified memory
 *                    or when the library was built without it
 * Any other value makes every GEMM on the device fail with CT_ERR_INVALID_ARGUMENT quoting it.
 *
 * Tuning. CLBlast's built-in parameters are poor on some devices (CPUs especially). The tool
 * cltensor-tune searches better ones and stores them per device in the cache folder
 * ($CLTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/cltensor, else ~/.cache/cltensor); the library
 * applies them when a device does its first GEMM. Without a stored file, shipped defaults apply
 * where the library has some (PoCL CPU devices). A malformed file, or one written for another
 * device, driver or library version, is ignored, never applied: ct_gemm_tuning_get() tells
 * which set is in use and why. $CLTENSOR_GEMM_TUNING=builtin skips both (CLBlast's own
 * parameters; any value but auto and builtin fails GEMMs as an invalid $CLTENSOR_GEMM does), and
 * $CLTENSOR_CACHE=0 skips the file. Parameters are installed in CLBlast process-wide and stay
 * installed after ct_shutdown(). docs/GEMM.md has the file format.
 *
 * Autograd (autograd.h). matmul, linear and addmm are differentiable with respect to every
 * float operand (linear's weight gradient is one GEMM over x's flattened leading dims). The
 * _out forms are not: with grad mode on they refuse operands that require grad and an out that
 * requires grad (CT_ERR_INVALID_ARGUMENT), as PyTorch's out= ops, and every write bumps out's
 * version, so a backward that saved out fails instead of using the new values. Under autocast
 * (ct_autocast_set_dtype(CT_F16 or CT_BF16)) the new-tensor forms cast their f32/f16/bf16 operands to
 * that dtype, accumulate in f32 (f16 too, where CLBlast would otherwise multiply half) and
 * return that dtype; f64 and integer operands, and the _out forms, are not autocast.
 *
 * Every function here returns CT_OK or: CT_ERR_INVALID_ARGUMENT (NULL arguments, 0-d operands,
 * an invalid $CLTENSOR_GEMM), CT_ERR_DEVICE_MISMATCH, CT_ERR_DTYPE_MISMATCH, CT_ERR_SHAPE_MISMATCH
 * (both shapes in the message), CT_ERR_UNSUPPORTED, CT_ERR_OUT_OF_MEMORY, CT_ERR_KERNEL_BUILD,
 * CT_ERR_OPENCL (the message names the OpenCL or CLBlast error). */
#ifndef CLTENSOR_LINALG_H
#define CLTENSOR_LINALG_H

#include "cltensor/device.h"
#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* OUT: *out, a new contiguous tensor a @ b (see the top of this header). Borrows a and b. */
CT_API ct_status ct_matmul(ct_tensor **out, const ct_tensor *a, const ct_tensor *b);

/* Writes a @ b into out, which must have the result's shape, dtype and device (any strides but
 * an expanded view's, a stride-0 dim of size > 1: CT_ERR_INVALID_ARGUMENT before anything runs;
 * it may overlap a or b: the product is then formed in a temporary first). */
CT_API ct_status ct_matmul_out(ct_tensor *out, const ct_tensor *a, const ct_tensor *b);

/* OUT: *out = x @ weight^T + bias, as torch.nn.functional.linear: x is [..., in] (1-D allowed),
 * weight is [out_features, in], bias is [out_features] or anything broadcasting to the result
 * ([..., out_features]), or NULL. One dtype for all. */
CT_API ct_status ct_linear(ct_tensor **out, const ct_tensor *x, const ct_tensor *weight,
                           const ct_tensor *bias);

/* OUT: *out = beta * c + alpha * (a @ b), as torch.addmm (a and b follow ct_matmul's rules, so
 * batched and 1-D operands work too); c broadcasts to the product's shape. With beta = 0, c's
 * values are ignored (NaN in c does not propagate). Integer dtypes need integral alpha and beta
 * (CT_ERR_INVALID_ARGUMENT otherwise). */
CT_API ct_status ct_addmm(ct_tensor **out, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b,
                          double beta, double alpha);

/* As ct_addmm into out (shape, dtype and device of the product). out may be c itself, which gives
 * the in-place update c = beta * c + alpha * a @ b. */
CT_API ct_status ct_addmm_out(ct_tensor *out, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b,
                              double beta, double alpha);

/* ---- Route and tuning queries ---- */
typedef enum ct_gemm_route {
  CT_GEMM_ROUTE_CLBLAST = 0,
  CT_GEMM_ROUTE_HOST = 1
} ct_gemm_route;

/* OUT: *route, the route float GEMMs on d take. Reads $CLTENSOR_GEMM on the device's first GEMM
 * (or first call here). Returns the error every GEMM on d would return when $CLTENSOR_GEMM is
 * invalid or can't be honoured on d. */
CT_API ct_status ct_gemm_route_get(ct_gemm_route *route, ct_device *d);

/* "clblast" or "host"; "invalid" otherwise. */
CT_API const char *ct_gemm_route_name(ct_gemm_route route);

typedef enum ct_gemm_tuning_source {
  CT_GEMM_TUNING_BUILTIN = 0,   /* CLBlast's own database */
  CT_GEMM_TUNING_SHIPPED = 1,   /* this library's defaults for the kind of device (PoCL CPUs) */
  CT_GEMM_TUNING_FILE = 2       /* the file cltensor-tune stored for this device */
} ct_gemm_tuning_source;

/* OUT: *source, which CLBlast parameters d's GEMMs use, and *message (may be NULL; owned by the
 * runtime, valid until ct_shutdown()): the tuning file's path and, when one was found but
 * ignored, the reason (e.g. "line 7: MWG=48 is not a multiple of MDIMC*VWM = 32"). Applies the
 * tuning on first use as a GEMM would. */
CT_API ct_status ct_gemm_tuning_get(ct_gemm_tuning_source *source, const char **message, ct_device *d);

CT_END_DECLS

#endif
