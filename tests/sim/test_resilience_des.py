"""The discrete-event simulation: reproducible, and in agreement with the closed form."""

from __future__ import annotations

import math

import pytest

from dispersal.model.analyses.resilience import ALGORITHMS, ResilienceSpec, goodput
from dispersal.model.inputs.errors import InputError
from dispersal.sim import simulate


def test_fixed_seed_is_exactly_reproducible() -> None:
    """Two runs with the same seed give identical numbers; a different seed gives different ones."""
    spec = ResilienceSpec(chips=200_000)
    a = simulate(spec, horizon_h=200, replications=3, seed=7).to_dict()
    b = simulate(spec, horizon_h=200, replications=3, seed=7).to_dict()
    c = simulate(spec, horizon_h=200, replications=3, seed=8).to_dict()
    assert a == b
    assert a != c


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec",
    [
        ResilienceSpec(chips=1_200_000),  # the essay's scale, Llama 3 failure rate
        ResilienceSpec(chips=20_000, chip_mtbf_h=2_000.0),  # one island, frequent failures
        ResilienceSpec(chips=100_000, chips_per_island=4_096, restart_time_h=1.0),  # R > P/2
        # elastic's job-size cap binds: n* = 1 / (lambda_node S) = 2,500 of 25,000 nodes (issue 35)
        ResilienceSpec(chips=200_000, chip_mtbf_h=20_000.0, resize_time_h=1.0, node_repair_time_h=24.0),
    ],
)
def test_des_agrees_with_closed_form(spec: ResilienceSpec) -> None:
    """Each algorithm's simulated goodput is within 4 standard errors (+0.2% edge effect) of the formula."""
    sim = simulate(spec, horizon_h=720, replications=6, seed=2024)
    closed = goodput(spec).to_dict()
    for name in ALGORITHMS:
        est = sim.goodput[name]
        assert abs(est.mean - closed[name]) <= 4 * est.stderr + 2e-3, (name, est, closed[name])


def test_no_failures_simulates_checkpoint_overhead_exactly() -> None:
    """With no failures the simulation gives exactly 1 - C/tau for every algorithm."""
    spec = ResilienceSpec(chips=1_200_000, chip_mtbf_h=math.inf, checkpoint_interval_h=2.0)
    sim = simulate(spec, horizon_h=100.0, replications=2, seed=0)
    for name in ALGORITHMS:
        assert sim.goodput[name].mean == pytest.approx(1 - spec.checkpoint_write_time_h / 2.0, abs=1e-12)
        assert sim.goodput[name].stderr == 0.0


def test_bad_replications_is_an_input_error() -> None:
    """Fewer than two replications cannot give a standard error and is rejected by name."""
    with pytest.raises(InputError, match=r"^replications: "):
        simulate(ResilienceSpec(), replications=1)
