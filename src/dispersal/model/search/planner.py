"""The planner: the cheapest way to reach a compute target while every node stays under a regime's
covered-cluster rule (Rahman 2026 sec. 10), with the paper's bisection and an exact search.

Candidates at (hardware, N, P) follow spec/model.md sec. 10: if the model fits one node, flat
Streaming DiLoCo plus hierarchical DiLoCo for each group size n_g with N >= 2 n_g; otherwise
PP-group DiLoCo with S stages and G = floor(N / S) >= 2 groups. H = H_min. Candidates outside
min_overtraining <= OT <= max_overtraining are dropped. The candidate space, its validity rule and
overtraining window live in `dispersal.model.search.candidates` (shared with the Monte Carlo), the
integer bisections in `dispersal.model.search.bisection`. Everything is evaluated with `kernel.evaluate`
on NumPy arrays: one call per bisection step for all hardware at once, and one call per chunk of
(candidate, N) pairs in the exact search.

Two searches over the node count N:
- ``bisect`` (the paper's): per hardware, if one node meets the target take it; else if
  best(max_nodes) misses, infeasible; else bisect lo = 2, hi = max_nodes on "best(N) meets".
  It assumes the best metric rises with N, which it does not: the overtraining window and the
  memory cap open and close ranges of N, so it can skip a cheap window.
- ``exact``: the smallest N that meets the target for each hardware, found by evaluating every
  integer N inside each candidate's overtraining window up to the best cost found so far. Under the
  model this is the true optimum over the candidate set (cost rises with N for a given node type).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import regime
from dispersal.model.inputs.codes import ALGO_HIERARCHICAL, ALGORITHM_NAMES
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import SCENARIO_ALGORITHM, Mode, Scenario
from dispersal.model.kernel.estimate import estimate
from dispersal.model.search.bisection import first_in_pieces, first_true
from dispersal.model.search.candidates import (
    PAPER_GROUP_SIZES,
    PAPER_PARAM_GRID_B,
    CandidateSpace,
    Constraints,
    NodeType,
    hardware_variants,
    make_space,
)

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]


class Metric(StrEnum):
    """Which compute a target is measured in."""

    C_LOCAL = "c_local"
    C_QUALITY = "c_quality"


class Objective(StrEnum):
    """What the planner minimises."""

    COST = "cost"
    NODES = "nodes"
    TIME = "time"


class Search(StrEnum):
    """How the node count is searched."""

    BISECT = "bisect"
    EXACT = "exact"


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanOption:
    """One concrete configuration: a Scenario that `estimate()` reproduces, and its key figures."""

    scenario: Scenario
    hardware: str
    precision: str
    chips_per_node: int
    nodes: int
    params: float
    tokens: float
    days: float
    algorithm: str
    group_size: int
    pipeline_stages: int
    groups: int
    inner_steps: int
    inner_steps_effective: float
    compression_ratio: float
    cost_usd: float
    c_local_flop: float
    c_quality_flop: float
    overtraining_ratio: float
    mean_wan_mbps_per_node: float
    peak_wan_mbps_per_node: float
    efficiency: dict[str, float]

    @property
    def label(self) -> str:
        """E.g. '16x H100_SXM FP8'."""
        return f"{self.chips_per_node}x {self.hardware} {self.precision.upper()}"

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-ready dict (efficiency factors by name at the top level too)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "scenario"}
        d["scenario"] = self.scenario.to_dict()
        d.update(self.efficiency)
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """The planner's answer for one target."""

    target_flop: float
    metric: str
    regime: str
    mode: str
    search: str
    objective: str
    feasible: bool
    best: PlanOption | None
    per_hardware: tuple[PlanOption, ...]
    """The best option of each hardware type that can meet the target (runners-up), cheapest first."""
    failures: dict[str, str] = field(default_factory=dict)
    """Why each other hardware type could not meet it."""
    reasons: tuple[str, ...] = ()
    evaluations: int = 0
    """Configurations evaluated."""
    centralized: Plan | None = None
    """The centralized baseline (`centralized_baseline`) of the same target, when `plan(...,
    baseline=True)` computed it; None otherwise."""

    @property
    def centralized_cost_usd(self) -> float | None:
        """Cost of the centralized baseline's best plan (None if not computed or infeasible)."""
        cb = self.centralized.best if self.centralized is not None else None
        return cb.cost_usd if cb is not None else None

    @property
    def cost_premium(self) -> float | None:
        """The evader's cost premium: best.cost_usd / the centralized baseline's cost (None if
        either is missing)."""
        base = self.centralized_cost_usd
        return self.best.cost_usd / base if (self.best is not None and base is not None) else None

    @property
    def extrapolation(self) -> tuple[str, ...]:
        """Where the best plan lies outside the quality fit's evidence (replicas, H, model size,
        fragments, compression), each with the fitted range; empty when infeasible."""
        if self.best is None:
            return ()
        return estimate(self.best.scenario, mode=self.mode).extrapolation

    def to_dict(self) -> dict[str, Any]:
        """JSON: the best option's fields at the top level, plus runners-up and failures, and
        (when computed) centralized_cost_usd, cost_premium and the centralized best option."""
        d: dict[str, Any] = {
            "feasible": self.feasible,
            "target_flop": self.target_flop,
            "metric": self.metric,
            "regime": self.regime,
            "mode": self.mode,
            "search": self.search,
            "objective": self.objective,
            "reasons": list(self.reasons),
            "evaluations": self.evaluations,
        }
        if self.best is not None:
            d.update(self.best.to_dict())
        d["extrapolation"] = list(self.extrapolation)
        d["runners_up"] = [o.to_dict() for o in self.per_hardware]
        d["failures"] = dict(self.failures)
        if self.centralized is not None:
            cb = self.centralized.best
            d["centralized_cost_usd"] = self.centralized_cost_usd
            d["cost_premium"] = self.cost_premium
            d["centralized"] = cb.to_dict() if cb is not None else None
        return d


def _metric(r: dict[str, Arr], metric: Metric) -> Arr:
    return r["c_local_flop"] if metric is Metric.C_LOCAL else r["c_quality_flop"]


def _best_at(space: CandidateSpace, n_per_hw: Arr, metric: Metric) -> Arr:
    """best(N) for every hardware at its own N: the highest metric among valid candidates."""
    combos = np.arange(len(space.combo_hw))
    r = space.run(combos, np.asarray(n_per_hw, dtype=np.float64)[space.combo_hw])
    m = np.where(r["valid"] > 0, _metric(r, metric), -np.inf)
    return np.asarray(np.maximum.reduceat(m, space.hw_start), dtype=np.float64)


def reachable_by_nodes(
    space: CandidateSpace, node_counts: Sequence[float] | Arr, metric: Metric = Metric.C_QUALITY
) -> Arr:
    """The best metric (FLOP) reachable with at most N nodes of each hardware: shape (len(N), n_hw).

    The monotone floor of issue 21: with N sites an operator may leave sites idle, so the best
    reachable with N sites is max over N' <= N (of `node_counts`) of best(N'), the highest metric
    among valid candidates at N' nodes (-inf where none is valid). Non-decreasing in N by
    construction. The cheapest-plan searches need no change for it: the smallest N whose floor
    meets a target is the smallest N whose own best does (the exact search walks every N), and
    idle sites only add cost. `node_counts` must be ascending."""
    ns = np.asarray(node_counts, dtype=np.float64)
    if ns.ndim != 1 or ns.size == 0 or np.any(np.diff(ns) < 0) or ns[0] < 1:
        raise InputError("node_counts", "must be a non-empty ascending list of node counts >= 1")
    best = np.stack([_best_at(space, np.full(space.n_hw, n), metric) for n in ns])
    return np.asarray(np.maximum.accumulate(best, axis=0), dtype=np.float64)


def _final_at(space: CandidateSpace, hw: int, n: int, target: float, metric: Metric) -> int | None:
    """final(N, target): among valid candidates meeting the target, the highest C_quality (if none,
    the highest metric). Returns a combo index or None. Flat precedes hierarchical on ties."""
    combos = space.combos_of(hw)
    r = space.run(combos, float(n))
    valid = r["valid"] > 0
    if not valid.any():
        return None
    m = _metric(r, metric)
    meets = valid & (m >= target)
    score = np.where(meets, r["c_quality_flop"], -np.inf) if meets.any() else np.where(valid, m, -np.inf)
    return int(combos[int(np.argmax(score))])


def _bisect(space: CandidateSpace, target: float, metric: Metric) -> dict[int, int]:
    """The paper's search, for all hardware at once. Returns {hw index: N} for those that can meet.

    The top of the range is max_nodes (the paper: 100,000), or fewer where the budget buys fewer nodes.
    """
    out: dict[int, int] = {}
    cap = np.maximum(space.n_cap, 1.0)
    one = _best_at(space, np.ones(space.n_hw), metric)
    top = _best_at(space, cap, metric)
    active = (one < target) & (top >= target) & (space.n_cap >= 1)

    def meets(sel: IntArr, n: Arr) -> BoolArr:
        # best(N) is evaluated for every hardware at once (one kernel call per step); only the
        # hardware still bisecting is read.
        n_all = np.ones(space.n_hw)
        n_all[sel] = n
        return np.asarray(_best_at(space, n_all, metric)[sel] >= target)

    lo = first_true(np.where(active, 2.0, cap), cap, meets)
    for h in range(space.n_hw):
        if one[h] >= target and space.n_cap[h] >= 1:
            out[h] = 1
        elif active[h]:
            out[h] = int(lo[h])
    return out


#: Points of the exact search's probe calls (spread over the candidates still searching): a kernel
#: call costs a fixed overhead of about 800 configurations' worth of work (benchmarks/bench_plan.py
#: prints both), so a call with fewer points is mostly overhead. It sets only how many points each
#: call asks about, never which N is found.
EXACT_POINTS_PER_CALL = 1024


def exact_search_window(space: CandidateSpace, upper: dict[int, int]) -> tuple[IntArr, Arr, Arr]:
    """(candidates worth searching, lowest N, highest N per combo) for the exact search.

    N lies in the candidate's overtraining window, at least 1, at most the node cap and at most the
    node count whose cost first exceeds the cheapest answer in `upper` ({hw: N}, the bisection's).
    """
    allc = np.arange(len(space.combo_hw))
    n_ref = space.reference_nodes(allc)
    usable, n_lo, n_hi = space.node_window(space.run_raw(allc, n_ref), allc, n_ref)
    best_cost = min((upper[h] * space.node_cost[h] for h in upper), default=math.inf)
    cap_hw = space.n_cap.copy()
    if math.isfinite(best_cost):
        cap_hw = np.minimum(cap_hw, np.floor(best_cost / space.node_cost) + 1)
    lo_all = np.maximum(n_lo, 1.0)
    hi_all = np.minimum(n_hi, cap_hw[space.combo_hw])
    return np.nonzero(usable & (hi_all >= lo_all))[0], lo_all, hi_all


def _exact(space: CandidateSpace, target: float, metric: Metric, upper: dict[int, int]) -> dict[int, int]:
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
    one already found for the candidate's hardware.
    """
    idx, lo_all, hi_all = exact_search_window(space, upper)
    if idx.size == 0:
        return {}
    hw_of = space.combo_hw[idx]

    def probe(sel: IntArr, n: Arr) -> tuple[Arr, BoolArr]:
        """(piece signature, meets the target) of candidates sel at node counts n."""
        rr = space.run(idx[sel], n)
        sig = np.asarray(rr["inner_steps"] * 1e6 + rr["regional_rounds"], dtype=np.float64)
        return sig, np.asarray((rr["valid"] > 0) & (_metric(rr, metric) >= target))

    first = first_in_pieces(lo_all[idx], hi_all[idx], probe, group=hw_of, budget=EXACT_POINTS_PER_CALL)
    result: dict[int, int] = {}
    for h in range(space.n_hw):
        f = first[hw_of == h]
        if f.size and np.isfinite(f.min()):
            result[h] = int(f.min())
    return result


def plan(
    target_flop: float,
    *,
    regime_name: str = "treaty",
    constraints: Constraints | None = None,
    mode: Mode | str = Mode.DEFAULT,
    metric: Metric | str | None = None,
    objective: Objective | str = Objective.COST,
    search: Search | str | None = None,
    params: ModelParams = DEFAULT_PARAMS,
    params_grid: Sequence[float] | None = None,
    group_sizes: Sequence[int] = PAPER_GROUP_SIZES,
    baseline: bool = False,
) -> Plan:
    """The cheapest (or fewest-node, or fastest) configuration reaching `target_flop` under a regime.

    Args:
        target_flop: compute to reach, FLOP of `metric` (C_local or C_quality).
        regime_name: whose covered-cluster rule every node must stay under.
        constraints: links, time budget, hardware list, overtraining window, budget.
        mode: "paper" or "default"; metric defaults to c_local (paper) / c_quality (default);
            search defaults to bisect (paper) / exact (default).
        objective: cost (default), nodes, or time (shortest duration on a grid of 24 durations up to
            max_duration_s whose plan fits max_cost_usd).
        baseline: also plan the centralized baseline (`centralized_baseline`, same constraints,
            mode, metric, search and params) and attach it, giving `Plan.cost_premium`.

    Returns:
        A Plan; infeasible targets give ``feasible=False`` with the binding reason.
    """
    require(
        isinstance(target_flop, int | float) and math.isfinite(target_flop) and target_flop > 0,
        "target",
        f"must be a positive number of FLOP, got {target_flop!r}",
    )
    m = Mode(mode)
    c = constraints or Constraints()
    try:
        met = (
            Metric(metric)
            if metric is not None
            else (Metric.C_LOCAL if m is Mode.PAPER else Metric.C_QUALITY)
        )
        obj = Objective(objective)
        srch = Search(search) if search is not None else (Search.BISECT if m is Mode.PAPER else Search.EXACT)
    except ValueError as exc:
        raise InputError("plan", str(exc)) from None
    regime(regime_name)
    if obj is Objective.TIME:
        out = _plan_fastest(target_flop, regime_name, c, m, met, srch, params, params_grid, group_sizes)
    else:
        space = make_space(m, c, regime_name, params, params_grid, group_sizes)
        found = _bisect(space, target_flop, met)
        if srch is Search.EXACT:
            found = _exact(space, target_flop, met, found)
        out = _make_plan(space, found, target_flop, regime_name, m, met, obj, srch)
    if baseline:
        base = centralized_baseline(
            target_flop, constraints=c, mode=m, metric=met, search=srch, params=params
        )
        out = dataclasses.replace(out, centralized=base)
    return out


def compare_searches(
    target_flop: float,
    *,
    regime_name: str = "treaty",
    constraints: Constraints | None = None,
    mode: Mode | str = Mode.PAPER,
    metric: Metric | str | None = None,
    params: ModelParams = DEFAULT_PARAMS,
) -> dict[str, Plan]:
    """The paper's bisection and the exact search on the same candidate set: {"bisect": .., "exact": ..}.

    One candidate set is built and the bisection's answer bounds the exact search, so this costs
    little more than the exact search alone. Used by `dispersal reproduce`.
    """
    require(
        math.isfinite(target_flop) and target_flop > 0, "target", f"must be > 0 FLOP, got {target_flop!r}"
    )
    m = Mode(mode)
    c = constraints or Constraints()
    met = Metric(metric) if metric is not None else (Metric.C_LOCAL if m is Mode.PAPER else Metric.C_QUALITY)
    space = make_space(m, c, regime_name, params, None, PAPER_GROUP_SIZES)
    found_b = _bisect(space, target_flop, met)
    found_e = _exact(space, target_flop, met, found_b)
    return {
        "bisect": _make_plan(space, found_b, target_flop, regime_name, m, met, Objective.COST, Search.BISECT),
        "exact": _make_plan(space, found_e, target_flop, regime_name, m, met, Objective.COST, Search.EXACT),
    }


def _make_plan(
    space: CandidateSpace,
    found: dict[int, int],
    target_flop: float,
    regime_name: str,
    m: Mode,
    met: Metric,
    obj: Objective,
    srch: Search,
) -> Plan:
    options: list[PlanOption] = []
    failures: dict[str, str] = {}
    closeness: dict[str, float] = {}
    unmet = [h for h in range(space.n_hw) if h not in found]
    # best(N) at the most nodes allowed: one kernel call. The grid over N (_reachable) costs ~30x
    # that and is only needed to rank the closest hardware when nothing meets the target.
    top = _best_at(space, np.maximum(space.n_cap, 1.0), met) if unmet else np.zeros(0)
    reach = {h: (float(top[h]), int(space.n_cap[h])) for h in unmet}
    for h in range(space.n_hw):
        label = _label(space, h)
        if h not in found:
            failures[label], closeness[label] = _why_not(space, h, reach[h], met)
            continue
        pick = _final_at(space, h, found[h], target_flop, met)
        if pick is None:
            failures[label] = "no valid candidate at the node count found"
            continue
        opt = _option(space, h, found[h], pick, m)
        if _metric_value(opt, met) < target_flop * (1 - 1e-9):
            closeness[label] = _metric_value(opt, met)
            failures[label] = f"best reachable {met.value} {closeness[label]:.3g} FLOP < target"
            continue
        options.append(opt)
    key = (
        (lambda o: (o.nodes, o.cost_usd))
        if obj is Objective.NODES
        else (lambda o: (o.cost_usd, -o.c_quality_flop))
    )
    options.sort(key=key)
    reasons: tuple[str, ...] = ()
    if not options:
        for h, r in _reachable(space, unmet, met).items():
            label = _label(space, h)
            failures[label], closeness[label] = _why_not(space, h, r, met, over_n=True)
        reasons = (_binding_reason(failures, closeness, target_flop, met, space.c),)
    return Plan(
        target_flop=float(target_flop),
        metric=met.value,
        regime=regime_name,
        mode=m.value,
        search=srch.value,
        objective=obj.value,
        feasible=bool(options),
        best=options[0] if options else None,
        per_hardware=tuple(options),
        failures=failures,
        reasons=reasons,
        evaluations=space.evaluations,
    )


def _label(space: CandidateSpace, h: int) -> str:
    v = space.variants[h]
    return f"{v.chips}x {v.name} {v.precision.value}"


def _metric_value(o: PlanOption, met: Metric) -> float:
    return o.c_local_flop if met is Metric.C_LOCAL else o.c_quality_flop


# Node counts at which an infeasible hardware's best reachable metric is looked for: with a
# penalty that falls with the replica count, C_quality need not peak at the most nodes allowed.
WHY_NOT_GRID_POINTS = 33


def _best_over(space: CandidateSpace, grids: dict[int, Arr], met: Metric) -> dict[int, tuple[float, int]]:
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
    m = np.where(r["valid"] > 0, _metric(r, met), -np.inf)
    out: dict[int, tuple[float, int]] = {}
    for h in grids:
        sel = np.flatnonzero(o == h)
        vals, at = m[sel], n[sel]
        best = float(vals.max())
        out[h] = (best, int(at[vals == best].max()))
    return out


def _reachable(space: CandidateSpace, hws: list[int], met: Metric) -> dict[int, tuple[float, int]]:
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
    first = _best_over(space, coarse, met)
    fine: dict[int, Arr] = {}
    for h in hws:
        g = coarse[h]
        i = int(np.searchsorted(g, first[h][1]))
        lo, hi = g[max(i - 1, 0)], g[min(i + 1, len(g) - 1)]
        fine[h] = np.unique(np.round(np.geomspace(float(lo), float(hi), k))).astype(np.float64)
    second = _best_over(space, fine, met)
    return {h: max(first[h], second[h]) for h in hws}


def _why_not(
    space: CandidateSpace, h: int, reach: tuple[float, int], met: Metric, over_n: bool = False
) -> tuple[str, float]:
    """Why hardware `h` cannot meet the target, and its best reachable metric (FLOP; -inf if none).

    reach = (best metric, at N nodes); over_n: whether it is the maximum over a grid of N
    (_reachable) rather than the value at the most nodes allowed.
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


def _binding_reason(
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


def _option(space: CandidateSpace, h: int, n: int, combo: int, m: Mode) -> PlanOption:
    pi, slot = int(space.combo_p[combo]), int(space.combo_slot[combo])
    r = space.run(np.asarray([combo]), float(n))
    v = {k: float(np.asarray(val).reshape(-1)[0]) for k, val in r.items()}
    algo_code = int(v["algorithm_resolved"])
    algo = SCENARIO_ALGORITHM[algo_code]
    base = space.base_scenarios[h]
    group = int(space.slot_group[slot])
    scen = base.replace(
        name=f"plan: {ALGORITHM_NAMES[algo_code]} on {n} x {base.hardware}",
        num_nodes=n,
        params=float(space.params_grid[pi]),
        algorithm=algo,
        group_size=group,
    )
    return PlanOption(
        scenario=scen,
        hardware=base.hardware,
        precision=base.precision.value,
        chips_per_node=base.chips_per_node,
        nodes=n,
        params=float(space.params_grid[pi]),
        tokens=v["tokens"],
        days=v["run_time_s"] / units.SECONDS_PER_DAY,
        algorithm=ALGORITHM_NAMES[algo_code],
        group_size=group if algo_code == ALGO_HIERARCHICAL else 0,
        pipeline_stages=int(v["pipeline_stages"]),
        groups=int(v["groups"]),
        inner_steps=int(v["inner_steps"]),
        inner_steps_effective=v["inner_steps_effective"],
        compression_ratio=base.compression_ratio,
        cost_usd=v["cost_usd"],
        c_local_flop=v["c_local_flop"],
        c_quality_flop=v["c_quality_flop"],
        overtraining_ratio=v["overtraining_ratio"],
        mean_wan_mbps_per_node=v["mean_up_bits_per_s"] / 1e6,
        peak_wan_mbps_per_node=v["peak_up_bits_per_s"] / 1e6,
        efficiency={k: v[k] for k in ("eta_h", "eta_comp", "eta_act", "eta_rep", "eta", "chi")},
    )


def _plan_fastest(
    target: float,
    regime_name: str,
    c: Constraints,
    m: Mode,
    met: Metric,
    srch: Search,
    params: ModelParams,
    params_grid: Sequence[float] | None,
    group_sizes: Sequence[int],
) -> Plan:
    """Objective time: the shortest duration (geometric grid, 30 days .. max) with a plan under budget."""
    days_max = c.max_duration_s / units.SECONDS_PER_DAY
    grid = sorted({*np.geomspace(min(30.0, days_max), days_max, 24).tolist(), days_max})
    last: Plan | None = None
    total = 0
    for d in grid:
        p = plan(
            target,
            regime_name=regime_name,
            constraints=c.replace(max_duration_s=d * units.SECONDS_PER_DAY),
            mode=m,
            metric=met,
            objective=Objective.COST,
            search=srch,
            params=params,
            params_grid=params_grid,
            group_sizes=group_sizes,
        )
        total += p.evaluations
        last = p
        if p.feasible:
            return dataclasses.replace(p, objective=Objective.TIME.value, evaluations=total)
    assert last is not None
    return dataclasses.replace(last, objective=Objective.TIME.value, evaluations=total)


#: The centralized baseline's interconnect: the paper's datacenter row (1000 Gbps, 0.1 ms one-way,
#: modelling InfiniBand/NVLink inside one facility; Rahman 2026 bandwidth sensitivity table).
DATACENTER_BITS_PER_S = 1000e9
DATACENTER_LATENCY_S = 1e-4


def centralized_baseline(
    target_flop: float,
    *,
    constraints: Constraints | None = None,
    mode: Mode | str = Mode.DEFAULT,
    metric: Metric | str | None = None,
    search: Search | str | None = None,
    params: ModelParams = DEFAULT_PARAMS,
) -> Plan:
    """The same target trained in one cluster: no covered-cluster rule (8-chip servers), datacenter
    interconnect (1000 Gbps, 0.1 ms), no pseudo-gradient compression, same time budget and hardware
    list. The evader's cost premium, plan(...).best.cost_usd / this plan's cost, is
    `plan(..., baseline=True).cost_premium`."""
    c = (constraints or Constraints()).replace(
        bandwidth_up_bits_per_s=DATACENTER_BITS_PER_S,
        bandwidth_down_bits_per_s=DATACENTER_BITS_PER_S,
        latency_s=DATACENTER_LATENCY_S,
        compression_ratio=1.0,
        regional_bandwidth_bits_per_s=None,
        pp_bandwidth_bits_per_s=None,
    )
    return plan(
        target_flop, regime_name="none", constraints=c, mode=mode, metric=metric, search=search, params=params
    )


__all__ = [
    "DATACENTER_BITS_PER_S",
    "DATACENTER_LATENCY_S",
    "PAPER_GROUP_SIZES",
    "PAPER_PARAM_GRID_B",
    "Constraints",
    "Metric",
    "NodeType",
    "Objective",
    "Plan",
    "PlanOption",
    "Search",
    "centralized_baseline",
    "compare_searches",
    "hardware_variants",
    "plan",
]
