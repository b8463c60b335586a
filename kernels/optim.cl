/* Training kernels (src/optim/): the fused optimizer updates, the pieces of gradient clipping
 * and the gradient scaler's unscale-and-check. One program per parameter dtype (-DCT_IN: f16,
 * bf16, f32, f64); f16/bf16 compute in f32 and round once when storing (as PyTorch's fused
 * optimizers), f64 in double.
 *
 * Exactness. Each update repeats the operations torch.optim's single-tensor path makes, in the
 * same order and with the same roundings on its f32 CPU kernels (checked bit by bit against
 * PyTorch 2.15): `x.add(y, alpha=a)` and lerp are fused multiply-adds there (Vectorized fmadd),
 * `addcmul(s, a, b, value=c)` is fma(c * a, b, s), `addcdiv(s, a, b, value=c)` is
 * s + (c * a) / b with no fusion, and every other operation rounds on its own. FP_CONTRACT is
 * off so that the compiler fuses nothing else; the scalars arrive already rounded to the
 * compute type, as PyTorch's CPU kernels round them.
 *
 * Geometry: a parameter, its gradient and its (contiguous) state share one iteration space, the
 * host's collapsed shape with one long8 of strides each; element i of the launch is at
 * ct_offset(i) in each (one multiply when the host merged everything into one dim). */
//#include "acc_types.cl"
#pragma OPENCL FP_CONTRACT OFF

inline long optim_at(long i, int ndim, long8 shape, long8 st) {
  return ndim == 1 ? i * st.s0 : ct_offset(i, ndim, shape, st);
}

/* torch.optim.SGD (dampening 0): g += wd * p; buf = first ? g : buf * momentum + g;
 * g = nesterov ? g + momentum * buf : buf; p -= lr * g. momentum 0: no buffer (buf unused). */
__kernel void optim_sgd(__global io_t *p, long p_off, __global const io_t *g, long g_off, __global io_t *buf,
                        long b_off, int ndim, long8 shape, long8 p_st, long8 g_st, long8 b_st, long n,
                        acc_t neg_lr, acc_t momentum, acc_t wd, int first, int nesterov) {
  long i = get_global_id(0);
  if (i >= n) return;
  long pi = p_off + optim_at(i, ndim, shape, p_st);
  acc_t pv = LOADA(p, pi);
  acc_t gv = LOADA(g, g_off + optim_at(i, ndim, shape, g_st));
  if (wd != 0) gv = fma(wd, pv, gv);
  if (momentum != 0) {
    long bi = b_off + optim_at(i, ndim, shape, b_st);
    acc_t b = first ? gv : LOADA(buf, bi) * momentum + gv;
    STOREA(buf, bi, b);
    gv = nesterov ? fma(momentum, b, gv) : b;
  }
  STOREA(p, pi, fma(neg_lr, gv, pv));
}

/* torch.optim.Adam / AdamW (amsgrad off) for one step t; the host computed, in double as
 * PyTorch does, decay = 1 - lr * wd (AdamW; 1 for none), wd (Adam's coupled decay; 0 for none),
 * w1 = 1 - beta1, w2 = 1 - beta2, neg_step = -lr / (1 - beta1^t), bc2_sqrt = (1 - beta2^t)^0.5:
 *   p *= decay;  g += wd * p;  m = lerp(m, g, w1);  v = v * beta2 + w2 * g * g;
 *   p += (neg_step * m) / (sqrt(v) / bc2_sqrt + eps). */
__kernel void optim_adam(__global io_t *p, long p_off, __global const io_t *g, long g_off, __global io_t *m,
                         long m_off, __global io_t *v, long v_off, int ndim, long8 shape, long8 p_st, long8 g_st,
                         long8 s_st, long n, acc_t decay, acc_t wd, acc_t w1, acc_t beta2, acc_t w2,
                         acc_t neg_step, acc_t bc2_sqrt, acc_t eps) {
  long i = get_global_id(0);
  if (i >= n) return;
  long pi = p_off + optim_at(i, ndim, shape, p_st);
  long si = optim_at(i, ndim, shape, s_st);
  acc_t pv = LOADA(p, pi);
  acc_t gv = LOADA(g, g_off + optim_at(i, ndim, shape, g_st));
  if (decay != 1) pv = pv * decay;
  if (wd != 0) gv = fma(wd, pv, gv);
  acc_t mv = LOADA(m, m_off + si), vv = LOADA(v, v_off + si);
  /* PyTorch's lerp: the weight's side decides which end the fma starts from. */
  acc_t d = gv - mv;
  mv = fabs(w1) < (acc_t)0.5 ? fma(w1, d, mv) : fma(w1 - (acc_t)1, d, gv);
  vv = fma(w2 * gv, gv, vv * beta2);
  acc_t den = sqrt(vv) / bc2_sqrt + eps;
  pv = pv + (neg_step * mv) / den;
  STOREA(m, m_off + si, mv);
  STOREA(v, v_off + si, vv);
  STOREA(p, pi, pv);
}

/* Sums of squares of g for the 2-norm: work-group j of `groups` (fixed size, a power of two no
 * larger than 256) adds the elements j * size + l, stepping by groups * size, and writes its
 * sum to part[part_off + j] in the compute type. */
__kernel void optim_sumsq(__global const io_t *g, long g_off, int ndim, long8 shape, long8 g_st, long n,
                          __global acc_t *part, long part_off) {
  __local acc_t sh[256];
  long l = get_local_id(0), ls = get_local_size(0);
  long step = ls * get_num_groups(0);
  acc_t s = 0;
  for (long i = get_global_id(0); i < n; i += step) {
    acc_t x = LOADA(g, g_off + optim_at(i, ndim, shape, g_st));
    s = fma(x, x, s);
  }
  sh[l] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long h = ls / 2; h > 0; h /= 2) {
    if (l < h) sh[l] += sh[l + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) part[part_off + get_group_id(0)] = sh[0];
}

/* g *= coef (clipping). */
__kernel void optim_scale(__global io_t *g, long g_off, int ndim, long8 shape, long8 g_st, long n, acc_t coef) {
  long i = get_global_id(0);
  if (i >= n) return;
  long gi = g_off + optim_at(i, ndim, shape, g_st);
  STOREA(g, gi, LOADA(g, gi) * coef);
}

/* The gradient scaler's unscale (torch._amp_foreach_non_finite_check_and_unscale_): g *= inv,
 * and flag[flag_off] = 1 when an element was inf or NaN before unscaling. Every writer stores
 * the same 1, so the race is benign; the host zeroed the flag. */
__kernel void optim_unscale(__global io_t *g, long g_off, int ndim, long8 shape, long8 g_st, long n, acc_t inv,
                            __global int *flag, long flag_off) {
  long i = get_global_id(0);
  if (i >= n) return;
  long gi = g_off + optim_at(i, ndim, shape, g_st);
  acc_t x = LOADA(g, gi);
  if (!isfinite(x)) flag[flag_off] = 1;
  STOREA(g, gi, x * inv);
}
