/* The host attention: on a device whose GEMMs take the host route (PoCL's CPU device), the
 * whole of an unmasked (or causal) attention runs as one native command per half of the batch:
 * for each batch entry, P = softmax(scale q k^T) by CBLAS and a vectorized softmax, then
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

/* The command's arguments: the batch geometry, and for q, k^T, v, P and o their element offsets
 * from the start of their buffers, BLAS layouts and batch strides. */
struct ct__sdpa_host {
  ct_dtype dt;                       /* CT_F32 or CT_F64 */
  int nb;                            /* batch dims */
  int64_t bshape[CT_MAX_DIMS];
  int64_t count;                     /* batch entries (row-major order) */
  int64_t nparts;                    /* shared with the team's helper, count / nparts entries each */
  struct ct__team *team;
  uint64_t seq;
  int64_t L, S, E, Ev;
  double scale;
  bool causal;
  struct ct__gemm_mat q, kt, v, p, o;
  int which[5];                      /* the command's buffer of q, kt, v, p, o */
};

/* 16-lane helpers, always inlined into the softmax below (so their vector arguments never cross a
 * call: -Wpsabi's ABI note does not apply). 16 lanes: one AVX-512 register; the AVX2 and
 * baseline builds of it split them. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float ct__vf __attribute__((vector_size(64)));
typedef int ct__vi __attribute__((vector_size(64)));
#define CT__VL 16

/* A permutation of v's lanes: GCC's and Clang's builtins (the fuzzing build uses Clang). */
#if defined(__clang__)
#define CT__SHUF(v, ...) __builtin_shufflevector(v, v, __VA_ARGS__)
#else
#define CT__SHUF(v, ...) __builtin_shuffle(v, (ct__vi){__VA_ARGS__})
#endif

static inline __attribute__((always_inline)) ct__vf ct__vsel(ct__vi m, ct__vf a, ct__vf b) {
  return (ct__vf)((m & (ct__vi)a) | (~m & (ct__vi)b));
}

/* max(a, b), NaN lanes of b ignored: a NaN score turns its row to NaN through the exponentials'
 * sum instead (and the all-NaN row is handled where the maximum comes out -inf). A NaN-keeping
 * select here made GCC scalarize the AVX-512 clone's masks: the softmax took 2.5x as long. */
static inline __attribute__((always_inline)) ct__vf ct__vmax(ct__vf a, ct__vf b) { return ct__vsel(b > a, b, a); }

/* Lane 0 of the result: the maximum (or sum) of v's lanes, by halving shuffles. */
static inline __attribute__((always_inline)) float ct__hmax(ct__vf v) {
  v = ct__vmax(v, CT__SHUF(v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = ct__vmax(v, CT__SHUF(v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = ct__vmax(v, CT__SHUF(v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = ct__vmax(v, CT__SHUF(v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return v[0];
}

static inline __attribute__((always_inline)) float ct__hsum(ct__vf v) {
  v += CT__SHUF(v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v += CT__SHUF(v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  v += CT__SHUF(v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  v += CT__SHUF(v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  return v[0];
}

/* exp(x) for x <= 0 (scores minus their maximum): kernels/common.cl's ct_expf (Cody-Waite
 * reduction, Cephes' polynomial) without fma, and with results below exp(-87) (1.6e-38, against
 * the row maximum's 1) flushed to 0: a subnormal product costs Intel cores a microcode assist of
 * over a hundred cycles, and the masked lanes of every causal row had one. NaN lanes stay NaN
 * (the comparison below is false for them); -inf gives 0. */
static inline __attribute__((always_inline)) ct__vf ct__vexp_neg(ct__vf x) {
  ct__vi lo = x < -87.0f;
  ct__vf xc = ct__vsel(lo, (ct__vf){0} - 87.0f, x);
  ct__vf t = xc * 1.44269504088896341f + 12582912.0f;
  ct__vf k = t - 12582912.0f;
  ct__vf r = xc - k * 0.693145751953125f;
  r = r - k * 1.428606765330187045e-06f;
  ct__vf p = (ct__vf){0} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  /* k in [-126, 0], and r > 0 where k = -126: the product is a normal number. */
  ct__vi ki = (ct__vi)t - 0x4B400000;
  ct__vf y = p * (ct__vf)((ki + 127) << 23);
  return (ct__vf)(~lo & (ct__vi)y);
}

static inline __attribute__((always_inline)) ct__vf ct__vload(const float *p) {
  ct__vf v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline __attribute__((always_inline)) void ct__vstore(float *p, ct__vf v) { memcpy(p, &v, sizeof v); }

/* Softmax of each of the L rows of P (S apart) in place, over its first n_i keys (i + 1 with
 * causal, else S; the rest set to 0), as kernels/attention.cl's sdpa_softmax: a row whose
 * maximum is -inf becomes zeros. The scale is already in P (the product's alpha). The keys are
 * taken 16 at a time, the last step masked (keys past n_i read as -inf, written back as 0)
 * where it stays inside the row; the horizontal maximum and sum are shuffles. Per row, the
 * fixed costs were most of the time with scalar reductions and tails (64-key causal rows: 2.3x
 * faster on 16 lanes than on 8 with those). Compiled three times below, for AVX-512, AVX2 and
 * the baseline. */
static inline __attribute__((always_inline)) void ct__softmax_rows_body(float *P, int64_t L, int64_t S, bool causal) {
  const ct__vf lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const ct__vf ninf = (ct__vf){0} - INFINITY;
  for (int64_t i = 0; i < L; i++) {
    float *row = P + i * S;
    int64_t n = causal ? (i + 1 < S ? i + 1 : S) : S;
    int64_t up = (n + CT__VL - 1) / CT__VL * CT__VL, nw = up <= S ? up : n / CT__VL * CT__VL;
    ct__vf nf = (ct__vf){0} + (float)n, m16 = ninf;
    for (int64_t j = 0; j < nw; j += CT__VL) {
      ct__vf s = ct__vsel((lane + (float)j) < nf, ct__vload(row + j), ninf);
      ct__vstore(row + j, s);
      m16 = ct__vmax(m16, s);
    }
    float m = ct__hmax(m16);
    for (int64_t j = nw; j < n; j++) m = row[j] > m ? row[j] : m;
    if (m == -INFINITY) {
      /* Every key masked (zeros) or NaN (a row of NaN, as PyTorch's). */
      bool nan = false;
      for (int64_t j = 0; j < n; j++) nan |= row[j] != row[j];
      for (int64_t j = 0; j < S; j++) row[j] = nan && j < n ? NAN : 0.0f;
      continue;
    }
    ct__vf mv = (ct__vf){0} + m, sum16 = {0};
    for (int64_t j = 0; j < nw; j += CT__VL) {
      ct__vf e = ct__vexp_neg(ct__vload(row + j) - mv);
      ct__vstore(row + j, e);
      sum16 += e;
    }
    float sum = ct__hsum(sum16);
    for (int64_t j = nw; j < n; j++) {
      float e = ct__vexp_neg((ct__vf){0} + (row[j] - m))[0];
      row[j] = e;
      sum += e;
    }
    ct__vf inv = (ct__vf){0} + 1.0f / sum;
    for (int64_t j = 0; j < nw; j += CT__VL) ct__vstore(row + j, ct__vload(row + j) * inv);
    for (int64_t j = nw; j < n; j++) row[j] *= inv[0];
    for (int64_t j = nw > n ? nw : n; j < S; j++) row[j] = 0;
  }
}

/* The body above for the CPU that runs it: the library's baseline (x86-64) has 4-lane vectors
 * only. Chosen per call by __builtin_cpu_supports, not by target_clones: an ifunc resolver runs
 * while the dynamic linker relocates, before ThreadSanitizer's runtime is up, and crashed every
 * program linking the library under TSan. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static void ct__softmax_rows_avx512(float *P, int64_t L, int64_t S, bool causal) {
  ct__softmax_rows_body(P, L, S, causal);
}
__attribute__((target("avx2"))) static void ct__softmax_rows_avx2(float *P, int64_t L, int64_t S, bool causal) {
  ct__softmax_rows_body(P, L, S, causal);
}
#endif

static void ct__softmax_rows_f32(float *P, int64_t L, int64_t S, bool causal) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) {
    ct__softmax_rows_avx512(P, L, S, causal);
    return;
  }
  if (__builtin_cpu_supports("avx2")) {
    ct__softmax_rows_avx2(P, L, S, causal);
    return;
  }
#endif
  ct__softmax_rows_body(P, L, S, causal);
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
  else
    cblas_sgemm(CblasRowMajor, a, b, (int)m, (int)n, (int)k, (float)alpha, (const float *)pa, (int)lda,
                (const float *)pb, (int)ldb, 0.0f, (float *)pc, (int)ldc);
}

/* The batch entries [first, first + count) of a forward or backward command (h), and the run
 * of a command: its entries cut into nparts runs shared with the team (host_native.c). */
typedef void (*ct__entries_fn)(const void *h, char *const *base, int64_t first, int64_t count);
struct ct__entries_run {
  ct__entries_fn fn;
  const void *h;
  char *const *base;
  int64_t count, nparts;
};

static void ct__entries_part(void *ctx, int64_t i) {
  const struct ct__entries_run *r = ctx;
  int64_t per = (r->count + r->nparts - 1) / r->nparts, lo = i * per, hi = lo + per < r->count ? lo + per : r->count;
  if (lo < hi) r->fn(r->h, r->base, lo, hi - lo);
}

static void ct__entries_team(struct ct__team *t, uint64_t seq, ct__entries_fn fn, const void *h, char *const *base,
                             int64_t count, int64_t nparts) {
  struct ct__entries_run r = {fn, h, base, count, nparts};
  ct__team_run(t, seq, ct__entries_part, &r, nparts);
}

/* Batch entries [first, first + count) of the forward h. */
static void ct__sdpa_host_entries(const void *args, char *const *base, int64_t first, int64_t count) {
  const struct ct__sdpa_host *h = args;
  int64_t es = (int64_t)ct_dtype_size(h->dt);
  const struct ct__gemm_mat *mats[5] = {&h->q, &h->kt, &h->v, &h->p, &h->o};
  char *ptr[5];
  for (int i = 0; i < 5; i++) ptr[i] = base[h->which[i]] + mats[i]->off * es;
  bool one = ct__host_blas_small_begin(h->L * h->S * (h->E > h->Ev ? h->E : h->Ev));
  for (int64_t e = first; e < first + count; e++) {
    int64_t off[5] = {0, 0, 0, 0, 0}, rest = e;
    for (int i = h->nb - 1; i >= 0; i--) {
      int64_t idx = rest % h->bshape[i];
      rest /= h->bshape[i];
      for (int j = 0; j < 5; j++) off[j] += idx * mats[j]->bstride[i];
    }
    char *pp = ptr[3] + off[3] * es;
    ct__gemm(h->dt, h->q.trans, ptr[0] + off[0] * es, h->q.ld, h->kt.trans, ptr[1] + off[1] * es, h->kt.ld, h->L,
             h->S, h->E, h->scale, pp, h->S);
    if (h->dt == CT_F64) ct__softmax_rows_f64((double *)pp, h->L, h->S, h->causal);
    else ct__softmax_rows_f32((float *)pp, h->L, h->S, h->causal);
    ct__gemm(h->dt, false, pp, h->S, h->v.trans, ptr[2] + off[2] * es, h->v.ld, h->L, h->Ev, h->S, 1.0,
             ptr[4] + off[4] * es, h->o.ld);
  }
  ct__host_blas_small_end(one);
}

static void ct__sdpa_host_run(void *args, char *const *base) {
  const struct ct__sdpa_host *h = args;
  ct__entries_team(h->team, h->seq, ct__sdpa_host_entries, h, base, h->count, h->nparts);
}

/* Batches of at least this many multiply-adds (both products) are cut into parts (up to 8 runs of
 * batch entries) that the command shares with its team's helper (host_native.c). */
int64_t ct__sdpa_split_min = (int64_t)1 << 20;

ct_status ct__sdpa_host(bool *done, ct_tensor **p_out, ct_tensor **o_out, const ct_tensor *q, const ct_tensor *k,
                        const ct_tensor *v, int nb, const int64_t *bshape, bool causal, double scale,
                        const char *fn) {
  *done = false;
  ct_device *d = q->storage->device;
  struct ct__gemm_state *s;
  if (!d->native_kernels || !ct__gemm_host_available() || (q->dtype != CT_F32 && q->dtype != CT_F64)) return CT_OK;
  CT__TRY(ct__gemm_state(&s, d));
  if (s->route != CT__ROUTE_HOST || s->route_status != CT_OK) return CT_OK;
  struct ct__sdpa_host h;
  memset(&h, 0, sizeof h);
  h.dt = q->dtype;
  h.nb = nb;
  memcpy(h.bshape, bshape, sizeof(int64_t) * (size_t)nb);
  h.L = q->shape[q->ndim - 2];
  h.E = q->shape[q->ndim - 1];
  h.S = k->shape[k->ndim - 2];
  h.Ev = v->shape[v->ndim - 1];
  h.scale = scale;
  h.causal = causal;
  int64_t count = 1;
  for (int i = 0; i < nb; i++) count *= bshape[i];
  /* CBLAS takes int sizes; empty products are the kernel route's. */
  if (count == 0 || h.L == 0 || h.S == 0 || h.E == 0 || h.Ev == 0 || h.L > INT32_MAX || h.S > INT32_MAX ||
      h.E > INT32_MAX || h.Ev > INT32_MAX)
    return CT_OK;
  ct_tensor *kt = NULL;
  CT__TRY(ct_transpose(&kt, k, -2, -1));
  bool ok = ct__gemm_mat_of(&h.q, q, true, nb, bshape, h.L, h.E) &&
            ct__gemm_mat_of(&h.kt, kt, false, nb, bshape, h.E, h.S) &&
            ct__gemm_mat_of(&h.v, v, false, nb, bshape, h.S, h.Ev);
  ct_release(kt);
  if (!ok || h.q.ld > INT32_MAX || h.kt.ld > INT32_MAX || h.v.ld > INT32_MAX) return CT_OK;

  /* P: [batch..., L, S] contiguous, as the backward reads it. o: with two or more batch dims,
   * [..., H, L, Ev] over memory laid out [..., L, H, Ev] (PyTorch's CPU flash attention's
   * layout), so that the usual transpose(-3, -2) and reshape to [..., L, H Ev] are views. */
  int64_t pshape[CT_MAX_DIMS], mshape[CT_MAX_DIMS];
  memcpy(pshape, bshape, sizeof(int64_t) * (size_t)nb);
  pshape[nb] = h.L;
  pshape[nb + 1] = h.S;
  memcpy(mshape, bshape, sizeof(int64_t) * (size_t)nb);
  mshape[nb] = h.L;
  mshape[nb + 1] = h.Ev;
  if (nb >= 2) {
    mshape[nb - 1] = h.L;
    mshape[nb] = bshape[nb - 1];
  }
  ct_tensor *P = NULL, *om = NULL, *o = NULL;
  ct_status st = ct__tensor_new(&P, d, q->dtype, nb + 2, pshape, fn);
  if (st == CT_OK) st = ct__tensor_new(&om, d, q->dtype, nb + 2, mshape, fn);
  if (st == CT_OK) {
    if (nb >= 2) st = ct_transpose(&o, om, nb - 1, nb);
    else o = ct_retain(om);
  }
  ct_release(om);
  if (st == CT_OK) {
    h.p.mem = ct__tensor_mem(P);
    ct__tensor_elem_offset(P, &h.p.off);
    h.p.ld = h.S;
    h.o.mem = ct__tensor_mem(o);
    ct__tensor_elem_offset(o, &h.o.off);
    h.o.ld = o->strides[nb];
    for (int i = 0; i < nb; i++) {
      h.p.bstride[i] = P->strides[i];
      h.o.bstride[i] = o->strides[i];
    }
    size_t es = ct_dtype_size(h.dt);
    struct ct__gemm_mat *mats[5] = {&h.q, &h.kt, &h.v, &h.p, &h.o};
    cl_mem bufs[5];
    int nbuf = 0;
    for (int i = 0; i < 5 && ok; i++) {
      ok = ct__native_unwrap(&mats[i]->mem, &mats[i]->off, es);
      if (ok) h.which[i] = ct__native_buf(bufs, &nbuf, mats[i]->mem);
    }
    if (ok) {
      const char *prof = h.dt == CT_F64 ? "sdpa (host, f64)" : "sdpa (host)";
      h.count = count;
      int64_t work = count * h.L * h.S * (h.E + h.Ev);
      h.nparts = work >= ct__sdpa_split_min ? (count < 8 ? count : 8) : 1;
      if (h.nparts > 1) st = ct__team_call(&h.team, &h.seq, d, fn);
      if (st == CT_OK) {
        st = ct__native_enqueue(d, ct__device_queue(d), ct__sdpa_host_run, &h, sizeof h, nbuf, bufs, 0, NULL, NULL,
                                prof, fn);
        if (st != CT_OK) ct__team_cancel(h.team, h.seq);
      }
      *done = st == CT_OK;
    }
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

/* ---- The backward ----
 * Per batch entry, from the probabilities P and the output's gradient G:
 *   dV = P^T G;  dP = G V^T;  dS = P (dP - rowsum(P dP));  dQ = scale dS K;  dK = scale dS^T Q
 * (attention.c's ct__sdpa_backward by kernels and ct_matmul, here as one native command). */
struct ct__sdpa_bwd {
  ct_dtype dt;
  int nb;
  int64_t bshape[CT_MAX_DIMS];
  int64_t count, nparts;
  struct ct__team *team;
  uint64_t seq;
  int64_t L, S, E, Ev;
  double scale;
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

static void ct__sdpa_bwd_entries(const void *args, char *const *base, int64_t first, int64_t count) {
  const struct ct__sdpa_bwd *h = args;
  int64_t es = (int64_t)ct_dtype_size(h->dt);
  char *ptr[9];
  for (int i = 0; i < 9; i++) ptr[i] = base[h->which[i]] + h->m[i].off * es;
  bool one = ct__host_blas_small_begin(h->L * h->S * (h->E > h->Ev ? h->E : h->Ev));
  for (int64_t e = first; e < first + count; e++) {
    char *x[9];
    int64_t off[9] = {0}, rest = e;
    for (int i = h->nb - 1; i >= 0; i--) {
      int64_t idx = rest % h->bshape[i];
      rest /= h->bshape[i];
      for (int j = 0; j < 9; j++) off[j] += idx * h->m[j].bstride[i];
    }
    for (int j = 0; j < 9; j++) x[j] = ptr[j] + off[j] * es;
    const struct ct__gemm_mat *m = h->m;
    /* dV = P^T G */
    ct__gemm(h->dt, true, x[CT__B_P], h->S, m[CT__B_G].trans, x[CT__B_G], m[CT__B_G].ld, h->S, h->Ev, h->L, 1.0,
             x[CT__B_DV], m[CT__B_DV].ld);
    /* dP = G V^T, then dS in place */
    ct__gemm(h->dt, m[CT__B_G].trans, x[CT__B_G], m[CT__B_G].ld, !m[CT__B_V].trans, x[CT__B_V], m[CT__B_V].ld, h->L,
             h->S, h->Ev, 1.0, x[CT__B_DS], h->S);
    ct__softmax_bwd_rows(h->dt, x[CT__B_P], x[CT__B_DS], h->L, h->S);
    /* dQ = scale dS K;  dK = scale dS^T Q */
    ct__gemm(h->dt, false, x[CT__B_DS], h->S, m[CT__B_K].trans, x[CT__B_K], m[CT__B_K].ld, h->L, h->E, h->S,
             h->scale, x[CT__B_DQ], m[CT__B_DQ].ld);
    ct__gemm(h->dt, true, x[CT__B_DS], h->S, m[CT__B_Q].trans, x[CT__B_Q], m[CT__B_Q].ld, h->S, h->E, h->L,
             h->scale, x[CT__B_DK], m[CT__B_DK].ld);
  }
  ct__host_blas_small_end(one);
}

static void ct__sdpa_bwd_run(void *args, char *const *base) {
  const struct ct__sdpa_bwd *h = args;
  ct__entries_team(h->team, h->seq, ct__sdpa_bwd_entries, h, base, h->count, h->nparts);
}

/* A new [batch..., R, C] tensor; with two or more batch dims over memory laid out
 * [..., R, batch[nb-1], C] (the forward's result layout: the heads' merge a view). */
static ct_status ct__heads_tensor(ct_tensor **out, ct_device *d, ct_dtype dt, int nb, const int64_t *bshape,
                                  int64_t R, int64_t C, const char *fn) {
  int64_t ms[CT_MAX_DIMS];
  memcpy(ms, bshape, sizeof(int64_t) * (size_t)nb);
  ms[nb] = R;
  ms[nb + 1] = C;
  if (nb >= 2) {
    ms[nb - 1] = R;
    ms[nb] = bshape[nb - 1];
  }
  ct_tensor *m = NULL;
  CT__TRY(ct__tensor_new(&m, d, dt, nb + 2, ms, fn));
  if (nb < 2) {
    *out = m;
    return CT_OK;
  }
  ct_status st = ct_transpose(out, m, nb - 1, nb);
  ct_release(m);
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
  if (!dq || !dk || !dv || !d->native_kernels || !ct__gemm_host_available() || (dt != CT_F32 && dt != CT_F64))
    return CT_OK;
  const ct_tensor *ops[4] = {q, k, v, g};
  int nb = p->ndim - 2;
  for (int i = 0; i < 4; i++)
    if (ops[i]->dtype != dt || !ct__same_batch(ops[i], nb, p->shape)) return CT_OK;
  struct ct__gemm_state *s;
  CT__TRY(ct__gemm_state(&s, d));
  if (s->route != CT__ROUTE_HOST || s->route_status != CT_OK) return CT_OK;
  struct ct__sdpa_bwd h;
  memset(&h, 0, sizeof h);
  h.dt = dt;
  h.nb = nb;
  memcpy(h.bshape, p->shape, sizeof(int64_t) * (size_t)nb);
  h.L = p->shape[nb];
  h.S = p->shape[nb + 1];
  h.E = q->shape[nb + 1];
  h.Ev = v->shape[nb + 1];
  h.scale = scale;
  h.count = 1;
  for (int i = 0; i < nb; i++) h.count *= h.bshape[i];
  if (h.count == 0 || h.L == 0 || h.S == 0 || h.E == 0 || h.Ev == 0 || h.L > INT32_MAX || h.S > INT32_MAX ||
      h.E > INT32_MAX || h.Ev > INT32_MAX || !ct_tensor_is_contiguous(p))
    return CT_OK;
  int64_t rows[4] = {h.L, h.S, h.S, h.L}, cols[4] = {h.E, h.E, h.Ev, h.Ev};
  for (int i = 0; i < 4; i++)
    if (!ct__gemm_mat_of(&h.m[i], ops[i], false, nb, h.bshape, rows[i], cols[i]) || h.m[i].ld > INT32_MAX)
      return CT_OK;
  ct_tensor *ds = NULL, *oq = NULL, *ok = NULL, *ov = NULL;
  ct_status st = ct__tensor_new(&ds, d, dt, p->ndim, p->shape, fn);
  if (st == CT_OK) st = ct__heads_tensor(&oq, d, dt, nb, h.bshape, h.L, h.E, fn);
  if (st == CT_OK) st = ct__heads_tensor(&ok, d, dt, nb, h.bshape, h.S, h.E, fn);
  if (st == CT_OK) st = ct__heads_tensor(&ov, d, dt, nb, h.bshape, h.S, h.Ev, fn);
  if (st == CT_OK) {
    const ct_tensor *made[5] = {p, ds, oq, ok, ov};
    for (int i = 0; i < 5; i++) {
      struct ct__gemm_mat *x = &h.m[CT__B_P + i];
      x->mem = ct__tensor_mem(made[i]);
      ct__tensor_elem_offset(made[i], &x->off);
      x->ld = made[i]->strides[nb];
      for (int b = 0; b < nb; b++) x->bstride[b] = made[i]->strides[b];
    }
    size_t es = ct_dtype_size(dt);
    cl_mem bufs[9];
    int nbuf = 0;
    bool ok2 = true;
    for (int i = 0; i < 9 && ok2; i++) {
      ok2 = ct__native_unwrap(&h.m[i].mem, &h.m[i].off, es);
      if (ok2) h.which[i] = ct__native_buf(bufs, &nbuf, h.m[i].mem);
    }
    if (ok2 && nbuf <= CT__NATIVE_MAX_BUFS) {
      int64_t work = h.count * h.L * h.S * (2 * h.E + 2 * h.Ev);
      h.nparts = work >= ct__sdpa_split_min ? (h.count < 8 ? h.count : 8) : 1;
      if (h.nparts > 1) st = ct__team_call(&h.team, &h.seq, d, fn);
      if (st == CT_OK) {
        st = ct__native_enqueue(d, ct__device_queue(d), ct__sdpa_bwd_run, &h, sizeof h, nbuf, bufs, 0, NULL, NULL,
                                dt == CT_F64 ? "sdpa backward (host, f64)" : "sdpa backward (host)", fn);
        if (st != CT_OK) ct__team_cancel(h.team, h.seq);
      }
      *done = st == CT_OK;
    }
  }
  ct_release(ds);
  if (st == CT_OK && *done) {
    *dq = oq;
    *dk = ok;
    *dv = ov;
    return CT_OK;
  }
  ct_release(oq);
  ct_release(ok);
  ct_release(ov);
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
