"""The planner: the cheapest way to reach a compute target while every node stays under a regime's
covered-cluster rule (Rahman 2026 sec. 10), with the paper's bisection and an exact search.

Candidates at (hardware, N, P) follow spec/model.md sec. 10: if the model fits one node, flat
Streaming DiLoCo plus hierarchical DiLoCo for each group size n_g with N >= 2 n_g; otherwise
PP-group DiLoCo with S stages and G = floor(N / S) >= 2 groups. H = H_min. Candidates outside
min_overtraining <= OT <= max_overtraining are dropped. Everything is evaluated with
`kernel.evaluate` on NumPy arrays: one call per bisection step for all hardware at once, and one
call per chunk of (candidate, N) pairs in the exact search.

Two searches over the node count N:
- ``bisect`` (the paper's): per hardware, if one node meets the target take it; else if
  best(max_nodes) misses, infeasible; else bisect lo = 2, hi = max_nodes on "best(N) meets".
  It assumes the best metric rises with N, which it does not: the overtraining window and the
  memory cap open and close ranges of N, so it can skip a cheap window.
- ``exact``: the smallest N that meets the target for each hardware, found by evaluating every
  integer N inside each candidate's overtraining window up to the best cost found so far. Under the
  model this is the true optimum over the candidate set (cost rises with N for a given node type).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model import units
from dispersal.model.catalog import accelerator, accelerators, regime
from dispersal.model.efficiency import Straggler
from dispersal.model.errors import InputError, require
from dispersal.model.kernel import MODE_AUTO, MODE_HIER, MODE_NAMES, MODE_PP, evaluate
from dispersal.model.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.scenario import (
    Algorithm,
    Mode,
    Precision,
    Pricing,
    Scenario,
    kernel_inputs,
    max_chips_under,
)

Arr = npt.NDArray[np.float64]

#: The paper's model-size grid, billions of parameters (71 values, spec sec. 10).
PAPER_PARAM_GRID_B: tuple[float, ...] = (
    0.5, 1, 2, 5, 10, 25, 28, 30, 32, 35, 40, 45, 50, 60, 70, 78, 85, 91, 92, 100, 110, 120, 130, 140, 150, 155,
    160, 165, 170, 172, 175, 178, 180, 185, 195, 200, 210, 225, 235, 240, 245, 248, 250, 252, 255, 258, 260, 265,
    270, 275, 280, 290, 300, 310, 315, 320, 325, 330, 335, 340, 350, 375, 400, 450, 500, 625, 750, 1000, 1500,
    2500, 5000, 10000,
)
#: Hierarchical group sizes searched (spec sec. 10).
PAPER_GROUP_SIZES: tuple[int, ...] = (4, 8, 10, 12, 14, 16, 18, 20, 24, 32)


class Metric(StrEnum):
    """Which compute a target is measured in."""

    C_LOCAL = "c_local"
    C_QUALITY = "c_quality"


class Objective(StrEnum):
    """What the planner minimises."""

    COST = "cost"
    NODES = "nodes"
    TIME = "time"


class Search(StrEnum):
    """How the node count is searched."""

    BISECT = "bisect"
    EXACT = "exact"


@dataclass(frozen=True, kw_only=True, slots=True)
class Constraints:
    """What the evader must live with. SI units."""

    bandwidth_up_bits_per_s: float = 100e6
    bandwidth_down_bits_per_s: float = 100e6
    latency_s: float = 0.100
    max_duration_s: float = 740 * units.SECONDS_PER_DAY
    hardware: tuple[str, ...] = ()
    """Accelerators to consider; empty = the paper's nine (paper mode) or the whole catalogue."""
    max_nodes: int = 100_000
    min_overtraining: float = 1.0
    max_overtraining: float = 100.0
    compression_ratio: float = 150.0
    mfu: float = 0.40
    straggler: str = "relay"
    pricing: Pricing = Pricing.PURCHASE
    max_cost_usd: float = math.inf
    """Budget; used by the time objective (and as a hard cap for every objective)."""
    regional_bandwidth_bits_per_s: float | None = None
    """Regional link for hierarchical DiLoCo; None = the WAN (min of up and down), in both modes:
    each node is a separate site (co-located nodes would form one covered cluster)."""
    pp_bandwidth_bits_per_s: float | None = None
    """Pipeline-stage link; None = the WAN, as above."""

    def __post_init__(self) -> None:
        for name in ("bandwidth_up_bits_per_s", "bandwidth_down_bits_per_s", "max_duration_s", "mfu",
                     "compression_ratio", "max_cost_usd"):
            v = getattr(self, name)
            require(v > 0 and not math.isnan(v), name, f"must be > 0, got {v}")
        require(self.latency_s >= 0, "latency_s", f"must be >= 0 s, got {self.latency_s}")
        require(self.mfu <= 1, "mfu", f"must be in (0, 1], got {self.mfu}")
        require(isinstance(self.max_nodes, int) and 1 <= self.max_nodes <= 10_000_000, "max_nodes",
                f"must be an integer in [1, 10,000,000], got {self.max_nodes}")
        require(0 < self.min_overtraining <= self.max_overtraining, "min_overtraining",
                f"must be in (0, max_overtraining], got {self.min_overtraining}")
        try:
            object.__setattr__(self, "pricing", Pricing(self.pricing))
            Straggler(self.straggler)
        except ValueError as exc:
            raise InputError("straggler" if "Straggler" in str(exc) else "pricing", str(exc)) from None
        for hw in self.hardware:
            accelerator(hw)

    def replace(self, **changes: Any) -> Constraints:
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanOption:
    """One concrete configuration: a Scenario that `estimate()` reproduces, and its key figures."""

    scenario: Scenario
    hardware: str
    precision: str
    chips_per_node: int
    nodes: int
    params: float
    tokens: float
    days: float
    algorithm: str
    group_size: int
    pipeline_stages: int
    groups: int
    inner_steps: int
    inner_steps_effective: float
    compression_ratio: float
    cost_usd: float
    c_local_flop: float
    c_quality_flop: float
    overtraining_ratio: float
    mean_wan_mbps_per_node: float
    peak_wan_mbps_per_node: float
    efficiency: dict[str, float]

    @property
    def label(self) -> str:
        """E.g. '16x H100_SXM FP8'."""
        return f"{self.chips_per_node}x {self.hardware} {self.precision.upper()}"

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-ready dict (efficiency factors by name at the top level too)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "scenario"}
        d["scenario"] = self.scenario.to_dict()
        d.update(self.efficiency)
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """The planner's answer for one target."""

    target_flop: float
    metric: str
    regime: str
    mode: str
    search: str
    objective: str
    feasible: bool
    best: PlanOption | None
    per_hardware: tuple[PlanOption, ...]
    """The best option of each hardware type that can meet the target (runners-up), cheapest first."""
    failures: dict[str, str] = field(default_factory=dict)
    """Why each other hardware type could not meet it."""
    reasons: tuple[str, ...] = ()
    evaluations: int = 0
    """Configurations evaluated."""

    def to_dict(self) -> dict[str, Any]:
        """JSON: the best option's fields at the top level, plus runners-up and failures."""
        d: dict[str, Any] = {
            "feasible": self.feasible, "target_flop": self.target_flop, "metric": self.metric,
            "regime": self.regime, "mode": self.mode, "search": self.search, "objective": self.objective,
            "reasons": list(self.reasons), "evaluations": self.evaluations,
        }
        if self.best is not None:
            d.update(self.best.to_dict())
        d["runners_up"] = [o.to_dict() for o in self.per_hardware]
        d["failures"] = dict(self.failures)
        return d


@dataclass(frozen=True, slots=True)
class _HwVariant:
    name: str
    precision: Precision
    chips: int


def hardware_variants(mode: Mode, constraints: Constraints, regime_name: str) -> list[_HwVariant]:
    """The node types searched: each accelerator at FP16/BF16 and, where searched, FP8.

    Paper mode: the paper's nine node types plus FP8 variants of H100, GH200 and TPU v6e (12).
    Default mode: every catalogue accelerator, with FP8 wherever the chip has it.
    """
    reg = regime(regime_name)
    names = constraints.hardware or tuple(
        a.name for a in accelerators().values() if (a.paper_search or mode is Mode.DEFAULT)
    )
    out: list[_HwVariant] = []
    for n in names:
        acc = accelerator(n)
        chips = max_chips_under(acc, reg)
        out.append(_HwVariant(acc.name, Precision.BF16, chips))
        fp8 = acc.paper_fp8 if mode is Mode.PAPER else acc.dense_fp8_flop_per_s > 0
        if fp8:
            out.append(_HwVariant(acc.name, Precision.FP8, chips))
    return out


class _Space:
    """The candidate set: (hardware, P, slot) combinations as flat arrays over kernel inputs.

    Slot 0 is the paper's automatic choice (flat if the model fits one node, else PP-group);
    slots 1.. are hierarchical DiLoCo with each group size, only for models that fit one node.
    """

    def __init__(self, variants: list[_HwVariant], mode: Mode, c: Constraints, regime_name: str,
                 params_grid: Sequence[float], group_sizes: Sequence[int], p: ModelParams) -> None:
        self.variants, self.mode, self.c, self.p = variants, mode, c, p
        self.params_grid = np.asarray(params_grid, dtype=np.float64)
        self.group_sizes = tuple(group_sizes)
        wan_min = min(c.bandwidth_up_bits_per_s, c.bandwidth_down_bits_per_s)
        self.base_scenarios = [
            Scenario(
                name="plan", hardware=v.name, precision=v.precision, chips_per_node=v.chips, num_nodes=1,
                params=1e9, algorithm=Algorithm.AUTO, compression_ratio=c.compression_ratio, mfu=c.mfu,
                bandwidth_up_bits_per_s=c.bandwidth_up_bits_per_s,
                bandwidth_down_bits_per_s=c.bandwidth_down_bits_per_s, latency_s=c.latency_s,
                duration_s=c.max_duration_s, straggler=Straggler(c.straggler), pricing=c.pricing, regime=regime_name,
                # Every node is its own site: links between sites are the WAN unless the user says
                # otherwise. Faster (co-located) links would make nodes one facility, i.e. one
                # cluster that the covered-cluster rule counts as a whole.
                regional_bandwidth_bits_per_s=c.regional_bandwidth_bits_per_s or wan_min,
                regional_latency_s=c.latency_s,
                pp_bandwidth_bits_per_s=c.pp_bandwidth_bits_per_s or wan_min,
                pp_latency_s=c.latency_s,
            )
            for v in variants
        ]
        rows = [kernel_inputs(s, mode) for s in self.base_scenarios]
        self.hw_inputs = {k: np.asarray([float(r[k]) for r in rows]) for k in rows[0]}
        self.slot_mode = np.asarray([MODE_AUTO] + [MODE_HIER] * len(self.group_sizes), dtype=np.float64)
        self.slot_group = np.asarray([8, *self.group_sizes], dtype=np.float64)
        self.n_hw, self.n_p, self.n_slot = len(variants), len(self.params_grid), 1 + len(self.group_sizes)
        hw_l, p_l, s_l = [], [], []
        for h, r in enumerate(rows):
            for i, P in enumerate(self.params_grid):
                fits = P * (r["bytes_per_param"] + r["extra_bytes_per_param"]) <= r["node_memory_bytes"]
                for sl in range(self.n_slot if fits else 1):
                    hw_l.append(h)
                    p_l.append(i)
                    s_l.append(sl)
        self.combo_hw = np.asarray(hw_l, dtype=np.int64)
        self.combo_p = np.asarray(p_l, dtype=np.int64)
        self.combo_slot = np.asarray(s_l, dtype=np.int64)
        self.hw_start = np.searchsorted(self.combo_hw, np.arange(self.n_hw))
        # Cost of one node over the whole time budget, exactly as the kernel costs it (plans use the
        # full budget): purchase x multiplier plus energy, or rental. It orders and prunes hardware.
        hours = c.max_duration_s / 3600.0
        self.node_cost = np.asarray(
            [r["chips_per_node"] * (r["rental_usd_per_chip_hour"] * hours if r["rental"]
                                    else r["price_usd_per_chip"] * r["capex_multiplier"]
                                    + r["tdp_w"] * r["pue"] * hours / 1000.0 * r["electricity_usd_per_kwh"])
             for r in rows]
        )
        self.evaluations = 0
        self.top_cache: Arr | None = None
        # Largest node count per node type: max_nodes, and what the budget buys (cost = N x node cost).
        budget_nodes = np.floor(c.max_cost_usd / self.node_cost * (1 + 1e-12)) if math.isfinite(c.max_cost_usd) \
            else np.full(self.n_hw, float(c.max_nodes))
        self.n_cap = np.clip(budget_nodes, 0.0, float(c.max_nodes))

    def combos_of(self, h: int) -> npt.NDArray[np.int64]:
        """Indices of hardware h's combos."""
        end = self.hw_start[h + 1] if h + 1 < self.n_hw else len(self.combo_hw)
        return np.arange(self.hw_start[h], end, dtype=np.int64)

    def run_raw(self, combo: npt.NDArray[np.int64], n: npt.ArrayLike) -> dict[str, Arr]:
        """Evaluate without the Chinchilla part (efficiency NaN): times, H, tokens, feasibility."""
        x = self._inputs(combo, n)
        x["min_overtraining"] = np.asarray(np.inf)
        self.evaluations += int(np.size(x["params"]))
        return evaluate(x, self.p)

    def _inputs(self, combo: npt.NDArray[np.int64], n: npt.ArrayLike) -> dict[str, Arr]:
        hw = self.combo_hw[combo]
        x: dict[str, Arr] = {k: v[hw] for k, v in self.hw_inputs.items()}
        sl = self.combo_slot[combo]
        x["mode"] = self.slot_mode[sl]
        x["group_size"] = self.slot_group[sl]
        P = self.params_grid[self.combo_p[combo]]
        x["params"] = P
        x["active_params"] = P
        x["num_nodes"] = np.broadcast_to(np.asarray(n, dtype=np.float64), P.shape)
        x["inner_steps"] = np.zeros(())
        x["tokens"] = np.zeros(())
        return x

    def run(self, combo: npt.NDArray[np.int64], n: npt.ArrayLike) -> dict[str, Arr]:
        """Evaluate combos at node counts n (same shape or scalar) and add the validity mask of sec. 10."""
        x = self._inputs(combo, n)
        sl = self.combo_slot[combo]
        x["min_overtraining"] = np.asarray(self.c.min_overtraining)
        x["max_overtraining"] = np.asarray(self.c.max_overtraining)
        r = evaluate(x, self.p)
        self.evaluations += int(np.size(r["eta"]))
        n_ = x["num_nodes"]
        is_pp = r["mode_resolved"] == MODE_PP
        group = self.slot_group[sl]
        ot = r["overtraining_ratio"]
        valid = (
            (r["feasible"] > 0)
            & (ot >= self.c.min_overtraining * (1 - 1e-9)) & (ot <= self.c.max_overtraining * (1 + 1e-9))
            & np.where(sl > 0, (n_ >= 2 * group) & ~is_pp, True)
            & np.where(is_pp, r["groups"] >= 2, True)
            & (r["cost_usd"] <= self.c.max_cost_usd)
        )
        r["valid"] = valid.astype(np.float64)
        return r


def _metric(r: dict[str, Arr], metric: Metric) -> Arr:
    return r["c_local_flop"] if metric is Metric.C_LOCAL else r["c_quality_flop"]


def _best_at(space: _Space, n_per_hw: Arr, metric: Metric) -> Arr:
    """best(N) for every hardware at its own N: the highest metric among valid candidates."""
    combos = np.arange(len(space.combo_hw))
    r = space.run(combos, np.asarray(n_per_hw, dtype=np.float64)[space.combo_hw])
    m = np.where(r["valid"] > 0, _metric(r, metric), -np.inf)
    return np.asarray(np.maximum.reduceat(m, space.hw_start), dtype=np.float64)


def _final_at(space: _Space, hw: int, n: int, target: float, metric: Metric) -> int | None:
    """final(N, target): among valid candidates meeting the target, the highest C_quality (if none,
    the highest metric). Returns a combo index or None. Flat precedes hierarchical on ties."""
    combos = space.combos_of(hw)
    r = space.run(combos, float(n))
    valid = r["valid"] > 0
    if not valid.any():
        return None
    m = _metric(r, metric)
    meets = valid & (m >= target)
    score = np.where(meets, r["c_quality_flop"], -np.inf) if meets.any() else np.where(valid, m, -np.inf)
    return int(combos[int(np.argmax(score))])


def _bisect(space: _Space, target: float, metric: Metric) -> dict[int, int]:
    """The paper's search, for all hardware at once. Returns {hw index: N} for those that can meet.

    The top of the range is max_nodes (the paper: 100,000), or fewer where the budget buys fewer nodes.
    """
    out: dict[int, int] = {}
    cap = np.maximum(space.n_cap, 1.0)
    one = _best_at(space, np.ones(space.n_hw), metric)
    top = _best_at(space, cap, metric)
    lo = np.full(space.n_hw, 2, dtype=np.int64)
    hi = cap.astype(np.int64)
    active = (one < target) & (top >= target) & (space.n_cap >= 1)
    while np.any(active & (lo < hi)):
        mid = (lo + hi) // 2
        b = _best_at(space, mid.astype(np.float64), metric)
        step = active & (lo < hi)
        meets = b >= target
        hi = np.where(step & meets, mid, hi)
        lo = np.where(step & ~meets, mid + 1, lo)
    for h in range(space.n_hw):
        if one[h] >= target and space.n_cap[h] >= 1:
            out[h] = 1
        elif active[h]:
            out[h] = int(lo[h])
    return out


def _exact(space: _Space, target: float, metric: Metric, upper: dict[int, int]) -> dict[int, int]:
    """The smallest N meeting the target for each hardware, over every integer N.

    For one candidate (hardware, P, slot) the model's step functions of N are the inner-step count
    H and the regional rounds H_reg (both non-decreasing in N: the straggler factor grows with N),
    so N splits into a few contiguous *pieces* of constant (H, H_reg). Inside a piece nothing jumps:
    tokens grow in proportion to the workers while the efficiency falls smoothly and slowly, so the
    metric rises with N and "meets the target" holds on a final sub-interval of the piece. The
    overtraining window is exact too (tokens are proportional to the worker count, compute-bound by
    construction of H_min). So per candidate: walk the pieces from the left; find each piece's end by
    bisection on the (monotone) piece signature; if the metric at the piece's last valid N meets the
    target, bisect inside the piece for the first N that does. All candidates advance together on
    NumPy arrays. Node counts whose cost exceeds the paper-bisection answer are never needed.
    """
    c = space.c
    K = len(space.combo_hw)
    allc = np.arange(K)
    sl = space.combo_slot
    group = space.slot_group[sl]
    n_ref = np.where(sl > 0, 2.0 * group, 64.0)
    raw = space.run_raw(allc, n_ref)
    stages = raw["pipeline_stages"]
    workers_ref = np.where(stages > 1, np.floor(n_ref / stages), n_ref)
    ot_per_worker = raw["overtraining_ratio"] / np.maximum(workers_ref, 1.0)
    usable = np.isfinite(ot_per_worker) & (ot_per_worker > 0) & (raw["fits"] > 0) & (raw["under_cap"] > 0)
    opw = np.where(usable, ot_per_worker, 1.0)
    w_lo = np.ceil(c.min_overtraining / opw * (1 - 1e-9))
    w_hi = np.floor(c.max_overtraining / opw * (1 + 1e-9))
    n_lo = np.where(stages > 1, w_lo * stages, w_lo)
    n_lo = np.maximum(n_lo, np.where(sl > 0, 2.0 * group, np.where(stages > 1, 2.0 * stages, 1.0)))
    n_hi = np.where(stages > 1, w_hi * stages + stages - 1, w_hi)
    best_cost = min((upper[h] * space.node_cost[h] for h in upper), default=math.inf)
    cap_hw = space.n_cap.copy()
    if math.isfinite(best_cost):
        cap_hw = np.minimum(cap_hw, np.floor(best_cost / space.node_cost) + 1)
    lo_all = np.maximum(n_lo, 1.0)
    hi_all = np.minimum(n_hi, cap_hw[space.combo_hw])
    keep = usable & (hi_all >= lo_all)
    idx = np.nonzero(keep)[0]
    first = np.full(idx.size, np.inf)
    if idx.size == 0:
        return {}
    a = lo_all[idx].copy()
    hi = hi_all[idx]

    def signature(ci: npt.NDArray[np.int64], n: Arr) -> Arr:
        rr = space.run_raw(ci, n)
        return np.asarray(rr["inner_steps"] * 1e6 + rr["regional_rounds"], dtype=np.float64)

    def meets_at(ci: npt.NDArray[np.int64], n: Arr) -> npt.NDArray[np.bool_]:
        rr = space.run(ci, n)
        return np.asarray((rr["valid"] > 0) & (_metric(rr, metric) >= target))

    active = a <= hi
    # Each pass retires at least one piece of every active candidate, so this ends; the bound is the
    # largest possible number of pieces (one per node count).
    for _ in range(c.max_nodes + 1):
        if not active.any():
            break
        act = np.nonzero(active)[0]
        ci = idx[act]
        sig_a = signature(ci, a[act])
        # Last N of this piece: bisection on "signature(N) == signature(a)" (monotone in N).
        p_lo, p_hi = a[act].copy(), hi[act].copy()
        while True:
            step = p_lo < p_hi
            if not step.any():
                break
            mid = np.ceil((p_lo[step] + p_hi[step]) / 2)
            same = signature(ci[step], mid) == sig_a[step]
            p_lo[step] = np.where(same, mid, p_lo[step])
            p_hi[step] = np.where(same, p_hi[step], mid - 1)
        b = p_lo
        ok_end = meets_at(ci, b)
        # Inside a piece that meets at its end: first N that meets.
        if ok_end.any():
            sub = np.nonzero(ok_end)[0]
            f_lo, f_hi = a[act][sub].copy(), b[sub].copy()
            while True:
                step = f_lo < f_hi
                if not step.any():
                    break
                mid = np.floor((f_lo[step] + f_hi[step]) / 2)
                m = meets_at(ci[sub][step], mid)
                f_hi[step] = np.where(m, mid, f_hi[step])
                f_lo[step] = np.where(m, f_lo[step], mid + 1)
            first[act[sub]] = f_lo
        a[act] = b + 1
        active[act] = ~ok_end & (a[act] <= hi[act])
    result: dict[int, int] = {}
    hw_of = space.combo_hw[idx]
    for h in range(space.n_hw):
        f = first[hw_of == h]
        if f.size and np.isfinite(f.min()):
            result[h] = int(f.min())
    return result


def plan(
    target_flop: float,
    *,
    regime_name: str = "treaty",
    constraints: Constraints | None = None,
    mode: Mode | str = Mode.DEFAULT,
    metric: Metric | str | None = None,
    objective: Objective | str = Objective.COST,
    search: Search | str | None = None,
    params: ModelParams = DEFAULT_PARAMS,
    params_grid: Sequence[float] | None = None,
    group_sizes: Sequence[int] = PAPER_GROUP_SIZES,
) -> Plan:
    """The cheapest (or fewest-node, or fastest) configuration reaching `target_flop` under a regime.

    Args:
        target_flop: compute to reach, FLOP of `metric` (C_local or C_quality).
        regime_name: whose covered-cluster rule every node must stay under.
        constraints: links, time budget, hardware list, overtraining window, budget.
        mode: "paper" or "default"; metric defaults to c_local (paper) / c_quality (default);
            search defaults to bisect (paper) / exact (default).
        objective: cost (default), nodes, or time (shortest duration on a grid of 24 durations up to
            max_duration_s whose plan fits max_cost_usd).

    Returns:
        A Plan; infeasible targets give ``feasible=False`` with the binding reason.
    """
    require(isinstance(target_flop, int | float) and math.isfinite(target_flop) and target_flop > 0,
            "target", f"must be a positive number of FLOP, got {target_flop!r}")
    m = Mode(mode)
    c = constraints or Constraints()
    try:
        met = Metric(metric) if metric is not None else (Metric.C_LOCAL if m is Mode.PAPER else Metric.C_QUALITY)
        obj = Objective(objective)
        srch = Search(search) if search is not None else (Search.BISECT if m is Mode.PAPER else Search.EXACT)
    except ValueError as exc:
        raise InputError("plan", str(exc)) from None
    regime(regime_name)
    if obj is Objective.TIME:
        return _plan_fastest(target_flop, regime_name, c, m, met, srch, params, params_grid, group_sizes)
    space = _make_space(m, c, regime_name, params, params_grid, group_sizes)
    found = _bisect(space, target_flop, met)
    if srch is Search.EXACT:
        found = _exact(space, target_flop, met, found)
    return _make_plan(space, found, target_flop, regime_name, m, met, obj, srch)


def compare_searches(
    target_flop: float,
    *,
    regime_name: str = "treaty",
    constraints: Constraints | None = None,
    mode: Mode | str = Mode.PAPER,
    metric: Metric | str | None = None,
    params: ModelParams = DEFAULT_PARAMS,
) -> dict[str, Plan]:
    """The paper's bisection and the exact search on the same candidate set: {"bisect": .., "exact": ..}.

    One candidate set is built and the bisection's answer bounds the exact search, so this costs
    little more than the exact search alone. Used by `dispersal reproduce`.
    """
    require(math.isfinite(target_flop) and target_flop > 0, "target", f"must be > 0 FLOP, got {target_flop!r}")
    m = Mode(mode)
    c = constraints or Constraints()
    met = Metric(metric) if metric is not None else (Metric.C_LOCAL if m is Mode.PAPER else Metric.C_QUALITY)
    space = _make_space(m, c, regime_name, params, None, PAPER_GROUP_SIZES)
    found_b = _bisect(space, target_flop, met)
    found_e = _exact(space, target_flop, met, found_b)
    return {
        "bisect": _make_plan(space, found_b, target_flop, regime_name, m, met, Objective.COST, Search.BISECT),
        "exact": _make_plan(space, found_e, target_flop, regime_name, m, met, Objective.COST, Search.EXACT),
    }


def _make_space(m: Mode, c: Constraints, regime_name: str, params: ModelParams,
                params_grid: Sequence[float] | None, group_sizes: Sequence[int]) -> _Space:
    grid = [v * 1e9 for v in PAPER_PARAM_GRID_B] if params_grid is None else list(params_grid)
    require(len(grid) > 0 and all(g > 0 for g in grid), "params_grid", "must be non-empty and positive")
    return _Space(hardware_variants(m, c, regime_name), m, c, regime_name, grid, group_sizes, params)


def _make_plan(space: _Space, found: dict[int, int], target_flop: float, regime_name: str, m: Mode, met: Metric,
               obj: Objective, srch: Search) -> Plan:
    options: list[PlanOption] = []
    failures: dict[str, str] = {}
    for h, v in enumerate(space.variants):
        label = f"{v.chips}x {v.name} {v.precision.value}"
        if h not in found:
            failures[label] = _why_not(space, h, target_flop, met)
            continue
        pick = _final_at(space, h, found[h], target_flop, met)
        if pick is None:
            failures[label] = "no valid candidate at the node count found"
            continue
        opt = _option(space, h, found[h], pick, m)
        if _metric_value(opt, met) < target_flop * (1 - 1e-9):
            failures[label] = f"best reachable {met.value} {_metric_value(opt, met):.3g} FLOP < target"
            continue
        options.append(opt)
    key = (lambda o: (o.nodes, o.cost_usd)) if obj is Objective.NODES else (lambda o: (o.cost_usd, -o.c_quality_flop))
    options.sort(key=key)
    reasons: tuple[str, ...] = ()
    if not options:
        reasons = (_binding_reason(failures, target_flop, met, space.c),)
    return Plan(
        target_flop=float(target_flop), metric=met.value, regime=regime_name, mode=m.value, search=srch.value,
        objective=obj.value, feasible=bool(options), best=options[0] if options else None,
        per_hardware=tuple(options), failures=failures, reasons=reasons, evaluations=space.evaluations,
    )


def _metric_value(o: PlanOption, met: Metric) -> float:
    return o.c_local_flop if met is Metric.C_LOCAL else o.c_quality_flop


def _why_not(space: _Space, h: int, target: float, met: Metric) -> str:
    if space.top_cache is None:
        space.top_cache = _best_at(space, np.maximum(space.n_cap, 1.0), met)
    best = float(space.top_cache[h])
    n = int(space.n_cap[h])
    if n < 1:
        return "the budget does not buy one node"
    if not math.isfinite(best):
        return f"no configuration satisfies the constraints at {n:,} nodes (memory or overtraining window)"
    return f"at most {best:.3g} FLOP {met.value} with {n:,} nodes in the time budget"


def _binding_reason(failures: dict[str, str], target: float, met: Metric, c: Constraints) -> str:
    days = c.max_duration_s / units.SECONDS_PER_DAY
    link = units.format_bandwidth(min(c.bandwidth_up_bits_per_s, c.bandwidth_down_bits_per_s))
    binds = (f"the budget ({units.format_money(c.max_cost_usd)}) binds" if math.isfinite(c.max_cost_usd)
             else f"the time budget ({days:.4g} days) and the {link} links bind at {c.max_nodes:,} nodes")
    return (f"no hardware reaches {target:.3g} FLOP {met.value}: {binds}; closest: "
            + "; ".join(f"{k}: {v}" for k, v in list(failures.items())[:3]))


def _option(space: _Space, h: int, n: int, combo: int, m: Mode) -> PlanOption:
    pi, slot = int(space.combo_p[combo]), int(space.combo_slot[combo])
    r = space.run(np.asarray([combo]), float(n))
    v = {k: float(np.asarray(val).reshape(-1)[0]) for k, val in r.items()}
    mode_code = int(v["mode_resolved"])
    algo = {MODE_PP: Algorithm.PP_DILOCO, MODE_HIER: Algorithm.HIERARCHICAL}.get(mode_code, Algorithm.STREAMING)
    base = space.base_scenarios[h]
    group = int(space.slot_group[slot])
    scen = base.replace(
        name=f"plan: {MODE_NAMES[mode_code]} on {n} x {base.hardware}", num_nodes=n,
        params=float(space.params_grid[pi]), algorithm=algo, group_size=group,
    )
    return PlanOption(
        scenario=scen, hardware=base.hardware, precision=base.precision.value, chips_per_node=base.chips_per_node,
        nodes=n, params=float(space.params_grid[pi]), tokens=v["tokens"], days=v["run_time_s"] / units.SECONDS_PER_DAY,
        algorithm=MODE_NAMES[mode_code], group_size=group if mode_code == MODE_HIER else 0,
        pipeline_stages=int(v["pipeline_stages"]), groups=int(v["groups"]), inner_steps=int(v["inner_steps"]),
        inner_steps_effective=v["inner_steps_effective"], compression_ratio=base.compression_ratio,
        cost_usd=v["cost_usd"], c_local_flop=v["c_local_flop"], c_quality_flop=v["c_quality_flop"],
        overtraining_ratio=v["overtraining_ratio"], mean_wan_mbps_per_node=v["mean_up_bits_per_s"] / 1e6,
        peak_wan_mbps_per_node=v["peak_up_bits_per_s"] / 1e6,
        efficiency={k: v[k] for k in ("eta_h", "eta_comp", "eta_act", "eta_rep", "eta", "chi")},
    )


def _plan_fastest(target: float, regime_name: str, c: Constraints, m: Mode, met: Metric, srch: Search,
                  params: ModelParams, params_grid: Sequence[float] | None, group_sizes: Sequence[int]) -> Plan:
    """Objective time: the shortest duration (geometric grid, 30 days .. max) with a plan under budget."""
    days_max = c.max_duration_s / units.SECONDS_PER_DAY
    grid = sorted({*np.geomspace(min(30.0, days_max), days_max, 24).tolist(), days_max})
    last: Plan | None = None
    total = 0
    for d in grid:
        p = plan(target, regime_name=regime_name, constraints=c.replace(max_duration_s=d * units.SECONDS_PER_DAY),
                 mode=m, metric=met, objective=Objective.COST, search=srch, params=params,
                 params_grid=params_grid, group_sizes=group_sizes)
        total += p.evaluations
        last = p
        if p.feasible:
            return dataclasses.replace(p, objective=Objective.TIME.value, evaluations=total)
    assert last is not None
    return dataclasses.replace(last, objective=Objective.TIME.value, evaluations=total)


#: The centralized baseline's interconnect: the paper's datacenter row (1000 Gbps, 0.1 ms one-way,
#: modelling InfiniBand/NVLink inside one facility; Rahman 2026 bandwidth sensitivity table).
DATACENTER_BITS_PER_S = 1000e9
DATACENTER_LATENCY_S = 1e-4


def centralized_baseline(
    target_flop: float,
    *,
    constraints: Constraints | None = None,
    mode: Mode | str = Mode.DEFAULT,
    metric: Metric | str | None = None,
    search: Search | str | None = None,
    params: ModelParams = DEFAULT_PARAMS,
) -> Plan:
    """The same target trained in one cluster: no covered-cluster rule (8-chip servers), datacenter
    interconnect (1000 Gbps, 0.1 ms), no pseudo-gradient compression, same time budget and hardware
    list. The evader's cost premium is plan(...).best.cost_usd / this plan's cost."""
    c = (constraints or Constraints()).replace(
        bandwidth_up_bits_per_s=DATACENTER_BITS_PER_S, bandwidth_down_bits_per_s=DATACENTER_BITS_PER_S,
        latency_s=DATACENTER_LATENCY_S, compression_ratio=1.0, regional_bandwidth_bits_per_s=None,
        pp_bandwidth_bits_per_s=None,
    )
    return plan(target_flop, regime_name="none", constraints=c, mode=mode, metric=metric, search=search,
                params=params)
