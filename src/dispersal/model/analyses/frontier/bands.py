"""Monte Carlo bands of the frontier (docs/frontier.md, "Bands"): the draws of `plan --samples`
(data/uncertainty.toml: Chinchilla fit, eta_H, replica penalty and its many-replica tail, straggler,
codec and activation quality, MFU, chip prices) applied to the frontier's own search.

Per draw and per grid bandwidth: the cheapest plan over a shortlist of candidates (the cheapest of
the nominal search at each bandwidth), and the cost of one building under the same draw (the nominal
building's node type, re-sized for the draw). So each draw has its own premium curve, and per
premium x: whether it reaches the target within x at each bandwidth, hence its least bandwidth
(infinite when no grid bandwidth reaches). P(reach) leads; the quantiles count "cannot reach" as
infinite (`monte_carlo.quantiles_all`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.analyses.frontier.table import Condition, Engine, TargetTable
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search.bisection import cheapest_in_cells
from dispersal.model.search.candidates import SEARCH_OUTPUTS, Constraints

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]

#: Candidates per bandwidth entering the draws: the cheapest of the nominal search there (at least
#: SHORTLIST_TOTAL / conditions each, so a short grid still gives the draws a choice). On the default
#: grid P(reach) moved by <= 0.02 from 6 to 40 per rate (1e25, 100 draws): a numerical setting.
SHORTLIST_PER_CONDITION = 16
SHORTLIST_TOTAL = 48
#: Node counts per (draw, candidate, bandwidth) window before the bisection.
DRAW_GRID_POINTS = 16
#: Widening of each candidate's nominal node window for the draws (a draw moves the metric by tens
#: of percent): a numerical margin, the validity rule trims it.
DRAW_WINDOW_FACTOR = 2.0
_CHUNK = 300_000
#: The draws' shortlist and the building's node types are read within this premium of the nominal
#: building, whatever premiums are asked (the frontier's table is searched up to at least it), so
#: P(reach) and every band are properties of the scenario, not of the --premium list (issue 34).
#: The default list's largest premium: a numerical setting, not fitted.
SHORTLIST_PREMIUM = 5.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Band:
    """Monte Carlo band of one (target, premium) cell."""

    p_reach: float
    """P(some grid bandwidth reaches the target within the premium), in [0, 1]."""
    p_reach_by_bandwidth: tuple[float, ...]
    """Per grid bandwidth (ascending): P(reaching the target within the premium there)."""
    least_bandwidth_q: tuple[float, float, float]
    """P10, P50, P90 of the least grid bandwidth within the premium, bits/s; inf = cannot reach."""
    premium_at_reach_bandwidth_q: tuple[float, float, float]
    """P10, P50, P90 of the cheapest plan's premium at the reach bandwidth (100 Mbps); inf = cannot reach."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: P(reach) first; infinite quantiles as the string "cannot reach"."""

        def q(v: tuple[float, float, float]) -> list[float | str]:
            return [x if math.isfinite(x) else "cannot reach" for x in v]

        return {
            "p_reach": self.p_reach,
            "p_reach_by_bandwidth": list(self.p_reach_by_bandwidth),
            "least_bandwidth_bits_per_s_p10_p50_p90": q(self.least_bandwidth_q),
            "premium_at_reach_bandwidth_p10_p50_p90": q(self.premium_at_reach_bandwidth_q),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetBands:
    """Draw results for one target."""

    p_reach_at_reach_bandwidth: float
    """P(some plan reaches the target at the reach bandwidth, whatever it costs), in [0, 1]."""
    bands: tuple[Band, ...]
    """One per premium, in the frontier's order."""


class Draws:
    """The Monte Carlo draws (draw 0 nominal, 1.. samples) as arrays, with the per-draw kernel call."""

    def __init__(self, m: Mode, c: Constraints, samples: int, seed: int) -> None:
        from dispersal.model.analyses.uncertainty.monte_carlo import per_draw_arrays
        from dispersal.model.analyses.uncertainty.spec import default_spec

        spec = default_spec()
        nom = spec.nominal()
        relative_mfu = m is Mode.DEFAULT and c.mfu is None
        self.c = c.replace(mfu=float(nom["mfu"])) if ("mfu" in nom and not relative_mfu) else c
        self.arrays = per_draw_arrays(spec, samples, seed, nom, self.c, m, relative_mfu)
        self.samples = samples

    def with_arrays(self, arrays: dict[str, Arr]) -> Draws:
        """A copy drawing `arrays` instead (draw 0 nominal, then one row per draw): a design such as
        the Sobol' sensitivity's (`frontier.sensitivity`)."""
        out = object.__new__(Draws)
        out.c = self.c
        out.arrays = arrays
        out.samples = int(next(iter(arrays.values())).size) - 1
        return out

    def run(
        self,
        eng: Engine,
        combo: IntArr,
        n: Arr,
        cond: IntArr,
        conds: Sequence[Condition],
        draw: IntArr,
        floor: float | None = None,
    ) -> dict[str, Arr]:
        """Kernel outputs at draws `draw` (the planner Monte Carlo's transformation,
        `uncertainty.draws.apply_draw` and `eta_h_rescale`: MFU, quality fit draws and mapping, codec
        and activation quality, chip prices, Chinchilla, replica and straggler overrides, eta_H
        rescaled), plus ``valid`` and ``metric``. With `floor` (FLOP) only "metric >= floor" is exact
        (the kernel's ``quality_floor``, where the metric is C_quality)."""
        from dispersal.model.analyses.uncertainty.draws import apply_draw, eta_h_rescale, kernel_scores
        from dispersal.model.kernel.kernel import evaluate

        d, p = self.arrays, eng.space.p
        x = eng.inputs(combo, n, cond, conds)
        ov, qp = apply_draw(x, d, draw)
        # the draw's straggler scale, per configuration (kernel overrides of the straggler model)
        scale = d["straggler_scale"][draw]
        ov["straggler_coeff_relay"] = p.straggler_coeff_relay * scale
        ov["straggler_coeff_sync"] = p.straggler_coeff_sync * scale
        ratio = d["eta_h_ratio"][draw]
        if floor is not None and eng.metric.value != "c_local":
            # A draw that rescales eta_H after the schedule is chosen has a metric the kernel does not
            # score: no floor there.
            x["quality_floor"] = np.where(kernel_scores(x, ratio), floor, np.inf)
        r = evaluate(x, p, ov, qp, outputs=(*SEARCH_OUTPUTS, "replicas", "inner_steps_effective"))
        eng.kernel_calls += 1
        valid = eng.space.validity(r, combo, n)
        fac = eta_h_rescale(x, r, ratio, p)
        base = r["c_local_flop"] if eng.metric.value == "c_local" else r["c_quality_flop"]
        r["metric"] = base * fac
        r["valid"] = valid.astype(np.float64)
        return r


def least_costs(
    eng: Engine, dr: Draws, target: float, combos: IntArr, conds: Sequence[Condition], draws: IntArr
) -> Arr:
    """(draws, conditions): the cheapest cost over `combos` reaching the target, USD (inf: none). Per
    row (draw, condition, candidate) a geometric grid over the widened node window, then bisection to
    the first N meeting the target; the cheapest row per (draw, condition). Every draw shares the
    kernel calls (a draw's straggler scale is a per-configuration override, `Draws.run`)."""
    out = np.full((draws.size, len(conds)), np.inf)
    if combos.size == 0 or draws.size == 0:
        return out
    mesh = np.meshgrid(np.arange(draws.size), np.arange(len(conds)), np.arange(combos.size), indexing="ij")
    dd, kk, cc = (a.reshape(-1) for a in mesh)
    lo = np.empty(dd.size)
    hi = np.empty(dd.size)
    for k, cnd in enumerate(conds):
        wl, wh = eng.window(combos, cnd, target)
        sel = kk == k
        lo[sel] = np.maximum(np.floor(wl[cc[sel]] / DRAW_WINDOW_FACTOR), 1.0)
        hi[sel] = np.minimum(np.ceil(wh[cc[sel]] * DRAW_WINDOW_FACTOR), float(eng.c.max_nodes))
    ok = np.flatnonzero(hi >= lo)
    if ok.size == 0:
        return out
    dd, kk, cc, lo, hi = dd[ok], kk[ok], cc[ok], lo[ok], hi[ok]
    t = np.linspace(0.0, 1.0, DRAW_GRID_POINTS)
    g = np.round(lo[:, None] * (hi / lo)[:, None] ** t)
    g = np.maximum.accumulate(np.clip(g, lo[:, None], hi[:, None]), axis=1)

    def meets_cost(rows: IntArr, n: Arr) -> tuple[BoolArr, Arr]:
        res = np.zeros(rows.size, dtype=bool)
        cost = np.zeros(rows.size)
        for s in range(0, rows.size, _CHUNK):
            e = rows[s : s + _CHUNK]
            floor = target * (1 - 1e-9)
            r = dr.run(eng, combos[cc[e]], n[s : s + _CHUNK], kk[e], conds, draws[dd[e]], floor)
            res[s : s + _CHUNK] = (r["valid"] > 0) & (r["metric"] >= floor)
            cost[s : s + _CHUNK] = r["cost_usd"]
        return res, cost

    # Only the cheapest row per (draw, condition) is read: branch and bound on the cost, which the
    # kernel makes non-decreasing in N here (the search trains for the whole time budget, tokens 0, so
    # cost = (N + validators) x a node's price and energy; tests/model/test_frontier.py checks it),
    # through the grid and the bisection of each kept row's cell; the cost is the kernel's where the
    # row first meets the target.
    has, _, cost = cheapest_in_cells(g, meets_cost, dd * len(conds) + kk)
    if has.size:
        np.minimum.at(out, (dd[has], kk[has]), cost)
    return out


def shortlist(
    tab: TargetTable, conds: Sequence[int], combo_hw: IntArr, max_cost_usd: float = math.inf
) -> IntArr:
    """Candidates of the nominal search entering the draws: at each of `conds`, the
    SHORTLIST_PER_CONDITION cheapest (at least SHORTLIST_TOTAL / conditions) and the cheapest
    candidate of as many node types (a draw often changes which node type wins), among those
    costing at most `max_cost_usd`. When none does: the closest by the screen."""
    picked: set[int] = set()
    per = max(SHORTLIST_PER_CONDITION, -(-SHORTLIST_TOTAL // max(len(conds), 1)))
    for k in conds:
        row = np.where(tab.cost_min[k] <= max_cost_usd * (1 + 1e-12), tab.cost_min[k], np.inf)
        order = np.argsort(row, kind="stable")
        picked.update(int(tab.combos[i]) for i in order[:per] if np.isfinite(row[i]))
        seen: set[int] = set()
        for i in order:
            if not np.isfinite(row[i]) or len(seen) >= per:
                break
            h = int(combo_hw[tab.combos[i]])
            if h not in seen:
                seen.add(h)
                picked.add(int(tab.combos[i]))
    if not picked:
        reach = tab.exact_reach_flop()
        order = np.argsort(-reach, kind="stable")
        picked.update(int(i) for i in order[:SHORTLIST_TOTAL] if np.isfinite(reach[i]))
    return np.asarray(sorted(picked), dtype=np.int64)


def cheapest_per_node_type(eng: Engine, tab: TargetTable) -> IntArr:
    """Per node type of `eng`, the candidate of the nominal search `tab` (condition 0) with the
    lowest cost: a shortlist that keeps every node size (fine granularity in N x chips)."""
    row = tab.cost_min[0] if tab.combos.size else np.zeros(0)
    best: dict[int, tuple[float, int]] = {}
    for i in np.flatnonzero(np.isfinite(row)):
        h = int(eng.space.combo_hw[tab.combos[i]])
        if h not in best or row[i] < best[h][0]:
            best[h] = (float(row[i]), int(tab.combos[i]))
    return np.asarray(sorted(v[1] for v in best.values()), dtype=np.int64)


def quantiles_inf(values: Arr) -> tuple[float, float, float]:
    """P10, P50, P90 with inf counted as the largest values (a draw that cannot reach)."""
    if values.size == 0:
        return (math.inf, math.inf, math.inf)
    v = np.sort(values)
    out = []
    for q in (0.1, 0.5, 0.9):
        # the lower of the two order statistics around q (an inf never interpolates with a number)
        out.append(float(v[min(v.size - 1, math.floor(q * (v.size - 1)))]) if v.size else math.inf)
    return (out[0], out[1], out[2])


__all__ = [
    "Band",
    "Draws",
    "TargetBands",
    "cheapest_per_node_type",
    "least_costs",
    "quantiles_inf",
    "shortlist",
]
