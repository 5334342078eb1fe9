"""Vectorised bisection over integer node counts: the one implementation every search uses.

The planner's paper bisection (first N where best(N) meets the target), the exact search's walk
over pieces of constant H (`first_in_pieces`) and the Monte Carlo's refinement of a grid cell are
all "find the edge of a monotone predicate on an integer interval", for many intervals at once.
`first_true` and `last_true` do that on NumPy arrays: each step evaluates the predicate once, on
the intervals that have not yet closed.

A predicate call costs a fixed overhead (about that of evaluating 800 configurations with the
vectorised kernel) plus a little per point, so when few intervals are open one point per interval
and step wastes most of each call. With ``budget`` > 0 a step asks about up to ``budget // open``
points of each open interval (at least one), splitting it into that many + 1 parts instead of
two: the same edge (the predicate is monotone), in fewer calls. ``budget`` = 0 is plain bisection.
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
integer-valued node counts `n` (same length as sel). Returns booleans, one per entry of sel. With a
``budget`` an interval may appear several times in one call (several points of it, ascending)."""

Probe = Callable[[IntArr, Arr], tuple[Arr, BoolArr]]
"""probe(sel, n) for `first_in_pieces`: (signature, meets) of intervals `sel` at node counts `n`."""

# Every step at least halves each open interval, so finite float bounds (integers below 2**53 wide)
# close in at most 54 steps.
_MAX_STEPS = 64
#: Points probed around a guessed piece end (see `first_in_pieces`) when the last guess missed, at
#: the least: the guess, 1 and 3 spreads below, the next point and 1 spread beyond it.
GUESS_POINTS = 5


def _bounds(lo: npt.ArrayLike, hi: npt.ArrayLike) -> tuple[Arr, Arr]:
    a = np.array(lo, dtype=np.float64, copy=True).reshape(-1)
    b = np.array(hi, dtype=np.float64, copy=True).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"lo and hi must have the same length, got {a.size} and {b.size}")
    return a, b


def _points_per_interval(n_open: int, budget: int) -> int:
    return max(1, budget // n_open) if budget > 0 else 1


def _groups(m: IntArr) -> tuple[IntArr, IntArr, IntArr]:
    """For m[i] >= 1 points of interval i: (interval of each point, its rank 1..m[i], group starts)."""
    start = np.concatenate(([0], np.cumsum(m)[:-1])).astype(np.int64)
    owner = np.repeat(np.arange(m.size), m)
    rank = np.arange(int(m.sum())) - start[owner] + 1
    return owner, rank, start


def _split(a: Arr, b: Arr, m: IntArr, *, up: bool) -> tuple[IntArr, IntArr, IntArr, Arr]:
    """Points j = 1..m of each interval [a, b] (L = b - a >= m): a + floor(j L / (m + 1)) in
    [a, b - 1] (up False; m = 1 is the midpoint rounded down) or a + ceil(j L / (m + 1)) in
    [a + 1, b] (up True; m = 1 is the midpoint rounded up). Returns (owner, rank, start, points)."""
    width = (b - a).astype(np.int64)
    owner, rank, start = _groups(m)
    num = rank * width[owner]
    den = m[owner] + 1
    off = -((-num) // den) if up else num // den
    return owner, rank, start, a[owner] + off.astype(np.float64)


def _gallop(a: Arr, b: Arr, s: Arr, per: int) -> tuple[IntArr, IntArr, IntArr, Arr, Arr]:
    """Galloping probes a + s (2^j - 1), j = 1..m, the last one capped at b, m no more than `per`
    nor than it takes to reach b. Returns (owner, rank, start, points, the next step)."""
    reach = np.ceil(np.log2((b - a) / s + 1.0)).astype(np.int64)
    m = np.clip(reach, 1, per)
    owner, rank, start = _groups(m)
    q = np.minimum(a[owner] + s[owner] * (2.0 ** rank.astype(np.float64) - 1.0), b[owner])
    return owner, rank, start, q, s * 2.0**m


def _bracket(a: Arr, b: Arr, g: Arr, u: Arr, m: IntArr) -> tuple[IntArr, IntArr, IntArr, Arr, Arr]:
    """m points around each guess g with spread u, ascending and inside [a + 1, b]: g - u (2^k - 1)
    at and below it (g, g - u, g - 3u, ...) and g + 1 + u (2^k - 1) above (g + 1, g + 1 + u, ...).
    Returns (owner, rank, start, points, the gallop step to continue with if they all hold)."""
    unit = np.maximum(np.floor(u), 1.0)
    # Past k_max spreads a side's points all clip to the interval's end (the same point again), so m is
    # capped at k_max + 1 a side: the same distinct points, the same edge, a gallop step still past the
    # interval, and no 2^k overflow when a call allows thousands of points.
    span = np.maximum(b - a, 0.0) + np.abs(np.floor(g) - a) + 1.0
    k_max = np.ceil(np.log2(span / unit + 1.0)).astype(np.int64)
    m = np.minimum(m, 2 * k_max + 2)
    owner, rank, start = _groups(m)
    m_lo = ((m + 1) // 2)[owner]
    below = rank <= m_lo
    k = np.where(below, m_lo - rank, rank - m_lo - 1).astype(np.float64)
    off = np.where(below, -(2.0**k - 1.0) * unit[owner], 1.0 + (2.0**k - 1.0) * unit[owner])
    q = np.clip(np.floor(g)[owner] + off, a[owner] + 1.0, b[owner])
    return owner, rank, start, q, unit * 2.0 ** (m // 2)


def _first_of_group(flag: BoolArr, rank: IntArr, start: IntArr) -> IntArr:
    """Per group: the rank of its first point with flag set, or a number above any rank if none."""
    return np.asarray(
        np.minimum.reduceat(np.where(flag, rank, np.iinfo(np.int64).max), start), dtype=np.int64
    )


def _edge(q: Arr, flag: BoolArr, rank: IntArr, start: IntArr) -> tuple[BoolArr, IntArr, IntArr]:
    """Per group of ascending points q: whether some point has `flag`, the index (into q) of the
    first such point (or of the last point if none) and of the point before it (-1 if none)."""
    m = np.diff(np.append(start, rank.size))
    j = _first_of_group(flag, rank, start)
    hit = j <= m
    at = start + np.minimum(j, m) - 1
    before = np.where(hit, np.where(j > 1, at - 1, -1), at)
    return hit, at, before


def _bisect(a: Arr, b: Arr, pred: Predicate, *, first: bool, budget: int) -> Arr:
    open_ = a < b
    if not (np.all(np.isfinite(a[open_])) and np.all(np.isfinite(b[open_]))):
        raise ValueError("bisection bounds of an open interval must be finite")
    for _ in range(_MAX_STEPS):
        sel = np.flatnonzero(a < b)
        if sel.size == 0:
            break
        m = np.minimum(_points_per_interval(sel.size, budget), (b[sel] - a[sel]).astype(np.int64))
        owner, rank, start, q = _split(a[sel], b[sel], m, up=not first)
        ok = np.asarray(pred(sel[owner], q), dtype=bool).reshape(-1)
        # first: the first point where pred holds closes the interval from above, the point before it
        # from below; last: the first point where it fails closes it from above, the one before from below.
        hit, at, before = _edge(q, ok if first else ~ok, rank, start)
        q_before = np.where(before >= 0, q[np.maximum(before, 0)], np.nan)
        if first:
            # hit: b = q_j, a = q_{j-1} + 1 (or a); no hit: a = q_m + 1.
            new_a = np.where(hit, np.where(before >= 0, q_before + 1, a[sel]), q[at] + 1)
            new_b = np.where(hit, q[at], b[sel])
        else:
            # hit (q_j fails): a = q_{j-1} (or a), b = q_j - 1; no hit: a = q_m.
            new_a = np.where(hit, np.where(before >= 0, q_before, a[sel]), q[at])
            new_b = np.where(hit, q[at] - 1, b[sel])
        a[sel], b[sel] = new_a, new_b
    else:
        raise RuntimeError("bisection did not converge (bounds wider than 2**53?)")
    return a


def first_true(lo: npt.ArrayLike, hi: npt.ArrayLike, pred: Predicate, *, budget: int = 0) -> Arr:
    """For each interval [lo, hi] of integers: the smallest n with pred(n), assuming pred is false
    then true on it and true at hi (if it is false everywhere, the answer is hi). Intervals with
    lo >= hi are already closed: their answer is lo, and pred is never asked about them. ``budget``:
    points asked about per step, spread over the open intervals (0: one each, plain bisection).
    """
    a, b = _bounds(lo, hi)
    return _bisect(a, b, pred, first=True, budget=budget)


def last_true(lo: npt.ArrayLike, hi: npt.ArrayLike, pred: Predicate, *, budget: int = 0) -> Arr:
    """For each interval [lo, hi] of integers: the largest n with pred(n), assuming pred is true
    then false on it and true at lo (if it is true everywhere, the answer is hi). Intervals with
    lo >= hi are already closed: their answer is lo, and pred is never asked about them.

    Galloping first (probe lo + 1, lo + 3, lo + 7, ... until a probe fails), then bisection inside
    the last gap: a run of length L costs about 2 log2(L) evaluations instead of log2(hi - lo), which
    matters when the intervals are wide and the runs short. With a ``budget`` a step takes several
    galloping probes of an interval at once (as many as its width and the budget allow), and the
    bisection splits the gap into several parts.
    """
    a, b = _bounds(lo, hi)
    step = np.ones_like(a)
    galloping = a < b
    for _ in range(_MAX_STEPS):
        sel = np.flatnonzero(galloping & (a < b))
        if sel.size == 0:
            break
        owner, rank, start, q, s_next = _gallop(
            a[sel], b[sel], step[sel], _points_per_interval(sel.size, budget)
        )
        ok = np.asarray(pred(sel[owner], q), dtype=bool).reshape(-1)
        hit, at, before = _edge(q, ~ok, rank, start)
        q_before = np.where(before >= 0, q[np.maximum(before, 0)], np.nan)
        a[sel] = np.where(hit, np.where(before >= 0, q_before, a[sel]), q[at])
        b[sel] = np.where(hit, q[at] - 1, b[sel])
        step[sel] = s_next
        galloping[sel] = ~hit
    return _bisect(a, b, pred, first=False, budget=budget)


# Phases of an interval in `first_in_pieces`.
_GALLOP, _BRACKET, _BISECT, _FIRST, _DONE, _DENSE = 0, 1, 2, 3, 4, 5


class _Walk:
    """The state of `first_in_pieces`: one entry per interval in each array."""

    def __init__(self, a: Arr, top0: Arr, group: npt.ArrayLike | None) -> None:
        k_all = a.size
        self.a, self.top0 = a, top0
        self.grp = np.arange(k_all) if group is None else np.asarray(group, dtype=np.int64).reshape(-1)
        self.best = np.full(int(self.grp.max()) + 1 if k_all else 0, np.inf)
        self.first = np.full(k_all, np.inf)
        self.phase = np.full(k_all, _DONE)
        self.sig0 = np.full(k_all, np.nan)
        self.meets_a = np.zeros(k_all, dtype=bool)
        # Piece search state: sig(lo_) == sig0 (meets_lo there); hi_ is the top or one below a probe
        # whose signature differs (sig_next / meets_next there, known_next).
        self.lo_, self.hi_ = a.copy(), top0.copy()
        self.meets_lo = self.meets_a.copy()
        self.sig_next = np.full(k_all, np.nan)
        self.meets_next = np.zeros(k_all, dtype=bool)
        self.known_next = np.zeros(k_all, dtype=bool)
        self.step = np.ones(k_all)
        # Inside the current piece: largest probe where meets fails, smallest where it holds.
        self.no_hi = np.full(k_all, -np.inf)
        self.yes_lo = np.full(k_all, np.inf)
        # Guessing the piece's end: last two whole pieces' lengths, how far the last guess was off.
        self.len1 = np.full(k_all, np.nan)
        self.len2 = np.full(k_all, np.nan)
        self.whole = np.zeros(k_all, dtype=bool)
        self.guess = np.full(k_all, np.nan)
        self.g_ratio = np.full(k_all, np.nan)
        self.g_same = np.full(k_all, np.nan)
        self.by_ratio = np.ones(k_all, dtype=bool)
        self.miss = np.ones(k_all)
        # The first-n bisection inside a piece that meets at its end: [fa, fb], meets at fb.
        self.fa, self.fb = np.zeros(k_all), np.zeros(k_all)


_Part = tuple[int, IntArr, IntArr, IntArr, IntArr, Arr, Arr]


#: Grid points per row `first_on_grid` evaluates together (ascending N): a row that meets the
#: predicate in one batch is not evaluated at the later ones. Sets only how many predicate calls a
#: grid takes, never which point is first.
FIRST_ON_GRID_BATCH = 4


def first_on_grid(g: Arr, pred: Predicate, *, batch: int = FIRST_ON_GRID_BATCH) -> IntArr:
    """Per row of the node-count grid `g` (rows, points): the index of the first point where
    `pred(rows, n)` holds, -1 where none does (the grid step before a bisection refines the cell).
    The points are asked about in batches of `batch` from the left, each only for the rows with no
    true point yet: the same first point as asking about the whole grid at once, for fewer points."""
    rows, points = g.shape
    first = np.full(rows, -1, dtype=np.int64)
    for a in range(0, points, max(1, batch)):
        open_rows = np.flatnonzero(first < 0)
        if open_rows.size == 0:
            break
        cols = np.arange(a, min(a + max(1, batch), points))
        rr = np.repeat(open_rows, cols.size)
        cc = np.tile(cols, open_rows.size)
        mt = np.asarray(pred(rr, g[rr, cc]), dtype=bool).reshape(open_rows.size, cols.size)
        hit = mt.any(axis=1)
        first[open_rows[hit]] = a + np.argmax(mt[hit], axis=1)
    return first


#: Points per predicate call of the cell refinements (`first_in_cells`, `cheapest_in_cells`), spread
#: over the cells still open (``budget`` of `first_true`): a call costs a fixed overhead of about 800
#: configurations' worth of work, and most refinements have a few dozen cells open, so one midpoint each
#: is mostly overhead. The refinements assume the predicate false then true in a cell (as `first_true`
#: does), so this sets how many calls they take, never which N they find (`same_output --full` was
#: byte-identical against plain bisection's one point per cell).
CELL_POINTS_PER_CALL = 256


def first_in_cells(
    g: Arr, first: IntArr, pred: Predicate, *, budget: int = CELL_POINTS_PER_CALL
) -> tuple[IntArr, Arr]:
    """The refinement after a grid step (`first_on_grid`, `cheapest_first_on_grid`): for each row of `g`
    with a first true point f (``first >= 0``), the smallest integer n with pred(row, n) in its cell
    [g[f-1] + 1, g[f]] (g[f] itself when f = 0), by `first_true`. Returns (rows, n); `pred` is asked
    with row indices of `g`."""
    sel = np.flatnonzero(first >= 0)
    if sel.size == 0:
        return sel, np.zeros(0)
    f = first[sel]
    hi = g[sel, f]
    lo = np.where(f > 0, g[sel, np.maximum(f - 1, 0)] + 1.0, hi)
    return sel, first_true(np.minimum(lo, hi), hi, lambda s, n: pred(sel[s], n), budget=budget)


#: A row is dropped only when its least cost is above its group's best by more than rounding (a tie is
#: kept: it cannot change the least cost either way).
_COST_TOL = 1.0 + 1e-12


CostPredicate = Callable[[IntArr, Arr], tuple[BoolArr, Arr]]
"""pred(rows, n): whether each row meets the predicate at node count n, and the cost there (non-decreasing
in n along a row)."""


def cheapest_first_on_grid(
    g: Arr, pred: CostPredicate, group: IntArr, *, batch: int = FIRST_ON_GRID_BATCH
) -> IntArr:
    """`first_on_grid` for a caller that reads only the cheapest plan per group of rows (branch and
    bound), the plan of a row being the smallest N in its first true cell [g[f-1] + 1, g[f]]. The rows
    are asked about in batches from the left as there. A row with no true point yet costs at least its
    cost at the last point asked (the cost is non-decreasing in N and its answer lies beyond), one whose
    first true point is f at least its cost at g[f-1] and at most its cost at g[f]; a row whose least
    cost is above its group's least upper bound (by more than rounding: a tie is kept) is asked about no
    more. Returns `first_on_grid`'s index for every row that can hold its group's cheapest plan, -1 for
    the others: refining only those rows' cells gives each group's least cost exactly."""
    return _cheapest_grid(g, pred, group, batch)[0]


def _cheapest_grid(g: Arr, pred: CostPredicate, group: IntArr, batch: int) -> tuple[IntArr, Arr, Arr]:
    """`cheapest_first_on_grid` with each row's cost bounds: (first, the cost at g[f-1] or below,
    the cost at g[f])."""
    rows, points = g.shape
    group = np.asarray(group, dtype=np.int64)
    best = np.full(int(group.max()) + 1 if rows else 0, np.inf)
    first = np.full(rows, -1, dtype=np.int64)
    below = np.zeros(rows)
    above = np.full(rows, np.inf)
    for a in range(0, points, max(1, batch)):
        open_rows = np.flatnonzero((first < 0) & (below <= best[group] * _COST_TOL))
        if open_rows.size == 0:
            break
        cols = np.arange(a, min(a + max(1, batch), points))
        rr = np.repeat(open_rows, cols.size)
        ok, cost = pred(rr, g[rr, np.tile(cols, open_rows.size)])
        ok = np.asarray(ok, dtype=bool).reshape(open_rows.size, cols.size)
        cost = np.asarray(cost, dtype=np.float64).reshape(open_rows.size, cols.size)
        hit = ok.any(axis=1)
        j = np.argmax(ok[hit], axis=1)
        r = open_rows[hit]
        first[r] = a + j
        above[r] = cost[hit, j]
        np.minimum.at(best, group[r], cost[hit, j])
        below[r] = np.where(j > 0, cost[hit, np.maximum(j - 1, 0)], below[r])
        below[open_rows[~hit]] = cost[~hit, -1]
    first[(first >= 0) & (below > best[group] * _COST_TOL)] = -1
    return first, below, above


def cheapest_in_cells(
    g: Arr,
    pred: CostPredicate,
    group: IntArr,
    *,
    batch: int = FIRST_ON_GRID_BATCH,
    budget: int = CELL_POINTS_PER_CALL,
) -> tuple[IntArr, Arr, Arr]:
    """`cheapest_first_on_grid`, then each kept row's cell refined as `first_in_cells` does (`first_true`'s
    points for the same ``budget``, so the same answers), with the branch and bound carried on: a point
    that meets lowers the row's upper cost, one that does not raises its lower cost (the cost is
    non-decreasing in N), and a row whose lower cost rises above its group's least upper cost (by more
    than rounding: a tie is kept) is refined no further. Returns (rows, n, cost at n) for the rows that
    can still hold their group's cheapest plan: each group's least cost exactly, from costs the
    predicate gave where it held."""
    first, below, above = _cheapest_grid(g, pred, group, batch)
    sel = np.flatnonzero(first >= 0)
    if sel.size == 0:
        return sel, np.zeros(0), np.zeros(0)
    f = first[sel]
    b = g[sel, f].astype(np.float64)
    a = np.minimum(np.where(f > 0, g[sel, np.maximum(f - 1, 0)] + 1.0, b), b)
    lo_cost, hi_cost = below[sel], above[sel]
    grp = np.asarray(group, dtype=np.int64)[sel]
    best = np.full(int(grp.max()) + 1, np.inf)
    np.minimum.at(best, grp, hi_cost)
    alive = np.ones(sel.size, dtype=bool)
    for _ in range(_MAX_STEPS):
        alive &= lo_cost <= best[grp] * _COST_TOL
        step = np.flatnonzero(alive & (a < b))
        if step.size == 0:
            break
        # `first_true`'s points with the same budget (m points split [a, b] into m + 1 parts)
        m = np.minimum(_points_per_interval(step.size, budget), (b[step] - a[step]).astype(np.int64))
        owner, rank, start, q = _split(a[step], b[step], m, up=False)
        ok, cost = pred(sel[step[owner]], q)
        ok = np.asarray(ok, dtype=bool).reshape(-1)
        cost = np.asarray(cost, dtype=np.float64).reshape(-1)
        hit, at, before = _edge(q, ok, rank, start)
        # hit: b = q_j (its cost the row's upper one), a = q_{j-1} + 1 (its cost the lower one);
        # no hit: a = q_m + 1, the lower cost q_m's.
        yes, no = step[hit], step[~hit]
        b[yes], hi_cost[yes] = q[at[hit]], cost[at[hit]]
        had = before[hit] >= 0
        a[yes[had]], lo_cost[yes[had]] = q[before[hit][had]] + 1.0, cost[before[hit][had]]
        a[no], lo_cost[no] = q[at[~hit]] + 1.0, cost[at[~hit]]
        np.minimum.at(best, grp[yes], cost[at[hit]])
    else:
        raise RuntimeError("bisection did not converge (bounds wider than 2**53?)")
    keep = np.flatnonzero(alive & (lo_cost <= best[grp] * _COST_TOL))
    return sel[keep], b[keep], hi_cost[keep]


def first_in_pieces(
    lo: npt.ArrayLike,
    hi: npt.ArrayLike,
    probe: Probe,
    *,
    group: npt.ArrayLike | None = None,
    budget: int = 0,
) -> Arr:
    """For each interval [lo, hi] of integers: the smallest n where `meets` holds (inf if none).

    probe(sel, n) gives a signature and `meets` at n. The signature is a non-decreasing step
    function of n, so it splits the interval into pieces of constant signature, and inside a piece
    `meets` is false then true. So: walk the pieces from lo, finding each piece's end (the last n
    with the signature of its start: galloping, then bisection); at the first piece where `meets`
    holds at the end, bisect inside it for the first n where it does. Every probe gives both
    values, so `meets` at a piece's end and the signature at the next one's start come from probes
    already made.

    Each interval walks on its own (one probe call per step for every interval still walking,
    whatever piece or phase it is in), so the number of calls is that of the interval with the most
    steps, not the sum over pieces of the slowest interval in each. From the third piece on, the
    end is guessed from the last whole pieces' lengths (L1^2 / L2 for pieces growing geometrically,
    or L1 again, whichever would have been closer on the last piece) and a few points around the
    guess are probed instead of galloping; the spread of those points is how far the last guess
    was off (a right guess: the guess and the next point only). Where the guessed end is near
    (within half of the points a call allows an interval), every node count ahead is probed
    instead and all the pieces they cover are walked at once: pieces one node count long (H
    changing with every N) then cost one call per ``budget / open`` node counts, not one each.
    Guesses change how many probes are made, never the answer.

    ``group`` (default: each interval its own): intervals of one group share an answer (their
    smallest): once one finds n, the others of its group start no piece at or beyond n. Their own
    answers are then inf or >= n; the group minimum is exact. ``budget``: points per probe call
    (see the module docstring).
    """
    a, top0 = _bounds(lo, hi)
    w = _Walk(a, top0, group)
    live = np.flatnonzero(a <= top0)
    if live.size == 0:
        return w.first
    if not (np.all(np.isfinite(a[live])) and np.all(np.isfinite(top0[live]))):
        raise ValueError("bounds of a non-empty interval must be finite")
    s, m_ = probe(live, a[live])
    w.sig0[live], w.meets_a[live] = np.asarray(s, dtype=np.float64), np.asarray(m_, dtype=bool)
    w.lo_[:], w.meets_lo[:] = a, w.meets_a
    _start_piece(w, live)
    for _ in range(int(np.max(top0[live] - a[live])) + 2 * _MAX_STEPS + 1):
        open_ = np.flatnonzero(w.phase != _DONE)
        if open_.size == 0:
            break
        parts = _probes(w, open_, _points_per_interval(open_.size, budget))
        who = np.concatenate([p[1][p[2]] for p in parts])
        sig_all, meets_all = probe(who, np.concatenate([p[5] for p in parts]))
        _absorb(
            w,
            parts,
            np.asarray(sig_all, dtype=np.float64).reshape(-1),
            np.asarray(meets_all, dtype=bool).reshape(-1),
        )
    else:
        raise RuntimeError("piece walk did not converge")
    return w.first


def _probes(w: _Walk, open_: IntArr, per: int) -> list[_Part]:
    """The points each open interval asks about in this step, by phase."""
    ph = w.phase[open_].copy()
    # Short pieces ahead (the guessed end within half the points this call allows): probe every
    # node count after lo_ instead, walking all the pieces they cover at once.
    ph[(ph == _BRACKET) & ((w.guess[open_] - w.lo_[open_] + 1.0) * 2.0 <= per)] = _DENSE
    parts: list[_Part] = []
    for kind in (_GALLOP, _BRACKET, _BISECT, _FIRST, _DENSE):
        sel = open_[ph == kind]
        if sel.size == 0:
            continue
        s_next = w.step[sel]
        if kind == _DENSE:
            m = np.minimum(per, (w.hi_[sel] - w.lo_[sel]).astype(np.int64))
            owner, rank, st = _groups(m)
            q = w.lo_[sel][owner] + rank.astype(np.float64)
        elif kind == _GALLOP:
            owner, rank, st, q, s_next = _gallop(w.lo_[sel], w.hi_[sel], w.step[sel], per)
        elif kind == _BRACKET:
            # A right last guess: the guess and the next point (just the next one if the guess
            # is the piece's start); else a wider bracket.
            m = np.where(w.miss[sel] > 0, max(per, GUESS_POINTS), np.where(w.guess[sel] > w.lo_[sel], 2, 1))
            owner, rank, st, q, s_next = _bracket(w.lo_[sel], w.hi_[sel], w.guess[sel], w.miss[sel], m)
        elif kind == _BISECT:
            m = np.minimum(per, (w.hi_[sel] - w.lo_[sel]).astype(np.int64))
            owner, rank, st, q = _split(w.lo_[sel], w.hi_[sel], m, up=True)
        else:
            m = np.minimum(per, (w.fb[sel] - w.fa[sel]).astype(np.int64))
            owner, rank, st, q = _split(w.fa[sel], w.fb[sel], m, up=False)
        parts.append((kind, sel, owner, rank, st, q, s_next))
    return parts


def _absorb(w: _Walk, parts: list[_Part], sig_all: Arr, meets_all: BoolArr) -> None:
    """Update every interval with what its probes said (signature and meets at each point)."""
    offset = 0
    ended: list[IntArr] = []
    for kind, sel, owner, rank, st, q, s_next in parts:
        sig = sig_all[offset : offset + q.size]
        mt = meets_all[offset : offset + q.size]
        offset += q.size
        if kind == _DENSE:
            _dense(w, sel, owner, rank, st, q, sig, mt)
            continue
        if kind == _FIRST:
            hit, at, before = _edge(q, mt, rank, st)
            q_before = np.where(before >= 0, q[np.maximum(before, 0)], np.nan)
            w.fa[sel] = np.where(hit, np.where(before >= 0, q_before + 1, w.fa[sel]), q[at] + 1)
            w.fb[sel] = np.where(hit, q[at], w.fb[sel])
            closed = sel[w.fa[sel] >= w.fb[sel]]
            if closed.size:
                _finish(w, closed)
            continue
        same = sig == w.sig0[sel][owner]
        # What the probes inside the piece say about meets there.
        pts = sel[owner]
        np.maximum.at(w.no_hi, pts[same & ~mt], q[same & ~mt])
        np.minimum.at(w.yes_lo, pts[same & mt], q[same & mt])
        hit, at, before = _edge(q, ~same, rank, st)
        # hit: q[at] is the first probe past the piece: hi_ below it, its values kept.
        h = sel[hit]
        w.hi_[h] = q[at[hit]] - 1
        w.sig_next[h], w.meets_next[h], w.known_next[h] = sig[at[hit]], mt[at[hit]], True
        moved = before >= 0
        w.lo_[sel[moved]] = q[before[moved]]
        w.meets_lo[sel[moved]] = mt[before[moved]]
        if kind == _GALLOP:
            w.step[sel] = s_next
        elif kind == _BRACKET:
            w.step[sel] = s_next
            w.phase[sel] = _GALLOP
        w.phase[h] = _BISECT
        ended.append(sel[w.lo_[sel] >= w.hi_[sel]])
    for e in ended:
        if e.size:
            _end_piece(w, e)


def _start_piece(w: _Walk, sel: IntArr) -> None:
    top = np.minimum(w.top0[sel], w.best[w.grp[sel]] - 1)
    w.phase[sel[w.a[sel] > top]] = _DONE
    keep = w.a[sel] <= top
    sel, top = sel[keep], top[keep]
    w.lo_[sel], w.hi_[sel], w.meets_lo[sel] = w.a[sel], top, w.meets_a[sel]
    w.known_next[sel] = False
    w.step[sel] = 1.0
    w.no_hi[sel] = np.where(w.meets_a[sel], -np.inf, w.a[sel])
    w.yes_lo[sel] = np.where(w.meets_a[sel], w.a[sel], np.inf)
    l1, l2 = w.len1[sel], w.len2[sel]
    ratio = np.where(np.isfinite(l2), np.round(l1 * l1 / np.where(np.isfinite(l2), l2, 1.0)), l1)
    w.g_ratio[sel] = w.a[sel] + np.maximum(ratio, 1.0) - 1.0
    w.g_same[sel] = w.a[sel] + np.maximum(l1, 1.0) - 1.0
    w.guess[sel] = np.where(w.by_ratio[sel], w.g_ratio[sel], w.g_same[sel])
    w.phase[sel] = np.where(np.isfinite(w.guess[sel]), _BRACKET, _GALLOP)
    closed = sel[w.lo_[sel] >= w.hi_[sel]]
    if closed.size:
        _end_piece(w, closed)


def _end_piece(w: _Walk, sel: IntArr) -> None:
    e = w.lo_[sel]
    g = w.guess[sel]
    w.miss[sel] = np.where(np.isfinite(g), np.abs(e - g), w.miss[sel])
    # Next time, the guess that would have been closer this time.
    w.by_ratio[sel] = np.where(
        np.isfinite(w.g_ratio[sel]), np.abs(e - w.g_ratio[sel]) <= np.abs(e - w.g_same[sel]), w.by_ratio[sel]
    )
    met = w.meets_lo[sel]
    hit = sel[met]
    if hit.size:
        w.fa[hit] = np.maximum(w.a[hit], w.no_hi[hit] + 1)
        w.fb[hit] = np.minimum(e[met], w.yes_lo[hit])
        w.phase[hit] = _FIRST
        closed = hit[w.fa[hit] >= w.fb[hit]]
        if closed.size:
            _finish(w, closed)
    nxt = sel[~met & w.known_next[sel]]
    w.phase[sel[~met & ~w.known_next[sel]]] = _DONE
    if nxt.size:
        done_len = w.lo_[nxt] - w.a[nxt] + 1.0
        wh = w.whole[nxt]
        w.len2[nxt[wh]] = w.len1[nxt[wh]]
        w.len1[nxt[wh]] = done_len[wh]
        w.whole[nxt] = True
        w.a[nxt] = w.lo_[nxt] + 1.0
        w.sig0[nxt], w.meets_a[nxt] = w.sig_next[nxt], w.meets_next[nxt]
        _start_piece(w, nxt)


def _dense(
    w: _Walk, sel: IntArr, owner: IntArr, rank: IntArr, st: IntArr, q: Arr, sig: Arr, mt: BoolArr
) -> None:
    """Walk the pieces seen by probes at every node count w.lo_ + 1 .. w.lo_ + K (rank 1..K)."""
    big = np.iinfo(np.int64).max
    k = np.diff(np.append(st, rank.size))
    last = st + k - 1
    prev_sig = np.where(rank > 1, sig[np.maximum(np.arange(rank.size) - 1, 0)], w.sig0[sel][owner])
    prev_meets = np.where(rank > 1, mt[np.maximum(np.arange(rank.size) - 1, 0)], w.meets_lo[sel][owner])
    change = sig != prev_sig  # w.a piece starts at this point, the previous one ended just before
    reach_top = q[last] >= w.hi_[sel]
    # Positions (0 = w.lo_, r = w.lo_ + r) of piece ends where meets holds; the w.first such end.
    end_pos = np.where(change & prev_meets, rank - 1, big)
    p_end = np.minimum.reduceat(end_pos, st)
    p_end = np.where(reach_top & mt[last] & (p_end == big), k, p_end)
    found = p_end < big
    n_changes = np.add.reduceat(change.astype(np.int64), st)
    if found.any():
        f = sel[found]
        pe = p_end[found]
        fo = np.isin(owner, np.flatnonzero(found))
        # The piece holding the w.first end that meets: its start in the block (0: before it).
        cs = np.maximum.reduceat(np.where(change & (rank <= np.repeat(p_end, k)), rank, 0), st)[found]
        own = owner[fo]
        slot = np.searchsorted(np.flatnonzero(found), own)
        in_piece = (rank[fo] >= cs[slot]) & (rank[fo] <= pe[slot]) & (rank[fo] >= 1)
        first_r = np.full(f.size, big)
        np.minimum.at(first_r, slot[in_piece & mt[fo]], rank[fo][in_piece & mt[fo]])
        later = cs > 0
        # A piece starting inside the block is known point by point.
        g1 = f[later]
        w.fa[g1] = w.fb[g1] = w.lo_[g1] + first_r[later]
        # The piece that began at or before w.lo_: what earlier probes said, then bisect if needed.
        g0 = f[~later]
        yes = np.where(first_r[~later] < big, w.lo_[g0] + first_r[~later], np.inf)
        top_meet = np.where(w.meets_lo[g0], w.lo_[g0], np.inf)
        w.fb[g0] = np.minimum(np.minimum(w.yes_lo[g0], top_meet), yes)
        no_in = np.full(g0.size, -np.inf)
        sl0 = np.flatnonzero(~later)
        m0 = np.isin(slot, sl0) & in_piece & ~mt[fo]
        pos0 = np.searchsorted(sl0, slot[m0])
        np.maximum.at(no_in, pos0, w.lo_[g0][pos0] + rank[fo][m0])
        w.fa[g0] = np.maximum(w.a[g0], np.maximum(w.no_hi[g0], no_in) + 1)
        w.phase[f] = _FIRST
        closed = f[w.fa[f] >= w.fb[f]]
        if closed.size:
            _finish(w, closed)
    rest = ~found
    w.phase[sel[rest & reach_top]] = _DONE
    go = rest & ~reach_top
    if go.any():
        g = sel[go]
        ls = np.maximum.reduceat(np.where(change, rank, 0), st)[go]
        moved = ls > 0
        at_ls = st[go] + ls - 1
        a_new = np.where(moved, w.lo_[g] + ls, w.a[g])
        # Whole pieces inside the block (or ending in it, if the w.first began at w.a change): their
        # mean length stands for the last two.
        nc = n_changes[go]
        span = np.where(
            w.whole[g],
            ls + (w.lo_[g] - w.a[g]),
            ls - (np.minimum.reduceat(np.where(change, rank, big), st)[go]),
        )
        count = np.where(w.whole[g], nc, nc - 1)
        mean_len = np.where(count > 0, span / np.maximum(count, 1), w.len1[g])
        w.len1[g] = np.where(count > 0, mean_len, w.len1[g])
        w.len2[g] = np.where(count > 0, mean_len, w.len2[g])
        w.whole[g] = w.whole[g] | moved
        # Meets inside the piece now being walked (from ls to K).
        ow = np.isin(owner, np.flatnonzero(go))
        slot = np.searchsorted(np.flatnonzero(go), owner[ow])
        inp = rank[ow] >= ls[slot]
        nh = np.where(moved, -np.inf, w.no_hi[g])
        yl = np.where(moved, np.inf, w.yes_lo[g])
        np.maximum.at(nh, slot[inp & ~mt[ow]], q[ow][inp & ~mt[ow]])
        np.minimum.at(yl, slot[inp & mt[ow]], q[ow][inp & mt[ow]])
        w.no_hi[g], w.yes_lo[g] = nh, yl
        w.sig0[g] = np.where(moved, sig[np.maximum(at_ls, 0)], w.sig0[g])
        w.meets_a[g] = np.where(moved, mt[np.maximum(at_ls, 0)], w.meets_a[g])
        w.a[g] = a_new
        w.lo_[g] = q[last[go]]
        w.meets_lo[g] = mt[last[go]]
        w.known_next[g] = False
        w.step[g] = 1.0
        pred_len = np.where(np.isfinite(w.len1[g]), w.len1[g], 1.0)
        w.guess[g] = w.g_ratio[g] = w.g_same[g] = w.a[g] + np.maximum(np.round(pred_len), 1.0) - 1.0
        w.phase[g] = _BRACKET


def _finish(w: _Walk, sel: IntArr) -> None:
    w.first[sel] = w.fb[sel]
    np.minimum.at(w.best, w.grp[sel], w.fb[sel])
    w.phase[sel] = _DONE


__all__ = [
    "FIRST_ON_GRID_BATCH",
    "cheapest_first_on_grid",
    "first_in_cells",
    "first_in_pieces",
    "first_on_grid",
    "first_true",
    "last_true",
]
