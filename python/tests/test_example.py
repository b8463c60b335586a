"""python/examples/quickstart.py runs (a short training) and reaches a sensible loss."""
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
