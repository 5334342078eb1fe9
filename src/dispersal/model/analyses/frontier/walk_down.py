"""The planner walked down the frontier's bandwidth grid: the plan of one target at each grid rate
from the top down, stopping where the cost passes a budget. The frontier over time (`over_time`,
`dispersal frontier --year`) reads each generation's limits from it, and `dispersal frontier
--compare` (`analyses.monitor`) its frontier plan."""

from __future__ import annotations

from dispersal.model.inputs.scenario import Mode
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints

#: Relative tolerance of "within the budget" (cost <= budget x BUDGET_TOLERANCE): float rounding, not a
#: model figure.
BUDGET_TOLERANCE = 1 + 1e-12


def walk_down(
    t: float, regime_name: str, c: Constraints, m: Mode, grid: tuple[float, ...], budget: float
) -> dict[int, planner.Plan]:
    """Plans from the top of the grid down until one cannot reach `t` or costs more than `budget`
    (every lower grid point would too: the cost never falls as the bandwidth falls), {index: plan}."""
    out: dict[int, planner.Plan] = {}
    for i in range(len(grid) - 1, -1, -1):
        bw = grid[i]
        p = planner.plan(
            t,
            regime_name=regime_name,
            constraints=c.replace(bandwidth_up_bits_per_s=bw, bandwidth_down_bits_per_s=bw),
            mode=m,
        )
        out[i] = p
        if p.best is None or p.best.cost_usd > budget * BUDGET_TOLERANCE:
            break
    return out
