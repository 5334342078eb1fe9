"""Synchronous data parallel (DDP, the baseline): a ring all-reduce of the gradients every step.

Charles et al. 2025 App. A: 2 V (1 - 1/N) / BW plus 2 (N - 1) latency hops, V = P x bits per
gradient value, at the slower direction of the link. With overlap it hides behind a fraction of the
step (paper: all of it; grounded: the backward pass).
"""

from __future__ import annotations

import numpy as np

from dispersal.model.inputs.codes import ALGO_DDP
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch, no_sync
from dispersal.model.kernel.context import Common


def branch(c: Common) -> Branch:
    """DDP's figures: every node a worker, one all-reduce per inner step."""
    N, T_step = c.N, c.T_step
    V_ddp = c.P * c.g("ddp_wire_bits_per_param")
    bw_min = np.minimum(c.up, c.down)
    T_ar = np.where(N > 1, (2.0 * V_ddp * (1.0 - 1.0 / N) / bw_min + 2.0 * (N - 1.0) * c.lat) * c.f_N, 0.0)
    overlap = c.g("ddp_overlap_fraction")
    hide = overlap * T_step
    hidden = np.where(overlap >= 1.0, np.maximum(T_step, T_ar), T_step + np.maximum(0.0, T_ar - hide))
    moved = 2.0 * V_ddp * (1.0 - 1.0 / np.maximum(N, 1.0)) * (N > 1)
    _, ones = no_sync(c)
    return Branch(
        cycle=np.where(c.streaming, hidden, T_step + T_ar),
        steps_per_cycle=ones,
        workers=N,
        step_time=T_step,
        sync_time=T_ar,
        inner_steps=ones,
        inner_steps_effective=ones,
        replicas=ones,
        groups=ones,
        stages=1.0,
        straggler=c.f_N,
        fits=c.mem.fits,
        enough_workers=N >= 1,
        memory_per_node=c.mem.need_flat,
        host_per_node=c.mem.host_need_flat,
        payload_bits=V_ddp,
        compute_per_step=c.T_comp,
        sync_up=moved,
        sync_down=moved,
        sync_paper=moved,
        traffic_paper=moved,
        up_busiest=moved,
        down_busiest=moved,
    )


UNIT = AlgorithmUnit(code=ALGO_DDP, name="ddp", outer_sync=False, branch=branch)
