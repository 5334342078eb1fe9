"""Planning with a fleet of site types (``plan --sites``): how many copies of a mix of sites reach a
compute target.

The planner (`planner.plan`) sizes fleets of one node type. With ``[[site]]`` tables the operator
gives the node types, their links and their proportions (the mix: each site's node count); this
search finds the smallest whole multiple k of the mix (every site's nodes x k) whose run reaches the
target within the scenario's time budget, with the sites' paced figures (`sites.reduce`). Cost is
linear in the node count, so the smallest k is the cheapest plan of that mix.

The model size: the file's when it sets `params`; otherwise, at each k, the best size of the
planner's grid (`candidates.PAPER_PARAM_GRID_B`, every other size) whose run trains as many tokens
as the time budget allows within the planner's overtraining window (1-100 x compute-optimal).

Limits (stated, not hidden): the mix's proportions, H, the codec and the other scenario fields are
the file's (the planner's search over those is not repeated per site type); k doubles until the
target is met (then bisection between the last two doublings) or the metric falls (a fixed-size model
gains less from each added replica: the best multiple tried is reported); a churn schedule is left
out (a plan is for the steady configuration).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import Mode, Scenario
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.run.estimate import Estimate, estimate
from dispersal.model.search.candidates import PAPER_PARAM_GRID_B, Constraints
from dispersal.model.sites.reduce import scenario_inputs

#: Model sizes tried when the file leaves `params` open: every other size of the planner's grid.
PARAM_GRID: tuple[float, ...] = tuple(b * 1e9 for b in PAPER_PARAM_GRID_B[::2])

#: Metrics a mix plan may target (the planner's two).
METRICS = ("c_quality", "c_local")
#: Largest total node count searched (the planner's default --max-nodes).
DEFAULT_MAX_NODES = 100_000


@dataclass(frozen=True, kw_only=True, slots=True)
class SiteMixPlan:
    """The smallest multiple of a site mix reaching a target (scale None: not within max_nodes)."""

    target_flop: float
    metric: str
    scale: int | None
    nodes: tuple[int, ...]
    """Nodes per site at that scale (as listed)."""
    estimate: Estimate | None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "target_flop": self.target_flop,
            "metric": self.metric,
            "scale": self.scale,
            "nodes": list(self.nodes),
            "reason": self.reason,
            "estimate": self.estimate.to_dict() if self.estimate is not None else None,
        }


def scaled(s: Scenario, k: int) -> Scenario:
    """The scenario with every site's node count times k (churn left out), training as many tokens as
    the time budget allows: a file's fixed token count would give k copies the same tokens on more
    replicas, i.e. less quality-adjusted compute the more sites it adds."""
    sites = tuple(dataclasses.replace(site, nodes=site.nodes * k) for site in s.sites)
    return s.replace(sites=sites, churn=(), tokens=None)


def _best_params(s: Scenario, metric: str, mode: Mode, params: ModelParams) -> float | None:
    """The grid size with the highest metric for s (tokens as the budget allows), feasible and in the
    planner's overtraining window; None when no size is."""
    window = Constraints()
    rows = [
        scenario_inputs(s.replace(params=p, tokens=None, active_params=None), mode, params)
        for p in PARAM_GRID
    ]
    stacked = {k: np.asarray([r[k] for r in rows], dtype=np.float64) for k in rows[0]}
    r = evaluate(stacked, params, outputs=("feasible", "overtraining_ratio", f"{metric}_flop"))
    ok = (
        (r["feasible"] > 0)
        & (r["overtraining_ratio"] >= window.min_overtraining)
        & (r["overtraining_ratio"] <= window.max_overtraining)
    )
    if not ok.any():
        return None
    return PARAM_GRID[int(np.argmax(np.where(ok, r[f"{metric}_flop"], -np.inf)))]


def _value(
    s: Scenario, k: int, metric: str, mode: Mode, params: ModelParams, search_params: bool
) -> tuple[float, Estimate]:
    sk = scaled(s, k)
    if search_params:
        best = _best_params(sk, metric, mode, params)
        if best is not None:
            sk = sk.replace(params=best, tokens=None, active_params=None)
    e = estimate(sk, mode=mode, params=params)
    v = e.c_quality_flop if metric == "c_quality" else e.c_local_flop
    return (v if e.feasible else 0.0), e


def plan_site_mix(
    s: Scenario,
    target_flop: float,
    *,
    metric: str = "c_quality",
    mode: Mode | str = Mode.DEFAULT,
    params: ModelParams = DEFAULT_PARAMS,
    max_nodes: int = DEFAULT_MAX_NODES,
    search_params: bool = False,
) -> SiteMixPlan:
    """The smallest k with metric(k x mix) >= target_flop, feasible, total nodes <= max_nodes
    (module docstring). Doubling from k = 1, then bisection: O(log k) estimates. search_params:
    the best grid model size at each k instead of the scenario's."""
    if not s.sites:
        raise InputError("sites", "the scenario has no [[site]] tables")
    if metric not in METRICS:
        raise InputError("metric", f"must be one of {', '.join(METRICS)}, got {metric!r}")
    m = Mode(mode)
    per_mix = sum(site.nodes for site in s.sites)
    k_max = max_nodes // per_mix
    if k_max < 1:
        raise InputError("max_nodes", f"the mix alone has {per_mix:,} nodes, more than {max_nodes:,}")
    lo, k = 0, 1
    v, e = _value(s, k, metric, m, params, search_params)
    top = (v, k, e)  # the most any multiple tried reaches: reported when none reaches the target
    while v < target_flop:
        # Past the best multiple the metric may fall (a ring's latency grows with the node count, the
        # replica penalty saturates): stop doubling there and report the best multiple, not the last.
        if k == k_max or v < top[0]:
            v_top, k_top, e_top = top
            return SiteMixPlan(
                target_flop=target_flop,
                metric=metric,
                scale=None,
                nodes=tuple(site.nodes * k_top for site in s.sites),
                estimate=e_top,
                reason=f"no multiple of the mix reaches {target_flop:.3g} FLOP: the most is {v_top:.3g} FLOP "
                f"{metric} at {k_top:,} x the mix ({k_top * per_mix:,} nodes)"
                + (
                    f"; {k:,} x ({k * per_mix:,} nodes) reaches less, {v:.3g} FLOP"
                    if k != k_top
                    else f" (the largest multiple within {max_nodes:,} nodes)"
                )
                + ("" if e_top.feasible else f" (infeasible: {'; '.join(e_top.reasons)})"),
            )
        lo, k = k, min(2 * k, k_max)
        v, e = _value(s, k, metric, m, params, search_params)
        if v > top[0]:
            top = (v, k, e)
    hi, best = k, e
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v, e = _value(s, mid, metric, m, params, search_params)
        if v >= target_flop:
            hi, best = mid, e
        else:
            lo = mid
    return SiteMixPlan(
        target_flop=target_flop,
        metric=metric,
        scale=hi,
        nodes=tuple(site.nodes * hi for site in s.sites),
        estimate=best,
    )
