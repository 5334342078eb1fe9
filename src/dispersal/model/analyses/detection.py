"""Detection of a dispersed training run: independent hazards over the run's duration.

Each channel turns a run's footprint (sites, people, chips, power per site, dollars, WAN traffic)
into a hazard rate per day, from "probability per unit per year" parameters (a probability p per
year is the hazard -ln(1 - p) per year). Channels are independent, so hazards add:

    P(detected before completion) = 1 - exp(-H T),  H = sum of the channels' hazards, T = run days.

The expected detection day reported is the mean of the exponential truncated at T, i.e. the day of
detection *conditional on detection before completion*: T (1/x - 1/(e^x - 1)), x = H T.

Channels (parameters in ``dispersal/data/detection.toml``, each with its source or "assumption"):

- whistleblower: informed people = central staff + sites x people per site x informed fraction;
  each reports at ``whistle_p_per_person_year`` x ``whistle_reward_multiplier`` (hazard scaled).
- chip_registry: tracked shipments = chips x tracked fraction / chips per shipment; each is found at
  ``registry_p_per_shipment_year``.
- traffic: a monitored site (``traffic_coverage``) is followed up with probability
  investigations per year / pool, where pool = sites uploading at least the node's mean rate
  (``traffic_similar_sites_at_ref`` x (ref / mean)^exponent, x the undisguised factor when the
  evader does not pad, jitter and tunnel); a follow-up confirms with ``traffic_p_confirm``.
- inspections: Poisson inspections at ``inspections_per_site_year`` per site, each finding the site
  with ``inspection_p_find`` (a thinned Poisson process: hazard = rate x p).
- power: per site, ``power_p_per_site_year_at_ref`` x (site kW / ref kW)^exponent (as a hazard).
- finance: ``finance_p_per_musd_year`` per $1M of hardware.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import accelerator
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.scenario import Scenario
from dispersal.model.run.estimate import estimate

CHANNELS: tuple[str, ...] = ("whistleblower", "chip_registry", "traffic", "inspections", "power", "finance")

#: Parameters that are probabilities (per unit per year, or per event): must lie in [0, 1).
_PROBABILITIES = (
    "whistle_p_per_person_year",
    "registry_p_per_shipment_year",
    "traffic_p_confirm",
    "inspection_p_find",
    "power_p_per_site_year_at_ref",
    "finance_p_per_musd_year",
)
#: Fractions in [0, 1].
_FRACTIONS = (
    "informed_fraction_site",
    "registry_tracked_fraction",
    "traffic_coverage",
    "traffic_disguised",
    "traffic_undisguised_pool_factor",
)
#: Strictly positive scales.
_POSITIVE = (
    "registry_chips_per_shipment",
    "traffic_similar_sites_at_ref",
    "traffic_ref_mbps",
    "power_pue",
    "power_ref_kw",
)


def _load(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("dispersal.data").joinpath(name).read_text(encoding="utf-8"))


@dataclass(frozen=True, kw_only=True, slots=True)
class DetectionParams:
    """Every parameter of the detection model (defaults: `default_detection_params()`)."""

    people_per_site: float
    central_staff: float
    informed_fraction_site: float
    whistle_p_per_person_year: float
    whistle_reward_multiplier: float
    registry_tracked_fraction: float
    registry_chips_per_shipment: float
    registry_p_per_shipment_year: float
    traffic_coverage: float
    traffic_investigations_per_year: float
    traffic_p_confirm: float
    traffic_similar_sites_at_ref: float
    traffic_ref_mbps: float
    traffic_pool_exponent: float
    traffic_disguised: float
    traffic_undisguised_pool_factor: float
    inspections_per_site_year: float
    inspection_p_find: float
    power_pue: float
    power_ref_kw: float
    power_p_per_site_year_at_ref: float
    power_exponent: float
    finance_p_per_musd_year: float

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            require(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0,
                f.name,
                f"must be a finite number >= 0, got {v!r}",
            )
            object.__setattr__(self, f.name, float(v))
        for name in _PROBABILITIES:
            require(
                getattr(self, name) < 1, name, f"must be a probability in [0, 1), got {getattr(self, name)}"
            )
        for name in _FRACTIONS:
            require(getattr(self, name) <= 1, name, f"must be in [0, 1], got {getattr(self, name)}")
        for name in _POSITIVE:
            require(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)}")

    def replace(self, **changes: Any) -> DetectionParams:
        """A validated copy with some parameters changed (unknown names raise InputError)."""
        known = {f.name for f in dataclasses.fields(self)}
        for k in changes:
            require(k in known, "detection", f"unknown parameter {k!r}; known: {', '.join(sorted(known))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, float]:
        """Plain dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def parameter_names() -> tuple[str, ...]:
    """Names of all detection parameters."""
    return tuple(f.name for f in dataclasses.fields(DetectionParams))


@cache
def _data() -> dict[str, Any]:
    return _load("detection.toml")


@cache
def default_detection_params() -> DetectionParams:
    """The defaults from detection.toml."""
    values = {e["name"]: float(e["value"]) for e in _data()["parameter"]}
    missing = set(parameter_names()) - set(values)
    if missing:
        raise InputError("detection.toml", f"missing parameters: {', '.join(sorted(missing))}")
    return DetectionParams(**{k: values[k] for k in parameter_names()})


def parameter_table() -> list[dict[str, Any]]:
    """Every default parameter with unit and source (for docs and --json)."""
    return [dict(e) for e in _data()["parameter"]]


def background() -> list[dict[str, Any]]:
    """The legitimate sub-threshold installations (collateral population), each with its source."""
    return [dict(e) for e in _data()["background"]]


def broadband() -> dict[str, Any]:
    """Fixed broadband lines: total and the share above each uplink tier."""
    return dict(_data()["broadband"])


# ----------------------------------------------------------------------------------------------
def rate_per_year(p: float) -> float:
    """Hazard per year equivalent to a probability p of at least one event per year."""
    return -math.log1p(-p)


def p_detect(hazard_per_day: float, days: float) -> float:
    """1 - exp(-H T)."""
    require(hazard_per_day >= 0, "hazard", f"must be >= 0, got {hazard_per_day}")
    require(days >= 0, "days", f"must be >= 0, got {days}")
    return -math.expm1(-hazard_per_day * days)


def expected_detection_day(hazard_per_day: float, days: float) -> float:
    """Mean day of detection given detection before day T (truncated exponential); NaN if H T = 0."""
    x = hazard_per_day * days
    if x <= 0:
        return math.nan
    if x < 1e-6:
        return days * (0.5 - x / 12.0)
    if x > 700:
        return 1.0 / hazard_per_day
    return days * (1.0 / x - 1.0 / math.expm1(x))


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFootprint:
    """What a detector can see of one run. One site per node."""

    nodes: int
    chips_per_node: int
    hardware: str
    days: float
    spend_usd: float
    mean_mbps_per_node: float
    """Mean uplink per site (WAN)."""

    def __post_init__(self) -> None:
        require(
            isinstance(self.nodes, int) and self.nodes >= 1,
            "nodes",
            f"must be an integer >= 1, got {self.nodes!r}",
        )
        require(
            isinstance(self.chips_per_node, int) and self.chips_per_node >= 1,
            "chips_per_node",
            f"must be an integer >= 1, got {self.chips_per_node!r}",
        )
        accelerator(self.hardware)
        for name in ("days", "spend_usd", "mean_mbps_per_node"):
            v = getattr(self, name)
            require(math.isfinite(v) and v >= 0, name, f"must be a finite number >= 0, got {v!r}")

    @property
    def chips(self) -> int:
        """All chips of the run."""
        return self.nodes * self.chips_per_node

    def site_kw(self, pue: float) -> float:
        """Electrical load of one site (chips x TDP x PUE), kW."""
        return self.chips_per_node * accelerator(self.hardware).tdp_w * pue / 1000.0

    def informed_people(self, p: DetectionParams) -> float:
        """People who could blow the whistle."""
        return p.central_staff + self.nodes * p.people_per_site * p.informed_fraction_site

    def workforce(self, p: DetectionParams) -> float:
        """Everyone working on the run."""
        return p.central_staff + self.nodes * p.people_per_site


def traffic_pool(mean_mbps: float, p: DetectionParams) -> float:
    """Legitimate sites a traffic analyst cannot tell apart from one evader site."""
    pool = p.traffic_similar_sites_at_ref * (p.traffic_ref_mbps / mean_mbps) ** p.traffic_pool_exponent
    disguise = p.traffic_disguised + (1.0 - p.traffic_disguised) * p.traffic_undisguised_pool_factor
    return float(max(pool * disguise, 1.0))


def channel_hazards(fp: RunFootprint, p: DetectionParams) -> dict[str, float]:
    """Hazard per day of each channel for the whole run."""
    per_year: dict[str, float] = {}
    per_year["whistleblower"] = (
        rate_per_year(p.whistle_p_per_person_year) * p.whistle_reward_multiplier * fp.informed_people(p)
    )
    shipments = fp.chips * p.registry_tracked_fraction / p.registry_chips_per_shipment
    per_year["chip_registry"] = rate_per_year(p.registry_p_per_shipment_year) * shipments
    if fp.mean_mbps_per_node > 0 and p.traffic_coverage > 0:
        followed = min(1.0, p.traffic_investigations_per_year / traffic_pool(fp.mean_mbps_per_node, p))
        per_year["traffic"] = fp.nodes * p.traffic_coverage * followed * p.traffic_p_confirm
    else:
        per_year["traffic"] = 0.0
    per_year["inspections"] = fp.nodes * p.inspections_per_site_year * p.inspection_p_find
    per_year["power"] = (
        fp.nodes
        * rate_per_year(p.power_p_per_site_year_at_ref)
        * (fp.site_kw(p.power_pue) / p.power_ref_kw) ** p.power_exponent
    )
    per_year["finance"] = rate_per_year(p.finance_p_per_musd_year) * fp.spend_usd / 1e6
    return {k: v / 365.25 for k, v in per_year.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class ChannelResult:
    """One channel: its hazard and the probability it alone detects the run before completion."""

    name: str
    hazard_per_day: float
    p_alone: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Detection:
    """Combined detection of one run."""

    days: float
    hazard_per_day: float
    p_detect: float
    """P(detected before completion) = 1 - exp(-H T)."""
    expected_detection_day: float
    """Mean detection day given detection before completion (NaN when nothing can detect)."""
    channels: tuple[ChannelResult, ...]
    informed_people: float
    workforce: float
    site_kw: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; channels by name."""
        d: dict[str, Any] = {
            k: getattr(self, k)
            for k in (
                "days",
                "hazard_per_day",
                "p_detect",
                "expected_detection_day",
                "informed_people",
                "workforce",
                "site_kw",
            )
        }
        d["channels"] = {
            c.name: {"hazard_per_day": c.hazard_per_day, "p_alone": c.p_alone} for c in self.channels
        }
        return d


def detect(fp: RunFootprint, params: DetectionParams | None = None) -> Detection:
    """P(detected before completion) and the expected day, over all channels."""
    p = params or default_detection_params()
    hz = channel_hazards(fp, p)
    total = math.fsum(hz.values())
    return Detection(
        days=fp.days,
        hazard_per_day=total,
        p_detect=p_detect(total, fp.days),
        expected_detection_day=expected_detection_day(total, fp.days),
        channels=tuple(
            ChannelResult(name=k, hazard_per_day=v, p_alone=p_detect(v, fp.days)) for k, v in hz.items()
        ),
        informed_people=fp.informed_people(p),
        workforce=fp.workforce(p),
        site_kw=fp.site_kw(p.power_pue),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class TrafficProfile:
    """WAN traffic of one site of a planned run (uplink, mean over nodes)."""

    bytes_per_day: float
    """Up + down."""
    bytes_per_sync: float
    mean_mbps: float
    peak_mbps: float
    burst_period_s: float
    """Outer step time: one sync burst per period."""
    duty_cycle: float
    """Fraction of time the uplink is busy."""

    def to_dict(self) -> dict[str, float]:
        """Plain dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def traffic_profile(scenario: Scenario, mode: str) -> TrafficProfile:
    """Traffic of a scenario (e.g. ``plan.best.scenario``) from `estimate()`."""
    e = estimate(scenario, mode=mode)
    t = e.traffic
    return TrafficProfile(
        bytes_per_day=t.bytes_per_day,
        bytes_per_sync=t.bytes_per_sync,
        mean_mbps=t.mean_mbps,
        peak_mbps=t.peak_mbps,
        burst_period_s=e.outer_step_time_s,
        duty_cycle=t.duty_cycle,
    )


def days_of(seconds: float) -> float:
    """Seconds to days."""
    return seconds / units.SECONDS_PER_DAY
