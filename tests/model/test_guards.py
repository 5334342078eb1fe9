"""Guards: tests written against mutations that slipped through the rest of the suite (issue 20, item 0).

Each test names the rule it protects; each was checked to fail when that rule is broken in a copy of
the source (the list is in CONTRIBUTING.md, "Mutation guards"). Values are computed by hand in the
test from round inputs and catalogue data; where a test isolates one rule it may take a figure that
other tests pin (the step time, the stage count) from the Estimate, never the figure under test:

- links: the ring all-reduce runs at min(up, down); relay and all-gather syncs charge upload and
  download on their own links (every other test uses symmetric links, where min = max = up = down);
  the DDP step hides only its overlap share; a blocking hierarchical cycle counts the regional
  latency; pipeline groups sync their stage shard in default mode.
- the memory (HBM) rule of a regime: chips per node, estimate feasibility, the planner's node types
  and the countermeasure that adds the rule; a bandwidth cap bonds at most the allowed lines.
- detection: P(detect) grows STRICTLY in every parameter that strengthens a channel (a channel that
  ignores its rate would leave it flat, which a `>=` check accepts), each channel's hazard
  matches its formula, and the traffic pool is never below the evader's own site.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import pytest

from dispersal.model import (
    DEFAULT_PARAMS,
    Precision,
    Scenario,
    accelerator,
    accelerators,
    estimate,
    plan,
    regime,
)
from dispersal.model.analyses.countermeasures import Convention, evaluate_bundle, parse_bundle, site_bandwidth
from dispersal.model.analyses.detection import (
    DetectionParams,
    RunFootprint,
    channel_hazards,
    default_detection_params,
    detect,
    parameter_names,
    traffic_pool,
)
from dispersal.model.search.candidates import Constraints

# --- links: asymmetric up / down ---------------------------------------------------------------------

UP, DOWN = 100e6, 1e9  # bit/s: a 10x asymmetric line (upload the slow side)
LAT = 0.05  # s one-way
P = 1e9  # parameters
V = P * 16.0  # bits of one BF16 / dense-16-bit payload


def _links(up: float, down: float, **kw: object) -> Scenario:
    """A small run that fits one node, with no straggler stretch (threshold: f(n) = 1)."""
    base: dict[str, object] = {
        "params": P,
        "precision": "bf16",
        "bandwidth_up_bits_per_s": up,
        "bandwidth_down_bits_per_s": down,
        "latency_s": LAT,
        "straggler": "threshold",
        "regime": "treaty",
    }
    base.update(kw)
    return Scenario(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["default", "paper"])
@pytest.mark.parametrize(("up", "down"), [(UP, DOWN), (DOWN, UP)])
def test_ddp_ring_all_reduce_runs_at_the_slower_direction(mode: str, up: float, down: float) -> None:
    # Ring all-reduce of dense 16-bit gradients among N = 5: 2 V (N-1)/N at min(up, down) plus
    # 2 (N-1) latency hops = 2 x 1.6e10 x 0.8 / 1e8 + 8 x 0.05 = 256 + 0.4 s, whichever side is slow.
    e = estimate(_links(up, down, algorithm="ddp", num_nodes=5), mode=mode)
    assert e.algorithm == "ddp"
    assert e.sync_time_s == pytest.approx(256.4, rel=1e-12)
    # Each worker sends (and receives) 2 V (N-1)/N bits = 2.56e10 bits = 3.2e9 bytes per step.
    assert e.traffic.bytes_per_sync == pytest.approx(3.2e9, rel=1e-12)


def test_ddp_step_hides_the_all_reduce_behind_its_overlap_share() -> None:
    # Default mode: T_outer = T_step + max(0, T_ar - f T_step), f = ddp_overlap_fraction.
    e = estimate(_links(UP, DOWN, algorithm="ddp", num_nodes=5), mode="default")
    t_step = e.step_time_s
    want = t_step + 256.4 - DEFAULT_PARAMS.ddp_overlap_fraction * t_step
    assert e.outer_step_time_s == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("up", "down"), [(UP, DOWN), (DOWN, UP)])
def test_diloco_ring_all_reduce_runs_at_the_slower_direction(up: float, down: float) -> None:
    # 2 (N-1) hops of V/N at min(up, down) plus a latency each: 8 x (1.6e10 / 5 / 1e8 + 0.05) = 256.4 s.
    s = _links(up, down, algorithm="diloco", num_nodes=5, codec="bf16", aggregation="ring")
    e = estimate(s, mode="default")
    assert e.sync_time_s == pytest.approx(256.4, rel=1e-12)
    assert e.traffic.sync_upload_bytes == pytest.approx(2 * V * 4 / 5 / 8, rel=1e-12)
    assert e.traffic.sync_download_bytes == pytest.approx(2 * V * 4 / 5 / 8, rel=1e-12)


@pytest.mark.parametrize(
    ("up", "down", "want_s"),
    [
        # upload V at `up`, download the 3 other payloads at `down`, two one-way latencies
        (UP, DOWN, 1.6e10 / UP + 3 * 1.6e10 / DOWN + 2 * LAT),  # 160 + 48 + 0.1
        (DOWN, UP, 1.6e10 / DOWN + 3 * 1.6e10 / UP + 2 * LAT),  # 16 + 480 + 0.1
    ],
)
def test_all_gather_charges_each_direction_on_its_own_link(up: float, down: float, want_s: float) -> None:
    s = _links(up, down, algorithm="diloco", num_nodes=4, codec="bf16", aggregation="all_gather")
    e = estimate(s, mode="default")
    assert e.sync_time_s == pytest.approx(want_s, rel=1e-12)
    assert e.traffic.sync_upload_bytes == pytest.approx(V / 8, rel=1e-12)
    assert e.traffic.sync_download_bytes == pytest.approx(3 * V / 8, rel=1e-12)


def test_relay_and_paper_relay_with_asymmetric_links() -> None:
    # Relay: V/up + V/down + 2 latencies = 160 + 16 + 0.1 s.
    relay = estimate(_links(UP, DOWN, algorithm="diloco", num_nodes=4, codec="bf16", aggregation="relay"))
    assert relay.sync_time_s == pytest.approx(176.1, rel=1e-12)
    # Paper mode (Rahman 2026 sec. 3): V/up + V/down + one latency, V = P x 16 bits / C_r (C_r = 10).
    paper = estimate(_links(UP, DOWN, algorithm="diloco", num_nodes=4, compression_ratio=10), mode="paper")
    assert paper.sync_time_s == pytest.approx(1.6e9 / UP + 1.6e9 / DOWN + LAT, rel=1e-12)


def test_hierarchical_blocking_cycle_by_hand() -> None:
    # Paper mode, no overlap (the regional sync is not hidden, so its latency shows), 4 groups of 8.
    # Regional (Rahman 2026 sec. 3): 2 P b / C_r / BW_reg + latency = 2 x 30e9 x 1.6 / 1e9 + 0.005 s.
    s = _links(
        UP,
        UP,
        algorithm="hierarchical",
        num_nodes=32,
        group_size=8,
        params=30e9,
        compression_ratio=10,
        regional_bandwidth_bits_per_s=1e9,
        regional_latency_s=0.005,
        overlap_communication=False,
        latency_s=0.1,
    )
    e = estimate(s, mode="paper")
    assert (e.algorithm, e.groups) == ("hierarchical", 4)
    t_reg = 2 * 30e9 * 1.6 / 1e9 + 0.005
    t_glob = 2 * 30e9 * 1.6 / UP + 0.1  # leaders: V/up + V/down + latency, 100 Mbps both ways
    assert e.sync_time_s == pytest.approx(t_glob, rel=1e-12)
    h_in = math.ceil(t_reg / e.step_time_s)  # inner steps cover one regional sync
    assert e.inner_steps == h_in
    t_rc = h_in * e.step_time_s + t_reg  # one regional round, blocking
    h_reg = math.ceil(t_glob / t_rc)  # regional rounds per global sync
    assert e.outer_step_time_s == pytest.approx(h_reg * t_rc + t_glob, rel=1e-12)


@pytest.mark.parametrize(
    ("mode", "bits_per_value", "shard"), [("default", 16.0, True), ("paper", 1.0, False)]
)
def test_pipeline_groups_sync_their_stage_shard_in_default_mode(
    mode: str, bits_per_value: float, shard: bool
) -> None:
    # A 40B model on 1-chip A100 nodes needs several pipeline stages. Default mode: each stage syncs
    # its shard P / S (BF16 codec, 16 bits); paper mode (Rahman 2026) syncs the whole model at
    # 16 bits / C_r = 1 bit per value.
    s = _links(
        UP,
        UP,
        algorithm="pp_diloco",
        hardware="a100_80gb",
        chips_per_node=1,
        num_nodes=400,
        params=40 * P,
        codec="bf16",
        aggregation="ring",
        compression_ratio=16,
    )
    e = estimate(s, mode=mode)
    assert e.algorithm == "pp_diloco" and e.pipeline_stages > 1
    values = 40 * P / e.pipeline_stages if shard else 40 * P
    assert e.payload_bytes_per_sync == pytest.approx(values * bits_per_value / 8, rel=1e-12)


# --- the regime's memory (HBM) rule ------------------------------------------------------------------


def _chips_allowed(hw: str, regime_name: str) -> int:
    """Catalogue arithmetic: covered strictly above each cap, so floor(cap / per-chip) chips pass."""
    acc, reg = accelerator(hw), regime(regime_name)
    limits = [math.floor(reg.cluster_flop_per_s / acc.dense_fp16_flop_per_s + 1e-9)]
    if reg.cluster_memory_bytes > 0 and not acc.memory_kind.upper().startswith("GDDR"):
        limits.append(math.floor(reg.cluster_memory_bytes / acc.hbm_bytes + 1e-9))
    return max(1, min(limits))


@pytest.mark.parametrize(
    ("hw", "treaty", "treaty_hbm"),
    [
        ("h200", 16, 9),  # 15,840 / 990 TFLOP/s = 16; 1,280 / 141 GB = 9.08
        ("b200", 7, 6),  # 15,840 / 2,250 = 7.04; 1,280 / 192 = 6.67
        ("h100_sxm", 16, 16),  # 1,280 / 80 = 16 exactly: not above the cap
        ("a100_40gb", 50, 32),  # 15,840 / 312 = 50.8; 1,280 / 40 = 32
        ("rtx_4090", 95, 95),  # GDDR6X is not counted by an HBM rule
    ],
)
def test_memory_rule_caps_chips_per_node(hw: str, treaty: int, treaty_hbm: int) -> None:
    assert (
        Scenario(hardware=hw, precision=Precision.BF16, regime="treaty").resolved_chips_per_node() == treaty
    )
    assert (
        Scenario(hardware=hw, precision=Precision.BF16, regime="treaty_hbm").resolved_chips_per_node()
        == treaty_hbm
    )
    assert _chips_allowed(hw, "treaty_hbm") == treaty_hbm


def test_memory_rule_cap_from_catalogue_for_every_accelerator() -> None:
    for hw in accelerators():
        for reg in ("treaty", "treaty_hbm", "treaty_hbm_4h100e"):
            s = Scenario(hardware=hw, precision=Precision.BF16, regime=reg)
            assert s.resolved_chips_per_node() == _chips_allowed(hw, reg), (hw, reg)


def test_estimate_flags_a_node_over_the_memory_rule() -> None:
    over = estimate(_links(UP, UP, hardware="h200", chips_per_node=10, regime="treaty_hbm", num_nodes=2))
    assert not over.feasible
    assert any("memory rule" in r for r in over.reasons), over.reasons
    at_cap = estimate(_links(UP, UP, hardware="h200", chips_per_node=9, regime="treaty_hbm", num_nodes=2))
    assert not any("memory rule" in r for r in at_cap.reasons), at_cap.reasons
    # The same 10-chip node is fine without the memory rule, and GDDR is never counted.
    no_rule = estimate(_links(UP, UP, hardware="h200", chips_per_node=10, regime="treaty", num_nodes=2))
    assert not any("memory rule" in r for r in no_rule.reasons), no_rule.reasons
    gddr = estimate(_links(UP, UP, hardware="rtx_4090", chips_per_node=95, regime="treaty_hbm", num_nodes=2))
    assert not any("memory rule" in r for r in gddr.reasons), gddr.reasons


def test_kernel_feasibility_includes_the_memory_rule() -> None:
    # Searches (planner, solve, sweeps) read the kernel's flags, not Estimate.reasons.
    from dispersal.model.inputs.scenario import kernel_inputs
    from dispersal.model.kernel.kernel import evaluate

    for chips, under in ((10, 0.0), (9, 1.0)):
        s = _links(UP, UP, hardware="h200", chips_per_node=chips, regime="treaty_hbm", num_nodes=2)
        r = evaluate(kernel_inputs(s, "default"), DEFAULT_PARAMS)
        assert float(r["under_memory_cap"]) == under
        assert float(r["under_cap"]) == under
        assert float(r["feasible"]) == under


def test_planner_keeps_every_node_under_the_memory_rule() -> None:
    c = Constraints(hardware=("h200", "b200"))
    p = plan(1e24, regime_name="treaty_hbm", constraints=c, mode="default", search="bisect")
    assert p.feasible and p.per_hardware
    cap = regime("treaty_hbm").cluster_memory_bytes
    for o in p.per_hardware:
        assert o.chips_per_node == _chips_allowed(o.hardware, "treaty_hbm"), o.label
        assert o.chips_per_node * accelerator(o.hardware).hbm_bytes <= cap
        assert estimate(o.scenario, mode="default").feasible
    # Every node type the planner tried (including those that failed) used the capped node.
    for label in p.failures:
        n, hw = label.split("x ")[0], label.split("x ")[1].split()[0]
        assert int(n) == _chips_allowed(hw, "treaty_hbm"), label


def test_hbm_countermeasure_replans_with_the_memory_capped_node() -> None:
    # (The no-lever plan's 16-chip node is checked above; planning it here would double the time.)
    conv = Convention(hardware=("h200",), search="bisect")
    hbm = evaluate_bundle(1e24, "hbm", convention=conv, baseline_cost_usd=1.0)
    assert hbm.feasible
    assert hbm.regime == "treaty_hbm"
    assert hbm.chips_per_node == _chips_allowed("h200", "treaty_hbm") == 9
    assert hbm.collateral.installations_covered > 0


@pytest.mark.parametrize(
    ("lever", "base_mbps", "want_mbps", "lines"),
    [
        ("bandwidth_cap", 100.0, 100.0, 10),  # ten bonded 10 Mbps lines
        ("bandwidth_cap", 300.0, 100.0, 10),  # at most 10 lines per site (levers.toml)
        ("bandwidth_cap", 25.0, 25.0, 3),  # ceil(25 / 10) lines, capped at the need
        ("bandwidth_cap_site", 100.0, 10.0, 1),  # one enforced 10 Mbps per site
    ],
)
def test_bandwidth_cap_bonds_at_most_the_allowed_lines(
    lever: str, base_mbps: float, want_mbps: float, lines: int
) -> None:
    bw, n, usd = site_bandwidth(parse_bundle(lever), Convention(bandwidth_bits_per_s=base_mbps * 1e6))
    assert bw == pytest.approx(want_mbps * 1e6, rel=1e-12)
    assert n == lines
    assert usd == pytest.approx((lines - 1) * 60.0, rel=1e-12)  # $60 per extra line per month


# --- detection ----------------------------------------------------------------------------------------

FP = RunFootprint(
    nodes=10, chips_per_node=8, hardware="h100_sxm", days=100.0, spend_usd=2e6, mean_mbps_per_node=20.0
)
BASE = default_detection_params().replace(
    people_per_site=4.0,
    central_staff=20.0,
    informed_fraction_site=0.25,
    whistle_p_per_person_year=0.01,
    whistle_reward_multiplier=2.0,
    registry_tracked_fraction=0.5,
    registry_chips_per_shipment=8.0,
    registry_p_per_shipment_year=0.1,
    traffic_coverage=0.5,
    traffic_investigations_per_year=100.0,
    traffic_p_confirm=0.4,
    traffic_similar_sites_at_ref=1e4,
    traffic_ref_mbps=10.0,
    traffic_pool_exponent=1.0,
    traffic_disguised=0.5,
    traffic_undisguised_pool_factor=0.1,
    inspections_per_site_year=0.5,
    inspection_p_find=0.2,
    power_pue=1.25,
    power_ref_kw=14.0,
    power_p_per_site_year_at_ref=0.01,
    power_exponent=2.0,
    finance_p_per_musd_year=0.001,
)


def test_each_channel_hazard_by_hand() -> None:
    def r(p: float) -> float:  # hazard per year of a yearly probability
        return -math.log1p(-p)

    site_kw = 8 * accelerator("h100_sxm").tdp_w * 1.25 / 1000.0  # 7 kW for 700 W chips
    pool = 1e4 * (10.0 / 20.0) * (0.5 + 0.5 * 0.1)  # 2,750 look-alike sites
    per_year = {
        "whistleblower": r(0.01) * 2.0 * (20.0 + 10 * 4.0 * 0.25),  # 30 informed people
        "chip_registry": r(0.1) * (80 * 0.5 / 8.0),  # 5 tracked shipments
        "traffic": 10 * 0.5 * (100.0 / pool) * 0.4,
        "inspections": 10 * 0.5 * 0.2,
        "power": 10 * r(0.01) * (site_kw / 14.0) ** 2,
        "finance": r(0.001) * 2.0,
    }
    got = channel_hazards(FP, BASE)
    assert set(got) == set(per_year)
    for k, v in per_year.items():
        assert got[k] == pytest.approx(v / 365.25, rel=1e-12), k
    total = sum(per_year.values()) / 365.25
    assert detect(FP, BASE).p_detect == pytest.approx(1.0 - math.exp(-total * 100.0), rel=1e-12)


def test_traffic_pool_is_at_least_the_evader_site() -> None:
    # pool = sites at ref x (ref / mean)^exponent x disguise factor, never below 1 (the site itself).
    assert traffic_pool(20.0, BASE) == pytest.approx(1e4 * 0.5 * 0.55, rel=1e-12)
    assert traffic_pool(1e9, BASE) == 1.0
    # With a pool of 1 the follow-up share min(1, investigations / pool) is 1: hazard = sites x coverage x confirm.
    fast = dataclasses.replace(FP, mean_mbps_per_node=1e9)
    got = channel_hazards(fast, BASE)["traffic"]
    assert got == pytest.approx(10 * 0.5 * 1.0 * 0.4 / 365.25, rel=1e-12)


# (parameter, three increasing values, +1 if P(detect) must rise strictly along them, -1 if fall)
PARAM_DIRECTIONS: dict[str, tuple[tuple[float, float, float], int]] = {
    "people_per_site": ((1.0, 4.0, 20.0), +1),
    "central_staff": ((0.0, 20.0, 200.0), +1),
    "informed_fraction_site": ((0.0, 0.25, 1.0), +1),
    "whistle_p_per_person_year": ((0.0, 0.01, 0.2), +1),
    "whistle_reward_multiplier": ((0.5, 2.0, 10.0), +1),
    "registry_tracked_fraction": ((0.0, 0.5, 1.0), +1),
    "registry_chips_per_shipment": ((1.0, 8.0, 64.0), -1),
    "registry_p_per_shipment_year": ((0.0, 0.1, 0.5), +1),
    "traffic_coverage": ((0.0, 0.5, 1.0), +1),
    "traffic_investigations_per_year": ((10.0, 100.0, 1000.0), +1),
    "traffic_p_confirm": ((0.0, 0.4, 0.9), +1),
    "traffic_similar_sites_at_ref": ((1e4, 1e5, 1e6), -1),
    "traffic_ref_mbps": ((10.0, 40.0, 100.0), -1),
    "traffic_pool_exponent": ((0.5, 1.0, 2.0), +1),  # mean 20 Mbps > ref 10 Mbps: the pool shrinks
    "traffic_disguised": ((0.0, 0.5, 1.0), -1),
    "traffic_undisguised_pool_factor": ((0.01, 0.1, 1.0), -1),
    "inspections_per_site_year": ((0.0, 0.5, 4.0), +1),
    "inspection_p_find": ((0.0, 0.2, 0.9), +1),
    "power_pue": ((1.0, 1.25, 2.0), +1),
    "power_ref_kw": ((5.0, 14.0, 50.0), -1),
    "power_p_per_site_year_at_ref": ((0.0, 0.01, 0.2), +1),
    "power_exponent": ((0.5, 1.0, 2.0), -1),  # site 7 kW < reference 14 kW: a larger exponent shrinks it
    "finance_p_per_musd_year": ((0.0, 0.001, 0.05), +1),
}


def test_every_detection_parameter_has_a_direction() -> None:
    assert set(PARAM_DIRECTIONS) == set(parameter_names())


@pytest.mark.parametrize("name", sorted(PARAM_DIRECTIONS))
def test_p_detect_moves_strictly_with_each_parameter(name: str) -> None:
    values, sign = PARAM_DIRECTIONS[name]
    ps = [detect(FP, BASE.replace(**{name: v})).p_detect for v in values]
    assert all(0.0 < p < 1.0 for p in ps), ps  # not saturated: a change must show
    steps = [sign * (b - a) for a, b in itertools.pairwise(ps)]
    assert all(s > 0 for s in steps), f"{name}: P(detect) {ps} along {values} is not strictly monotone"


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("nodes", (2, 10, 50)),
        ("chips_per_node", (1, 8, 16)),
        ("days", (10.0, 100.0, 500.0)),
        ("spend_usd", (0.0, 2e6, 1e8)),
        ("mean_mbps_per_node", (5.0, 20.0, 80.0)),
    ],
)
def test_p_detect_grows_strictly_with_the_run_footprint(field: str, values: tuple[float, ...]) -> None:
    changes: list[dict[str, Any]] = [{field: v} for v in values]
    ps = [detect(dataclasses.replace(FP, **c), BASE).p_detect for c in changes]
    assert all(0.0 < p < 1.0 for p in ps), ps
    assert ps[0] < ps[1] < ps[2], f"{field}: {ps}"


def test_detection_params_type_is_what_the_guards_use() -> None:
    # The tables above name every field; a renamed field shows here rather than as a silent skip.
    assert isinstance(BASE, DetectionParams)
