"""The analytic model: pure Python + NumPy. Imports nothing from the testbed, CLI or app.

Public API: `Scenario` (inputs), `estimate()` -> `Estimate`, `plan()` -> `Plan`, the catalogues,
`ModelParams` (published fits and heuristics) and `units`.
"""

from dispersal.model.inputs.catalog import accelerator, accelerators, reference_models, regime, regimes
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import (
    Algorithm,
    Mode,
    Precision,
    Pricing,
    Scenario,
    latency_from_distance,
)
from dispersal.model.inputs.timelimit import max_run_length_s
from dispersal.model.run.estimate import Cost, Efficiency, Estimate, TimeBreakdown, Traffic, estimate
from dispersal.model.search.planner import Constraints, Plan, PlanOption, plan
from dispersal.model.search.solve import Solution, solve

__all__ = [
    "DEFAULT_PARAMS",
    "Algorithm",
    "Constraints",
    "Cost",
    "Efficiency",
    "Estimate",
    "InputError",
    "Mode",
    "ModelParams",
    "Plan",
    "PlanOption",
    "Precision",
    "Pricing",
    "Scenario",
    "Solution",
    "TimeBreakdown",
    "Traffic",
    "accelerator",
    "accelerators",
    "estimate",
    "latency_from_distance",
    "max_run_length_s",
    "plan",
    "reference_models",
    "regime",
    "regimes",
    "solve",
]
