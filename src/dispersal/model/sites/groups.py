"""Heterogeneous sites under the grouped algorithms: hierarchical, PP-group and Decoupled DiLoCo,
and each Streaming DiLoCo fragment paced on its own edge.

`sites.reduce` reduces the sites to the identical-node inputs whose whole-model sync over all nodes
has the paced time. The algorithms below sync other payloads among other node sets; each gets the
reduced inputs (and, where one figure is not a link, an optional kernel input) that make the kernel's
own formula give the paced figure. M nodes in ring order (sites as listed, a site's nodes next to
each other); `paced(V, nodes, links)` is `site_links.paced_sync` (the slowest ring edge, the slowest
upload then the busiest downlink, ...); f(n) the straggler factor.

**Hierarchical DiLoCo** (Rahman 2026 sec. 3, as `algorithms.hierarchical`: groups sync on regional
links every H_in inner steps, the group representatives over the WAN every H_reg regional rounds):
    groups = the sites' regions (sites of one ``region`` label = one group; a site without a label
    is a group of its own), G of them; fewer than 2 run flat DiLoCo (as the unit's fallback)
    regional link of a node = its site's resolved regional link (symmetric bit/s, latency: the
    site's own min(up, down) and latency unless the scenario splits the links)
    T_reg = max over groups r of paced(V, nodes of r, regional links) x f(n_r)   (the slowest group;
            paper relay: max over r's nodes of 2V / reg_i + lat_i, the unit's paper form)
    T_glob = paced(V, representatives, WAN links) x f(G), a group's representative = the first node
            of its first listed site (assumption: the operator lists the best-connected site first)
    kernel inputs: ``site_groups`` = G, ``regional_sync_time_s`` = T_reg, group_size = the largest
    group (its leader's regional traffic), the WAN links = T_glob's pacing edge / nodes.

**PP-group DiLoCo** (Huang et al. 2019 GPipe; Rahman 2026 sec. 3): G = floor(M / S) pipelines of S
consecutive nodes in ring order (S from the pacing site's memory, the kernel's count), stage k of
pipeline g on node g S + k. A GPipe schedule is paced by its slowest stage and its slowest boundary:
every micro-batch slot waits for both (the kernel's (M_mb + S - 1)(t_c + t_link)), so only the
slowest stage compute (the slowest site's, as for flat runs) and the slowest boundary link matter:
    boundary k -> k+1: min(pp_k, pp_k+1) with the mean of the two pipeline-link latencies; the one
    the kernel's step time is slowest with is the reduced pipeline link
    sync: stage k's shard (P / S, default mode) among the G nodes holding stage k; the slowest stage
    paces the outer step: T_sync = max_k paced(V_S, {g S + k}) x f(G)

**Streaming fragments** (Douillard et al. 2025, arXiv 2501.18512): each fragment's payload V / F is
paced on its own edge (a latency-bound small payload may be slowed by a different edge than the
whole model): kernel input ``fragment_sync_time_s`` = paced(V / F, ...) (before f), for flat and
PP-group DiLoCo.

**Decoupled DiLoCo** (Douillard et al. 2026, arXiv 2604.21428): learners never wait, so each site
trains at its own step time T_i: tokens/s = sum_i n_i B_i / T_i (not M x the slowest). The kernel
carries one step time, so the reduced step time is T_eq = M B_mean / sum_i n_i B_i / T_i (the node
peak scaled to give it). The syncer merges once K = ceil(q M) learners have delivered: the K-th
fastest fragment round trip (each learner's own links, the unit's topology with a ring as a relay)
sets the staleness, so the reduced links are that learner's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dispersal.model.inputs.codes import (
    AGG_PAPER,
    AGG_RING,
    ALGO_AUTO,
    ALGO_DDP,
    ALGO_DECOUPLED,
    ALGO_DILOCO,
    ALGO_HIERARCHICAL,
    ALGO_PP_DILOCO,
)
from dispersal.model.inputs.decoupled import DEFAULT_QUORUM_FRACTION, quorum_learners
from dispersal.model.inputs.params import ModelParams
from dispersal.model.kernel import topology
from dispersal.model.kernel.context import Arr
from dispersal.model.kernel.efficiency import straggler_factor
from dispersal.model.sites.links import PacedSync, paced_sync

if TYPE_CHECKING:
    from dispersal.model.inputs.scenario import Scenario

Links = tuple[Arr, Arr, Arr, list[int]]
Rows = list[tuple[int, dict[str, Any], dict[str, float]]]


def resolved_algorithm(x: dict[str, Any], params: ModelParams) -> int:
    """The algorithm the kernel runs for the reduced inputs x (auto resolved)."""
    from dispersal.model.inputs.scenario import as_arrays
    from dispersal.model.kernel.kernel import evaluate

    if int(x["algorithm"]) != ALGO_AUTO:
        return int(x["algorithm"])
    r = evaluate(as_arrays(x), params, outputs=("algorithm_resolved",))
    return int(np.asarray(r["algorithm_resolved"]))


def _subset(links: Links, nodes: Sequence[int]) -> Links:
    up, down, lat, owner = links
    idx = np.asarray(nodes, dtype=int)
    return up[idx], down[idx], lat[idx], [owner[i] for i in nodes]


def _set_links(x: dict[str, Any], sync: PacedSync) -> None:
    x["up_bits_per_s"], x["down_bits_per_s"], x["latency_s"] = (
        sync.up_bits_per_s,
        sync.down_bits_per_s,
        sync.latency_s,
    )


def _regions(s: Scenario, owner: list[int]) -> list[tuple[str, list[int]]]:
    """(label, node indices in ring order) of each group: sites of one region; an unlabelled site alone."""
    groups: dict[str, list[int]] = {}
    for k, i in enumerate(owner):
        site = s.sites[i]
        groups.setdefault(site.region or f"site {site.name}", []).append(k)
    return list(groups.items())


def _strag(n: float, x: dict[str, Any], params: ModelParams) -> float:
    return float(straggler_factor(n, np.asarray(float(x["straggler"])), params))


def hierarchical(
    s: Scenario, x: dict[str, Any], params: ModelParams, rows: Rows, links: Links, names: Sequence[str]
) -> tuple[dict[str, Any], PacedSync | None]:
    """Regional groups from the sites' regions (module docstring); None: fewer than 2 groups."""
    owner = links[3]
    groups = _regions(s, owner)
    x["site_groups"] = float(len(groups))
    if len(groups) < 2:
        return x, None
    code = int(x["aggregation"])
    v, n_params = float(x["params"]) * float(x["wire_bits_per_param"]), float(x["params"])
    dense = float(x["dense_aggregate_bits_per_param"])
    per_site = {i: xi for i, xi, _ in rows}
    reg = np.asarray([float(per_site[i]["regional_bits_per_s"]) for i in owner])
    reg_lat = np.asarray([float(per_site[i]["regional_latency_s"]) for i in owner])
    t_reg, slowest = 0.0, ""
    for label, nodes in groups:
        f = _strag(len(nodes), x, params)
        idx = np.asarray(nodes, dtype=int)
        if code == AGG_PAPER:
            t = float(np.max(2.0 * v / reg[idx] + reg_lat[idx])) * f
        else:
            regional = (reg[idx], reg[idx], reg_lat[idx], [owner[k] for k in nodes])
            t = paced_sync(code, v, n_params, dense, regional, names).time_s * f
        if t > t_reg or not slowest:
            t_reg, slowest = t, label
    x["regional_sync_time_s"] = t_reg
    x["group_size"] = float(max(len(nodes) for _, nodes in groups))
    reps = [nodes[0] for _, nodes in groups]
    glob = paced_sync(code, v, n_params, dense, _subset(links, reps), names)
    _set_links(x, glob)
    pacing = f"regional sync of {slowest} (the slowest of {len(groups)} groups); global sync: {glob.pacing}"
    return x, dataclasses.replace(glob, pacing=pacing)


def _kernel(x: dict[str, Any], params: ModelParams, outputs: tuple[str, ...]) -> dict[str, Arr]:
    from dispersal.model.inputs.scenario import as_arrays
    from dispersal.model.kernel.kernel import evaluate

    return evaluate(as_arrays(x), params, outputs=outputs)


def pp_groups(
    x: dict[str, Any], params: ModelParams, rows: Rows, links: Links, names: Sequence[str]
) -> tuple[dict[str, Any], PacedSync | None]:
    """Pipelines of S consecutive nodes (module docstring); None: no replica sync to pace."""
    r = _kernel(x, params, ("pipeline_stages", "groups"))
    stages, n_groups = int(np.asarray(r["pipeline_stages"])), int(np.asarray(r["groups"]))
    if n_groups < 1:
        return x, None
    owner = links[3]
    per_site = {i: xi for i, xi, _ in rows}
    pp = np.asarray([float(per_site[i]["pp_bits_per_s"]) for i in owner])
    pp_lat = np.asarray([float(per_site[i]["pp_latency_s"]) for i in owner])
    if stages > 1:
        first = np.asarray([g * stages + k for g in range(n_groups) for k in range(stages - 1)], dtype=int)
        bw, lat = np.minimum(pp[first], pp[first + 1]), (pp_lat[first] + pp_lat[first + 1]) / 2.0
        cand = sorted(set(zip(bw.tolist(), lat.tolist(), strict=True)))
        # Every distinct boundary in one vectorised evaluation: the slowest step is the pipeline's.
        trial = {
            **x,
            "pp_bits_per_s": np.asarray([c[0] for c in cand]),
            "pp_latency_s": np.asarray([c[1] for c in cand]),
        }
        k = int(np.argmax(np.asarray(_kernel(trial, params, ("step_time_s",))["step_time_s"])))
        x["pp_bits_per_s"], x["pp_latency_s"] = cand[k]
    shard = float(x["params"]) / stages if x["pp_shard_sync"] else float(x["params"])
    v, dense = shard * float(x["wire_bits_per_param"]), float(x["dense_aggregate_bits_per_param"])
    code = int(x["aggregation"])
    syncs = [
        paced_sync(code, v, shard, dense, _subset(links, [g * stages + k for g in range(n_groups)]), names)
        for k in range(stages)
    ]
    sync = max(syncs, key=lambda p: p.time_s)
    _set_links(x, sync)
    frags = float(x["fragments"])
    if frags > 1 and x["streaming"]:
        x["fragment_sync_time_s"] = max(
            paced_sync(
                code,
                v / frags,
                shard / frags,
                dense,
                _subset(links, [g * stages + k for g in range(n_groups)]),
                names,
            ).time_s
            for k in range(stages)
        )
    stage = syncs.index(sync)
    return x, dataclasses.replace(sync, pacing=f"stage {stage + 1} of {stages}: {sync.pacing}")


def decoupled(
    x: dict[str, Any],
    params: ModelParams,
    rows: Rows,
    counts: Sequence[int],
    links: Links,
    names: Sequence[str],
) -> tuple[dict[str, Any], PacedSync]:
    """Learners at their own site speeds and the quorum's K-th fastest round trip (module docstring).
    Where the pacing site's non-compute step time (offload, expert-parallel latency) alone exceeds
    T_eq, the peak cannot give T_eq and the slowest site's step is kept (conservative)."""
    n_total = float(sum(counts))
    rates = [(counts[i] * float(xi["local_batch_tokens"]), ri) for i, xi, ri in rows]
    if len({(float(xi["local_batch_tokens"]), ri["step_time_s"]) for _, xi, ri in rows}) > 1:
        t_eq = n_total * float(x["local_batch_tokens"]) / sum(b / ri["step_time_s"] for b, ri in rates)
        r = _kernel(x, params, ("step_time_s", "step_compute_time_s"))
        t_step, t_comp = float(np.asarray(r["step_time_s"])), float(np.asarray(r["step_compute_time_s"]))
        if t_eq > t_step - t_comp:
            # Only the compute part scales with the peak: T_comp' = T_eq - (the step's other time).
            x["node_peak_flop_per_s"] = float(x["node_peak_flop_per_s"]) * t_comp / (t_eq - (t_step - t_comp))
    # The unit's exchange: the configuration's topology, a ring as a relay (the syncer is a hub).
    code = int(x["aggregation"])
    fn = topology.relay if code == AGG_RING else topology.TOPOLOGIES.get(code, topology.relay)
    n_params = float(x["params"]) / float(x["fragments"])
    v, dense = n_params * float(x["wire_bits_per_param"]), float(x["dense_aggregate_bits_per_param"])
    up, down, lat, owner = links
    va, ma, na, da = (np.asarray(z, dtype=np.float64) for z in (v, n_total, n_params, dense))
    t = np.broadcast_to(np.asarray(fn(va, ma, na, da, up, down, lat)[0]), up.shape)
    q = float(x.get("quorum_fraction", DEFAULT_QUORUM_FRACTION))
    k_q = int(quorum_learners(n_total, q))
    k = int(np.argsort(t, kind="stable")[max(0, k_q - 1)])
    _, u_b, d_b = fn(va, ma, na, da, up[k : k + 1], down[k : k + 1], lat[k : k + 1])
    x["up_bits_per_s"], x["down_bits_per_s"], x["latency_s"] = float(up[k]), float(down[k]), float(lat[k])
    sync = PacedSync(
        float(t[k]), float(up[k]), float(down[k]), float(lat[k]), float(np.asarray(u_b).ravel()[0]),
        float(np.asarray(d_b).ravel()[0]),
        f"quorum's round trip ({k_q} of {int(n_total)} learners; the last of them at {names[owner[k]]}); "
        "learners at their own site speeds",
    )  # fmt: skip
    return x, sync


def pace_algorithm(
    s: Scenario,
    params: ModelParams,
    rows: Rows,
    counts: Sequence[int],
    links: Links,
    x: dict[str, Any],
    sync: PacedSync,
) -> tuple[dict[str, Any], PacedSync]:
    """The reduced inputs and paced sync of the algorithm the kernel runs (module docstring); the
    flat reduction (`sites.paced_inputs`) for DDP and flat DiLoCo, plus each fragment's own pacing."""
    names = [site.name for site in s.sites]
    algo = resolved_algorithm(x, params)
    if algo in (ALGO_HIERARCHICAL, ALGO_PP_DILOCO):
        # Auto keeps what it resolved to for the sites as listed (the paced links below could
        # otherwise tip its choice to a unit whose node sets they were not paced for).
        x["algorithm"] = algo
    if algo == ALGO_HIERARCHICAL:
        x, glob = hierarchical(s, x, params, rows, links, names)
        if glob is not None:
            return x, glob
        algo = ALGO_DILOCO
        x["up_bits_per_s"], x["down_bits_per_s"], x["latency_s"] = (
            sync.up_bits_per_s,
            sync.down_bits_per_s,
            sync.latency_s,
        )
    if algo == ALGO_PP_DILOCO:
        x, stage = pp_groups(x, params, rows, links, names)
        return x, stage if stage is not None else sync
    if algo == ALGO_DECOUPLED:
        return decoupled(x, params, rows, counts, links, names)
    frags = float(x["fragments"])
    if algo != ALGO_DDP and frags > 1 and x["streaming"] and len(links[0]) > 1:
        n_params = float(x["params"]) / frags
        x["fragment_sync_time_s"] = paced_sync(
            int(x["aggregation"]),
            n_params * float(x["wire_bits_per_param"]),
            n_params,
            float(x["dense_aggregate_bits_per_param"]),
            links,
            names,
        ).time_s
    return x, sync
