"""From drawn values to the model: ModelParams and Constraints at given values, the plan at given
values (`nominal_plan`) and the vectorised search over (draw, candidate, N)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.analyses.uncertainty.spec import _FIGURES, CHINCHILLA, UncertaintySpec, default_spec
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import PAPER_MFU, Mode, kernel_inputs
from dispersal.model.kernel import quality
from dispersal.model.kernel.efficiency import eta_h
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.search import planner
from dispersal.model.search.bisection import cheapest_in_cells, first_in_cells, first_on_grid
from dispersal.model.search.candidates import SEARCH_OUTPUTS, CandidateSpace

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]
Progress = Callable[[int, int], None]


SHORTLIST_COST_FACTOR = 4.0
"""Candidates whose nominal cost is at most this multiple of the cheapest enter the Monte Carlo."""
SHORTLIST_MAX = 64
GRID_POINTS = 16
"""Geometric node-count grid per (draw, candidate) overtraining window, refined by bisection."""
WINDOW_SLACK = 0.02
"""Relative widening of each (draw, candidate) overtraining window in N before the grid is laid
(the exact validity rule then trims it): a numerical margin, not a model figure."""
_CHUNK_ELEMENTS = 400_000


# ---------------------------------------------------------------------------------------------------
# one draw applied to a kernel call (the planner's Monte Carlo and the frontier's bands share it)
# ---------------------------------------------------------------------------------------------------
#: Model parameters a draw overrides per configuration (kernel `overrides`).
DRAWN_OVERRIDES = (*CHINCHILLA, "replica_beta_coeff", "replica_beta_exponent")


def apply_draw(
    x: dict[str, Any], d: Mapping[str, Arr], draw: IntArr
) -> tuple[dict[str, Arr], quality.QualitySamples | None]:
    """Set the drawn inputs of kernel inputs `x` in place at draws `draw` (indices into the per-draw
    arrays `d`, `monte_carlo.per_draw_arrays`): MFU (the drawn value, or each accelerator's catalogue
    MFU x the drawn scale), the quality mapping (paper-mode inputs keep the paper's form, -1), codec
    and activation quality columns, chip prices (purchase and rental x the drawn scale). Returns the
    kernel overrides (Chinchilla fit, replica multiplier) and the quality fit's draws (None where the
    spec draws none)."""
    if "mfu_scale" in d:
        # Default mode without an explicit MFU: each accelerator's catalogue MFU, scaled per draw.
        x["mfu"] = x["mfu"] * d["mfu_scale"][draw]
    else:
        x["mfu"] = d["mfu"][draw]
    qp: quality.QualitySamples | None = None
    if "q_u0" in d:
        # The quality fit's parameter draws and the mapping (compute-space fit or its loss-space
        # bound) per draw; paper-mode inputs keep the paper's form (-1).
        x["quality_mapping"] = np.where(x["quality_mapping"] >= 0, d["quality_mapping"][draw], -1.0)
        qp = quality.QualitySamples(
            base=quality.QualityParams(), **{f: d[f"q_{f}"][draw] for f in quality.SAMPLED_FIELDS}
        )
    x["compression_quality"] = d["compression_quality"][draw]
    x["activation_quality"] = d["activation_quality"][draw]
    x["price_usd_per_chip"] = x["price_usd_per_chip"] * d["price_scale"][draw]
    x["rental_usd_per_chip_hour"] = x["rental_usd_per_chip_hour"] * d["price_scale"][draw]
    return {k: d[k][draw] for k in DRAWN_OVERRIDES}, qp


def eta_h_rescale(x: Mapping[str, Arr], r: Mapping[str, Arr], ratio: Arr, p: ModelParams) -> Arr:
    """The factor a draw's eta_H scale (`ratio`, 1 = nominal) applies to the kernel's compute of a
    DiLoCo run: eta_H = clip(1 - alpha0 f(P) log10 H, floor, 1) is linear in alpha0 before the floor,
    so the drawn eta_H is clip(1 - ratio (1 - raw), floor, 1) over the nominal clip(raw, floor, 1);
    1 for a single replica, the nominal ratio, or a fitted quality mapping (kernel input
    ``quality_mapping`` >= 0: the fit carries the H effect and the kernel charges no eta_H,
    docs/quality.md). Reads the inputs ``params`` and ``quality_mapping`` and the outputs
    ``inner_steps_effective`` and ``replicas``."""
    raw = eta_h(x["params"], r["inner_steps_effective"], p.replace(eta_h_floor=1e-300))
    e_new = np.clip(1.0 - ratio * (1.0 - raw), p.eta_h_floor, 1.0)
    e_old = np.clip(raw, p.eta_h_floor, 1.0)
    same = kernel_scores(x, ratio) | (r["replicas"] <= 1)
    return np.asarray(np.where(same, 1.0, e_new / e_old), dtype=np.float64)


def kernel_scores(x: Mapping[str, Arr], ratio: Arr) -> BoolArr:
    """Where a draw's metric is the kernel's own score (no eta_H rescale after the schedule is chosen,
    `eta_h_rescale`): the nominal eta_H scale, or a fitted quality mapping. Only there may a search
    tell the kernel its floor (``quality_floor``)."""
    return np.asarray((ratio == 1.0) | (np.asarray(x["quality_mapping"]) >= 0), dtype=bool)


# ---------------------------------------------------------------------------------------------------
# mapping parameter values to the model
# ---------------------------------------------------------------------------------------------------
def _value(values: Mapping[str, float], name: str, default: float) -> float:
    return float(values[name]) if name in values else default


def _swap_tables(p: ModelParams, comp_q: int, act_q: int) -> ModelParams:
    """Params whose 'expected' table columns read the chosen quality column (for `plan()`)."""
    if comp_q == 1 and act_q == 1:
        return p
    comp = tuple((r[0], r[1], r[1 + comp_q], r[3], r[4], r[4 + comp_q], r[6]) for r in p.compression_table)
    act_col = {0: 2, 1: 1, 2: 3}[act_q]
    act = tuple((r[0], r[act_col], r[2], r[3]) for r in p.activation_table)
    return p.replace(compression_table=comp, activation_table=act)


def model_params_for(
    values: Mapping[str, float], spec: UncertaintySpec, base: ModelParams = DEFAULT_PARAMS
) -> ModelParams:
    """The ModelParams that a set of parameter values (one draw, or nominal) stands for.

    Parameters absent from `values` keep `base`'s value (scales 1, quality 'expected'). MFU and the
    price multiplier are not model parameters (see `constraints_for` and the price re-ranking).
    """
    changes: dict[str, Any] = {n: float(values[n]) for n in (*CHINCHILLA, "eta_h_alpha0") if n in values}
    k = _value(values, "replica_beta_exponent", base.replica_beta_exponent)
    s = _value(values, "replica_beta_scale", 1.0)
    if k != base.replica_beta_exponent or s != 1.0:
        changes["replica_beta_exponent"] = k
        changes["replica_beta_coeff"] = (
            base.replica_beta_coeff * s * spec.replica_pivot_params ** (k - base.replica_beta_exponent)
        )
    g = _value(values, "straggler_scale", 1.0)
    if g != 1.0:
        changes["straggler_coeff_relay"] = base.straggler_coeff_relay * g
        changes["straggler_coeff_sync"] = base.straggler_coeff_sync * g
    p = base.replace(**changes) if changes else base
    return _swap_tables(
        p, int(_value(values, "compression_quality", 1)), int(_value(values, "activation_quality", 1))
    )


def constraints_for(values: Mapping[str, float], c: planner.Constraints) -> planner.Constraints:
    """Constraints with the value's MFU (if it has one)."""
    return c.replace(mfu=float(values["mfu"])) if "mfu" in values else c


def _option_costs(o: planner.PlanOption, mode: Mode) -> tuple[float, float]:
    """(price-proportional cost, energy cost) of a plan option, from the kernel."""
    x = kernel_inputs(o.scenario, mode)
    r = evaluate(x, DEFAULT_PARAMS)
    priced = float(r["rental_usd"]) if x["rental"] else float(r["hardware_usd"])
    return priced, float(r["energy_usd"])


def _rescaled(p: planner.Plan, mode: Mode, scale: float) -> planner.PlanOption | None:
    """The plan's cheapest option once every chip price is multiplied by `scale`."""
    if not p.per_hardware:
        return None
    if scale == 1.0:
        return p.best
    best: tuple[float, float, planner.PlanOption] | None = None
    for o in p.per_hardware:
        priced, rest = _option_costs(o, mode)
        cost = priced * scale + rest
        key = (cost, -o.c_quality_flop)
        if best is None or key < best[:2]:
            best = (cost, -o.c_quality_flop, dataclasses.replace(o, cost_usd=cost))
    return None if best is None else best[2]


# ---------------------------------------------------------------------------------------------------
# the vectorised search
# ---------------------------------------------------------------------------------------------------
#: What `_Search.meets` reads of the kernel: validity (sec. 10, both metrics among them) and what the
#: eta_H rescale needs.
_MEETS_OUTPUTS = (*SEARCH_OUTPUTS, "replicas", "inner_steps_effective")


@dataclass(slots=True)
class _Search:
    """Evaluates (draw, candidate, N) triples on the planner's candidate space."""

    space: CandidateSpace
    draws: dict[str, Arr]
    """Per-draw arrays, one entry per varied quantity (see `_draw_arrays`)."""
    p: ModelParams
    metric: planner.Metric
    target: float
    c: planner.Constraints
    evaluations: int = 0

    def run(
        self, combo: IntArr, draw: IntArr, n: Arr, window: bool = True, *, only_meets: bool = False
    ) -> dict[str, Arr]:
        """Kernel outputs plus ``valid``, ``meets``, ``metric`` and ``c_quality`` (eta_H rescaled).
        `only_meets`: the caller reads ``meets`` alone, so the kernel computes only what validity and the
        metric need and its schedule walk may stop at the target (the kernel's ``quality_floor``)."""
        sp, d = self.space, self.draws
        x = sp.inputs(combo, n)
        if window:
            sp.with_window(x)
        ov, qp = apply_draw(x, d, draw)
        if only_meets and self.metric is not planner.Metric.C_LOCAL:
            # A draw that rescales eta_H after the schedule is chosen has a metric the kernel does not
            # score: no floor there.
            x["quality_floor"] = np.where(kernel_scores(x, d["eta_h_ratio"][draw]), self.target, np.inf)
        r = evaluate(x, self.p, ov, qp, outputs=_MEETS_OUTPUTS if only_meets else None)
        self.evaluations += int(n.size)
        valid = sp.validity(r, combo, n)
        fac = eta_h_rescale(x, r, d["eta_h_ratio"][draw], self.p)
        r["c_quality"] = r["c_quality_flop"] * fac
        r["metric"] = (
            r["c_local_flop"] if self.metric is planner.Metric.C_LOCAL else r["c_quality_flop"]
        ) * fac
        r["valid"] = valid.astype(np.float64)
        r["meets"] = (valid & (r["metric"] >= self.target)).astype(np.float64)
        return r

    def meets(self, combo: IntArr, draw: IntArr, n: Arr) -> npt.NDArray[np.bool_]:
        """Valid and meeting the target, evaluated in chunks."""
        return self.meets_cost(combo, draw, n)[0]

    def meets_cost(self, combo: IntArr, draw: IntArr, n: Arr) -> tuple[npt.NDArray[np.bool_], Arr]:
        """(valid and meeting the target, cost in USD), evaluated in chunks."""
        out = np.zeros(n.size, dtype=bool)
        cost = np.zeros(n.size)
        for s in range(0, n.size, _CHUNK_ELEMENTS):
            e = slice(s, s + _CHUNK_ELEMENTS)
            r = self.run(combo[e], draw[e], n[e], only_meets=True)
            out[e] = r["meets"] > 0
            cost[e] = r["cost_usd"]
        return out, cost

    def smallest_nodes(self, combos: IntArr, draws: IntArr, *, cheapest_only: bool = False) -> Arr:
        """For each (draw, combo) of the outer product: the smallest N meeting the target, or NaN.

        `cheapest_only`: for a caller that reads only each draw's cheapest (combo, N) (`_pick`): a
        combo whose plan cannot cost as little as the draw's cheapest is left NaN (branch and bound,
        `bisection.cheapest_in_cells`; the cost is non-decreasing in N, as the search trains for
        the whole time budget), so each draw's least cost, and its ties, are exactly as without it."""
        sp, c = self.space, self.c
        cc = np.tile(combos, draws.size)
        dd = np.repeat(draws, combos.size)
        n_ref = sp.reference_nodes(cc)
        # The overtraining window in N for this draw (the planner's rule), widened by WINDOW_SLACK.
        r = self.run(cc, dd, n_ref, window=False)
        usable, n_lo, n_hi = sp.node_window(r, cc, n_ref, slack=WINDOW_SLACK)
        n_hi = np.minimum(n_hi, float(c.max_nodes))
        ok = usable & (n_hi >= n_lo)
        out = np.full(cc.size, np.nan)
        idx = np.flatnonzero(ok)
        if idx.size == 0:
            return out.reshape(draws.size, combos.size)
        lo, hi = n_lo[idx], n_hi[idx]
        t = np.linspace(0.0, 1.0, GRID_POINTS)
        grid = np.round(lo[:, None] * (hi / lo)[:, None] ** t[None, :])
        grid[:, 0], grid[:, -1] = lo, hi
        grid = np.maximum.accumulate(grid, axis=1)
        ci, di = cc[idx], dd[idx]

        def meets_at(sel: IntArr, n: Arr) -> npt.NDArray[np.bool_]:
            return self.meets(ci[sel], di[sel], n)

        def meets_cost_at(sel: IntArr, n: Arr) -> tuple[npt.NDArray[np.bool_], Arr]:
            return self.meets_cost(ci[sel], di[sel], n)

        # Bisect the first cell that meets the target on its upper end (only the cells that can hold
        # a draw's cheapest plan, where only that is read).
        if cheapest_only:
            has, n_first, _ = cheapest_in_cells(grid, meets_cost_at, di)
        else:
            has, n_first = first_in_cells(grid, first_on_grid(grid, meets_at), meets_at)
        out[idx[has]] = n_first
        return out.reshape(draws.size, combos.size)


def _draw_arrays(
    values: Mapping[str, Arr], spec: UncertaintySpec, base: ModelParams, n: int
) -> dict[str, Arr]:
    """Per-draw arrays of everything the search varies (absent parameters at their defaults)."""

    def get(name: str, default: float) -> Arr:
        return np.asarray(values[name], dtype=np.float64) if name in values else np.full(n, default)

    out = {k: get(k, float(getattr(base, k))) for k in CHINCHILLA}
    k = get("replica_beta_exponent", base.replica_beta_exponent)
    s = get("replica_beta_scale", 1.0)
    out["replica_beta_exponent"] = k
    out["replica_beta_coeff"] = (
        base.replica_beta_coeff * s * spec.replica_pivot_params ** (k - base.replica_beta_exponent)
    )
    out["eta_h_ratio"] = get("eta_h_alpha0", base.eta_h_alpha0) / base.eta_h_alpha0
    out["straggler_scale"] = get("straggler_scale", 1.0)
    out["compression_quality"] = get("compression_quality", 1.0)
    out["activation_quality"] = get("activation_quality", 1.0)
    out["mfu"] = get("mfu", math.nan)
    out["price_scale"] = get("price_scale", 1.0)
    return out


def _figures(o: planner.PlanOption | None) -> dict[str, float]:
    if o is None:
        return {k: math.nan for k in _FIGURES}
    return {
        "cost_usd": o.cost_usd,
        "nodes": float(o.nodes),
        "c_quality_flop": o.c_quality_flop,
        "days": o.days,
    }


def nominal_plan(
    target_flop: float,
    *,
    regime_name: str = "treaty",
    constraints: planner.Constraints | None = None,
    mode: Mode | str = "default",
    metric: planner.Metric | str | None = None,
    search: planner.Search | str | None = None,
    spec: UncertaintySpec | None = None,
    values: Mapping[str, float] | None = None,
) -> tuple[planner.Plan, planner.PlanOption | None]:
    """`plan()` with every parameter at `values` (default: the spec's nominal values).

    Returns the plan and its best option after the chip-price multiplier re-ranking.
    """
    spec = spec or default_spec()
    vals = dict(spec.nominal()) if values is None else dict(values)
    m = Mode(mode)
    c0 = constraints or planner.Constraints()
    # Default mode with the catalogue's MFU per accelerator: the spec's absolute MFU (centred on the
    # paper's 0.40) is not imposed on every node type (the Monte Carlo applies it as a relative scale).
    # Instead it scales every catalogue MFU by value / nominal (ModelParams.mfu_scale), as the
    # Monte Carlo does per draw, so the tornado's MFU bar moves the plan in default mode too.
    mfu_scale = 1.0
    if m is Mode.DEFAULT and c0.mfu is None and "mfu" in vals:
        nominal = spec.get("mfu")
        ref = nominal.distribution.nominal if nominal is not None else PAPER_MFU
        mfu_scale = float(vals.pop("mfu")) / float(ref)
    c = constraints_for(vals, c0)
    mp = model_params_for(vals, spec)
    p = planner.plan(
        target_flop,
        regime_name=regime_name,
        constraints=c,
        mode=m,
        metric=metric,
        search=search,
        params=mp.replace(mfu_scale=mfu_scale) if mfu_scale != 1.0 else mp,
    )
    return p, _rescaled(p, m, _value(vals, "price_scale", 1.0))
