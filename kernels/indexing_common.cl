/* Helpers of the indexing programs (index.cl, order.cl). Not in common.cl, so that only these
 * programs rebuild when it changes: a program takes it with the line
 * `//#include "indexing_common.cl"`, which the kernel engine (src/kernel/engine.c) replaces by
 * this file. */

/* Records a bad index: the first work-item to see one wins err[0] (a 32-bit atomic
 * compare-exchange, OpenCL 1.1 core) and writes the position and the value to err[1], err[2];
 * the host reads the record after the kernel. Returns whether this call won, so that a caller
 * can add more to the record (order.cl's err[3]). */
inline int ct_report_bad(__global long *err, long pos, long v) {
  if (atomic_cmpxchg((volatile __global int *)err, 0, 1) != 0) return 0;
  err[1] = pos;
  err[2] = v;
  return 1;
}

/* Work-item gid's chunk [*e0, *e1) of `chunk` elements of a row of `inner`; returns the row. */
inline long ct_chunk(long gid, long inner, long chunk, long *e0, long *e1) {
  long per_row = (inner + chunk - 1) / chunk;
  long row = gid / per_row;
  *e0 = (gid - row * per_row) * chunk;
  *e1 = min(*e0 + chunk, inner);
  return row;
}

/* Index element i, stored as i64 (idx64) or i32: a runtime flag, not a build option, so one
 * program serves both. */
inline long ct_load_index(__global const uchar *idx, long i, int idx64) {
  return idx64 ? ((__global const long *)idx)[i] : ct_sext32(((__global const int *)idx)[i]);
}
