"""The quality stage (spec/model.md secs. 4-5): efficiency factors, the run's Chinchilla loss, the
replica penalty eta_rep (the paper's loss multiplier or the fitted compute-space multiplier of
`dispersal.model.kernel.quality`) and chi, the compute-optimal share of the compute."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.decoupled import MERGE_RULE_CODES
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import ModelParams
from dispersal.model.kernel import chinchilla, quality
from dispersal.model.kernel.context import Arr, BoolArr, Inputs, as_float
from dispersal.model.kernel.efficiency import eta_comp, eta_h


def quality_stage(
    inp: Inputs,
    D: Arr,
    C_thr: Arr,
    replicas: Arr,
    h_pen: Arr,
    distributed: BoolArr,
    e_a: Arr,
    streaming: BoolArr,
    fragments: Arr,
    merge: Arr | None = None,
    *,
    replica_batch_tokens: Arr | None = None,
    quality_factor: Arr | float = 1.0,
) -> dict[str, Arr]:
    """eta = eta_H eta_comp eta_act eta_rep; C_local = C_thr eta.

    Default (fitted) modes, one law of useful tokens (docs/quality.md): every efficiency factor
    discounts the tokens once, D_eff = eta q_trust D, the run's loss is L = L(P_a, D_eff) (Besiroglu
    et al. 2024 fit) and C_quality = C'(L) = min(C_local q_trust, C'(L)), C' the compute-optimal
    compute at that loss; chi = C_quality / (C_local q_trust). Lower loss <=> more C_quality.
    Paper mode (the paper's loss multiplier, Rahman 2026): L = L(P_a, D), chi = min(1, C'(L L_rep) /
    C_thr), C_quality = C_local chi q_trust, unchanged.

    `merge`: each configuration's outer merge (`inputs.decoupled.MERGE_RULE_CODES`; -1 or None: the
    quality parameters' rule); `replica_batch_tokens`: tokens per inner step of one replica (the
    tail's b; None: the fitted sources' own); `quality_factor`: the trust stage's q_trust. Returns
    the kernel outputs of this stage by name."""
    g, k, shape, p = inp.g, inp.k, inp.shape, inp.p
    P, Pa = g("params"), g("active_params")
    # Quality mapping: < 0 the paper's (eta_H x a replica loss multiplier on the whole Chinchilla
    # loss); 0 the fitted compute-space multiplier g(M, H, P, fragments) (`kernel.quality`, which
    # carries the H effect, so eta_H is 1); 1 its conservative loss-space bound.
    qmap = g("quality_mapping")
    legacy_q = qmap < 0
    q_tr = np.asarray(quality_factor, dtype=np.float64)
    e_h = _eta_h_paper(distributed & legacy_q, P, h_pen, p)
    e_c = np.where(
        distributed, eta_comp(g("compression_ratio"), g("error_feedback"), g("compression_quality"), p), 1.0
    )
    ce, ca, cb = k("chinchilla_e"), k("chinchilla_a"), k("chinchilla_b")
    cal, cbe, kopt = k("chinchilla_alpha"), k("chinchilla_beta"), k("tokens_per_param_optimal")
    ot = D / (kopt * Pa)
    # The Chinchilla inversions are the costly part: a search may say which configurations it will
    # keep (an overtraining window) so the others are skipped (their results become NaN).
    live = np.ones(shape, dtype=bool)
    if inp.has("min_overtraining"):
        live &= ot >= g("min_overtraining") * (1 - 1e-9)
    if inp.has("max_overtraining"):
        live &= ot <= g("max_overtraining") * (1 + 1e-9)
    live &= np.isfinite(D) & (D > 0)
    L = np.full(shape, np.nan)
    L_rep = np.full(shape, np.nan)
    q_eff = np.full(shape, np.nan)
    C_opt = np.full(shape, np.nan)
    C_opt_rep = np.full(shape, np.nan)
    all_live = bool(live.all())
    # Where the live results go: everywhere (any shape) or the gathered elements.
    at: BoolArr | tuple[()] = () if all_live else live

    def lv(a: npt.NDArray[Any]) -> Arr:
        # A scalar broadcasts as it is; every configuration live (a sweep without a window): no gather.
        if a.ndim == 0 or all_live:
            return a
        return (a if a.shape == shape else np.broadcast_to(a, shape))[live]

    leg = lv(np.asarray(legacy_q)) > 0
    if live.any() and leg.any():
        # Paper mode: the loss at the raw tokens, the replica multiplier on the whole loss.
        Ll = chinchilla.loss(lv(Pa), lv(D), lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe))
        L[at] = Ll
        C_opt[at] = chinchilla.optimal_compute_for_loss(
            Ll, lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe), lv(kopt)
        )
        beta0 = lv(k("replica_beta_coeff")) * lv(P) ** -lv(k("replica_beta_exponent"))
        beta_rep = beta0 * np.log(np.maximum(lv(h_pen), 1.0)) / np.log(lv(k("replica_reference_h")))
        Lrep = np.where((lv(distributed) > 0) & leg, np.maximum(lv(replicas), 1.0) ** beta_rep, 1.0)
        # Undefined (NaN) for a configuration with the fitted mapping whatever else is in the call.
        L_rep[at] = np.where(leg, Lrep, np.nan)
        C_opt_rep[at] = chinchilla.optimal_compute_for_loss(
            Ll * Lrep, lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe), lv(kopt)
        )
    gmask = live & distributed & ~legacy_q
    if gmask.any():
        # The loss mapping's bound reads the loss before the replica penalty (other factors applied).
        # (read only by the loss mapping: skipped when no configuration uses it)
        L_pre = (
            chinchilla.loss(Pa, D * e_c * e_a * q_tr, ce, ca, cb, cal, cbe)
            if np.any(qmap == quality.MAPPING_CODES[quality.QualityMapping.LOSS])
            else np.full((), np.nan)
        )
        tail = _Tail(D, replica_batch_tokens)
        _fitted_penalty(inp, gmask, qmap, replicas, h_pen, streaming, fragments, L_pre, q_eff, L_rep, tail)
        if merge is not None:
            _merge_penalty(
                inp, gmask, merge, qmap, replicas, h_pen, streaming, fragments, L_pre, q_eff, L_rep, tail
            )
    e_r = np.where(distributed, np.where(legacy_q, np.minimum(1.0, C_opt_rep / C_opt), q_eff), 1.0)
    e_r = np.where(live, e_r, np.nan)
    # A run that trains no tokens (no throughput: e.g. fewer nodes than pipeline stages) has no
    # replica penalty to speak of, no quality compute and an undefined (infinite) loss; report that
    # rather than NaN.
    untrained = ~(D > 0)
    e_r = np.where(untrained, 1.0, e_r)
    eta = e_h * e_c * e_a * e_r
    C_local = C_thr * eta
    chi = np.minimum(1.0, C_opt / C_thr)
    fitted = live & ~legacy_q
    if fitted.any():
        # One law of useful tokens: the loss at D_eff = eta q_trust D, and C_quality the
        # compute-optimal compute at that loss (never above the useful compute C_local q_trust).
        fl = lv(fitted)
        d_eff = lv(np.broadcast_to(D * eta * q_tr, shape))
        Ln = chinchilla.loss(lv(Pa), d_eff, lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe))
        Cn = chinchilla.optimal_compute_for_loss(Ln, lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe), lv(kopt))
        useful = lv(np.broadcast_to(C_local * q_tr, shape))
        with np.errstate(invalid="ignore", divide="ignore"):
            chi_n = np.minimum(1.0, Cn / useful)
        if np.all(fl):  # the usual default-mode call: no paper-mode element to keep
            L[at] = Ln
            chi = np.full(shape, np.nan)
            chi[at] = chi_n
        else:
            L[at] = np.where(fl, Ln, lv(np.broadcast_to(L, shape)))
            chi = np.array(np.broadcast_to(chi, shape))
            chi[at] = np.where(fl, chi_n, lv(chi))
    chi = np.where(untrained, 0.0, chi)
    L = np.where(untrained, np.inf, L)
    # Paper mode keeps its product order (C_local chi) q_trust, byte for byte.
    c_quality = (
        C_local * q_tr * chi
        if not np.any(legacy_q)
        else np.where(legacy_q, C_local * chi * q_tr, C_local * q_tr * chi)
    )
    return {
        "eta_h": e_h,
        "eta_comp": e_c,
        "eta_act": e_a,
        "eta_rep": e_r,
        "eta": eta,
        "chi": chi,
        "loss": L,
        "loss_replica_multiplier": L_rep,
        "c_local_flop": C_local,
        "c_quality_flop": c_quality,
        "overtraining_ratio": ot,
    }


def _eta_h_paper(paper_dist: BoolArr, P: Arr, h_pen: Arr, p: ModelParams) -> Arr:
    """eta_H where `paper_dist` (the paper mapping's distributed configurations), 1 elsewhere; a call
    without such a configuration (default mode) skips its logarithms."""
    if paper_dist.any():
        return np.asarray(np.where(paper_dist, eta_h(P, h_pen, p), 1.0), dtype=np.float64)
    return np.ones(np.broadcast_shapes(paper_dist.shape, np.shape(P), np.shape(h_pen)))


@dataclasses.dataclass(frozen=True)
class _Tail:
    """The tail's run inputs (`quality.critical_replicas`): tokens D and the per-replica batch b."""

    tokens: Arr
    replica_batch_tokens: Arr | None


def _fitted_penalty(
    inp: Inputs,
    gmask: BoolArr,
    qmap: Arr,
    replicas: Arr,
    h_pen: Arr,
    streaming: BoolArr,
    fragments: Arr,
    L: Arr,
    q_eff: Arr,
    L_rep: Arr,
    tail: _Tail,
    qp_override: quality.QualityLike | None = None,
) -> None:
    """Fill q_eff and L_rep where `gmask`: the fitted quality multiplier (`kernel.quality`) with the
    tail's tokens and per-replica batch, with the quality parameters `qp_override` instead of the
    call's where given. `L` is the loss before the replica penalty (read by the loss mapping)."""
    g, k, shape = inp.g, inp.k, inp.shape

    n_on = int(np.count_nonzero(gmask))

    def gl(a: Arr) -> Arr:
        a = np.asarray(a, dtype=np.float64)
        # a number needs no broadcast and gather: the same value at every selected configuration
        if a.ndim == 0:
            return np.full(n_on, a)
        return np.asarray((a if a.shape == shape else np.broadcast_to(a, shape))[gmask])

    frag_q = np.maximum(gl(np.where(streaming, fragments, 1.0)), 1.0)
    m_q, h_q = np.maximum(gl(replicas), 1.0), np.maximum(gl(h_pen), 1.0)
    qp: quality.QualityLike | None = inp.quality_params if qp_override is None else qp_override
    if isinstance(qp, quality.QualitySamples):
        # Per-configuration draws of the fit (Monte Carlo): keep the same elements as the inputs.
        fields: dict[str, Any] = {f: gl(as_float(getattr(qp, f))) for f in quality.SAMPLED_FIELDS}
        qp = dataclasses.replace(qp, **fields)
    opt_q = (
        gl(g("inner_optimizer")).astype(np.int64)
        if inp.has("inner_optimizer")
        else np.zeros_like(m_q, dtype=np.int64)
    )
    P = g("params")
    kw = {
        "tokens": gl(tail.tokens),
        "replica_batch_tokens": None if tail.replica_batch_tokens is None else gl(tail.replica_batch_tokens),
    }
    # ln r once: both the efficiency and the printed loss ratio read it
    lr = quality.log_loss_ratio(m_q, h_q, gl(P), frag_q, qp, opt_q, **kw)
    codes = np.maximum(gl(qmap), 0.0).astype(np.int64)
    if codes.size and not quality.codes_in(codes, quality.MAPPING_CODES.values()):
        raise InputError("quality_mapping", "codes must be 0 (compute) or 1 (loss)")
    q_eff[gmask] = quality.efficiency_from_log_ratio(
        codes,
        lr,
        gl(L),
        gl(k("chinchilla_e")),
        gl(k("chinchilla_a")),
        gl(k("chinchilla_b")),
        gl(k("chinchilla_alpha")),
        gl(k("chinchilla_beta")),
        gl(k("tokens_per_param_optimal")),
        qp,
    )
    L_rep[gmask] = np.exp(lr)


def _merge_penalty(
    inp: Inputs,
    gmask: BoolArr,
    merge: Arr,
    qmap: Arr,
    replicas: Arr,
    h_pen: Arr,
    streaming: BoolArr,
    fragments: Arr,
    L: Arr,
    q_eff: Arr,
    L_rep: Arr,
    tail: _Tail,
) -> None:
    """Where a configuration's merge (decoupled's `merge_rule`) differs from the quality parameters'
    own, redo `_fitted_penalty` there with that rule. The rule matters only when the outer learning
    rate is not retuned per M (`QualityParams.outer_lr_retuned`), so nothing is redone otherwise."""
    qp = inp.quality_params if inp.quality_params is not None else quality.QualityParams()
    base = qp.base if isinstance(qp, quality.QualitySamples) else qp
    if not isinstance(base, quality.QualityParams) or base.outer_lr_retuned:
        return
    codes = np.broadcast_to(np.asarray(merge, dtype=np.float64), inp.shape)
    for rule, code in MERGE_RULE_CODES.items():
        here = gmask & (codes == code)
        if rule == base.merge_rule or not here.any():
            continue
        swapped = dataclasses.replace(base, merge_rule=rule)
        other: quality.QualityLike = (
            dataclasses.replace(qp, base=swapped) if isinstance(qp, quality.QualitySamples) else swapped
        )
        _fitted_penalty(inp, here, qmap, replicas, h_pen, streaming, fragments, L, q_eff, L_rep, tail, other)
