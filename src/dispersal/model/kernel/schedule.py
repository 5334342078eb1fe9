"""The outer-step schedule: blocking syncs, or syncs overlapped with the next inner steps (Streaming
DiLoCo, Douillard et al. 2025, arXiv 2501.18512), with fragments and an overlap depth. Shared by
every DiLoCo-family algorithm unit."""

from __future__ import annotations

import numpy as np

from dispersal.model.kernel.context import TINY, Arr, BoolArr, Common

#: Default mode's fixed candidate set of inner steps H and of hierarchical regional rounds H_reg:
#: round(sqrt(2)^k), k = 0..34, i.e. 1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, ..., 92,682, 131,072
#: (assumption: a ratio of sqrt(2) between neighbours; it does not depend on any input, which is what
#: makes the chosen schedule's C_quality monotone in every better input, `kernel.choose`).
SCHEDULE_GRID: Arr = np.unique(np.round(np.sqrt(2.0) ** np.arange(35)))


def chooses(c: Common) -> BoolArr:
    """Where the schedule is default mode's C_quality-maximising choice over `SCHEDULE_GRID` (the
    optional input ``schedule_rule`` > 0) rather than the paper's smallest H that hides the sync."""
    if not c.inp.has("schedule_rule"):
        return np.zeros(c.shape, dtype=bool)
    return np.asarray(c.g("schedule_rule") > 0, dtype=bool)


def snap_up(h: Arr, where: BoolArr) -> Arr:
    """The smallest `SCHEDULE_GRID` value >= h where `where` (the grid's largest beyond it), else h: the
    starting point of the choice, the grid's first schedule that hides what the paper's rule hides."""
    if not where.any():
        return h
    i = np.minimum(np.searchsorted(SCHEDULE_GRID, h * (1.0 - 1e-12)), SCHEDULE_GRID.size - 1)
    return np.where(where, SCHEDULE_GRID[i], h)


def inner_steps(c: Common, t_frag: Arr, t_step: Arr, link_busy_per_step: Arr) -> Arr:
    """H_min: the smallest H whose steps hide the P fragment syncs (and leave the link room for the
    per-step traffic that shares it); at P = 1 with nothing sharing, ceil(T_sync / T_step). A
    requested H (> 0) wins. Under default mode's rule (`chooses`) H_min is rounded up to the grid:
    `kernel.choose` starts its search there."""
    free = np.maximum(t_step - link_busy_per_step, TINY * t_step)
    auto = np.maximum(np.maximum(1.0, np.ceil(c.fragments * t_frag / free)), c.fragments)
    auto = snap_up(auto, chooses(c))
    return np.where(c.h_req > 0, c.h_req, auto)


def cycle(c: Common, h: Arr, t_step: Arr, t_full: Arr, t_frag: Arr, link_busy_per_step: Arr) -> Arr:
    """Outer-step wall time. Without overlap: H T_step + T_sync, less what the last backward pass
    hides (grounded: a layer's sync starts once its last update is done). With overlap (Streaming
    DiLoCo): each of P fragments syncs once per H steps and may hide behind tau inner steps (tau = -1:
    the whole interval H / P; 0: none) plus that backward share; what does not fit is exposed, and
    the link can carry no more than its time: max(H T_step + exposed, P t_frag + H x per-step link use)."""
    Pf, tau, bwd = c.fragments, c.tau, c.bwd
    # The paper's form exactly (no rounding detour) when nothing of the above applies.
    simple = (Pf == 1.0) & (tau < 0) & (link_busy_per_step <= 0)
    stream = np.maximum(h * t_step, t_frag)
    if not simple.all():
        tau_eff = np.where(tau < 0, h / Pf, tau) + bwd
        exposed = Pf * np.maximum(0.0, t_frag - tau_eff * t_step)
        general = np.maximum(h * t_step + exposed, Pf * t_frag + h * link_busy_per_step)
        stream = np.where(simple, stream, general)
    blocking = h * t_step + np.maximum(0.0, t_full - bwd * t_step)
    return np.where(c.streaming, stream, blocking)


def diloco_steps(
    c: Common, replicas: Arr, t_sync: Arr, t_frag: Arr, t_step: Arr, busy: Arr
) -> tuple[Arr, Arr]:
    """(H, outer-step time) of a DiLoCo run whose replicas sync t_sync (a fragment t_frag) every H
    steps of t_step; one replica (no sync) runs the requested H, or 1."""
    h = np.where(
        replicas > 1,
        inner_steps(c, np.where(c.streaming, t_frag, t_sync / c.fragments), t_step, busy),
        np.where(c.h_req > 0, c.h_req, 1.0),
    )
    return h, cycle(c, h, t_step, t_sync, t_frag, busy)
