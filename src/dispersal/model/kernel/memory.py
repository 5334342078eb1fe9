"""The memory stage (spec/model.md sec. 2): where each state lives (accelerator, host DRAM, offload),
whether a model fits one node, how many pipeline stages it needs otherwise, and which algorithm
``auto`` resolves to."""

from __future__ import annotations

import numpy as np

from dispersal.model.inputs.codes import ALGO_AUTO, ALGO_DILOCO, ALGO_PP_DILOCO
from dispersal.model.kernel.context import Arr, Inputs, Memory


def memory(inp: Inputs, P: Arr, B: Arr, Mmb: Arr, N: Arr, hidden: Arr) -> Memory:
    """Bytes per node of a flat replica (with and without inner-optimizer offload) and of a pipeline.

    Activations: with full activation checkpointing a layer keeps its input (tokens x h values); the
    layer count is ~P / (12 h^2), so a micro-batch's stored activations are tokens x bytes x P / (12 h).
    Flat: the whole model and its state on one node; optionally the inner optimizer (FP32 master,
    Adam m and v) offloaded to host DRAM, leaving `offload_hbm_bytes_per_param` (bf16 weights +
    gradients). GPipe keeps all micro-batches of its 1/S of the layers (B tokens x act / S); each
    stage node holds 1/S of the state (no offload in a pipeline).
    """
    g, p = inp.g, inp.p
    act_val_bytes = g("activation_bytes_per_value")
    act_on = g("activation_memory") > 0
    act_per_token = np.where(act_on, act_val_bytes * P / (12.0 * hidden), 0.0)
    usable = g("node_memory_bytes") * g("hbm_usable_fraction")
    inner_b = g("bytes_per_param")
    outer_b = g("outer_state_bytes_per_param")
    outer_hbm = g("outer_state_in_hbm") > 0
    outer_hbm_b = np.where(outer_hbm, outer_b, 0.0)
    outer_host_b = np.where(outer_hbm, 0.0, outer_b)
    host_mem = g("host_memory_bytes")
    ofl_b = g("offload_hbm_bytes_per_param")
    offload = g("offload")
    act_flat = act_per_token * B / Mmb
    hbm_plain = P * (inner_b + outer_hbm_b) + act_flat
    hbm_ofl = P * (ofl_b + outer_hbm_b) + act_flat
    host_plain = P * outer_host_b
    host_ofl = P * (outer_host_b + inner_b - ofl_b)
    fits_plain = (hbm_plain <= usable) & (host_plain <= host_mem)
    fits_ofl = (hbm_ofl <= usable) & (host_ofl <= host_mem)
    use_ofl = (offload == 1) | ((offload == 2) & ~fits_plain & fits_ofl)
    fits = np.where(use_ofl, fits_ofl, fits_plain)
    pp_hbm_total = P * (inner_b + outer_hbm_b) + act_per_token * B
    stages_needed = np.maximum(np.ceil(pp_hbm_total / usable), np.ceil(host_plain / host_mem))
    S = np.where(fits, 1.0, np.maximum(2.0, stages_needed))
    # Largest model that fits one node flat (with offload when allowed): need(P) = b P + c sqrt(P)
    # <= usable, with c sqrt(P) the activations (act_per_token is linear in sqrt(P)).
    c_act = np.where(act_on, act_val_bytes * B / Mmb / (12.0 * p.hidden_size_coeff), 0.0)

    def largest(b: Arr, host_b: Arr) -> Arr:
        root = (-c_act + np.sqrt(c_act**2 + 4.0 * b * usable)) / (2.0 * b)
        return np.minimum(root**2, np.where(host_b > 0, host_mem / host_b, np.inf))

    p_max_plain = largest(inner_b + outer_hbm_b, outer_host_b)
    if (offload > 0).any():
        p_max_ofl = largest(ofl_b + outer_hbm_b, outer_host_b + inner_b - ofl_b)
        max_params_flat = np.where(offload > 0, np.maximum(p_max_plain, p_max_ofl), p_max_plain)
    else:
        max_params_flat = p_max_plain
    return Memory(
        act_per_token=act_per_token,
        usable=usable,
        host_mem=host_mem,
        fits=fits,
        need_flat=np.where(use_ofl, hbm_ofl, hbm_plain),
        host_need_flat=np.where(use_ofl, host_ofl, host_plain),
        pp_hbm_total=pp_hbm_total,
        host_plain=host_plain,
        stages=S,
        pp_groups=np.floor(N / S),
        use_offload=use_ofl,
        max_params_flat=max_params_flat,
    )


def resolve_auto(inp: Inputs, algorithm: Arr, m: Memory) -> Arr:
    """``auto`` resolved. Paper rule: flat DiLoCo when the model fits one node, else PP-group DiLoCo.
    Grounded rule: PP only when it gives >= 2 DiLoCo groups; otherwise flat, reported as not fitting
    (a 1-group WAN pipeline is not a DiLoCo run)."""
    auto_pp = np.where(inp.g("auto_policy") > 0, ~m.fits & (m.pp_groups >= 2), ~m.fits)
    return np.where(algorithm == ALGO_AUTO, np.where(auto_pp, ALGO_PP_DILOCO, ALGO_DILOCO), algorithm)
