"""dispersal: how far can frontier-scale AI training spread across small, separate sites?

The stable, documented API is the analytic model (pure Python + NumPy), importable from here:

- `Scenario` (one run's inputs, SI units) and `estimate(scenario, mode=...)` -> `Estimate`
  (time, efficiency factors, C_local, C_quality, cost, traffic);
- `Constraints` (what an evader must live with) and `plan(target_flop, regime_name=..., constraints=...)`
  -> `Plan` (the cheapest configuration meeting a compute target, with its `PlanOption`s);
- `load_scenario(name_or_path)` and `scenario_names()` for the shipped presets;
- `solve(scenario, vary=..., output=..., target=...)` -> `Solution` (the input value at which an
  output reaches a target, e.g. the bandwidth for 90% utilisation);
- `Mode`, `Algorithm`, `ModelParams` and `InputError` (every user mistake: one line naming the field).

Example::

    import dispersal
    est = dispersal.estimate(dispersal.load_scenario("paper_threat_model"), mode="paper")
    p = dispersal.plan(1e25, regime_name="treaty", constraints=dispersal.Constraints(), mode="paper")

The testbed (torch) and the web app live in optional extras and are never imported from here.
"""

from __future__ import annotations

#: The release, declared here only (pyproject.toml reads it; CHANGELOG.md's newest heading names it).
__version__ = "0.3.0"

from dispersal.model import (
    Algorithm,
    Estimate,
    InputError,
    Mode,
    ModelParams,
    Scenario,
    estimate,
)
from dispersal.model.inputs.presets import load_scenario, scenario_names
from dispersal.model.search.planner import Constraints, Plan, PlanOption, plan
from dispersal.model.search.solve import Solution, solve

__all__ = [
    "Algorithm",
    "Constraints",
    "Estimate",
    "InputError",
    "Mode",
    "ModelParams",
    "Plan",
    "PlanOption",
    "Scenario",
    "Solution",
    "__version__",
    "estimate",
    "load_scenario",
    "plan",
    "scenario_names",
    "solve",
]
