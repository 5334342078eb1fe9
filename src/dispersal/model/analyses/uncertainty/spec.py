"""The uncertain inputs: distributions with their sources, correlations and the spec file
(``dispersal/data/uncertainty.toml``). Method: the package docstring."""

from __future__ import annotations

import dataclasses
import math
import statistics
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal._io import read_input_toml
from dispersal.model.inputs.errors import InputError, require

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
    return UncertaintySpec.from_dict(read_input_toml(path, "uncertainty"))


@cache
def default_spec() -> UncertaintySpec:
    """The shipped distributions (cached)."""
    text = resources.files("dispersal.data").joinpath("uncertainty.toml").read_text(encoding="utf-8")
    return UncertaintySpec.from_dict(tomllib.loads(text))
