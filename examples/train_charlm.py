#!/usr/bin/env python3
# Makes examples/data/train_charlm.safetensors for examples/train_charlm.c: the character
# transformer of examples/make_charlm.py with PyTorch's INITIAL weights (seed SEED), the text,
# the batch of every step, and PyTorch's loss at each of STEPS AdamW steps, in f32 and under
# torch.autocast(bfloat16).
#
# Rerun (a few CPU-minutes; PyTorch, NumPy and safetensors in a virtualenv):
#
#   venv/bin/python examples/train_charlm.py [OUT]   (default examples/data/train_charlm.safetensors)
#
# (On the project's build machine /work/venv is such a virtualenv.)
#
# Model and text: those of make_charlm.py (the Zen of Python, GPT-2's structure, 2 layers,
# d_model 64, 4 heads, context 64, tied head), imported from it. Training: AdamW (lr LR,
# weight_decay WD on every parameter, PyTorch's betas and eps), constant learning rate, batches of
# BATCH windows of CONTEXT characters whose starts torch.randint draws (stored), cross entropy
# (mean) of the next character.
#
# Tensors: the state dict's names (wte.weight, h.0.ln1.weight, ...): the initial weights (f32);
# "text" u8 [n] (token ids of the text); "starts" i16 [STEPS, BATCH] (window starts: inputs
# text[s:s+CONTEXT], targets text[s+1:s+CONTEXT+1]); "torch.losses" f32 [STEPS] (the loss of
# step s, computed before its update); "torch.bf16_losses" f32 [STEPS] (the same training under
# torch.autocast("cpu", torch.bfloat16), for reference). Metadata: the model's dimensions as
# charlm.safetensors has them, lr, weight_decay, batch, steps.
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_charlm as mc  # noqa: E402

SEED = 0
STEPS, BATCH, LR, WD = 200, 32, 1e-3, 0.01


def train(init, vocab, data, starts, autocast):
    model = mc.CharGPT(vocab)
    model.load_state_dict(init)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD)
    losses = []
    for step in range(STEPS):
        xb = torch.stack([data[s:s + mc.CONTEXT] for s in starts[step]])
        yb = torch.stack([data[s + 1:s + mc.CONTEXT + 1] for s in starts[step]])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 50 == 0:
            print("%s step %d: loss %.4f" % ("bf16" if autocast else "f32", step + 1, losses[-1]), file=sys.stderr)
    return losses


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "train_charlm.safetensors")
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    text = mc.zen_text()
    chars = sorted(set(text))
    index = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([index[ch] for ch in text], dtype=torch.int64)
    model = mc.CharGPT(len(chars))
    init = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    assert sorted(init) == sorted(mc.weight_names()), sorted(init)
    gen = torch.Generator().manual_seed(SEED)
    starts = torch.randint(0, len(data) - mc.CONTEXT, (STEPS, BATCH), generator=gen)

    losses = train(init, len(chars), data, starts.tolist(), False)
    bf16 = train(init, len(chars), data, starts.tolist(), True)
    print("final loss: f32 %.5f, bf16 autocast %.5f (%.2f%%)" % (losses[-1], bf16[-1], 100 * (bf16[-1] / losses[-1] - 1)), file=sys.stderr)

    tensors = dict(init)
    tensors["text"] = data.to(torch.uint8)
    tensors["starts"] = starts.to(torch.int16).contiguous()
    tensors["torch.losses"] = torch.tensor(losses, dtype=torch.float32)
    tensors["torch.bf16_losses"] = torch.tensor(bf16, dtype=torch.float32)
    save_file(tensors, out, metadata={
        "description": "GPT-style character model on the Zen of Python, initial weights and batches for examples/train_charlm.c",
        "made_by": "examples/train_charlm.py (PyTorch %s, seed %d)" % (torch.__version__, SEED),
        "layers": str(mc.LAYERS), "d_model": str(mc.C), "heads": str(mc.H), "context": str(mc.CONTEXT),
        "ln_eps": "1e-05",
        "lr": repr(LR), "weight_decay": repr(WD), "batch": str(BATCH), "steps": str(STEPS),
    })
    os.chmod(out, 0o644)
    print("wrote %s (%d bytes)" % (out, os.path.getsize(out)), file=sys.stderr)


if __name__ == "__main__":
    main()
