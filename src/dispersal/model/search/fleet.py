"""The fleet question (issue 24 item 7): "I have this fleet: which model size, H and codec, what
utilisation, how long?" The reverse of the planner, which sizes a fleet for a target.

The fleet is a Scenario: hardware, precision, chips per node, node count, links, time budget,
regime. The search runs over what an operator of that fleet still chooses:

- the algorithm (every `Algorithm` but ``auto``, which is one of the others; hierarchical DiLoCo
  with each group size n_g of the planner's list with N >= 2 n_g; in default mode also the 2026
  algorithms: Decoupled DiLoCo with the scenario's merge rule, quorum and syncer, and site-pipeline
  DiLoCo where the scenario's nodes_per_site > 1; paper mode searches the paper's five),
- the wire codec (default mode: ``auto`` at the scenario's compression ratio and every catalogue
  codec; paper mode has no codecs, only the ratio),
- the model size P (the paper's 71-size grid, Rahman 2026 sec. 10, or one fixed size),
- the inner steps H (`FLEET_H_GRID`; 0 = the kernel's smallest compute-bound H, H_min),
- the tokens: as many as the time budget allows, or fewer where that would overtrain past
  max_overtraining (the run then stops early: the "how long" of the answer). Fewer tokens than
  that never help: the Chinchilla loss falls with the tokens at a fixed model size.

Every configuration is one row of one `kernel.evaluate` call (two: the second re-evaluates the
rows stopped early). A fleet with ``[[site]]`` tables is evaluated on the sites' paced identical-node
equivalent (`sites.reduce.scenario_inputs`, per model size: `fleet_paced`), as `estimate` does; an
algorithm the site pacing refuses is listed in `FleetAnswer.skipped` with the reason. The best is the highest C_quality (or C_local, or the lowest loss) among
valid rows: feasible under the kernel, overtraining ratio in [min_overtraining, max_overtraining],
PP-group DiLoCo with >= 2 groups. The binding constraint is the one of days, WAN bandwidth and
node count whose doubling gains the most (each a search of its own).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import codecs
from dispersal.model.inputs.codes import ALGO_DDP, ALGO_PP_DILOCO, ALGO_SITE_PP, ALGORITHM_NAMES
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import Algorithm, Mode, Scenario, kernel_inputs
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.run.estimate import estimate
from dispersal.model.search.candidates import PAPER_GROUP_SIZES, PAPER_PARAM_GRID_B
from dispersal.model.search.fleet_paced import (
    describe,
    doubled,
    group_by_keys,
    paced_table,
    pacing,
    sites_fit,
)
from dispersal.model.sites.reduce import scenario_inputs

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]

#: Inner steps H searched; 0 = H_min, the smallest H whose compute hides the sync (the kernel's
#: default). The others span the H of published DiLoCo runs (Douillard et al. 2023: 50-2,000;
#: INTELLECT-1: 100; an assumption beyond that range is not searched).
FLEET_H_GRID: tuple[int, ...] = (0, 10, 30, 100, 300, 1000, 3000)

#: The planner's overtraining window (`candidates.Constraints`: 1 <= D / (k P) <= 100, k the compute-optimal tokens per parameter), reused so
#: a fleet answer and a plan judge a model size alike.
DEFAULT_MIN_OVERTRAINING = 1.0
DEFAULT_MAX_OVERTRAINING = 100.0

#: A doubling that raises the metric by less than this fraction does not bind (an assumption:
#: below the model's own rounding of H and node counts).
BINDING_MIN_GAIN = 0.01

#: Kernel outputs the search reads.
FLEET_OUTPUTS: tuple[str, ...] = (
    "feasible",
    "fits",
    "under_cap",
    "algorithm_resolved",
    "groups",
    "inner_steps",
    "overtraining_ratio",
    "tokens",
    "run_time_s",
    "c_local_flop",
    "c_quality_flop",
    "loss",
    "utilisation",
)


class FleetMetric(StrEnum):
    """What the fleet search optimises."""

    C_QUALITY = "c_quality"
    """Highest quality-adjusted compute (FLOP)."""
    C_LOCAL = "c_local"
    """Highest effective compute (FLOP)."""
    LOSS = "loss"
    """Lowest final loss (Chinchilla fit, with the replica penalty)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetOption:
    """One configuration of the fleet and what it reaches (SI units, FLOP, USD)."""

    scenario: Scenario
    """The fleet with the choice applied: `estimate(scenario)` gives these figures again."""
    algorithm: str
    group_size: int
    codec: str
    params: float
    tokens: float
    inner_steps: int
    """H used (H_min resolved when the search chose H = 0)."""
    inner_steps_requested: int
    """H searched (0 = H_min)."""
    run_time_s: float
    stopped_early: bool
    """The run stops before the time budget because more tokens would overtrain past the window."""
    utilisation: float
    """Fraction of wall time the accelerators compute (kernel `utilisation`)."""
    overtraining_ratio: float
    c_local_flop: float
    c_quality_flop: float
    loss: float
    cost_usd: float
    mean_up_bits_per_s: float
    mean_down_bits_per_s: float
    peak_up_bits_per_s: float
    bytes_per_day_per_node: float
    sync_pacing: str = ""
    """With ``[[site]]`` tables: what paces the sync (the slowest ring edge, the busiest downlink)."""
    compute_pacing_site: str = ""
    """With ``[[site]]`` tables: the site whose inner step paces every lock-step."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field but the scenario, plus the scenario's fields and days."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "scenario"}
        d["days"] = self.run_time_s / units.SECONDS_PER_DAY
        d["scenario"] = self.scenario.to_dict()
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetAnswer:
    """The best use of a fleet, how the others compare, and what binds."""

    fleet: Scenario
    mode: str
    metric: str
    feasible: bool
    best: FleetOption | None
    per_algorithm: tuple[FleetOption, ...]
    """The best option of each algorithm label (hierarchical with its group size), best first."""
    gains: dict[str, float] = field(default_factory=dict)
    """C_quality of the best answer with the constraint doubled / now, for "days", "bandwidth",
    "nodes" (for every metric: with metric loss, of the lowest-loss answers)."""
    binding: str = ""
    """The constraint whose doubling gains most (BINDING_MIN_GAIN), or a sentence why none does."""
    configurations: int = 0
    reasons: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    """Algorithms not searched, each with why ("decoupled: ..."): paper mode, nodes_per_site, or the
    site pacing refuses it."""
    sites: tuple[str, ...] = ()
    """The fleet's ``[[site]]`` tables, one phrase each (empty: identical nodes)."""
    assumptions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready answer (links, days and mode stated with the figures)."""
        f = self.fleet
        return {
            "question": "fleet",
            "mode": self.mode,
            "metric": self.metric,
            "feasible": self.feasible,
            "fleet": {
                "hardware": f.hardware,
                "precision": f.precision.value,
                "chips_per_node": f.resolved_chips_per_node(),
                "nodes": f.num_nodes,
                "bandwidth_up_bits_per_s": f.bandwidth_up_bits_per_s,
                "bandwidth_down_bits_per_s": f.bandwidth_down_bits_per_s,
                "latency_s": f.latency_s,
                "days": f.duration_s / units.SECONDS_PER_DAY,
                "regime": f.regime,
                "sites": [site.to_dict() for site in f.sites],
                "churn_events": len(f.churn),
            },
            "best": self.best.to_dict() if self.best is not None else None,
            "per_algorithm": [o.to_dict() for o in self.per_algorithm],
            "gains": dict(self.gains),
            "binding": self.binding,
            "configurations": self.configurations,
            "reasons": list(self.reasons),
            "skipped": list(self.skipped),
            "assumptions": list(self.assumptions),
        }


@dataclass(frozen=True, slots=True)
class _Variant:
    scenario: Scenario
    label: str
    xs: list[dict[str, Any]]
    """Kernel inputs: one dict (identical nodes), or the distinct paced inputs of a site scenario."""
    which: IntArr
    """Index into `xs` of each model size of the grid."""
    fits: npt.NDArray[np.bool_]
    """Every site holds the model, per model size (all True without sites)."""


#: The paper's five algorithms (Rahman 2026), the only ones paper mode searches: every later one (the
#: 2026 algorithms of issue 22, and any added since) is searched in default mode only.
PAPER_ALGORITHMS = (
    Algorithm.DDP,
    Algorithm.DILOCO,
    Algorithm.STREAMING,
    Algorithm.HIERARCHICAL,
    Algorithm.PP_DILOCO,
)


def _algorithms(
    s: Scenario, mode: Mode, algorithms: Sequence[str] | None
) -> tuple[list[Algorithm], list[str]]:
    """(algorithms searched, why each other one is not): every one but ``auto`` (one of the others);
    paper mode leaves out the 2026 algorithms; site_pp_diloco needs nodes_per_site > 1."""
    if algorithms:
        return [Algorithm(a) for a in algorithms], []
    out: list[Algorithm] = []
    skipped: list[str] = []
    for a in Algorithm:
        if a is Algorithm.AUTO:
            continue
        if mode is Mode.PAPER and a not in PAPER_ALGORITHMS:
            skipped.append(f"{a.value}: a 2026 algorithm, searched in default mode only")
        elif a is Algorithm.SITE_PP_DILOCO and s.nodes_per_site <= 1:
            skipped.append(
                f"{a.value}: nodes_per_site is {s.nodes_per_site} (each node its own site); set nodes_per_site "
                "> 1 for pipelines on a site's fabric"
            )
        else:
            out.append(a)
    return out, skipped


def _variants(
    s: Scenario,
    mode: Mode,
    p: ModelParams,
    algorithms: Sequence[str] | None,
    codec_names: Sequence[str] | None,
    grid: Arr,
) -> tuple[list[_Variant], list[str]]:
    """The (algorithm, group size, codec) choices the fleet can run, each resolved to kernel inputs
    (with ``[[site]]`` tables: paced per model size, `fleet_paced.paced_table`), and why an
    algorithm is not searched (mode, nodes_per_site, or the site pacing refuses it).

    A combination the scenario rejects (a ring all-reduce of a sparse codec) is left out."""
    algos, skipped = _algorithms(s, mode, algorithms)
    if codec_names:
        cods = list(codec_names)
    elif mode is Mode.PAPER:
        # The paper's ratio; the scenario's own codec too where it names one (a ring all-reduce, as
        # INTELLECT-1's, rejects ``auto``'s sparse payload).
        cods = ["auto"] if s.codec == "auto" else ["auto", s.codec]
    else:
        cods = ["auto", *codecs()]
    out: list[_Variant] = []
    every = np.ones(grid.size, dtype=bool)
    for a in algos:
        groups = (
            [g for g in PAPER_GROUP_SIZES if s.num_nodes >= 2 * g] if a is Algorithm.HIERARCHICAL else [0]
        )
        try:
            s.replace(algorithm=a, inner_steps=0, tokens=None, active_params=None)
        except (InputError, ValueError) as exc:
            # The site pacing (or another scenario rule) refuses the algorithm itself.
            msg = str(exc)
            skipped.append(msg.removeprefix("algorithm: ") if a.value in msg else f"{a.value}: {msg}")
            continue
        for g in groups:
            for cod in cods:
                try:
                    v = s.replace(
                        algorithm=a,
                        codec=cod,
                        group_size=g or s.group_size,
                        inner_steps=0,
                        tokens=None,
                        active_params=None,
                    )
                    if v.sites:
                        xs, which = paced_table(v, mode, p, grid)
                        fits = sites_fit(v, mode, p, grid)
                    else:
                        xs, which, fits = [kernel_inputs(v, mode, p)], np.zeros(grid.size, np.int64), every
                except (InputError, ValueError):
                    continue
                label = f"{a.value} n_g={g}" if g else a.value
                out.append(_Variant(v, label, xs, which, fits))
    return out, skipped


def _rows(variants: list[_Variant], grid: Arr, h_grid: Sequence[int]) -> tuple[IntArr, IntArr, IntArr]:
    """(variant, P index, H index) of every configuration; DDP syncs every step, so one H."""
    vi, pi, hi = [], [], []
    n_p = len(grid)
    for k, v in enumerate(variants):
        hs = [0] if v.xs[0]["algorithm"] == ALGO_DDP else range(len(h_grid))
        for h in hs:
            vi.append(np.full(n_p, k))
            pi.append(np.arange(n_p))
            hi.append(np.full(n_p, h))
    cat = np.concatenate
    return (
        cat(vi).astype(np.int64),
        cat(pi).astype(np.int64),
        cat(hi).astype(np.int64),
    )


def _evaluate_rows(
    variants: list[_Variant],
    v: IntArr,
    pi: IntArr,
    P: Arr,
    H: Arr,
    tokens: Arr,
    fixed: dict[str, float],
    p: ModelParams,
) -> dict[str, Arr]:
    """FLEET_OUTPUTS of every row (variant v, size index pi, P, H, tokens): one kernel call per set of
    input keys (a site scenario's paced inputs may carry keys an identical-node one does not)."""
    flat = [x for var in variants for x in var.xs]
    offset = np.cumsum([0] + [len(var.xs) for var in variants])[:-1]
    which = np.stack([var.which for var in variants])
    g = offset[v] + which[v, pi]
    out = {k: np.zeros(v.size) for k in FLEET_OUTPUTS}
    for members in group_by_keys(flat):
        rows = np.nonzero(np.isin(g, members))[0]
        if not rows.size:
            continue
        sub = [flat[j] for j in members]
        local = np.searchsorted(np.asarray(members), g[rows])
        x = {k: np.asarray([float(d[k]) for d in sub])[local] for k in sub[0]}
        x.update(params=P[rows], active_params=P[rows], inner_steps=H[rows], tokens=tokens[rows])
        x.update({k: np.asarray(val) for k, val in fixed.items()})
        for k, a in evaluate(x, p, outputs=FLEET_OUTPUTS).items():
            out[k][rows] = np.broadcast_to(a, rows.shape)
    return out


def _score(r: dict[str, Arr], metric: FleetMetric) -> Arr:
    """Higher is better: the metric, or minus the loss."""
    if metric is FleetMetric.LOSS:
        return np.asarray(-r["loss"], dtype=np.float64)
    return np.asarray(r[f"{metric.value}_flop"], dtype=np.float64)


def fleet_search(
    fleet: Scenario,
    *,
    mode: Mode | str = Mode.DEFAULT,
    metric: FleetMetric | str = FleetMetric.C_QUALITY,
    params: ModelParams = DEFAULT_PARAMS,
    params_grid: Sequence[float] | None = None,
    h_grid: Sequence[int] = FLEET_H_GRID,
    algorithms: Sequence[str] | None = None,
    codec_names: Sequence[str] | None = None,
    min_overtraining: float = DEFAULT_MIN_OVERTRAINING,
    max_overtraining: float = DEFAULT_MAX_OVERTRAINING,
    max_tokens: float = math.inf,
    binding: bool = True,
) -> FleetAnswer:
    """The best model size, tokens, H, codec and algorithm for a given fleet (module docstring).

    Args:
        fleet: hardware, precision, chips per node, num_nodes, links, duration_s (the days), regime.
            Its params, tokens and algorithm are not used unless `params_grid` / `algorithms` say so.
        metric: c_quality (default), c_local, or loss.
        params_grid: model sizes (parameters); default the paper's 71 sizes.
        h_grid: inner steps searched (0 = H_min).
        algorithms, codec_names: restrict the search (default: all; codecs only in default mode).
        min_overtraining, max_overtraining: the window on D / (k P), k the compute-optimal tokens per parameter (ModelParams.tokens_per_param_optimal).
        max_tokens: the most tokens a run trains (it stops early there); default no limit.
        binding: also search with days, bandwidth and node count doubled (3 more searches) to name
            the binding constraint.

    Returns:
        A FleetAnswer; `feasible` False (with reasons) when no configuration is valid.
    """
    m = Mode(mode)
    try:
        met = FleetMetric(metric)
    except ValueError:
        raise InputError("metric", f"must be c_quality, c_local or loss, got {metric!r}") from None
    grid = np.asarray(
        [b * 1e9 for b in PAPER_PARAM_GRID_B] if params_grid is None else list(params_grid), dtype=np.float64
    )
    require(grid.size > 0 and bool(np.all(grid > 0)), "params_grid", "must be non-empty and positive")
    require(
        len(h_grid) > 0 and all(isinstance(h, int) and h >= 0 for h in h_grid),
        "h_grid",
        "must be non-empty integers >= 0",
    )
    require(
        0 < min_overtraining <= max_overtraining,
        "min_overtraining",
        f"must be in (0, max_overtraining], got {min_overtraining}",
    )
    require(max_tokens > 0, "max_tokens", f"must be > 0 tokens, got {max_tokens}")
    how = _How(
        m, met, params, grid, h_grid, algorithms, codec_names, min_overtraining, max_overtraining, max_tokens
    )
    found = _search(fleet, how)
    gains: dict[str, float] = {}
    bind = ""
    best = found.best
    if binding and best is not None:
        gains, bind = _binding(fleet, best, how)
    return FleetAnswer(
        fleet=fleet,
        mode=m.value,
        metric=met.value,
        feasible=best is not None,
        best=best,
        per_algorithm=found.per_algorithm,
        gains=gains,
        binding=bind,
        configurations=found.configurations,
        reasons=found.reasons,
        skipped=found.skipped,
        sites=tuple(describe(fleet)),
        assumptions=_assumptions(fleet, m, grid, h_grid, min_overtraining, max_overtraining),
    )


class _How(NamedTuple):
    """What one fleet search searches and how (`fleet_search`'s checked arguments)."""

    m: Mode
    met: FleetMetric
    p: ModelParams
    grid: Arr
    h_grid: Sequence[int]
    algorithms: Sequence[str] | None
    codec_names: Sequence[str] | None
    min_ot: float
    max_ot: float
    max_tokens: float


class _Found(NamedTuple):
    best: FleetOption | None
    per_algorithm: tuple[FleetOption, ...]
    configurations: int
    reasons: tuple[str, ...]
    skipped: tuple[str, ...]


def _search(fleet: Scenario, how: _How) -> _Found:
    """The best option, the best per algorithm label, the configurations evaluated, the reasons if
    none is valid, and the algorithms not searched (with why)."""
    m, met, p, grid, h_grid, algorithms, codec_names, min_ot, max_ot, max_tokens = how
    variants, skipped = _variants(fleet, m, p, algorithms, codec_names, grid)
    if not variants:
        return _Found(
            None, (), 0, ("no algorithm and codec combination is valid for this fleet",), tuple(skipped)
        )
    v, pi, hi = _rows(variants, grid, h_grid)
    P, H = grid[pi], np.asarray(h_grid, dtype=np.float64)[hi]
    window = {"min_overtraining": min_ot, "max_overtraining": max_ot}
    r = _evaluate_rows(variants, v, pi, P, H, np.zeros(v.size), window, p)
    # Rows past the window at the full budget stop early, at max_overtraining (tokens ~ OT), and
    # rows past max_tokens at max_tokens.
    ot0, d0 = r["overtraining_ratio"], r["tokens"]
    with np.errstate(all="ignore"):
        stop = np.minimum(np.where(ot0 > 0, d0 * (max_ot / ot0), np.inf), max_tokens)
    over = np.nonzero(np.isfinite(ot0) & np.isfinite(d0) & (d0 > stop * (1 + 1e-9)))[0]
    stopped = np.zeros(v.size, dtype=bool)
    if over.size:
        r2 = _evaluate_rows(variants, v[over], pi[over], P[over], H[over], stop[over], window, p)
        for k in r:
            r[k][over] = r2[k]
        stopped[over] = True
    ot = r["overtraining_ratio"]
    site_pp = np.asarray([var.scenario.algorithm is Algorithm.SITE_PP_DILOCO for var in variants])
    fits = np.stack([var.fits for var in variants])
    valid = (
        (r["feasible"] > 0)
        & (ot >= min_ot * (1 - 1e-9))
        & (ot <= max_ot * (1 + 1e-9))
        & np.where(r["algorithm_resolved"] == ALGO_PP_DILOCO, r["groups"] >= 2, True)
        # A site-pipeline variant counts only as itself (not its pp_diloco fallback), with >= 2 sites
        # (the planner's rule, `candidates`).
        & np.where(site_pp[v], (r["algorithm_resolved"] == ALGO_SITE_PP) & (r["groups"] >= 2), True)
        # Every [[site]] holds the model (estimate's per-site fit).
        & fits[v, pi]
    )
    score = np.where(valid, _score(r, met), -np.inf)
    score = np.where(np.isfinite(score) | (score == -np.inf), score, -np.inf)
    n_cfg = int(v.size + over.size)
    if not np.isfinite(score).any():
        return _Found(None, (), n_cfg, _why_none(fleet, r, fits[v, pi], min_ot), tuple(skipped))
    best_of: dict[str, int] = {}
    for i in np.argsort(-score, kind="stable"):
        if not np.isfinite(score[i]):
            break
        best_of.setdefault(variants[v[i]].label, int(i))
    opts = [
        _option(variants[v[i]], float(P[i]), int(h_grid[hi[i]]), r, i, bool(stopped[i]), m, p)
        for i in best_of.values()
    ]
    return _Found(opts[0], tuple(opts), n_cfg, (), tuple(skipped))


def _why_none(
    fleet: Scenario, r: dict[str, Arr], site_fits: npt.NDArray[np.bool_], min_ot: float
) -> tuple[str, ...]:
    feasible = r["feasible"] > 0
    node = f"{fleet.resolved_chips_per_node()} x {fleet.hardware}"
    if fleet.sites and feasible.any() and not (feasible & site_fits).any():
        return (f"no model size of the grid fits every site's nodes ({'; '.join(describe(fleet))}) (memory)",)
    if not (r["under_cap"] > 0).any():
        return (f"each node ({node}) is over regime {fleet.regime}'s covered-cluster cap",)
    if not (r["fits"] > 0).any():
        return (f"no model size of the grid fits {fleet.num_nodes:,} nodes of {node} (memory)",)
    if not feasible.any():
        return (
            f"no configuration is feasible on {fleet.num_nodes:,} nodes of {node}: the memory rule or "
            "the time budget rules out every model size and algorithm",
        )
    return (
        f"every feasible configuration trains fewer than {min_ot:g} x the compute-optimal tokens per parameter in the "
        "time budget (min_overtraining): give more days or a smaller model size",
    )


def _option(
    var: _Variant, P: float, h_req: int, r: dict[str, Arr], i: int, stopped: bool, m: Mode, p: ModelParams
) -> FleetOption:
    """The option at row i, re-estimated from its scenario with every kernel output."""
    s = var.scenario.replace(
        params=P,
        inner_steps=h_req,
        tokens=float(r["tokens"][i]) if stopped else None,
        name=f"fleet: {var.label} on {var.scenario.num_nodes} x {var.scenario.hardware}",
    )
    x = scenario_inputs(s, m, p)
    full = {k: float(np.asarray(val).reshape(-1)[0]) for k, val in evaluate(x, p).items()}
    algo_code = int(full["algorithm_resolved"])
    sync, compute = pacing(s, m, p, estimate) if s.sites else ("", "")
    return FleetOption(
        scenario=s,
        algorithm=var.scenario.algorithm.value if algo_code != ALGO_PP_DILOCO else ALGORITHM_NAMES[algo_code],
        group_size=var.scenario.group_size if var.scenario.algorithm is Algorithm.HIERARCHICAL else 0,
        codec=var.scenario.codec,
        params=P,
        tokens=full["tokens"],
        inner_steps=int(full["inner_steps"]),
        inner_steps_requested=h_req,
        run_time_s=full["run_time_s"],
        stopped_early=stopped,
        utilisation=full["utilisation"],
        overtraining_ratio=full["overtraining_ratio"],
        c_local_flop=full["c_local_flop"],
        c_quality_flop=full["c_quality_flop"],
        loss=full["loss"],
        cost_usd=full["cost_usd"],
        mean_up_bits_per_s=full["mean_up_bits_per_s"],
        mean_down_bits_per_s=full["mean_down_bits_per_s"],
        peak_up_bits_per_s=full["peak_up_bits_per_s"],
        bytes_per_day_per_node=full["bytes_per_day_per_node"],
        sync_pacing=sync,
        compute_pacing_site=compute,
    )


def _binding(fleet: Scenario, best: FleetOption, how: _How) -> tuple[dict[str, float], str]:
    """Gain of the best metric when days, WAN bandwidth (both directions, every site's) or nodes
    (every site's) double (`fleet_paced.doubled`)."""
    # Gains are ratios of C_quality for every metric: a loss ratio of 1.01 can be a large change.
    now = best.c_quality_flop
    gains: dict[str, float] = {}
    for name, s in doubled(fleet).items():
        b = _search(s, how).best
        gains[name] = 1.0 if b is None or not now > 0 else b.c_quality_flop / now
    top = max(gains, key=lambda k: gains[k])
    if gains[top] < 1 + BINDING_MIN_GAIN:
        if best.stopped_early:
            return gains, (
                f"the overtraining window (max {how.max_ot:g} x the compute-optimal tokens/param): the run stops at day "
                f"{best.run_time_s / units.SECONDS_PER_DAY:.4g}; the model-size grid binds"
            )
        return gains, "none of days, bandwidth or nodes (each doubled gains < 1%): the model-size grid binds"
    return gains, top


def _assumptions(
    fleet: Scenario, m: Mode, grid: Arr, h_grid: Sequence[int], min_ot: float, max_ot: float
) -> tuple[str, ...]:
    sites = (
        [
            f"[[site]] tables: each configuration evaluated on the paced identical-node equivalent "
            f"(kernel.sites), as estimate does; the [[churn]] schedule ({len(fleet.churn)} events) is not "
            f"searched: the figures are for the sites as listed ({fleet.num_nodes} nodes)"
            if fleet.churn
            else "[[site]] tables: each configuration evaluated on the paced identical-node equivalent "
            "(kernel.sites), as estimate does"
        ]
        if fleet.sites
        else []
    )
    return (
        f"{m.value} mode; hardware, precision, chips per node, node count, links and regime as given",
        *sites,
        f"model sizes: {grid.size} from {units.format_count(float(grid.min()))} to "
        f"{units.format_count(float(grid.max()))} parameters, dense (active = total)",
        f"inner steps H in {{{', '.join('H_min' if h == 0 else str(h) for h in h_grid)}}}",
        "codecs: auto and the catalogue's (data/codecs.toml)"
        if m is Mode.DEFAULT
        else "codec: the paper's compression ratio",
        f"tokens: the time budget's, or fewer where more would pass {max_ot:g} x the compute-optimal tokens/param "
        f"(the run stops early); at least {min_ot:g} x the compute-optimal tokens/param",
        "binding constraint: the one of days, WAN bandwidth and node count whose doubling gains most",
    )


__all__ = [
    "FLEET_H_GRID",
    "FleetAnswer",
    "FleetMetric",
    "FleetOption",
    "fleet_search",
]
