"""The outer-step schedule: blocking syncs, or syncs overlapped with the next inner steps (Streaming
DiLoCo, Douillard et al. 2025, arXiv 2501.18512), with fragments and an overlap depth. Shared by
every DiLoCo-family algorithm unit."""

from __future__ import annotations

import numpy as np

from dispersal.model.kernel.context import TINY, Arr, Common


def inner_steps(c: Common, t_frag: Arr, t_step: Arr, link_busy_per_step: Arr) -> Arr:
    """H_min: the smallest H whose steps hide the P fragment syncs (and leave the link room for the
    per-step traffic that shares it); at P = 1 with nothing sharing, ceil(T_sync / T_step). A
    requested H (> 0) wins."""
    free = np.maximum(t_step - link_busy_per_step, TINY * t_step)
    auto = np.maximum(np.maximum(1.0, np.ceil(c.fragments * t_frag / free)), c.fragments)
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
