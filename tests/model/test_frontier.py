"""`dispersal frontier`: the limits of dispersal per target and premium, P(reach) first, strict JSON,
and more bandwidth never shrinking the frontier."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.analyses.frontier import frontier
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints

SMALL = Constraints(hardware=("h100_sxm",))
GRID = (30e6, 100e6, 1e9, 10e9)


@pytest.mark.slow
def test_frontier_cells_follow_the_planner_and_lead_with_p_reach() -> None:
    """Each cell's least bandwidth is the lowest grid point whose plan fits premium x the centralized
    cost, the next lower point does not, and the JSON is strict with P(reach) first."""
    f = frontier(
        targets_flop=(1e24, 1e25),
        premiums=(2.0, 5.0),
        constraints=SMALL,
        mode="paper",
        bandwidth_grid_bits_per_s=GRID,
        samples=8,
    )
    d = json.loads(json.dumps(f.to_dict(), allow_nan=False))
    assert next(iter(d)) == "p_reach"
    assert all(r["p_reach"] is None or 0.0 <= r["p_reach"] <= 1.0 for r in d["p_reach"])
    assert len(f.limits) == 4
    for lim in f.limits:
        base = planner.centralized_baseline(lim.target_flop, constraints=SMALL, mode="paper").best
        assert base is not None and lim.budget_usd == pytest.approx(lim.premium * base.cost_usd)
        if lim.least_bandwidth_bits_per_s is None:
            continue
        i = GRID.index(lim.least_bandwidth_bits_per_s)
        c = SMALL.replace(bandwidth_up_bits_per_s=GRID[i], bandwidth_down_bits_per_s=GRID[i])
        p = planner.plan(lim.target_flop, constraints=c, mode="paper").best
        assert lim.budget_usd is not None
        assert p is not None and p.cost_usd <= lim.budget_usd * (1 + 1e-12)
        assert lim.sites == p.nodes and lim.chips_per_site == p.chips_per_node
        assert lim.most_sites_seen is not None and lim.most_sites_seen >= lim.sites
        if i > 0:
            lower = SMALL.replace(bandwidth_up_bits_per_s=GRID[i - 1], bandwidth_down_bits_per_s=GRID[i - 1])
            q = planner.plan(lim.target_flop, constraints=lower, mode="paper").best
            assert q is None or q.cost_usd > lim.budget_usd
            assert lim.binds


@settings(max_examples=4, deadline=None)
@given(
    target=st.sampled_from([3e23, 1e24, 1e25]),
    premium=st.sampled_from([1.5, 2.0, 5.0]),
    factor=st.sampled_from([3.0, 10.0]),
)
@pytest.mark.slow
def test_more_bandwidth_never_shrinks_the_frontier(target: float, premium: float, factor: float) -> None:
    """With every grid bandwidth multiplied by `factor`, a cell reachable before stays reachable and
    the cost at each grid point never rises."""
    kw = {"targets_flop": (target,), "premiums": (premium,), "constraints": SMALL, "mode": "paper"}
    slow = frontier(bandwidth_grid_bits_per_s=GRID, **kw)  # type: ignore[arg-type]
    fast = frontier(bandwidth_grid_bits_per_s=tuple(b * factor for b in GRID), **kw)  # type: ignore[arg-type]
    if slow.limits[0].least_bandwidth_bits_per_s is not None:
        assert fast.limits[0].least_bandwidth_bits_per_s is not None
    for a, b in zip(slow.cost_by_bandwidth_usd[target], fast.cost_by_bandwidth_usd[target], strict=True):
        if a is not None and b is not None:
            assert b <= a * (1 + 1e-12)


@pytest.mark.slow
def test_cli_rejects_bad_premium_in_one_line() -> None:
    """Bad input: exit 2, one line naming the field, no traceback."""
    r = subprocess.run(
        [sys.executable, "-m", "dispersal", "frontier", "--premium", "x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2
    assert "premium" in r.stderr and "Traceback" not in r.stderr


def test_small_frontier_json_is_strict_and_p_reach_first() -> None:
    """One target, one premium, two grid points: strict JSON, P(reach) first and in [0, 1], and the
    1e24 plan at 100 Mbps fits 5x one datacenter (paper mode, H100 only)."""
    f = frontier(
        targets_flop=(1e24,),
        premiums=(5.0,),
        constraints=SMALL,
        mode="paper",
        bandwidth_grid_bits_per_s=(100e6, 1e9),
        samples=4,
    )
    d = json.loads(json.dumps(f.to_dict(), allow_nan=False))
    assert list(d)[:2] == ["p_reach", "schema_version"]
    assert 0.0 <= d["p_reach"][0]["p_reach"] <= 1.0
    lim = d["limits"][0]
    assert lim["least_bandwidth_bits_per_s"] == 100e6 and lim["sites"] >= 1
    best = planner.plan(1e24, constraints=SMALL, mode="paper").best
    assert best is not None and lim["sites"] == best.nodes
    # H100 SXM: 700 W TDP (catalogue) x the scenario's PUE, per chip.
    assert lim["power_per_site_kw"] == pytest.approx(best.chips_per_node * 700.0 * best.scenario.pue / 1000.0)
