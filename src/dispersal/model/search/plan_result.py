"""What the planner returns: the target's metric, objective and search names, one concrete
configuration (`PlanOption`) and the answer for one target (`Plan`). Re-exported by
`dispersal.model.search.planner`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dispersal.model.inputs.scenario import Scenario
from dispersal.model.run.estimate import estimate


class Metric(StrEnum):
    """Which compute a target is measured in."""

    C_LOCAL = "c_local"
    C_QUALITY = "c_quality"


class Objective(StrEnum):
    """What the planner minimises."""

    COST = "cost"
    NODES = "nodes"
    TIME = "time"


class Search(StrEnum):
    """How the node count is searched."""

    BISECT = "bisect"
    EXACT = "exact"


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanOption:
    """One concrete configuration: a Scenario that `estimate()` reproduces, and its key figures."""

    scenario: Scenario
    hardware: str
    precision: str
    chips_per_node: int
    nodes: int
    params: float
    tokens: float
    days: float
    algorithm: str
    group_size: int
    pipeline_stages: int
    groups: int
    inner_steps: int
    inner_steps_effective: float
    compression_ratio: float
    cost_usd: float
    c_local_flop: float
    c_quality_flop: float
    overtraining_ratio: float
    mean_wan_mbps_per_node: float
    peak_wan_mbps_per_node: float
    efficiency: dict[str, float]

    @property
    def label(self) -> str:
        """E.g. '16x H100_SXM FP8'."""
        return f"{self.chips_per_node}x {self.hardware} {self.precision.upper()}"

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-ready dict (efficiency factors by name at the top level too)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "scenario"}
        d["scenario"] = self.scenario.to_dict()
        d.update(self.efficiency)
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """The planner's answer for one target."""

    target_flop: float
    metric: str
    regime: str
    mode: str
    search: str
    objective: str
    feasible: bool
    best: PlanOption | None
    per_hardware: tuple[PlanOption, ...]
    """The best option of each hardware type that can meet the target (runners-up), cheapest first."""
    failures: dict[str, str] = field(default_factory=dict)
    """Why each other hardware type could not meet it."""
    reasons: tuple[str, ...] = ()
    evaluations: int = 0
    """Configurations evaluated."""
    centralized: Plan | None = None
    """The centralized baseline (`centralized_baseline`) of the same target, when `plan(...,
    baseline=True)` computed it; None otherwise."""

    @property
    def centralized_cost_usd(self) -> float | None:
        """Cost of the centralized baseline's best plan (None if not computed or infeasible)."""
        cb = self.centralized.best if self.centralized is not None else None
        return cb.cost_usd if cb is not None else None

    @property
    def cost_premium(self) -> float | None:
        """The evader's cost premium: best.cost_usd / the centralized baseline's cost (None if
        either is missing)."""
        base = self.centralized_cost_usd
        return self.best.cost_usd / base if (self.best is not None and base is not None) else None

    @property
    def extrapolation(self) -> tuple[str, ...]:
        """Where the best plan lies outside the quality fit's evidence (replicas, H, model size,
        fragments, compression), each with the fitted range; empty when infeasible."""
        if self.best is None:
            return ()
        return estimate(self.best.scenario, mode=self.mode).extrapolation

    def to_dict(self) -> dict[str, Any]:
        """JSON: the best option's fields at the top level, plus runners-up and failures, and
        (when computed) centralized_cost_usd, cost_premium and the centralized best option."""
        d: dict[str, Any] = {
            "feasible": self.feasible,
            "target_flop": self.target_flop,
            "metric": self.metric,
            "regime": self.regime,
            "mode": self.mode,
            "search": self.search,
            "objective": self.objective,
            "reasons": list(self.reasons),
            "evaluations": self.evaluations,
        }
        if self.best is not None:
            d.update(self.best.to_dict())
        d["extrapolation"] = list(self.extrapolation)
        d["runners_up"] = [o.to_dict() for o in self.per_hardware]
        d["failures"] = dict(self.failures)
        if self.centralized is not None:
            cb = self.centralized.best
            d["centralized_cost_usd"] = self.centralized_cost_usd
            d["cost_premium"] = self.cost_premium
            d["centralized"] = cb.to_dict() if cb is not None else None
        return d


__all__ = ["Metric", "Objective", "Plan", "PlanOption", "Search"]
