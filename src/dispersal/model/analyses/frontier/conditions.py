"""Where each condition of the frontier's search sits (`table.search_target` takes them as one
sequence): the bandwidth grid from the top down, then the distances and the shorter time budgets at
the top rate."""

from __future__ import annotations

from dataclasses import dataclass

from dispersal.model.analyses.frontier.result import DISTANCE_GRID_M, DURATION_GRID_DAYS
from dispersal.model.analyses.frontier.table import Condition
from dispersal.model.inputs import units
from dispersal.model.inputs.scenario import latency_from_distance
from dispersal.model.search.candidates import Constraints


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchLayout:
    """Where each condition of the search sits: the bandwidth grid (ascending), distances, durations."""

    conds: tuple[Condition, ...]
    bw: tuple[int, ...]
    """Condition index per grid bandwidth (ascending)."""
    dist: tuple[int, ...]
    dist_m: tuple[float, ...]
    dur: tuple[int, ...]
    """Condition index per duration (ascending), the last the full time budget."""
    dur_days: tuple[float, ...]


def search_layout(grid: tuple[float, ...], c: Constraints) -> SearchLayout:
    """Conditions: the grid from the top down (condition 0 = the screen's), then the distances and
    the shorter durations at the top rate."""
    full = c.max_duration_s
    conds = [
        Condition(bandwidth_bits_per_s=b, latency_s=c.latency_s, duration_s=full) for b in reversed(grid)
    ]
    bw = tuple(len(grid) - 1 - i for i in range(len(grid)))
    dist_m = tuple(d for d in DISTANCE_GRID_M if latency_from_distance(d) > c.latency_s)
    dist = []
    for d in dist_m:
        dist.append(len(conds))
        conds.append(
            Condition(bandwidth_bits_per_s=grid[-1], latency_s=latency_from_distance(d), duration_s=full)
        )
    days = tuple(d for d in DURATION_GRID_DAYS if d * units.SECONDS_PER_DAY < full * (1 - 1e-9))
    dur = []
    for d in days:
        dur.append(len(conds))
        conds.append(
            Condition(
                bandwidth_bits_per_s=grid[-1], latency_s=c.latency_s, duration_s=d * units.SECONDS_PER_DAY
            )
        )
    return SearchLayout(
        conds=tuple(conds),
        bw=bw,
        dist=tuple(dist),
        dist_m=dist_m,
        dur=(*dur, 0),
        dur_days=(*days, full / units.SECONDS_PER_DAY),
    )
