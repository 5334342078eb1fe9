"""The permissionless stage (`dispersal.model.kernel.trust`): exact values and invariants."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.inputs.codes import Trust
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Scenario, kernel_inputs
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.kernel.trust import FORWARD_FLOP_PER_PARAM_TOKEN, PASSES_PER_SCORE
from dispersal.model.run.estimate import estimate
from dispersal.model.search.candidates import Constraints
from dispersal.model.search.planner import plan


def _pair(mode: str = "default", **kw: object) -> tuple[dict[str, float], dict[str, float]]:
    base = Scenario(**kw)  # type: ignore[arg-type]
    perm = dataclasses.replace(base, trust=Trust.PERMISSIONLESS)
    out = []
    for s in (base, perm):
        r = evaluate(kernel_inputs(s, mode), DEFAULT_PARAMS)
        out.append({k: float(v) for k, v in r.items()})
    return out[0], out[1]


def test_trusted_is_the_default_and_pays_nothing() -> None:
    assert Scenario().trust is Trust.TRUSTED
    t, _ = _pair()
    assert t["validator_nodes"] == 0.0
    assert t["validation_time_s"] == 0.0
    assert t["useful_update_fraction"] == 1.0


def test_validation_time_exact() -> None:
    t, p = _pair(num_nodes=20, params=10e9)
    # T_val = M x 2 passes x 2 P x tokens / (validator nodes x F_eff); F_eff from the step time.
    f_eff = 6.0 * 10e9 * Scenario().local_batch_tokens / t["step_compute_time_s"]
    want = (
        p["replicas"]
        * PASSES_PER_SCORE
        * FORWARD_FLOP_PER_PARAM_TOKEN
        * 10e9
        * DEFAULT_PARAMS.validation_eval_tokens_per_update
        / (DEFAULT_PARAMS.validator_nodes * f_eff)
    )
    assert p["validation_time_s"] == pytest.approx(want, rel=1e-12)
    assert p["outer_step_time_s"] == pytest.approx(max(t["outer_step_time_s"], want), rel=1e-12)


def test_permissionless_pays_validator_nodes_and_discards_updates() -> None:
    t, p = _pair(num_nodes=10, params=10e9)
    chips = Scenario(num_nodes=10).resolved_chips_per_node()
    assert p["validator_nodes"] == DEFAULT_PARAMS.validator_nodes
    # Same run length (time budget): hardware grows by exactly the validator's share.
    assert p["hardware_usd"] / t["hardware_usd"] == pytest.approx((10 + DEFAULT_PARAMS.validator_nodes) / 10)
    assert chips > 0
    assert p["useful_update_fraction"] == pytest.approx(1 - DEFAULT_PARAMS.permissionless_discard_fraction)
    assert p["c_quality_flop"] < t["c_quality_flop"]
    assert p["c_raw_flop"] == pytest.approx(t["c_raw_flop"])  # the same work is done, less of it counts


def test_paper_mode_unchanged_by_the_new_field() -> None:
    a = estimate(Scenario(), mode="paper")
    b = estimate(Scenario(trust=Trust.TRUSTED), mode="paper")
    assert a.c_quality_flop == b.c_quality_flop and a.cost.total_usd == b.cost.total_usd


def test_estimate_notes_the_permissionless_costs() -> None:
    e = estimate(Scenario(trust=Trust.PERMISSIONLESS))
    assert any(n.startswith("permissionless:") and "validator" in n for n in e.notes)


def test_bad_trust_names_the_field() -> None:
    with pytest.raises(InputError, match="trust"):
        Constraints(trust="nobody")  # type: ignore[arg-type]


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    nodes=st.integers(1, 2000),
    params=st.floats(1e8, 1e12),
    bw=st.floats(1e6, 1e11),
)
def test_permissionless_never_cheaper_nor_more_compute(nodes: int, params: float, bw: float) -> None:
    t, p = _pair(num_nodes=nodes, params=params, bandwidth_up_bits_per_s=bw, bandwidth_down_bits_per_s=bw)
    assert p["cost_usd"] >= t["cost_usd"] * (1 - 1e-12)
    if t["feasible"] and p["feasible"]:
        assert p["c_quality_flop"] <= t["c_quality_flop"] * (1 + 1e-12)


@pytest.mark.slow
def test_planner_prices_permissionless_above_trusted() -> None:
    trusted = plan(1e24)
    perm = plan(1e24, constraints=Constraints(trust=Trust.PERMISSIONLESS))
    assert trusted.best is not None and perm.best is not None
    assert perm.best.cost_usd > trusted.best.cost_usd
