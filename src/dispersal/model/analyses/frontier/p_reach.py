"""P(reach) and the Monte Carlo bands of one target (`dispersal frontier --samples`): per draw the
cheapest plan at each grid rate (`bands`) and one building's cost under the same draw, hence per
premium the share of draws within it and the quantiles of the least bandwidth and of the premium at
the reach bandwidth."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dispersal.model.analyses.frontier import bands
from dispersal.model.analyses.frontier.conditions import SearchLayout
from dispersal.model.analyses.frontier.result import reach_index
from dispersal.model.analyses.frontier.table import Condition, Engine, TargetTable, search_target
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints


def target_bands(
    eng: Engine,
    t: float,
    tab: TargetTable,
    lay: SearchLayout,
    grid: tuple[float, ...],
    prem: tuple[float, ...],
    building: planner.PlanOption | None,
    c: Constraints,
    m: Mode,
    samples: int,
    seed: int,
) -> bands.TargetBands:
    """Monte Carlo bands of one target (`frontier.bands`): per draw the cheapest plan at each grid
    rate and one building's cost under the same draw."""
    dr = bands.Draws(m, c, samples, seed)
    draws = np.arange(1, samples + 1, dtype=np.int64)
    costs, c0 = draw_costs(eng, t, tab, lay, building, c, m, dr, draws)
    ri = reach_index(grid)
    p_any = float(np.mean(np.isfinite(costs[:, ri])))
    if c0 is None:
        return bands.TargetBands(
            p_reach_at_reach_bandwidth=p_any, bands=tuple(_empty_band(len(grid)) for _ in prem)
        )
    out = []
    for x in prem:
        within = np.isfinite(costs) & (costs <= (x * c0)[:, None] * (1 + 1e-12))
        any_b = within.any(axis=1)
        first = np.where(any_b, np.asarray(grid)[np.argmax(within, axis=1)], np.inf)
        both = np.isfinite(costs[:, ri]) & np.isfinite(c0)
        prem_r = np.full(c0.size, np.inf)
        prem_r[both] = costs[both, ri] / c0[both]
        out.append(
            bands.Band(
                p_reach=float(any_b.mean()),
                p_reach_by_bandwidth=tuple(float(v) for v in within.mean(axis=0)),
                least_bandwidth_q=bands.quantiles_inf(first),
                premium_at_reach_bandwidth_q=bands.quantiles_inf(prem_r),
            )
        )
    return bands.TargetBands(p_reach_at_reach_bandwidth=p_any, bands=tuple(out))


def draw_costs(
    eng: Engine,
    t: float,
    tab: TargetTable,
    lay: SearchLayout,
    building: planner.PlanOption | None,
    c: Constraints,
    m: Mode,
    dr: bands.Draws,
    draws: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]:
    """Per draw: the cheapest plan's cost at each grid rate (draws, grid ascending; inf: none), and
    one building's cost under the same draw (None: no nominal building)."""
    conds = tuple(lay.conds[k] for k in lay.bw)  # ascending grid
    # The draws' candidates are read within a fixed premium of the nominal building, whatever the
    # --premium list: P(reach) and the bands are properties of the scenario (issue 34).
    cap = bands.SHORTLIST_PREMIUM * building.cost_usd if building is not None else math.inf
    sl = bands.shortlist(tab, lay.bw, eng.space.combo_hw, max_cost_usd=cap)
    costs = bands.least_costs(eng, dr, t, sl, conds, draws)
    if building is None:
        return costs, None
    cb = c.replace(
        bandwidth_up_bits_per_s=planner.DATACENTER_BITS_PER_S,
        bandwidth_down_bits_per_s=planner.DATACENTER_BITS_PER_S,
        latency_s=planner.DATACENTER_LATENCY_S,
        compression_ratio=1.0,
        regional_bandwidth_bits_per_s=None,
        pp_bandwidth_bits_per_s=None,
        chips_per_node=None if m is Mode.DEFAULT else building.chips_per_node,
        data_parallel=m is Mode.DEFAULT,
        hardware=(building.hardware,),
    )
    beng = Engine(m, cb, "none")
    bc = Condition(
        bandwidth_bits_per_s=planner.DATACENTER_BITS_PER_S,
        latency_s=planner.DATACENTER_LATENCY_S,
        duration_s=c.max_duration_s,
    )
    # The building's accelerator at every node size (its cheapest nominal candidate per node type,
    # re-sized per draw): a building is not held to the nominal node count's granularity.
    btab = search_target(beng, t, (bc,), (building.cost_usd * bands.SHORTLIST_PREMIUM,), exact_screen=False)
    c0 = bands.least_costs(beng, dr, t, bands.cheapest_per_node_type(beng, btab), (bc,), draws)[:, 0]
    return costs, c0


def _empty_band(n: int) -> bands.Band:
    inf3 = (math.inf, math.inf, math.inf)
    return bands.Band(
        p_reach=0.0,
        p_reach_by_bandwidth=(0.0,) * n,
        least_bandwidth_q=inf3,
        premium_at_reach_bandwidth_q=inf3,
    )
