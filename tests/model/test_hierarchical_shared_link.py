"""Hierarchical DiLoCo on one shared link (default mode) with a requested H whose steps cannot cover
the regional sync: the global sync takes its own turn (one regional round per global sync), never the
~1e7 rounds a near-zero slack gave before."""

from __future__ import annotations

import math

import numpy as np

from dispersal.model import estimate
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Algorithm, Scenario, as_arrays, kernel_inputs
from dispersal.model.kernel.kernel import evaluate

SHARED = Scenario(
    algorithm=Algorithm.HIERARCHICAL,
    num_nodes=8,
    group_size=4,
    bandwidth_up_bits_per_s=200e6,
    bandwidth_down_bits_per_s=100e6,
    inner_steps=50,
    overlap_communication=True,
)


def test_no_slack_means_one_regional_round_and_a_blocking_global_sync() -> None:
    # The pacing rule itself (schedule_rule 0: the paper's, no choice): one round, a blocking sync.
    x = dict(kernel_inputs(SHARED, "default", DEFAULT_PARAMS), schedule_rule=0.0)
    assert x["link_shared"]
    r = {k: float(np.asarray(v)) for k, v in evaluate(as_arrays(x), DEFAULT_PARAMS).items()}
    t_reg, t_step = r["regional_sync_time_s"], r["step_time_s"]
    assert 50 * t_step < t_reg  # the case: no slack on the shared link
    assert r["regional_rounds"] == 1.0
    assert math.isclose(r["outer_step_time_s"], r["sync_time_s"] + t_reg, rel_tol=1e-12)
    # Default mode chooses the regional rounds that maximise C_quality (kernel.choose, issue 31): never
    # less than the rule's single round, the requested H kept, the outer step finite.
    chosen = {
        k: float(np.asarray(v))
        for k, v in evaluate(as_arrays(dict(x, schedule_rule=1.0)), DEFAULT_PARAMS).items()
    }
    assert chosen["c_quality_flop"] >= r["c_quality_flop"]
    e = estimate(SHARED)
    assert e.inner_steps == 50 and np.isfinite(e.outer_step_time_s)
