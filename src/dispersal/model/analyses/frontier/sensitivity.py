"""Global sensitivity of the frontier's headline answers (issue 31 item 4): Sobol' first-order and
total indices (SALib: Saltelli's design and estimators) over the parameters the Monte Carlo draws.

The sampled parameters enter in groups (`GROUPS`: the Chinchilla fit, the quality fit up to M = 8,
the MuLoCo tail fit, each of the tail's two exponents, MFU, chip prices, stragglers, codec and
activation quality, the paper's H terms; the quality mapping is not drawn:
`monte_carlo.QUALITY_LOSS_MAPPING_SHARE` = 0). Each group is one input u_g in
[0, 1): it picks row floor(u_g K) of a pool of K Monte Carlo draws (`bands.Draws`, the frontier's own
draws), so a group's joint distribution (the fit's covariance included) is kept and the indices
are those of the discretised draws. Outputs (log10, so orders of magnitude weigh equally):

- premium at the reach bandwidth (100 Mbps) for the target (default 1e25): cheapest plan / one
  building, the same draw; "cannot reach" counts as CANNOT_REACH_PREMIUM;
- least bandwidth per site within the premium: "cannot reach" counts as one decade above the grid;
- largest target with at most N sites (N = 100, 1,000; top grid rate, any cost): the best metric
  over the nominal leaders at those site counts under the draw.

The one-at-a-time tornado (`uncertainty.tornado`) stays for cost; this answers which assumption the
answer rests on. SALib is an optional dependency (`pip install 'dispersal[sensitivity]'`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.analyses.frontier import bands
from dispersal.model.analyses.frontier.conditions import SearchLayout, search_layout
from dispersal.model.analyses.frontier.p_reach import draw_costs
from dispersal.model.analyses.frontier.result import AT_SITES_POINTS, BANDWIDTH_GRID_BITS_PER_S, reach_index
from dispersal.model.analyses.frontier.table import Engine, geomgrid, search_target
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.scenario import Mode
from dispersal.model.search import planner
from dispersal.model.search.candidates import Constraints

Arr = npt.NDArray[np.float64]

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Chinchilla fit",
        ("chinchilla_e", "chinchilla_a", "chinchilla_alpha", "chinchilla_b", "chinchilla_beta"),
    ),
    ("quality fit M <= 8", ("q_u0", "q_u1", "q_b0", "q_kb", "q_p", "q_q", "q_delta")),
    ("tail fit (MuLoCo)", ("q_tail_scale", "q_tail_size_exponent", "q_muon_offset", "q_muon_penalty_ratio")),
    ("tail tokens exponent", ("q_tail_tokens_exponent",)),
    ("tail batch exponent", ("q_tail_batch_exponent",)),
    ("MFU", ("mfu", "mfu_scale")),
    ("chip prices", ("price_scale",)),
    ("stragglers", ("straggler_scale",)),
    ("codec and activation quality", ("compression_quality", "activation_quality")),
    ("paper H terms", ("eta_h_ratio", "replica_beta_coeff", "replica_beta_exponent")),
)
"""(name, Draws array keys): one Sobol' input per group."""
DEFAULT_BASE_SAMPLES = 16
"""N of Saltelli's design (a power of 2): N (G + 2) = 192 evaluations of every output with the 10
groups; under a minute of CPU on 2 cores (docs/frontier.md). The indices' 95% intervals say how
far so few draws pin them."""
POOL_DRAWS = 64
"""K, Monte Carlo draws per group pool (u_g picks one of them)."""
CANNOT_REACH_PREMIUM = 100.0
"""Premium counted for a draw that cannot reach the target at the reach bandwidth (x): a cap so the
variance is finite, far above any premium asked (assumption; the share of such draws is printed)."""
DEFAULT_SITES = (100, 1000)
LEADERS_PER_SITE_COUNT = 24
"""Candidates per site count whose draws decide the largest target (the nominal best, distinct)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Indices:
    """Sobol' indices of one output, per group (NaN where the output does not vary)."""

    output: str
    first_order: tuple[float, ...]
    first_order_ci: tuple[float, ...]
    total: tuple[float, ...]
    total_ci: tuple[float, ...]
    mean: float
    sd: float

    def to_dict(self, groups: Sequence[str]) -> dict[str, Any]:
        """JSON-ready: per group S1, its 95% half-width, ST and its half-width (None for NaN)."""

        def f(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {
            "output": self.output,
            "mean_log10": self.mean,
            "sd_log10": self.sd,
            "groups": [
                {"group": g, "S1": f(a), "S1_ci95": f(b), "ST": f(c), "ST_ci95": f(d)}
                for g, a, b, c, d in zip(
                    groups, self.first_order, self.first_order_ci, self.total, self.total_ci, strict=True
                )
            ],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Sensitivity:
    """The Sobol' indices of the headline outputs."""

    target_flop: float
    premium: float
    base_samples: int
    evaluations: int
    groups: tuple[str, ...]
    outputs: tuple[Indices, ...]
    cannot_reach_share: float
    """Share of the design's draws that cannot reach the target at the reach bandwidth."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (docs/frontier.md, "Sensitivity")."""
        return {
            "target_flop": self.target_flop,
            "premium": self.premium,
            "base_samples": self.base_samples,
            "evaluations": self.evaluations,
            "cannot_reach_share": self.cannot_reach_share,
            "outputs": [o.to_dict(self.groups) for o in self.outputs],
        }


def _salib() -> tuple[Any, Any]:
    try:
        from SALib.analyze import sobol as analyze
        from SALib.sample import sobol as sample
    except ImportError:
        raise InputError(
            "sensitivity", "needs SALib: pip install 'dispersal[sensitivity]' (or pip install SALib)"
        ) from None
    return sample, analyze


def sensitivity(
    *,
    target_flop: float = 1e25,
    premium: float = 5.0,
    sites: Sequence[int] = DEFAULT_SITES,
    base_samples: int = DEFAULT_BASE_SAMPLES,
    seed: int = 0,
    regime_name: str = "treaty",
    constraints: Constraints | None = None,
    bandwidth_grid_bits_per_s: Sequence[float] = BANDWIDTH_GRID_BITS_PER_S,
) -> Sensitivity:
    """Sobol' first-order and total indices (module docstring) of log10 of: the premium at the
    reach bandwidth and the least bandwidth per site within `premium` for `target_flop`, and the
    largest target at each of `sites` (default mode)."""
    require(
        isinstance(base_samples, int) and base_samples >= 2 and base_samples & (base_samples - 1) == 0,
        "sensitivity_samples",
        "must be a power of 2 >= 2",
    )
    sample, analyze = _salib()
    c = constraints or Constraints()
    m = Mode.DEFAULT
    grid = tuple(sorted({float(b) for b in bandwidth_grid_bits_per_s}))
    names = tuple(g for g, _ in GROUPS)
    problem = {"num_vars": len(names), "names": list(names), "bounds": [[0.0, 1.0]] * len(names)}
    u = sample.sample(problem, base_samples, calc_second_order=False, scramble=True, seed=seed)
    pool = bands.Draws(m, c, POOL_DRAWS, seed)
    dr = pool.with_arrays(_design(pool.arrays, u))
    draws = np.arange(1, u.shape[0] + 1, dtype=np.int64)

    lay = search_layout(grid, c)
    eng = Engine(m, c, regime_name)
    base = planner.centralized_baseline(target_flop, constraints=c, mode=m)
    c0n = base.best.cost_usd if base.best is not None else None
    budgets = (max(premium, bands.SHORTLIST_PREMIUM) * c0n,) if c0n is not None else ()
    tab = search_target(eng, target_flop, lay.conds, budgets)
    costs, c0 = draw_costs(eng, target_flop, tab, lay, base.best, c, m, dr, draws)
    ri = reach_index(grid)
    if c0 is None:
        raise InputError("target", f"one building cannot reach {target_flop:.0e} FLOP either")
    prem_r = np.where(np.isfinite(costs[:, ri]) & np.isfinite(c0), costs[:, ri] / c0, CANNOT_REACH_PREMIUM)
    within = np.isfinite(costs) & (costs <= (premium * c0)[:, None] * (1 + 1e-12))
    least = np.where(within.any(axis=1), np.asarray(grid)[np.argmax(within, axis=1)], grid[-1] * 10.0)
    ys: list[tuple[str, Arr]] = [
        (f"premium at {grid[ri] / 1e6:g} Mbps, {target_flop:.0e}", np.log10(np.minimum(prem_r, 1e300))),
        (f"least bandwidth per site within {premium:g}x, {target_flop:.0e}", np.log10(least)),
    ]
    for n in sites:
        ys.append((f"largest target at {n:,} sites", np.log10(_largest(eng, dr, lay, n, draws))))
    outs = []
    for name, y in ys:
        outs.append(_indices(analyze, problem, name, np.asarray(y, dtype=np.float64), seed))
    return Sensitivity(
        target_flop=target_flop,
        premium=premium,
        base_samples=base_samples,
        evaluations=int(u.shape[0]),
        groups=names,
        outputs=tuple(outs),
        cannot_reach_share=float(np.mean(~np.isfinite(costs[:, ri]))),
    )


def _design(pool: dict[str, Arr], u: Arr) -> dict[str, Arr]:
    """Draw arrays for the design `u` (rows, groups): group g's keys take pool row 1 + floor(u_g K);
    keys of no group (the raw values) keep the nominal. Row 0 stays the nominal draw."""
    k = int(next(iter(pool.values())).size) - 1
    rows = u.shape[0]
    out = {key: np.full(rows + 1, v[0]) for key, v in pool.items()}
    for g, (_, keys) in enumerate(GROUPS):
        idx = 1 + np.minimum((u[:, g] * k).astype(np.int64), k - 1)
        for key in keys:
            if key in pool:
                out[key] = np.concatenate([[pool[key][0]], pool[key][idx]])
    return out


def _largest(eng: Engine, dr: bands.Draws, lay: SearchLayout, n: int, draws: npt.NDArray[np.int64]) -> Arr:
    """Per draw: the largest metric with at most n sites at the top grid rate, any cost, over the
    LEADERS_PER_SITE_COUNT nominal leaders (each at AT_SITES_POINTS site counts up to n)."""
    allc = np.flatnonzero(eng.usable).astype(np.int64)
    lo, hi = eng.window(allc, lay.conds[0], 1.0)
    sel = (lo <= n) & (hi >= lo)
    g = geomgrid(lo[sel], np.minimum(hi[sel], float(n)), AT_SITES_POINTS)
    cc = np.repeat(allc[sel], AT_SITES_POINTS)
    nn = g.reshape(-1)
    r = eng.run(cc, nn, np.zeros(cc.size, dtype=np.int64), lay.conds)
    met = np.where(r["valid"] > 0, r["metric"], -np.inf).reshape(-1, AT_SITES_POINTS).max(axis=1)
    lead = allc[sel][np.argsort(-met, kind="stable")[:LEADERS_PER_SITE_COUNT]]
    lead = lead[np.isfinite(np.sort(-met)[: lead.size])]
    out = np.full(draws.size, 1.0)
    if lead.size == 0:
        return out
    lo2, hi2 = eng.window(lead, lay.conds[0], 1.0)
    g2 = geomgrid(lo2, np.minimum(hi2, float(n)), AT_SITES_POINTS)
    combos = np.repeat(lead, AT_SITES_POINTS)
    ns = g2.reshape(-1)
    dd = np.repeat(draws, combos.size)
    cc2 = np.tile(combos, draws.size)
    nn2 = np.tile(ns, draws.size)
    rr = dr.run(eng, cc2, nn2, np.zeros(dd.size, dtype=np.int64), lay.conds, dd)
    best = np.where(rr["valid"] > 0, rr["metric"], -np.inf)
    per = best.reshape(draws.size, -1).max(axis=1)
    return np.asarray(np.where(np.isfinite(per) & (per > 1.0), per, 1.0), dtype=np.float64)


def _indices(analyze: Any, problem: dict[str, Any], name: str, y: Arr, seed: int) -> Indices:
    """SALib's Sobol' analysis of one output (NaN indices where it does not vary); its bootstrap of the
    confidence intervals seeded from `seed` (>= 0), so a run repeats them."""
    g = problem["num_vars"]
    if not np.all(np.isfinite(y)) or float(np.std(y)) == 0.0:
        nan = (math.nan,) * g
        return Indices(
            output=name,
            first_order=nan,
            first_order_ci=nan,
            total=nan,
            total_ci=nan,
            mean=float(np.mean(y)),
            sd=float(np.std(y)),
        )
    # seed + 1: SALib seeds its bootstrap only for a true seed (`if seed:`), so 0 would leave the
    # confidence intervals unseeded (they changed from run to run)
    si = analyze.analyze(problem, y, calc_second_order=False, print_to_console=False, seed=seed + 1)

    def t(key: str) -> tuple[float, ...]:
        return tuple(float(v) for v in si[key])

    return Indices(
        output=name,
        first_order=t("S1"),
        first_order_ci=t("S1_conf"),
        total=t("ST"),
        total_ci=t("ST_conf"),
        mean=float(np.mean(y)),
        sd=float(np.std(y)),
    )
