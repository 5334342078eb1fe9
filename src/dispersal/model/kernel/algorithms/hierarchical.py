"""Hierarchical DiLoCo: groups of n_g nodes sync on regional links every H_in inner steps; the group
leaders sync over the WAN every H_reg regional rounds (Rahman 2026 sec. 3). Fewer than two groups run
flat DiLoCo instead."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dispersal.model.inputs.codes import AGG_PAPER, ALGO_DILOCO, ALGO_HIERARCHICAL
from dispersal.model.kernel import schedule, topology
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch, flat
from dispersal.model.kernel.context import TINY, Arr, BoolArr, Common


def _groups(c: Common) -> Arr:
    """floor(N / n_g) groups, or the optional input ``site_groups`` (the regions of [[site]] tables,
    `sites.groups`)."""
    return c.g("site_groups") if c.inp.has("site_groups") else np.floor(c.N / c.g("group_size"))


def runs(c: Common) -> BoolArr:
    """At least two groups."""
    return _groups(c) >= 2


def branch(c: Common) -> Branch:
    """Hierarchical DiLoCo's figures: regional rounds inside the global outer step."""
    P, p, T_step, streaming, shared = c.P, c.p, c.T_step, c.streaming, c.shared
    n_g = c.g("group_size")
    G_h = _groups(c)
    reg_bw, reg_lat = c.g("regional_bits_per_s"), c.g("regional_latency_s")
    f_ng = c.straggler(n_g)
    T_reg_g, u_reg, d_reg = topology.sync(c, P, n_g, f_ng, reg_bw, reg_bw, reg_lat)
    T_reg = np.where(c.agg == AGG_PAPER, (2.0 * P * c.wire / reg_bw + reg_lat) * f_ng, T_reg_g)
    if c.inp.has("regional_sync_time_s"):
        # Sites: the slowest regional group's paced sync, straggler factor included (`sites.groups`).
        T_reg = c.g("regional_sync_time_s")
    # On a shared link the leader's regional and global syncs take turns: give each half the
    # regional cycle (H_in covers twice the regional sync), then H_reg rounds hide one global sync.
    H_in_auto = np.maximum(1.0, np.ceil(np.where(shared & streaming, 2.0, 1.0) * T_reg / T_step))
    rule = schedule.chooses(c)
    H_in = np.where(c.h_req > 0, c.h_req, schedule.snap_up(H_in_auto, rule))
    T_rc = np.where(streaming, np.maximum(H_in * T_step, T_reg), H_in * T_step + T_reg)
    f_Gh = c.straggler(G_h)
    T_glob, u_glob, d_glob = topology.sync(c, P, G_h, f_Gh, c.up, c.down, c.lat)
    slack = np.where(shared & streaming, H_in * T_step - T_reg, T_rc)
    # A requested H_in whose steps do not cover the regional sync leaves the shared link no slack: the
    # global sync cannot hide and takes its own turn after each regional round (H_reg = 1; the cycle
    # below is then T_glob + T_reg), instead of waiting ~1/TINY rounds for a slack that never comes.
    H_reg = np.where(
        slack > TINY * T_rc, np.maximum(1.0, np.ceil(T_glob / np.maximum(slack, TINY * T_rc))), 1.0
    )
    # Default mode: the rule's H_reg rounded up to the grid is where `kernel.choose` starts; a requested
    # H_reg (the optional input ``regional_rounds`` > 0, which the choice sets) wins.
    H_reg = schedule.snap_up(H_reg, rule)
    if c.inp.has("regional_rounds"):
        H_reg = np.where(c.g("regional_rounds") > 0, c.g("regional_rounds"), H_reg)
    cyc = np.where(
        streaming,
        np.maximum(H_reg * T_rc, T_glob + np.where(shared, H_reg * T_reg, 0.0)),
        H_reg * T_rc + T_glob,
    )
    return flat(
        c,
        cycle=cyc,
        steps_per_cycle=H_in * H_reg,
        inner_steps=H_in,
        inner_steps_effective=H_in * H_reg**p.hierarchical_h_exponent,
        groups=G_h,
        sync_time=T_glob,
        straggler=f_Gh,
        sync_up=u_glob,
        sync_down=d_glob,
        sync_paper=P * c.wire * (G_h > 1),
        # Paper: mean over nodes of the upload (regional rounds of every node plus the leaders' share).
        traffic_paper=H_reg * P * c.wire + P * c.wire / n_g,
        # Grounded: a leader; regional traffic counts only when it shares the WAN link.
        up_busiest=u_glob + np.where(shared, H_reg * u_reg, 0.0),
        down_busiest=d_glob + np.where(shared, H_reg * d_reg, 0.0),
        regional_sync_time=T_reg,
        regional_rounds=H_reg,
    )


def notes(asked: str, resolved: str, r: Mapping[str, float], group_size: int) -> list[str]:
    """The fallback to flat DiLoCo."""
    if asked == "hierarchical" and resolved != "hierarchical":
        return [f"fewer than 2 groups of {group_size}: ran flat DiLoCo instead of hierarchical"]
    return []


UNIT = AlgorithmUnit(
    code=ALGO_HIERARCHICAL,
    name="hierarchical",
    outer_sync=True,
    branch=branch,
    runs=runs,
    fallback=ALGO_DILOCO,
    notes=notes,
)
