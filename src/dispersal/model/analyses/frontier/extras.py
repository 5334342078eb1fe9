"""The frontier's extra answers: the largest target at N sites, the quality-assumption lines, and
the Monte Carlo bands per target (`frontier.bands`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

import dispersal.model.analyses.frontier.bands as _bands
from dispersal.model.analyses.frontier.result import (
    AT_SITES_POINTS,
    QUALITY_ASSUMPTIONS,
    AtSites,
    QualityLine,
    _Layout,
    reach_bandwidth,
)
from dispersal.model.analyses.frontier.table import Condition, Engine, TargetTable, _geomgrid, search_target
from dispersal.model.inputs import units
from dispersal.model.inputs.scenario import Mode
from dispersal.model.kernel import quality
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints


def _c0_of(base_cost: dict[float, float | None]) -> Any:
    """C0(T) for any T: log-log interpolation between the targets' centralized costs (linear in T
    outside them, or through the only one). None when none is known."""
    pts = sorted((t, c) for t, c in base_cost.items() if c is not None)
    if not pts:
        return None
    lt = np.log([p[0] for p in pts])
    lc = np.log([p[1] for p in pts])

    def c0(t: Any) -> Any:
        x = np.log(np.asarray(t, dtype=np.float64))
        if len(pts) == 1:
            return np.exp(lc[0] + x - lt[0])
        inner = np.interp(x, lt, lc)
        lo = lc[0] + (x - lt[0])
        hi = lc[-1] + (x - lt[-1])
        return np.exp(np.where(x < lt[0], lo, np.where(x > lt[-1], hi, inner)))

    return c0


def _at_sites(
    eng: Engine,
    sites: tuple[int, ...],
    prem: tuple[float, ...],
    base_cost: dict[float, float | None],
    lay: _Layout,
) -> tuple[AtSites, ...]:
    """Per site count N: the largest metric any candidate reaches with at most N sites at the top
    grid rate (AT_SITES_POINTS geometric site counts of each candidate's window below N, N itself
    the last), with no budget and within each premium (C0 interpolated log-log between the targets'
    centralized costs: C0 is close to linear in the target)."""
    allc = np.flatnonzero(eng.usable).astype(np.int64)
    lo, hi = eng.window(allc, lay.conds[0], 1.0)
    c0 = _c0_of(base_cost)
    top_bw = lay.conds[0].bandwidth_bits_per_s
    out: list[AtSites] = []
    prev: dict[float | None, AtSites] = {}
    for n in sorted(sites):
        sel = (lo <= n) & (hi >= lo)
        g = _geomgrid(lo[sel], np.minimum(hi[sel], float(n)), AT_SITES_POINTS)
        cc = np.repeat(allc[sel], AT_SITES_POINTS)
        nn = g.reshape(-1)
        r = eng.run(cc, nn, np.zeros(cc.size, dtype=np.int64), lay.conds, ("replicas",))
        valid = r["valid"] > 0
        met = np.where(valid, r["metric"], -np.inf)
        best_any = float(met.max()) if met.size else -math.inf
        for x in (None, *prem):
            if x is None:
                m_ok = met
            elif c0 is None:
                continue
            else:
                m_ok = np.where(
                    valid & (r["cost_usd"] <= x * c0(np.maximum(met, 1.0)) * (1 + 1e-12)), met, -np.inf
                )
            if not m_ok.size or not np.isfinite(m_ok.max()):
                row = AtSites(
                    sites=n,
                    premium=x,
                    largest_target_flop=None,
                    hardware=None,
                    sites_used=None,
                    cost_usd=None,
                    binds="cost: nothing within the premium",
                    bandwidth_bits_per_s=top_bw,
                )
                out.append(_carry(prev, x, row))
                continue
            i = int(np.argmax(m_ok))
            mx = float(m_ok[i])
            if x is not None and mx < best_any * (1 - 1e-9):
                why = "cost: a larger target needs more than the premium"
            elif r["c_quality_flop"][i] < 0.9 * r["c_local_flop"][i]:
                why = "replica quality: the quality mapping keeps under 90% of the chips' compute"
            else:
                why = f"time budget: {eng.c.max_duration_s / units.SECONDS_PER_DAY:.4g} days at the regime's site size"
            out.append(
                _carry(
                    prev,
                    x,
                    AtSites(
                        sites=n,
                        premium=x,
                        largest_target_flop=mx,
                        hardware=eng.labels[int(eng.space.combo_hw[cc[i]])],
                        sites_used=int(nn[i]),
                        cost_usd=float(r["cost_usd"][i]),
                        binds=why,
                        bandwidth_bits_per_s=top_bw,
                        replicas_beyond_evidence=quality.replicas_beyond_evidence(float(r["replicas"][i])),
                    ),
                )
            )
    return tuple(out)


def _carry(prev: dict[float | None, AtSites], x: float | None, row: AtSites) -> AtSites:
    """At most N sites includes every smaller count already searched: keep the larger answer."""
    old = prev.get(x)
    if (
        old is not None
        and old.largest_target_flop is not None
        and (row.largest_target_flop is None or old.largest_target_flop > row.largest_target_flop)
    ):
        row = dataclasses.replace(old, sites=row.sites)
    prev[x] = row
    return row


def _quality_lines(
    m: Mode,
    c: Constraints,
    regime_name: str,
    targets: tuple[float, ...],
    prem: tuple[float, ...],
    base_cost: dict[float, float | None],
    lay: _Layout,
    grid: tuple[float, ...],
    max_site_kw: float | None = None,
) -> tuple[QualityLine, ...]:
    """Each of QUALITY_ASSUMPTIONS: least bandwidth per premium and the premium at the reach rate
    (the building's cost is unchanged: it trains synchronously, one replica)."""
    if m is not Mode.DEFAULT:
        return ()
    conds = tuple(lay.conds[k] for k in sorted(lay.bw))  # the grid, top first
    bw_k = tuple(len(grid) - 1 - i for i in range(len(grid)))
    out: list[QualityLine] = []
    for name, changes in QUALITY_ASSUMPTIONS:
        eng = Engine(m, c.replace(**changes), regime_name, max_site_kw=max_site_kw)
        for t in targets:
            c0 = base_cost[t]
            if c0 is None:
                continue
            tab = search_target(eng, t, conds, tuple(x * c0 for x in prem))
            cm = tab.cost_min.min(axis=1) if tab.combos.size else np.full(len(conds), np.inf)
            least = []
            for x in prem:
                ok = [grid[i] for i, k in enumerate(bw_k) if cm[k] <= x * c0 * (1 + 1e-12)]
                least.append(ok[0] if ok else None)
            ri = _reach_index(grid)
            pr = float(cm[bw_k[ri]] / c0) if math.isfinite(cm[bw_k[ri]]) else None
            out.append(
                QualityLine(
                    assumption=name,
                    target_flop=t,
                    least_bandwidth_bits_per_s=tuple(least),
                    premium_at_reach_bandwidth=pr,
                )
            )
    return tuple(out)


def _reach_index(grid: tuple[float, ...]) -> int:
    """The grid index of `reach_bandwidth` (REACH_BANDWIDTH_BITS_PER_S or the nearest grid rate)."""
    return grid.index(reach_bandwidth(grid))


def _p_reach(
    eng: Engine,
    t: float,
    tab: TargetTable,
    lay: _Layout,
    grid: tuple[float, ...],
    prem: tuple[float, ...],
    building: planner.PlanOption | None,
    c: Constraints,
    m: Mode,
    samples: int,
    seed: int,
) -> _bands.TargetBands:
    """Monte Carlo bands of one target (`frontier.bands`): per draw the cheapest plan at each grid
    rate and one building's cost under the same draw."""
    dr = _bands.Draws(m, c, samples, seed)
    draws = np.arange(1, samples + 1, dtype=np.int64)
    costs, c0 = draw_costs(eng, t, tab, lay, building, c, m, dr, draws)
    ri = _reach_index(grid)
    p_any = float(np.mean(np.isfinite(costs[:, ri])))
    if c0 is None:
        return _bands.TargetBands(
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
            _bands.Band(
                p_reach=float(any_b.mean()),
                p_reach_by_bandwidth=tuple(float(v) for v in within.mean(axis=0)),
                least_bandwidth_q=_bands.quantiles_inf(first),
                premium_at_reach_bandwidth_q=_bands.quantiles_inf(prem_r),
            )
        )
    return _bands.TargetBands(p_reach_at_reach_bandwidth=p_any, bands=tuple(out))


def draw_costs(
    eng: Engine,
    t: float,
    tab: TargetTable,
    lay: _Layout,
    building: planner.PlanOption | None,
    c: Constraints,
    m: Mode,
    dr: _bands.Draws,
    draws: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]:
    """Per draw: the cheapest plan's cost at each grid rate (draws, grid ascending; inf: none), and
    one building's cost under the same draw (None: no nominal building)."""
    conds = tuple(lay.conds[k] for k in lay.bw)  # ascending grid
    # The draws' candidates are read within a fixed premium of the nominal building, whatever the
    # --premium list: P(reach) and the bands are properties of the scenario (issue 34).
    cap = _bands.SHORTLIST_PREMIUM * building.cost_usd if building is not None else math.inf
    sl = _bands.shortlist(tab, lay.bw, eng.space.combo_hw, max_cost_usd=cap)
    costs = _bands.least_costs(eng, dr, t, sl, conds, draws)
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
    btab = search_target(beng, t, (bc,), (building.cost_usd * _bands.SHORTLIST_PREMIUM,))
    c0 = _bands.least_costs(beng, dr, t, _bands.cheapest_per_node_type(beng, btab), (bc,), draws)[:, 0]
    return costs, c0


def _empty_band(n: int) -> _bands.Band:
    inf3 = (math.inf, math.inf, math.inf)
    return _bands.Band(
        p_reach=0.0,
        p_reach_by_bandwidth=(0.0,) * n,
        least_bandwidth_q=inf3,
        premium_at_reach_bandwidth_q=inf3,
    )
