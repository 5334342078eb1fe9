"""Countermeasures: levers as data-driven modifiers of the evader's world, re-planned and scored.

A lever (``dispersal/data/levers.toml``) changes one or more of:

- the covered-cluster rule: ``cluster_h100e`` (lower compute threshold) and ``cluster_memory_gb``
  (the HBM rule). The planner reads regimes by name, so the combination is looked up among the
  catalogue's regimes (the lever variants are entries of ``regimes.toml``); the evader re-plans.
- the site link: ``bandwidth_cap_mbps`` per subscriber line; a site may bond up to
  ``max_lines_per_site`` lines at ``line_usd_per_month`` each, which the evader pays for; the
  evader re-plans at the bandwidth it can get.
- detection parameters (``[lever.detection]``), fed to `dispersal.model.analyses.detection`.

A bundle of levers takes the strictest rule of each kind (lowest thresholds and caps, largest
detection parameters: every detection parameter a lever may set strengthens detection as it
grows). For each bundle, `evaluate_bundle` re-runs the planner so the evader adapts, then prices
the plan, profiles its traffic and computes P(detected before completion).

Convention: `Convention` (defaults: the report's countermeasure convention, C_quality target,
548-day window, chip-only cost, paper mode, exact search). Every Outcome carries its convention.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import numpy as np

from dispersal.model.analyses.detection import (
    Detection,
    DetectionParams,
    RunFootprint,
    TrafficProfile,
    background,
    broadband,
    default_detection_params,
    detect,
    parameter_names,
    traffic_profile,
)
from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import Regime, accelerator, regime, regimes
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import Mode, max_chips_under
from dispersal.model.inputs.units import H100E_FLOP_PER_S
from dispersal.model.search.planner import Constraints, Plan, PlanOption, plan

COLLATERAL_KINDS = ("none", "covered", "uplink", "registry")
DAYS_PER_MONTH = 365.25 / 12


@dataclass(frozen=True, kw_only=True, slots=True)
class Lever:
    """One countermeasure. None = this lever does not touch that part of the world."""

    name: str
    description: str = ""
    source: str = ""
    cluster_h100e: float | None = None
    """Covered-cluster compute threshold, H100-equivalents (covered when strictly above)."""
    cluster_memory_gb: float | None = None
    """Covered-cluster accelerator-memory threshold, GB (covered when strictly above)."""
    bandwidth_cap_mbps: float | None = None
    """Cap per subscriber line, Mbps."""
    max_lines_per_site: int = 1
    """Lines a site may bond under the cap (1 = the cap binds the whole site)."""
    line_usd_per_month: float = 0.0
    detection: tuple[tuple[str, float], ...] = ()
    """Detection parameters this lever sets (name, value)."""
    collateral: str = "none"

    def __post_init__(self) -> None:
        require(bool(self.name) and "+" not in self.name, "lever", f"bad lever name {self.name!r}")
        for name in ("cluster_h100e", "cluster_memory_gb", "bandwidth_cap_mbps"):
            v = getattr(self, name)
            require(v is None or (math.isfinite(v) and v > 0), name, f"must be > 0, got {v!r}")
        require(
            isinstance(self.max_lines_per_site, int) and self.max_lines_per_site >= 1,
            "max_lines_per_site",
            f"must be an integer >= 1, got {self.max_lines_per_site!r}",
        )
        require(
            math.isfinite(self.line_usd_per_month) and self.line_usd_per_month >= 0,
            "line_usd_per_month",
            f"must be >= 0, got {self.line_usd_per_month!r}",
        )
        require(
            self.collateral in COLLATERAL_KINDS,
            "collateral",
            f"must be one of {', '.join(COLLATERAL_KINDS)}, got {self.collateral!r}",
        )
        known = set(parameter_names())
        for k, _ in self.detection:
            require(k in known, "detection", f"lever {self.name!r}: unknown detection parameter {k!r}")
        default_detection_params().replace(**dict(self.detection))  # validates the values

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["detection"] = dict(self.detection)
        return d


def _lever_from(entry: dict[str, Any]) -> Lever:
    e = dict(entry)
    e["detection"] = tuple((str(k), float(v)) for k, v in dict(e.get("detection", {})).items())
    for k in ("cluster_h100e", "cluster_memory_gb", "bandwidth_cap_mbps", "line_usd_per_month"):
        if k in e:
            e[k] = float(e[k])
    return Lever(**e)


@cache
def _data() -> dict[str, Any]:
    return tomllib.loads(
        resources.files("dispersal.data").joinpath("levers.toml").read_text(encoding="utf-8")
    )


@cache
def levers() -> dict[str, Lever]:
    """All levers of levers.toml by name, in file order."""
    return {e["name"]: _lever_from(e) for e in _data()["lever"]}


def lever(name: str) -> Lever:
    """A lever by name (case-insensitive, '-' = '_'); InputError with a did-you-mean otherwise."""
    key = str(name).strip().lower().replace("-", "_")
    table = levers()
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise InputError("lever", f"unknown lever {name!r}{hint}; known: {', '.join(table)}")


def default_bundles() -> tuple[str, ...]:
    """Bundles shown by default (levers.toml [bundles] default)."""
    return tuple(_data().get("bundles", {}).get("default", ()))


@dataclass(frozen=True, kw_only=True, slots=True)
class Bundle:
    """Levers applied together; the strictest of each kind wins."""

    name: str
    levers: tuple[Lever, ...] = ()

    @property
    def cluster_h100e(self) -> float | None:
        """Lowest compute threshold of the bundle."""
        vals = [lv.cluster_h100e for lv in self.levers if lv.cluster_h100e is not None]
        return min(vals) if vals else None

    @property
    def cluster_memory_gb(self) -> float | None:
        """Lowest memory threshold of the bundle."""
        vals = [lv.cluster_memory_gb for lv in self.levers if lv.cluster_memory_gb is not None]
        return min(vals) if vals else None

    @property
    def bandwidth_lever(self) -> Lever | None:
        """The binding bandwidth cap: the lowest total a site can reach (cap x lines)."""
        caps = [lv for lv in self.levers if lv.bandwidth_cap_mbps is not None]
        if not caps:
            return None
        return min(
            caps,
            key=lambda lv: (
                float(lv.bandwidth_cap_mbps or 0) * lv.max_lines_per_site,
                -lv.line_usd_per_month,
            ),
        )

    def detection_overrides(self) -> dict[str, float]:
        """Detection parameters set by the bundle (largest value per parameter)."""
        out: dict[str, float] = {}
        for lv in self.levers:
            for k, v in lv.detection:
                out[k] = max(v, out.get(k, -math.inf))
        return out

    def detection_params(self, base: DetectionParams | None = None) -> DetectionParams:
        """`base` with the bundle's parameters applied (never weaker than `base`)."""
        b = base or default_detection_params()
        changes = {k: max(v, getattr(b, k)) for k, v in self.detection_overrides().items()}
        return b.replace(**changes)


NO_LEVER = Bundle(name="none")


def parse_bundle(text: str) -> Bundle:
    """'a+b+c' -> Bundle; 'none' -> no lever."""
    names = [n.strip() for n in str(text).split("+") if n.strip()]
    require(bool(names), "bundle", f"empty bundle {text!r}")
    if names == ["none"]:
        return NO_LEVER
    found: list[Lever] = []
    for n in names:
        lv = lever(n)
        if lv not in found:
            found.append(lv)
    return Bundle(name="+".join(lv.name for lv in found), levers=tuple(found))


@dataclass(frozen=True, kw_only=True, slots=True)
class Convention:
    """How the evader plans and how cost is counted.

    Defaults are the report's countermeasure convention: target in C_quality, 1.5-year (548-day)
    window, chip-only cost (chips x list price, no server/cluster multiplier), paper mode with the
    exact node-count search, 100 Mbps / 100 ms links, MIRI treaty cluster rule as the baseline.
    """

    mode: str = "paper"
    metric: str = "c_quality"
    days: float = 548.0
    bandwidth_bits_per_s: float = 100e6
    latency_s: float = 0.100
    chip_only: bool = True
    search: str = "exact"
    base_regime: str = "treaty"
    hardware: tuple[str, ...] = ()
    params: ModelParams = DEFAULT_PARAMS
    """Published fits and heuristics the evader's planner uses (a calibration replaces them)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode(self.mode).value)
        require(
            self.metric in ("c_local", "c_quality"),
            "metric",
            f"must be c_local or c_quality, got {self.metric!r}",
        )
        require(self.search in ("exact", "bisect"), "search", f"must be exact or bisect, got {self.search!r}")
        require(
            math.isfinite(self.days) and 1 <= self.days <= 3650,
            "days",
            f"must be in [1, 3650], got {self.days}",
        )
        require(
            math.isfinite(self.bandwidth_bits_per_s) and self.bandwidth_bits_per_s > 0,
            "bandwidth",
            f"must be > 0 bit/s, got {self.bandwidth_bits_per_s}",
        )
        require(
            math.isfinite(self.latency_s) and self.latency_s >= 0,
            "latency",
            f"must be >= 0 s, got {self.latency_s}",
        )
        object.__setattr__(self, "base_regime", regime(self.base_regime).name)
        object.__setattr__(self, "hardware", tuple(accelerator(h).name for h in self.hardware))

    def describe(self) -> str:
        """One line."""
        cost = "chip-only cost" if self.chip_only else "cost with the paper's capex multiplier"
        return (
            f"{self.mode} mode, {self.metric} target, {self.days:g}-day window, {cost}, {self.search} search, "
            f"{units.format_bandwidth(self.bandwidth_bits_per_s)} / {self.latency_s * 1e3:g} ms links, "
            f"baseline regime {self.base_regime}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "params"}
        d["hardware"] = list(self.hardware)
        d["params"] = "published" if self.params == DEFAULT_PARAMS else self.params.to_dict()
        return d


def regime_for(base: str, cluster_h100e: float | None, cluster_memory_gb: float | None) -> Regime:
    """The catalogue regime whose rule is `base` tightened by the given thresholds.

    The planner takes regimes by name, so every combination must exist in regimes.toml; the lever
    variants are appended there. Raises InputError naming the entry to add otherwise.
    """
    b = regime(base)
    flop = b.cluster_flop_per_s
    if cluster_h100e is not None:
        cap = cluster_h100e * H100E_FLOP_PER_S
        flop = cap if flop <= 0 else min(flop, cap)
    mem = b.cluster_memory_bytes
    if cluster_memory_gb is not None:
        cap = cluster_memory_gb * 1e9
        mem = cap if mem <= 0 else min(mem, cap)
    if flop == b.cluster_flop_per_s and mem == b.cluster_memory_bytes:
        return b

    def close(a: float, c: float) -> bool:
        return abs(a - c) <= 1e-9 * max(abs(a), abs(c), 1.0)

    for r in regimes().values():
        if close(r.cluster_flop_per_s, flop) and close(r.cluster_memory_bytes, mem):
            return r
    raise InputError(
        "lever",
        f"no regime in regimes.toml with cluster_flop_per_s = {flop:.6g} and "
        f"cluster_memory_bytes = {mem:.6g}; append one (see the lever entries there)",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Collateral:
    """Legitimate activity a bundle also catches (from detection.toml's background population)."""

    installations_covered: float
    """Background installations newly covered by the cluster rule."""
    broadband_lines_capped: float
    """Fixed broadband lines whose uplink exceeds the per-line cap."""
    installations_registering: float
    """Background installations that must register chips."""

    def to_dict(self) -> dict[str, float]:
        """Plain dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    # (field, short label, long label) for the table cells.
    _LABELS = (
        ("installations_covered", "inst. covered", "installations covered"),
        ("broadband_lines_capped", "lines capped", "broadband lines capped"),
        ("installations_registering", "inst. register", "installations registering"),
    )

    def short(self) -> str:
        """Compact text for a table cell (rounded counts)."""
        return self._text(exact=False)

    def long(self) -> str:
        """Full text with exact counts (markdown tables, docs/countermeasures.md)."""
        return self._text(exact=True)

    def _text(self, *, exact: bool) -> str:
        parts = [
            f"{v:,.0f} {long}" if exact else f"{units.format_count(v)} {short}"
            for name, short, long in self._LABELS
            if (v := getattr(self, name))
        ]
        return "; ".join(parts) or "-"


def collateral(bundle: Bundle, base_regime: str, new_regime: Regime, params: DetectionParams) -> Collateral:
    """Collateral of a bundle against the baseline regime."""
    base = regime(base_regime)
    covered = 0.0
    if new_regime.name != base.name:
        for e in background():
            acc = accelerator(str(e["hardware"]))
            chips = int(e["chips"])
            if chips > max_chips_under(acc, new_regime) and chips <= max_chips_under(acc, base):
                covered += float(e["count"])
    lines = 0.0
    bw = bundle.bandwidth_lever
    if bw is not None and bw.bandwidth_cap_mbps is not None:
        bb = broadband()
        x = np.log10(np.asarray(bb["tier_mbps"], dtype=np.float64))
        y = np.log10(np.asarray(bb["share_above"], dtype=np.float64))
        share = 10 ** float(np.interp(math.log10(bw.bandwidth_cap_mbps), x, y))
        lines = float(bb["total_lines"]) * share
    registering = 0.0
    if any(lv.collateral == "registry" for lv in bundle.levers):
        registering = sum(float(e["count"]) for e in background()) * params.registry_tracked_fraction
    return Collateral(
        installations_covered=covered, broadband_lines_capped=lines, installations_registering=registering
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """The evader's cheapest adapted plan under one bundle, and how likely it is caught."""

    bundle: str
    levers: tuple[str, ...]
    convention: Convention
    target_flop: float
    feasible: bool
    reasons: tuple[str, ...]
    regime: str
    planned_under: str
    """The (equal or stricter) catalogue rule whose node size the cheapest plan uses."""
    bandwidth_bits_per_s: float
    """Per-site bandwidth the evader plans with (after any cap and bonding)."""
    lines_per_site: int
    cost_usd: float
    """Evader cost under the convention (chip-only or with capex multiplier) plus lever-induced extras.

    The minimum over every hardware's best plan under the bundle's rule and every stricter rule."""
    hardware_cost_usd: float
    extra_cost_usd: float
    """Costs the levers add outside the planner (bonded lines)."""
    cost_multiple: float
    """cost_usd / the no-lever cost (same convention)."""
    nodes: int
    chips_per_node: int
    chips: int
    hardware: str
    precision: str
    params: float
    algorithm: str
    days: float
    overtraining_ratio: float
    detection: Detection | None
    traffic: TrafficProfile | None
    collateral: Collateral
    detection_params: dict[str, float] = field(default_factory=dict)

    @property
    def p_detect(self) -> float:
        """P(detected before completion); NaN when no plan exists."""
        return self.detection.p_detect if self.detection is not None else math.nan

    @property
    def expected_detection_day(self) -> float:
        """Mean detection day given detection before completion; NaN if none."""
        return self.detection.expected_detection_day if self.detection is not None else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON row: lever, cost_usd, cost_multiple, nodes, p_detect, expected_detection_day, ..."""
        return {
            "lever": self.bundle,
            "levers": list(self.levers),
            "feasible": self.feasible,
            "reasons": list(self.reasons),
            "cost_usd": self.cost_usd,
            "cost_multiple": self.cost_multiple,
            "nodes": self.nodes,
            "p_detect": self.p_detect,
            "expected_detection_day": self.expected_detection_day,
            "expected_detection_day_meaning": "mean day of detection given detection before completion",
            "hardware_cost_usd": self.hardware_cost_usd,
            "extra_cost_usd": self.extra_cost_usd,
            "chips_per_node": self.chips_per_node,
            "chips": self.chips,
            "hardware": self.hardware,
            "precision": self.precision,
            "params": self.params,
            "algorithm": self.algorithm,
            "days": self.days,
            "overtraining_ratio": self.overtraining_ratio,
            "regime": self.regime,
            "planned_under": self.planned_under,
            "bandwidth_bits_per_s": self.bandwidth_bits_per_s,
            "lines_per_site": self.lines_per_site,
            "target_flop": self.target_flop,
            "convention": self.convention.to_dict(),
            "convention_text": self.convention.describe(),
            "detection": self.detection.to_dict() if self.detection is not None else None,
            "traffic": self.traffic.to_dict() if self.traffic is not None else None,
            "collateral": self.collateral.to_dict(),
        }


@lru_cache(maxsize=256)
def _plan_cached(target: float, regime_name: str, conv: Convention, bandwidth: float, capped: bool) -> Plan:
    side = None
    if capped and conv.mode != Mode.DEFAULT.value:
        # A site cap binds every link leaving the site: the regional and pipeline links too. In
        # default mode these are the WAN link already (one shared link per node, capped to
        # `bandwidth`); giving them explicitly would switch the planner to separate side links
        # (Scenario.split_links) and hand the capped evader three links where the uncapped one has one.
        side = bandwidth
    c = Constraints(
        bandwidth_up_bits_per_s=bandwidth,
        bandwidth_down_bits_per_s=bandwidth,
        latency_s=conv.latency_s,
        max_duration_s=conv.days * units.SECONDS_PER_DAY,
        hardware=conv.hardware,
        regional_bandwidth_bits_per_s=side,
        pp_bandwidth_bits_per_s=side,
    )
    return plan(
        target,
        regime_name=regime_name,
        constraints=c,
        mode=conv.mode,
        metric=conv.metric,
        search=conv.search,
        params=conv.params,
    )


def _cap(v: float) -> float:
    return math.inf if v <= 0 else v


def stricter_regimes(reg: Regime) -> list[Regime]:
    """Catalogue regimes whose rule is at least as strict as `reg` (one per distinct rule), `reg` first.

    A node legal under a stricter rule is legal under `reg`, so the evader may plan under any of them:
    the planner sizes nodes at the most chips a rule allows, and smaller nodes can be cheaper.
    """
    out = [reg]
    seen = {(reg.cluster_flop_per_s, reg.cluster_memory_bytes)}
    for r in regimes().values():
        key = (r.cluster_flop_per_s, r.cluster_memory_bytes)
        if key in seen or r.cluster_flop_per_s <= 0:
            continue
        if _cap(r.cluster_flop_per_s) <= _cap(reg.cluster_flop_per_s) and _cap(
            r.cluster_memory_bytes
        ) <= _cap(reg.cluster_memory_bytes):
            seen.add(key)
            out.append(r)
    return out


def _hw_cost(o: PlanOption, conv: Convention) -> float:
    return o.nodes * o.chips_per_node * accelerator(o.hardware).price_usd if conv.chip_only else o.cost_usd


def evader_options(
    target: float, reg: Regime, conv: Convention, bandwidth: float, capped: bool = False
) -> tuple[list[PlanOption], tuple[str, ...]]:
    """Every hardware's best plan under `reg` and each stricter catalogue rule (the evader's menu)."""
    opts: list[PlanOption] = []
    reasons: tuple[str, ...] = ()
    for r in stricter_regimes(reg):
        p = _plan_cached(target, r.name, conv, bandwidth, capped)
        opts.extend(p.per_hardware)
        if r is reg:
            reasons = p.reasons
    return opts, reasons


def site_bandwidth(bundle: Bundle, conv: Convention) -> tuple[float, int, float]:
    """(bandwidth the evader gets per site, lines per site, $ per site per month for extra lines)."""
    lv = bundle.bandwidth_lever
    base = conv.bandwidth_bits_per_s
    if lv is None or lv.bandwidth_cap_mbps is None:
        return base, 1, 0.0
    cap = lv.bandwidth_cap_mbps * 1e6
    if cap >= base:
        return base, 1, 0.0
    lines = min(lv.max_lines_per_site, math.ceil(base / cap - 1e-9))
    return min(base, lines * cap), lines, (lines - 1) * lv.line_usd_per_month


def evaluate_bundle(
    target_flop: float,
    bundle: Bundle | str,
    *,
    convention: Convention | None = None,
    detection_params: DetectionParams | None = None,
    baseline_cost_usd: float | None = None,
) -> Outcome:
    """Re-plan under `bundle`, price it, profile its traffic, and compute P(detect)."""
    conv = convention or Convention()
    b = parse_bundle(bundle) if isinstance(bundle, str) else bundle
    require(
        isinstance(target_flop, int | float) and math.isfinite(target_flop) and target_flop > 0,
        "target",
        f"must be a positive number of FLOP, got {target_flop!r}",
    )
    reg = regime_for(conv.base_regime, b.cluster_h100e, b.cluster_memory_gb)
    bw, lines, line_usd = site_bandwidth(b, conv)
    dp = b.detection_params(detection_params)
    coll = collateral(b, conv.base_regime, reg, dp)
    common: dict[str, Any] = {
        "bundle": b.name,
        "levers": tuple(lv.name for lv in b.levers),
        "convention": conv,
        "target_flop": float(target_flop),
        "regime": reg.name,
        "bandwidth_bits_per_s": bw,
        "lines_per_site": lines,
        "collateral": coll,
        "detection_params": dp.to_dict(),
    }
    opts, reasons = evader_options(
        float(target_flop), reg, conv, bw, bw < conv.bandwidth_bits_per_s or lines > 1
    )
    if not opts:
        return Outcome(
            **common,
            planned_under=reg.name,
            feasible=False,
            reasons=reasons,
            cost_usd=math.inf,
            hardware_cost_usd=math.inf,
            extra_cost_usd=0.0,
            cost_multiple=math.inf,
            nodes=0,
            chips_per_node=0,
            chips=0,
            hardware="",
            precision="",
            params=math.nan,
            algorithm="",
            days=math.nan,
            overtraining_ratio=math.nan,
            detection=None,
            traffic=None,
        )
    o = min(
        opts,
        key=lambda x: (_hw_cost(x, conv) + x.nodes * line_usd * x.days / DAYS_PER_MONTH, -x.c_quality_flop),
    )
    hw_cost = _hw_cost(o, conv)
    extra = o.nodes * line_usd * o.days / DAYS_PER_MONTH
    cost = hw_cost + extra
    traffic = traffic_profile(o.scenario, conv.mode)
    fp = RunFootprint(
        nodes=o.nodes,
        chips_per_node=o.chips_per_node,
        hardware=o.hardware,
        days=o.days,
        spend_usd=cost,
        mean_mbps_per_node=traffic.mean_mbps,
    )
    base_cost = baseline_cost_usd
    if base_cost is None:
        base_cost = (
            cost
            if not b.levers
            else evaluate_bundle(
                target_flop, NO_LEVER, convention=conv, detection_params=detection_params
            ).cost_usd
        )
    return Outcome(
        **common,
        planned_under=o.scenario.regime,
        feasible=True,
        reasons=(),
        cost_usd=cost,
        hardware_cost_usd=hw_cost,
        extra_cost_usd=extra,
        cost_multiple=cost / base_cost if base_cost > 0 and math.isfinite(base_cost) else math.nan,
        nodes=o.nodes,
        chips_per_node=o.chips_per_node,
        chips=o.nodes * o.chips_per_node,
        hardware=o.hardware,
        precision=o.precision,
        params=o.params,
        algorithm=o.algorithm,
        days=o.days,
        overtraining_ratio=o.overtraining_ratio,
        detection=detect(fp, dp),
        traffic=traffic,
    )


def analyse(
    target_flop: float,
    bundles: Sequence[Bundle | str] | None = None,
    *,
    convention: Convention | None = None,
    detection_params: DetectionParams | None = None,
) -> list[Outcome]:
    """The no-lever baseline, then each bundle (default: every lever alone, then the default bundles)."""
    conv = convention or Convention()
    items: list[Bundle] = [NO_LEVER]
    wanted = list(bundles) if bundles is not None else [*levers(), *default_bundles()]
    for w in wanted:
        bb = parse_bundle(w) if isinstance(w, str) else w
        if bb.name not in {x.name for x in items}:
            items.append(bb)
    base = evaluate_bundle(target_flop, NO_LEVER, convention=conv, detection_params=detection_params)
    out = [base]
    for bb in items[1:]:
        out.append(
            evaluate_bundle(
                target_flop,
                bb,
                convention=conv,
                detection_params=detection_params,
                baseline_cost_usd=base.cost_usd,
            )
        )
    return out
