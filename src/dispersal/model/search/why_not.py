"""Why a node type cannot meet a target: its best reachable metric over node counts, and the one-line
reason the planner gives when no hardware reaches the target (planner sec. "infeasible")."""

from __future__ import annotations

import math

import numpy as np

from dispersal.model.inputs import units
from dispersal.model.search.candidates import Arr, CandidateSpace, Constraints
from dispersal.model.search.plan_result import Metric


def metric_of(r: dict[str, Arr], metric: Metric) -> Arr:
    """The target metric's array of kernel outputs `r` (FLOP): C_local or C_quality."""
    return r["c_local_flop"] if metric is Metric.C_LOCAL else r["c_quality_flop"]


# Node counts at which an infeasible hardware's best reachable metric is looked for: with a
# penalty that falls with the replica count, C_quality need not peak at the most nodes allowed.
WHY_NOT_GRID_POINTS = 33


def best_over(space: CandidateSpace, grids: dict[int, Arr], met: Metric) -> dict[int, tuple[float, int]]:
    """{hw: (highest metric among valid candidates over N in grids[hw], at that N)}: one kernel call.

    Ties go to the most nodes; -inf where no candidate is valid at any N of the grid.
    """
    combos, ns, owner = [], [], []
    for h, grid in grids.items():
        cs = space.combos_of(h)
        combos.append(np.repeat(cs, len(grid)))
        ns.append(np.tile(grid, len(cs)))
        owner.append(np.full(len(cs) * len(grid), h))
    c, n, o = np.concatenate(combos), np.concatenate(ns), np.concatenate(owner)
    r = space.run(c, n)
    m = np.where(r["valid"] > 0, metric_of(r, met), -np.inf)
    out: dict[int, tuple[float, int]] = {}
    for h in grids:
        sel = np.flatnonzero(o == h)
        vals, at = m[sel], n[sel]
        best = float(vals.max())
        out[h] = (best, int(at[vals == best].max()))
    return out


def reachable(space: CandidateSpace, hws: list[int], met: Metric) -> dict[int, tuple[float, int]]:
    """{hw: (best reachable metric in FLOP, at N nodes)} for the given hardware, in two kernel calls.

    With a replica penalty that falls with N, the metric need not peak at the most nodes allowed, so
    best = max over N of the highest metric among valid candidates, found on a geometric grid of
    [1, n_cap] (WHY_NOT_GRID_POINTS points) and then on a second such grid between the coarse
    maximum's neighbours. A grid search, so a lower bound on the maximum: within 0.5% of a 3,000-point
    scan for every node type on the default-mode 1e25 / 548-day case.
    """
    if not hws:
        return {}
    cap = np.maximum(space.n_cap, 1.0)
    k = WHY_NOT_GRID_POINTS
    coarse: dict[int, Arr] = {
        h: np.unique(np.round(np.geomspace(1.0, float(cap[h]), k))).astype(np.float64) for h in hws
    }
    first = best_over(space, coarse, met)
    fine: dict[int, Arr] = {}
    for h in hws:
        g = coarse[h]
        i = int(np.searchsorted(g, first[h][1]))
        lo, hi = g[max(i - 1, 0)], g[min(i + 1, len(g) - 1)]
        fine[h] = np.unique(np.round(np.geomspace(float(lo), float(hi), k))).astype(np.float64)
    second = best_over(space, fine, met)
    return {h: max(first[h], second[h]) for h in hws}


def why_not(
    space: CandidateSpace, h: int, reach: tuple[float, int], met: Metric, over_n: bool = False
) -> tuple[str, float]:
    """Why hardware `h` cannot meet the target, and its best reachable metric (FLOP; -inf if none).

    reach = (best metric, at N nodes); over_n: whether it is the maximum over a grid of N
    (`reachable`) rather than the value at the most nodes allowed.
    """
    best, at = reach
    n = int(space.n_cap[h])
    if n < 1:
        return "the budget does not buy one node", -math.inf
    if not math.isfinite(best):
        return (
            f"no configuration satisfies the constraints at {'up to ' if over_n else ''}{n:,} nodes "
            "(memory or overtraining window)",
            -math.inf,
        )
    if at == n:
        return f"at most {best:.3g} FLOP {met.value} with {n:,} nodes in the time budget", best
    # A grid maximum: within ~0.5% of a dense scan on the default 548-day 1e25 case.
    return (
        f"at most about {best:.3g} FLOP {met.value} (near {at:,} of up to {n:,} nodes) in the time budget",
        best,
    )


def binding_reason(
    failures: dict[str, str], closeness: dict[str, float], target: float, met: Metric, c: Constraints
) -> str:
    """One line: what binds, and the three hardware entries that come closest to the target."""
    days = c.max_duration_s / units.SECONDS_PER_DAY
    link = units.format_bandwidth(min(c.bandwidth_up_bits_per_s, c.bandwidth_down_bits_per_s))
    binds = (
        f"the budget ({units.format_money(c.max_cost_usd)}) binds"
        if math.isfinite(c.max_cost_usd)
        else f"the time budget ({days:.4g} days) and the {link} links bind at {c.max_nodes:,} nodes"
    )
    # Stable sort: entries with equal (or no) reachable metric keep catalogue order.
    ranked = sorted(failures, key=lambda k: -closeness.get(k, -math.inf))
    return f"no hardware reaches {target:.3g} FLOP {met.value}: {binds}; closest: " + "; ".join(
        f"{k}: {failures[k]}" for k in ranked[:3]
    )
