/* The GPT-style character model from libcltensor ops (see charlm_model.h). */
#include "charlm_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_block_names[CHARLM_NBLOCK] = {
    "ln1.weight", "ln1.bias", "qkv.weight", "qkv.bias", "proj.weight",    "proj.bias",
    "ln2.weight", "ln2.bias", "fc.weight",  "fc.bias",  "fc_proj.weight", "fc_proj.bias"};

static const char *meta(const ct_safetensors *f, const char *key) {
  const char *v = ct_safetensors_metadata_get(f, key);
  if (!v) fprintf(stderr, "charlm: the model file lacks the metadata key \"%s\"\n", key);
  return v;
}

ct_status charlm_config_read(charlm_config *c, const ct_safetensors *f) {
  memset(c, 0, sizeof *c);
  const char *layers = meta(f, "layers"), *heads = meta(f, "heads"), *d_model = meta(f, "d_model");
  const char *context = meta(f, "context"), *eps = meta(f, "ln_eps");
  if (!layers || !heads || !d_model || !context || !eps) return CT_ERR_FORMAT;
  c->layers = atoi(layers);
  c->heads = atoi(heads);
  c->d_model = atoll(d_model);
  c->context = atoll(context);
  c->eps = atof(eps);
  if (c->layers < 1 || c->layers > CHARLM_MAX_LAYERS || c->heads < 1 || c->d_model % c->heads != 0 ||
      c->context < 1) {
    fprintf(stderr, "charlm: unsupported dimensions: %d layers, %d heads, d_model %lld, context %lld\n", c->layers,
            c->heads, (long long)c->d_model, (long long)c->context);
    return CT_ERR_FORMAT;
  }
  ct_tensor *wte = NULL;
  ct_status st = ct_safetensors_get(&wte, f, "wte.weight");
  if (st == CT_OK) c->vocab = ct_tensor_shape(wte)[0];
  ct_release(wte);
  return st;
}

ct_status charlm_load(charlm *m, const ct_safetensors *f) {
  memset(m, 0, sizeof *m);
  charlm_config c;
  ct_status st = charlm_config_read(&c, f);
  if (st != CT_OK) return st;
  m->layers = c.layers;
  m->heads = c.heads;
  m->d_model = c.d_model;
  m->context = c.context;
  m->eps = c.eps;
  m->vocab = c.vocab;
  st = ct_safetensors_get(&m->wte, f, "wte.weight");
  if (st == CT_OK) st = ct_safetensors_get(&m->wpe, f, "wpe.weight");
  if (st == CT_OK) st = ct_safetensors_get(&m->ln_f_w, f, "ln_f.weight");
  if (st == CT_OK) st = ct_safetensors_get(&m->ln_f_b, f, "ln_f.bias");
  for (int l = 0; l < m->layers && st == CT_OK; l++)
    for (int i = 0; i < CHARLM_NBLOCK && st == CT_OK; i++) {
      char name[64];
      snprintf(name, sizeof name, "h.%d.%s", l, k_block_names[i]);
      st = ct_safetensors_get(&m->blk[l][i], f, name);
    }
  if (st != CT_OK) charlm_release(m);
  return st;
}

void charlm_release(charlm *m) {
  ct_release(m->wte);
  ct_release(m->wpe);
  ct_release(m->ln_f_w);
  ct_release(m->ln_f_b);
  for (int l = 0; l < CHARLM_MAX_LAYERS; l++)
    for (int i = 0; i < CHARLM_NBLOCK; i++) ct_release(m->blk[l][i]);
  m->wte = m->wpe = m->ln_f_w = m->ln_f_b = NULL;
  memset(m->blk, 0, sizeof m->blk);
}

int charlm_params(const charlm *m, ct_tensor **p, char (*names)[64]) {
  static const char *const top[4] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
  ct_tensor *const tops[4] = {m->wte, m->wpe, m->ln_f_w, m->ln_f_b};
  int n = 0;
  for (int i = 0; i < 4; i++, n++) {
    p[n] = tops[i];
    if (names) snprintf(names[n], 64, "%s", top[i]);
  }
  for (int l = 0; l < m->layers; l++)
    for (int i = 0; i < CHARLM_NBLOCK; i++, n++) {
      p[n] = m->blk[l][i];
      if (names) snprintf(names[n], 64, "h.%d.%s", l, k_block_names[i]);
    }
  return n;
}

/* One of q, k, v ([B, H, T, D], a view where the library can) from qkv [B, T, 3C]: columns
 * [which C, (which + 1) C), head h being columns [h D, (h + 1) D) of those, as PyTorch's
 * view(B, T, H, D).transpose(1, 2). */
static ct_status head_split(ct_tensor **out, const charlm *m, const ct_tensor *qkv, int which) {
  const int64_t *s = ct_tensor_shape(qkv);
  ct_tensor *cols = NULL, *heads = NULL;
  ct_status st = ct_slice(&cols, qkv, 2, which * m->d_model, (which + 1) * m->d_model, 1);
  if (st == CT_OK) st = ct_reshape(&heads, cols, 4, (int64_t[]){s[0], s[1], m->heads, m->d_model / m->heads});
  if (st == CT_OK) st = ct_transpose(out, heads, 1, 2);
  ct_release(heads);
  ct_release(cols);
  return st;
}

/* x + attention(layer_norm(x)): causal multi-head self-attention. */
static ct_status attention(ct_tensor **out, const charlm *m, ct_tensor *const *w, const ct_tensor *x) {
  const int64_t *s = ct_tensor_shape(x);
  ct_tensor *h = NULL, *qkv = NULL, *q = NULL, *k = NULL, *v = NULL, *a = NULL, *at = NULL, *ac = NULL, *p = NULL;
  ct_status st = ct_layer_norm(&h, x, 1, w[CHARLM_LN1_W], w[CHARLM_LN1_B], m->eps);
  if (st == CT_OK) st = ct_linear(&qkv, h, w[CHARLM_QKV_W], w[CHARLM_QKV_B]);
  if (st == CT_OK) st = head_split(&q, m, qkv, 0);
  if (st == CT_OK) st = head_split(&k, m, qkv, 1);
  if (st == CT_OK) st = head_split(&v, m, qkv, 2);
  /* scale NaN: 1/sqrt(D), PyTorch's default. */
  if (st == CT_OK) st = ct_scaled_dot_product_attention(&a, q, k, v, NULL, true, NAN);
  if (st == CT_OK) st = ct_transpose(&at, a, 1, 2); /* [B, T, H, D] */
  if (st == CT_OK) st = ct_reshape(&ac, at, 3, (int64_t[]){s[0], s[1], m->d_model});
  if (st == CT_OK) st = ct_linear(&p, ac, w[CHARLM_PROJ_W], w[CHARLM_PROJ_B]);
  if (st == CT_OK) st = ct_add(out, x, p);
  ct_release(p);
  ct_release(ac);
  ct_release(at);
  ct_release(a);
  ct_release(v);
  ct_release(k);
  ct_release(q);
  ct_release(qkv);
  ct_release(h);
  return st;
}

/* x + mlp(layer_norm(x)). */
static ct_status mlp(ct_tensor **out, const charlm *m, ct_tensor *const *w, const ct_tensor *x) {
  ct_tensor *h = NULL, *f = NULL, *g = NULL, *p = NULL;
  ct_status st = ct_layer_norm(&h, x, 1, w[CHARLM_LN2_W], w[CHARLM_LN2_B], m->eps);
  if (st == CT_OK) st = ct_linear(&f, h, w[CHARLM_FC_W], w[CHARLM_FC_B]);
  if (st == CT_OK) st = ct_gelu_tanh(&g, f);
  if (st == CT_OK) st = ct_linear(&p, g, w[CHARLM_FCP_W], w[CHARLM_FCP_B]);
  if (st == CT_OK) st = ct_add(out, x, p);
  ct_release(p);
  ct_release(g);
  ct_release(f);
  ct_release(h);
  return st;
}

ct_status charlm_forward(ct_tensor **logits, const charlm *m, const ct_tensor *ids) {
  const int64_t t = ct_tensor_shape(ids)[1];
  ct_tensor *e = NULL, *pos = NULL, *x = NULL, *h = NULL;
  *logits = NULL;
  ct_status st = ct_embedding(&e, m->wte, ids);
  if (st == CT_OK) st = ct_slice(&pos, m->wpe, 0, 0, t, 1);
  if (st == CT_OK) st = ct_add(&x, e, pos); /* [B, T, C] + [T, C] broadcasts */
  for (int l = 0; l < m->layers && st == CT_OK; l++) {
    ct_tensor *y = NULL;
    st = attention(&y, m, m->blk[l], x);
    ct_release(x);
    x = y;
    if (st != CT_OK) break;
    st = mlp(&y, m, m->blk[l], x);
    ct_release(x);
    x = y;
  }
  if (st == CT_OK) st = ct_layer_norm(&h, x, 1, m->ln_f_w, m->ln_f_b, m->eps);
  if (st == CT_OK) st = ct_linear(logits, h, m->wte, NULL); /* the tied head */
  ct_release(h);
  ct_release(x);
  ct_release(pos);
  ct_release(e);
  return st;
}

ct_status charlm_loss(ct_tensor **loss, const charlm *m, const ct_tensor *ids, const ct_tensor *targets) {
  ct_tensor *logits = NULL, *flat = NULL;
  ct_status st = charlm_forward(&logits, m, ids);
  if (st == CT_OK) st = ct_reshape(&flat, logits, 2, (int64_t[]){ct_numel(logits) / m->vocab, m->vocab});
  if (st == CT_OK) st = ct_cross_entropy(loss, flat, targets, -100, 0.0, CT_REDUCTION_MEAN);
  ct_release(flat);
  ct_release(logits);
  return st;
}

/* ---- The same model as modules (module.h), PyTorch's CharGPT and Block of make_charlm.py ---- */

/* Block.forward: x + proj(attention(qkv(ln1(x)))), then x + fc_proj(gelu_tanh(fc(ln2(x)))). */
static ct_status block_forward(ct_tensor **y, ct_module *self, const ct_tensor *x, void *user) {
  const int64_t heads = (int64_t)(intptr_t)user, *s = ct_tensor_shape(x), c = s[2];
  ct_tensor *h = NULL, *qkv[3] = {0}, *a = NULL, *x1 = NULL;
  ct_scope_begin(); /* a failed call makes the rest return at once: one status at the end */
  ct_module_forward(&h, ct_module_get_submodule(self, "ln1"), x);
  ct_module_forward(&h, ct_module_get_submodule(self, "qkv"), h);
  for (int i = 0; i < 3; i++) { /* [B, T, C] -> [B, H, T, D], as view(B, T, H, D).transpose(1, 2) */
    ct_slice(&qkv[i], h, 2, i * c, (i + 1) * c, 1);
    ct_reshape(&qkv[i], qkv[i], 4, (int64_t[]){s[0], s[1], heads, c / heads});
    ct_transpose(&qkv[i], qkv[i], 1, 2);
  }
  ct_scaled_dot_product_attention(&a, qkv[0], qkv[1], qkv[2], NULL, true, NAN);
  ct_transpose(&a, a, 1, 2);
  ct_reshape(&a, a, 3, s);
  ct_module_forward(&a, ct_module_get_submodule(self, "proj"), a);
  ct_add(&x1, x, a);
  ct_module_forward(&h, ct_module_get_submodule(self, "ln2"), x1);
  ct_module_forward(&h, ct_module_get_submodule(self, "fc"), h);
  ct_gelu_tanh(&h, h);
  ct_module_forward(&h, ct_module_get_submodule(self, "fc_proj"), h);
  ct_add(y, x1, h);
  return ct_scope_end_keep(y);
}

/* CharGPT.forward: wte(ids) + wpe(arange(T)), the blocks, ln_f, the tied head (wte's weight). */
static ct_status gpt_forward(ct_tensor **y, ct_module *self, const ct_tensor *ids, void *user) {
  (void)user;
  ct_tensor *x = NULL, *pos = NULL;
  ct_scope_begin();
  ct_module_forward(&x, ct_module_get_submodule(self, "wte"), ids);
  ct_slice(&pos, ct_module_get_parameter(self, "wpe.weight"), 0, 0, ct_tensor_shape(ids)[1], 1);
  ct_add(&x, x, pos); /* [B, T, C] + [T, C] broadcasts */
  ct_module_forward(&x, ct_module_get_submodule(self, "h"), x);
  ct_module_forward(&x, ct_module_get_submodule(self, "ln_f"), x);
  ct_linear(y, x, ct_module_get_parameter(self, "wte.weight"), NULL);
  return ct_scope_end_keep(y);
}

/* Adds child under name and drops the caller's reference (also when st already failed). */
static ct_status add(ct_module *m, const char *name, ct_module *child, ct_status st) {
  if (st == CT_OK) st = ct_module_add_child(m, name, child);
  ct_module_release(child);
  return st;
}

ct_status charlm_module(ct_module **out, ct_device *d, int64_t vocab, int layers, int heads, int64_t c,
                        int64_t context, double eps) {
  ct_module *m = NULL, *h = NULL, *x = NULL;
  const int64_t shape[1] = {c};
  ct_status st = ct_module_custom(&m, "CharGPT", gpt_forward, NULL, NULL);
  if (st == CT_OK) st = ct_module_embedding(&x, d, vocab, c);
  st = add(m, "wte", x, st), x = NULL;
  if (st == CT_OK) st = ct_module_embedding(&x, d, context, c);
  st = add(m, "wpe", x, st), x = NULL;
  if (st == CT_OK) st = ct_module_sequential(&h, NULL, 0); /* the ModuleList: "h.0", "h.1", ... */
  for (int l = 0; l < layers && st == CT_OK; l++) {
    ct_module *b = NULL;
    st = ct_module_custom(&b, "Block", block_forward, (void *)(intptr_t)heads, NULL);
    static const char *const names[6] = {"ln1", "qkv", "proj", "ln2", "fc", "fc_proj"};
    const int64_t outs[6] = {0, 3 * c, c, 0, 4 * c, c};
    for (int i = 0; i < 6 && st == CT_OK; i++) {
      st = outs[i] ? ct_module_linear(&x, d, i == 5 ? 4 * c : c, outs[i], true)
                   : ct_module_layer_norm(&x, d, 1, shape, eps, true, true);
      st = add(b, names[i], x, st), x = NULL;
    }
    if (st == CT_OK) st = ct_module_append(h, b);
    ct_module_release(b);
  }
  st = add(m, "h", h, st);
  if (st == CT_OK) st = ct_module_layer_norm(&x, d, 1, shape, eps, true, true);
  st = add(m, "ln_f", x, st);
  if (st != CT_OK) ct_module_release(m), m = NULL;
  *out = m;
  return st;
}

ct_status charlm_module_load(ct_module **out, charlm_config *c, ct_device *d, const ct_safetensors *f) {
  *out = NULL;
  ct_module *m = NULL;
  int np = 0;
  ct_status st = charlm_config_read(c, f);
  if (st == CT_OK) st = charlm_module(&m, d, c->vocab, c->layers, c->heads, c->d_model, c->context, c->eps);
  /* The fixtures also hold the text, the batches and PyTorch's outputs: not strictly, but every
   * parameter must have been loaded, which the report's count says. */
  if (st == CT_OK) st = ct_module_load_state_dict_from(m, f, false);
  if (st == CT_OK) st = ct_module_parameters(NULL, 0, &np, m);
  char loaded[32];
  snprintf(loaded, sizeof loaded, "loaded %d of %d", np, np);
  if (st == CT_OK && strncmp(ct_module_load_report(m), loaded, strlen(loaded)) != 0) {
    fprintf(stderr, "charlm: the file's state_dict does not fit the model: %s\n", ct_module_load_report(m));
    st = CT_ERR_FORMAT;
  }
  if (st != CT_OK) ct_module_release(m), m = NULL;
  *out = m;
  return st;
}

ct_status charlm_greedy(ct_module *m, int64_t context, ct_device *d, int64_t *ids, int64_t n, int64_t steps) {
  for (int64_t s = 0; s < steps; s++, n++) {
    const int64_t t = n < context ? n : context;
    ct_tensor *in = NULL, *next = NULL;
    ct_scope_begin();
    ct_from_host(&in, d, CT_I64, 2, (int64_t[]){1, t}, ids + n - t);
    ct_module_forward(&next, m, in);
    ct_slice(&next, next, 1, t - 1, t, 1); /* the last position's logits */
    ct_argmax(&next, next, -1, false);
    ct_to_host(next, ids + n, sizeof *ids);
    ct_status st = ct_scope_end();
    if (st != CT_OK) return st;
  }
  return CT_OK;
}
