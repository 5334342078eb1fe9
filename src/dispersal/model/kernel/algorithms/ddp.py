"""Synchronous data parallel (DDP, the baseline): the gradients exchanged every step.

Dense gradients (codec ``auto``): a ring all-reduce, Charles et al. 2025 App. A: 2 V (1 - 1/N) / BW
plus 2 (N - 1) latency hops, V = P x bits per gradient value, at the slower direction of the link.
A named codec (default mode): per-step compressed exchange as DeMo (Peng et al. 2024, arXiv
2411.19870) and DisTrO do: V = P x the codec's wire bits, exchanged with the codec's aggregation
topology (`topology`): sparse payloads cannot be summed in transit, so they are gathered through a
relay (or a dense aggregate returned), not ring-reduced. With overlap the exchange hides behind a
fraction of the step (paper: all of it; grounded: the backward pass).
"""

from __future__ import annotations

import numpy as np

from dispersal.model.inputs.codes import AGG_RING, ALGO_DDP
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch, flat, no_sync
from dispersal.model.kernel.context import Arr, Common
from dispersal.model.kernel.topology import TOPOLOGIES, Triple, relay


def exchange(c: Common, v_bits: Arr) -> Triple:
    """One per-step gradient exchange of v_bits per worker among N workers, under the kernel input
    ``ddp_aggregation`` (a topology code; absent: ring): (time x straggler factor, up bits, down bits).
    The ring's time is 2 (N - 1) (V / N / min(up, down) + latency), as in the module docstring."""
    N = c.N
    m = np.maximum(N, 1.0)
    codes = c.g("ddp_aggregation") if c.inp.has("ddp_aggregation") else np.full(c.shape, float(AGG_RING))
    dense = c.g("dense_aggregate_bits_per_param")
    t = up_b = down_b = np.zeros(c.shape)
    for code in np.unique(codes):
        if int(code) == AGG_RING:
            # The all-reduce as written above (kept in this form: the same figures to the last bit).
            moved = 2.0 * v_bits * (1.0 - 1.0 / m)
            ti = moved / np.minimum(c.up, c.down) + 2.0 * (N - 1.0) * c.lat
            ui = di = moved
        else:
            ti, ui, di = TOPOLOGIES.get(int(code), relay)(v_bits, m, c.P, dense, c.up, c.down, c.lat)
        here = codes == code
        t, up_b, down_b = np.where(here, ti, t), np.where(here, ui, up_b), np.where(here, di, down_b)
    live = N > 1
    return np.where(live, t * c.f_N, 0.0), np.where(live, up_b, 0.0), np.where(live, down_b, 0.0)


def branch(c: Common) -> Branch:
    """DDP's figures: every node a worker, one gradient exchange per inner step."""
    N, T_step = c.N, c.T_step
    V_ddp = c.P * c.g("ddp_wire_bits_per_param")
    T_ar, up_b, down_b = exchange(c, V_ddp)
    overlap = c.g("ddp_overlap_fraction")
    hide = overlap * T_step
    hidden = np.where(overlap >= 1.0, np.maximum(T_step, T_ar), T_step + np.maximum(0.0, T_ar - hide))
    moved = 2.0 * V_ddp * (1.0 - 1.0 / np.maximum(N, 1.0)) * (N > 1)
    _, ones = no_sync(c)
    return flat(
        c,
        cycle=np.where(c.streaming, hidden, T_step + T_ar),
        inner_steps=ones,
        replicas=ones,
        payload_bits=V_ddp,
        sync_time=T_ar,
        sync_up=up_b,
        sync_down=down_b,
        sync_paper=moved,
    )


UNIT = AlgorithmUnit(code=ALGO_DDP, name="ddp", outer_sync=False, branch=branch)
