"""The grounded quality model: DiLoCo's efficiency as a DP-equivalent compute fraction (issue 12).

g(M, H, P, fragments) is the compute a data-parallel (DP) run needs to reach the DiLoCo run's loss,
divided by the DiLoCo run's compute. It comes from a fit of the published DiLoCo-vs-DP loss ratios
(`dispersal/data/quality_points.toml`; fit: ``python -m dispersal.model.analyses.quality_fit``) mapped to
compute through the source's own DP loss-vs-compute law:

    ln r(M, H, P, F) = u(P) + b(P) S(M) h(H) + delta [F > 1]        r = L_DiLoCo / L_DP
      u(P) = u0 + u1 clip(ln(P / P0), ln(P_lo / P0), ln(P_hi / P0))  (DiLoCo M = 1 vs DP: outer momentum)
      b(P) = b0 (P / P0)^-kb                                         (replica-penalty amplitude)
      S(M) = (M^p - 1) / p                                           (0 at M = 1; Box-Cox in M)
      h(H) = 1 + q ln(max(H, H_lo) / 30)                             (1 at Charles et al.'s H = 30)
    g = min(g_max, r^(-1 / s)),  s = 0.0953 / 2

s is Charles et al. 2025 Table 7: L_DP(N) = 18.129 N^-0.0953 at D = 20 N, so C = 120 N^2 and
L_DP ~ C^-s. g > 1 where DiLoCo beats DP (M = 1-2 at larger sizes, Charles et al. Table 4).

The loss-space form (the relative penalty applied to the whole Chinchilla loss, then converted
through the Chinchilla fit) stays as the conservative bound: `QualityMapping.LOSS`.

Pure NumPy; every function broadcasts its array arguments and never loops in Python.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.errors import InputError
from dispersal.model.kernel import chinchilla

Arr = npt.NDArray[np.float64]

FIT_FILE = "quality_fit.toml"
POINTS_FILE = "quality_points.toml"


class QualityMapping(StrEnum):
    """How a DiLoCo loss penalty becomes an efficiency factor."""

    COMPUTE = "compute"
    """Default: g, the DP-equivalent compute fraction on the source's own DP loss-vs-compute curve."""
    LOSS = "loss"
    """Conservative bound: the loss ratio max(r, 1) multiplies the whole Chinchilla loss (irreducible
    part included) and is converted through the Chinchilla fit, as the pre-issue-12 model did."""


MAPPING_CODES: dict[QualityMapping, int] = {QualityMapping.COMPUTE: 0, QualityMapping.LOSS: 1}


def mapping_code(name: str, field: str = "quality_mapping") -> int:
    """'compute' -> 0, 'loss' -> 1; anything else is a one-line InputError naming `field`."""
    try:
        return MAPPING_CODES[QualityMapping(name)]
    except ValueError:
        allowed = ", ".join(m.value for m in QualityMapping)
        raise InputError(field, f"must be one of {allowed}, got {name!r}") from None


class QualityLike(Protocol):
    """Anything with the fitted fields (one `QualityParams`, or `QualitySamples` of Monte Carlo draws)."""

    @property
    def u0(self) -> npt.ArrayLike: ...
    @property
    def u1(self) -> npt.ArrayLike: ...
    @property
    def b0(self) -> npt.ArrayLike: ...
    @property
    def kb(self) -> npt.ArrayLike: ...
    @property
    def p(self) -> npt.ArrayLike: ...
    @property
    def q(self) -> npt.ArrayLike: ...
    @property
    def delta(self) -> npt.ArrayLike: ...


@dataclass(frozen=True, kw_only=True)
class QualityParams:
    """Parameters of g. The fitted fields (u0 ... delta) are the output of `quality_fit` on
    `quality_points.toml` (Charles et al. 2025 Table 4 + Streaming DiLoCo Tables 5-6) and equal
    `quality_fit.toml` (a test checks it); the rest are fixed inputs with their sources."""

    u0: float = -0.002449864601653769
    """ln r of DiLoCo M = 1 vs DP at P = pivot_params (dimensionless, ln of a loss ratio). Fitted."""
    u1: float = -0.0006295290485462253
    """Slope of that M = 1 offset in ln P (per e-fold of parameters); held at the fitted-range
    edges outside [fit_params_min, fit_params_max] (Charles et al. Table 5: the M = 1 gain stops
    growing at 4B-10B). Fitted."""
    b0: float = 0.005286741819732968
    """Amplitude of the replica penalty at P = pivot_params, H = 30 (ln r per unit S(M)). Fitted."""
    kb: float = 0.2483001289625586
    """Size exponent of that amplitude: b(P) = b0 (P / pivot)^-kb (dimensionless). Fitted."""
    p: float = 0.6549632428082265
    """Box-Cox exponent in M: S(M) = (M^p - 1) / p (p -> 0 is ln M, p = 1 is M - 1). Fitted."""
    q: float = 0.5114551119051169
    """H slope: h(H) = 1 + q ln(H / 30) for H >= inner_steps_floor (per e-fold of H). Fitted on
    Streaming DiLoCo Tables 5-6 (H = 30 and 100 only)."""
    delta: float = 2.5756834941004416e-05
    """ln r offset of streaming (fragments > 1, FP4 outer gradients: the two are confounded in the
    published tables). Fitted; consistent with zero (Streaming DiLoCo: 'drop-in replacement')."""
    pivot_params: float = 2.9e8
    """P0, parameters: geometric centre of Charles et al.'s 35M-2.4B sizes (sqrt(35e6 x 2.4e9))."""
    loss_compute_slope: float = 0.0953 / 2.0
    """s in L_DP ~ C^-s: Charles et al. 2025 Table 7, L = 18.129 N^-0.0953 at D = 20 N (C = 120 N^2)."""
    g_max: float = 1.1
    """Upper bound of g (issue 12: g in (0, 1.1]); the fit reaches 1.09 at 2.4B, M = 1."""
    fit_params_min: float = 3.5e7
    """Smallest fitted model, parameters (Charles et al. Table 4; Streaming DiLoCo Table 5)."""
    fit_params_max: float = 2.4e9
    """Largest fitted model, parameters (Charles et al. Table 4)."""
    fit_replicas_max: float = 8.0
    """Largest fitted M (Charles et al. Table 4), replicas: beyond it S(M) continues with
    `replica_tail_exponent`."""
    replica_tail_exponent: float | None = None
    """t for M > fit_replicas_max: S(M) = S(M_x) + M_x^p ((M / M_x)^t - 1) / t (same slope in ln M at
    M_x). None = p, i.e. the fitted curve continued unchanged; 0 = logarithmic tail (the shape of
    Charles et al.'s joint law L ~ M^0.0116, Table 10). No published data beyond M = 8 decide
    between them; the choice dominates g at M >> 8 (docs/quality.md)."""
    inner_steps_floor: float = 30.0
    """H below this is held at H = 30, steps: no tabulated data below 30 (Charles et al. Figure 9
    shows H = 5-30 comparable and H = 1 worst, plotted only)."""

    def replace(self, **changes: Any) -> QualityParams:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


FITTED_FIELDS = ("u0", "u1", "b0", "kb", "p", "q", "delta")


@dataclass(frozen=True, kw_only=True)
class QualitySamples:
    """n Monte Carlo draws of the fitted fields (arrays of shape (n,)); fixed fields from `base`.

    Pass it wherever a `QualityParams` is taken: the arrays broadcast against the inputs' shape
    (give inputs of shape (n,) or (n, 1, ...) as needed)."""

    u0: Arr
    u1: Arr
    b0: Arr
    kb: Arr
    p: Arr
    q: Arr
    delta: Arr
    base: QualityParams
    replica_tail_exponent: Arr | None = None
    """Per-draw tail exponent t (NaN = p, the fitted curve continued); None = base's choice."""

    def at(self, i: int) -> QualityParams:
        """Draw i as a plain `QualityParams`."""
        out = self.base.replace(**{f: float(getattr(self, f)[i]) for f in FITTED_FIELDS})
        if self.replica_tail_exponent is not None:
            t = float(self.replica_tail_exponent[i])
            out = out.replace(replica_tail_exponent=None if math.isnan(t) else t)
        return out


def _arr(x: npt.ArrayLike) -> Arr:
    return np.asarray(x, dtype=np.float64)


def _check(name: str, x: Arr, lo: float) -> None:
    bad = ~(np.isfinite(x) & (x >= lo))
    if np.any(bad):
        raise InputError(name, f"must be finite and >= {lo:g}, got {float(x[bad].flat[0]):g}")


def _fixed(q: QualityLike) -> QualityParams:
    """The fixed (non-sampled) fields: the params themselves, or the samples' base."""
    if isinstance(q, QualitySamples):
        return q.base
    if isinstance(q, QualityParams):
        return q
    raise TypeError(f"expected QualityParams or QualitySamples, got {type(q).__name__}")


def replica_term(replicas: npt.ArrayLike, p: npt.ArrayLike, m_x: float, t: npt.ArrayLike) -> Arr:
    """S(M) = (M^p - 1) / p up to M_x, then S(M_x) + M_x^p ((M / M_x)^t - 1) / t (t = 0: ln(M / M_x)).

    Continuous with a continuous slope in ln M; increasing in M for p > 0; t = p is one curve."""
    m, pp, tt = _arr(replicas), _arr(p), _arr(t)
    inner = (np.minimum(m, m_x) ** pp - 1.0) / pp
    lr = np.log(np.maximum(m, m_x) / m_x)
    small = np.abs(tt) < 1e-12
    tail = np.where(small, lr, np.expm1(tt * lr) / np.where(small, 1.0, tt))
    return np.asarray(inner + m_x**pp * tail, dtype=np.float64)


def log_loss_ratio(
    replicas: npt.ArrayLike,
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    fragments: npt.ArrayLike = 1.0,
    q: QualityLike | None = None,
) -> Arr:
    """ln r = ln(L_DiLoCo / L_DP) predicted for M replicas, H inner steps, P parameters and F
    streaming fragments (1 = whole-model sync). M >= 1, H >= 1, P > 0, F >= 1; M = 1 is DiLoCo
    with one replica (Lookahead-like), not plain DP."""
    qq = QualityParams() if q is None else q
    fx = _fixed(qq)
    m, h, n, f = _arr(replicas), _arr(inner_steps), _arr(params), _arr(fragments)
    _check("replicas", m, 1.0)
    _check("inner_steps", h, 1.0)
    _check("fragments", f, 1.0)
    bad = ~(np.isfinite(n) & (n > 0))
    if np.any(bad):
        raise InputError("params", f"must be finite and > 0 parameters, got {float(n[bad].flat[0]):g}")
    x = np.log(n / fx.pivot_params)
    xc = np.clip(x, np.log(fx.fit_params_min / fx.pivot_params), np.log(fx.fit_params_max / fx.pivot_params))
    p = _arr(qq.p)
    if isinstance(qq, QualitySamples) and qq.replica_tail_exponent is not None:
        t: npt.ArrayLike = np.where(np.isnan(qq.replica_tail_exponent), p, qq.replica_tail_exponent)
    else:
        t = p if fx.replica_tail_exponent is None else fx.replica_tail_exponent
    s_m = replica_term(m, p, fx.fit_replicas_max, t)
    h_fac = 1.0 + _arr(qq.q) * np.log(np.maximum(h, fx.inner_steps_floor) / 30.0)
    out = (
        _arr(qq.u0)
        + _arr(qq.u1) * xc
        + _arr(qq.b0) * np.exp(-_arr(qq.kb) * x) * s_m * h_fac
        + _arr(qq.delta) * (f > 1.0)
    )
    return np.asarray(out, dtype=np.float64)


def loss_ratio(
    replicas: npt.ArrayLike,
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    fragments: npt.ArrayLike = 1.0,
    q: QualityLike | None = None,
) -> Arr:
    """r = L_DiLoCo / L_DP (the quantity the published tables print); see `log_loss_ratio`."""
    return np.asarray(np.exp(log_loss_ratio(replicas, inner_steps, params, fragments, q)), dtype=np.float64)


def compute_fraction(
    replicas: npt.ArrayLike,
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    fragments: npt.ArrayLike = 1.0,
    q: QualityLike | None = None,
) -> Arr:
    """g in (0, g_max]: DP-equivalent compute / DiLoCo compute, g = min(g_max, r^(-1/s)).

    Non-increasing in M (M >= 1) and in H (H >= inner_steps_floor) for b0 > 0, q >= 0, p > 0."""
    qq = QualityParams() if q is None else q
    s = _fixed(qq).loss_compute_slope
    g = np.exp(-log_loss_ratio(replicas, inner_steps, params, fragments, qq) / s)
    # floor at the smallest normal float so g stays > 0 where exp underflows (ln r > ~34)
    return np.asarray(np.clip(g, np.finfo(np.float64).tiny, _fixed(qq).g_max), dtype=np.float64)


def loss_space_fraction(
    loss_nats: npt.ArrayLike,
    ratio: npt.ArrayLike,
    e: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    alpha: npt.ArrayLike,
    beta: npt.ArrayLike,
    tokens_per_param: npt.ArrayLike,
) -> Arr:
    """The conservative loss-space form: C'(L max(r, 1)) / C'(L) through the Chinchilla fit
    (C' = compute-optimal compute at a loss), with L the run's Chinchilla loss. In [0, 1]; 1 where
    r <= 1 (the bound never credits DiLoCo with beating DP)."""
    lo = _arr(loss_nats)
    pen = np.maximum(_arr(ratio), 1.0)
    c0 = chinchilla.optimal_compute_for_loss(lo, e, a, b, alpha, beta, tokens_per_param)
    c1 = chinchilla.optimal_compute_for_loss(lo * pen, e, a, b, alpha, beta, tokens_per_param)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(np.isfinite(c0) & (c0 > 0), c1 / np.where(np.isfinite(c0) & (c0 > 0), c0, 1.0), 1.0)
    return np.asarray(np.clip(frac, 0.0, 1.0), dtype=np.float64)


def efficiency(
    mapping: npt.ArrayLike,
    replicas: npt.ArrayLike,
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    fragments: npt.ArrayLike,
    loss_nats: npt.ArrayLike,
    e: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    alpha: npt.ArrayLike,
    beta: npt.ArrayLike,
    tokens_per_param: npt.ArrayLike,
    q: QualityLike | None = None,
) -> Arr:
    """The quality efficiency factor, selected per element by `mapping` (MAPPING_CODES: 0 compute,
    1 loss; an array lets the Monte Carlo sample the mapping). Replaces eta_H x eta_rep (g carries
    the H effect). `loss_nats` is the run's Chinchilla loss L(N, D), used only by the loss mapping."""
    code = np.asarray(mapping)
    if code.size and not np.all(np.isin(code, list(MAPPING_CODES.values()))):
        raise InputError("quality_mapping", "codes must be 0 (compute) or 1 (loss)")
    g = compute_fraction(replicas, inner_steps, params, fragments, q)
    is_loss = code == MAPPING_CODES[QualityMapping.LOSS]
    if not np.any(is_loss):  # the Chinchilla inversions are the costly part; skip them when unused
        return np.asarray(np.broadcast_to(g, np.broadcast_shapes(g.shape, code.shape)), dtype=np.float64)
    r = loss_ratio(replicas, inner_steps, params, fragments, q)
    ls = loss_space_fraction(loss_nats, r, e, a, b, alpha, beta, tokens_per_param)
    return np.asarray(np.where(is_loss, ls, g), dtype=np.float64)


@dataclass(frozen=True)
class Extrapolation:
    """Per-element flags (True = outside the range the fit saw) and the ranges themselves."""

    replicas: npt.NDArray[np.bool_]
    inner_steps: npt.NDArray[np.bool_]
    params: npt.NDArray[np.bool_]
    fragments: npt.NDArray[np.bool_]
    compression: npt.NDArray[np.bool_]
    ranges: dict[str, tuple[float, float]]

    @property
    def any(self) -> npt.NDArray[np.bool_]:
        """True where any axis is outside its fitted range."""
        return self.replicas | self.inner_steps | self.params | self.fragments | self.compression

    def messages(self, index: int | tuple[int, ...] = ()) -> list[str]:
        """One line per flagged axis for element `index` (all of a 0-d result with the default)."""
        out = []
        for name in ("replicas", "inner_steps", "params", "fragments", "compression"):
            flag = np.asarray(getattr(self, name))
            if bool(flag[index] if flag.ndim else flag):
                lo, hi = self.ranges[name]
                out.append(f"{name} outside the published quality fit's range [{lo:g}, {hi:g}]")
        return out


FIT_RANGES: dict[str, tuple[float, float]] = {
    "replicas": (1.0, 8.0),  # Charles et al. 2025 Table 4 (M = 1-8); Streaming DiLoCo Table 6 (M = 2, 4)
    "inner_steps": (30.0, 100.0),  # Table 4 (H = 30); Streaming DiLoCo Tables 5-6 (H = 30, 100)
    "params": (3.5e7, 2.4e9),  # Table 4 (35M-2.4B); held-out checks at 4B and 10B (Table 5)
    "fragments": (1.0, 8.0),  # Streaming DiLoCo: 3-layer fragments, 6-24 layers (Table 2) -> 2-8
    "compression": (1.0, 4.0),  # FP4 outer gradients vs a 16-bit payload (Streaming DiLoCo Tables 5-6)
}
"""Fitted ranges per axis, inclusive (the flags' reference). No compression beyond FP4 was fitted."""


def extrapolation_flags(
    replicas: npt.ArrayLike,
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    fragments: npt.ArrayLike = 1.0,
    compression: npt.ArrayLike = 1.0,
) -> Extrapolation:
    """Which elements lie outside the fitted ranges (`FIT_RANGES`), per axis, broadcast together.
    `compression` is the outer-gradient payload reduction relative to a dense 16-bit payload."""
    arrs = np.broadcast_arrays(
        _arr(replicas), _arr(inner_steps), _arr(params), _arr(fragments), _arr(compression)
    )
    names = ("replicas", "inner_steps", "params", "fragments", "compression")
    flags = {}
    for name, x in zip(names, arrs, strict=True):
        lo, hi = FIT_RANGES[name]
        # relative tolerance: a nominal "2.4B" given as 2.4e9 * (1 + 1e-12) is inside
        flags[name] = np.asarray((x < lo * (1 - 1e-9)) | (x > hi * (1 + 1e-9)), dtype=np.bool_)
    return Extrapolation(ranges=dict(FIT_RANGES), **flags)


@cache
def load_fit() -> dict[str, Any]:
    """The fit's data file (`dispersal/data/quality_fit.toml`): values, covariance, residuals."""
    text = resources.files("dispersal.data").joinpath(FIT_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)


def fitted_covariance() -> tuple[tuple[str, ...], Arr, Arr]:
    """(names, mean, covariance) of the fitted fields from `quality_fit.toml`."""
    fit = load_fit()
    names = tuple(str(n) for n in fit["names"])
    mean = _arr(fit["values"])
    cov = _arr(fit["covariance"])
    return names, mean, cov


def sample_quality_params(
    rng: np.random.Generator,
    n: int,
    base: QualityParams | None = None,
    log_tail_fraction: float | None = None,
) -> QualitySamples:
    """n draws of the fitted fields from the fit's Gaussian approximation N(theta_hat, Sigma)
    (Sigma = s^2 (J^T W J)^-1, s^2 the reduced chi-square; `quality_fit.toml`). Draws are
    truncated to the model's valid region (b0 > 0, p >= 0.05, q >= 0) so g stays monotone.

    log_tail_fraction: if given, that share of the draws (Bernoulli) uses the logarithmic
    replica tail (t = 0) beyond M = 8 and the rest the fitted curve (t = p), so the spread shows the
    tail choice; None keeps `base.replica_tail_exponent` for every draw."""
    if n < 1:
        raise InputError("samples", f"must be >= 1, got {n}")
    if log_tail_fraction is not None and not 0.0 <= log_tail_fraction <= 1.0:
        raise InputError("log_tail_fraction", f"must be in [0, 1], got {log_tail_fraction:g}")
    names, mean, cov = fitted_covariance()
    draws = rng.multivariate_normal(mean, cov, size=n, method="cholesky")
    cols = {name: draws[:, i] for i, name in enumerate(names)}
    cols["b0"] = np.maximum(cols["b0"], 1e-6)
    cols["p"] = np.maximum(cols["p"], 0.05)
    cols["q"] = np.maximum(cols["q"], 0.0)
    tail = None
    if log_tail_fraction is not None:
        tail = np.where(rng.random(n) < log_tail_fraction, 0.0, np.nan)
    return QualitySamples(
        base=base or QualityParams(),
        replica_tail_exponent=tail,
        **{f: np.asarray(cols[f], dtype=np.float64) for f in FITTED_FIELDS},
    )
