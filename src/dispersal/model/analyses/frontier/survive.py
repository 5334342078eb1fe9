"""Survivability of a frontier plan against one building of the same compute (issue 23 item 4;
`dispersal frontier --compare`, with `analyses.monitor` and `power`).

- The plan's sites go into `resilience.site_loss`. One replica is one island: a flat
  DiLoCo plan has one island per site; a pipeline plan (`pipeline_stages` S > 1) spans S sites per
  replica, so a lost site takes its whole replica down and the resilience model counts replicas
  as its "sites" (each lost site hits a different replica: the worst case for k sites). The round
  time is the plan's outer step. The building is one site of all the baseline's chips running
  synchronous data parallel (`ddp`): losing it stops the run. Quality: the compute-quality ratio
  C_quality / C_local of the survivors (the plan re-estimated with the surviving sites) over the
  intact plan's, from `estimate`.
- Power per site and its grid-connection class: `power`.

Defaults of the loss (assumptions, stated in `SurvivalCase`): the sites go dark a third of the way
into the run and stay dark (a strike, not an outage); the deadline is 1.2 x the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dispersal.model.analyses import resilience
from dispersal.model.inputs.errors import require
from dispersal.model.run.estimate import estimate
from dispersal.model.search.plan_result import PlanOption

#: When the sites go dark, as a fraction of the run. Assumption: a third of the way in (as the
#: resilience defaults: 240 h of a 720 h run).
DEFAULT_LOSS_AT_FRACTION = 1.0 / 3.0
#: Chips per host that fails as a unit (an HGX-class 8-accelerator server; resilience's default).
HOST_CHIPS = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class SurvivalCase:
    """k sites lost, once, for ever (assumption: a strike), at `at_fraction` of the run."""

    lose_sites: int = 1
    at_fraction: float = DEFAULT_LOSS_AT_FRACTION

    def __post_init__(self) -> None:
        require(
            isinstance(self.lose_sites, int) and self.lose_sites >= 0,
            "lose_sites",
            f"must be an integer >= 0, got {self.lose_sites!r}",
        )
        require(0 <= self.at_fraction < 1, "at_fraction", f"must be in [0, 1), got {self.at_fraction}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Survival:
    """What losing k sites does to one layout (expected values; None = never finishes)."""

    layout: str
    algorithm: str
    sites: int
    lose_sites: int
    delay_days: float | None
    lost_work_fraction: float
    finishes_within_budget: bool
    quality_ratio: float | None
    """C_quality / C_local after the loss over before (> 1: fewer replicas, smaller penalty); None
    when nothing survives."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (no Infinity: never finishing is null)."""
        return {k: getattr(self, k) for k in self.__slots__}


def _spec(chips: int, islands: int, round_time_h: float) -> resilience.ResilienceSpec:
    return resilience.ResilienceSpec(
        chips=chips,
        chips_per_node=min(HOST_CHIPS, chips),
        chips_per_island=max(1, chips // islands),
        sites=islands,
        round_time_h=round_time_h,
    )


def _outcome(spec: resilience.ResilienceSpec, k: int, run_h: float, at: float, algorithm: str) -> Any:
    scen = resilience.SiteLossScenario(lose_sites=k, lose_at_h=at * run_h, run_h=run_h)
    return resilience.site_loss(spec, scen).outcomes[algorithm]


def plan_survival(o: PlanOption, case: SurvivalCase, *, mode: str = "default") -> tuple[Survival, Survival]:
    """Losing k sites of the plan, with DiLoCo islands and with Decoupled DiLoCo's (resilience's
    `diloco` and `decoupled`): delay, lost work by the planned end, quality ratio."""
    stages = max(1, o.pipeline_stages)
    replicas = max(1, o.nodes // stages)
    chips = replicas * stages * o.chips_per_node
    k = min(case.lose_sites, replicas)
    e = estimate(o.scenario, mode=mode)
    round_h = e.outer_step_time_s / 3600.0
    spec = _spec(chips, replicas, round_h)
    run_h = o.days * 24.0
    quality: float | None = None
    if k < replicas:
        after = estimate(o.scenario.replace(num_nodes=(replicas - k) * stages), mode=mode)
        quality = (after.c_quality_flop / after.c_local_flop) / (e.c_quality_flop / e.c_local_flop)
    out = []
    for algorithm in ("diloco", "decoupled"):
        r = _outcome(spec, k, run_h, case.at_fraction, algorithm)
        out.append(
            Survival(
                layout=f"{o.nodes} sites",
                algorithm=algorithm,
                sites=o.nodes,
                lose_sites=k,
                delay_days=r.delay_h / 24.0 if math.isfinite(r.delay_h) else None,
                lost_work_fraction=r.lost_useful_fraction,
                finishes_within_budget=r.finishes_within_budget,
                quality_ratio=quality,
            )
        )
    return out[0], out[1]


def building_survival(b: PlanOption, case: SurvivalCase) -> Survival:
    """One building of all `b`'s chips (synchronous data parallel) losing itself when k >= 1."""
    chips = b.nodes * b.chips_per_node
    k = min(case.lose_sites, 1)
    spec = _spec(chips, 1, 0.5)  # the round time is unused by ddp (resilience's default 30 min kept)
    r = _outcome(spec, k, b.days * 24.0, case.at_fraction, "ddp")
    return Survival(
        layout="one building",
        algorithm="ddp",
        sites=1,
        lose_sites=k,
        delay_days=r.delay_h / 24.0 if math.isfinite(r.delay_h) else None,
        lost_work_fraction=r.lost_useful_fraction,
        finishes_within_budget=r.finishes_within_budget,
        quality_ratio=None if k else 1.0,
    )


__all__ = [
    "DEFAULT_LOSS_AT_FRACTION",
    "Survival",
    "SurvivalCase",
    "building_survival",
    "plan_survival",
]
