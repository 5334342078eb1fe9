"""The vectorised core of the analytic model: one function, `evaluate`, that computes every figure
of a distributed run for a whole array of configurations at once (spec/model.md sections 1-7).

Both the scalar `estimate()` and the planner call this function, so there is exactly one
implementation of each formula. Inputs are NumPy arrays that broadcast against each other; there is
no Python loop over configurations. Units: seconds, bits per second (links), bytes (memory), FLOP,
FLOP/s, US dollars.

Algorithm codes (``mode``): 0 synchronous data parallel (DDP, the baseline), 1 flat DiLoCo,
2 hierarchical DiLoCo, 3 pipeline-parallel-group DiLoCo. ``streaming`` overlaps communication with
the next inner steps (Streaming DiLoCo, Douillard et al. 2025, arXiv 2501.18512).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.params import ModelParams
from dispersal.model.inputs.units import H100E_FLOP_PER_S
from dispersal.model.kernel import chinchilla, quality
from dispersal.model.kernel.efficiency import (
    STRAGGLER_CODES,
    Straggler,
    eta_act,
    eta_comp,
    eta_h,
    straggler_factor,
)

Arr = npt.NDArray[np.float64]

MODE_DDP, MODE_FLAT, MODE_HIER, MODE_PP, MODE_AUTO = 0, 1, 2, 3, 4
MODE_NAMES = {MODE_DDP: "ddp", MODE_FLAT: "diloco", MODE_HIER: "hierarchical", MODE_PP: "pp_diloco"}

#: Inner-optimizer offload moves bf16 gradients to the host and bf16 weights back every inner step:
#: 2 bytes per parameter each way (ZeRO-Offload, Ren et al. 2021, arXiv 2101.06840, sec. 4).
OFFLOAD_TRANSFER_BYTES_PER_PARAM = 2.0

#: Every input `evaluate` reads, with its unit. Scenario.to_kernel_inputs() produces exactly these.
INPUTS: dict[str, str] = {
    "mode": "algorithm code (0 ddp, 1 flat DiLoCo, 2 hierarchical, 3 PP-group DiLoCo, 4 auto: flat if it fits, else PP)",
    "streaming": "bool: overlap communication with compute",
    "num_nodes": "count N",
    "chips_per_node": "count",
    "params": "total parameters P (MoE: total; the sync payload uses it)",
    "active_params": "parameters active per token (compute, Chinchilla)",
    "node_peak_flop_per_s": "dense FLOP/s of one node at the training precision",
    "mfu": "model FLOP utilisation, fraction",
    "node_memory_bytes": "accelerator memory of one node, bytes",
    "bytes_per_param": "bytes of model + optimizer state per parameter (ZeRO accounting)",
    "extra_bytes_per_param": "default mode: outer-optimizer state + error-feedback buffer, bytes/param",
    "activation_memory": "bool: count activation memory (default mode)",
    "bits_per_value": "bits per transmitted pseudo-gradient value before extra compression",
    "activation_bytes_per_value": "bytes per activation value on a pipeline boundary",
    "compression_ratio": "extra compression C_r of the sync payload",
    "error_feedback": "bool",
    "compression_quality": "0 optimistic, 1 expected, 2 conservative",
    "activation_compression": "C_act",
    "activation_quality": "0 optimistic, 1 expected, 2 conservative",
    "up_bits_per_s": "WAN upload per node",
    "down_bits_per_s": "WAN download per node",
    "latency_s": "WAN one-way latency",
    "regional_bits_per_s": "regional link (hierarchical)",
    "regional_latency_s": "regional one-way latency",
    "group_size": "nodes per regional group n_g",
    "pp_bits_per_s": "pipeline-stage link",
    "pp_latency_s": "pipeline-stage link latency",
    "straggler": "straggler model code (relay, synchronous, threshold, backup)",
    "local_batch_tokens": "tokens per inner step per worker B",
    "micro_batches": "pipeline micro-batches M_mb",
    "inner_steps": "H; 0 = the smallest compute-bound H (H_min)",
    "duration_s": "time budget T",
    "tokens": "training tokens D; 0 = as many as the time budget allows",
    "moe_layers": "MoE layers with expert parallelism across nodes; 0 = dense or no EP",
    "pp_shard_sync": "bool: each PP stage syncs only its shard P/S (default) vs the whole model (paper)",
    "price_usd_per_chip": "purchase price",
    "capex_multiplier": "chip -> server -> cluster multiplier (paper 1.64 x 1.23)",
    "rental_usd_per_chip_hour": "on-demand rental",
    "rental": "bool: rent instead of buy",
    "tdp_w": "power per chip",
    "pue": "power usage effectiveness",
    "electricity_usd_per_kwh": "energy price; 0 = energy not costed (paper mode)",
    "node_fp16_flop_per_s": "dense FP16 FLOP/s of a node (threshold rules use it)",
    "node_counted_memory_bytes": "node memory that a memory rule counts (HBM; GDDR excluded)",
    "cap_flop_per_s": "covered-cluster compute threshold; 0 = none",
    "cap_memory_bytes": "covered-cluster memory threshold; 0 = none",
    # --- the grounded time model (default mode; paper mode sets each to its paper value) ---------
    "wire_bits_per_param": "bits per parameter of one worker's sync payload on the wire (codec)",
    "ddp_wire_bits_per_param": "bits per parameter of a DDP gradient all-reduce",
    "aggregation": "sync topology code: 0 paper relay (V/up + V/down + latency), 1 ring all-reduce, "
    "2 relay / parameter server, 3 all-gather of sparse payloads, 4 relay returning a dense aggregate, "
    "5 all-gather until the M - 1 payloads outweigh a dense aggregate, then relay_dense",
    "dense_aggregate_bits_per_param": "bits per parameter of the dense aggregate a relay returns (aggregation 4)",
    "outer_state_bytes_per_param": "outer-optimizer state + error-feedback buffer, bytes/param",
    "outer_state_in_hbm": "bool: the outer state lives in accelerator memory (else host DRAM)",
    "offload": "inner-optimizer offload to host DRAM: 0 never, 1 always, 2 only when it does not fit otherwise",
    "offload_hbm_bytes_per_param": "bytes/param left in HBM when the inner optimizer is offloaded",
    "host_memory_bytes": "host DRAM of one node, bytes (inf = not modelled)",
    "host_link_bytes_per_s": "host <-> accelerator bandwidth per chip and direction, bytes/s",
    "hbm_usable_fraction": "fraction of accelerator memory a training job can use",
    "auto_policy": "auto algorithm: 0 paper (flat if it fits, else PP), 1 grounded (flat, flat + offload, "
    "PP with >= 2 groups, else infeasible)",
    "link_shared": "bool: pipeline and regional traffic share the node's WAN link with the syncs",
    "fragments": "Streaming DiLoCo fragments P (1 = whole model at once)",
    "overlap_depth": "inner steps a fragment's sync may overlap, tau; -1 = the whole interval H / P, 0 = none",
    "sync_backward_overlap": "fraction of a step over which a DiLoCo sync can start while the backward pass "
    "still runs (layer by layer); paper 0",
    "ddp_overlap_fraction": "fraction of a step that can hide the DDP all-reduce (paper 1: the whole step)",
    "quality_mapping": "replica/H penalty: -1 paper (loss multiplier M^beta, eta_H), 0 fitted compute-space "
    "multiplier g (dispersal.model.quality), 1 its loss-space conservative bound",
    "inner_optimizer": "inner optimizer of the replicas for the fitted quality model: 0 AdamW, 1 Muon "
    "(ignored by the paper's form)",
}

AGG_PAPER, AGG_RING, AGG_RELAY, AGG_ALL_GATHER, AGG_RELAY_DENSE, AGG_GATHER_OR_DENSE = 0, 1, 2, 3, 4, 5
AGGREGATION_CODES = {
    "paper": AGG_PAPER,
    "ring": AGG_RING,
    "relay": AGG_RELAY,
    "all_gather": AGG_ALL_GATHER,
    "relay_dense": AGG_RELAY_DENSE,
    "gather_or_dense": AGG_GATHER_OR_DENSE,
}


def _f(x: npt.ArrayLike) -> Arr:
    return np.asarray(x, dtype=np.float64)


def evaluate(
    x: Mapping[str, npt.ArrayLike],
    p: ModelParams,
    overrides: Mapping[str, npt.ArrayLike] | None = None,
    quality_params: quality.QualityLike | None = None,
) -> dict[str, Arr]:
    """Evaluate the analytic model on arrays of configurations.

    Args:
        x: every key of `INPUTS`, each an array (or scalar) broadcastable to a common shape.
        p: published fits and heuristics (`ModelParams`).
        overrides: arrays replacing scalar fields of `p` (Monte Carlo draws), same names.
        quality_params: the compute-space quality fit (`dispersal.model.quality`; None = the
            shipped fit); Monte Carlo passes `QualitySamples` that broadcast against the inputs.

    Returns:
        A dict of float arrays of the common shape; keys listed in `OUTPUTS`. Feasibility flags
        are 0/1 floats (``fits``, ``time_ok``, ``under_cap``, ``feasible``).

    The formulas, by section of spec/model.md (Rahman 2026 unless noted):
      1. C = 6 P_active D; F_eff = F_peak x MFU; T_comp = 6 P_active B / F_eff;
         MoE expert parallelism adds T_EP = 2 x latency x L_MoE per step.
      2. state bytes = P beta; S = ceil(bytes / node memory) pipeline stages when it does not fit.
      3. V = P b / C_r bits; flat sync T_sync = (V/up + V/down + latency) f(N);
         H_min = ceil(T_sync / T_step); T_outer = max(H T_step, T_sync) (streaming) or the sum;
         D = (T / T_outer) H B N. Hierarchical and PP-group variants as in sec. 3.
      4. eta = eta_H eta_comp eta_act eta_rep; C_local = C_thr eta; C_quality = C_local chi.
      5. chi = min(1, C'(L) / C_thr) with C' the compute-optimal compute at the run's loss.
      7. cost = chips x price x multiplier (+ energy, or rental, outside paper mode).
    """
    with np.errstate(all="ignore"):
        return _evaluate(x, p, overrides or {}, quality_params)


def _evaluate(
    x: Mapping[str, npt.ArrayLike],
    p: ModelParams,
    ov: Mapping[str, npt.ArrayLike],
    quality_params: quality.QualityLike | None,
) -> dict[str, Arr]:

    def k(name: str) -> Arr:
        return _f(ov[name]) if name in ov else _f(getattr(p, name))

    shape = np.broadcast_shapes(*(np.shape(v) for v in x.values()))

    cache: dict[str, Arr] = {}

    def g(name: str) -> Arr:
        # Inputs are read many times; broadcasting each once keeps small calls (the planner's) cheap.
        v = cache.get(name)
        if v is None:
            v = cache[name] = np.broadcast_to(_f(x[name]), shape)
        return v

    mode = g("mode")
    streaming = g("streaming") > 0
    N = g("num_nodes")
    chips = g("chips_per_node")
    P = g("params")
    Pa = g("active_params")
    B = g("local_batch_tokens")
    Mmb = g("micro_batches")
    up, down, lat = g("up_bits_per_s"), g("down_bits_per_s"), g("latency_s")
    strag = g("straggler")
    h_req = g("inner_steps")
    T_budget = g("duration_s")
    D_req = g("tokens")

    # --- 1. compute per inner step -------------------------------------------------------------
    F_eff = g("node_peak_flop_per_s") * g("mfu")
    T_comp = 6.0 * Pa * B / F_eff
    T_ep = 2.0 * lat * g("moe_layers")

    # --- 2. memory: where each state lives, and pipeline stages ---------------------------------
    hidden = p.hidden_size_coeff * np.sqrt(P)
    act_val_bytes = g("activation_bytes_per_value")
    # With full activation checkpointing a layer keeps its input (tokens x h values); the layer
    # count is ~P / (12 h^2), so a micro-batch's stored activations are tokens x bytes x P / (12 h).
    act_per_token = np.where(g("activation_memory") > 0, act_val_bytes * P / (12.0 * hidden), 0.0)
    mem = g("node_memory_bytes")
    usable = mem * g("hbm_usable_fraction")
    inner_b = g("bytes_per_param")
    outer_b = g("outer_state_bytes_per_param")
    outer_hbm = g("outer_state_in_hbm") > 0
    outer_hbm_b = np.where(outer_hbm, outer_b, 0.0)
    outer_host_b = np.where(outer_hbm, 0.0, outer_b)
    host_mem = g("host_memory_bytes")
    ofl_b = g("offload_hbm_bytes_per_param")
    offload = g("offload")
    act_flat = act_per_token * B / Mmb
    # Flat: the whole model and its state on one node; optionally the inner optimizer (FP32 master,
    # Adam m and v) offloaded to host DRAM, leaving ofl_b bytes/param (bf16 weights + gradients).
    hbm_plain = P * (inner_b + outer_hbm_b) + act_flat
    hbm_ofl = P * (ofl_b + outer_hbm_b) + act_flat
    host_plain = P * outer_host_b
    host_ofl = P * (outer_host_b + inner_b - ofl_b)
    fits_plain = (hbm_plain <= usable) & (host_plain <= host_mem)
    fits_ofl = (hbm_ofl <= usable) & (host_ofl <= host_mem)
    use_ofl = (offload == 1) | ((offload == 2) & ~fits_plain & fits_ofl)
    fits = np.where(use_ofl, fits_ofl, fits_plain)
    need_flat = np.where(use_ofl, hbm_ofl, hbm_plain)
    host_need_flat = np.where(use_ofl, host_ofl, host_plain)
    # GPipe keeps all micro-batches of its 1/S of the layers: B tokens x act_per_token / S; each
    # stage node holds 1/S of the state (no offload in a pipeline).
    pp_hbm_total = P * (inner_b + outer_hbm_b) + act_per_token * B
    stages_needed = np.maximum(np.ceil(pp_hbm_total / usable), np.ceil(host_plain / host_mem))
    S = np.where(fits, 1.0, np.maximum(2.0, stages_needed))
    G_pp = np.floor(N / S)
    # Auto: paper rule = flat DiLoCo when the model fits one node, else PP-group DiLoCo. Grounded
    # rule: PP only when it gives >= 2 DiLoCo groups; otherwise flat, reported as not fitting (a
    # 1-group WAN pipeline is not a DiLoCo run).
    auto_pp = np.where(g("auto_policy") > 0, ~fits & (G_pp >= 2), ~fits)
    mode = np.where(mode == MODE_AUTO, np.where(auto_pp, MODE_PP, MODE_FLAT), mode)
    use_ofl = use_ofl & (mode != MODE_PP)
    need_per_node = np.where(mode == MODE_PP, pp_hbm_total / S, need_flat)
    host_per_node = np.where(mode == MODE_PP, host_plain / S, host_need_flat)
    # Largest model that fits one node flat (with offload when allowed): need(P) = b P + c sqrt(P)
    # <= usable, with c sqrt(P) the activations (act_per_token is linear in sqrt(P)).
    c_act = np.where(g("activation_memory") > 0, act_val_bytes * B / Mmb / (12.0 * p.hidden_size_coeff), 0.0)

    def largest(b: Arr, host_b: Arr) -> Arr:
        root = (-c_act + np.sqrt(c_act**2 + 4.0 * b * usable)) / (2.0 * b)
        return np.minimum(root**2, np.where(host_b > 0, host_mem / host_b, np.inf))

    p_max_plain = largest(inner_b + outer_hbm_b, outer_host_b)
    if (offload > 0).any():
        p_max_ofl = largest(ofl_b + outer_hbm_b, outer_host_b + inner_b - ofl_b)
        max_params_flat = np.where(offload > 0, np.maximum(p_max_plain, p_max_ofl), p_max_plain)
    else:
        max_params_flat = p_max_plain
    # Offloading costs host-link time every inner step: bf16 gradients down and bf16 weights up,
    # 2 bytes/param each way, each chip moving its 1/chips share (ZeRO-Offload, Ren et al. 2021,
    # arXiv 2101.06840 sec. 4); counted as not overlapped with compute (conservative).
    T_ofl = np.where(use_ofl, OFFLOAD_TRANSFER_BYTES_PER_PARAM * P / chips / g("host_link_bytes_per_s"), 0.0)
    T_step = T_comp + T_ep + T_ofl

    # --- 3. communication and step time ---------------------------------------------------------
    wire = g("wire_bits_per_param")
    agg = g("aggregation")
    dense_bits = g("dense_aggregate_bits_per_param")
    shared = g("link_shared") > 0
    Pf = np.maximum(g("fragments"), 1.0)
    tau = g("overlap_depth")
    bwd = g("sync_backward_overlap")
    tiny = 1e-12

    is_ring = agg == AGG_RING
    is_paper_agg = agg == AGG_PAPER
    is_gather = agg == AGG_ALL_GATHER
    is_dense = agg == AGG_RELAY_DENSE
    is_god = agg == AGG_GATHER_OR_DENSE

    def sync(n_params: Arr, n: Arr, f: Arr, bw_up: Arr, bw_down: Arr, latency: Arr) -> tuple[Arr, Arr, Arr]:
        """One sync of n_params values among n workers: (wall time, upload bits, download bits) of
        one worker. Paper relay: V/up + V/down + latency. Ring all-reduce: 2(n-1) hops of V/n at
        min(up, down) plus a latency each, 2 V (n-1)/n each way. Relay-based (relay, all-gather,
        dense relay): upload then download plus two one-way latencies (worker -> relay -> worker);
        an all-gather downloads the n-1 other payloads, a dense relay n_params x dense bits.
        Times the straggler factor f(n)."""
        v = n_params * wire
        m = np.maximum(n, 1.0)
        ring = 2.0 * (m - 1.0) / m * v
        gathered = (m - 1.0) * v
        dense = n_params * dense_bits
        up_b = np.where(is_ring, ring, v)
        down_b = np.where(
            is_ring,
            ring,
            np.where(
                is_gather,
                gathered,
                np.where(is_dense, dense, np.where(is_god, np.minimum(gathered, dense), v)),
            ),
        )
        t = np.where(
            is_paper_agg,
            v / bw_up + v / bw_down + latency,
            np.where(
                is_ring,
                2.0 * (m - 1.0) * (v / m / np.minimum(bw_up, bw_down) + latency),
                up_b / bw_up + down_b / bw_down + 2.0 * latency,
            ),
        )
        live_n = n > 1
        return np.where(live_n, t * f, 0.0), np.where(live_n, up_b, 0.0), np.where(live_n, down_b, 0.0)

    def stream_h(t_frag: Arr, t_step: Arr, link_busy_per_step: Arr) -> Arr:
        """H_min: the smallest H whose steps hide the P fragment syncs (and leave the link room for
        the per-step traffic that shares it); at P = 1 with nothing sharing, ceil(T_sync / T_step)."""
        free = np.maximum(t_step - link_busy_per_step, tiny * t_step)
        auto = np.maximum(np.maximum(1.0, np.ceil(Pf * t_frag / free)), Pf)
        return np.where(h_req > 0, h_req, auto)

    def cycle(h: Arr, t_step: Arr, t_full: Arr, t_frag: Arr, link_busy_per_step: Arr) -> Arr:
        """Outer-step wall time. Without overlap: H T_step + T_sync, less what the last backward
        pass hides (grounded: a layer's sync starts once its last update is done). With overlap
        (Streaming DiLoCo, Douillard et al. 2025): each of P fragments syncs once per H steps and
        may hide behind tau inner steps (tau = -1: the whole interval H / P; 0: none) plus that
        backward share; what does not fit is exposed, and the link can carry no more than its time:
        max(H T_step + exposed, P t_frag + H x per-step link use)."""
        # The paper's form exactly (no rounding detour) when nothing of the above applies.
        simple = (Pf == 1.0) & (tau < 0) & (link_busy_per_step <= 0)
        stream = np.maximum(h * t_step, t_frag)
        if not simple.all():
            tau_eff = np.where(tau < 0, h / Pf, tau) + bwd
            exposed = Pf * np.maximum(0.0, t_frag - tau_eff * t_step)
            general = np.maximum(h * t_step + exposed, Pf * t_frag + h * link_busy_per_step)
            stream = np.where(simple, stream, general)
        blocking = h * t_step + np.maximum(0.0, t_full - bwd * t_step)
        return np.where(streaming, stream, blocking)

    zero = np.zeros(shape)
    # Flat DiLoCo: every node is a replica.
    f_N = straggler_factor(N, strag, p)
    T_sync_flat, u_flat, d_flat = sync(P, N, f_N, up, down, lat)
    # (Skipped when no configuration splits the model: the common case, and the planner's.)
    one_fragment = bool(np.all(Pf == 1.0))
    T_frag_flat = T_sync_flat if one_fragment else sync(P / Pf, N, f_N, up, down, lat)[0]
    H_flat = np.where(
        N > 1,
        stream_h(np.where(streaming, T_frag_flat, T_sync_flat / Pf), T_step, zero),
        np.where(h_req > 0, h_req, 1.0),
    )
    cyc_flat = cycle(H_flat, T_step, T_sync_flat, T_frag_flat, zero)

    # Hierarchical DiLoCo: groups of n_g on regional links, leaders sync over the WAN.
    n_g = g("group_size")
    G_h = np.floor(N / n_g)
    hier_ok = (mode == MODE_HIER) & (G_h >= 2)
    # (Skipped when no configuration is hierarchical.)
    if hier_ok.any():
        reg_bw, reg_lat = g("regional_bits_per_s"), g("regional_latency_s")
        f_ng = straggler_factor(n_g, strag, p)
        T_reg_g, u_reg, d_reg = sync(P, n_g, f_ng, reg_bw, reg_bw, reg_lat)
        T_reg = np.where(is_paper_agg, (2.0 * P * wire / reg_bw + reg_lat) * f_ng, T_reg_g)
        # On a shared link the leader's regional and global syncs take turns: give each half the
        # regional cycle (H_in covers twice the regional sync), then H_reg rounds hide one global sync.
        H_in_auto = np.maximum(1.0, np.ceil(np.where(shared & streaming, 2.0, 1.0) * T_reg / T_step))
        H_in = np.where(h_req > 0, h_req, H_in_auto)
        T_rc = np.where(streaming, np.maximum(H_in * T_step, T_reg), H_in * T_step + T_reg)
        f_Gh = straggler_factor(G_h, strag, p)
        T_glob, u_glob, d_glob = sync(P, G_h, f_Gh, up, down, lat)
        slack = np.where(shared & streaming, H_in * T_step - T_reg, T_rc)
        H_reg = np.maximum(1.0, np.ceil(T_glob / np.maximum(slack, tiny * T_rc)))
        cyc_hier = np.where(
            streaming,
            np.maximum(H_reg * T_rc, T_glob + np.where(shared, H_reg * T_reg, 0.0)),
            H_reg * T_rc + T_glob,
        )
        H_eff_hier = H_in * H_reg**p.hierarchical_h_exponent
    else:
        T_reg = u_reg = d_reg = T_glob = u_glob = d_glob = np.zeros(shape)
        H_in = H_reg = H_eff_hier = np.ones(shape)
        cyc_hier = np.full(shape, np.nan)
        f_Gh = np.ones(shape)

    # PP-group DiLoCo: S stages per group, G = floor(N / S) groups.
    t_c = 6.0 * Pa * B / (F_eff * S * Mmb)
    A_bits = np.where(S > 1, B * hidden * act_val_bytes * 8.0 / g("activation_compression"), 0.0)
    pp_bw = g("pp_bits_per_s")
    t_m = (2.0 * A_bits / Mmb) / pp_bw
    pp_link = np.where(S > 1, (t_m + g("pp_latency_s")) * straggler_factor(S, strag, p), 0.0)
    T_pp = (Mmb + S - 1.0) * (t_c + pp_link) + T_ep
    P_pp = np.where(g("pp_shard_sync") > 0, P / S, P)
    f_Gpp = straggler_factor(G_pp, strag, p)
    T_sync_pp, u_pp, d_pp = sync(P_pp, G_pp, f_Gpp, up, down, lat)
    T_frag_pp = T_sync_pp if one_fragment else sync(P_pp / Pf, G_pp, f_Gpp, up, down, lat)[0]
    # The busiest stage (a middle one) sends activations forward and gradients back every step:
    # 2A bits each way (A for a 2-stage pipeline's end stages).
    act_node_bits = np.where(S > 2, 2.0, 1.0) * A_bits * (S > 1)
    act_busy = np.where(shared, act_node_bits / np.minimum(up, down), 0.0)
    H_pp = np.where(
        G_pp > 1,
        stream_h(np.where(streaming, T_frag_pp, T_sync_pp / Pf), T_pp, act_busy),
        np.where(h_req > 0, h_req, 1.0),
    )
    cyc_pp = cycle(H_pp, T_pp, T_sync_pp, T_frag_pp, act_busy)

    # Synchronous data parallel: ring all-reduce of uncompressed gradients every step
    # (Charles et al. 2025 App. A: 2 V (1 - 1/N) / BW plus 2 (N - 1) latency hops). With overlap
    # it hides behind a fraction of the step (paper: all of it; grounded: the backward pass).
    ddp_bits = g("ddp_wire_bits_per_param")
    V_ddp = P * ddp_bits
    bw_min = np.minimum(up, down)
    T_ar = np.where(
        N > 1,
        (2.0 * V_ddp * (1.0 - 1.0 / N) / bw_min + 2.0 * (N - 1.0) * lat) * f_N,
        0.0,
    )
    hide = g("ddp_overlap_fraction") * T_step
    hidden_ddp = np.where(
        g("ddp_overlap_fraction") >= 1.0, np.maximum(T_step, T_ar), T_step + np.maximum(0.0, T_ar - hide)
    )
    cyc_ddp = np.where(streaming, hidden_ddp, T_step + T_ar)
    u_ddp = 2.0 * V_ddp * (1.0 - 1.0 / np.maximum(N, 1.0)) * (N > 1)

    is_flat = (mode == MODE_FLAT) | ((mode == MODE_HIER) & ~hier_ok)
    is_hier = hier_ok
    is_pp = mode == MODE_PP
    conds = [mode == MODE_DDP, is_flat, is_hier, is_pp]

    c_ddp, c_flat, c_hier, c_pp = conds

    def sel(ddp: npt.ArrayLike, flat: npt.ArrayLike, hier: npt.ArrayLike, pp: npt.ArrayLike) -> Arr:
        # np.select's semantics (first true condition, else NaN) with nested where: cheaper per call.
        out = np.where(c_ddp, ddp, np.where(c_flat, flat, np.where(c_hier, hier, np.where(c_pp, pp, np.nan))))
        return np.asarray(out, dtype=np.float64)

    ones = np.ones(shape)
    cyc = sel(cyc_ddp, cyc_flat, cyc_hier, cyc_pp)
    steps_per_cycle = sel(ones, H_flat, H_in * H_reg, H_pp)
    workers = sel(N, N, N, G_pp)
    step_time = sel(T_step, T_step, T_step, T_pp)
    t_sync = sel(T_ar, T_sync_flat, T_glob, T_sync_pp)
    h_out = sel(ones, H_flat, H_in, H_pp)
    h_pen = sel(ones, H_flat, H_eff_hier, H_pp)
    replicas = sel(ones, N, N, G_pp)
    stages = np.where(is_pp, S, 1.0)
    f_sync = sel(f_N, f_N, f_Gh, f_Gpp)
    # A mode that needs the model in one node is infeasible when it does not fit.
    fits_mode = np.where(is_pp, (need_per_node <= usable) & (host_per_node <= host_mem), fits)
    enough_workers = np.where(is_pp, G_pp >= 1, N >= 1)

    # Backup workers buy a smaller straggler factor with spare nodes: only N / 1.1 do useful work.
    spare = np.where(
        (strag == STRAGGLER_CODES[Straggler.BACKUP]) & (N > 1), 1.0 / k("backup_overprovision"), 1.0
    )
    tokens_per_s = steps_per_cycle * B * workers * spare / cyc
    run_s = np.where(D_req > 0, D_req / tokens_per_s, T_budget)
    D = np.where(D_req > 0, D_req, tokens_per_s * T_budget)
    time_ok = run_s <= T_budget * (1.0 + 1e-12)
    # A run that cannot progress (no workers) takes forever; its time breakdown is left at zero.
    n_cycles = np.where(np.isfinite(run_s), run_s / cyc, 0.0)
    C_thr = 6.0 * Pa * D

    # --- 4-5. efficiency factors ----------------------------------------------------------------
    distributed = (mode != MODE_DDP) & (replicas > 1)
    # Quality mapping: < 0 the paper's (eta_H x a replica loss multiplier on the whole Chinchilla
    # loss); 0 the fitted compute-space multiplier g(M, H, P, fragments) (dispersal.model.quality,
    # which carries the H effect, so eta_H is 1); 1 its conservative loss-space bound.
    qmap = g("quality_mapping")
    legacy_q = qmap < 0
    e_h = np.where(distributed & legacy_q, eta_h(P, h_pen, p), 1.0)
    e_c = np.where(
        distributed, eta_comp(g("compression_ratio"), g("error_feedback"), g("compression_quality"), p), 1.0
    )
    e_a = np.where(is_pp, eta_act(g("activation_compression"), S, g("activation_quality"), p), 1.0)

    ce, ca, cb = k("chinchilla_e"), k("chinchilla_a"), k("chinchilla_b")
    cal, cbe, kopt = k("chinchilla_alpha"), k("chinchilla_beta"), k("tokens_per_param_optimal")
    ot = D / (kopt * Pa)
    # The Chinchilla inversions are the costly part: a search may say which configurations it will
    # keep (an overtraining window) so the others are skipped (their results become NaN).
    live = np.ones(shape, dtype=bool)
    if "min_overtraining" in x:
        live &= ot >= g("min_overtraining") * (1 - 1e-9)
    if "max_overtraining" in x:
        live &= ot <= g("max_overtraining") * (1 + 1e-9)
    live &= np.isfinite(D) & (D > 0)
    L = np.full(shape, np.nan)
    L_rep = np.full(shape, np.nan)
    q_eff = np.full(shape, np.nan)
    C_opt = np.full(shape, np.nan)
    C_opt_rep = np.full(shape, np.nan)
    if live.any():

        def lv(a: Arr) -> Arr:
            return np.broadcast_to(a, shape)[live]

        Ll = chinchilla.loss(lv(Pa), lv(D), lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe))
        L[live] = Ll
        C_opt[live] = chinchilla.optimal_compute_for_loss(
            Ll, lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe), lv(kopt)
        )
        leg = np.broadcast_to(legacy_q, shape)[live]
        if leg.any():
            beta0 = lv(k("replica_beta_coeff")) * lv(P) ** -lv(k("replica_beta_exponent"))
            beta_rep = beta0 * np.log(np.maximum(lv(h_pen), 1.0)) / np.log(lv(k("replica_reference_h")))
            dist_live = np.broadcast_to(distributed, shape)[live]
            Lrep = np.where(dist_live & leg, np.maximum(lv(replicas), 1.0) ** beta_rep, 1.0)
            L_rep[live] = Lrep
            C_opt_rep[live] = chinchilla.optimal_compute_for_loss(
                Ll * Lrep, lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe), lv(kopt)
            )
    gmask = live & distributed & ~legacy_q
    if gmask.any():

        def gl(a: Arr) -> Arr:
            return np.asarray(np.broadcast_to(a, shape)[gmask], dtype=np.float64)

        frag_q = np.maximum(gl(np.where(streaming, Pf, 1.0)), 1.0)
        m_q, h_q = np.maximum(gl(replicas), 1.0), np.maximum(gl(h_pen), 1.0)
        qp: quality.QualityLike | None = quality_params
        if isinstance(qp, quality.QualitySamples):
            # Per-configuration draws of the fit (Monte Carlo): keep the same elements as the inputs.
            fields: dict[str, Any] = {f: gl(_f(getattr(qp, f))) for f in quality.SAMPLED_FIELDS}
            qp = dataclasses.replace(qp, **fields)
        opt_q = gl(g("inner_optimizer")).astype(np.int64)
        q_eff[gmask] = quality.efficiency(
            np.maximum(gl(qmap), 0.0).astype(np.int64),
            m_q,
            h_q,
            gl(P),
            frag_q,
            L[gmask],
            gl(ce),
            gl(ca),
            gl(cb),
            gl(cal),
            gl(cbe),
            gl(kopt),
            qp,
            opt_q,
        )
        L_rep[gmask] = quality.loss_ratio(m_q, h_q, gl(P), frag_q, qp, opt_q)
    e_r = np.where(distributed, np.where(legacy_q, np.minimum(1.0, C_opt_rep / C_opt), q_eff), 1.0)
    e_r = np.where(live, e_r, np.nan)
    chi = np.minimum(1.0, C_opt / C_thr)
    # A run that trains no tokens (no throughput: e.g. fewer nodes than pipeline stages) has no
    # replica penalty to speak of, no quality compute and an undefined (infinite) loss; report that
    # rather than NaN.
    untrained = ~(D > 0)
    e_r = np.where(untrained, 1.0, e_r)
    chi = np.where(untrained, 0.0, chi)
    L = np.where(untrained, np.inf, L)
    eta = e_h * e_c * e_a * e_r
    C_local = C_thr * eta
    C_quality = C_local * chi

    # --- 6-7. cost and energy -------------------------------------------------------------------
    chips_total = N * chips
    hours = run_s / 3600.0
    hardware_usd = chips_total * g("price_usd_per_chip") * g("capex_multiplier")
    rental_usd = chips_total * g("rental_usd_per_chip_hour") * hours
    power_node_w = chips * g("tdp_w") * g("pue")
    energy_kwh = N * power_node_w * hours / 1000.0
    renting = g("rental") > 0
    # A rental price already includes the provider's power bill.
    price_kwh = g("electricity_usd_per_kwh")
    # Energy is not costed at price 0 (paper mode), even for a run of unbounded length.
    energy_usd = np.where(renting | (price_kwh <= 0), 0.0, energy_kwh * price_kwh)
    total_usd = np.where(renting, rental_usd, hardware_usd) + energy_usd

    # --- traffic per node and direction, per outer cycle ----------------------------------------
    # Paper: mean over nodes of the upload (regional rounds of every node plus the leaders' share).
    grounded_traffic = agg != AGG_PAPER
    up_bits_cycle = down_bits_cycle = np.zeros(shape)
    if (~grounded_traffic).any():
        per_step_pp = 2.0 * A_bits * (S - 1.0) / S
        up_paper = sel(
            2.0 * V_ddp * (1.0 - 1.0 / np.maximum(N, 1.0)) * (N > 1),
            P * wire * (N > 1),
            H_reg * P * wire + P * wire / n_g,
            P_pp * wire * (G_pp > 1) + H_pp * per_step_pp,
        )
        up_bits_cycle = down_bits_cycle = up_paper
    if grounded_traffic.any():
        # Grounded: the busiest node (a hierarchical leader, a middle pipeline stage), on its WAN
        # link; regional and pipeline traffic count only when they share that link.
        act_wan = np.where(shared, act_node_bits, 0.0)
        up_busiest = sel(u_ddp, u_flat, u_glob + np.where(shared, H_reg * u_reg, 0.0), u_pp + H_pp * act_wan)
        down_busiest = sel(
            u_ddp, d_flat, d_glob + np.where(shared, H_reg * d_reg, 0.0), d_pp + H_pp * act_wan
        )
        up_bits_cycle = np.where(grounded_traffic, up_busiest, up_bits_cycle)
        down_bits_cycle = np.where(grounded_traffic, down_busiest, down_bits_cycle)
    mean_up = up_bits_cycle / cyc
    mean_down = down_bits_cycle / cyc
    link_use_up = (up_bits_cycle / up) / cyc
    link_use_down = (down_bits_cycle / down) / cyc
    duty = np.minimum(1.0, link_use_up)
    # Bursts run at the link rate; a PP node's activations use the (possibly faster) stage link.
    peak_up = np.where(
        up_bits_cycle > 0, np.where(is_pp & (A_bits > 0), np.maximum(up, g("pp_bits_per_s")), up), 0.0
    )
    if grounded_traffic.any():
        sync_up = sel(u_ddp, u_flat, u_glob, u_pp)
        sync_down = sel(u_ddp, d_flat, d_glob, d_pp)
    else:
        # Paper mode: one payload each way, as its relay formula charges.
        sync_up = sync_down = sel(u_ddp, P * wire * (N > 1), P * wire * (G_h > 1), P_pp * wire * (G_pp > 1))

    # --- where the time goes (seconds over the run, one worker's timeline) ---------------------
    busy_step = steps_per_cycle * step_time
    exposed = np.maximum(cyc - busy_step, 0.0) * n_cycles
    compute_pure = np.where(is_pp, steps_per_cycle * Mmb * t_c, steps_per_cycle * T_comp) * n_cycles
    bubble = np.where(is_pp, steps_per_cycle * (S - 1.0) * t_c, 0.0) * n_cycles
    pp_comm = np.where(is_pp, steps_per_cycle * (Mmb + S - 1.0) * pp_link, 0.0) * n_cycles
    ep_s = steps_per_cycle * T_ep * n_cycles
    offload_s = np.where(is_pp, 0.0, steps_per_cycle * T_ofl) * n_cycles
    straggler_s = exposed * (1.0 - 1.0 / f_sync)
    hidden_comm = np.minimum(t_sync, busy_step) * np.where(streaming, 1.0, 0.0) * n_cycles

    node_h100e = g("node_fp16_flop_per_s") / H100E_FLOP_PER_S
    cap_f, cap_m = g("cap_flop_per_s"), g("cap_memory_bytes")
    under_flop = (cap_f <= 0) | (g("node_fp16_flop_per_s") <= cap_f * (1.0 + 1e-12))
    under_mem = (cap_m <= 0) | (g("node_counted_memory_bytes") <= cap_m * (1.0 + 1e-12))
    under_cap = under_flop & under_mem
    feasible = fits_mode & time_ok & under_cap & enough_workers & np.isfinite(C_local)

    return {
        "feasible": feasible.astype(np.float64),
        "fits": fits_mode.astype(np.float64),
        "time_ok": time_ok.astype(np.float64),
        "under_cap": under_cap.astype(np.float64),
        "under_flop_cap": under_flop.astype(np.float64),
        "under_memory_cap": under_mem.astype(np.float64),
        "mode_resolved": sel(ones * MODE_DDP, ones * MODE_FLAT, ones * MODE_HIER, ones * MODE_PP),
        "memory_required_bytes_per_node": np.where(is_pp, need_per_node, need_flat),
        "pipeline_stages": stages,
        "pipeline_stages_needed": S,
        "groups": sel(ones, ones, G_h, G_pp),
        "replicas": replicas,
        "node_effective_flop_per_s": F_eff,
        "node_h100_equivalents": node_h100e,
        "step_compute_time_s": T_comp,
        "step_time_s": step_time,
        "expert_parallel_latency_s": T_ep,
        "sync_time_s": t_sync,
        "regional_sync_time_s": np.where(is_hier, T_reg, 0.0),
        "inner_steps": h_out,
        "regional_rounds": np.where(is_hier, H_reg, 1.0),
        "inner_steps_effective": h_pen,
        "outer_step_time_s": cyc,
        "num_outer_steps": n_cycles,
        "payload_bits": sel(V_ddp, P * wire, P * wire, P_pp * wire),
        "activation_bits_per_boundary": A_bits,
        "tokens": D,
        "tokens_per_s": tokens_per_s,
        "run_time_s": run_s,
        "c_raw_flop": C_thr,
        "eta_h": e_h,
        "eta_comp": e_c,
        "eta_act": e_a,
        "eta_rep": e_r,
        "eta": eta,
        "chi": chi,
        "loss": L,
        "loss_replica_multiplier": L_rep,
        "c_local_flop": C_local,
        "c_quality_flop": C_quality,
        "overtraining_ratio": ot,
        "mfu_global": C_local / (N * g("node_peak_flop_per_s") * run_s),
        "hardware_usd": hardware_usd,
        "rental_usd": rental_usd,
        "energy_kwh": energy_kwh,
        "energy_usd": energy_usd,
        "cost_usd": total_usd,
        "power_per_node_w": power_node_w,
        "up_bits_per_outer_step": up_bits_cycle,
        "mean_up_bits_per_s": mean_up,
        "peak_up_bits_per_s": peak_up,
        "duty_cycle": duty,
        "bytes_per_day_per_node": (mean_up + mean_down) / 8.0 * 86400.0,
        "down_bits_per_outer_step": down_bits_cycle,
        "mean_down_bits_per_s": mean_down,
        "link_utilisation_up": link_use_up,
        "link_utilisation_down": link_use_down,
        "sync_up_bits": sync_up,
        "sync_down_bits": sync_down,
        "utilisation": np.where(is_pp, steps_per_cycle * Mmb * t_c, steps_per_cycle * T_comp) / cyc,
        "max_params_flat": max_params_flat,
        "host_memory_required_bytes_per_node": host_per_node,
        "offload": use_ofl.astype(np.float64),
        "offload_time_s": T_ofl,
        "time_compute_s": compute_pure,
        "time_bubble_s": bubble,
        "time_pipeline_comm_s": pp_comm,
        "time_expert_parallel_s": ep_s,
        "time_exposed_comm_s": exposed - straggler_s,
        "time_straggler_s": straggler_s,
        "time_hidden_comm_s": hidden_comm,
        "time_offload_s": offload_s,
    }


OUTPUTS: tuple[str, ...] = (
    "feasible",
    "fits",
    "time_ok",
    "under_cap",
    "under_flop_cap",
    "under_memory_cap",
    "mode_resolved",
    "memory_required_bytes_per_node",
    "pipeline_stages",
    "pipeline_stages_needed",
    "groups",
    "replicas",
    "node_effective_flop_per_s",
    "node_h100_equivalents",
    "step_compute_time_s",
    "step_time_s",
    "expert_parallel_latency_s",
    "sync_time_s",
    "regional_sync_time_s",
    "inner_steps",
    "regional_rounds",
    "inner_steps_effective",
    "outer_step_time_s",
    "num_outer_steps",
    "payload_bits",
    "activation_bits_per_boundary",
    "tokens",
    "tokens_per_s",
    "run_time_s",
    "c_raw_flop",
    "eta_h",
    "eta_comp",
    "eta_act",
    "eta_rep",
    "eta",
    "chi",
    "loss",
    "loss_replica_multiplier",
    "c_local_flop",
    "c_quality_flop",
    "overtraining_ratio",
    "mfu_global",
    "hardware_usd",
    "rental_usd",
    "energy_kwh",
    "energy_usd",
    "cost_usd",
    "power_per_node_w",
    "up_bits_per_outer_step",
    "mean_up_bits_per_s",
    "peak_up_bits_per_s",
    "duty_cycle",
    "bytes_per_day_per_node",
    "down_bits_per_outer_step",
    "mean_down_bits_per_s",
    "link_utilisation_up",
    "link_utilisation_down",
    "sync_up_bits",
    "sync_down_bits",
    "utilisation",
    "max_params_flat",
    "host_memory_required_bytes_per_node",
    "offload",
    "offload_time_s",
    "time_compute_s",
    "time_bubble_s",
    "time_pipeline_comm_s",
    "time_expert_parallel_s",
    "time_exposed_comm_s",
    "time_straggler_s",
    "time_hidden_comm_s",
    "time_offload_s",
)
