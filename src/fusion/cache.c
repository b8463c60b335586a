/* The fusion graph's table of built kernels (issue #16; its own file since issue #29).
 *
 * Keyed by the kernel's signature (struct ct__fgen's sig: everything its source depends on),
 * so that a realize whose kernels are built formats no source at all. Process-wide, behind its
 * own lock, held only to look up and insert: a build runs outside every lock, behind an entry
 * marked "being built" on which a second thread needing the same kernel waits (issue #28: the
 * builds ran under the one graph lock, and all threads waited for each). A realize pins the
 * entries it launches (users), so that another thread's insertion does not release a kernel
 * between its lookup and its launch; only unpinned entries are evicted. At most CT__FUSE_LRU
 * entries: the least recently used unpinned one is released beyond that. The programs
 * themselves come from the kernel engine's ct__kernel_build_owned() (its options and disk
 * cache, keyed by the text; not its permanent tables). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "fusion/fusion.h"
#include "kernel/engine.h"

static struct {
  pthread_mutex_t lock;
  pthread_cond_t built;
  struct ct__fk **v;
  int n, cap;
  unsigned long clock;
  unsigned gen; /* ct_shutdown() generation the entries belong to */
} L = {.lock = PTHREAD_MUTEX_INITIALIZER, .built = PTHREAD_COND_INITIALIZER};

static uint64_t ct__sig_hash(const int64_t *sig, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) h = (h ^ (uint64_t)sig[i]) * 1099511628211ull;
  return h;
}

static void ct__fk_free(struct ct__fk *e) {
  /* Kernels of a shut-down generation went with their context: only host memory is freed. */
  if (e->k && L.gen == ct__device_generation()) ct__kernel_free_owned(e->k);
  free(e->sig);
  free(e);
}

/* Under L.lock. */
static void ct__lru_clear(void) {
  int keep = 0;
  for (int i = 0; i < L.n; i++) {
    struct ct__fk *e = L.v[i];
    if (e->users) L.v[keep++] = e; /* pinned or being built: its holder releases it */
    else ct__fk_free(e);
  }
  L.n = keep;
}

/* Under L.lock: the entry of sig on d, or NULL. */
static struct ct__fk *ct__lru_entry(ct_device *d, const int64_t *sig, int nsig, uint64_t h) {
  if (L.gen != ct__device_generation()) {
    ct__lru_clear();
    L.gen = ct__device_generation();
  }
  for (int i = 0; i < L.n; i++) {
    struct ct__fk *e = L.v[i];
    if (e->dev == d && e->hash == h && e->nsig == nsig && memcmp(e->sig, sig, (size_t)nsig * sizeof *sig) == 0)
      return e;
  }
  return NULL;
}

/* The built kernel of signature sig on d, pinned (ct__lru_unpin), or NULL when it is not built
 * (or being built): never waits. */
struct ct__fk *ct__lru_pin(ct_device *d, const int64_t *sig, int nsig) {
  pthread_mutex_lock(&L.lock);
  struct ct__fk *e = ct__lru_entry(d, sig, nsig, ct__sig_hash(sig, nsig));
  if (e && e->k) {
    e->users++;
    e->used = ++L.clock;
  } else {
    e = NULL;
  }
  pthread_mutex_unlock(&L.lock);
  return e;
}

void ct__lru_unpin(struct ct__fk *e) {
  if (!e) return;
  pthread_mutex_lock(&L.lock);
  e->users--;
  pthread_mutex_unlock(&L.lock);
}

/* Under L.lock: room for one more entry, releasing the least recently used unpinned one when
 * the table holds CT__FUSE_LRU (it grows past that only while every entry is pinned). */
static bool ct__lru_room(void) {
  if (L.n >= CT__FUSE_LRU) {
    int victim = -1;
    for (int i = 0; i < L.n; i++)
      if (!L.v[i]->users && (victim < 0 || L.v[i]->used < L.v[victim]->used)) victim = i;
    if (victim >= 0) {
      ct__fk_free(L.v[victim]); /* enqueued launches keep their kernel alive (OpenCL) */
      L.v[victim] = L.v[--L.n];
    }
  }
  if (L.n < L.cap) return true;
  int cap = L.cap ? 2 * L.cap : 64;
  struct ct__fk **v = realloc(L.v, (size_t)cap * sizeof *v);
  if (!v) return false;
  L.v = v;
  L.cap = cap;
  return true;
}

/* The kernel `name` of src (signature sig) on d, pinned: found, or built here (outside every
 * lock), or waited for while another thread builds it. Called with no graph lock held. */
ct_status ct__lru_acquire(struct ct__fk **out, ct_device *d, const int64_t *sig, int nsig, const char *src,
                                 const char *name, const char *opts) {
  *out = NULL;
  uint64_t h = ct__sig_hash(sig, nsig);
  pthread_mutex_lock(&L.lock);
  struct ct__fk *e;
  while ((e = ct__lru_entry(d, sig, nsig, h)) && e->building) pthread_cond_wait(&L.built, &L.lock);
  if (e) {
    e->users++;
    e->used = ++L.clock;
    pthread_mutex_unlock(&L.lock);
    *out = e;
    return CT_OK;
  }
  e = calloc(1, sizeof *e);
  int64_t *copy = malloc((size_t)nsig * sizeof *copy);
  if (!e || !copy || !ct__lru_room()) {
    pthread_mutex_unlock(&L.lock);
    free(e);
    free(copy);
    return ct__error(CT_ERR_OUT_OF_MEMORY, "fusion: out of host memory");
  }
  memcpy(copy, sig, (size_t)nsig * sizeof *copy);
  *e = (struct ct__fk){.dev = d, .hash = h, .sig = copy, .nsig = nsig, .building = true, .users = 1};
  L.v[L.n++] = e;
  pthread_mutex_unlock(&L.lock);

  ct__kernel *k = NULL;
  ct_status st;
  if (atomic_load(&ct__fusion_fail_builds) > 0) {
    atomic_fetch_sub(&ct__fusion_fail_builds, 1);
    st = ct__error(CT_ERR_KERNEL_BUILD, "kernel engine: building %s on %s failed (injected by a test)", name, d->spec);
  } else {
    st = ct__kernel_build_owned(&k, d, src, name, opts);
  }
  if (st == CT_OK) {
    atomic_fetch_add(&ct__fstats.builds, 1);
    if (ct__fusion_debug()) fprintf(stderr, "cltensor fusion: built %s on %s:\n%s\n", name, d->spec, src);
  }

  pthread_mutex_lock(&L.lock);
  e->building = false;
  if (st == CT_OK) {
    e->k = k;
    e->used = ++L.clock;
    *out = e;
  } else {
    /* Gone again: a thread waiting for it builds it itself and reports its own failure. */
    for (int i = 0; i < L.n; i++)
      if (L.v[i] == e) L.v[i] = L.v[--L.n];
    ct__fk_free(e);
  }
  pthread_cond_broadcast(&L.built);
  pthread_mutex_unlock(&L.lock);
  return st;
}

void ct__lru_drop(void) {
  pthread_mutex_lock(&L.lock);
  ct__lru_clear();
  L.gen = ct__device_generation() + 1; /* ct_shutdown() bumps it after this */
  pthread_mutex_unlock(&L.lock);
}
