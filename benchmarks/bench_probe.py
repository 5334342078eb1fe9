"""The planner's cost per probe call, old tree against new in one run: `CandidateSpace.run` on 1 and
64 candidates (the exact search's and bisection's call), CPU milliseconds per call, best of 3 x 300.

Run: ``python benchmarks/bench_probe.py [--baseline cda9b6d] [--repeats 2]``.

Issue 20 asked that the planner's fixed cost per kernel call go down (~1.2 ms when it was filed). The
baseline's ``src`` is extracted with ``git archive``; each tree is timed in its own process, in turn,
`--repeats` times (both see the same load: read the ratio). No assertions (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _baseline import extract, run_child

DEFAULT_BASELINE = "cda9b6d"

# Runs inside the measured tree: its candidate space wherever that tree keeps it.
_SNIPPET = r"""
import json, time
import numpy as np
try:
    from dispersal.model.search.candidates import Constraints, make_space
    from dispersal.model.inputs.scenario import Mode
    from dispersal.model.inputs.params import DEFAULT_PARAMS
except ImportError:  # before the layered model
    from dispersal.model.candidates import Constraints, make_space
    from dispersal.model.scenario import Mode
    from dispersal.model.params import DEFAULT_PARAMS
out = {}
for m in (Mode.DEFAULT, Mode.PAPER):
    sp = make_space(m, Constraints(), "treaty", DEFAULT_PARAMS)
    for k in (1, 64):
        c, n = np.arange(k), np.full(k, 10.0)
        sp.run(c, n)
        best = float("inf")
        for _ in range(3):
            t = time.process_time()
            for _ in range(300):
                sp.run(c, n)
            best = min(best, (time.process_time() - t) / 300)
        out[f"{m.value} mode, {k} candidate{'s' if k > 1 else ''}"] = best * 1e3
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref of the old tree")
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    best: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": extract(a.baseline, Path(tmp)), "new": Path(__file__).resolve().parents[1] / "src"}
        for _ in range(a.repeats):
            for tree, src in trees.items():
                out, _, _ = run_child(src, ["-c", _SNIPPET])
                for name, ms in json.loads(out).items():
                    best[tree, name] = min(ms, best.get((tree, name), float("inf")))
    print(
        f"baseline {a.baseline} vs working tree; CPU ms per `CandidateSpace.run` call, best of {a.repeats} runs"
    )
    print("| call | old ms | new ms | old / new |")
    print("|---|---|---|---|")
    for name in sorted({n for _, n in best}):
        o, n = best["old", name], best["new", name]
        print(f"| {name} | {o:.3f} | {n:.3f} | {o / n:.2f}x |")


if __name__ == "__main__":
    main()
