/* The "threads" group (issue #28): elementwise chains on several threads at once, fusion on
 * and off, timed in turns in one process.
 *
 *   threads.chain_T  T threads (1, 2, 4, 8), each computing tanh(x * 0.5 + 1) on a tensor of
 *                    its own (1024 f32) and reading the result back (ct_to_host), FZ_CHAINS
 *                    times; chains/s over all threads. Reference "unfused": the same with
 *                    fusion off (eager kernels). The note gives the fused programs built during
 *                    the timed runs: a set of kernels that depends on thread timing shows up
 *                    here as builds that never stop (issue #28: 31 builds in 20 s, 99 after
 *                    80 s, before the fusion graph became per thread).
 *
 * Fusion is switched through the tools' hook (tools/common/fusion_support.h) between runs,
 * while no thread uses the library. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/fusion_support.h"

#define TH_N 1024
#define TH_MAX 8

typedef struct th_job {
  ct_device *d;
  ct_tensor *x;
  int chains;
  pthread_barrier_t *start;
  ct_status st;
  char err[256];
} th_job;

static ct_status th_chain(const ct_tensor *x, float *host) {
  ct_tensor *a = NULL, *b = NULL, *c = NULL;
  ct_status st = ct_mul_scalar(&a, x, 0.5);
  if (st == CT_OK) st = ct_add_scalar(&b, a, 1.0);
  ct_release(a);
  if (st == CT_OK) st = ct_tanh(&c, b);
  ct_release(b);
  if (st == CT_OK) st = ct_to_host(c, host, TH_N * sizeof *host);
  ct_release(c);
  return st;
}

static void *th_main(void *p) {
  th_job *j = p;
  float *host = malloc(TH_N * sizeof *host);
  pthread_barrier_wait(j->start);
  j->st = host ? CT_OK : CT_ERR_OUT_OF_MEMORY;
  for (int i = 0; i < j->chains && j->st == CT_OK; i++) j->st = th_chain(j->x, host);
  if (j->st != CT_OK) snprintf(j->err, sizeof j->err, "%s", ct_last_error());
  free(host);
  return NULL;
}

typedef struct th_ctx {
  ct_device *d;
  int threads, chains, fusion;
  ct_tensor *x[TH_MAX];
} th_ctx;

/* One timed run: every thread's chains, from the barrier to the last join. */
static int th_run(void *p) {
  th_ctx *c = p;
  ctt_fusion_set(c->fusion);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)c->threads);
  th_job jobs[TH_MAX];
  pthread_t th[TH_MAX];
  for (int t = 0; t < c->threads; t++) {
    jobs[t] = (th_job){.d = c->d, .x = c->x[t], .chains = c->chains, .start = &start};
    if (pthread_create(&th[t], NULL, th_main, &jobs[t]) != 0) return bench_fail("pthread_create failed");
  }
  for (int t = 0; t < c->threads; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&start);
  ctt_fusion_set(-1);
  for (int t = 0; t < c->threads; t++)
    if (jobs[t].st != CT_OK) return bench_fail("thread %d: %s", t, jobs[t].err);
  return 0;
}

void bench_group_threads(const bench_opts *o, ct_device *d) {
  static const int counts[] = {1, 2, 4, 8};
  const int chains = o->quick ? 100 : 400;
  th_ctx on = {.d = d, .chains = chains, .fusion = 1}, off = {.d = d, .chains = chains, .fusion = 0};
  int64_t n = TH_N;
  float *h = malloc(TH_N * sizeof *h);
  ct_status st = h ? CT_OK : CT_ERR_OUT_OF_MEMORY;
  if (h) bench_fill(h, TH_N, -2.0f, 2.0f, 7);
  for (int t = 0; t < TH_MAX && st == CT_OK; t++) {
    st = ct_from_host(&on.x[t], d, CT_F32, 1, &n, h);
    off.x[t] = on.x[t];
  }
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    char name[40], shape[64];
    snprintf(name, sizeof name, "threads.chain_%d", counts[k]);
    snprintf(shape, sizeof shape, "%d threads x tanh(x*0.5+1), %d", counts[k], TH_N);
    bench_fig f, ref;
    bench_fig_init(&f, name, TH_N, shape, "f32", "chains/s");
    bench_fig_init(&ref, "unfused", TH_N, shape, "f32", "chains/s");
    if (st != CT_OK) {
      bench_fig_fail(&f, false, ct_last_error());
      bench_emit(o, &f);
      continue;
    }
    on.threads = off.threads = counts[k];
    ctt_fusion_stats s0, s1;
    bench_item items[2] = {{.fig = &f, .fn = th_run, .ctx = &on, .max_reps = 1, .work = (double)counts[k] * chains},
                           {.fig = &ref, .fn = th_run, .ctx = &off, .max_reps = 1, .work = (double)counts[k] * chains}};
    ctt_fusion_stats_get(&s0);
    bench_measure_set(o, items, 2);
    ctt_fusion_stats_get(&s1);
    if (!ref.error[0]) bench_fig_add_ref(&f, &ref);
    snprintf(f.note, sizeof f.note, "%lu fused builds, %lu kernels", s1.builds - s0.builds, s1.kernels - s0.kernels);
    bench_emit(o, &f);
  }
  for (int t = 0; t < TH_MAX; t++) ct_release(on.x[t]);
  free(h);
}
