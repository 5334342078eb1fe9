"""Site-pipeline DiLoCo (issue 22 item 2; DiLoCoX, arXiv 2506.21263): pipelines on a site's fabric,
data parallel inside a site, DiLoCo across sites. Exact values on a tiny hand-checked configuration,
the `auto` rule (default mode only, and only where it beats the WAN pipeline), and the invariant that
a faster fabric or WAN never slows a run of fixed H."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.inputs.codes import ALGO_AUTO, ALGO_PP_DILOCO, ALGO_SITE_PP, Straggler
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Algorithm, Precision, Scenario, as_arrays, kernel_inputs
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.run.estimate import estimate

P, B, MMB = 1e9, 1e5, 4


def tiny(**changes: Any) -> dict[str, Any]:
    """8 nodes in sites of 4; 1e9 parameters whose 16 B/param state needs 2 stages of a 10 GB node;
    1e15 x 0.5 FLOP/s; fabric 100 Gbit/s, 10 us; WAN 1 Gbit/s, 50 ms; bf16 ring sync; H = 10, blocking;
    no straggler stretch, no overlap of any kind, no offload, activations not stored."""
    s = Scenario(
        hardware="h100_sxm",
        precision=Precision.BF16,
        regime="none",
        num_nodes=8,
        nodes_per_site=4,
        params=P,
        local_batch_tokens=B,
        micro_batches=MMB,
        algorithm=Algorithm.SITE_PP_DILOCO,
        overlap_communication=False,
        inner_steps=10,
        codec="bf16",
        aggregation="ring",
        straggler=Straggler.THRESHOLD,
        bandwidth_up_bits_per_s=1e9,
        bandwidth_down_bits_per_s=1e9,
        latency_s=0.05,
        site_fabric_bits_per_s=1e11,
        site_fabric_latency_s=1e-5,
    )
    x = kernel_inputs(s, "default")
    x.update(
        chips_per_node=1,
        node_peak_flop_per_s=1e15,
        mfu=0.5,
        node_memory_bytes=10e9,
        hbm_usable_fraction=1.0,
        activation_memory=False,
        host_memory_bytes=math.inf,
        offload=0,
        ddp_overlap_fraction=0.0,
        sync_backward_overlap=0.0,
    )
    x.update(changes)
    return x


def run(x: dict[str, Any]) -> dict[str, float]:
    return {k: float(np.asarray(v)) for k, v in evaluate(as_arrays(x), DEFAULT_PARAMS).items()}


def test_step_and_sync_by_hand() -> None:
    r = run(tiny())
    # S = ceil(16e9 B / 10e9 B) = 2 stages; k = floor(4 / 2) = 2 pipelines per site; M = 8 / 4 = 2 sites.
    assert (r["pipeline_stages"], r["groups"], r["replicas"]) == (2, 2, 2)
    t_c = 6 * P * B / (5e14 * 2 * MMB)  # 0.15 s of compute per micro-batch and stage
    assert t_c == pytest.approx(0.15)
    A = B * (0.03 * math.sqrt(P)) * 2 * 8  # activation bits at the boundary (bf16, h = 0.03 sqrt P)
    link = 2 * A / MMB / 1e11 + 1e-5
    T_pp = (MMB + 2 - 1) * (t_c + link)
    T_dp = 2 * (2 - 1) * (P / 2 * 16 / 2 / 1e11 + 1e-5)  # the 2 pipelines' stage gradients, ring, bf16
    assert r["step_time_s"] == pytest.approx(T_pp + T_dp, rel=1e-12)
    # Each of a stage's 2 copies sends a quarter of the model: 2.5e8 x 16 bits, ring among 2 sites.
    v = P / 4 * 16
    assert r["sync_time_s"] == pytest.approx(2 * (v / 2 / 1e9 + 0.05), rel=1e-12)
    assert r["sync_up_bits"] == pytest.approx(v, rel=1e-12)
    assert r["outer_step_time_s"] == pytest.approx(10 * (T_pp + T_dp) + 4.1, rel=1e-12)
    # 2 sites x 2 pipelines, each B tokens per inner step.
    assert r["tokens_per_s"] == pytest.approx(10 * B * 4 / (10 * (T_pp + T_dp) + 4.1), rel=1e-12)
    assert r["memory_required_bytes_per_node"] == pytest.approx(8e9)


def test_a_site_too_small_for_the_pipeline_falls_back_to_the_wan_pipeline() -> None:
    r = run(tiny(nodes_per_site=1))
    assert r["algorithm_resolved"] == ALGO_PP_DILOCO
    e = estimate(Scenario(params=P * 400, num_nodes=8, nodes_per_site=1, algorithm=Algorithm.SITE_PP_DILOCO))
    assert e.algorithm == "pp_diloco"
    assert any("cannot hold one whole pipeline" in n for n in e.notes)


def test_covered_cluster_rule_counts_a_site_as_one_cluster() -> None:
    cap = 1.5e15  # one node (1e15 FLOP/s) is under it, a site of 4 is not
    x = tiny(cap_flop_per_s=cap, node_fp16_flop_per_s=1e15)
    assert run(x)["under_cap"] == 0.0
    assert run({**x, "algorithm": ALGO_PP_DILOCO})["under_cap"] == 1.0


def test_auto_picks_the_site_pipeline_where_it_beats_the_wan_pipeline() -> None:
    # WAN pipeline links (1 Gbit/s, 50 ms) vs the fabric: the site pipeline wins.
    auto = run(tiny(algorithm=ALGO_AUTO))
    wan = run(tiny(algorithm=ALGO_PP_DILOCO))
    site = run(tiny())
    assert auto["algorithm_resolved"] == ALGO_SITE_PP
    assert site["tokens_per_s"] > wan["tokens_per_s"]
    # Sites of 3 hold one 2-stage pipeline each (2 of 8 nodes idle) and the WAN pipeline links are as
    # fast as the fabric: the 4 WAN pipelines train faster, so auto keeps pp_diloco.
    fast = dict(algorithm=ALGO_AUTO, nodes_per_site=3, pp_bits_per_s=1e11, pp_latency_s=1e-5, latency_s=1e-5)
    assert run(tiny(**fast))["algorithm_resolved"] == ALGO_PP_DILOCO
    # Every node its own site: never.
    assert run(tiny(algorithm=ALGO_AUTO, nodes_per_site=1))["algorithm_resolved"] == ALGO_PP_DILOCO


def test_paper_mode_auto_never_picks_it() -> None:
    s = Scenario(params=400e9, num_nodes=32, nodes_per_site=8, regime="none", chips_per_node=16)
    assert estimate(s, mode="paper").algorithm == "pp_diloco"
    assert estimate(s, mode="default").algorithm == "site_pp_diloco"
    assert any("kept inside each site" in n for n in estimate(s, mode="default").notes)


def test_auto_never_trades_a_feasible_wan_pipeline_for_a_site_over_the_rule() -> None:
    # Treaty: 16 x H100 nodes are at the cap, a site of 8 of them is 8x over it.
    s = Scenario(params=400e9, num_nodes=32, nodes_per_site=8)
    auto = estimate(s)
    assert auto.algorithm == "pp_diloco" and auto.feasible
    forced = estimate(s.replace(algorithm=Algorithm.SITE_PP_DILOCO))
    assert not forced.feasible
    assert any("site of 8 nodes over the treaty covered-cluster rule" in r for r in forced.reasons)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    fabric=st.floats(1e9, 1e13),
    fabric_x=st.floats(1.0, 100.0),
    wan=st.floats(1e7, 1e11),
    wan_x=st.floats(1.0, 100.0),
    streaming=st.booleans(),
    h=st.integers(1, 500),
)
def test_more_fabric_or_wan_bandwidth_never_slows_it(
    fabric: float, fabric_x: float, wan: float, wan_x: float, streaming: bool, h: int
) -> None:
    # At a fixed H (the automatic H trades steps for sync and is not monotone by design).
    def at(f: float, w: float) -> dict[str, float]:
        return run(
            tiny(
                site_fabric_bits_per_s=f,
                up_bits_per_s=w,
                down_bits_per_s=w,
                streaming=streaming,
                inner_steps=h,
                ddp_overlap_fraction=2 / 3,
            )
        )

    base = at(fabric, wan)
    for faster in (at(fabric * fabric_x, wan), at(fabric, wan * wan_x)):
        assert faster["step_time_s"] <= base["step_time_s"] * (1 + 1e-12)
        assert faster["outer_step_time_s"] <= base["outer_step_time_s"] * (1 + 1e-12)
        assert faster["tokens_per_s"] >= base["tokens_per_s"] * (1 - 1e-12)


@pytest.mark.slow
def test_plan_searches_site_slots_only_when_asked() -> None:
    from dispersal.model.search.planner import Constraints, plan

    c = Constraints(
        hardware=("h100_sxm",),
        chips_per_node=8,
        bandwidth_up_bits_per_s=1e9,
        bandwidth_down_bits_per_s=1e9,
    )
    without = plan(1e25, regime_name="none", constraints=c, baseline=False).best
    with_sites = plan(1e25, regime_name="none", constraints=c.replace(site_sizes=(16,)), baseline=False).best
    assert without is not None and with_sites is not None
    assert without.algorithm != "site_pp_diloco"
    # 8-chip nodes cannot hold the model: a 16-node site keeps the pipeline off the 1 Gbps WAN.
    assert with_sites.algorithm == "site_pp_diloco"
    assert with_sites.scenario.nodes_per_site == 16
    assert with_sites.cost_usd < without.cost_usd
    # The plan's scenario estimates to the plan's figures.
    e = estimate(with_sites.scenario)
    assert e.algorithm == "site_pp_diloco" and e.feasible
    assert e.c_quality_flop == pytest.approx(with_sites.c_quality_flop, rel=1e-9)
