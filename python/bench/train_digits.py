#!/usr/bin/env python3
"""Figure of issue #32: the digits training step from Python (python/examples/train_digits.py)
against the C example's (examples/train_digits.c), in one sitting on one device.

    PYTHONPATH=build/python python3 python/bench/train_digits.py [--build build] [--reps 5]
                                                                 [--epochs 3]

(the package importable, e.g. PYTHONPATH=build/python after python/run_tests.py, under the
interpreter it was built for). Runs the two programs alternately, --reps times each, for
--epochs epochs of the fixture; the first epoch of each run is left out (kernel builds, caches
filling). A step's time is the time of its forward, backward, Adam step and loss read back (what
both programs time per epoch); the figure is the median over runs of each run's mean step time,
and the ratio Python / C. Timings are figures for docs, never test assertions."""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
HEADER = re.compile(r"(\d+) training images, batch (\d+), (\d+) steps per epoch")
EPOCH = re.compile(r"^epoch (\d+) \(step \d+\): .* ([0-9.]+) examples/s$", re.M)


def step_ms(out):
    """The mean step time in ms over the full epochs after the first."""
    n, _, spe = (int(v) for v in HEADER.search(out).groups())
    rates = [float(r) for e, r in EPOCH.findall(out) if int(e) > 1]
    if not rates:
        raise SystemExit("train_digits bench: no full epoch after the first in:\n" + out)
    # each full epoch: n examples in spe steps, at rate examples/s
    return statistics.mean(1e3 * n / r / spe for r in rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    fixture = os.path.join(ROOT, "examples", "data", "train_digits.safetensors")
    cmds = {"C (examples/train_digits.c)": [os.path.join(args.build, "examples", "train_digits"), fixture],
            "Python (python/examples/train_digits.py)": [sys.executable,
                                                         os.path.join(HERE, "..", "examples", "train_digits.py"),
                                                         fixture]}
    times = {k: [] for k in cmds}
    for _ in range(args.reps):
        for name, cmd in cmds.items():
            r = subprocess.run(cmd + ["--epochs", str(args.epochs), "--quiet"], capture_output=True, text=True)
            if r.returncode:
                raise SystemExit("%s failed:\n%s%s" % (name, r.stdout, r.stderr))
            times[name].append(step_ms(r.stdout))
    c = statistics.median(times["C (examples/train_digits.c)"])
    print("digits CNN training step (batch 64), ms, median of %d runs of %d epochs (first left out)"
          % (args.reps, args.epochs))
    for name, ts in times.items():
        m = statistics.median(ts)
        print("%-42s %7.2f ms (%.3fx)   runs: %s" % (name, m, m / c, " ".join("%.2f" % t for t in ts)))


if __name__ == "__main__":
    main()
