/* cltensor-bench internals: options, figures, timing, references, child processes.
 *
 * A figure is one measured number (median, min, max over several timed runs after a warm-up)
 * with up to BENCH_MAX_REFS references measured in the same run: plain C loops, OpenBLAS, raw
 * OpenCL kernels and CLBlast on the same device. Each figure group is one function
 * (bench_group_*); groups that need a process of their own (a GEMM route, a cold kernel cache)
 * re-execute this binary in a hidden child mode and read its figures back through a pipe. */
#ifndef CLTENSOR_BENCH_H
#define CLTENSOR_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cltensor/cltensor.h"

#define BENCH_MAX_RUNS 64
#define BENCH_MAX_REFS 7

typedef enum bench_group {
  BENCH_TRANSFER = 1u << 0,
  BENCH_ELEMENTWISE = 1u << 1,
  BENCH_REDUCE = 1u << 2,
  BENCH_SOFTMAX = 1u << 3,
  BENCH_CHAIN = 1u << 4,
  BENCH_MLP = 1u << 5,
  BENCH_MATMUL = 1u << 6,
  BENCH_FIRST_RESULT = 1u << 7,
  BENCH_SHAPE = 1u << 8,  /* cat, pad (group_shape.c) */
  BENCH_INDEX = 1u << 9,  /* index_select, gather, cumsum, sort (group_index.c) */
  BENCH_NN = 1u << 10,    /* conv2d (group_nn.c) */
  BENCH_MODELS = 1u << 11, /* the example models' forwards (group_models.c) */
  BENCH_TRAIN = 1u << 12,  /* one training step of each example model (group_train.c) */
  BENCH_FUSION = 1u << 13, /* fused elementwise chains (group_fusion.c) */
  BENCH_AUTOGRAD = 1u << 14, /* the backward engine on a wide graph (group_autograd.c) */
  BENCH_THREADS = 1u << 15,  /* chains on several threads, fusion on and off (group_threads.c) */
  BENCH_ALL = (1u << 16) - 1
} bench_group;

typedef struct bench_opts {
  const char *device_spec; /* the canonical spec of the device measured */
  const char *self;        /* this executable, for child processes */
  bool quick;
  bool json;
  bool progress;           /* stderr is a terminal */
  int runs;                /* timed runs per figure (after one warm-up) */
  double run_seconds;      /* aim for each timed run to last about this long */
  unsigned groups;
  int child_fd;            /* in a child: the pipe to the parent, else -1 */
  FILE *out;               /* where the figures go (stdout's original descriptor) */
} bench_opts;

typedef struct bench_ref {
  char name[40];
  double median, min, max;
} bench_ref;

/* Higher is better for rates (GB/s, GFLOP/s, rows/s); lower for times (us, ms). */
typedef struct bench_fig {
  char name[40];
  char shape[64];
  int64_t size;
  char dtype[8];
  char unit[12];
  bool lower_is_better;
  double median, min, max;
  int runs;
  int nrefs;
  bench_ref refs[BENCH_MAX_REFS];
  char note[64];            /* e.g. the GEMM route and tuning actually used */
  bool is_ref;              /* from a child: a reference for the figures that follow */
  int nsamples;             /* the runs' values, in the figure's unit, for merging rounds */
  double samples[BENCH_MAX_RUNS];
  /* Not measured: error says why. skipped marks an expected absence (a route or reference this
   * build or device lacks) rather than a failure. */
  char error[320];
  bool skipped;
} bench_fig;

/* Seconds per call of each timed run. */
typedef struct bench_samples {
  double s[BENCH_MAX_RUNS];
  int n;
} bench_samples;

/* ---- timing (measure.c) ---- */
double bench_now(void);                        /* CLOCK_MONOTONIC seconds */
/* One call of the work; returns 0, or -1 after bench_fail(). */
typedef int (*bench_fn)(void *ctx);
/* Waits until the work of the calls so far is complete (NULL: the calls are synchronous). */
typedef int (*bench_sync_fn)(void *ctx);
/* Warm-up, then o->runs timed runs; each run repeats fn enough times to last about
 * o->run_seconds (at most max_reps, at least once) and ends with sync. Returns 0 or -1. */
int bench_time(const bench_opts *o, bench_fn fn, bench_sync_fn sync, void *ctx, int max_reps,
               bench_samples *out);
/* The calling figure's failure message (printf-style); returns -1 for `return bench_fail(...)`. */
int bench_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Fails with the library's message for a failed call. */
int bench_ct_fail(const char *what, ct_status st);
const char *bench_error(void);
void bench_clear_error(void);

/* ---- figures (measure.c) ---- */
/* Starts a figure; unit is "GB/s", "GFLOP/s", "rows/s", "us" or "ms". */
void bench_fig_init(bench_fig *f, const char *name, int64_t size, const char *shape, const char *dtype,
                    const char *unit);
/* Sets the value from samples: rates are work / seconds, times are seconds * scale. */
void bench_fig_set(bench_fig *f, const bench_samples *s, double work_or_scale);
void bench_fig_fail(bench_fig *f, bool skipped, const char *msg);
/* Adds from's runs to into's (same figure measured in another round) and recomputes median,
 * min and max; a failure in either makes the result a failure. */
void bench_fig_merge(bench_fig *into, const bench_fig *from);
/* Adds a reference figure measured with the same unit. */
void bench_fig_add_ref(bench_fig *f, const bench_fig *ref);
/* One of several things measured together by bench_measure_set(). */
#define BENCH_MAX_ITEMS 8
typedef struct bench_item {
  bench_fig *fig;
  bench_fn fn;
  bench_sync_fn sync;
  void *ctx;
  int max_reps;
  double work;   /* work per call for rates, the scale for times (as bench_fig_set) */
  bool off;      /* not to be measured; set when it fails (the figure then has the error) */
} bench_item;
/* Warms each item up, then times them in turns (one run of each per round, o->runs rounds), so
 * that ours and its references see the same moments of a shared machine. */
void bench_measure_set(const bench_opts *o, bench_item *items, int n);
/* Measures fn into f, or records the failure. Returns 0 or -1. */
int bench_measure(const bench_opts *o, bench_fig *f, bench_fn fn, bench_sync_fn sync, void *ctx,
                  int max_reps, double work_or_scale);

/* ---- output (measure.c) ---- */
void bench_output_begin(const bench_opts *o, ct_device *d);
/* Prints f (or, in a child, sends it to the parent) and keeps it for the summary. */
void bench_emit(const bench_opts *o, const bench_fig *f);
/* Checks the targets against the figures emitted so far; returns how many failed
 * figures (not skipped) were emitted. */
int bench_output_end(const bench_opts *o);
void bench_progress(const bench_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bench_progress_done(const bench_opts *o);
/* A reference figure measured earlier in this run, or NULL. */
const bench_fig *bench_find_ref(const char *name, int64_t size);
/* Remembers a reference figure for later lookup (not printed). */
void bench_keep_ref(const bench_fig *f);

/* ---- child processes (spawn.c) ---- */
typedef struct bench_child bench_child;
/* Starts `self args...` with extra environment entries ("NAME=value", NULL-terminated list);
 * its stdout is a pipe to us. Returns NULL after bench_fail(). */
bench_child *bench_child_start(const bench_opts *o, char *const args[], char *const env_extra[]);
/* Next message from the child: 1 with a figure in *f, 2 when the child reported a first result,
 * 0 at the end of its output, -1 on a read error. Progress messages are shown as they come. */
int bench_child_next(const bench_opts *o, bench_child *c, bench_fig *f);
/* Waits for the child; returns its exit status (or -1, with bench_fail(), when it crashed). */
int bench_child_finish(bench_child *c);
/* In a child: sends a figure, a progress line, or "the first result is ready" to the parent. */
void bench_child_send_fig(const bench_opts *o, const bench_fig *f);
void bench_child_send_progress(const bench_opts *o, const char *text);
void bench_child_ready(const bench_opts *o);
/* One new process running child mode `mode` (first-result, first-fusion), from its start to the
 * moment it reports its first result, with the library's kernel cache in ct_dir and the OpenCL
 * driver's own (PoCL's) in driver_dir, and up to 4 more environment entries (env_extra,
 * NULL-terminated, may be NULL). Returns 0 with the seconds in *secs, or -1 after bench_fail(). */
int bench_first_result_once(const bench_opts *o, const char *mode, char *const env_extra[], const char *ct_dir,
                            const char *driver_dir, double *secs);
/* mkdir(path, 0700), an existing folder being fine; 0, or -1 after bench_fail(). */
int bench_make_dir(const char *path);
/* Makes a fresh private folder under $TMPDIR; returns a malloc'd path or NULL. */
char *bench_mkdtemp(void);
void bench_rmtree(const char *path);

/* ---- host references (refs_host.c) ---- */
bool bench_have_cblas(void);
void ref_host_add(const float *a, const float *b, float *c, size_t n);
void ref_host_mul(const float *a, const float *b, float *c, size_t n);
void ref_host_exp(const float *a, float *c, size_t n);
float ref_host_sum(const float *a, size_t n);
float ref_host_max(const float *a, size_t n);
void ref_host_softmax(const float *x, float *y, size_t rows, size_t cols);
/* C[m,n] = A[m,k] @ B[k,n] (row-major) through CBLAS; false when not built with it. */
bool ref_host_sgemm(const float *a, const float *b, float *c, int m, int n, int k);
/* y[m,n] = relu(x[m,k] @ w[n,k]^T + bias[n]) through CBLAS. */
bool ref_host_linear_relu(const float *x, const float *w, const float *bias, float *y, int m, int n, int k);
/* Deterministic test data in [lo, hi). */
void bench_fill(float *p, size_t n, float lo, float hi, uint32_t seed);

/* ---- raw OpenCL references on the same device (refs_cl.c) ---- */
typedef struct clref clref;
/* One-line kernels on the library's own context and queue for d (the interop API).
 * NULL after bench_fail(). */
clref *clref_open_device(ct_device *d);
/* The same in a context and queue of its own, on OpenCL platform p, device index di: for a
 * process that must not open the device through the library. NULL after bench_fail(). */
clref *clref_open(int platform_index, int device_index);
void clref_close(clref *r);

/* ---- the figure groups (groups.c, child.c) ---- */
void bench_group_transfer(const bench_opts *o, ct_device *d, clref *r);
void bench_group_elementwise(const bench_opts *o, ct_device *d, clref *r);
void bench_group_reduce(const bench_opts *o, ct_device *d, clref *r);
void bench_group_softmax(const bench_opts *o, ct_device *d);
void bench_group_chain(const bench_opts *o, ct_device *d, clref *r);
void bench_group_mlp(const bench_opts *o, ct_device *d);
void bench_group_matmul(const bench_opts *o, ct_device *d);
void bench_group_first_result(const bench_opts *o, ct_device *d);
void bench_group_shape(const bench_opts *o, ct_device *d, clref *r);  /* group_shape.c */
void bench_group_index(const bench_opts *o, ct_device *d, clref *r);  /* group_index.c */
void bench_group_nn(const bench_opts *o, ct_device *d, clref *r);     /* group_nn.c */
void bench_group_models(const bench_opts *o, ct_device *d); /* group_models.c */
void bench_group_train(const bench_opts *o, ct_device *d);  /* group_train.c */
void bench_group_fusion(const bench_opts *o, ct_device *d, clref *r); /* group_fusion.c */
void bench_group_autograd(const bench_opts *o, ct_device *d);         /* group_autograd.c */
void bench_group_threads(const bench_opts *o, ct_device *d);          /* group_threads.c */

/* ---- the example models' fixtures and PyTorch beside them (group_models.c) ---- */
/* $CLTENSOR_BENCH_MODELS, else the source tree's examples/data. */
const char *bench_models_dir(void);
/* Loads bench_models_dir()/name onto d; NULL (with f marked skipped) when it is not there. */
ct_safetensors *bench_load_fixture(bench_fig *f, ct_device *d, const char *name);
/* PyTorch's median ms for figure name: runs `$CLTENSOR_BENCH_PYTHON script --figure name --data
 * DIR extra` and reads its line "<tag> name median_ms=..."; negative when $CLTENSOR_BENCH_PYTHON
 * is unset or (with a message on stderr) the script failed. */
double bench_torch_ms(const char *script, const char *tag, const char *name, const char *extra);
/* Adds PyTorch's times measured right before and right after f as the reference ref_name (when
 * both are positive). */
void bench_add_torch_ref(bench_fig *f, const char *ref_name, double before_ms, double after_ms);

/* A raw-OpenCL reference prepared to run: what is "add", "mul", "exp", "tanh_chain" (tanh(x *
 * 0.5 + 1) * x, the fusion group's chain as one hand-written line; n elements), "sum",
 * "max" (n elements, two-stage, result read back), "launch" (n back-to-back launches of a
 * 1024-element add and a clFinish), "h2d", "d2h", "h2d_pinned", "d2h_pinned" (n floats),
 * "clblast_sgemm", "clblast_sgemm_batch" (n x n x n, BENCH_BATCH of them). NULL (with
 * bench_fail(), or without a message when r is NULL) when it cannot be prepared. */
typedef struct clref_job clref_job;
clref_job *clref_job_new(const bench_opts *o, clref *r, const char *what, size_t n);
/* The one-line direct convolution (one work-item per output element, stride 1) of dims
 * {n, cin, h, w, cout, k, pad} on f32 buffers of its own. */
clref_job *clref_job_conv(const bench_opts *o, clref *r, const int dims[7]);
int clref_job_run(void *job);  /* a bench_fn */
int clref_job_sync(void *job); /* a bench_sync_fn */
void clref_job_free(clref_job *j);

/* Hidden child modes (child.c); each returns the process exit status. */
int bench_child_matmul(const bench_opts *o);
int bench_child_first_result(const bench_opts *o);
int bench_child_first_train_step(const bench_opts *o); /* group_train.c */
int bench_child_first_fusion(const bench_opts *o); /* group_fusion.c */
int bench_child_clblast_defaults(const bench_opts *o, int platform_index, int device_index);

/* The GEMM route and CLBlast tuning d's GEMMs use, as a figure's note ("" when unknown). */
void bench_gemm_note(ct_device *d, char *buf, size_t n);

/* Sizes of the matmul group, shared by the parent and its children. */
int bench_matmul_sizes(const bench_opts *o, const int **sizes);
#define BENCH_BATCH 64
#define BENCH_BATCH_N 64

#endif
