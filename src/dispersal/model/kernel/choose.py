"""Default mode's schedule choice: the inner steps H (and hierarchical DiLoCo's regional rounds H_reg)
that maximise C_quality, searched over the fixed grid `schedule.SCHEDULE_GRID`.

Why a fixed grid and a maximum, not the paper's "smallest H that hides the sync": that rule makes a
better input give less. Faster compute raises H_min (the sync needs more steps to hide), and the H
penalty can cost more than the extra tokens bring (30 nodes, 10B, MFU 0.2 -> 0.5: H 567 -> 1417, less
C_quality); more bandwidth lowers H_min, and a blocking run then exposes its sync more often (fewer
tokens); on a hierarchical run the regional rounds per global sync jump when the slack nears zero.

Monotonicity (the argument; docs/model_corrections.md, "Schedules that better inputs never hurt"):
for a *fixed* schedule s = (H, H_reg), J(x, s) = C_quality(x, s) is non-decreasing in every better
input x (more bandwidth, lower latency, higher MFU, a faster accelerator): the per-step and sync
times do not grow, so the outer step is no longer, the tokens D no fewer, and C_quality at fixed H,
M and P is non-decreasing in D. The grid G does not depend on x, so for x' better than x,
max_{s in G} J(x', s) >= J(x', s*(x)) >= J(x, s*(x)) = max_{s in G} J(x, s): the run could keep its
old schedule. With requested tokens (``tokens`` > 0) a schedule that misses the time budget ranks
below every one that meets it (and among such, the faster first); the same argument holds.

How it is searched (cheaply): J along the grid is unimodal in practice (tokens rise with H and the
penalty grows with H; `tests/model/test_better_inputs.py` checks the search against the whole grid),
so a steepest-ascent walk from the grid point that hides the sync (the paper's H_min rounded up)
finds the grid maximum after a few evaluations, each only over the configurations still moving.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.codes import ALGO_DILOCO, ALGO_HIERARCHICAL, ALGO_PP_DILOCO, ALGO_SITE_PP
from dispersal.model.kernel import quality
from dispersal.model.kernel.context import Arr, BoolArr, Inputs
from dispersal.model.kernel.schedule import SCHEDULE_GRID

#: What the search reads of every evaluation (beyond what the caller wants).
NEEDED: frozenset[str] = frozenset(
    {
        "c_quality_flop",
        "time_ok",
        "run_time_s",
        "inner_steps",
        "regional_rounds",
        "algorithm_resolved",
        "replicas",
        "outer_step_time_s",
        "step_time_s",
    }
)
#: Algorithms whose H (and H_reg) the choice sets: those that run `schedule.diloco_steps` or the
#: hierarchical pacing. Decoupled DiLoCo keeps its own rule (its learners never wait: H is the link's).
CHOSEN_ALGORITHMS = (ALGO_DILOCO, ALGO_HIERARCHICAL, ALGO_PP_DILOCO, ALGO_SITE_PP)

#: What the floor's bound reads of the first evaluation (`_below_floor_dropped`; the kernel's
#: `requality` arguments): the private ones (a leading underscore) are not public kernel outputs.
BOUND_OUTPUTS: frozenset[str] = frozenset(
    {
        "_tokens_all_compute",
        "_replica_batch_tokens",
        "_merge_rule",
        "_outer_sync",
        "_quality_factor",
        "eta_act",
        "replicas",
        "useful_update_fraction",
    }
)

#: The choice's own private output, for a caller that prunes by it before asking for walks (a
#: maximisation: `analyses.frontier.at_sites`): C_quality, FLOP, that no grid schedule of the
#: configuration exceeds (`schedule_bound`).
SCHEDULE_BOUND = "_schedule_bound"
CHOICE_OUTPUTS: frozenset[str] = frozenset({SCHEDULE_BOUND})

Evaluator = Callable[[Inputs, frozenset[str] | None], dict[str, Arr]]
Requality = Callable[[Inputs, Mapping[str, Arr], Arr, Arr], Arr]


def score(r: Mapping[str, Arr]) -> Arr:
    """The quantity the choice maximises: C_quality (FLOP) where the run meets its time budget, else
    minus the run time (any negative: a schedule that misses the budget ranks below every one
    that meets it, the faster first); NaN (a search's overtraining window) ranks last."""
    q = np.where(r["time_ok"] > 0, r["c_quality_flop"], -r["run_time_s"])
    return np.where(np.isnan(q), -np.inf, q)


def choose(inp: Inputs, want: frozenset[str] | None, once: Evaluator, requality: Requality) -> dict[str, Arr]:
    """Evaluate with `once` (the kernel's single evaluation) and, where default mode's rule applies
    (input ``schedule_rule`` > 0), replace each configuration's results by those of its best grid
    schedule (module docstring). Returns the outputs `want` (None: all).

    With the optional input ``quality_floor`` (FLOP; a search asking only "valid and C_quality >=
    floor?"), a configuration whose first schedule already scores the floor keeps that schedule's
    results, and one whose walk reaches the floor stops there: only ``score >= floor`` is exact for
    them (every other output is that schedule's, not the best one's). `requality`: the kernel's quality
    stage alone at other tokens and penalty H (`kernel.requality`), the floor's bound.

    The private output SCHEDULE_BOUND (asked by name) is each configuration's C_quality bound over every
    grid schedule (`schedule_bound`); with the optional input ``schedule_walk`` 0 a configuration keeps
    its first schedule (no walk): a caller that maximises reads the first schedules and the bounds, then
    walks only the configurations whose bound can beat the best first schedule."""
    floored = inp.has("quality_floor")
    bounded = want is not None and SCHEDULE_BOUND in want
    if want is not None:
        want = want - CHOICE_OUTPUTS
    ask = None if want is None else want | NEEDED | (BOUND_OUTPUTS if floored or bounded else frozenset())
    base = once(inp, ask)
    rule = inp.g("schedule_rule") > 0
    code = base["algorithm_resolved"]
    hier = code == ALGO_HIERARCHICAL
    chosen = quality.code_mask(code, CHOSEN_ALGORITHMS)
    on = rule & chosen & (base["replicas"] > 1) & np.isfinite(score(base))
    h_free = on & (inp.g("inner_steps") <= 0)
    r_free = on & hier
    if inp.has("regional_rounds"):
        r_free &= inp.g("regional_rounds") <= 0
    todo = h_free | r_free
    sb = schedule_bound(inp, todo, h_free, hier, base, requality) if bounded else None
    if inp.has("schedule_walk"):
        todo &= inp.g("schedule_walk") > 0
    if floored:
        # A caller that asks only "does it reach the floor?": a first schedule that already scores
        # the floor answers yes for the best one too (its score is at least as high), so it is kept;
        # one whose bound over every schedule stays below it answers no without a walk.
        todo &= ~(score(base) >= inp.g("quality_floor"))
        if base.keys() >= BOUND_OUTPUTS:
            todo = _below_floor_dropped(inp, todo, h_free, hier, base, requality)
    todo = todo.ravel()
    out = _only(base, want)
    flat = {k: v.reshape(-1) for k, v in out.items()}
    if sb is not None:
        out[SCHEDULE_BOUND] = sb
    if not todo.any():
        return out
    idx = np.flatnonzero(todo)
    ih = np.searchsorted(SCHEDULE_GRID, base["inner_steps"].ravel()[idx])
    ir = np.searchsorted(SCHEDULE_GRID, base["regional_rounds"].ravel()[idx])
    hf, rf = h_free.ravel()[idx], r_free.ravel()[idx]
    h_fixed = np.broadcast_to(inp.g("inner_steps"), inp.shape).ravel()[idx]
    best = score(base).ravel()[idx]
    # A run whose outer step is all compute (every sync hidden: the cycle is H x H_reg inner steps)
    # trains the most tokens any schedule can; a first step that does not lower the H the quality
    # model sees (H, or H x H_reg^gamma hierarchical) keeps the tokens at most the same and the
    # penalty at least the same, so C_quality cannot rise: not tried.
    steps = base["inner_steps"] * np.where(hier, base["regional_rounds"], 1.0)
    bound = (base["outer_step_time_s"] <= steps * base["step_time_s"] * (1 + 1e-12)).ravel()[idx]
    last = SCHEDULE_GRID.size - 1
    # Steepest ascent; `came` is the step that led here (its reverse is known to be no better).
    came_h = np.zeros(idx.size, np.int64)
    came_r = np.zeros(idx.size, np.int64)
    moving = np.ones(idx.size, dtype=bool)
    first = True
    gam = np.where(hier, inp.p.hierarchical_h_exponent, 0.0).ravel()[idx]
    h_now = _penalty_h(hf, h_fixed, ih, ir, gam)
    # A caller that asks only "does it reach the floor?" has its answer once a step reaches it.
    floor = inp.g("quality_floor").ravel()[idx] if inp.has("quality_floor") else None
    # (the directions no configuration here may take are dropped once: a call with no hierarchical
    # run has two, not twelve)
    steps_free = [(free, d_h, d_r) for free, d_h, d_r in DIRECTIONS(hf, rf) if free.any()]
    while moving.any():
        trials: list[tuple[npt.NDArray[np.intp], int, int]] = []
        for free, d_h, d_r in steps_free:
            ph, pr = ih + d_h, ir + d_r
            inside = (ph >= 0) & (ph <= last) & (pr >= 0) & (pr <= last)
            back = (came_h == -d_h) & (came_r == -d_r)  # the reverse of the step that led here
            if first:
                back |= bound & (_penalty_h(hf, h_fixed, ph, pr, gam) >= h_now)
            sel = np.flatnonzero(moving & free & inside & ~back)
            if sel.size:
                trials.append((sel, d_h, d_r))
        if not trials:
            break
        # One evaluation for every trial of this round (the directions side by side).
        sels = np.concatenate([t[0] for t in trials])
        th = np.concatenate([ih[t[0]] + t[1] for t in trials])
        tr = np.concatenate([ir[t[0]] + t[2] for t in trials])
        r = once(_subset(inp, idx[sels], _sched(hf[sels], h_fixed[sels], th, tr)), ask)
        s = score(r)
        nh, nr = ih.copy(), ir.copy()
        at = 0
        for sel, d_h, d_r in trials:  # the directions in turn, so that the best one wins
            part = slice(at, at + sel.size)
            at += sel.size
            up = s[part] > best[sel]
            win = sel[up]
            best[win], nh[win], nr[win] = s[part][up], ih[win] + d_h, ir[win] + d_r
            for k, v in flat.items():
                v[idx[win]] = r[k][part][up]
        moved = (nh != ih) | (nr != ir)
        came_h, came_r = np.where(moved, nh - ih, 0), np.where(moved, nr - ir, 0)
        ih, ir, moving, first = nh, nr, moved, False
        if floor is not None:
            moving &= ~(best >= floor)
    return out


#: Relative margin under the floor before the bound drops a configuration (the bound's tokens and the
#: kernel's own may differ in the last bits, and the Chinchilla inversion is iterative).
BOUND_MARGIN = 1e-6


def _below_floor_dropped(
    inp: Inputs,
    todo: BoolArr,
    h_free: BoolArr,
    hier: BoolArr,
    base: Mapping[str, Arr],
    requality: Requality,
) -> BoolArr:
    """`todo` without the configurations whose C_quality cannot reach the input ``quality_floor`` under
    any schedule. The bound: the configuration's quality stage alone (`requality`) at the tokens of an
    all-compute run (no schedule trains more: an outer step lasts at least its inner steps' compute)
    and the penalty's H at the grid's smallest H and H_reg (the penalty only grows with them), since
    C_quality at fixed H, M and P is non-decreasing in the tokens (module docstring). Not used where a
    schedule-independent time per round remains (a permissionless run's validation time: its useful
    share of the tokens moves with H), nor where `auto` may trade a WAN pipeline for pipelines inside
    the sites as H moves (``nodes_per_site`` > 1: `site_pp_diloco.auto` compares token rates); the
    walk decides those."""
    floor_all = np.broadcast_to(inp.g("quality_floor"), inp.shape).ravel()
    # An infinite floor means "no floor here" (a draw whose metric the kernel does not score).
    idx = np.flatnonzero(todo.ravel() & np.isfinite(floor_all) & _bounded(inp))
    if idx.size == 0:
        return todo
    ceiling = _ceiling(inp, idx, h_free, hier, base, requality)
    out = todo.ravel().copy()
    out[idx[ceiling < floor_all[idx] * (1.0 - BOUND_MARGIN)]] = False
    return out.reshape(todo.shape)


def schedule_bound(
    inp: Inputs, todo: BoolArr, h_free: BoolArr, hier: BoolArr, base: Mapping[str, Arr], requality: Requality
) -> Arr:
    """SCHEDULE_BOUND of every configuration, FLOP: where the choice walks (`todo`), the floor's bound
    (`_below_floor_dropped`) widened by BOUND_MARGIN, or +inf where that bound does not apply; elsewhere
    the first schedule's own C_quality (no walk moves it; -inf where it has none)."""
    out = unwalked_bound(base).ravel()
    walks = todo.ravel()
    out[walks] = np.inf
    idx = np.flatnonzero(walks & _bounded(inp))
    if idx.size:
        out[idx] = _ceiling(inp, idx, h_free, hier, base, requality) / (1.0 - BOUND_MARGIN)
    return out.reshape(inp.shape)


def unwalked_bound(r: Mapping[str, Arr]) -> Arr:
    """SCHEDULE_BOUND of configurations no walk moves (evaluation `r`): their own C_quality, FLOP, and
    -inf where they have none (NaN: outside the overtraining window)."""
    q = np.asarray(r["c_quality_flop"], dtype=np.float64)
    return np.asarray(np.where(np.isnan(q), -np.inf, q), dtype=np.float64)


def _bounded(inp: Inputs) -> BoolArr:
    """Where the floor's bound applies (`_below_floor_dropped`: no permissionless run, no pipelines
    inside the sites), flat."""
    ok = np.ones(int(np.prod(inp.shape)), dtype=bool)
    for name, most in (("trust", 0.0), ("nodes_per_site", 1.0)):
        if inp.has(name):
            ok &= ~(np.broadcast_to(inp.g(name), inp.shape).ravel() > most)
    return ok


def _ceiling(
    inp: Inputs,
    idx: npt.NDArray[np.intp],
    h_free: BoolArr,
    hier: BoolArr,
    base: Mapping[str, Arr],
    requality: Requality,
) -> Arr:
    """The floor's bound at flat indices `idx`: C_quality at an all-compute run's tokens and the
    grid's smallest H and H_reg (`_below_floor_dropped`)."""
    h_fixed = np.broadcast_to(inp.g("inner_steps"), inp.shape).ravel()[idx]
    gam = np.where(hier, inp.p.hierarchical_h_exponent, 0.0).ravel()[idx]
    first = np.zeros(idx.size, dtype=np.intp)
    h_min = _penalty_h(h_free.ravel()[idx], h_fixed, first, first, gam)
    r = {k: np.asarray(base[k]).ravel()[idx] for k in BOUND_OUTPUTS}
    # (the overtraining window would blank a bound that trains more tokens than the real run can)
    sub = _subset(inp, idx, {}, drop=("min_overtraining", "max_overtraining"))
    return requality(sub, r, r["_tokens_all_compute"] * (1.0 + 1e-12), h_min)


def DIRECTIONS(hf: BoolArr, rf: BoolArr) -> tuple[tuple[BoolArr, int, int], ...]:
    """The walk's steps (where free, step in H's grid index, step in H_reg's): each axis alone, and,
    where both are chosen (hierarchical, H automatic), the four diagonals and the four knight's steps
    across them. The two trade against each other along a ridge of about constant H x H_reg that the
    sqrt(2) grid samples unevenly; single-axis and diagonal steps stopped up to 1.1% below the grid
    maximum (219 random hierarchical runs), the knight's steps 9.2e-5 at worst (1,078 runs)."""
    both = hf & rf
    return (
        (hf, -1, 0),
        (hf, 1, 0),
        (rf, 0, -1),
        (rf, 0, 1),
        (both, -1, -1),
        (both, -1, 1),
        (both, 1, -1),
        (both, 1, 1),
        (both, 1, -2),
        (both, -1, 2),
        (both, 2, -1),
        (both, -2, 1),
    )


def _penalty_h(
    hf: BoolArr, h_fixed: Arr, ih: npt.NDArray[np.intp], ir: npt.NDArray[np.intp], gam: Arr
) -> Arr:
    """The H the quality model sees at grid indices (`ih`, `ir`): H x H_reg^gamma (gamma 0 for a flat
    run; `hierarchical.branch`'s ``inner_steps_effective``)."""
    return np.asarray(_grid_h(hf, h_fixed, ih) * _at(ir) ** gam, dtype=np.float64)


def _sched(hf: BoolArr, h_fixed: Arr, ih: npt.NDArray[np.intp], ir: npt.NDArray[np.intp]) -> dict[str, Arr]:
    """A requested schedule: grid H at index `ih` where H is chosen (`hf`; else the requested one) and
    grid H_reg at index `ir` (read by hierarchical runs only)."""
    return {"inner_steps": _grid_h(hf, h_fixed, ih), "regional_rounds": _at(ir)}


def _at(i: npt.NDArray[np.intp]) -> Arr:
    """Grid values at indices `i` (clipped to the grid)."""
    return np.asarray(SCHEDULE_GRID[np.clip(i, 0, SCHEDULE_GRID.size - 1)], dtype=np.float64)


def _grid_h(hf: BoolArr, h_fixed: Arr, ih: npt.NDArray[np.intp]) -> Arr:
    """H: the grid's at index `ih` where H is chosen (`hf`), else the requested one."""
    return np.asarray(np.where(hf, _at(ih), h_fixed), dtype=np.float64)


def _only(r: dict[str, Arr], want: frozenset[str] | None) -> dict[str, Arr]:
    """The outputs `want` of `r` as writable arrays, in `r`'s order."""
    return {k: np.array(v, dtype=np.float64) for k, v in r.items() if want is None or k in want}


def _subset(
    inp: Inputs, flat: npt.NDArray[np.intp], sched: Mapping[str, Arr], drop: tuple[str, ...] = ()
) -> Inputs:
    """The configurations at flat indices `flat` of `inp`'s shape as a 1-D evaluation, with `sched`
    replacing inputs and the optional inputs `drop` left out."""

    # One gather per array: the search's inputs share arrays between names (both link directions,
    # the three latencies, total and active parameters).
    taken: dict[int, Any] = {}

    def take(v: npt.ArrayLike) -> Any:
        got = taken.get(id(v))
        if got is not None:
            return got
        a = np.asarray(v)
        if a.ndim == 0:
            return a
        got = taken[id(v)] = (a if a.shape == inp.shape else np.broadcast_to(a, inp.shape)).reshape(-1)[flat]
        return got

    x = {k: sched[k] if k in sched else take(v) for k, v in inp.x.items() if k not in drop}
    x.update(sched)
    ov = {k: take(v) for k, v in inp.ov.items()}
    q = inp.quality_params
    if isinstance(q, quality.QualitySamples):
        fields = {f.name: getattr(q, f.name) for f in dataclasses.fields(q)}
        q = dataclasses.replace(q, **{k: take(v) for k, v in fields.items() if isinstance(v, np.ndarray)})
    return Inputs(x, inp.p, ov, q, (flat.size,))
