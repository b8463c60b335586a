/* ct_randperm: a Fisher-Yates shuffle on the host driven by Philox4x32-10 (the bits of
 * include/cltensor/random.h's streams), uploaded with ct_from_host. A shuffle is sequential
 * (each swap depends on the previous ones); on the host it is exact and O(n), and the upload
 * lets index ops skip their device range check (the values are known to lie in [0, n)). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/error.h"
#include "random/random.h"
#include "tensor/tensor.h"

/* One Philox4x32-10 block: the counter (b, offset), the key seed (random.h's layout). */
static void philox_block(uint32_t w[4], uint64_t b, uint64_t seed, uint64_t offset) {
  uint32_t c0 = (uint32_t)b, c1 = (uint32_t)(b >> 32), c2 = (uint32_t)offset, c3 = (uint32_t)(offset >> 32);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1,
             n3 = (uint32_t)p0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  w[0] = c0;
  w[1] = c1;
  w[2] = c2;
  w[3] = c3;
}

/* The words of the stream (seed, offset) in order: block 0's w0..w3, block 1's, ... */
typedef struct words {
  uint64_t seed, offset, next_block;
  uint32_t w[4];
  int used;
} words;

static uint32_t next_word(words *s) {
  if (s->used == 4) {
    philox_block(s->w, s->next_block++, s->seed, s->offset);
    s->used = 0;
  }
  return s->w[s->used++];
}

/* Uniform in [0, bound) without bias: a 32-bit word (two words, high first, when bound > 2^32)
 * x is taken when x < bound * floor(2^k / bound) (else the next one), and gives x mod bound. */
static uint64_t uniform_below(words *s, uint64_t bound) {
  if (bound <= UINT64_C(1) << 32) {
    uint64_t lim = (UINT64_C(1) << 32) - (UINT64_C(1) << 32) % bound;
    for (;;) {
      uint64_t x = next_word(s);
      if (x < lim) return x % bound;
    }
  }
  uint64_t lim = UINT64_MAX - (UINT64_MAX % bound + 1) % bound; /* the largest multiple of bound, minus 1 */
  for (;;) {
    uint64_t hi = next_word(s);
    uint64_t x = hi << 32 | next_word(s);
    if (x <= lim) return x % bound;
  }
}

void ct__randperm_host(int64_t *perm, int64_t n, uint64_t seed, uint64_t offset) {
  words s = {.seed = seed, .offset = offset, .next_block = 0, .used = 4};
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)uniform_below(&s, (uint64_t)i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

static ct_status randperm(ct_tensor **out, ct_device *d, int64_t n, uint64_t seed, uint64_t offset, bool global,
                          const char *fn) {
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, d);
  if (n < 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: n is %" PRId64 " (expected n >= 0)", fn, n);
  if ((uint64_t)n > SIZE_MAX / sizeof(int64_t) - 1)
    return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: n = %" PRId64 " does not fit in host memory", fn, n);
  int64_t *perm = malloc(((size_t)n + 1) * sizeof *perm);
  if (!perm) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %" PRId64 " indices", fn, n);
  /* The global state is taken once the arguments passed (a refused call consumes no offset). */
  if (global) ct__rng_take(&seed, &offset);
  ct__randperm_host(perm, n, seed, offset);
  ct_status st = ct_from_host(out, d, CT_I64, 1, &n, perm);
  free(perm);
  if (st != CT_OK) ct__error_append(" (in %s)", fn);
  return st;
}

ct_status ct_randperm(ct_tensor **out, ct_device *d, int64_t n) { return randperm(out, d, n, 0, 0, true, "ct_randperm"); }

ct_status ct_randperm_seeded(ct_tensor **out, ct_device *d, int64_t n, uint64_t seed, uint64_t offset) {
  return randperm(out, d, n, seed, offset, false, "ct_randperm_seeded");
}
