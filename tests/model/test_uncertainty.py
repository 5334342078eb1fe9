"""Uncertainty: distributions with sources, a reproducible Monte Carlo through the planner, the tornado."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.analyses.uncertainty import (
    PARAMETERS,
    Distribution,
    UncertaintySpec,
    constraints_for,
    default_spec,
    model_params_for,
    nominal_plan,
    plan_samples,
    tornado,
)
from dispersal.model.analyses.uncertainty.draws import _draw_arrays, _Search
from dispersal.model.analyses.uncertainty.monte_carlo import quantiles_all
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import PAPER_MFU, Mode
from dispersal.model.search import planner
from dispersal.model.search.candidates import make_space

SMALL = planner.Constraints(hardware=("h100_sxm", "mi300x"))


@pytest.fixture(scope="module")
def mc() -> tuple[dict[str, object], dict[str, object]]:
    a = plan_samples(3e24, samples=60, seed=7, constraints=SMALL).to_dict()
    b = plan_samples(3e24, samples=60, seed=7, constraints=SMALL).to_dict()
    return a, b


def test_default_spec_covers_every_parameter_with_a_source() -> None:
    """The shipped TOML gives every known parameter a distribution, a layer and a source."""
    spec = default_spec()
    assert {p.name for p in spec.parameters} == set(PARAMETERS)
    for p in spec.parameters:
        assert p.source and p.layer and p.description, p.name
    chin = {p.name: p.distribution for p in spec.parameters if p.name.startswith("chinchilla")}
    assert chin["chinchilla_a"].sd == pytest.approx(124.6) and chin["chinchilla_beta"].sd == 0.02
    assert len(spec.correlations) == 2


def test_nominal_values_are_the_model_defaults() -> None:
    """At the nominal values the model parameters are exactly the defaults (the headline plan)."""
    spec = default_spec()
    assert model_params_for(spec.nominal(), spec) == DEFAULT_PARAMS
    # The MFU draws are centred on the paper's 0.40; default mode (Constraints.mfu None: the
    # catalogue's MFU per accelerator) uses them as a relative scale around it.
    assert planner.Constraints().mfu is None
    assert spec.nominal()["mfu"] == PAPER_MFU


@pytest.mark.slow
def test_monte_carlo_is_exactly_reproducible(mc: tuple[dict[str, object], dict[str, object]]) -> None:
    """The same seed gives exactly the same numbers; another seed gives different ones."""
    a, b = mc
    assert a == b
    c = plan_samples(3e24, samples=60, seed=8, constraints=SMALL).to_dict()
    assert c["cost_usd_p50"] != a["cost_usd_p50"]


@pytest.mark.slow
def test_percentiles_are_ordered(mc: tuple[dict[str, object], dict[str, object]]) -> None:
    """P10 <= P50 <= P90 for every figure, and the JSON carries the documented keys."""
    a, _ = mc
    for fig in ("cost_usd", "nodes", "c_quality_flop", "days"):
        p10, p50, p90 = (float(a[f"{fig}_{q}"]) for q in ("p10", "p50", "p90"))  # type: ignore[arg-type]
        assert p10 <= p50 <= p90, fig
    assert a["samples"] == 60 and a["seed"] == 7
    assert 0.5 < float(a["feasible_fraction"]) <= 1.0  # type: ignore[arg-type]
    assert float(a["c_quality_flop_p10"]) >= 3e24  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "paper", "search": "exact"},
        {"constraints": planner.Constraints(hardware=("mi300x",))},
    ],
)
def test_degenerate_distributions_reproduce_the_nominal_plan(kwargs: dict[str, object]) -> None:
    """With every distribution of zero width, all percentiles equal the nominal plan's figures."""
    r = plan_samples(3e24, samples=8, seed=0, spec=default_spec().degenerate(), **kwargs)  # type: ignore[arg-type]
    d = r.to_dict()
    assert r.feasible_fraction == 1.0
    for fig in ("cost_usd", "nodes", "c_quality_flop", "days"):
        for q in ("p10", "p50", "p90"):
            assert d[f"{fig}_{q}"] == pytest.approx(d[f"nominal_{fig}"], rel=1e-12), (fig, q)


@pytest.mark.slow
def test_price_multiplier_scales_hardware_cost_only() -> None:
    """Doubling every chip price doubles the hardware part of the nominal plan's cost, not energy."""
    spec = default_spec()
    _, base = nominal_plan(3e24, constraints=SMALL, spec=spec)
    _, dear = nominal_plan(3e24, constraints=SMALL, spec=spec, values={**spec.nominal(), "price_scale": 2.0})
    assert base is not None and dear is not None
    assert base.cost_usd < dear.cost_usd < 2 * base.cost_usd


@pytest.mark.slow
def test_tornado_bars_bracket_the_nominal_cost() -> None:
    """Each bar spans the nominal cost, and the bars are sorted by swing, largest first."""
    names = ["mfu", "chinchilla_e", "compression_quality", "price_scale", "eta_h_alpha0"]
    # An explicit MFU: the spec's absolute MFU draws apply (with the catalogue's per-accelerator MFU,
    # Constraints.mfu None, the tornado leaves MFU at the catalogue value).
    bars = tornado(3e24, constraints=planner.Constraints(hardware=("h100_sxm",), mfu=0.40), parameters=names)
    assert [b.name for b in bars] != [] and {b.name for b in bars} == set(names)
    for b in bars:
        assert b.cost_low_usd <= b.nominal_cost_usd * (1 + 1e-12), b
        assert b.cost_high_usd >= b.nominal_cost_usd * (1 - 1e-12), b
        assert b.low_value <= b.high_value
    swings = [b.swing_usd for b in bars]
    assert swings == sorted(swings, reverse=True)
    mfu = next(b for b in bars if b.name == "mfu")
    assert mfu.cost_at_low_usd > mfu.cost_at_high_usd  # lower MFU, more nodes


@pytest.mark.slow
def test_monte_carlo_uses_the_planners_candidates_and_rule() -> None:
    """At the nominal draw the Monte Carlo evaluates every (candidate, N) exactly as the planner does:
    same validity (spec sec. 10) and same metric; the smallest N it finds is valid and meets the target."""
    spec = default_spec()
    nom = spec.nominal()
    c = constraints_for(nom, SMALL)
    space = make_space(Mode.DEFAULT, c, "treaty", DEFAULT_PARAMS)
    arrays = _draw_arrays({k: np.asarray([v]) for k, v in nom.items()}, spec, DEFAULT_PARAMS, 1)
    s = _Search(
        space=space, draws=arrays, p=DEFAULT_PARAMS, metric=planner.Metric.C_QUALITY, target=3e24, c=c
    )
    k = len(space.combo_hw)
    cc = np.tile(np.arange(k, dtype=np.int64), 4)
    n = np.repeat(np.asarray([1.0, 40.0, 300.0, 2500.0]), k)
    mc = s.run(cc, np.zeros(cc.size, dtype=np.int64), n)
    pl = space.run(cc, n)
    assert pl["valid"].any() and not pl["valid"].all()
    assert np.array_equal(mc["valid"], pl["valid"])
    v = pl["valid"] > 0
    assert np.array_equal(mc["metric"][v], pl["c_quality_flop"][v])
    combos = np.arange(k, dtype=np.int64)
    first = s.smallest_nodes(combos, np.asarray([0], dtype=np.int64))[0]
    found = np.isfinite(first)
    assert found.any()
    r = space.run(combos[found], first[found])
    assert np.all(r["valid"] > 0) and np.all(r["c_quality_flop"] >= 3e24)


def test_plan_samples_signature() -> None:
    """The lead's `dispersal plan --samples` calls plan_samples with exactly these keywords."""
    sig = inspect.signature(plan_samples)
    names = list(sig.parameters)
    assert names[:10] == [
        "target_flop",
        "samples",
        "seed",
        "regime_name",
        "constraints",
        "mode",
        "metric",
        "search",
        "progress",
        "spec",
    ]
    assert sig.parameters["regime_name"].default == "treaty" and sig.parameters["mode"].default == "default"
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in list(sig.parameters.values())[1:])


def test_quantiles_and_sampling() -> None:
    """Closed-form quantiles, truncation, zero width and correlated draws behave as documented."""
    tri = Distribution(kind="triangular", nominal=0.40, low=0.30, high=0.45)
    assert 0.30 < tri.quantile(0.1) < 0.40 < tri.quantile(0.9) < 0.45
    disc = Distribution(kind="discrete", nominal=1, values=(0, 1, 2), weights=(0.25, 0.5, 0.25))
    assert (disc.quantile(0.1), disc.quantile(0.5), disc.quantile(0.9)) == (0, 1, 2)
    trunc = Distribution(kind="normal", nominal=2085.43, sd=1293.0, lower=0.0)
    assert trunc.quantile(0.1) > 0
    spec = default_spec()
    draws = spec.sample(4000, 1)
    assert np.all(draws["chinchilla_b"] > 0) and np.all(draws["chinchilla_a"] > 0)
    rho = np.corrcoef(draws["chinchilla_a"], draws["chinchilla_alpha"])[0, 1]
    assert 0.8 < rho < 0.95
    assert np.all((draws["mfu"] >= 0.30) & (draws["mfu"] <= 0.45))
    zero = spec.degenerate().sample(5, 1)
    for p in spec.parameters:
        assert np.all(zero[p.name] == p.distribution.nominal)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"parameters": {"mfu": {"kind": "uniform", "nominal": 0.4, "low": 0.3, "high": 1.2}}}, "mfu"),
        ({"parameters": {"nonsense": {"kind": "normal", "nominal": 1, "sd": 1}}}, "nonsense"),
        ({"parameters": {"eta_h_alpha0": {"kind": "normal", "nominal": 0.08, "sd": -1}}}, "eta_h_alpha0.sd"),
        ({"parameters": {"price_scale": {"kind": "gamma", "nominal": 1}}}, "price_scale.kind"),
        (
            {
                "parameters": {
                    "compression_quality": {
                        "kind": "discrete",
                        "nominal": 1,
                        "values": [1, 5],
                        "weights": [0.5, 0.5],
                    }
                }
            },
            "compression_quality",
        ),
        (
            {
                "parameters": {"chinchilla_a": {"kind": "normal", "nominal": 482, "sd": 124, "lower": 0}},
                "correlations": [{"a": "chinchilla_a", "b": "chinchilla_alpha", "rho": 0.9}],
            },
            "chinchilla_alpha",
        ),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_specs_are_input_errors(data: dict[str, object], field: str) -> None:
    """Invalid distributions raise InputError naming the field."""
    with pytest.raises(InputError) as exc:
        UncertaintySpec.from_dict(data)
    assert exc.value.field == field


def test_bad_arguments_are_input_errors() -> None:
    """samples and seed are validated."""
    with pytest.raises(InputError):
        plan_samples(3e24, samples=0, seed=0)
    with pytest.raises(InputError):
        default_spec().sample(10, -1)
    assert math.isfinite(default_spec().get("mfu").distribution.quantile(0.5))  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(1.0, 1e9), min_size=0, max_size=30),
    failing=st.integers(0, 30),
)
def test_quantiles_over_all_draws_count_cannot_reach_as_infinite(values: list[float], failing: int) -> None:
    """The all-draw quantiles equal numpy's on the full sample with +inf for each draw that cannot
    reach (when the quantile falls on a finite value or on +inf); NaN when no draw reaches."""
    total = len(values) + failing
    if total == 0:
        return
    p = len(values) / total
    got = quantiles_all(np.asarray(values), p)
    if not values:
        assert all(math.isnan(g) for g in got)
        return
    full = np.sort(np.concatenate([values, np.full(failing, np.inf)]))
    for q, g in zip((0.1, 0.5, 0.9), got, strict=True):
        if q > p:
            assert g == math.inf
            # At least the (1 - q) top share of all draws cannot reach.
            assert full[int(np.ceil(q * total)) - 1] == np.inf or q * total > len(values)
        else:
            assert min(values) <= g <= max(values)
            assert g == pytest.approx(float(np.percentile(values, 100 * q / p)))


@pytest.mark.slow
def test_monte_carlo_leads_with_p_reach_and_labels_conditional_quantiles() -> None:
    """P(reach) in [0, 1] is the first JSON key; the plain quantiles are labelled conditional and the
    *_all ones are inf exactly when the failing share lies above the quantile."""
    r = plan_samples(1e25, samples=40, seed=3, constraints=SMALL, mode="paper")
    d = r.to_dict()
    assert next(iter(d)) == "p_reach" and 0.0 <= d["p_reach"] <= 1.0
    assert "conditional" in d["quantiles"]
    for q, key in ((0.1, "cost_usd_p10_all"), (0.5, "cost_usd_p50_all"), (0.9, "cost_usd_p90_all")):
        assert (d[key] == math.inf) == (q > r.p_reach * (1 + 1e-12))
    hard = plan_samples(1e29, samples=10, seed=1, constraints=SMALL, mode="paper")
    assert hard.p_reach == 0.0
    assert all(math.isnan(v) for v in hard.percentiles["cost_usd"])
    assert all(math.isnan(v) for v in hard.percentiles_all["cost_usd"])
