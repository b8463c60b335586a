#!/usr/bin/env python3
# Makes examples/data/charlm.safetensors for examples/charlm.c: a GPT-style character model
# trained with PyTorch on the Zen of Python (the `this` module, which ships with every Python 3),
# its weights, its vocabulary, a fixed batch of token ids with PyTorch's logits on it, and a
# prompt with PyTorch's greedy continuation.
#
# Rerun (PyTorch from PyPI in a virtualenv; CPU only: 600 steps, about 5 CPU-minutes, so 2-3
# minutes on 2 idle cores):
#
#   python3 -m venv venv && venv/bin/pip install torch numpy safetensors
#   venv/bin/python examples/make_charlm.py [OUT]        (default examples/data/charlm.safetensors)
#
# (On the project's build machine /work/venv is such a virtualenv.)
#
# Model (GPT-2's structure, PyTorch's layouts: linear weight [out, in]):
#   x = wte[ids] + wpe[0:T]                               [B, T, C]    C = 64
#   2 blocks:  x = x + attn.proj(causal_attention(ln1(x)))           H = 4 heads of 16
#              x = x + mlp.proj(gelu_tanh(mlp.fc(ln2(x))))             fc: C -> 4C
#   logits = ln_f(x) @ wte^T                              [B, T, V]    (tied output head)
# attn.qkv maps C -> 3C: q, k, v are its outputs [0, C), [C, 2C), [2C, 3C); each splits into
# heads as [B, T, H, C/H] -> [B, H, T, C/H] (head h is columns [h*16, h*16+16)); the heads'
# outputs are put back in the same order before attn.proj. Layer norms use eps 1e-5.
#
# Tensors: the weights (f32; names as above, blocks "h.0." and "h.1."), "vocab" (i64 [V], the
# Unicode code point of each token id), "batch.ids" (i64 [B, T]) and "batch.logits" (f32
# [B, T, V], PyTorch's f32 logits), "prompt.ids" (i64), "greedy.ids" (i64, PyTorch's greedy
# continuation, each step on the last CONTEXT tokens at positions 0...), "greedy.margin" (f32, the
# top-1 minus top-2 logit of each step). The metadata has the same texts and the tolerances.
#
# Greedy decoding is reproducible by another correct implementation only if no step is a near
# tie: another f32 implementation rounds differently (by about 1e-6 relative here). The script
# keeps the first candidate prompt whose smallest step margin, relative to the largest logit of
# that step, is at least MIN_REL_MARGIN (100x the 1e-4 relative tolerance of the logits), and
# fails if none is.
#
# f16/bf16: PyTorch runs the same model with its weights cast to f16 and bf16 (CPU); its error
# against its own f32 logits (max |difference| / max |f32 logit| over the batch) is stored as
# "torch_f16_rel_err" / "torch_bf16_rel_err", and the tolerance the C example applies to its own
# low-precision run, "tol_f16" / "tol_bf16", is LOWP_FACTOR times that: a different but correct
# order of roundings lands within a few times PyTorch's own error, a wrong kernel (a lost head, a
# missing scale) far outside it.
import contextlib
import io
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

SEED = 0
C, H, LAYERS, CONTEXT = 64, 4, 2, 64
STEPS, BATCH, LR = 600, 32, 3e-3
BATCH_OFFSETS = [0, 150, 300, 450, 600, 750]  # the fixed batch: windows of CONTEXT characters
GENERATE = 100
PROMPTS = ["Although never is often better than ", "Special cases aren't special enough ",
           "There should be one-- and preferably ", "Beautiful is better than "]
MIN_REL_MARGIN = 1e-2
LOWP_FACTOR = 4.0


def zen_text():
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return "".join(this.d.get(ch, ch) for ch in this.s)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fc_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class CharGPT(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, C)
        self.wpe = nn.Embedding(CONTEXT, C)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(C)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for blk in self.h:
            x = blk(x)
        return F.linear(self.ln_f(x), self.wte.weight)


# The state dict's names, as the C example reads them.
def weight_names():
    names = ["wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"]
    for i in range(LAYERS):
        for p in ("ln1", "qkv", "proj", "ln2", "fc", "fc_proj"):
            names += ["h.%d.%s.weight" % (i, p), "h.%d.%s.bias" % (i, p)]
    return names


def numpy_forward(w, ids):
    """A second implementation (float64) from the saved tensors: checks the head split order,
    the causal mask, the tanh GELU and the tied head that the C example relies on."""
    def ln(x, p):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    b, t = ids.shape
    x = w["wte.weight"][ids] + w["wpe.weight"][:t]
    causal = np.tril(np.ones((t, t), dtype=bool))
    for i in range(LAYERS):
        p = "h.%d." % i
        qkv = lin(ln(x, p + "ln1"), p + "qkv")
        q, k, v = (qkv[..., j * C:(j + 1) * C].reshape(b, t, H, C // H).transpose(0, 2, 1, 3) for j in range(3))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(C // H)
        s = np.where(causal, s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        x = x + lin(a.transpose(0, 2, 1, 3).reshape(b, t, C), p + "proj")
        hdn = lin(ln(x, p + "ln2"), p + "fc")
        hdn = 0.5 * hdn * (1 + np.tanh(math.sqrt(2 / math.pi) * (hdn + 0.044715 * hdn ** 3)))
        x = x + lin(hdn, p + "fc_proj")
    return ln(x, "ln_f") @ w["wte.weight"].T


def greedy(model, prompt_ids, steps):
    ids, margins = list(prompt_ids), []
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.tensor([ids[-CONTEXT:]]))[0, -1]
            top = logits.topk(2).values
            margins.append((float(top[0] - top[1]), float(logits.abs().max())))
            ids.append(int(logits.argmax()))
    return ids[len(prompt_ids):], margins


def rel_err(a, ref):
    return float((a.double() - ref.double()).abs().max() / ref.double().abs().max())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "charlm.safetensors")
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    text = zen_text()
    chars = sorted(set(text))
    index = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([index[ch] for ch in text], dtype=torch.int64)
    print("text: the Zen of Python, %d characters, vocabulary %d" % (len(text), len(chars)), file=sys.stderr)

    model = CharGPT(len(chars))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, STEPS)
    gen = torch.Generator().manual_seed(SEED)
    for step in range(1, STEPS + 1):
        starts = torch.randint(0, len(data) - CONTEXT, (BATCH,), generator=gen)
        xb = torch.stack([data[s:s + CONTEXT] for s in starts])
        yb = torch.stack([data[s + 1:s + CONTEXT + 1] for s in starts])
        loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 100 == 0:
            print("step %d: loss %.4f" % (step, loss.item()), file=sys.stderr)
    model.eval()

    batch = torch.stack([data[s:s + CONTEXT] for s in BATCH_OFFSETS])
    with torch.no_grad():
        logits = model(batch)
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    assert sorted(sd) == sorted(weight_names()), sorted(sd)
    ref = numpy_forward({k: v.double().numpy() for k, v in sd.items()}, batch.numpy())
    err = float(np.abs(ref - logits.double().numpy()).max() / np.abs(ref).max())
    print("NumPy float64 re-implementation vs PyTorch f32: max relative difference %.3g" % err, file=sys.stderr)
    if err > 1e-5:
        sys.exit("the NumPy re-implementation disagrees with PyTorch")

    lowp = {}
    for name, dt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        m = CharGPT(len(chars))
        m.load_state_dict(sd)
        m = m.to(dt).eval()
        with torch.no_grad():
            lowp[name] = rel_err(m(batch).float(), logits)
        print("PyTorch %s weights vs f32: max relative difference %.3g" % (name, lowp[name]), file=sys.stderr)

    chosen = None
    for prompt in PROMPTS:
        cont, margins = greedy(model, [index[ch] for ch in prompt], GENERATE)
        rel = min(m / mx for m, mx in margins)
        print("prompt %r: min margin %.4g (relative %.4g)" % (prompt, min(m for m, _ in margins), rel), file=sys.stderr)
        if rel >= MIN_REL_MARGIN:
            chosen = (prompt, cont, margins, rel)
            break
    if chosen is None:
        sys.exit("no prompt gives a greedy continuation without near ties")
    prompt, cont, margins, rel = chosen
    cont_text = "".join(chars[i] for i in cont)
    print("greedy continuation of %r:\n%s" % (prompt, cont_text), file=sys.stderr)

    tensors = dict(sd)
    tensors["vocab"] = torch.tensor([ord(ch) for ch in chars], dtype=torch.int64)
    tensors["batch.ids"] = batch.contiguous()
    tensors["batch.logits"] = logits.contiguous()
    tensors["prompt.ids"] = torch.tensor([index[ch] for ch in prompt], dtype=torch.int64)
    tensors["greedy.ids"] = torch.tensor(cont, dtype=torch.int64)
    tensors["greedy.margin"] = torch.tensor([m for m, _ in margins], dtype=torch.float32)
    save_file(tensors, out, metadata={
        "description": "GPT-style character model on the Zen of Python: %d layers, d_model %d, %d heads, context %d, "
                       "GELU(tanh) MLP, tied head" % (LAYERS, C, H, CONTEXT),
        "made_by": "examples/make_charlm.py (PyTorch %s, seed %d, %d steps)" % (torch.__version__, SEED, STEPS),
        "layers": str(LAYERS), "d_model": str(C), "heads": str(H), "context": str(CONTEXT),
        "ln_eps": "1e-05",
        "prompt": prompt,
        "greedy": cont_text,
        "greedy_min_margin": "%.6g" % min(m for m, _ in margins),
        "greedy_min_rel_margin": "%.6g" % rel,
        "f32_rel_tol": "1e-4",
        "torch_f16_rel_err": "%.6g" % lowp["f16"],
        "torch_bf16_rel_err": "%.6g" % lowp["bf16"],
        "tol_f16": "%.6g" % (LOWP_FACTOR * lowp["f16"]),
        "tol_bf16": "%.6g" % (LOWP_FACTOR * lowp["bf16"]),
    })
    os.chmod(out, 0o644)
    print("wrote %s (%d bytes)" % (out, os.path.getsize(out)), file=sys.stderr)


if __name__ == "__main__":
    main()
