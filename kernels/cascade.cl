/* The binary cascade of block sums, shared by the programs that sum floats in long runs
 * (reduce.cl, reduce_logic.cl, softmax.cl, norm.cl). Not in common.cl, so that only these programs
 * rebuild when it changes: a program takes it with the line `//#include "cascade.cl"`, which
 * the kernel engine (src/kernel/engine.c) replaces by this file, after the program has
 * defined its accumulator types acc_t and acc8_t (8 lanes of acc_t).
 *
 * A work-item sums its elements in blocks and pushes each block sum onto a stack whose level l
 * holds the sum of 2^l blocks (a binary counter): the rounding error grows with log(blocks),
 * not with their number. CT_LEVELS levels hold 2^CT_LEVELS - 1 blocks; a program may define
 * its own CT_LEVELS before the include. */
#ifndef CT_LEVELS
/* 2^34 blocks of 16 elements or vectors per work-item: more than any buffer holds. */
#define CT_LEVELS 34
#endif

/* Pushes block sum b onto the stack st (its count of blocks *cnt). */
inline void ct_push8(acc8_t *st, ulong *cnt, acc8_t b) {
  int l = 0;
  for (ulong c = *cnt; c & 1ul; c >>= 1, l++) b = st[l] + b;
  st[l] = b;
  *cnt += 1ul;
}

/* Sum of the stack's occupied levels, smallest first. */
inline acc8_t ct_pop8(acc8_t *st, ulong cnt) {
  acc8_t s = (acc8_t)0;
  for (int l = 0; cnt; cnt >>= 1, l++)
    if (cnt & 1ul) s = st[l] + s;
  return s;
}

/* The same for scalar block sums. */
inline void ct_push1(acc_t *st, ulong *cnt, acc_t b) {
  int l = 0;
  for (ulong c = *cnt; c & 1ul; c >>= 1, l++) b = st[l] + b;
  st[l] = b;
  *cnt += 1ul;
}

inline acc_t ct_pop1(acc_t *st, ulong cnt) {
  acc_t s = 0;
  for (int l = 0; cnt; cnt >>= 1, l++)
    if (cnt & 1ul) s = st[l] + s;
  return s;
}
