"""Heterogeneous sites: the sync paced by the real topology, the compute by the slowest site.

The vectorised kernel models N identical nodes. A scenario with ``[[site]]`` tables
(`inputs.sites`) is reduced here to the one configuration of identical nodes that has the same
paced figures, which the kernel then evaluates unchanged:

- **sync**: each topology function of `topology` evaluated per edge (ring) or per node, in ring
  order (sites as listed, a site's nodes next to each other, the last node back to the first):
  a ring all-reduce moves in 2 (M - 1) lock-step hops, each as slow as the slowest edge
  (edge k -> k+1 runs at min(up_k, down_k+1) with the mean of the two latencies); a relay waits for
  the slowest upload, then for the slowest download of the aggregate (the busiest downlink);
  a gather of sparse payloads waits for the slowest upload, then for each peer's download of the
  M - 1 others at its own downlink; the paper's relay for the slowest node's V/up + V/down + latency.
  The reduced links (up, down, latency) are those of the pacing edge / nodes, so the kernel's
  formula gives exactly the paced time for the whole-model payload; a Streaming fragment's payload,
  hierarchical DiLoCo's regional groups, PP-group DiLoCo's pipelines and Decoupled DiLoCo's
  learners are paced by `sites.groups`;
- **compute**: synchronous inner steps wait for the slowest site (its step time, with its own
  per-site batch share); tokens per step are the sum over nodes of each node's batch;
- **cost and power**: per-site chips x price / TDP summed; the regime's per-node caps by the
  largest node.

Identical sites reduce to the scenario's own inputs exactly. Sources: ring all-reduce 2 (n - 1)
hops of V/n (Patarasuk & Yuan 2009); INTELLECT-1's ring paced by its slowest link (Jaghouar et al.
2024, arXiv 2412.01152); Covenant-72B's peers download the others' sparse payloads (Lidin et al.
2026, arXiv 2603.08163).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dispersal.model.inputs.codes import AGG_RING, ALGO_DDP, ALGO_DECOUPLED
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.sites import site_scenario
from dispersal.model.sites.groups import pace_algorithm
from dispersal.model.sites.links import PacedSync, node_links, paced_sync

__all__ = [
    "SITE_OUTPUTS",
    "PacedSync",
    "node_links",
    "paced_inputs",
    "paced_sync",
    "scenario_inputs",
    "site_rows",
]

if TYPE_CHECKING:
    from dispersal.model.inputs.scenario import Mode, Scenario

#: Outputs of a per-site kernel evaluation that the reduction and the site rows read.
SITE_OUTPUTS = ("step_time_s", "step_compute_time_s", "fits", "memory_required_bytes_per_node")


def site_inputs(
    s: Scenario, mode: Mode, params: ModelParams, counts: Sequence[int]
) -> list[tuple[int, dict[str, Any], dict[str, float]]]:
    """(site index, kernel inputs, SITE_OUTPUTS) of every site with nodes, each as identical nodes."""
    from dispersal.model.inputs.scenario import as_arrays, kernel_inputs
    from dispersal.model.kernel.kernel import evaluate

    total = int(sum(counts))
    out = []
    for i, (site, n) in enumerate(zip(s.sites, counts, strict=True)):
        if n <= 0:
            continue
        x = kernel_inputs(site_scenario(s, site, i, total), mode, params)
        r = evaluate(as_arrays(x), params, outputs=SITE_OUTPUTS)
        out.append((i, x, {k: float(np.asarray(v)) for k, v in r.items()}))
    return out


def paced_inputs(
    s: Scenario, mode: Mode, params: ModelParams, counts: Sequence[int] | None = None
) -> tuple[dict[str, Any], PacedSync, int]:
    """The kernel inputs of identical nodes with the sites' paced figures (module docstring), the
    paced sync of the whole-model payload and the index of the pacing (slowest-step) site.
    `counts`: nodes per site (None: as listed)."""
    counts = [site.nodes for site in s.sites] if counts is None else list(counts)
    rows = site_inputs(s, mode, params, counts)
    n_total = float(sum(counts))
    # The pacing site: the slowest inner step (synchronous inner steps wait for it).
    p_idx, x_p, _ = max(rows, key=lambda row: row[2]["step_time_s"])
    x = dict(x_p)
    batches = {float(xi["local_batch_tokens"]) for _, xi, _ in rows}
    b_mean = (
        batches.pop()
        if len(batches) == 1
        else sum(counts[i] * float(xi["local_batch_tokens"]) for i, xi, _ in rows) / n_total
    )
    # Same step time at the mean batch: the kernel counts N x b_mean tokens per step.
    x["node_peak_flop_per_s"] = float(x_p["node_peak_flop_per_s"]) * b_mean / float(x_p["local_batch_tokens"])
    x["local_batch_tokens"] = b_mean
    x["num_nodes"] = int(n_total)
    chips_p = float(x_p["chips_per_node"])
    same_node = (
        len({(float(xi["chips_per_node"]), xi["price_usd_per_chip"], xi["tdp_w"]) for _, xi, _ in rows}) == 1
    )
    for key in ("price_usd_per_chip", "rental_usd_per_chip_hour", "tdp_w"):
        # Totals over sites: N x chips_p x value = sum_i n_i x chips_i x value_i (the value itself
        # when every node is the same, exactly).
        if not same_node:
            x[key] = sum(counts[i] * float(xi["chips_per_node"]) * float(xi[key]) for i, xi, _ in rows) / (
                n_total * chips_p
            )
    for key in ("node_fp16_flop_per_s", "node_counted_memory_bytes"):
        x[key] = max(float(xi[key]) for _, xi, _ in rows)
    ddp = int(x["algorithm"]) == ALGO_DDP
    code = AGG_RING if ddp else int(x["aggregation"])
    bits = float(x["ddp_wire_bits_per_param"] if ddp else x["wire_bits_per_param"])
    names = [site.name for site in s.sites]
    sync = paced_sync(
        code,
        float(x["params"]) * bits,
        float(x["params"]),
        float(x["dense_aggregate_bits_per_param"]),
        node_links(s, counts),
        names,
    )
    x["up_bits_per_s"], x["down_bits_per_s"], x["latency_s"] = (
        sync.up_bits_per_s,
        sync.down_bits_per_s,
        sync.latency_s,
    )
    if not ddp:
        # Hierarchical / PP-group / Decoupled DiLoCo and Streaming fragments: their own node sets
        # and payloads (`sites.groups`).
        x, sync = pace_algorithm(s, params, rows, counts, node_links(s, counts), x, sync)
    return x, sync, p_idx


def scenario_inputs(s: Scenario, mode: Mode | str, params: ModelParams = DEFAULT_PARAMS) -> dict[str, Any]:
    """`inputs.scenario.kernel_inputs` for any scenario: with ``[[site]]`` tables, the identical-node
    inputs with the same paced figures (`paced_inputs`)."""
    from dispersal.model.inputs.scenario import Mode, kernel_inputs

    if s.sites:
        return paced_inputs(s, Mode(mode), params)[0]
    return kernel_inputs(s, mode, params)


def site_rows(
    s: Scenario, mode: Mode, params: ModelParams, r: dict[str, float]
) -> tuple[list[dict[str, Any]], str]:
    """Per site (as listed): its nodes' compute share, fit, and the busiest node's traffic and link
    use in the run `r` (the kernel's scalar outputs of the reduced inputs); and what paces the sync.

    Every node of a site is the same, so each row's node is that site's busiest. Compute share =
    the run's utilisation x (this site's step compute / the pacing site's): faster sites idle at
    each lock-step; Decoupled DiLoCo's learners never wait, so there each site's share is its own
    step compute / step time and no site paces the others. Link use = bits per outer step / rate /
    outer-step time, with the traffic of the sync `paced_inputs` returns (hierarchical: the
    global sync; PP-group: the pacing stage's).
    """
    _, sync, p_idx = paced_inputs(s, mode, params)
    own_clock = int(r["algorithm_resolved"]) == ALGO_DECOUPLED
    counts = [site.nodes for site in s.sites]
    links = node_links(s, counts)
    per_site = {i: (xi, ri) for i, xi, ri in site_inputs(s, mode, params, counts)}
    t_pace = per_site[p_idx][1]["step_compute_time_s"]
    cyc = r["outer_step_time_s"]
    rows = []
    for i, site in enumerate(s.sites):
        if i not in per_site:
            continue
        xi, ri = per_site[i]
        k = links[3].index(i)
        up, down = float(links[0][k]), float(links[1][k])
        rows.append(
            {
                "name": site.name,
                "region": site.region,
                "nodes": site.nodes,
                "hardware": s.hardware if site.hardware is None else site.hardware,
                "chips_per_node": int(xi["chips_per_node"]),
                "local_batch_tokens": float(xi["local_batch_tokens"]),
                "step_compute_time_s": ri["step_compute_time_s"],
                "utilisation": ri["step_compute_time_s"] / ri["step_time_s"]
                if own_clock
                else r["utilisation"] * ri["step_compute_time_s"] / t_pace,
                "paces_compute": i == p_idx and not own_clock,
                "fits": bool(ri["fits"]),
                "memory_required_bytes_per_node": ri["memory_required_bytes_per_node"],
                "node_memory_bytes": float(xi["node_memory_bytes"]),
                "up_bits_per_s": up,
                "down_bits_per_s": down,
                "sync_up_bytes": sync.up_bits / 8.0,
                "sync_down_bytes": sync.down_bits / 8.0,
                "link_utilisation_up": sync.up_bits / up / cyc if cyc > 0 else 0.0,
                "link_utilisation_down": sync.down_bits / down / cyc if cyc > 0 else 0.0,
            }
        )
    return rows, sync.pacing
