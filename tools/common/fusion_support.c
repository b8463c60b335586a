/* The tools' window on the fusion graph's test hooks (fusion_support.h). */
#include <stddef.h>

#include "fusion/fusion.h"
#include "fusion_support.h"

/* The counters are copied field by field; the layouts must agree in count too. */
_Static_assert(sizeof(ctt_fusion_stats) == sizeof(struct ct__fusion_stats),
               "ctt_fusion_stats and struct ct__fusion_stats differ");

void ctt_fusion_set(int mode) { ct__fusion_override = mode < 0 ? -1 : mode > 0 ? 1 : 0; }

void ctt_fusion_stats_get(ctt_fusion_stats *out) {
  struct ct__fusion_stats s;
  ct__fusion_stats(&s);
  *out = (ctt_fusion_stats){s.realizes, s.kernels, s.launches, s.nodes, s.dropped, s.temps, s.builds, s.pending};
}
