/* INTERNAL TO CLTENSOR'S TOOLS: not libcltensor's API, not installed, no stability promise.
 *
 * cltensor-bench's fusion group times the same chain of calls with the fusion graph on and off
 * in one process, in turns, so that the ratio is measured in one sitting. $CLTENSOR_FUSION is
 * read once per process, so the switch goes through the library's test hook
 * (ct__fusion_override, src/fusion/fusion.h); its counters tell how many fused
 * kernels a call ran. As tune_support.h, this header includes no private header of the
 * library; fusion_support.c forwards. */
#ifndef CT_TOOLS_FUSION_SUPPORT_H
#define CT_TOOLS_FUSION_SUPPORT_H

/* Fusion from now on: -1 follows $CLTENSOR_FUSION (the default), 0 off (every op runs at its
 * call), 1 on. Call it while nothing is recorded (after ct_device_synchronize()), from one
 * thread, with no other thread using the library. */
void ctt_fusion_set(int mode);

/* The fusion graph's process-wide counters (struct ct__fusion_stats, field for field). */
typedef struct ctt_fusion_stats {
  unsigned long realizes;  /* realizes that ran a non-empty graph */
  unsigned long kernels;   /* fused kernels enqueued */
  unsigned long launches;  /* their launches (a tail group is a second one) */
  unsigned long nodes;     /* recorded calls computed */
  unsigned long dropped;   /* recorded calls never computed */
  unsigned long temps;     /* temporaries for released values that crossed kernels */
  unsigned long builds;    /* fused programs built or loaded from the disk cache */
  unsigned long pending;   /* recorded calls not yet realized */
} ctt_fusion_stats;
void ctt_fusion_stats_get(ctt_fusion_stats *out);

#endif
