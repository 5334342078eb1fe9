"""Flat DiLoCo (Douillard et al. 2023, arXiv 2311.08105): every node a replica; the replicas sync
their pseudo-gradients every H inner steps, blocking or overlapped (Streaming DiLoCo, `schedule`)."""

from __future__ import annotations

import numpy as np

from dispersal.model.inputs.codes import ALGO_DILOCO
from dispersal.model.kernel import schedule, topology
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch, flat, no_sync
from dispersal.model.kernel.context import Common


def branch(c: Common) -> Branch:
    """Flat DiLoCo's figures: N replicas, one sync of the whole model (or P fragments) per outer step."""
    N, P = c.N, c.P
    T_sync, u, d = topology.sync(c, P, N, c.f_N, c.up, c.down, c.lat)
    # (The fragment sync is skipped when no configuration splits the model: the common case.)
    T_frag = T_sync if c.one_fragment else topology.sync(c, P / c.fragments, N, c.f_N, c.up, c.down, c.lat)[0]
    if c.inp.has("fragment_sync_time_s"):
        # Sites: each fragment paced on its own slowest edge (`sites.groups`).
        T_frag = np.where(N > 1, c.g("fragment_sync_time_s") * c.f_N, 0.0)
    zero, _ = no_sync(c)
    H, cyc = schedule.diloco_steps(c, N, T_sync, T_frag, c.T_step, zero)
    paper = P * c.wire * (N > 1)
    return flat(c, cycle=cyc, inner_steps=H, sync_time=T_sync, sync_up=u, sync_down=d, sync_paper=paper)


UNIT = AlgorithmUnit(code=ALGO_DILOCO, name="diloco", outer_sync=True, branch=branch)
