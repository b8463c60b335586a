/* cltensor-bench: the standard benchmark suite of libcltensor, next to plain references
 * measured in the same run (OpenBLAS, one-thread C loops, one-line OpenCL kernels, CLBlast with
 * its built-in parameters). See docs/PERFORMANCE.md for the figures and what limits them. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static void usage(FILE *f) {
  fprintf(f,
          "Usage: cltensor-bench [--device SPEC] [--json] [--quick] [--only GROUPS] [--runs N]\n"
          "Measures libcltensor on one device next to plain references run in the same sitting:\n"
          "OpenBLAS SGEMM, one-thread C loops, one-line OpenCL kernels and CLBlast's defaults.\n"
          "\n"
          "  -d, --device SPEC   the device: auto, gpu[:N], cpu[:N], accelerator[:N], cl:P:D,\n"
          "                      name:SUBSTRING (default: $CLTENSOR_DEVICE, else the first device)\n"
          "  -j, --json          one JSON object per line and figure: name, size, shape, dtype, unit,\n"
          "                      median, min, max, runs, refs [{name, median, min, max, ratio}],\n"
          "                      note; size is the element count (n for matmul, rows for softmax,\n"
          "                      the batch for mlp_forward); a figure not measured has \"error\"\n"
          "                      or \"skipped\" instead of the numbers\n"
          "  -q, --quick         fewer sizes and runs: about a minute, for smoke tests\n"
          "  -o, --only GROUPS   comma-separated: transfer, elementwise, reduce, softmax, chain, mlp,\n"
          "                      matmul, first_result, shape, index, nn, models, train, fusion,\n"
          "                      autograd, threads\n"
          "                      (default: all; nn, models, train and fusion run PyTorch beside\n"
          "                      them when $CLTENSOR_BENCH_PYTHON names a Python with torch)\n"
          "  -r, --runs N        timed runs per figure after the warm-up (default 7, quick 3)\n"
          "  -h, --help          this text\n"
          "  -V, --version       the version\n"
          "\n"
          "Each figure is the median of the timed runs, with their min and max. ratio is\n"
          "cltensor / reference: above 1 is faster for rates (GB/s, GFLOP/s, rows/s), below 1 is\n"
          "faster for times (us, ms). Matmul runs once per GEMM route (CLTENSOR_GEMM=auto, clblast,\n"
          "host), each in a child process. Exit status: 0, or 1 when a figure failed or the device\n"
          "is unusable, 2 for bad arguments.\n");
}

static const struct {
  const char *name;
  unsigned bit;
} k_groups[] = {{"transfer", BENCH_TRANSFER}, {"elementwise", BENCH_ELEMENTWISE},
                {"reduce", BENCH_REDUCE},     {"softmax", BENCH_SOFTMAX},
                {"chain", BENCH_CHAIN},       {"mlp", BENCH_MLP},
                {"matmul", BENCH_MATMUL},     {"first_result", BENCH_FIRST_RESULT},
                {"shape", BENCH_SHAPE},       {"index", BENCH_INDEX},
                {"nn", BENCH_NN},             {"models", BENCH_MODELS},
                {"train", BENCH_TRAIN},       {"fusion", BENCH_FUSION},
                {"autograd", BENCH_AUTOGRAD}, {"threads", BENCH_THREADS}};

static int parse_groups(const char *list, unsigned *out) {
  *out = 0;
  const char *s = list;
  while (*s) {
    size_t len = strcspn(s, ",");
    size_t i, n = sizeof k_groups / sizeof k_groups[0];
    for (i = 0; i < n; i++)
      if (strlen(k_groups[i].name) == len && strncmp(s, k_groups[i].name, len) == 0) break;
    if (i == n) {
      fprintf(stderr, "cltensor-bench: unknown group '%.*s' in --only (groups: transfer, elementwise, "
                      "reduce, softmax, chain, mlp, matmul, first_result, shape, index, nn, models, train, fusion)\n",
            (int)len, s);
      return -1;
    }
    *out |= k_groups[i].bit;
    s += len;
    if (*s == ',') s++;
  }
  return *out ? 0 : -1;
}

/* The path to re-execute for child processes. */
static const char *self_path(const char *argv0) {
  static char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    return buf;
  }
  return argv0;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                       {"json", no_argument, 0, 'j'},
                                       {"quick", no_argument, 0, 'q'},
                                       {"only", required_argument, 0, 'o'},
                                       {"runs", required_argument, 0, 'r'},
                                       {"help", no_argument, 0, 'h'},
                                       {"version", no_argument, 0, 'V'},
                                       /* hidden: the child modes */
                                       {"child", required_argument, 0, 'C'},
                                       {"cl", required_argument, 0, 'L'},
                                       {0, 0, 0, 0}};
  bench_opts o = {.groups = BENCH_ALL, .child_fd = -1};
  const char *spec = NULL, *child = NULL, *cl = NULL;
  int runs = 0, c;
  while ((c = getopt_long(argc, argv, "d:jqo:r:hV", opts, NULL)) != -1) {
    switch (c) {
      case 'd': spec = optarg; break;
      case 'j': o.json = true; break;
      case 'q': o.quick = true; break;
      case 'o':
        if (parse_groups(optarg, &o.groups) != 0) return 2;
        break;
      case 'r': {
        char *end;
        long v = strtol(optarg, &end, 10);
        if (*end || v < 1 || v > BENCH_MAX_RUNS) {
          fprintf(stderr, "cltensor-bench: --runs wants 1 ... %d, not '%s'\n", BENCH_MAX_RUNS, optarg);
          return 2;
        }
        runs = (int)v;
        break;
      }
      case 'h': usage(stdout); return 0;
      case 'V': printf("cltensor-bench %s\n", CT_VERSION_STRING); return 0;
      case 'C': child = optarg; break;
      case 'L': cl = optarg; break;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "cltensor-bench: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  o.runs = runs ? runs : o.quick ? 3 : 7;
  o.run_seconds = o.quick ? 0.02 : 0.1;
  o.self = self_path(argv[0]);
  o.device_spec = spec ? spec : "auto";

  if (child) {
    /* The parent reads binary messages from our stdout; anything else that writes there (a
     * driver's diagnostics) goes to stderr instead. */
    o.child_fd = dup(STDOUT_FILENO);
    if (o.child_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return 1;
    if (strcmp(child, "matmul") == 0) return bench_child_matmul(&o);
    if (strcmp(child, "first-result") == 0) return bench_child_first_result(&o);
    if (strcmp(child, "first-fusion") == 0) return bench_child_first_fusion(&o);
    if (strcmp(child, "first-train-step") == 0) return bench_child_first_train_step(&o);
    if (strcmp(child, "clblast-defaults") == 0) {
      int p = -1, d = -1;
      if (!cl || sscanf(cl, "%d:%d", &p, &d) != 2) return 2;
      return bench_child_clblast_defaults(&o, p, d);
    }
    return 2;
  }

  /* OpenCL drivers may print on stdout (PoCL's compiler diagnostics do), which would break
   * the JSON lines: the figures keep the original stdout, everything else goes to stderr. */
  int out_fd = dup(STDOUT_FILENO);
  if (out_fd < 0 || !(o.out = fdopen(out_fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    perror("cltensor-bench: stdout");
    return 1;
  }
  ct_device *d = NULL;
  ct_status st = spec ? ct_device_find(&d, spec) : ct_device_default(&d);
  if (st == CT_OK) st = ct_device_open(d);
  if (st != CT_OK) {
    fprintf(stderr, "cltensor-bench: %s\n", ct_last_error());
    ct_shutdown();
    return 1;
  }
  o.device_spec = ct_device_spec(d);
  o.progress = isatty(STDERR_FILENO);

  bench_output_begin(&o, d);
  clref *r = NULL;
  if (o.groups & (BENCH_TRANSFER | BENCH_ELEMENTWISE | BENCH_REDUCE | BENCH_CHAIN | BENCH_FUSION | BENCH_SHAPE |
                  BENCH_INDEX | BENCH_NN)) {
    r = clref_open_device(d);
    if (!r) fprintf(stderr, "cltensor-bench: the raw OpenCL references are unavailable: %s\n", bench_error());
  }
  if (o.groups & BENCH_TRANSFER) bench_group_transfer(&o, d, r);
  if (o.groups & BENCH_ELEMENTWISE) bench_group_elementwise(&o, d, r);
  if (o.groups & BENCH_REDUCE) bench_group_reduce(&o, d, r);
  if (o.groups & BENCH_SOFTMAX) bench_group_softmax(&o, d);
  if (o.groups & BENCH_CHAIN) bench_group_chain(&o, d, r);
  if (o.groups & BENCH_MLP) bench_group_mlp(&o, d);
  if (o.groups & BENCH_SHAPE) bench_group_shape(&o, d, r);
  if (o.groups & BENCH_INDEX) bench_group_index(&o, d, r);
  if (o.groups & BENCH_FUSION) bench_group_fusion(&o, d, r);
  if (o.groups & BENCH_NN) bench_group_nn(&o, d, r);
  clref_close(r);
  if (o.groups & BENCH_MATMUL) bench_group_matmul(&o, d);
  if (o.groups & BENCH_FIRST_RESULT) bench_group_first_result(&o, d);
  if (o.groups & BENCH_MODELS) bench_group_models(&o, d);
  if (o.groups & BENCH_TRAIN) bench_group_train(&o, d);
  if (o.groups & BENCH_AUTOGRAD) bench_group_autograd(&o, d);
  if (o.groups & BENCH_THREADS) bench_group_threads(&o, d);
  int failed = bench_output_end(&o);
  ct_shutdown();
  if (fclose(o.out) != 0) {
    perror("cltensor-bench: writing the figures");
    return 1;
  }
  return failed ? 1 : 0;
}
