"""Where dispersal stops (issue 23; docs/frontier.md): one package, a file per question `dispersal
frontier` asks, then their parts.

Questions: `grid` (the grid: per target and premium, the limits and what binds them), `over_time`
(`--year`: per algorithm generation, then projections), `survive` (`--compare`: one building vs N
sites losing sites; `analyses.monitor` adds what a monitor sees), `sensitivity` (`--sensitivity`).
Parts: `table` (the vectorised search), `conditions` (where each condition sits), `cells` (one
cell's limits), `at_sites`, `quality_lines`, `p_reach` and `bands` (the Monte Carlo), `result`
(defaults, grids, result types), `power` (power per site, grid class), `walk_down` (the planner
down the bandwidth grid). This face hands on the grid's names.
"""

from dispersal.model.analyses.frontier.grid import frontier
from dispersal.model.analyses.frontier.power import power_per_site_kw
from dispersal.model.analyses.frontier.result import (
    BANDWIDTH_GRID_BITS_PER_S,
    BINDS,
    DEFAULT_PREMIUMS,
    DEFAULT_SITES,
    DEFAULT_TARGETS_FLOP,
    DISTANCE_GRID_M,
    DURATION_GRID_DAYS,
    LONGEST_DISTANCE_M,
    QUALITY_ASSUMPTIONS,
    REACH_BANDWIDTH_BITS_PER_S,
    SCHEMA_VERSION,
    AtSites,
    Frontier,
    Limit,
    PremiumCurve,
    QualityLine,
)

__all__ = [
    "BANDWIDTH_GRID_BITS_PER_S",
    "BINDS",
    "DEFAULT_PREMIUMS",
    "DEFAULT_SITES",
    "DEFAULT_TARGETS_FLOP",
    "DISTANCE_GRID_M",
    "DURATION_GRID_DAYS",
    "LONGEST_DISTANCE_M",
    "QUALITY_ASSUMPTIONS",
    "REACH_BANDWIDTH_BITS_PER_S",
    "SCHEMA_VERSION",
    "AtSites",
    "Frontier",
    "Limit",
    "PremiumCurve",
    "QualityLine",
    "frontier",
    "power_per_site_kw",
]
