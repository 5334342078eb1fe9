"""How fast is `dispersal solve`? The issue-11 case: the bandwidth at which a 10B model on 2 sites
(num_nodes = 2) of 8 x H100, flat DiLoCo with H = 100 and int8 pseudo-gradients (INTELLECT-1's
setup), reaches 90% compute utilisation. Target: < 1 s.

Run: ``python benchmarks/bench_solve.py [--repeat N]``. Prints the in-process time of `solve()`
(median of N), the same answer by a scalar bisection over `estimate()` calls for comparison (time
ratio in the same run), and the wall time of the command line (`dispersal solve ... --json` in a
fresh Python process, imports included). No assertions; the exit status is 1 if the answer takes
>= 1 s or the two answers differ by more than 1e-5.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dispersal.model.inputs.scenario import Algorithm, Precision, Scenario
from dispersal.model.run.estimate import estimate
from dispersal.model.search.solve import solve

CASE = Scenario(
    name="10B, 2 sites of 8 x H100, DiLoCo H=100, int8",
    hardware="h100_sxm",
    chips_per_node=8,
    precision=Precision.BF16,
    num_nodes=2,
    params=10e9,
    tokens=1e12,
    algorithm=Algorithm.DILOCO,
    inner_steps=100,
    codec="int8",
    local_batch_tokens=1048576.0,
    regime="none",
    duration_s=10 * 365.25 * 86400.0,
)

CASE_TOML = """
hardware = "h100_sxm"
chips_per_node = 8
precision = "bf16"
num_nodes = 2
params = "10B"
tokens = "1T"
algorithm = "diloco"
inner_steps = 100
codec = "int8"
local_batch_tokens = 1048576
regime = "none"
duration_s = "10 y"
"""


def scalar_bisection(
    target: float = 0.9, lo: float = 1e3, hi: float = 1e13, rtol: float = 1e-6
) -> tuple[float, int]:
    """The same question by plain bisection in log space, one estimate() per step (assumes it rises)."""
    calls = 0
    while hi - lo > rtol * hi:
        mid = math.sqrt(lo * hi)
        calls += 1
        u = estimate(CASE.replace(bandwidth_up_bits_per_s=mid, bandwidth_down_bits_per_s=mid)).utilisation
        if u >= target:
            hi = mid
        else:
            lo = mid
    return hi, calls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    solve(CASE, vary="bandwidth", output="utilisation", target=0.9)  # warm up (imports, caches)
    times = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        sol = solve(CASE, vary="bandwidth", output="utilisation", target=0.9)
        times.append(time.perf_counter() - t0)
    t_solve = statistics.median(times)
    t0 = time.perf_counter()
    b_scalar, n_scalar = scalar_bisection()
    t_scalar = time.perf_counter() - t0
    print(f"case: {CASE.name}")
    print(
        f"solve(): bandwidth {sol.value / 1e6:.6g} Mbps for utilisation {sol.achieved:.6f}, "
        f"{sol.evaluations} configurations in {sol.calls} kernel calls, median {t_solve * 1e3:.1f} ms "
        f"of {len(times)}"
    )
    print(
        f"scalar bisection over estimate(): {b_scalar / 1e6:.6g} Mbps, {n_scalar} calls, {t_scalar * 1e3:.1f} ms "
        f"(ratio scalar / solve = {t_scalar / t_solve:.2f})"
    )
    exe = shutil.which("dispersal")
    t_cli = math.nan
    if exe is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "case.toml"
            path.write_text(CASE_TOML, encoding="utf-8")
            t0 = time.perf_counter()
            out = subprocess.run(
                [
                    exe,
                    "solve",
                    "--for",
                    "bandwidth",
                    "--where",
                    "utilisation=0.9",
                    "--scenario",
                    str(path),
                    "--json",
                ],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            t_cli = time.perf_counter() - t0
        cli_value = json.loads(out.stdout)["value"]
        print(f"command line (fresh process, imports included): {t_cli:.2f} s, {cli_value / 1e6:.6g} Mbps")
    else:
        print("command line: `dispersal` not on PATH, skipped")
    ok = t_solve < 1.0 and abs(b_scalar - sol.value) <= 1e-5 * sol.value
    print("PASS" if ok else "FAIL", "(answer < 1 s, answers agree)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
