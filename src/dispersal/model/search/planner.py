"""The planner: the cheapest way to reach a compute target while every node stays under a regime's
covered-cluster rule (Rahman 2026 sec. 10), with the paper's bisection and an exact search.

Candidates at (hardware, N, P) follow spec/model.md sec. 10: if the model fits one node, flat
Streaming DiLoCo plus hierarchical DiLoCo for each group size n_g with N >= 2 n_g; otherwise
PP-group DiLoCo with S stages and G = floor(N / S) >= 2 groups. H = H_min. Candidates outside
min_overtraining <= OT <= max_overtraining are dropped. The candidate space, its validity rule and
overtraining window live in `dispersal.model.search.candidates` (shared with the Monte Carlo), the
two searches over N for one candidate space in `dispersal.model.search.node_search`, the integer
bisections in `dispersal.model.search.bisection`. Everything is evaluated with `kernel.evaluate`
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

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import regime
from dispersal.model.inputs.codes import ALGO_HIERARCHICAL, ALGORITHM_NAMES
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import SCENARIO_ALGORITHM, Mode
from dispersal.model.search.candidates import (
    PAPER_GROUP_SIZES,
    PAPER_PARAM_GRID_B,
    CandidateSpace,
    Constraints,
    NodeType,
    hardware_variants,
    make_space,
)
from dispersal.model.search.node_search import (
    BISECT_WINDOW_SLACK,
    ETA_BOUND,
    EXACT_POINTS_PER_CALL,
    exact_search_window,
    min_nodes_for,
)
from dispersal.model.search.node_search import best_at as _best_at
from dispersal.model.search.node_search import bisect as _bisect
from dispersal.model.search.node_search import exact as _exact
from dispersal.model.search.plan_result import Metric, Objective, Plan, PlanOption, Search
from dispersal.model.search.why_not import (
    WHY_NOT_GRID_POINTS,
    best_over,
    binding_reason,
    metric_of,
    reachable,
    why_not,
)

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]


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


def _picks_and_options(
    space: CandidateSpace,
    hws: list[int],
    found: dict[int, int],
    target: float,
    metric: Metric,
    m: Mode,
    memo: dict[tuple[int, int, int], tuple[int | None, PlanOption | None]],
) -> None:
    """final(N, target) and its plan option for hardware `hws` at their node counts `found`, in two
    kernel calls (all picks, then all options with every output) instead of two per hardware; into
    `memo` as (pick, option), (None, None) where no candidate is valid."""
    if not hws:
        return
    parts = [space.combos_of(h) for h in hws]
    sizes = [len(c) for c in parts]
    r = space.run(np.concatenate(parts), np.repeat([float(found[h]) for h in hws], sizes))
    picks: dict[int, int] = {}
    start = 0
    for h, c, k in zip(hws, parts, sizes, strict=True):
        pick = _pick(c, {key: val[start : start + k] for key, val in r.items()}, target, metric)
        start += k
        if pick is None:
            memo[(id(space), h, found[h])] = (None, None)
        else:
            picks[h] = pick
    if not picks:
        return
    rows = space.run(
        np.asarray(list(picks.values()), dtype=np.int64),
        np.asarray([float(found[h]) for h in picks]),
        every_output=True,
    )
    for i, (h, pick) in enumerate(picks.items()):
        row = {key: np.asarray(val).reshape(-1)[i : i + 1] for key, val in rows.items()}
        memo[(id(space), h, found[h])] = (pick, _option(space, h, found[h], pick, m, row))


def _pick(combos: IntArr, r: dict[str, Arr], target: float, metric: Metric) -> int | None:
    """final(N, target) among `combos` from their kernel outputs `r` (with validity): among valid
    candidates meeting the target, the highest C_quality (if none, the highest metric). Returns a
    combo index or None. Flat precedes hierarchical on ties (the first maximum)."""
    valid = r["valid"] > 0
    if not valid.any():
        return None
    mv = metric_of(r, metric)
    meets = valid & (mv >= target)
    score = np.where(meets, r["c_quality_flop"], -np.inf) if meets.any() else np.where(valid, mv, -np.inf)
    return int(combos[int(np.argmax(score))])


#: Plans kept (`plan` answers a repeated question from memory: the Monte Carlo's nominal plan, the
#: countermeasures' repeated baseline, the CLI's table and samples of one target). Plans are frozen;
#: every input of the key is an immutable value.
PLAN_CACHE_SIZE = 256
_PLANS: dict[tuple[object, ...], Plan] = {}


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
    grid = None if params_grid is None else tuple(float(v) for v in params_grid)
    key = (float(target_flop), regime_name, c, m, met, obj, srch, params, grid, tuple(group_sizes))
    out = _PLANS.get(key)
    if out is None:
        if obj is Objective.TIME:
            out = _plan_fastest(target_flop, regime_name, c, m, met, srch, params, grid, group_sizes)
        else:
            space = make_space(m, c, regime_name, params, grid, group_sizes)
            found = _bisect(space, target_flop, met)
            searched = [(space, found)]
            if srch is Search.EXACT:
                searched = [(space, _exact_at_cap(space, target_flop, met, found))]
                if obj is Objective.COST:
                    searched += _exact_smaller_nodes(
                        searched[0], target_flop, met, regime_name, grid, group_sizes
                    )
            out = _make_plan(searched, target_flop, regime_name, m, met, obj, srch)
        _PLANS[key] = out
        while len(_PLANS) > PLAN_CACHE_SIZE:
            del _PLANS[next(iter(_PLANS))]
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
    exact = [(space, _exact(space, target_flop, met, found_b))]
    exact += _exact_smaller_nodes(exact[0], target_flop, met, regime_name, None, PAPER_GROUP_SIZES)
    # One memo for both plans: where both searches found the same N, one pick and one option.
    memo: dict[tuple[int, int, int], tuple[int | None, PlanOption | None]] = {}
    return {
        "bisect": _make_plan(
            [(space, found_b)], target_flop, regime_name, m, met, Objective.COST, Search.BISECT, memo
        ),
        "exact": _make_plan(exact, target_flop, regime_name, m, met, Objective.COST, Search.EXACT, memo),
    }


def _exact_at_cap(space: CandidateSpace, target: float, met: Metric, found: dict[int, int]) -> dict[int, int]:
    """The exact search in the regime-cap space, given the paper bisection's answers `found`.

    With an answer, its cost bounds the walk. Without one there is no cost ceiling and the walk
    would cover every candidate's whole window (most of `dispersal counter`'s time, where the
    countermeasures make targets unreachable), so the node types are screened first (`_screen`,
    as for node sizes below the cap) and only those within SCREEN_MARGIN of the target are walked.
    """
    if found:
        return _exact(space, target, met, found)
    keep = _screen(space, target, met)
    return _exact(space, target, met, {}, only=keep) if keep else {}


#: Node types (accelerator, precision, size) per candidate space in the exact search's walk over
#: node sizes below the cap: each batch is one space, searched with the cheapest cost found so far.
SIZE_BATCH = 24


def _exact_smaller_nodes(
    first: tuple[CandidateSpace, dict[int, int]],
    target: float,
    met: Metric,
    regime_name: str,
    params_grid: Sequence[float] | None,
    group_sizes: Sequence[int],
) -> list[tuple[CandidateSpace, dict[int, int]]]:
    """The exact search over node sizes other than the regime's cap (`candidates.node_sizes`).

    `first` is the search at the cap. Every other size k of each (accelerator, precision) is a node
    type of its own. A lower bound on its cost: the metric never exceeds the compute the chips can
    deliver in the time budget (C_quality <= C_local = 6 P D eta <= N k F T, F = peak x MFU per
    chip; checked in tests), so N >= target / (k F T) and cost >= that N x the node's cost. Node
    types are searched in batches in order of that bound, each with the cheapest cost found so
    far as its ceiling, and stop once the bound passes it: exact over the ladder, since no skipped
    node type could be cheaper.
    """
    space, found = first
    c = space.c
    if c.chips_per_node is not None:
        return []
    extra = hardware_variants(space.mode, c, regime_name, all_sizes=True)
    if not extra:
        return []
    best = min((found[h] * float(space.node_cost[h]) for h in found), default=math.inf)
    per_chip: dict[tuple[str, str], tuple[float, float]] = {}
    for h, v in enumerate(space.variants):
        flop = float(space.hw_inputs["node_peak_flop_per_s"][h] * space.hw_inputs["mfu"][h])
        per_chip[(v.name, v.precision.value)] = (float(space.node_cost[h]) / v.chips, flop / v.chips)
    bounds = []
    for v in extra:
        usd, flop = per_chip[(v.name, v.precision.value)]
        n_min = max(1.0, math.ceil(target / (v.chips * flop * c.max_duration_s * ETA_BOUND) * (1 - 1e-9)))
        bounds.append(math.inf if n_min > c.max_nodes else n_min * v.chips * usd)
    order = sorted(range(len(extra)), key=lambda i: bounds[i])
    out: list[tuple[CandidateSpace, dict[int, int]]] = []
    for start in range(0, len(order), SIZE_BATCH):
        batch = [i for i in order[start : start + SIZE_BATCH] if bounds[i] <= best * (1 + 1e-9)]
        if not batch:
            break
        sp = make_space(
            space.mode, c, regime_name, space.p, params_grid, group_sizes, [extra[i] for i in batch]
        )
        # A ceiling for the batch: the cheapest cost so far, else the paper's bisection's answer.
        upper = {} if math.isfinite(best) else _bisect(sp, target, met)
        if not math.isfinite(best) and not upper:
            # Nothing found yet, so no cost ceiling: screen the batch on a grid of N first.
            keep = _screen(sp, target, met)
            if not keep:
                out.append((sp, {}))
                continue
            sp = make_space(
                space.mode, c, regime_name, space.p, params_grid, group_sizes, [sp.variants[h] for h in keep]
            )
            upper = {}
        f = _exact(sp, target, met, upper, best)
        best = min(best, min((f[h] * float(sp.node_cost[h]) for h in f), default=math.inf))
        out.append((sp, f))
    return out


def _make_plan(
    searched: list[tuple[CandidateSpace, dict[int, int]]],
    target_flop: float,
    regime_name: str,
    m: Mode,
    met: Metric,
    obj: Objective,
    srch: Search,
    memo: dict[tuple[int, int, int], tuple[int | None, PlanOption | None]] | None = None,
) -> Plan:
    """The Plan from node counts found: `searched` is [(space, {hw: N})], the first space at the
    regime's cap (its unmet node types give the failures), the others other node sizes (the
    cheapest option per accelerator and precision over all sizes is kept). `memo` keeps the pick
    and option of each (space, hardware, N) for another plan of the same target and metric."""
    space, found = searched[0]
    memo = {} if memo is None else memo

    def key(o: PlanOption) -> tuple[float, float]:
        return (o.nodes, o.cost_usd) if obj is Objective.NODES else (o.cost_usd, -o.c_quality_flop)

    best_of: dict[tuple[str, str], PlanOption] = {}
    short: dict[int, float] = {}
    for sp, fd in searched:
        _picks_and_options(
            sp, [h for h in sorted(fd) if (id(sp), h, fd[h]) not in memo], fd, target_flop, met, m, memo
        )
        for h in sorted(fd):
            pick, opt_m = memo[(id(sp), h, fd[h])]
            if pick is None or opt_m is None:
                continue
            opt = opt_m
            if _metric_value(opt, met) < target_flop * (1 - 1e-9):
                if sp is space:
                    short[h] = _metric_value(opt, met)
                continue
            k = (opt.hardware, opt.precision)
            if k not in best_of or key(opt) < key(best_of[k]):
                best_of[k] = opt
    failures: dict[str, str] = {}
    closeness: dict[str, float] = {}
    unmet = [
        h
        for h in range(space.n_hw)
        if h not in found and (space.variants[h].name, space.variants[h].precision.value) not in best_of
    ]
    # best(N) at the most nodes allowed: one kernel call. The grid over N (`why_not.reachable`) costs ~30x
    # that and is only needed to rank the closest hardware when nothing meets the target.
    top = _best_at(space, np.maximum(space.n_cap, 1.0), met) if unmet else np.zeros(0)
    for h in range(space.n_hw):
        v, label = space.variants[h], _label(space, h)
        if (v.name, v.precision.value) in best_of:
            continue
        if h not in found:
            failures[label], closeness[label] = why_not(space, h, (float(top[h]), int(space.n_cap[h])), met)
        elif h in short:
            closeness[label] = short[h]
            failures[label] = f"best reachable {met.value} {short[h]:.3g} FLOP < target"
        else:
            failures[label] = "no valid candidate at the node count found"
    options = sorted(best_of.values(), key=key)
    reasons: tuple[str, ...] = ()
    if not options:
        for h, r in reachable(space, unmet, met).items():
            label = _label(space, h)
            failures[label], closeness[label] = why_not(space, h, r, met, over_n=True)
        reasons = (binding_reason(failures, closeness, target_flop, met, space.c),)
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
        evaluations=sum(sp.evaluations for sp, _ in searched),
    )


#: The screen of node types below the cap when no plan has been found (`_screen`): a node type whose
#: best metric on a geometric grid of N (WHY_NOT_GRID_POINTS points) falls short of the target by
#: more than this fraction is not searched. The metric varies slowly in N (the two-stage grid of
#: `_reachable` came within 0.5% of a 3,000-point scan); 10% is the margin against a peak between
#: grid points: an assumption, not a proof.
SCREEN_MARGIN = 0.10


def _screen(space: CandidateSpace, target: float, met: Metric) -> list[int]:
    """Node types of `space` whose best metric over a geometric grid of N in [1, node cap] comes within
    SCREEN_MARGIN of the target: the only ones the exact search then walks when no cost ceiling
    is known yet. Without it an infeasible target walks every node size's whole window."""
    cap = np.maximum(space.n_cap, 1.0)
    # Grid points with too few nodes to reach the threshold (`min_nodes_for`) cannot keep a node
    # type, so they are not evaluated: the same node types are kept.
    n_min = min_nodes_for(space, target * (1 - SCREEN_MARGIN))
    grid = {
        h: np.unique(np.round(np.geomspace(1.0, float(cap[h]), WHY_NOT_GRID_POINTS))).astype(np.float64)
        for h in range(space.n_hw)
    }
    grid = {h: g[g >= n_min[h]] for h, g in grid.items()}
    grid = {h: g for h, g in grid.items() if g.size}
    if not grid:
        return []
    reach = best_over(space, grid, met)
    return [h for h, (best, _) in reach.items() if best >= target * (1 - SCREEN_MARGIN)]


def _label(space: CandidateSpace, h: int) -> str:
    v = space.variants[h]
    return f"{v.chips}x {v.name} {v.precision.value}"


def _metric_value(o: PlanOption, met: Metric) -> float:
    return o.c_local_flop if met is Metric.C_LOCAL else o.c_quality_flop


def _option(
    space: CandidateSpace, h: int, n: int, combo: int, m: Mode, r: dict[str, Arr] | None = None
) -> PlanOption:
    """The plan option of `combo` at n nodes; `r`: its kernel outputs (every output) if evaluated."""
    pi, slot = int(space.combo_p[combo]), int(space.combo_slot[combo])
    if r is None:
        r = space.run(np.asarray([combo]), float(n), every_output=True)
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
        nodes_per_site=int(space.slot_site[slot]),
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
#: The centralized baseline's servers: 8 accelerators each (a DGX/HGX-class server; the paper's
#: baseline), fixed so the baseline is the paper's whatever node sizes the exact search tries.
CENTRALIZED_CHIPS_PER_NODE = 8


def centralized_baseline(
    target_flop: float,
    *,
    constraints: Constraints | None = None,
    mode: Mode | str = Mode.DEFAULT,
    metric: Metric | str | None = None,
    search: Search | str | None = None,
    params: ModelParams = DEFAULT_PARAMS,
) -> Plan:
    """The same target trained in one cluster: no covered-cluster rule (paper: 8-chip servers; default mode:
    one building, any node size the exact search tries, synchronous data parallelism allowed), datacenter
    interconnect (1000 Gbps, 0.1 ms), no pseudo-gradient compression, same time budget and hardware
    list; in default mode synchronous data parallelism is searched too. The evader's cost premium, plan(...).best.cost_usd / this plan's cost, is
    `plan(..., baseline=True).cost_premium`."""
    default = Mode(mode) is Mode.DEFAULT
    c = (constraints or Constraints()).replace(
        bandwidth_up_bits_per_s=DATACENTER_BITS_PER_S,
        bandwidth_down_bits_per_s=DATACENTER_BITS_PER_S,
        latency_s=DATACENTER_LATENCY_S,
        compression_ratio=1.0,
        regional_bandwidth_bits_per_s=None,
        pp_bandwidth_bits_per_s=None,
        # Paper mode: the paper's 8-chip servers. Default mode: one building is one cluster on one
        # fabric, so a "node" may be the whole building (any size the exact search tries, no rule),
        # and it may train synchronously (no replica penalty).
        chips_per_node=None if default else CENTRALIZED_CHIPS_PER_NODE,
        data_parallel=default,
    )
    return plan(
        target_flop, regime_name="none", constraints=c, mode=mode, metric=metric, search=search, params=params
    )


__all__ = [
    "BISECT_WINDOW_SLACK",
    "DATACENTER_BITS_PER_S",
    "DATACENTER_LATENCY_S",
    "ETA_BOUND",
    "EXACT_POINTS_PER_CALL",
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
    "exact_search_window",
    "hardware_variants",
    "plan",
]
