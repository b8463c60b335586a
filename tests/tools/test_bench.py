#!/usr/bin/env python3
"""cltensor-bench as CI runs it: --quick --json gives one valid figure per line covering every
group, with references and consistent ratios; --help, --version and a bad --device behave.
No speed is asserted. Usage: test_bench.py CLTENSOR_BENCH cblas|nocblas"""
import json
import math
import subprocess
import sys

bench, blas = sys.argv[1], sys.argv[2] == "cblas"
n = 0
failed = False


def check(ok, what, detail=""):
    global n, failed
    n += 1
    print(("ok" if ok else "not ok") + f" {n} - {what}")
    if not ok:
        failed = True
        for line in str(detail).splitlines()[-40:]:
            print("# " + line)


def run(*args):
    return subprocess.run([bench, *args], capture_output=True, text=True, timeout=600)


r = run("--quick", "--json")
check(r.returncode == 0, "--quick --json exits 0", r.stdout + r.stderr)
figs, bad = [], []
for line in r.stdout.splitlines():
    try:
        figs.append(json.loads(line))
    except ValueError:
        bad.append(line)
check(figs and not bad, "every stdout line is one JSON object", "\n".join(bad))

by_name = {}
problems = []
for f in figs:
    for k in ("name", "size", "shape", "dtype", "unit", "refs"):
        if k not in f:
            problems.append(f"{f.get('name')}: no '{k}'")
    by_name.setdefault(f.get("name"), []).append(f)
    if "error" in f:
        problems.append(f"{f['name']} failed: {f['error']}")
        continue
    if "skipped" in f:
        continue
    lo, med, hi = f.get("min"), f.get("median"), f.get("max")
    if not all(isinstance(v, (int, float)) and v > 0 for v in (lo, med, hi)) or not lo <= med <= hi:
        problems.append(f"{f['name']} {f['shape']}: min/median/max {lo}/{med}/{hi}")
    for ref in f["refs"]:
        want = med / ref["median"]
        if not math.isclose(ref["ratio"], want, rel_tol=1e-3):
            problems.append(f"{f['name']}: ratio {ref['ratio']} against {ref['name']}, expected {want}")
check(not problems, "figures are complete, positive, min <= median <= max, ratios consistent",
      "\n".join(problems))

expected = ["h2d.pageable", "h2d.pinned", "d2h.pageable", "d2h.pinned", "add", "mul", "exp", "sum",
            "max", "softmax", "add_chain", "add_chain_alloc", "mlp_forward", "matmul.auto",
            "matmul.clblast", "matmul.host", "matmul_batch.auto", "matmul_batch.clblast",
            "matmul_batch.host", "first_result.cold", "first_result.warm",
            "cat.dim1", "cat.dim0", "pad.constant",          # shape
            "index_select", "gather", "cumsum", "sort",      # index
            "conv2d",                                        # nn
            "digits_cnn_forward", "charlm_forward",          # models
            "digits_cnn_train_step", "charlm_train_step",    # train
            "digits_first_step.cold", "digits_first_step.warm",
            "fusion.tanh_chain", "fusion.gelu_tanh", "fusion.gelu_tanh_cube",  # fusion
            "fusion.sum_sq_diff", "fusion.add10", "fusion.first.cold", "fusion.first.warm",
            ]
missing = [e for e in expected if e not in by_name]
check(not missing, "every figure group is present", "missing: " + ", ".join(missing))

# Skipping is only for a GEMM route this build lacks (the host route without a host BLAS).
skipped = [f["name"] for f in figs if "skipped" in f and not (f["name"].endswith(".host") and not blas)]
check(not skipped, "nothing skipped except a route the build lacks", ", ".join(skipped))


def refs_of(name):
    return {r["name"] for f in by_name.get(name, []) for r in f["refs"]}


want_refs = {"add": {"cl_add", "host_add"}, "mul": {"cl_mul", "host_mul"}, "exp": {"cl_exp", "host_exp"},
             "sum": {"cl_sum", "host_sum"}, "max": {"cl_max", "host_max"}, "softmax": {"host_softmax"},
             "add_chain": {"cl_launch"}, "h2d.pageable": {"cl_h2d"}, "d2h.pinned": {"cl_d2h_pinned"},
             "cat.dim1": {"copy"}, "cat.dim0": {"copy"}, "pad.constant": {"copy"},
             "index_select": {"copy"}, "gather": {"copy"}, "cumsum": {"copy"}, "sort": {"copy"},
             "conv2d": {"conv_gemm_only"},
             "digits_cnn_forward": {"handwritten_forward"}, "charlm_forward": {"handwritten_forward"},
             "fusion.tanh_chain": {"exp", "unfused", "cl_exp", "cl_tanh_chain"}, "fusion.gelu_tanh": {"unfused", "gelu_tanh_op"},
             "fusion.sum_sq_diff": {"host_sum", "unfused"}, "fusion.add10": {"cl_launch", "unfused"},
             "fusion.first.warm": {"unfused_warm", "first_result_warm"},
             }
if blas:
    want_refs.update({"matmul.auto": {"host_sgemm"}, "matmul_batch.auto": {"host_sgemm_batch"},
                      "mlp_forward": {"host_mlp"}})
lacking = [f"{k}: {sorted(v - refs_of(k))}" for k, v in want_refs.items() if not v <= refs_of(k)]
check(not lacking, "references measured side by side", "\n".join(lacking))

r = run("--help")
check(r.returncode == 0 and "Usage" in r.stdout, "--help")
r = run("--version")
check(r.returncode == 0 and r.stdout.startswith("cltensor-bench "), "--version", r.stdout)
r = run("--device", "bogus", "--quick")
check(r.returncode != 0 and "'bogus'" in r.stderr and not r.stdout, "a bad --device fails with the library's message",
      r.stderr)
r = run("--only", "nonsense")
check(r.returncode == 2 and "nonsense" in r.stderr, "an unknown --only group is a usage error", r.stderr)

print(f"1..{n}")
sys.exit(1 if failed else 0)
