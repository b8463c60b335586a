/* Internal dtype helpers: value ranges and the one rule for scalars that must fit a dtype. */
#ifndef CT_CORE_DTYPE_H
#define CT_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "cltensor/dtype.h"

/* 1 for u16, u32, u64: the storage dtypes that torch.promote_types refuses to mix with another
 * integer or bool dtype. */
bool ct__dtype_is_unsigned_storage(ct_dtype t);

/* The rule for a scalar given for a tensor of dtype t (ct_full's value, the tensor-scalar ops'
 * scalar, ct_clamp's bounds, the values ct_arange produces), PyTorch's "value cannot be
 * converted to type ... without overflow": CT_OK when v can be represented in t, else
 * CT_ERR_INVALID_ARGUMENT naming fn, what ("value", "scalar", "lo", ...), v and t.
 *   integer  a finite v within the dtype's range (a fraction is then truncated toward zero);
 *            NaN and infinities never fit;
 *   bool     every value (nonzero is true), as PyTorch;
 *   float    every value: beyond the largest finite one it rounds to infinity, as IEEE
 *            conversion and PyTorch's f16/bf16 torch.full and float scalar ops do. */
ct_status ct__dtype_check_scalar(double v, ct_dtype t, const char *fn, const char *what);

/* The OpenCL unsigned integer type of an element size, "uchar", "ushort", "uint" or "ulong"
 * (any other size), for kernels that move elements as raw bits (-DCT_BITS=...). */
const char *ct__dtype_bits_type(size_t elem_size);

#endif
