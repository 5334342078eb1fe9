"""The grounded quality model (issue 12): residuals on the published tables, bounds, monotonicity,
the loss-space bound, extrapolation flags, parameter sampling and the rerunnable fit."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.analyses.quality_fit import load_points, run
from dispersal.model.inputs.errors import InputError
from dispersal.model.kernel import chinchilla, quality, quality_draws
from dispersal.model.kernel.quality import (
    FIT_RANGES,
    MAPPING_CODES,
    QualityMapping,
    QualityParams,
    compute_fraction,
    critical_replicas,
    efficiency,
    extrapolation_flags,
    inner_optimizer_code,
    log_loss_ratio,
    loss_ratio,
    loss_space_fraction,
    mapping_code,
    penalty_amplitude,
)
from dispersal.model.kernel.quality_draws import sample_quality_params

POINTS = load_points()["point"]
# Besiroglu et al. 2024 Chinchilla refit (the kernel's defaults), for the loss-space bound
CH = {"e": 1.8172, "a": 482.01, "b": 2085.43, "alpha": 0.3478, "beta": 0.3658, "tokens_per_param": 25.6}


def _rows(set_name: str) -> list[dict[str, Any]]:
    return [r for r in POINTS if r["set"] == set_name]


def test_every_charles_table4_cell_within_0p003() -> None:
    rows = _rows("charles2025_table4")
    assert len(rows) == 28  # 7 sizes x M = 1, 2, 4, 8
    for r in rows:
        pred = float(loss_ratio(r["replicas"], r["inner_steps"], r["params"], r["fragments"]))
        assert abs(pred - r["loss"] / r["loss_dp"]) <= 0.003, r


def test_held_out_4b_10b_within_0p003() -> None:
    # Charles et al. Table 5 is never fitted (role = holdout)
    rows = _rows("charles2025_table5")
    assert rows and all(r["role"] == "holdout" for r in rows)
    for r in rows:
        pred = float(loss_ratio(r["replicas"], r["inner_steps"], r["params"], r["fragments"]))
        assert abs(pred - r["loss"] / r["loss_dp"]) <= 0.003, r


def test_formula_exact() -> None:
    q = QualityParams(u0=-0.001, u1=-0.0005, b0=0.004, kb=0.3, p=0.5, q=0.4, delta=0.002)
    m, h, n, f = 4.0, 100.0, 1e9, 3.0
    x = math.log(n / q.pivot_params)
    lr = (
        -0.001
        - 0.0005 * x
        + 0.004 * (n / q.pivot_params) ** -0.3 * (4**0.5 - 1) / 0.5 * (1 + 0.4 * math.log(100 / 30))
        + 0.002
    )
    assert float(log_loss_ratio(m, h, n, f, q)) == pytest.approx(lr, rel=1e-12)
    assert float(compute_fraction(m, h, n, f, q)) == pytest.approx(math.exp(-lr / (0.0953 / 2)), rel=1e-12)


def test_size_offset_held_at_fit_edges_and_h_floor() -> None:
    q = QualityParams()
    # M = 1: only u(P), constant beyond the fitted sizes
    assert float(log_loss_ratio(1, 30, 1e12, 1, q)) == pytest.approx(
        float(log_loss_ratio(1, 30, 2.4e9, 1, q))
    )
    assert float(log_loss_ratio(1, 30, 1e6, 1, q)) == pytest.approx(float(log_loss_ratio(1, 30, 3.5e7, 1, q)))
    # H below 30 is held at H = 30
    assert float(compute_fraction(8, 1, 1e9)) == pytest.approx(float(compute_fraction(8, 30, 1e9)))


def test_diloco_beats_dp_at_small_m_large_models() -> None:
    assert float(compute_fraction(1, 30, 2.4e9)) > 1.0
    assert float(compute_fraction(2, 30, 2.4e9)) > 1.0
    assert float(compute_fraction(8, 30, 3.5e7)) < 0.5


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    m=st.floats(1.0, 1e4),
    dm=st.floats(0.0, 1e3),
    h=st.floats(1.0, 1e5),
    dh=st.floats(0.0, 1e4),
    n=st.floats(1e6, 1e13),
    f=st.floats(1.0, 100.0),
)
def test_bounded_and_monotone(m: float, dm: float, h: float, dh: float, n: float, f: float) -> None:
    g = float(compute_fraction(m, h, n, f))
    assert 0.0 < g <= 1.1
    assert float(compute_fraction(m + dm, h, n, f)) <= g * (1 + 1e-12)
    h30 = max(h, 30.0)
    assert float(compute_fraction(m, h30 + dh, n, f)) <= float(compute_fraction(m, h30, n, f)) * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(m=st.floats(1.0, 1e3), h=st.floats(30.0, 1e4), n=st.floats(1e7, 1e13))
def test_monotone_for_sampled_parameters(m: float, h: float, n: float) -> None:
    s = sample_quality_params(np.random.default_rng(7), 64)
    g1 = compute_fraction(m, h, n, 1, s)
    assert g1.shape == (64,)
    assert np.all((g1 > 0) & (g1 <= 1.1))
    assert np.all(compute_fraction(2 * m, h, n, 1, s) <= g1 * (1 + 1e-12))
    assert np.all(compute_fraction(m, 2 * h, n, 1, s) <= g1 * (1 + 1e-12))


def test_loss_space_bound() -> None:
    p, d = 1e11, 2.56e12
    lo = float(chinchilla.loss(p, d, CH["e"], CH["a"], CH["b"], CH["alpha"], CH["beta"]))
    r = float(loss_ratio(8, 30, p))
    expect = float(
        chinchilla.optimal_compute_for_loss(lo * r, *CH.values())
        / chinchilla.optimal_compute_for_loss(lo, *CH.values())
    )
    got = float(loss_space_fraction(lo, r, **CH))
    assert got == pytest.approx(expect, rel=1e-12)
    assert got < float(compute_fraction(8, 30, p))  # the loss-space form is the conservative one
    assert float(loss_space_fraction(lo, 0.99, **CH)) == 1.0  # never credits DiLoCo with beating DP


def test_efficiency_selects_mapping_per_element() -> None:
    p = np.array([1e11, 1e11])
    lo = chinchilla.loss(p, 25.6 * p, CH["e"], CH["a"], CH["b"], CH["alpha"], CH["beta"])
    codes = np.array([MAPPING_CODES[QualityMapping.COMPUTE], MAPPING_CODES[QualityMapping.LOSS]])
    out = efficiency(codes, 8, 100, p, 1, lo, q=None, **CH)
    assert out[0] == pytest.approx(float(compute_fraction(8, 100, 1e11)))
    assert out[1] == pytest.approx(float(loss_space_fraction(lo[1], loss_ratio(8, 100, 1e11), **CH)))
    all_compute = efficiency(np.zeros((3, 1), dtype=int), [2, 8], 100, 1e11, 1, lo[0], q=None, **CH)
    assert all_compute.shape == (3, 2)
    assert all_compute[2] == pytest.approx(compute_fraction([2, 8], 100, 1e11))
    with pytest.raises(InputError, match="quality_mapping"):
        efficiency(2, 8, 100, 1e11, 1, lo[0], q=None, **CH)


def test_mapping_code_and_input_errors() -> None:
    assert mapping_code("compute") == 0 and mapping_code("loss") == 1
    with pytest.raises(InputError, match=r"^quality_mapping: must be one of compute, loss"):
        mapping_code("chinchilla")
    with pytest.raises(InputError, match=r"^replicas: must be finite and >= 1, got 0"):
        compute_fraction(0, 30, 1e9)
    with pytest.raises(InputError, match=r"^params: must be finite and > 0"):
        compute_fraction(2, 30, -1.0)
    with pytest.raises(InputError, match=r"^inner_steps"):
        compute_fraction(2, float("nan"), 1e9)


def test_extrapolation_flags() -> None:
    fl = extrapolation_flags([2, 16, 4], [30, 30, 500], [1e9, 1e9, 1e12], [1, 1, 36], [4, 150, 1])
    assert fl.any.tolist() == [False, True, True]
    assert fl.replicas.tolist() == [False, True, False]
    assert fl.inner_steps.tolist() == [False, False, True]
    assert fl.params.tolist() == [False, False, True]
    assert fl.fragments.tolist() == [False, False, True]
    assert fl.compression.tolist() == [False, True, False]
    assert fl.ranges == FIT_RANGES and fl.ranges["replicas"] == (1.0, 8.0)
    assert fl.messages(1) == [
        "replicas outside the published quality fit's range [1, 8]",
        "compression outside the published quality fit's range [1, 4]",
    ]
    assert extrapolation_flags(8, 100, 2.4e9, 8, 4).messages() == []  # range ends are inside


def test_samples_follow_the_fit_covariance() -> None:
    names, mean, cov = quality_draws.fitted_covariance()
    s = sample_quality_params(np.random.default_rng(0), 20000)
    draws = np.stack([getattr(s, n) for n in names], axis=1)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 0.05 * sd + 1e-15)
    assert np.all(s.b0 > 0) and np.all(s.q >= 0) and np.all(s.p >= 0.05)
    again = sample_quality_params(np.random.default_rng(0), 3)
    assert again.at(1).u0 == pytest.approx(float(s.u0[1]))  # same seed, same draws
    with pytest.raises(InputError, match="samples"):
        sample_quality_params(np.random.default_rng(0), 0)


def test_defaults_equal_fit_file() -> None:
    names, mean, _ = quality_draws.fitted_covariance()
    q = QualityParams()
    assert [getattr(q, n) for n in names] == pytest.approx(list(mean), rel=1e-12)


@pytest.mark.slow
def test_fit_reruns_to_the_packaged_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fit.toml"
    assert run(["--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "max |residual| Charles Table 4" in printed and "leave-2.4B-out" in printed
    new = tomllib.loads(out.read_text(encoding="utf-8"))
    assert new["values"] == pytest.approx(quality_draws.load_fit()["values"], rel=1e-6)
    assert new["max_abs_residual_ratio_fit"] < 0.006
    assert new["leave_out_2p4b_max_abs_error_ratio"] < 0.003


def test_critical_batch_tail() -> None:
    q = QualityParams()
    mx, s_ = q.fit_replicas_max, q.loss_compute_slope
    # K = lambda M_x / e (P / P0)^kappa, e = a M_x^p / s the elasticity of g at M_x: exact
    elast = float(penalty_amplitude(100, 1e11)) * mx**q.p / s_
    k = float(critical_replicas(100, 1e11))
    assert k == pytest.approx(
        q.tail_scale * mx / elast * (1e11 / q.pivot_params) ** q.tail_size_exponent, rel=1e-12
    )
    g8 = float(compute_fraction(8, 100, 1e11))
    for m in (9.0, 64.0, 1e4):
        assert float(compute_fraction(m, 100, 1e11)) == pytest.approx(g8 * (mx + k) / (m + k), rel=1e-12)
    # continuous at M_x; the useful compute M g(M) rises with every replica and saturates at g(M_x) (M_x + K)
    assert float(log_loss_ratio(8 * (1 + 1e-12), 100, 1e11)) == pytest.approx(
        float(log_loss_ratio(8, 100, 1e11))
    )
    useful = np.array([m * float(compute_fraction(m, 100, 1e11)) for m in (8, 64, 512, 1e5, 1e9)])
    assert np.all(np.diff(useful) > 0)
    assert useful[-1] == pytest.approx(g8 * (mx + k), rel=1e-4)
    # a larger model has a larger critical replica count (the critical batch grows as the loss falls);
    # a longer sync interval a smaller one
    assert float(critical_replicas(100, 1e12)) > k > float(critical_replicas(1000, 1e11))


def test_inner_optimizer_and_merge_rule() -> None:
    q = QualityParams()
    assert inner_optimizer_code("adamw") == 0 and inner_optimizer_code("muon") == 1
    with pytest.raises(InputError, match="inner_optimizer"):
        inner_optimizer_code("sgd")
    with pytest.raises(InputError, match="inner_optimizer"):
        log_loss_ratio(4, 30, 1e9, 1, None, 2)
    # Muon: its own offset at M = 1 and rho times the AdamW penalty (exact)
    d_ad = float(log_loss_ratio(4, 30, 1e9, 1, None, 0) - log_loss_ratio(1, 30, 1e9, 1, None, 0))
    d_mu = float(log_loss_ratio(4, 30, 1e9, 1, None, 1) - log_loss_ratio(1, 30, 1e9, 1, None, 1))
    assert d_mu == pytest.approx(q.muon_penalty_ratio * d_ad, rel=1e-12)
    off = float(log_loss_ratio(1, 30, 1e9, 1, None, 1) - log_loss_ratio(1, 30, 1e9, 1, None, 0))
    assert off == pytest.approx(q.muon_offset, rel=1e-12)
    # Muon's fitted penalty is smaller, so its g falls more slowly in M (MuLoCo)
    assert float(compute_fraction(64, 30, 1e9, 1, None, 1)) > float(compute_fraction(64, 30, 1e9, 1, None, 0))
    # a plain mean with the outer lr held at its M_x value loses s omega ln(M / M_x); norm-preserving does not
    fixed = q.replace(outer_lr_retuned=False)
    extra = float(log_loss_ratio(128, 30, 1e9, 1, fixed) - log_loss_ratio(128, 30, 1e9, 1))
    assert extra == pytest.approx(q.loss_compute_slope * 0.5 * math.log(128 / 8), rel=1e-12)
    assert float(log_loss_ratio(8, 30, 1e9, 1, fixed)) == pytest.approx(float(log_loss_ratio(8, 30, 1e9)))
    norm = q.replace(outer_lr_retuned=False, merge_rule="norm_preserving")
    assert float(log_loss_ratio(128, 30, 1e9, 1, norm)) == pytest.approx(float(log_loss_ratio(128, 30, 1e9)))
    with pytest.raises(InputError, match="merge_rule"):
        log_loss_ratio(2, 30, 1e9, 1, q.replace(merge_rule="median"))


def test_every_large_m_point_named_with_residual() -> None:
    # every published point beyond M = 8 is in the file with a source and a role, and the fit's
    # residuals stay at the size of the cross-paper scatter (fit <= 0.01; 3.1B held back <= 0.005)
    from dispersal.model.analyses.quality_fit import tail_observations, tail_table

    rows = load_points()["large_m"]
    assert len(rows) == 12 and all(
        r["replicas"] > 8 and r["source"] and r["role"] in ("fit", "holdout") for r in rows
    )
    q = QualityParams()
    theta2 = np.array([np.log(q.tail_scale), *(getattr(q, f) for f in quality.TAIL_FIELDS[1:])])
    fit_rows = [r for r in rows if r["role"] == "fit"]
    _, err = tail_table(tail_observations(fit_rows), theta2, q)
    assert np.max(np.abs(err)) <= 0.01
    held = [r for r in rows if r["role"] == "holdout" and r["params"] < 1e10]
    obs = tail_observations(held)
    _, err = tail_table(obs, theta2, q)
    assert np.max(np.abs(err)) <= 0.005, dict(zip(obs.labels, err, strict=True))


def test_tail_samples_follow_the_stage2_covariance() -> None:
    names, mean, cov = quality_draws.tail_covariance()
    assert names == ("ln_tail_scale", *quality.TAIL_FIELDS[1:])
    s = sample_quality_params(np.random.default_rng(3), 20000)
    draws = np.stack([np.log(s.tail_scale), *(getattr(s, n) for n in names[1:])], axis=1)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 0.05 * np.sqrt(np.diag(cov)) + 1e-15)
    assert np.all(s.tail_scale > 0) and np.all(s.muon_penalty_ratio > 0)
    i = 17
    assert float(compute_fraction(1024, 100, 1e11, 1, s)[i]) == pytest.approx(
        float(compute_fraction(1024, 100, 1e11, 1, s.at(i))), rel=1e-12
    )


def test_testbed_stage_recovers_the_form() -> None:
    # stage 3 fits the form's three constants to a measured M-sweep on M <= 16 and predicts M > 16:
    # on a curve generated by the form itself it recovers lambda and predicts the held-back M exactly
    from dispersal.model.analyses.quality_fit import fit_testbed, testbed_form

    q = QualityParams()
    theta = np.array([math.log(0.97), math.log(0.02), math.log(0.3)])
    ms = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 256.0])
    g = np.exp(testbed_form(theta, ms, q.p, q.loss_compute_slope, q.fit_replicas_max))
    rows: list[dict[str, Any]] = [
        {
            "preset": "tiny",
            "inner_steps": 30,
            "merge": "mean",
            "replicas": int(m),
            "g_mean": float(v),
            "g_sd": 0.0,
        }
        for m, v in zip(ms, g, strict=True)
    ]
    out = fit_testbed(rows, q)
    assert [r["role"] for r in out] == ["fit"] * 5 + ["holdout"] * 3
    assert out[0]["tail_scale"] == pytest.approx(0.3, rel=1e-4)
    for r in out:
        assert r["g_model"] == pytest.approx(r["g_measured"], rel=1e-5)
    # M g(M) of the fitted form never falls beyond M_x (the saturation the testbed is asked to show)
    assert np.all(np.diff(ms[3:] * g[3:]) > 0)
    assert fit_testbed(rows[:4], q) == []  # no point beyond M_x: the tail is not identified
    # the M = 1 run has nothing to merge: it serves the other merge rule's curve too
    other = [dict(r, merge="norm_preserving") for r in rows if r["replicas"] > 1]
    dp = [dict(r, algorithm="dp", merge="dp") for r in rows]  # DP references in the same file are skipped
    both = fit_testbed(rows + other + dp, q)
    assert {r["merge"] for r in both} == {"mean", "norm_preserving"} and len(both) == 16


def test_replica_term_kept_for_the_calibration() -> None:
    # the Box-Cox term with a power continuation (used by dispersal.calibration.shape with t = p)
    m = np.array([1.0, 2.0, 8.0, 100.0])
    assert quality.replica_term(m, 0.65, 8.0, 0.65) == pytest.approx((m**0.65 - 1) / 0.65, rel=1e-12)
    s8 = (8**0.65 - 1) / 0.65
    assert float(quality.replica_term(100.0, 0.65, 8.0, 0.0)) == pytest.approx(
        s8 + 8**0.65 * math.log(100 / 8)
    )
