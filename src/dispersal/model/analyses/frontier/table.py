"""The frontier's vectorised search: every node type the exact planner tries (the regime's cap and
every size below it), every model size and slot, at many link conditions (bandwidth, latency, time
budget) at once, in a few large kernel calls (docs/frontier.md, "Method").

For one target T and a largest budget B the search, per candidate c (node type, P, slot) and per
condition k:
1. the node-count window: the overtraining window in N (`CandidateSpace.node_window`, read at the
   condition itself: a PP-group candidate's tokens depend on its links), at least the compute bound
   N >= T / (chips x peak x MFU x T_budget x ETA_BOUND) and at most what B buys;
2. a screen at the top condition: the best metric on SCREEN_POINTS node counts of the window (no
   budget cap); candidates more than SCREEN_MARGIN short of T are dropped (the planner's own
   screen, an assumption: the metric varies slowly in N);
3. GRID_POINTS geometric node counts of each (candidate, condition) window, refined by integer
   bisection (`bisection.first_true` / `last_true`) in the grid cell where "meets T" changes: the
   smallest N meeting T (the cheapest plan of c at k) and, per budget, the largest N meeting T
   within it (the most sites of c at k).
The bisection assumes "meets T" changes once inside a grid cell (the planner's exact search proves
it per piece of constant inner steps; here a cell may straddle two pieces): an assumption, checked
against `planner.plan` in tests/model/test_frontier.py.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs import units
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search.bisection import cheapest_in_cells, first_in_cells, last_true
from dispersal.model.search.candidates import Constraints, hardware_variants, make_space
from dispersal.model.search.plan_result import Metric
from dispersal.model.search.planner import ETA_BOUND, SCREEN_MARGIN

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]

#: Relative widening of each candidate's overtraining window in N before the grid is laid (the
#: validity rule then trims it exactly): a numerical margin, not a model figure (as the Monte Carlo's).
WINDOW_SLACK = 0.02
#: Node counts of the screen per candidate (geometric over its window, no budget cap).
SCREEN_POINTS = 9
#: Node counts per candidate window when asking whether a target is reachable at all (`reaches`):
#: the planner's why-not grid (`why_not.WHY_NOT_GRID_POINTS`), since the metric can peak inside.
REACH_POINTS = 33
#: Node counts per (candidate, condition) window before the bisection refines the cell that matters.
GRID_POINTS = 8
#: Points per kernel call (a call has a fixed overhead of ~800 points' worth: benchmarks/bench_plan.py).
CHUNK_POINTS = 400_000
#: Outputs the overtraining window is read from (`CandidateSpace.node_window`).
_WINDOW_OUTPUTS = ("pipeline_stages", "overtraining_ratio", "fits", "under_cap")
#: Constraint fields only the kernel's quality stage reads (the replica penalty's mapping and inner
#: optimizer): the overtraining window reads the first schedule's tokens, the memory and the cap, none
#: of which they move, so engines that differ only in them share their windows (`Engine` windows_of).
QUALITY_ONLY_FIELDS = ("quality_mapping", "inner_optimizer")
#: Extra outputs read for a picked plan (the rest of the kernel's stages are skipped in the search).
_PICK_OUTPUTS = ("run_time_s", "mean_up_bits_per_s", "replicas")


@dataclass(frozen=True, kw_only=True, slots=True)
class Condition:
    """One link and time-budget condition of the search: per-site WAN (up = down), one-way latency
    and the time budget."""

    bandwidth_bits_per_s: float
    latency_s: float
    duration_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Pick:
    """One plan found: a candidate at N sites under one condition."""

    combo: int
    sites: int
    cost_usd: float
    metric_flop: float
    c_local_flop: float
    hardware: str
    chips_per_site: int
    power_per_site_kw: float
    days: float
    mean_wan_mbps_per_site: float
    replicas: int = 1
    """DiLoCo replicas of the plan (the kernel's `replicas`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetTable:
    """The search's answer for one target: per condition and candidate kept, the smallest N meeting
    the target and its cost; per condition and budget, the most sites within the budget."""

    target_flop: float
    conditions: tuple[Condition, ...]
    budgets_usd: tuple[float, ...]
    combos: IntArr
    n_min: Arr
    """(conditions, combos): smallest N meeting T (NaN: none in the budget-capped window)."""
    cost_min: Arr
    """(conditions, combos): cost of that plan, USD (inf: none)."""
    most_sites: IntArr
    """(conditions, budgets): the most sites within each budget (0: no plan)."""
    most_combo: IntArr
    """(conditions, budgets): the candidate with the most sites (-1: none)."""
    most_binds: tuple[tuple[str, ...], ...]
    """(conditions, budgets): what stops one more site for that candidate."""
    reach_uncapped_flop: Arr
    """Per candidate of the space: the best metric on the screen's node counts at condition 0
    with no budget cap (-inf: no valid point), whatever its power per site. Where `screen_exact` is
    False only "reach >= T (1 - SCREEN_MARGIN)" is exact (a value at or above it is a lower bound)."""
    c_local_uncapped_flop: float
    """The best C_local on the screen at condition 0 (what the chips deliver before the quality
    mapping) of the candidates under the power cap, FLOP (NaN where `screen_exact` is False)."""
    screen_exact: bool = True
    """Whether the screen's metrics are exact (False: a search that needs only the cheapest plans,
    `search_target(..., exact_screen=False)`)."""
    exact_screen_later: Callable[[], tuple[Arr, float]] | None = field(
        default=None, compare=False, repr=False
    )
    """Where the screen stopped at the margin: the exact screen, run on first call and kept
    (`search_target(..., exact_screen=False)`): (best metric per candidate, best C_local)."""

    def exact_reach_flop(self) -> Arr:
        """`reach_uncapped_flop` for a reader of its values (a reason, a ranking), exact: where the screen
        stopped at the margin, the exact screen run now (`exact_screen_later`; a ValueError without it)."""
        return self._exact()[0]

    def any_reaches(self, combos: IntArr, floor: float) -> bool:
        """Whether any candidate of `combos` (indices into the space) reaches `floor` on the screen
        (best metric >= floor), exactly: a screen that stopped at its margin answers from its own
        values where they settle it (a value at or above the floor is reached; none at or above the
        margin is none), and runs the exact screen only between the two."""
        reach = self.reach_uncapped_flop[combos]
        if self.screen_exact or np.any(reach >= floor):
            return bool(np.any(reach >= floor))
        if floor >= self.target_flop * (1 - SCREEN_MARGIN) and not np.any(
            reach >= self.target_flop * (1 - SCREEN_MARGIN)
        ):
            return False
        return bool(np.any(self.exact_reach_flop()[combos] >= floor))

    def exact_c_local_flop(self) -> float:
        """`c_local_uncapped_flop`, exact (as `exact_reach_flop`)."""
        return self._exact()[1]

    def _exact(self) -> tuple[Arr, float]:
        if self.screen_exact:
            return self.reach_uncapped_flop, self.c_local_uncapped_flop
        if self.exact_screen_later is None:
            raise ValueError(
                "tab: the screen's best metrics are not exact (search_target(exact_screen=True))"
            )
        return self.exact_screen_later()


class Engine:
    """The candidate space of `planner.plan` (every node size), evaluated at many conditions."""

    def __init__(
        self,
        mode: Mode,
        c: Constraints,
        regime_name: str,
        params: ModelParams = DEFAULT_PARAMS,
        max_site_kw: float | None = None,
        windows_of: Engine | None = None,
    ) -> None:
        """`windows_of`: an engine whose inputs differ from these only in QUALITY_ONLY_FIELDS of the
        constraints: its overtraining windows read so far are this one's too (ValueError otherwise)."""
        self.mode, self.c, self.regime = mode, c, regime_name
        self.metric = Metric.C_LOCAL if mode is Mode.PAPER else Metric.C_QUALITY
        variants = hardware_variants(mode, c, regime_name)
        if c.chips_per_node is None:
            variants += hardware_variants(mode, c, regime_name, all_sizes=True)
        sp = make_space(mode, c, regime_name, params, variants=variants)
        self.space = sp
        self._windows: dict[Condition, tuple[BoolArr, Arr, Arr]] = {}
        h = sp.hw_inputs
        self.power_kw = np.asarray(h["chips_per_node"] * h["tdp_w"] * h["pue"] / 1000.0, dtype=np.float64)
        self.max_site_kw = max_site_kw
        # `usable`: under the per-site power cap (sites above it are not searched, but the screen
        # still reads them to say "power" binds); the overtraining window is per condition (`window`).
        cap = math.inf if max_site_kw is None else max_site_kw
        self.usable = np.asarray(self.power_kw[sp.combo_hw] <= cap * (1 + 1e-12), dtype=bool)
        self.node_flop_per_s = np.asarray(h["node_peak_flop_per_s"] * h["mfu"], dtype=np.float64)
        self.labels = [f"{v.chips}x {v.name} {v.precision.value.upper()}" for v in sp.variants]
        self.kernel_calls = 0
        if windows_of is not None:
            same = windows_of.c.replace(**{f: getattr(c, f) for f in QUALITY_ONLY_FIELDS})
            if (windows_of.mode, same, windows_of.regime, windows_of.space.p, windows_of.max_site_kw) != (
                mode,
                c,
                regime_name,
                params,
                max_site_kw,
            ) or not all(
                np.array_equal(getattr(windows_of.space, a), getattr(sp, a))
                for a in ("combo_hw", "combo_p", "combo_slot")
            ):
                raise ValueError(f"windows_of: must differ only in {', '.join(QUALITY_ONLY_FIELDS)}")
            self._windows = dict(windows_of._windows)

    def node_cost(self, duration_s: float) -> Arr:
        """Cost of one site of each node type for the whole run, USD (the kernel's: purchase x
        multiplier plus energy, or rental), at a time budget."""
        h, hours = self.space.hw_inputs, duration_s / 3600.0
        per_chip = np.where(
            h["rental"] > 0,
            h["rental_usd_per_chip_hour"] * hours,
            h["price_usd_per_chip"] * h["capex_multiplier"]
            + h["tdp_w"] * h["pue"] * hours / 1000.0 * h["electricity_usd_per_kwh"],
        )
        return np.asarray(h["chips_per_node"] * per_chip, dtype=np.float64)

    def inputs(self, combo: IntArr, n: Arr, cond: IntArr, conds: Sequence[Condition]) -> dict[str, Arr]:
        """Kernel inputs of candidates `combo` at node counts `n` under conditions `cond` (indices
        into `conds`): the space's inputs with the links, latency and time budget replaced."""
        sp, c = self.space, self.c
        x = sp.with_window(sp.inputs(combo, np.asarray(n, dtype=np.float64)))
        b = np.asarray([k.bandwidth_bits_per_s for k in conds])[cond]
        x["up_bits_per_s"], x["down_bits_per_s"] = b, b
        # Every site is its own site: regional and pipeline links are the WAN unless given.
        if c.regional_bandwidth_bits_per_s is None:
            x["regional_bits_per_s"] = b
        if c.pp_bandwidth_bits_per_s is None:
            x["pp_bits_per_s"] = b
        lat = np.asarray([k.latency_s for k in conds])[cond]
        x["latency_s"] = x["regional_latency_s"] = x["pp_latency_s"] = lat
        x["duration_s"] = np.asarray([k.duration_s for k in conds])[cond]
        return x

    def run(
        self,
        combo: IntArr,
        n: Arr,
        cond: IntArr,
        conds: Sequence[Condition],
        extra: tuple[str, ...] = (),
        floor: float | None = None,
        walk: bool = True,
    ) -> dict[str, Arr]:
        """Kernel outputs of candidates `combo` at node counts `n` under conditions `cond` (indices
        into `conds`), plus ``valid`` (spec sec. 10) and ``metric``; chunked. With `floor` (FLOP of
        C_quality) only "metric >= floor" is exact (the kernel's ``quality_floor``); `walk` False: each
        configuration's first schedule (the kernel's ``schedule_walk`` 0; `kernel.choose`)."""
        from dispersal.model.kernel.kernel import evaluate
        from dispersal.model.search.candidates import SEARCH_OUTPUTS

        outs: dict[str, list[Arr]] = {}
        for s in range(0, max(combo.size, 1), CHUNK_POINTS):
            e = slice(s, s + CHUNK_POINTS)
            cc, nn = combo[e], np.asarray(n[e], dtype=np.float64)
            x = self.inputs(cc, nn, cond[e], conds)
            if floor is not None:
                x["quality_floor"] = np.asarray(floor)
            if not walk:
                x["schedule_walk"] = np.zeros(())
            r = evaluate(x, self.space.p, outputs=(*SEARCH_OUTPUTS, *extra))
            self.kernel_calls += 1
            r["valid"] = self.space.validity(r, cc, nn).astype(np.float64)
            r["metric"] = r["c_local_flop"] if self.metric is Metric.C_LOCAL else r["c_quality_flop"]
            for k, v in r.items():
                outs.setdefault(k, []).append(np.broadcast_to(np.asarray(v, dtype=np.float64), nn.shape))
        return {k: np.concatenate(v) for k, v in outs.items()}

    def meets(
        self, combo: IntArr, n: Arr, cond: IntArr, conds: Sequence[Condition], target: float
    ) -> BoolArr:
        """Valid and meeting the target (FLOP of the mode's metric)."""
        if combo.size == 0:
            return np.zeros(0, dtype=bool)
        floor = target * (1 - 1e-9)
        # The quality metric is the kernel's score, so the schedule walk may stop at the floor.
        r = self.run(combo, n, cond, conds, floor=floor if self.metric is Metric.C_QUALITY else None)
        return np.asarray((r["valid"] > 0) & (r["metric"] >= floor), dtype=bool)

    def window(self, combo: IntArr, k: Condition, target: float) -> tuple[Arr, Arr]:
        """(lowest, highest) N worth trying per candidate under condition k, no budget cap: the
        overtraining window read at k itself (`node_window`, widened by WINDOW_SLACK; a PP-group
        candidate's tokens depend on the links, so the window does too), the compute bound and
        the node cap. A candidate outside the window at k gets lo > hi."""
        usable, n_lo, n_hi = self._window_at(k)
        hw = self.space.combo_hw[combo]
        need = np.ceil(target / (self.node_flop_per_s[hw] * k.duration_s * ETA_BOUND) * (1 - 1e-9))
        lo = np.maximum(n_lo[combo], np.maximum(need, 1.0))
        hi = np.minimum(n_hi[combo], float(self.c.max_nodes))
        return np.where(usable[combo], lo, np.inf), hi

    def _window_at(self, k: Condition) -> tuple[BoolArr, Arr, Arr]:
        """The overtraining window of every candidate at condition k (cached; `prefetch_windows`)."""
        got = self._windows.get(k)
        if got is None:
            self.prefetch_windows((k,))
            got = self._windows[k]
        return got

    def prefetch_windows(self, conds: Sequence[Condition]) -> None:
        """Read the overtraining window of every candidate at each of `conds` not read yet, several
        conditions per kernel call (up to CHUNK_POINTS points): the kernel is element-wise, so this
        equals one call per condition, with fewer calls' fixed overhead."""
        from dispersal.model.kernel.kernel import evaluate

        todo = [k for k in dict.fromkeys(conds) if k not in self._windows]
        if not todo:
            return
        sp = self.space
        allc = np.arange(len(sp.combo_hw), dtype=np.int64)
        n_ref = sp.reference_nodes(allc)
        nc = allc.size
        # batches of conditions within CHUNK_POINTS points per call
        per_call = max(1, CHUNK_POINTS // max(nc, 1))
        for s in range(0, len(todo), per_call):
            batch = todo[s : s + per_call]
            m = len(batch)
            cond = np.repeat(np.arange(m, dtype=np.int64), nc)
            x = self.inputs(np.tile(allc, m), np.tile(n_ref, m), cond, batch)
            x["min_overtraining"] = np.asarray(np.inf)
            out = evaluate(x, sp.p, outputs=_WINDOW_OUTPUTS)
            self.kernel_calls += 1
            ref = {key: np.broadcast_to(v, (m * nc,)) for key, v in out.items()}
            for i, k in enumerate(batch):
                part = {key: v[i * nc : (i + 1) * nc] for key, v in ref.items()}
                self._windows[k] = sp.node_window(part, allc, n_ref, slack=WINDOW_SLACK)

    def reaches(self, combo: IntArr, k: Condition, target: float) -> bool:
        """Whether any of `combo` meets the target under condition k at any cost: REACH_POINTS node
        counts of each window with no budget cap (a grid, so "no" is a grid answer), the top of each
        window asked first."""
        lo, hi = self.window(combo, k, target)
        ok = hi >= lo
        if not ok.any():
            return False
        g = geomgrid(lo[ok], hi[ok], REACH_POINTS)
        cc = combo[ok]
        # The top of each window first (the most sites, hence the most compute, within the window): when
        # some plan reaches, that call usually says so and the other points are not asked about.
        for cols in (g[:, -1:], g[:, :-1]):
            n = cols.reshape(-1)
            zeros = np.zeros(n.size, dtype=np.int64)
            if n.size and self.meets(np.repeat(cc, cols.shape[1]), n, zeros, [k], target).any():
                return True
        return False

    def pick(self, combo: int, n: int, k: Condition) -> Pick:
        """The figures of one plan (one kernel call)."""
        r = self.run(
            np.asarray([combo]), np.asarray([float(n)]), np.zeros(1, dtype=np.int64), [k], _PICK_OUTPUTS
        )
        h = int(self.space.combo_hw[combo])
        return Pick(
            combo=combo,
            sites=int(n),
            cost_usd=float(r["cost_usd"][0]),
            metric_flop=float(r["metric"][0]),
            c_local_flop=float(r["c_local_flop"][0]),
            hardware=self.labels[h],
            chips_per_site=int(self.space.variants[h].chips),
            power_per_site_kw=float(self.power_kw[h]),
            days=float(r["run_time_s"][0]) / units.SECONDS_PER_DAY,
            mean_wan_mbps_per_site=float(r["mean_up_bits_per_s"][0]) / 1e6,
            replicas=round(float(r["replicas"][0])),
        )


def geomgrid(lo: Arr, hi: Arr, points: int) -> Arr:
    """(rows, points) integer node counts from lo to hi (geometric, ends exact, non-decreasing)."""
    t = np.linspace(0.0, 1.0, points)
    g = np.round(lo[:, None] * (hi / lo)[:, None] ** t[None, :])
    g[:, 0], g[:, -1] = lo, hi
    return np.asarray(np.maximum.accumulate(np.clip(g, lo[:, None], hi[:, None]), axis=1), dtype=np.float64)


def search_target(
    eng: Engine,
    target: float,
    conds: Sequence[Condition],
    budgets_usd: Sequence[float],
    *,
    exact_screen: bool = True,
    cheapest_only: bool = False,
) -> TargetTable:
    """The search for one target (module docstring). Condition 0 is the screen's (the most
    generous: top bandwidth, base latency, full time budget); budgets ascending.

    `exact_screen` False: the screen asks only whether each candidate comes within SCREEN_MARGIN of
    T (the kernel's ``quality_floor``: the schedule walk stops there), for a caller that reads the
    cheapest plans and not the screen's best metrics (which candidates are kept is the same); a reader
    of those values gets them exact on demand (`TargetTable.exact_reach_flop`, `any_reaches`).
    `cheapest_only` True: for a caller that reads only the cheapest plan per condition
    (``cost_min.min(axis=1)``), which is then exactly as without it, but a candidate that cannot beat
    the cheapest is not refined (its ``n_min`` NaN, ``cost_min`` inf: `_cheapest`) and the most sites
    per budget are not searched (``most_sites`` 0, binds "not searched")."""
    sp = eng.space
    eng.prefetch_windows(conds)
    budgets = tuple(sorted(float(b) for b in budgets_usd))
    bmax = budgets[-1] if budgets else math.inf
    # 2. the screen (no budget cap): also tells cost from quality where nothing fits the budget.
    floor = None if exact_screen or eng.metric is Metric.C_LOCAL else target * (1 - SCREEN_MARGIN)
    reach, c_local_best = _screen(eng, target, conds[0], floor)
    if not exact_screen:
        c_local_best = math.nan
    # A reader of the exact values (a reason, a ranking: rarely) runs the exact screen then.
    later = None if exact_screen else functools.cache(lambda: _screen(eng, target, conds[0], None))
    keep = np.flatnonzero((reach >= target * (1 - SCREEN_MARGIN)) & eng.usable).astype(np.int64)
    nk, nc = len(conds), keep.size
    n_min = np.full((nk, nc), np.nan)
    cost_min = np.full((nk, nc), np.inf)
    most = np.zeros((nk, len(budgets)), dtype=np.int64)
    most_combo = np.full((nk, len(budgets)), -1, dtype=np.int64)
    binds = [["no plan" for _ in budgets] for _ in conds]
    if nc and budgets:
        hw = sp.combo_hw[keep]
        node_cost = np.stack([eng.node_cost(k.duration_s)[hw] for k in conds])  # (nk, nc)
        lo = np.empty((nk, nc))
        hi = np.empty((nk, nc))
        for i, k in enumerate(conds):
            lo[i], hi[i] = eng.window(keep, k, target)
        top = np.minimum(hi, np.floor(bmax / node_cost * (1 + 1e-12)))
        rows = np.flatnonzero((top >= lo).reshape(-1))
        if rows.size:
            ki, ci = np.divmod(rows, nc)
            g = geomgrid(lo.reshape(-1)[rows], top.reshape(-1)[rows], GRID_POINTS)
            rws = _Rows(eng, target, conds, keep, ki, ci)
            if cheapest_only:
                _cheapest(rws, g, node_cost[ki, ci], n_min)
                binds = [["not searched" for _ in budgets] for _ in conds]
            else:
                mt = eng.meets(
                    np.repeat(keep[ci], GRID_POINTS), g.reshape(-1), np.repeat(ki, GRID_POINTS), conds, target
                ).reshape(-1, GRID_POINTS)
                _smallest(rws, g, mt, n_min)
                nb = np.stack([np.floor(b / node_cost * (1 + 1e-12)) for b in budgets], axis=-1)
                _largest(rws, g, mt, nb, hi, most, most_combo, binds)
            cost_min[:] = np.where(np.isfinite(n_min), n_min * node_cost, np.inf)
    return TargetTable(
        target_flop=target,
        conditions=tuple(conds),
        budgets_usd=budgets,
        combos=keep,
        n_min=n_min,
        cost_min=cost_min,
        most_sites=most,
        most_combo=most_combo,
        most_binds=tuple(tuple(b) for b in binds),
        reach_uncapped_flop=reach,
        c_local_uncapped_flop=c_local_best,
        screen_exact=exact_screen,
        exact_screen_later=later,
    )


def _screen(eng: Engine, target: float, k0: Condition, floor: float | None) -> tuple[Arr, float]:
    """The screen at condition `k0` (no budget cap): per candidate of the space the best metric on
    SCREEN_POINTS node counts of its window (-inf: no valid point), and the best C_local of those under
    the power cap. With a `floor` only "metric >= floor" is exact (the kernel's walk stops there)."""
    allc = np.arange(len(eng.space.combo_hw), dtype=np.int64)
    lo0, hi0 = eng.window(allc, k0, target)
    ok = hi0 >= lo0
    reach = np.full(allc.size, -np.inf)
    c_local_best = -math.inf
    if not ok.any():
        return reach, c_local_best
    cc = allc[ok]
    g = geomgrid(lo0[ok], hi0[ok], SCREEN_POINTS)

    def metric(rows: IntArr, cols: IntArr) -> tuple[Arr, dict[str, Arr]]:
        n = g[rows][:, cols]
        r = eng.run(
            np.repeat(cc[rows], cols.size), n.reshape(-1), np.zeros(n.size, dtype=np.int64), [k0], floor=floor
        )
        return np.where(r["valid"] > 0, r["metric"], -np.inf).reshape(n.shape), r

    every = np.arange(SCREEN_POINTS)
    if floor is not None:
        # Only "reaches the floor?" is exact: first the largest node count inside the window (its top is
        # widened by WINDOW_SLACK, usually past the overtraining window: invalid), usually the most
        # compute, then the other points only for the candidates it leaves below the floor.
        m = np.full(g.shape, -np.inf)
        inner = SCREEN_POINTS - 2
        m[:, [inner]] = metric(np.arange(cc.size), every[[inner]])[0]
        low = np.flatnonzero(~(m[:, inner] >= floor))
        rest = np.delete(every, inner)
        if low.size:
            m[np.ix_(low, rest)] = metric(low, rest)[0]
        reach[cc] = m.max(axis=1)
        return reach, math.nan
    m, r = metric(np.arange(cc.size), every)
    reach[cc] = m.max(axis=1)
    under = np.repeat(eng.usable[cc], SCREEN_POINTS)
    c_local_best = float(np.max(np.where((r["valid"] > 0) & under, r["c_local_flop"], -np.inf)))
    return reach, c_local_best


@dataclass(frozen=True, slots=True)
class _Rows:
    """The rows of a search's grid: row r is candidate keep[ci[r]] under condition conds[ki[r]], asked
    whether it meets the target."""

    eng: Engine
    target: float
    conds: Sequence[Condition]
    keep: IntArr
    ki: IntArr
    ci: IntArr

    def meets(self, r: IntArr, n: Arr) -> BoolArr:
        """Whether rows r meet the target at node counts n (`Engine.meets`)."""
        return self.eng.meets(self.keep[self.ci[r]], n, self.ki[r], self.conds, self.target)


def _smallest(rows: _Rows, g: Arr, mt: BoolArr, n_min: Arr) -> None:
    """Fill n_min[k, c]: the first grid point meeting T, refined down to the integer by bisection
    inside its grid cell (`bisection.first_in_cells`)."""
    sel, n = first_in_cells(g, np.where(mt.any(axis=1), np.argmax(mt, axis=1), -1), rows.meets)
    n_min[rows.ki[sel], rows.ci[sel]] = n


def _cheapest(rows: _Rows, g: Arr, unit_usd: Arr, n_min: Arr) -> None:
    """`_smallest` for the rows that can hold the cheapest plan of their condition: branch and bound on
    the table's cost N x unit_usd, through the grid and the cells (`bisection.cheapest_in_cells`). The
    per-condition minimum of n_min x unit is exactly `_smallest`'s; the dropped rows' n_min stay NaN."""

    def meets_cost(r: IntArr, n: Arr) -> tuple[BoolArr, Arr]:
        return rows.meets(r, n), n * unit_usd[r]

    sel, n, _ = cheapest_in_cells(g, meets_cost, rows.ki)
    n_min[rows.ki[sel], rows.ci[sel]] = n


def _largest(
    rows: _Rows,
    g: Arr,
    mt: BoolArr,
    nb: Arr,
    hi_win: Arr,
    most: IntArr,
    most_combo: IntArr,
    binds: list[list[str]],
) -> None:
    """Per condition and budget: the most sites of any candidate meeting T within the budget. Per
    row, the last grid point meeting T within the budget's node count, then bisection up to the next
    grid point (or the budget's node count); only rows that could beat the best lower bound are
    refined. Fills most, most_combo and binds (what stops one more site of the winner)."""
    eng, target, conds, keep, ki, ci = rows.eng, rows.target, rows.conds, rows.keep, rows.ki, rows.ci
    nbud = nb.shape[-1]
    idx = np.arange(g.shape[0])
    for j in range(nbud):
        cap = nb[ki, ci, j]  # node count the budget buys, per row
        ok = mt & (g <= cap[:, None])
        has = ok.any(axis=1)
        if not has.any():
            continue
        last = g.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
        low = np.where(has, g[idx, last], 0.0)
        nxt = np.where(last + 1 < g.shape[1], g[idx, np.minimum(last + 1, g.shape[1] - 1)] - 1.0, cap)
        up = np.where(has, np.minimum(np.maximum(nxt, low), cap), 0.0)
        for k in range(len(conds)):
            rk = np.flatnonzero((ki == k) & has)
            if rk.size == 0:
                continue
            best_low = float(low[rk].max())
            sel = rk[up[rk] > best_low]
            ends = low[sel]
            if sel.size:

                def pred(s: IntArr, n: Arr, sel: IntArr = sel) -> BoolArr:
                    return rows.meets(sel[s], n)

                ends = last_true(low[sel], up[sel], pred)
            cand = np.concatenate([low[rk], ends])
            which = np.concatenate([rk, sel])
            w = int(np.argmax(cand))
            r = int(which[w])
            n_best = int(cand[w])
            most[k, j] = n_best
            most_combo[k, j] = int(keep[ci[r]])
            binds[k][j] = _why_no_more(
                eng, target, conds, int(keep[ci[r]]), n_best, k, cap[r], hi_win[k, ci[r]]
            )


def _why_no_more(
    eng: Engine,
    target: float,
    conds: Sequence[Condition],
    combo: int,
    n: int,
    k: int,
    budget_nodes: float,
    window_hi: float,
) -> str:
    """What stops one more site of candidate `combo` at n sites: cost (the budget buys n), the node
    cap, the overtraining window, memory, or replica quality (the metric at n + 1 falls short)."""
    if n >= budget_nodes:
        return "cost"
    if n >= eng.c.max_nodes:
        return "node cap"
    r = eng.run(np.asarray([combo]), np.asarray([n + 1.0]), np.asarray([k]), conds)
    if r["valid"][0] > 0:
        return "replica quality" if r["metric"][0] < target * (1 - 1e-9) else "replica quality (grid cell)"
    if r["fits"][0] <= 0:
        return "memory"
    if n + 1 > window_hi or r["overtraining_ratio"][0] > eng.c.max_overtraining:
        return "overtraining window"
    return "time budget" if r["feasible"][0] <= 0 else "overtraining window"


__all__ = ["Condition", "Engine", "Pick", "TargetTable", "search_target"]
