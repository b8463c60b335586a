/* The host attention's row softmax for one vector width, a template: attention_host.c includes
 * it once per width with CT__VL (lanes: 16, 8 or 4) and CT__N(name) (name with the width
 * appended) defined, as dav1d's *_tmpl.c files are built once per bit depth. Each width is the
 * full register of the instruction set it is compiled for (AVX-512, AVX2, SSE2 or NEON): wider
 * vectors than the target's registers are split by GCC, and their float comparisons become one
 * scalar comparison per lane (seen on AVX2 with 16 lanes: the softmax was 48% of the forward
 * command, 4x its 8-lane time). Everything here is always inlined into the one function the
 * caller wraps with its target attribute, so no vector crosses a call (-Wpsabi's ABI note does
 * not apply). */
#define VF CT__N(ct__vf)
#define VI CT__N(ct__vi)
typedef float VF __attribute__((vector_size(CT__VL * 4)));
typedef int VI __attribute__((vector_size(CT__VL * 4)));

/* Lane i ^ s for each lane i: the halving steps of the reductions (s = CT__VL / 2, ..., 1), and
 * the lanes' indices (s = 0). */
#if CT__VL == 16
#define CT__XOR(s) CT__X16(s)
#elif CT__VL == 8
#define CT__XOR(s) CT__X8(s)
#else
#define CT__XOR(s) CT__X4(s)
#endif

static inline __attribute__((always_inline)) VF CT__N(ct__vsel)(VI m, VF a, VF b) {
  return (VF)((m & (VI)a) | (~m & (VI)b));
}

/* max(a, b), NaN lanes of b ignored: a NaN score turns its row to NaN through the exponentials'
 * sum instead (and the all-NaN row is handled where the maximum comes out -inf). A NaN-keeping
 * select here made GCC scalarize the AVX-512 clone's masks: the softmax took 2.5x as long. */
static inline __attribute__((always_inline)) VF CT__N(ct__vmax)(VF a, VF b) { return CT__N(ct__vsel)(b > a, b, a); }

/* Lane 0 of the result: the maximum (or sum) of v's lanes, by halving shuffles. */
static inline __attribute__((always_inline)) float CT__N(ct__hmax)(VF v) {
#if CT__VL >= 16
  v = CT__N(ct__vmax)(v, CT__SHUF(VI, v, CT__XOR(8)));
#endif
#if CT__VL >= 8
  v = CT__N(ct__vmax)(v, CT__SHUF(VI, v, CT__XOR(4)));
#endif
  v = CT__N(ct__vmax)(v, CT__SHUF(VI, v, CT__XOR(2)));
  v = CT__N(ct__vmax)(v, CT__SHUF(VI, v, CT__XOR(1)));
  return v[0];
}

static inline __attribute__((always_inline)) float CT__N(ct__hsum)(VF v) {
#if CT__VL >= 16
  v += CT__SHUF(VI, v, CT__XOR(8));
#endif
#if CT__VL >= 8
  v += CT__SHUF(VI, v, CT__XOR(4));
#endif
  v += CT__SHUF(VI, v, CT__XOR(2));
  v += CT__SHUF(VI, v, CT__XOR(1));
  return v[0];
}

/* exp(x) for x <= 0 (scores minus their maximum): kernels/common.cl's ct_expf (Cody-Waite
 * reduction, Cephes' polynomial) without fma, and with results below exp(-87) (1.6e-38, against
 * the row maximum's 1) flushed to 0: a subnormal product costs Intel cores a microcode assist of
 * over a hundred cycles, and the masked lanes of every causal row had one. NaN lanes stay NaN
 * (the comparison below is false for them); -inf gives 0. */
static inline __attribute__((always_inline)) VF CT__N(ct__vexp_neg)(VF x) {
  VI lo = x < -87.0f;
  VF xc = CT__N(ct__vsel)(lo, (VF){0} - 87.0f, x);
  VF t = xc * 1.44269504088896341f + 12582912.0f;
  VF k = t - 12582912.0f;
  VF r = xc - k * 0.693145751953125f;
  r = r - k * 1.428606765330187045e-06f;
  VF p = (VF){0} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  /* k in [-126, 0], and r > 0 where k = -126: the product is a normal number. */
  VI ki = (VI)t - 0x4B400000;
  VF y = p * (VF)((ki + 127) << 23);
  return (VF)(~lo & (VI)y);
}

static inline __attribute__((always_inline)) VF CT__N(ct__vload)(const float *p) {
  VF v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline __attribute__((always_inline)) void CT__N(ct__vstore)(float *p, VF v) { memcpy(p, &v, sizeof v); }

/* Softmax of each of the L rows of P (S apart) in place, over its first n_i keys (i + 1 with
 * causal, else S; the rest set to 0), as kernels/attention.cl's sdpa_softmax: a row whose
 * maximum is -inf becomes zeros. The scale is already in P (the product's alpha). The keys are
 * taken CT__VL at a time, the last step masked (keys past n_i read as -inf, written back as 0)
 * where it stays inside the row; the horizontal maximum and sum are shuffles. Per row, the
 * fixed costs were most of the time with scalar reductions and tails. */
static inline __attribute__((always_inline)) void CT__N(ct__softmax_rows_body)(float *P, int64_t L, int64_t S,
                                                                              bool causal) {
  const VF lane = {CT__XOR(0)};
  const VF ninf = (VF){0} - INFINITY;
  for (int64_t i = 0; i < L; i++) {
    float *row = P + i * S;
    int64_t n = causal ? (i + 1 < S ? i + 1 : S) : S;
    int64_t up = (n + CT__VL - 1) / CT__VL * CT__VL, nw = up <= S ? up : n / CT__VL * CT__VL;
    VF nf = (VF){0} + (float)n, mv_ = ninf;
    for (int64_t j = 0; j < nw; j += CT__VL) {
      VF s = CT__N(ct__vsel)((lane + (float)j) < nf, CT__N(ct__vload)(row + j), ninf);
      CT__N(ct__vstore)(row + j, s);
      mv_ = CT__N(ct__vmax)(mv_, s);
    }
    float m = CT__N(ct__hmax)(mv_);
    for (int64_t j = nw; j < n; j++) m = row[j] > m ? row[j] : m;
    if (m == -INFINITY) {
      /* Every key masked (zeros) or NaN (a row of NaN, as PyTorch's). */
      bool nan = false;
      for (int64_t j = 0; j < n; j++) nan |= row[j] != row[j];
      for (int64_t j = 0; j < S; j++) row[j] = nan && j < n ? NAN : 0.0f;
      continue;
    }
    VF mv = (VF){0} + m, sumv_ = {0};
    for (int64_t j = 0; j < nw; j += CT__VL) {
      VF e = CT__N(ct__vexp_neg)(CT__N(ct__vload)(row + j) - mv);
      CT__N(ct__vstore)(row + j, e);
      sumv_ += e;
    }
    float sum = CT__N(ct__hsum)(sumv_);
    for (int64_t j = nw; j < n; j++) {
      float e = CT__N(ct__vexp_neg)((VF){0} + (row[j] - m))[0];
      row[j] = e;
      sum += e;
    }
    VF inv = (VF){0} + 1.0f / sum;
    for (int64_t j = 0; j < nw; j += CT__VL) CT__N(ct__vstore)(row + j, CT__N(ct__vload)(row + j) * inv);
    for (int64_t j = nw; j < n; j++) row[j] *= inv[0];
    for (int64_t j = nw > n ? nw : n; j < S; j++) row[j] = 0;
  }
}

#undef CT__XOR
#undef VI
#undef VF
