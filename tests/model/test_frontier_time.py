"""The frontier over time (analyses/frontier/over_time.py) and the planner's scenario overrides."""

from __future__ import annotations

import itertools

import pytest

from dispersal.model.analyses.frontier import over_time as ft
from dispersal.model.inputs.errors import InputError
from dispersal.model.search import planner
from dispersal.model.search.candidates import OVERRIDABLE_FIELDS, Constraints


def test_generations_data() -> None:
    gens = ft.generations()
    assert [g.year for g in gens] == sorted(g.year for g in gens)
    assert {g.name for g in gens} >= {
        "diloco_2023",
        "streaming_diloco_2025",
        "sparseloco_covenant_2026",
        "decoupled_diloco_2026",
    }
    for g in gens:
        assert g.source and all(k in OVERRIDABLE_FIELDS for k, _ in g.overrides(published_h=True))
        assert ("inner_steps", g.inner_steps) in g.overrides(published_h=True)
        assert all(k != "inner_steps" for k, _ in g.overrides())
    for t in ft.trends().values():
        assert t.status in ("sourced", "assumption") and t.source
    with pytest.raises(InputError, match="generation"):
        ft.generation("nope")


def test_trend_arithmetic_exact() -> None:
    assert ft.line_rate_bits_per_s(2028, reference_bits_per_s=1e9, reference_year=2026, growth=0.5) == 2.25e9
    assert ft.compute_per_dollar_gain(2.07, 2.07) == pytest.approx(2.0, rel=1e-15)
    assert ft.compute_per_dollar_gain(0, 2.07) == 1.0


def test_scenario_overrides_reach_the_plan() -> None:
    c = Constraints(hardware=("h100_sxm",), scenario_overrides=(("codec", "fp4_e3m0"), ("fragments", 4)))
    p = planner.plan(1e23, constraints=c)
    assert p.best is not None
    assert p.best.scenario.codec == "fp4_e3m0" and p.best.scenario.fragments == 4
    fixed = planner.plan(1e23, constraints=c.replace(scenario_overrides=(("inner_steps", 64),)))
    assert fixed.best is not None and fixed.best.inner_steps == 64 == fixed.best.scenario.inner_steps
    with pytest.raises(InputError, match="scenario_overrides"):
        Constraints(scenario_overrides=(("params", 1e9),))


@pytest.mark.slow
def test_frontier_over_time_small() -> None:
    f = ft.frontier_over_time(
        target_flop=1e22, premiums=(5.0,), bandwidth_grid_bits_per_s=(1e8, 1e10), until_year=2028
    )
    assert [p.generation.name for p in f.points] == [g.name for g in ft.generations()]
    assert [pr.year for pr in f.projections] == [2027, 2028]
    d = f.to_dict()
    assert all(g["projection"] is False for g in d["generations"])
    assert all(p["projection"] is True for p in d["projections"])
    assert f.centralized_cost_usd is not None
    for p in f.points:
        (lim,) = p.limits
        if lim.least_bandwidth_bits_per_s is not None:
            i = f.bandwidth_grid_bits_per_s.index(lim.least_bandwidth_bits_per_s)
            cost = p.cost_by_bandwidth_usd[i]
            assert cost is not None and cost <= 5.0 * f.centralized_cost_usd * (1 + 1e-12)
    with pytest.raises(InputError, match="until"):
        ft.frontier_over_time(until_year=2020)


def _point(name: str, year: int, bw: float | None) -> ft.GenerationPoint:
    g = ft.Generation(
        name=name,
        label=name,
        year=year,
        codec="bf16",
        overlap_communication=True,
        fragments=1,
        merge_rule="mean",
        sync="synchronous",
        inner_steps=100,
        source="test",
    )
    lim = ft.GenerationLimit(
        premium=2.0,
        least_bandwidth_bits_per_s=bw,
        bandwidth_bracket_bits_per_s=None,
        binds="",
        sites=None,
        hardware=None,
        power_per_site_kw=None,
    )
    return ft.GenerationPoint(generation=g, cost_by_bandwidth_usd=(), limits=(lim,))


def test_envelope_is_the_best_published_by_each_year() -> None:
    pts = [_point("a", 2023, 1e10), _point("b", 2025, None), _point("c", 2026, 3e9), _point("d", 2026, 1e9)]
    env = ft.envelope(pts)
    assert [(e["year"], e["bits_per_s"], e["generation"]) for e in env] == [
        (2023, 1e10, "a"),
        (2025, 1e10, "a"),
        (2026, 1e9, "d"),
    ]
    # never rises: a newer generation can only add options
    vals = [e["bits_per_s"] for e in env]
    assert all(b <= a for a, b in itertools.pairwise(vals))


def test_only_the_asynchronous_generation_may_plan_decoupled_diloco() -> None:
    """A 2023-2025 generation never gets the Decoupled DiLoCo slot; the asynchronous 2026 one may, and its
    merge rule reaches the candidates as an override."""
    kinds = {g.name: g.slot_kinds for g in ft.generations()}
    assert kinds["decoupled_diloco_2026"] == ("auto", "hierarchical", "decoupled")
    assert all("decoupled" not in k for n, k in kinds.items() if n != "decoupled_diloco_2026")
    (dec,) = [g for g in ft.generations() if g.sync == "asynchronous"]
    assert ("merge_rule", "norm_preserving") in dec.overrides()
    Constraints(scenario_overrides=dec.overrides(), algorithms=dec.slot_kinds)  # valid as constraints
