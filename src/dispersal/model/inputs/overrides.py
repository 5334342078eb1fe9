"""Where the scenario resolution (`scenario.kernel_inputs`) replaces an input the user gave: one line
each for `Estimate.notes`, so that no explicit input is ignored silently.

"Given" means different from the field's declared default (a value equal to the default cannot be
told apart from one left out, and replacing it changes nothing the user asked for). The rules here
mirror `kernel_inputs` branch by branch; tests/model/test_override_notes.py checks each against it.
"""

from __future__ import annotations

from typing import Any

from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import (
    BITS_PER_VALUE,
    FIELD_BY_NAME,
    Algorithm,
    Mode,
    Scenario,
)


def _given(s: Scenario, name: str) -> bool:
    """Whether field `name` differs from its declared default."""
    value: Any = getattr(s, name)
    return bool(value != FIELD_BY_NAME[name].default)


def override_notes(s: Scenario, mode: Mode | str, params: ModelParams = DEFAULT_PARAMS) -> list[str]:
    """One note per given input that `mode` (or a switched-off correction of default mode, or the
    algorithm) replaces, naming the field and what is used instead."""
    paper = Mode(mode) is Mode.PAPER
    on = frozenset() if paper else params.correction_set()
    why = "paper mode" if paper else "default mode with the {} correction off"
    out: list[str] = []

    def off(correction: str) -> str | None:
        # Who replaces inputs of `correction`: paper mode, default mode with it switched off, or no one.
        if paper:
            return why
        return None if correction in on else why.format(correction)

    ratio_bits = BITS_PER_VALUE[s.precision] / s.compression_ratio
    ddp = getattr(s.algorithm, "value", s.algorithm) == "ddp"
    if _given(s, "codec") and paper and ddp:
        # Paper mode's DDP exchanges dense gradients at the precision's bits (no 150x ratio).
        out.append(
            f"paper mode ignores codec={s.codec}: ddp sends dense {s.precision.value} gradients "
            f"({BITS_PER_VALUE[s.precision]:g} bits per parameter) every step"
        )
    elif _given(s, "codec") and (who := off("wire")):
        out.append(
            f"{who} ignores codec={s.codec}'s wire bits: {s.precision.value} bits / compression_ratio "
            f"{s.compression_ratio:g} = {ratio_bits:.3g} bits per parameter on the wire instead"
        )
    if s.codec != "auto" and not off("wire"):
        # A named codec fixes the wire bits and whether residuals are kept (data/codecs.toml).
        if _given(s, "compression_ratio"):
            out.append(
                f"codec={s.codec} sets the wire bits: compression_ratio={s.compression_ratio:g} ignored"
            )
        if _given(s, "error_feedback"):
            out.append(f"codec={s.codec} sets error feedback: error_feedback={s.error_feedback} ignored")
    if _given(s, "aggregation") and (who := off("aggregation")):
        out.append(f"{who} ignores aggregation={s.aggregation}: the paper's relay formula instead")
    if who := off("memory"):
        if _given(s, "optimizer_offload"):
            out.append(f"{who} ignores optimizer_offload={s.optimizer_offload.value}: no offload")
        if paper and _given(s, "outer_state"):
            out.append(
                f"paper mode ignores outer_state={s.outer_state.value}: no outer-optimizer state counted"
            )
    if who := off("overlap"):
        if _given(s, "fragments"):
            out.append(f"{who} ignores fragments={s.fragments}: the whole model syncs at once")
        if _given(s, "overlap_depth"):
            out.append(f"{who} ignores overlap_depth={s.overlap_depth}: the whole interval H overlaps")
    if who := off("quality"):
        for name in ("quality_mapping", "inner_optimizer"):
            if _given(s, name):
                out.append(f"{who} ignores {name}={getattr(s, name)}: the paper's replica/H penalty instead")
    if (who := off("link_budget")) and s.split_links is False:
        out.append(
            f"{who} ignores split_links=false: pipeline and regional traffic do not share the WAN link"
        )
    if paper and s.split_links is True:
        out.append("paper mode ignores split_links=true: regional and pipeline links not given are the WAN")
    if paper and s.algorithm is Algorithm.AUTO and _given(s, "nodes_per_site"):
        out.append(
            "paper mode's auto never pipelines inside sites: nodes_per_site used only by site_pp_diloco"
        )
    if s.algorithm is Algorithm.SITE_PP_DILOCO and _given(s, "activation_compression"):
        out.append(
            "site_pp_diloco sends activations uncompressed on the site fabric: activation_compression ignored"
        )
    if not paper and s.split_links is False:
        # One link carries everything: side links are the WAN's rate and latency.
        wan = {
            "bandwidth": min(s.bandwidth_up_bits_per_s, s.bandwidth_down_bits_per_s),
            "latency": s.latency_s,
        }
        for side in ("regional", "pp"):
            for kind, name in (
                ("bandwidth", f"{side}_bandwidth_bits_per_s"),
                ("latency", f"{side}_latency_s"),
            ):
                value = getattr(s, name)
                if value is not None and value != wan[kind]:
                    out.append(f"split_links=false: {name} ignored, the WAN link carries that traffic")
    if paper:
        if _given(s, "pricing"):
            out.append(f"paper mode ignores pricing={s.pricing.value}: purchase price x capex multiplier")
        if _given(s, "electricity_usd_per_kwh") or _given(s, "pue"):
            out.append("paper mode ignores electricity_usd_per_kwh and pue: energy is not costed")
    if s.algorithm is Algorithm.STREAMING and not s.overlap_communication:
        out.append("algorithm=streaming overlaps the sync: overlap_communication=false ignored")
    if s.algorithm is Algorithm.DDP and s.codec == "auto" and not paper:
        if _given(s, "compression_ratio"):
            out.append(
                f"ddp with codec=auto sends dense bf16 gradients: compression_ratio={s.compression_ratio:g} "
                "applies to DiLoCo syncs only (name a codec to compress ddp's per-step exchange)"
            )
        if _given(s, "aggregation"):
            out.append(
                f"ddp with codec=auto ring-all-reduces dense gradients: aggregation={s.aggregation} ignored"
            )
    return out
