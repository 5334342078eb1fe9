"""The frontier under each many-replica quality assumption (`QUALITY_ASSUMPTIONS`: the loss-space
bound, the Muon inner optimizer), shown as separate lines: least bandwidth per premium and the premium
at the reach bandwidth."""

from __future__ import annotations

import math

import numpy as np

from dispersal.model.analyses.frontier.conditions import SearchLayout
from dispersal.model.analyses.frontier.result import QUALITY_ASSUMPTIONS, QualityLine, reach_index
from dispersal.model.analyses.frontier.table import Engine, search_target
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search.candidates import Constraints


def quality_assumption_lines(
    m: Mode,
    c: Constraints,
    regime_name: str,
    targets: tuple[float, ...],
    prem: tuple[float, ...],
    base_cost: dict[float, float | None],
    lay: SearchLayout,
    grid: tuple[float, ...],
    max_site_kw: float | None = None,
    main: Engine | None = None,
) -> tuple[QualityLine, ...]:
    """Each of QUALITY_ASSUMPTIONS: least bandwidth per premium and the premium at the reach rate
    (the building's cost is unchanged: it trains synchronously, one replica). `main`: the main
    search's engine (same constraints but for the assumption), whose windows are reused."""
    if m is not Mode.DEFAULT:
        return ()
    conds = tuple(lay.conds[k] for k in sorted(lay.bw))  # the grid, top first
    bw_k = tuple(len(grid) - 1 - i for i in range(len(grid)))
    out: list[QualityLine] = []
    for name, changes in QUALITY_ASSUMPTIONS:
        # (the main search's windows are these engines' too: the assumptions move only the quality stage)
        eng = Engine(m, c.replace(**changes), regime_name, max_site_kw=max_site_kw, windows_of=main)
        for t in targets:
            c0 = base_cost[t]
            if c0 is None:
                continue
            tab = search_target(
                eng, t, conds, tuple(x * c0 for x in prem), exact_screen=False, cheapest_only=True
            )
            cm = tab.cost_min.min(axis=1) if tab.combos.size else np.full(len(conds), np.inf)
            least = []
            for x in prem:
                ok = [grid[i] for i, k in enumerate(bw_k) if cm[k] <= x * c0 * (1 + 1e-12)]
                least.append(ok[0] if ok else None)
            ri = reach_index(grid)
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
