"""Where dispersal stops (issue 23): for each compute target and each premium over one datacenter,
the limits of a dispersed run and the constraint that binds each one.

Method (docs/frontier.md): everything is the planner's own answer, `planner.plan` (exact search,
node sizes below the regime's cap) and `planner.centralized_baseline` (one datacenter of 8-chip
servers on 1000 Gbps links, the premium's denominator).

For a target T the planner is run at every bandwidth of a geometric grid (`BANDWIDTH_GRID_BITS_PER_S`,
per-site WAN, up = down) and once at the longest distance (`LONGEST_DISTANCE_M`, the grid's top
bandwidth). A premium x gives a budget x * C0 (C0 the centralized cost). Then per (T, x):

- least bandwidth per site: the lowest grid bandwidth whose plan costs at most the budget; the
  constraint that binds is what stops the next lower grid point: its plan's reason when no plan
  reaches T there, else the budget ("cost").
- sites, chips per site, power per site (chips x TDP x PUE, kW), run days, mean WAN Mbps: of that plan.
- least power per site: the smallest power per site among the grid plans within the budget.
- most sites seen: the most sites of those plans (a lower bound on the most sites within the budget).
- longest distance: `LONGEST_DISTANCE_M` when its plan fits the budget ("nothing binds"), else the
  budget binds at that distance (the model's latency only lengthens each sync: docs/frontier.md).
- P(reach) of the plan at 100 Mbps (Monte Carlo, `samples` draws; None when samples = 0).

Grid answers are brackets: the true least bandwidth lies above the next lower grid point. Nothing
here is fitted to a headline figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dispersal.model.inputs.catalog import accelerator
from dispersal.model.inputs.errors import require
from dispersal.model.inputs.scenario import Mode, latency_from_distance
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints

SCHEMA_VERSION = 1
#: Default compute targets, FLOP of C_quality (issue 23: 1e24 ... 1e27).
DEFAULT_TARGETS_FLOP: tuple[float, ...] = (1e24, 1e25, 1e26, 1e27)
#: Default premiums over one datacenter's cost (issue 23: 1.5x, 2x, 5x).
DEFAULT_PREMIUMS: tuple[float, ...] = (1.5, 2.0, 5.0)
#: Per-site WAN rates tried, bits/s: half-decades from 10 Mbps (a rural line) to 10 Gbps (a
#: dedicated wave); a grid, so each limit is a bracket.
BANDWIDTH_GRID_BITS_PER_S: tuple[float, ...] = (10e6, 30e6, 100e6, 300e6, 1e9, 3e9, 10e9)
#: The longest distance tried: half the Earth's circumference (20,000 km), i.e. anywhere on Earth.
LONGEST_DISTANCE_M = 20_000e3
#: The bandwidth at which P(reach) is drawn: the paper's threat model (100 Mbps per site).
REACH_BANDWIDTH_BITS_PER_S = 100e6


@dataclass(frozen=True, kw_only=True, slots=True)
class Limit:
    """The limits of dispersal for one target and one premium."""

    target_flop: float
    premium: float
    budget_usd: float | None
    """premium x the centralized cost; None when one datacenter cannot reach the target either."""
    least_bandwidth_bits_per_s: float | None
    """Lowest grid bandwidth whose plan fits the budget (None: none does)."""
    bandwidth_bracket_bits_per_s: tuple[float, float] | None
    """(next lower grid point or 0, least bandwidth): the true limit lies in (lo, hi]."""
    binds: str
    """What stops dispersal below the least bandwidth: the plan's reason, or "cost"."""
    sites: int | None
    chips_per_site: int | None
    hardware: str | None
    power_per_site_kw: float | None
    days: float | None
    mean_wan_mbps_per_site: float | None
    least_power_per_site_kw: float | None
    most_sites_seen: int | None
    """The most sites of any walked grid plan within the budget: a lower bound on the most sites a
    dispersed run can have within the premium (the planner minimises cost, not maximises sites)."""
    longest_distance_m: float | None
    distance_binds: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (schema in docs/frontier.md)."""
        d = {k: getattr(self, k) for k in self.__slots__}
        if self.bandwidth_bracket_bits_per_s is not None:
            d["bandwidth_bracket_bits_per_s"] = list(self.bandwidth_bracket_bits_per_s)
        return d


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
    """P(reach) per target at 100 Mbps (Monte Carlo); None when not drawn."""
    centralized_cost_usd: dict[float, float | None]
    cost_by_bandwidth_usd: dict[float, tuple[float | None, ...]]
    """Per target, the cheapest plan's cost at each grid bandwidth (None: cannot reach)."""
    limits: tuple[Limit, ...]
    samples: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON (schema in docs/frontier.md): P(reach) first, then the limits per (target, premium)."""
        return {
            "p_reach": [{"target_flop": t, "p_reach": self.p_reach[t]} for t in self.targets_flop],
            "schema_version": SCHEMA_VERSION,
            "mode": self.mode,
            "regime": self.regime,
            "metric": self.metric,
            "samples": self.samples,
            "targets_flop": list(self.targets_flop),
            "premiums": list(self.premiums),
            "bandwidth_grid_bits_per_s": list(self.bandwidth_grid_bits_per_s),
            "centralized_cost_usd": [
                {"target_flop": t, "cost_usd": self.centralized_cost_usd[t]} for t in self.targets_flop
            ],
            "cost_by_bandwidth_usd": [
                {"target_flop": t, "cost_usd": list(self.cost_by_bandwidth_usd[t])} for t in self.targets_flop
            ],
            "limits": [lim.to_dict() for lim in self.limits],
            "notes": list(self.notes),
        }


def power_per_site_kw(o: planner.PlanOption) -> float:
    """Electrical power of one site, kW: chips x TDP x PUE (the kernel's energy inputs; catalogue TDP,
    PUE from the scenario)."""
    acc = accelerator(o.hardware)
    return o.chips_per_node * acc.tdp_w * o.scenario.pue / 1000.0


def _with_bandwidth(c: Constraints, bw: float) -> Constraints:
    return c.replace(bandwidth_up_bits_per_s=bw, bandwidth_down_bits_per_s=bw)


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
) -> Frontier:
    """The limits of dispersal for every (target, premium) pair (method: module docstring).

    Args:
        targets_flop: compute targets, FLOP of the mode's metric (C_quality in default mode).
        premiums: cost multiples of one datacenter's plan (each > 1 is meaningful; > 0 allowed).
        regime_name, constraints, mode: as for `planner.plan`; the constraints' links are replaced by
            each grid bandwidth (latency kept, except the distance row).
        bandwidth_grid_bits_per_s: per-site WAN rates tried, ascending.
        samples, seed: Monte Carlo draws for P(reach) at 100 Mbps (0: not drawn).
    """
    targets = tuple(float(t) for t in targets_flop)
    prem = tuple(float(p) for p in premiums)
    grid = tuple(sorted(float(b) for b in bandwidth_grid_bits_per_s))
    require(
        len(targets) > 0 and all(math.isfinite(t) and t > 0 for t in targets), "targets", "must be > 0 FLOP"
    )
    require(len(prem) > 0 and all(math.isfinite(p) and p > 0 for p in prem), "premiums", "must be > 0")
    require(len(grid) > 0 and all(math.isfinite(b) and b > 0 for b in grid), "bandwidth", "must be > 0 bit/s")
    require(isinstance(samples, int) and 0 <= samples <= 100_000, "samples", "must be in [0, 100,000]")
    m = Mode(mode)
    c = constraints or Constraints()
    limits: list[Limit] = []
    reach: dict[float, float | None] = {}
    base_cost: dict[float, float | None] = {}
    costs: dict[float, tuple[float | None, ...]] = {}
    metric = ""
    for t in targets:
        base = planner.centralized_baseline(t, constraints=c, mode=m)
        metric = base.metric
        c0 = base.best.cost_usd if base.best is not None else None
        base_cost[t] = c0
        plans = _walk_down(t, regime_name, c, m, grid, max(prem) * c0) if c0 is not None else {}
        costs[t] = tuple(
            b.cost_usd if i in plans and (b := plans[i].best) is not None else None for i in range(len(grid))
        )
        far = None
        if c0 is not None:
            far_c = _with_bandwidth(c, grid[-1]).replace(latency_s=latency_from_distance(LONGEST_DISTANCE_M))
            far = planner.plan(t, regime_name=regime_name, constraints=far_c, mode=m)
        for x in prem:
            limits.append(_limit(t, x, c0, grid, plans, far))
        reach[t] = _p_reach(t, regime_name, c, m, samples, seed) if samples else None
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
        limits=tuple(limits),
        samples=samples,
        notes=(
            "limits are read on the bandwidth grid: the true least bandwidth lies in the bracket",
            "premium = plan cost / one datacenter's cost (planner.centralized_baseline: no rule, 1000 Gbps; "
            "paper mode 8-chip servers, default mode one building of any size, synchronous training allowed)",
        ),
    )


def _walk_down(
    t: float, regime_name: str, c: Constraints, m: Mode, grid: tuple[float, ...], budget: float
) -> dict[int, planner.Plan]:
    """Plans from the top of the bandwidth grid down, {grid index: plan}. The cost never falls as the
    bandwidth falls (a property test in tests/model/test_planner.py), so the walk stops at the first
    plan that cannot reach the target or costs more than the largest budget: every lower point would
    too. That plan is kept, as it says what binds."""
    out: dict[int, planner.Plan] = {}
    for i in range(len(grid) - 1, -1, -1):
        p = planner.plan(t, regime_name=regime_name, constraints=_with_bandwidth(c, grid[i]), mode=m)
        out[i] = p
        if p.best is None or p.best.cost_usd > budget * (1 + 1e-12):
            break
    return out


def _limit(
    t: float,
    x: float,
    c0: float | None,
    grid: tuple[float, ...],
    plans: dict[int, planner.Plan],
    far: planner.Plan | None,
) -> Limit:
    """One (target, premium) cell from the plans at the grid bandwidths walked and at the longest
    distance (None when one datacenter cannot reach the target)."""
    budget = x * c0 if c0 is not None else None
    ok = sorted(
        i
        for i, p in plans.items()
        if p.best is not None and budget is not None and p.best.cost_usd <= budget * (1 + 1e-12)
    )
    if budget is None or far is None:
        why = "one datacenter cannot reach the target either (no premium defined)"
    elif not ok:
        best = plans[len(grid) - 1]
        why = best.reasons[0] if best.reasons else f"cost: over {x:g}x even at the top of the grid"
    else:
        i = ok[0]
        below = plans.get(i - 1) if i > 0 else None
        if below is None:
            why = "below the grid: its lowest bandwidth already fits (the limit is lower)"
        elif below is None:
            why = "cost (the walk stopped above: a higher bandwidth already exceeded the largest budget)"
        elif below.best is None:
            why = below.reasons[0] if below.reasons else "cannot reach"
        else:
            why = f"cost: {below.best.cost_usd / c0:.2f}x at {grid[i - 1] / 1e6:g} Mbps" if c0 else "cost"
    o = plans[ok[0]].best if ok else None
    powers = [power_per_site_kw(b) for j in ok if (b := plans[j].best) is not None]
    sites = [b.nodes for j in ok if (b := plans[j].best) is not None]
    far_ok = (
        far is not None
        and far.best is not None
        and budget is not None
        and far.best.cost_usd <= budget * (1 + 1e-12)
    )
    if budget is None or far is None:
        dist_why = "no premium defined"
    elif far_ok:
        dist_why = "nothing binds up to 20,000 km (at the top grid bandwidth)"
    else:
        dist_why = far.reasons[0] if far is not None and far.best is None and far.reasons else "cost"
    return Limit(
        target_flop=t,
        premium=x,
        budget_usd=budget,
        least_bandwidth_bits_per_s=grid[ok[0]] if ok else None,
        bandwidth_bracket_bits_per_s=(grid[ok[0] - 1] if ok[0] > 0 else 0.0, grid[ok[0]]) if ok else None,
        binds=why,
        sites=o.nodes if o else None,
        chips_per_site=o.chips_per_node if o else None,
        hardware=o.label if o else None,
        power_per_site_kw=power_per_site_kw(o) if o else None,
        days=o.days if o else None,
        mean_wan_mbps_per_site=o.mean_wan_mbps_per_node if o else None,
        least_power_per_site_kw=min(powers) if powers else None,
        most_sites_seen=max(sites) if sites else None,
        longest_distance_m=LONGEST_DISTANCE_M if far_ok else None,
        distance_binds=dist_why,
    )


def _p_reach(t: float, regime_name: str, c: Constraints, m: Mode, samples: int, seed: int) -> float:
    """P(reach) at 100 Mbps per site: the Monte Carlo of `uncertainty.plan_samples`."""
    from dispersal.model.analyses.uncertainty import plan_samples

    r = plan_samples(
        t,
        samples=samples,
        seed=seed,
        regime_name=regime_name,
        constraints=_with_bandwidth(c, REACH_BANDWIDTH_BITS_PER_S),
        mode=m,
    )
    return r.p_reach


__all__ = [
    "BANDWIDTH_GRID_BITS_PER_S",
    "DEFAULT_PREMIUMS",
    "DEFAULT_TARGETS_FLOP",
    "LONGEST_DISTANCE_M",
    "SCHEMA_VERSION",
    "Frontier",
    "Limit",
    "frontier",
    "power_per_site_kw",
]
