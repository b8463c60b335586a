/* The GPT-style character model of examples/make_charlm.py, built from libcltensor ops; shared
 * by the charlm example and cltensor-bench's "models" group.
 *
 * GPT-2's structure (C = d_model, H heads of D = C / H, weights in nn.Linear's [out, in]):
 *   x = wte[ids] + wpe[0:T]
 *   per block: q, k, v = split(linear(layer_norm(x), qkv), C), each [B, T, H, D] -> [B, H, T, D]
 *              x = x + linear(causal_attention(q, k, v) -> [B, T, C], proj)
 *              x = x + linear(gelu_tanh(linear(layer_norm(x), fc)), fc_proj)
 *   logits = layer_norm(x) @ wte^T (the output head is the token embedding, tied) */
#ifndef CLTENSOR_EXAMPLES_CHARLM_MODEL_H
#define CLTENSOR_EXAMPLES_CHARLM_MODEL_H

#include <stdint.h>

#include "cltensor/cltensor.h"

#define CHARLM_MAX_LAYERS 8

/* One block's tensors ("h.<layer>.<name>"). */
enum { CHARLM_LN1_W, CHARLM_LN1_B, CHARLM_QKV_W, CHARLM_QKV_B, CHARLM_PROJ_W, CHARLM_PROJ_B,
       CHARLM_LN2_W, CHARLM_LN2_B, CHARLM_FC_W, CHARLM_FC_B, CHARLM_FCP_W, CHARLM_FCP_B, CHARLM_NBLOCK };

/* The model's dimensions: a file's metadata ("layers", "heads", "d_model", "context", "ln_eps")
 * and its wte.weight's rows (vocab). */
typedef struct charlm_config {
  int layers, heads;
  int64_t d_model, context, vocab;
  double eps; /* the layer norms' */
} charlm_config;
ct_status charlm_config_read(charlm_config *c, const ct_safetensors *f);

/* The model from ops alone (the baseline cltensor-bench and cltensor-dist-bench time the
 * modules against, and their training loss); the examples use charlm_module below. */
typedef struct charlm {
  int layers, heads;
  int64_t d_model, context, vocab;
  double eps; /* the layer norms' */
  ct_tensor *wte, *wpe, *ln_f_w, *ln_f_b;
  ct_tensor *blk[CHARLM_MAX_LAYERS][CHARLM_NBLOCK];
} charlm;

/* Takes the weights from f (new references) and the dimensions from its metadata ("layers",
 * "heads", "d_model", "context", "ln_eps"). On failure (a message on stderr or in
 * ct_last_error()) *m holds nothing. */
ct_status charlm_load(charlm *m, const ct_safetensors *f);
void charlm_release(charlm *m);
/* The parameters (every weight; the head is wte itself): writes 4 + layers * CHARLM_NBLOCK
 * borrowed pointers to p (wte, wpe, ln_f weight and bias, then each block's in the enum's
 * order) and, when names is not NULL, their state-dict names; returns the count. For training:
 * mark them with ct_set_requires_grad and hand them to an optimizer. */
#define CHARLM_MAX_PARAMS (4 + CHARLM_MAX_LAYERS * CHARLM_NBLOCK)
int charlm_params(const charlm *m, ct_tensor **p, char (*names)[64]);
/* OUT: *logits [B, T, V] of token ids [B, T] (i64, T <= context), in the weights' dtype. */
ct_status charlm_forward(ct_tensor **logits, const charlm *m, const ct_tensor *ids);
/* OUT: *loss, the mean cross entropy of charlm_forward's logits of ids [B, T] against the next
 * tokens targets [B * T] (i64): the training loss of cltensor-bench and cltensor-dist-bench. */
ct_status charlm_loss(ct_tensor **loss, const charlm *m, const ct_tensor *ids, const ct_tensor *targets);
/* The same model as modules, PyTorch's CharGPT of make_charlm.py: children wte and wpe
 * (Embedding), h (a Sequential of Blocks, each ln1, qkv, proj, ln2, fc, fc_proj), ln_f, so that
 * its state_dict names are PyTorch's ("h.0.qkv.weight") and a PyTorch state_dict loads by name.
 * Forward: token ids [B, T] to logits [B, T, vocab], as charlm_forward. New module in *out, with
 * the modules' default initialization (load the weights after). */
ct_status charlm_module(ct_module **out, ct_device *d, int64_t vocab, int layers, int heads, int64_t d_model,
                        int64_t context, double eps);
/* OUT: *out, charlm_module on d with f's dimensions (in *c) and weights, loaded by name (the
 * fixtures also hold other entries, so not strictly, but every parameter must come from f). */
ct_status charlm_module_load(ct_module **out, charlm_config *c, ct_device *d, const ct_safetensors *f);
/* Greedy decoding with the module m on d: appends steps token ids to ids[0..n) (which has room
 * for n + steps), each the argmax of the last position's logits with the last `context` tokens
 * as input. */
ct_status charlm_greedy(ct_module *m, int64_t context, ct_device *d, int64_t *ids, int64_t n, int64_t steps);

#endif
