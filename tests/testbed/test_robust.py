"""Robust aggregation rules: exact values on small tensors and hypothesis invariants."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.testbed.robust import (
    AGGREGATORS,
    TRUSTED_DEFAULT,
    UNTRUSTED_DEFAULT,
    make_aggregator,
)

RULES = tuple(AGGREGATORS)


def t(*xs: float) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float32)


def _score_minus_norm(u: torch.Tensor) -> float:
    """A stand-in scorer for the invariants: smaller updates 'improve the loss' more."""
    return 1.0 - float(torch.linalg.vector_norm(u.double()))


def test_registry_and_defaults() -> None:
    assert set(RULES) == {"mean", "norm_preserving", "clip", "trimmed_mean", "median", "gauntlet"}
    assert TRUSTED_DEFAULT == "mean" and UNTRUSTED_DEFAULT in RULES


def test_the_default_rule_is_robust_from_three_workers_whatever_the_trust() -> None:
    """Issue 35: one attacker of three wrecked a default (trusted) run; mean stays one flag away."""
    from dispersal.testbed.config import TestbedConfig

    assert TestbedConfig(workers=3).aggregator == UNTRUSTED_DEFAULT == "trimmed_mean"
    assert TestbedConfig(workers=8, trust="trusted").aggregator == "trimmed_mean"
    assert TestbedConfig(workers=2).aggregator == "mean"  # trimmed_mean of 2 trims nothing anyway
    assert TestbedConfig(workers=2, trust="untrusted").aggregator == "trimmed_mean"
    assert TestbedConfig(workers=3, aggregator="mean").aggregator == "mean"


def test_mean_exact_and_nonfinite_rejected() -> None:
    agg, v = make_aggregator("mean")([t(1, 2), t(3, 4), t(math.nan, 0)])
    assert agg.tolist() == [2.0, 3.0]
    assert [x.weight for x in v] == [0.5, 0.5, 0.0]
    assert v[2].reason == "non-finite" and v[0].reason == ""


def test_huge_finite_values_never_overflow() -> None:
    huge = torch.full((4,), 3e38)
    for name in RULES:
        agg, _ = make_aggregator(name)([huge, huge.clone(), torch.ones(4)], score=_score_minus_norm)
        assert torch.isfinite(agg).all(), name


def test_all_rejected_gives_zeros() -> None:
    for name in RULES:
        agg, v = make_aggregator(name)([t(math.nan, 1), t(math.inf, 1)], score=_score_minus_norm)
        assert agg.tolist() == [0.0, 0.0], name
        assert all(x.weight == 0.0 and x.reason == "non-finite" for x in v)


def test_norm_preserving_restores_the_norm_of_orthogonal_updates() -> None:
    ups = [torch.eye(4)[i] * 2.0 for i in range(4)]  # orthogonal, norm 2 each: the mean has norm 1
    mean, _ = make_aggregator("mean")(ups)
    assert float(mean.norm()) == pytest.approx(1.0)
    merged, _ = make_aggregator("norm_preserving")(ups)
    assert float(merged.norm()) == pytest.approx(2.0)
    assert torch.allclose(merged, mean * 2.0)
    med, _ = make_aggregator("norm_preserving", median=1.0)([t(3, 0), t(0, 4), t(0, 12)])
    assert float(med.norm()) == pytest.approx(4.0)  # the median of the norms 3, 4, 12


def test_clip_exact_and_running_median() -> None:
    rule = make_aggregator("clip", factor=2.0)
    agg, v = rule([t(1, 0), t(0, 1), t(100, 0)])
    # median norm 1 -> threshold 2: the third is scaled to norm 2.
    assert agg.tolist() == pytest.approx([1.0, 1 / 3])
    assert v[2].clipped and "norm 100 > 2x median 1" in v[2].reason
    assert not v[0].clipped and v[0].weight == pytest.approx(1 / 3)
    assert v[2].weight == pytest.approx(0.02 / 3)
    # The history holds clipped norms (1, 1, 2): a second round of large updates is still clipped.
    _, v2 = rule([t(50, 0), t(50, 0), t(1, 0)])
    assert v2[0].clipped and v2[1].clipped and not v2[2].clipped


def test_trimmed_mean_and_median_exact() -> None:
    ups = [t(1, 10), t(2, 20), t(3, 30), t(4, 40), t(1000, -1000)]
    agg, v = make_aggregator("trimmed_mean", trim=0.2)(ups)  # b = 1 of 5
    assert agg.tolist() == pytest.approx([3.0, 20.0])
    assert v[4].weight == 0.0 and "trimmed in 100%" in v[4].reason
    med, vm = make_aggregator("median")(ups)
    assert med.tolist() == [3.0, 20.0]
    even, _ = make_aggregator("median")([t(1), t(2), t(3), t(100)])
    assert even.tolist() == [2.5]
    assert sum(x.weight for x in vm) == pytest.approx(1.0)


def test_gauntlet_keeps_top_improving() -> None:
    scores = {1.0: 0.3, 2.0: 0.5, 3.0: -0.1, 4.0: 0.4}
    ups = [t(k) for k in scores]
    agg, v = make_aggregator("gauntlet", keep=0.5)(ups, score=lambda u: scores[float(u[0])])
    assert agg.tolist() == [3.0]  # mean of 2 and 4, the two best
    assert v[2].weight == 0.0 and "loss not improved" in v[2].reason
    assert v[0].weight == 0.0 and "outside top 2" in v[0].reason
    with pytest.raises(ValueError, match="gauntlet"):
        make_aggregator("gauntlet")(ups)


@pytest.mark.parametrize(
    ("name", "params", "needle"),
    [
        ("nope", {}, "aggregator: unknown 'nope'"),
        ("clip", {"factor": 0.5}, "factor must be a number >= 1"),
        ("clip", {"window": 2.5}, "window"),
        ("trimmed_mean", {"trim": 0.5}, "trim must be a fraction in (0, 0.5)"),
        ("gauntlet", {"keep": 0.0}, "keep"),
        ("mean", {"factor": 2.0}, "unknown parameter 'factor'"),
        ("norm_preserving", {"median": 0.3}, "median"),
    ],
)
def test_parser_errors_name_the_field(name: str, params: dict[str, float], needle: str) -> None:
    with pytest.raises(ValueError) as err:
        make_aggregator(name, **params)
    assert needle in str(err.value) and "aggregator" in str(err.value)


finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)
special = st.sampled_from([math.nan, math.inf, -math.inf, 3e38, -3e38])


@st.composite
def update_lists(draw: st.DrawFn, *, honest_only: bool = False) -> list[torch.Tensor]:
    n = draw(st.integers(1, 6))
    m = draw(st.integers(1, 7))
    values = finite if honest_only else st.one_of(finite, finite, finite, special)
    return [
        torch.tensor(draw(st.lists(values, min_size=n, max_size=n)), dtype=torch.float32) for _ in range(m)
    ]


@settings(max_examples=30, deadline=None)
@given(update_lists(), st.sampled_from(RULES))
def test_every_rule_output_finite(ups: list[torch.Tensor], name: str) -> None:
    agg, verdicts = make_aggregator(name)(ups, score=_score_minus_norm)
    assert agg.shape == ups[0].shape and torch.isfinite(agg).all()
    assert len(verdicts) == len(ups)
    for v, u in zip(verdicts, ups, strict=True):
        assert v.weight >= 0.0
        if not torch.isfinite(u).all():
            assert v.weight == 0.0 and v.reason == "non-finite"
        if v.weight == 0.0 and torch.isfinite(u).all() and name != "trimmed_mean" and name != "median":
            assert v.reason  # rejected -> a reason


@settings(max_examples=30, deadline=None)
@given(update_lists(honest_only=True), st.sampled_from(["median", "trimmed_mean"]))
def test_median_and_trimmed_within_coordinate_range(ups: list[torch.Tensor], name: str) -> None:
    agg, _ = make_aggregator(name)(ups)
    stack = torch.stack(ups)
    lo, hi = stack.min(dim=0).values, stack.max(dim=0).values
    tol = 1e-6 * (1 + stack.abs().max())
    assert bool((agg >= lo - tol).all() and (agg <= hi + tol).all())


@settings(max_examples=30, deadline=None)
@given(update_lists(honest_only=True), st.floats(1.0, 10.0))
def test_clip_never_increases_a_norm(ups: list[torch.Tensor], factor: float) -> None:
    _, verdicts = make_aggregator("clip", factor=factor)(ups)
    k = len(ups)
    for v in verdicts:
        assert v.weight * k <= 1.0 + 1e-9  # the effective scale applied to each update is <= 1


@settings(max_examples=25, deadline=None)
@given(st.lists(finite, min_size=1, max_size=6), st.integers(1, 7))
def test_mean_of_equal_updates_is_that_update(values: list[float], m: int) -> None:
    u = torch.tensor(values, dtype=torch.float32)
    for name in ("mean", "norm_preserving", "median", "trimmed_mean", "clip"):
        agg, _ = make_aggregator(name)([u.clone() for _ in range(m)])
        assert torch.allclose(agg, u, rtol=1e-5, atol=1e-6), name
