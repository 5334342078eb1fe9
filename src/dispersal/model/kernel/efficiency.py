"""Efficiency factors and the straggler factor (spec/model.md sections 3-4). Vectorised.

eta_H (heuristic), eta_comp (heuristic table), eta_act (heuristic table) and the straggler factor
f(n) (engineering estimate) are modelling choices with no published law: the calibration issue
replaces them with measurements. eta_rep and chi live in `quality_stage.py` (they need the Chinchilla fit).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.codes import STRAGGLER_CODES, Straggler
from dispersal.model.inputs.params import ModelParams

Arr = npt.NDArray[np.float64]


def straggler_factor(
    n: npt.ArrayLike,
    code: npt.ArrayLike,
    p: ModelParams,
    coeffs: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
) -> Arr:
    """f(n): the factor by which the slowest of n participants stretches a sync (>= 1; f(1) = 1).

    relay 1 + 0.02 log2 n; synchronous 1 + 0.05 log2 n; threshold 1; backup 1 + 0.3 x 0.05 log2 n.
    Source: Rahman 2026 sec. 3 (engineering estimates). `coeffs`: the (relay, synchronous)
    coefficients per element instead of `p`'s (a Monte Carlo draw's overrides).
    """
    k_relay: Arr | float = p.straggler_coeff_relay
    k_sync: Arr | float = p.straggler_coeff_sync
    if coeffs is not None:
        k_relay, k_sync = (np.asarray(v, dtype=np.float64) for v in coeffs)
    n_ = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    c = np.asarray(code)
    lg = np.log2(n_)
    k = uniform_code(c)
    if k is not None:
        # One model for every element (a scenario's, the planner's): compute only that one.
        if k == STRAGGLER_CODES[Straggler.RELAY]:
            one = 1.0 + k_relay * lg
        elif k == STRAGGLER_CODES[Straggler.SYNCHRONOUS]:
            one = 1.0 + k_sync * lg
        elif k == STRAGGLER_CODES[Straggler.THRESHOLD]:
            one = np.ones_like(lg)
        else:
            one = 1.0 + p.backup_worker_fraction * ((1.0 + k_sync * lg) - 1.0)
        return _shaped(np.asarray(one, dtype=np.float64), lg, c, np.asarray(k_relay), np.asarray(k_sync))
    relay = 1.0 + k_relay * lg
    sync = 1.0 + k_sync * lg
    backup = 1.0 + p.backup_worker_fraction * (sync - 1.0)
    out = np.select(
        [
            c == STRAGGLER_CODES[Straggler.RELAY],
            c == STRAGGLER_CODES[Straggler.SYNCHRONOUS],
            c == STRAGGLER_CODES[Straggler.THRESHOLD],
        ],
        [relay, sync, np.ones_like(lg)],
        default=backup,
    )
    return np.asarray(out, dtype=np.float64)


def uniform_code(*codes: npt.NDArray[np.generic]) -> float | None:
    """The common value when each code array holds one value everywhere (None otherwise, or for NaN)."""
    if len(codes) == 1 and codes[0].ndim == 0:
        v = float(codes[0])
        return None if v != v else v
    if len(codes) > 1:
        vals = [uniform_code(c) for c in codes]
        return None if any(v is None for v in vals) else 0.0
    c = codes[0]
    if c.size == 0:
        return None
    lo, hi = float(np.min(c)), float(np.max(c))
    return lo if lo == hi else None


def _shaped(out: Arr, *like: npt.NDArray[np.generic]) -> Arr:
    """`out` broadcast to the shape the full (select-based) computation would have had."""
    shape = np.broadcast_shapes(*(a.shape for a in like))
    return out if out.shape == shape else np.asarray(np.broadcast_to(out, shape), dtype=np.float64)


def eta_h(params: npt.ArrayLike, h: npt.ArrayLike, p: ModelParams) -> Arr:
    """eta_H = max(floor, 1 - alpha(P) log10 H), alpha(P) = 0.08 / (1 + log10(P / 1e9) / 5).

    Heuristic (Rahman 2026 sec. 4): e.g. alpha(91B) = 0.0575, alpha(250B) = 0.0541. H >= 1.
    """
    P = np.asarray(params, dtype=np.float64)
    alpha = p.eta_h_alpha0 / (1.0 + np.log10(P / 1e9) / p.eta_h_size_scale)
    raw = 1.0 - alpha * np.log10(np.maximum(np.asarray(h, dtype=np.float64), 1.0))
    return np.asarray(np.clip(raw, p.eta_h_floor, 1.0), dtype=np.float64)


def _interp_log(x: npt.ArrayLike, xs: Arr, ys: Arr) -> Arr:
    """Linear interpolation in log10 x, held constant outside the table."""
    lx = np.log10(np.maximum(np.asarray(x, dtype=np.float64), xs[0]))
    return np.asarray(np.interp(lx, np.log10(xs), ys), dtype=np.float64)


def eta_comp(
    compression_ratio: npt.ArrayLike, error_feedback: npt.ArrayLike, quality: npt.ArrayLike, p: ModelParams
) -> Arr:
    """eta_comp from the heuristic table (spec sec. 4), interpolated in log10 C_r, held above 500.

    Default: error feedback on, expected column (0.99 at 150x).
    """
    table = np.asarray(p.compression_table, dtype=np.float64)
    xs = table[:, 0]
    cr = np.asarray(compression_ratio, dtype=np.float64)
    ef = np.asarray(error_feedback).astype(bool)
    q = np.asarray(quality)
    if uniform_code(ef, q) is not None:
        # One column for every element: interpolate only it.
        qk = float(q.flat[0])
        col = (0 if qk == 0 else 1 if qk == 1 else 2) + (0 if bool(ef.flat[0]) else 3)
        # One ratio for every element too (a search's usual call): interpolate one number.
        one = cr if uniform_code(cr) is None else cr.reshape(-1)[:1].reshape(())
        return _shaped(_interp_log(one, xs, table[:, 1 + col]), cr, ef, q)
    # Each element's column (quality 0 / 1 / other, then + 3 without error feedback); the logarithm
    # once and only the columns some element reads (the same values as interpolating all six).
    col_of = np.where(q == 0, 0, np.where(q == 1, 1, 2)) + np.where(ef, 0, 3)
    lx = np.log10(np.maximum(cr, xs[0]))
    lxs = np.log10(xs)
    shape = np.broadcast_shapes(cr.shape, col_of.shape)
    out = np.full(shape, np.nan)
    for i in np.flatnonzero(np.bincount(col_of.reshape(-1), minlength=6)):
        out = np.where(col_of == i, np.interp(lx, lxs, table[:, 1 + i]), out)
    return np.asarray(out, dtype=np.float64)


def eta_act(
    activation_compression: npt.ArrayLike, stages: npt.ArrayLike, quality: npt.ArrayLike, p: ModelParams
) -> Arr:
    """eta_act = q(C_act)^(2 (S - 1)) for a pipeline of S stages (1 when S = 1). Heuristic, spec sec. 4.

    q per boundary (expected / optimistic / conservative): C_act 1: 1/1/1; 2: 1/1/0.99;
    4: 0.995/1/0.96; 10: 0.98/0.995/0.90, log-interpolated.
    """
    table = np.asarray(p.activation_table, dtype=np.float64)
    xs = table[:, 0]
    ca = np.asarray(activation_compression, dtype=np.float64)
    qsel = np.asarray(quality)
    s = np.maximum(np.asarray(stages, dtype=np.float64), 1.0)
    k = uniform_code(qsel)
    if k is not None:
        # (one compression for every element: interpolate one number)
        ca1 = ca if uniform_code(ca) is None else ca.reshape(-1)[:1].reshape(())
        one = _interp_log(ca1, xs, table[:, 2 if k == 0 else 1 if k == 1 else 3])
        return _shaped(np.asarray(one ** (2.0 * (s - 1.0)), dtype=np.float64), ca, qsel, s)
    expected = _interp_log(ca, xs, table[:, 1])
    optimistic = _interp_log(ca, xs, table[:, 2])
    conservative = _interp_log(ca, xs, table[:, 3])
    q = np.select([qsel == 0, qsel == 1], [optimistic, expected], default=conservative)
    return np.asarray(q ** (2.0 * (s - 1.0)), dtype=np.float64)
