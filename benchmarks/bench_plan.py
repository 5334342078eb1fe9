"""Configurations evaluated per second: the vectorised kernel vs a plain loop over estimate().

Run: python benchmarks/bench_plan.py   (prints a table; no assertions; machine noise applies, so
compare the ratio measured in one run rather than absolute rates across runs)

   python benchmarks/bench_plan.py --cli OLD_CHECKOUT
CPU time (user + sys of the child process) of the search commands (`plan --samples 1000`, `counter
--mode default`, `reproduce`, `frontier`) for this checkout and, where the command exists there, an
older one (e.g. `git worktree add /tmp/old cda9b6d`), run alternately in one session, with the
ratio new / old.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Scenario, as_arrays, kernel_inputs
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.run.estimate import estimate
from dispersal.model.search.planner import PAPER_PARAM_GRID_B, compare_searches, plan


def main() -> None:
    rng = np.random.default_rng(0)
    n_loop = 300
    scenarios = [
        Scenario(
            num_nodes=int(rng.integers(2, 500)),
            params=float(rng.choice(PAPER_PARAM_GRID_B[:20])) * 1e9,
            bandwidth_up_bits_per_s=float(rng.uniform(1e7, 1e9)),
            latency_s=float(rng.uniform(0.001, 0.3)),
        )
        for _ in range(n_loop)
    ]
    t0 = time.perf_counter()
    for s in scenarios:
        estimate(s, mode="paper")
    loop_rate = n_loop / (time.perf_counter() - t0)

    n_vec = 1_000_000
    x = as_arrays(kernel_inputs(Scenario(), "paper"))
    x["num_nodes"] = rng.integers(2, 5000, n_vec).astype(float)
    x["params"] = rng.choice(np.asarray(PAPER_PARAM_GRID_B) * 1e9, n_vec)
    x["active_params"] = x["params"]
    x["up_bits_per_s"] = rng.uniform(1e7, 1e9, n_vec)
    t0 = time.perf_counter()
    evaluate(x, DEFAULT_PARAMS)
    vec_rate = n_vec / (time.perf_counter() - t0)

    t0 = time.perf_counter()
    p = plan(1e25, mode="paper")
    plan_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    compare_searches(1e25)
    both_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    d = plan(1e25)
    default_s = time.perf_counter() - t0
    print(f"estimate() loop:          {loop_rate:12,.0f} configurations/s")
    print(f"kernel.evaluate (1M):     {vec_rate:12,.0f} configurations/s")
    print(f"vectorised / loop ratio:  {vec_rate / loop_rate:12,.0f} x")
    print(f"plan(1e25, paper, bisect): {plan_s:.3f} s ({p.evaluations:,} configurations)")
    print(f"bisect + exact (1e25):     {both_s:.3f} s")
    print(f"plan(1e25, default, exact): {default_s:.3f} s ({d.evaluations:,} configurations)")


#: The commands timed by --cli (issue 20's targets: plan --samples 1000 < 8 s, counter < 20 s CPU).
CLI_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("plan", "--samples", "1000"),
    ("counter", "--mode", "default"),
    ("reproduce", "--out", "{tmp}"),
    ("frontier", "--json"),
)


def cpu_of(src: Path, args: tuple[str, ...]) -> float | None:
    """CPU seconds (user + sys) of `python -m dispersal ARGS` with `src` first on the path; None if
    the command fails (e.g. it does not exist in that checkout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as tmp:
        argv = [a.replace("{tmp}", tmp) for a in args]
        env = {**os.environ, "PYTHONPATH": str(src)}
        r = subprocess.run(
            [sys.executable, "-m", "dispersal", *argv], env=env, capture_output=True, check=False
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        return None
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cli(old: Path) -> None:
    """Print CPU time per command for this checkout and `old`, and the ratio."""
    new = Path(__file__).resolve().parents[1] / "src"
    print(f"{'command':34s} {'new CPU s':>10s} {'old CPU s':>10s} {'new/old':>8s}")
    for args in CLI_COMMANDS:
        n = cpu_of(new, args)
        o = cpu_of(old / "src", args)
        ratio = f"{n / o:8.2f}" if (n is not None and o) else "       -"
        show = " ".join(a for a in args if a != "{tmp}")
        print(
            f"{show:34s} {n if n is not None else float('nan'):10.2f} {o if o is not None else float('nan'):10.2f} {ratio}"
        )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--cli":
        cli(Path(sys.argv[2]))
    else:
        main()
