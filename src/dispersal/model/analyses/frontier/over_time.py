"""The frontier over time (issue 23 item 3): how the limit of dispersal moved from DiLoCo (2023) to
Decoupled DiLoCo (2026), and where trends would take it.

Method (docs/frontier.md, "The frontier over time"):

- Each algorithm generation (`dispersal/data/generations.toml`: codec, overlap, fragments, merge, sync,
  published H) becomes `Constraints.scenario_overrides` for the planner. The hardware is held fixed
  (default one accelerator, H100 SXM, so only the algorithm moves and the walk stays cheap).
- The premium's denominator is one datacenter with the same hardware (`planner.centralized_baseline`,
  no overrides: one building does not need a low-communication algorithm).
- For each generation the planner runs at the bandwidths of `frontier.BANDWIDTH_GRID_BITS_PER_S`
  from the top down (`walk_down`), stopping at the first plan that cannot reach the target or costs
  more than the largest premium's budget (the cost never falls as the bandwidth falls). Per premium
  x: the least grid bandwidth whose plan costs <= x C0, and what binds one grid point below (as
  `frontier`).
- How the limit moved (`envelope`): in each generation year, per premium, the least bandwidth of any
  generation published by then.
- Projections (every one labelled "projection"): after the last generation year the envelope is held
  (no new algorithm assumed); what a fixed line spend buys grows by `bandwidth_growth_per_year` from
  `reference_line_bits_per_s` in `reference_year`; the compute a fixed budget buys grows as FLOP/s per
  dollar, doubling every `flop_per_s_per_dollar_doubling_years`. Both sides of the premium buy the same
  chips, so the hardware trend leaves the premium unchanged (energy aside).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from dispersal.model.analyses.frontier.power import grid_class, power_per_site_kw
from dispersal.model.analyses.frontier.result import BANDWIDTH_GRID_BITS_PER_S
from dispersal.model.analyses.frontier.walk_down import BUDGET_TOLERANCE, walk_down
from dispersal.model.inputs.catalog import regime
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints

SCHEMA_VERSION = 1
#: The target of the time series, FLOP (C_quality): the EU AI Act's systemic-risk threshold.
DEFAULT_TARGET_FLOP = 1e25
#: Premiums over one datacenter (issue 23: 1.5x / 2x / 5x).
DEFAULT_PREMIUMS: tuple[float, ...] = (1.5, 2.0, 5.0)
#: One accelerator for every generation, so only the algorithm moves (and the walk stays < 10 s).
DEFAULT_HARDWARE: tuple[str, ...] = ("h100_sxm",)
#: Last projected year.
DEFAULT_UNTIL_YEAR = 2030


@dataclass(frozen=True, kw_only=True, slots=True)
class Generation:
    """One algorithm generation as its paper ran it (generations.toml)."""

    name: str
    label: str
    year: int
    codec: str
    overlap_communication: bool
    fragments: int
    merge_rule: str
    sync: str
    inner_steps: int
    """Published H (inner steps per outer step)."""
    source: str

    def overrides(self, *, published_h: bool = False) -> tuple[tuple[str, Any], ...]:
        """Scenario overrides for the planner; H only when `published_h` (else the planner's H_min)."""
        out: list[tuple[str, Any]] = [
            ("codec", self.codec),
            ("overlap_communication", self.overlap_communication),
            ("fragments", self.fragments),
            ("merge_rule", self.merge_rule),
        ]
        if published_h:
            out.append(("inner_steps", self.inner_steps))
        return tuple(out)

    @property
    def slot_kinds(self) -> tuple[str, ...]:
        """The planner's slots this generation may use: synchronous generations never the asynchronous
        Decoupled DiLoCo slot (it did not exist yet); an asynchronous one also everything before it."""
        base = ("auto", "hierarchical")
        return (*base, "decoupled") if self.sync == "asynchronous" else base


@dataclass(frozen=True, kw_only=True, slots=True)
class Trend:
    """A trend assumption for projections, with its status (sourced / assumption) and source."""

    name: str
    value: float
    unit: str
    status: str
    source: str


@cache
def _data() -> dict[str, Any]:
    text = resources.files("dispersal.data").joinpath("generations.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@cache
def generations() -> tuple[Generation, ...]:
    """The generations of generations.toml, oldest first."""
    gens = tuple(Generation(**e) for e in _data()["generation"])
    return tuple(sorted(gens, key=lambda g: g.year))


@cache
def trends() -> dict[str, Trend]:
    """The trend assumptions of generations.toml by name."""
    return {e["name"]: Trend(**e) for e in _data()["trend"]}


def generation(name: str) -> Generation:
    """A generation by name; InputError listing the known ones otherwise."""
    for g in generations():
        if g.name == name:
            return g
    raise InputError("generation", f"unknown {name!r}; known: {', '.join(g.name for g in generations())}")


@dataclass(frozen=True, kw_only=True, slots=True)
class GenerationLimit:
    """The least bandwidth per site within one premium, for one generation."""

    premium: float
    least_bandwidth_bits_per_s: float | None
    bandwidth_bracket_bits_per_s: tuple[float, float] | None
    binds: str
    sites: int | None
    hardware: str | None
    power_per_site_kw: float | None
    grid_class: str | None = None
    """The site's grid-connection class (`power.grid_class`)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        d = {k: getattr(self, k) for k in self.__slots__}
        if self.bandwidth_bracket_bits_per_s is not None:
            d["bandwidth_bracket_bits_per_s"] = list(self.bandwidth_bracket_bits_per_s)
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class GenerationPoint:
    """One generation's frontier: its cost at each grid bandwidth and its limit per premium."""

    generation: Generation
    cost_by_bandwidth_usd: tuple[float | None, ...]
    limits: tuple[GenerationLimit, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        g = self.generation
        return {
            "name": g.name,
            "label": g.label,
            "year": g.year,
            "projection": False,
            "codec": g.codec,
            "overlap_communication": g.overlap_communication,
            "fragments": g.fragments,
            "merge_rule": g.merge_rule,
            "sync": g.sync,
            "published_inner_steps": g.inner_steps,
            "source": g.source,
            "cost_by_bandwidth_usd": list(self.cost_by_bandwidth_usd),
            "limits": [lim.to_dict() for lim in self.limits],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Projection:
    """One projected year: labelled a projection, never a result."""

    year: int
    basis: str
    """What is held: the best generation published by the last generation year (no new algorithm)."""
    least_bandwidth_bits_per_s: dict[float, float | None]
    """Per premium: the envelope's least bandwidth in the last generation year (held: bandwidth is not
    costed by the planner and both sides of the premium buy the same chips, so the trends do not move
    it)."""
    line_bits_per_s: float
    """What a fixed line spend buys that year (bandwidth trend)."""
    compute_per_dollar_gain: float
    """FLOP/s per dollar relative to the basis year (hardware trend)."""
    target_at_same_budget_flop: float
    """The compute the basis year's budget for the target buys that year."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "year": self.year,
            "projection": True,
            "basis": self.basis,
            "least_bandwidth_bits_per_s": [
                {"premium": x, "bits_per_s": v} for x, v in self.least_bandwidth_bits_per_s.items()
            ],
            "line_bits_per_s": self.line_bits_per_s,
            "line_covers": [
                {"premium": x, "covered": v is not None and self.line_bits_per_s >= v}
                for x, v in self.least_bandwidth_bits_per_s.items()
            ],
            "compute_per_dollar_gain": self.compute_per_dollar_gain,
            "target_at_same_budget_flop": self.target_at_same_budget_flop,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class FrontierOverTime:
    """The frontier per generation and the projections after the last one."""

    target_flop: float
    premiums: tuple[float, ...]
    regime: str
    mode: str
    hardware: tuple[str, ...]
    published_h: bool
    centralized_cost_usd: float | None
    bandwidth_grid_bits_per_s: tuple[float, ...]
    points: tuple[GenerationPoint, ...]
    projections: tuple[Projection, ...]
    trends: tuple[Trend, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON (schema in docs/frontier.md, "The frontier over time")."""
        return {
            "schema_version": SCHEMA_VERSION,
            "target_flop": self.target_flop,
            "premiums": list(self.premiums),
            "regime": self.regime,
            "mode": self.mode,
            "hardware": list(self.hardware),
            "published_h": self.published_h,
            "centralized_cost_usd": self.centralized_cost_usd,
            "bandwidth_grid_bits_per_s": list(self.bandwidth_grid_bits_per_s),
            "generations": [p.to_dict() for p in self.points],
            "envelope": envelope(self.points),
            "projections": [p.to_dict() for p in self.projections],
            "trends": [{k: getattr(t, k) for k in t.__slots__} for t in self.trends],
            "notes": list(self.notes),
        }


def line_rate_bits_per_s(
    year: int, *, reference_bits_per_s: float, reference_year: int, growth: float
) -> float:
    """What a fixed line spend buys in `year`: R0 (1 + g)^(year - year0), bit/s (Nielsen's law form)."""
    return reference_bits_per_s * (1.0 + growth) ** (year - reference_year)


def compute_per_dollar_gain(years: float, doubling_years: float) -> float:
    """FLOP/s per dollar after `years`, relative to now: 2^(years / doubling time)."""
    require(doubling_years > 0, "doubling_years", f"must be > 0, got {doubling_years}")
    return float(2.0 ** (years / doubling_years))


def _limit(x: float, c0: float, grid: tuple[float, ...], plans: dict[int, planner.Plan]) -> GenerationLimit:
    """The least grid bandwidth within x C0 and what binds one grid point below."""
    ok = sorted(
        i for i, p in plans.items() if p.best is not None and p.best.cost_usd <= x * c0 * BUDGET_TOLERANCE
    )
    if not ok:
        top = plans[len(grid) - 1]
        why = (
            f"cost: {top.best.cost_usd / c0:.2f}x even at {grid[-1] / 1e9:g} Gbps"
            if top.best is not None
            else (top.reasons[0] if top.reasons else "cannot reach")
        )
        return GenerationLimit(
            premium=x,
            least_bandwidth_bits_per_s=None,
            bandwidth_bracket_bits_per_s=None,
            binds=why.split("; closest:")[0],
            sites=None,
            hardware=None,
            power_per_site_kw=None,
        )
    i = ok[0]
    below = plans.get(i - 1)
    if i == 0:
        why = "below the grid: its lowest bandwidth already fits"
    elif below is None or below.best is None:
        why = (below.reasons[0] if below is not None and below.reasons else "cannot reach").split(
            "; closest:"
        )[0]
    else:
        why = f"cost: {below.best.cost_usd / c0:.2f}x at {grid[i - 1] / 1e6:g} Mbps"
    o = plans[i].best
    assert o is not None
    return GenerationLimit(
        premium=x,
        least_bandwidth_bits_per_s=grid[i],
        bandwidth_bracket_bits_per_s=(grid[i - 1] if i > 0 else 0.0, grid[i]),
        binds=why,
        sites=o.nodes,
        hardware=o.label,
        power_per_site_kw=power_per_site_kw(o),
        grid_class=grid_class(power_per_site_kw(o)).name,
    )


def frontier_over_time(
    *,
    target_flop: float = DEFAULT_TARGET_FLOP,
    premiums: Sequence[float] = DEFAULT_PREMIUMS,
    regime_name: str = "treaty",
    mode: Mode | str = Mode.DEFAULT,
    hardware: Sequence[str] = DEFAULT_HARDWARE,
    until_year: int = DEFAULT_UNTIL_YEAR,
    published_h: bool = False,
    bandwidth_grid_bits_per_s: Sequence[float] = BANDWIDTH_GRID_BITS_PER_S,
    constraints: Constraints | None = None,
) -> FrontierOverTime:
    """The least bandwidth per site within each premium for every generation, then projections to
    `until_year` (method: module docstring). Units: FLOP, bit/s, USD, kW."""
    require(math.isfinite(target_flop) and target_flop > 0, "target", "must be > 0 FLOP")
    prem = tuple(float(p) for p in premiums)
    require(len(prem) > 0 and all(math.isfinite(p) and p >= 1 for p in prem), "premium", "must be >= 1")
    grid = tuple(sorted(float(b) for b in bandwidth_grid_bits_per_s))
    require(len(grid) > 0 and all(math.isfinite(b) and b > 0 for b in grid), "bandwidth", "must be > 0 bit/s")
    gens = generations()
    last_year = max(g.year for g in gens)
    require(
        isinstance(until_year, int) and last_year <= until_year <= 2100,
        "until",
        f"must be a year in [{last_year}, 2100], got {until_year!r}",
    )
    regime(regime_name)  # an unknown regime fails here, before any planning
    m = Mode(mode)
    c = (constraints or Constraints()).replace(hardware=tuple(hardware))
    base = planner.centralized_baseline(target_flop, constraints=c.replace(scenario_overrides=()), mode=m)
    c0 = base.best.cost_usd if base.best is not None else None
    points: list[GenerationPoint] = []
    for g in gens:
        gc = c.replace(scenario_overrides=g.overrides(published_h=published_h), algorithms=g.slot_kinds)
        plans = walk_down(target_flop, regime_name, gc, m, grid, max(prem) * c0) if c0 is not None else {}
        costs = tuple(
            b.cost_usd if i in plans and (b := plans[i].best) is not None else None for i in range(len(grid))
        )
        limits = tuple(_limit(x, c0, grid, plans) for x in prem) if c0 is not None else ()
        points.append(GenerationPoint(generation=g, cost_by_bandwidth_usd=costs, limits=limits))
    tr = trends()
    env = envelope(points)
    held = {e["premium"]: e["bits_per_s"] for e in env if e["year"] == last_year}
    projections = tuple(
        Projection(
            year=y,
            basis=f"the best generation published by {last_year}",
            least_bandwidth_bits_per_s=held,
            line_bits_per_s=line_rate_bits_per_s(
                y,
                reference_bits_per_s=tr["reference_line_bits_per_s"].value,
                reference_year=int(tr["reference_year"].value),
                growth=tr["bandwidth_growth_per_year"].value,
            ),
            compute_per_dollar_gain=compute_per_dollar_gain(
                y - last_year, tr["flop_per_s_per_dollar_doubling_years"].value
            ),
            target_at_same_budget_flop=target_flop
            * compute_per_dollar_gain(y - last_year, tr["flop_per_s_per_dollar_doubling_years"].value),
        )
        for y in range(last_year + 1, until_year + 1)
    )
    return FrontierOverTime(
        target_flop=float(target_flop),
        premiums=prem,
        regime=regime_name,
        mode=m.value,
        hardware=tuple(hardware),
        published_h=published_h,
        centralized_cost_usd=c0,
        bandwidth_grid_bits_per_s=grid,
        points=tuple(points),
        projections=projections,
        trends=tuple(tr.values()),
        notes=(
            *(
                (
                    "paper mode ignores the codec (wire bits = precision bits / compression ratio): there the "
                    "generations differ only by overlap and fragments",
                )
                if m is Mode.PAPER
                else ()
            ),
            "generations: the paper's codec, overlap and fragments as planner overrides; H = the planner's "
            "H_min unless published H is asked for; the hardware is held fixed",
            "asynchronous generations may use the planner's Decoupled DiLoCo slot (learners on their own "
            "clocks, quorum merge); synchronous ones may not; fault isolation shows in survivability "
            "(--compare), since the planner prices no failures",
            "projections hold the last generation (no new algorithm assumed); every projected number is "
            "a projection of the trends listed, not a model result",
        ),
    )


def envelope(points: Sequence[GenerationPoint]) -> list[dict[str, Any]]:
    """How the limit moved: for each generation year Y and premium x, the least bandwidth of any
    generation published by Y (min over year <= Y; None when none fits), and which generation gives it."""
    out: list[dict[str, Any]] = []
    for y in sorted({p.generation.year for p in points}):
        known = [p for p in points if p.generation.year <= y]
        for i, lim in enumerate(known[0].limits if known else ()):
            cands = [
                (q.limits[i].least_bandwidth_bits_per_s, q.generation.name, q.generation.year)
                for q in known
                if q.limits[i].least_bandwidth_bits_per_s is not None
            ]
            # Ties go to the earliest generation: the one that first reached that limit.
            best = min(cands, key=lambda c: (c[0], c[2], c[1])) if cands else (None, None, 0)
            out.append({"year": y, "premium": lim.premium, "bits_per_s": best[0], "generation": best[1]})
    return out


__all__ = [
    "DEFAULT_HARDWARE",
    "DEFAULT_PREMIUMS",
    "DEFAULT_TARGET_FLOP",
    "DEFAULT_UNTIL_YEAR",
    "FrontierOverTime",
    "Generation",
    "GenerationLimit",
    "GenerationPoint",
    "Projection",
    "Trend",
    "compute_per_dollar_gain",
    "envelope",
    "frontier_over_time",
    "generation",
    "generations",
    "line_rate_bits_per_s",
    "trends",
]
