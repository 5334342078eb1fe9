"""Guards for four model mutations that survived the fast tier or only a golden file (issue 35).

Each test is computed by hand, not read from a golden file, and was confirmed to fail with its
mutation applied to a copy of ``src/`` (CONTRIBUTING.md, "Mutation guards"):

- the frontier's "what binds" word (cost or bandwidth) for the rate just below the limit;
- the planner's budget bound: a plan re-run with ``max_cost_usd`` equal to its own cost is the same plan;
- DiLoCo's sync traffic honours the codec's bits per parameter;
- the Streaming DiLoCo overlap depth tau: a fragment hides behind exactly tau inner steps.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from dispersal.model import DEFAULT_PARAMS, estimate
from dispersal.model.analyses.frontier import cells
from dispersal.model.inputs.presets import load_scenario
from dispersal.model.kernel import schedule
from dispersal.model.search.planner import Constraints, plan

# --- frontier: the binding word -------------------------------------------------------------------


def _cell(monkeypatch: pytest.MonkeyPatch, cost_below_usd: float, reaches_below: bool) -> Any:
    """A hand-built cell: a two-rate grid (100 Mbps, 1 Gbps), one combo, the single-datacenter cost
    c0 = $100 and a premium of 2x (budget $200). At 1 Gbps the plan costs $150 (fits); at 100 Mbps
    it costs `cost_below_usd` (inf: no plan reaches the target at that rate at any cost, unless
    `reaches_below`, when one does but over every premium searched)."""
    for name in ("_most", "_least_power", "_shortest", "_distance"):  # the other columns: not under test
        monkeypatch.setattr(
            cells,
            name,
            lambda *_a, _n=name, **_k: (None,) * (2 if _n == "_distance" else 4 if _n == "_most" else 3),
        )
    pick = SimpleNamespace(
        sites=4, chips_per_site=8, hardware="h100_sxm", power_per_site_kw=10.0, days=30.0,
        mean_wan_mbps_per_site=500.0, cost_usd=150.0, replicas=4,
    )  # fmt: skip
    eng = SimpleNamespace(
        reaches=lambda _combos, _cond, _t: reaches_below,
        pick=lambda *_a: pick,
        max_site_kw=None,
    )
    tab = SimpleNamespace(
        combos=np.array([0]),
        cost_min=np.array([[cost_below_usd], [150.0]]),  # [condition (rate), combo]
        n_min=np.array([[4], [4]]),
        budgets_usd=[200.0, 400.0],
    )
    lay = SimpleNamespace(bw=[0, 1], conds=["100 Mbps", "1 Gbps"])
    return cells.cell_limit(eng, 1e24, 2.0, 100.0, (1e8, 1e9), tab, lay, 0)  # type: ignore[arg-type]


def test_frontier_cost_binds_when_the_rate_below_reaches_the_target_over_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 100 Mbps a plan reaches the target for $300 = 3.00x the datacenter: cost binds, not bandwidth."""
    lim = _cell(monkeypatch, 300.0, reaches_below=True)
    assert lim.least_bandwidth_bits_per_s == 1e9
    assert lim.binds == "cost: 3.00x at 100 Mbps"


def test_frontier_bandwidth_binds_when_no_plan_reaches_at_the_rate_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 100 Mbps nothing reaches the target at any cost: bandwidth binds, not cost."""
    lim = _cell(monkeypatch, np.inf, reaches_below=False)
    assert lim.least_bandwidth_bits_per_s == 1e9
    assert lim.binds.startswith("bandwidth: at 100 Mbps no plan reaches 1e+24 FLOP at any cost")


def test_frontier_cost_binds_beyond_the_largest_premium(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 100 Mbps a plan reaches the target, but over the largest premium searched ($400 = 4x): cost."""
    lim = _cell(monkeypatch, np.inf, reaches_below=True)
    assert lim.binds == "cost: over the largest premium (4x) at 100 Mbps"


# --- planner: the budget bound is inclusive --------------------------------------------------------


@pytest.mark.parametrize("target", [1e23, 1e24, pytest.param(1e25, marks=pytest.mark.slow)])
def test_a_plan_fits_a_budget_equal_to_its_own_cost(target: float) -> None:
    """Re-planning with max_cost_usd = the plan's own cost returns the same plan (`cost <= budget`);
    with `<` the plan would exclude itself and the re-run would find nothing or a different plan."""
    c = Constraints(hardware=("h100_sxm",))
    first = plan(target, constraints=c)
    assert first.feasible and first.best is not None
    again = plan(target, constraints=dataclasses.replace(c, max_cost_usd=first.best.cost_usd))
    assert again.feasible and again.best is not None, again.reasons
    a, b = first.best, again.best
    assert (b.hardware, b.nodes, b.chips_per_node, b.params, b.cost_usd) == (
        a.hardware,
        a.nodes,
        a.chips_per_node,
        a.params,
        a.cost_usd,
    )


# --- DiLoCo traffic: the codec's bits per parameter ------------------------------------------------

#: Bits per parameter on the wire, from data/codecs.toml: value_bits x density + index bits + overhead
#: (int4: 4 value bits + 0.5 bits of per-block scale).
CODEC_BITS = {"fp32": 32.0, "bf16": 16.0, "int8": 8.0, "int4": 4.5}


@pytest.mark.parametrize(("codec", "bits"), CODEC_BITS.items())
def test_diloco_sync_traffic_honours_the_codec(codec: str, bits: float) -> None:
    """7B parameters on 6 nodes, ring all-reduce: the payload is 7e9 x bits / 8 bytes and each node
    uploads (and downloads) 2 (N - 1) / N of it per sync: bf16 -> 14 GB payload, 23.33 GB a node."""
    s = load_scenario().replace(algorithm="diloco", codec=codec, aggregation="ring", num_nodes=6, params=7e9)
    e = estimate(s, mode="default")
    payload = 7e9 * bits / 8
    assert e.payload_bytes_per_sync == pytest.approx(payload, rel=1e-12)
    assert e.traffic.sync_upload_bytes == pytest.approx(2 * 5 / 6 * payload, rel=1e-12)
    assert e.traffic.sync_download_bytes == pytest.approx(2 * 5 / 6 * payload, rel=1e-12)


# --- Streaming DiLoCo: the overlap depth tau -------------------------------------------------------


def _common(fragments: float, tau: float, bwd: float) -> Any:
    return SimpleNamespace(
        fragments=np.array(fragments), tau=np.array(tau), bwd=np.array(bwd), streaming=np.array(True)
    )


@pytest.mark.parametrize(
    ("tau", "want_s"),
    [
        # P = 2 fragments of 5 s each, H = 10 steps of 1 s, backward share 0.5 step: a fragment hides
        # behind tau + 0.5 steps, the rest is exposed: 10 + 2 max(0, 5 - (tau + 0.5)).
        (0, 10 + 2 * 4.5),
        (1, 10 + 2 * 3.5),
        (3, 10 + 2 * 1.5),
        (4, 10 + 2 * 0.5),
        (5, 10.0),  # fully hidden; the link carries 2 x 5 s <= 10 s
        (-1, 10.0),  # the whole interval H / P = 5 steps
    ],
)
def test_streaming_fragment_hides_behind_exactly_tau_steps(tau: float, want_s: float) -> None:
    """Outer-step time of Streaming DiLoCo by hand, for each overlap depth tau."""
    c = _common(2.0, tau, 0.5)
    got = schedule.cycle(c, np.array(10.0), np.array(1.0), np.array(10.0), np.array(5.0), np.array(0.0))
    assert float(got) == pytest.approx(want_s, rel=1e-12)


def test_streaming_overlap_depth_reaches_the_estimate() -> None:
    """End to end: Streaming DiLoCo, H = 20, P = 4 fragments, overlap depth tau. Each fragment hides
    behind tau + b inner steps (b = 2/3, ModelParams.ddp_overlap_fraction), so the outer step is
    max(H T_step + P (T_frag - (tau + b) T_step), P T_frag). With the whole interval (tau unset) the
    link bound P T_frag binds, which gives T_frag; T_step is the estimate's step time."""
    base = load_scenario().replace(
        algorithm="streaming", fragments=4, inner_steps=20, num_nodes=8, params=7e9
    )
    b = DEFAULT_PARAMS.ddp_overlap_fraction
    assert b == pytest.approx(2 / 3)
    whole = estimate(base, mode="default")
    t_step, t_frag = whole.step_time_s, whole.outer_step_time_s / 4
    assert 4 * t_frag > 20 * t_step  # the link bound binds with the whole interval
    for tau in (0, 1, 3):
        e = estimate(base.replace(overlap_depth=tau), mode="default")
        assert e.step_time_s == t_step
        want = 20 * t_step + 4 * (t_frag - (tau + b) * t_step)
        assert want > 4 * t_frag  # the exposed sync binds: the depth shows
        assert e.outer_step_time_s == pytest.approx(want, rel=1e-9), tau
