"""The examples run: quickstart.py (a short training reaching a sensible loss) and
train_digits.py (a few steps matching PyTorch's losses)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_quickstart_runs():
    script = os.path.join(HERE, "..", "examples", "quickstart.py")
    r = subprocess.run([sys.executable, script, "--steps", "60"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "device:" in r.stdout and "accuracy:" in r.stdout
    acc = float(r.stdout.rsplit("accuracy:", 1)[1])
    assert acc > 0.5, r.stdout


def test_train_digits_matches_pytorch():
    # A few steps of python/examples/train_digits.py against PyTorch's losses (the C example's
    # limits): the model, Adam, batch norm and dropout's draws as examples/train_digits.c has them.
    script = os.path.join(HERE, "..", "examples", "train_digits.py")
    r = subprocess.run([sys.executable, script, "--steps", "6", "--check", "--quiet"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 mismatches with PyTorch's losses" in r.stdout
