"""Decoupled DiLoCo (Douillard et al., Google DeepMind, arXiv 2604.21428, April 2026): every node is a
learner island that trains on its own clock; a syncer merges the learners' pseudo-gradients (model
fragments) once a quorum has delivered and sends the merged state back. No learner ever waits for a
sync, so its wall time is compute only; a link too slow for one exchange per H steps stretches the
sync interval instead (and the staleness of each merge is charged to the quality model).

Formulas (one learner; M learners = N nodes, P streaming fragments, T_step the inner step):
    exchange of one fragment (V = P_params / P x wire bits up, D down) with the syncer: the scenario's
    topology (`topology.sync`, a ring taken as `relay`): relay t_rt = V/up + D/down + 2 latency with
    D = V; sparse codecs D = min((M - 1) V, dense aggregate) (`gather_or_dense`)
    syncer at a site (input ``syncer_at_site``): that site's link carries the M - 1 others' payloads
    (the all-gather download (M - 1) V) and returns M - 1 merged copies:
        t_rt = max(V/up, (M - 1) V/down) + max((M - 1) D/up, D/down) + 2 latency
    link time per exchange (each direction pipelines with the next exchange):
        t_busy = max(V/up, D/down), at a site also max((M - 1) V/down, (M - 1) D/up)
    H_link = ceil(P t_busy / T_step)                 the fewest steps whose time carries every fragment
    H = requested H, else max(H_link, P, 1);         H_eff = max(H, H_link)   (the stretch)
    outer step = H_eff T_step                        (compute only: learners never block)
    K = ceil(q M) learners the syncer waits for; f_K the straggler factor of K (`straggler_factor`)
    staleness s = f_K t_rt / (H_eff T_step)          outer steps between a learner's delivery and the
                                                     merged state coming back
    H seen by the quality model: H_eff (1 + kappa max(0, s - s_free))
        (`inputs.decoupled.STALENESS_H_PER_OUTER_STEP`, `STALENESS_FREE_OUTER_STEPS`)
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dispersal.model.inputs import units
from dispersal.model.inputs.codes import AGG_RING, ALGO_DECOUPLED
from dispersal.model.inputs.decoupled import (
    DEFAULT_QUORUM_FRACTION,
    MERGE_RULE_CODES,
    STALENESS_FREE_OUTER_STEPS,
    STALENESS_H_PER_OUTER_STEP,
    quorum_learners,
)
from dispersal.model.kernel import topology
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch, flat
from dispersal.model.kernel.context import Arr, BoolArr, Common


def _input(c: Common, name: str, default: float) -> Arr:
    """An optional kernel input, or its default everywhere."""
    return c.g(name) if c.inp.has(name) else np.full(c.shape, default)


def exchange(c: Common, n_params: Arr, m: Arr, at_site: BoolArr) -> tuple[Arr, Arr, Arr, Arr, Arr, Arr]:
    """One learner's exchange of `n_params` values with the syncer among m learners: (round trip t_rt,
    learner upload bits, learner download bits, link time per exchange t_busy of the busiest node,
    that node's upload bits, its download bits), before any straggler factor; all zero where m <= 1.

    The learner's side is the configuration's own topology (`topology.sync`: relay, all-gather of
    sparse payloads, dense relay, the paper's relay), except that a ring becomes a relay: the syncer
    is a star's hub, not a ring member."""
    up, down, lat = c.up, c.down, c.lat
    t, u, d = topology.sync(c, n_params, m, np.ones(c.shape), up, down, lat)
    ring = (c.agg == AGG_RING) & (m > 1)
    if ring.any():
        dense = c.g("dense_aggregate_bits_per_param")
        tr, ur, dr = topology.relay(n_params * c.wire, m, n_params, dense, up, down, lat)
        t, u, d = np.where(ring, tr, t), np.where(ring, ur, u), np.where(ring, dr, d)
    # Each direction pipelines with the next exchange: the link is busy for the slower direction.
    busy = np.maximum(u / up, d / down)
    host_up, host_down = u, d
    if at_site.any():
        # The host site downloads every other learner's payload (the all-gather download) and uploads
        # the merged state to each; its own payload never leaves it.
        dense = c.g("dense_aggregate_bits_per_param")
        gathered = topology.all_gather(u, m, n_params, dense, up, down, lat)[2]
        returned = (m - 1.0) * d
        t_site = np.maximum(u / up, gathered / down) + np.maximum(returned / up, d / down) + 2.0 * lat
        busy_site = np.maximum(busy, np.maximum(gathered / down, returned / up))
        site = at_site & (m > 1)
        t = np.where(site, np.maximum(t, t_site), t)
        busy = np.where(site, busy_site, busy)
        host_up, host_down = np.where(site, returned, u), np.where(site, gathered, d)
    return t, u, d, busy, host_up, host_down


def branch(c: Common) -> Branch:
    """Decoupled DiLoCo's figures (module docstring): compute-bound learners, the sync interval
    stretched to what the link carries, staleness from the exchange round trip."""
    M, P, T_step, Pf = c.N, c.P, c.T_step, c.fragments
    q = _input(c, "quorum_fraction", DEFAULT_QUORUM_FRACTION)
    at_site = _input(c, "syncer_at_site", 0.0) > 0
    merge = _input(c, "merge_rule", MERGE_RULE_CODES["norm_preserving"])
    K = quorum_learners(M, q)
    f_K = c.straggler(K)
    t_rt, u, d, busy, host_up, host_down = exchange(c, P / Pf, M, at_site)
    live = M > 1
    H_link = np.where(live, np.ceil(Pf * busy / T_step), 1.0)
    H = np.where(c.h_req > 0, c.h_req, np.where(live, np.maximum(np.maximum(H_link, Pf), 1.0), 1.0))
    H_eff = np.maximum(H, H_link)
    cyc = H_eff * T_step
    staleness = np.where(live, f_K * t_rt / cyc, 0.0)
    return flat(
        c,
        cycle=cyc,
        inner_steps=H_eff,
        inner_steps_effective=H_eff
        * (1.0 + STALENESS_H_PER_OUTER_STEP * np.maximum(0.0, staleness - STALENESS_FREE_OUTER_STEPS)),
        sync_time=Pf * t_rt * f_K,
        straggler=f_K,
        sync_up=Pf * u,
        sync_down=Pf * d,
        sync_paper=P * c.wire * live,
        up_busiest=Pf * host_up,
        down_busiest=Pf * host_down,
        staleness=staleness,
        merge_rule=merge,
    )


def notes(asked: str, resolved: str, r: Mapping[str, float], group_size: int) -> list[str]:
    """The sync interval the link allows and the staleness the quality model charges."""
    if resolved != "decoupled" or r["replicas"] <= 1:
        return []
    return [
        f"decoupled: learners never wait; each delivers every {r['inner_steps']:.0f} steps "
        f"({units.format_duration(r['outer_step_time_s'])}); merges arrive {r['staleness_outer_steps']:.3g} outer steps stale "
        f"(quality H {r['inner_steps_effective']:.4g})"
    ]


UNIT = AlgorithmUnit(code=ALGO_DECOUPLED, name="decoupled", outer_sync=True, branch=branch, notes=notes)
