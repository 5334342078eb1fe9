"""Power per site of a plan and the grid connection it needs (issue 23 item 4): each site draws
chips x TDP x PUE, kW, and falls in the smallest grid-connection class
(`dispersal/data/grid_connections.toml`) whose upper bound is at least that load (power factor 1
assumed). Used by `dispersal frontier --year` (`over_time`) and `--compare` (`analyses.monitor`)."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from dispersal.model.inputs.catalog import accelerator
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.search.plan_result import PlanOption


def power_per_site_kw(o: PlanOption) -> float:
    """Electrical power of one site, kW: chips x TDP x PUE (the kernel's energy inputs; catalogue TDP,
    PUE from the scenario)."""
    acc = accelerator(o.hardware)
    return o.chips_per_node * acc.tdp_w * o.scenario.pue / 1000.0


@dataclass(frozen=True, kw_only=True, slots=True)
class GridClass:
    """One grid-connection class: loads up to `max_kw` (inf for the last), with its source."""

    name: str
    label: str
    max_kw: float
    status: str
    source: str


@cache
def grid_classes() -> tuple[GridClass, ...]:
    """The classes of grid_connections.toml, smallest first."""
    text = resources.files("dispersal.data").joinpath("grid_connections.toml").read_text(encoding="utf-8")
    classes = tuple(GridClass(**e) for e in tomllib.loads(text)["class"])
    return tuple(sorted(classes, key=lambda c: c.max_kw))


def grid_class(site_kw: float, classes: tuple[GridClass, ...] | None = None) -> GridClass:
    """The smallest class whose upper bound is >= `site_kw` (kW, finite and >= 0)."""
    require(
        math.isfinite(site_kw) and site_kw >= 0, "site_kw", f"must be a finite number >= 0 kW, got {site_kw}"
    )
    for c in classes or grid_classes():
        if site_kw <= c.max_kw:
            return c
    raise InputError("site_kw", f"{site_kw:g} kW is above every grid class")


@dataclass(frozen=True, kw_only=True, slots=True)
class SitePower:
    """Per-site and total power of a layout and the grid class of each site."""

    sites: int
    site_kw: float
    total_mw: float
    grid_class: str
    grid_class_status: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {k: getattr(self, k) for k in self.__slots__}


def site_power(o: PlanOption, *, one_building: bool = False) -> SitePower:
    """Power per site (chips x TDP x PUE, kW) and its grid class; `one_building` puts every chip of
    `o` on one site."""
    node_kw = power_per_site_kw(o)
    sites = 1 if one_building else o.nodes
    kw = node_kw * o.nodes if one_building else node_kw
    gc = grid_class(kw)
    return SitePower(
        sites=sites,
        site_kw=kw,
        total_mw=node_kw * o.nodes / 1000.0,
        grid_class=gc.name,
        grid_class_status=gc.status,
    )


__all__ = [
    "GridClass",
    "SitePower",
    "grid_class",
    "grid_classes",
    "power_per_site_kw",
    "site_power",
]
