"""`dispersal frontier`: the limits of dispersal per target and premium agree with the planner's
exact search, the most sites is a true maximum, P(reach) leads and lies in [0, 1], more bandwidth
never shrinks the frontier and a stricter regime never makes it cheaper."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.analyses.frontier import frontier
from dispersal.model.analyses.frontier.table import Condition, Engine, geomgrid, search_target
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints

SMALL = Constraints(hardware=("h100_sxm",))
GRID = (30e6, 100e6, 1e9, 10e9)


def _at(c: Constraints, bw: float) -> Constraints:
    return c.replace(bandwidth_up_bits_per_s=bw, bandwidth_down_bits_per_s=bw)


def test_small_frontier_json_is_strict_and_p_reach_first() -> None:
    """One target, one premium, two grid points (paper mode, H100 only): strict JSON with P(reach)
    first, every band's P(reach) in [0, 1], and the cell's plan is the planner's exact answer."""
    f = frontier(
        targets_flop=(1e24,),
        premiums=(5.0,),
        constraints=SMALL,
        mode="paper",
        bandwidth_grid_bits_per_s=(100e6, 1e9),
        samples=4,
        sites=(4,),
    )
    d = json.loads(json.dumps(f.to_dict(), allow_nan=False))
    assert list(d)[:2] == ["p_reach", "schema_version"]
    assert 0.0 <= d["p_reach"][0]["p_reach"] <= 1.0
    lim = d["limits"][0]
    assert next(iter(lim)) == "band" and 0.0 <= lim["band"]["p_reach"] <= 1.0
    assert all(0.0 <= p <= 1.0 for p in lim["band"]["p_reach_by_bandwidth"])
    # reaching within the premium at 100 Mbps implies reaching there at all (a draw that cannot
    # reach is never "within" a budget, even when its building cannot reach either)
    assert lim["band"]["p_reach_by_bandwidth"][0] <= d["p_reach"][0]["p_reach"]
    assert lim["least_bandwidth_bits_per_s"] == 100e6
    best = planner.plan(1e24, constraints=_at(SMALL, 100e6), mode="paper", search="exact").best
    assert best is not None
    assert (lim["sites"], lim["chips_per_site"]) == (best.nodes, best.chips_per_node)
    assert lim["cost_usd"] == pytest.approx(best.cost_usd, rel=1e-9)
    # H100 SXM: 700 W TDP (catalogue) x the scenario's PUE, per chip.
    assert lim["power_per_site_kw"] == pytest.approx(best.chips_per_node * 700.0 * best.scenario.pue / 1000.0)
    assert lim["most_sites"] >= lim["sites"]
    assert lim["least_power_per_site_kw"] <= lim["power_per_site_kw"]
    assert d["at_sites"][0]["sites"] == 4 and d["at_sites"][0]["premium"] is None


@pytest.mark.slow
def test_cells_follow_the_exact_planner() -> None:
    """Each cell's least bandwidth is the lowest grid point whose exact plan fits premium x the
    centralized cost; the next lower point's plan does not fit."""
    f = frontier(
        targets_flop=(1e24, 1e25),
        premiums=(2.0, 5.0),
        constraints=SMALL,
        mode="paper",
        bandwidth_grid_bits_per_s=GRID,
        quality_lines=False,
        sites=(),
    )
    for lim in f.limits:
        base = planner.centralized_baseline(lim.target_flop, constraints=SMALL, mode="paper").best
        assert base is not None and lim.budget_usd == pytest.approx(lim.premium * base.cost_usd)
        if lim.least_bandwidth_bits_per_s is None:
            continue
        i = GRID.index(lim.least_bandwidth_bits_per_s)
        p = planner.plan(lim.target_flop, constraints=_at(SMALL, GRID[i]), mode="paper", search="exact").best
        assert p is not None and lim.cost_usd == pytest.approx(p.cost_usd, rel=1e-9)
        assert lim.budget_usd is not None and p.cost_usd <= lim.budget_usd * (1 + 1e-12)
        if i > 0:
            low = _at(SMALL, GRID[i - 1])
            q = planner.plan(lim.target_flop, constraints=low, mode="paper", search="exact").best
            assert q is None or q.cost_usd > lim.budget_usd
            assert lim.binds.split(":")[0] in ("cost", "bandwidth")


def test_most_sites_is_a_true_maximum() -> None:
    """No candidate at any site count above the most sites found meets the target within the
    budget (every integer N up to what the budget buys, H100 only, default mode)."""
    eng = Engine(Mode.DEFAULT, SMALL, "treaty")
    k = [Condition(bandwidth_bits_per_s=1e9, latency_s=0.1, duration_s=SMALL.max_duration_s)]
    target, budget = 1e24, 3e6
    tab = search_target(eng, target, k, (budget,))
    most = int(tab.most_sites[0, 0])
    assert most > 1
    combos = np.flatnonzero(eng.usable).astype(np.int64)
    cost = eng.node_cost(SMALL.max_duration_s)[eng.space.combo_hw[combos]]
    top = np.floor(budget / cost)
    rows = [(c, n) for c, t in zip(combos, top, strict=True) for n in range(most + 1, int(t) + 1)]
    cc = np.asarray([r[0] for r in rows], dtype=np.int64)
    nn = np.asarray([r[1] for r in rows], dtype=np.float64)
    ok = eng.meets(cc, nn, np.zeros(cc.size, dtype=np.int64), k, target)
    assert not ok.any()
    # and the maximum itself is a plan that meets the target within the budget
    w = int(tab.most_combo[0, 0])
    r = eng.run(np.asarray([w]), np.asarray([float(most)]), np.zeros(1, dtype=np.int64), k)
    assert r["valid"][0] > 0 and r["metric"][0] >= target and r["cost_usd"][0] <= budget


@pytest.mark.slow
@pytest.mark.parametrize(("target", "bw"), [(1e24, 100e6), (1e25, 1e9), (3e25, 10e9)])
def test_a_screen_that_stops_at_the_margin_keeps_the_same_plans(target: float, bw: float) -> None:
    """`search_target(exact_screen=False)` (the kernel's floor at T (1 - SCREEN_MARGIN): the schedule
    walk stops there) keeps the same candidates and finds the same cheapest and largest plans as the
    exact screen, and says its screen values are not exact."""
    c = Constraints(hardware=("h100_sxm", "a100_80gb"))
    eng = Engine(Mode.DEFAULT, c, "treaty")
    k = [
        Condition(bandwidth_bits_per_s=bw, latency_s=0.1, duration_s=c.max_duration_s),
        Condition(bandwidth_bits_per_s=bw / 10, latency_s=0.1, duration_s=c.max_duration_s),
    ]
    budgets = (3e6, 3e7, 3e8)
    exact = search_target(eng, target, k, budgets)
    cheap = search_target(eng, target, k, budgets, exact_screen=False)
    assert exact.combos.size > 0 and np.isfinite(exact.cost_min).any()
    np.testing.assert_array_equal(cheap.combos, exact.combos)
    np.testing.assert_array_equal(cheap.n_min, exact.n_min)
    np.testing.assert_array_equal(cheap.cost_min, exact.cost_min)
    np.testing.assert_array_equal(cheap.most_sites, exact.most_sites)
    assert exact.screen_exact and not cheap.screen_exact and math.isnan(cheap.c_local_uncapped_flop)
    # the exact values on demand (a cell's reason): the exact screen's, and "any reaches" answered the same
    np.testing.assert_array_equal(cheap.exact_reach_flop(), exact.reach_uncapped_flop)
    assert cheap.exact_c_local_flop() == exact.c_local_uncapped_flop
    combos = np.arange(exact.reach_uncapped_flop.size)
    for f in (0.5, 0.9, 0.97, 1.0, 1.03, 2.0):
        for part in (combos, combos[::3], combos[1::4]):
            want = bool(np.any(exact.reach_uncapped_flop[part] >= target * f))
            assert cheap.any_reaches(part, target * f) == want == exact.any_reaches(part, target * f)


@pytest.mark.slow
@pytest.mark.parametrize(("target", "bw"), [(1e23, 30e6), (1e24, 100e6), (1e25, 1e9), (3e25, 10e9)])
def test_cheapest_only_finds_the_same_cheapest_plan_per_condition(target: float, bw: float) -> None:
    """`search_target(cheapest_only=True)` (branch and bound on cost = N x a node's cost, what the quality
    lines read) gives exactly the full search's cheapest cost per condition, refines fewer candidates,
    and searches no most sites."""
    c = Constraints(hardware=("h100_sxm", "a100_80gb", "tpu_v5e"))
    eng = Engine(Mode.DEFAULT, c, "treaty")
    k = [
        Condition(bandwidth_bits_per_s=b, latency_s=0.1, duration_s=c.max_duration_s)
        for b in (bw * 10, bw, bw / 10)
    ]
    budgets = (1e7, 1e8, 1e9)
    full = search_target(eng, target, k, budgets, exact_screen=False)
    cheap = search_target(eng, target, k, budgets, exact_screen=False, cheapest_only=True)
    np.testing.assert_array_equal(cheap.combos, full.combos)
    np.testing.assert_array_equal(cheap.cost_min.min(axis=1), full.cost_min.min(axis=1))
    assert np.isfinite(full.cost_min).sum() > np.isfinite(cheap.cost_min).sum() > 0
    # every cost it did compute is the full search's
    done = np.isfinite(cheap.cost_min)
    np.testing.assert_array_equal(cheap.cost_min[done], full.cost_min[done])
    assert not cheap.most_sites.any() and {b for row in cheap.most_binds for b in row} == {"not searched"}


@settings(max_examples=4, deadline=None)
@given(
    target=st.sampled_from([3e23, 1e24, 1e25]),
    premium=st.sampled_from([1.5, 2.0, 5.0]),
    factor=st.sampled_from([3.0, 10.0]),
)
@pytest.mark.slow
def test_more_bandwidth_never_shrinks_the_frontier(target: float, premium: float, factor: float) -> None:
    """With every grid bandwidth multiplied by `factor`: a cell reachable before stays reachable,
    the cheapest cost at each grid point never rises and the most sites never falls."""
    kw = {
        "targets_flop": (target,),
        "premiums": (premium,),
        "constraints": SMALL,
        "mode": "paper",
        "quality_lines": False,
        "sites": (),
    }
    slow = frontier(bandwidth_grid_bits_per_s=GRID, **kw)  # type: ignore[arg-type]
    fast = frontier(bandwidth_grid_bits_per_s=tuple(b * factor for b in GRID), **kw)  # type: ignore[arg-type]
    if slow.limits[0].least_bandwidth_bits_per_s is not None:
        assert fast.limits[0].least_bandwidth_bits_per_s is not None
        assert (fast.limits[0].most_sites or 0) >= (slow.limits[0].most_sites or 0)
    for a, b in zip(slow.cost_by_bandwidth_usd[target], fast.cost_by_bandwidth_usd[target], strict=True):
        if a is not None:
            assert b is not None and b <= a * (1 + 1e-12)
    for a2, b2 in zip(
        slow.most_sites_by_bandwidth[target], fast.most_sites_by_bandwidth[target], strict=True
    ):
        assert all(y >= x for x, y in zip(a2, b2, strict=True))


@pytest.mark.slow
def test_stricter_regime_never_cheaper_on_the_frontier() -> None:
    """treaty_hbm allows only nodes treaty allows: at every grid bandwidth its cheapest plan costs
    at least treaty's, and a cell reachable under it is reachable under treaty."""
    kw = {
        "targets_flop": (1e24, 1e25),
        "premiums": (2.0,),
        "constraints": Constraints(hardware=("h100_sxm", "gh200")),
        "bandwidth_grid_bits_per_s": GRID,
        "quality_lines": False,
        "sites": (),
    }
    loose = frontier(regime_name="treaty", **kw)  # type: ignore[arg-type]
    strict = frontier(regime_name="treaty_hbm", **kw)  # type: ignore[arg-type]
    for t in kw["targets_flop"]:  # type: ignore[attr-defined]
        for a, b in zip(loose.cost_by_bandwidth_usd[t], strict.cost_by_bandwidth_usd[t], strict=True):
            if b is not None:
                assert a is not None and a <= b * (1 + 1e-12)


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**16), samples=st.integers(1, 6))
@pytest.mark.slow
def test_p_reach_is_a_probability(seed: int, samples: int) -> None:
    """Every P(reach) (per target and per cell, per bandwidth) is in [0, 1] and a multiple of
    1/samples; a cell's P(reach) is the largest of its per-bandwidth ones (reaching at a lower
    rate means reaching at some rate)."""
    f = frontier(
        targets_flop=(1e24, 1e25),
        premiums=(2.0,),
        constraints=SMALL,
        mode="default",
        bandwidth_grid_bits_per_s=(100e6, 1e9),
        samples=samples,
        seed=seed,
        quality_lines=False,
        sites=(),
    )
    for t in f.targets_flop:
        p = f.p_reach[t]
        assert p is not None and 0.0 <= p <= 1.0
        assert math.isclose(p * samples, round(p * samples), abs_tol=1e-9)
    for lim in f.limits:
        if lim.band is None:
            continue
        assert 0.0 <= lim.band.p_reach <= 1.0
        assert lim.band.p_reach >= max(lim.band.p_reach_by_bandwidth) - 1e-12
        reach = f.p_reach[lim.target_flop]
        assert reach is not None and lim.band.p_reach_by_bandwidth[0] <= reach + 1e-12


def test_a_power_cap_never_widens_the_frontier() -> None:
    """With a per-site power cap only smaller sites are searched: every site within it, costs never
    fall, and a cap below every node size names power as what binds."""
    kw = {
        "targets_flop": (1e24,),
        "premiums": (5.0,),
        "constraints": SMALL,
        "mode": "paper",
        "bandwidth_grid_bits_per_s": (100e6, 1e9),
        "quality_lines": False,
        "sites": (),
    }
    free = frontier(**kw)  # type: ignore[arg-type]
    capped = frontier(max_site_kw=5.0, **kw)  # type: ignore[arg-type]
    lim = capped.limits[0]
    assert lim.power_per_site_kw is None or lim.power_per_site_kw <= 5.0
    for a, b in zip(free.cost_by_bandwidth_usd[1e24], capped.cost_by_bandwidth_usd[1e24], strict=True):
        assert b is None or (a is not None and b >= a * (1 - 1e-12))
    tiny = frontier(max_site_kw=0.1, **kw)  # type: ignore[arg-type]
    assert tiny.limits[0].least_bandwidth_bits_per_s is None
    assert tiny.limits[0].binds.startswith("power")


@pytest.mark.slow
def test_most_sites_holds_for_pipelined_candidates_at_high_bandwidth() -> None:
    """A PP-group candidate's tokens depend on the links, so its overtraining window in N does too:
    at 3 Gbps no A100-80GB candidate (any node size, any model size) meets 1e25 within 5x the
    building at more sites than the search's maximum (every N up to 300 above it)."""
    c = Constraints(hardware=("a100_80gb",))
    eng = Engine(Mode.DEFAULT, c, "treaty")
    k = [Condition(bandwidth_bits_per_s=3e9, latency_s=0.1, duration_s=c.max_duration_s)]
    base = planner.centralized_baseline(1e25, constraints=c).best
    assert base is not None
    budget = 5 * base.cost_usd
    tab = search_target(eng, 1e25, k, (budget,))
    most = int(tab.most_sites[0, 0])
    assert most > 0
    combos = np.arange(len(eng.space.combo_hw), dtype=np.int64)
    top = np.floor(budget / eng.node_cost(c.max_duration_s)[eng.space.combo_hw])
    ns = np.arange(most + 1, most + 301, dtype=np.float64)
    cc = np.repeat(combos, ns.size)
    nn = np.tile(ns, combos.size)
    sel = nn <= top[cc]
    ok = eng.meets(cc[sel], nn[sel], np.zeros(int(sel.sum()), dtype=np.int64), k, 1e25)
    assert not ok.any()


def test_band_quantiles_count_cannot_reach_as_infinite() -> None:
    """P10/P50/P90 are order statistics with "cannot reach" (inf) as the largest values: 60% of draws
    reaching gives a finite P50 and an infinite P90; 40% reaching gives an infinite P50."""
    from dispersal.model.analyses.frontier.bands import quantiles_inf

    reach6 = np.asarray([1e8] * 3 + [1e9] * 3 + [np.inf] * 4)
    assert quantiles_inf(reach6) == (1e8, 1e9, np.inf)
    reach4 = np.asarray([1e8] * 4 + [np.inf] * 6)
    q = quantiles_inf(reach4)
    assert q[0] == 1e8 and math.isinf(q[1]) and math.isinf(q[2])
    assert all(math.isinf(v) for v in quantiles_inf(np.zeros(0)))


def test_building_cost_between_targets_is_interpolated_log_log() -> None:
    """The "largest target at N sites" premium reads C0 at any target: exact at the targets searched,
    log-log between them, proportional to the target beyond them."""
    from dispersal.model.analyses.frontier.at_sites import _c0_of

    c0 = _c0_of({1e24: 1e6, 1e26: 1e8, 1e27: None})
    assert c0(1e24) == pytest.approx(1e6) and c0(1e26) == pytest.approx(1e8)
    assert c0(1e25) == pytest.approx(1e7)
    assert c0(1e23) == pytest.approx(1e5) and c0(1e28) == pytest.approx(1e10)
    assert _c0_of({1e24: None}) is None


def test_each_targets_first_answer_is_the_finished_frontiers() -> None:
    """`on_curve` gets one `PremiumCurve` per target, in order, as its search ends: the same one-building
    cost and cost per grid bandwidth as the finished frontier, which the callback does not change; the
    app's first-answer rows are those costs over the building's."""
    from dispersal.present import formats as F
    from dispersal.present.frontier import curve_rows

    kw = {
        "targets_flop": (1e23, 1e24),
        "premiums": (2.0,),
        "constraints": SMALL,
        "mode": "paper",
        "bandwidth_grid_bits_per_s": (100e6, 1e9),
        "sites": (),
    }
    seen: list[dict[str, Any]] = []
    f = frontier(**kw, on_curve=lambda c: seen.append(c.to_dict()))  # type: ignore[arg-type]
    assert f.to_dict() == frontier(**kw).to_dict()  # type: ignore[arg-type]
    d = f.to_dict()
    assert [c["target_flop"] for c in seen] == [1e23, 1e24]
    for c, c0, costs in zip(seen, d["centralized_cost_usd"], d["cost_by_bandwidth_usd"], strict=True):
        assert c["centralized_cost_usd"] == c0["cost_usd"] and c["cost_by_bandwidth_usd"] == costs["cost_usd"]
        assert c["bandwidth_grid_bits_per_s"] == [100e6, 1e9]
    rows = curve_rows(seen)
    assert len(rows) == 4
    cost, c0 = seen[1]["cost_by_bandwidth_usd"][1], seen[1]["centralized_cost_usd"]
    assert cost is not None and c0 is not None
    assert rows[3]["premium"] == f"{F.sig(cost / c0, 3)}x"
    assert rows[3]["cheapest dispersed plan"] == F.money(cost)


@pytest.mark.parametrize("mode", ["paper", "default"])
def test_the_first_targets_curve_comes_before_its_full_search(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first target's curve is handed over after only a cheapest-only search (the app's first answer
    sooner), and it is the finished frontier's; without a callback no such search runs."""
    from dispersal.model.analyses.frontier.table import search_target as real

    calls: list[bool] = []

    def spy(*a: Any, **k: Any) -> Any:
        calls.append(bool(k.get("cheapest_only", False)))
        return real(*a, **k)

    monkeypatch.setattr("dispersal.model.analyses.frontier.grid.search_target", spy)
    kw = {
        "targets_flop": (1e23, 1e24),
        "premiums": (2.0,),
        "constraints": SMALL,
        "mode": mode,
        "bandwidth_grid_bits_per_s": (100e6, 1e9),
        "sites": (),
        "quality_lines": False,
    }
    at_curve: list[list[bool]] = []
    seen: list[Any] = []

    def on_curve(c: Any) -> None:
        at_curve.append(list(calls))
        seen.append(c)

    f = frontier(**kw, on_curve=on_curve)  # type: ignore[arg-type]
    assert at_curve[0] == [True]  # only the cheapest-only search before the first answer
    assert [c.target_flop for c in seen] == [1e23, 1e24]
    for c in seen:
        assert c.cost_by_bandwidth_usd == f.cost_by_bandwidth_usd[c.target_flop]
    calls.clear()
    frontier(**kw)  # type: ignore[arg-type]
    assert calls == [False, False]


@pytest.mark.slow
@pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.PAPER])
def test_draws_branch_and_bound_gives_the_unpruned_least_costs(
    mode: Mode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bands.least_costs` refines only the rows that can hold the cheapest plan of their (draw,
    condition) (`bisection.cheapest_in_cells`, through the grid and the cells): the same least cost per
    draw and condition as refining every row, which the kernel's cost makes sound: non-decreasing in N
    for each candidate, draw and condition (the search trains for the whole time budget)."""
    from dispersal.model.analyses.frontier import bands
    from dispersal.model.search import bisection

    c = Constraints(hardware=("h100_sxm", "a100_80gb"))
    eng = Engine(mode, c, "treaty")
    dr = bands.Draws(mode, c, 12, 3)
    conds = [
        Condition(bandwidth_bits_per_s=b, latency_s=0.1, duration_s=c.max_duration_s)
        for b in (1e8, 1e9, 1e10)
    ]
    target = 1e24
    tab = search_target(eng, target, conds, (5e8,), exact_screen=False)
    combos = bands.shortlist(tab, range(len(conds)), eng.space.combo_hw)
    draws = np.arange(1, 13, dtype=np.int64)
    kept: list[tuple[int, int]] = []
    bound = bisection.cheapest_in_cells

    def counted(g: Any, pred: Any, group: Any) -> Any:
        out = bound(g, pred, group)
        every = bisection.first_on_grid(g, lambda r, n: pred(r, n)[0])
        kept.append((int(out[0].size), int((every >= 0).sum())))
        return out

    monkeypatch.setattr(bands, "cheapest_in_cells", counted)
    pruned = bands.least_costs(eng, dr, target, combos, conds, draws)
    assert np.isfinite(pruned).sum() > 0
    assert sum(k for k, _ in kept) < sum(e for _, e in kept)  # rows were dropped

    def every_row(g: Any, pred: Any, group: Any) -> Any:
        first = bisection.first_on_grid(g, lambda r, n: pred(r, n)[0])
        rows, n = bisection.first_in_cells(g, first, lambda r, x: pred(r, x)[0])
        ok, cost = pred(rows, n)
        return rows, n, np.where(ok, cost, np.inf)

    monkeypatch.setattr(bands, "cheapest_in_cells", every_row)
    np.testing.assert_array_equal(bands.least_costs(eng, dr, target, combos, conds, draws), pruned)
    # the property the bound rests on: at each candidate, draw and condition, cost never falls with N
    n = np.geomspace(1.0, 4096.0, 24).round()
    rows = np.repeat(np.arange(combos.size), n.size)
    r = dr.run(
        eng,
        combos[rows],
        np.tile(n, combos.size),
        np.zeros(rows.size, dtype=np.int64),
        conds,
        np.full(rows.size, 5, dtype=np.int64),
    )
    cost = r["cost_usd"].reshape(combos.size, n.size)
    assert (np.diff(cost, axis=1) >= 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("target", [1e23, 1e25, 1e27])
def test_reaches_is_any_point_of_the_window_grid(target: float) -> None:
    """`Engine.reaches` (the top of each window asked first, then the rest) says yes exactly when some
    point of its REACH_POINTS grid meets the target."""
    from dispersal.model.analyses.frontier.table import REACH_POINTS, geomgrid

    c = Constraints(hardware=("h100_sxm", "a100_80gb"))
    eng = Engine(Mode.DEFAULT, c, "treaty")
    combos = np.arange(len(eng.space.combo_hw), dtype=np.int64)
    for days in (30.0, 365.0):
        k = Condition(bandwidth_bits_per_s=1e9, latency_s=0.1, duration_s=days * 86400.0)
        lo, hi = eng.window(combos, k, target)
        ok = hi >= lo
        g = geomgrid(lo[ok], hi[ok], REACH_POINTS)
        zeros = np.zeros(g.size, dtype=np.int64)
        want = bool(eng.meets(np.repeat(combos[ok], REACH_POINTS), g.reshape(-1), zeros, [k], target).any())
        assert eng.reaches(combos, k, target) is want


def test_engines_differing_only_in_the_quality_stage_share_their_windows() -> None:
    """An engine built with `windows_of` (the quality lines': the mapping or the inner optimizer
    changed) holds the same overtraining windows as one that reads its own; any other difference in
    the constraints is refused."""
    c = Constraints()
    conds = [
        Condition(bandwidth_bits_per_s=b, latency_s=c.latency_s, duration_s=c.max_duration_s)
        for b in (1e8, 1e10)
    ]
    main = Engine(Mode.DEFAULT, c, "treaty")
    main.prefetch_windows(conds)
    for changes in ({"quality_mapping": "loss"}, {"inner_optimizer": "muon"}):
        shared = Engine(Mode.DEFAULT, c.replace(**changes), "treaty", windows_of=main)
        own = Engine(Mode.DEFAULT, c.replace(**changes), "treaty")
        own.prefetch_windows(conds)
        for k in conds:
            assert shared.kernel_calls == 0
            for a, b in zip(shared._window_at(k), own._window_at(k), strict=True):
                np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="windows_of"):
        Engine(Mode.DEFAULT, c.replace(max_overtraining=c.max_overtraining * 2), "treaty", windows_of=main)


@pytest.mark.parametrize(
    ("hardware", "grid", "walk_matters"),
    [(("h100_sxm",), GRID, False), (("a100_80gb", "tpu_v5e"), (10e6, 30e6, 100e6), True)],
)
def test_largest_at_sites_walks_only_where_a_bound_can_win(
    hardware: tuple[str, ...], grid: tuple[float, ...], walk_matters: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`largest_at_sites` walks the schedules only of configurations whose bound can beat the answers
    the first schedules give: every row (value, hardware, sites used, cost, what binds) is the one that
    walking every configuration gives, with and without premiums, for no more walks; in the second case
    the walk changes answers (first schedules alone give other rows), so a bound that pruned too much
    would show."""
    from dispersal.model.analyses.frontier import at_sites
    from dispersal.model.analyses.frontier.conditions import search_layout

    c = Constraints(hardware=hardware)
    lay = search_layout(grid, c)
    eng = Engine(Mode.DEFAULT, c, "treaty")
    cost: dict[float, float | None] = {1e24: 1.0e6, 1e25: 1.1e7, 1e26: 1.2e8}
    walked: list[int] = []
    real_run = Engine.run

    def run(self: Engine, combo: Any, *a: Any, **k: Any) -> Any:
        if k.get("walk", True):
            walked.append(int(combo.size))
        return real_run(self, combo, *a, **k)

    def answers(best: Any) -> tuple[Any, int]:
        monkeypatch.setattr(at_sites, "_best_schedules", best)
        walked.clear()
        return at_sites.largest_at_sites(eng, (10, 100, 1000), (1.5, 3.0), cost, lay), sum(walked)

    def every(e: Engine, cc: Any, nn: Any, lay: Any, prem: Any, c0: Any, walk: bool = True) -> Any:
        return e.run(cc, nn, np.zeros(cc.size, dtype=np.int64), lay.conds, ("replicas",), walk=walk)

    monkeypatch.setattr(Engine, "run", run)
    real = at_sites._best_schedules
    pruned, n_pruned = answers(real)
    full, n_full = answers(every)
    first, _ = answers(lambda e, cc, nn, lay, prem, c0: every(e, cc, nn, lay, prem, c0, walk=False))
    assert pruned == full
    assert any(row.largest_target_flop for row in full)
    assert n_pruned <= n_full
    assert (first != full) == walk_matters
    # the invariant the pruning rests on: a configuration left at its first schedule is below every
    # answer of its site count even at its best schedule (N = 1,000: every candidate's window grid)
    allc = np.flatnonzero(eng.usable).astype(np.int64)
    lo, hi = eng.window(allc, lay.conds[0], 1.0)
    sel = (lo <= 1000) & (hi >= lo)
    cc = np.repeat(allc[sel], 6)
    nn = geomgrid(lo[sel], np.minimum(hi[sel], 1000.0), 6).reshape(-1)
    got = real(eng, cc, nn, lay, (1.5, 3.0), at_sites._c0_of(cost))
    best = every(eng, cc, nn, lay, None, None)
    met = np.where(best["valid"] > 0, best["metric"], -np.inf)
    left = np.where(got["valid"] > 0, got["metric"], -np.inf) != met
    at_1000 = [row.largest_target_flop or -np.inf for row in full if row.sites == 1000]
    assert np.all(met[left] < min(at_1000))
