/* The host attention: on a device whose GEMMs take the host route (PoCL's CPU device), the
 * whole of an unmasked (or causal) attention runs as one native command, its batch entries in
 * parts shared with the device's team (host_native.c): for each batch entry, P = softmax(scale q k^T) by CBLAS and a vectorized softmax, then
 * o = P v by CBLAS. One command instead of the scores' product, the softmax kernel, the
 * product with v and the result's copy; the causal rows exponentiate only their i + 1 keys.
 * The probabilities land in the same [batch..., L, S] tensor the kernel route fills, so the
 * backward is the same. attention.c decides when this runs; docs/OPS.md, "Attention". */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "linalg/linalg.h"
#include "nn/nn.h"
#include "tensor/tensor.h"

#if CT_HAVE_HOST_BLAS
#include <cblas.h>

/* What the forward and backward commands share: the batch geometry and how it is cut. */
struct ct__sdpa_geom {
  ct_dtype dt;                       /* CT_F32 or CT_F64 */
  int nb;                            /* batch dims */
  int64_t bshape[CT_MAX_DIMS];
  int64_t count;                     /* batch entries (row-major order) */
  int64_t nparts;                    /* shared with the team's helper, count / nparts entries each */
  struct ct__team *team;
  uint64_t seq;
  int64_t L, S, E, Ev;
  double scale;
};

/* The forward command's arguments: for q, k^T, v, P and o their element offsets from the start of
 * their buffers, BLAS layouts and batch strides. */
struct ct__sdpa_host {
  struct ct__sdpa_geom g;
  bool causal;
  struct ct__gemm_mat m[5];          /* q, kt, v, p, o */
  int which[5];                      /* the command's buffer of each */
};
enum { CT__F_Q, CT__F_KT, CT__F_V, CT__F_P, CT__F_O };

/* The row softmax at three vector widths (attention_softmax_tmpl.c). */
#pragma GCC diagnostic ignored "-Wpsabi"

/* A permutation of v's lanes (T: the vector of int indices): GCC's and Clang's builtins (the
 * fuzzing build uses Clang). */
#if defined(__clang__)
#define CT__SHUF(T, v, ...) __builtin_shufflevector(v, v, __VA_ARGS__)
#else
#define CT__SHUF(T, v, ...) __builtin_shuffle(v, (T){__VA_ARGS__})
#endif
#define CT__X4(s) 0 ^ (s), 1 ^ (s), 2 ^ (s), 3 ^ (s)
#define CT__X8(s) CT__X4(s), 4 ^ (s), 5 ^ (s), 6 ^ (s), 7 ^ (s)
#define CT__X16(s) CT__X8(s), 8 ^ (s), 9 ^ (s), 10 ^ (s), 11 ^ (s), 12 ^ (s), 13 ^ (s), 14 ^ (s), 15 ^ (s)

#define CT__VL 16
#define CT__N(name) name##16
#include "nn/attention_softmax_tmpl.c"
#undef CT__N
#undef CT__VL
#define CT__VL 8
#define CT__N(name) name##8
#include "nn/attention_softmax_tmpl.c"
#undef CT__N
#undef CT__VL
#define CT__VL 4
#define CT__N(name) name##4
#include "nn/attention_softmax_tmpl.c"
#undef CT__N
#undef CT__VL

/* The width for the CPU that runs it: AVX-512's 16 lanes, AVX2's 8, else 4 (x86-64's baseline
 * SSE2, or another architecture's 128-bit vectors). Chosen per call by __builtin_cpu_supports, not
 * by target_clones: an ifunc resolver runs while the dynamic linker relocates, before
 * ThreadSanitizer's runtime is up, and crashed every program linking the library under TSan.
 * 16 lanes on AVX-512 rather than 8: 64-key causal rows were 2.3x faster there, the fixed costs
 * per row (reductions, tails) being most of the time. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static void ct__softmax_rows_avx512(float *P, int64_t L, int64_t S, bool causal) {
  ct__softmax_rows_body16(P, L, S, causal);
}
__attribute__((target("avx2"))) static void ct__softmax_rows_avx2(float *P, int64_t L, int64_t S, bool causal) {
  ct__softmax_rows_body8(P, L, S, causal);
}
#endif

int ct__sdpa_host_lanes = 0;

static void ct__softmax_rows_f32(float *P, int64_t L, int64_t S, bool causal) {
#if defined(__x86_64__) && defined(__GNUC__)
  int want = ct__sdpa_host_lanes;
  if ((want == 0 || want >= 16) && __builtin_cpu_supports("avx512f")) {
    ct__softmax_rows_avx512(P, L, S, causal);
    return;
  }
  if ((want == 0 || want >= 8) && __builtin_cpu_supports("avx2")) {
    ct__softmax_rows_avx2(P, L, S, causal);
    return;
  }
#endif
  ct__softmax_rows_body4(P, L, S, causal);
}

static void ct__softmax_rows_f64(double *P, int64_t L, int64_t S, bool causal) {
  for (int64_t i = 0; i < L; i++) {
    double *row = P + i * S;
    int64_t n = causal ? (i + 1 < S ? i + 1 : S) : S;
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++) m = row[j] > m ? row[j] : m;
    if (m == -INFINITY) {
      memset(row, 0, sizeof(double) * (size_t)S);
      continue;
    }
    for (int64_t j = 0; j < n; j++) {
      row[j] = exp(row[j] - m);
      sum += row[j];
    }
    for (int64_t j = 0; j < n; j++) row[j] /= sum;
    for (int64_t j = n; j < S; j++) row[j] = 0;
  }
}

/* C [m, n] = alpha op(A) op(B) through CBLAS (row-major; ta, tb: transposed). */
static void ct__gemm(ct_dtype dt, bool ta, const char *pa, int64_t lda, bool tb, const char *pb, int64_t ldb,
                     int64_t m, int64_t n, int64_t k, double alpha, char *pc, int64_t ldc) {
  enum CBLAS_TRANSPOSE a = ta ? CblasTrans : CblasNoTrans, b = tb ? CblasTrans : CblasNoTrans;
  if (dt == CT_F64)
    cblas_dgemm(CblasRowMajor, a, b, (int)m, (int)n, (int)k, alpha, (const double *)pa, (int)lda, (const double *)pb,
                (int)ldb, 0.0, (double *)pc, (int)ldc);
  else if (!ct__sgemm_small(ta, (const float *)pa, lda, tb, (const float *)pb, ldb, m, n, k, (float)alpha,
                            (float *)pc, ldc))
    cblas_sgemm(CblasRowMajor, a, b, (int)m, (int)n, (int)k, (float)alpha, (const float *)pa, (int)lda,
                (const float *)pb, (int)ldb, 0.0f, (float *)pc, (int)ldc);
}

/* x[j]: the host pointer of matrix j (of nmat, in buffer which[j] of base) for batch entry e. */
static void ct__entry_ptrs(char **x, const struct ct__sdpa_geom *g, const struct ct__gemm_mat *m, const int *which,
                           int nmat, char *const *base, int64_t e) {
  int64_t es = (int64_t)ct_dtype_size(g->dt), off[9] = {0};
  for (int i = g->nb - 1; i >= 0; i--) {
    int64_t idx = e % g->bshape[i];
    e /= g->bshape[i];
    for (int j = 0; j < nmat; j++) off[j] += idx * m[j].bstride[i];
  }
  for (int j = 0; j < nmat; j++) x[j] = base[which[j]] + (m[j].off + off[j]) * es;
}

/* One batch entry of a command (the forward's or the backward's; args, its arguments), its
 * matrices at x. */
typedef void (*ct__entry_fn)(const void *args, char **x);

/* A command's batch entries, cut into g->nparts runs that the command shares with its team
 * (host_native.c). */
struct ct__entries_run {
  const struct ct__sdpa_geom *g;
  const struct ct__gemm_mat *m; /* nmat matrices, matrix j in buffer which[j] of base */
  const int *which;
  int nmat;
  ct__entry_fn entry;
  const void *args;
  char *const *base;
};

/* Run i of r: its entries' matrices located, each entry computed. The small GEMMs of the whole
 * run go on this thread (ct__host_blas_small_begin). */
static void ct__entries_part(void *ctx, int64_t i) {
  const struct ct__entries_run *r = ctx;
  const struct ct__sdpa_geom *g = r->g;
  int64_t n = g->count, per = (n + g->nparts - 1) / g->nparts, lo = i * per, hi = lo + per < n ? lo + per : n;
  if (lo >= hi) return;
  bool one = ct__host_blas_small_begin(g->L * g->S * (g->E > g->Ev ? g->E : g->Ev));
  for (int64_t e = lo; e < hi; e++) {
    char *x[9];
    ct__entry_ptrs(x, g, r->m, r->which, r->nmat, r->base, e);
    r->entry(r->args, x);
  }
  ct__host_blas_small_end(one);
}

static void ct__entries_team(const struct ct__sdpa_geom *g, const struct ct__gemm_mat *m, const int *which, int nmat,
                             ct__entry_fn entry, const void *args, char *const *base) {
  struct ct__entries_run r = {g, m, which, nmat, entry, args, base};
  ct__team_run(g->team, g->seq, ct__entries_part, &r, g->nparts);
}

/* One batch entry of the forward, its matrices at x. */
static void ct__sdpa_host_entry(const void *args, char **x) {
  const struct ct__sdpa_host *h = args;
  const struct ct__sdpa_geom *g = &h->g;
  const struct ct__gemm_mat *m = h->m;
  ct__gemm(g->dt, m[CT__F_Q].trans, x[CT__F_Q], m[CT__F_Q].ld, m[CT__F_KT].trans, x[CT__F_KT], m[CT__F_KT].ld, g->L,
           g->S, g->E, g->scale, x[CT__F_P], g->S);
  if (g->dt == CT_F64) ct__softmax_rows_f64((double *)x[CT__F_P], g->L, g->S, h->causal);
  else ct__softmax_rows_f32((float *)x[CT__F_P], g->L, g->S, h->causal);
  ct__gemm(g->dt, false, x[CT__F_P], g->S, m[CT__F_V].trans, x[CT__F_V], m[CT__F_V].ld, g->L, g->Ev, g->S, 1.0,
           x[CT__F_O], m[CT__F_O].ld);
}

static void ct__sdpa_host_run(void *args, char *const *base) {
  const struct ct__sdpa_host *h = args;
  ct__entries_team(&h->g, h->m, h->which, 5, ct__sdpa_host_entry, h, base);
}

/* ---- The backward ----
 * Per batch entry, from the probabilities P and the output's gradient G:
 *   dV = P^T G;  dP = G V^T;  dS = P (dP - rowsum(P dP));  dQ = scale dS K;  dK = scale dS^T Q
 * (attention.c's ct__sdpa_backward by kernels and ct_matmul, here as one native command). */
struct ct__sdpa_bwd {
  struct ct__sdpa_geom g;
  struct ct__gemm_mat m[9];          /* q [L,E], k [S,E], v [S,Ev], g [L,Ev], p, ds [L,S], dq, dk, dv */
  int which[9];
};
enum { CT__B_Q, CT__B_K, CT__B_V, CT__B_G, CT__B_P, CT__B_DS, CT__B_DQ, CT__B_DK, CT__B_DV };

/* dS = P (dP - rowsum(P dP)) in place of dP, rows of S (both [L, S], ld S). */
static void ct__softmax_bwd_rows(ct_dtype dt, const char *pp, char *pds, int64_t L, int64_t S) {
  for (int64_t i = 0; i < L; i++) {
    if (dt == CT_F64) {
      const double *p = (const double *)pp + i * S;
      double *d = (double *)pds + i * S, dot = 0;
      for (int64_t j = 0; j < S; j++) dot += p[j] * d[j];
      for (int64_t j = 0; j < S; j++) d[j] = p[j] * (d[j] - dot);
    } else {
      const float *p = (const float *)pp + i * S;
      float *d = (float *)pds + i * S, dot = 0;
      for (int64_t j = 0; j < S; j++) dot += p[j] * d[j];
      for (int64_t j = 0; j < S; j++) d[j] = p[j] * (d[j] - dot);
    }
  }
}

/* One batch entry of the backward, its matrices at x. */
static void ct__sdpa_bwd_entry(const void *args, char **x) {
  const struct ct__sdpa_bwd *h = args;
  const struct ct__sdpa_geom *g = &h->g;
  const struct ct__gemm_mat *m = h->m;
  /* dV = P^T G */
  ct__gemm(g->dt, true, x[CT__B_P], g->S, m[CT__B_G].trans, x[CT__B_G], m[CT__B_G].ld, g->S, g->Ev, g->L, 1.0,
           x[CT__B_DV], m[CT__B_DV].ld);
  /* dP = G V^T, then dS in place */
  ct__gemm(g->dt, m[CT__B_G].trans, x[CT__B_G], m[CT__B_G].ld, !m[CT__B_V].trans, x[CT__B_V], m[CT__B_V].ld, g->L,
           g->S, g->Ev, 1.0, x[CT__B_DS], g->S);
  ct__softmax_bwd_rows(g->dt, x[CT__B_P], x[CT__B_DS], g->L, g->S);
  /* dQ = scale dS K;  dK = scale dS^T Q */
  ct__gemm(g->dt, false, x[CT__B_DS], g->S, m[CT__B_K].trans, x[CT__B_K], m[CT__B_K].ld, g->L, g->E, g->S,
           g->scale, x[CT__B_DQ], m[CT__B_DQ].ld);
  ct__gemm(g->dt, true, x[CT__B_DS], g->S, m[CT__B_Q].trans, x[CT__B_Q], m[CT__B_Q].ld, g->S, g->E, g->L,
           g->scale, x[CT__B_DK], m[CT__B_DK].ld);
}

static void ct__sdpa_bwd_run(void *args, char *const *base) {
  const struct ct__sdpa_bwd *h = args;
  ct__entries_team(&h->g, h->m, h->which, 9, ct__sdpa_bwd_entry, h, base);
}

/* ---- Enqueueing both ---- */

/* Batches of at least this many multiply-adds (both products) are cut into parts (up to 8 runs of
 * batch entries) that the command shares with its team's helper (host_native.c). */
int64_t ct__sdpa_split_min = (int64_t)1 << 20;

/* *ok: d runs native kernels, its GEMMs take the host route and dt is f32 or f64; then *g holds
 * the geometry, if the sizes suit CBLAS (int sizes; empty products are the kernels'). */
static ct_status ct__geom_start(bool *ok, struct ct__sdpa_geom *g, ct_device *d, ct_dtype dt, int nb,
                                const int64_t *bshape, int64_t L, int64_t S, int64_t E, int64_t Ev, double scale) {
  *ok = false;
  if (!d->native_kernels || !ct__gemm_host_available() || (dt != CT_F32 && dt != CT_F64)) return CT_OK;
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  if (s->route != CT__ROUTE_HOST || s->route_status != CT_OK) return CT_OK;
  *g = (struct ct__sdpa_geom){.dt = dt, .nb = nb, .count = 1, .L = L, .S = S, .E = E, .Ev = Ev, .scale = scale};
  memcpy(g->bshape, bshape, sizeof(int64_t) * (size_t)nb);
  for (int i = 0; i < nb; i++) g->count *= bshape[i];
  *ok = g->count > 0 && L > 0 && S > 0 && E > 0 && Ev > 0 && L <= INT32_MAX && S <= INT32_MAX && E <= INT32_MAX &&
        Ev <= INT32_MAX;
  return CT_OK;
}

/* m's layout from a tensor this file made ([batch..., R, C], unit column stride). */
static void ct__mat_of_made(struct ct__gemm_mat *m, const ct_tensor *t, int nb) {
  memset(m, 0, sizeof *m);
  m->mem = ct__tensor_mem(t);
  ct__tensor_elem_offset(t, &m->off);
  m->ld = t->strides[nb];
  for (int i = 0; i < nb; i++) m->bstride[i] = t->strides[i];
}

/* A new [batch..., R, C] tensor; with two or more batch dims over memory laid out
 * [..., R, batch[nb-1], C] (PyTorch's CPU flash attention's layout: the usual transpose(-3, -2)
 * and reshape to [..., R, H C] are then views). */
static ct_status ct__heads_tensor(ct_tensor **out, ct_device *d, const struct ct__sdpa_geom *g, int64_t R, int64_t C,
                                  const char *fn) {
  int nb = g->nb;
  int64_t ms[CT_MAX_DIMS];
  memcpy(ms, g->bshape, sizeof(int64_t) * (size_t)nb);
  ms[nb] = R;
  ms[nb + 1] = C;
  if (nb >= 2) {
    ms[nb - 1] = R;
    ms[nb] = g->bshape[nb - 1];
  }
  ct_tensor *m = NULL;
  CT__TRY(ct__tensor_new(&m, d, g->dt, nb + 2, ms, fn));
  if (nb < 2) {
    *out = m;
    return CT_OK;
  }
  ct_status st = ct_transpose(out, m, nb - 1, nb);
  ct_release(m);
  return st;
}

/* Enqueues run(args) on d's queue over the nmat matrices m (sub-buffers replaced by their
 * parents, which[] filled), cut into parts for the team when work (multiply-adds) is large
 * enough. *done false when a matrix can't be addressed (nothing enqueued). */
static ct_status ct__sdpa_enqueue(bool *done, ct_device *d, struct ct__sdpa_geom *g, ct__native_fn run,
                                  void *args, size_t size, struct ct__gemm_mat *m, int *which, int nmat,
                                  int64_t work, const char *prof, const char *fn) {
  *done = false;
  size_t es = ct_dtype_size(g->dt);
  cl_mem bufs[9];
  int nbuf = 0;
  for (int i = 0; i < nmat; i++) {
    if (!ct__native_unwrap(&m[i].mem, &m[i].off, es)) return CT_OK;
    which[i] = ct__native_buf(bufs, &nbuf, m[i].mem);
  }
  if (nbuf > CT__NATIVE_MAX_BUFS) return CT_OK;
  g->nparts = work >= ct__sdpa_split_min ? (g->count < 8 ? g->count : 8) : 1;
  if (g->nparts > 1) CT__TRY(ct__team_call(&g->team, &g->seq, d, fn));
  ct_status st = ct__native_enqueue(d, ct__device_queue(d), run, args, size, nbuf, bufs, 0, NULL, NULL, prof, fn);
  if (st != CT_OK) ct__team_cancel(g->team, g->seq);
  *done = st == CT_OK;
  return st;
}

ct_status ct__sdpa_host(bool *done, ct_tensor **p_out, ct_tensor **o_out, const ct_tensor *q, const ct_tensor *k,
                        const ct_tensor *v, int nb, const int64_t *bshape, bool causal, double scale,
                        const char *fn) {
  *done = false;
  ct_device *d = q->storage->device;
  struct ct__sdpa_host h;
  memset(&h, 0, sizeof h);
  bool ok;
  CT__TRY(ct__geom_start(&ok, &h.g, d, q->dtype, nb, bshape, q->shape[q->ndim - 2], k->shape[k->ndim - 2],
                         q->shape[q->ndim - 1], v->shape[v->ndim - 1], scale));
  if (!ok) return CT_OK;
  const struct ct__sdpa_geom *g = &h.g;
  h.causal = causal;
  ct_tensor *kt = NULL;
  CT__TRY(ct_transpose(&kt, k, -2, -1));
  ok = ct__gemm_mat_of(&h.m[CT__F_Q], q, true, nb, bshape, g->L, g->E) &&
       ct__gemm_mat_of(&h.m[CT__F_KT], kt, false, nb, bshape, g->E, g->S) &&
       ct__gemm_mat_of(&h.m[CT__F_V], v, false, nb, bshape, g->S, g->Ev);
  ct_release(kt);
  for (int i = 0; i < 3 && ok; i++) ok = h.m[i].ld <= INT32_MAX;
  if (!ok) return CT_OK;
  /* P: [batch..., L, S] contiguous, as the backward reads it; o in the heads' layout. */
  int64_t pshape[CT_MAX_DIMS];
  memcpy(pshape, bshape, sizeof(int64_t) * (size_t)nb);
  pshape[nb] = g->L;
  pshape[nb + 1] = g->S;
  ct_tensor *P = NULL, *o = NULL;
  ct_status st = ct__tensor_new(&P, d, g->dt, nb + 2, pshape, fn);
  if (st == CT_OK) st = ct__heads_tensor(&o, d, g, g->L, g->Ev, fn);
  if (st == CT_OK) {
    ct__mat_of_made(&h.m[CT__F_P], P, nb);
    ct__mat_of_made(&h.m[CT__F_O], o, nb);
    st = ct__sdpa_enqueue(done, d, &h.g, ct__sdpa_host_run, &h, sizeof h, h.m, h.which, 5,
                          g->count * g->L * g->S * (g->E + g->Ev), g->dt == CT_F64 ? "sdpa (host, f64)" : "sdpa (host)",
                          fn);
  }
  if (st == CT_OK && *done) {
    *p_out = P;
    *o_out = o;
    return CT_OK;
  }
  ct_release(P);
  ct_release(o);
  return st;
}

static bool ct__same_batch(const ct_tensor *t, int nb, const int64_t *bshape) {
  if (t->ndim != nb + 2) return false;
  for (int i = 0; i < nb; i++)
    if (t->shape[i] != bshape[i]) return false;
  return true;
}

ct_status ct__sdpa_host_backward(bool *done, ct_tensor **dq, ct_tensor **dk, ct_tensor **dv, const ct_tensor *q,
                                 const ct_tensor *k, const ct_tensor *v, const ct_tensor *p, const ct_tensor *g,
                                 double scale, const char *fn) {
  *done = false;
  ct_device *d = p->storage->device;
  ct_dtype dt = p->dtype;
  int nb = p->ndim - 2;
  if (!dq || !dk || !dv || !ct_tensor_is_contiguous(p)) return CT_OK;
  const ct_tensor *ops[4] = {q, k, v, g};
  for (int i = 0; i < 4; i++)
    if (ops[i]->dtype != dt || !ct__same_batch(ops[i], nb, p->shape)) return CT_OK;
  struct ct__sdpa_bwd h;
  memset(&h, 0, sizeof h);
  bool ok;
  CT__TRY(ct__geom_start(&ok, &h.g, d, dt, nb, p->shape, p->shape[nb], p->shape[nb + 1], q->shape[nb + 1],
                         v->shape[nb + 1], scale));
  if (!ok) return CT_OK;
  const struct ct__sdpa_geom *ge = &h.g;
  int64_t rows[4] = {ge->L, ge->S, ge->S, ge->L}, cols[4] = {ge->E, ge->E, ge->Ev, ge->Ev};
  for (int i = 0; i < 4; i++)
    if (!ct__gemm_mat_of(&h.m[i], ops[i], false, nb, ge->bshape, rows[i], cols[i]) || h.m[i].ld > INT32_MAX)
      return CT_OK;
  ct_tensor *ds = NULL, *gq = NULL, *gk = NULL, *gv = NULL;
  ct_status st = ct__tensor_new(&ds, d, dt, p->ndim, p->shape, fn);
  if (st == CT_OK) st = ct__heads_tensor(&gq, d, ge, ge->L, ge->E, fn);
  if (st == CT_OK) st = ct__heads_tensor(&gk, d, ge, ge->S, ge->E, fn);
  if (st == CT_OK) st = ct__heads_tensor(&gv, d, ge, ge->S, ge->Ev, fn);
  if (st == CT_OK) {
    const ct_tensor *made[5] = {p, ds, gq, gk, gv};
    for (int i = 0; i < 5; i++) ct__mat_of_made(&h.m[CT__B_P + i], made[i], nb);
    st = ct__sdpa_enqueue(done, d, &h.g, ct__sdpa_bwd_run, &h, sizeof h, h.m, h.which, 9,
                          ge->count * ge->L * ge->S * (2 * ge->E + 2 * ge->Ev),
                          dt == CT_F64 ? "sdpa backward (host, f64)" : "sdpa backward (host)", fn);
  }
  ct_release(ds);
  if (st == CT_OK && *done) {
    *dq = gq;
    *dk = gk;
    *dv = gv;
    return CT_OK;
  }
  ct_release(gq);
  ct_release(gk);
  ct_release(gv);
  return st;
}

#else

int64_t ct__sdpa_split_min = (int64_t)1 << 20;

ct_status ct__sdpa_host_backward(bool *done, ct_tensor **dq, ct_tensor **dk, ct_tensor **dv, const ct_tensor *q,
                                 const ct_tensor *k, const ct_tensor *v, const ct_tensor *p, const ct_tensor *g,
                                 double scale, const char *fn) {
  (void)dq, (void)dk, (void)dv, (void)q, (void)k, (void)v, (void)p, (void)g, (void)scale, (void)fn;
  *done = false;
  return CT_OK;
}

ct_status ct__sdpa_host(bool *done, ct_tensor **p_out, ct_tensor **o_out, const ct_tensor *q, const ct_tensor *k,
                        const ct_tensor *v, int nb, const int64_t *bshape, bool causal, double scale,
                        const char *fn) {
  (void)p_out, (void)o_out, (void)q, (void)k, (void)v, (void)nb, (void)bshape, (void)causal, (void)scale, (void)fn;
  *done = false;
  return CT_OK;
}

#endif
