"""Closed-form resilience model: bounds, monotonicity, limits and site loss."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.analyses.resilience import (
    ALGORITHMS,
    LLAMA3_CHIP_MTBI_H,
    ResilienceSpec,
    SiteLossScenario,
    daly_optimal_period_h,
    ddp_goodput_first_order,
    goodput,
    goodput_vs_scale,
    site_loss,
)
from dispersal.model.inputs.errors import InputError

chips_st = st.integers(min_value=1, max_value=10_000_000)
mtbf_st = st.floats(min_value=100.0, max_value=1e7)


def test_llama3_anchor() -> None:
    """The default per-chip MTBI is Llama 3's 16,384 GPUs x 54 days / 419 interruptions (~50,678 h)."""
    assert pytest.approx(16384 * 54 * 24 / 419) == LLAMA3_CHIP_MTBI_H
    assert ResilienceSpec().chip_mtbf_h == pytest.approx(50_677, rel=1e-4)


@settings(max_examples=60, deadline=None)
@given(chips=chips_st, mtbf=mtbf_st)
def test_goodput_in_unit_interval(chips: int, mtbf: float) -> None:
    """Every algorithm's goodput lies in (0, 1] at any scale and failure rate."""
    g = goodput(ResilienceSpec(chips=chips, chip_mtbf_h=mtbf)).to_dict()
    for name in ALGORITHMS:
        assert 0 < g[name] <= 1, name


@settings(max_examples=60, deadline=None)
@given(chips=chips_st, mtbf=mtbf_st, factor=st.floats(min_value=1.0, max_value=100.0))
def test_goodput_weakly_falls_with_failure_rate(chips: int, mtbf: float, factor: float) -> None:
    """Failing more often (a shorter MTBF) never raises any algorithm's goodput."""
    reliable = goodput(ResilienceSpec(chips=chips, chip_mtbf_h=mtbf * factor)).to_dict()
    flaky = goodput(ResilienceSpec(chips=chips, chip_mtbf_h=mtbf)).to_dict()
    for name in ALGORITHMS:
        assert flaky[name] <= reliable[name] * (1 + 1e-12), name


@pytest.mark.parametrize("tau", [0.25, 1.0, 6.0])
def test_no_failures_leaves_only_checkpoint_overhead(tau: float) -> None:
    """With no failures every algorithm keeps exactly 1 - C/tau."""
    spec = ResilienceSpec(chips=1_200_000, chip_mtbf_h=math.inf, checkpoint_interval_h=tau)
    expected = 1 - spec.checkpoint_write_time_h / tau
    for name, value in goodput(spec).to_dict().items():
        assert value == pytest.approx(expected, rel=1e-15, abs=0), name


def test_first_order_matches_exact_when_failures_are_rare() -> None:
    """Young's first-order ddp goodput agrees with Daly's exact form when R and tau << MTBF."""
    spec = ResilienceSpec(chips=64)
    assert ddp_goodput_first_order(spec) == pytest.approx(goodput(spec).ddp, rel=1e-3)


def test_daly_reduces_to_young() -> None:
    """Daly's optimum period tends to Young's sqrt(2 C M) when C << M."""
    assert daly_optimal_period_h(1e-4, 1e4) == pytest.approx(math.sqrt(2 * 1e-4 * 1e4), rel=1e-2)


def test_ordering_at_frontier_scale() -> None:
    """At 1.2M chips the failure-isolating algorithms keep far more than synchronous ddp."""
    g = goodput(ResilienceSpec())
    assert g.ddp < g.ddp_elastic < g.diloco < g.decoupled


def test_scale_sweep_shape() -> None:
    """ddp's goodput falls with scale; island algorithms level off once islands are full size."""
    curves = goodput_vs_scale(ResilienceSpec(), [10, 1_000, 100_000, 10_000_000])
    assert all(curves["ddp"][i] >= curves["ddp"][i + 1] for i in range(3))
    assert curves["decoupled"][-1] > 0.8


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"chips": 0}, "chips"),
        ({"chip_mtbf_h": -1.0}, "chip_mtbf_h"),
        ({"restart_time_h": 0.0}, "restart_time_h"),
        ({"checkpoint_interval_h": 0.001}, "checkpoint_interval_h"),
        ({"sites": 0}, "sites"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict[str, float], field: str) -> None:
    """Invalid input raises InputError (a ValueError) whose message starts with the field."""
    with pytest.raises(InputError) as err:
        ResilienceSpec(**kwargs)  # type: ignore[arg-type]
    assert str(err.value).startswith(f"{field}: ")
    assert isinstance(err.value, ValueError)


@settings(max_examples=60, deadline=None)
@given(
    chips=st.sampled_from([1_000, 100_000, 1_200_000]),
    k=st.integers(min_value=0, max_value=8),
    lose_at=st.floats(min_value=0.0, max_value=800.0),
    down=st.one_of(st.none(), st.floats(min_value=0.01, max_value=2000.0)),
)
def test_losing_sites_never_speeds_the_run(chips: int, k: int, lose_at: float, down: float | None) -> None:
    """Losing k of 8 sites, at any time and for any duration, never finishes any algorithm sooner."""
    spec = ResilienceSpec(chips=chips)
    result = site_loss(spec, SiteLossScenario(lose_sites=k, lose_at_h=lose_at, down_for_h=down))
    for name, outcome in result.outcomes.items():
        assert outcome.time_to_target_h >= 720.0 * (1 - 1e-12), name
        assert 0 <= outcome.lost_useful_fraction <= 1
        if k == 0:
            assert outcome.time_to_target_h == pytest.approx(720.0)


def test_total_permanent_loss_never_finishes() -> None:
    """Losing every site for ever means no algorithm finishes."""
    spec = ResilienceSpec(chips=8_000)
    result = site_loss(spec, SiteLossScenario(lose_sites=8, lose_at_h=100.0))
    for outcome in result.outcomes.values():
        assert math.isinf(outcome.time_to_target_h)
        assert not outcome.finishes_within_budget
    assert result.to_dict()["outcomes"]["ddp"]["finishes_within_budget"] is False


def test_ddp_waits_when_sites_return_before_reprovisioning() -> None:
    """ddp stalls for a short outage (sites back before re-provisioning), then restarts at full size."""
    spec = ResilienceSpec(chips=16_000)
    short = site_loss(spec, SiteLossScenario(lose_sites=1, lose_at_h=100.0, down_for_h=2.0))
    assert short.outcomes["ddp"].delay_h == pytest.approx(
        2.0 + spec.restart_time_h + _half_period_work(spec), rel=1e-6
    )


def _half_period_work(spec: ResilienceSpec) -> float:
    from dispersal.model.analyses.resilience import checkpoint_period_h

    tau = checkpoint_period_h(spec, "ddp")
    return (tau - spec.checkpoint_write_time_h) / 2 / goodput(spec).ddp


def test_site_loss_rejects_more_sites_than_exist() -> None:
    """Asking to lose more sites than the fleet has is an input error naming lose_sites."""
    with pytest.raises(InputError, match=r"^lose_sites: "):
        site_loss(ResilienceSpec(sites=4), SiteLossScenario(lose_sites=5))


def test_replace_keeps_validation() -> None:
    """dataclasses.replace re-validates, so a bad replacement is rejected."""
    with pytest.raises(InputError):
        replace(ResilienceSpec(), chips=-5)
