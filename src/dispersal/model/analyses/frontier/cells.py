"""One (target, premium) cell of the frontier from the search's table: each limit and what binds it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dispersal.model.analyses.frontier.conditions import SearchLayout
from dispersal.model.analyses.frontier.result import Limit
from dispersal.model.analyses.frontier.table import Engine, TargetTable
from dispersal.model.inputs import units
from dispersal.model.kernel import quality


def _fmt_bw(b: float) -> str:
    return units.format_bandwidth(b)


def _cannot(eng: Engine, tab: TargetTable, t: float, where: str, prem_max: float | None) -> str:
    """Why no plan reaches t within the largest premium at the screen's condition: cost (some plan
    reaches it beyond the premium), power (only sites over the power cap reach it), replica quality
    (the chips deliver t of C_local, the quality mapping keeps less) or the time budget."""
    reach = tab.exact_reach_flop()
    best_any = float(np.max(reach)) if reach.size else -math.inf
    under = reach[eng.usable]
    best = float(np.max(under)) if under.size else -math.inf
    if best < t * (1 - 1e-9) <= best_any and eng.max_site_kw is not None:
        return f"power: only sites over {eng.max_site_kw:g} kW reach {t:.0e} FLOP {where}"
    if best >= t * (1 - 1e-9) and prem_max is not None:
        return f"cost: over the largest premium ({prem_max:g}x) {where}"
    c_local = tab.exact_c_local_flop()
    if c_local >= t:
        return (
            f"replica quality: at most {best:.3g} FLOP {eng.metric.value} at any site count {where}, though the "
            f"chips deliver {c_local:.3g} FLOP C_local"
        )
    days = eng.c.max_duration_s / units.SECONDS_PER_DAY
    return f"time budget: at most {max(best, c_local):.3g} FLOP in {days:.4g} days {where}"


def cell_limit(
    eng: Engine,
    t: float,
    x: float,
    c0: float | None,
    grid: tuple[float, ...],
    tab: TargetTable,
    lay: SearchLayout,
    j: int,
) -> Limit:
    """One (target, premium) cell from the search (j: the premium's index among sorted budgets)."""
    none = {
        "least_bandwidth_bits_per_s": None,
        "bandwidth_bracket_bits_per_s": None,
        "sites": None,
        "chips_per_site": None,
        "hardware": None,
        "power_per_site_kw": None,
        "days": None,
        "mean_wan_mbps_per_site": None,
        "cost_usd": None,
        "most_sites": None,
        "most_sites_bandwidth_bits_per_s": None,
        "most_sites_hardware": None,
        "least_power_per_site_kw": None,
        "least_power_hardware": None,
        "shortest_run_days": None,
        "shortest_run_bracket_days": None,
        "longest_distance_m": None,
    }
    if c0 is None:
        why = "no premium: one datacenter cannot reach the target either"
        return Limit(
            target_flop=t,
            premium=x,
            budget_usd=None,
            binds=why,
            most_sites_binds=why,
            least_power_binds=why,
            shortest_run_binds=why,
            distance_binds=why,
            **none,
        )
    budget = x * c0
    tol = budget * (1 + 1e-12)
    has = tab.combos.size > 0
    cm = tab.cost_min.min(axis=1) if has else np.full(len(lay.conds), np.inf)
    ok = [i for i, k in enumerate(lay.bw) if cm[k] <= tol]
    top = _fmt_bw(grid[-1])
    if not ok:
        k0 = lay.bw[-1]
        why = (
            f"cost: {cm[k0] / c0:.2f}x at {top}"
            if math.isfinite(cm[k0])
            else _cannot(eng, tab, t, f"at {top}", max(tab.budgets_usd) / c0)
        )
        if eng.max_site_kw is not None and not why.startswith("power"):
            why += f" (sites under {eng.max_site_kw:g} kW)"
        return Limit(
            target_flop=t,
            premium=x,
            budget_usd=budget,
            binds=why,
            most_sites_binds=why,
            least_power_binds=why,
            shortest_run_binds=why,
            distance_binds=why,
            **none,
        )
    i0 = ok[0]
    if i0 == 0:
        why = f"nothing: the grid's lowest rate ({_fmt_bw(grid[0])}) already fits (the limit is lower)"
    else:
        kb = lay.bw[i0 - 1]
        below = _fmt_bw(grid[i0 - 1])
        if math.isfinite(cm[kb]):
            why = f"cost: {cm[kb] / c0:.2f}x at {below}"
        elif eng.reaches(tab.combos, lay.conds[kb], t):
            why = f"cost: over the largest premium ({max(tab.budgets_usd) / c0:g}x) at {below}"
        else:
            why = f"bandwidth: at {below} no plan reaches {t:.0e} FLOP at any cost (the links and the time budget)"
    k = lay.bw[i0]
    ci = int(np.argmin(tab.cost_min[k]))
    pk = eng.pick(int(tab.combos[ci]), int(tab.n_min[k, ci]), lay.conds[k])
    most, most_bw, most_hw, most_why = _most(eng, tab, lay, grid, j)
    lp, lp_hw, lp_why = _least_power(eng, tab, lay, tol, t)
    sr, sr_br, sr_why = _shortest(eng, tab, lay, cm, tol, c0)
    dist, dist_why = _distance(lay, cm, tol, c0, top)
    return Limit(
        target_flop=t,
        premium=x,
        budget_usd=budget,
        least_bandwidth_bits_per_s=grid[i0],
        bandwidth_bracket_bits_per_s=(grid[i0 - 1] if i0 > 0 else 0.0, grid[i0]),
        binds=why,
        sites=pk.sites,
        chips_per_site=pk.chips_per_site,
        hardware=pk.hardware,
        power_per_site_kw=pk.power_per_site_kw,
        days=pk.days,
        mean_wan_mbps_per_site=pk.mean_wan_mbps_per_site,
        cost_usd=pk.cost_usd,
        most_sites=most,
        most_sites_bandwidth_bits_per_s=most_bw,
        most_sites_hardware=most_hw,
        most_sites_binds=most_why,
        least_power_per_site_kw=lp,
        least_power_hardware=lp_hw,
        least_power_binds=lp_why,
        shortest_run_days=sr,
        shortest_run_bracket_days=sr_br,
        shortest_run_binds=sr_why,
        longest_distance_m=dist,
        distance_binds=dist_why,
        replicas_beyond_evidence=quality.replicas_beyond_evidence(pk.replicas),
    )


def _most(
    eng: Engine, tab: TargetTable, lay: SearchLayout, grid: tuple[float, ...], j: int
) -> tuple[int | None, float | None, str | None, str]:
    """The most sites within budget j at any grid bandwidth: (sites, the lowest rate reaching that
    count, node type, what stops one more site)."""
    best, at = 0, -1
    for i, k in enumerate(lay.bw):
        n = int(tab.most_sites[k, j])
        if n > best:
            best, at = n, i
    if at < 0:
        return None, None, None, "cost: no plan within the premium"
    k = lay.bw[at]
    combo = int(tab.most_combo[k, j])
    hw = eng.labels[int(eng.space.combo_hw[combo])]
    why = tab.most_binds[k][j]
    detail = {
        "cost": f"cost: one more {hw} site exceeds the premium",
        "replica quality": f"replica quality: at {best + 1:,} sites of {hw} the target is no longer reached",
        "overtraining window": "overtraining window: more sites of that model overtrain it (> max_overtraining)",
        "node cap": f"node cap: max_nodes ({eng.c.max_nodes:,})",
        "memory": "memory: the model no longer fits",
        "time budget": "time budget",
    }.get(why, why)
    return best, grid[at], hw, detail


def _least_power(
    eng: Engine, tab: TargetTable, lay: SearchLayout, tol: float, t: float
) -> tuple[float | None, str | None, str]:
    """The smallest power per site of any plan within the budget at any grid bandwidth, its node
    type, and why smaller sites do not fit (cost, or they cannot reach the target)."""
    fits = np.zeros(tab.combos.size, dtype=bool)
    for k in lay.bw:
        fits |= tab.cost_min[k] <= tol
    if not fits.any():
        return None, None, "cost: no plan within the premium"
    hw = eng.space.combo_hw[tab.combos]
    power = eng.power_kw[hw]
    i = int(np.argmin(np.where(fits, power, np.inf)))
    lp = float(power[i])
    smaller = np.flatnonzero(eng.usable & (eng.power_kw[eng.space.combo_hw] < lp * (1 - 1e-9)))
    if smaller.size == 0:
        why = "nothing: the smallest node type of the catalogue already fits"
    elif tab.any_reaches(smaller, t * (1 - 1e-9)):
        why = "cost: smaller sites reach the target only beyond the premium"
    else:
        why = "replica quality: smaller sites cannot reach the target at any site count"
    return lp, eng.labels[int(hw[i])], why


def _shortest(
    eng: Engine, tab: TargetTable, lay: SearchLayout, cm: Any, tol: float, c0: float
) -> tuple[float | None, tuple[float, float] | None, str]:
    """The shortest time budget on the duration grid with a plan within the budget (top rate)."""
    ok = [i for i, k in enumerate(lay.dur) if cm[k] <= tol]
    if not ok:
        return None, None, "cost: no plan within the premium at the top rate"
    i = ok[0]
    if i == 0:
        return lay.dur_days[0], (0.0, lay.dur_days[0]), "nothing: the grid's shortest budget already fits"
    k = lay.dur[i - 1]
    d = lay.dur_days[i - 1]
    if math.isfinite(cm[k]):
        why = f"cost: {cm[k] / c0:.2f}x in {d:g} days"
    elif eng.reaches(tab.combos, lay.conds[k], tab.target_flop):
        why = f"cost: over the largest premium ({max(tab.budgets_usd) / c0:g}x) in {d:g} days"
    else:
        why = f"time budget: in {d:g} days no plan reaches the target at any cost"
    return lay.dur_days[i], (d, lay.dur_days[i]), why


def _distance(lay: SearchLayout, cm: Any, tol: float, c0: float, top: str) -> tuple[float | None, str]:
    """The longest distance on the distance grid with a plan within the budget (top rate)."""
    ok = [i for i, k in enumerate(lay.dist) if cm[k] <= tol]
    if not lay.dist:
        return None, "nothing: the base latency already exceeds every grid distance"
    if len(ok) == len(lay.dist):
        return lay.dist_m[-1], f"nothing: up to {lay.dist_m[-1] / 1e3:,.0f} km at {top}"
    if not ok:
        return None, f"latency: over the premium at {lay.dist_m[0] / 1e3:,.0f} km"
    i = ok[-1]
    k = lay.dist[i + 1]
    d = lay.dist_m[i + 1] / 1e3
    why = (
        f"latency: {cm[k] / c0:.2f}x at {d:,.0f} km"
        if math.isfinite(cm[k])
        else f"latency: no plan at {d:,.0f} km"
    )
    return lay.dist_m[i], why
