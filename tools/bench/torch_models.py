#!/usr/bin/env python3
"""PyTorch CPU's times for the forwards of cltensor-bench's "models" group, and the ratios.

Times the same work as tools/bench/group_models.c, from the same committed fixtures: the digits
CNN on the 450-image test split (then the argmax, to a NumPy array), and the character GPT on
its fixed batch of token ids (the logits, to a NumPy array). Inference mode, with
torch.set_num_threads(os.cpu_count()) unless --threads. With --bench PATH it then runs
`PATH --only models --json` in the same sitting and prints, per figure, cltensor's median,
PyTorch's median and the speed ratio (PyTorch's time / cltensor's: above 1 means cltensor is
faster). cltensor-bench itself runs `torch_models.py --figure NAME` before and after its own
figure when $CLTENSOR_BENCH_PYTHON names a Python with PyTorch (as the nn group runs
torch_conv.py); that prints one line, `torch_model NAME median_ms=<m> min_ms=<a> max_ms=<b>
threads=<t>`.

  /work/venv/bin/python tools/bench/torch_models.py [--bench build/tools/bench/cltensor-bench]
      [--device SPEC] [--runs N] [--threads N] [--figure digits_cnn_forward|charlm_forward]

Needs PyTorch, NumPy and safetensors (a virtualenv: pip install torch numpy safetensors
scikit-learn; the model classes come from examples/make_*.py)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import make_charlm  # noqa: E402
import make_digits_cnn  # noqa: E402


def time_ms(fn, runs, min_seconds=0.1):
    """Median (and min, max) ms per call over runs timed runs, each repeating fn for at least
    min_seconds, after a warm-up, as cltensor-bench does."""
    fn()
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_seconds:
        fn()
        reps += 1
    reps = max(reps, 1)
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t0) / reps * 1e3)
    return statistics.median(samples), min(samples), max(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", help="cltensor-bench to run in the same sitting")
    ap.add_argument("--device", help="cltensor-bench's --device")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads (default: the cores)")
    ap.add_argument("--data", default=os.path.join(ROOT, "examples", "data"))
    ap.add_argument("--figure", choices=["digits_cnn_forward", "charlm_forward"],
                    help="time this one and print it as one line, for cltensor-bench")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    cnn_file = load_file(os.path.join(args.data, "digits_cnn.safetensors"))
    cnn = make_digits_cnn.DigitsCNN()
    res = cnn.load_state_dict({k: v for k, v in cnn_file.items() if not k.startswith(("test.", "torch."))},
                              strict=False)
    # The fixture leaves out the batch norms' num_batches_tracked, which eval mode does not use.
    assert not res.unexpected_keys and all(k.endswith("num_batches_tracked") for k in res.missing_keys), res
    cnn.eval()
    x = cnn_file["test.x"]

    gpt_file = load_file(os.path.join(args.data, "charlm.safetensors"))
    gpt = make_charlm.CharGPT(gpt_file["vocab"].numel())
    gpt.load_state_dict({k: v for k, v in gpt_file.items() if k in make_charlm.weight_names()})
    gpt.eval()
    ids = gpt_file["batch.ids"]

    work = {"digits_cnn_forward": lambda: cnn(x).argmax(dim=1).numpy(), "charlm_forward": lambda: gpt(ids).numpy()}
    with torch.inference_mode():
        if args.figure:
            med, lo, hi = time_ms(work[args.figure], args.runs)
            print("torch_model %s median_ms=%.6g min_ms=%.6g max_ms=%.6g threads=%d"
                  % (args.figure, med, lo, hi, torch.get_num_threads()))
            return 0
        torch_ms = {name: time_ms(fn, args.runs) for name, fn in work.items()}
    print("PyTorch %s CPU, %d threads:" % (torch.__version__, torch.get_num_threads()))
    for name, (med, lo, hi) in torch_ms.items():
        print("  %-20s %9.3f ms (min %.3f, max %.3f)" % (name, med, lo, hi))
    if not args.bench:
        return 0

    return run_bench(args, "models", torch_ms)


def run_bench(args, group, torch_ms):
    """Runs `args.bench --only group --json` and prints each figure next to PyTorch's median
    (torch_ms: name -> (median, min, max) ms); 0 when every figure was measured."""
    cmd = [args.bench, "--only", group, "--json", "--runs", str(args.runs)]
    if args.device:
        cmd += ["--device", args.device]
    r = subprocess.run(cmd, capture_output=True, text=True)
    figs = {}
    for line in r.stdout.splitlines():
        try:
            f = json.loads(line)
        except ValueError:
            continue
        if "name" in f:
            figs[f["name"]] = f
    print("cltensor (%s):" % " ".join(cmd))
    ok = r.returncode == 0
    for name, (tmed, _, _) in torch_ms.items():
        f = figs.get(name)
        if not f or "median" not in f:
            print("  %-22s not measured: %s" % (name, (f or {}).get("error", r.stderr.strip()[-300:])))
            ok = False
            continue
        print("  %-22s %9.3f ms (min %.3f, max %.3f)   PyTorch / cltensor = %.2fx  %s"
              % (name, f["median"], f["min"], f["max"], tmed / f["median"], f.get("note", "")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
