"""The grounded quality model: DiLoCo's efficiency as a DP-equivalent compute fraction (issue 12).

g(M, H, P, fragments) is the compute a data-parallel (DP) run needs to reach the DiLoCo run's loss,
divided by the DiLoCo run's compute. It comes from a fit of the published DiLoCo-vs-DP loss ratios
(`dispersal/data/quality_points.toml`; fit: ``python -m dispersal.model.analyses.quality_fit``)
mapped to compute through the source's own DP loss-vs-compute law:

    ln r(M, H, P, F) = u(P) + b(P) S(M) h(H) + delta [F > 1]        r = L_DiLoCo / L_DP, M <= 8
      u(P) = u0 + u1 clip(ln(P / P0), ln(P_lo / P0), ln(P_hi / P0))  (DiLoCo M = 1 vs DP: outer momentum)
      b(P) = b0 (P / P0)^-kb                                         (replica-penalty amplitude)
      S(M) = (M^p - 1) / p                                           (0 at M = 1; Box-Cox in M)
      h(H) = 1 + q ln(max(H, H_lo) / 30)                             (1 at Charles et al.'s H = 30)
    g = min(g_max, r^(-1 / s)),  s = 0.0953 / 2
    g(M) = g(8) (8 + K) / (M + K)  for M > 8: the critical-batch tail (issue 21, `critical_replicas`)

The inner optimizer (AdamW / Muon, MuLoCo) scales b and adds an M = 1 offset; the merge rule and the
outer learning rate's retuning enter beyond M = 8 (`QualityParams`).

s is Charles et al. 2025 Table 7: L_DP(N) = 18.129 N^-0.0953 at D = 20 N, so C = 120 N^2 and
L_DP ~ C^-s. g > 1 where DiLoCo beats DP (M = 1-2 at larger sizes, Charles et al. Table 4).

The loss-space form (the relative penalty applied to the whole Chinchilla loss, then converted
through the Chinchilla fit) stays as the conservative bound: `QualityMapping.LOSS`.

Pure NumPy; every function broadcasts its array arguments and never loops in Python.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.errors import InputError
from dispersal.model.kernel import chinchilla

Arr = npt.NDArray[np.float64]

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
    @property
    def tail_scale(self) -> npt.ArrayLike: ...
    @property
    def tail_size_exponent(self) -> npt.ArrayLike: ...
    @property
    def muon_offset(self) -> npt.ArrayLike: ...
    @property
    def muon_penalty_ratio(self) -> npt.ArrayLike: ...
    @property
    def tail_tokens_exponent(self) -> npt.ArrayLike: ...
    @property
    def tail_batch_exponent(self) -> npt.ArrayLike: ...


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
    """M_x, replicas: the largest M of Charles et al. Table 4. Up to M_x the fitted Box-Cox S(M)
    holds; beyond it the critical-batch tail (`tail_scale`)."""
    tail_scale: float = 0.058108968668625194
    """lambda, dimensionless: the critical replica count K = lambda M_x / e, e = a M_x^p / s the fitted
    curve's elasticity |d ln g / d ln M| at M_x (a = b(P) rho h(H)). Beyond M_x, g(M) = g(M_x)
    (M_x + K) / (M + K): the averaged pseudo-gradient is a batch M times one replica's, and past the
    critical batch (McCandlish et al. 2018, arXiv 1812.06162, sec. 2.2: E = E_min (1 + B / B_noise))
    extra replicas add examples but little progress, so M g(M) (useful compute in site equivalents)
    rises to g(M_x) (M_x + K) and saturates instead of collapsing. Fitted on MuLoCo's K = 16 rows
    (quality_points.toml, [[large_m]])."""
    tail_size_exponent: float = 0.3474281389055408
    """kappa, dimensionless: K carries an extra (P / P0)^kappa beyond the 1 / a(P) it inherits from
    the fitted amplitude (the critical batch in replicas may grow faster or slower with size than the
    M <= 8 penalty shrinks). Fitted on MuLoCo's 150M-1.76B rows; 3.1B and 15B held back."""
    muon_offset: float = 0.005858438935764515
    """ln r at M = 1 of a Muon inner optimizer vs Muon DP, minus the same for AdamW (dimensionless):
    MuLoCo (Therien et al. 2025, arXiv 2505.23725v2, scaling-study table) K = 1 rows. Fitted."""
    muon_penalty_ratio: float = 0.24410586461075331
    """rho, dimensionless: the replica-penalty amplitude of Muon inner steps over AdamW's (MuLoCo K = 16
    vs K = 1, each against its own optimizer). Fitted; < 1 = Muon's pseudo-gradients average better."""
    tail_tokens_exponent: float = 0.47
    """a_D, dimensionless: the critical replica count grows as (D / D_ref)^a_D with the tokens D the run
    trains (issues 31-32, docs/quality.md). Default: the data-parallel critical batch grows ~ D^0.47 with
    data at fixed model size (Zhang et al. 2024, arXiv 2410.21676, sec. 4: 'CBS scales primarily with
    data size'; Bergsma et al. 2025, arXiv 2505.13738, 'Power Lines', B_crit ~ D^0.46). Range [0, 0.5]
    (`quality_tail.toml`): 0 is Merrill et al. 2025 (arXiv 2505.23971: the critical batch plateaus
    after early training) and Charles et al. 2025 sec. 5.2 (DiLoCo's penalty 'essentially unchanged' up
    to 16x overtraining at M <= 4). Not fitted: no published DiLoCo point varies tokens beyond M_x."""
    tail_batch_exponent: float = 1.0
    """a_b, dimensionless: K scales as (b / b_ref)^-a_b with the per-replica batch b (tokens per inner
    step of one replica). Default 1: the averaged pseudo-gradient is a batch M b, so K = B_crit / b
    (McCandlish et al. 2018, arXiv 1812.06162, sec. 2.2). Range [0.5, 1] (`quality_tail.toml`; 0.5 is
    an assumption: the inner steps' own progress makes DiLoCo less batch-sensitive than DP, Charles et
    al. 2025 sec. 5 on batch size)."""
    tail_reference_tokens_per_param: float = 20.0
    """D_ref / P, tokens per parameter of the runs the tail was fitted on: Charles et al. 2025 and MuLoCo
    train at the Chinchilla budget D = 20 N (Charles et al. 2025 sec. 3 / Table 7's D = 20 N)."""
    tail_reference_batch_tokens: float = 131072.0
    """b_ref, tokens per inner step of one replica in the fitted sources. Assumption: the sources tune
    global batches of order 2^19-2^21 tokens split over M = 2-16 replicas (Charles et al. 2025 sec. 3;
    MuLoCo sec. 4), i.e. ~2^17 per replica; it equals the project's default local batch."""
    merge_rule: str = "mean"
    """How the outer step merges the M pseudo-gradients: 'mean' (DiLoCo) or 'norm_preserving'
    (Decoupled DiLoCo, arXiv 2604.21428: average direction, keep the mean norm)."""
    outer_lr_retuned: bool = True
    """True: the outer learning rate is retuned for each M (Charles et al.'s protocol, which the fit
    reflects). False: held at its M_x value; with the 'mean' merge the step of nearly orthogonal
    updates then shrinks as (M_x / M)^omega (`orthogonal_norm_exponent`)."""
    orthogonal_norm_exponent: float = 0.5
    """omega: the norm of a plain mean of M nearly orthogonal updates of equal norm falls as M^-1/2
    (Decoupled DiLoCo, arXiv 2604.21428, sec. on merging; geometry, not fitted). Applied as a loss of
    progress s omega ln(M / M_x) in ln r beyond M_x only for merge 'mean' without retuning
    (assumption: progress per outer step proportional to its length)."""
    inner_steps_floor: float = 30.0
    """H below this is held at H = 30, steps: no tabulated data below 30 (Charles et al. Figure 9
    shows H = 5-30 comparable and H = 1 worst, plotted only)."""

    def replace(self, **changes: Any) -> QualityParams:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


FITTED_FIELDS = ("u0", "u1", "b0", "kb", "p", "q", "delta")
"""Stage 1 of the fit (M <= 8: Charles et al. Table 4, Streaming DiLoCo Tables 5-6)."""
TAIL_FIELDS = ("tail_scale", "tail_size_exponent", "muon_offset", "muon_penalty_ratio")
"""Stage 2 (M = 16 and the inner optimizer: MuLoCo), fitted with stage 1 held at its values."""
RANGE_FIELDS = ("tail_tokens_exponent", "tail_batch_exponent")
TAIL_EXPONENT_FLOOR = 0.0
"""Lowest tail exponent the Monte Carlo draws, dimensionless: 0 (the critical batch neither shrinks with
tokens nor grows with the per-replica batch; Merrill et al. 2025, arXiv 2505.23971, see a plateau, never
a fall). Applied to the testbed's measured interval (issue 32), whose low end for the tokens exponent is
-0.35 at 2 seeds."""
"""Not fitted: sourced ranges (`quality_tail.toml`) that the Monte Carlo draws uniformly."""
SAMPLED_FIELDS = FITTED_FIELDS + TAIL_FIELDS + RANGE_FIELDS
"""Every field the Monte Carlo draws (`QualitySamples` carries each as an array)."""


class InnerOptimizer(StrEnum):
    """The inner optimizer of every replica (g is relative to DP with the same optimizer)."""

    ADAMW = "adamw"
    MUON = "muon"


INNER_OPTIMIZER_CODES: dict[InnerOptimizer, int] = {InnerOptimizer.ADAMW: 0, InnerOptimizer.MUON: 1}


def inner_optimizer_code(name: str, field: str = "inner_optimizer") -> int:
    """'adamw' -> 0, 'muon' -> 1; anything else is a one-line InputError naming `field`."""
    try:
        return INNER_OPTIMIZER_CODES[InnerOptimizer(name)]
    except ValueError:
        allowed = ", ".join(o.value for o in InnerOptimizer)
        raise InputError(field, f"must be one of {allowed}, got {name!r}") from None


MERGE_RULES = ("mean", "norm_preserving")


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
    tail_scale: Arr
    tail_size_exponent: Arr
    muon_offset: Arr
    muon_penalty_ratio: Arr
    tail_tokens_exponent: Arr
    tail_batch_exponent: Arr
    base: QualityParams

    def at(self, i: int) -> QualityParams:
        """Draw i as a plain `QualityParams`."""
        return self.base.replace(**{f: float(getattr(self, f)[i]) for f in SAMPLED_FIELDS})


def _arr(x: npt.ArrayLike) -> Arr:
    return np.asarray(x, dtype=np.float64)


#: The smallest positive normal float64 (`np.finfo(np.float64).tiny`, read once: the kernel's quality
#: stage runs thousands of times per search).
TINY_FLOAT = float(np.finfo(np.float64).tiny)


def _clip(x: npt.ArrayLike, lo: npt.ArrayLike, hi: npt.ArrayLike) -> Arr:
    """min(max(x, lo), hi): `np.clip`'s values (NaN kept) without its Python-level wrapper, which
    costs more than the arithmetic on the kernel's arrays of a few thousand configurations."""
    return np.asarray(np.minimum(np.maximum(x, lo), hi), dtype=np.float64)


def code_mask(codes: npt.ArrayLike, allowed: Iterable[int]) -> npt.NDArray[np.bool_]:
    """Per element, whether `codes` is one of `allowed` (`np.isin`'s answer for a handful of allowed
    codes, by equality, at a fraction of its cost on small arrays)."""
    c = np.asarray(codes)
    ok = np.zeros(c.shape, dtype=bool)
    for v in allowed:
        ok |= c == v
    return ok


def codes_in(codes: npt.ArrayLike, allowed: Iterable[int]) -> bool:
    """Whether every element of `codes` is one of `allowed` (`code_mask`)."""
    return bool(code_mask(codes, allowed).all())


def _all_finite_at_least(x: Arr, lo: float, *, strict: bool = False) -> bool:
    """Every element finite and >= lo (> lo where `strict`): two reductions, no temporaries (a NaN
    makes the minimum NaN, which fails the comparison)."""
    if x.size == 0:
        return True
    least = x.min()
    return bool((least > lo if strict else least >= lo) and x.max() < np.inf)


def _check(name: str, x: Arr, lo: float) -> None:
    if _all_finite_at_least(x, lo):
        return
    bad = ~(np.isfinite(x) & (x >= lo))
    raise InputError(name, f"must be finite and >= {lo:g}, got {float(x[bad].flat[0]):g}")


def _fixed(q: QualityLike) -> QualityParams:
    """The fixed (non-sampled) fields: the params themselves, or the samples' base."""
    if isinstance(q, QualitySamples):
        return q.base
    if isinstance(q, QualityParams):
        return q
    raise TypeError(f"expected QualityParams or QualitySamples, got {type(q).__name__}")


def _check_params(fx: QualityParams) -> None:
    if fx.merge_rule not in MERGE_RULES:
        raise InputError("merge_rule", f"must be one of {', '.join(MERGE_RULES)}, got {fx.merge_rule!r}")


def replica_term(replicas: npt.ArrayLike, p: npt.ArrayLike, m_x: float, t: npt.ArrayLike) -> Arr:
    """S(M) = (M^p - 1) / p up to M_x, then S(M_x) + M_x^p ((M / M_x)^t - 1) / t (t = 0: ln(M / M_x)).

    The Box-Cox replica term with a power continuation (0.2's tail; t = p is one curve). The quality
    model itself continues beyond M_x with the critical-batch tail (`critical_replicas`); this stays
    for the testbed calibration's shape fit (dispersal.calibration.shape), which uses t = p."""
    m, pp, tt = _arr(replicas), _arr(p), _arr(t)
    inner = (np.minimum(m, m_x) ** pp - 1.0) / pp
    lr = np.log(np.maximum(m, m_x) / m_x)
    small = np.abs(tt) < 1e-12
    tail = np.where(small, lr, np.expm1(tt * lr) / np.where(small, 1.0, tt))
    return np.asarray(inner + m_x**pp * tail, dtype=np.float64)


def penalty_amplitude(
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    inner_optimizer: npt.ArrayLike = 0,
    q: QualityLike | None = None,
) -> Arr:
    """a(P, H, opt) = b0 (P / P0)^-kb rho(opt) h(H): ln r per unit S(M) (dimensionless); rho = 1 for
    AdamW (code 0), `muon_penalty_ratio` for Muon (code 1); h(H) = 1 + q ln(max(H, 30) / 30)."""
    qq = QualityParams() if q is None else q
    fx = _fixed(qq)
    h, n, opt = _arr(inner_steps), _arr(params), np.asarray(inner_optimizer)
    x = np.log(n / fx.pivot_params)
    rho = np.where(opt == INNER_OPTIMIZER_CODES[InnerOptimizer.MUON], _arr(qq.muon_penalty_ratio), 1.0)
    h_fac = 1.0 + _arr(qq.q) * np.log(np.maximum(h, fx.inner_steps_floor) / 30.0)
    return np.asarray(_arr(qq.b0) * np.exp(-_arr(qq.kb) * x) * rho * h_fac, dtype=np.float64)


def critical_replicas(
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    inner_optimizer: npt.ArrayLike = 0,
    q: QualityLike | None = None,
    *,
    tokens: npt.ArrayLike | None = None,
    replica_batch_tokens: npt.ArrayLike | None = None,
    amplitude: npt.ArrayLike | None = None,
) -> Arr:
    """K, replicas: the critical replica count of the tail,

        K = K_0 (D / D_ref)^a_D (b / b_ref)^-a_b,   K_0 = lambda M_x / e (P / P0)^kappa,

    with e = a(P, H, opt) M_x^p / s the fitted curve's elasticity |d ln g / d ln M| at M_x, D the
    tokens trained, D_ref = `tail_reference_tokens_per_param` P, b the per-replica batch (tokens per
    inner step) and b_ref = `tail_reference_batch_tokens`; `tokens` / `replica_batch_tokens` None
    is the fitted sources' own D_ref / b_ref (factor 1).

    McCandlish et al. 2018 (arXiv 1812.06162, sec. 2.2): a run of fixed steps at batch B reaches the
    progress DP reaches with compute B_noise / (B + B_noise) of it; with the M replicas' averaged
    pseudo-gradient as a batch M b, K = B_crit / b (hence a_b = 1 by default) and beyond the junction
    g(M) = g(M_j) (M_j + K) / (M + K): the useful compute M g(M) rises with every replica and
    saturates at g(M_j) (M_j + K) site equivalents. The critical batch grows with the tokens trained
    (Zhang et al. 2024, arXiv 2410.21676: ~ D^0.47, hardly with P at fixed D); K_0 grows with P
    (~ P^(kb + kappa)) and falls with H and with the replica penalty."""
    qq = QualityParams() if q is None else q
    fx = _fixed(qq)
    # `amplitude`: a(P, H, opt) already computed by the caller (`log_loss_ratio`)
    amp = (
        penalty_amplitude(inner_steps, params, inner_optimizer, qq) if amplitude is None else _arr(amplitude)
    )
    mx = fx.fit_replicas_max
    k = _arr(qq.tail_scale) * fx.loss_compute_slope * mx ** (1.0 - _arr(qq.p)) / amp  # lambda M_x / e
    k = k * (_arr(params) / fx.pivot_params) ** _arr(qq.tail_size_exponent)
    if tokens is not None:
        d_ref = fx.tail_reference_tokens_per_param * _arr(params)
        k = k * (_arr(tokens) / d_ref) ** _arr(qq.tail_tokens_exponent)
    if replica_batch_tokens is not None:
        k = k * (_arr(replica_batch_tokens) / fx.tail_reference_batch_tokens) ** -_arr(qq.tail_batch_exponent)
    return np.asarray(k, dtype=np.float64)


def junction_replicas(amplitude: npt.ArrayLike, p: npt.ArrayLike, q: QualityLike | None = None) -> Arr:
    """M_j, replicas: M_j = clip((s / a)^(1 / p), 1, M_x), where the fitted Box-Cox curve's
    elasticity a M^p / s reaches 1 (a = `penalty_amplitude`); M_x if it never does below M_x.
    Past elasticity 1 the fitted form would make M g(M), the useful compute in site equivalents,
    fall with more replicas; a replica that adds tokens cannot remove useful ones (the critical-batch
    physics, McCandlish et al. 2018: useful compute saturates), so from M_j to M_x the elasticity is
    held at 1. At every fitted point M_j = M_x (the largest elasticity there is 0.74: 35M, M = 8,
    H = 30), so the fit is unchanged."""
    fx = _fixed(QualityParams() if q is None else q)
    a, pp = _arr(amplitude), _arr(p)
    ln_mj = np.log(fx.loss_compute_slope / a) / pp
    mx = fx.fit_replicas_max
    # M_x itself (not exp(ln M_x)) where the curve never reaches elasticity 1: the fit stays exact
    return np.asarray(np.where(ln_mj >= np.log(mx), mx, np.exp(np.maximum(ln_mj, 0.0))), dtype=np.float64)


def log_loss_ratio(
    replicas: npt.ArrayLike,
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    fragments: npt.ArrayLike = 1.0,
    q: QualityLike | None = None,
    inner_optimizer: npt.ArrayLike = 0,
    *,
    tokens: npt.ArrayLike | None = None,
    replica_batch_tokens: npt.ArrayLike | None = None,
) -> Arr:
    """ln r = ln(L_DiLoCo / L_DP) predicted for M replicas, H inner steps, P parameters, F streaming
    fragments (1 = whole-model sync), the inner optimizer (0 AdamW, 1 Muon; DP uses the same one),
    D tokens trained and b tokens per inner step of one replica (None: the fitted sources' own; both
    enter the tail only). M >= 1, H >= 1, P > 0, F >= 1; M = 1 is DiLoCo with one replica.

        ln r = u(P) + u_mu [Muon] + a(P, H, opt) S(min(M, M_j)) + s ln(clip(M, M_j, M_x) / M_j)
             + delta [F > 1]
             + s ln((max(M, M_x) + K) / (M_x + K))           critical-batch tail (`critical_replicas`)
             + s omega ln(max(M, M_x) / M_x) [mean merge, outer lr not retuned]

    i.e. d ln r / d ln M = min(a M^p, s) up to M_x: the curve's elasticity |d ln g / d ln M| never
    exceeds 1 (M_j, `junction_replicas`: where it would; M_x at every fitted point). So M g(M) is
    non-decreasing in M (elasticity <= 1 up to M_x, M / (M + K) < 1 beyond) and ln r non-decreasing
    in the amplitude a (hence g non-increasing in H)."""
    qq = QualityParams() if q is None else q
    fx = _fixed(qq)
    _check_params(fx)
    m, h, n, f = _arr(replicas), _arr(inner_steps), _arr(params), _arr(fragments)
    _check("replicas", m, 1.0)
    _check("inner_steps", h, 1.0)
    _check("fragments", f, 1.0)
    if not _all_finite_at_least(n, 0.0, strict=True):
        bad = ~(np.isfinite(n) & (n > 0))
        raise InputError("params", f"must be finite and > 0 parameters, got {float(n[bad].flat[0]):g}")
    for name, v in (("tokens", tokens), ("local_batch_tokens", replica_batch_tokens)):
        if v is not None and not _all_finite_at_least(_arr(v), 0.0, strict=True):
            raise InputError(name, "must be finite and > 0 tokens")
    opt = np.asarray(inner_optimizer)
    if opt.size and not codes_in(opt, INNER_OPTIMIZER_CODES.values()):
        raise InputError("inner_optimizer", "codes must be 0 (adamw) or 1 (muon)")
    x = np.log(n / fx.pivot_params)
    xc = _clip(x, np.log(fx.fit_params_min / fx.pivot_params), np.log(fx.fit_params_max / fx.pivot_params))
    p, mx, s = _arr(qq.p), fx.fit_replicas_max, fx.loss_compute_slope
    amp = penalty_amplitude(h, n, opt, qq)
    is_mu = opt == INNER_OPTIMIZER_CODES[InnerOptimizer.MUON]
    mj = junction_replicas(amp, p, qq)
    s_in = (np.minimum(m, mj) ** p - 1.0) / p
    # between M_j and M_x the elasticity is held at 1 (M g(M) flat), never above it
    flat = s * np.log(_clip(m, mj, mx) / mj)
    k = critical_replicas(
        h, n, opt, qq, tokens=tokens, replica_batch_tokens=replica_batch_tokens, amplitude=amp
    )
    tail = s * np.log((np.maximum(m, mx) + k) / (mx + k))
    out = _arr(qq.u0) + _arr(qq.u1) * xc + np.where(is_mu, _arr(qq.muon_offset), 0.0) + amp * s_in
    out = out + flat + _arr(qq.delta) * (f > 1.0) + tail
    if fx.merge_rule == "mean" and not fx.outer_lr_retuned:
        out = out + s * fx.orthogonal_norm_exponent * np.log(np.maximum(m, mx) / mx)
    return np.asarray(out, dtype=np.float64)


def loss_ratio(
    replicas: npt.ArrayLike,
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    fragments: npt.ArrayLike = 1.0,
    q: QualityLike | None = None,
    inner_optimizer: npt.ArrayLike = 0,
    *,
    tokens: npt.ArrayLike | None = None,
    replica_batch_tokens: npt.ArrayLike | None = None,
) -> Arr:
    """r = L_DiLoCo / L_DP (the quantity the published tables print); see `log_loss_ratio`."""
    lr = log_loss_ratio(
        replicas,
        inner_steps,
        params,
        fragments,
        q,
        inner_optimizer,
        tokens=tokens,
        replica_batch_tokens=replica_batch_tokens,
    )
    return np.asarray(np.exp(lr), dtype=np.float64)


def compute_fraction(
    replicas: npt.ArrayLike,
    inner_steps: npt.ArrayLike,
    params: npt.ArrayLike,
    fragments: npt.ArrayLike = 1.0,
    q: QualityLike | None = None,
    inner_optimizer: npt.ArrayLike = 0,
    *,
    tokens: npt.ArrayLike | None = None,
    replica_batch_tokens: npt.ArrayLike | None = None,
) -> Arr:
    """g in (0, g_max]: DP-equivalent compute / DiLoCo compute, g = min(g_max, r^(-1/s)).

    Non-increasing in M (M >= 1) and in H (H >= inner_steps_floor) for b0 > 0, q >= 0, p > 0; M g(M)
    is non-decreasing in M and saturates at g(M_j) (M_j + K) (`critical_replicas`) for the retuned
    or norm-preserving merge; g rises with `tokens` and falls with `replica_batch_tokens`."""
    qq = QualityParams() if q is None else q
    s = _fixed(qq).loss_compute_slope
    lr = log_loss_ratio(
        replicas,
        inner_steps,
        params,
        fragments,
        qq,
        inner_optimizer,
        tokens=tokens,
        replica_batch_tokens=replica_batch_tokens,
    )
    g = np.exp(-lr / s)
    # floor at the smallest normal float so g stays > 0 where exp underflows (ln r > ~34)
    return np.asarray(_clip(g, TINY_FLOAT, _fixed(qq).g_max), dtype=np.float64)


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
    inner_optimizer: npt.ArrayLike = 0,
    *,
    tokens: npt.ArrayLike | None = None,
    replica_batch_tokens: npt.ArrayLike | None = None,
) -> Arr:
    """The quality efficiency factor, selected per element by `mapping` (MAPPING_CODES: 0 compute,
    1 loss; an array lets the Monte Carlo sample the mapping). Replaces eta_H x eta_rep (g carries
    the H effect); `inner_optimizer` 0 AdamW, 1 Muon; `tokens` and `replica_batch_tokens` feed the
    tail (`critical_replicas`). `loss_nats` is the run's Chinchilla loss before the replica penalty,
    used only by the loss mapping."""
    code = np.asarray(mapping)
    if code.size and not codes_in(code, MAPPING_CODES.values()):
        raise InputError("quality_mapping", "codes must be 0 (compute) or 1 (loss)")
    lr = log_loss_ratio(
        replicas,
        inner_steps,
        params,
        fragments,
        q,
        inner_optimizer,
        tokens=tokens,
        replica_batch_tokens=replica_batch_tokens,
    )
    return efficiency_from_log_ratio(code, lr, loss_nats, e, a, b, alpha, beta, tokens_per_param, q)


def efficiency_from_log_ratio(
    mapping: npt.ArrayLike,
    log_ratio: npt.ArrayLike,
    loss_nats: npt.ArrayLike,
    e: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    alpha: npt.ArrayLike,
    beta: npt.ArrayLike,
    tokens_per_param: npt.ArrayLike,
    q: QualityLike | None = None,
) -> Arr:
    """`efficiency` from ln r already computed (`log_loss_ratio`): g = min(g_max, r^(-1/s)) where
    `mapping` is 0, the loss-space bound where it is 1."""
    code = np.asarray(mapping)
    qq = QualityParams() if q is None else q
    lr = _arr(log_ratio)
    g = _clip(np.exp(-lr / _fixed(qq).loss_compute_slope), TINY_FLOAT, _fixed(qq).g_max)
    is_loss = code == MAPPING_CODES[QualityMapping.LOSS]
    if not np.any(is_loss):  # the Chinchilla inversions are the costly part; skip them when unused
        return np.asarray(np.broadcast_to(g, np.broadcast_shapes(g.shape, code.shape)), dtype=np.float64)
    ls = loss_space_fraction(loss_nats, np.exp(lr), e, a, b, alpha, beta, tokens_per_param)
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


EVIDENCE_REPLICAS_MAX = 16.0
"""The most replicas of any published DiLoCo-vs-DP point the model is fitted on (MuLoCo, Therien et
al. 2025, K = 16); a plan's replicas beyond it are an extrapolation of the critical-batch tail."""


def replicas_beyond_evidence(replicas: float) -> int:
    """max(0, M - EVIDENCE_REPLICAS_MAX), replicas (rounded)."""
    return max(0, round(replicas - EVIDENCE_REPLICAS_MAX))


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
