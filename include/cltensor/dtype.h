/* Element types, and host conversions for the 16-bit float formats.
 *
 * Full dtypes: bool, u8, i8, i16, i32, i64, f16, bf16, f32, f64 (every op). u16, u32 and u64 are
 * storage dtypes, as in PyTorch: creation, casts, copies, printing, files (.npy, safetensors,
 * DLPack), comparisons and elementwise arithmetic among themselves or with floats, and the
 * reductions (u16, u32; not u64). Mixing them with another integer or bool dtype in one op is
 * CT_ERR_DTYPE_MISMATCH, as torch.promote_types refuses it (cast one side first); matrix products
 * of them are CT_ERR_UNSUPPORTED.
 *
 * f16 (IEEE binary16) and bf16 (bfloat16) are stored as 16 bits on every device and converted in
 * kernels, so they work without cl_khr_fp16; their arithmetic computes in f32. f64 needs a device
 * with cl_khr_fp64 (ct_device_props.fp64); elsewhere creating an f64 tensor gives
 * CT_ERR_UNSUPPORTED. bool is one byte holding 0 or 1. */
#ifndef CLTENSOR_DTYPE_H
#define CLTENSOR_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cltensor/export.h"
#include "cltensor/status.h"

CT_BEGIN_DECLS

typedef enum ct_dtype {
  CT_BOOL = 0,
  CT_U8 = 1,
  CT_I8 = 2,
  CT_I32 = 3,
  CT_I64 = 4,
  CT_F16 = 5,
  CT_BF16 = 6,
  CT_F32 = 7,
  CT_F64 = 8,
  /* Appended after the first nine, so the values above never change. */
  CT_I16 = 9,
  CT_U16 = 10,
  CT_U32 = 11,
  CT_U64 = 12
} ct_dtype;

#define CT_DTYPE_COUNT 13

/* Bytes per element (1, 2, 4 or 8); 0 for a value outside the enum. */
CT_API size_t ct_dtype_size(ct_dtype t);

/* "bool", "u8", "i8", "i32", "i64", "f16", "bf16", "f32", "f64", "i16", "u16", "u32", "u64";
 * "invalid" otherwise. */
CT_API const char *ct_dtype_name(ct_dtype t);

/* OUT: *out, the dtype a name above denotes (case-insensitive).
 * Returns CT_OK or CT_ERR_INVALID_ARGUMENT (unknown or NULL name, NULL out). */
CT_API ct_status ct_dtype_from_name(ct_dtype *out, const char *name);

/* Predicate: true for f16, bf16, f32, f64 (PyTorch's is_floating_point). */
CT_API bool ct_dtype_is_floating_point(ct_dtype t);

/* Host conversions, round to nearest even; NaN stays NaN, overflow gives infinity. */
CT_API uint16_t ct_f32_to_f16(float x);
CT_API float ct_f16_to_f32(uint16_t h);
CT_API uint16_t ct_f32_to_bf16(float x);
CT_API float ct_bf16_to_f32(uint16_t h);

CT_END_DECLS

#endif
