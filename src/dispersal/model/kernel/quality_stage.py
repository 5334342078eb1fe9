"""The quality stage (spec/model.md secs. 4-5): efficiency factors, the run's Chinchilla loss, the
replica penalty eta_rep (the paper's loss multiplier or the fitted compute-space multiplier of
`dispersal.model.kernel.quality`) and chi, the compute-optimal share of the compute."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.decoupled import MERGE_RULE_CODES
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
) -> dict[str, Arr]:
    """eta = eta_H eta_comp eta_act eta_rep; C_local = C_thr eta; C_quality = C_local chi with
    chi = min(1, C'(L) / C_thr), C' the compute-optimal compute at the run's loss (Besiroglu et al.
    2024 fit). `merge`: each configuration's outer merge (`inputs.decoupled.MERGE_RULE_CODES`; -1 or
    None: the quality parameters' rule). Returns the kernel outputs of this stage by name."""
    g, k, shape, p = inp.g, inp.k, inp.shape, inp.p
    P, Pa = g("params"), g("active_params")
    # Quality mapping: < 0 the paper's (eta_H x a replica loss multiplier on the whole Chinchilla
    # loss); 0 the fitted compute-space multiplier g(M, H, P, fragments) (`kernel.quality`, which
    # carries the H effect, so eta_H is 1); 1 its conservative loss-space bound.
    qmap = g("quality_mapping")
    legacy_q = qmap < 0
    e_h = np.where(distributed & legacy_q, eta_h(P, h_pen, p), 1.0)
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
    if live.any():

        def lv(a: npt.NDArray[Any]) -> Arr:
            # A scalar broadcasts as it is; every configuration live (a sweep without a window): no gather.
            if a.ndim == 0 or all_live:
                return a
            return np.broadcast_to(a, shape)[live]

        Ll = chinchilla.loss(lv(Pa), lv(D), lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe))
        L[at] = Ll
        C_opt[at] = chinchilla.optimal_compute_for_loss(
            Ll, lv(ce), lv(ca), lv(cb), lv(cal), lv(cbe), lv(kopt)
        )
        leg = lv(legacy_q) > 0
        if leg.any():
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
        _fitted_penalty(inp, gmask, qmap, replicas, h_pen, streaming, fragments, L, q_eff, L_rep)
        if merge is not None:
            _merge_penalty(inp, gmask, merge, qmap, replicas, h_pen, streaming, fragments, L, q_eff, L_rep)
    e_r = np.where(distributed, np.where(legacy_q, np.minimum(1.0, C_opt_rep / C_opt), q_eff), 1.0)
    e_r = np.where(live, e_r, np.nan)
    chi = np.minimum(1.0, C_opt / C_thr)
    # A run that trains no tokens (no throughput: e.g. fewer nodes than pipeline stages) has no
    # replica penalty to speak of, no quality compute and an undefined (infinite) loss; report that
    # rather than NaN.
    untrained = ~(D > 0)
    e_r = np.where(untrained, 1.0, e_r)
    chi = np.where(untrained, 0.0, chi)
    L = np.where(untrained, np.inf, L)
    eta = e_h * e_c * e_a * e_r
    C_local = C_thr * eta
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
        "c_quality_flop": C_local * chi,
        "overtraining_ratio": ot,
    }


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
    qp_override: quality.QualityLike | None = None,
) -> None:
    """Fill q_eff and L_rep where `gmask`: the fitted quality multiplier (`kernel.quality`), with the
    quality parameters `qp_override` instead of the call's where given."""
    g, k, shape = inp.g, inp.k, inp.shape

    def gl(a: Arr) -> Arr:
        return np.asarray(np.broadcast_to(a, shape)[gmask], dtype=np.float64)

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
    q_eff[gmask] = quality.efficiency(
        np.maximum(gl(qmap), 0.0).astype(np.int64),
        m_q,
        h_q,
        gl(P),
        frag_q,
        L[gmask],
        gl(k("chinchilla_e")),
        gl(k("chinchilla_a")),
        gl(k("chinchilla_b")),
        gl(k("chinchilla_alpha")),
        gl(k("chinchilla_beta")),
        gl(k("tokens_per_param_optimal")),
        qp,
        opt_q,
    )
    L_rep[gmask] = quality.loss_ratio(m_q, h_q, gl(P), frag_q, qp, opt_q)


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
        _fitted_penalty(inp, here, qmap, replicas, h_pen, streaming, fragments, L, q_eff, L_rep, other)
