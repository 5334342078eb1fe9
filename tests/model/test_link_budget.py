"""One link budget per node and direction (issue 11, item 4): in default mode everything that crosses a
node's WAN link (activations, shard syncs, regional and global syncs) shares it, H is chosen so the
busiest node's traffic fits, and no plan the planner returns overcommits a link in either direction."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispersal.model import Scenario, estimate
from dispersal.model.inputs.scenario import Algorithm
from dispersal.model.search.planner import Constraints, plan

LINK_SLACK = 1e-9


def _check_links(e: object) -> None:
    t = e.traffic  # type: ignore[attr-defined]
    assert t.link_utilisation_up <= 1.0 + LINK_SLACK, t
    assert t.link_utilisation_down <= 1.0 + LINK_SLACK, t


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    algo=st.sampled_from(["auto", "diloco", "streaming", "hierarchical", "pp_diloco", "ddp"]),
    n=st.integers(2, 400),
    params_b=st.sampled_from([1, 10, 70, 200, 400]),
    up_mbps=st.floats(5, 5000),
    down_ratio=st.floats(0.2, 5),
    codec=st.sampled_from(["auto", "bf16", "int8", "fp4_e3m0", "sparseloco", "demo"]),
    fragments=st.integers(1, 8),
    tau=st.integers(0, 5),
    group=st.sampled_from([2, 4, 8]),
)
def test_no_link_overcommitted_with_h_min(
    algo: str,
    n: int,
    params_b: int,
    up_mbps: float,
    down_ratio: float,
    codec: str,
    fragments: int,
    tau: int,
    group: int,
) -> None:
    """Any default-mode run at H = H_min: the busiest node's busy time per direction <= wall time."""
    s = Scenario(
        algorithm=Algorithm(algo),
        num_nodes=n,
        params=params_b * 1e9,
        bandwidth_up_bits_per_s=up_mbps * 1e6,
        bandwidth_down_bits_per_s=up_mbps * 1e6 * down_ratio,
        codec=codec,
        fragments=fragments,
        overlap_depth=tau,
        group_size=group,
        regime="treaty",
        duration_s=1e12,
    )
    e = estimate(s)
    assume_ran = e.tokens > 0 and math.isfinite(e.outer_step_time_s)
    if assume_ran:
        _check_links(e)


def test_pipeline_stage_shares_its_link_with_the_shard_sync() -> None:
    """A middle PP stage sends 2A bits of activations per step on the same WAN link as its shard sync:
    H is raised until both fit (more steps than with the sync alone)."""
    s = Scenario(algorithm=Algorithm.PP_DILOCO, num_nodes=60, params=400e9)
    shared = estimate(s)
    split = estimate(s.replace(split_links=True, pp_bandwidth_bits_per_s=1e12))
    assert shared.pipeline_stages >= 3
    _check_links(shared)
    assert shared.traffic.link_utilisation_up > split.traffic.link_utilisation_up


def test_hierarchical_leader_carries_regional_and_global_syncs() -> None:
    """On one shared link a leader's regional rounds and the global sync take turns."""
    s = Scenario(algorithm=Algorithm.HIERARCHICAL, num_nodes=64, group_size=8, params=70e9)
    e = estimate(s)
    assert e.algorithm == "hierarchical"
    _check_links(e)
    assert max(e.traffic.link_utilisation_up, e.traffic.link_utilisation_down) > 0.5


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "up", "down"),
    [(1e23, 100e6, 100e6), (1e24, 100e6, 100e6), (1e24, 30e6, 300e6), (3e24, 1e9, 1e9)],
)
def test_planner_plans_never_overcommit_a_link(target: float, up: float, down: float) -> None:
    """Property over the planner's answers: no default-mode plan overcommits any node's link."""
    p = plan(target, constraints=Constraints(bandwidth_up_bits_per_s=up, bandwidth_down_bits_per_s=down))
    assert p.best is not None
    for o in p.per_hardware:
        _check_links(estimate(o.scenario, mode="default"))
