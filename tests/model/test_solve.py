"""`dispersal.model.search.solve`: answers against closed forms worked from spec/model.md, integer answers
against brute force, the direction detected, unreachable targets, the premium, and bad input."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.inputs.catalog import accelerator
from dispersal.model.inputs.codes import STRAGGLER_CODES, Straggler
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import FIBRE_S_PER_M, Algorithm, Precision, Scenario, kernel_inputs
from dispersal.model.kernel.efficiency import straggler_factor
from dispersal.model.run.estimate import estimate
from dispersal.model.search.planner import Constraints, centralized_baseline, plan
from dispersal.model.search.solve import Solution, premium_constraints, solve

RTOL = 1e-6


def f_strag(n: int) -> float:
    return float(straggler_factor(n, STRAGGLER_CODES[Straggler.RELAY], DEFAULT_PARAMS))


def flat(**kw: Any) -> Scenario:
    """Flat DiLoCo without overlap, int8 ring all-reduce (INTELLECT-1-like), MFU stated."""
    base: dict[str, Any] = dict(
        hardware="h100_sxm",
        chips_per_node=8,
        precision="bf16",
        mfu=0.4,
        num_nodes=4,
        params=10e9,
        tokens=1e12,
        algorithm="diloco",
        inner_steps=100,
        codec="int8",
        local_batch_tokens=1048576.0,
        regime="none",
        latency_s=0.05,
        duration_s=1e10,
    )
    base.update(kw)
    return Scenario(**base)


def t_comp(s: Scenario) -> float:
    """6 P B / (chips x BF16 peak x MFU) (spec sec. 1)."""
    assert s.mfu is not None
    return (
        6.0
        * s.params
        * s.local_batch_tokens
        / (s.chips_per_node * accelerator(s.hardware).dense_fp16_flop_per_s * s.mfu)
    )


def ring_bandwidth_for(sync_s: float, s: Scenario) -> float:
    """Invert a ring all-reduce of P x 8 bits among m workers: 2 (m-1) (V/m / b + latency) f(m) = sync_s."""
    m = s.num_nodes
    v = s.params * 8.0
    return v / m / (sync_s / (2.0 * (m - 1) * f_strag(m)) - s.latency_s)


def test_bandwidth_for_a_flat_diloco_sync_time_matches_the_ring_formula() -> None:
    s = flat()
    sol = solve(s, vary="bandwidth", output="sync_time", target=120.0)
    assert sol.reached and sol.direction == "falls" and sol.unit == "bit/s"
    b = ring_bandwidth_for(120.0, s)
    assert sol.value == pytest.approx(b, rel=2 * RTOL)
    # The answer is the first value (from lo up) where the sync takes <= 120 s; the bracket is narrow.
    assert sol.achieved <= 120.0 and estimate(sol.scenario).sync_time_s == pytest.approx(
        sol.achieved, rel=1e-12
    )
    lo, hi = sol.bracket
    assert lo < b <= hi * (1 + 1e-12) and (hi - lo) <= RTOL * hi
    assert estimate(apply_bw(s, lo)).sync_time_s > 120.0


def apply_bw(s: Scenario, b: float) -> Scenario:
    return s.replace(bandwidth_up_bits_per_s=b, bandwidth_down_bits_per_s=b)


def backward_overlap(s: Scenario) -> float:
    """The share of a step over which a blocking DiLoCo sync may start during the last backward
    pass (default mode), as the scenario resolves it."""
    return float(kernel_inputs(s, "default")["sync_backward_overlap"])


def test_bandwidth_for_utilisation_matches_the_closed_form() -> None:
    s = flat()
    # Blocking sync, partly hidden by the last backward pass (w of a step):
    # u = H T_comp / (H T_comp + T_sync - w T_comp)  =>  T_sync = H T_comp (1 - u) / u + w T_comp.
    u = 0.9
    sync = s.inner_steps * t_comp(s) * (1 - u) / u + backward_overlap(s) * t_comp(s)
    sol = solve(s, vary="bandwidth", output="utilisation", target=u)
    assert sol.reached and sol.direction == "rises"
    assert sol.value == pytest.approx(ring_bandwidth_for(sync, s), rel=2 * RTOL)
    assert sol.achieved >= u
    assert sol.evaluations > 64 and sol.calls >= 2


def test_asymmetric_links_keep_their_ratio() -> None:
    s = flat(bandwidth_up_bits_per_s=50e6, bandwidth_down_bits_per_s=200e6)
    sol = solve(s, vary="bandwidth", output="utilisation", target=0.8)
    assert sol.reached and sol.scenario is not None
    assert sol.scenario.bandwidth_up_bits_per_s == sol.value
    assert sol.scenario.bandwidth_down_bits_per_s == pytest.approx(4 * sol.value, rel=1e-12)


def test_paper_mode_bandwidth_at_which_h_min_reaches_a_value() -> None:
    # Paper: T_sync = (V/up + V/down + latency) f(N), V = P x 8 / C_r (FP8); H_min = ceil(T_sync / T_step).
    s = Scenario(
        hardware="h100_sxm",
        chips_per_node=8,
        precision=Precision.FP8,
        num_nodes=16,
        params=91e9,
        algorithm=Algorithm.STREAMING,
        inner_steps=0,
        regime="none",
    )
    t_step = 6.0 * s.params * s.local_batch_tokens / (8 * accelerator("h100_sxm").dense_fp8_flop_per_s * 0.40)
    v = s.params * 8.0 / s.compression_ratio
    k = 20
    b_star = 2.0 * v / (k * t_step / f_strag(16) - s.latency_s)
    sol = solve(s, vary="bandwidth", output="h_min", target=k, mode="paper")
    assert sol.reached and sol.direction == "falls"
    assert sol.value == pytest.approx(b_star, rel=2 * RTOL) and sol.value >= b_star * (1 - 1e-9)
    assert estimate(sol.scenario, mode="paper").inner_steps <= k
    assert estimate(apply_bw(s, sol.bracket[0]), mode="paper").inner_steps > k


def test_latency_is_solved_on_a_linear_grid_from_zero_and_distance_follows_fibre() -> None:
    s = flat(bandwidth_up_bits_per_s=1e9, bandwidth_down_bits_per_s=1e9)
    target = 2.0 * 3 * (s.params * 8 / 4 / 1e9 + 0.04) * f_strag(4)  # the ring sync at 40 ms one way
    sol = solve(s, vary="latency", output="sync_time_s", target=target, hi=1.0)
    assert sol.reached and sol.direction == "rises" and sol.search_range == (0.0, 1.0)
    assert sol.value == pytest.approx(0.04, rel=2 * RTOL)
    d = solve(s, vary="distance", output="sync_time_s", target=target)
    assert d.unit == "m" and d.scenario is not None
    assert d.value == pytest.approx(0.04 / (FIBRE_S_PER_M * 1.5), rel=2 * RTOL)  # ~5,400 km
    assert d.scenario.latency_s == pytest.approx(0.04, rel=2 * RTOL)


def test_inner_steps_answer_is_the_exact_smallest_integer() -> None:
    s = flat(bandwidth_up_bits_per_s=300e6, bandwidth_down_bits_per_s=300e6)
    u = 0.9
    exposed = estimate(s).sync_time_s - backward_overlap(s) * t_comp(s)
    assert exposed > 0
    h_star = math.ceil(u * exposed / ((1 - u) * t_comp(s)))
    sol = solve(s, vary="H", output="utilisation", target=u)
    assert sol.integer and sol.variable == "inner_steps" and sol.unit == "steps"
    assert sol.value == h_star and sol.bracket == (h_star - 1, h_star)
    # Brute force nearby: every H below the answer misses, the answer and above meet.
    for h in range(max(1, h_star - 5), h_star + 6):
        assert (estimate(s.replace(inner_steps=h)).utilisation >= u) == (h >= h_star), h


def test_nodes_answer_is_exact_and_sites_is_an_alias() -> None:
    s = Scenario(
        params=10e9,
        hardware="h100_sxm",
        chips_per_node=8,
        precision=Precision.BF16,
        regime="none",
        algorithm=Algorithm.DILOCO,
        inner_steps=100,
        duration_s=30 * 86400.0,
    )
    target = 3.0e24
    sol = solve(s, vary="nodes", output="c_local", target=target, mode="paper")
    assert sol.reached and sol.direction == "rises" and sol.integer
    n = int(sol.value)
    assert 2 < n < 100_000
    for k in range(max(1, n - 4), n + 5):
        assert (estimate(s.replace(num_nodes=k), mode="paper").c_local_flop >= target) == (k >= n), k
    alias = solve(s, vary="sites", output="c_local", target=target, mode="paper")
    assert alias == sol


def test_a_falling_integer_output_gives_the_first_integer_that_reaches_it() -> None:
    # Utilisation falls with the node count (1 node has no sync at all).
    s = flat(bandwidth_up_bits_per_s=1e9, bandwidth_down_bits_per_s=1e9, num_nodes=2)
    u = estimate(s.replace(num_nodes=40)).utilisation
    sol = solve(s, vary="nodes", output="utilisation", target=u)
    assert sol.direction == "falls" and sol.value <= 40
    n = int(sol.value)
    assert (
        estimate(s.replace(num_nodes=n)).utilisation <= u < estimate(s.replace(num_nodes=n - 1)).utilisation
    )


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(st.floats(min_value=0.05, max_value=0.99))
def test_any_reachable_utilisation_is_bracketed(u: float) -> None:
    s = flat()
    sol = solve(s, vary="bandwidth", output="utilisation", target=u)
    assert sol.reached
    lo, hi = sol.bracket
    assert estimate(apply_bw(s, hi)).utilisation >= u > estimate(apply_bw(s, lo)).utilisation
    assert hi - lo <= RTOL * hi


def test_unreachable_targets_say_why() -> None:
    s = flat()
    sol = solve(s, vary="bandwidth", output="utilisation", target=0.9, hi=100e6)
    assert not sol.reached and math.isnan(sol.value) and sol.scenario is None
    assert sol.reason.startswith("utilisation stays below 0.9 up to 100 Mbps")
    assert solve(s, vary="bandwidth", output="utilisation", target=1.01).reason.startswith(
        "utilisation stays below 1.01 up to 10 Tbps"
    )
    low = solve(s, vary="latency", output="sync_time", target=1.0, hi=0.5)
    assert not low.reached and "sync_time stays above 1 s up to 500 ms" in low.reason
    assert low.direction == "rises"


def test_days_alias_is_in_days_and_params_keeps_the_moe_share() -> None:
    s = flat(bandwidth_up_bits_per_s=1e9, bandwidth_down_bits_per_s=1e9)
    d = estimate(s).days
    sol = solve(s, vary="bandwidth", output="days", target=d * 2)
    assert sol.reached and sol.output == "days" and sol.achieved <= d * 2
    assert estimate(sol.scenario).days == pytest.approx(sol.achieved, rel=1e-12)
    moe = flat(params=100e9, active_params=25e9, tokens=1e11)
    m = solve(moe, vary="params", output="c_raw", target=6 * 10e9 * 1e11)
    assert m.reached and m.value == pytest.approx(40e9, rel=2 * RTOL)
    assert m.scenario is not None and m.scenario.active_params == pytest.approx(m.value / 4, rel=1e-12)


def test_every_kernel_output_name_is_accepted() -> None:
    sol = solve(flat(), vary="bandwidth", output="link_utilisation_up", target=0.5)
    assert sol.reached and sol.achieved <= 0.5


PAPER_H100 = Constraints(hardware=("h100_sxm",))


@pytest.mark.slow
def test_premium_is_bisected_over_plans() -> None:
    s = Scenario()  # the paper's threat model, treaty regime
    sol = solve(
        s,
        vary="bandwidth",
        output="premium",
        target=2.0,
        mode="paper",
        lo=100e6,
        hi=3e9,
        constraints=PAPER_H100,
        rtol=1e-2,
    )
    assert sol.reached and sol.direction == "falls"
    base = centralized_baseline(1e25, constraints=premium_constraints(s, PAPER_H100), mode="paper").best
    assert base is not None

    def premium(b: float) -> float:
        p = plan(1e25, constraints=premium_constraints(apply_bw(s, b), PAPER_H100), mode="paper")
        assert p.best is not None
        return p.best.cost_usd / base.cost_usd

    lo, hi = sol.bracket
    assert premium(hi) == pytest.approx(sol.achieved, rel=1e-12) and sol.achieved <= 2.0 < premium(lo)
    assert hi - lo <= 1e-2 * hi
    assert sol.calls == sol.evaluations  # one plan per step (the baseline counted once)
    unreached = solve(
        s,
        vary="bandwidth",
        output="premium",
        target=1.0,
        mode="paper",
        lo=100e6,
        hi=1e9,
        constraints=PAPER_H100,
    )
    assert not unreached.reached and "premium stays above 1" in unreached.reason and unreached.calls == 3


def test_premium_constraints_carry_the_scenario_links() -> None:
    s = Scenario(
        bandwidth_up_bits_per_s=57e6,
        bandwidth_down_bits_per_s=310e6,
        latency_s=0.03,
        duration_s=100 * 86400.0,
        compression_ratio=10.0,
        mfu=0.3,
    )
    c = premium_constraints(s)
    assert (c.bandwidth_up_bits_per_s, c.bandwidth_down_bits_per_s, c.latency_s) == (57e6, 310e6, 0.03)
    assert (c.max_duration_s, c.compression_ratio, c.mfu) == (100 * 86400.0, 10.0, 0.3)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"vary": "colour"}, "for"),
        ({"output": "happiness"}, "where"),
        ({"lo": 10.0, "hi": 1.0}, "range"),
        ({"lo": -1.0}, "range"),
        ({"lo": math.inf}, "range"),
        ({"target": math.nan}, "target"),
        ({"mode": "fast"}, "mode"),
        ({"vary": "nodes", "lo": 1.5}, "range"),
        ({"vary": "nodes", "output": "premium"}, "for"),
        ({"grid_points": 2}, "grid_points"),
        ({"rtol": 0.0}, "rtol"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(kw: dict[str, Any], field: str) -> None:
    args: dict[str, Any] = {"vary": "bandwidth", "output": "utilisation", "target": 0.9}
    args.update(kw)
    with pytest.raises(InputError) as exc:
        solve(flat(), **args)
    assert exc.value.field == field and "\n" not in str(exc.value)


def test_solution_to_dict_is_json_ready() -> None:
    sol = solve(flat(), vary="bandwidth", output="utilisation", target=0.9)
    d = sol.to_dict()
    assert set(d) == {f.name for f in dataclasses.fields(Solution)}
    assert isinstance(d["bracket"], list) and isinstance(d["scenario"], dict)
    assert Scenario.from_dict(d["scenario"]) == sol.scenario
