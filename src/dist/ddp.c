/* DDP: gradients averaged over the ranks during the backward (PyTorch's DistributedDataParallel
 * reducer, docs/DISTRIBUTED.md).
 *
 * Buckets: the parameters in reverse order (gradients of the last layers become ready first),
 * cut into buckets of one dtype, the first at most first_bucket_bytes and the others at most
 * bucket_bytes (a parameter larger than the cap is a bucket of its own). Each bucket has one flat
 * device tensor per replica.
 *
 * A step: the autograd engine calls ready() when a parameter's .grad is final in a backward
 * (tensor/graph.h, ct__grad_hook). When every parameter of bucket k (of every replica) is ready
 * and buckets 0..k-1 are launched, the gradients are copied into the bucket's flat tensors and
 * its all-reduce (AVG) is queued on the group's thread: buckets launch in index order on every
 * rank, which is what keeps the ranks' collectives matched. pass_end() marks the parameters the
 * backward did not reach as ready (their .grad, or zeros), launches what is left, waits for
 * every bucket and copies the averages back into .grad. The agreement check (kind, dtype, size on
 * every rank) runs on each bucket's all-reduce of the first step; later steps skip it. */
#include <stdlib.h>
#include <string.h>

#include "cltensor/autograd.h"
#include "cltensor/shape.h"
#include "core/error.h"
#include "dist/dist.h"
#include "tensor/graph.h"

#define CT__BUCKET_CAP ((size_t)25 << 20)
#define CT__FIRST_BUCKET_CAP ((size_t)1 << 20)

struct ct__bucket {
  int first, count; /* parameters order[first .. first + count) */
  ct_dtype dtype;
  int64_t numel;
  ct_tensor **flat; /* one per replica */
  int pending;      /* (parameter, replica) pairs not ready yet this step */
  ct_dist_work *work;
};

struct ct_ddp {
  ct_dist *d;
  int n, R;           /* parameters per replica, replicas */
  ct_tensor **params; /* R * n, replica-major */
  int *order;         /* bucket order: parameter indices, last parameter first */
  int *bucket_of;     /* per parameter index */
  int64_t *offset;    /* per parameter index: element offset in its bucket */
  bool *ready;        /* R * n, this step */
  int nb;
  struct ct__bucket *b;
  int next_launch;
  int passes; /* replicas whose backward ended this step */
  bool sync, checked;
  ct_status failed; /* the first failure of this step (a launch), CT_OK otherwise */
  char *failmsg;
  ct__grad_hook hook;
  pthread_mutex_t lock;
};

static void ct__ddp_fail(struct ct_ddp *p, ct_status st) {
  if (p->failed != CT_OK) return;
  p->failed = st;
  free(p->failmsg);
  p->failmsg = strdup(ct_last_error());
}

/* The slice of bucket b's flat tensor of replica r holding parameter j, shaped as it. */
static ct_status ct__ddp_slot_view(ct_tensor **out, struct ct_ddp *p, int r, int j) {
  const struct ct__bucket *b = &p->b[p->bucket_of[j]];
  const ct_tensor *x = p->params[r * p->n + j];
  ct_tensor *s = NULL;
  int64_t off = p->offset[j], n = ct_numel(x);
  CT__TRY(ct_slice(&s, b->flat[r], 0, off, off + n, 1));
  ct_status st = ct_view(out, s, x->ndim, x->shape);
  ct_release(s);
  return st;
}

/* Copies the gradients of bucket k into its flat tensors and queues its all-reduce. */
static ct_status ct__ddp_launch(struct ct_ddp *p, int k) {
  struct ct__bucket *b = &p->b[k];
  for (int r = 0; r < p->R; r++) {
    for (int i = 0; i < b->count; i++) {
      int j = p->order[b->first + i];
      const ct_tensor *g = p->params[r * p->n + j]->grad;
      ct_tensor *v = NULL;
      CT__TRY(ct__ddp_slot_view(&v, p, r, j));
      ct_status st = g ? ct_copy(v, g) : ct_zero_(v);
      ct_release(v);
      CT__TRY(st);
    }
  }
  return ct__dist_all_reduce_work(&b->work, p->d, b->flat, CT_DIST_AVG, !p->checked, "DDP's gradient all-reduce");
}

/* Launches the ready buckets that are next in order. Under p->lock. */
static void ct__ddp_launch_ready(struct ct_ddp *p) {
  while (p->next_launch < p->nb && p->b[p->next_launch].pending == 0) {
    int k = p->next_launch++;
    if (p->failed == CT_OK) {
      ct_status st = ct__ddp_launch(p, k);
      if (st != CT_OK) ct__ddp_fail(p, st);
    }
  }
}

static void ct__ddp_mark(struct ct_ddp *p, int idx) {
  if (p->ready[idx]) return;
  p->ready[idx] = true;
  p->b[p->bucket_of[idx % p->n]].pending--;
}

static ct_status ct__ddp_ready(void *ctx, ct_tensor *leaf) {
  struct ct_ddp *p = ctx;
  pthread_mutex_lock(&p->lock);
  if (p->sync) {
    for (int i = 0; i < p->R * p->n; i++)
      if (p->params[i] == leaf) {
        ct__ddp_mark(p, i);
        break;
      }
    ct__ddp_launch_ready(p);
  }
  pthread_mutex_unlock(&p->lock);
  return CT_OK; /* a failed launch is reported at the end of the pass, when the step completes */
}

/* The step's end: every bucket launched, waited for, averaged gradients written back. */
static ct_status ct__ddp_finish(struct ct_ddp *p) {
  for (int i = 0; i < p->R * p->n; i++) ct__ddp_mark(p, i);
  ct__ddp_launch_ready(p);
  ct_status st = CT_OK;
  for (int k = 0; k < p->nb; k++) {
    struct ct__bucket *b = &p->b[k];
    if (b->work) {
      ct_status e = ct_dist_wait(b->work, -1);
      if (e != CT_OK) ct__ddp_fail(p, e);
      ct_dist_work_release(b->work);
      b->work = NULL;
    }
  }
  if (p->failed == CT_OK) p->checked = true;
  for (int r = 0; r < p->R && p->failed == CT_OK; r++) {
    for (int j = 0; j < p->n && p->failed == CT_OK; j++) {
      ct_tensor *x = p->params[r * p->n + j], *v = NULL;
      st = ct__ddp_slot_view(&v, p, r, j);
      if (st == CT_OK) {
        if (x->grad) {
          st = ct_copy(x->grad, v);
        } else {
          ct_tensor *g = NULL;
          st = ct_empty(&g, x->storage->device, x->dtype, x->ndim, x->shape);
          if (st == CT_OK) st = ct_copy(g, v);
          if (st == CT_OK) x->grad = g;
          else ct_release(g);
        }
      }
      ct_release(v);
      if (st != CT_OK) ct__ddp_fail(p, st);
    }
  }
  /* The next step starts from nothing. */
  memset(p->ready, 0, (size_t)p->R * p->n * sizeof *p->ready);
  for (int k = 0; k < p->nb; k++) p->b[k].pending = p->b[k].count * p->R;
  p->next_launch = 0;
  p->passes = 0;
  st = p->failed;
  if (st != CT_OK) ct__error(st, "%s", p->failmsg ? p->failmsg : "DDP: the step failed");
  p->failed = CT_OK;
  return st;
}

static ct_status ct__ddp_pass_end(void *ctx, ct_status pass_st) {
  struct ct_ddp *p = ctx;
  pthread_mutex_lock(&p->lock);
  ct_status st = CT_OK;
  /* A failed backward on this rank still takes part in the step's collectives (with whatever
   * gradients it has), so that the other ranks are not left waiting; its own error wins. */
  if (p->sync && ++p->passes >= p->R) st = ct__ddp_finish(p);
  pthread_mutex_unlock(&p->lock);
  return pass_st != CT_OK ? pass_st : st;
}

ct_status ct_ddp_new(ct_ddp **out, ct_dist *d, ct_tensor *const *params, int n, const ct_ddp_opts *opts) {
  const char *fn = "ct_ddp_new";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  CT__CHECK_NOT_NULL(fn, params);
  if (n < 1) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %d; DDP needs at least one parameter", fn, n);
  int R = d->nlocal;
  char sa[200], sb[200];
  for (int i = 0; i < R * n; i++) {
    const ct_tensor *x = params[i];
    int r = i / n, j = i % n;
    if (!x) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: parameter %d (replica %d) is NULL", fn, j, r);
    if (!ct_dtype_is_floating_point(x->dtype))
      return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: parameter %d is %s; parameters are floating", fn, j,
                       ct_dtype_name(x->dtype));
    if (x->grad_fn || !x->requires_grad)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: parameter %d (replica %d) is not a leaf that requires grad", fn,
                       j, r);
    if (x->grad_hook)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: parameter %d (replica %d) belongs to another DDP already", fn, j,
                       r);
    for (int k = 0; k < i; k++)
      if (params[k] == x)
        return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: parameter %d (replica %d) is given twice", fn, j, r);
    if (d->local && x->storage->device != d->devs[r])
      return ct__error(CT_ERR_DEVICE_MISMATCH, "%s: parameter %d of replica %d is on %s, not on the group's device %s",
                       fn, j, r, ct_device_spec(x->storage->device), ct_device_spec(d->devs[r]));
    const ct_tensor *x0 = params[j];
    if (r > 0 && (x->dtype != x0->dtype || x->ndim != x0->ndim ||
                  memcmp(x->shape, x0->shape, (size_t)x->ndim * sizeof *x->shape)))
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: parameter %d is %s %s on replica %d but %s %s on replica 0", fn, j,
                       ct_dtype_name(x->dtype), ct__shape_str(sa, sizeof sa, x->ndim, x->shape), r,
                       ct_dtype_name(x0->dtype), ct__shape_str(sb, sizeof sb, x0->ndim, x0->shape));
  }
  size_t cap = opts && opts->bucket_bytes ? opts->bucket_bytes : CT__BUCKET_CAP;
  size_t first_cap = opts && opts->first_bucket_bytes ? opts->first_bucket_bytes : CT__FIRST_BUCKET_CAP;

  struct ct_ddp *p = calloc(1, sizeof *p);
  if (!p) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  p->d = d;
  p->n = n;
  p->R = R;
  p->sync = true;
  pthread_mutex_init(&p->lock, NULL);
  p->params = calloc((size_t)R * n, sizeof *p->params);
  p->order = calloc((size_t)n, sizeof *p->order);
  p->bucket_of = calloc((size_t)n, sizeof *p->bucket_of);
  p->offset = calloc((size_t)n, sizeof *p->offset);
  p->ready = calloc((size_t)R * n, sizeof *p->ready);
  p->b = calloc((size_t)n, sizeof *p->b); /* at most one bucket per parameter */
  ct_status st = CT_OK;
  if (!p->params || !p->order || !p->bucket_of || !p->offset || !p->ready || !p->b)
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (st == CT_OK) {
    for (int i = 0; i < R * n; i++) p->params[i] = ct_retain(params[i]);
    /* Reverse order, cut at the caps and at dtype changes. */
    struct ct__bucket *cur = NULL;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
      int j = n - 1 - i;
      const ct_tensor *x = params[j];
      size_t xb = ct_tensor_nbytes(x), lim = cur == p->b ? first_cap : cap;
      if (!cur || cur->dtype != x->dtype || (cur->count > 0 && bytes + xb > lim)) {
        cur = &p->b[p->nb++];
        cur->first = i;
        cur->dtype = x->dtype;
        bytes = 0;
      }
      p->order[i] = j;
      p->bucket_of[j] = (int)(cur - p->b);
      p->offset[j] = cur->numel;
      cur->count++;
      cur->numel += ct_numel(x);
      bytes += xb;
    }
    for (int k = 0; k < p->nb && st == CT_OK; k++) {
      struct ct__bucket *b = &p->b[k];
      b->pending = b->count * R;
      b->flat = calloc((size_t)R, sizeof *b->flat);
      if (!b->flat) st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
      for (int r = 0; r < R && st == CT_OK; r++)
        st = ct_zeros(&b->flat[r], params[r * n]->storage->device, b->dtype, 1, &b->numel);
    }
  }
  /* The parameters from rank 0 (replica 0): every broadcast queued, then all waited for. */
  if (st == CT_OK && !(opts && opts->no_broadcast) && d->size > 1) {
    ct_tensor **ts = calloc((size_t)R, sizeof *ts);
    if (!ts) st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int j = 0; j < n && st == CT_OK; j++) {
      for (int r = 0; r < R; r++) ts[r] = params[r * n + j];
      st = ct_dist_broadcast_multi(d, ts, 0);
    }
    free(ts);
    if (st != CT_OK) ct__error_append(" (broadcasting the parameters from rank 0 in %s)", fn);
  }
  if (st != CT_OK) {
    ct_ddp_free(p);
    return st;
  }
  p->hook = (ct__grad_hook){ct__ddp_ready, ct__ddp_pass_end, p};
  for (int i = 0; i < R * n; i++) p->params[i]->grad_hook = &p->hook;
  *out = p;
  return CT_OK;
}

ct_status ct_ddp_set_sync(ct_ddp *p, bool on) {
  CT__CHECK_NOT_NULL("ct_ddp_set_sync", p);
  pthread_mutex_lock(&p->lock);
  ct_status st = CT_OK;
  if (p->passes > 0)
    st = ct__error(CT_ERR_INVALID_ARGUMENT,
                   "ct_ddp_set_sync: %d of the %d replicas' backward passes of this step have run; change it between "
                   "steps",
                   p->passes, p->R);
  else
    p->sync = on;
  pthread_mutex_unlock(&p->lock);
  return st;
}

int ct_ddp_bucket_count(const ct_ddp *p) { return p ? p->nb : -1; }

void ct_ddp_free(ct_ddp *p) {
  if (!p) return;
  for (int k = 0; k < p->nb; k++) {
    struct ct__bucket *b = &p->b[k];
    if (b->work) {
      ct_dist_wait(b->work, -1);
      ct_dist_work_release(b->work);
    }
    for (int r = 0; b->flat && r < p->R; r++) ct_release(b->flat[r]);
    free(b->flat);
  }
  if (p->params)
    for (int i = 0; i < p->R * p->n; i++) {
      if (!p->params[i]) continue;
      if (p->params[i]->grad_hook == &p->hook) p->params[i]->grad_hook = NULL;
      ct_release(p->params[i]);
    }
  free(p->params);
  free(p->order);
  free(p->bucket_of);
  free(p->offset);
  free(p->ready);
  free(p->b);
  free(p->failmsg);
  pthread_mutex_destroy(&p->lock);
  free(p);
}
