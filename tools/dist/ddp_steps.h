/* cltensor-dist-bench --ddp (ddp_steps.c): the DDP overlap figure of the digits CNN and the
 * character GPT on 2 ranks; and the timing helpers both parts of the tool use. */
#ifndef CT_TOOLS_DIST_DDP_STEPS_H
#define CT_TOOLS_DIST_DDP_STEPS_H

#include "cltensor/cltensor.h"

/* Times both models' local, bare all-reduce and DDP steps on the fixtures in data_dir; rank 0
 * prints a table. Returns 0, or 1 after printing why not. */
int dist_bench_ddp(ct_dist *d, ct_device *dev, const char *data_dir);

/* The tool's clock (CLOCK_MONOTONIC, seconds) and qsort's order of doubles, for its medians. */
double dist_bench_now(void);
int dist_bench_cmp(const void *a, const void *b);

#endif
