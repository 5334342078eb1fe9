"""Monte Carlo of the planner's answer (`plan_samples`): P(reach) first, then quantiles."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.analyses.uncertainty.draws import (
    _CHUNK_ELEMENTS,
    GRID_POINTS,
    SHORTLIST_COST_FACTOR,
    SHORTLIST_MAX,
    _draw_arrays,
    _figures,
    _Search,
    constraints_for,
    nominal_plan,
)
from dispersal.model.analyses.uncertainty.spec import _FIGURES, UncertaintySpec, default_spec
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import require
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import PAPER_MFU, Mode, Precision
from dispersal.model.kernel import quality, quality_draws
from dispersal.model.search import planner
from dispersal.model.search.candidates import NodeType, hardware_variants, make_space

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]


# ---------------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------------
#: Share of Monte Carlo draws that use the quality fit's conservative loss-space mapping instead of
#: the compute-space one. Issue 21: 0. Both mappings turn the same fitted r into compute; where a
#: paper prints DiLoCo and DP losses (35M-15B) they agree to within the fit's scatter, and they part
#: only at plan scale through the irreducible term of a different fit, which no DiLoCo measurement
#: tests. A bound is a worst case, not a probability: `plan --quality-mapping loss` shows it
#: (docs/quality.md, "Beyond eight replicas"). The tail beyond M = 8 is sampled from its fit instead.
QUALITY_LOSS_MAPPING_SHARE = 0.0


#: Figures whose "cannot reach" draws count as +inf in the unconditional quantiles (a run that
#: cannot reach the target costs, takes and needs without bound); C_quality has no such reading.
_UNBOUNDED_WHEN_UNREACHED = ("cost_usd", "nodes", "days")


@dataclass(frozen=True, kw_only=True, slots=True)
class UncertaintyResult:
    """Monte Carlo ranges of the planner's answer, led by the probability of reaching the target."""

    target_flop: float
    regime: str
    mode: str
    metric: str
    samples: int
    seed: int
    p_reach: float
    """P(reach): the fraction of draws for which some candidate meets the target, in [0, 1]."""
    percentiles: dict[str, tuple[float, float, float]]
    """P10, P50, P90 of cost_usd, nodes, c_quality_flop and days CONDITIONAL on reaching the target
    (over the draws that reach it; NaN if none)."""
    percentiles_all: dict[str, tuple[float, float, float]]
    """P10, P50, P90 of cost_usd, nodes and days over ALL draws, a draw that cannot reach counting
    as +inf: quantile q is the conditional quantile q / p_reach where q <= p_reach, else inf."""
    nominal: dict[str, float]
    """The nominal plan's cost_usd, nodes, c_quality_flop and days (NaN when infeasible)."""
    nominal_label: str
    nominal_search: dict[str, float]
    """The vectorised search's own answer at the nominal values (draw 0). It equals `nominal` unless
    the planner's pruning skipped a cheaper node type (see docs/uncertainty.md)."""
    hardware_share: dict[str, float]
    """Fraction of draws choosing each node type (of all draws)."""
    candidates: int
    """Candidates (hardware, model size, algorithm) searched per draw."""
    evaluations: int
    draws: dict[str, Arr] = field(default_factory=dict, repr=False)
    """Per-draw figures (cost_usd, nodes, c_quality_flop, days, NaN when infeasible) and parameter
    values, for plots; not in `to_dict`."""

    @property
    def feasible_fraction(self) -> float:
        """The former name of `p_reach`."""
        return self.p_reach

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON, P(reach) first: ``<figure>_p10/_p50/_p90`` conditional on reaching (labelled by
        ``quantiles``), ``<figure>_p10_all/...`` over all draws (inf where a share that cannot
        reach is above the quantile), plus the run's settings."""
        d: dict[str, Any] = {
            "p_reach": self.p_reach,
            "quantiles": "conditional on reaching the target; *_all: all draws, cannot reach = inf",
            "target_flop": self.target_flop,
            "regime": self.regime,
            "mode": self.mode,
            "metric": self.metric,
            "samples": self.samples,
            "seed": self.seed,
            "feasible_fraction": self.p_reach,
        }
        for name, (p10, p50, p90) in self.percentiles.items():
            d[f"{name}_p10"], d[f"{name}_p50"], d[f"{name}_p90"] = p10, p50, p90
        for name, (p10, p50, p90) in self.percentiles_all.items():
            d[f"{name}_p10_all"], d[f"{name}_p50_all"], d[f"{name}_p90_all"] = p10, p50, p90
        for name, v in self.nominal.items():
            d[f"nominal_{name}"] = v
        d["nominal_hardware"] = self.nominal_label
        for name, v in self.nominal_search.items():
            d[f"search_nominal_{name}"] = v
        d["hardware_share"] = dict(self.hardware_share)
        d["candidates"] = self.candidates
        d["evaluations"] = self.evaluations
        return d


def quantiles_all(values: Arr, p_reach: float, qs: tuple[float, ...] = (0.1, 0.5, 0.9)) -> tuple[float, ...]:
    """Quantiles over all draws when the draws that cannot reach count as +inf.

    `values` holds the reaching draws' figures; p_reach their share of all draws. Of all draws a
    fraction p_reach has the conditional distribution and 1 - p_reach is +inf, so quantile q is the
    conditional quantile at q / p_reach (linear interpolation, numpy's default) when q <= p_reach
    and +inf otherwise (NaN when no draw reaches)."""
    out = []
    for q in qs:
        if values.size == 0 or p_reach <= 0:
            out.append(math.nan if values.size == 0 else math.inf)
        elif q <= p_reach * (1 + 1e-12):
            out.append(float(np.percentile(values, 100.0 * min(q / p_reach, 1.0))))
        else:
            out.append(math.inf)
    return tuple(out)


def plan_samples(
    target_flop: float,
    *,
    samples: int,
    seed: int,
    regime_name: str = "treaty",
    constraints: planner.Constraints | None = None,
    mode: Mode | str = "default",
    metric: planner.Metric | str | None = None,
    search: planner.Search | str | None = None,
    progress: Progress | None = None,
    spec: UncertaintySpec | None = None,
) -> UncertaintyResult:
    """Monte Carlo of the planner's answer over the uncertain inputs (method: package docstring).

    Args:
        target_flop: compute to reach (FLOP of `metric`).
        samples: number of draws (>= 1).
        seed: `numpy.random.default_rng` seed; the same seed gives exactly the same result.
        regime_name, constraints, mode, metric, search: as for `planner.plan` (constraints.mfu is
            replaced by the drawn MFU; `search` applies to the nominal plan only).
        progress: called as progress(draws_done, samples) as the draws are processed.
        spec: the distributions (default ``data/uncertainty.toml``).

    Returns:
        P(reach) first; P10/P50/P90 of cost (USD), nodes, C_quality (FLOP) and run time (days)
        conditional on reaching, and of cost, nodes and days over all draws; the nominal plan.
    """
    spec = spec or default_spec()
    require(
        isinstance(samples, int) and not isinstance(samples, bool) and 1 <= samples <= 1_000_000,
        "samples",
        f"must be an integer in [1, 1,000,000], got {samples!r}",
    )
    m = Mode(mode)
    c0 = constraints or planner.Constraints()
    nom_vals = spec.nominal()
    nom_plan, nom_best = nominal_plan(
        target_flop, regime_name=regime_name, constraints=c0, mode=m, metric=metric, search=search, spec=spec
    )
    met = planner.Metric(nom_plan.metric)
    # Default mode with the catalogue's MFU per accelerator: the MFU draws scale it (below) instead
    # of replacing it with one absolute value for every node type.
    relative_mfu = m is Mode.DEFAULT and c0.mfu is None
    c = constraints_for({k: v for k, v in nom_vals.items() if not (relative_mfu and k == "mfu")}, c0)
    arrays = per_draw_arrays(spec, samples, seed, nom_vals, c, m, relative_mfu)
    # The node types of the planner's candidate space plus the node sizes below the cap that the
    # nominal plan's exact search chose (so a draw can keep a plan the planner found).
    variants = hardware_variants(m, c, regime_name)
    for o in nom_plan.per_hardware:
        nt = NodeType(o.hardware, Precision(o.precision), o.chips_per_node)
        if nt not in variants:
            variants.append(nt)

    def make(scale: float) -> _Search:
        base = DEFAULT_PARAMS
        pg = (
            base
            if scale == 1.0
            else base.replace(
                straggler_coeff_relay=base.straggler_coeff_relay * scale,
                straggler_coeff_sync=base.straggler_coeff_sync * scale,
            )
        )
        space = make_space(m, c, regime_name, pg, variants=variants)
        return _Search(space=space, draws=arrays, p=pg, metric=met, target=float(target_flop), c=c)

    nom_scale = float(arrays["straggler_scale"][0])
    s0 = make(nom_scale)
    shortlist, search_nom = _shortlist(s0)
    out = {k: np.full(samples, np.nan) for k in _FIGURES}
    choice = np.full(samples, -1, dtype=np.int64)
    evaluations = _run_draws(s0, make, nom_scale, arrays, shortlist, out, choice, progress)
    reach = np.isfinite(out["cost_usd"])
    p_reach = float(reach.mean())
    pct, pct_all = _quantiles(out, reach, p_reach, arrays)
    labels = [f"{v.chips}x {v.name} {v.precision.value}" for v in s0.space.variants]
    share: dict[str, float] = {}
    for combo in choice[choice >= 0]:
        lab = labels[int(s0.space.combo_hw[combo])]
        share[lab] = share.get(lab, 0.0) + 1.0 / samples
    share = dict(sorted(share.items(), key=lambda kv: -kv[1]))
    draws_out: dict[str, Arr] = dict(out)
    draws_out.update({f"param_{k}": v[1:] for k, v in arrays.items() if k.startswith("raw_")})
    draws_out = {k.replace("param_raw_", "param_"): v for k, v in draws_out.items()}
    return UncertaintyResult(
        target_flop=float(target_flop),
        regime=regime_name,
        mode=m.value,
        metric=met.value,
        samples=samples,
        seed=seed,
        p_reach=p_reach,
        percentiles=pct,
        percentiles_all=pct_all,
        nominal=_figures(nom_best),
        nominal_label=nom_best.label if nom_best is not None else "",
        nominal_search={k: float(v[0]) for k, v in search_nom.items()},
        hardware_share=share,
        candidates=int(shortlist.size),
        evaluations=int(evaluations + nom_plan.evaluations),
        draws=draws_out,
    )


def per_draw_arrays(
    spec: UncertaintySpec,
    samples: int,
    seed: int,
    nom_vals: dict[str, float],
    c: planner.Constraints,
    m: Mode,
    relative_mfu: bool,
) -> dict[str, Arr]:
    """Per-draw arrays (draw 0 the nominal point, draws 1.. the samples) for `_Search`, plus the raw
    drawn values as ``raw_<name>``."""
    draws_raw = spec.sample(samples, seed)
    merged = {k: np.concatenate([[float(nom_vals.get(k, np.nan))], v]) for k, v in draws_raw.items()}
    arrays = _draw_arrays(merged, spec, DEFAULT_PARAMS, samples + 1)
    if "mfu" not in nom_vals:
        arrays["mfu"] = np.full(samples + 1, c.mfu if c.mfu is not None else math.nan)
    if relative_mfu:
        # The spec's MFU draws are absolute around the paper's 0.40: in default mode (catalogue MFU
        # per accelerator) they act as a relative scale around that nominal.
        arrays["mfu_scale"] = (
            arrays["mfu"] / float(nom_vals.get("mfu", PAPER_MFU))
            if "mfu" in nom_vals
            else np.ones(samples + 1)
        )
    if m is Mode.DEFAULT and not all(par.distribution.is_degenerate for par in spec.parameters):
        _quality_arrays(arrays, samples, seed)
    arrays.update({f"raw_{k}": np.concatenate([[math.nan], v]) for k, v in draws_raw.items()})
    return arrays


def _quality_arrays(arrays: dict[str, Arr], samples: int, seed: int) -> None:
    """Issue 12: sample the quality mapping and the fit's parameters into `arrays` (not for a
    degenerate spec, whose draws all equal the nominal plan). Draw 0 is the nominal fit (compute
    mapping, fitted values, the fitted tail)."""
    rng_q = np.random.default_rng([seed, 12])
    qs = quality_draws.sample_quality_params(rng_q, samples)
    nominal_q = quality.QualityParams()
    for f in quality.SAMPLED_FIELDS:
        arrays[f"q_{f}"] = np.concatenate([[float(getattr(nominal_q, f))], getattr(qs, f)])
    arrays["quality_mapping"] = np.concatenate(
        [[0.0], (rng_q.random(samples) < QUALITY_LOSS_MAPPING_SHARE).astype(np.float64)]
    )


def _shortlist(s0: _Search) -> tuple[IntArr, dict[str, Arr]]:
    """The candidates searched per draw (nominal cost within SHORTLIST_COST_FACTOR of the cheapest,
    at most SHORTLIST_MAX) and the vectorised search's own answer at the nominal values."""
    all_combos = np.arange(len(s0.space.combo_hw), dtype=np.int64)
    n_nom = s0.smallest_nodes(all_combos, np.asarray([0], dtype=np.int64))[0]
    search_nom = {k: np.full(1, np.nan) for k in _FIGURES}
    _pick(
        s0,
        all_combos,
        np.asarray([-1], dtype=np.int64),
        n_nom.reshape(1, -1),
        search_nom,
        np.full(1, -1, dtype=np.int64),
    )
    cost_nom = np.where(np.isfinite(n_nom), n_nom * _node_cost(s0, all_combos, 0), np.inf)
    order = np.argsort(cost_nom, kind="stable")
    cheapest = float(cost_nom[order[0]]) if order.size else math.inf
    keep = order[np.isfinite(cost_nom[order]) & (cost_nom[order] <= SHORTLIST_COST_FACTOR * cheapest)]
    return np.sort(keep[:SHORTLIST_MAX]).astype(np.int64), search_nom


def _run_draws(
    s0: _Search,
    make: Callable[[float], _Search],
    nom_scale: float,
    arrays: dict[str, Arr],
    shortlist: IntArr,
    out: dict[str, Arr],
    choice: IntArr,
    progress: Progress | None,
) -> int:
    """Search every draw (grouped by straggler scale, in chunks); fills `out` and `choice` and
    returns the kernel evaluations made."""
    samples = choice.size
    done = 0
    evaluations = 0
    if progress is not None:
        progress(0, samples)
    if shortlist.size:
        scales = arrays["straggler_scale"][1:]
        chunk = max(1, _CHUNK_ELEMENTS // (shortlist.size * GRID_POINTS))
        for scale in sorted(set(scales.tolist())):
            srch = s0 if scale == nom_scale else make(scale)
            members = np.flatnonzero(scales == scale)
            for s in range(0, members.size, chunk):
                part = members[s : s + chunk]
                n = srch.smallest_nodes(shortlist, part + 1, cheapest_only=True)
                _pick(srch, shortlist, part, n, out, choice)
                done += part.size
                if progress is not None:
                    progress(done, samples)
            if srch is not s0:
                evaluations += srch.evaluations
    return evaluations + s0.evaluations


def _quantiles(
    out: dict[str, Arr], reach: npt.NDArray[np.bool_], p_reach: float, arrays: dict[str, Arr]
) -> tuple[dict[str, tuple[float, float, float]], dict[str, tuple[float, float, float]]]:
    """(conditional quantiles, quantiles over all draws) of each figure; see UncertaintyResult."""
    pct: dict[str, tuple[float, float, float]] = {}
    pct_all: dict[str, tuple[float, float, float]] = {}
    for k in _FIGURES:
        v = out[k][reach]
        q = np.percentile(v, [10, 50, 90]) if v.size else np.full(3, math.nan)
        pct[k] = (float(q[0]), float(q[1]), float(q[2]))
        if k in _UNBOUNDED_WHEN_UNREACHED:
            a = quantiles_all(v, p_reach)
            pct_all[k] = (a[0], a[1], a[2])
    if "quality_mapping" in arrays:
        # How much of the spread is the quality-mapping choice: the cost percentiles of each half.
        qm = arrays["quality_mapping"][1:]
        for code, name in ((0.0, "compute"), (1.0, "loss")):
            if not np.any(qm == code):
                continue  # no draw used this mapping (QUALITY_LOSS_MAPPING_SHARE = 0): no row
            v = out["cost_usd"][reach & (qm == code)]
            q3 = np.percentile(v, [10, 50, 90]) if v.size else np.full(3, math.nan)
            pct[f"cost_usd_{name}_mapping"] = (float(q3[0]), float(q3[1]), float(q3[2]))
    return pct, pct_all


def _node_cost(s: _Search, combos: IntArr, draw: int) -> Arr:
    """Cost of one node of each combo's hardware for the whole run at a draw's prices (incl. energy)."""
    r = s.run(combos, np.full(combos.size, draw, dtype=np.int64), np.ones(combos.size), window=False)
    return np.asarray(r["cost_usd"], dtype=np.float64)


def _pick(s: _Search, combos: IntArr, part: IntArr, n: Arr, out: dict[str, Arr], choice: IntArr) -> None:
    """Per draw: the cheapest (combo, N) meeting the target; ties go to the higher C_quality."""
    ok = np.isfinite(n)
    rows, cols = np.nonzero(ok)
    if rows.size == 0:
        return
    cc = combos[cols]
    r = s.run(cc, part[rows] + 1, n[rows, cols])
    meets = r["meets"] > 0
    cost = np.full(n.shape, np.inf)
    cq = np.full(n.shape, -np.inf)
    cost[rows[meets], cols[meets]] = r["cost_usd"][meets]
    cq[rows[meets], cols[meets]] = r["c_quality"][meets]
    days = np.full(n.shape, np.nan)
    days[rows, cols] = r["run_time_s"] / units.SECONDS_PER_DAY
    best_cost = cost.min(axis=1)
    tie = np.isfinite(cost) & (cost <= best_cost[:, None])
    j = np.argmax(np.where(tie, cq, -np.inf), axis=1)
    hit = np.isfinite(best_cost)
    i = np.arange(part.size)[hit]
    jj = j[hit]
    d = part[hit]
    out["cost_usd"][d] = cost[i, jj]
    out["nodes"][d] = n[i, jj]
    out["c_quality_flop"][d] = cq[i, jj]
    out["days"][d] = days[i, jj]
    choice[d] = combos[jj]
