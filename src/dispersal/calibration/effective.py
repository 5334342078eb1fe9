"""Effective compute: map a run's validation loss to the DDP compute that reaches it (pure NumPy).

A DDP scaling curve L(C) = E + A C^-a is fitted to DDP runs of several lengths (same model, same
global batch, each with its own full learning-rate schedule). A DiLoCo run that spent C_spent and
reached loss L is worth C_DDP(L) = (A / (L - E))^(1/a) of DDP compute; eta = C_DDP(L) / C_spent.
If the fit fails (fewer than 3 runs, a non-physical fit, or an rms residual above ``max_rms`` =
0.003 nats, about the evaluation noise) a monotone log-log interpolation of the measured points is
used instead (exact at the reference runs), extrapolated linearly in log-log at the ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.errors import InputError

Arr = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ScalingCurve:
    """L(C) = E + A C^-a (kind 'power'), or a monotone log-log interpolation (kind 'interp')."""

    kind: str
    e: float
    a_coeff: float
    a_exp: float
    c_points: tuple[float, ...] = ()
    l_points: tuple[float, ...] = ()
    rms: float = 0.0

    def loss(self, c: npt.ArrayLike) -> Arr:
        cc = np.asarray(c, dtype=np.float64)
        if self.kind == "power":
            return np.asarray(self.e + self.a_coeff * cc ** (-self.a_exp), dtype=np.float64)
        lc, ll = np.log(np.asarray(self.c_points)), np.log(np.asarray(self.l_points))
        return np.asarray(np.exp(_interp_extrap(np.log(cc), lc, ll)), dtype=np.float64)

    def compute_for_loss(self, loss: npt.ArrayLike) -> Arr:
        """DDP compute that reaches ``loss`` (inf at or below the asymptote E)."""
        ll = np.asarray(loss, dtype=np.float64)
        if self.kind == "power":
            gap = ll - self.e
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.where(
                    gap > 0, (self.a_coeff / np.where(gap > 0, gap, 1.0)) ** (1.0 / self.a_exp), np.inf
                )
            return np.asarray(out, dtype=np.float64)
        lc, lo = np.log(np.asarray(self.c_points)), np.log(np.asarray(self.l_points))
        # loss decreases with compute: interpolate log C against log L (sorted ascending in L)
        order = np.argsort(lo)
        return np.asarray(np.exp(_interp_extrap(np.log(ll), lo[order], lc[order])), dtype=np.float64)


def _interp_extrap(x: Arr, xs: Arr, ys: Arr) -> Arr:
    """Linear interpolation, linear extrapolation from the end segments."""
    y = np.interp(x, xs, ys)
    if len(xs) >= 2:
        lo_slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
        hi_slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        y = np.where(x < xs[0], ys[0] + lo_slope * (x - xs[0]), y)
        y = np.where(x > xs[-1], ys[-1] + hi_slope * (x - xs[-1]), y)
    return np.asarray(y, dtype=np.float64)


def _monotone(c: Arr, loss: Arr) -> tuple[Arr, Arr]:
    """Sort by compute and enforce a strictly decreasing loss (pool-adjacent-violators, then a nudge)."""
    order = np.argsort(c)
    cs, ls = c[order], loss[order].copy()
    # PAV for a non-increasing sequence
    blocks: list[list[float]] = []
    for v in ls:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-1][0] > blocks[-2][0]:
            v2, w2 = blocks.pop()
            v1, w1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2])
    out = np.concatenate([np.full(int(w), v) for v, w in blocks])
    for i in range(1, len(out)):  # strictly decreasing so the inverse exists
        out[i] = min(out[i], out[i - 1] * (1 - 1e-6))
    return cs, out


def fit_scaling_curve(compute: npt.ArrayLike, loss: npt.ArrayLike, max_rms: float = 0.003) -> ScalingCurve:
    """Fit L = E + A C^-a by grid search over (a, E) with A by least squares (no SciPy).

    ``compute`` may hold repeats (several seeds). Falls back to monotone interpolation when there are
    fewer than 3 distinct compute values or the best fit is not a decreasing curve.
    """
    c = np.asarray(compute, dtype=np.float64)
    lo = np.asarray(loss, dtype=np.float64)
    if c.shape != lo.shape or c.size < 2:
        raise InputError("ddp_reference", f"need >= 2 DDP runs of different lengths, got {c.size}")
    if not (np.all(np.isfinite(c)) and np.all(c > 0) and np.all(np.isfinite(lo))):
        raise InputError("ddp_reference", "compute must be > 0 and losses finite")
    uniq = np.unique(c)
    # mean loss per distinct compute, for the interpolation fallback
    lmean = np.array([lo[c == u].mean() for u in uniq])
    cs, ls = _monotone(uniq, lmean)
    fallback = ScalingCurve("interp", float("nan"), float("nan"), float("nan"), tuple(cs), tuple(ls))
    if uniq.size < 3:
        return fallback
    scale = float(np.exp(np.mean(np.log(c))))
    x = c / scale
    best: tuple[float, float, float, float] | None = None
    lmin = float(lo.min())

    def search(a_grid: Arr, e_grid: Arr) -> tuple[float, float, float, float] | None:
        out = None
        xa = x[None, :] ** (-a_grid[:, None])  # (na, n)
        for e in e_grid:
            y = lo - e  # (n,)
            num = (xa * y[None, :]).sum(1)
            den = (xa * xa).sum(1)
            a_c = num / den
            res = ((y[None, :] - a_c[:, None] * xa) ** 2).sum(1)
            res = np.where(a_c > 0, res, np.inf)
            i = int(np.argmin(res))
            if out is None or res[i] < out[0]:
                out = (float(res[i]), float(e), float(a_c[i]), float(a_grid[i]))
        return out

    a_grid = np.geomspace(0.01, 3.0, 200)
    e_grid = np.linspace(0.0, lmin - 1e-4, 200)
    best = search(a_grid, e_grid)
    de, fa = (lmin - 1e-4) / 199 * 2, 1.1
    for _ in range(4):  # zoom in around the best point
        if best is None or not np.isfinite(best[0]):
            break
        _, e0, _, a0 = best
        best = search(
            np.geomspace(a0 / fa, a0 * fa, 60), np.linspace(max(0.0, e0 - de), min(lmin - 1e-6, e0 + de), 60)
        )
        de, fa = de / 10, fa**0.1
    if best is None or not np.isfinite(best[0]):
        return fallback
    res, e, a_c, a_exp = best
    a_coeff = a_c * scale**a_exp  # A C^-a = a_c (C/scale)^-a
    rms = float(np.sqrt(res / c.size))
    # The power law is used only when it passes through the measured runs within evaluation noise;
    # otherwise (short runs with warmup are not on one power law) the monotone interpolation, which
    # is exact at the reference runs, converts losses, and the power-law fit is kept for the record.
    kind = "power" if rms <= max_rms else "interp"
    return ScalingCurve(kind, e, a_coeff, a_exp, tuple(cs), tuple(ls), rms)


def efficiency(curve: ScalingCurve, loss: npt.ArrayLike, compute_spent: npt.ArrayLike) -> Arr:
    """eta = C_DDP(loss) / C_spent."""
    return np.asarray(
        curve.compute_for_loss(loss) / np.asarray(compute_spent, dtype=np.float64), dtype=np.float64
    )
