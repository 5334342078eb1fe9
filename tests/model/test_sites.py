"""Heterogeneous sites (`inputs.sites`, `sites.reduce`) and churn (`sites.churn`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model.inputs.codes import AGG_ALL_GATHER, AGG_PAPER, AGG_RELAY, AGG_RELAY_DENSE, AGG_RING
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.presets import load_scenario
from dispersal.model.inputs.scenario import Mode, Scenario, as_arrays
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.run.estimate import Estimate, estimate
from dispersal.model.search.plan_sites import plan_site_mix, scaled
from dispersal.model.sites.churn import churn_summary, join_time_s
from dispersal.model.sites.reduce import node_links, paced_sync, scenario_inputs

#: Three one-node sites: (up bit/s, down bit/s, latency s).
TINY = {"a": (100e6, 200e6, 0.01), "b": (50e6, 400e6, 0.03), "c": (300e6, 100e6, 0.02)}


def _tiny(**kw: Any) -> Scenario:
    sites = [
        {"name": n, "nodes": 1, "bandwidth_up_bits_per_s": u, "bandwidth_down_bits_per_s": d, "latency_s": la}
        for n, (u, d, la) in TINY.items()
    ]
    base: dict[str, Any] = {"site": sites, "regime": "none", "precision": "bf16", "straggler": "threshold"}
    return Scenario.from_dict({**base, **kw})


def _links() -> Any:
    return node_links(_tiny(), [1, 1, 1])


@pytest.mark.parametrize(
    ("code", "expected", "pacing"),
    [
        # Ring: 2 (M - 1) hops of V/M, each as slow as the slowest edge. Edges a->b min(100, 400) Mbit/s
        # at 20 ms, b->c min(50, 100) at 25 ms, c->a min(300, 200) at 15 ms: b->c, 4 x (1e9/3/50e6 + 0.025).
        (AGG_RING, 4 * (1e9 / 3 / 50e6 + 0.025), "ring edge b -> c (uplink of b)"),
        # Relay: slowest upload (b: 20 s + 30 ms), then the busiest downlink for V (c: 10 s + 20 ms).
        (AGG_RELAY, 20.03 + 10.02, "uplink of b, then the busiest downlink (c)"),
        # Gather: the slowest upload, then each peer downloads the 2 others' payloads at its downlink
        # (a 10 s, b 5 s, c 20 s): c, 20 s + 20 ms.
        (AGG_ALL_GATHER, 20.03 + 20.02, "uplink of b, then the busiest downlink (c)"),
        # Dense relay: 1e9 params x 16 bits down: a 80 s, b 40 s, c 160 s.
        (AGG_RELAY_DENSE, 20.03 + 160.02, "uplink of b, then the busiest downlink (c)"),
        # Paper relay: max over nodes of V/up + V/down + latency: a 15.01, b 22.53, c 13.353.
        (AGG_PAPER, 20 + 2.5 + 0.03, "relay: node of b"),
    ],
)
def test_paced_sync_hand_computed(code: int, expected: float, pacing: str) -> None:
    sync = paced_sync(code, 1e9, 1e9, 16.0, _links(), ["a", "b", "c"])
    assert sync.time_s == pytest.approx(expected, rel=1e-12)
    assert sync.pacing == pacing


@pytest.mark.slow
def test_estimate_sync_is_the_paced_time() -> None:
    """End to end (straggler factor 1): a ring of int8 payloads and a gather of sparse ones."""
    ring = estimate(_tiny(params=1e9 / 8, codec="int8", aggregation="ring", algorithm="diloco"))
    assert ring.sync_time_s == pytest.approx(4 * (1e9 / 3 / 50e6 + 0.025), rel=1e-12)
    gather = estimate(
        _tiny(params=1e9, codec="auto", compression_ratio=32.0, aggregation="all_gather", algorithm="diloco")
    )
    assert gather.sync_time_s == pytest.approx(20.03 + 20.02, rel=1e-12)
    assert [r.name for r in gather.sites] == ["a", "b", "c"]
    # Each node uploads its payload and downloads the 2 others'; c's downlink is the busiest.
    c = gather.sites[2]
    assert c.sync_up_bytes == pytest.approx(1e9 / 8) and c.sync_down_bytes == pytest.approx(2e9 / 8)
    assert c.link_utilisation_down == pytest.approx(2e9 / 100e6 / gather.outer_step_time_s)
    assert Estimate.from_dict(gather.to_dict()) == gather


@pytest.mark.parametrize(
    "kw",
    [
        {"algorithm": "diloco", "aggregation": "ring", "codec": "int8"},
        {"algorithm": "streaming", "aggregation": "all_gather", "codec": "sparseloco"},
        {"algorithm": "diloco", "aggregation": "relay", "codec": "int8", "straggler": "synchronous"},
        {"algorithm": "ddp", "codec": "bf16"},
    ],
)
@pytest.mark.parametrize("mode", ["default", "paper"])
def test_identical_sites_reduce_to_the_kernel_exactly(kw: dict[str, Any], mode: str) -> None:
    base = Scenario(
        num_nodes=6,
        bandwidth_up_bits_per_s=2e8,
        bandwidth_down_bits_per_s=7e8,
        latency_s=0.04,
        params=3e9,
        **kw,
    )
    split = base.replace(
        sites=({"name": "x", "nodes": 2}, {"name": "y", "nodes": 3}, {"name": "z", "nodes": 1})
    )
    a, b = estimate(base, mode=mode).to_dict(), estimate(split, mode=mode).to_dict()
    for key in set(a) - {"scenario", "notes"}:
        assert a[key] == b[key], key
    assert b["sites"] and b["notes"][-1].startswith("3 sites: sync paced by")


def _rate_inputs(s: Scenario) -> tuple[float, float]:
    r = evaluate(
        as_arrays(scenario_inputs(s, Mode.DEFAULT)), DEFAULT_PARAMS, outputs=("run_time_s", "sync_time_s")
    )
    return float(np.asarray(r["run_time_s"])), float(np.asarray(r["sync_time_s"]))


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(
    agg=st.sampled_from(["ring", "relay", "all_gather", "relay_dense"]),
    site=st.integers(0, 2),
    direction=st.sampled_from(["bandwidth_up_bits_per_s", "bandwidth_down_bits_per_s"]),
    factor=st.floats(1.0, 100.0),
    rates=st.lists(st.floats(1e7, 1e10), min_size=6, max_size=6),
)
def test_raising_one_sites_bandwidth_never_slows_the_run(
    agg: str, site: int, direction: str, factor: float, rates: list[float]
) -> None:
    sites: list[dict[str, Any]] = [
        {
            "name": f"s{i}",
            "nodes": i + 1,
            "bandwidth_up_bits_per_s": rates[2 * i],
            "bandwidth_down_bits_per_s": rates[2 * i + 1],
        }
        for i in range(3)
    ]
    codec = "int8" if agg == "ring" else "sparseloco"
    s = Scenario.from_dict(
        {"site": sites, "aggregation": agg, "codec": codec, "algorithm": "diloco", "inner_steps": 20,
         "tokens": 1e11, "params": 1e9}
    )  # fmt: skip
    faster: list[dict[str, Any]] = [dict(x) for x in sites]
    faster[site][direction] = float(sites[site][direction]) * factor
    run0, sync0 = _rate_inputs(s)
    run1, sync1 = _rate_inputs(Scenario.from_dict({**s.to_dict(), "site": faster}))
    assert sync1 <= sync0 * (1 + 1e-12)
    assert run1 <= run0 * (1 + 1e-12)


def test_slowest_site_paces_compute_and_batch_shares_count_tokens() -> None:
    s = Scenario.from_dict(
        {
            "algorithm": "diloco",
            "inner_steps": 10,
            "precision": "bf16",
            "regime": "none",
            "chips_per_node": 8,
            "params": 1e9,
            "site": [
                {"name": "fast", "nodes": 2, "hardware": "h100_sxm", "local_batch_tokens": 262144},
                {"name": "slow", "nodes": 1, "hardware": "a100_80gb", "local_batch_tokens": 65536},
            ],
        }
    )
    e = estimate(s)
    fast, slow = e.sites
    assert e.step_compute_time_s == max(fast.step_compute_time_s, slow.step_compute_time_s)
    assert (fast.paces_compute, slow.paces_compute) == (True, False)
    assert slow.utilisation < fast.utilisation == pytest.approx(e.utilisation)
    # Tokens per second: every node's own batch per lock-step.
    assert e.tokens / e.run_time_s == pytest.approx(10 * (2 * 262144 + 65536) / e.outer_step_time_s, rel=1e-9)


def test_churn_join_time_and_timeline() -> None:
    s = Scenario.from_dict(
        {
            "algorithm": "diloco",
            "inner_steps": 10,
            "precision": "bf16",
            "regime": "none",
            "params": 1e9,
            "tokens": 1e12,
            "latency_s": 0.05,
            "site": [{"name": "a", "nodes": 2, "bandwidth_down_bits_per_s": 1e9}],
            "churn": [{"hour": 1, "site": "a", "nodes": 2}, {"hour": 5, "site": "a", "nodes": -1}],
        }
    )
    # The whole training state: 16 B/param (bf16 ZeRO) + 8 B/param outer state + 4 B/param error
    # feedback (codec auto), at 1 Gbit/s, + latency.
    join = 1e9 * 28 * 8 / 1e9 + 0.05
    assert join_time_s(s, Mode.DEFAULT, DEFAULT_PARAMS, 0) == pytest.approx(join)
    c = churn_summary(s, Mode.DEFAULT, DEFAULT_PARAMS)
    assert len(c.join_transfer_s) == 1 and c.join_transfer_s[0] == pytest.approx(join)
    assert [seg[2] for seg in c.segments] == [2, 4, 3]
    assert c.segments[0][1] == pytest.approx(3600 + join) and c.segments[1][1] == pytest.approx(5 * 3600)
    assert sum((b - a) * r for a, b, _, r in c.segments) == pytest.approx(1e12, rel=1e-9)
    assert c.run_time_s == c.segments[-1][1] and c.tokens == pytest.approx(1e12)
    assert c.node_hours_lost_to_joins == pytest.approx(2 * join / 3600)
    # Four nodes compute faster than two: the rate per segment follows the node count.
    assert c.segments[1][3] > c.segments[2][3] > c.segments[0][3]
    assert estimate(s).churn == c


def test_shipped_site_presets() -> None:
    s = load_scenario("intellect1_schedule")
    assert [x.name for x in s.sites] == ["us", "europe", "asia"] and s.num_nodes == 4
    e = estimate(s)
    assert e.churn is not None and max(seg[2] for seg in e.churn.segments) == 14
    cov = estimate(load_scenario("covenant72b"))
    # Each peer downloads the 19 others' payloads: the downlink is the busier link.
    assert cov.traffic.sync_download_bytes == pytest.approx(19 * cov.traffic.sync_upload_bytes)
    assert cov.traffic.link_utilisation_down > cov.traffic.link_utilisation_up


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (
            {"site": [{"nodes": 1}, {"nodes": 1}, {"nodes": 1, "bandwidth_down_bits_per_s": -5}]},
            "site[2].bandwidth_down_bits_per_s",
        ),
        ({"site": [{"nodes": 1, "bandwidth_up_bits_per_s": "5 parsecs"}]}, "site[0].bandwidth_up_bits_per_s"),
        ({"site": [{"nodes": 1, "latency_s": "nan s"}]}, "site[0].latency_s"),
        ({"site": [{"nodes": -1}]}, "site[0].nodes"),
        ({"site": [{"nodes": 1.5}]}, "site[0].nodes"),
        ({"site": [{"name": "a"}]}, "site[0].nodes"),
        ({"site": [{"nodes": 1, "speed": 3}]}, "site[0].speed"),
        ({"site": [{"nodes": 1, "hardware": "nope"}]}, "site[0].hardware"),
        ({"site": [{"nodes": 1, "chips_per_node": 0}]}, "site[0].chips_per_node"),
        ({"site": [{"name": "a", "nodes": 1}, {"name": "a", "nodes": 1}]}, "site[1].name"),
        ({"site": [{"nodes": 0}]}, "site"),
        ({"site": [3]}, "site[0]"),
        ({"site": "abc"}, "site"),
        ({"site": [{"nodes": 1, "hardware": "a100_80gb"}], "precision": "fp8"}, "site[0].precision"),
        ({"churn": [{"hour": 1, "site": 0, "nodes": 1}]}, "churn"),
        ({"site": [{"nodes": 1}], "churn": [{"hour": 1, "site": "zz", "nodes": 1}]}, "churn[0].site"),
        ({"site": [{"nodes": 1}], "churn": [{"hour": -1, "site": 0, "nodes": 1}]}, "churn[0].hour"),
        ({"site": [{"nodes": 1}], "churn": [{"hour": 1, "site": 0, "nodes": 0}]}, "churn[0].nodes"),
        ({"site": [{"nodes": 1}], "churn": [{"hour": 1, "site": 0, "nodes": -2}]}, "churn[0].nodes"),
        ({"site": [{"nodes": 1}], "churn": [{"hour": 1, "site": 0}]}, "churn[0].nodes"),
        ({"site": [{"nodes": 1}], "num_nodes": 5}, "num_nodes"),
    ],
)
def test_bad_site_input_names_its_path(data: dict[str, Any], path: str) -> None:
    with pytest.raises(InputError) as err:
        Scenario.from_dict(data)
    assert err.value.field == path
    assert "\n" not in str(err.value)


def test_sites_round_trip_through_dicts() -> None:
    s = load_scenario("intellect1_schedule")
    assert Scenario.from_dict(s.to_dict()) == s
    assert "site" not in Scenario().to_dict() and "churn" not in Scenario().to_dict()
    assert math.isclose(estimate(s).run_time_s, estimate(Scenario.from_dict(s.to_dict())).run_time_s)


def test_site_mix_plan_is_the_smallest_multiple_reaching_the_target() -> None:
    s = Scenario.from_dict(
        {
            "params": 30e9,
            "precision": "bf16",
            "algorithm": "diloco",
            "inner_steps": 50,
            "codec": "int8",
            "aggregation": "ring",
            "regime": "none",
            "duration_s": 30 * 86400,
            "site": [
                {"name": "h", "nodes": 2, "hardware": "h100_sxm", "bandwidth_up_bits_per_s": 1e9},
                {"name": "a", "nodes": 1, "hardware": "a100_80gb", "bandwidth_up_bits_per_s": 2e8},
            ],
        }
    )
    # With a model this size C_local grows with the scale (a 1B model saturates: overtrained).
    values = [estimate(scaled(s, k)).c_local_flop for k in range(1, 9)]
    assert values == sorted(values)
    target = (values[4] + values[5]) / 2  # between k = 5 and k = 6
    assert values[4] < target <= values[5]
    p = plan_site_mix(s, target, metric="c_local", max_nodes=24)
    assert p.scale == 6 and p.nodes == (12, 6)
    assert p.estimate is not None and p.estimate.c_local_flop == pytest.approx(values[5])
    miss = plan_site_mix(s, values[-1] * 10, metric="c_local", max_nodes=24)
    assert miss.scale is None and "8 x the mix (24 nodes)" in miss.reason
    with pytest.raises(InputError) as err:
        plan_site_mix(Scenario(), 1e24)
    assert err.value.field == "sites"


def test_a_mix_that_cannot_reach_reports_its_best_multiple_not_the_last_tried() -> None:
    """`plan --sites` past the best multiple: more copies of a fixed-size model reach less (the
    replica penalty), so the answer names the best multiple tried and stops doubling there."""
    from dispersal.model.inputs.presets import load_scenario
    from dispersal.model.search.plan_sites import plan_site_mix, scaled

    s = load_scenario("intellect1_schedule")
    r = plan_site_mix(s, 1e25)
    assert r.scale is None and r.estimate is not None
    assert "no multiple of the mix reaches" in r.reason and "the most is" in r.reason
    best = r.estimate.c_quality_flop
    k_best = sum(r.nodes) // sum(site.nodes for site in s.sites)
    others = [estimate(scaled(s, k)).c_quality_flop for k in (1, 2 * k_best)]
    assert all(v <= best for v in others) and best < 1e25


def test_a_churn_schedule_judges_the_time_budget_on_the_run_as_scheduled() -> None:
    """INTELLECT-1-style: 4 nodes at the start would need 60.6 d, the schedule grows to 14 and takes
    25.7 d: feasible within 60 d (noted), infeasible within 20 d with the scheduled time as reason."""
    from dispersal.model.inputs.presets import load_scenario

    s = load_scenario("intellect1_schedule")
    e = estimate(s)
    assert e.churn is not None and e.churn.run_time_s < s.duration_s < e.run_time_s
    assert e.feasible and not e.reasons
    assert any(n.startswith("time budget judged under the churn schedule") for n in e.notes)
    short = estimate(s.replace(duration_s=20 * 86400.0))
    assert not short.feasible
    assert short.reasons == (
        "run exceeds the time budget under the churn schedule: needs 25.7 d, budget 20 d",
    )
