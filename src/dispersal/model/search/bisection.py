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
    owner, rank, start = _groups(m)
    m_lo = ((m + 1) // 2)[owner]
    below = rank <= m_lo
    k = np.where(below, m_lo - rank, rank - m_lo - 1).astype(np.float64)
    unit = np.maximum(np.floor(u), 1.0)
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
    k_all = a.size
    grp = np.arange(k_all) if group is None else np.asarray(group, dtype=np.int64).reshape(-1)
    best = np.full(int(grp.max()) + 1 if k_all else 0, np.inf)
    first = np.full(k_all, np.inf)
    phase = np.full(k_all, _DONE)
    live = np.flatnonzero(a <= top0)
    if live.size == 0:
        return first
    if not (np.all(np.isfinite(a[live])) and np.all(np.isfinite(top0[live]))):
        raise ValueError("bounds of a non-empty interval must be finite")
    sig0 = np.full(k_all, np.nan)
    meets_a = np.zeros(k_all, dtype=bool)
    s, m_ = probe(live, a[live])
    sig0[live], meets_a[live] = np.asarray(s, dtype=np.float64), np.asarray(m_, dtype=bool)
    # Piece search state: sig(lo_) == sig0 (meets_lo there); hi_ is the top or one below a probe
    # whose signature differs (sig_next / meets_next there, known_next).
    lo_, hi_ = a.copy(), top0.copy()
    meets_lo = meets_a.copy()
    sig_next = np.full(k_all, np.nan)
    meets_next = np.zeros(k_all, dtype=bool)
    known_next = np.zeros(k_all, dtype=bool)
    step = np.ones(k_all)
    # Inside the current piece: largest probe where meets fails, smallest where it holds.
    no_hi = np.full(k_all, -np.inf)
    yes_lo = np.full(k_all, np.inf)
    # Guessing the piece's end: last two whole pieces' lengths, how far the last guess was off.
    len1 = np.full(k_all, np.nan)
    len2 = np.full(k_all, np.nan)
    whole = np.zeros(k_all, dtype=bool)
    guess = np.full(k_all, np.nan)
    g_ratio = np.full(k_all, np.nan)
    g_same = np.full(k_all, np.nan)
    by_ratio = np.ones(k_all, dtype=bool)
    miss = np.ones(k_all)
    # The first-n bisection inside a piece that meets at its end: [fa, fb], meets at fb.
    fa, fb = np.zeros(k_all), np.zeros(k_all)

    def start_piece(sel: IntArr) -> None:
        top = np.minimum(top0[sel], best[grp[sel]] - 1)
        phase[sel[a[sel] > top]] = _DONE
        keep = a[sel] <= top
        sel, top = sel[keep], top[keep]
        lo_[sel], hi_[sel], meets_lo[sel] = a[sel], top, meets_a[sel]
        known_next[sel] = False
        step[sel] = 1.0
        no_hi[sel] = np.where(meets_a[sel], -np.inf, a[sel])
        yes_lo[sel] = np.where(meets_a[sel], a[sel], np.inf)
        l1, l2 = len1[sel], len2[sel]
        ratio = np.where(np.isfinite(l2), np.round(l1 * l1 / np.where(np.isfinite(l2), l2, 1.0)), l1)
        g_ratio[sel] = a[sel] + np.maximum(ratio, 1.0) - 1.0
        g_same[sel] = a[sel] + np.maximum(l1, 1.0) - 1.0
        guess[sel] = np.where(by_ratio[sel], g_ratio[sel], g_same[sel])
        phase[sel] = np.where(np.isfinite(guess[sel]), _BRACKET, _GALLOP)
        closed = sel[lo_[sel] >= hi_[sel]]
        if closed.size:
            end_piece(closed)

    def end_piece(sel: IntArr) -> None:
        e = lo_[sel]
        g = guess[sel]
        miss[sel] = np.where(np.isfinite(g), np.abs(e - g), miss[sel])
        # Next time, the guess that would have been closer this time.
        by_ratio[sel] = np.where(
            np.isfinite(g_ratio[sel]), np.abs(e - g_ratio[sel]) <= np.abs(e - g_same[sel]), by_ratio[sel]
        )
        met = meets_lo[sel]
        hit = sel[met]
        if hit.size:
            fa[hit] = np.maximum(a[hit], no_hi[hit] + 1)
            fb[hit] = np.minimum(e[met], yes_lo[hit])
            phase[hit] = _FIRST
            closed = hit[fa[hit] >= fb[hit]]
            if closed.size:
                finish(closed)
        nxt = sel[~met & known_next[sel]]
        phase[sel[~met & ~known_next[sel]]] = _DONE
        if nxt.size:
            done_len = lo_[nxt] - a[nxt] + 1.0
            w = whole[nxt]
            len2[nxt[w]] = len1[nxt[w]]
            len1[nxt[w]] = done_len[w]
            whole[nxt] = True
            a[nxt] = lo_[nxt] + 1.0
            sig0[nxt], meets_a[nxt] = sig_next[nxt], meets_next[nxt]
            start_piece(nxt)

    def dense(sel: IntArr, owner: IntArr, rank: IntArr, st: IntArr, q: Arr, sig: Arr, mt: BoolArr) -> None:
        """Walk the pieces seen by probes at every node count lo_ + 1 .. lo_ + K (rank 1..K)."""
        big = np.iinfo(np.int64).max
        k = np.diff(np.append(st, rank.size))
        last = st + k - 1
        prev_sig = np.where(rank > 1, sig[np.maximum(np.arange(rank.size) - 1, 0)], sig0[sel][owner])
        prev_meets = np.where(rank > 1, mt[np.maximum(np.arange(rank.size) - 1, 0)], meets_lo[sel][owner])
        change = sig != prev_sig  # a piece starts at this point, the previous one ended just before
        reach_top = q[last] >= hi_[sel]
        # Positions (0 = lo_, r = lo_ + r) of piece ends where meets holds; the first such end.
        end_pos = np.where(change & prev_meets, rank - 1, big)
        p_end = np.minimum.reduceat(end_pos, st)
        p_end = np.where(reach_top & mt[last] & (p_end == big), k, p_end)
        found = p_end < big
        n_changes = np.add.reduceat(change.astype(np.int64), st)
        if found.any():
            f = sel[found]
            pe = p_end[found]
            fo = np.isin(owner, np.flatnonzero(found))
            # The piece holding the first end that meets: its start in the block (0: before it).
            cs = np.maximum.reduceat(np.where(change & (rank <= np.repeat(p_end, k)), rank, 0), st)[found]
            own = owner[fo]
            slot = np.searchsorted(np.flatnonzero(found), own)
            in_piece = (rank[fo] >= cs[slot]) & (rank[fo] <= pe[slot]) & (rank[fo] >= 1)
            first_r = np.full(f.size, big)
            np.minimum.at(first_r, slot[in_piece & mt[fo]], rank[fo][in_piece & mt[fo]])
            later = cs > 0
            # A piece starting inside the block is known point by point.
            g1 = f[later]
            fa[g1] = fb[g1] = lo_[g1] + first_r[later]
            # The piece that began at or before lo_: what earlier probes said, then bisect if needed.
            g0 = f[~later]
            yes = np.where(first_r[~later] < big, lo_[g0] + first_r[~later], np.inf)
            top_meet = np.where(meets_lo[g0], lo_[g0], np.inf)
            fb[g0] = np.minimum(np.minimum(yes_lo[g0], top_meet), yes)
            no_in = np.full(g0.size, -np.inf)
            sl0 = np.flatnonzero(~later)
            m0 = np.isin(slot, sl0) & in_piece & ~mt[fo]
            pos0 = np.searchsorted(sl0, slot[m0])
            np.maximum.at(no_in, pos0, lo_[g0][pos0] + rank[fo][m0])
            fa[g0] = np.maximum(a[g0], np.maximum(no_hi[g0], no_in) + 1)
            phase[f] = _FIRST
            closed = f[fa[f] >= fb[f]]
            if closed.size:
                finish(closed)
        rest = ~found
        phase[sel[rest & reach_top]] = _DONE
        go = rest & ~reach_top
        if go.any():
            g = sel[go]
            ls = np.maximum.reduceat(np.where(change, rank, 0), st)[go]
            moved = ls > 0
            at_ls = st[go] + ls - 1
            a_new = np.where(moved, lo_[g] + ls, a[g])
            # Whole pieces inside the block (or ending in it, if the first began at a change): their
            # mean length stands for the last two.
            nc = n_changes[go]
            span = np.where(
                whole[g],
                ls + (lo_[g] - a[g]),
                ls - (np.minimum.reduceat(np.where(change, rank, big), st)[go]),
            )
            count = np.where(whole[g], nc, nc - 1)
            mean_len = np.where(count > 0, span / np.maximum(count, 1), len1[g])
            len1[g] = np.where(count > 0, mean_len, len1[g])
            len2[g] = np.where(count > 0, mean_len, len2[g])
            whole[g] = whole[g] | moved
            # Meets inside the piece now being walked (from ls to K).
            ow = np.isin(owner, np.flatnonzero(go))
            slot = np.searchsorted(np.flatnonzero(go), owner[ow])
            inp = rank[ow] >= ls[slot]
            nh = np.where(moved, -np.inf, no_hi[g])
            yl = np.where(moved, np.inf, yes_lo[g])
            np.maximum.at(nh, slot[inp & ~mt[ow]], q[ow][inp & ~mt[ow]])
            np.minimum.at(yl, slot[inp & mt[ow]], q[ow][inp & mt[ow]])
            no_hi[g], yes_lo[g] = nh, yl
            sig0[g] = np.where(moved, sig[np.maximum(at_ls, 0)], sig0[g])
            meets_a[g] = np.where(moved, mt[np.maximum(at_ls, 0)], meets_a[g])
            a[g] = a_new
            lo_[g] = q[last[go]]
            meets_lo[g] = mt[last[go]]
            known_next[g] = False
            step[g] = 1.0
            pred_len = np.where(np.isfinite(len1[g]), len1[g], 1.0)
            guess[g] = g_ratio[g] = g_same[g] = a[g] + np.maximum(np.round(pred_len), 1.0) - 1.0
            phase[g] = _BRACKET

    def finish(sel: IntArr) -> None:
        first[sel] = fb[sel]
        np.minimum.at(best, grp[sel], fb[sel])
        phase[sel] = _DONE

    start_piece(live)
    for _ in range(int(np.max(top0[live] - a[live])) + 2 * _MAX_STEPS + 1):
        open_ = np.flatnonzero(phase != _DONE)
        if open_.size == 0:
            break
        per = _points_per_interval(open_.size, budget)
        ph = phase[open_].copy()
        # Short pieces ahead (the guessed end within half the points this call allows): probe every
        # node count after lo_ instead, walking all the pieces they cover at once.
        ph[(ph == _BRACKET) & ((guess[open_] - lo_[open_] + 1.0) * 2.0 <= per)] = _DENSE
        parts: list[tuple[int, IntArr, IntArr, IntArr, IntArr, Arr, Arr]] = []
        for kind in (_GALLOP, _BRACKET, _BISECT, _FIRST, _DENSE):
            sel = open_[ph == kind]
            if sel.size == 0:
                continue
            s_next = step[sel]
            if kind == _DENSE:
                m = np.minimum(per, (hi_[sel] - lo_[sel]).astype(np.int64))
                owner, rank, st = _groups(m)
                q = lo_[sel][owner] + rank.astype(np.float64)
            elif kind == _GALLOP:
                owner, rank, st, q, s_next = _gallop(lo_[sel], hi_[sel], step[sel], per)
            elif kind == _BRACKET:
                # A right last guess: the guess and the next point (just the next one if the guess
                # is the piece's start); else a wider bracket.
                m = np.where(miss[sel] > 0, max(per, GUESS_POINTS), np.where(guess[sel] > lo_[sel], 2, 1))
                owner, rank, st, q, s_next = _bracket(lo_[sel], hi_[sel], guess[sel], miss[sel], m)
            elif kind == _BISECT:
                m = np.minimum(per, (hi_[sel] - lo_[sel]).astype(np.int64))
                owner, rank, st, q = _split(lo_[sel], hi_[sel], m, up=True)
            else:
                m = np.minimum(per, (fb[sel] - fa[sel]).astype(np.int64))
                owner, rank, st, q = _split(fa[sel], fb[sel], m, up=False)
            parts.append((kind, sel, owner, rank, st, q, s_next))
        who = np.concatenate([p[1][p[2]] for p in parts])
        sig_all, meets_all = probe(who, np.concatenate([p[5] for p in parts]))
        sig_all = np.asarray(sig_all, dtype=np.float64).reshape(-1)
        meets_all = np.asarray(meets_all, dtype=bool).reshape(-1)
        offset = 0
        ended: list[IntArr] = []
        for kind, sel, owner, rank, st, q, s_next in parts:
            sig = sig_all[offset : offset + q.size]
            mt = meets_all[offset : offset + q.size]
            offset += q.size
            if kind == _DENSE:
                dense(sel, owner, rank, st, q, sig, mt)
                continue
            if kind == _FIRST:
                hit, at, before = _edge(q, mt, rank, st)
                q_before = np.where(before >= 0, q[np.maximum(before, 0)], np.nan)
                fa[sel] = np.where(hit, np.where(before >= 0, q_before + 1, fa[sel]), q[at] + 1)
                fb[sel] = np.where(hit, q[at], fb[sel])
                closed = sel[fa[sel] >= fb[sel]]
                if closed.size:
                    finish(closed)
                continue
            same = sig == sig0[sel][owner]
            # What the probes inside the piece say about meets there.
            pts = sel[owner]
            np.maximum.at(no_hi, pts[same & ~mt], q[same & ~mt])
            np.minimum.at(yes_lo, pts[same & mt], q[same & mt])
            hit, at, before = _edge(q, ~same, rank, st)
            # hit: q[at] is the first probe past the piece: hi_ below it, its values kept.
            h = sel[hit]
            hi_[h] = q[at[hit]] - 1
            sig_next[h], meets_next[h], known_next[h] = sig[at[hit]], mt[at[hit]], True
            moved = before >= 0
            lo_[sel[moved]] = q[before[moved]]
            meets_lo[sel[moved]] = mt[before[moved]]
            if kind == _GALLOP:
                step[sel] = s_next
            elif kind == _BRACKET:
                step[sel] = s_next
                phase[sel] = _GALLOP
            phase[h] = _BISECT
            ended.append(sel[lo_[sel] >= hi_[sel]])
        for e in ended:
            if e.size:
                end_piece(e)
    else:
        raise RuntimeError("piece walk did not converge")
    return first


__all__ = ["first_in_pieces", "first_true", "last_true"]
