"""Uncertainty and sensitivity of the planner's answer: Monte Carlo ranges and a one-at-a-time tornado.

Every uncertain input carries a distribution with its source (``dispersal/data/uncertainty.toml``):
the Chinchilla refit constants (Besiroglu et al. 2024 standard errors, A with alpha and B with beta
drawn as correlated normals, truncated to positive values), the eta_H slope, the replica penalty's
size exponent (rotated about the fit's pivot) and level, the straggler coefficients, the quality
columns of the compression tables, MFU and a chip-price multiplier.

Monte Carlo (`plan_samples`). Re-running the planner per draw (~0.5 s each) is too slow for 1,000
draws, so the search is done for all draws at once on a bounded candidate set:

1. The planner runs once at the nominal values (the headline plan).
2. Every candidate (hardware, model size, algorithm slot) of the planner's own candidate space
   (`candidates.CandidateSpace`, with its validity rule and overtraining window) gets its smallest node count meeting the target at the nominal values, and
   the candidates whose nominal cost is within `SHORTLIST_COST_FACTOR` of the cheapest are kept
   (at most `SHORTLIST_MAX`). Under the drawn values the cheapest plan is assumed to be one of them.
3. For every (draw, candidate) pair, vectorised over both with `kernel.evaluate` and the draw's
   parameters as ``overrides``: the candidate's overtraining window in N is recomputed for that draw,
   scanned on a geometric grid of `GRID_POINTS` node counts, and the first grid cell where the
   target is met is bisected to the integer N. This is exact when "valid and meets the target" is
   monotone in N inside that cell (the planner's exact search scans every integer N instead).
4. Each draw takes the cheapest valid candidate that meets the target (ties: higher C_quality),
   as `plan()` does. A draw with no such candidate counts as infeasible; the percentiles are over
   the feasible draws and `feasible_fraction` reports how many there were.

How each input reaches the kernel: Chinchilla constants and the replica fit through ``overrides``
(arrays per draw); MFU, the compression and activation quality columns and the chip prices through
the kernel inputs; eta_H's alpha0 by an exact rescaling of the kernel's eta_H (eta_H is linear in
alpha0 before its floor: 1 - (a'/a)(1 - raw)); the straggler coefficients, which the kernel reads
only from `ModelParams`, by one evaluation per distinct drawn value (hence their discrete
distribution). Energy is not scaled by the price multiplier.

Tornado (`tornado`): one parameter at a time at its marginal P10 and P90, all others nominal, with
a full `plan()` per end. The chip-price multiplier cannot be passed to `plan()`; it re-ranks the
nominal plan's per-hardware options by scaled hardware cost plus energy, which is what the planner
would return (its search and pruning do not depend on a common price factor).

Ignored: correlations other than the two Chinchilla pairs; uncertainty of the physics (links,
time budget), of the catalogue's memory and FLOP/s figures and of the overtraining window.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import PAPER_MFU, Mode, kernel_inputs
from dispersal.model.kernel import quality
from dispersal.model.kernel.efficiency import eta_h
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.search import planner
from dispersal.model.search.bisection import first_true
from dispersal.model.search.candidates import CandidateSpace, make_space

Arr = npt.NDArray[np.float64]
IntArr = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]

SCHEMA_VERSION = 1
KINDS = ("normal", "lognormal", "uniform", "triangular", "discrete")
CHINCHILLA = ("chinchilla_e", "chinchilla_a", "chinchilla_alpha", "chinchilla_b", "chinchilla_beta")
#: Every parameter this module knows how to vary, and how it reaches the model.
PARAMETERS: dict[str, str] = {
    "chinchilla_e": "ModelParams.chinchilla_e",
    "chinchilla_a": "ModelParams.chinchilla_a",
    "chinchilla_alpha": "ModelParams.chinchilla_alpha",
    "chinchilla_b": "ModelParams.chinchilla_b",
    "chinchilla_beta": "ModelParams.chinchilla_beta",
    "eta_h_alpha0": "ModelParams.eta_h_alpha0",
    "replica_beta_exponent": "ModelParams.replica_beta_exponent (coefficient rotated about the pivot)",
    "replica_beta_scale": "multiplier on ModelParams.replica_beta_coeff",
    "straggler_scale": "multiplier on ModelParams.straggler_coeff_relay and straggler_coeff_sync",
    "compression_quality": "eta_comp table column: 0 optimistic, 1 expected, 2 conservative",
    "activation_quality": "eta_act table column: 0 optimistic, 1 expected, 2 conservative",
    "mfu": "Constraints.mfu (absolute)",
    "price_scale": "multiplier on every chip's purchase and rental price",
}
_QUALITY = ("compression_quality", "activation_quality")
_FIGURES = ("cost_usd", "nodes", "c_quality_flop", "days")

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
# distributions
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class Distribution:
    """One parameter's distribution. Zero width (sd = 0, low = high, one value) is allowed."""

    kind: str
    """normal | lognormal | uniform | triangular | discrete."""
    nominal: float
    """The value the nominal plan uses: mean (normal), median (lognormal), mode (triangular), one of
    the values (discrete), inside [low, high] (uniform)."""
    sd: float = 0.0
    """normal: standard deviation."""
    lower: float = -math.inf
    """normal: truncated below this value (draws <= lower are redrawn)."""
    sigma: float = 0.0
    """lognormal: standard deviation of ln x."""
    low: float = math.nan
    """uniform / triangular: lower end."""
    high: float = math.nan
    """uniform / triangular: upper end."""
    values: tuple[float, ...] = ()
    """discrete: the possible values."""
    weights: tuple[float, ...] = ()
    """discrete: their probabilities (sum to 1)."""
    labels: tuple[str, ...] = ()
    """discrete: optional names of the values."""

    def __post_init__(self) -> None:
        require(self.kind in KINDS, "kind", f"must be one of {', '.join(KINDS)}, got {self.kind!r}")
        require(math.isfinite(self.nominal), "nominal", f"must be finite, got {self.nominal!r}")
        if self.kind == "normal":
            require(math.isfinite(self.sd) and self.sd >= 0, "sd", f"must be >= 0, got {self.sd!r}")
            require(
                self.nominal > self.lower,
                "lower",
                f"must be below the nominal {self.nominal}, got {self.lower}",
            )
        elif self.kind == "lognormal":
            require(
                math.isfinite(self.sigma) and self.sigma >= 0, "sigma", f"must be >= 0, got {self.sigma!r}"
            )
            require(self.nominal > 0, "nominal", f"must be > 0 for a lognormal, got {self.nominal}")
        elif self.kind in ("uniform", "triangular"):
            require(
                math.isfinite(self.low)
                and math.isfinite(self.high)
                and self.low <= self.nominal <= self.high,
                "low",
                f"need finite low <= nominal <= high, got {self.low}, {self.nominal}, {self.high}",
            )
        else:
            require(len(self.values) >= 1, "values", "a discrete distribution needs at least one value")
            require(len(self.weights) == len(self.values), "weights", "must have one weight per value")
            require(all(w >= 0 and math.isfinite(w) for w in self.weights), "weights", "must be >= 0")
            require(abs(sum(self.weights) - 1.0) < 1e-9, "weights", f"must sum to 1, got {sum(self.weights)}")
            require(self.nominal in self.values, "nominal", f"must be one of the values {list(self.values)}")
            require(not self.labels or len(self.labels) == len(self.values), "labels", "one label per value")

    @property
    def support(self) -> tuple[float, float]:
        """Smallest and largest value a draw can take."""
        if self.kind == "normal":
            return (
                max(self.lower, -math.inf) if self.sd > 0 else self.nominal,
                math.inf if self.sd > 0 else self.nominal,
            )
        if self.kind == "lognormal":
            return (0.0, math.inf) if self.sigma > 0 else (self.nominal, self.nominal)
        if self.kind == "discrete":
            live = [v for v, w in zip(self.values, self.weights, strict=True) if w > 0]
            return (min(live), max(live))
        return (self.low, self.high)

    @property
    def is_degenerate(self) -> bool:
        """True when every draw equals the nominal value."""
        lo, hi = self.support
        return lo == hi == self.nominal

    def quantile(self, q: float) -> float:
        """The value below which a fraction q of draws fall (marginal; truncation included)."""
        require(0 < q < 1, "quantile", f"must be in (0, 1), got {q}")
        if self.kind == "normal":
            if self.sd == 0:
                return self.nominal
            nd = statistics.NormalDist(self.nominal, self.sd)
            f_lo = nd.cdf(self.lower) if math.isfinite(self.lower) else 0.0
            return nd.inv_cdf(f_lo + q * (1.0 - f_lo))
        if self.kind == "lognormal":
            return (
                self.nominal * math.exp(self.sigma * statistics.NormalDist().inv_cdf(q))
                if self.sigma
                else self.nominal
            )
        if self.kind == "uniform":
            return self.low + q * (self.high - self.low)
        if self.kind == "triangular":
            a, c, b = self.low, self.nominal, self.high
            if b == a:
                return a
            fc = (c - a) / (b - a)
            if q < fc:
                return a + math.sqrt(q * (b - a) * (c - a))
            return b - math.sqrt((1 - q) * (b - a) * (b - c))
        order = sorted(zip(self.values, self.weights, strict=True))
        cum = 0.0
        for v, w in order:
            cum += w
            if w > 0 and cum >= q - 1e-12:
                return v
        return order[-1][0]

    def label_of(self, value: float) -> str:
        """A readable name for a value (a discrete label where one is given)."""
        if self.labels and value in self.values:
            return self.labels[self.values.index(value)]
        return f"{value:.4g}"

    def _sample_other(self, rng: np.random.Generator, n: int) -> Arr:
        """Draws of a non-normal distribution (normals are drawn jointly by the spec)."""
        if self.is_degenerate:
            return np.full(n, self.nominal)
        if self.kind == "lognormal":
            return np.asarray(self.nominal * np.exp(self.sigma * rng.standard_normal(n)), dtype=np.float64)
        if self.kind == "uniform":
            return np.asarray(rng.uniform(self.low, self.high, n), dtype=np.float64)
        if self.kind == "triangular":
            return np.asarray(rng.triangular(self.low, self.nominal, self.high, n), dtype=np.float64)
        idx = rng.choice(len(self.values), size=n, p=np.asarray(self.weights, dtype=np.float64))
        return np.asarray(self.values, dtype=np.float64)[idx]

    def to_dict(self) -> dict[str, Any]:
        """The fields this kind uses."""
        keys = {
            "normal": ("sd", "lower"),
            "lognormal": ("sigma",),
            "uniform": ("low", "high"),
            "triangular": ("low", "high"),
            "discrete": ("values", "weights", "labels"),
        }[self.kind]
        d: dict[str, Any] = {"kind": self.kind, "nominal": self.nominal}
        for k in keys:
            v = getattr(self, k)
            d[k] = list(v) if isinstance(v, tuple) else v
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class UncertainParameter:
    """An uncertain model input: its distribution and where the numbers come from."""

    name: str
    """One of `PARAMETERS`."""
    distribution: Distribution
    layer: str = "assumption"
    """published fit, heuristic or assumption (spec/model.md's layers)."""
    description: str = ""
    source: str = ""
    """Paper and table, or the stated assumption."""

    def __post_init__(self) -> None:
        require(
            self.name in PARAMETERS,
            self.name,
            f"unknown uncertain parameter (known: {', '.join(PARAMETERS)})",
        )
        d = self.distribution
        lo, hi = d.support
        if self.name in _QUALITY:
            require(
                d.kind == "discrete" and set(d.values) <= {0.0, 1.0, 2.0},
                self.name,
                "must be discrete over 0 (optimistic), 1 (expected), 2 (conservative)",
            )
        elif self.name == "mfu":
            require(lo > 0 and hi <= 1, self.name, f"draws must lie in (0, 1], support is [{lo}, {hi}]")
        else:
            require(
                lo >= 0 and d.nominal > 0,
                self.name,
                f"draws must be positive (truncate a normal with lower = 0), support is [{lo}, {hi}]",
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "name": self.name,
            "layer": self.layer,
            "description": self.description,
            "source": self.source,
            **self.distribution.to_dict(),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Correlation:
    """Correlation between two normal parameters, drawn as a bivariate normal."""

    a: str
    b: str
    rho: float
    source: str = ""

    def __post_init__(self) -> None:
        require(-1 < self.rho < 1 and math.isfinite(self.rho), "rho", f"must be in (-1, 1), got {self.rho!r}")
        require(self.a != self.b, "correlations", f"a parameter cannot be correlated with itself ({self.a})")


@dataclass(frozen=True, kw_only=True, slots=True)
class UncertaintySpec:
    """The distributions of every uncertain input (the default is ``data/uncertainty.toml``)."""

    parameters: tuple[UncertainParameter, ...]
    correlations: tuple[Correlation, ...] = ()
    replica_pivot_params: float = 2.9e8
    """P at which a change of the replica exponent leaves beta_0 unchanged (the fit's centre)."""

    def __post_init__(self) -> None:
        names = [p.name for p in self.parameters]
        dup = sorted({n for n in names if names.count(n) > 1})
        require(not dup, dup[0] if dup else "parameters", "appears twice")
        require(
            self.replica_pivot_params > 0,
            "replica_pivot_params",
            f"must be > 0, got {self.replica_pivot_params}",
        )
        seen: set[str] = set()
        by = {p.name: p for p in self.parameters}
        for c in self.correlations:
            for n in (c.a, c.b):
                require(n in by, n, "correlated parameter has no distribution")
                require(by[n].distribution.kind == "normal", n, "only normal parameters can be correlated")
                require(n not in seen, n, "is in more than one correlation")
                seen.add(n)

    def get(self, name: str) -> UncertainParameter | None:
        """The parameter called `name`, or None (then it stays at the model default)."""
        for p in self.parameters:
            if p.name == name:
                return p
        return None

    def nominal(self) -> dict[str, float]:
        """Every parameter's nominal value."""
        return {p.name: p.distribution.nominal for p in self.parameters}

    def degenerate(self) -> UncertaintySpec:
        """The same spec with every distribution collapsed onto its nominal value (zero width)."""
        params = []
        for p in self.parameters:
            d = p.distribution
            zero = Distribution(kind="discrete", nominal=d.nominal, values=(d.nominal,), weights=(1.0,))
            params.append(dataclasses.replace(p, distribution=zero))
        return dataclasses.replace(self, parameters=tuple(params), correlations=())

    def sample(self, samples: int, seed: int) -> dict[str, Arr]:
        """`samples` joint draws, reproducible from `seed` (numpy.random.default_rng).

        Normal parameters are drawn from standard normals (correlated pairs through their 2x2
        Cholesky factor) and rows with a value at or below a truncation bound are redrawn; the
        other kinds are drawn independently, in the order of `parameters`.
        """
        require(
            isinstance(samples, int) and not isinstance(samples, bool) and samples >= 1,
            "samples",
            f"must be an integer >= 1, got {samples!r}",
        )
        require(
            isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0,
            "seed",
            f"must be an integer >= 0, got {seed!r}",
        )
        rng = np.random.default_rng(seed)
        normals = [p for p in self.parameters if p.distribution.kind == "normal"]
        idx = {p.name: i for i, p in enumerate(normals)}
        mu = np.asarray([p.distribution.nominal for p in normals], dtype=np.float64)
        sd = np.asarray([p.distribution.sd for p in normals], dtype=np.float64)
        lower = np.asarray([p.distribution.lower for p in normals], dtype=np.float64)
        chol = np.eye(len(normals))
        for c in self.correlations:
            i, j = idx[c.a], idx[c.b]
            chol[j, i] = c.rho
            chol[j, j] = math.sqrt(1.0 - c.rho * c.rho)
        vals = np.empty((samples, len(normals)))
        todo = np.arange(samples)
        for _ in range(1000):
            z = rng.standard_normal((todo.size, len(normals)))
            v = mu + sd * (z @ chol.T)
            vals[todo] = v
            bad = np.any((v <= lower) & (sd > 0), axis=1)
            todo = todo[bad]
            if todo.size == 0:
                break
        else:
            raise InputError(
                "lower", "truncation rejects almost every draw: is a normal's lower bound far above its mean?"
            )
        out: dict[str, Arr] = {p.name: np.asarray(vals[:, idx[p.name]]) for p in normals}
        for p in self.parameters:
            if p.distribution.kind == "normal":
                if p.distribution.sd == 0:
                    out[p.name] = np.full(samples, p.distribution.nominal)
                continue
            out[p.name] = p.distribution._sample_other(rng, samples)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "schema_version": SCHEMA_VERSION,
            "replica_pivot_params": self.replica_pivot_params,
            "parameters": [p.to_dict() for p in self.parameters],
            "correlations": [dataclasses.asdict(c) for c in self.correlations],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UncertaintySpec:
        """Build from the TOML layout (``[parameters.<name>]`` tables, ``[[correlations]]``)."""
        known = {"schema_version", "replica_pivot_params", "parameters", "correlations"}
        unknown = sorted(set(data) - known)
        require(
            not unknown, unknown[0] if unknown else "", f"unknown key (known: {', '.join(sorted(known))})"
        )
        require(
            data.get("schema_version", SCHEMA_VERSION) == SCHEMA_VERSION,
            "schema_version",
            f"must be {SCHEMA_VERSION}, got {data.get('schema_version')!r}",
        )
        dist_keys = {f.name for f in dataclasses.fields(Distribution)}
        meta_keys = {"layer", "description", "source"}
        params = []
        raw = data.get("parameters", {})
        require(isinstance(raw, Mapping), "parameters", "must be a table of [parameters.<name>] entries")
        for name, entry in raw.items():
            require(isinstance(entry, Mapping), name, "must be a table")
            bad = sorted(set(entry) - dist_keys - meta_keys)
            require(not bad, f"{name}.{bad[0]}" if bad else name, "unknown key")
            kw: dict[str, Any] = {}
            for k, v in entry.items():
                if k in meta_keys:
                    continue
                if k in ("values", "weights"):
                    kw[k] = tuple(float(x) for x in v)
                elif k == "labels":
                    kw[k] = tuple(str(x) for x in v)
                elif k == "kind":
                    kw[k] = str(v)
                else:
                    try:
                        kw[k] = float(v)
                    except (TypeError, ValueError):
                        raise InputError(f"{name}.{k}", f"must be a number, got {v!r}") from None
            try:
                dist = Distribution(**kw)
            except InputError as exc:
                raise InputError(f"{name}.{exc.field}", str(exc).split(": ", 1)[-1]) from None
            except TypeError as exc:
                raise InputError(name, str(exc)) from None
            params.append(
                UncertainParameter(
                    name=name,
                    distribution=dist,
                    layer=str(entry.get("layer", "assumption")),
                    description=str(entry.get("description", "")),
                    source=str(entry.get("source", "")),
                )
            )
        corr = []
        for c in data.get("correlations", []):
            require(
                isinstance(c, Mapping) and {"a", "b", "rho"} <= set(c),
                "correlations",
                "each entry needs a, b and rho",
            )
            corr.append(
                Correlation(
                    a=str(c["a"]), b=str(c["b"]), rho=float(c["rho"]), source=str(c.get("source", ""))
                )
            )
        return cls(
            parameters=tuple(params),
            correlations=tuple(corr),
            replica_pivot_params=float(data.get("replica_pivot_params", 2.9e8)),
        )


def load_spec(path: str | Path | None = None) -> UncertaintySpec:
    """The distributions from a TOML file, or the shipped default (``data/uncertainty.toml``)."""
    if path is None:
        return default_spec()
    with open(path, "rb") as fh:
        return UncertaintySpec.from_dict(tomllib.load(fh))


@cache
def default_spec() -> UncertaintySpec:
    """The shipped distributions (cached)."""
    text = resources.files("dispersal.data").joinpath("uncertainty.toml").read_text(encoding="utf-8")
    return UncertaintySpec.from_dict(tomllib.loads(text))


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

    def run(self, combo: IntArr, draw: IntArr, n: Arr, window: bool = True) -> dict[str, Arr]:
        """Kernel outputs plus ``valid``, ``meets``, ``metric`` and ``c_quality`` (eta_H rescaled)."""
        sp, d = self.space, self.draws
        x = sp.inputs(combo, n)
        if window:
            sp.with_window(x)
        P = x["params"]
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
                base=quality.QualityParams(),
                **{f: d[f"q_{f}"][draw] for f in quality.SAMPLED_FIELDS},
            )
        x["compression_quality"] = d["compression_quality"][draw]
        x["activation_quality"] = d["activation_quality"][draw]
        x["price_usd_per_chip"] = x["price_usd_per_chip"] * d["price_scale"][draw]
        x["rental_usd_per_chip_hour"] = x["rental_usd_per_chip_hour"] * d["price_scale"][draw]
        ov = {k: d[k][draw] for k in (*CHINCHILLA, "replica_beta_coeff", "replica_beta_exponent")}
        r = evaluate(x, self.p, ov, qp)
        self.evaluations += int(n.size)
        valid = sp.validity(r, combo, n)
        # eta_H = clip(1 - alpha0 f(P) log10 H, floor, 1) is linear in alpha0 before the floor.
        ratio = d["eta_h_ratio"][draw]
        raw = eta_h(P, r["inner_steps_effective"], self.p.replace(eta_h_floor=1e-300))
        e_new = np.clip(1.0 - ratio * (1.0 - raw), self.p.eta_h_floor, 1.0)
        e_old = np.clip(raw, self.p.eta_h_floor, 1.0)
        fac = np.where((ratio == 1.0) | (r["replicas"] <= 1), 1.0, e_new / e_old)
        r["c_quality"] = r["c_quality_flop"] * fac
        r["metric"] = (
            r["c_local_flop"] if self.metric is planner.Metric.C_LOCAL else r["c_quality_flop"]
        ) * fac
        r["valid"] = valid.astype(np.float64)
        r["meets"] = (valid & (r["metric"] >= self.target)).astype(np.float64)
        return r

    def meets(self, combo: IntArr, draw: IntArr, n: Arr) -> npt.NDArray[np.bool_]:
        """Valid and meeting the target, evaluated in chunks."""
        out = np.zeros(n.size, dtype=bool)
        for s in range(0, n.size, _CHUNK_ELEMENTS):
            e = slice(s, s + _CHUNK_ELEMENTS)
            out[e] = self.run(combo[e], draw[e], n[e])["meets"] > 0
        return out

    def smallest_nodes(self, combos: IntArr, draws: IntArr) -> Arr:
        """For each (draw, combo) of the outer product: the smallest N meeting the target, or NaN."""
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
        m = self.meets(np.repeat(cc[idx], GRID_POINTS), np.repeat(dd[idx], GRID_POINTS), grid.reshape(-1))
        m = m.reshape(idx.size, GRID_POINTS)
        has = m.any(axis=1)
        first = np.argmax(m, axis=1)
        rows = np.arange(idx.size)
        b_hi = grid[rows, first]
        b_lo = np.where(first > 0, grid[rows, np.maximum(first - 1, 0)] + 1.0, b_hi)
        b_lo = np.minimum(b_lo, b_hi)
        # Bisect the first cell that meets the target on its upper end (a row with no such cell has
        # b_lo == b_hi and is left alone).
        ci, di = cc[idx], dd[idx]

        def meets_at(sel: IntArr, n: Arr) -> npt.NDArray[np.bool_]:
            return self.meets(ci[sel], di[sel], n)

        n_first = first_true(b_lo, b_hi, meets_at)
        out[idx[has]] = n_first[has]
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


@dataclass(frozen=True, kw_only=True, slots=True)
class UncertaintyResult:
    """Monte Carlo ranges of the planner's answer."""

    target_flop: float
    regime: str
    mode: str
    metric: str
    samples: int
    seed: int
    feasible_fraction: float
    """Fraction of draws for which some candidate met the target."""
    percentiles: dict[str, tuple[float, float, float]]
    """P10, P50, P90 of cost_usd, nodes, c_quality_flop and days over the feasible draws (NaN if none)."""
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

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON: ``<figure>_p10/_p50/_p90`` for each figure, plus the run's settings."""
        d: dict[str, Any] = {
            "target_flop": self.target_flop,
            "regime": self.regime,
            "mode": self.mode,
            "metric": self.metric,
            "samples": self.samples,
            "seed": self.seed,
            "feasible_fraction": self.feasible_fraction,
        }
        for name, (p10, p50, p90) in self.percentiles.items():
            d[f"{name}_p10"], d[f"{name}_p50"], d[f"{name}_p90"] = p10, p50, p90
        for name, v in self.nominal.items():
            d[f"nominal_{name}"] = v
        d["nominal_hardware"] = self.nominal_label
        for name, v in self.nominal_search.items():
            d[f"search_nominal_{name}"] = v
        d["hardware_share"] = dict(self.hardware_share)
        d["candidates"] = self.candidates
        d["evaluations"] = self.evaluations
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class TornadoBar:
    """The cost with one parameter at its P10 and at its P90, all others nominal."""

    name: str
    description: str
    low_value: float
    """The parameter's P10."""
    high_value: float
    """The parameter's P90."""
    low_label: str
    high_label: str
    cost_at_low_usd: float
    """Cost with the parameter at its P10 (inf when the target cannot be met)."""
    cost_at_high_usd: float
    cost_low_usd: float
    """The smaller of the two costs."""
    cost_high_usd: float
    swing_usd: float
    """cost_high_usd - cost_low_usd (inf when one end is infeasible)."""
    nominal_cost_usd: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (infinities become null in the CLI)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _figures(o: planner.PlanOption | None) -> dict[str, float]:
    if o is None:
        return {k: math.nan for k in _FIGURES}
    return {
        "cost_usd": o.cost_usd,
        "nodes": float(o.nodes),
        "c_quality_flop": o.c_quality_flop,
        "days": o.days,
    }


# ---------------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------------
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
    """Monte Carlo of the planner's answer over the uncertain inputs (method: module docstring).

    Args:
        target_flop: compute to reach (FLOP of `metric`).
        samples: number of draws (>= 1).
        seed: `numpy.random.default_rng` seed; the same seed gives exactly the same result.
        regime_name, constraints, mode, metric, search: as for `planner.plan` (constraints.mfu is
            replaced by the drawn MFU; `search` applies to the nominal plan only).
        progress: called as progress(draws_done, samples) as the draws are processed.
        spec: the distributions (default ``data/uncertainty.toml``).

    Returns:
        P10/P50/P90 of cost (USD), nodes, C_quality (FLOP) and run time (days) over the feasible
        draws, the feasible fraction, and the nominal plan's figures.
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
    base = DEFAULT_PARAMS
    draws_raw = spec.sample(samples, seed)
    # Draw 0 of the arrays is the nominal point (used for the shortlist); draws 1.. are the samples.
    merged = {k: np.concatenate([[float(nom_vals.get(k, np.nan))], v]) for k, v in draws_raw.items()}
    arrays = _draw_arrays(merged, spec, base, samples + 1)
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
        # Issue 12: sample the quality mapping and the fit's parameters (not for a degenerate spec,
        # whose draws all equal the nominal plan). Draw 0 is the nominal fit
        # (compute mapping, fitted values, the fitted tail).
        rng_q = np.random.default_rng([seed, 12])
        qs = quality.sample_quality_params(rng_q, samples)
        nominal_q = quality.QualityParams()
        for f in quality.SAMPLED_FIELDS:
            arrays[f"q_{f}"] = np.concatenate([[float(getattr(nominal_q, f))], getattr(qs, f)])
        arrays["quality_mapping"] = np.concatenate(
            [[0.0], (rng_q.random(samples) < QUALITY_LOSS_MAPPING_SHARE).astype(np.float64)]
        )

    def make(scale: float) -> _Search:
        pg = (
            base
            if scale == 1.0
            else base.replace(
                straggler_coeff_relay=base.straggler_coeff_relay * scale,
                straggler_coeff_sync=base.straggler_coeff_sync * scale,
            )
        )
        space = make_space(m, c, regime_name, pg)
        return _Search(space=space, draws=arrays, p=pg, metric=met, target=float(target_flop), c=c)

    nom_scale = float(arrays["straggler_scale"][0])
    s0 = make(nom_scale)
    all_combos = np.arange(len(s0.space.combo_hw), dtype=np.int64)
    n_nom = s0.smallest_nodes(all_combos, np.asarray([0], dtype=np.int64))[0]
    evaluations = 0
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
    shortlist = np.sort(keep[:SHORTLIST_MAX]).astype(np.int64)

    out = {k: np.full(samples, np.nan) for k in _FIGURES}
    choice = np.full(samples, -1, dtype=np.int64)
    done = 0
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
                n = srch.smallest_nodes(shortlist, part + 1)
                _pick(srch, shortlist, part, n, out, choice)
                done += part.size
                if progress is not None:
                    progress(done, samples)
            if srch is not s0:
                evaluations += srch.evaluations
    evaluations += s0.evaluations
    feasible = np.isfinite(out["cost_usd"])
    pct: dict[str, tuple[float, float, float]] = {}
    for k in _FIGURES:
        v = out[k][feasible]
        if v.size:
            q = np.percentile(v, [10, 50, 90])
            pct[k] = (float(q[0]), float(q[1]), float(q[2]))
        else:
            pct[k] = (math.nan, math.nan, math.nan)
    if "quality_mapping" in arrays:
        # How much of the spread is the quality-mapping choice: the cost percentiles of each half.
        qm = arrays["quality_mapping"][1:]
        for code, name in ((0.0, "compute"), (1.0, "loss")):
            if not np.any(qm == code):
                continue  # no draw used this mapping (QUALITY_LOSS_MAPPING_SHARE = 0): no row
            v = out["cost_usd"][feasible & (qm == code)]
            q3 = np.percentile(v, [10, 50, 90]) if v.size else np.full(3, math.nan)
            pct[f"cost_usd_{name}_mapping"] = (float(q3[0]), float(q3[1]), float(q3[2]))
    labels = [f"{v.chips}x {v.name} {v.precision.value}" for v in s0.space.variants]
    share: dict[str, float] = {}
    for combo in choice[choice >= 0]:
        lab = labels[int(s0.space.combo_hw[combo])]
        share[lab] = share.get(lab, 0.0) + 1.0 / samples
    share = dict(sorted(share.items(), key=lambda kv: -kv[1]))
    draws_out: dict[str, Arr] = dict(out)
    draws_out.update({f"param_{k}": v for k, v in draws_raw.items()})
    return UncertaintyResult(
        target_flop=float(target_flop),
        regime=regime_name,
        mode=m.value,
        metric=met.value,
        samples=samples,
        seed=seed,
        feasible_fraction=float(feasible.mean()),
        percentiles=pct,
        nominal=_figures(nom_best),
        nominal_label=nom_best.label if nom_best is not None else "",
        nominal_search={k: float(v[0]) for k, v in search_nom.items()},
        hardware_share=share,
        candidates=int(shortlist.size),
        evaluations=int(evaluations + nom_plan.evaluations),
        draws=draws_out,
    )


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


def tornado(
    target_flop: float,
    *,
    regime_name: str = "treaty",
    constraints: planner.Constraints | None = None,
    mode: Mode | str = "default",
    metric: planner.Metric | str | None = None,
    search: planner.Search | str | None = None,
    spec: UncertaintySpec | None = None,
    parameters: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> list[TornadoBar]:
    """One-at-a-time sensitivity of the cost: each parameter at its P10 and P90, the rest nominal.

    Each end is a full `plan()` (the price multiplier re-ranks the nominal plan's options instead).
    Returns the bars sorted by swing, largest first; an end that cannot meet the target costs inf.
    """
    spec = spec or default_spec()
    m = Mode(mode)
    c0 = constraints or planner.Constraints()
    names = list(parameters) if parameters is not None else [p.name for p in spec.parameters]
    for n in names:
        require(
            spec.get(n) is not None, n, f"has no distribution in the spec (have: {', '.join(spec.nominal())})"
        )
    nom_vals = spec.nominal()
    kw: dict[str, Any] = {
        "regime_name": regime_name,
        "constraints": c0,
        "mode": m,
        "metric": metric,
        "search": search,
        "spec": spec,
    }
    nom_plan, nom_best = nominal_plan(target_flop, **kw)
    nominal_cost = nom_best.cost_usd if nom_best is not None else math.inf
    total = 2 * len(names)
    if progress is not None:
        progress(0, total)
    bars = []
    for i, name in enumerate(names):
        par = spec.get(name)
        assert par is not None
        d = par.distribution
        ends = (d.quantile(0.1), d.quantile(0.9))
        costs = []
        for v in ends:
            if v == d.nominal:
                costs.append(nominal_cost)
            elif name == "price_scale":
                o = _rescaled(nom_plan, m, v)
                costs.append(o.cost_usd if o is not None else math.inf)
            else:
                _, o = nominal_plan(target_flop, **kw, values={**nom_vals, name: v})
                costs.append(o.cost_usd if o is not None else math.inf)
        if progress is not None:
            progress(2 * i + 2, total)
        lo, hi = min(costs), max(costs)
        bars.append(
            TornadoBar(
                name=name,
                description=par.description,
                low_value=ends[0],
                high_value=ends[1],
                low_label=d.label_of(ends[0]),
                high_label=d.label_of(ends[1]),
                cost_at_low_usd=costs[0],
                cost_at_high_usd=costs[1],
                cost_low_usd=lo,
                cost_high_usd=hi,
                swing_usd=hi - lo if math.isfinite(hi) else math.inf,
                nominal_cost_usd=nominal_cost,
            )
        )
    bars.sort(key=lambda b: (-b.swing_usd, b.name))
    return bars


__all__ = [
    "PARAMETERS",
    "Correlation",
    "Distribution",
    "TornadoBar",
    "UncertainParameter",
    "UncertaintyResult",
    "UncertaintySpec",
    "constraints_for",
    "default_spec",
    "load_spec",
    "model_params_for",
    "nominal_plan",
    "plan_samples",
    "tornado",
]
