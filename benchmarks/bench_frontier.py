"""`dispersal frontier` speed, old against new in one run: CPU seconds (user + sys of the whole
process) of the default grid at `--samples` draws, and whether the cells' least bandwidth per site
agrees between the two trees.

Run: ``python benchmarks/bench_frontier.py [--baseline REF] [--samples 100] [--repeats 1]``.

The baseline is the source tree of git REF (default: the last commit before the vectorised frontier
search), extracted with ``git archive`` into a temporary folder. Each measurement runs in its own
Python process, old and new in turn (interleaved, best of `--repeats`), so both see the same machine
load; on a shared machine the ratio is the figure to read, and CPU / wall says how contended the run
was. Issue 23 asks for the default grid in under 10 s of CPU with its default draws. No assertions
(a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _baseline import ROOT, extract, run_child

#: The last commit whose frontier ran `planner.plan` per grid bandwidth and `plan_samples` per target.
DEFAULT_BASELINE = "0c6818f"


def least_bandwidths(stdout: str) -> list[tuple[float, float, float | None]]:
    """(target, premium, least bandwidth per site) of every cell: schema 1 and 2 both carry them."""
    d = json.loads(stdout)
    return [(c["target_flop"], c["premium"], c["least_bandwidth_bits_per_s"]) for c in d["limits"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref of the old tree")
    ap.add_argument("--samples", type=int, default=100, help="Monte Carlo draws per target (the CLI default)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per tree (best kept)")
    a = ap.parse_args()
    args = ["-m", "dispersal", "frontier", "--samples", str(a.samples), "--json"]
    best: dict[str, tuple[float, float, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": extract(a.baseline, Path(tmp)), "new": ROOT / "src"}
        for _ in range(a.repeats):
            for name, src in trees.items():
                out, cpu, wall = run_child(src, args)
                if name not in best or cpu < best[name][0]:
                    best[name] = (cpu, wall, out)
    old, new = best["old"], best["new"]
    same = least_bandwidths(old[2]) == least_bandwidths(new[2])
    print(f"dispersal frontier --samples {a.samples} (default grid), best of {a.repeats}:")
    for name, (cpu, wall, _) in best.items():
        print(
            f"  {name:>3} ({a.baseline if name == 'old' else 'this checkout'}): {cpu:6.2f} s CPU, {wall:6.2f} s wall"
        )
    print(
        f"  ratio old / new CPU: {old[0] / new[0]:.1f}x; issue 23's bar: 10 s CPU ({'met' if new[0] < 10 else 'NOT met'})"
    )
    print(f"  least bandwidth per cell identical: {same}")
    if not same:
        for o, n in zip(least_bandwidths(old[2]), least_bandwidths(new[2]), strict=False):
            if o != n:
                print(f"    {o[0]:.0e} at {o[1]:g}x: old {o[2]}, new {n[2]}")


if __name__ == "__main__":
    main()
