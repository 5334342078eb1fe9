"""Aggregation topologies: how one sync of a payload among n workers uses each worker's link.

One function per topology (the kernel input ``aggregation``, codes in `inputs.codes`), each giving
(wall time, upload bits, download bits) of one worker before the straggler factor; `sync` applies
the topology of each configuration. Source: Rahman 2026 sec. 3 (paper relay); ring all-reduce
2 (n - 1) hops of V / n (Patarasuk & Yuan 2009); relay, all-gather and dense-relay as in
docs/model.md ("aggregation").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dispersal.model.inputs.codes import (
    AGG_ALL_GATHER,
    AGG_GATHER_OR_DENSE,
    AGG_PAPER,
    AGG_RELAY,
    AGG_RELAY_DENSE,
    AGG_RING,
)
from dispersal.model.kernel.context import Arr, Common

Triple = tuple[Arr, Arr, Arr]
#: (payload bits v, participants m >= 1, parameters, dense-aggregate bits per parameter, up, down,
#: one-way latency) -> (time, upload bits, download bits).
Topology = Callable[[Arr, Arr, Arr, Arr, Arr, Arr, Arr], Triple]


def paper_relay(v: Arr, m: Arr, n_params: Arr, dense_bits: Arr, bw_up: Arr, bw_down: Arr, lat: Arr) -> Triple:
    """Rahman 2026's relay: V/up + V/down + latency; one payload each way."""
    return v / bw_up + v / bw_down + lat, v, v


def ring(v: Arr, m: Arr, n_params: Arr, dense_bits: Arr, bw_up: Arr, bw_down: Arr, lat: Arr) -> Triple:
    """Ring all-reduce: 2 (m - 1) hops of V/m at min(up, down) plus a latency each; 2 V (m - 1)/m
    each way."""
    moved = 2.0 * (m - 1.0) / m * v
    return 2.0 * (m - 1.0) * (v / m / np.minimum(bw_up, bw_down) + lat), moved, moved


def _via_relay(v: Arr, down_b: Arr, bw_up: Arr, bw_down: Arr, lat: Arr) -> Triple:
    # Worker -> relay -> worker: upload, then download, two one-way latencies.
    return v / bw_up + down_b / bw_down + 2.0 * lat, v, down_b


def relay(v: Arr, m: Arr, n_params: Arr, dense_bits: Arr, bw_up: Arr, bw_down: Arr, lat: Arr) -> Triple:
    """Relay / parameter server: the payload up, the aggregate (same size) down."""
    return _via_relay(v, v, bw_up, bw_down, lat)


def all_gather(v: Arr, m: Arr, n_params: Arr, dense_bits: Arr, bw_up: Arr, bw_down: Arr, lat: Arr) -> Triple:
    """All-gather of sparse payloads through a relay: each worker downloads the m - 1 others."""
    return _via_relay(v, (m - 1.0) * v, bw_up, bw_down, lat)


def relay_dense(v: Arr, m: Arr, n_params: Arr, dense_bits: Arr, bw_up: Arr, bw_down: Arr, lat: Arr) -> Triple:
    """Relay returning a dense aggregate: n_params x dense bits down."""
    return _via_relay(v, n_params * dense_bits, bw_up, bw_down, lat)


def gather_or_dense(
    v: Arr, m: Arr, n_params: Arr, dense_bits: Arr, bw_up: Arr, bw_down: Arr, lat: Arr
) -> Triple:
    """All-gather until the m - 1 payloads outweigh a dense aggregate, then the dense relay."""
    return _via_relay(v, np.minimum((m - 1.0) * v, n_params * dense_bits), bw_up, bw_down, lat)


#: The one table of topologies, by code (an unknown code syncs as `relay`).
TOPOLOGIES: dict[int, Topology] = {
    AGG_PAPER: paper_relay,
    AGG_RING: ring,
    AGG_RELAY: relay,
    AGG_ALL_GATHER: all_gather,
    AGG_RELAY_DENSE: relay_dense,
    AGG_GATHER_OR_DENSE: gather_or_dense,
}


def sync(c: Common, n_params: Arr, n: Arr, f: Arr, bw_up: Arr, bw_down: Arr, latency: Arr) -> Triple:
    """One sync of n_params values among n workers under each configuration's topology: (wall time x
    straggler factor f, upload bits, download bits) of one worker; all zero where n <= 1."""
    v = n_params * c.wire
    m = np.maximum(n, 1.0)
    dense_bits = c.g("dense_aggregate_bits_per_param")
    if len(c.agg_codes) == 1:
        # One topology for every configuration (the usual case): no selection.
        (code,) = c.agg_codes
        t, up_b, down_b = TOPOLOGIES.get(code, relay)(v, m, n_params, dense_bits, bw_up, bw_down, latency)
    else:
        t = up_b = down_b = np.full(c.shape, np.nan)
        for code in sorted(c.agg_codes):
            ti, ui, di = TOPOLOGIES.get(code, relay)(v, m, n_params, dense_bits, bw_up, bw_down, latency)
            here = c.agg == code
            t, up_b, down_b = np.where(here, ti, t), np.where(here, ui, up_b), np.where(here, di, down_b)
    live_n = n > 1
    return np.where(live_n, t * f, 0.0), np.where(live_n, up_b, 0.0), np.where(live_n, down_b, 0.0)
