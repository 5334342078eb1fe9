"""The tail grid's arithmetic: g per cell, the critical-batch tail fitted on a named part, held-back errors.

The model's tail (docs/quality.md, the contract of issues 31/32) beyond the anchor M_x:

    g(M) = g(M_x) (M_x + K) / (M + K),
    K = K_ref (D / D_ref)^a_D (b / b_ref)^(-a_B) (H / H_ref)^(-a_H)

with D the run's tokens, b the per-replica batch and H the inner steps per round. In the testbed g
of a cell is measured against its own baseline law (plain AdamW at batch b, the same seed, trained
to several budgets: replicas_sweep.quality_factor), and the fit uses the ratio
``g(M) / g(M_x)`` of the same (seed, D, b, H), so the baseline's own level cancels. The fit is
least squares in ln of that ratio averaged over seeds, on the cells of the named fit part only;
the confidence intervals are a bootstrap over seeds (seeds drawn with replacement, the fit
repeated, 2.5-97.5 percentiles).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dispersal.testbed.replicas_sweep import BaselineLaw, mean_sd, quality_factor

EXPONENT_BOUND = 3.0
"""Largest |exponent| the fit may return (the literature's values are 0-1; see fit_tail)."""
LN_K_BOUND = 12.0
"""Largest |ln K_ref| the fit may return (K_ref in 6e-6 ... 1.6e5 replicas)."""

Cell = tuple[int, int, int, int]
"""(tokens D, per-replica batch b, inner steps H, replicas M) of a DiLoCo cell."""


def baseline_laws(records: Iterable[dict[str, Any]]) -> dict[tuple[int, int], BaselineLaw]:
    """The baseline law of each (seed, batch): plain AdamW (dp, M = 1) at batch b, its budgets."""
    pts: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for r in records:
        if r["algorithm"] == "dp" and r["replicas"] == 1 and r.get("val_loss") is not None:
            pts.setdefault((r["seed"], r["batch"]), []).append((r["tokens"], float(r["val_loss"])))
    laws = {}
    for k, v in pts.items():
        v = sorted(set(v))
        if len(v) >= 2:
            laws[k] = BaselineLaw(tokens=tuple(float(t) for t, _ in v), losses=tuple(x for _, x in v))
    return laws


def cell_g(records: Iterable[dict[str, Any]]) -> dict[tuple[int, Cell], tuple[float, bool]]:
    """(seed, cell) -> (g against the cell's own baseline law, inside the law's measured range).
    Diverged runs get g = 0 (no baseline run reaches a non-finite loss)."""
    recs = list(records)
    laws = baseline_laws(recs)
    out: dict[tuple[int, Cell], tuple[float, bool]] = {}
    for r in recs:
        if r["algorithm"] != "diloco" or (r["seed"], r["batch"]) not in laws:
            continue
        cell = (r["tokens"], r["batch"], r["inner_steps"], r["replicas"])
        loss = r.get("val_loss")
        if loss is None or r.get("diverged"):
            out[(r["seed"], cell)] = (0.0, False)
            continue
        out[(r["seed"], cell)] = quality_factor(laws[(r["seed"], r["batch"])], float(loss), r["tokens"])
    return out


@dataclass(frozen=True, kw_only=True)
class TailPoint:
    """ln(g(M) / g(M_x)) of one (D, b, H, M) cell per seed."""

    tokens: int
    batch: int
    inner_steps: int
    replicas: int
    ln_ratio: dict[int, float] = field(default_factory=dict)
    """seed -> ln(g(M) / g(M_x)) of that seed's pair."""

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.ln_ratio.values())))


def tail_points(g: dict[tuple[int, Cell], tuple[float, bool]], m_x: int) -> list[TailPoint]:
    """The ratio g(M) / g(M_x) for every M > m_x whose anchor (same seed, D, b, H, M = m_x) exists."""
    by_cell: dict[Cell, dict[int, float]] = {}
    for (seed, (d, b, h, m)), (gv, _) in g.items():
        if m <= m_x:
            continue
        anchor = g.get((seed, (d, b, h, m_x)))
        if anchor is None or anchor[0] <= 0 or gv <= 0:
            continue  # a diverged run or anchor has no finite ratio
        by_cell.setdefault((d, b, h, m), {})[seed] = math.log(gv / anchor[0])
    return [
        TailPoint(tokens=d, batch=b, inner_steps=h, replicas=m, ln_ratio=v)
        for (d, b, h, m), v in sorted(by_cell.items())
    ]


@dataclass(frozen=True, kw_only=True)
class TailFit:
    """The fitted tail (see the module docstring); exponents fixed to 0 where the fit part has one value."""

    m_x: int
    k_ref: float
    """K at (D_ref, b_ref, H_ref), replicas."""
    a_tokens: float
    a_batch: float
    a_h: float
    d_ref: float
    b_ref: float
    h_ref: float
    rms_ln: float
    """Root mean square residual of ln(g(M) / g(M_x)) over the fit cells."""
    n_cells: int
    free: tuple[str, ...]

    @property
    def at_bound(self) -> tuple[str, ...]:
        """The fitted parameters stuck at their bounds (not identified by the cells fitted)."""
        out = [f for f in self.free if abs(getattr(self, f)) >= EXPONENT_BOUND - 1e-6]
        if abs(math.log(self.k_ref)) >= LN_K_BOUND - 1e-6:
            out.append("k_ref")
        return tuple(out)

    def k(self, tokens: float, batch: float, inner_steps: float) -> float:
        """K(D, b, H), replicas."""
        return float(
            self.k_ref
            * (tokens / self.d_ref) ** self.a_tokens
            * (batch / self.b_ref) ** (-self.a_batch)
            * (inner_steps / self.h_ref) ** (-self.a_h)
        )

    def ratio(self, tokens: float, batch: float, inner_steps: float, replicas: float) -> float:
        """g(M) / g(M_x) = (M_x + K) / (M + K)."""
        k = self.k(tokens, batch, inner_steps)
        return (self.m_x + k) / (replicas + k)


def _geo(vals: Iterable[float]) -> float:
    v = sorted(set(vals))
    return float(math.exp(sum(math.log(x) for x in v) / len(v)))


def fit_tail(
    points: Sequence[TailPoint],
    m_x: int,
    *,
    seeds: Sequence[int] | None = None,
    refs: tuple[float, float, float] | None = None,
) -> TailFit:
    """Least squares of ln(g(M) / g(M_x)) = ln((M_x + K) / (M + K)) over ``points`` (the seed mean of
    each, or of the multiset ``seeds`` when given: the bootstrap's resample). ``refs`` = (D_ref,
    b_ref, H_ref); default: the geometric means of the fitted values (exponents least correlated
    with ln K_ref). An axis with one value in ``points`` gets exponent 0 (not identifiable)."""
    from scipy.optimize import least_squares

    rows = []
    for p in points:
        vals = (
            [p.ln_ratio[s] for s in seeds if s in p.ln_ratio]
            if seeds is not None
            else list(p.ln_ratio.values())
        )
        if vals:
            rows.append((p.tokens, p.batch, p.inner_steps, p.replicas, float(np.mean(vals))))
    if len(rows) < 2:
        raise ValueError(f"tail fit: need at least 2 cells with M > M_x = {m_x}, got {len(rows)}")
    arr = np.array(rows, dtype=float)
    d, b, h, m, y = arr.T
    d_ref, b_ref, h_ref = refs if refs is not None else (_geo(d), _geo(b), _geo(h))
    cols = {"a_tokens": np.log(d / d_ref), "a_batch": -np.log(b / b_ref), "a_h": -np.log(h / h_ref)}
    free = tuple(k for k, v in cols.items() if len(set(np.round(v, 12))) > 1)
    while free and len(rows) < len(free) + 3:  # keep 2 degrees of freedom: drop a_h, a_batch, a_tokens
        free = free[:-1]

    def model(theta: np.ndarray) -> np.ndarray:
        lnk = theta[0] + sum(theta[1 + i] * cols[f] for i, f in enumerate(free))
        k = np.exp(np.clip(lnk, -40, 40))
        return np.asarray(np.log((m_x + k) / (m + k)), dtype=float)

    x0 = np.array([math.log(max(m_x, 1.0) * 2), *([0.5] * len(free))])
    # Bounds: an exponent at +-EXPONENT_BOUND (or ln K at its bound) marks a part of the grid that
    # cannot identify it (K -> 0 makes every exponent a free direction), not a measurement.
    lo = np.array([-LN_K_BOUND, *([-EXPONENT_BOUND] * len(free))])
    sol = least_squares(lambda t: model(t) - y, x0, bounds=(lo, -lo), method="trf")
    theta = sol.x
    expo: dict[str, float] = dict.fromkeys(cols, 0.0)
    for i, f in enumerate(free):
        expo[f] = float(theta[1 + i])
    res = model(theta) - y
    return TailFit(
        m_x=m_x,
        k_ref=float(math.exp(theta[0])),
        d_ref=d_ref,
        b_ref=b_ref,
        h_ref=h_ref,
        rms_ln=float(np.sqrt(np.mean(res**2))),
        n_cells=len(rows),
        free=free,
        **expo,
    )


def bootstrap(
    points: Sequence[TailPoint],
    m_x: int,
    seeds: Sequence[int],
    n_boot: int,
    rng_seed: int = 0,
    *,
    by_cells: bool = False,
) -> dict[str, tuple[float, float]]:
    """2.5-97.5 % intervals of (a_tokens, a_batch, a_h, k_ref), the fit repeated at the same
    references on resamples: of the seeds (default; with 3 seeds only 10 distinct resamples, so the
    interval says how far the seeds disagree) or, ``by_cells``, of the cells (captures how far the
    form misses the cells, which the seed spread does not)."""
    full = fit_tail(points, m_x)
    refs = (full.d_ref, full.b_ref, full.h_ref)
    rng = np.random.default_rng(rng_seed)
    draws: dict[str, list[float]] = {"a_tokens": [], "a_batch": [], "a_h": [], "k_ref": []}
    for _ in range(n_boot):
        try:
            if by_cells:
                idx = rng.integers(0, len(points), size=len(points))
                f = fit_tail([points[int(i)] for i in idx], m_x, refs=refs)
            else:
                pick = [int(s) for s in rng.choice(list(seeds), size=len(seeds), replace=True)]
                f = fit_tail(points, m_x, seeds=pick, refs=refs)
        except ValueError:
            continue
        if f.free != full.free:  # a resample missing cells (an unfinished seed) fits another model
            continue
        for k in draws:
            draws[k].append(getattr(f, k))
    return {
        k: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) if v else (math.nan, math.nan)
        for k, v in draws.items()
    }


HOLDOUTS = ("large M", "largest budget", "largest batch", "smallest batch")
"""The named held-back parts: each is one fit on every other tail cell, judged on that part's cells."""


@dataclass(frozen=True, kw_only=True)
class Split:
    """Where the held-back parts start: M > m_fit_max, D = the largest budget, b = the largest or the
    smallest per-replica batch of the grid."""

    m_fit_max: int
    d_max: int
    b_max: int
    b_min: int

    def held(self, p: TailPoint, part: str) -> bool:
        """Whether ``p`` belongs to the held-back part ``part`` (one of HOLDOUTS)."""
        return {
            "large M": p.replicas > self.m_fit_max,
            "largest budget": p.tokens >= self.d_max,
            "largest batch": p.batch >= self.b_max,
            "smallest batch": p.batch <= self.b_min,
        }[part]


def held_back_errors(
    fit: TailFit, points: Sequence[TailPoint], split: Split, part: str
) -> list[dict[str, Any]]:
    """Per cell of the held-back part: measured g(M)/g(M_x) (seed mean and sd of ln), predicted, error in ln."""
    out = []
    for p in points:
        if not split.held(p, part):
            continue
        mu, sd = mean_sd(list(p.ln_ratio.values()))
        pred = fit.ratio(p.tokens, p.batch, p.inner_steps, p.replicas)
        out.append(
            {
                "part": part,
                "tokens": p.tokens,
                "batch": p.batch,
                "inner_steps": p.inner_steps,
                "replicas": p.replicas,
                "seeds": len(p.ln_ratio),
                "measured_ratio": math.exp(mu),
                "ln_sd": sd,
                "predicted_ratio": pred,
                "error_ln": math.log(pred) - mu,
            }
        )
    return out


def holdout_fits(
    points: Sequence[TailPoint], m_x: int, split: Split
) -> list[tuple[str, TailFit | None, list[dict[str, Any]]]]:
    """(part, the fit on every other cell, per-cell errors on the part) for each of HOLDOUTS; the fit
    uses the full fit's references so its exponents compare. None where too few cells remain."""
    full = fit_tail(points, m_x)
    refs = (full.d_ref, full.b_ref, full.h_ref)
    out: list[tuple[str, TailFit | None, list[dict[str, Any]]]] = []
    for part in HOLDOUTS:
        rest = [p for p in points if not split.held(p, part)]
        try:
            f = fit_tail(rest, m_x, refs=refs)
        except ValueError:
            out.append((part, None, []))
            continue
        out.append((part, f, held_back_errors(f, points, split, part)))
    return out


def per_group_k(points: Sequence[TailPoint], m_x: int) -> list[dict[str, Any]]:
    """K fitted freely per (D, b, H) group (one parameter, the seed-mean ratios): the raw dependence."""
    from scipy.optimize import minimize_scalar

    groups: dict[tuple[int, int, int], list[TailPoint]] = {}
    for p in points:
        groups.setdefault((p.tokens, p.batch, p.inner_steps), []).append(p)
    out = []
    for (d, b, h), ps in sorted(groups.items()):
        m = np.array([p.replicas for p in ps], dtype=float)
        y = np.array([p.mean for p in ps])

        def sse(lnk: float, m: np.ndarray = m, y: np.ndarray = y) -> float:
            k = math.exp(lnk)
            return float(np.sum((np.log((m_x + k) / (m + k)) - y) ** 2))

        r = minimize_scalar(sse, bounds=(-8.0, 12.0), method="bounded")
        out.append({"tokens": d, "batch": b, "inner_steps": h, "k": math.exp(r.x), "cells": len(ps)})
    return out


def synthetic_points(
    truth: TailFit,
    cells: Iterable[Cell],
    seeds: Sequence[int],
    noise_ln: float,
    rng_seed: int = 0,
    transform: Callable[[float], float] | None = None,
) -> list[TailPoint]:
    """Points drawn from ``truth`` with Gaussian noise of sd ``noise_ln`` on each seed's ln ratio
    (for the fit's tests: known exponents in, recovered exponents out)."""
    rng = np.random.default_rng(rng_seed)
    out = []
    for d, b, h, m in cells:
        base = math.log(truth.ratio(d, b, h, m))
        if transform is not None:
            base = transform(base)
        out.append(
            TailPoint(
                tokens=d,
                batch=b,
                inner_steps=h,
                replicas=m,
                ln_ratio={s: base + float(rng.normal(0.0, noise_ln)) for s in seeds},
            )
        )
    return out
