/* ct_conv2d and ct_conv1d (kernels/conv.cl).
 *
 * The GEMM path: for a few images at a time, conv_im2col unfolds x into a column buffer of
 * [nimg, groups, K = Cin/groups * kh * kw, P = OH * OW] (compute dtype), then one batched GEMM
 * out[n, g] (Cout/groups x P) = w[g] (Cout/groups x K) @ col[n, g] (K x P) runs on the device's
 * GEMM route (src/linalg/: OpenBLAS on the buffers' memory on PoCL, CLBlast elsewhere), writing
 * straight into the output for f32/f64. f16/bf16 are unfolded to f32 and the product converted
 * (and the bias added) by conv_finish. The chunk of images is as many as keep the column buffer
 * within ct__nn_col_bytes (64 MiB) (at least one image), so memory stays bounded whatever the batch.
 * The direct path (conv_direct) serves convolutions with few products per output element
 * (depthwise, K <= 16), where unfolding would cost more than the arithmetic. The blocked path
 * (conv_blocked) serves stride-1 f32/f16/bf16 convolutions on CPU devices: a register-blocked
 * kernel over a zero-padded f32 copy of x, faster there than unfolding plus the host BLAS
 * (docs/PERFORMANCE.md, "Convolution"). conv_run picks; tests force each path
 * (ct__nn_conv_path). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "linalg/linalg.h"
#include "nn/nn.h"
#include "tensor/graph.h"

int64_t ct__nn_col_bytes = (int64_t)64 << 20;
int ct__nn_conv_path = CT__CONV_AUTO;

ct_status ct__conv_check(struct ct__conv *cv, const ct_tensor *x4, const ct_tensor *w, const ct_tensor *bias,
                            const int stride[2], const int padding[2], const int dilation[2], int groups,
                            bool one_d) {
  const char *fn = cv->fn;
  char sx[160], sw[160];
  CT__TRY(ct__check_same_device(fn, "x", x4, "w", w));
  if (bias) CT__TRY(ct__check_same_device(fn, "x", x4, "bias", bias));
  CT__TRY(ct__nn_check_float(fn, "x", x4));
  if (w->dtype != x4->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: w has dtype %s but x has %s", fn, ct_dtype_name(w->dtype),
                     ct_dtype_name(x4->dtype));
  if (bias && bias->dtype != x4->dtype)
    return ct__error(CT_ERR_DTYPE_MISMATCH, "%s: bias has dtype %s but x has %s", fn, ct_dtype_name(bias->dtype),
                     ct_dtype_name(x4->dtype));
  if (w->ndim != 4)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: w must be %s, got %s", fn,
                     one_d ? "3-D [Cout, Cin / groups, k]" : "4-D [Cout, Cin / groups, kh, kw]",
                     ct__shape_str(sw, sizeof sw, w->ndim, w->shape));
  if (groups < 1) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: groups must be >= 1, got %d", fn, groups);
  cv->N = x4->shape[0];
  cv->C = x4->shape[1];
  cv->H = x4->shape[2];
  cv->W = x4->shape[3];
  cv->Cout = w->shape[0];
  cv->kh = w->shape[2];
  cv->kw = w->shape[3];
  cv->groups = groups;
  if (cv->C % groups != 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: groups %d does not divide x's %lld input channels", fn, groups,
                     (long long)cv->C);
  if (cv->Cout % groups != 0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: groups %d does not divide w's %lld output channels (w.shape[0])",
                     fn, groups, (long long)cv->Cout);
  /* Every size formed from the caller's shapes and arguments below is checked arithmetic: an
   * empty w may have any other dims (w [0, 2^40, 1, 2^62]), an expanded x huge ones. */
  int64_t cin;
  if (__builtin_mul_overflow(w->shape[1], (int64_t)groups, &cin))
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "%s: x has %lld channels but w expects w.shape[1] * groups = %lld * %d, which overflows int64",
                     fn, (long long)cv->C, (long long)w->shape[1], groups);
  if (cin != cv->C)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: x has %lld channels but w expects %lld (w.shape[1] * groups)", fn,
                     (long long)cv->C, (long long)cin);
  if (bias && (bias->ndim != 1 || bias->shape[0] != cv->Cout))
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: bias must be [%lld] (w.shape[0]), got %s", fn,
                     (long long)cv->Cout, ct__shape_str(sx, sizeof sx, bias->ndim, bias->shape));
  int s[2] = {1, 1}, p[2] = {0, 0}, dl[2] = {1, 1};
  if (stride) memcpy(s, stride, sizeof s);
  if (padding) memcpy(p, padding, sizeof p);
  if (dilation) memcpy(dl, dilation, sizeof dl);
  /* conv1d passes its one value as index 1 (the width). */
  int first = one_d ? 1 : 0;
  for (int i = first; i < 2; i++) {
    if (s[i] < 1) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: stride[%d] must be >= 1, got %d", fn, i - first, s[i]);
    if (p[i] < 0) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: padding[%d] must be >= 0, got %d", fn, i - first, p[i]);
    if (dl[i] < 1)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dilation[%d] must be >= 1, got %d", fn, i - first, dl[i]);
  }
  if (cv->kh < 1 || cv->kw < 1)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: w's kernel size must be >= 1, got %s", fn,
                     ct__shape_str(sw, sizeof sw, w->ndim - first, w->shape + first));
  cv->sh = s[0];
  cv->sw = s[1];
  cv->ph = p[0];
  cv->pw = p[1];
  cv->dh = dl[0];
  cv->dw = dl[1];
  /* The dilated kernel extents dilation * (k - 1) + 1 and the padded input sizes. An extent
   * past int64 exceeds every input; a padded size past it is too large for any kernel. */
  int64_t eh, ew, ih, iw;
  bool eh_over = __builtin_mul_overflow((int64_t)cv->dh, cv->kh - 1, &eh) || __builtin_add_overflow(eh, 1, &eh);
  bool ew_over = __builtin_mul_overflow((int64_t)cv->dw, cv->kw - 1, &ew) || __builtin_add_overflow(ew, 1, &ew);
  if (__builtin_add_overflow(cv->H, 2 * (int64_t)cv->ph, &ih) || __builtin_add_overflow(cv->W, 2 * (int64_t)cv->pw, &iw))
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: x %s padded by %s (%d, %d) overflows int64", fn,
                     ct__shape_str(sx, sizeof sx, x4->ndim, x4->shape), first ? "padding" : "padding[0..1]", cv->ph,
                     cv->pw);
  if (eh_over || ew_over) {
    int over = ew_over ? 1 : 0;
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "%s: the dilated kernel size dilation[%d] * (k - 1) + 1 = %d * (%lld - 1) + 1 overflows int64, "
                     "larger than any input",
                     fn, over - first, over ? cv->dw : cv->dh, (long long)(over ? cv->kw : cv->kh));
  }
  if (eh > ih || ew > iw) {
    if (first)
      return ct__error(CT_ERR_SHAPE_MISMATCH,
                       "%s: the padded input length %lld is smaller than the dilated kernel size %lld", fn,
                       (long long)iw, (long long)ew);
    return ct__error(CT_ERR_SHAPE_MISMATCH,
                     "%s: the padded input size (%lld x %lld) is smaller than the dilated kernel size "
                     "(%lld x %lld)",
                     fn, (long long)ih, (long long)iw, (long long)eh, (long long)ew);
  }
  cv->OH = (ih - eh) / cv->sh + 1;
  cv->OW = (iw - ew) / cv->sw + 1;
  /* The kernels index in int: every size, and the padded input (whose coordinates
   * oh * stride - pad + ki * dilation they form, below ih), must fit one. */
  if (cv->OH > INT32_MAX || cv->OW > INT32_MAX || cv->H > INT32_MAX || cv->W > INT32_MAX || cv->C > INT32_MAX ||
      cv->Cout > INT32_MAX || cv->kh > INT32_MAX || cv->kw > INT32_MAX)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: sizes beyond 2^31 - 1 per dim are not supported (x %s)", fn,
                     ct__shape_str(sx, sizeof sx, x4->ndim, x4->shape));
  if (ih > INT32_MAX || iw > INT32_MAX)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: the padded input size (%lld x %lld) is beyond 2^31 - 1 per dim, which is not supported "
                     "(x %s, padding %d, %d)",
                     fn, (long long)ih, (long long)iw, ct__shape_str(sx, sizeof sx, x4->ndim, x4->shape), cv->ph,
                     cv->pw);
  /* The paths (forward and backward) form the unfolded input of an image, up to C * kh * kw rows
   * by OH * OW columns (in bytes up to 8 per element), and sizes from it: it must fit int64 (only
   * expanded operands, which take no memory, come near). */
  int64_t rows, cols, col_bytes;
  if (__builtin_mul_overflow(cv->C, cv->kh * cv->kw, &rows) || __builtin_mul_overflow(cv->OH, cv->OW, &cols) ||
      __builtin_mul_overflow(rows, cols, &col_bytes) || __builtin_mul_overflow(col_bytes, (int64_t)8, &col_bytes))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: the unfolded input (%lld channels x %lld x %lld kernel by %lld x %lld outputs) does not "
                     "fit int64 (x %s)",
                     fn, (long long)cv->C, (long long)cv->kh, (long long)cv->kw, (long long)cv->OH, (long long)cv->OW,
                     ct__shape_str(sx, sizeof sx, x4->ndim, x4->shape));
  return CT_OK;
}

void ct__conv_karg_xgeom(struct ct__kargs *a, const ct_tensor *x4, const struct ct__conv *cv) {
  ct__karg_tensor(a, "x", x4, 0);
  cl_long4 xs = {{x4->strides[0], x4->strides[1], x4->strides[2], x4->strides[3]}};
  ct__karg(a, "xs", sizeof xs, &xs);
  ct__karg_int(a, "C", (cl_int)cv->C);
  ct__karg_int(a, "H", (cl_int)cv->H);
  ct__karg_int(a, "W", (cl_int)cv->W);
}

void ct__conv_karg_window(struct ct__kargs *a, const struct ct__conv *cv) {
  ct__karg_int(a, "kh", (cl_int)cv->kh);
  ct__karg_int(a, "kw", (cl_int)cv->kw);
  ct__karg_int(a, "sth", cv->sh);
  ct__karg_int(a, "stw", cv->sw);
  ct__karg_int(a, "ph", cv->ph);
  ct__karg_int(a, "pw", cv->pw);
  ct__karg_int(a, "dh", cv->dh);
  ct__karg_int(a, "dw", cv->dw);
  ct__karg_int(a, "OH", (cl_int)cv->OH);
  ct__karg_int(a, "OW", (cl_int)cv->OW);
}

static ct_status conv_direct(ct_device *d, const struct ct__conv *cv, const ct_tensor *x4, const ct_tensor *wc,
                             const ct_tensor *bias, ct_tensor *out) {
  ct__kernel *k;
  CT__TRY(ct__kernel_for(&k, d, "conv.cl", "conv_direct", (int)x4->dtype, NULL, cv->fn));
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  ct__conv_karg_xgeom(&a, x4, cv);
  ct__karg_tensor(&a, "w", wc, 0);
  ct__karg_tensor(&a, "bias", bias, 0);
  ct__karg_int(&a, "has_bias", bias != NULL);
  ct__karg_tensor(&a, "out", out, 0);
  ct__karg_int(&a, "Cout", (cl_int)cv->Cout);
  ct__karg_int(&a, "groups", cv->groups);
  ct__conv_karg_window(&a, cv);
  ct__karg_long(&a, "N", cv->N);
  return ct__nn_launch3(k, &a, d, cv->OH * cv->OW, cv->Cout, cv->N, cv->fn);
}

ct_status ct__conv_gemm_state(struct ct__gemm_state **s, ct_device *d, const char *fn) {
  CT__TRY(ct__gemm_state(s, d));
  if ((*s)->route_status != CT_OK) return ct__error((*s)->route_status, "%s: %s", fn, (*s)->route_error);
  if ((*s)->route == CT__ROUTE_CLBLAST) ct__gemm_tuning_ready(*s, d);
  return CT_OK;
}

void ct__conv_gemm_op(struct ct__gemm_op *op, const char *fn, ct_dtype dt, int64_t m, int64_t n, int64_t k,
                      double beta) {
  memset(op, 0, sizeof *op);
  op->fn = fn;
  op->dtype = dt;
  op->m = m;
  op->n = n;
  op->k = k;
  op->alpha = 1;
  op->beta = beta;
}

ct_status ct__conv_gemm(struct ct__gemm_state *s, ct_device *d, struct ct__gemm_op *op) {
  ct__gemm_simplify_batch(op);
  return s->route == CT__ROUTE_HOST ? ct__gemm_host(d, op) : ct__gemm_clblast(d, s, op);
}

ct_status ct__conv_im2col(ct__kernel *kcol, ct_device *d, const struct ct__conv *cv, const ct_tensor *x4, int64_t n0,
                          int64_t nimg, const ct_tensor *col, int64_t is, int64_t rs) {
  struct ct__kargs a;
  ct__kargs_begin(&a, kcol, ct__kernel_lock(kcol));
  ct__conv_karg_xgeom(&a, x4, cv);
  ct__conv_karg_window(&a, cv);
  ct__karg_long(&a, "n0", n0);
  ct__karg_int(&a, "nimg", (cl_int)nimg);
  ct__karg_tensor(&a, "col", col, 0);
  ct__karg_long(&a, "is", is);
  ct__karg_long(&a, "rs", rs);
  return ct__launch1(kcol, &a, d, nimg * cv->C * cv->kh * cv->kw * cv->OH, 0, cv->fn);
}

/* The GEMM path (see the top of the file). wc is contiguous, of the compute dtype. */
static ct_status conv_gemm(ct_device *d, const struct ct__conv *cv, const ct_tensor *x4, const ct_tensor *wc,
                           const ct_tensor *bias, ct_tensor *out) {
  const char *fn = cv->fn;
  struct ct__gemm_state *s;
  CT__TRY(ct__conv_gemm_state(&s, d, fn));
  ct_dtype cdt = wc->dtype;
  bool direct_out = cdt == out->dtype;
  int64_t g = cv->groups, og = cv->Cout / g, K = cv->C / g * cv->kh * cv->kw, P = cv->OH * cv->OW;
  int64_t per_img = cv->C * cv->kh * cv->kw * P * (int64_t)ct_dtype_size(cdt);
  int64_t chunk = per_img > 0 ? ct__nn_col_bytes / per_img : cv->N;
  if (chunk < 1) chunk = 1;
  if (chunk > cv->N) chunk = cv->N;
  ct__kernel *kcol, *kfin = NULL;
  CT__TRY(ct__kernel_for(&kcol, d, "conv.cl", "conv_im2col", (int)x4->dtype, NULL, fn));
  if (!direct_out || bias) CT__TRY(ct__kernel_for(&kfin, d, "conv.cl", "conv_finish", (int)x4->dtype, NULL, fn));
  ct_tensor *col = NULL, *acc = NULL;
  int64_t cshape[3] = {chunk, cv->C * cv->kh * cv->kw, P};
  ct_status st = ct__tensor_new(&col, d, cdt, 3, cshape, fn);
  int64_t ashape[3] = {chunk, cv->Cout, P};
  if (st == CT_OK && !direct_out) st = ct__tensor_new(&acc, d, cdt, 3, ashape, fn);
  int64_t col_off = 0, w_off = 0, out_off = 0, acc_off = 0;
  if (st == CT_OK) {
    ct__tensor_elem_offset(col, &col_off);
    ct__tensor_elem_offset(wc, &w_off);
    ct__tensor_elem_offset(out, &out_off);
    if (acc) ct__tensor_elem_offset(acc, &acc_off);
  }
  for (int64_t n0 = 0; st == CT_OK && n0 < cv->N; n0 += chunk) {
    int64_t nimg = cv->N - n0 < chunk ? cv->N - n0 : chunk;
    st = ct__conv_im2col(kcol, d, cv, x4, n0, nimg, col, cv->C * cv->kh * cv->kw * P, P);
    if (st != CT_OK) break;

    struct ct__gemm_op op;
    ct__conv_gemm_op(&op, fn, cdt, og, P, K, 0);
    op.nbatch = 2;
    op.bshape[0] = nimg;
    op.bshape[1] = g;
    op.a = (struct ct__gemm_mat){.mem = ct__tensor_mem(wc), .off = w_off, .ld = K, .trans = false};
    op.a.bstride[0] = 0;
    op.a.bstride[1] = og * K;
    op.b = (struct ct__gemm_mat){.mem = ct__tensor_mem(col), .off = col_off, .ld = P, .trans = false};
    op.b.bstride[0] = g * K * P;
    op.b.bstride[1] = K * P;
    if (direct_out)
      op.c = (struct ct__gemm_mat){.mem = ct__tensor_mem(out), .off = out_off + n0 * cv->Cout * P, .ld = P};
    else
      op.c = (struct ct__gemm_mat){.mem = ct__tensor_mem(acc), .off = acc_off, .ld = P};
    op.c.bstride[0] = cv->Cout * P;
    op.c.bstride[1] = og * P;
    st = ct__conv_gemm(s, d, &op);
    if (st != CT_OK || !kfin) continue;

    struct ct__kargs a;
    int64_t total = nimg * cv->Cout * P;
    ct__kargs_begin(&a, kfin, ct__kernel_lock(kfin));
    ct__karg_tensor(&a, "acc", direct_out ? out : acc, direct_out ? n0 * cv->Cout * P : 0);
    ct__karg_tensor(&a, "out", out, n0 * cv->Cout * P);
    ct__karg_tensor(&a, "bias", bias, 0);
    ct__karg_int(&a, "has_bias", bias != NULL);
    ct__karg_int(&a, "Cout", (cl_int)cv->Cout);
    ct__karg_long(&a, "P", P);
    ct__karg_long(&a, "total", total);
    st = ct__launch1(kfin, &a, d, total, 0, fn);
  }
  ct_release(col);
  ct_release(acc);
  return st;
}

void ct__conv_tall(struct ct__tall *tl, int64_t H, int64_t W, int ph, int pw, int64_t OH, int64_t OW, int64_t nimg) {
  /* At least OH rows and OW columns, so that every output has its own position; at least ph zero
   * rows and pw zero columns after each image's rows and each row's values, the padding below
   * and right of them and above and left of the next. */
  tl->S = W + pw > OW ? W + pw : OW;
  tl->Rimg = H + ph > OH ? H + ph : OH;
  tl->cs = (ph + nimg * tl->Rimg) * tl->S + pw + 16;
}

ct_status ct__conv_pad(ct__kernel *k, ct_device *d, const ct_tensor *t4, int ph, int pw, const struct ct__tall *tl,
                       int64_t n0, int64_t nimg, const ct_tensor *dst, int64_t tail_n, float tail_v,
                       const char *fn) {
  /* Whole images per work-item up to 4096 floats, else blocks of rows of about that. */
  int64_t S = tl->S, R = tl->Rimg;
  int64_t rb = R * S <= 4096 ? R : S >= 4096 ? 1 : 4096 / S;
  int64_t nrb = (R + rb - 1) / rb, planes = nimg * t4->shape[1];
  struct ct__kargs a;
  ct__kargs_begin(&a, k, ct__kernel_lock(k));
  ct__karg_tensor(&a, "x", t4, 0);
  cl_long4 xs = {{t4->strides[0], t4->strides[1], t4->strides[2], t4->strides[3]}};
  ct__karg(&a, "xs", sizeof xs, &xs);
  ct__karg_int(&a, "C", (cl_int)t4->shape[1]);
  ct__karg_int(&a, "H", (cl_int)t4->shape[2]);
  ct__karg_int(&a, "W", (cl_int)t4->shape[3]);
  ct__karg_int(&a, "ph", ph);
  ct__karg_int(&a, "pw", pw);
  ct__karg_int(&a, "Rimg", (cl_int)R);
  ct__karg_int(&a, "S", (cl_int)S);
  ct__karg_long(&a, "cs", tl->cs);
  ct__karg_long(&a, "n0", n0);
  ct__karg_int(&a, "nimg", (cl_int)nimg);
  ct__karg_tensor(&a, "xp", dst, 0);
  ct__karg_int(&a, "rb", (cl_int)rb);
  ct__karg_int(&a, "nrb", (cl_int)nrb);
  ct__karg_long(&a, "tail_n", tail_n);
  ct__karg_float(&a, "tail_v", tail_v);
  /* Groups of 16: a few hundred work-items of a plane each still fill every core. */
  return ct__launch1(k, &a, d, planes * nrb, 16, fn);
}

/* The blocked direct path (kernels/conv.cl, "the blocked direct path"): stride 1, f32/f16/bf16
 * on CPU devices. */
int ct__conv_lanes = 0;

/* Accumulators and the vectors of one step within the vector registers, with none spilled:
 * AVX-512 (32 registers of 16 floats): 8 channels x 3 vectors (24), 8 x 3 for the weight
 * gradient; AVX2, SSE, NEON (16 registers): 6 channels x 2 vectors (12, plus 2 loads and a
 * broadcast) and 4 x 3. AVX-512's blocking on AVX2 spilled: its 24 float16 accumulators are 48
 * ymm registers (the digits CNN's convolutions ran 3x slower than PyTorch's). */
void ct__conv_blocking(struct ct__conv_blocking *b, const ct_device *d) {
  int lanes = ct__conv_lanes ? ct__conv_lanes : (int)d->float_lanes;
  if (lanes >= 16) *b = (struct ct__conv_blocking){.vl = 16, .cb = 8, .nv = 3, .wcb = 8, .wtb = 3};
  else *b = (struct ct__conv_blocking){.vl = lanes >= 8 ? 8 : 4, .cb = 6, .nv = 2, .wcb = 4, .wtb = 3};
  /* conv.cl's defaults are AVX-512's blocking: no options then, so that conv_blk, conv_wpack
   * and conv_wgrad come from the program of conv_pad and conv_wflip, which the same step uses,
   * rather than from a second build of conv.cl (0.17 s of a new process's first step, issue #30). */
  if (b->vl == 16 && b->cb == 8 && b->nv == 3 && b->wcb == 8 && b->wtb == 3) {
    b->opts[0] = '\0';
    return;
  }
  snprintf(b->opts, sizeof b->opts, "-DCT_VL=%d -DCT_CB=%d -DCT_NV=%d -DCT_WCB=%d -DCT_WTB=%d", b->vl, b->cb, b->nv,
           b->wcb, b->wtb);
}

/* The most positions a blocking's work-item covers (8 x 3 x 16: 48). */
#define CT__PB_MAX 48

int64_t ct__conv_blocked_slack(const struct ct__conv *cv, const struct ct__tall *tl) {
  /* The last block's vector loads run past the last channel's images by at most this many
   * floats (past cs: the channel's slack is at least 16). */
  return CT__PB_MAX + ((int64_t)cv->kh - 1) * cv->dh * tl->S + ((int64_t)cv->kw - 1) * cv->dw;
}

/* *wt (new) = wc (contiguous [Cout, C / groups, kh, kw]) packed by conv_wpack; with flip, wc is
 * the weight of the conv whose input gradient cv is, packed flipped and transposed (conv.cl). */
static ct_status blocked_pack(ct_tensor **wt, ct_device *d, const struct ct__conv *cv, const ct_tensor *wc,
                              bool flip) {
  const char *fn = cv->fn;
  struct ct__conv_blocking bl;
  ct__conv_blocking(&bl, d);
  int64_t g = cv->groups, og = cv->Cout / g, cg = cv->C / g, ncb = (og + bl.cb - 1) / bl.cb;
  ct__kernel *kpack;
  CT__TRY(ct__kernel_for(&kpack, d, "conv.cl", "conv_wpack", (int)wc->dtype, bl.opts, fn));
  int64_t wts[1] = {g * ncb * cg * cv->kh * cv->kw * bl.cb};
  CT__TRY(ct__tensor_new(wt, d, CT_F32, 1, wts, fn));
  struct ct__kargs a;
  ct__kargs_begin(&a, kpack, ct__kernel_lock(kpack));
  ct__karg_tensor(&a, "w", wc, 0);
  ct__karg_int(&a, "Cg", (cl_int)cg);
  ct__karg_int(&a, "kh", (cl_int)cv->kh);
  ct__karg_int(&a, "kw", (cl_int)cv->kw);
  ct__karg_int(&a, "og", (cl_int)og);
  ct__karg_int(&a, "ncb", (cl_int)ncb);
  ct__karg_tensor(&a, "wt", *wt, 0);
  ct__karg_long(&a, "total", wts[0]);
  ct__karg_int(&a, "flip", flip);
  return ct__launch1(kpack, &a, d, wts[0] / ((int64_t)cv->kh * cv->kw * bl.cb), 16, fn);
}

/* conv_blk over images n0 .. n0 + nimg of the conv of cv, padded into xp (layout tl). */
static ct_status blocked_launch(ct_device *d, const struct ct__conv *cv, const ct_tensor *xp,
                                const struct ct__tall *tl, const ct_tensor *wt, const ct_tensor *bias, ct_tensor *out,
                                int64_t n0, int64_t nimg) {
  const char *fn = cv->fn;
  struct ct__conv_blocking bl;
  ct__conv_blocking(&bl, d);
  int64_t g = cv->groups, og = cv->Cout / g, cg = cv->C / g, ncb = (og + bl.cb - 1) / bl.cb, pb = bl.nv * bl.vl;
  ct__kernel *kblk;
  CT__TRY(ct__kernel_for(&kblk, d, "conv.cl", "conv_blk", (int)out->dtype, bl.opts, fn));
  /* Position blocks over the chunk's images together (a block may span two or more). */
  int64_t npb = (nimg * tl->Rimg * tl->S + pb - 1) / pb;
  int64_t items = g * ncb * npb;
  struct ct__kargs a;
  ct__kargs_begin(&a, kblk, ct__kernel_lock(kblk));
  ct__karg_tensor(&a, "xp", xp, 0);
  ct__karg_long(&a, "cs", tl->cs);
  ct__karg_int(&a, "Cg", (cl_int)cg);
  ct__karg_int(&a, "S", (cl_int)tl->S);
  ct__karg_int(&a, "Rimg", (cl_int)tl->Rimg);
  ct__karg_tensor(&a, "wt", wt, 0);
  ct__karg_int(&a, "kh", (cl_int)cv->kh);
  ct__karg_int(&a, "kw", (cl_int)cv->kw);
  ct__karg_int(&a, "dh", cv->dh);
  ct__karg_int(&a, "dw", cv->dw);
  ct__karg_tensor(&a, "bias", bias, 0);
  ct__karg_int(&a, "has_bias", bias != NULL);
  ct__karg_tensor(&a, "out", out, 0);
  ct__karg_int(&a, "Cout", (cl_int)cv->Cout);
  ct__karg_int(&a, "og", (cl_int)og);
  ct__karg_int(&a, "ncb", (cl_int)ncb);
  ct__karg_int(&a, "groups", (cl_int)g);
  ct__karg_int(&a, "OH", (cl_int)cv->OH);
  ct__karg_int(&a, "OW", (cl_int)cv->OW);
  ct__karg_int(&a, "npb", (cl_int)npb);
  ct__karg_long(&a, "n0", n0);
  ct__karg_int(&a, "nimg", (cl_int)nimg);
  ct__karg_long(&a, "items", items);
  ct_status st = ct__kargs_end(&a, fn);
  if (st == CT_OK) {
    /* Each work-item is a long register-blocked loop: small fixed groups (one PoCL compile)
     * spread them over the cores. */
    size_t local = 8, global = ((size_t)items + local - 1) / local * local;
    st = ct__kernel_launch(kblk, d, 1, &global, &local);
  }
  ct__kernel_unlock(kblk);
  return st;
}

static ct_status conv_blocked(ct_device *d, const struct ct__conv *cv, const ct_tensor *x4, const ct_tensor *wc,
                              const ct_tensor *bias, ct_tensor *out) {
  const char *fn = cv->fn;
  struct ct__tall tl;
  ct__conv_tall(&tl, cv->H, cv->W, cv->ph, cv->pw, cv->OH, cv->OW, 1);
  int64_t per_img = cv->C * tl.Rimg * tl.S * 4;
  int64_t chunk = ct__nn_col_bytes / (per_img > 0 ? per_img : 1);
  if (chunk < 1) chunk = 1;
  if (chunk > cv->N) chunk = cv->N;
  ct__conv_tall(&tl, cv->H, cv->W, cv->ph, cv->pw, cv->OH, cv->OW, chunk);
  int64_t slack = ct__conv_blocked_slack(cv, &tl);
  ct__kernel *kpad;
  CT__TRY(ct__kernel_for(&kpad, d, "conv.cl", "conv_pad", (int)x4->dtype, NULL, fn));
  ct_tensor *xp = NULL, *wt = NULL;
  int64_t xps[1] = {cv->C * tl.cs + slack};
  ct_status st = ct__tensor_new(&xp, d, CT_F32, 1, xps, fn);
  if (st == CT_OK) st = blocked_pack(&wt, d, cv, wc, false);
  for (int64_t n0 = 0; st == CT_OK && n0 < cv->N; n0 += chunk) {
    int64_t nimg = cv->N - n0 < chunk ? cv->N - n0 : chunk;
    st = ct__conv_pad(kpad, d, x4, cv->ph, cv->pw, &tl, n0, nimg, xp, slack, 0, fn);
    if (st == CT_OK) st = blocked_launch(d, cv, xp, &tl, wt, bias, out, n0, nimg);
  }
  ct_release(xp);
  ct_release(wt);
  return st;
}

ct_status ct__conv_blocked_padded(ct_tensor **out, const struct ct__conv *cv, const ct_tensor *xp,
                                  const struct ct__tall *tl, const ct_tensor *w4, bool flip, ct_dtype dt) {
  const char *fn = cv->fn;
  ct_device *d = xp->storage->device;
  int64_t oshape[4] = {cv->N, cv->Cout, cv->OH, cv->OW};
  ct_tensor *o = NULL, *wc = NULL, *wt = NULL;
  CT__TRY(ct__tensor_new(&o, d, dt, 4, oshape, fn));
  ct_status st = ct__contiguous(&wc, w4, w4->dtype, 0, fn);
  if (st == CT_OK) st = blocked_pack(&wt, d, cv, wc, flip);
  if (st == CT_OK && cv->N > 0) st = blocked_launch(d, cv, xp, tl, wt, NULL, o, 0, cv->N);
  ct_release(wc);
  ct_release(wt);
  return ct__tensor_result(out, o, st);
}

int ct__conv_path(const struct ct__conv *cv, ct_dtype dt, const ct_device *d) {
  int64_t K = cv->C / cv->groups * cv->kh * cv->kw;
  int path = ct__nn_conv_path;
  if (path == CT__CONV_AUTO) {
    bool blocked_fits = cv->sh == 1 && cv->sw == 1 && dt != CT_F64 && ct__device_chunked(d);
    if (blocked_fits && cv->Cout / cv->groups >= 8) path = CT__CONV_BLOCKED;
    else if (K <= 16 || cv->C / cv->groups == 1) path = CT__CONV_DIRECT;
    else if (blocked_fits) path = CT__CONV_BLOCKED;
    else path = CT__CONV_GEMM;
  }
  if (path == CT__CONV_BLOCKED && (cv->sh != 1 || cv->sw != 1 || dt == CT_F64)) path = CT__CONV_GEMM;
  return path;
}

/* x4 is [N, C, H, W] (a view for unbatched and 1-D inputs), w4 [Cout, C/g, kh, kw]. */
ct_status ct__conv_run(ct_tensor **out, const struct ct__conv *cv, const ct_tensor *x4, const ct_tensor *w4,
                          const ct_tensor *bias) {
  const char *fn = cv->fn;
  ct_device *d = x4->storage->device;
  /* The GEMM routes take buffers: other threads' recorded work on them goes first. */
  CT__TRY(ct__tensors_deferred_use(fn, 3, (const ct_tensor *const[]){x4, w4, bias}));
  int64_t oshape[4] = {cv->N, cv->Cout, cv->OH, cv->OW};
  ct_tensor *o = NULL;
  CT__TRY(ct__tensor_new(&o, d, x4->dtype, 4, oshape, fn));
  if (ct_numel(o) == 0) {
    *out = o;
    return CT_OK;
  }
  int path = ct__conv_path(cv, x4->dtype, d);
  /* w contiguous (a copy when it is a view: it is small); for the GEMM path of the compute
   * dtype (f32 for f16/bf16). */
  ct_dtype cdt = path != CT__CONV_GEMM || x4->dtype == CT_F64 ? x4->dtype : CT_F32;
  ct_tensor *wc = NULL, *bc = NULL;
  ct_status st = ct__contiguous(&wc, w4, cdt, 0, fn);
  if (st == CT_OK && bias) st = ct__contiguous(&bc, bias, x4->dtype, 0, fn);
  if (st == CT_OK) {
    if (path == CT__CONV_DIRECT) st = conv_direct(d, cv, x4, wc, bc, o);
    else if (path == CT__CONV_BLOCKED) st = conv_blocked(d, cv, x4, wc, bc, o);
    else st = conv_gemm(d, cv, x4, wc, bc, o);
  }
  ct_release(wc);
  ct_release(bc);
  return ct__tensor_result(out, o, st);
}

ct_status ct__nn_conv1d_view4(ct_tensor **out, const ct_tensor *t) {
  bool batched = t->ndim == 3;
  int b = batched ? 1 : 0;
  int64_t shape[4] = {batched ? t->shape[0] : 1, t->shape[b], 1, t->shape[b + 1]};
  int64_t strides[4] = {batched ? t->strides[0] : 0, t->strides[b], 0, t->strides[b + 1]};
  return ct__tensor_view(out, t, 4, shape, strides, t->offset);
}

/* Records the conv's backward (src/autograd/grad_conv.c) on its result o: x and w saved (the
 * weight gradient reads x, the input gradient w) and the geometry (ct__rec_conv). */
static ct_status conv_record(ct_tensor *o, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                             const struct ct__conv *cv, bool one_d) {
  ct__node *n = NULL;
  CT__TRY(ct__grad_record(&n, o, CT__GOP_CONV, 0, 3, (const ct_tensor *[]){x, w, bias}, cv->fn));
  if (!n) return CT_OK;
  ct__rec_conv *rec = ct__rec_CONV(n);
  *rec = (ct__rec_conv){.stride = {cv->sh, cv->sw},
                        .padding = {cv->ph, cv->pw},
                        .dilation = {cv->dh, cv->dw},
                        .groups = cv->groups,
                        .one_d = one_d};
  CT__TRY(ct__grad_save_as(n, &rec->x, x, cv->fn));
  return ct__grad_save_as(n, &rec->w, w, cv->fn);
}

static ct_status conv2d_impl(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                             const int stride[2], const int padding[2], const int dilation[2], int groups) {
  const char *fn = "ct_conv2d";
  struct ct__conv cv = {.fn = fn};
  ct_tensor *x4 = NULL, *o = NULL;
  CT__TRY(ct__nn_batched4(&x4, x, fn));
  ct_status st = ct__conv_check(&cv, x4, w, bias, stride, padding, dilation, groups, false);
  if (st == CT_OK) st = ct__conv_run(&o, &cv, x4, w, bias);
  if (st == CT_OK && x->ndim == 3) st = ct__nn_unbatch(&o);
  if (st == CT_OK) st = conv_record(o, x, w, bias, &cv, false);
  ct_release(x4);
  return ct__tensor_result(out, o, st);
}

/* stride, padding and dilation as the 2-d form's: {1, s}, {0, p}, {1, d}. */
static ct_status conv1d_impl(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                             const int stride[2], const int padding[2], const int dilation[2], int groups) {
  const char *fn = "ct_conv1d";
  char s1[160];
  if (x->ndim != 3 && x->ndim != 2)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: x must be 3-D [N, C, L] or 2-D [C, L], got %s", fn,
                     ct__shape_str(s1, sizeof s1, x->ndim, x->shape));
  if (w->ndim != 3)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: w must be 3-D [Cout, Cin / groups, k], got %s", fn,
                     ct__shape_str(s1, sizeof s1, w->ndim, w->shape));
  /* [N, C, L] as [N, C, 1, L]; w [Cout, Cin/g, k] as [Cout, Cin/g, 1, k]. */
  ct_tensor *x4 = NULL, *w4 = NULL, *o = NULL;
  ct_status st = ct__nn_conv1d_view4(&x4, x);
  if (st == CT_OK) st = ct__nn_conv1d_view4(&w4, w);
  struct ct__conv cv = {.fn = fn};
  if (st == CT_OK) st = ct__conv_check(&cv, x4, w4, bias, stride, padding, dilation, groups, true);
  if (st == CT_OK) st = ct__conv_run(&o, &cv, x4, w4, bias);
  if (st == CT_OK) {
    /* [N, Cout, 1, OL] -> [N, Cout, OL] (or [Cout, OL]). */
    int64_t os[3] = {cv.N, cv.Cout, cv.OW}, ost[3] = {o->strides[0], o->strides[1], o->strides[3]};
    ct_tensor *v = NULL;
    st = x->ndim == 3 ? ct__tensor_view(&v, o, 3, os, ost, o->offset)
                      : ct__tensor_view(&v, o, 2, os + 1, ost + 1, o->offset);
    ct_release(o);
    o = v;
  }
  if (st == CT_OK) st = conv_record(o, x, w, bias, &cv, true);
  ct_release(x4);
  ct_release(w4);
  return ct__tensor_result(out, o, st);
}

/* Autocast (ct_autocast_set_dtype, torch.autocast's lower-precision list): x, w and bias of dtype
 * f32, f16 or bf16 are cast (recorded casts, so gradients flow back in their dtypes) to the
 * policy's dtype; f64 is left alone, as PyTorch's autocast leaves double tensors. c[] gets the
 * tensors to use (new references, NULL where the input is NULL). */
static ct_status conv_autocast(ct_tensor *c[3], const ct_tensor *const in[3], const char *fn) {
  ct_dtype ad = ct__autocast_dtype();
  for (int i = 0; i < 3; i++) {
    if (!in[i]) continue;
    ct_dtype dt = ad != CT_F32 && in[i]->dtype != CT_F64 ? ad : in[i]->dtype;
    CT__TRY(ct__autocast_to(&c[i], in[i], dt, fn));
  }
  return CT_OK;
}

/* ct_conv2d and ct_conv1d (one_d): the argument checks and autocast both do, then the form's own
 * implementation. */
static ct_status conv_api(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                          const int stride[2], const int padding[2], const int dilation[2], int groups, bool one_d) {
  const char *fn = one_d ? "ct_conv1d" : "ct_conv2d";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, x);
  CT__CHECK_NOT_NULL(fn, w);
  ct_tensor *c[3] = {NULL, NULL, NULL};
  ct_status st = conv_autocast(c, (const ct_tensor *[]){x, w, bias}, fn);
  if (st == CT_OK)
    st = (one_d ? conv1d_impl : conv2d_impl)(out, c[0], c[1], c[2], stride, padding, dilation, groups);
  for (int i = 0; i < 3; i++) ct_release(c[i]);
  return st;
}

ct_status ct_conv2d(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                    const int stride[2], const int padding[2], const int dilation[2], int groups) {
  return conv_api(out, x, w, bias, stride, padding, dilation, groups, false);
}

ct_status ct_conv1d(ct_tensor **out, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias, int stride,
                    int padding, int dilation, int groups) {
  return conv_api(out, x, w, bias, (const int[2]){1, stride}, (const int[2]){0, padding}, (const int[2]){1, dilation},
                  groups, true);
}
