/* Timing, statistics, figure records and their output (table or JSON lines). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

double bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char g_error[320];

int bench_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
  return -1;
}

int bench_ct_fail(const char *what, ct_status st) {
  return bench_fail("%s: %s: %s", what, ct_status_name(st), ct_last_error());
}

const char *bench_error(void) { return g_error; }
void bench_clear_error(void) { g_error[0] = '\0'; }

static double g_start;
static FILE *g_out;

void bench_progress(const bench_opts *o, const char *fmt, ...) {
  char text[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (o->child_fd >= 0) {
    bench_child_send_progress(o, text);
    return;
  }
  if (!o->progress) return;
  /* \r plus erase-line keeps one updating status line on the terminal. */
  fprintf(stderr, "\r\033[K[%5.0fs] %s", bench_now() - g_start, text);
  fflush(stderr);
}

void bench_progress_done(const bench_opts *o) {
  if (o->child_fd < 0 && o->progress) {
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
  }
}

/* Warm-up: the first call pays for kernel builds and first-touch allocation; the second, timed,
 * sizes the runs so that each lasts about run_seconds and timer resolution and launch jitter
 * stay small against it. Returns the repetitions per run, or -1. */
static int warm_up(const bench_opts *o, bench_fn fn, bench_sync_fn sync, void *ctx, int max_reps) {
  if (fn(ctx) != 0 || (sync && sync(ctx) != 0)) return -1;
  double t0 = bench_now();
  if (fn(ctx) != 0 || (sync && sync(ctx) != 0)) return -1;
  double one = bench_now() - t0;
  int reps = 1;
  if (one > 0 && one < o->run_seconds) {
    double r = o->run_seconds / one;
    reps = r > (double)max_reps ? max_reps : (int)r;
    if (reps < 1) reps = 1;
  }
  return reps;
}

/* One timed run: seconds per call, or a negative value on failure. */
static double timed_run(bench_fn fn, bench_sync_fn sync, void *ctx, int reps) {
  double t0 = bench_now();
  for (int k = 0; k < reps; k++)
    if (fn(ctx) != 0) return -1;
  if (sync && sync(ctx) != 0) return -1;
  return (bench_now() - t0) / reps;
}

static int run_count(const bench_opts *o) {
  return o->runs < 1 ? 1 : o->runs > BENCH_MAX_RUNS ? BENCH_MAX_RUNS : o->runs;
}

int bench_time(const bench_opts *o, bench_fn fn, bench_sync_fn sync, void *ctx, int max_reps,
               bench_samples *out) {
  out->n = 0;
  int reps = warm_up(o, fn, sync, ctx, max_reps);
  if (reps < 0) return -1;
  for (int r = 0; r < run_count(o); r++) {
    double t = timed_run(fn, sync, ctx, reps);
    if (t < 0) return -1;
    out->s[out->n++] = t;
  }
  return 0;
}

void bench_measure_set(const bench_opts *o, bench_item *items, int n) {
  int reps[BENCH_MAX_ITEMS];
  bench_samples s[BENCH_MAX_ITEMS];
  if (n > BENCH_MAX_ITEMS) n = BENCH_MAX_ITEMS;
  for (int i = 0; i < n; i++) {
    s[i].n = 0;
    if (items[i].off) continue;
    bench_clear_error();
    if ((reps[i] = warm_up(o, items[i].fn, items[i].sync, items[i].ctx, items[i].max_reps)) < 0) {
      bench_fig_fail(items[i].fig, false, bench_error());
      items[i].off = true;
    }
  }
  /* Round-robin, starting one item later each run, so that a burst of load from elsewhere on the
   * machine falls on all of them alike and their ratios stay meaningful. */
  for (int r = 0; r < run_count(o); r++)
    for (int j = 0; j < n; j++) {
      bench_item *it = &items[(j + r) % n];
      int i = (int)(it - items);
      if (it->off) continue;
      bench_clear_error();
      double t = timed_run(it->fn, it->sync, it->ctx, reps[i]);
      if (t < 0) {
        bench_fig_fail(it->fig, false, bench_error());
        it->off = true;
        continue;
      }
      s[i].s[s[i].n++] = t;
    }
  for (int i = 0; i < n; i++)
    if (!items[i].off) bench_fig_set(items[i].fig, &s[i], items[i].work);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int is_time_unit(const char *unit) { return strcmp(unit, "us") == 0 || strcmp(unit, "ms") == 0; }

void bench_fig_init(bench_fig *f, const char *name, int64_t size, const char *shape, const char *dtype,
                    const char *unit) {
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  snprintf(f->shape, sizeof f->shape, "%s", shape);
  snprintf(f->dtype, sizeof f->dtype, "%s", dtype);
  snprintf(f->unit, sizeof f->unit, "%s", unit);
  f->size = size;
  f->lower_is_better = is_time_unit(unit);
  f->median = f->min = f->max = NAN;
}

/* Median, min and max from f->samples. */
static void fig_stats(bench_fig *f) {
  double v[BENCH_MAX_RUNS];
  int n = f->nsamples;
  memcpy(v, f->samples, (size_t)n * sizeof *v);
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  f->runs = n;
  f->min = v[0];
  f->max = v[n - 1];
  /* For an even count the mean of the middle two, so the median of 2 runs is not just the
   * larger one. */
  f->median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_fig_set(bench_fig *f, const bench_samples *s, double work_or_scale) {
  if (s->n <= 0) {
    bench_fig_fail(f, false, "no timed run completed");
    return;
  }
  f->nsamples = s->n;
  for (int i = 0; i < s->n; i++)
    f->samples[i] = f->lower_is_better ? s->s[i] * work_or_scale : work_or_scale / s->s[i];
  f->error[0] = '\0';
  fig_stats(f);
}

void bench_fig_merge(bench_fig *into, const bench_fig *from) {
  if (into->error[0]) return;
  if (from->error[0]) {
    bench_fig_fail(into, from->skipped, from->error);
    return;
  }
  for (int i = 0; i < from->nsamples && into->nsamples < BENCH_MAX_RUNS; i++)
    into->samples[into->nsamples++] = from->samples[i];
  fig_stats(into);
}

void bench_fig_fail(bench_fig *f, bool skipped, const char *msg) {
  snprintf(f->error, sizeof f->error, "%s", msg && *msg ? msg : "failed");
  /* Messages travel in one-line records. */
  for (char *p = f->error; *p; p++)
    if (*p == '\n' || *p == '\t' || *p == '\r') *p = ' ';
  f->skipped = skipped;
  f->median = f->min = f->max = NAN;
}

void bench_fig_add_ref(bench_fig *f, const bench_fig *ref) {
  if (!ref || ref->error[0] || f->nrefs >= BENCH_MAX_REFS) return;
  bench_ref *r = &f->refs[f->nrefs++];
  snprintf(r->name, sizeof r->name, "%s", ref->name);
  r->median = ref->median;
  r->min = ref->min;
  r->max = ref->max;
}

int bench_measure(const bench_opts *o, bench_fig *f, bench_fn fn, bench_sync_fn sync, void *ctx,
                  int max_reps, double work_or_scale) {
  bench_samples s;
  bench_clear_error();
  if (bench_time(o, fn, sync, ctx, max_reps, &s) != 0) {
    bench_fig_fail(f, false, bench_error());
    return -1;
  }
  bench_fig_set(f, &s, work_or_scale);
  return 0;
}

/* ---- kept figures ---- */

typedef struct fig_list {
  bench_fig *v;
  size_t n, cap;
} fig_list;

static fig_list g_refs, g_emitted;
static int g_failed;

static void list_push(fig_list *l, const bench_fig *f) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    bench_fig *v = realloc(l->v, cap * sizeof *v);
    if (!v) return; /* the summary then lacks this figure; the figure itself was printed */
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *f;
}

void bench_keep_ref(const bench_fig *f) { list_push(&g_refs, f); }

const bench_fig *bench_find_ref(const char *name, int64_t size) {
  for (size_t i = g_refs.n; i-- > 0;)
    if (g_refs.v[i].size == size && strcmp(g_refs.v[i].name, name) == 0) return &g_refs.v[i];
  return NULL;
}

static const bench_fig *find_emitted(const char *name, int64_t size) {
  for (size_t i = g_emitted.n; i-- > 0;)
    if (g_emitted.v[i].size == size && strcmp(g_emitted.v[i].name, name) == 0) return &g_emitted.v[i];
  return NULL;
}

/* ---- output ---- */

static void json_str(const char *s) {
  fputc('"', g_out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(g_out, "\\%c", c);
    else if (c < 0x20) fprintf(g_out, "\\u%04x", c);
    else fputc(c, g_out);
  }
  fputc('"', g_out);
}

/* JSON has no NaN or infinity. */
static void json_num(double v) {
  if (isfinite(v)) fprintf(g_out, "%.6g", v);
  else fprintf(g_out, "null");
}

static void fmt_num(char *buf, size_t n, double v) {
  if (!isfinite(v)) snprintf(buf, n, "-");
  else if (fabs(v) >= 100) snprintf(buf, n, "%.0f", v);
  else snprintf(buf, n, "%.3g", v);
}

static double ratio_of(const bench_fig *f, const bench_ref *r) {
  return r->median > 0 ? f->median / r->median : NAN;
}

void bench_output_begin(const bench_opts *o, ct_device *d) {
  g_start = bench_now();
  g_out = o->out ? o->out : stdout;
  if (o->json || o->child_fd >= 0) return;
  const ct_device_props *p = ct_device_properties(d);
  fprintf(g_out, "cltensor-bench %s on %s: %s (%s, driver %s)%s\n", CT_VERSION_STRING, ct_device_spec(d), p->name,
         p->platform_name, p->driver_version, o->quick ? ", --quick" : "");
  fprintf(g_out, "median of %d runs after a warm-up, [min, max]; ratio = cltensor / reference "
         "(higher is better for rates, lower for us and ms)\n\n",
         o->runs);
  fprintf(g_out, "%-26s %-22s %-5s %10s %21s %-8s %s\n", "figure", "shape", "dtype", "median", "[min, max]", "unit",
         "references");
  fflush(g_out);
}

static void print_json(const bench_fig *f) {
  fprintf(g_out, "{\"name\": ");
  json_str(f->name);
  fprintf(g_out, ", \"size\": %lld, \"shape\": ", (long long)f->size);
  json_str(f->shape);
  fprintf(g_out, ", \"dtype\": ");
  json_str(f->dtype);
  fprintf(g_out, ", \"unit\": ");
  json_str(f->unit);
  if (f->error[0]) {
    fprintf(g_out, ", \"%s\": ", f->skipped ? "skipped" : "error");
    json_str(f->error);
  } else {
    fprintf(g_out, ", \"median\": ");
    json_num(f->median);
    fprintf(g_out, ", \"min\": ");
    json_num(f->min);
    fprintf(g_out, ", \"max\": ");
    json_num(f->max);
    fprintf(g_out, ", \"runs\": %d", f->runs);
  }
  if (f->note[0]) {
    fprintf(g_out, ", \"note\": ");
    json_str(f->note);
  }
  fprintf(g_out, ", \"refs\": [");
  for (int i = 0; i < f->nrefs; i++) {
    const bench_ref *r = &f->refs[i];
    fprintf(g_out, "%s{\"name\": ", i ? ", " : "");
    json_str(r->name);
    fprintf(g_out, ", \"median\": ");
    json_num(r->median);
    fprintf(g_out, ", \"min\": ");
    json_num(r->min);
    fprintf(g_out, ", \"max\": ");
    json_num(r->max);
    fprintf(g_out, ", \"ratio\": ");
    json_num(f->error[0] ? NAN : ratio_of(f, r));
    fprintf(g_out, "}");
  }
  fprintf(g_out, "]}\n");
}

static void print_row(const bench_fig *f) {
  char med[24], mn[24], mx[24], range[64];
  fmt_num(med, sizeof med, f->median);
  fmt_num(mn, sizeof mn, f->min);
  fmt_num(mx, sizeof mx, f->max);
  snprintf(range, sizeof range, "[%s, %s]", mn, mx);
  fprintf(g_out, "%-26s %-22s %-5s ", f->name, f->shape, f->dtype);
  if (f->error[0]) fprintf(g_out, "%s: %s", f->skipped ? "skipped" : "FAILED", f->error);
  else fprintf(g_out, "%10s %21s %-8s", med, range, f->unit);
  for (int i = 0; i < f->nrefs; i++) {
    char rv[24];
    fmt_num(rv, sizeof rv, f->refs[i].median);
    if (f->error[0]) fprintf(g_out, " %s %s", f->refs[i].name, rv);
    else fprintf(g_out, " %s %s (%.2fx)", f->refs[i].name, rv, ratio_of(f, &f->refs[i]));
  }
  if (f->note[0]) fprintf(g_out, "  [%s]", f->note);
  fprintf(g_out, "\n");
}

void bench_emit(const bench_opts *o, const bench_fig *f) {
  if (o->child_fd >= 0) {
    bench_child_send_fig(o, f);
    return;
  }
  bench_progress_done(o);
  if (f->error[0] && !f->skipped) g_failed++;
  list_push(&g_emitted, f);
  if (o->json) print_json(f);
  else print_row(f);
  fflush(g_out);
}

/* One target of the issues: figure (name, size) against reference ref; met when the ratio is
 * >= want (rates) or <= want (times). */
static void target(const char *label, const char *name, int64_t size, const char *ref, double want) {
  const bench_fig *f = find_emitted(name, size);
  fprintf(g_out, "  %-52s ", label);
  if (!f) {
    fprintf(g_out, "not measured in this run\n");
    return;
  }
  if (f->error[0]) {
    fprintf(g_out, "not measured: %s\n", f->error);
    return;
  }
  for (int i = 0; i < f->nrefs; i++) {
    if (strcmp(f->refs[i].name, ref) != 0) continue;
    double r = ratio_of(f, &f->refs[i]);
    bool met = f->lower_is_better ? r <= want : r >= want;
    fprintf(g_out, "%.3gx  %s\n", r, met ? "met" : "NOT met");
    return;
  }
  fprintf(g_out, "reference %s not measured in this run\n", ref);
}

int bench_output_end(const bench_opts *o) {
  bench_progress_done(o);
  if (o->json || o->child_fd >= 0) return g_failed;
  fprintf(g_out, "\nTargets (issues 4, 5, 14 and 16), against the references measured above:\n");
  target("add f32 2^25 >= 0.9x cl_add", "add", (int64_t)1 << 25, "cl_add", 0.9);
  target("sum f32 2^25 >= 1.0x host_sum", "sum", (int64_t)1 << 25, "host_sum", 1.0);
  target("chain of 1024-element adds <= 2x cl_launch per op", "add_chain", 1024, "cl_launch", 2.0);
  target("matmul default route 1024 >= 0.9x host_sgemm", "matmul.auto", 1024, "host_sgemm", 0.9);
  target("matmul default route 2048 >= 0.9x host_sgemm", "matmul.auto", 2048, "host_sgemm", 0.9);
  target("matmul CLBlast route 1024 >= 4x clblast_sgemm", "matmul.clblast", 1024, "clblast_sgemm", 4.0);
  target("matmul CLBlast route 2048 >= 4x clblast_sgemm", "matmul.clblast", 2048, "clblast_sgemm", 4.0);
  target("cat f32 2^24 (last dim) >= 0.5x copy", "cat.dim1", (int64_t)1 << 24, "copy", 0.5);
  target("cat f32 2^24 (dim 0) >= 0.5x copy", "cat.dim0", (int64_t)1 << 24, "copy", 0.5);
  target("conv2d ResNet layer (32x64x56x56, 3x3) >= 0.8x PyTorch CPU", "conv2d", 32, "torch_conv2d", 0.8);
  /* Times: as fast as PyTorch is a ratio of at most 1. */
  target("digits CNN forward (450 images) <= 1x PyTorch CPU", "digits_cnn_forward", 450, "torch_forward", 1.0);
  target("char GPT forward (6x64 tokens) <= 1x PyTorch CPU", "charlm_forward", 6 * 64, "torch_forward", 1.0);
  target("digits CNN forward through modules <= 1.05x ops", "digits_cnn_forward", 450, "handwritten_forward", 1.05);
  target("char GPT forward through modules <= 1.05x ops", "charlm_forward", 6 * 64, "handwritten_forward", 1.05);
  const bench_fig *cold = find_emitted("first_result.cold", 1024);
  const bench_fig *warm = find_emitted("first_result.warm", 1024);
  fprintf(g_out, "  %-52s ", "first result of a new process, warm vs cold cache");
  if (cold && warm && !cold->error[0] && !warm->error[0])
    fprintf(g_out, "%.0f ms vs %.0f ms (%.1fx faster)\n", warm->median, cold->median, cold->median / warm->median);
  else
    fprintf(g_out, "not measured in this run\n");
  /* Issue 16's: times, so "4x faster" is a ratio of at most 0.25. */
  const int64_t fz = (int64_t)1 << 25;
  target("tanh chain f32 2^25 <= 1.3x one exp", "fusion.tanh_chain", fz, "exp", 1.3);
  target("tanh chain f32 2^25 4x faster than fusion off", "fusion.tanh_chain", fz, "unfused", 0.25);
  target("tanh chain f32 2^25 4x faster than tinygrad (PoCL)", "fusion.tanh_chain", fz, "tinygrad", 0.25);
  target("tanh chain f32 2^25 4x faster than PyTorch CPU", "fusion.tanh_chain", fz, "torch", 0.25);
  target("GELU written out (pow) f32 2^22 5x faster than fusion off", "fusion.gelu_tanh", fz >> 3, "unfused", 0.2);
  target("GELU written out (x*x*x) f32 2^25 5x faster than fusion off", "fusion.gelu_tanh_cube", fz, "unfused", 0.2);
  target("sum((a - b)^2) f32 2^25 >= 0.9x host_sum", "fusion.sum_sq_diff", fz, "host_sum", 0.9);
  target("10 chained adds of 1024, realized once <= 2x cl_launch", "fusion.add10", 1024, "cl_launch", 2.0);
  const bench_fig *ff = find_emitted("fusion.first.warm", 1024);
  fprintf(g_out, "  %-52s ", "first fused chain of a new process (warm) < 50 ms");
  if (ff && !ff->error[0]) fprintf(g_out, "%.0f ms  %s\n", ff->median, ff->median < 50 ? "met" : "NOT met");
  else fprintf(g_out, "not measured in this run\n");
  if (g_failed) fprintf(g_out, "\n%d figure(s) FAILED (see above)\n", g_failed);
  fflush(g_out);
  return g_failed;
}
