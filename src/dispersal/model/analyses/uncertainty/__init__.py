"""Uncertainty and sensitivity of the planner's answer: Monte Carlo ranges and a one-at-a-time tornado.

Every uncertain input carries a distribution with its source (``dispersal/data/uncertainty.toml``):
the Chinchilla refit constants (Besiroglu et al. 2024 standard errors, A with alpha and B with beta
drawn as correlated normals, truncated to positive values), the eta_H slope, the replica penalty's
size exponent (rotated about the fit's pivot) and level, the straggler coefficients, the quality
columns of the compression tables, MFU and a chip-price multiplier.

Monte Carlo (`plan_samples`). Re-running the planner per draw (~0.5 s each) is too slow for 1,000
draws, so the search is done for all draws at once on a bounded candidate set:

1. The planner runs once at the nominal values (the headline plan).
2. Every candidate (hardware, model size, algorithm slot) of the planner's own candidate space
   (`candidates.CandidateSpace`, with its validity rule and overtraining window) gets its smallest node count meeting the target at the nominal values, and
   the candidates whose nominal cost is within `SHORTLIST_COST_FACTOR` of the cheapest are kept
   (at most `SHORTLIST_MAX`). Under the drawn values the cheapest plan is assumed to be one of them.
3. For every (draw, candidate) pair, vectorised over both with `kernel.evaluate` and the draw's
   parameters as ``overrides``: the candidate's overtraining window in N is recomputed for that draw,
   scanned on a geometric grid of `GRID_POINTS` node counts, and the first grid cell where the
   target is met is bisected to the integer N. This is exact when "valid and meets the target" is
   monotone in N inside that cell (the planner's exact search scans every integer N instead).
4. Each draw takes the cheapest valid candidate that meets the target (ties: higher C_quality),
   as `plan()` does. A draw with no such candidate cannot reach the target. The result leads with
   P(reach), the share of draws that reach; `percentiles` are conditional on reaching and
   `percentiles_all` count a draw that cannot reach as +inf (`monte_carlo.quantiles_all`).

How each input reaches the kernel: Chinchilla constants and the replica fit through ``overrides``
(arrays per draw); MFU, the compression and activation quality columns and the chip prices through
the kernel inputs; eta_H's alpha0 by an exact rescaling of the kernel's eta_H (eta_H is linear in
alpha0 before its floor: 1 - (a'/a)(1 - raw)); the straggler coefficients, which the kernel reads
only from `ModelParams`, by one evaluation per distinct drawn value (hence their discrete
distribution). Energy is not scaled by the price multiplier.

Tornado (`tornado`): one parameter at a time at its marginal P10 and P90, all others nominal, with
a full `plan()` per end. The chip-price multiplier cannot be passed to `plan()`; it re-ranks the
nominal plan's per-hardware options by scaled hardware cost plus energy, which is what the planner
would return (its search and pruning do not depend on a common price factor).

Ignored: correlations other than the two Chinchilla pairs; uncertainty of the physics (links,
time budget), of the catalogue's memory and FLOP/s figures and of the overtraining window.
"""

from __future__ import annotations

from dispersal.model.analyses.uncertainty.draws import (
    GRID_POINTS,
    SHORTLIST_COST_FACTOR,
    SHORTLIST_MAX,
    WINDOW_SLACK,
    constraints_for,
    model_params_for,
    nominal_plan,
)
from dispersal.model.analyses.uncertainty.monte_carlo import (
    QUALITY_LOSS_MAPPING_SHARE,
    UncertaintyResult,
    plan_samples,
)
from dispersal.model.analyses.uncertainty.spec import (
    CHINCHILLA,
    KINDS,
    PARAMETERS,
    SCHEMA_VERSION,
    Correlation,
    Distribution,
    UncertainParameter,
    UncertaintySpec,
    default_spec,
    load_spec,
)
from dispersal.model.analyses.uncertainty.tornado import TornadoBar, tornado

__all__ = [
    "CHINCHILLA",
    "GRID_POINTS",
    "KINDS",
    "PARAMETERS",
    "QUALITY_LOSS_MAPPING_SHARE",
    "SCHEMA_VERSION",
    "SHORTLIST_COST_FACTOR",
    "SHORTLIST_MAX",
    "WINDOW_SLACK",
    "Correlation",
    "Distribution",
    "TornadoBar",
    "UncertainParameter",
    "UncertaintyResult",
    "UncertaintySpec",
    "constraints_for",
    "default_spec",
    "load_spec",
    "model_params_for",
    "nominal_plan",
    "plan_samples",
    "tornado",
]
