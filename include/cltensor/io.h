/* Files: NumPy .npy arrays and safetensors collections of named tensors.
 *
 *   ct_tensor *x;                                   // a NumPy array onto a device
 *   if (ct_npy_load(&x, "x.npy", dev) != CT_OK) fprintf(stderr, "%s\n", ct_last_error());
 *
 *   ct_safetensors *m;                              // a model's weights
 *   ct_tensor *w;
 *   if (ct_safetensors_load(&m, "model.safetensors", dev) == CT_OK &&
 *       ct_safetensors_get(&w, m, "fc1.weight") == CT_OK) { ...; ct_release(w); }
 *   ct_safetensors_free(m);
 *
 * Loading reads the file into host memory and copies it onto the chosen device (ct_from_host);
 * saving copies the tensor back (ct_to_host, any strides) and writes it.
 *
 * Hostile files. Files are untrusted input: every length, offset and shape is checked before
 * use, so a malformed file gives CT_ERR_FORMAT (never a crash or an out-of-bounds read) with a
 * message naming the file, what is wrong and the values involved: truncated data, a bad magic
 * number, header lengths that overflow or run past the file, headers over 100 MB, malformed
 * headers, unknown dtypes, shapes whose element count overflows, data sizes that don't match
 * shape x dtype, offsets out of range, overlapping or leaving gaps, duplicate names, and
 * trailing bytes after the data. A well-formed file using something cltensor lacks (a NumPy
 * complex64 array, a safetensors F8_E4M3 tensor, more than CT_MAX_DIMS dims) gives
 * CT_ERR_UNSUPPORTED. A missing or unreadable file, or one that is not a regular file, gives
 * CT_ERR_IO with the path and the system's reason. Bool data holding bytes other than 0 and 1
 * loads as 1 for every nonzero byte.
 *
 * Atomic saves. A save writes a temporary file in the target's folder ("<path>.<pid>.<n>.tmp"),
 * fsyncs it and renames it over the target. A crash never leaves a half-written file under the
 * final name, and a failed save (CT_ERR_IO) removes the temporary file and leaves an existing
 * file untouched. A new file gets the permissions the umask gives (0666 & ~umask).
 *
 * Every call here may also return the statuses of ct_from_host()/ct_to_host() (CT_ERR_OPENCL,
 * CT_ERR_OUT_OF_MEMORY, CT_ERR_UNSUPPORTED for f64 on a device without cl_khr_fp64) and
 * CT_ERR_INVALID_ARGUMENT for NULL arguments. See docs/FILES.md for the formats in detail. */
#ifndef CLTENSOR_IO_H
#define CLTENSOR_IO_H

#include <stddef.h>

#include "cltensor/export.h"
#include "cltensor/status.h"
#include "cltensor/tensor.h"

CT_BEGIN_DECLS

/* ---- .npy ----
 * Format versions 1.0, 2.0 and 3.0. dtypes: '|b1' bool, '|u1', '|i1', 'i4', 'i8', 'f2', 'f4',
 * 'f8', little-endian ('<'), big-endian ('>', swapped on load) or native ('='). Fortran-order
 * arrays load correctly (as contiguous C-order tensors). bf16 has no NumPy dtype. */

/* OUT: *out, a new contiguous tensor on d holding the array in path.
 * Returns CT_OK; CT_ERR_IO; CT_ERR_FORMAT; CT_ERR_UNSUPPORTED (a dtype cltensor lacks, a
 * structured dtype, more than CT_MAX_DIMS dims). *out is NULL on failure. */
CT_API ct_status ct_npy_load(ct_tensor **out, const char *path, ct_device *d);

/* OUT: *out, as ct_npy_load(), with the values converted on the host to the floating-point
 * dtype `dtype` (f16, bf16, f32 or f64) before they reach d, as numpy's
 * np.load(path).astype(dtype): floats round to nearest even (f64 -> f32 as ct_cast() does; too
 * large for the dtype becomes inf), integers and bools become their value (exact up to 2^53, then
 * rounded). An array already of that dtype loads unchanged. This is how an f64 array reaches a
 * device without cl_khr_fp64 (rusticl, Intel Arc, Apple):
 *
 *   ct_npy_load_as(&x, "ref.npy", dev, ct_device_properties(dev)->fp64 ? CT_F64 : CT_F32);
 *
 * Returns what ct_npy_load() returns, and CT_ERR_INVALID_ARGUMENT for a dtype that is not a
 * floating-point one. */
CT_API ct_status ct_npy_load_as(ct_tensor **out, const char *path, ct_device *d, ct_dtype dtype);

/* Writes t (any strides; borrowed) to path as a C-order, little-endian, version 1.0 .npy file,
 * atomically, exactly as numpy.save would.
 * Returns CT_OK; CT_ERR_IO; CT_ERR_UNSUPPORTED for bf16 (cast it to f32 with ct_cast(), or
 * save it in a safetensors file, which has BF16). */
CT_API ct_status ct_npy_save(const char *path, const ct_tensor *t);

/* ---- safetensors ----
 * A ct_safetensors is an ordered collection of uniquely named tensors plus the file's
 * "__metadata__", a string -> string map. dtypes: BOOL, U8, I8, I32, I64, F16, BF16, F32, F64.
 * The collection holds a reference to each of its tensors; tensors may be on different
 * devices. A collection is not thread-safe: use it from one thread at a time. */
typedef struct ct_safetensors ct_safetensors;

/* Constructor. OUT: *out, a new empty collection. Returns CT_OK; CT_ERR_OUT_OF_MEMORY. */
CT_API ct_status ct_safetensors_new(ct_safetensors **out);

/* Constructor. OUT: *out, a new collection holding every tensor of the file at path, loaded
 * onto d, in the header's order, and its metadata.
 * Returns CT_OK; CT_ERR_IO; CT_ERR_FORMAT; CT_ERR_UNSUPPORTED. *out is NULL on failure. */
CT_API ct_status ct_safetensors_load(ct_safetensors **out, const char *path, ct_device *d);

/* Constructor. OUT: *out, as ct_safetensors_load(), with every tensor of dtype `from` converted
 * on the host to the floating-point dtype `to` before it reaches d (other tensors load as they
 * are), rounding as ct_npy_load_as() does. PyTorch's
 * {k: v.float() if v.dtype == torch.float64 else v for k, v in load_file(path).items()} is
 *
 *   ct_safetensors_load_as(&m, path, dev, CT_F64, CT_F32);
 *
 * which loads a file with f64 entries onto a device without cl_khr_fp64. Saving the collection
 * again writes the converted dtype. from == to loads everything unchanged.
 * Returns what ct_safetensors_load() returns, and CT_ERR_INVALID_ARGUMENT for a `from` that is not
 * a dtype or a `to` that is not a floating-point one. */
CT_API ct_status ct_safetensors_load_as(ct_safetensors **out, const char *path, ct_device *d, ct_dtype from,
                                        ct_dtype to);

/* Writes the collection to path, atomically: the metadata, then each tensor (C order, little
 * endian), tensors with larger elements first in the data so that each starts aligned to its
 * element size, and the data aligned to 8 bytes, as the reference implementation writes.
 * Returns CT_OK; CT_ERR_IO. */
CT_API ct_status ct_safetensors_save(const ct_safetensors *st, const char *path);

/* Destructor: releases the collection's references to its tensors (tensors the caller still
 * holds stay valid) and frees it. NULL is a no-op. */
CT_API void ct_safetensors_free(ct_safetensors *st);

/* Method. The number of tensors; 0 for NULL. */
CT_API size_t ct_safetensors_count(const ct_safetensors *st);

/* Method. The name of the index-th tensor (0 <= index < count), owned by the collection and
 * valid until it is freed; NULL for NULL or an index out of range. */
CT_API const char *ct_safetensors_name(const ct_safetensors *st, size_t index);

/* Method. OUT: *out, a NEW reference to the tensor called name (the same tensor the collection
 * holds, not a copy: release it with ct_release()).
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT when there is none (the message lists the names). */
CT_API ct_status ct_safetensors_get(ct_tensor **out, const ct_safetensors *st, const char *name);

/* Method. OUT: *out, a NEW reference to the index-th tensor.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for an index out of range. */
CT_API ct_status ct_safetensors_at(ct_tensor **out, const ct_safetensors *st, size_t index);

/* Method. Adds t under name (copied), or replaces the tensor of that name, keeping its place.
 * The collection takes a new reference to t (the caller keeps its own).
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for an empty name, "__metadata__", or a name that is
 * not valid UTF-8; CT_ERR_OUT_OF_MEMORY. */
CT_API ct_status ct_safetensors_set(ct_safetensors *st, const char *name, ct_tensor *t);

/* Method. The number of metadata entries; 0 for NULL. */
CT_API size_t ct_safetensors_metadata_count(const ct_safetensors *st);

/* Method. The index-th metadata key (in the file's order, then insertion order), owned by the
 * collection; NULL when out of range. */
CT_API const char *ct_safetensors_metadata_key(const ct_safetensors *st, size_t index);

/* Method. The value stored under key, owned by the collection and valid until that key is set
 * again or the collection is freed; NULL when there is none. */
CT_API const char *ct_safetensors_metadata_get(const ct_safetensors *st, const char *key);

/* Method. Sets key to a copy of value; a NULL value removes the key.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for a NULL key or text that is not valid UTF-8;
 * CT_ERR_OUT_OF_MEMORY. */
CT_API ct_status ct_safetensors_metadata_set(ct_safetensors *st, const char *key, const char *value);

CT_END_DECLS

#endif
