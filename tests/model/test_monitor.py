"""What a monitor sees, survivability and power (analyses/monitor.py, analyses/frontier/survive.py and
power.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.analyses import detection as det
from dispersal.model.analyses import monitor
from dispersal.model.analyses.frontier import power, survive
from dispersal.model.inputs.errors import InputError
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints

H100 = Constraints(hardware=("h100_sxm",), bandwidth_up_bits_per_s=1e9, bandwidth_down_bits_per_s=1e9)


@pytest.fixture(scope="module")
def small_plan() -> planner.PlanOption:
    p = planner.plan(3e23, constraints=H100)  # 3 sites of 4 H100
    assert p.best is not None
    return p.best


def test_aggregation_formulas_exact() -> None:
    assert monitor.independent([0.5, 0.5]) == pytest.approx(0.75, abs=1e-15)
    assert monitor.independent([0.1, 0.2, 0.5]) == pytest.approx(1 - 0.9 * 0.8 * 0.5, abs=1e-15)
    assert monitor.independent([]) == 0.0
    assert monitor.independent([1.0, 0.3]) == 1.0
    assert monitor.correlated([0.5, 0.5], 0.5) == pytest.approx(0.5 * 0.75 + 0.5 * 0.5, abs=1e-15)
    assert monitor.correlated([0.2, 0.4], 1.0) == pytest.approx(0.4, abs=1e-15)
    assert monitor.correlated([0.2, 0.4], 0.0) == pytest.approx(1 - 0.8 * 0.6, abs=1e-15)
    with pytest.raises(InputError, match="rho"):
        monitor.correlated([0.2], 1.5)
    with pytest.raises(InputError, match="p"):
        monitor.independent([1.2])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=30),
    st.floats(0, 1),
)
def test_aggregate_is_a_probability_at_least_the_largest_site(ps: list[float], rho: float) -> None:
    ind = monitor.independent(ps)
    cor = monitor.correlated(ps, rho)
    assert 0.0 <= ind <= 1.0 and 0.0 <= cor <= 1.0
    assert ind >= max(ps) - 1e-12
    assert max(ps) - 1e-12 <= cor <= ind + 1e-12


def test_grid_class_assignment_exact() -> None:
    names = [c.name for c in power.grid_classes()]
    assert names == ["residential", "commercial_lv", "medium_voltage", "transmission"]
    assert power.grid_class(0.0).name == "residential"
    assert power.grid_class(48.0).name == "residential"
    assert power.grid_class(48.001).name == "commercial_lv"
    assert power.grid_class(2500.0).name == "commercial_lv"
    assert power.grid_class(15000.0).name == "medium_voltage"
    assert power.grid_class(15000.1).name == "transmission"
    assert power.grid_class(1e9).name == "transmission"
    for c in power.grid_classes():
        assert c.status in ("sourced", "assumption") and c.source
    with pytest.raises(InputError, match="site_kw"):
        power.grid_class(-1.0)
    with pytest.raises(InputError, match="site_kw"):
        power.grid_class(math.nan)


def test_power_per_site_and_building(small_plan: planner.PlanOption) -> None:
    o = small_plan
    site = power.site_power(o)
    kw = o.chips_per_node * 700.0 * o.scenario.pue / 1000.0  # H100 SXM: 700 W TDP
    assert site.site_kw == pytest.approx(kw, rel=1e-12)
    assert site.sites == o.nodes and site.total_mw == pytest.approx(kw * o.nodes / 1000, rel=1e-12)
    one = power.site_power(o, one_building=True)
    assert one.sites == 1 and one.site_kw == pytest.approx(kw * o.nodes, rel=1e-12)
    assert one.total_mw == pytest.approx(site.total_mw, rel=1e-12)
    assert one.grid_class == power.grid_class(one.site_kw).name


def test_independent_aggregate_equals_the_detection_model(small_plan: planner.PlanOption) -> None:
    """Every channel's hazard is a sum over sites, so 1 - prod(1 - p_i) is detect() of the whole run."""
    o = small_plan
    p = det.default_detection_params()
    for one in (False, True):
        lay = monitor.layout("x", o, one_building=one)
        sites = 1 if one else o.nodes
        kw = lay.power.site_kw
        staff = max(p.people_per_site, monitor.monitor_params()["staff_per_mw"]["value"] * kw / 1000)
        fp = det.RunFootprint(
            nodes=sites,
            chips_per_node=o.nodes * o.chips_per_node // sites,
            hardware=o.hardware,
            days=o.days,
            spend_usd=o.cost_usd,
            mean_mbps_per_node=0.0 if one else o.mean_wan_mbps_per_node,
        )
        whole = det.detect(fp, p.replace(power_pue=o.scenario.pue, people_per_site=staff))
        assert lay.p_independent == pytest.approx(whole.p_detect, rel=1e-9, abs=1e-15)
        assert lay.workforce == pytest.approx(whole.workforce, rel=1e-12)
        assert lay.p_site <= lay.p_correlated <= lay.p_independent + 1e-15
        assert lay.shipments == math.ceil(o.nodes * o.chips_per_node / 8)
        assert lay.delivery_sites == sites


def test_survivability_hand_case(small_plan: planner.PlanOption) -> None:
    """Losing the only building a third of the way in never finishes and loses ~2/3 of the work; losing
    1 of N replicas loses ~(1/N)(2/3) and finishes late but finishes."""
    o = small_plan
    case = survive.SurvivalCase(lose_sites=1)
    b = survive.building_survival(o, case)
    assert b.delay_days is None and not b.finishes_within_budget
    assert b.lost_work_fraction == pytest.approx(2 / 3, abs=2e-3)
    dil, dec = survive.plan_survival(o, case)
    replicas = o.nodes // max(1, o.pipeline_stages)
    assert replicas >= 2
    for s in (dil, dec):
        assert s.delay_days is not None and s.delay_days > 0
        assert s.lost_work_fraction == pytest.approx((1 / replicas) * (2 / 3), abs=2e-3)
        assert s.quality_ratio is not None and s.quality_ratio >= 1 - 1e-12
    none = survive.plan_survival(o, survive.SurvivalCase(lose_sites=0))[0]
    assert none.delay_days == pytest.approx(0.0, abs=1e-9) and none.lost_work_fraction == pytest.approx(
        0, abs=1e-12
    )
    with pytest.raises(InputError, match="lose_sites"):
        survive.SurvivalCase(lose_sites=-1)


def test_rate_status_reads_the_sources() -> None:
    assert monitor.rate_status("whistle_p_per_person_year") == "assumed"
    assert monitor.rate_status("inspections_per_site_year") == "baseline"
    for v in monitor.monitor_params().values():
        assert v["status"] in ("sourced", "assumption") and v["source"]
