/* The gradients of ct_conv2d and ct_conv1d (kernels/conv.cl, "Backward"), for the formula of
 * src/autograd/grad_conv.c; src/nn/nn.h says what ct__nn_conv_backward computes.
 *
 * Input gradient. For stride 1 it is itself a stride-1 convolution: of the output gradient g with
 * the weight flipped in both window dims and transposed per group (conv_wflip, or conv_wpack
 * packing it so for the blocked kernel), padded by
 * dil (k - 1) - pad (or g cropped where that is negative). It then runs on ct_conv2d's paths,
 * so on CPU devices the register-blocked kernel, as fast as the forward. Other strides (and
 * ct__nn_conv_bwd_path GEMM): the columns w^T g by one GEMM per image and group on the device's
 * GEMM route, folded back onto x by conv_col2im, a gather per element of x.
 *
 * Weight gradient. On CPU devices for stride-1 non-f64 convs, conv_wgrad: a register-blocked
 * kernel over zero-padded copies of x and g in the blocked forward's tall layout (conv_pad),
 * each work-item 8 output channels x 3 taps for a group of positions, the partial sums of
 * position groups then added in a fixed order (conv_wsum). When the input gradient runs on the
 * blocked kernel as well, g is padded once for both (gx_transposed). Elsewhere: im2col of a
 * chunk of images as [C kh kw, nimg OH OW], g's chunk transposed to [Cout, nimg, OH OW], and one
 * GEMM per group reducing over images and positions at once, accumulating over chunks (beta 1).
 *
 * Every sum has one fixed order (no atomics): the same inputs give the same bits. */
#include <string.h>

#include "cltensor/reduce.h"
#include "core/error.h"
#include "device/device.h"
#include "linalg/linalg.h"
#include "nn/nn.h"

int ct__nn_conv_bwd_path = CT__CONV_BWD_AUTO;
int64_t ct__nn_wgrad_positions = 1024;
int64_t ct__nn_wgrad_group_bytes = (int64_t)1 << 20;

/* As many images as keep per_img bytes each within ct__nn_col_bytes, at least one, at most N. */
static int64_t chunk_of(int64_t per_img, int64_t N) {
  int64_t chunk = per_img > 0 ? ct__nn_col_bytes / per_img : N;
  if (chunk < 1) chunk = 1;
  return chunk > N ? N : chunk;
}

static int64_t elem_off(const ct_tensor *t) {
  int64_t off = 0;
  ct__tensor_elem_offset(t, &off);
  return off;
}

/* *wf (new, [C, Cout / groups, kh, kw]) = cv's weight w4 flipped in both window dims and
 * transposed per group (conv_wflip). */
static ct_status wflip(ct_tensor **wf, const struct ct__conv *cv, const ct_tensor *w4) {
  const char *fn = cv->fn;
  ct_device *d = w4->storage->device;
  int64_t og = cv->Cout / cv->groups, cg = cv->C / cv->groups;
  ct__kernel *k;
  CT__TRY(ct__kernel_for(&k, d, "conv.cl", "conv_wflip", (int)w4->dtype, NULL, fn));
  ct_tensor *wc = NULL, *o = NULL;
  int64_t wfs[4] = {cv->C, og, cv->kh, cv->kw};
  ct_status st = ct__contiguous(&wc, w4, w4->dtype, 0, fn);
  if (st == CT_OK) st = ct__tensor_new(&o, d, w4->dtype, 4, wfs, fn);
  if (st == CT_OK) {
    struct ct__kargs a;
    ct__kargs_begin(&a, k, ct__kernel_lock(k));
    ct__karg_tensor(&a, "w", wc, 0);
    ct__karg_int(&a, "Cg", (cl_int)cg);
    ct__karg_int(&a, "og", (cl_int)og);
    ct__karg_int(&a, "kh", (cl_int)cv->kh);
    ct__karg_int(&a, "kw", (cl_int)cv->kw);
    ct__karg_tensor(&a, "wf", o, 0);
    ct__karg_long(&a, "total", ct_numel(o));
    st = ct__launch1(k, &a, d, ct_numel(o) / ((int64_t)cv->kh * cv->kw), 16, fn);
  }
  ct_release(wc);
  return ct__tensor_result(wf, o, st);
}

/* The input gradient of a stride-1 conv: the conv c2 of g with the flipped, transposed weight,
 * over *gv (new: g, or g cropped where the padding is negative). *wf (new) is a tensor of that
 * weight's shape and dtype, its values not yet written (wflip writes them; the blocked kernel
 * packs them from w4 directly). */
static ct_status gx_transposed_prep(struct ct__conv *c2, ct_tensor **wf, ct_tensor **gv, const struct ct__conv *cv,
                                    const ct_tensor *g4, const ct_tensor *w4) {
  const char *fn = cv->fn;
  ct_device *d = g4->storage->device;
  int64_t wfs[4] = {cv->C, cv->Cout / cv->groups, cv->kh, cv->kw};
  ct_status st = ct__tensor_new(wf, d, w4->dtype, 4, wfs, fn);
  /* Padding dil (k - 1) - pad on each side; a negative one crops g instead. */
  int pad[2], one[2] = {1, 1}, dil[2] = {cv->dh, cv->dw};
  int64_t shape[4] = {g4->shape[0], g4->shape[1], g4->shape[2], g4->shape[3]}, off = g4->offset;
  int64_t p[2] = {(int64_t)cv->dh * (cv->kh - 1) - cv->ph, (int64_t)cv->dw * (cv->kw - 1) - cv->pw};
  for (int i = 0; i < 2; i++) {
    pad[i] = p[i] >= 0 ? (int)p[i] : 0;
    if (p[i] < 0) {
      shape[2 + i] += 2 * p[i];
      off -= p[i] * g4->strides[2 + i];
    }
  }
  if (st == CT_OK) st = ct__tensor_view(gv, g4, 4, shape, g4->strides, off);
  *c2 = (struct ct__conv){.fn = fn};
  if (st == CT_OK) st = ct__conv_check(c2, *gv, *wf, NULL, one, pad, dil, cv->groups, false);
  return st;
}

/* What both GEMM routes below start from: the GEMM state of g's device, the compute dtype (g's),
 * and the geometry of a group: og output channels, K = Cg kh kw input taps (KK over all groups),
 * P output pixels an image. */
struct gemm_route {
  const char *fn;
  ct_device *d;
  struct ct__gemm_state *s;
  ct_dtype cdt;
  int64_t g, og, K, KK, P;
};

static ct_status gemm_route(struct gemm_route *r, const struct ct__conv *cv, const ct_tensor *gc) {
  r->fn = cv->fn;
  r->d = gc->storage->device;
  r->cdt = gc->dtype;
  r->g = cv->groups;
  r->og = cv->Cout / r->g;
  r->K = cv->C / r->g * cv->kh * cv->kw;
  r->KK = cv->C * cv->kh * cv->kw;
  r->P = cv->OH * cv->OW;
  return ct__conv_gemm_state(&r->s, r->d, r->fn);
}

/* The input gradient through the GEMM route: col[n, g] = w[g]^T g[n, g], then conv_col2im.
 * gc and wc are contiguous, of the compute dtype; the result has dtype xdt. */
static ct_status gx_col2im(ct_tensor **gx, const struct ct__conv *cv, const ct_tensor *gc, const ct_tensor *wc,
                           ct_dtype xdt) {
  struct gemm_route r;
  CT__TRY(gemm_route(&r, cv, gc));
  int64_t chunk = chunk_of(r.KK * r.P * (int64_t)ct_dtype_size(r.cdt), cv->N);
  ct__kernel *k;
  CT__TRY(ct__kernel_for(&k, r.d, "conv.cl", "conv_col2im", (int)xdt, NULL, r.fn));
  ct_tensor *col = NULL, *o = NULL;
  int64_t cshape[3] = {chunk, r.KK, r.P}, oshape[4] = {cv->N, cv->C, cv->H, cv->W};
  ct_status st = ct__tensor_new(&col, r.d, r.cdt, 3, cshape, r.fn);
  if (st == CT_OK) st = ct__tensor_new(&o, r.d, xdt, 4, oshape, r.fn);
  for (int64_t n0 = 0; st == CT_OK && n0 < cv->N; n0 += chunk) {
    int64_t nimg = cv->N - n0 < chunk ? cv->N - n0 : chunk;
    struct ct__gemm_op op;
    ct__conv_gemm_op(&op, r.fn, r.cdt, r.K, r.P, r.og, 0);
    op.nbatch = 2;
    op.bshape[0] = nimg;
    op.bshape[1] = r.g;
    op.a = (struct ct__gemm_mat){.mem = ct__tensor_mem(wc), .off = elem_off(wc), .ld = r.K, .trans = true};
    op.a.bstride[1] = r.og * r.K;
    op.b = (struct ct__gemm_mat){.mem = ct__tensor_mem(gc), .off = elem_off(gc) + n0 * cv->Cout * r.P, .ld = r.P};
    op.b.bstride[0] = cv->Cout * r.P;
    op.b.bstride[1] = r.og * r.P;
    op.c = (struct ct__gemm_mat){.mem = ct__tensor_mem(col), .off = elem_off(col), .ld = r.P};
    op.c.bstride[0] = r.KK * r.P;
    op.c.bstride[1] = r.K * r.P;
    st = ct__conv_gemm(r.s, r.d, &op);
    if (st != CT_OK) break;
    struct ct__kargs a;
    ct__kargs_begin(&a, k, ct__kernel_lock(k));
    ct__karg_tensor(&a, "col", col, 0);
    ct__karg_int(&a, "C", (cl_int)cv->C);
    ct__karg_int(&a, "H", (cl_int)cv->H);
    ct__karg_int(&a, "W", (cl_int)cv->W);
    ct__conv_karg_window(&a, cv);
    ct__karg_long(&a, "n0", n0);
    ct__karg_int(&a, "nimg", (cl_int)nimg);
    ct__karg_tensor(&a, "gx", o, 0);
    st = ct__launch1(k, &a, r.d, nimg * cv->C * cv->H * cv->W, 0, r.fn);
  }
  ct_release(col);
  return ct__tensor_result(gx, o, st);
}

/* The weight gradient through the GEMM route (see the top of the file). gc is contiguous, of the
 * compute dtype cdt, which the result has. */
static ct_status gw_gemm(ct_tensor **gw, const struct ct__conv *cv, const ct_tensor *gc, const ct_tensor *x4) {
  struct gemm_route r;
  CT__TRY(gemm_route(&r, cv, gc));
  int64_t chunk = chunk_of((r.KK + cv->Cout) * r.P * (int64_t)ct_dtype_size(r.cdt), cv->N);
  ct__kernel *kcol;
  CT__TRY(ct__kernel_for(&kcol, r.d, "conv.cl", "conv_im2col", (int)x4->dtype, NULL, r.fn));
  ct_tensor *col = NULL, *gt = NULL, *o = NULL;
  int64_t cshape[2] = {r.KK, chunk * r.P}, tshape[3] = {cv->Cout, chunk, r.P};
  int64_t oshape[4] = {cv->Cout, cv->C / r.g, cv->kh, cv->kw};
  ct_status st = ct__tensor_new(&col, r.d, r.cdt, 2, cshape, r.fn);
  /* One image needs no transposition: g's [Cout, P] is already the GEMM's operand. */
  if (st == CT_OK && chunk > 1) st = ct__tensor_new(&gt, r.d, r.cdt, 3, tshape, r.fn);
  if (st == CT_OK) st = ct__tensor_new(&o, r.d, r.cdt, 4, oshape, r.fn);
  for (int64_t n0 = 0; st == CT_OK && n0 < cv->N; n0 += chunk) {
    int64_t nimg = cv->N - n0 < chunk ? cv->N - n0 : chunk;
    int64_t np = nimg * r.P;
    st = ct__conv_im2col(kcol, r.d, cv, x4, n0, nimg, col, r.P, np);
    const ct_tensor *a_t = gc;
    int64_t a_off = elem_off(gc) + n0 * cv->Cout * r.P;
    if (st == CT_OK && nimg > 1) {
      /* g's images n0 .. n0 + nimg as [Cout, nimg, P]. */
      ct_tensor *src = NULL, *dst = NULL;
      int64_t sh[3] = {cv->Cout, nimg, r.P}, sst[3] = {r.P, cv->Cout * r.P, 1}, dst_st[3] = {nimg * r.P, r.P, 1};
      st = ct__tensor_view(&src, gc, 3, sh, sst, gc->offset + n0 * cv->Cout * r.P);
      if (st == CT_OK) st = ct__tensor_view(&dst, gt, 3, sh, dst_st, gt->offset);
      if (st == CT_OK) st = ct__copy(dst, src, r.fn);
      ct_release(src);
      ct_release(dst);
      a_t = gt;
      a_off = elem_off(gt);
    }
    if (st != CT_OK) break;
    struct ct__gemm_op op;
    ct__conv_gemm_op(&op, r.fn, r.cdt, r.og, r.K, np, n0 > 0 ? 1 : 0);
    op.nbatch = 1;
    op.bshape[0] = r.g;
    op.a = (struct ct__gemm_mat){.mem = ct__tensor_mem(a_t), .off = a_off, .ld = np};
    op.a.bstride[0] = r.og * np;
    op.b = (struct ct__gemm_mat){.mem = ct__tensor_mem(col), .off = elem_off(col), .ld = np, .trans = true};
    op.b.bstride[0] = r.K * np;
    op.c = (struct ct__gemm_mat){.mem = ct__tensor_mem(o), .off = elem_off(o), .ld = r.K};
    op.c.bstride[0] = r.og * r.K;
    st = ct__conv_gemm(r.s, r.d, &op);
  }
  ct_release(col);
  ct_release(gt);
  return ct__tensor_result(gw, o, st);
}

/* The blocked weight gradient (kernels/conv.cl, conv_wgrad): stride 1, f32/f16/bf16, CPU
 * devices. *gw f32 [Cout, Cg, kh, kw]; *gb f32 [Cout] too when gb is not NULL (the bias tap).
 * gp, when not NULL, holds all of g already on x's grid from element gp_off on, channels gp_cs
 * apart, with zeros up to 16 floats past the images (the input gradient's padded g: see
 * ct__nn_conv_backward); used when the batch is one chunk, else g is padded here. */
static ct_status gw_blocked(ct_tensor **gw, ct_tensor **gb, const struct ct__conv *cv, const ct_tensor *g4,
                            const ct_tensor *x4, const ct_tensor *gp, int64_t gp_off, int64_t gp_cs) {
  const char *fn = cv->fn;
  ct_device *d = x4->storage->device;
  int64_t grp = cv->groups, og = cv->Cout / grp, cg = cv->C / grp, T = cg * cv->kh * cv->kw;
  int has_bias = gb != NULL;
  struct ct__conv_blocking bl;
  ct__conv_blocking(&bl, d);
  int64_t ncb = (og + bl.wcb - 1) / bl.wcb, ntb = (T + has_bias + bl.wtb - 1) / bl.wtb;
  struct ct__tall tx, tg;
  ct__conv_tall(&tx, cv->H, cv->W, cv->ph, cv->pw, cv->OH, cv->OW, 1);
  int64_t img_pos = tx.Rimg * tx.S;
  /* Positions per work-item: enough (>= 1024) to amortize the final sums, and all of them while
   * their padded x and g stay within 1 MiB (cache-sized: one position group, written straight
   * into gw and gb); on large images the work-items running together then share a band of
   * positions in the caches. */
  int64_t pos_bytes = (cv->C + cv->Cout) * 4;
  int64_t gpos = ct__nn_wgrad_group_bytes / pos_bytes;
  if (gpos < ct__nn_wgrad_positions) gpos = ct__nn_wgrad_positions;
  int64_t vpg = (gpos + 15) / 16;
  int64_t per_img = (cv->C + 1 + cv->Cout) * img_pos * 4 + (cv->Cout * (T + 1) * 4 * img_pos) / (vpg * 16) + 1;
  int64_t chunk = chunk_of(per_img, cv->N);
  ct__conv_tall(&tx, cv->H, cv->W, cv->ph, cv->pw, cv->OH, cv->OW, chunk);
  /* g without padding on x's grid: g[n, co, oh, ow] at the position of output (oh, ow). */
  tg = tx;
  tg.cs = chunk * tx.Rimg * tx.S + 16;
  int64_t nv_max = (chunk * img_pos + 15) / 16, nig_max = (nv_max + vpg - 1) / vpg;
  bool direct = nig_max == 1 && chunk == cv->N;
  if (chunk < cv->N) gp = NULL;
  /* The ones (bias tap) after the channels; the loads of discarded positions past the last
   * channel land in them. */
  int64_t ext = ((int64_t)cv->kh - 1) * cv->dh * tx.S + ((int64_t)cv->kw - 1) * cv->dw;
  int64_t ones = nv_max * 16 + ext;
  ct__kernel *kpad, *kw, *ksum;
  CT__TRY(ct__kernel_for(&kpad, d, "conv.cl", "conv_pad", (int)x4->dtype, NULL, fn));
  CT__TRY(ct__kernel_for(&kw, d, "conv.cl", "conv_wgrad", (int)x4->dtype, bl.opts, fn));
  CT__TRY(ct__kernel_for(&ksum, d, "conv.cl", "conv_wsum", (int)x4->dtype, NULL, fn));
  ct_tensor *xp = NULL, *gq = NULL, *pw = NULL, *pb = NULL, *ow = NULL, *ob = NULL;
  int64_t xps[1] = {cv->C * tx.cs + ones}, gqs[1] = {cv->Cout * tg.cs};
  int64_t pws[1] = {nig_max * cv->Cout * T}, pbs[1] = {nig_max * cv->Cout};
  int64_t ows[4] = {cv->Cout, cg, cv->kh, cv->kw};
  ct_status st = ct__tensor_new(&xp, d, CT_F32, 1, xps, fn);
  if (st == CT_OK && !gp) st = ct__tensor_new(&gq, d, CT_F32, 1, gqs, fn);
  if (st == CT_OK) st = ct__tensor_new(&ow, d, CT_F32, 4, ows, fn);
  if (st == CT_OK && has_bias) st = ct__tensor_new(&ob, d, CT_F32, 1, &cv->Cout, fn);
  if (st == CT_OK && !direct) st = ct__tensor_new(&pw, d, CT_F32, 1, pws, fn);
  if (st == CT_OK && !direct && has_bias) st = ct__tensor_new(&pb, d, CT_F32, 1, pbs, fn);
  for (int64_t n0 = 0; st == CT_OK && n0 < cv->N; n0 += chunk) {
    int64_t nimg = cv->N - n0 < chunk ? cv->N - n0 : chunk;
    int64_t nv = (nimg * img_pos + 15) / 16, nig = (nv + vpg - 1) / vpg;
    st = ct__conv_pad(kpad, d, x4, cv->ph, cv->pw, &tx, n0, nimg, xp, ones, 1, fn);
    if (st == CT_OK && !gp) st = ct__conv_pad(kpad, d, g4, 0, 0, &tg, n0, nimg, gq, 0, 0, fn);
    if (st != CT_OK) break;
    int64_t items = nig * grp * ncb * ntb;
    struct ct__kargs a;
    ct__kargs_begin(&a, kw, ct__kernel_lock(kw));
    ct__karg_tensor(&a, "xp", xp, 0);
    ct__karg_long(&a, "xcs", tx.cs);
    ct__karg_long(&a, "ones_off", cv->C * tx.cs);
    ct__karg_int(&a, "Cg", (cl_int)cg);
    ct__karg_tensor(&a, "gq", gp ? gp : gq, gp ? gp_off : 0);
    ct__karg_long(&a, "gcs", gp ? gp_cs : tg.cs);
    ct__karg_long(&a, "nv", nv);
    ct__karg_long(&a, "vpg", vpg);
    ct__karg_int(&a, "Cout", (cl_int)cv->Cout);
    ct__karg_int(&a, "og", (cl_int)og);
    ct__karg_int(&a, "ncb", (cl_int)ncb);
    ct__karg_int(&a, "kh", (cl_int)cv->kh);
    ct__karg_int(&a, "kw", (cl_int)cv->kw);
    ct__karg_int(&a, "dh", cv->dh);
    ct__karg_int(&a, "dw", cv->dw);
    ct__karg_int(&a, "S", (cl_int)tx.S);
    ct__karg_int(&a, "groups", (cl_int)grp);
    ct__karg_int(&a, "ntb", (cl_int)ntb);
    ct__karg_int(&a, "has_bias", has_bias);
    ct__karg_tensor(&a, "pw", direct ? ow : pw, 0);
    ct__karg_tensor(&a, "pb", direct ? ob : pb, 0);
    ct__karg_long(&a, "items", items);
    /* Long register-blocked loops per work-item: small fixed groups, as conv_blk's. */
    st = ct__launch1(kw, &a, d, items, 8, fn);
    if (st != CT_OK || direct) continue;
    int64_t nw = cv->Cout * T, total = nw + (has_bias ? cv->Cout : 0);
    ct__kargs_begin(&a, ksum, ct__kernel_lock(ksum));
    ct__karg_tensor(&a, "pw", pw, 0);
    ct__karg_tensor(&a, "pb", pb, 0);
    ct__karg_int(&a, "nig", (cl_int)nig);
    ct__karg_int(&a, "acc", n0 > 0);
    ct__karg_tensor(&a, "gw", ow, 0);
    ct__karg_tensor(&a, "gb", ob, 0);
    ct__karg_long(&a, "nw", nw);
    ct__karg_long(&a, "total", total);
    st = ct__launch1(ksum, &a, d, total, 0, fn);
  }
  ct_release(xp);
  ct_release(gq);
  ct_release(pw);
  ct_release(pb);
  return ct__tensor_results(2, (ct_tensor **const[]){gw, gb}, (ct_tensor *const[]){ow, ob}, st);
}

/* *gx (new) = the input gradient of a stride-1 conv: the conv of g with the flipped, transposed
 * weight (ct__conv_run's paths). With gp not NULL, when that conv runs on the blocked kernel
 * over all of g in one chunk with a padding that is not negative, g is padded for it here
 * instead, and kept for the weight gradient: *gp (new) in the tall layout *tg, g on x's grid
 * from element *gp_off on (gw_blocked); else *gp NULL. */
static ct_status gx_transposed(ct_tensor **gx, ct_tensor **gp, struct ct__tall *tg, int64_t *gp_off,
                               const struct ct__conv *cv, const ct_tensor *g4, const ct_tensor *w4) {
  const char *fn = cv->fn;
  ct_device *d = g4->storage->device;
  struct ct__conv c2;
  ct_tensor *wf = NULL, *gv = NULL;
  ct_status st = gx_transposed_prep(&c2, &wf, &gv, cv, g4, w4);
  bool share = false;
  if (st == CT_OK && gp) {
    ct__conv_tall(tg, c2.H, c2.W, c2.ph, c2.pw, c2.OH, c2.OW, c2.N);
    bool fits = c2.C * tg->Rimg * tg->S * 4 * c2.N <= ct__nn_col_bytes;
    bool crop = (int64_t)cv->dh * (cv->kh - 1) < cv->ph || (int64_t)cv->dw * (cv->kw - 1) < cv->pw;
    share = !crop && fits && ct__conv_path(&c2, gv->dtype, d) == CT__CONV_BLOCKED;
  }
  if (st == CT_OK && share) {
    ct__kernel *kpad;
    int64_t n = c2.C * tg->cs, gps[1] = {n + ct__conv_blocked_slack(&c2, tg)};
    st = ct__kernel_for(&kpad, d, "conv.cl", "conv_pad", (int)gv->dtype, NULL, fn);
    if (st == CT_OK) st = ct__tensor_new(gp, d, CT_F32, 1, gps, fn);
    if (st == CT_OK) st = ct__conv_pad(kpad, d, gv, c2.ph, c2.pw, tg, 0, c2.N, *gp, gps[0] - n, 0, fn);
    /* w4 packed flipped and transposed: no conv_wflip. */
    if (st == CT_OK) st = ct__conv_blocked_padded(gx, &c2, *gp, tg, w4, true, gv->dtype);
    *gp_off = c2.ph * tg->S + c2.pw;
  } else if (st == CT_OK) {
    ct_tensor *w = NULL;
    st = wflip(&w, cv, w4);
    if (st == CT_OK) st = ct__conv_run(gx, &c2, gv, w, NULL);
    ct_release(w);
  }
  ct_release(wf);
  ct_release(gv);
  if (st != CT_OK && gp) {
    ct_release(*gp);
    *gp = NULL;
  }
  return st;
}

/* *t (new, contiguous) as the contiguous shape ndim/shape of the same element count. */
static ct_status reshape_to(ct_tensor **t, int ndim, const int64_t *shape) {
  int64_t strides[CT_MAX_DIMS];
  ct__contiguous_strides(strides, ndim, shape);
  ct_tensor *v = NULL;
  ct_status st = ct__tensor_view(&v, *t, ndim, shape, strides, (*t)->offset);
  ct_release(*t);
  *t = v;
  return st;
}

ct_status ct__nn_conv_backward(ct_tensor **gx, ct_tensor **gw, ct_tensor **gb, const ct_tensor *g, const ct_tensor *x,
                               const ct_tensor *w, const int stride[2], const int padding[2], const int dilation[2],
                               int groups, bool one_d, const char *fn) {
  if (gx) *gx = NULL;
  if (gw) *gw = NULL;
  if (gb) *gb = NULL;
  ct_device *d = x->storage->device;
  CT__TRY(ct__tensors_deferred_use(fn, 3, (const ct_tensor *const[]){g, x, w}));
  ct_tensor *x4 = NULL, *w4 = NULL, *g4 = NULL, *rx = NULL, *rw = NULL, *rb = NULL, *gc = NULL;
  ct_status st;
  if (one_d) {
    st = ct__nn_conv1d_view4(&x4, x);
    if (st == CT_OK) st = ct__nn_conv1d_view4(&w4, w);
    if (st == CT_OK) st = ct__nn_conv1d_view4(&g4, g);
  } else {
    st = ct__nn_batched4(&x4, x, fn);
    w4 = ct_retain((ct_tensor *)w);
    if (st == CT_OK) st = ct__nn_batched4(&g4, g, fn);
  }
  struct ct__conv cv = {.fn = fn};
  if (st == CT_OK) st = ct__conv_check(&cv, x4, w4, NULL, stride, padding, dilation, groups, one_d);
  bool empty = st == CT_OK && (ct_numel(x4) == 0 || ct_numel(g4) == 0);
  ct_dtype cdt = x->dtype == CT_F64 ? CT_F64 : CT_F32;
  bool gemm_forced = ct__nn_conv_bwd_path == CT__CONV_BWD_GEMM;
  bool gemm_path = cv.sh != 1 || cv.sw != 1 || gemm_forced;
  bool blocked_w = !gemm_path && x->dtype != CT_F64 && ct__device_chunked(d);
  bool need_gc = !empty && ((gx && gemm_path) || (gw && !blocked_w));
  if (st == CT_OK && need_gc) st = ct__contiguous(&gc, g4, cdt, 0, fn);
  /* g padded once for both gradients when the input gradient's transposed conv runs on the
   * blocked kernel: its padding dil (k - 1) - pad (when not negative) puts g on x's padded grid,
   * the weight gradient's (rows of S = W + pw, Rimg = H + ph rows an image). */
  ct_tensor *gp = NULL;
  struct ct__tall tg = {0, 0, 0};
  int64_t gp_off = 0;
  if (st == CT_OK && gx) {
    if (empty) {
      st = ct_zeros(&rx, d, x->dtype, 4, x4->shape);
    } else if (!gemm_path) {
      st = gx_transposed(&rx, gw && blocked_w ? &gp : NULL, &tg, &gp_off, &cv, g4, w4);
    } else {
      ct_tensor *wc = NULL;
      st = ct__contiguous(&wc, w4, cdt, 0, fn);
      if (st == CT_OK) st = gx_col2im(&rx, &cv, gc, wc, x->dtype);
      ct_release(wc);
    }
    if (st == CT_OK) st = reshape_to(&rx, x->ndim, x->shape);
  }
  if (st == CT_OK && gw) {
    if (empty) st = ct_zeros(&rw, d, w->dtype, 4, w4->shape);
    else if (blocked_w) st = gw_blocked(&rw, gb ? &rb : NULL, &cv, g4, x4, gp, gp_off, tg.cs);
    else st = gw_gemm(&rw, &cv, gc, x4);
    if (st == CT_OK) st = reshape_to(&rw, w->ndim, w->shape);
  }
  if (st == CT_OK && gb && !rb) {
    /* g summed over every dim but the channel's (dim 1 of g4). */
    int dims[3] = {0, 2, 3};
    st = ct_sum(&rb, g4, 3, dims, false);
  }
  ct_release(x4);
  ct_release(w4);
  ct_release(g4);
  ct_release(gc);
  ct_release(gp);
  return ct__tensor_results(3, (ct_tensor **const[]){gx, gw, gb}, (ct_tensor *const[]){rx, rw, rb}, st);
}
