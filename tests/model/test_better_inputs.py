"""A better input never gives less (issue 31, item 3): default mode's schedule choice (`kernel.choose`)
maximises C_quality over a fixed grid of H and H_reg, so more bandwidth, lower latency, higher MFU
or a faster accelerator (same memory) never lowers C_quality or C_local, nor raises the printed loss.

The cases of the issue are pinned with their numbers; the property is checked by hypothesis over
node types, sizes, H and batch for flat DiLoCo, Streaming DiLoCo and hierarchical DiLoCo; the walk
that finds the grid maximum is checked against the whole grid."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dispersal.model.inputs.catalog import accelerator
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Scenario, as_arrays, kernel_inputs
from dispersal.model.inputs.scenario_fields import Algorithm
from dispersal.model.kernel import choose
from dispersal.model.kernel.chinchilla import optimal_compute_for_loss
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.kernel.schedule import SCHEDULE_GRID
from dispersal.model.run.estimate import estimate

HARDWARE = ["h100_sxm", "h200", "a100_80gb", "tpu_v5e", "tpu_v5p", "b200", "mi300x"]
#: 60 examples per property (each is two grid walks of the schedule choice); the four properties draw
#: from one strategy, so together they still see 240 scenarios per run.
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WANT = ("c_quality_flop", "c_local_flop", "loss", "inner_steps", "regional_rounds", "feasible")
#: Relative slack for rounding (the Chinchilla inversion is iterative).
RTOL = 1e-9


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: float(10**e))


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """Random DiLoCo-family runs: node type, size, nodes, link, H (auto or fixed), batch."""
    hw = draw(st.sampled_from(HARDWARE))
    fp8 = accelerator(hw).dense_fp8_flop_per_s > 0
    algo = draw(st.sampled_from(["diloco", "streaming", "hierarchical"]))
    kw: dict[str, Any] = {
        "hardware": hw,
        "precision": "fp8" if fp8 else "bf16",
        "algorithm": algo,
        "num_nodes": draw(st.integers(2, 2000)),
        "params": draw(log_uniform(1e8, 1e11)),
        "inner_steps": draw(st.sampled_from([0, 0, 0, 10, 30, 100])),
        "local_batch_tokens": draw(st.sampled_from([131072, 524288, 2097152, 8388608])),
        "bandwidth_up_bits_per_s": draw(log_uniform(1e7, 3e10)),
        "bandwidth_down_bits_per_s": draw(log_uniform(1e7, 3e10)),
        "latency_s": draw(st.floats(0.001, 0.2)),
        "duration_s": draw(log_uniform(10 * 86400, 400 * 86400)),
        "regime": "none",
    }
    if algo == "hierarchical":
        kw["group_size"] = draw(st.integers(2, 16))
        kw["overlap_communication"] = draw(st.booleans())
    return Scenario(**kw)


def _pair(s: Scenario, field: str, factor: float) -> dict[str, np.ndarray[Any, Any]]:
    """The kernel inputs of `s` (default mode) and of `s` with `field` multiplied by `factor`, stacked."""
    x = kernel_inputs(s, "default", DEFAULT_PARAMS)
    y = dict(x)
    if field == "bandwidth":
        y["up_bits_per_s"] = x["up_bits_per_s"] * factor
        y["down_bits_per_s"] = x["down_bits_per_s"] * factor
    elif field == "mfu":
        y["mfu"] = min(1.0, x["mfu"] * factor)
    else:
        y[field] = x[field] * factor
    return {k: np.array([x[k], y[k]]) for k in as_arrays(x)}


def _consistent(r: dict[str, Any]) -> bool:
    """Whether the quality law prints the loss C_quality is made of (C_quality = C_opt(printed loss),
    issue 31 item 1, branch i31q). Until it does, the loss and C_local need not follow C_quality."""
    k = DEFAULT_PARAMS
    c = optimal_compute_for_loss(
        r["loss"],
        k.chinchilla_e,
        k.chinchilla_a,
        k.chinchilla_b,
        k.chinchilla_alpha,
        k.chinchilla_beta,
        k.tokens_per_param_optimal,
    )
    return bool(np.allclose(c, r["c_quality_flop"], rtol=1e-6))


def _no_worse(s: Scenario, field: str, factor: float) -> None:
    r = evaluate(_pair(s, field, factor), DEFAULT_PARAMS, outputs=WANT)
    q, loc, loss = r["c_quality_flop"], r["c_local_flop"], r["loss"]
    assert q[1] >= q[0] * (1 - RTOL), (field, factor, r)
    if _consistent(r):
        assert loc[1] >= loc[0] * (1 - RTOL), (field, factor, r)
        assert loss[1] <= loss[0] * (1 + RTOL), (field, factor, r)


@pytest.mark.slow
@SETTINGS
@given(s=scenarios(), f=log_uniform(1.01, 30))
def test_more_bandwidth_never_gives_less(s: Scenario, f: float) -> None:
    _no_worse(s, "bandwidth", f)


@pytest.mark.slow
@SETTINGS
@given(s=scenarios(), f=st.floats(0.0, 0.99))
def test_lower_latency_never_gives_less(s: Scenario, f: float) -> None:
    _no_worse(s, "latency_s", f)


@pytest.mark.slow
@SETTINGS
@given(s=scenarios(), f=log_uniform(1.01, 5))
def test_higher_mfu_never_gives_less(s: Scenario, f: float) -> None:
    _no_worse(s, "mfu", f)


@pytest.mark.slow
@SETTINGS
@given(s=scenarios(), f=log_uniform(1.01, 10))
def test_faster_accelerator_never_gives_less(s: Scenario, f: float) -> None:
    """A scaled peak FLOP/s at the same memory."""
    _no_worse(s, "node_peak_flop_per_s", f)


WALK_GAP = 3e-4
"""How far below the grid's best the walk may stop (relative): three times the worst gap seen (9.2e-5
over 1,078 hierarchical runs drawn by this strategy; flat runs: none over 381)."""


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=scenarios())
@example(
    s=Scenario(
        algorithm=Algorithm.HIERARCHICAL,
        overlap_communication=False,
        num_nodes=30,
        params=1e9,
        bandwidth_up_bits_per_s=1e10,
        bandwidth_down_bits_per_s=1e10,
        latency_s=0.125,
        duration_s=1e6,
        regime="none",
        group_size=2,
    )
)
def test_walk_finds_the_grid_maximum(s: Scenario) -> None:
    """The steepest-ascent walk (`kernel.choose`) ends at the best schedule of the whole grid, or within
    `WALK_GAP` of it: every grid H (and, hierarchical, every H_reg up to 1,024) scores no higher. The
    score is not always unimodal: on hierarchical runs the best schedules lie along a ridge of about
    constant H x H_reg, and a walk of single and diagonal steps stopped 0.48% below the grid's best
    on the example below (CI, 2026-12-04); with the knight's steps along the ridge the worst gap seen
    is 9.2e-5, so the monotonicity of the choice holds to within that gap, not exactly
    (docs/model_corrections.md)."""
    x = kernel_inputs(s, "default", DEFAULT_PARAMS)
    chosen = evaluate(as_arrays(x), DEFAULT_PARAMS, outputs=(*WANT, "time_ok", "run_time_s"))
    best = float(np.asarray(choose.score(chosen)))
    hier = s.algorithm.value == "hierarchical"
    hs = SCHEDULE_GRID if s.inner_steps == 0 else np.array([float(s.inner_steps)])
    rs = SCHEDULE_GRID[SCHEDULE_GRID <= 1024] if hier else np.array([1.0])
    grid = dict(as_arrays(x))
    H, R = np.meshgrid(hs, rs, indexing="ij")
    grid["inner_steps"], grid["regional_rounds"] = H.ravel(), R.ravel()
    grid["schedule_rule"] = np.zeros(H.size)
    every = evaluate(grid, DEFAULT_PARAMS, outputs=("c_quality_flop", "time_ok", "run_time_s"))
    assert float(np.max(choose.score(every))) <= best * (1 + WALK_GAP) + 1e-300


def _run(**kw: Any) -> Any:
    return estimate(Scenario(**kw), mode="default")


def test_issue_hierarchical_fixed_h_latency() -> None:
    """Issue 31: h200, 131 nodes, 3.5B, 635 Mbps, 90 days, hierarchical, H = 30: 50 -> 25 ms lost 42% of
    C_quality (H_reg jumped, H_eff 30 -> 680); the chosen H_reg now gives no less."""
    kw = dict(
        hardware="h200",
        num_nodes=131,
        params=3.5e9,
        bandwidth_up_bits_per_s=635e6,
        bandwidth_down_bits_per_s=635e6,
        duration_s=90 * 86400,
        algorithm="hierarchical",
        inner_steps=30,
    )
    slow, fast = _run(latency_s=0.050, **kw), _run(latency_s=0.025, **kw)
    assert fast.c_quality_flop >= slow.c_quality_flop


def test_issue_mfu_auto_h() -> None:
    """Issue 31: 30 nodes, 10B, automatic H: MFU 0.2 -> 0.5 lowered C_quality (H 567 -> 1417)."""
    lo, hi = _run(num_nodes=30, params=10e9, mfu=0.2), _run(num_nodes=30, params=10e9, mfu=0.5)
    assert hi.c_quality_flop >= lo.c_quality_flop


@pytest.mark.parametrize("mode", ["paper"])
def test_paper_mode_keeps_the_papers_h(mode: str) -> None:
    """Paper mode keeps Rahman 2026's H = ceil(T_sync / T_step) (its own rule, non-monotone in MFU:
    H 10 -> 24 and C_quality 1.58e23 -> 1.33e23 at 30 nodes, 10B, MFU 0.2 -> 0.5)."""
    lo = estimate(Scenario(num_nodes=30, params=10e9, mfu=0.2), mode=mode)
    hi = estimate(Scenario(num_nodes=30, params=10e9, mfu=0.5), mode=mode)
    assert (lo.inner_steps, hi.inner_steps) == (10, 24)
    assert hi.c_quality_flop < lo.c_quality_flop


def test_fixed_h_is_kept() -> None:
    """`--set inner_steps=N` is a fixed H: the choice leaves it alone."""
    assert _run(num_nodes=30, params=10e9, inner_steps=37).inner_steps == 37


def test_grid_is_fixed() -> None:
    """The candidate set: round(sqrt(2)^k), k = 0..34 (1 .. 131,072), no input in it."""
    assert SCHEDULE_GRID[:12].tolist() == [1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64]
    assert SCHEDULE_GRID[-1] == 131072


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=scenarios(), rel=st.sampled_from([0.25, 0.9, 0.999999, 1.0, 1.000001, 1.1, 4.0, math.inf]))
def test_a_quality_floor_keeps_every_answer_to_does_it_reach_the_floor(s: Scenario, rel: float) -> None:
    """The optional input ``quality_floor`` (the frontier's searches ask only "C_quality >= target?")
    stops the schedule walk of a configuration whose first schedule already reaches it, and skips it
    for one whose all-compute bound cannot: the answer to that question, and every schedule-free
    output, are the same as without the floor, at floors below, at, just around (1e-6) and above the
    chosen schedule's C_quality."""
    x = as_arrays(kernel_inputs(s, "default", DEFAULT_PARAMS))
    want = (*WANT, "time_ok", "run_time_s", "cost_usd", "algorithm_resolved", "replicas")
    full = evaluate(x, DEFAULT_PARAMS, outputs=want)
    floor = float(np.asarray(full["c_quality_flop"])) * rel if np.isfinite(full["c_quality_flop"]) else 1e20
    cut = evaluate({**x, "quality_floor": np.asarray(floor)}, DEFAULT_PARAMS, outputs=want)
    assert bool(choose.score(cut) >= floor) == bool(choose.score(full) >= floor)
    for k in ("cost_usd", "algorithm_resolved", "replicas", "feasible"):
        assert np.array_equal(cut[k], full[k], equal_nan=True), k
    if rel == math.inf:  # an infinite floor is no floor: the walk runs in full
        assert np.array_equal(cut["c_quality_flop"], full["c_quality_flop"], equal_nan=True)
    # A configuration left unwalked reports one of its schedules: never more than the best one.
    assert not float(np.asarray(cut["c_quality_flop"])) > float(np.asarray(full["c_quality_flop"])) * (
        1 + RTOL
    )


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=scenarios())
def test_the_floors_bound_is_above_every_schedule(s: Scenario) -> None:
    """The floor's bound (`choose._below_floor_dropped`): the quality stage alone (`kernel.requality`)
    gives the evaluation's own C_quality at its own tokens and H, no grid schedule trains more tokens
    than the all-compute run, and the bound (those tokens, the grid's smallest H and H_reg) is at least
    the C_quality of every grid schedule (H, and hierarchical H_reg up to 1,024)."""
    from dispersal.model.kernel.context import Inputs
    from dispersal.model.kernel.kernel import requality

    x = as_arrays(kernel_inputs(s, "default", DEFAULT_PARAMS))
    want = ("c_quality_flop", "tokens", "inner_steps_effective", *sorted(choose.BOUND_OUTPUTS))
    r = evaluate(x, DEFAULT_PARAMS, outputs=want)
    flat = {k: np.asarray(v).reshape(1) for k, v in x.items()}
    inp = Inputs(flat, DEFAULT_PARAMS, {}, None, (1,))
    rr = {k: np.asarray(v).reshape(1) for k, v in r.items()}
    again = requality(inp, rr, rr["tokens"], rr["inner_steps_effective"])
    np.testing.assert_allclose(again, rr["c_quality_flop"], rtol=1e-12)
    hier = s.algorithm.value == "hierarchical"
    hs = SCHEDULE_GRID if s.inner_steps == 0 else np.array([float(s.inner_steps)])
    rs = SCHEDULE_GRID[SCHEDULE_GRID <= 1024] if hier else np.array([1.0])
    H, R = np.meshgrid(hs, rs, indexing="ij")
    grid = dict(x)
    grid["inner_steps"], grid["regional_rounds"] = H.ravel(), R.ravel()
    every = evaluate(grid, DEFAULT_PARAMS, outputs=("c_quality_flop", "tokens"))
    assert np.all(every["tokens"] <= rr["_tokens_all_compute"] * (1 + 1e-12))
    h_min = hs[0] if s.inner_steps else SCHEDULE_GRID[0]
    ceiling = requality(inp, rr, rr["_tokens_all_compute"] * (1 + 1e-12), np.asarray([float(h_min)]))
    finite = np.isfinite(every["c_quality_flop"])
    assert np.all(every["c_quality_flop"][finite] <= ceiling[0] * (1 + 1e-9))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=scenarios())
def test_the_schedule_bound_and_the_first_schedule(s: Scenario) -> None:
    """The private output ``_schedule_bound`` (a maximising caller's pruning bound) is at least the
    chosen schedule's C_quality, and equals it where nothing is walked (a fixed schedule, one replica);
    with ``schedule_walk`` 0 the kernel keeps the first schedule: never more C_quality than the chosen
    one, and the same schedule-free outputs."""
    x = as_arrays(kernel_inputs(s, "default", DEFAULT_PARAMS))
    want = (*WANT, "cost_usd", "replicas", choose.SCHEDULE_BOUND)
    full = evaluate(x, DEFAULT_PARAMS, outputs=want)
    first = evaluate({**x, "schedule_walk": np.zeros(())}, DEFAULT_PARAMS, outputs=want)
    q, bound = float(np.asarray(full["c_quality_flop"])), float(np.asarray(full[choose.SCHEDULE_BOUND]))
    assert bound == float(np.asarray(first[choose.SCHEDULE_BOUND]))
    if math.isnan(q):
        return
    assert bound >= q * (1 - 1e-12)
    q0 = float(np.asarray(first["c_quality_flop"]))
    assert not q0 > q * (1 + RTOL)
    for k in ("cost_usd", "replicas", "feasible"):
        assert np.array_equal(first[k], full[k], equal_nan=True), k
    fixed = s.inner_steps > 0 and s.algorithm.value != "hierarchical"
    if fixed or float(np.asarray(full["replicas"])) <= 1:
        assert bound == q
    # paper mode chooses nothing: the bound is the run's own C_quality
    xp = as_arrays(kernel_inputs(s, "paper", DEFAULT_PARAMS))
    paper = evaluate(xp, DEFAULT_PARAMS, outputs=("c_quality_flop", choose.SCHEDULE_BOUND))
    qp = float(np.asarray(paper["c_quality_flop"]))
    assert float(np.asarray(paper[choose.SCHEDULE_BOUND])) == (-math.inf if math.isnan(qp) else qp)
