"""Where dispersal stops (issue 23): for each compute target and each premium over one datacenter,
the limits of a dispersed run and the constraint that binds each one.

Method (docs/frontier.md): one vectorised exact search (`frontier.table`) over the planner's own
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
Monte Carlo bands per cell (`frontier.bands`), P(reach) first; the quality assumptions of many
replicas (loss-space bound, Muon inner optimizer) as separate lines. Nothing is fitted to a
headline figure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dispersal.model.analyses.frontier import bands as _bands
from dispersal.model.analyses.frontier.table import Condition, Engine, TargetTable, _geomgrid, search_target
from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import accelerator, regime
from dispersal.model.inputs.errors import require
from dispersal.model.inputs.scenario import Mode, latency_from_distance
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints

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
    band: _bands.Band | None = None

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
    notes: tuple[str, ...] = field(default_factory=tuple)

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
            "targets_flop": list(t),
            "premiums": list(self.premiums),
            "bandwidth_grid_bits_per_s": list(self.bandwidth_grid_bits_per_s),
            "reach_bandwidth_bits_per_s": REACH_BANDWIDTH_BITS_PER_S,
            "centralized_cost_usd": [{"target_flop": x, "cost_usd": self.centralized_cost_usd[x]} for x in t],
            "cost_by_bandwidth_usd": per_target(self.cost_by_bandwidth_usd, "cost_usd"),
            "most_sites_by_bandwidth": per_target(self.most_sites_by_bandwidth, "sites"),
            "fewest_sites_by_bandwidth": per_target(self.fewest_sites_by_bandwidth, "sites"),
            "limits": [lim.to_dict() for lim in self.limits],
            "at_sites": [a.to_dict() for a in self.at_sites],
            "quality_lines": [q.to_dict() for q in self.quality_lines],
            "notes": list(self.notes),
        }


def _listify(v: Any) -> Any:
    return [_listify(x) for x in v] if isinstance(v, tuple | list) else v


def power_per_site_kw(o: planner.PlanOption) -> float:
    """Electrical power of one site, kW: chips x TDP x PUE (the kernel's energy inputs; catalogue TDP,
    PUE from the scenario)."""
    acc = accelerator(o.hardware)
    return o.chips_per_node * acc.tdp_w * o.scenario.pue / 1000.0


@dataclass(frozen=True, kw_only=True, slots=True)
class _Layout:
    """Where each condition of the search sits: the bandwidth grid (ascending), distances, durations."""

    conds: tuple[Condition, ...]
    bw: tuple[int, ...]
    """Condition index per grid bandwidth (ascending)."""
    dist: tuple[int, ...]
    dist_m: tuple[float, ...]
    dur: tuple[int, ...]
    """Condition index per duration (ascending), the last the full time budget."""
    dur_days: tuple[float, ...]


def _layout(grid: tuple[float, ...], c: Constraints) -> _Layout:
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
    return _Layout(
        conds=tuple(conds),
        bw=bw,
        dist=tuple(dist),
        dist_m=dist_m,
        dur=(*dur, 0),
        dur_days=(*days, full / units.SECONDS_PER_DAY),
    )


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
    m = Mode(mode)
    c = constraints or Constraints()
    regime(regime_name)
    lay = _layout(grid, c)
    eng = Engine(m, c, regime_name)
    limits: list[Limit] = []
    reach: dict[float, float | None] = {}
    base_cost: dict[float, float | None] = {}
    base_plan: dict[float, planner.PlanOption | None] = {}
    costs: dict[float, tuple[float | None, ...]] = {}
    most_bw: dict[float, tuple[tuple[int, ...], ...]] = {}
    fewest_bw: dict[float, tuple[tuple[int, ...], ...]] = {}
    tables: dict[float, TargetTable] = {}
    metric = eng.metric.value
    for t in targets:
        base = planner.centralized_baseline(t, constraints=c, mode=m)
        base_plan[t] = base.best
        c0 = base.best.cost_usd if base.best is not None else None
        base_cost[t] = c0
        budgets = tuple(x * c0 for x in prem) if c0 is not None else ()
        tab = search_target(eng, t, lay.conds, budgets)
        tables[t] = tab
        cm = tab.cost_min.min(axis=1) if tab.combos.size else np.full(len(lay.conds), np.inf)
        costs[t] = tuple(float(cm[k]) if math.isfinite(cm[k]) else None for k in lay.bw)
        order = np.argsort(np.argsort(prem))  # budgets are sorted ascending in the table
        most_bw[t] = tuple(
            tuple(int(tab.most_sites[k, order[j]]) if budgets else 0 for j in range(len(prem)))
            for k in lay.bw
        )
        fewest_bw[t] = tuple(tuple(_fewest(tab, k, x * c0) if c0 else 0 for x in prem) for k in lay.bw)
        band = _p_reach(eng, t, tab, lay, grid, prem, base.best, c, m, samples, seed) if samples else None
        reach[t] = band.p_reach_at_reach_bandwidth if band is not None else None
        for j, x in enumerate(prem):
            lim = _limit(eng, t, x, c0, grid, tab, lay, int(order[j]))
            limits.append(_with_band(lim, band.bands[j] if band is not None else None))
    at = _at_sites(eng, tuple(sites), prem, base_cost, lay) if sites else ()
    qlines = _quality_lines(m, c, regime_name, targets, prem, base_cost, lay, grid) if quality_lines else ()
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
        notes=(
            "least bandwidth, shortest run and longest distance are read on grids: the true limit lies in the bracket",
            "most sites is searched over every integer site count (grid, then bisection) at every grid bandwidth",
            "premium = plan cost / one building's cost (planner.centralized_baseline: no rule, 1000 Gbps; "
            "default mode one building of any size training synchronously, paper mode 8-chip servers)",
            "the search is exact over the planner's candidates in both modes (paper mode's own plan uses the "
            "paper's bisection, which can miss a cheaper window)",
        ),
    )


def _with_band(lim: Limit, band: _bands.Band | None) -> Limit:
    if band is None:
        return lim
    return dataclasses.replace(lim, band=band)


def _fewest(tab: TargetTable, k: int, budget: float) -> int:
    """The fewest sites of any plan within the budget at condition k (0: none)."""
    ok = tab.cost_min[k] <= budget * (1 + 1e-12)
    return int(np.nanmin(tab.n_min[k][ok])) if ok.any() else 0


def _fmt_bw(b: float) -> str:
    return units.format_bandwidth(b)


def _cannot(eng: Engine, tab: TargetTable, t: float, where: str, prem_max: float | None) -> str:
    """Why no plan reaches t within the largest premium at the screen's condition."""
    best = float(np.max(tab.reach_uncapped_flop)) if tab.reach_uncapped_flop.size else -math.inf
    if best >= t * (1 - 1e-9) and prem_max is not None:
        return f"cost: over {prem_max:g}x {where}"
    if tab.c_local_uncapped_flop >= t:
        return (
            f"replica quality: at most {best:.3g} FLOP {eng.metric.value} at any site count {where}, though the "
            f"chips deliver {tab.c_local_uncapped_flop:.3g} FLOP C_local"
        )
    days = eng.c.max_duration_s / units.SECONDS_PER_DAY
    return f"time budget: at most {max(best, tab.c_local_uncapped_flop):.3g} FLOP in {days:.4g} days {where}"


def _limit(
    eng: Engine,
    t: float,
    x: float,
    c0: float | None,
    grid: tuple[float, ...],
    tab: TargetTable,
    lay: _Layout,
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
            else _cannot(eng, tab, t, f"at {top}", x)
        )
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
        why = (
            f"cost: {cm[kb] / c0:.2f}x at {below}"
            if math.isfinite(cm[kb])
            else f"bandwidth: at {below} no plan reaches {t:.0e} FLOP within the largest premium"
        )
    k = lay.bw[i0]
    ci = int(np.argmin(tab.cost_min[k]))
    pk = eng.pick(int(tab.combos[ci]), int(tab.n_min[k, ci]), lay.conds[k])
    most, most_bw, most_hw, most_why = _most(eng, tab, lay, grid, j)
    lp, lp_hw, lp_why = _least_power(eng, tab, lay, tol, t)
    sr, sr_br, sr_why = _shortest(tab, lay, cm, tol, c0)
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
    )


def _most(
    eng: Engine, tab: TargetTable, lay: _Layout, grid: tuple[float, ...], j: int
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
    eng: Engine, tab: TargetTable, lay: _Layout, tol: float, t: float
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
    elif np.any(tab.reach_uncapped_flop[smaller] >= t * (1 - 1e-9)):
        why = "cost: smaller sites reach the target only beyond the premium"
    else:
        why = "replica quality: smaller sites cannot reach the target at any site count"
    return lp, eng.labels[int(hw[i])], why


def _shortest(
    tab: TargetTable, lay: _Layout, cm: Any, tol: float, c0: float
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
    why = (
        f"cost: {cm[k] / c0:.2f}x in {d:g} days"
        if math.isfinite(cm[k])
        else (f"time budget: in {d:g} days no plan reaches the target within the largest premium")
    )
    return lay.dur_days[i], (d, lay.dur_days[i]), why


def _distance(lay: _Layout, cm: Any, tol: float, c0: float, top: str) -> tuple[float | None, str]:
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
    out: list[AtSites] = []
    prev: dict[float | None, AtSites] = {}
    for n in sorted(sites):
        sel = (lo <= n) & (hi >= lo)
        g = _geomgrid(lo[sel], np.minimum(hi[sel], float(n)), AT_SITES_POINTS)
        cc = np.repeat(allc[sel], AT_SITES_POINTS)
        nn = g.reshape(-1)
        r = eng.run(cc, nn, np.zeros(cc.size, dtype=np.int64), lay.conds)
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
) -> tuple[QualityLine, ...]:
    """Each of QUALITY_ASSUMPTIONS: least bandwidth per premium and the premium at the reach rate
    (the building's cost is unchanged: it trains synchronously, one replica)."""
    if m is not Mode.DEFAULT:
        return ()
    conds = tuple(lay.conds[k] for k in sorted(lay.bw))  # the grid, top first
    bw_k = tuple(len(grid) - 1 - i for i in range(len(grid)))
    out: list[QualityLine] = []
    for name, changes in QUALITY_ASSUMPTIONS:
        eng = Engine(m, c.replace(**changes), regime_name)
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
    """The grid index nearest (in log) to REACH_BANDWIDTH_BITS_PER_S."""
    return int(np.argmin([abs(math.log(b / REACH_BANDWIDTH_BITS_PER_S)) for b in grid]))


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
    conds = tuple(lay.conds[k] for k in lay.bw)  # ascending grid
    sl = _bands.shortlist(tab, lay.bw)
    costs = _bands.least_costs(eng, dr, t, sl, conds, draws)
    ri = _reach_index(grid)
    p_any = float(np.mean(np.isfinite(costs[:, ri])))
    if building is None:
        return _bands.TargetBands(
            p_reach_at_reach_bandwidth=p_any, bands=tuple(_empty_band(len(grid)) for _ in prem)
        )
    cb = c.replace(
        bandwidth_up_bits_per_s=planner.DATACENTER_BITS_PER_S,
        bandwidth_down_bits_per_s=planner.DATACENTER_BITS_PER_S,
        latency_s=planner.DATACENTER_LATENCY_S,
        compression_ratio=1.0,
        regional_bandwidth_bits_per_s=None,
        pp_bandwidth_bits_per_s=None,
        chips_per_node=building.chips_per_node,
        data_parallel=m is Mode.DEFAULT,
        hardware=(building.hardware,),
    )
    beng = Engine(m, cb, "none")
    bc = Condition(
        bandwidth_bits_per_s=planner.DATACENTER_BITS_PER_S,
        latency_s=planner.DATACENTER_LATENCY_S,
        duration_s=c.max_duration_s,
    )
    ball = np.flatnonzero(beng.usable).astype(np.int64)
    c0 = _bands.least_costs(beng, dr, t, ball, (bc,), draws)[:, 0]
    out = []
    for x in prem:
        within = costs <= (x * c0)[:, None] * (1 + 1e-12)
        any_b = within.any(axis=1)
        first = np.where(any_b, np.asarray(grid)[np.argmax(within, axis=1)], np.inf)
        prem_r = np.where(np.isfinite(costs[:, ri]) & np.isfinite(c0), costs[:, ri] / c0, np.inf)
        out.append(
            _bands.Band(
                p_reach=float(any_b.mean()),
                p_reach_by_bandwidth=tuple(float(v) for v in within.mean(axis=0)),
                least_bandwidth_q=_bands.quantiles_inf(first),
                premium_at_reach_bandwidth_q=_bands.quantiles_inf(prem_r),
            )
        )
    return _bands.TargetBands(p_reach_at_reach_bandwidth=p_any, bands=tuple(out))


def _empty_band(n: int) -> _bands.Band:
    inf3 = (math.inf, math.inf, math.inf)
    return _bands.Band(
        p_reach=0.0,
        p_reach_by_bandwidth=(0.0,) * n,
        least_bandwidth_q=inf3,
        premium_at_reach_bandwidth_q=inf3,
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
    "QualityLine",
    "frontier",
    "power_per_site_kw",
]
