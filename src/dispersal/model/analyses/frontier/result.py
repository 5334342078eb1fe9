"""The frontier's defaults, grids and result types (schema: docs/frontier.md, "JSON")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dispersal.model.analyses.frontier import bands

SCHEMA_VERSION = 2
#: Default compute targets, FLOP of C_quality (issue 23: 1e24 ... 1e27).
DEFAULT_TARGETS_FLOP: tuple[float, ...] = (1e24, 1e25, 1e26, 1e27)
#: Default premiums over one datacenter's cost (issue 23: 1.5x, 2x, 5x).
DEFAULT_PREMIUMS: tuple[float, ...] = (1.5, 2.0, 5.0)
#: Per-site WAN rates tried, bits/s: half-decades from 10 Mbps (a rural line) to 10 Gbps (a
#: dedicated wave); a grid, so each limit is a bracket.
BANDWIDTH_GRID_BITS_PER_S: tuple[float, ...] = (10e6, 30e6, 100e6, 300e6, 1e9, 3e9, 10e9)
#: Distances tried at the top rate (fibre route, `latency_from_distance`); the longest is half the
#: Earth's circumference (20,000 km), i.e. anywhere on Earth.
DISTANCE_GRID_M: tuple[float, ...] = (1_000e3, 3_000e3, 10_000e3, 20_000e3)
LONGEST_DISTANCE_M = DISTANCE_GRID_M[-1]
#: Time budgets tried for the shortest run, days (plus the constraints' own budget, 740 by default).
DURATION_GRID_DAYS: tuple[float, ...] = (7, 14, 30, 60, 90, 180, 365, 540)
#: Site counts of the "largest target at N sites" rows (`--sites`).
DEFAULT_SITES: tuple[int, ...] = (10, 100, 1000)
#: Site counts tried per candidate for those rows (geometric up to N: fewer sites may fit a premium).
AT_SITES_POINTS = 6
#: The bandwidth at which P(reach) is drawn: the paper's threat model (100 Mbps per site).
REACH_BANDWIDTH_BITS_PER_S = 100e6
#: The many-replica quality assumptions shown as separate lines (docs/quality.md, "Beyond eight
#: replicas"): the conservative loss-space bound and the Muon inner optimizer (MuLoCo offset).
QUALITY_ASSUMPTIONS: tuple[tuple[str, dict[str, str]], ...] = (
    ("loss-space bound (conservative mapping)", {"quality_mapping": "loss"}),
    ("Muon inner optimizer (MuLoCo)", {"inner_optimizer": "muon"}),
)
#: Words a `binds` string starts with (then ": " and the detail).
BINDS = (
    "bandwidth",
    "latency",
    "replica quality",
    "memory",
    "time budget",
    "power",
    "cost",
    "overtraining window",
    "node cap",
    "nothing",
    "no premium",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Limit:
    """The limits of dispersal for one target and one premium (None: no plan within the premium)."""

    target_flop: float
    premium: float
    budget_usd: float | None
    """premium x the centralized cost; None when one datacenter cannot reach the target either."""
    least_bandwidth_bits_per_s: float | None
    bandwidth_bracket_bits_per_s: tuple[float, float] | None
    """(next lower grid point or 0, least bandwidth): the true limit lies in (lo, hi]."""
    binds: str
    """What stops dispersal below the least bandwidth ("<word>: detail", words in BINDS)."""
    sites: int | None
    chips_per_site: int | None
    hardware: str | None
    power_per_site_kw: float | None
    days: float | None
    mean_wan_mbps_per_site: float | None
    cost_usd: float | None
    most_sites: int | None
    most_sites_bandwidth_bits_per_s: float | None
    most_sites_hardware: str | None
    most_sites_binds: str
    least_power_per_site_kw: float | None
    least_power_hardware: str | None
    least_power_binds: str
    shortest_run_days: float | None
    shortest_run_bracket_days: tuple[float, float] | None
    shortest_run_binds: str
    longest_distance_m: float | None
    distance_binds: str
    replicas_beyond_evidence: int | None = None
    """Replicas of the least-bandwidth plan beyond the published evidence (max(0, M - 16): DiLoCo
    points reach M = 16, MuLoCo 2025; `quality.EVIDENCE_REPLICAS_MAX`); None without a plan."""
    band: bands.Band | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (schema in docs/frontier.md); the band (P(reach) first) leads when drawn."""
        d: dict[str, Any] = {"band": self.band.to_dict() if self.band is not None else None}
        for k in self.__slots__:
            if k == "band":
                continue
            v = getattr(self, k)
            d[k] = list(v) if isinstance(v, tuple) else v
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class AtSites:
    """The largest target reachable with at most `sites` sites, within a premium (None: any cost)."""

    sites: int
    premium: float | None
    largest_target_flop: float | None
    hardware: str | None
    sites_used: int | None
    cost_usd: float | None
    binds: str
    bandwidth_bits_per_s: float = 0.0
    replicas_beyond_evidence: int | None = None
    """Replicas of that plan beyond the published evidence (max(0, M - 16)); None without a plan."""
    """The per-site rate searched at (the grid's top)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, kw_only=True, slots=True)
class QualityLine:
    """One target under one many-replica quality assumption: least bandwidth per premium."""

    assumption: str
    target_flop: float
    least_bandwidth_bits_per_s: tuple[float | None, ...]
    """Per premium (the frontier's order); None: no grid rate within it."""
    premium_at_reach_bandwidth: float | None
    """The cheapest plan's premium at REACH_BANDWIDTH_BITS_PER_S (None: none within the largest)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "assumption": self.assumption,
            "target_flop": self.target_flop,
            "least_bandwidth_bits_per_s": list(self.least_bandwidth_bits_per_s),
            "premium_at_reach_bandwidth": self.premium_at_reach_bandwidth,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class PremiumCurve:
    """One target's first answer, as soon as its search is done (before the cells, the draws and the
    other targets): the cheapest plan's cost at each grid bandwidth against one building's. The same
    numbers as the finished `Frontier`'s ``centralized_cost_usd`` and ``cost_by_bandwidth_usd``."""

    target_flop: float
    bandwidth_grid_bits_per_s: tuple[float, ...]
    centralized_cost_usd: float | None
    """One building's cost, USD (None: one building cannot reach the target either)."""
    cost_by_bandwidth_usd: tuple[float | None, ...]
    """Per grid bandwidth (ascending): the cheapest plan's cost, USD (None: none within the largest
    premium searched)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "target_flop": self.target_flop,
            "bandwidth_grid_bits_per_s": list(self.bandwidth_grid_bits_per_s),
            "centralized_cost_usd": self.centralized_cost_usd,
            "cost_by_bandwidth_usd": list(self.cost_by_bandwidth_usd),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Frontier:
    """The limits of dispersal over targets and premiums (`frontier`)."""

    mode: str
    regime: str
    metric: str
    targets_flop: tuple[float, ...]
    premiums: tuple[float, ...]
    bandwidth_grid_bits_per_s: tuple[float, ...]
    p_reach: dict[float, float | None]
    """P(reach) per target at REACH_BANDWIDTH_BITS_PER_S, whatever the cost (Monte Carlo); None when
    not drawn."""
    centralized_cost_usd: dict[float, float | None]
    cost_by_bandwidth_usd: dict[float, tuple[float | None, ...]]
    """Per target, the cheapest plan's cost at each grid bandwidth (None: none within the largest
    premium)."""
    most_sites_by_bandwidth: dict[float, tuple[tuple[int, ...], ...]]
    """Per target, per grid bandwidth: the most sites within each premium (0: no plan)."""
    fewest_sites_by_bandwidth: dict[float, tuple[tuple[int, ...], ...]]
    """Per target, per grid bandwidth: the fewest sites within each premium (0: no plan)."""
    limits: tuple[Limit, ...]
    at_sites: tuple[AtSites, ...]
    quality_lines: tuple[QualityLine, ...]
    samples: int = 0
    max_site_kw: float | None = None
    """The per-site power cap searched under, kW (None: none)."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def where_it_stops(self) -> list[dict[str, Any]]:
        """Per premium x: the share of draws reaching each target within x (some grid bandwidth), and
        "where it stops" as a range: the largest target reached by >= 90%, >= 50% and >= 10% of the
        draws (None: no target that often; empty without draws)."""
        out: list[dict[str, Any]] = []
        for x in self.premiums:
            share = {
                lim.target_flop: lim.band.p_reach
                for lim in self.limits
                if lim.premium == x and lim.band is not None
            }
            if not share:
                continue

            def largest(q: float, share: dict[float, float] = share) -> float | None:
                ok = [t for t, v in share.items() if v >= q - 1e-12]
                return max(ok) if ok else None

            out.append(
                {
                    "premium": x,
                    "share_of_draws": [{"target_flop": t, "share": v} for t, v in sorted(share.items())],
                    "largest_target_p90_p50_p10": [largest(0.9), largest(0.5), largest(0.1)],
                }
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON (schema in docs/frontier.md): P(reach) first, then the limits per (target, premium)."""
        t = self.targets_flop

        def per_target(d: dict[float, Any], key: str) -> list[dict[str, Any]]:
            return [{"target_flop": x, key: _listify(d[x])} for x in t]

        return {
            "p_reach": [{"target_flop": x, "p_reach": self.p_reach[x]} for x in t],
            "schema_version": SCHEMA_VERSION,
            "mode": self.mode,
            "regime": self.regime,
            "metric": self.metric,
            "samples": self.samples,
            "max_site_kw": self.max_site_kw,
            "targets_flop": list(t),
            "premiums": list(self.premiums),
            "bandwidth_grid_bits_per_s": list(self.bandwidth_grid_bits_per_s),
            "reach_bandwidth_bits_per_s": reach_bandwidth(self.bandwidth_grid_bits_per_s),
            "centralized_cost_usd": [{"target_flop": x, "cost_usd": self.centralized_cost_usd[x]} for x in t],
            "cost_by_bandwidth_usd": per_target(self.cost_by_bandwidth_usd, "cost_usd"),
            "most_sites_by_bandwidth": per_target(self.most_sites_by_bandwidth, "sites"),
            "fewest_sites_by_bandwidth": per_target(self.fewest_sites_by_bandwidth, "sites"),
            "where_it_stops": self.where_it_stops(),
            "limits": [lim.to_dict() for lim in self.limits],
            "at_sites": [a.to_dict() for a in self.at_sites],
            "quality_lines": [q.to_dict() for q in self.quality_lines],
            "notes": list(self.notes),
        }


def reach_bandwidth(grid: tuple[float, ...]) -> float:
    """The grid rate of the P(reach) figures: REACH_BANDWIDTH_BITS_PER_S, or the grid rate nearest to
    it (in log) when the grid does not hold it."""
    return grid[int(np.argmin([abs(math.log(b / REACH_BANDWIDTH_BITS_PER_S)) for b in grid]))]


def reach_index(grid: tuple[float, ...]) -> int:
    """The grid index of `reach_bandwidth` (REACH_BANDWIDTH_BITS_PER_S or the nearest grid rate)."""
    return grid.index(reach_bandwidth(grid))


def _listify(v: Any) -> Any:
    return [_listify(x) for x in v] if isinstance(v, tuple | list) else v
