"""The vectorised core of the analytic model: `evaluate` computes every figure of a distributed run
for a whole array of configurations at once (spec/model.md sections 1-7).

Both the scalar `estimate()` and the planner call it, so each formula has one implementation. Inputs
are NumPy arrays that broadcast against each other; no Python loop over configurations. Units:
seconds, bits per second (links), bytes (memory), FLOP, FLOP/s, US dollars.

This module is the orchestration; each part lives in its own unit:
- `memory`: where the state lives, pipeline stages, the ``auto`` rule;
- `algorithms/`: one module per algorithm (``ddp``, ``diloco``, ``hierarchical``, ``pp_diloco``),
  registered in `algorithms.ALGORITHMS` by their code (the input ``algorithm``, `inputs.codes`);
- `topology`: one function per aggregation topology; `schedule`: blocking vs overlapped syncs
  (Streaming DiLoCo, Douillard et al. 2025, arXiv 2501.18512);
- `quality_stage`, `cost`, `traffic` (with the time breakdown).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.codes import STRAGGLER_CODES, Straggler
from dispersal.model.inputs.params import ModelParams
from dispersal.model.inputs.units import H100E_FLOP_PER_S
from dispersal.model.kernel import quality
from dispersal.model.kernel.algorithms import ALGORITHMS, Branch
from dispersal.model.kernel.choose import (
    BOUND_OUTPUTS,
    CHOICE_OUTPUTS,
    SCHEDULE_BOUND,
    choose,
    unwalked_bound,
)
from dispersal.model.kernel.context import Arr, BoolArr, Common, Inputs, as_float, broadcast
from dispersal.model.kernel.cost import COST_OUTPUTS, cost
from dispersal.model.kernel.efficiency import straggler_factor, uniform_code
from dispersal.model.kernel.memory import memory, resolve_auto
from dispersal.model.kernel.quality_stage import quality_stage
from dispersal.model.kernel.traffic import TIMELINE_OUTPUTS, TRAFFIC_OUTPUTS, timeline, traffic
from dispersal.model.kernel.trust import trust_stage

#: Inner-optimizer offload moves bf16 gradients to the host and bf16 weights back every inner step:
#: 2 bytes per parameter each way (ZeRO-Offload, Ren et al. 2021, arXiv 2101.06840, sec. 4).
OFFLOAD_TRANSFER_BYTES_PER_PARAM = 2.0

#: Every input `evaluate` reads, with its unit. `inputs.scenario.kernel_inputs` produces exactly these.
INPUTS: dict[str, str] = {
    "algorithm": "algorithm code (inputs.codes: 0 ddp, 1 flat DiLoCo, 2 hierarchical, 3 PP-group DiLoCo, "
    "4 auto: flat if it fits, else PP, 5 Decoupled DiLoCo, 6 site-pipeline DiLoCo)",
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
    "trust": "0 trusted peers, 1 permissionless (validators score and filter updates; kernel.trust); optional",
    "local_batch_tokens": "tokens per inner step per worker B",
    "micro_batches": "pipeline micro-batches M_mb",
    "inner_steps": "H; 0 = the smallest compute-bound H (H_min)",
    "duration_s": "time budget T",
    "tokens": "training tokens D; 0 = as many as the time budget allows",
    "moe_layers": "MoE layers with expert parallelism across nodes; 0 = dense or no EP",
    "pp_shard_sync": "bool: each PP stage syncs only its shard P/S (default) vs the whole model (paper)",
    "nodes_per_site": "nodes per site on one local fabric (site_pp_diloco); optional, absent = 1",
    "site_fabric_bits_per_s": "site fabric per node, bit/s (site_pp_diloco); optional",
    "site_fabric_latency_s": "site fabric one-way latency, s (site_pp_diloco); optional",
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
    "ddp_aggregation": "topology code of DDP's per-step gradient exchange (as aggregation; 1 ring, the "
    "dense all-reduce); optional, absent = ring",
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
    "multiplier g (dispersal.model.kernel.quality), 1 its loss-space conservative bound",
    "inner_optimizer": "inner optimizer of the replicas for the fitted quality model: 0 AdamW, 1 Muon "
    "(ignored by the paper's form)",
    "quorum_fraction": "decoupled: fraction of the learners the syncer waits for, (0, 1]; optional",
    "merge_rule": "decoupled: the syncer's merge, 0 mean, 1 norm-preserving; optional",
    "syncer_at_site": "bool, decoupled: the syncer sits at one learner's site (else a relay); optional",
    "site_groups": "hierarchical over [[site]] tables: the regional groups G (else floor(N / n_g)); optional",
    "regional_sync_time_s": "hierarchical over [[site]] tables: the slowest group's paced regional sync, s; "
    "optional",
    "fragment_sync_time_s": "[[site]] tables: one Streaming fragment's paced sync before the straggler "
    "factor, s; optional",
    "schedule_rule": "0 the paper's schedule (the smallest H, and H_reg, that hides the sync), 1 default "
    "mode's: the grid schedule that maximises C_quality (kernel.choose); optional, absent = 0",
    "regional_rounds": "hierarchical: regional rounds per global sync H_reg; 0 = chosen by the rule; optional",
    "quality_floor": "FLOP: a search that asks only whether C_quality reaches this floor; a configuration "
    "whose first schedule reaches it is not walked further (kernel.choose); optional, absent = none",
    "schedule_walk": "0: keep default mode's first schedule, no walk (a caller that reads the private output "
    "_schedule_bound first, kernel.choose); optional, absent = 1",
}


def evaluate(
    x: Mapping[str, npt.ArrayLike],
    p: ModelParams,
    overrides: Mapping[str, npt.ArrayLike] | None = None,
    quality_params: quality.QualityLike | None = None,
    outputs: Collection[str] | None = None,
) -> dict[str, Arr]:
    """Evaluate the analytic model on arrays of configurations.

    Args:
        x: every key of `INPUTS`, each an array (or scalar) broadcastable to a common shape.
        p: published fits and heuristics (`ModelParams`).
        overrides: arrays replacing scalar fields of `p` (Monte Carlo draws), same names.
        quality_params: the compute-space quality fit (`dispersal.model.kernel.quality`; None = the
            shipped fit); Monte Carlo passes `QualitySamples` that broadcast against the inputs.
        outputs: the outputs wanted (None: all of `OUTPUTS`); stages none of them needs (cost,
            traffic, time breakdown) are skipped.

    Returns:
        A dict of float arrays of the common shape; keys listed in `OUTPUTS` (or `outputs`, in that
        order). Feasibility flags are 0/1 floats (``fits``, ``time_ok``, ``under_cap``, ``feasible``).

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

    Large calls run in chunks of about `CHUNK_CONFIGS` configurations along the first axis: the
    ~200 temporaries of a chunk stay in cache instead of being fresh pages of memory each (on a 1M
    sweep page faults were two thirds of the time); default mode's schedule choice runs on blocks of
    `WALK_CONFIGS`, each walk round one chunked call. Results are the same to rounding (Newton's
    iteration count in the Chinchilla inversion is per chunk).
    """
    shape = np.broadcast_shapes(*(np.shape(v) for v in x.values()))
    want = _wanted(outputs)
    with np.errstate(all="ignore"):
        return _in_chunks(_evaluate, Inputs(x, p, overrides or {}, quality_params, shape), want, WALK_CONFIGS)


def _chunked(inp: Inputs, want: frozenset[str] | None) -> dict[str, Arr]:
    """`_evaluate_once` in chunks of about `CHUNK_CONFIGS` configurations along the first axis."""
    return _in_chunks(_evaluate_once, inp, want, CHUNK_CONFIGS)


def _in_chunks(
    f: Callable[[Inputs, frozenset[str] | None], dict[str, Arr]],
    inp: Inputs,
    want: frozenset[str] | None,
    configs: int,
) -> dict[str, Arr]:
    """`f` on pieces of about `configs` configurations along the first axis of `inp`, put together."""
    shape = inp.shape
    rows = max(1, configs // max(1, math.prod(shape[1:]))) if shape else 1
    if not shape or rows >= shape[0]:
        return f(inp, want)
    out: dict[str, Arr] = {}
    for a in range(0, shape[0], rows):
        b = min(a + rows, shape[0])
        part = f(
            Inputs(
                _rows(inp.x, shape, a, b),
                inp.p,
                _rows(inp.ov, shape, a, b),
                _quality_rows(inp.quality_params, shape, a, b),
                (b - a, *shape[1:]),
            ),
            want,
        )
        if not out:
            out = {k: np.empty(shape) for k in part}
        for k, v in part.items():
            out[k][a:b] = v
    return out


#: Configurations per chunk of a large call (the cache-sized piece; 8,192 measured best on a 1M sweep).
CHUNK_CONFIGS = 8192
#: Configurations per schedule choice (`kernel.choose`): its walk's rounds evaluate the configurations
#: still moving in one call (chunked), so a larger piece means fewer, larger calls.
WALK_CONFIGS = 16384


def _rows(d: Mapping[str, npt.ArrayLike], shape: tuple[int, ...], a: int, b: int) -> dict[str, npt.ArrayLike]:
    """Rows a:b (first axis of the common `shape`) of every array that spans that axis; others as given."""
    out: dict[str, npt.ArrayLike] = {}
    for k, v in d.items():
        arr = np.asarray(v)
        out[k] = arr[a:b] if arr.ndim == len(shape) and arr.shape[0] == shape[0] else arr
    return out


def _quality_rows(
    q: quality.QualityLike | None, shape: tuple[int, ...], a: int, b: int
) -> quality.QualityLike | None:
    """Rows a:b of Monte Carlo quality draws (fixed parameters as given)."""
    if not isinstance(q, quality.QualitySamples):
        return q
    arrays = {f.name: getattr(q, f.name) for f in dataclasses.fields(q)}
    rows: dict[str, Any] = _rows({k: v for k, v in arrays.items() if isinstance(v, np.ndarray)}, shape, a, b)
    return dataclasses.replace(q, **rows)


def _wanted(outputs: Collection[str] | None) -> frozenset[str] | None:
    if outputs is None:
        return None
    unknown = sorted(set(outputs) - set(OUTPUTS) - BOUND_OUTPUTS - CHOICE_OUTPUTS)
    if unknown:
        raise ValueError(f"unknown kernel outputs {unknown}; known: {', '.join(OUTPUTS)}")
    return frozenset(outputs)


def _common(inp: Inputs) -> tuple[Common, Arr]:
    """The shared stage: compute per inner step, memory, the resolved algorithm code of each
    configuration (``auto`` decided), offload time and the link inputs every algorithm reads."""
    g, p = inp.g, inp.p
    N, P, B, Mmb = g("num_nodes"), g("params"), g("local_batch_tokens"), g("micro_batches")
    F_eff = g("node_peak_flop_per_s") * g("mfu")
    T_comp = 6.0 * g("active_params") * B / F_eff
    T_ep = 2.0 * g("latency_s") * g("moe_layers")
    hidden = p.hidden_size_coeff * np.sqrt(P)
    mem = memory(inp, P, B, Mmb, N, hidden)
    codes = resolve_auto(inp, g("algorithm"), mem)
    # An algorithm may keep its inner optimizer in accelerator memory (a pipeline does).
    for unit in ALGORITHMS.values():
        if not unit.offload:
            mem.use_offload = mem.use_offload & (codes != unit.code)
    # Offloading costs host-link time every inner step: bf16 gradients down and bf16 weights up,
    # 2 bytes/param each way, each chip moving its 1/chips share (ZeRO-Offload, Ren et al. 2021,
    # arXiv 2101.06840 sec. 4); counted as not overlapped with compute (conservative).
    T_ofl = np.where(
        mem.use_offload,
        OFFLOAD_TRANSFER_BYTES_PER_PARAM * P / g("chips_per_node") / g("host_link_bytes_per_s"),
        0.0,
    )
    S = mem.stages
    act = B * hidden * g("activation_bytes_per_value") * 8.0 / g("activation_compression")
    fragments = np.maximum(g("fragments"), 1.0)
    agg = g("aggregation")
    # One straggler model for every configuration (the usual case): a scalar code, so each straggler
    # factor computes only that model without checking again.
    strag: Arr = g("straggler")
    one_model = uniform_code(strag)
    if one_model is not None:
        strag = np.asarray(one_model)
    # (a Monte Carlo draw may override the coefficients per configuration)
    coeffs = (inp.k("straggler_coeff_relay"), inp.k("straggler_coeff_sync"))
    c = Common(
        inp=inp,
        shape=inp.shape,
        streaming=g("streaming") > 0,
        N=N,
        P=P,
        Pa=g("active_params"),
        B=B,
        Mmb=Mmb,
        up=g("up_bits_per_s"),
        down=g("down_bits_per_s"),
        lat=g("latency_s"),
        strag=strag,
        h_req=g("inner_steps"),
        F_eff=F_eff,
        T_comp=T_comp,
        T_ep=T_ep,
        T_ofl=T_ofl,
        T_step=T_comp + T_ep + T_ofl,
        hidden=hidden,
        mem=mem,
        act_bits=np.where(S > 1, act, 0.0),
        wire=g("wire_bits_per_param"),
        shared=g("link_shared") > 0,
        fragments=fragments,
        one_fragment=bool(np.all(fragments == 1.0)),
        tau=g("overlap_depth"),
        bwd=g("sync_backward_overlap"),
        f_N=straggler_factor(N, strag, p, coeffs),
        strag_coeffs=coeffs,
        agg=agg,
        agg_codes=frozenset(int(a) for a in np.unique(agg)),
    )
    # An algorithm that cannot run a configuration falls back (hierarchical with < 2 groups: flat).
    for unit in ALGORITHMS.values():
        if unit.runs is not None and unit.fallback is not None:
            here = codes == unit.code
            if here.any():
                codes = np.where(here & ~unit.runs(c), unit.fallback, codes)
    # An algorithm that ``auto`` may resolve to where it beats the memory stage's choice.
    for unit in ALGORITHMS.values():
        if unit.auto is not None:
            codes = unit.auto(c, codes)
    return c, codes


class _Picker:
    """Reads a `Branch` field for every configuration from the branch of its algorithm (NaN where the
    code is none of them), computing only the branches present, each field once. (Running a branch
    only on its own configurations, gathered and scattered back, measured slower on a 1M sweep.)"""

    def __init__(self, c: Common, codes: Arr) -> None:
        self.c = c
        masks = {code: codes == code for code in ALGORITHMS}
        present = [code for code, m in masks.items() if m.any()]
        self.branches: dict[int, Branch] = {code: ALGORITHMS[code].branch(c) for code in present}
        self.masks = [masks[code] for code in present]
        # Every configuration runs one of the present branches (the usual case): the last needs no mask.
        covered = np.logical_or.reduce(self.masks) if self.masks else np.zeros(c.shape, dtype=bool)
        self.complete = bool(covered.all())
        self.defaults: dict[str, Arr] = {"offload_per_step": c.T_ofl, "burst_rate": c.up}
        self.cache: dict[str, Arr] = {}

    def __call__(self, name: str) -> Arr:
        v = self.cache.get(name)
        if v is None:
            vals = [getattr(b, name) for b in self.branches.values()]
            vals = [self.defaults[name] if a is None else a for a in vals]
            v = self.cache[name] = self._select(vals)
        return v

    def constant(self, values: Mapping[int, float]) -> Arr:
        """A per-algorithm constant for every configuration (NaN for an unknown code)."""
        return self._select([values[code] for code in self.branches])

    def _select(self, vals: list[npt.ArrayLike]) -> Arr:
        # np.select's semantics (first true mask, else NaN) as nested where; np.choose is slower.
        # Branches that give the same array (or number) share one mask: one pass fewer each.
        if self.complete and len(vals) == 1:  # one algorithm in the call (the usual case): its value
            only = as_float(vals[0])
            return _read_only(only) if only.shape == self.c.shape else broadcast(only, self.c.shape)
        masks: list[BoolArr] = []
        uniq: list[npt.ArrayLike] = []
        for m, v in zip(self.masks, vals, strict=True):
            for i, u in enumerate(uniq):
                if _same_value(u, v):  # into the first branch with that value
                    masks[i] = masks[i] | m
                    break
            else:
                masks.append(m)
                uniq.append(v)
        if self.complete:
            last = as_float(uniq[-1])
            # (a full-shape array as it is; a number by the cheap zero-stride view)
            out = _read_only(last) if last.shape == self.c.shape else broadcast(last, self.c.shape)
            rest = zip(masks[:-1], uniq[:-1], strict=True)
        else:
            out = np.full(self.c.shape, np.nan)
            rest = zip(masks, uniq, strict=True)
        for m, v in reversed(list(rest)):
            out = np.where(m, v, out)
        return np.asarray(out, dtype=np.float64)


def _read_only(a: Arr) -> Arr:
    """A read-only view of `a` (as `np.broadcast_to` gives, without its checks)."""
    v = a.view()
    v.flags.writeable = False
    return v


def _same_value(a: npt.ArrayLike, b: npt.ArrayLike) -> bool:
    """The same array object, or the same number."""
    if a is b:
        return True
    return isinstance(a, float) and isinstance(b, float) and a == b


def _evaluate(inp: Inputs, want: frozenset[str] | None) -> dict[str, Arr]:
    """One evaluation; where default mode's schedule rule applies (input ``schedule_rule``), the
    schedule (H, H_reg) that maximises C_quality over a fixed grid (`kernel.choose`)."""
    if inp.has("schedule_rule") and bool(np.any(inp.g("schedule_rule") > 0)):
        return choose(inp, want, _chunked, requality)
    if want is None or want.isdisjoint(CHOICE_OUTPUTS):
        return _chunked(inp, want)
    # No schedule is chosen: each configuration's bound over the schedules is its own C_quality.
    out = _chunked(inp, (want - CHOICE_OUTPUTS) | {"c_quality_flop"})
    bound = unwalked_bound(out)
    out = {k: v for k, v in out.items() if k in want}
    out[SCHEDULE_BOUND] = bound
    return out


def _evaluate_once(inp: Inputs, want: frozenset[str] | None) -> dict[str, Arr]:
    g = inp.g
    c, codes = _common(inp)
    pick = _Picker(c, codes)
    N, B = c.N, c.B
    steps_per_cycle = pick("steps_per_cycle")
    replicas = pick("replicas")
    tr = trust_stage(c, replicas, pick("cycle"))
    cyc = tr.cycle_s
    h_pen = pick("inner_steps_effective")
    fits_mode = pick("fits") > 0
    enough_workers = pick("enough_workers") > 0

    # Backup workers buy a smaller straggler factor with spare nodes: only N / 1.1 do useful work.
    spare = np.where(
        (c.strag == STRAGGLER_CODES[Straggler.BACKUP]) & (N > 1), 1.0 / inp.k("backup_overprovision"), 1.0
    )
    tokens_per_s = steps_per_cycle * B * pick("workers") * spare / cyc
    T_budget, D_req = g("duration_s"), g("tokens")
    run_s = np.where(D_req > 0, D_req / tokens_per_s, T_budget)
    D = np.where(D_req > 0, D_req, tokens_per_s * T_budget)
    time_ok = run_s <= T_budget * (1.0 + 1e-12)
    # A run that cannot progress (no workers) takes forever; its time breakdown is left at zero.
    n_cycles = np.where(np.isfinite(run_s), run_s / cyc, 0.0)
    C_thr = 6.0 * c.Pa * D

    outer = pick.constant({code: float(u.outer_sync) for code, u in ALGORITHMS.items()}) > 0
    # The quality stage's arguments besides tokens and H (`BOUND_OUTPUTS`: `kernel.choose`'s bound
    # calls the stage again with them, `requality`).
    stage = {
        "replicas": replicas,
        # updates that validation discards are compute spent without reaching the model
        "useful_update_fraction": tr.useful_fraction,
        "_outer_sync": outer.astype(np.float64),
        "eta_act": pick("eta_act"),
        "_merge_rule": pick("merge_rule"),
        # the tail's per-replica batch: tokens per inner step of one replica
        "_replica_batch_tokens": B * pick("workers") * spare / np.maximum(replicas, 1.0),
        "_quality_factor": as_float(tr.quality_factor),
    }
    q = _quality(inp, stage, D, h_pen)
    C_local = q["c_local_flop"]

    node_fp16 = g("node_fp16_flop_per_s")
    cap_f, cap_m = g("cap_flop_per_s"), g("cap_memory_bytes")
    # The rule counts the nodes of one site (one local fabric) as one cluster.
    site = pick("site_nodes")
    under_flop = (cap_f <= 0) | (node_fp16 * site <= cap_f * (1.0 + 1e-12))
    under_mem = (cap_m <= 0) | (g("node_counted_memory_bytes") * site <= cap_m * (1.0 + 1e-12))
    under_cap = under_flop & under_mem
    feasible = fits_mode & time_ok & under_cap & enough_workers & np.isfinite(C_local)
    mem = c.mem
    r = {
        "feasible": feasible.astype(np.float64),
        "fits": fits_mode.astype(np.float64),
        "time_ok": time_ok.astype(np.float64),
        "under_cap": under_cap.astype(np.float64),
        "under_flop_cap": under_flop.astype(np.float64),
        "under_memory_cap": under_mem.astype(np.float64),
        "algorithm_resolved": pick.constant({code: float(code) for code in ALGORITHMS}),
        "memory_required_bytes_per_node": pick("memory_per_node"),
        "pipeline_stages": pick("stages"),
        "pipeline_stages_needed": mem.stages,
        "groups": pick("groups"),
        "replicas": replicas,
        "node_effective_flop_per_s": c.F_eff,
        "node_h100_equivalents": node_fp16 / H100E_FLOP_PER_S,
        "step_compute_time_s": c.T_comp,
        "step_time_s": pick("step_time"),
        "expert_parallel_latency_s": c.T_ep,
        "sync_time_s": pick("sync_time"),
        "regional_sync_time_s": pick("regional_sync_time"),
        "inner_steps": pick("inner_steps"),
        "regional_rounds": pick("regional_rounds"),
        "inner_steps_effective": h_pen,
        "staleness_outer_steps": pick("staleness"),
        "outer_step_time_s": cyc,
        "num_outer_steps": n_cycles,
        "payload_bits": pick("payload_bits"),
        "activation_bits_per_boundary": c.act_bits,
        "tokens": D,
        "tokens_per_s": tokens_per_s,
        "run_time_s": run_s,
        "c_raw_flop": C_thr,
        **q,
        "mfu_global": C_local / (N * g("node_peak_flop_per_s") * run_s),
        **(cost(inp, N + tr.validator_nodes, run_s) if _needs(want, COST_OUTPUTS) else {}),
        "validation_time_s": tr.validation_time_s,
        "validator_nodes": tr.validator_nodes,
        "useful_update_fraction": tr.useful_fraction,
        **(traffic(c, pick, cyc) if _needs(want, TRAFFIC_OUTPUTS) else {}),
        "utilisation": steps_per_cycle * pick("compute_per_step") / cyc,
        "max_params_flat": mem.max_params_flat,
        "host_memory_required_bytes_per_node": pick("host_per_node"),
        "offload": mem.use_offload.astype(np.float64),
        "offload_time_s": c.T_ofl,
        **(timeline(c, pick, cyc, n_cycles) if _needs(want, TIMELINE_OUTPUTS) else {}),
    }
    out = r if want is None else {k: r[k] for k in OUTPUTS if k in want}
    if want is not None and not want.isdisjoint(BOUND_OUTPUTS):
        # What `kernel.choose` reads to bound a configuration's C_quality over every schedule
        # (`requality`): the quality stage's other arguments, and the tokens of an all-compute run
        # (no schedule trains more: the outer step is at least its inner steps' compute).
        bound = {
            **stage,
            "_tokens_all_compute": np.where(
                D_req > 0, D_req, B * pick("workers") * spare / pick("step_time") * T_budget
            ),
        }
        # (the public ones among BOUND_OUTPUTS are in `out` already)
        private = (k for k in BOUND_OUTPUTS if k in want and k.startswith("_"))
        out.update({k: np.broadcast_to(as_float(bound[k]), c.shape) for k in private})
    return out


def requality(inp: Inputs, r: Mapping[str, Arr], tokens: Arr, h_eff: Arr) -> Arr:
    """C_quality (FLOP) of the configurations of `inp` had they trained `tokens` with the quality
    penalty's H at `h_eff`, all else as their evaluation `r` (its `BOUND_OUTPUTS`) found it: the
    quality stage alone (`_quality`, as `_evaluate_once` calls it). At the evaluation's own tokens and
    H it is the evaluation's C_quality."""
    with np.errstate(all="ignore"):
        return _quality(inp, r, tokens, h_eff)["c_quality_flop"]


def _quality(inp: Inputs, r: Mapping[str, Arr], tokens: Arr, h_eff: Arr) -> dict[str, Arr]:
    """The quality stage (`quality_stage`) of a run that trains `tokens` (the useful share of them
    reaching the model) with the penalty's H at `h_eff`; `r` holds its other arguments by their
    `BOUND_OUTPUTS` names."""
    g = inp.g
    replicas = r["replicas"]
    used = tokens * r["useful_update_fraction"]
    return quality_stage(
        inp,
        used,
        6.0 * g("active_params") * used,
        replicas,
        h_eff,
        (r["_outer_sync"] > 0) & (replicas > 1),
        r["eta_act"],
        g("streaming") > 0,
        np.maximum(g("fragments"), 1.0),
        r["_merge_rule"],
        replica_batch_tokens=r["_replica_batch_tokens"],
        quality_factor=r["_quality_factor"],
    )


def _needs(want: frozenset[str] | None, stage: tuple[str, ...]) -> bool:
    return want is None or not want.isdisjoint(stage)


OUTPUTS: tuple[str, ...] = (
    "feasible",
    "fits",
    "time_ok",
    "under_cap",
    "under_flop_cap",
    "under_memory_cap",
    "algorithm_resolved",
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
    "staleness_outer_steps",
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
    "validation_time_s",
    "validator_nodes",
    "useful_update_fraction",
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
