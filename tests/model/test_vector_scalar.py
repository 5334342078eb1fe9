"""The vectorised kernel on a batch of random scenarios agrees with the scalar estimate() of each one
(issue #3: to 1e-9 relative), in both modes and for every algorithm."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from dispersal.model.inputs.catalog import accelerators
from dispersal.model.inputs.codes import Straggler
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Algorithm, Precision, Scenario, kernel_inputs
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.run.estimate import Estimate, estimate

ALGORITHMS = ("auto", "ddp", "diloco", "streaming", "hierarchical", "pp_diloco", "decoupled")


def _random_scenarios(rng: np.random.Generator, n: int) -> list[Scenario]:
    names = sorted(accelerators())
    out = []
    for _ in range(n):
        hw = str(rng.choice(names))
        fp8 = accelerators()[hw].dense_fp8_flop_per_s > 0 and rng.random() < 0.5
        out.append(
            Scenario(
                hardware=hw,
                precision=Precision.FP8 if fp8 else Precision.BF16,
                num_nodes=int(rng.integers(1, 3000)),
                params=float(10 ** rng.uniform(8.5, 12)),
                algorithm=Algorithm(str(rng.choice(ALGORITHMS))),
                inner_steps=int(rng.choice([0, 0, 1, 10, 100, 500])),
                compression_ratio=float(rng.choice([1, 16, 150, 500])),
                error_feedback=bool(rng.random() < 0.7),
                bandwidth_up_bits_per_s=float(10 ** rng.uniform(6, 10)),
                bandwidth_down_bits_per_s=float(10 ** rng.uniform(6, 10)),
                latency_s=float(rng.uniform(0, 0.3)),
                group_size=int(rng.integers(2, 33)),
                straggler=Straggler(str(rng.choice(["relay", "synchronous", "threshold", "backup"]))),
                duration_s=float(rng.uniform(30, 740)) * 86400.0,
                tokens=None if rng.random() < 0.7 else float(10 ** rng.uniform(10, 13)),
                regime=str(rng.choice(["treaty", "treaty_hbm", "none"])),
                mfu=float(rng.uniform(0.2, 0.6)),
                quorum_fraction=float(rng.uniform(0.05, 1.0)),
                syncer=str(rng.choice(["relay", "site"])),
                merge_rule=str(rng.choice(["mean", "norm_preserving"])),
            )
        )
    return out


# Default mode walks the schedule grid per scenario (300 scalar estimates): the full suite only.
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["paper", pytest.param("default", marks=pytest.mark.slow)])
def test_vectorised_kernel_matches_scalar_estimate(mode: str) -> None:
    """300 random scenarios evaluated in one kernel call give the scalar Estimate's figures to 1e-9."""
    rng = np.random.default_rng(7 if mode == "paper" else 8)
    scenarios = _random_scenarios(rng, 300)
    rows = [kernel_inputs(s, mode) for s in scenarios]
    batch = {k: np.asarray([float(r[k]) for r in rows]) for k in rows[0]}
    r = evaluate(batch, DEFAULT_PARAMS)
    checks: dict[str, Callable[[Estimate], float]] = {
        "c_local_flop": lambda e: e.c_local_flop,
        "c_quality_flop": lambda e: e.c_quality_flop,
        "tokens": lambda e: e.tokens,
        "run_time_s": lambda e: e.run_time_s,
        "cost_usd": lambda e: e.cost.total_usd,
        "eta": lambda e: e.efficiency.eta,
        "chi": lambda e: e.efficiency.chi,
        "inner_steps": lambda e: float(e.inner_steps),
        "sync_time_s": lambda e: e.sync_time_s,
        "mean_up_bits_per_s": lambda e: e.traffic.mean_mbps * 1e6,
    }
    for i, s in enumerate(scenarios):
        e = estimate(s, mode=mode)
        assert bool(r["feasible"][i]) == e.feasible
        for key, get in checks.items():
            a, b = float(r[key][i]), float(get(e))
            if math.isinf(a) or math.isinf(b):
                assert a == b, (i, key)
            else:
                assert a == pytest.approx(b, rel=1e-9, abs=1e-300), (i, key, s)
