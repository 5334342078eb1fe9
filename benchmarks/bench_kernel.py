"""Kernel speed, old against new in one run: configurations per CPU-second on a 1M sweep, the fixed
cost of a small (planner-sized) call, and `dispersal reproduce --no-files` CPU time (the whole
process, and its 19 rows alone), the rows compared.

Run: ``python benchmarks/bench_kernel.py [--baseline REF] [--repeats 3] [--size 1000000]``.

The baseline is the source tree of git REF (default: the last commit before the layered kernel),
extracted with ``git archive`` into a temporary folder; each measurement runs in its own Python
process for the old and the new tree in turn (interleaved, best of `--repeats`), so both see the
same machine load. Times are CPU time (user + sys of that process) unless labelled wall: on a shared
machine the ratio is the figure to read, and CPU / wall says how contended the run was. No
assertions (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from _baseline import ROOT, extract, run_child, same_answer

#: The last commit whose kernel was one 541-line function (before the layered model).
DEFAULT_BASELINE = "cda9b6d"
#: What a sweep typically reads back (the planner's and the solver's questions).
SWEEP_OUTPUTS = ("feasible", "c_quality_flop", "c_local_flop", "cost_usd", "run_time_s", "tokens")

# Runs inside the measured tree: finds its kernel wherever that tree keeps it.
_KERNEL_SNIPPET = r"""
import json, sys, time
import numpy as np
try:
    from dispersal.model.kernel.kernel import evaluate, INPUTS
    from dispersal.model.inputs.params import DEFAULT_PARAMS
    from dispersal.model.inputs.scenario import Scenario, as_arrays, kernel_inputs
except ImportError:
    from dispersal.model.kernel import evaluate, INPUTS
    from dispersal.model.params import DEFAULT_PARAMS
    from dispersal.model.scenario import Scenario, as_arrays, kernel_inputs
size, outputs = int(sys.argv[1]), json.loads(sys.argv[2])
key = "algorithm" if "algorithm" in INPUTS else "mode"

def configs(n, mode, seed=0):
    rng = np.random.default_rng(seed)
    x = as_arrays(kernel_inputs(Scenario(), mode))
    x = {k: np.broadcast_to(v, (n,)).copy() for k, v in x.items()}
    x[key] = rng.choice([1.0, 2.0, 3.0, 4.0], n)
    x["num_nodes"] = rng.integers(1, 100_000, n).astype(float)
    x["params"] = 10 ** rng.uniform(8.7, 13, n)
    x["active_params"] = x["params"]
    x["up_bits_per_s"] = 10 ** rng.uniform(6, 11, n)
    x["down_bits_per_s"] = 10 ** rng.uniform(6, 11, n)
    x["latency_s"] = rng.uniform(0, 0.3, n)
    x["group_size"] = rng.choice([4.0, 8.0, 16.0, 32.0], n)
    x["straggler"] = rng.integers(0, 4, n).astype(float)
    x["compression_ratio"] = 10 ** rng.uniform(0, 3, n)
    return x

def call(x):
    try:
        return evaluate(x, DEFAULT_PARAMS, outputs=outputs) if outputs else evaluate(x, DEFAULT_PARAMS)
    except TypeError:  # a kernel without `outputs`: it computes them all
        return evaluate(x, DEFAULT_PARAMS)

out = {}
for mode in ("paper", "default"):
    x = configs(size, mode)
    call({k: v[:64] for k, v in x.items()})
    c0, w0 = time.process_time(), time.perf_counter()
    call(x)
    out[f"sweep_{mode}"] = (time.process_time() - c0, time.perf_counter() - w0)
    small = {k: v[:64] for k, v in x.items()}
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(300):
        call(small)
    out[f"call64_{mode}"] = ((time.process_time() - c0) / 300, (time.perf_counter() - w0) / 300)
print(json.dumps(out))
"""


# The 19 rows alone (both searches), in-process CPU time: the kernel's share of `reproduce`.
_ROWS_SNIPPET = r"""
import json, time
try:
    from dispersal.model.checks.reproduction import run_rows
except ImportError:
    from dispersal.model.reproduction import run_rows
c0, w0 = time.process_time(), time.perf_counter()
run_rows()
print(json.dumps({"reproduce rows only": (time.process_time() - c0, time.perf_counter() - w0)}))
"""


def reproduce_rows(stdout: str) -> Any:
    """The reproduction's rows and headlines (its own timing dropped), for comparison."""
    d = json.loads(stdout)
    return {"rows": d["rows"], "headlines": d["headlines"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref of the old tree")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--size", type=int, default=1_000_000, help="configurations in the sweep")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": extract(a.baseline, Path(tmp)), "new": ROOT / "src"}
        best: dict[tuple[str, str], tuple[float, float]] = {}
        rows: dict[str, Any] = {}

        def keep(tree: str, name: str, cpu: float, wall: float) -> None:
            if (tree, name) not in best or cpu < best[tree, name][0]:
                best[tree, name] = (cpu, wall)

        for _ in range(a.repeats):
            for tree, src in trees.items():
                for label, outs in (("all outputs", []), ("sweep outputs", list(SWEEP_OUTPUTS))):
                    out, _, _ = run_child(src, ["-c", _KERNEL_SNIPPET, str(a.size), json.dumps(outs)])
                    for name, (cpu, wall) in json.loads(out).items():
                        keep(tree, f"{name} ({label})", cpu, wall)
                out, _, _ = run_child(src, ["-c", _ROWS_SNIPPET])
                for name, (cpu, wall) in json.loads(out).items():
                    keep(tree, name, cpu, wall)
                out, cpu, wall = run_child(src, ["-m", "dispersal", "reproduce", "--json", "--no-files"])
                rows[tree] = reproduce_rows(out)
                keep(tree, "reproduce", cpu, wall)
    print(f"baseline {a.baseline} vs working tree; best of {a.repeats}; CPU = user + sys of the process")
    print("| measurement | old CPU s | new CPU s | old / new | new CPU / wall |")
    print("|---|---|---|---|---|")
    for name in sorted({n for _, n in best}):
        (oc, _), (nc, nw) = best["old", name], best["new", name]
        rate = ""
        if name.startswith("sweep"):
            rate = f" ({a.size / oc / 1e6:.2f}M -> {a.size / nc / 1e6:.2f}M configs per CPU-s)"
        if name.startswith("call64"):
            rate = f" ({oc * 1e3:.2f} -> {nc * 1e3:.2f} ms per call)"
        print(f"| {name}{rate} | {oc:.4g} | {nc:.4g} | {oc / nc:.2f}x | {nc / nw:.2f} |")
    added: set[str] = set()
    same = same_answer(rows["old"], rows["new"], added)
    print(f"reproduce rows and headlines identical: {same}")
    if added:
        print(f"keys only the new tree prints (not compared): {', '.join(sorted(added))}")


if __name__ == "__main__":
    main()
