/* The autograd layer (issue #15): the backward engine (engine.c), the gradient formulas of
 * every recorded op (grad_*.c, one per op family, dispatched through tensor/grad_ops.def) and
 * the helpers formulas share. It is the top of the op stack: formulas call the public ops of
 * every family. Recording is in tensor/graph.h, below the families that record. */
#ifndef CT_AUTOGRAD_AUTOGRAD_H
#define CT_AUTOGRAD_AUTOGRAD_H

#include "cltensor/autograd.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

/* A formula: given node n and g, the gradient of n's output (n->out_shape, n->out_dtype,
 * contiguous or not), sets gin[i] to a new tensor for every input with n->in[i].needed (others
 * are left NULL; NULL for a needed input means a zero gradient). It runs with grad mode off.
 * What it returns may have a broadcast shape of the input's (the engine sums it back) and
 * another float dtype (the engine casts it); the device must be the input's. On failure it
 * releases what it made and returns the status (the engine releases gin[] entries too). */
typedef ct_status (*ct__grad_formula)(ct__node *n, const ct_tensor *g, ct_tensor **gin);

#define CT__GOP(NAME, formula, rec, check) ct_status formula(ct__node *n, const ct_tensor *g, ct_tensor **gin);
#include "tensor/grad_ops.def"
#undef CT__GOP

/* *out = g summed over the dims that broadcasting added or stretched, as shape ndim/shape
 * (leading dims and dims of size 1 in shape); g itself (retained) when the shapes are equal.
 * CT_ERR_INTERNAL naming fn when g's shape does not broadcast from shape. */
ct_status ct__ag_sum_to(ct_tensor **out, const ct_tensor *g, int ndim, const int64_t *shape, const char *fn);

/* g, the gradient of a reduction over the dims in bits dims (its record's) of the input e,
 * kept or not, as a view of e's shape (reshaped to kept dims, expanded). */
ct_status ct__ag_unreduce(ct_tensor **out, const ct_tensor *g, const ct__edge *e, uint32_t dims);

/* Zero gradient of an edge's shape and dtype (for formulas that need an explicit zero). */
ct_status ct__ag_zeros_for(ct_tensor **out, const ct__edge *e);

#endif
