"""What a permissionless run pays to trust its peers (``trust = permissionless``).

When anyone may join, each update is scored before it touches the model (Templar's Gauntlet in
Covenant-72B: loss before minus loss after applying the update, on the peer's assigned data and on
held-out data; Lidin et al. 2026, arXiv 2603.08163, sec. 3) and only the best-scoring updates are
aggregated. dispersal charges three things for it, each a `ModelParams` field with its source:

- validator nodes (``validator_nodes``) of the run's own node type, on top of the N training nodes,
  in the cost and the power;
- validation time: scoring every update of a round takes
  ``T_val = replicas x 2 passes x 2 P_active x tokens_eval / (validator_nodes x F_eff)`` seconds
  (two forward passes of 2 P_active FLOP per token). The validator scores round r while the peers
  compute round r + 1, so a round lasts ``max(T_outer, T_val)`` (assumption: the overlap Templar's
  windowed protocol gives);
- discarded updates: a fraction ``permissionless_discard_fraction`` of the tokens trained never reach
  the model, and the robust rule's own tax (``robust_quality_factor``, measured in the testbed)
  scales the quality-adjusted compute.

A trusted run (the default) pays none of these: every output equals the run without this stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dispersal.model.kernel.context import Arr, Common

#: FLOP per token of one forward pass, per active parameter (Kaplan et al. 2020, arXiv 2001.08361,
#: sec. 2.1: 2 N forward, 4 N backward).
FORWARD_FLOP_PER_PARAM_TOKEN = 2.0
#: Forward passes per scored update: the loss before and after applying it (Gauntlet).
PASSES_PER_SCORE = 2.0


@dataclass(frozen=True, kw_only=True)
class TrustCost:
    """The permissionless stage's effect on one array of configurations (all arrays broadcast)."""

    permissionless: Arr
    """1 where the run is permissionless, else 0."""
    validation_time_s: Arr
    """Seconds the validators need to score one round's updates (0 for a trusted run)."""
    cycle_s: Arr
    """The round time with validation: max(T_outer, T_val) when permissionless."""
    useful_fraction: Arr
    """Fraction of trained tokens whose updates reach the model (1 - discard when permissionless)."""
    quality_factor: Arr
    """Multiplier on quality-adjusted compute for the robust rule's tax (1 when trusted)."""
    validator_nodes: Arr
    """Extra nodes paid for validation (0 when trusted)."""


def trust_stage(c: Common, replicas: Arr, cycle_s: Arr) -> TrustCost:
    """Validation time, round time, useful fraction, quality factor and validator nodes (module doc).

    T_val = replicas x PASSES_PER_SCORE x FORWARD_FLOP_PER_PARAM_TOKEN x P_active x tokens_eval
            / (validator_nodes x F_eff)      [s]; cycle = max(cycle, T_val) when permissionless.
    """
    inp = c.inp
    perm = (inp.g("trust") > 0) if inp.has("trust") else np.zeros(c.shape, dtype=bool)
    v_nodes = np.maximum(inp.k("validator_nodes"), 1e-300)
    flop = (
        replicas
        * PASSES_PER_SCORE
        * FORWARD_FLOP_PER_PARAM_TOKEN
        * c.Pa
        * inp.k("validation_eval_tokens_per_update")
    )
    t_val = np.where(perm, flop / (v_nodes * c.F_eff), 0.0)
    return TrustCost(
        permissionless=perm.astype(np.float64),
        validation_time_s=t_val,
        cycle_s=np.where(perm, np.maximum(cycle_s, t_val), cycle_s),
        useful_fraction=np.where(perm, 1.0 - inp.k("permissionless_discard_fraction"), 1.0),
        quality_factor=np.where(perm, inp.k("robust_quality_factor"), 1.0),
        validator_nodes=np.where(perm, inp.k("validator_nodes"), 0.0),
    )
