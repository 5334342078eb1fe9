"""Detection model: closed forms, monotonicity in every channel parameter and in run length."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.analyses.detection import (
    RunFootprint,
    default_detection_params,
    detect,
    expected_detection_day,
    p_detect,
    parameter_table,
)

FP = RunFootprint(
    nodes=300, chips_per_node=50, hardware="a100_80gb", days=548.0, spend_usd=1e8, mean_mbps_per_node=49.0
)
# Parameters that strengthen detection as they grow (the rest are scales / pools, checked separately).
STRENGTHENING = (
    "people_per_site",
    "central_staff",
    "informed_fraction_site",
    "whistle_p_per_person_year",
    "whistle_reward_multiplier",
    "registry_tracked_fraction",
    "registry_p_per_shipment_year",
    "traffic_coverage",
    "traffic_investigations_per_year",
    "traffic_p_confirm",
    "inspections_per_site_year",
    "inspection_p_find",
    "power_pue",
    "power_p_per_site_year_at_ref",
    "finance_p_per_musd_year",
)


def test_every_default_has_a_source() -> None:
    for e in parameter_table():
        assert e["source"].strip(), e["name"]


def test_closed_forms() -> None:
    assert p_detect(0.0, 100) == 0.0
    assert math.isclose(p_detect(0.01, 100), 1 - math.exp(-1))
    h, t = 0.01, 100.0
    expected = 1 / h - t * math.exp(-h * t) / (1 - math.exp(-h * t))
    assert math.isclose(expected_detection_day(h, t), expected, rel_tol=1e-9)
    assert math.isclose(expected_detection_day(1e-12, 100.0), 50.0, rel_tol=1e-6)
    assert math.isnan(expected_detection_day(0.0, 100.0))


def test_channels_add_as_independent_hazards() -> None:
    d = detect(FP, default_detection_params().replace(registry_tracked_fraction=0.5, traffic_coverage=0.3))
    surv = math.prod(1 - c.p_alone for c in d.channels)
    assert math.isclose(1 - surv, d.p_detect, rel_tol=1e-9)
    assert 0 < d.expected_detection_day < FP.days


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(STRENGTHENING), lo=st.floats(0, 0.9), hi=st.floats(0, 0.9))
def test_p_detect_monotone_in_each_channel_parameter(name: str, lo: float, hi: float) -> None:
    base = default_detection_params().replace(
        registry_tracked_fraction=0.2, traffic_coverage=0.2, inspections_per_site_year=0.001
    )
    a, b = sorted((lo, hi))
    if name == "power_pue":  # a PUE is >= 1 (validated); test it over [1, 1.9]
        a, b = 1.0 + a, 1.0 + b
    pa = detect(FP, base.replace(**{name: a})).p_detect
    pb = detect(FP, base.replace(**{name: b})).p_detect
    assert pb >= pa - 1e-12


@settings(max_examples=30, deadline=None)
@given(d1=st.floats(1, 2000), d2=st.floats(1, 2000))
def test_p_detect_monotone_in_run_length(d1: float, d2: float) -> None:
    a, b = sorted((d1, d2))
    p = default_detection_params()
    fa = RunFootprint(
        nodes=100, chips_per_node=16, hardware="h100_sxm", days=a, spend_usd=4e7, mean_mbps_per_node=30
    )
    fb = RunFootprint(
        nodes=100, chips_per_node=16, hardware="h100_sxm", days=b, spend_usd=4e7, mean_mbps_per_node=30
    )
    assert detect(fb, p).p_detect >= detect(fa, p).p_detect


def test_disguise_and_pool_lower_traffic_detection() -> None:
    p = default_detection_params().replace(traffic_coverage=0.5)
    raw = detect(FP, p.replace(traffic_disguised=0.0)).channels
    hid = detect(FP, p).channels
    t_raw = next(c for c in raw if c.name == "traffic").p_alone
    t_hid = next(c for c in hid if c.name == "traffic").p_alone
    assert t_raw > t_hid


def test_bad_params_rejected() -> None:
    import pytest

    from dispersal.model.inputs.errors import InputError

    with pytest.raises(InputError, match="whistle_p_per_person_year"):
        default_detection_params().replace(whistle_p_per_person_year=1.5)
    with pytest.raises(InputError, match="unknown parameter"):
        default_detection_params().replace(nope=1.0)
    with pytest.raises(InputError, match="nodes"):
        RunFootprint(
            nodes=0, chips_per_node=1, hardware="h100_sxm", days=1, spend_usd=0, mean_mbps_per_node=0
        )
