#!/usr/bin/env python3
"""Figure of issue #32: the digits training step from Python (python/examples/train_digits.py)
against the C example's (examples/train_digits.c), in one sitting on one device.

    PYTHONPATH=build/python python3 python/bench/train_digits.py [--build build] [--reps 5]
                                                                 [--epochs 3]

(the package importable, e.g. PYTHONPATH=build/python after python/run_tests.py, under the
interpreter it was built for). Runs the two programs alternately, --reps times each, for
--epochs epochs of the fixture; the first epoch of each run is left out (kernel builds, caches
filling). Two figures per step, each the median over runs, and the ratio Python / C:
  wall  the time of a step's forward, backward, Adam step and loss read back, as both programs
        time it per epoch (each run's mean over the epochs after the first)
  cpu   the CPU time of the whole process (every thread: the device's workers too on a CPU
        device), from the kernel's accounting of the child (wait4), of a run of --epochs epochs
        less that of a run of 1 epoch, per step of the difference. It includes the test
        evaluation each epoch ends with (the same work in both programs), and is much less
        exposed than wall time to other processes on a loaded machine.
Timings are figures for docs, never test assertions."""
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


def run(cmd):
    """Runs cmd; returns its stdout and its CPU time (user + system, all threads) in seconds."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit("%s failed:\n%s%s" % (" ".join(cmd), out, err))
    return out, ru.ru_utime + ru.ru_stime


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
    wall = {k: [] for k in cmds}
    cpu = {k: [] for k in cmds}
    for _ in range(args.reps):
        for name, cmd in cmds.items():
            out, full = run(cmd + ["--epochs", str(args.epochs), "--quiet"])
            _, one = run(cmd + ["--epochs", "1", "--quiet"])
            spe = int(HEADER.search(out).group(3))
            wall[name].append(step_ms(out))
            cpu[name].append(1e3 * (full - one) / ((args.epochs - 1) * spe))
    print("digits CNN training step (batch 64), ms, median of %d runs of %d epochs (first left out)"
          % (args.reps, args.epochs))
    c_wall, c_cpu = (statistics.median(f["C (examples/train_digits.c)"]) for f in (wall, cpu))
    for name in cmds:
        w, u = statistics.median(wall[name]), statistics.median(cpu[name])
        print("%-42s wall %7.2f ms (%.3fx)  cpu %7.2f ms (%.3fx)" % (name, w, w / c_wall, u, u / c_cpu))
        print("    wall runs: %s\n    cpu runs:  %s" % (" ".join("%.2f" % t for t in wall[name]),
                                                      " ".join("%.2f" % t for t in cpu[name])))


if __name__ == "__main__":
    main()
