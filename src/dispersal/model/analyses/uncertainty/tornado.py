"""One-at-a-time sensitivity of the cost (`tornado`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.analyses.uncertainty.draws import _rescaled, nominal_plan
from dispersal.model.analyses.uncertainty.spec import UncertaintySpec, default_spec
from dispersal.model.inputs.errors import require
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search import planner

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class TornadoBar:
    """The cost with one parameter at its P10 and at its P90, all others nominal."""

    name: str
    description: str
    low_value: float
    """The parameter's P10."""
    high_value: float
    """The parameter's P90."""
    low_label: str
    high_label: str
    cost_at_low_usd: float
    """Cost with the parameter at its P10 (inf when the target cannot be met)."""
    cost_at_high_usd: float
    cost_low_usd: float
    """The smaller of the two costs."""
    cost_high_usd: float
    swing_usd: float
    """cost_high_usd - cost_low_usd (inf when one end is infeasible)."""
    nominal_cost_usd: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (infinities become null in the CLI)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def tornado(
    target_flop: float,
    *,
    regime_name: str = "treaty",
    constraints: planner.Constraints | None = None,
    mode: Mode | str = "default",
    metric: planner.Metric | str | None = None,
    search: planner.Search | str | None = None,
    spec: UncertaintySpec | None = None,
    parameters: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> list[TornadoBar]:
    """One-at-a-time sensitivity of the cost: each parameter at its P10 and P90, the rest nominal.

    Each end is a full `plan()` (the price multiplier re-ranks the nominal plan's options instead).
    Returns the bars sorted by swing, largest first; an end that cannot meet the target costs inf.
    """
    spec = spec or default_spec()
    m = Mode(mode)
    c0 = constraints or planner.Constraints()
    names = list(parameters) if parameters is not None else [p.name for p in spec.parameters]
    for n in names:
        require(
            spec.get(n) is not None, n, f"has no distribution in the spec (have: {', '.join(spec.nominal())})"
        )
    nom_vals = spec.nominal()
    kw: dict[str, Any] = {
        "regime_name": regime_name,
        "constraints": c0,
        "mode": m,
        "metric": metric,
        "search": search,
        "spec": spec,
    }
    nom_plan, nom_best = nominal_plan(target_flop, **kw)
    nominal_cost = nom_best.cost_usd if nom_best is not None else math.inf
    total = 2 * len(names)
    if progress is not None:
        progress(0, total)
    bars = []
    for i, name in enumerate(names):
        par = spec.get(name)
        assert par is not None
        d = par.distribution
        ends = (d.quantile(0.1), d.quantile(0.9))
        costs = []
        for v in ends:
            if v == d.nominal:
                costs.append(nominal_cost)
            elif name == "price_scale":
                o = _rescaled(nom_plan, m, v)
                costs.append(o.cost_usd if o is not None else math.inf)
            else:
                _, o = nominal_plan(target_flop, **kw, values={**nom_vals, name: v})
                costs.append(o.cost_usd if o is not None else math.inf)
        if progress is not None:
            progress(2 * i + 2, total)
        lo, hi = min(costs), max(costs)
        bars.append(
            TornadoBar(
                name=name,
                description=par.description,
                low_value=ends[0],
                high_value=ends[1],
                low_label=d.label_of(ends[0]),
                high_label=d.label_of(ends[1]),
                cost_at_low_usd=costs[0],
                cost_at_high_usd=costs[1],
                cost_low_usd=lo,
                cost_high_usd=hi,
                swing_usd=hi - lo if math.isfinite(hi) else math.inf,
                nominal_cost_usd=nominal_cost,
            )
        )
    bars.sort(key=lambda b: (-b.swing_usd, b.name))
    return bars
