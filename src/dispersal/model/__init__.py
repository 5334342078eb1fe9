"""The analytic model: pure Python + NumPy. Imports nothing from the testbed, CLI or app.

Public API: `Scenario` (inputs), `estimate()` -> `Estimate`, `plan()` -> `Plan`, the catalogues,
`ModelParams` (published fits and heuristics) and `units`.
"""

from dispersal.model.catalog import accelerator, accelerators, reference_models, regime, regimes
from dispersal.model.errors import InputError
from dispersal.model.estimate import Cost, Efficiency, Estimate, TimeBreakdown, Traffic, estimate
from dispersal.model.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.planner import Constraints, Plan, PlanOption, plan
from dispersal.model.scenario import Algorithm, Mode, Precision, Pricing, Scenario, latency_from_distance
from dispersal.model.solve import Solution, solve
from dispersal.model.timelimit import max_run_length_s

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
