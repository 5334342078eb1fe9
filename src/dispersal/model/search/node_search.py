"""The planner's searches over the node count N for one candidate space (`candidates.CandidateSpace`):
the paper's bisection (`bisect`), the exact search (`exact`) with its window, and the compute bound
both prune by (`min_nodes_for`, `ETA_BOUND`). `dispersal.model.search.planner` builds the plans from
their answers; the module docstring there describes the two searches.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import numpy.typing as npt

from dispersal.model.search.bisection import first_in_pieces, first_true
from dispersal.model.search.candidates import CandidateSpace
from dispersal.model.search.plan_result import Metric
from dispersal.model.search.why_not import metric_of

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]


#: Upper bound on the efficiency eta in the compute bound below. eta exceeds 1 where the quality
#: fit's replica term rewards a few replicas over one (default mode: up to 1.043 at 2 nodes in a
#: scan of the catalogue at default parameters; tests/model/test_planner.py checks eta <= this).
#: 1.25 leaves room for the Monte Carlo's and tornado's drawn quality parameters (an assumption).
ETA_BOUND = 1.25


def best_at(space: CandidateSpace, n_per_hw: Arr, metric: Metric, floor: float | None = None) -> Arr:
    """best(N) for every hardware at its own N: the highest metric among valid candidates. With
    `floor` (C_quality, FLOP) only "best(N) >= floor" is exact (`CandidateSpace.run`)."""
    combos = np.arange(len(space.combo_hw))
    r = space.run(combos, np.asarray(n_per_hw, dtype=np.float64)[space.combo_hw], floor=floor)
    m = np.where(r["valid"] > 0, metric_of(r, metric), -np.inf)
    return np.asarray(np.maximum.reduceat(m, space.hw_start), dtype=np.float64)


#: Each candidate space's reference run (`_reference_run`), kept while the space lives: the paper
#: bisection and the exact search of one plan read the same one.
_REFERENCE_RUNS: weakref.WeakKeyDictionary[CandidateSpace, tuple[IntArr, Arr, dict[str, Arr]]] = (
    weakref.WeakKeyDictionary()
)


def _reference_run(space: CandidateSpace) -> tuple[IntArr, Arr, dict[str, Arr]]:
    """(every combo, its reference node count, `run_raw` there): what `node_window` reads."""
    got = _REFERENCE_RUNS.get(space)
    if got is None:
        allc = np.arange(len(space.combo_hw))
        n_ref = space.reference_nodes(allc)
        got = _REFERENCE_RUNS[space] = (allc, n_ref, space.run_raw(allc, n_ref))
    return got


#: Relative widening of the overtraining window in N (`CandidateSpace.node_window` with slack) that
#: the paper's bisection uses to skip candidates outside it: tokens are proportional to the workers
#: (compute-bound by construction of H_min), so the window is exact; the slack covers rounding and
#: the backup-worker factor at N = 1 (1.1). Only which candidates are evaluated, never the result.
BISECT_WINDOW_SLACK = 0.25


def best_of(
    space: CandidateSpace,
    hws: IntArr,
    n: Arr,
    metric: Metric,
    window: tuple[BoolArr, Arr, Arr],
    floor: float | None = None,
) -> Arr:
    """best(N) of hardware `hws` (distinct) at node counts `n` (one per hardware): as `best_at`,
    evaluating only those hardware's candidates whose widened overtraining `window` (usable, lowest
    N, highest N per candidate) holds N (-inf where none does); `floor` as in `best_at`."""
    usable, lo, hi = window
    parts = []
    for h, nh in zip(hws, np.asarray(n, dtype=np.float64), strict=True):
        c = space.combos_of(int(h))
        parts.append(c[~usable[c] | ((lo[c] <= nh) & (nh <= hi[c]))])
    sizes = np.asarray([len(c) for c in parts], dtype=np.int64)
    out = np.full(len(parts), -np.inf)
    if sizes.sum() == 0:
        return out
    r = space.run(np.concatenate(parts), np.repeat(np.asarray(n, dtype=np.float64), sizes), floor=floor)
    m = np.where(r["valid"] > 0, metric_of(r, metric), -np.inf)
    has = sizes > 0
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))[has]
    out[has] = np.maximum.reduceat(m, starts)
    return out


def bisect(space: CandidateSpace, target: float, metric: Metric) -> dict[int, int]:
    """The paper's search, for all hardware at once. Returns {hw index: N} for those that can meet.

    The top of the range is max_nodes (the paper: 100,000), or fewer where the budget buys fewer nodes.
    """
    out: dict[int, int] = {}
    cap = np.maximum(space.n_cap, 1.0)
    # Every best(N) here is only compared with the target: the schedule walk may stop there.
    floor = target if metric is Metric.C_QUALITY else None
    one = best_at(space, np.ones(space.n_hw), metric, floor)
    top = best_at(space, cap, metric, floor)
    active = (one < target) & (top >= target) & (space.n_cap >= 1)

    # Candidates outside their overtraining window at a step's N are invalid there: each step
    # evaluates only the others (the window widened by BISECT_WINDOW_SLACK, so never one too few).
    allc, n_ref, ref = _reference_run(space)
    usable, w_lo, w_hi = space.node_window(ref, allc, n_ref, slack=BISECT_WINDOW_SLACK)

    def meets(sel: IntArr, n: Arr) -> BoolArr:
        # best(N) of the hardware still bisecting only, all of them in one kernel call per step.
        return np.asarray(best_of(space, sel, n, metric, (usable, w_lo, w_hi), floor) >= target)

    lo = first_true(np.where(active, 2.0, cap), cap, meets)
    for h in range(space.n_hw):
        if one[h] >= target and space.n_cap[h] >= 1:
            out[h] = 1
        elif active[h]:
            out[h] = int(lo[h])
    return out


#: Points of the exact search's probe calls (spread over the candidates still searching): a kernel
#: call costs a fixed overhead of about 800 configurations' worth of work (benchmarks/bench_plan.py
#: prints both), and in default mode each probe call also walks the schedules in rounds of calls of
#: their own, so a call with fewer points is mostly overhead. It sets only how many points each call
#: asks about, never which N is found. 8,192 (was 1,024 before the schedule walk): the frontier's four
#: centralized baselines 1.16 -> 1.09 s of CPU (442 -> 339 kernel calls for 775K -> 882K
#: configurations; 4,096: 1.12 s), `plan` unchanged within noise.
EXACT_POINTS_PER_CALL = 8192


def exact_search_window(
    space: CandidateSpace, upper: dict[int, int], *, best_cost: float = math.inf, target: float | None = None
) -> tuple[IntArr, Arr, Arr]:
    """(candidates worth searching, lowest N, highest N per combo) for the exact search.

    N lies in the candidate's overtraining window, at least 1, at most the node cap and at most the
    node count whose cost first exceeds the cheapest answer in `upper` ({hw: N}, the bisection's)
    or `best_cost` (USD, an answer found in another candidate space), whichever is lower. With a
    `target` (FLOP), N is also at least the fewest nodes whose compute could reach it
    (`min_nodes_for`): no candidate meets the target below that, so the search starts there.
    """
    allc, n_ref, ref = _reference_run(space)
    usable, n_lo, n_hi = space.node_window(ref, allc, n_ref)
    best_cost = min(best_cost, min((upper[h] * space.node_cost[h] for h in upper), default=math.inf))
    cap_hw = space.n_cap.copy()
    if math.isfinite(best_cost):
        cap_hw = np.minimum(cap_hw, np.floor(best_cost / space.node_cost) + 1)
    lo_all = np.maximum(n_lo, 1.0)
    if target is not None:
        lo_all = np.maximum(lo_all, min_nodes_for(space, target)[space.combo_hw])
    hi_all = np.minimum(n_hi, cap_hw[space.combo_hw])
    return np.nonzero(usable & (hi_all >= lo_all))[0], lo_all, hi_all


def min_nodes_for(space: CandidateSpace, target: float) -> Arr:
    """Per node type: the fewest nodes whose compute could reach `target` FLOP in the time budget.

    Either metric is at most C_local = 6 P D eta <= N F T ETA_BOUND (F = the node's peak x MFU:
    no run trains faster than its compute allows; eta <= ETA_BOUND), so N >= target / (F T
    ETA_BOUND), rounded up with a 1e-9 margin: the bound `_exact_smaller_nodes` prunes node types by.
    """
    flop = space.hw_inputs["node_peak_flop_per_s"] * space.hw_inputs["mfu"]
    need = target / (flop * space.c.max_duration_s * ETA_BOUND) * (1 - 1e-9)
    return np.asarray(np.maximum(1.0, np.ceil(need)), dtype=np.float64)


def exact(
    space: CandidateSpace,
    target: float,
    metric: Metric,
    upper: dict[int, int],
    best_cost: float = math.inf,
    only: list[int] | None = None,
) -> dict[int, int]:
    """The smallest N meeting the target for each hardware, over every integer N.

    For one candidate (hardware, P, slot) the model's step functions of N are the inner-step count
    H and the regional rounds H_reg (both non-decreasing in N: the straggler factor grows with N),
    so N splits into a few contiguous *pieces* of constant (H, H_reg). Inside a piece nothing jumps:
    tokens grow in proportion to the workers while the efficiency falls smoothly and slowly, so the
    metric rises with N and "meets the target" holds on a final sub-interval of the piece. The
    overtraining window is exact too (tokens are proportional to the worker count, compute-bound by
    construction of H_min). So per candidate: walk the pieces from the left, and in the first piece
    that meets the target at its end, find the first N that does (`bisection.first_in_pieces`; all
    candidates advance together on NumPy arrays, one kernel call per step). Node counts whose cost
    exceeds the paper-bisection answer are never needed, nor node counts at or above the smallest
    one already found for the candidate's hardware. `only`: search these hardware indices alone
    (the others are left out of the answer).
    """
    idx, lo_all, hi_all = exact_search_window(space, upper, best_cost=best_cost, target=target)
    if only is not None:
        idx = idx[np.isin(space.combo_hw[idx], np.asarray(only, dtype=np.int64))]
    if idx.size == 0:
        return {}
    hw_of = space.combo_hw[idx]

    def probe(sel: IntArr, n: Arr) -> tuple[Arr, BoolArr]:
        """(piece signature, meets the target) of candidates sel at node counts n."""
        rr = space.run(idx[sel], n)
        sig = np.asarray(rr["inner_steps"] * 1e6 + rr["regional_rounds"], dtype=np.float64)
        return sig, np.asarray((rr["valid"] > 0) & (metric_of(rr, metric) >= target))

    first = first_in_pieces(lo_all[idx], hi_all[idx], probe, group=hw_of, budget=EXACT_POINTS_PER_CALL)
    result: dict[int, int] = {}
    for h in range(space.n_hw):
        f = first[hw_of == h]
        if f.size and np.isfinite(f.min()):
            result[h] = int(f.min())
    return result


__all__ = [
    "BISECT_WINDOW_SLACK",
    "ETA_BOUND",
    "EXACT_POINTS_PER_CALL",
    "best_at",
    "best_of",
    "bisect",
    "exact",
    "exact_search_window",
    "min_nodes_for",
]
