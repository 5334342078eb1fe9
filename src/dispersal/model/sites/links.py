"""Sync over a list of nodes with their own links, paced by the topology (`sites.reduce`).

Each topology function of `topology` evaluated per edge (ring, in ring order, the last node back to
the first) or per node (relay family): a ring all-reduce moves in 2 (M - 1) lock-step hops, each as
slow as the slowest edge (edge k -> k+1 at min(up_k, down_k+1), the mean of the two latencies); a
relay waits for the slowest upload, then for the busiest downlink; a gather for each peer's
download of the M - 1 others at its own downlink; the paper's relay for the slowest node's
V/up + V/down + latency. Sources: Patarasuk & Yuan 2009 (ring); Jaghouar et al. 2024, arXiv
2412.01152 (INTELLECT-1's ring paced by its slowest link); Lidin et al. 2026, arXiv 2603.08163
(Covenant-72B's peers download the others' payloads).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from dispersal.model.inputs.codes import AGG_PAPER, AGG_RING
from dispersal.model.kernel import topology
from dispersal.model.kernel.context import Arr

if TYPE_CHECKING:
    from dispersal.model.inputs.scenario import Scenario


@dataclasses.dataclass(frozen=True, slots=True)
class PacedSync:
    """One sync of a payload over the listed nodes, paced by the topology (seconds, bits, bit/s)."""

    time_s: float
    """Wall time of the sync (before the straggler factor)."""
    up_bits_per_s: float
    """The reduced (equivalent identical-node) uplink: the pacing edge's or node's."""
    down_bits_per_s: float
    latency_s: float
    up_bits: float
    """Bits each node uploads in one sync."""
    down_bits: float
    pacing: str
    """What sets the time, in words (the slowest edge, the busiest downlink)."""


def node_links(s: Scenario, counts: Sequence[int]) -> tuple[Arr, Arr, Arr, list[int]]:
    """Per node in ring order: (uplink bit/s, downlink bit/s, latency s, index of its site)."""
    up, down, lat, owner = [], [], [], []
    for i, (site, n) in enumerate(zip(s.sites, counts, strict=True)):
        u = site.bandwidth_up_bits_per_s or s.bandwidth_up_bits_per_s
        d = site.bandwidth_down_bits_per_s or s.bandwidth_down_bits_per_s
        la = s.latency_s if site.latency_s is None else site.latency_s
        up += [u] * n
        down += [d] * n
        lat += [la] * n
        owner += [i] * n
    return np.asarray(up, float), np.asarray(down, float), np.asarray(lat, float), owner


def paced_sync(
    code: int,
    v: float,
    n_params: float,
    dense_bits: float,
    links: tuple[Arr, Arr, Arr, list[int]],
    names: Sequence[str],
) -> PacedSync:
    """One sync of a v-bit payload per node among the nodes of `links` (`node_links`), paced by
    topology `code` (`inputs.codes`; unknown codes as a relay, like `topology.sync`)."""
    up, down, lat, owner = links
    m = float(len(up))
    if m <= 1:
        return PacedSync(0.0, float(up[0]), float(down[0]), float(lat[0]), 0.0, 0.0, "one node: no sync")
    fn = topology.TOPOLOGIES.get(code, topology.relay)
    va, ma, na, da = (np.asarray(z, dtype=np.float64) for z in (v, m, n_params, dense_bits))
    if code == AGG_RING:
        nxt = np.roll(np.arange(len(up)), -1)
        edge_lat = (lat + lat[nxt]) / 2.0
        # Each edge k -> k+1 through the ring function: the lock-step hops wait for the slowest.
        t, up_b, down_b = fn(va, ma, na, da, up, down[nxt], edge_lat)
        k = int(np.argmax(t))
        a, b = names[owner[k]], names[owner[int(nxt[k])]]
        side = "uplink" if up[k] <= down[nxt[k]] else "downlink"
        # The edge's sender uplink and receiver downlink (the ring function takes their minimum).
        return PacedSync(
            float(t[k]), float(up[k]), float(down[nxt[k]]), float(edge_lat[k]), float(up_b), float(down_b),
            f"ring edge {a} -> {b} ({side} of {a if side == 'uplink' else b})",
        )  # fmt: skip
    if code == AGG_PAPER:
        t, up_b, down_b = fn(va, ma, na, da, up, down, lat)
        k = int(np.argmax(t))
        return PacedSync(
            float(t[k]), float(up[k]), float(down[k]), float(lat[k]), float(up_b), float(down_b),
            f"relay: node of {names[owner[k]]}",
        )  # fmt: skip
    # Relay family: the bits each node sends and receives come from the topology function; the
    # aggregate (or the others' payloads) exists once the slowest upload is in, and the sync ends
    # when the slowest download is done.
    _, up_b, down_b = fn(va, ma, na, da, np.ones(1), np.ones(1), np.zeros(1))
    ub, db = float(np.asarray(up_b).ravel()[0]), float(np.asarray(down_b).ravel()[0])
    t_up, t_down = ub / up + lat, db / down + lat
    i, j = int(np.argmax(t_up)), int(np.argmax(t_down))
    return PacedSync(
        float(t_up[i] + t_down[j]), float(up[i]), float(down[j]), float((lat[i] + lat[j]) / 2.0), ub, db,
        f"uplink of {names[owner[i]]}, then the busiest downlink ({names[owner[j]]})",
    )  # fmt: skip
