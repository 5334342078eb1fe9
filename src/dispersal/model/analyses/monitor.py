"""What a monitor sees (issue 23 item 5): for the same compute, one building against the N-site plan.

Footprints (per site and in total): power (chips x TDP x PUE), grid class, procurement (shipments of
`chips_per_shipment` chips, delivery sites), workforce, WAN traffic, billing (hardware spend,
electricity accounts and bills). Then `detection` applied to both, with three monitors:

- per site: p_i = 1 - exp(-h_i T), h_i the hazards of site i alone (its staff, chips, power, spend,
  traffic), and the central staff as one more "site" (p_0, whistleblowers who know the whole run);
- independent aggregate: P_ind = 1 - prod_i (1 - p_i). Since every channel's hazard is a sum over
  sites, this equals `detection.detect` of the whole run;
- correlated aggregate: P_corr = (1 - rho) P_ind + rho max_i p_i, a mixture of independence and the
  comonotone case (one operator's sites share disguise and the monitor's blind spots; the union of
  comonotone events has the probability of the largest). max_i p_i <= P_corr <= P_ind;
- building finder: a monitor that looks only at sites of >= `building_finder_min_site_kw`;
  P_find = 1 - prod over those sites (1 - p_i) (0 when no site is that large).

The detection model's PUE is set to the plan's, so the power it sees is the power reported. Site staff:
max(people_per_site, staff_per_mw x site MW) (a large building has more than a small site's three).
Every rate's status (sourced / assumed) is read from its data file's source text.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from dispersal.model.analyses import detection as det
from dispersal.model.analyses.frontier.power import SitePower, site_power
from dispersal.model.analyses.frontier.survive import Survival, SurvivalCase, building_survival, plan_survival
from dispersal.model.inputs.catalog import regime
from dispersal.model.inputs.errors import require
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints
from dispersal.model.search.plan_result import PlanOption

SCHEMA_VERSION = 1
#: Targets compared by default (issue 23: 1e25 and 1e26 FLOP).
DEFAULT_TARGETS_FLOP: tuple[float, ...] = (1e25, 1e26)
#: Per-site WAN of the dispersed plan by default: 1 Gbps, inside the 5x frontier at 1e26 (docs/frontier.md).
DEFAULT_WAN_BITS_PER_S = 1e9
HOURS_PER_MONTH = 365.25 * 24 / 12


@cache
def monitor_params() -> dict[str, dict[str, Any]]:
    """monitor.toml's parameters by name (value, unit, status, source)."""
    text = resources.files("dispersal.data").joinpath("monitor.toml").read_text(encoding="utf-8")
    return {e["name"]: dict(e) for e in tomllib.loads(text)["monitor"]}


def _mp(name: str) -> float:
    return float(monitor_params()[name]["value"])


def independent(ps: Sequence[float]) -> float:
    """P(at least one of independent detections) = 1 - prod (1 - p_i)."""
    for p in ps:
        require(0 <= p <= 1, "p", f"must be a probability in [0, 1], got {p}")
    return -math.expm1(math.fsum(math.log1p(-p) if p < 1 else -math.inf for p in ps)) if ps else 0.0


def correlated(ps: Sequence[float], rho: float) -> float:
    """(1 - rho) (1 - prod (1 - p_i)) + rho max p_i: rho = 0 independent, rho = 1 comonotone."""
    require(0 <= rho <= 1, "rho", f"must be in [0, 1], got {rho}")
    return (1 - rho) * independent(ps) + rho * (max(ps) if ps else 0.0)


def rate_status(name: str) -> str:
    """'assumed' when a detection parameter's source is an assumption, 'baseline' when it is switched
    off by default (a lever sets it), else 'sourced'."""
    src = next(str(e.get("source", "")) for e in det.parameter_table() if e["name"] == name).lower()
    if src.startswith("assumption"):
        return "assumed"
    return "baseline" if src.startswith("baseline") else "sourced"


#: The rate behind each channel (the parameter whose status the comparison reports).
CHANNEL_RATE = {
    "whistleblower": "whistle_p_per_person_year",
    "chip_registry": "registry_p_per_shipment_year",
    "traffic": "traffic_p_confirm",
    "inspections": "inspections_per_site_year",
    "power": "power_p_per_site_year_at_ref",
    "finance": "finance_p_per_musd_year",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """What a monitor sees of one layout and how likely each monitor is to detect it."""

    name: str
    hardware: str
    chips: int
    days: float
    power: SitePower
    shipments: int
    delivery_sites: int
    workforce: float
    wan_mbps_per_site: float
    wan_gbps_total: float
    hardware_usd: float
    electricity_accounts: int
    electricity_usd_per_site_month: float
    p_site: float
    p_central: float
    p_independent: float
    p_correlated: float
    p_building_finder: float
    channels: dict[str, float]
    """P(that channel alone detects the run)."""
    survival: tuple[Survival, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        d = {k: getattr(self, k) for k in self.__slots__}
        d["power"] = self.power.to_dict()
        d["survival"] = [s.to_dict() for s in self.survival]
        return d


def _site_params(p: det.DetectionParams, site_kw: float, pue: float) -> det.DetectionParams:
    staff = max(p.people_per_site, _mp("staff_per_mw") * site_kw / 1000.0)
    return p.replace(power_pue=pue, people_per_site=staff, central_staff=0.0)


def layout(
    name: str,
    o: PlanOption,
    *,
    one_building: bool,
    params: det.DetectionParams | None = None,
    case: SurvivalCase | None = None,
) -> Layout:
    """The monitor's view of plan `o`; `one_building` puts all its chips on one site (the baseline)."""
    p = params or det.default_detection_params()
    pw = site_power(o, one_building=one_building)
    sites = pw.sites
    chips = o.nodes * o.chips_per_node
    mbps = 0.0 if one_building else o.mean_wan_mbps_per_node
    sp = _site_params(p, pw.site_kw, o.scenario.pue)
    site_fp = det.RunFootprint(
        nodes=1,
        chips_per_node=chips // sites,
        hardware=o.hardware,
        days=o.days,
        spend_usd=o.cost_usd / sites,
        mean_mbps_per_node=mbps,
    )
    h_site = det.channel_hazards(site_fp, sp)
    p_site = det.p_detect(math.fsum(h_site.values()), o.days)
    h_central = (
        det.rate_per_year(p.whistle_p_per_person_year)
        * p.whistle_reward_multiplier
        * p.central_staff
        / 365.25
    )
    p_central = det.p_detect(h_central, o.days)
    ps = [p_site] * sites + [p_central]
    big = pw.site_kw >= _mp("building_finder_min_site_kw")
    channels = {
        k: det.p_detect(v * sites + (h_central if k == "whistleblower" else 0.0), o.days)
        for k, v in h_site.items()
    }
    s = case or SurvivalCase()
    surv = (building_survival(o, s),) if one_building else plan_survival(o, s)
    return Layout(
        name=name,
        hardware=o.label if not one_building else f"{chips:,} x {o.hardware} {o.precision.upper()}",
        chips=chips,
        days=o.days,
        power=pw,
        shipments=math.ceil(chips / _mp("chips_per_shipment")),
        delivery_sites=sites,
        workforce=p.central_staff + sites * sp.people_per_site,
        wan_mbps_per_site=mbps,
        wan_gbps_total=mbps * sites / 1000.0,
        hardware_usd=o.cost_usd,
        electricity_accounts=sites,
        electricity_usd_per_site_month=pw.site_kw * HOURS_PER_MONTH * o.scenario.electricity_usd_per_kwh,
        p_site=p_site,
        p_central=p_central,
        p_independent=independent(ps),
        p_correlated=correlated(ps, _mp("site_correlation")),
        p_building_finder=independent([p_site] * sites) if big else 0.0,
        channels=channels,
        survival=surv,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    """One building vs the N-site plan for one target."""

    target_flop: float
    wan_bits_per_s: float | None
    """Per-site WAN of the N-site plan (None: no frontier plan within the premium)."""
    building: Layout | None
    sites: Layout | None
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "target_flop": self.target_flop,
            "wan_bits_per_s": self.wan_bits_per_s,
            "building": self.building.to_dict() if self.building else None,
            "sites": self.sites.to_dict() if self.sites else None,
            "reasons": list(self.reasons),
        }


def _frontier_plan(
    t: float, premium: float, regime_name: str, m: Mode, base_cost: float
) -> tuple[planner.Plan | None, float | None]:
    """The frontier plan of (t, premium): the plan at the least grid bandwidth within premium x the
    one-building cost (`frontier.walk_down` over `frontier.BANDWIDTH_GRID_BITS_PER_S`)."""
    from dispersal.model.analyses.frontier.result import BANDWIDTH_GRID_BITS_PER_S
    from dispersal.model.analyses.frontier.walk_down import walk_down

    grid = tuple(sorted(BANDWIDTH_GRID_BITS_PER_S))
    plans = walk_down(t, regime_name, Constraints(), m, grid, premium * base_cost)
    ok = [
        i
        for i, p in plans.items()
        if p.best is not None and p.best.cost_usd <= premium * base_cost * (1 + 1e-12)
    ]
    return (plans[min(ok)], grid[min(ok)]) if ok else (plans[len(grid) - 1], None)


def compare(
    *,
    targets_flop: Sequence[float] = DEFAULT_TARGETS_FLOP,
    wan_bits_per_s: float = DEFAULT_WAN_BITS_PER_S,
    premium: float | None = None,
    regime_name: str = "treaty",
    mode: Mode | str = Mode.DEFAULT,
    lose_sites: int = 1,
    params: det.DetectionParams | None = None,
    latency_s: float | None = None,
    max_duration_s: float | None = None,
) -> dict[str, Any]:
    """For each target: one building (`planner.centralized_baseline`) vs the N-site plan: the planner's
    cheapest at `wan_bits_per_s` per site, or with `premium` the frontier plan (the least grid
    bandwidth within premium x the building's cost; slower: a walk down the grid). Footprints,
    detection by every monitor, survivability. JSON-ready dict (docs/frontier.md, "One building vs
    N sites")."""
    require(math.isfinite(wan_bits_per_s) and wan_bits_per_s > 0, "wan", "must be > 0 bit/s")
    require(premium is None or (math.isfinite(premium) and premium >= 1), "premium", "must be >= 1")
    case = SurvivalCase(lose_sites=lose_sites)
    regime(regime_name)  # an unknown regime fails here, before any planning
    m = Mode(mode)
    # latency_s / max_duration_s: a stated convention (the app's, shared with the countermeasures); None
    # keeps the planner's defaults (100 ms, 740 days), which `dispersal frontier --compare` uses.
    c = Constraints(bandwidth_up_bits_per_s=wan_bits_per_s, bandwidth_down_bits_per_s=wan_bits_per_s)
    if latency_s is not None:
        c = dataclasses.replace(c, latency_s=latency_s)
    if max_duration_s is not None:
        c = dataclasses.replace(c, max_duration_s=max_duration_s)
    out = []
    for t in targets_flop:
        base = planner.centralized_baseline(t, constraints=c, mode=m)
        rate: float | None = wan_bits_per_s
        if premium is None:
            plan: planner.Plan | None = planner.plan(t, regime_name=regime_name, constraints=c, mode=m)
        elif base.best is not None:
            plan, rate = _frontier_plan(t, premium, regime_name, m, base.best.cost_usd)
        else:
            plan, rate = None, None
        reasons = tuple(r.split("; closest:")[0] for r in (*base.reasons, *(plan.reasons if plan else ())))
        if premium is not None and rate is None:
            reasons += (f"no grid bandwidth fits {premium:g}x one building's cost",)
        b = (
            layout("one building", base.best, one_building=True, params=params, case=case)
            if base.best
            else None
        )
        best = plan.best if plan is not None and rate is not None else None
        s = (
            layout(f"{best.nodes} sites", best, one_building=False, params=params, case=case)
            if best
            else None
        )
        out.append(
            Comparison(target_flop=float(t), wan_bits_per_s=rate, building=b, sites=s, reasons=reasons)
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "regime": regime_name,
        "mode": m.value,
        "lose_sites": lose_sites,
        "premium": premium,
        "comparisons": [x.to_dict() for x in out],
        "rates": [
            {
                "channel": ch,
                "parameter": name,
                "value": getattr(params or det.default_detection_params(), name),
                "status": rate_status(name),
            }
            for ch, name in CHANNEL_RATE.items()
        ],
        "monitor_parameters": [dict(v) for v in monitor_params().values()],
        "formulas": {
            "independent": "1 - prod_i (1 - p_i)",
            "correlated": "(1 - rho) (1 - prod_i (1 - p_i)) + rho max_i p_i",
            "building_finder": "1 - prod over sites >= building_finder_min_site_kw of (1 - p_i)",
        },
    }


__all__ = [
    "CHANNEL_RATE",
    "DEFAULT_TARGETS_FLOP",
    "DEFAULT_WAN_BITS_PER_S",
    "Comparison",
    "Layout",
    "compare",
    "correlated",
    "independent",
    "layout",
    "monitor_params",
    "rate_status",
]
