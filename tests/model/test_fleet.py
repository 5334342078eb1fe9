"""The fleet question (issue 24 item 7): `fleet_search` against a brute force over `estimate`, the
early stop at the overtraining window, and the invariant that more bandwidth or more days never
gives less."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import accelerator
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Algorithm, Precision, Scenario
from dispersal.model.run.estimate import Estimate, estimate
from dispersal.model.search.fleet import FleetMetric, fleet_search

DAY = units.SECONDS_PER_DAY
#: A tiny fleet: 8 nodes of 8 H100 (BF16) on 100 Mbps, 100 ms, 60 days, no rule.
TINY = Scenario(
    name="tiny fleet",
    hardware="h100_sxm",
    precision=Precision.BF16,
    chips_per_node=8,
    num_nodes=8,
    bandwidth_up_bits_per_s=100e6,
    bandwidth_down_bits_per_s=100e6,
    latency_s=0.1,
    duration_s=60 * DAY,
    regime="none",
)
GRID = (1e9, 7e9, 30e9)
H_GRID = (0, 100)
ALGOS = ("streaming", "diloco")
SMALL: dict[str, Any] = {"params_grid": GRID, "h_grid": H_GRID, "algorithms": ALGOS, "codec_names": ("auto",)}


def _brute_force(fleet: Scenario, max_ot: float = 100.0) -> tuple[float, Estimate]:
    """Every (algorithm, P, H) of SMALL through the scalar `estimate`, with the fleet search's rule
    written out: full time budget, or stop at max_ot x 20 tokens/param; valid if feasible and
    1 <= OT <= max_ot. Returns (best C_quality, its estimate)."""
    best: tuple[float, Estimate] | None = None
    for a in ALGOS:
        for P in GRID:
            for H in H_GRID:
                s = fleet.replace(algorithm=Algorithm(a), params=P, inner_steps=H, tokens=None)
                e = estimate(s)
                if e.overtraining_ratio > max_ot:
                    e = estimate(s.replace(tokens=e.tokens * max_ot / e.overtraining_ratio))
                ok = e.feasible and 1 - 1e-9 <= e.overtraining_ratio <= max_ot * (1 + 1e-9)
                if ok and (best is None or e.c_quality_flop > best[0]):
                    best = (e.c_quality_flop, e)
    assert best is not None
    return best


def test_tiny_fleet_matches_a_brute_force_over_estimate() -> None:
    ans = fleet_search(TINY, binding=False, **SMALL)
    assert ans.feasible and ans.best is not None
    want, e = _brute_force(TINY)
    b = ans.best
    assert b.c_quality_flop == pytest.approx(want, rel=1e-9)
    assert (b.params, b.inner_steps, b.algorithm) == (e.params, e.inner_steps, e.scenario.algorithm.value)
    # 2 algorithms x 3 sizes x 2 H, and the rows re-evaluated where they stop early.
    assert ans.configurations >= 12
    # The reported scenario reproduces the figures in `dispersal estimate`.
    again = estimate(b.scenario)
    assert again.c_quality_flop == pytest.approx(b.c_quality_flop, rel=1e-12)
    assert again.utilisation == pytest.approx(b.utilisation, rel=1e-12)
    assert again.traffic.mean_mbps * 1e6 == pytest.approx(b.mean_up_bits_per_s, rel=1e-12)


def test_tiny_fleet_exact_choice() -> None:
    """Hand check: at H_min the fleet is compute-bound, so the chosen run trains
    D = N k F_peak MFU T / (6 P) tokens (8 nodes x 8 H100 BF16, catalogue peak and MFU, 60 days),
    for the whole budget, at utilisation 1; overlap (streaming) never loses to plain DiLoCo."""
    ans = fleet_search(TINY, binding=False, **SMALL)
    assert ans.best is not None
    b = ans.best
    by_algo = {o.algorithm: o for o in ans.per_algorithm}
    assert set(by_algo) == {"streaming", "diloco"}
    assert by_algo["streaming"].c_quality_flop >= by_algo["diloco"].c_quality_flop
    assert b.algorithm == "streaming" and b.inner_steps_requested == 0
    acc = accelerator("h100_sxm")
    mfu = acc.mfu_bf16 * DEFAULT_PARAMS.mfu_scale
    want = 8 * 8 * acc.dense_fp16_flop_per_s * mfu * 60 * DAY / (6 * b.params)
    assert b.tokens == pytest.approx(want, rel=1e-9)
    assert b.run_time_s == pytest.approx(60 * DAY, rel=1e-12)
    assert b.utilisation == pytest.approx(1.0, abs=1e-9)
    k = DEFAULT_PARAMS.tokens_per_param_optimal
    assert b.overtraining_ratio == pytest.approx(b.tokens / (k * b.params), rel=1e-9)
    assert 1.0 <= b.overtraining_ratio <= 100.0


def test_a_small_model_stops_early_at_the_window() -> None:
    """Only a 0.5B model on 64 nodes for a year: the budget would give far more than 100 x the
    compute-optimal tokens per parameter, so the run stops at exactly that many tokens, before the budget ends."""
    fleet = TINY.replace(num_nodes=64, duration_s=365 * DAY)
    ans = fleet_search(
        fleet,
        binding=False,
        params_grid=(0.5e9,),
        h_grid=(0,),
        algorithms=("streaming",),
        codec_names=("auto",),
    )
    assert ans.best is not None
    b = ans.best
    assert b.stopped_early
    assert b.tokens == pytest.approx(100 * DEFAULT_PARAMS.tokens_per_param_optimal * 0.5e9, rel=1e-9)
    assert b.overtraining_ratio == pytest.approx(100.0, rel=1e-9)
    assert b.run_time_s < 365 * DAY
    assert estimate(b.scenario).run_time_s == pytest.approx(b.run_time_s, rel=1e-12)


def test_max_tokens_caps_the_run() -> None:
    ans = fleet_search(TINY, binding=False, max_tokens=200e9, **SMALL)
    assert ans.best is not None
    assert ans.best.tokens <= 200e9 * (1 + 1e-12)


def test_loss_metric_picks_the_lowest_loss() -> None:
    ans = fleet_search(TINY, binding=False, metric="loss", **SMALL)
    assert ans.best is not None and ans.metric == "loss"
    assert ans.best.loss == min(o.loss for o in ans.per_algorithm)


def test_binding_constraint_is_the_largest_gain() -> None:
    ans = fleet_search(TINY, **SMALL)
    assert set(ans.gains) == {"days", "bandwidth", "nodes"}
    assert all(g >= 1 - 1e-9 for g in ans.gains.values())
    top = max(ans.gains, key=lambda k: ans.gains[k])
    assert ans.binding == top or ans.gains[top] < 1.01


def test_no_valid_configuration_says_why() -> None:
    # One 8-chip node cannot hold a 10T-parameter model (flat or pipelined over one node).
    ans = fleet_search(TINY.replace(num_nodes=1), binding=False, params_grid=(10e12,), codec_names=("auto",))
    assert not ans.feasible and ans.best is None and ans.reasons
    d = ans.to_dict()
    assert d["best"] is None and d["reasons"]


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(InputError, match="metric"):
        fleet_search(TINY, metric="speed")
    with pytest.raises(InputError, match="params_grid"):
        fleet_search(TINY, params_grid=())
    with pytest.raises(InputError, match="min_overtraining"):
        fleet_search(TINY, min_overtraining=5, max_overtraining=2)
    with pytest.raises(InputError, match="max_tokens"):
        fleet_search(TINY, max_tokens=0)


def _best(fleet: Scenario, metric: str) -> float:
    ans = fleet_search(fleet, metric=metric, binding=False, **SMALL)
    if ans.best is None:
        return -math.inf
    return -ans.best.loss if metric == FleetMetric.LOSS else ans.best.c_quality_flop


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(
    mbps=st.floats(1.0, 10_000.0),
    days=st.floats(5.0, 1_000.0),
    nodes=st.integers(1, 256),
    more=st.floats(1.0, 20.0),
    which=st.sampled_from(["bandwidth", "days"]),
    metric=st.sampled_from(["c_quality", "loss"]),
)
def test_more_bandwidth_or_more_days_never_gives_less(
    mbps: float, days: float, nodes: int, more: float, which: str, metric: str
) -> None:
    base = TINY.replace(
        bandwidth_up_bits_per_s=mbps * 1e6,
        bandwidth_down_bits_per_s=mbps * 1e6,
        duration_s=days * DAY,
        num_nodes=nodes,
    )
    if which == "bandwidth":
        bigger = base.replace(
            bandwidth_up_bits_per_s=mbps * more * 1e6, bandwidth_down_bits_per_s=mbps * more * 1e6
        )
    else:
        bigger = base.replace(duration_s=days * more * DAY)
    now, then = _best(base, metric), _best(bigger, metric)
    assert then >= now - 1e-9 * abs(now), (which, now, then)


def test_a_fleet_over_the_cap_says_so() -> None:
    """4,096 H100 per node is over the treaty's covered-cluster cap: nothing runs, and the reason says why."""
    ans = fleet_search(
        TINY.replace(regime="treaty", chips_per_node=4096),
        binding=False,
        params_grid=GRID,
        codec_names=("auto",),
    )
    assert not ans.feasible
    assert ans.reasons == ("each node (4096 x h100_sxm) is over regime treaty's covered-cluster cap",)
