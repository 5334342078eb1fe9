"""Site-pipeline DiLoCo (DiLoCoX, Qi et al. 2025, arXiv 2506.21263): a site is n_s nodes on a fast
local fabric; a model that does not fit one node runs as an S-stage GPipe pipeline (Huang et al. 2019,
arXiv 1811.06965) on that fabric; the k = floor(n_s / S) pipelines of a site are data parallel (their
stage shards all-reduced on the fabric every step: one DiLoCo replica per site), and the
M = floor(N / n_s) sites run DiLoCo over the WAN, each stage's shard syncing with its counterparts.

Unlike `pp_diloco`, no pipeline traffic touches the WAN. Each node keeps its own WAN link (the kernel's
links are per node), so a site's k copies of a stage each send 1/k of that stage's shard P / S.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dispersal.model.inputs.codes import ALGO_AUTO, ALGO_PP_DILOCO, ALGO_SITE_PP
from dispersal.model.inputs.scenario import DEFAULT_SITE_FABRIC_BITS_PER_S, DEFAULT_SITE_FABRIC_LATENCY_S
from dispersal.model.kernel import schedule, topology
from dispersal.model.kernel.algorithms import pp_diloco
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch, pipelined
from dispersal.model.kernel.context import Arr, BoolArr, Common


def _site(c: Common) -> tuple[Arr, Arr, Arr, Arr, Arr]:
    """(n_s nodes per site, fabric bit/s, fabric latency s, S stages, k pipelines per site).

    S: the fewest stages whose shards (state + every micro-batch's activations, no offload: the
    inner optimizer stays in accelerator memory in a pipeline) fit one node; 1 where the whole
    model does (then the site is k = n_s data-parallel nodes)."""
    n_s = c.g("nodes_per_site") if c.inp.has("nodes_per_site") else np.ones(c.shape)
    bw = c.g("site_fabric_bits_per_s") if c.inp.has("site_fabric_bits_per_s") else None
    lat = c.g("site_fabric_latency_s") if c.inp.has("site_fabric_latency_s") else None
    m = c.mem
    need = np.maximum(np.ceil(m.pp_hbm_total / m.usable), np.ceil(m.host_plain / m.host_mem))
    S = np.maximum(1.0, need)
    return (
        n_s,
        np.full(c.shape, DEFAULT_SITE_FABRIC_BITS_PER_S) if bw is None else bw,
        np.full(c.shape, DEFAULT_SITE_FABRIC_LATENCY_S) if lat is None else lat,
        S,
        np.floor(n_s / S),
    )


def runs(c: Common) -> BoolArr:
    """A site holds at least one whole pipeline, and there is at least one site."""
    n_s, _, _, _, k = _site(c)
    return np.asarray((k >= 1) & (np.floor(c.N / n_s) >= 1), dtype=bool)


def branch(c: Common) -> Branch:
    """Site-pipeline DiLoCo's figures.

    Step: T_pp = (M_mb + S - 1)(t_c + t_link) + T_ep, t_c = 6 P_a B / (F_eff S M_mb), t_link =
    (2 A / M_mb / bw_fab + lat_fab) f(S) for S > 1 (A = B h x bytes x 8 activation bits, uncompressed
    on the fabric), T_ep the expert-parallel latency (`moe_layers`, over the WAN as everywhere). The k
    pipelines all-reduce each stage's gradients (P / S at the dense width) in a ring on the fabric, T_dp = 2 (k - 1) (V / k /
    bw_fab + lat_fab), hidden behind the step's overlap fraction: T_step = T_pp + max(0, T_dp - o T_pp).
    Sync: M sites, each of a stage's k copies sends P / (S k) over its own WAN link with the scenario's
    topology (`topology.sync`), every H steps (`schedule`; blocking or overlapped)."""
    Mmb = c.Mmb
    n_s, bw_f, lat_f, S, k = _site(c)
    M = np.floor(c.N / n_s)
    A_bits = np.where(S > 1, c.B * c.hidden * c.g("activation_bytes_per_value") * 8.0, 0.0)
    t_c = 6.0 * c.Pa * c.B / (c.F_eff * S * Mmb)
    link = np.where(S > 1, ((2.0 * A_bits / Mmb) / bw_f + lat_f) * c.straggler(S), 0.0)
    # Expert parallelism as the field defines it (experts spread over the WAN), as in every unit.
    T_pp = (Mmb + S - 1.0) * (t_c + link) + c.T_ep
    v_dp = c.P / S * c.g("dense_aggregate_bits_per_param")
    T_dp = np.where(k > 1, 2.0 * (k - 1.0) * (v_dp / np.maximum(k, 1.0) / bw_f + lat_f), 0.0)
    T_step = T_pp + np.maximum(0.0, T_dp - c.g("ddp_overlap_fraction") * T_pp)
    shard = c.P / (S * np.maximum(k, 1.0))
    f_M = c.straggler(M)
    T_sync, u, d = topology.sync(c, shard, M, f_M, c.up, c.down, c.lat)
    T_frag = (
        T_sync if c.one_fragment else topology.sync(c, shard / c.fragments, M, f_M, c.up, c.down, c.lat)[0]
    )
    zero = np.zeros(c.shape)
    H, cyc = schedule.diloco_steps(c, M, T_sync, T_frag, T_step, zero)
    return pipelined(
        c,
        stages=S,
        stage_compute=t_c,
        cycle=cyc,
        inner_steps=H,
        step_time=T_step,
        workers=M * k,
        replicas=M,
        enough_workers=(M >= 1) & (k >= 1),
        sync_time=T_sync,
        straggler=f_M,
        payload_bits=shard * c.wire,
        sync_up=u,
        sync_down=d,
        sync_paper=shard * c.wire * (M > 1),
        pipeline_comm_per_step=(Mmb + S - 1.0) * link + (T_step - T_pp),
        site_nodes=n_s,
    )


def _rate(b: Branch) -> Arr:
    """Inner steps x workers per second (tokens per second / B)."""
    return np.asarray(b.steps_per_cycle * b.workers / b.cycle, dtype=np.float64)


def auto(c: Common, codes: Arr) -> Arr:
    """``auto`` under the grounded rule (default mode): where it chose a WAN pipeline (`pp_diloco`)
    and the sites can hold the pipeline with >= 2 sites, run the pipelines inside the sites instead
    when that trains at least as many tokens per second, fits, and a site is under the covered-cluster
    rule."""
    if not c.inp.has("nodes_per_site") or not (c.g("nodes_per_site") > 1).any():
        return codes
    asked = c.g("algorithm") == ALGO_AUTO
    cand = asked & (codes == ALGO_PP_DILOCO) & (c.g("auto_policy") > 0) & runs(c)
    cand &= np.floor(c.N / c.g("nodes_per_site")) >= 2
    if not cand.any():
        return codes
    site, wan = branch(c), pp_diloco.branch(c)
    better = (_rate(site) >= _rate(wan)) & site.fits & _site_under_cap(c)
    return np.where(cand & better, float(ALGO_SITE_PP), codes)


def _site_under_cap(c: Common) -> BoolArr:
    """A whole site (n_s nodes) under the covered-cluster rule, as the kernel's feasibility stage
    counts it with `Branch.site_nodes`: ``auto`` never trades a feasible WAN pipeline for a site over it."""
    n_s = c.g("nodes_per_site")
    cap_f, cap_m = c.g("cap_flop_per_s"), c.g("cap_memory_bytes")
    under_f = (cap_f <= 0) | (c.g("node_fp16_flop_per_s") * n_s <= cap_f * (1.0 + 1e-12))
    under_m = (cap_m <= 0) | (c.g("node_counted_memory_bytes") * n_s <= cap_m * (1.0 + 1e-12))
    return np.asarray(under_f & under_m, dtype=bool)


def notes(asked: str, resolved: str, r: Mapping[str, float], group_size: int) -> list[str]:
    """Why it runs (or does not), and the covered-cluster consequence of a site."""
    out = []
    if resolved == "site_pp_diloco":
        S, M = int(r["pipeline_stages"]), int(r["groups"])
        if asked != "site_pp_diloco":
            out.append(
                f"the model does not fit one node: {S}-stage pipelines kept inside each site's fabric, "
                f"DiLoCo across {M} sites (instead of a WAN pipeline)"
            )
        out.append("a site's nodes share one fabric: the covered-cluster rule counts them as one cluster")
    if asked == "site_pp_diloco" and resolved != "site_pp_diloco":
        out.append(
            "nodes_per_site cannot hold one whole pipeline (or num_nodes < nodes_per_site): "
            f"ran {resolved} instead of site_pp_diloco"
        )
    return out


UNIT = AlgorithmUnit(
    code=ALGO_SITE_PP,
    name="site_pp_diloco",
    outer_sync=True,
    branch=branch,
    runs=runs,
    fallback=ALGO_PP_DILOCO,
    offload=False,
    notes=notes,
    auto=auto,
)
