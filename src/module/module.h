/* Internal: the module struct (include/cltensor/module.h) and what its files share.
 *
 * A module is a kind (a small table of its PyTorch name and forward function), its own named
 * parameters and buffers, its named children, the training flag, and a few numbers its forward
 * reads (the options of the built-in layers). Built-in forwards find their tensors by name
 * ("weight", "running_mean"), so a module's tensors can be replaced (ct_module_to) or added to
 * (ct_module_add_parameter) without anything else to keep in step. */
#ifndef CT_MODULE_MODULE_H
#define CT_MODULE_MODULE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cltensor/module.h"

/* A built-in module's forward: *y a new tensor, or a failing status with the message set. */
typedef ct_status (*ct__module_forward)(ct_tensor **y, ct_module *m, const ct_tensor *x);

typedef struct ct__module_kind {
  const char *name;            /* PyTorch's class name */
  ct__module_forward forward;  /* NULL for user modules (their callback is in the module) */
} ct__module_kind;

typedef struct ct__module_entry {
  char *name;
  ct_tensor *t;  /* one reference */
} ct__module_entry;

typedef struct ct__module_child {
  char *name;
  ct_module *m;  /* one reference */
} ct__module_child;

/* What the built-in forwards read; each kind uses the fields its constructor sets. */
typedef struct ct__module_options {
  int kernel[2], stride[2], padding[2], dilation[2], groups;
  bool has_stride;   /* pools: stride given (else the kernel) */
  int64_t size[2];   /* adaptive pool output */
  int nnorm;         /* layer/RMS norm: how many trailing dims */
  int64_t norm_shape[CT_MAX_DIMS];
  int rank_lo, rank_hi;  /* batch norm: accepted input ranks */
  double eps, momentum, p, slope;
  int dim, end_dim;  /* softmax dim; flatten start and end */
  bool flag;         /* gelu: tanh approximation */
  int heads;         /* multihead attention: num_heads */
  bool batch_first;  /* multihead attention: inputs [N, L, E] (else [L, N, E]) */
} ct__module_options;

struct ct_module {
  atomic_int refs;
  const ct__module_kind *kind;
  char *type_name;   /* user modules' own; built-ins use kind->name */
  bool training;
  ct__module_entry *params, *buffers;
  int nparams, nbuffers, cap_params, cap_buffers;
  ct__module_child *children;
  int nchildren, cap_children;
  ct__module_options opt;
  /* User modules. */
  ct_module_forward_fn user_forward;
  void *user;
  ct_module_destroy_fn destroy;
  /* Strings handed out: the names of the last ct_module_named_* call, the last load's report. */
  char *names;
  char *report;
};

/* A new module of kind with one reference, training on; NULL fn names the caller in messages. */
ct_status ct__module_new(ct_module **out, const ct__module_kind *kind, const char *fn);
/* The device a constructor creates tensors on: d, or the default device when d is NULL. */
ct_status ct__module_device(ct_device **d, ct_device *given, const char *fn);
/* Registers an owned tensor (takes the caller's reference, also on failure). */
ct_status ct__module_own_param(ct_module *m, const char *name, ct_tensor *t, const char *fn);
ct_status ct__module_own_buffer(ct_module *m, const char *name, ct_tensor *t, const char *fn);
/* m's own parameter or buffer of that name, or NULL (no message). */
ct_tensor *ct__module_param(const ct_module *m, const char *name);
ct_tensor *ct__module_buffer(const ct_module *m, const char *name);
/* Returns st from a constructor: *out = m on success, else releases m and stores NULL. */
ct_status ct__module_done(ct_module **out, ct_module *m, ct_status st);

/* Every state entry under m in state_dict order: visit(ctx, full name, tensor, is_param) for
 * each parameter (params) and buffer (buffers); dedup skips a tensor already visited (as
 * named_parameters does; state_dict does not). Stops at the first status that is not CT_OK. */
typedef ct_status (*ct__module_visit)(void *ctx, const char *name, ct_tensor *t, bool is_param);
ct_status ct__module_walk(const ct_module *m, bool params, bool buffers, bool dedup, ct__module_visit visit,
                          void *ctx);

/* ct_module_load_state_dict_from under fn's name; check_only: only the checks (the strict
 * errors), nothing copied and the load report left as it was. */
ct_status ct__module_load_state(ct_module *m, const ct_safetensors *st, bool strict, bool check_only,
                                const char *fn);

/* The device files load onto for m: its first tensor's, else the default device (a module
 * without tensors). */
ct_status ct__module_home(ct_device **d, const ct_module *m);

/* Every parameter and buffer under m (ct__module_walk's visits, dedup as there), collected: ts
 * borrows the tensors; names, when asked for, holds copies of their full names. Free with
 * ct__entries_free (also after a failure). */
typedef struct ct__entries {
  char **names; /* NULL unless asked for */
  ct_tensor **ts;
  int n, cap;
  bool with_names;
  const char *fn; /* the public call, for the out-of-memory message */
} ct__entries;
ct_status ct__module_entries(ct__entries *e, const ct_module *m, bool dedup, bool names, const char *fn);
void ct__entries_free(ct__entries *e);

#endif
