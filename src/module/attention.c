/* MultiheadAttention (torch.nn.MultiheadAttention): PyTorch's packed input projection
 * (in_proj_weight [3E, E], in_proj_bias [3E]) and an out_proj Linear child, so that a state_dict
 * saved by PyTorch loads by name; the attention itself is ct_scaled_dot_product_attention, the
 * path PyTorch takes when no attention weights are asked for (need_weights=False). */
#include <math.h>
#include <string.h>

#include "cltensor/elementwise.h"
#include "cltensor/init.h"
#include "cltensor/linalg.h"
#include "cltensor/nn.h"
#include "core/error.h"
#include "module/module.h"

static ct_status mha_self_forward(ct_tensor **y, ct_module *m, const ct_tensor *x);

static const ct__module_kind k_mha = {"MultiheadAttention", mha_self_forward};

ct_status ct_module_multihead_attention(ct_module **out, ct_device *d, int64_t embed_dim, int64_t num_heads,
                                        double dropout, bool bias, bool batch_first) {
  static const char fn[] = "ct_module_multihead_attention";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  /* embed_dim bounded so that the packed projection's 3 * embed_dim rows cannot overflow. */
  if (embed_dim < 1 || num_heads < 1 || embed_dim % num_heads || num_heads > INT32_MAX || embed_dim > INT64_MAX / 3)
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: embed_dim = %lld must be a positive multiple of num_heads = %lld (and below 2^63 / 3)", fn,
                     (long long)embed_dim, (long long)num_heads);
  /* PyTorch drops attention weights inside its attention; the library's attention has no
   * dropout, so only PyTorch's default (0.0) is offered rather than a silently different model. */
  if (dropout != 0.0)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: dropout = %g: only 0.0 (PyTorch's default) is offered", fn,
                     dropout);
  CT__TRY(ct__module_device(&d, d, fn));
  ct_module *m, *proj = NULL;
  CT__TRY(ct__module_new(&m, &k_mha, fn));
  m->opt.heads = (int)num_heads;
  m->opt.batch_first = batch_first;
  const int64_t e = embed_dim;
  /* PyTorch's _reset_parameters: xavier_uniform_ on the packed weight, zero biases; out_proj is
   * a Linear (its weight keeps Linear's init) whose bias is then zeroed. */
  ct_tensor *w = NULL, *b = NULL;
  ct_status st = ct_empty(&w, d, CT_F32, 2, (int64_t[]){3 * e, e});
  if (st == CT_OK) st = ct_xavier_uniform_(w, 1.0);
  if (st == CT_OK) st = ct__module_own_param(m, "in_proj_weight", w, fn);
  else ct_release(w);
  if (st == CT_OK && bias) {
    st = ct_zeros(&b, d, CT_F32, 1, (int64_t[]){3 * e});
    if (st == CT_OK) st = ct__module_own_param(m, "in_proj_bias", b, fn);
  }
  if (st == CT_OK) st = ct_module_linear(&proj, d, e, e, bias);
  if (st == CT_OK && bias) st = ct_zeros_(ct__module_param(proj, "bias"));
  if (st == CT_OK) st = ct_module_add_child(m, "out_proj", proj);
  ct_module_release(proj);
  return ct__module_done(out, m, st);
}

/* [..., L, E] -> [..., H, L, D]: the heads split off the last dim and moved before the sequence. */
static ct_status split_heads(ct_tensor **out, const ct_tensor *t, int64_t heads) {
  const int nd = ct_tensor_ndim(t);
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, ct_tensor_shape(t), (size_t)nd * sizeof *shape);
  const int64_t e = shape[nd - 1];
  shape[nd - 1] = heads;
  shape[nd] = e / heads;
  ct_tensor *r = NULL;
  ct_status st = ct_reshape(&r, t, nd + 1, shape);
  if (st == CT_OK) st = ct_transpose(out, r, nd - 2, nd - 1);
  ct_release(r);
  return st;
}

/* q, k or v projected: x @ in_proj_weight[i E:(i+1) E]^T + in_proj_bias[i E:(i+1) E]. */
static ct_status project(ct_tensor **out, const ct_module *m, const ct_tensor *x, int i, int64_t e) {
  ct_tensor *w = NULL, *b = NULL, *bias = ct__module_param(m, "in_proj_bias");
  ct_status st = ct_slice(&w, ct__module_param(m, "in_proj_weight"), 0, i * e, (i + 1) * e, 1);
  if (st == CT_OK && bias) st = ct_slice(&b, bias, 0, i * e, (i + 1) * e, 1);
  if (st == CT_OK) st = ct_linear(out, x, w, b);
  ct_release(b);
  ct_release(w);
  return st;
}

static ct_status check_inputs(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, int64_t e,
                              const char *fn) {
  const int nd = ct_tensor_ndim(q);
  if (nd != 2 && nd != 3)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: query has %d dims, expected 2 (unbatched) or 3", fn, nd);
  if (ct_tensor_ndim(k) != nd || ct_tensor_ndim(v) != nd)
    return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: query, key and value have %d, %d and %d dims", fn, nd,
                     ct_tensor_ndim(k), ct_tensor_ndim(v));
  const ct_tensor *ts[3] = {q, k, v};
  for (int i = 0; i < 3; i++)
    if (ct_tensor_shape(ts[i])[nd - 1] != e)
      return ct__error(CT_ERR_SHAPE_MISMATCH, "%s: the %s's last dim is %lld, embed_dim is %lld", fn,
                       i == 0 ? "query" : i == 1 ? "key" : "value", (long long)ct_tensor_shape(ts[i])[nd - 1],
                       (long long)e);
  return CT_OK;
}

/* PyTorch's attn_mask as ct_scaled_dot_product_attention's: a bool mask is true where attending
 * is NOT allowed (the opposite of the functional op's), and a 3-d mask is [N * H, L, S]. */
static ct_status sdpa_mask(ct_tensor **out, const ct_tensor *mask, bool batched, int64_t heads) {
  ct_tensor *inv = NULL;
  ct_status st = CT_OK;
  if (ct_tensor_dtype(mask) == CT_BOOL) st = ct_logical_not(&inv, mask);
  const ct_tensor *m = inv ? inv : mask;
  if (st == CT_OK && batched && ct_tensor_ndim(m) == 3) {
    const int64_t *s = ct_tensor_shape(m);
    st = ct_reshape(out, m, 4, (int64_t[]){s[0] / heads, heads, s[1], s[2]});
  } else if (st == CT_OK) {
    *out = ct_retain((ct_tensor *)m);
  }
  ct_release(inv);
  return st;
}

ct_status ct_module_multihead_attention_forward(ct_tensor **out, ct_module *m, const ct_tensor *query,
                                                const ct_tensor *key, const ct_tensor *value,
                                                const ct_tensor *attn_mask, bool is_causal) {
  static const char fn[] = "ct_module_multihead_attention_forward";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NULL;
  CT__CHECK_NOT_NULL(fn, m);
  CT__CHECK_NOT_NULL(fn, query);
  CT__CHECK_NOT_NULL(fn, key);
  CT__CHECK_NOT_NULL(fn, value);
  if (m->kind != &k_mha)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the module is a %s, not a MultiheadAttention", fn,
                     ct_module_type_name(m));
  const ct_tensor *w = ct__module_param(m, "in_proj_weight");
  const int64_t e = ct_tensor_shape(w)[1], heads = m->opt.heads;
  CT__TRY(check_inputs(query, key, value, e, fn));
  const bool batched = ct_tensor_ndim(query) == 3, swap = batched && !m->opt.batch_first;
  const bool self_attn = query == key && key == value;
  ct_tensor *in[3] = {0}, *qkv[3] = {0}, *heads_of[3] = {0}, *packed = NULL, *mask = NULL;
  ct_tensor *attn = NULL, *merged = NULL, *flat = NULL, *o = NULL;
  ct_status st = CT_OK;
  /* batch_first=False takes [L, N, E]: computed as [N, L, E] through transposed views. */
  const ct_tensor *src[3] = {query, key, value};
  for (int i = 0; i < 3 && st == CT_OK; i++)
    st = swap ? ct_transpose(&in[i], src[i], 0, 1) : (in[i] = ct_retain((ct_tensor *)src[i]), CT_OK);
  if (self_attn) {
    /* One product for q, k and v, as PyTorch's packed projection when query is key is value. */
    if (st == CT_OK) st = ct_linear(&packed, in[0], w, ct__module_param(m, "in_proj_bias"));
    const int last = ct_tensor_ndim(query) - 1;
    for (int i = 0; i < 3 && st == CT_OK; i++) st = ct_slice(&qkv[i], packed, last, i * e, (i + 1) * e, 1);
  } else {
    for (int i = 0; i < 3 && st == CT_OK; i++) st = project(&qkv[i], m, in[i], i, e);
  }
  for (int i = 0; i < 3 && st == CT_OK; i++) st = split_heads(&heads_of[i], qkv[i], heads);
  if (st == CT_OK && attn_mask) st = sdpa_mask(&mask, attn_mask, batched, heads);
  if (st == CT_OK)
    st = ct_scaled_dot_product_attention(&attn, heads_of[0], heads_of[1], heads_of[2], mask, is_causal, NAN);
  /* [..., H, L, D] -> [..., L, H, D] -> [..., L, E]; a view when the attention's layout allows. */
  const int nd = ct_tensor_ndim(query);
  if (st == CT_OK) st = ct_transpose(&merged, attn, nd - 2, nd - 1);
  if (st == CT_OK) {
    int64_t shape[3];
    memcpy(shape, ct_tensor_shape(merged), (size_t)nd * sizeof *shape);
    shape[nd - 1] = e;
    st = ct_reshape(&flat, merged, nd, shape);
  }
  if (st == CT_OK) st = ct_module_forward(swap ? &o : out, ct_module_get_submodule(m, "out_proj"), flat);
  if (st == CT_OK && swap) st = ct_transpose(out, o, 0, 1);
  ct_release(o);
  ct_release(flat);
  ct_release(merged);
  ct_release(attn);
  ct_release(mask);
  ct_release(packed);
  for (int i = 0; i < 3; i++) {
    ct_release(in[i]);
    ct_release(qkv[i]);
    ct_release(heads_of[i]);
  }
  return st;
}

/* ct_module_forward(y, m, x): self-attention of x, without a mask (PyTorch's mha(x, x, x)). */
static ct_status mha_self_forward(ct_tensor **y, ct_module *m, const ct_tensor *x) {
  return ct_module_multihead_attention_forward(y, m, x, x, x, NULL, false);
}
