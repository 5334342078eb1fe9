"""Heterogeneous sites and churn: the ``[[site]]`` and ``[[churn]]`` tables of a scenario.

A scenario may list its sites instead of N identical nodes: each site is a group of identical nodes
(hardware, chips per node, node count) with its own WAN link per direction and latency; a field a
site leaves out is the scenario's own. ``[[churn]]`` events add or remove nodes of a site at a given
hour of the run (INTELLECT-1's 4-14 nodes). Parsing and validation only: the paced figures are
`dispersal.model.sites.reduce`'s. Every bad value is one InputError naming its path, e.g.
``site[2].bandwidth_down_bits_per_s: must be a finite number > 0 bit/s, got -5``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.fields import ScenarioField, scenario_fields
from dispersal.model.inputs.scenario_fields import ScenarioFields

#: The scenario fields a site may set for itself (each parsed and bounded as the scenario's own).
SITE_FIELDS: tuple[str, ...] = (
    "hardware",
    "chips_per_node",
    "bandwidth_up_bits_per_s",
    "bandwidth_down_bits_per_s",
    "latency_s",
    "local_batch_tokens",
)
#: Most nodes one site (or one churn event) may name (the CLI's bound on num_nodes).
MAX_SITE_NODES = 10_000_000
#: Most sites and churn events a scenario may list (far past any published run; keeps the per-edge
#: evaluation and the churn timeline small).
MAX_SITES = 10_000
MAX_CHURN_EVENTS = 10_000

_FIELDS: dict[str, ScenarioField] = {f.name: f for f in scenario_fields(ScenarioFields)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Site:
    """One group of identical nodes with its own links. None = the scenario's value."""

    name: str
    nodes: int
    """Nodes at the start of the run (0 allowed when churn adds them later)."""
    region: str = ""
    """A label (not used in any formula)."""
    hardware: str | None = None
    chips_per_node: int | None = None
    bandwidth_up_bits_per_s: float | None = None
    bandwidth_down_bits_per_s: float | None = None
    latency_s: float | None = None
    """One-way latency of this site's WAN path to a typical peer; an edge between two sites takes
    the mean of their two (assumption)."""
    local_batch_tokens: float | None = None
    """Tokens per inner step per node of this site (a per-site batch share); None = the scenario's."""

    def to_dict(self) -> dict[str, Any]:
        """The site as a TOML/JSON table (None fields left out)."""
        out: dict[str, Any] = {"name": self.name, "nodes": self.nodes}
        if self.region:
            out["region"] = self.region
        for k in SITE_FIELDS:
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class ChurnEvent:
    """At `hour` of the run, `nodes` nodes join (> 0) or leave (< 0) site `site` (its name)."""

    hour: float
    site: str
    nodes: int

    def to_dict(self) -> dict[str, Any]:
        """The event as a TOML/JSON table."""
        return {"hour": self.hour, "site": self.site, "nodes": self.nodes}


def _field_value(path: str, key: str, value: Any) -> Any:
    """One site field parsed and bounded as the scenario field of that name; errors name `path`."""
    f = _FIELDS[key]
    try:
        return f.check(f.parse(value))
    except InputError as exc:
        raise InputError(path, str(exc).removeprefix(f"{key}: ")) from None


def _int(path: str, value: Any, lo: int, hi: int, nonzero: bool = False) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if not ok or not lo <= value <= hi or (nonzero and value == 0):
        rule = f"in [{lo:,}, {hi:,}]" + (", not 0" if nonzero else "")
        raise InputError(path, f"must be an integer {rule}, got {value!r}")
    return int(value)


def _table(path: str, item: Any) -> Mapping[str, Any]:
    if isinstance(item, Site | ChurnEvent):
        return item.to_dict()
    if not isinstance(item, Mapping):
        raise InputError(path, f"must be a table (key = value pairs), got {type(item).__name__}")
    return item


def _items(key: str, value: Any, most: int) -> Sequence[Any]:
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list | tuple):
        raise InputError(key, f"must be a list of tables ([[{key}]] in TOML), got {type(value).__name__}")
    if len(value) > most:
        raise InputError(key, f"at most {most:,} entries, got {len(value):,}")
    return value


def parse_sites(value: Any) -> tuple[Site, ...]:
    """``[[site]]`` tables (or Site objects) -> validated Sites; names unique, >= 1 node in all."""
    sites: list[Site] = []
    for i, raw in enumerate(_items("site", value, MAX_SITES)):
        path = f"site[{i}]"
        item = _table(path, raw)
        allowed = {"name", "nodes", "region", *SITE_FIELDS}
        for key in item:
            if key not in allowed:
                raise InputError(f"{path}.{key}", f"unknown site key (allowed: {', '.join(sorted(allowed))})")
        if "nodes" not in item:
            raise InputError(f"{path}.nodes", "must be given (an integer >= 0)")
        name = item.get("name", f"site{i}")
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"{path}.name", f"must be non-empty text, got {name!r}")
        if any(s.name == name for s in sites):
            raise InputError(f"{path}.name", f"duplicate site name {name!r}")
        region = item.get("region", "")
        if not isinstance(region, str):
            raise InputError(f"{path}.region", f"must be text, got {region!r}")
        fields = {k: _field_value(f"{path}.{k}", k, item[k]) for k in SITE_FIELDS if item.get(k) is not None}
        if fields.get("chips_per_node") == 0:
            raise InputError(f"{path}.chips_per_node", "must be an integer >= 1, got 0")
        nodes = _int(f"{path}.nodes", item["nodes"], 0, MAX_SITE_NODES)
        sites.append(Site(name=name, nodes=nodes, region=region, **fields))
    if not sites:
        raise InputError("site", "must list at least one site")
    total = sum(s.nodes for s in sites)
    if not 1 <= total <= MAX_SITE_NODES:
        raise InputError("site", f"the sites' nodes must add up to 1-{MAX_SITE_NODES:,}, got {total:,}")
    return tuple(sites)


def parse_churn(value: Any, sites: Sequence[Site]) -> tuple[ChurnEvent, ...]:
    """``[[churn]]`` tables -> events sorted by hour; a site never drops below 0 nodes, the run
    never below 1 (path of the first event that would)."""
    if not sites:
        raise InputError("churn", "needs [[site]] tables (churn adds or removes nodes of a named site)")
    names = [s.name for s in sites]
    events: list[tuple[float, int, ChurnEvent]] = []
    for i, raw in enumerate(_items("churn", value, MAX_CHURN_EVENTS)):
        path = f"churn[{i}]"
        item = _table(path, raw)
        for key in item:
            if key not in ("hour", "site", "nodes"):
                raise InputError(f"{path}.{key}", "unknown churn key (allowed: hour, nodes, site)")
        for key in ("hour", "site", "nodes"):
            if key not in item:
                raise InputError(f"{path}.{key}", "must be given")
        hour = item["hour"]
        if isinstance(hour, bool) or not isinstance(hour, int | float) or not math.isfinite(hour) or hour < 0:
            raise InputError(f"{path}.hour", f"must be a finite number of hours >= 0, got {hour!r}")
        site = item["site"]
        if isinstance(site, int) and not isinstance(site, bool) and 0 <= site < len(names):
            site = names[site]
        if site not in names:
            raise InputError(
                f"{path}.site", f"must name a site ({', '.join(names)}) or its index, got {site!r}"
            )
        nodes = _int(f"{path}.nodes", item["nodes"], -MAX_SITE_NODES, MAX_SITE_NODES, nonzero=True)
        events.append((float(hour), i, ChurnEvent(hour=float(hour), site=site, nodes=nodes)))
    events.sort(key=lambda e: (e[0], e[1]))
    count = {s.name: s.nodes for s in sites}
    for _, i, ev in events:
        count[ev.site] += ev.nodes
        if count[ev.site] < 0:
            raise InputError(f"churn[{i}].nodes", f"site {ev.site!r} would have {count[ev.site]} nodes")
        if not 1 <= sum(count.values()) <= MAX_SITE_NODES:
            raise InputError(
                f"churn[{i}].nodes", f"the run would have {sum(count.values())} nodes (1 or more)"
            )
    return tuple(e for _, _, e in events)


def site_scenario(s: Any, site: Site, index: int, num_nodes: int) -> Any:
    """The identical-node Scenario of one site of `s` (its hardware, chips, links, batch; the rest
    the scenario's) with num_nodes nodes; an invalid combination names the site's path."""
    changes: dict[str, Any] = {"sites": (), "churn": (), "num_nodes": max(1, num_nodes)}
    for key in SITE_FIELDS:
        v = getattr(site, key)
        if v is not None:
            changes[key] = v
    try:
        return s.replace(**changes)
    except InputError as exc:
        raise InputError(f"site[{index}].{exc.field}", str(exc).removeprefix(f"{exc.field}: ")) from None
