"""The largest target at N sites (`dispersal frontier --sites`): per site count N and premium, the
largest metric any candidate reaches with at most N sites at the top grid rate, and what binds it."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.analyses.frontier.conditions import SearchLayout
from dispersal.model.analyses.frontier.result import AT_SITES_POINTS, AtSites
from dispersal.model.analyses.frontier.table import Engine, geomgrid
from dispersal.model.inputs import units
from dispersal.model.kernel import quality
from dispersal.model.kernel.choose import SCHEDULE_BOUND


def _c0_of(base_cost: dict[float, float | None]) -> Any:
    """C0(T) for any T: log-log interpolation between the targets' centralized costs (linear in T
    outside them, or through the only one). None when none is known."""
    pts = sorted((t, c) for t, c in base_cost.items() if c is not None)
    if not pts:
        return None
    lt = np.log([p[0] for p in pts])
    lc = np.log([p[1] for p in pts])

    def c0(t: Any) -> Any:
        x = np.log(np.asarray(t, dtype=np.float64))
        if len(pts) == 1:
            return np.exp(lc[0] + x - lt[0])
        inner = np.interp(x, lt, lc)
        lo = lc[0] + (x - lt[0])
        hi = lc[-1] + (x - lt[-1])
        return np.exp(np.where(x < lt[0], lo, np.where(x > lt[-1], hi, inner)))

    return c0


def largest_at_sites(
    eng: Engine,
    sites: tuple[int, ...],
    prem: tuple[float, ...],
    base_cost: dict[float, float | None],
    lay: SearchLayout,
) -> tuple[AtSites, ...]:
    """Per site count N: the largest metric any candidate reaches with at most N sites at the top
    grid rate (AT_SITES_POINTS geometric site counts of each candidate's window below N, N itself
    the last), with no budget and within each premium (C0 interpolated log-log between the targets'
    centralized costs: C0 is close to linear in the target)."""
    allc = np.flatnonzero(eng.usable).astype(np.int64)
    lo, hi = eng.window(allc, lay.conds[0], 1.0)
    c0 = _c0_of(base_cost)
    top_bw = lay.conds[0].bandwidth_bits_per_s
    out: list[AtSites] = []
    prev: dict[float | None, AtSites] = {}
    for n in sorted(sites):
        sel = (lo <= n) & (hi >= lo)
        g = geomgrid(lo[sel], np.minimum(hi[sel], float(n)), AT_SITES_POINTS)
        cc = np.repeat(allc[sel], AT_SITES_POINTS)
        nn = g.reshape(-1)
        r = _best_schedules(eng, cc, nn, lay, prem, c0)
        valid = r["valid"] > 0
        met = np.where(valid, r["metric"], -np.inf)
        best_any = float(met.max()) if met.size else -math.inf
        for x in (None, *prem):
            if x is None:
                m_ok = met
            elif c0 is None:
                continue
            else:
                m_ok = np.where(
                    valid & (r["cost_usd"] <= x * c0(np.maximum(met, 1.0)) * (1 + 1e-12)), met, -np.inf
                )
            if not m_ok.size or not np.isfinite(m_ok.max()):
                row = AtSites(
                    sites=n,
                    premium=x,
                    largest_target_flop=None,
                    hardware=None,
                    sites_used=None,
                    cost_usd=None,
                    binds="cost: nothing within the premium",
                    bandwidth_bits_per_s=top_bw,
                )
                out.append(_carry(prev, x, row))
                continue
            i = int(np.argmax(m_ok))
            mx = float(m_ok[i])
            if x is not None and mx < best_any * (1 - 1e-9):
                why = "cost: a larger target needs more than the premium"
            elif r["c_quality_flop"][i] < 0.9 * r["c_local_flop"][i]:
                why = "replica quality: the quality mapping keeps under 90% of the chips' compute"
            else:
                why = f"time budget: {eng.c.max_duration_s / units.SECONDS_PER_DAY:.4g} days at the regime's site size"
            out.append(
                _carry(
                    prev,
                    x,
                    AtSites(
                        sites=n,
                        premium=x,
                        largest_target_flop=mx,
                        hardware=eng.labels[int(eng.space.combo_hw[cc[i]])],
                        sites_used=int(nn[i]),
                        cost_usd=float(r["cost_usd"][i]),
                        binds=why,
                        bandwidth_bits_per_s=top_bw,
                        replicas_beyond_evidence=quality.replicas_beyond_evidence(float(r["replicas"][i])),
                    ),
                )
            )
    return tuple(out)


def _best_schedules(
    eng: Engine,
    cc: npt.NDArray[np.int64],
    nn: npt.NDArray[np.float64],
    lay: SearchLayout,
    prem: tuple[float, ...],
    c0: Any,
) -> dict[str, npt.NDArray[np.float64]]:
    """`Engine.run` of candidates `cc` at node counts `nn` (the top grid rate), each at its best
    schedule where that can matter: first every configuration's first schedule and its bound over the
    schedules (`kernel.choose.SCHEDULE_BOUND`), then the schedule walk only for those whose bound is not
    below the smallest of the answers the first schedules already give (the largest metric with no
    budget and within each premium). A configuration left at its first schedule can neither be nor tie
    an answer: its best metric is below that answer's lower bound. The same answers as walking every
    configuration (`tests/model/test_frontier.py`), for a fraction of the walks. `c0`: `_c0_of`'s
    building cost of a target (None: no premium answers)."""
    zeros = np.zeros(cc.size, dtype=np.int64)
    r = eng.run(cc, nn, zeros, lay.conds, ("replicas", SCHEDULE_BOUND), walk=False)
    valid = r["valid"] > 0
    met = np.where(valid, r["metric"], -np.inf)
    lows = [float(met.max()) if met.size else -math.inf]
    if c0 is not None:
        for x in prem:
            ok = valid & (r["cost_usd"] <= x * c0(np.maximum(met, 1.0)) * (1 + 1e-12))
            lows.append(float(np.where(ok, met, -np.inf).max()) if met.size else -math.inf)
    walk = np.flatnonzero(~(r[SCHEDULE_BOUND] < min(lows)))
    if walk.size:
        best = eng.run(cc[walk], nn[walk], zeros[walk], lay.conds, ("replicas",))
        for k, v in best.items():
            r[k][walk] = v
    return r


def _carry(prev: dict[float | None, AtSites], x: float | None, row: AtSites) -> AtSites:
    """At most N sites includes every smaller count already searched: keep the larger answer."""
    old = prev.get(x)
    if (
        old is not None
        and old.largest_target_flop is not None
        and (row.largest_target_flop is None or old.largest_target_flop > row.largest_target_flop)
    ):
        row = dataclasses.replace(old, sites=row.sites)
    prev[x] = row
    return row
