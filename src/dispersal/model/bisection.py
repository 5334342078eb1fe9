"""Vectorised bisection over integer node counts: the one implementation every search uses.

The planner's paper bisection (first N where best(N) meets the target), the exact search's two
bisections (last N of a piece of constant H, first N inside a piece that meets the target) and the
Monte Carlo's refinement of a grid cell are all "find the edge of a monotone predicate on an integer
interval", for many intervals at once. `first_true` and `last_true` do that on NumPy arrays: each
step evaluates the predicate once, on the intervals that have not yet closed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]

Predicate = Callable[[IntArr, Arr], npt.ArrayLike]
"""pred(sel, n): for the intervals `sel` (indices into lo / hi), whether the predicate holds at the
integer-valued node counts `n` (same length as sel). Returns booleans, one per entry of sel."""


def _bisect(lo: npt.ArrayLike, hi: npt.ArrayLike, pred: Predicate, *, first: bool) -> Arr:
    a = np.array(lo, dtype=np.float64, copy=True).reshape(-1)
    b = np.array(hi, dtype=np.float64, copy=True).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"lo and hi must have the same length, got {a.size} and {b.size}")
    open_ = a < b
    if not (np.all(np.isfinite(a[open_])) and np.all(np.isfinite(b[open_]))):
        raise ValueError("bisection bounds of an open interval must be finite")
    # Every step halves each open interval, so finite float bounds (integers below 2**53 wide)
    # close in at most 54 steps.
    for _ in range(64):
        sel = np.flatnonzero(a < b)
        if sel.size == 0:
            break
        if first:
            mid = np.floor((a[sel] + b[sel]) / 2)
            ok = np.asarray(pred(sel, mid), dtype=bool)
            b[sel] = np.where(ok, mid, b[sel])
            a[sel] = np.where(ok, a[sel], mid + 1)
        else:
            mid = np.ceil((a[sel] + b[sel]) / 2)
            ok = np.asarray(pred(sel, mid), dtype=bool)
            a[sel] = np.where(ok, mid, a[sel])
            b[sel] = np.where(ok, b[sel], mid - 1)
    else:
        raise RuntimeError("bisection did not converge (bounds wider than 2**53?)")
    return a


def first_true(lo: npt.ArrayLike, hi: npt.ArrayLike, pred: Predicate) -> Arr:
    """For each interval [lo, hi] of integers: the smallest n with pred(n), assuming pred is false
    then true on it and true at hi (if it is false everywhere, the answer is hi). Intervals with
    lo >= hi are already closed: their answer is lo, and pred is never asked about them.
    """
    return _bisect(lo, hi, pred, first=True)


def last_true(lo: npt.ArrayLike, hi: npt.ArrayLike, pred: Predicate) -> Arr:
    """For each interval [lo, hi] of integers: the largest n with pred(n), assuming pred is true
    then false on it and true at lo (if it is true everywhere, the answer is hi). Intervals with
    lo >= hi are already closed: their answer is lo, and pred is never asked about them.

    Galloping first (probe lo + 1, lo + 2, lo + 4, ... until a probe fails), then bisection inside
    the last gap: a run of length L costs about 2 log2(L) evaluations instead of log2(hi - lo), which
    matters when the intervals are wide and the runs short (the exact search's pieces of constant H
    when H changes with every N, as an all-gather's download does).
    """
    a = np.array(lo, dtype=np.float64, copy=True).reshape(-1)
    b = np.array(hi, dtype=np.float64, copy=True).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"lo and hi must have the same length, got {a.size} and {b.size}")
    step = np.ones_like(a)
    galloping = a < b
    for _ in range(64):
        sel = np.flatnonzero(galloping & (a < b))
        if sel.size == 0:
            break
        n = np.minimum(a[sel] + step[sel], b[sel])
        ok = np.asarray(pred(sel, n), dtype=bool)
        a[sel] = np.where(ok, n, a[sel])
        b[sel] = np.where(ok, b[sel], n - 1)
        step[sel] *= 2
        galloping[sel] = ok
    return _bisect(a, b, pred, first=False)


__all__ = ["first_true", "last_true"]
