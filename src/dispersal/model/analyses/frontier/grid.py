"""`dispersal frontier`, the grid: where dispersal stops (issue 23). For each compute target and each
premium over one datacenter, the limits of a dispersed run and the constraint that binds each one.

Method (docs/frontier.md): one vectorised exact search (`table`) over the planner's own
candidate space (every node type, every size below the regime's cap, every model size and slot) at
many conditions at once: each per-site WAN rate of the bandwidth grid, the top rate at longer
distances, and the top rate with shorter time budgets. The premium's denominator is
`planner.centralized_baseline` (one building of the same compute). Per target T and premium x, with
budget x * C0:

- least bandwidth per site: the lowest grid rate whose cheapest plan fits the budget (its plan: sites,
  node, power per site, days, WAN use), and what binds below it;
- most sites: the largest site count of any candidate meeting T within the budget, searched over
  every integer N (grid, then bisection), at any grid rate; what stops one more site;
- least power per site: the smallest node (chips x TDP x PUE) with a plan within the budget;
- shortest run: the shortest time budget on DURATION_GRID_DAYS with a plan within the budget;
- longest distance: the longest of DISTANCE_GRID_M with a plan within the budget at the top rate;
- the largest target at a given number of sites (`at_sites`), within each premium.
Each (target, premium) cell is read from the table by `cells`; Monte Carlo bands per cell
(`p_reach`, `bands`), P(reach) first; the quality assumptions of many replicas (loss-space bound,
Muon inner optimizer) as separate lines (`quality_lines`). Nothing is fitted to a
headline figure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from dispersal.model.analyses.frontier import bands
from dispersal.model.analyses.frontier.at_sites import largest_at_sites
from dispersal.model.analyses.frontier.cells import cell_limit
from dispersal.model.analyses.frontier.conditions import SearchLayout, search_layout
from dispersal.model.analyses.frontier.p_reach import target_bands
from dispersal.model.analyses.frontier.quality_lines import quality_assumption_lines
from dispersal.model.analyses.frontier.result import (
    BANDWIDTH_GRID_BITS_PER_S,
    DEFAULT_PREMIUMS,
    DEFAULT_SITES,
    DEFAULT_TARGETS_FLOP,
    Frontier,
    Limit,
    PremiumCurve,
)
from dispersal.model.analyses.frontier.table import Engine, TargetTable, search_target
from dispersal.model.inputs.catalog import regime
from dispersal.model.inputs.errors import require
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints


def frontier(
    *,
    targets_flop: Sequence[float] = DEFAULT_TARGETS_FLOP,
    premiums: Sequence[float] = DEFAULT_PREMIUMS,
    regime_name: str = "treaty",
    constraints: Constraints | None = None,
    mode: Mode | str = Mode.DEFAULT,
    bandwidth_grid_bits_per_s: Sequence[float] = BANDWIDTH_GRID_BITS_PER_S,
    samples: int = 0,
    seed: int = 0,
    sites: Sequence[int] = DEFAULT_SITES,
    quality_lines: bool = True,
    max_site_kw: float | None = None,
    on_curve: Callable[[PremiumCurve], None] | None = None,
) -> Frontier:
    """The limits of dispersal for every (target, premium) pair (method: module docstring).

    Args:
        targets_flop: compute targets, FLOP of the mode's metric (C_quality in default mode).
        premiums: cost multiples of one datacenter's plan (> 0).
        regime_name, constraints, mode: as for `planner.plan`; the constraints' links are replaced by
            each grid bandwidth (latency and time budget kept, except the distance and duration rows).
        bandwidth_grid_bits_per_s: per-site WAN rates tried.
        samples, seed: Monte Carlo draws per target for the bands and P(reach) (0: not drawn).
        sites: site counts of the "largest target at N sites" rows.
        quality_lines: also search under each of QUALITY_ASSUMPTIONS (default mode only).
        max_site_kw: a per-site power cap, kW (chips x TDP x PUE; None: none): larger sites are not
            searched, and "power" binds where only they would reach the target.
        on_curve: called with each target's `PremiumCurve` as soon as its search is done, before its
            cells and draws (the app shows it as the first answer); the first target's sooner, from a
            search of the cheapest plan per grid rate run ahead of its full search (the same costs, about
            40% more search for that target). It changes nothing computed.
    """
    targets = tuple(float(t) for t in targets_flop)
    prem = tuple(float(p) for p in premiums)
    grid = tuple(sorted({float(b) for b in bandwidth_grid_bits_per_s}))
    require(
        len(targets) > 0 and all(math.isfinite(t) and t > 0 for t in targets), "targets", "must be > 0 FLOP"
    )
    require(len(prem) > 0 and all(math.isfinite(p) and p > 0 for p in prem), "premiums", "must be > 0")
    require(len(grid) > 0 and all(math.isfinite(b) and b > 0 for b in grid), "bandwidth", "must be > 0 bit/s")
    require(isinstance(samples, int) and 0 <= samples <= 100_000, "samples", "must be in [0, 100,000]")
    require(
        all(isinstance(n, int) and 1 <= n <= 10_000_000 for n in sites), "sites", "must be in [1, 10,000,000]"
    )
    require(
        max_site_kw is None or (math.isfinite(max_site_kw) and max_site_kw > 0),
        "max_site_kw",
        "must be > 0 kW",
    )
    m = Mode(mode)
    c = constraints or Constraints()
    regime(regime_name)
    lay = search_layout(grid, c)
    eng = Engine(m, c, regime_name, max_site_kw=max_site_kw)
    limits: list[Limit] = []
    reach: dict[float, float | None] = {}
    base_cost: dict[float, float | None] = {}
    base_plan: dict[float, planner.PlanOption | None] = {}
    costs: dict[float, tuple[float | None, ...]] = {}
    most_bw: dict[float, tuple[tuple[int, ...], ...]] = {}
    fewest_bw: dict[float, tuple[tuple[int, ...], ...]] = {}
    tables: dict[float, TargetTable] = {}
    metric = eng.metric.value
    for i, t in enumerate(targets):
        base = planner.centralized_baseline(t, constraints=c, mode=m)
        base_plan[t] = base.best
        c0 = base.best.cost_usd if base.best is not None else None
        base_cost[t] = c0
        budgets = tuple(x * c0 for x in prem) if c0 is not None else ()
        # searched up to at least the draws' fixed premium (bands.SHORTLIST_PREMIUM), so the draws'
        # shortlist never depends on the premiums asked; the cells read only their own budgets
        extra = (bands.SHORTLIST_PREMIUM * c0,) if c0 is not None and samples else ()
        early = None
        if on_curve is not None and i == 0:
            # The first answer sooner: the curve reads only the cheapest plan per grid rate, which a
            # search refining only the candidates that can be cheapest finds exactly (about 40% of the
            # full search's time), ahead of the full search whose table the rest reads.
            early = _curve(t, grid, c0, _cheapest_by_rate(eng, t, lay, budgets + extra))
            on_curve(early)
        # (the exact screen runs only if a cell's reason reads it: `TargetTable.exact_reach_flop`)
        tab = search_target(eng, t, lay.conds, budgets + extra, exact_screen=False)
        tables[t] = tab
        cm = tab.cost_min.min(axis=1) if tab.combos.size else np.full(len(lay.conds), np.inf)
        costs[t] = tuple(float(cm[k]) if math.isfinite(cm[k]) else None for k in lay.bw)
        if on_curve is not None and (early is None or early.cost_by_bandwidth_usd != costs[t]):
            # (the early curve is the same by construction; were it not, the finished one replaces it)
            on_curve(_curve(t, grid, c0, costs[t]))
        # each premium's column in the table (its budgets are sorted ascending, the draws' one added)
        order = (
            np.searchsorted(np.asarray(tab.budgets_usd), np.asarray(budgets) * (1 - 1e-12))
            if budgets
            else np.zeros(len(prem), dtype=np.int64)
        )
        most_bw[t] = tuple(
            tuple(int(tab.most_sites[k, order[j]]) if budgets else 0 for j in range(len(prem)))
            for k in lay.bw
        )
        fewest_bw[t] = tuple(tuple(_fewest(tab, k, x * c0) if c0 else 0 for x in prem) for k in lay.bw)
        band = target_bands(eng, t, tab, lay, grid, prem, base.best, c, m, samples, seed) if samples else None
        reach[t] = band.p_reach_at_reach_bandwidth if band is not None else None
        for j, x in enumerate(prem):
            lim = cell_limit(eng, t, x, c0, grid, tab, lay, int(order[j]))
            limits.append(_with_band(lim, band.bands[j] if band is not None else None))
    at = largest_at_sites(eng, tuple(sites), prem, base_cost, lay) if sites else ()
    qlines = (
        quality_assumption_lines(m, c, regime_name, targets, prem, base_cost, lay, grid, max_site_kw, eng)
        if quality_lines
        else ()
    )
    return Frontier(
        mode=m.value,
        regime=regime_name,
        metric=metric,
        targets_flop=targets,
        premiums=prem,
        bandwidth_grid_bits_per_s=grid,
        p_reach=reach,
        centralized_cost_usd=base_cost,
        cost_by_bandwidth_usd=costs,
        most_sites_by_bandwidth=most_bw,
        fewest_sites_by_bandwidth=fewest_bw,
        limits=tuple(limits),
        at_sites=at,
        quality_lines=qlines,
        samples=samples,
        max_site_kw=max_site_kw,
        notes=(
            "least bandwidth, shortest run and longest distance are read on grids: the true limit lies in the bracket",
            "most sites is searched over every integer site count (grid, then bisection) at every grid bandwidth",
            "premium = plan cost / one building's cost (planner.centralized_baseline: no rule, 1000 Gbps; "
            "default mode one building of any size training synchronously, paper mode 8-chip servers)",
            "the search is exact over the planner's candidates in both modes (paper mode's own plan uses the "
            "paper's bisection, which can miss a cheaper window)",
        ),
    )


def _curve(
    t: float, grid: tuple[float, ...], c0: float | None, costs: tuple[float | None, ...]
) -> PremiumCurve:
    return PremiumCurve(
        target_flop=t, bandwidth_grid_bits_per_s=grid, centralized_cost_usd=c0, cost_by_bandwidth_usd=costs
    )


def _cheapest_by_rate(
    eng: Engine, t: float, lay: SearchLayout, budgets: tuple[float, ...]
) -> tuple[float | None, ...]:
    """The cheapest plan's cost at each grid rate (USD, None: none within the largest budget), in
    `lay.bw` order: `search_target(..., cheapest_only=True)` over the grid's conditions alone, whose
    per-condition minimum equals the full search's (tests/model/test_frontier.py)."""
    if not budgets:
        return tuple(None for _ in lay.bw)
    order = sorted(lay.bw)
    tab = search_target(
        eng, t, tuple(lay.conds[k] for k in order), budgets, exact_screen=False, cheapest_only=True
    )
    cm = tab.cost_min.min(axis=1) if tab.combos.size else np.full(len(order), np.inf)
    at = {k: float(cm[j]) for j, k in enumerate(order)}
    return tuple(at[k] if math.isfinite(at[k]) else None for k in lay.bw)


def _with_band(lim: Limit, band: bands.Band | None) -> Limit:
    if band is None:
        return lim
    return dataclasses.replace(lim, band=band)


def _fewest(tab: TargetTable, k: int, budget: float) -> int:
    """The fewest sites of any plan within the budget at condition k (0: none)."""
    ok = tab.cost_min[k] <= budget * (1 + 1e-12)
    return int(np.nanmin(tab.n_min[k][ok])) if ok.any() else 0


__all__ = ["frontier"]
