"""Countermeasure levers: the evader re-plans; costs never fall; detection never falls with added levers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.analyses.countermeasures import (
    NO_LEVER,
    Convention,
    analyse,
    evaluate_bundle,
    levers,
    parse_bundle,
    regime_for,
)
from dispersal.model.inputs.errors import InputError

CONV = Convention()  # the report's countermeasure convention (paper mode, c_quality, 548 d, chip-only)
TARGET = 1e25
REGIME_LEVERS = ["bandwidth_cap", "threshold_8", "threshold_4", "hbm"]
DETECTION_LEVERS = [n for n, lv in levers().items() if lv.detection]


@pytest.fixture(scope="module")
def base_cost() -> float:
    return evaluate_bundle(TARGET, NO_LEVER, convention=CONV).cost_usd


@pytest.mark.slow
@pytest.mark.parametrize("name", list(levers()))
def test_each_lever_never_lowers_the_evader_cost(name: str, base_cost: float) -> None:
    o = evaluate_bundle(TARGET, name, convention=CONV, baseline_cost_usd=base_cost)
    assert o.cost_usd >= base_cost * (1 - 1e-12)


@pytest.mark.slow
def test_default_mode_levers_never_lower_cost() -> None:
    """At 740 days (at 548 days default mode cannot reach 1e25 with or without levers). The bondable
    10 Mbps cap leaves each site its 100 Mbps on one shared link plus paid lines: it once came out
    cheaper (x0.74) because the capped evader was handed separate side links.

    The evader's menu is three node types, not the catalogue: over the whole catalogue the rows are
    the same plans (a100_40gb x 41 at $9.23M, the cap x1.058 on the same nodes, HBM rtx_4090 x 76 at
    x1.41; measured 2026-12-05) at four times the search."""
    conv = Convention(mode="default", days=740, hardware=("a100_40gb", "rtx_4090", "h100_sxm"))
    rows = analyse(TARGET, ["bandwidth_cap", "hbm"], convention=conv)
    assert rows[0].feasible and rows[1].feasible
    assert all(r.cost_usd >= rows[0].cost_usd * (1 - 1e-12) for r in rows)
    assert rows[1].cost_multiple is not None and rows[1].cost_multiple < 1.10


@pytest.mark.slow
def test_paper_findings_come_out_of_the_numbers(base_cost: float) -> None:
    cap = evaluate_bundle(TARGET, "bandwidth_cap", convention=CONV, baseline_cost_usd=base_cost)
    hbm = evaluate_bundle(TARGET, "hbm", convention=CONV, baseline_cost_usd=base_cost)
    reg = evaluate_bundle(TARGET, "chip_registry", convention=CONV, baseline_cost_usd=base_cost)
    assert cap.cost_multiple < 1.10  # bondable line cap: a few percent
    assert 1.3 < hbm.cost_multiple < 1.8  # paper: about +50%
    assert reg.p_detect > 0.9


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(
    st.lists(st.sampled_from(sorted(levers())), min_size=1, max_size=4, unique=True),
    st.sampled_from(DETECTION_LEVERS),
)
def test_adding_a_detection_lever_never_lowers_p_detect(names: list[str], extra: str) -> None:
    a = evaluate_bundle(TARGET, "+".join(names), convention=CONV)
    b = evaluate_bundle(TARGET, "+".join([*names, extra]), convention=CONV)
    assert b.cost_usd == a.cost_usd
    assert b.p_detect >= a.p_detect - 1e-12


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from(REGIME_LEVERS), min_size=1, max_size=3, unique=True))
def test_bundles_cost_at_least_each_member(names: list[str]) -> None:
    bundle = evaluate_bundle(TARGET, "+".join(names), convention=CONV)
    for n in names:
        assert bundle.cost_usd >= evaluate_bundle(TARGET, n, convention=CONV).cost_usd * (1 - 1e-12)


def test_regime_lookup_and_bundle_parsing() -> None:
    assert regime_for("treaty", None, None).name == "treaty"
    assert regime_for("treaty", None, 1280).name == "treaty_hbm"
    assert regime_for("treaty", 4, 1280).name == "treaty_hbm_4h100e"
    with pytest.raises(InputError, match="no regime"):
        regime_for("treaty", 2, None)
    b = parse_bundle("hbm+chip-registry+hbm")
    assert b.name == "hbm+chip_registry"
    with pytest.raises(InputError, match="did you mean"):
        parse_bundle("hbmm")
    with pytest.raises(InputError, match="days"):
        Convention(days=0)


def test_outcome_row_schema_and_traffic(base_cost: float) -> None:
    o = evaluate_bundle(TARGET, "traffic_monitoring", convention=CONV, baseline_cost_usd=base_cost)
    d = o.to_dict()
    for k in (
        "lever",
        "cost_usd",
        "cost_multiple",
        "nodes",
        "p_detect",
        "expected_detection_day",
        "traffic",
        "collateral",
        "convention",
    ):
        assert k in d
    t = o.traffic
    assert t is not None and 0 < t.mean_mbps <= t.peak_mbps and 0 < t.duty_cycle <= 1 and t.burst_period_s > 0
    assert math.isclose(t.mean_mbps, t.peak_mbps * t.duty_cycle, rel_tol=0.05)
