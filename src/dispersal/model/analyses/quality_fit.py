"""Fit the quality model (`dispersal.model.kernel.quality`) to the published points; rerunnable by anyone.

    python -m dispersal.model.analyses.quality_fit            # fit, print residuals, write quality_fit.toml
    python -m dispersal.model.analyses.quality_fit --check    # fit and print; fail if the data file differs
    python -m dispersal.model.analyses.quality_fit --out F    # write somewhere else

Method. Each fitted point i gives y_i = ln(L_DiLoCo / L_DP) from one table row. The model is
`quality.log_loss_ratio` plus one nuisance term for the Streaming DiLoCo rows only,
kappa b(P) S(M) h(H): that paper kept the outer learning rate fixed at 0.4 for every M and scale
(sec. 3.2) where Charles et al. re-tuned it per M, so its replica penalty may differ in size; kappa
is reported, not used by g. Weights: the rounding error of the printed losses (uniform on
+-0.5 x 10^-decimals: sd 0.289 x 10^-decimals per loss, both losses of a ratio). The three
nonlinear parameters (kb, p, q) start from a grid with the other five solved linearly (variable
projection), then Gauss-Newton refines all eight. Covariance: s^2 (J^T W J)^-1 with s^2 the reduced
chi-square (so the quoted uncertainty reflects the actual scatter, not only the rounding).
Held-out points (role = "holdout") are never fitted; a second fit without Charles et al.'s 2.4B
row predicts it (their own leave-one-out protocol, sec. 6.3).
"""

from __future__ import annotations

import argparse
import math
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal._io import atomic_write_text
from dispersal.model.kernel import quality, quality_draws
from dispersal.model.kernel.quality import FITTED_FIELDS, TAIL_FIELDS, QualityParams

Arr = npt.NDArray[np.float64]
ALL = (*FITTED_FIELDS, "kappa_streaming")
ROUNDING_SD = 1.0 / math.sqrt(12.0)  # sd of a uniform rounding error, in units of the last printed digit


@dataclass(frozen=True)
class Points:
    """Columns of a set of [[point]] rows."""

    rows: tuple[dict[str, Any], ...]
    params: Arr
    replicas: Arr
    inner_steps: Arr
    fragments: Arr
    y: Arr
    sigma: Arr
    streaming: Arr


def load_points(text: str | None = None) -> dict[str, Any]:
    """The published points file (`dispersal/data/quality_points.toml`)."""
    if text is None:
        text = resources.files("dispersal.data").joinpath(quality.POINTS_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)


def columns(rows: list[dict[str, Any]]) -> Points:
    def col(k: str) -> Arr:
        return np.array([float(r[k]) for r in rows], dtype=np.float64)

    loss, dp, dec = col("loss"), col("loss_dp"), col("decimals")
    unit = ROUNDING_SD * 10.0**-dec
    sigma = np.sqrt((unit / loss) ** 2 + (unit / dp) ** 2)
    stream = np.array([r["set"].startswith("streaming") for r in rows], dtype=np.float64)
    return Points(
        tuple(rows),
        col("params"),
        col("replicas"),
        col("inner_steps"),
        col("fragments"),
        np.log(loss / dp),
        sigma,
        stream,
    )


def _params(theta: Arr, base: QualityParams) -> QualityParams:
    return base.replace(**{f: float(theta[i]) for i, f in enumerate(FITTED_FIELDS)})


def predict(theta: Arr, pts: Points, base: QualityParams) -> Arr:
    """Model ln r for the points, the Streaming nuisance term included."""
    qp = _params(theta, base)
    core = quality.log_loss_ratio(pts.replicas, pts.inner_steps, pts.params, pts.fragments, qp)
    amp = (
        quality.log_loss_ratio(pts.replicas, pts.inner_steps, pts.params, 1.0, qp.replace(u0=0.0, u1=0.0))
        / qp.b0
    )
    return np.asarray(core + theta[len(FITTED_FIELDS)] * pts.streaming * amp, dtype=np.float64)


def _linear_solve(kb: float, p: float, q: float, pts: Points, base: QualityParams) -> tuple[float, Arr]:
    """Given (kb, p, q), the weighted least-squares (u0, u1, b0, delta, kappa) and chi-square."""
    x = np.log(pts.params / base.pivot_params)
    xc = np.clip(
        x,
        math.log(base.fit_params_min / base.pivot_params),
        math.log(base.fit_params_max / base.pivot_params),
    )
    s_m = (pts.replicas**p - 1.0) / p
    h = 1.0 + q * np.log(np.maximum(pts.inner_steps, base.inner_steps_floor) / 30.0)
    t = np.exp(-kb * x) * s_m * h
    design = np.stack([np.ones_like(x), xc, t, (pts.fragments > 1).astype(float), t * pts.streaming], axis=1)
    w = 1.0 / pts.sigma
    sol, *_ = np.linalg.lstsq(design * w[:, None], pts.y * w, rcond=None)
    res = (pts.y - design @ sol) * w
    u0, u1, b0, delta, kb_amp = sol
    theta = np.array([u0, u1, b0, kb, p, q, delta, kb_amp / b0])
    return float(res @ res), theta


def fit(pts: Points, base: QualityParams | None = None) -> tuple[Arr, Arr, float, int]:
    """(theta, covariance, chi-square, degrees of freedom) over the names in ALL."""
    base = base or QualityParams()
    best: tuple[float, Arr] | None = None
    for kb in np.linspace(0.0, 0.6, 31):
        for p in np.linspace(0.1, 1.5, 29):
            for q in np.linspace(0.0, 2.0, 41):
                cand = _linear_solve(float(kb), float(p), float(q), pts, base)
                if best is None or cand[0] < best[0]:
                    best = cand
    assert best is not None
    theta = best[1]
    w = 1.0 / pts.sigma

    def resid(th: Arr) -> Arr:
        return np.asarray((pts.y - predict(th, pts, base)) * w, dtype=np.float64)

    theta, chi2, j = _gauss_newton(
        resid, theta, lambda t: bool(t[4] > 0.05 and t[2] > 0), iters=50, halvings=30, rel_tol=1e-10
    )
    dof = pts.y.size - theta.size
    cov = np.asarray(np.linalg.inv(j.T @ j) * (chi2 / dof), dtype=np.float64)
    return theta, cov, chi2, dof


def _jacobian(resid: Callable[[Arr], Arr], th: Arr) -> Arr:
    """Central-difference Jacobian of `resid` at th (relative step 1e-6, at least 1e-9)."""
    cols = []
    for i in range(th.size):
        step = 1e-6 * max(abs(th[i]), 1e-3)
        up, dn = th.copy(), th.copy()
        up[i] += step
        dn[i] -= step
        cols.append((resid(up) - resid(dn)) / (2 * step))
    return np.stack(cols, axis=1)


def _gauss_newton(
    resid: Callable[[Arr], Arr],
    theta: Arr,
    ok: Callable[[Arr], bool],
    *,
    iters: int,
    halvings: int,
    rel_tol: float,
) -> tuple[Arr, float, Arr]:
    """(theta, chi-square, Jacobian at theta): Gauss-Newton on the weighted residuals, each step halved
    until it stays where `ok` holds and does not raise chi-square (bounded: `iters` steps of at most
    `halvings` halvings), stopping when the gain falls below rel_tol x max(chi2, 1)."""
    chi2 = float(resid(theta) @ resid(theta))
    for _ in range(iters):
        step = np.linalg.lstsq(_jacobian(resid, theta), -resid(theta), rcond=None)[0]
        lam = 1.0
        for _ in range(halvings):
            trial = theta + lam * step
            if ok(trial):
                c2 = float(resid(trial) @ resid(trial))
                if c2 <= chi2:
                    break
            lam /= 2.0
        else:
            break
        improvement = chi2 - c2
        theta, chi2 = trial, c2
        if improvement < rel_tol * max(chi2, 1.0):
            break
    return theta, chi2, _jacobian(resid, theta)


# --- stage 2: beyond eight replicas and the inner optimizer (issue 21) -------------------------------


@dataclass(frozen=True)
class TailObs:
    """Stage-2 observations: replica penalties ln(L_K / L_K1) and Muon offsets, with their sd."""

    labels: tuple[str, ...]
    kind: tuple[str, ...]  # "penalty" or "muon_offset"
    params: Arr
    replicas: Arr
    inner_steps: Arr
    optimizer: Arr  # 0 AdamW, 1 Muon
    y: Arr
    sigma: Arr


def _unit(row: dict[str, Any]) -> float:
    return float(ROUNDING_SD * 10.0 ** -float(row["decimals"]))


def tail_observations(rows: list[dict[str, Any]]) -> TailObs:
    """Penalty rows y = ln(loss / loss_k1) (one paper, one optimizer: its M = 1 offset cancels) and, per
    size with both optimizers, y = ln(L_K1 / L_DP)_Muon - ln(L_K1 / L_DP)_AdamW (the Muon offset)."""
    lab, kind, pp, mm, hh, oo, yy, ss = [], [], [], [], [], [], [], []
    for r in rows:
        u = _unit(r)
        opt = quality.inner_optimizer_code(str(r["inner_optimizer"]))
        lab.append(f"{r['set']} {r['size_label']} {r['inner_optimizer']} M={r['replicas']} vs M=1")
        kind.append("penalty")
        pp.append(float(r["params"]))
        mm.append(float(r["replicas"]))
        hh.append(float(r["inner_steps"]))
        oo.append(float(opt))
        yy.append(math.log(r["loss"] / r["loss_k1"]))
        ss.append(math.hypot(u / r["loss"], u / r["loss_k1"]))
    by_size: dict[tuple[str, float], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_size.setdefault((r["set"], float(r["params"])), {})[str(r["inner_optimizer"])] = r
    for (set_name, size), pair in by_size.items():
        if {"adamw", "muon"} <= pair.keys():
            mu, ad = pair["muon"], pair["adamw"]
            u = _unit(mu)
            lab.append(f"{set_name} {mu['size_label']} muon offset at M=1")
            kind.append("muon_offset")
            pp.append(size)
            mm.append(1.0)
            hh.append(float(mu["inner_steps"]))
            oo.append(1.0)
            yy.append(math.log(mu["loss_k1"] / mu["loss_dp"]) - math.log(ad["loss_k1"] / ad["loss_dp"]))
            ss.append(
                u
                * math.sqrt(sum(x**-2 for x in (mu["loss_k1"], mu["loss_dp"], ad["loss_k1"], ad["loss_dp"])))
            )
    cols = [np.asarray(v, dtype=np.float64) for v in (pp, mm, hh, oo, yy, ss)]
    return TailObs(tuple(lab), tuple(kind), *cols)


TAIL_FIT_NAMES = ("ln_tail_scale", *TAIL_FIELDS[1:])
"""Stage 2 is fitted in ln(tail_scale) (a positive scale: its Monte Carlo draws stay positive)."""


def _tail_params(theta2: Arr, qp: QualityParams) -> QualityParams:
    vals = {f: float(theta2[i]) for i, f in enumerate(TAIL_FIELDS)}
    vals["tail_scale"] = math.exp(float(theta2[0]))
    return qp.replace(**vals)


def predict_tail(theta2: Arr, obs: TailObs, qp: QualityParams) -> Arr:
    """Model values of the stage-2 observations for theta2 in the order of TAIL_FIELDS."""
    q2 = _tail_params(theta2, qp)
    opt = obs.optimizer.astype(np.int64)
    pen = quality.log_loss_ratio(obs.replicas, obs.inner_steps, obs.params, 1.0, q2, opt)
    pen -= quality.log_loss_ratio(1.0, obs.inner_steps, obs.params, 1.0, q2, opt)
    off = np.full(obs.y.shape, q2.muon_offset)
    is_pen = np.array([k == "penalty" for k in obs.kind])
    return np.asarray(np.where(is_pen, pen, off), dtype=np.float64)


def fit_tail(obs: TailObs, qp: QualityParams) -> tuple[Arr, Arr, float, int]:
    """(theta2, covariance, chi-square, dof): Gauss-Newton from (0, 0, 0, 1), step halving, bounded."""
    theta = np.array([0.0, 0.0, 0.0, 1.0])
    w = 1.0 / obs.sigma

    def resid(th: Arr) -> Arr:
        return np.asarray((obs.y - predict_tail(th, obs, qp)) * w, dtype=np.float64)

    theta, chi2, j = _gauss_newton(
        resid, theta, lambda t: bool(t[3] > 0), iters=100, halvings=40, rel_tol=1e-12
    )
    dof = max(obs.y.size - theta.size, 1)
    cov = np.asarray(np.linalg.inv(j.T @ j) * max(chi2 / dof, 1.0), dtype=np.float64)
    return theta, cov, chi2, dof


def tail_table(obs: TailObs, theta2: Arr, qp: QualityParams) -> tuple[list[str], Arr]:
    """Lines 'observation | published | fitted | residual | Box-Cox continued (0.2)' in ratio units."""
    pred = predict_tail(theta2, obs, qp)
    # 0.2 had no inner-optimizer axis: a Muon run got the AdamW penalty
    amp = quality.penalty_amplitude(obs.inner_steps, obs.params, 0, qp)
    old = amp * (obs.replicas**qp.p - 1.0) / qp.p  # the 0.2 default: Box-Cox continued beyond M = 8
    old = np.where(np.array([k == "penalty" for k in obs.kind]), old, pred)
    pub, mod = np.exp(obs.y), np.exp(pred)
    lines = [
        f"{lab:<44} published {a:.4f} fitted {b:.4f} resid {b - a:+.4f}  (0.2 Box-Cox tail {math.exp(o):.4f})"
        for lab, a, b, o in zip(obs.labels, pub, mod, old, strict=True)
    ]
    return lines, mod - pub


def _fmt_row(r: dict[str, Any]) -> str:
    p = float(r["params"])
    size = f"{p / 1e9:.3g}B" if p >= 1e9 else f"{p / 1e6:.3g}M"
    extra = f" D={float(r['tokens']) / 1e9:.0f}B" if "tokens" in r else ""
    return f"{r['set']:<22} {size:>5} M={int(r['replicas']):<2} H={int(r['inner_steps']):<4} F={int(r['fragments']):<2}{extra}"


def residual_table(
    rows: list[dict[str, Any]], theta: Arr, base: QualityParams, streaming_term: bool
) -> tuple[list[str], Arr]:
    """Lines 'point | published r | predicted r | residual | g' and the residuals (ratio units)."""
    pts = columns(rows)
    if streaming_term:
        pred = predict(theta, pts, base)
    else:
        pred = quality.log_loss_ratio(
            pts.replicas, pts.inner_steps, pts.params, pts.fragments, _params(theta, base)
        )
    g = np.minimum(base.g_max, np.exp(-pred / base.loss_compute_slope))
    pub, mod = np.exp(pts.y), np.exp(pred)
    lines = [
        f"{_fmt_row(r)}  r_pub={a:.4f} r_fit={b:.4f} resid={b - a:+.4f} g={gg:.3f}"
        for r, a, b, gg in zip(rows, pub, mod, g, strict=True)
    ]
    return lines, mod - pub


def pair_checks(pairs: list[dict[str, Any]], theta: Arr, base: QualityParams) -> list[str]:
    """Held-out H ablation pairs: published vs predicted ratio of loss ratios."""
    qp = _params(theta, base)
    out = []
    for pr in pairs:
        pub = math.log(pr["ppl_ref"] * pr["ppl_ratio"]) / math.log(pr["ppl_ref"])
        lr = quality.log_loss_ratio(
            pr["replicas"], [pr["inner_steps_ref"], pr["inner_steps"]], pr["params"], pr["fragments"], qp
        )
        mod = float(np.exp(lr[1] - lr[0]))
        out.append(
            f"{pr['set']:<22} M={pr['replicas']} H {pr['inner_steps_ref']}->{pr['inner_steps']}: "
            f"published {pub:.4f} predicted {mod:.4f} error {mod - pub:+.4f}"
        )
    return out


def to_toml(
    theta: Arr,
    cov: Arr,
    chi2: float,
    dof: int,
    fit_resid: Arr,
    holdout: dict[str, float],
    loo: float,
    tail: list[str] | None = None,
) -> str:
    """The data file's text (fitted values, covariance, summary)."""
    n = len(FITTED_FIELDS)

    def arr(xs: Any) -> str:
        return "[" + ", ".join(repr(float(x)) for x in xs) + "]"

    lines = [
        "# Written by `python -m dispersal.model.analyses.quality_fit` from quality_points.toml: do not edit by hand.",
        "# values / covariance: the fitted fields of dispersal.model.kernel.quality.QualityParams (names, in order);",
        "# covariance = s^2 (J^T W J)^-1, s^2 = reduced chi-square; kappa_streaming is the Streaming DiLoCo",
        "# nuisance term (reported, not used by g; its covariance rows are left out here).",
        f"names = [{', '.join(repr(f).replace(chr(39), chr(34)) for f in FITTED_FIELDS)}]",
        f"values = {arr(theta[:n])}",
        "covariance = [",
        *[f"  {arr(row)}," for row in cov[:n, :n]],
        "]",
        f"kappa_streaming = {float(theta[n])!r}",
        f"kappa_streaming_sd = {math.sqrt(float(cov[n, n]))!r}",
        f"chi_square = {chi2!r}",
        f"degrees_of_freedom = {dof}",
        f"max_abs_residual_ratio_fit = {float(np.max(np.abs(fit_resid))):.6f}",
        f"leave_out_2p4b_max_abs_error_ratio = {loo:.6f}",
        "",
        "[holdout_max_abs_error_ratio]",
        *[f"{k} = {v:.6f}" for k, v in holdout.items()],
        "",
        *(tail or []),
    ]
    return "\n".join(lines)


def tail_toml(
    theta2: Arr, cov2: Arr, chi2: float, dof: int, fit_err: Arr, hold_err: dict[str, float]
) -> list[str]:
    """The [tail] table: stage-2 values, covariance and residual summary."""

    def arr(xs: Any) -> str:
        return "[" + ", ".join(repr(float(x)) for x in xs) + "]"

    return [
        "[tail]",
        "# stage 2 (issue 21): fitted on the large_m rows with role = fit, stage 1 held at `values`",
        f"names = [{', '.join(chr(34) + f + chr(34) for f in TAIL_FIT_NAMES)}]",
        f"values = {arr(theta2)}",
        "covariance = [",
        *[f"  {arr(row)}," for row in cov2],
        "]",
        f"chi_square = {chi2!r}",
        f"degrees_of_freedom = {dof}",
        f"max_abs_residual_ratio_fit = {float(np.max(np.abs(fit_err))):.6f}",
        *[f"holdout_max_abs_error_ratio_{k} = {v:.6f}" for k, v in hold_err.items()],
        "",
    ]


# --- stage 3: the testbed's measured M-sweep (issue 21; data from benchmarks/bench_replicas.py) ------

TESTBED_FILE = "testbed_msweep.toml"
TESTBED_FIT_MAX_REPLICAS = 16.0
"""The form is fitted to the testbed's curve on M <= 16 (as on the published evidence) and the larger
M (32-256) are held back."""


def testbed_form(theta: Arr, m: Arr, p: float, s: float, m_x: float) -> Arr:
    """ln g(M) of the model's form with the testbed's own constants theta = (ln g(1), ln a, ln lambda):
    ln g = ln g(1) - (a / s) S(min(M, M_x)) - ln((max(M, M_x) + K) / (M_x + K)), K = lambda M_x / e,
    e = a M_x^p / s (stage 1's Box-Cox exponent p; no size or H terms: one preset, one H)."""
    a, lam = math.exp(float(theta[1])), math.exp(float(theta[2]))
    k = lam * m_x / (a * m_x**p / s)
    s_in = (np.minimum(m, m_x) ** p - 1.0) / p
    out = theta[0] - a * s_in / s - np.log((np.maximum(m, m_x) + k) / (m_x + k))
    return np.asarray(out, dtype=np.float64)


#: Bounds on the testbed fit's (ln g(1), ln a, ln lambda): wide enough for any measured curve, finite so
#: an unidentified tail (no penalty beyond M_x) cannot overflow.
TESTBED_THETA_LO = np.array([-50.0, -30.0, -30.0])
TESTBED_THETA_HI = np.array([5.0, 10.0, 30.0])


def fit_testbed(rows: list[dict[str, Any]], qp: QualityParams) -> list[dict[str, Any]]:
    """Per (preset, H, merge) with >= 3 points at M <= 16 (one of them > M_x): the form's three
    constants fitted to ln g_mean (weights g_mean / max(g_sd, 0.01 g_mean)), and every point's
    prediction; role "fit" (M <= 16) or "holdout" (M > 16). The M = 1 run (nothing to merge) is
    shared by every merge rule of its preset and H."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in rows:
        # DiLoCo rows only (the sweep also ships DP at the same global batch, algorithm = "dp")
        if r.get("g_mean", 0.0) > 0 and r.get("algorithm", "diloco") == "diloco":
            groups.setdefault((str(r["preset"]), int(r["inner_steps"]), str(r["merge"])), []).append(r)
    # one replica has nothing to merge: its run serves every merge rule of the same preset and H
    single: dict[tuple[str, int], dict[str, Any]] = {}
    for key, rs in groups.items():
        for r in rs:
            if float(r["replicas"]) == 1:
                single.setdefault((key[0], key[1]), r)
    for key, rs in groups.items():
        if not any(float(r["replicas"]) == 1 for r in rs) and (key[0], key[1]) in single:
            rs.append(single[(key[0], key[1])])
    out: list[dict[str, Any]] = []
    p, s, mx = qp.p, qp.loss_compute_slope, qp.fit_replicas_max
    for (preset, h, merge), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: float(r["replicas"]))
        m = np.array([float(r["replicas"]) for r in rs])
        g = np.array([float(r["g_mean"]) for r in rs])
        sd = np.maximum(np.array([float(r.get("g_sd", 0.0)) for r in rs]), 0.01 * g) / g
        fit = m <= TESTBED_FIT_MAX_REPLICAS
        if fit.sum() < 3 or not np.any(m[fit] > mx):
            continue
        theta = np.array([math.log(g[fit][0]), math.log(0.01), math.log(0.1)])

        def resid(th: Arr, fit: npt.NDArray[np.bool_] = fit, m: Arr = m, g: Arr = g, sd: Arr = sd) -> Arr:
            return np.asarray(
                (np.log(g[fit]) - testbed_form(th, m[fit], p, s, mx)) / sd[fit], dtype=np.float64
            )

        chi2 = float(resid(theta) @ resid(theta))
        for _ in range(200):
            j = np.stack(
                [(resid(theta + e * 1e-6) - resid(theta - e * 1e-6)) / 2e-6 for e in np.eye(3)], axis=1
            )
            step = np.linalg.lstsq(j, -resid(theta), rcond=None)[0]
            lam_ = 1.0
            while lam_ > 1e-6:
                # ln a and ln lambda kept finite: a group whose curve shows no tail penalty sends
                # lambda (K) to infinity; at the bound the form is flat beyond M_x, which is that answer.
                trial = np.clip(theta + lam_ * step, TESTBED_THETA_LO, TESTBED_THETA_HI)
                c2 = float(resid(trial) @ resid(trial))
                if c2 <= chi2:
                    break
                lam_ /= 2.0
            else:
                break
            done = chi2 - c2 < 1e-12 * max(chi2, 1.0)
            theta, chi2 = trial, c2
            if done:
                break
        pred = np.exp(testbed_form(theta, m, p, s, mx))
        for r, mm, gg, pp in zip(rs, m, g, pred, strict=True):
            out.append(
                {
                    "preset": preset,
                    "inner_steps": h,
                    "merge": merge,
                    "replicas": int(mm),
                    "role": "fit" if mm <= TESTBED_FIT_MAX_REPLICAS else "holdout",
                    "g_measured": float(gg),
                    "g_sd": float(r.get("g_sd", 0.0)),
                    "g_model": float(pp),
                    "tail_scale": math.exp(float(theta[2])),
                    "amplitude": math.exp(float(theta[1])),
                }
            )
    return out


def load_testbed() -> list[dict[str, Any]]:
    """The [[sweep]] rows of the testbed's M-sweep data file, or [] when it is not (yet) shipped."""
    f = resources.files("dispersal.data").joinpath(TESTBED_FILE)
    if not f.is_file():
        return []
    rows = tomllib.loads(f.read_text(encoding="utf-8")).get("sweep", [])
    return [dict(r) for r in rows]


def _run_testbed(qp: QualityParams) -> list[str]:
    """Stage 3: print the testbed fit (fit and held-back rows) and return its [testbed] table lines."""
    rows = load_testbed()
    res = fit_testbed(rows, qp)
    if not res:
        print("\nstage 3 (testbed M-sweep): no data file " + TESTBED_FILE + " with M > 8 yet")
        return []
    print("\nstage 3 (testbed M-sweep; the form fitted on M <= 16, larger M held back):")
    for r in res:
        print(
            f"  {r['preset']:<6} H={r['inner_steps']:<4} {r['merge']:<16} M={r['replicas']:<4} {r['role']:<7} "
            f"g measured {r['g_measured']:.3f} +- {r['g_sd']:.3f} model {r['g_model']:.3f} "
            f"(lambda {r['tail_scale']:.3g})"
        )
    hold = [abs(r["g_model"] - r["g_measured"]) for r in res if r["role"] == "holdout"]
    fit_err = [abs(r["g_model"] - r["g_measured"]) for r in res if r["role"] == "fit"]
    lines = ["[testbed]", "# stage 3: the form fitted per (preset, H, merge) to the testbed's g on M <= 16"]
    lines.append(f"max_abs_error_g_fit = {max(fit_err):.6f}")
    if hold:
        lines.append(f"max_abs_error_g_holdout = {max(hold):.6f}")
    lines.append("")
    return lines


def _run_tail(data: dict[str, Any], qp: QualityParams) -> tuple[Arr, list[str]]:
    """Stage 2: fit the large-M rows marked "fit", print every residual (fit and held back)."""
    rows = data.get("large_m", [])
    fit_rows = [r for r in rows if r["role"] == "fit"]
    obs = tail_observations(fit_rows)
    theta2, cov2, chi2, dof = fit_tail(obs, qp)
    sd = np.sqrt(np.diag(cov2))
    print(
        f"\nstage 2 (beyond M = 8, inner optimizer): {obs.y.size} observations, chi2 {chi2:.1f} on {dof} dof"
    )
    for name, v, s_ in zip(TAIL_FIT_NAMES, theta2, sd, strict=True):
        print(f"  {name:<20} {v:+.6g}  sd {s_:.3g}")
    lines, fit_err = tail_table(obs, theta2, qp)
    print("fitted:")
    print("\n".join(lines))
    hold_err: dict[str, float] = {}
    hold = [r for r in rows if r["role"] == "holdout"]
    if hold:
        lines, err = tail_table(tail_observations(hold), theta2, qp)
        print("held back (never fitted):")
        print("\n".join(lines))
        for set_name in dict.fromkeys(r["set"] for r in hold):
            hold_err[set_name] = float(np.max(np.abs(err)))
    return theta2, tail_toml(theta2, cov2, chi2, dof, fit_err, hold_err)


def run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dispersal.model.analyses.quality_fit", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="data file to write (default: the package's quality_fit.toml)"
    )
    ap.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if the packaged file's values differ"
    )
    args = ap.parse_args(argv)
    base = QualityParams()
    data = load_points()
    rows = data["point"]
    fit_rows = [r for r in rows if r["role"] == "fit"]
    theta, cov, chi2, dof = fit(columns(fit_rows), base)
    sd = np.sqrt(np.diag(cov))
    print(f"fit: {len(fit_rows)} points, chi2 {chi2:.1f} on {dof} dof (reduced {chi2 / dof:.2f})")
    for name, v, s in zip(ALL, theta, sd, strict=True):
        print(f"  {name:<16} {v:+.6g}  sd {s:.3g}")
    print("\nresiduals on fitted points (ratio units; Streaming rows include the kappa term):")
    lines, fit_res = residual_table(fit_rows, theta, base, streaming_term=True)
    print("\n".join(lines))
    charles = np.array([r["set"] == "charles2025_table4" for r in fit_rows])
    print(
        f"max |residual| Charles Table 4: {np.max(np.abs(fit_res[charles])):.4f}; "
        f"Streaming Tables 5-6: {np.max(np.abs(fit_res[~charles])):.4f}"
    )

    print("\nheld-out points (never fitted; g's own model, no Streaming nuisance term):")
    holdout: dict[str, float] = {}
    hold = [r for r in rows if r["role"] == "holdout"]
    for set_name in dict.fromkeys(r["set"] for r in hold):
        sel = [r for r in hold if r["set"] == set_name]
        lines, err = residual_table(sel, theta, base, streaming_term=False)
        print("\n".join(lines))
        holdout[set_name] = float(np.max(np.abs(err)))
    for line in pair_checks(data.get("pair", []), theta, base):
        print(line)
    for pr in data.get("pair", []):
        pub = math.log(pr["ppl_ref"] * pr["ppl_ratio"]) / math.log(pr["ppl_ref"])
        lr = quality.log_loss_ratio(
            pr["replicas"],
            [pr["inner_steps_ref"], pr["inner_steps"]],
            pr["params"],
            pr["fragments"],
            _params(theta, base),
        )
        holdout[pr["set"]] = abs(float(np.exp(lr[1] - lr[0])) - pub)

    loo_rows = [r for r in fit_rows if not (r["set"] == "charles2025_table4" and float(r["params"]) > 2.0e9)]
    base_loo = base.replace(fit_params_max=1.3e9)  # the M = 1 offset is held at the smaller fit's edge
    theta_loo, *_ = fit(columns(loo_rows), base_loo)
    held = [r for r in fit_rows if r["set"] == "charles2025_table4" and float(r["params"]) > 2.0e9]
    lines, err = residual_table(held, theta_loo, base_loo, streaming_term=False)
    loo = float(np.max(np.abs(err)))
    print("\nleave-2.4B-out (fit without Charles et al.'s 2.4B row, predict it):")
    print("\n".join(lines))

    print("\nQualityParams defaults for these values:")
    for name, v in zip(FITTED_FIELDS, theta[: len(FITTED_FIELDS)], strict=True):
        print(f"    {name}: float = {float(v)!r}")
    theta2, tail_lines = _run_tail(data, _params(theta, base))
    tail_lines += _run_testbed(_params(theta, base))
    for name, v in zip(TAIL_FIELDS, theta2, strict=True):
        print(f"    {name}: float = {float(math.exp(v) if name == 'tail_scale' else v)!r}")
    text = to_toml(theta, cov, chi2, dof, fit_res, holdout, loo, tail_lines)
    if args.check:
        current = quality_draws.load_fit()
        same = np.allclose(
            np.asarray(current["values"], dtype=float), theta[: len(FITTED_FIELDS)], rtol=1e-6, atol=1e-12
        ) and np.allclose(np.asarray(current["tail"]["values"], dtype=float), theta2, rtol=1e-6, atol=1e-12)
        print(
            "\ncheck:", "packaged quality_fit.toml matches" if same else "packaged quality_fit.toml DIFFERS"
        )
        return 0 if same else 1
    out = args.out or Path(str(resources.files("dispersal.data").joinpath(quality_draws.FIT_FILE)))
    atomic_write_text(out, text)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run())
