"""Every formula of the analytic model against values worked by hand (spec/model.md sections 1-10).

Expected values are written as the arithmetic of the spec, independently of `kernel.py`; pure
arithmetic is compared at rel 1e-9, published 4-digit figures at rel 1e-3.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from dispersal.model.inputs.codes import STRAGGLER_CODES, Straggler
from dispersal.model.inputs.params import DEFAULT_PARAMS as P0
from dispersal.model.inputs.scenario import Algorithm, Precision, Pricing, Scenario, as_arrays, kernel_inputs
from dispersal.model.inputs.timelimit import TREATY, UNREGULATED, max_run_length_s
from dispersal.model.inputs.units import SECONDS_PER_DAY, SECONDS_PER_YEAR
from dispersal.model.kernel import chinchilla
from dispersal.model.kernel.efficiency import eta_act, eta_comp, eta_h, straggler_factor
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.run.estimate import Estimate, estimate

EXACT = 1e-9
PUB = 1e-3

# Paper threat model: 16 x H100 SXM at FP8, MFU 0.40, B = 131,072, 100 Mbps / 100 ms, 740 days.
H100_FP8_NODE = 16 * 1980e12
MFU = 0.40
B = 131072.0
BW = 100e6
LAT = 0.100
T740 = 740 * 86400.0


def paper(**kw: Any) -> Estimate:
    return estimate(Scenario(**kw), mode="paper")


def kernel(s: Scenario, mode: str = "paper", **override: Any) -> dict[str, float]:
    x = kernel_inputs(s, mode)
    x.update(override)
    return {k: float(v) for k, v in evaluate(as_arrays(x), P0).items()}


def relay(n: float) -> float:
    return 1.0 + 0.02 * math.log2(n)


# --- 1. compute -------------------------------------------------------------------------------


def test_compute_c_equals_6pd() -> None:
    """Sec. 1: C = 6 P D (dense: P = active = total)."""
    e = paper(num_nodes=2, params=91e9, tokens=1e12)
    assert e.tokens == 1e12
    assert e.c_raw_flop == pytest.approx(6 * 91e9 * 1e12, rel=EXACT)


def test_compute_moe_uses_active_params() -> None:
    """Sec. 1: MoE compute uses active parameters; the sync payload uses total parameters."""
    e = paper(num_nodes=2, params=91e9, active_params=13e9, tokens=1e12)
    assert e.c_raw_flop == pytest.approx(6 * 13e9 * 1e12, rel=EXACT)
    assert e.payload_bytes_per_sync == pytest.approx(91e9 * 8 / 150 / 8, rel=EXACT)
    assert e.step_compute_time_s == pytest.approx(6 * 13e9 * B / (H100_FP8_NODE * MFU), rel=EXACT)


def test_compute_step_time() -> None:
    """Sec. 1: T_comp = 6 P B / F_eff, F_eff = F_peak x MFU (16 x 1,980 TFLOP/s x 0.40)."""
    e = paper(num_nodes=2, params=91e9)
    assert e.step_compute_time_s == pytest.approx(6 * 91e9 * 131072 / (16 * 1980e12 * 0.40), rel=EXACT)
    # BF16 on the same node uses the FP16 peak.
    e16 = paper(num_nodes=2, params=91e9, precision="bf16")
    assert e16.step_compute_time_s == pytest.approx(6 * 91e9 * 131072 / (16 * 990e12 * 0.40), rel=EXACT)


def test_moe_expert_parallel_latency() -> None:
    """Sec. 1: T_EP = 2 x latency x L_MoE per step, added to the step time."""
    e = paper(num_nodes=2, params=91e9, active_params=13e9, moe_layers=32)
    t_comp = 6 * 13e9 * B / (H100_FP8_NODE * MFU)
    assert e.step_time_s == pytest.approx(t_comp + 2 * 0.1 * 32, rel=EXACT)


# --- 2. memory --------------------------------------------------------------------------------


def test_memory_pmax_a100_node() -> None:
    """Sec. 2: P_max = HBM / beta: 50 x A100 80GB = 4,000 GB -> 250B at 16 B/param."""
    s = Scenario(
        hardware="a100_80gb",
        precision=Precision.BF16,
        num_nodes=2,
        params=250e9,
        algorithm=Algorithm.STREAMING,
    )
    assert s.resolved_chips_per_node() == 50
    e = estimate(s, mode="paper")
    assert e.node_memory_bytes == pytest.approx(4000e9, rel=EXACT)
    assert e.memory_required_bytes_per_node == pytest.approx(250e9 * 16, rel=EXACT)
    assert e.feasible and e.algorithm == "diloco"
    over = estimate(s.replace(params=250.001e9), mode="paper")
    assert not over.feasible
    assert any("does not fit" in r for r in over.reasons)


def test_memory_bytes_per_param_by_precision() -> None:
    """Sec. 2: ZeRO state bytes per parameter: BF16/FP16 16 B, FP8 14 B (paper mode, no extras)."""
    assert paper(num_nodes=2, params=91e9).memory_required_bytes_per_node == pytest.approx(
        91e9 * 14, rel=EXACT
    )
    bf = paper(num_nodes=2, params=60e9, precision="bf16")
    assert bf.memory_required_bytes_per_node == pytest.approx(60e9 * 16, rel=EXACT)


def test_memory_pipeline_stages() -> None:
    """Sec. 2: S = ceil(P beta / HBM); G = floor(N / S). 600B x 16 B / 4,000 GB = 2.4 -> 3 stages."""
    e = paper(hardware="a100_80gb", precision="bf16", num_nodes=20, params=600e9)
    assert e.algorithm == "pp_diloco"
    assert e.pipeline_stages == 3
    assert e.groups == 6  # floor(20 / 3)
    assert e.replicas == 6
    assert e.memory_required_bytes_per_node == pytest.approx(600e9 * 16 / 3, rel=EXACT)


def test_memory_pipeline_needs_two_groups_for_diloco() -> None:
    """Sec. 2: N < S leaves no complete pipeline: infeasible with a reason."""
    e = paper(hardware="a100_80gb", precision="bf16", num_nodes=2, params=600e9)
    assert not e.feasible
    assert any("cannot hold one pipeline" in r for r in e.reasons)


# --- 3. communication and step time -----------------------------------------------------------


def test_payload() -> None:
    """Sec. 3: V = P b / C_r bits; b = 8 for FP8, 16 for BF16; C_r = 150."""
    assert paper(num_nodes=2, params=91e9).payload_bytes_per_sync == pytest.approx(
        91e9 * 8 / 150 / 8, rel=EXACT
    )
    e = paper(num_nodes=2, params=30e9, precision="bf16", compression_ratio=10)
    assert e.payload_bytes_per_sync == pytest.approx(30e9 * 16 / 10 / 8, rel=EXACT)


def _row1_numbers() -> tuple[float, float, float, int]:
    v = 91e9 * 8 / 150
    t_sync = (v / BW + v / BW + LAT) * relay(2)
    t_comp = 6 * 91e9 * B / (H100_FP8_NODE * MFU)
    h = math.ceil(t_sync / t_comp)
    return v, t_sync, t_comp, h


def test_flat_sync_and_h_min() -> None:
    """Sec. 3: T_sync = (V/up + V/down + lat) f(N); H_min = ceil(T_sync / T_comp) = 18 for Table 1 row 1."""
    _, t_sync, _, h = _row1_numbers()
    e = paper(num_nodes=2, params=91e9)
    assert e.sync_time_s == pytest.approx(t_sync, rel=EXACT)
    assert h == 18
    assert e.inner_steps == 18


def test_flat_sync_asymmetric_link() -> None:
    """Sec. 3: up and down enter separately: (V/up + V/down + lat) f(N)."""
    v = 91e9 * 8 / 150
    e = paper(
        num_nodes=8,
        params=91e9,
        bandwidth_up_bits_per_s=50e6,
        bandwidth_down_bits_per_s=400e6,
        latency_s=0.03,
    )
    assert e.sync_time_s == pytest.approx((v / 50e6 + v / 400e6 + 0.03) * relay(8), rel=EXACT)


def test_outer_step_streaming_vs_not() -> None:
    """Sec. 3: streaming T_outer = max(H T_comp, T_sync); without overlap H T_comp + T_sync."""
    _, t_sync, t_comp, h = _row1_numbers()
    stream = paper(num_nodes=2, params=91e9, algorithm="streaming")
    plain = paper(num_nodes=2, params=91e9, algorithm="diloco")
    assert stream.outer_step_time_s == pytest.approx(max(h * t_comp, t_sync), rel=EXACT)
    assert plain.outer_step_time_s == pytest.approx(h * t_comp + t_sync, rel=EXACT)
    # A fixed H below H_min is communication-bound when streaming.
    e = paper(num_nodes=2, params=91e9, algorithm="streaming", inner_steps=5)
    assert e.outer_step_time_s == pytest.approx(t_sync, rel=EXACT)
    assert e.inner_steps == 5


def test_tokens_in_time_budget() -> None:
    """Sec. 3: D = (T / T_outer) H B N; C_thr = 6 P D; outer steps continuous."""
    _, t_sync, t_comp, h = _row1_numbers()
    for algo, cyc in (("streaming", max(h * t_comp, t_sync)), ("diloco", h * t_comp + t_sync)):
        e = paper(num_nodes=2, params=91e9, algorithm=algo)
        d = T740 / cyc * h * B * 2
        assert e.tokens == pytest.approx(d, rel=EXACT)
        assert e.num_outer_steps == pytest.approx(T740 / cyc, rel=EXACT)
        assert e.c_raw_flop == pytest.approx(6 * 91e9 * d, rel=EXACT)
        assert e.run_time_s == pytest.approx(T740, rel=EXACT)


def test_fixed_tokens_gives_run_time() -> None:
    """Sec. 3 inverted: for a fixed D, run time = D / (H B N / T_outer)."""
    _, t_sync, t_comp, h = _row1_numbers()
    e = paper(num_nodes=2, params=91e9, tokens=1e12)
    assert e.run_time_s == pytest.approx(1e12 / (h * B * 2 / max(h * t_comp, t_sync)), rel=EXACT)


def test_single_node_has_no_sync() -> None:
    """Sec. 3: N = 1 means no sync (H = 1, all penalties 1)."""
    e = paper(num_nodes=1, params=10e9)
    assert e.sync_time_s == 0.0
    assert e.inner_steps == 1
    eff = e.efficiency
    assert (eff.eta_h, eff.eta_comp, eff.eta_act, eff.eta_rep, eff.eta) == (1.0, 1.0, 1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (Straggler.RELAY, 1 + 0.02 * 10),
        (Straggler.SYNCHRONOUS, 1 + 0.05 * 10),
        (Straggler.THRESHOLD, 1.0),
        (Straggler.BACKUP, 1 + 0.3 * 0.05 * 10),
    ],
)
def test_straggler_factors(kind: Straggler, expected: float) -> None:
    """Sec. 3: relay 1 + 0.02 log2 n, synchronous 1 + 0.05 log2 n, threshold 1, backup 1 + 0.3 (f - 1)."""
    code = STRAGGLER_CODES[kind]
    assert float(straggler_factor(1024, code, P0)) == pytest.approx(expected, rel=EXACT)
    assert float(straggler_factor(1, code, P0)) == 1.0


def test_straggler_setting_reaches_sync_time() -> None:
    """Sec. 3: the chosen straggler model multiplies the flat sync time."""
    v = 91e9 * 8 / 150
    e = paper(num_nodes=16, params=91e9, straggler="synchronous")
    assert e.sync_time_s == pytest.approx((2 * v / BW + LAT) * (1 + 0.05 * 4), rel=EXACT)


def test_hierarchical_h_eff() -> None:
    """Sec. 3: hierarchical H_in = ceil(T_reg/T_comp), H_reg = ceil(T_glob/T_rc), H_eff = H_in sqrt(H_reg)."""
    s = Scenario(
        hardware="h100_sxm",
        precision=Precision.FP8,
        num_nodes=32,
        params=91e9,
        algorithm=Algorithm.HIERARCHICAL,
        group_size=8,
        regional_bandwidth_bits_per_s=1e9,
        regional_latency_s=0.01,
    )
    e = estimate(s, mode="paper")
    v = 91e9 * 8 / 150
    t_comp = 6 * 91e9 * B / (H100_FP8_NODE * MFU)
    t_reg = (2 * v / 1e9 + 0.01) * relay(8)
    h_in = max(1, math.ceil(t_reg / t_comp))
    t_rc = max(h_in * t_comp, t_reg)
    g = 32 // 8
    t_glob = (2 * v / BW + LAT) * relay(g)
    h_reg = max(1, math.ceil(t_glob / t_rc))
    assert h_reg > 1  # the test exercises the sqrt
    assert e.algorithm == "hierarchical"
    assert e.groups == g
    assert e.inner_steps == h_in
    assert e.sync_time_s == pytest.approx(t_glob, rel=EXACT)
    assert e.inner_steps_effective == pytest.approx(h_in * math.sqrt(h_reg), rel=EXACT)
    assert e.outer_step_time_s == pytest.approx(max(h_reg * t_rc, t_glob), rel=EXACT)
    assert e.tokens == pytest.approx(T740 / e.outer_step_time_s * h_in * h_reg * B * 32, rel=EXACT)
    assert e.efficiency.eta_h == pytest.approx(float(eta_h(91e9, h_in * math.sqrt(h_reg), P0)), rel=EXACT)
    assert e.replicas == 32  # replica penalty with M = N


def test_hierarchical_falls_back_to_flat_below_two_groups() -> None:
    """Sec. 3: G = floor(N / n_g) < 2 -> flat."""
    e = paper(num_nodes=12, params=91e9, algorithm="hierarchical", group_size=8)
    assert e.algorithm == "diloco"


def test_pipeline_step_time_table1_row3() -> None:
    """Sec. 3 + 10: T_PP = (M_mb + S - 1)[t_c + (t_m + lat) f(S)], A = B h bytes 8 / C_act, h = 0.03 sqrt(P)."""
    e = paper(num_nodes=4706, params=180e9, algorithm="pp_diloco")
    s_, m_mb = 2, 8
    h = 0.03 * math.sqrt(180e9)
    a_bits = B * h * 1 * 8 / 4  # FP8 activations: 1 byte per value, C_act = 4
    t_c = 6 * 180e9 * B / (H100_FP8_NODE * MFU * s_ * m_mb)
    t_m = (2 * a_bits / m_mb) / BW  # paper mode: PP link = min(up, down), same latency
    t_pp = (m_mb + s_ - 1) * (t_c + (t_m + LAT) * relay(s_))
    assert e.pipeline_stages == 2
    assert e.groups == 2353
    assert e.step_time_s == pytest.approx(t_pp, rel=EXACT)
    # Paper mode: the PP-group sync payload is the whole model over one node's link.
    v = 180e9 * 8 / 150
    t_sync = (2 * v / BW + LAT) * relay(2353)
    assert e.sync_time_s == pytest.approx(t_sync, rel=EXACT)
    h_pp = max(1, math.ceil(t_sync / t_pp))
    assert h_pp == 3 == e.inner_steps
    assert e.tokens == pytest.approx(T740 / max(h_pp * t_pp, t_sync) * h_pp * B * 2353, rel=EXACT)


def test_pipeline_shard_sync_in_default_mode() -> None:
    """Sec. 10: in default mode each PP stage syncs only its shard P/S, at 32 / C_r bits per parameter
    (published ratios are relative to FP32), whatever the training precision."""
    s = Scenario(num_nodes=4706, params=180e9, algorithm=Algorithm.PP_DILOCO)
    pe, de = estimate(s, mode="paper"), estimate(s, mode="default")
    assert pe.payload_bytes_per_sync == pytest.approx(180e9 * 8 / 150 / 8, rel=EXACT)
    assert de.payload_bytes_per_sync == pytest.approx(180e9 * 32 / 150 / 8 / de.pipeline_stages, rel=EXACT)


def test_ddp_ring_all_reduce() -> None:
    """Sec. 3: DDP all-reduce every step: (2 V (1 - 1/N) / BW + 2 (N - 1) lat) f(N), V uncompressed."""
    e = paper(num_nodes=4, params=10e9, algorithm="ddp")
    v = 10e9 * 8
    t_ar = (2 * v * (1 - 1 / 4) / BW + 2 * 3 * LAT) * relay(4)
    assert e.sync_time_s == pytest.approx(t_ar, rel=EXACT)
    t_comp = 6 * 10e9 * B / (H100_FP8_NODE * MFU)
    assert e.outer_step_time_s == pytest.approx(max(t_comp, t_ar), rel=EXACT)
    assert e.efficiency.eta == 1.0


# --- 4. efficiency factors ----------------------------------------------------------------------


def test_eta_h_alpha() -> None:
    """Sec. 4: alpha(P) = 0.08 / (1 + log10(P/1e9)/5): alpha(91B) = 0.0575, alpha(250B) = 0.0541."""
    for p, published in ((91e9, 0.0575), (250e9, 0.0541)):
        alpha = 1 - float(eta_h(p, 10.0, P0))  # log10 10 = 1
        assert alpha == pytest.approx(0.08 / (1 + math.log10(p / 1e9) / 5), rel=EXACT)
        assert alpha == pytest.approx(published, rel=PUB)


def test_eta_h_value_and_floor() -> None:
    """Sec. 4: eta_H = max(0.4, 1 - alpha(P) log10 H); H = 1 gives 1."""
    alpha = 0.08 / (1 + math.log10(91) / 5)
    assert float(eta_h(91e9, 18, P0)) == pytest.approx(1 - alpha * math.log10(18), rel=EXACT)
    assert float(eta_h(91e9, 1, P0)) == 1.0
    assert float(eta_h(1e9, 1e10, P0)) == pytest.approx(0.4, rel=EXACT)  # 1 - 0.08 x 10 = 0.2 -> floor


@pytest.mark.parametrize(
    ("cr", "ef", "q", "expected"),
    [
        (150, True, 1, 0.99),  # default
        (150, False, 2, 0.85),
        (1, True, 2, 1.0),
        (500, True, 2, 0.80),
        (1000, True, 2, 0.80),  # held above 500
        (1e6, False, 1, 0.95),
        (40, True, 2, (0.97 + 0.93) / 2),  # log10(40/16) / log10(100/16) = 1/2 exactly
        (40, False, 1, (0.99 + 0.98) / 2),
        (2, True, 2, (1.00 + 0.99) / 2),  # halfway between 1 and 4 in log10
    ],
)
def test_eta_comp_table(cr: float, ef: bool, q: int, expected: float) -> None:
    """Sec. 4: eta_comp table, linear in log10 C_r, held above 500."""
    assert float(eta_comp(cr, ef, q, P0)) == pytest.approx(expected, rel=EXACT)


def test_eta_comp_of_mixed_columns_is_each_elements_own() -> None:
    """A call whose elements read different table columns (error feedback and quality per element,
    broadcast against the ratios) gives each element the value of its own one-element call."""
    cr = np.asarray([1.0, 2.0, 40.0, 150.0, 500.0, 1e6])
    ef = np.asarray([[True], [False]])
    q = np.asarray([0, 1, 2, 2, 1, 0])
    got = eta_comp(cr, ef, q, P0)
    assert got.shape == (2, 6)
    for i in range(2):
        for j in range(6):
            assert got[i, j] == float(eta_comp(cr[j], bool(ef[i, 0]), int(q[j]), P0))
    # a quality code outside 0 / 1 (NaN included) reads the conservative column, as np.select's default
    assert float(eta_comp(40.0, True, np.nan, P0)) == float(eta_comp(40.0, True, 2, P0))


@pytest.mark.parametrize(
    ("c_act", "stages", "q", "expected"),
    [
        (4, 2, 1, 0.995**2),
        (4, 3, 1, 0.995**4),
        (10, 2, 2, 0.90**2),
        (10, 2, 0, 0.995**2),
        (1, 5, 2, 1.0),
        (4, 1, 2, 1.0),  # no pipeline
        (math.sqrt(40), 2, 1, ((0.995 + 0.98) / 2) ** 2),  # geometric midpoint of 4 and 10
    ],
)
def test_eta_act(c_act: float, stages: int, q: int, expected: float) -> None:
    """Sec. 4: eta_act = q(C_act)^(2(S-1)), q log-interpolated."""
    assert float(eta_act(c_act, stages, q, P0)) == pytest.approx(expected, rel=EXACT)


def _c_opt(loss: float) -> float:
    """Compute-optimal compute at a loss, by plain bisection on N along D = 25.6 N (independent check)."""
    lo, hi = math.log(1e3), math.log(1e20)
    for _ in range(200):
        mid = (lo + hi) / 2
        n = math.exp(mid)
        f = 1.8172 + 482.01 * n**-0.3478 + 2085.43 * (25.6 * n) ** -0.3658
        lo, hi = (mid, hi) if f > loss else (lo, mid)
    n = math.exp((lo + hi) / 2)
    return 153.6 * n * n


def _loss(n: float, d: float) -> float:
    return float(1.8172 + 482.01 * n**-0.3478 + 2085.43 * d**-0.3658)


def test_eta_rep_and_chi_row1() -> None:
    """Sec. 4-5: L_rep = M^beta, beta = 1.0923 P^-0.2342 ln H / ln 30; eta_rep = C'(L L_rep) / C'(L); chi = C'(L)/C."""
    e = paper(num_nodes=2, params=91e9)
    beta = 1.0923 * 91e9**-0.2342 * math.log(18) / math.log(30)
    r = kernel(Scenario(num_nodes=2, params=91e9))
    assert r["loss_replica_multiplier"] == pytest.approx(2**beta, rel=EXACT)
    loss = _loss(91e9, e.tokens)
    assert e.loss == pytest.approx(loss, rel=EXACT)
    assert e.efficiency.eta_rep == pytest.approx(_c_opt(loss * 2**beta) / _c_opt(loss), rel=1e-9)
    assert e.efficiency.chi == pytest.approx(_c_opt(loss) / e.c_raw_flop, rel=1e-9)
    eff = e.efficiency
    assert eff.eta == pytest.approx(eff.eta_h * eff.eta_comp * eff.eta_act * eff.eta_rep, rel=EXACT)
    assert e.c_local_flop == pytest.approx(e.c_raw_flop * eff.eta, rel=EXACT)
    assert e.c_quality_flop == pytest.approx(e.c_local_flop * eff.chi, rel=EXACT)


def test_replica_penalty_at_reference_h_is_the_fit() -> None:
    """Sec. 4: at H = 30 the exponent is beta_0(P) = 1.0923 P^-0.2342 exactly (no ln H scaling)."""
    r = kernel(Scenario(num_nodes=8, params=1e9, inner_steps=30))
    assert r["loss_replica_multiplier"] == pytest.approx(8 ** (1.0923 * 1e9**-0.2342), rel=EXACT)


# --- 5. Chinchilla ----------------------------------------------------------------------------


def test_chinchilla_loss() -> None:
    """Sec. 5: L(N, D) = 1.8172 + 482.01 N^-0.3478 + 2085.43 D^-0.3658 (Besiroglu et al. 2024)."""
    got = float(chinchilla.loss(1e9, 20e9, 1.8172, 482.01, 2085.43, 0.3478, 0.3658))
    assert got == pytest.approx(1.8172 + 482.01 * 1e9**-0.3478 + 2085.43 * 20e9**-0.3658, rel=EXACT)


@pytest.mark.parametrize("n", [1e8, 7e10, 1e12])
def test_chinchilla_optimal_compute(n: float) -> None:
    """Sec. 5: D* = 25.6 N, so C = 153.6 N^2 at the compute-optimal loss."""
    loss = _loss(n, 25.6 * n)
    c = float(chinchilla.optimal_compute_for_loss(loss, 1.8172, 482.01, 2085.43, 0.3478, 0.3658, 25.6))
    assert c == pytest.approx(153.6 * n * n, rel=1e-9)
    assert math.isinf(
        float(chinchilla.optimal_compute_for_loss(1.8, 1.8172, 482.01, 2085.43, 0.3478, 0.3658, 25.6))
    )


def test_chi_is_one_at_compute_optimal_tokens() -> None:
    """Sec. 5: chi = min(1, C'/C) = 1 for a run with D = 25.6 P; OT = D / (25.6 P) = 1."""
    e = paper(num_nodes=1, params=10e9, tokens=256e9)
    assert e.overtraining_ratio == pytest.approx(1.0, rel=EXACT)
    assert e.efficiency.chi == pytest.approx(1.0, rel=1e-9)
    over = paper(num_nodes=1, params=10e9, tokens=2560e9)
    assert over.overtraining_ratio == pytest.approx(10.0, rel=EXACT)
    assert over.efficiency.chi == pytest.approx(_c_opt(_loss(10e9, 2560e9)) / (6 * 10e9 * 2560e9), rel=1e-9)


# --- 6. time limit ----------------------------------------------------------------------------


def test_time_limit_treaty_740_days() -> None:
    """Sec. 6: L = 1 / ((g_H + g_S + g_I) ln 10) years; treaty +6%/+50%/+3% -> 2.03 y = 740 days."""
    years = 1 / ((math.log10(1.06) + math.log10(1.5) + math.log10(1.03)) * math.log(10))
    got = max_run_length_s(*TREATY)
    assert got == pytest.approx(years * SECONDS_PER_YEAR, rel=EXACT)
    assert round(got / SECONDS_PER_YEAR, 2) == 2.03
    assert round(got / SECONDS_PER_DAY) == 740


def test_time_limit_unregulated() -> None:
    """Sec. 6: unregulated 1.37x, 3.0x, 3.5x per year -> ~0.375 y."""
    assert max_run_length_s(*UNREGULATED) / SECONDS_PER_YEAR == pytest.approx(0.375, rel=PUB)


# --- 7. cost ----------------------------------------------------------------------------------


def test_cost_paper() -> None:
    """Sec. 7: chips x price x 1.64 x 1.23; no energy in paper mode."""
    e = paper(num_nodes=2, params=91e9)
    assert e.cost.total_usd == pytest.approx(2 * 16 * 25000 * 1.64 * 1.23, rel=EXACT)
    assert e.cost.total_usd == pytest.approx(1_613_760.0, rel=EXACT)
    assert e.cost.energy_usd == 0.0


def test_cost_default_adds_energy() -> None:
    """Sec. 7: default mode adds energy = TDP x PUE x hours x price (700 W, PUE 1.56, $0.083/kWh)."""
    e = estimate(Scenario(num_nodes=2, params=91e9), mode="default")
    kwh = 2 * 16 * 700 * 1.56 * (T740 / 3600) / 1000
    assert e.cost.energy_kwh == pytest.approx(kwh, rel=EXACT)
    assert e.cost.energy_usd == pytest.approx(kwh * 0.083, rel=EXACT)
    assert e.cost.total_usd == pytest.approx(1_613_760.0 + kwh * 0.083, rel=EXACT)


def test_cost_rental_default_mode_only() -> None:
    """Sec. 7: rental = chips x $/chip-hour x hours (default mode); paper mode ignores it."""
    s = Scenario(num_nodes=2, params=91e9, pricing=Pricing.RENTAL)
    e = estimate(s, mode="default")
    assert e.cost.total_usd == pytest.approx(2 * 16 * 2.20 * T740 / 3600, rel=EXACT)
    assert estimate(s, mode="paper").cost.total_usd == pytest.approx(1_613_760.0, rel=EXACT)


# --- 8-9. covered-cluster rule ----------------------------------------------------------------


def test_node_over_the_cap_is_infeasible() -> None:
    """Sec. 9: a node above 16 H100-equivalents (15,840 TFLOP/s FP16) is covered."""
    e = paper(num_nodes=2, params=10e9, chips_per_node=17)
    assert not e.feasible
    assert e.node_h100_equivalents == pytest.approx(17.0, rel=EXACT)
    assert paper(num_nodes=2, params=10e9, chips_per_node=16).feasible


def test_memory_rule() -> None:
    """Sec. 9: the memory rule (> 1,280 GB) caps a 16 x H100 node's single-node model at ~91B (FP8)."""
    s = Scenario(num_nodes=2, params=91e9, regime="treaty_hbm")
    assert s.resolved_chips_per_node() == 16
    max_params = 1280e9 / 14
    assert max_params == pytest.approx(91.4e9, rel=PUB)
    assert estimate(s, mode="paper").feasible
    assert not estimate(s.replace(params=92e9, algorithm="streaming"), mode="paper").feasible


# --- 10. the paper's Table 1 reference rows (100 Mbps / 100 ms, paper mode) ----------------------


def test_table1_row_1e24() -> None:
    """Sec. 10 / Table 1: 1e24: 16 x H100 FP8, N = 2, flat, 91B, H = 18, eta 0.7957, chi 0.9796, $1.6M."""
    e = paper(hardware="h100_sxm", precision="fp8", num_nodes=2, params=91e9)
    assert e.feasible and e.algorithm == "diloco"
    assert e.inner_steps == 18
    eff = e.efficiency
    assert eff.eta == pytest.approx(0.7957, rel=PUB)
    assert eff.chi == pytest.approx(0.9796, rel=PUB)
    assert eff.eta_h == pytest.approx(0.9278, rel=PUB)
    assert eff.eta_comp == pytest.approx(0.99, rel=EXACT)
    assert eff.eta_rep == pytest.approx(0.8663, rel=PUB)
    assert e.tokens == pytest.approx(2.97e12, rel=PUB)
    assert e.cost.total_usd == pytest.approx(1.6e6, rel=0.01)
    assert e.c_local_flop >= 1e24


def test_table1_row_1e25() -> None:
    """Sec. 10 / Table 1: 1e25: 16 x GH200 FP8, N = 34, hierarchical 8 x 4 (= flat), 160B, H 19, eta 0.3698."""
    s = Scenario(
        hardware="gh200",
        precision=Precision.FP8,
        num_nodes=34,
        params=160e9,
        algorithm=Algorithm.HIERARCHICAL,
        group_size=8,
    )
    e = estimate(s, mode="paper")
    flat = estimate(s.replace(algorithm="streaming"), mode="paper")
    assert e.feasible and e.algorithm == "hierarchical" and e.groups == 4
    assert e.inner_steps == 19
    assert e.efficiency.eta == pytest.approx(0.3698, rel=PUB)
    assert e.efficiency.chi == pytest.approx(0.6250, rel=PUB)
    assert e.cost.total_usd == pytest.approx(30.7e6, rel=PUB)
    assert e.cost.total_usd == pytest.approx(34 * 16 * 28000 * 1.64 * 1.23, rel=EXACT)
    assert e.c_local_flop >= 1e25
    # "numbers identical to flat"
    assert e.c_local_flop == pytest.approx(flat.c_local_flop, rel=EXACT)
    assert e.efficiency == flat.efficiency


def test_table1_row_1e26() -> None:
    """Sec. 10 / Table 1: 1e26: 16 x H100 FP8, N = 4,706, PP 2 x 2,353, 180B, H 3, eta 0.3934, chi 0.2123."""
    e = paper(hardware="h100_sxm", precision="fp8", num_nodes=4706, params=180e9)
    assert e.feasible and e.algorithm == "pp_diloco"
    assert (e.pipeline_stages, e.groups, e.inner_steps) == (2, 2353, 3)
    assert e.efficiency.eta == pytest.approx(0.3934, rel=PUB)
    assert e.efficiency.chi == pytest.approx(0.2123, rel=PUB)
    assert e.efficiency.eta_act == pytest.approx(0.995**2, rel=EXACT)
    assert e.cost.total_usd == pytest.approx(3.80e9, rel=PUB)
    assert e.c_local_flop >= 1e26


def test_kernel_vectorises_like_scalar() -> None:
    """The kernel on an array of N equals the scalar estimates (one implementation of each formula)."""
    s = Scenario(num_nodes=2, params=91e9)
    x = kernel_inputs(s, "paper")
    x["num_nodes"] = np.array([2.0, 8.0, 64.0])
    r = evaluate(as_arrays(x), P0)
    for i, n in enumerate((2, 8, 64)):
        assert r["c_local_flop"][i] == pytest.approx(paper(num_nodes=n, params=91e9).c_local_flop, rel=EXACT)


def test_backup_workers_cost_a_tenth_of_the_nodes() -> None:
    """Backup workers (spec sec. 3): f' = 1 + 0.3 (f_sync - 1), and only N / 1.1 nodes do useful work."""
    from dispersal.model.inputs.scenario import Scenario as S

    sync = estimate(
        S(num_nodes=34, params=160e9, hardware="gh200", straggler=Straggler.SYNCHRONOUS, inner_steps=50),
        mode="paper",
    )
    backup = estimate(
        S(num_nodes=34, params=160e9, hardware="gh200", straggler=Straggler.BACKUP, inner_steps=50),
        mode="paper",
    )
    # H fixed and compute-bound in both: tokens differ by exactly the 1/1.1 of useful nodes.
    assert backup.tokens == pytest.approx(sync.tokens / 1.1, rel=1e-12)
