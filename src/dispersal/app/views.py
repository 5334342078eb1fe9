"""Glue from UI state to the model's planner, resilience, countermeasure and uncertainty functions.

No Streamlit import at module level (the HTML report uses this too); views that draw receive the
``st`` module. Optional model modules are imported lazily: when one is missing from this version, the
view says so instead of failing.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dispersal.app import logic
from dispersal.model import units

NOT_AVAILABLE = "not available in this version"


def optional_module(name: str) -> Any | None:
    """Import dispersal.model.<name>, or None when this version does not have it."""
    full = f"dispersal.model.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if exc.name in (full, "dispersal.model"):
            return None
        raise


# --- planner ---------------------------------------------------------------------------------------------


def plan_args(ui: Mapping[str, Any], sd: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-able planner arguments: the planner settings plus this scenario's links and budget."""
    return {
        "target": str(ui["plan_target"]),
        "regime": ui["plan_regime"],
        "mode": ui["mode"],
        "metric": None if ui["plan_metric"] == "auto" else ui["plan_metric"],
        "objective": ui["plan_objective"],
        "search": None if ui["plan_search"] == "auto" else ui["plan_search"],
        "constraints": {
            "bandwidth_up_bits_per_s": sd["bandwidth_up_bits_per_s"],
            "bandwidth_down_bits_per_s": sd["bandwidth_down_bits_per_s"],
            "latency_s": sd["latency_s"],
            "max_duration_s": sd["duration_s"],
            "compression_ratio": sd["compression_ratio"],
            "mfu": sd["mfu"],
            "straggler": sd["straggler"],
            "pricing": sd["pricing"],
            "regional_bandwidth_bits_per_s": sd["regional_bandwidth_bits_per_s"],
            "pp_bandwidth_bits_per_s": sd["pp_bandwidth_bits_per_s"],
        },
    }


def run_plan(args: Mapping[str, Any]) -> dict[str, Any]:
    """`planner.plan(...)` on plan_args output -> Plan.to_dict(). InputError for bad input."""
    from dispersal.model.planner import Constraints, plan

    target = logic.parse_flop(args["target"])
    c = Constraints(**args["constraints"])
    return plan(
        target,
        regime_name=args["regime"],
        constraints=c,
        mode=args["mode"],
        metric=args["metric"],
        objective=args["objective"],
        search=args["search"],
    ).to_dict()


# --- resilience ------------------------------------------------------------------------------------------


def resilience(est: Mapping[str, Any], ui: Mapping[str, Any], points: int = 25) -> dict[str, Any]:
    """Goodput vs scale for a fleet shaped like this scenario (`resilience.goodput_vs_scale`).

    A node is a host that fails as a unit; an island (a DiLoCo worker) is one node, or one pipeline
    of ``pipeline_stages`` nodes; a round is the scenario's outer step.
    """
    from dispersal.model.resilience import ResilienceSpec, goodput, goodput_vs_scale

    cpn = max(1, int(est["chips_per_node"]))
    island = cpn * max(1, int(est["pipeline_stages"]))
    fleet = cpn * int(est["num_nodes"])
    round_h = float(est["outer_step_time_s"]) / 3600.0
    note = ""
    if not (math.isfinite(round_h) and round_h > 0):
        round_h, note = 0.5, " (no outer step in this scenario: 30-minute rounds assumed)"
    spec = ResilienceSpec(
        chips=fleet,
        chip_mtbf_h=float(ui["res_chip_mtbf_h"]),
        chips_per_node=cpn,
        chips_per_island=island,
        sites=max(1, int(est["num_nodes"])),
        restart_time_h=float(ui["res_restart_h"]),
        round_time_h=round_h,
    )
    hi = max(float(ui["res_max_chips"]), fleet * 1.0, island * 2.0)
    chips = sorted({round(float(x)) for x in np.geomspace(island, hi, points)})
    curves = {k: v.tolist() for k, v in goodput_vs_scale(spec, chips).items()}
    here = goodput(spec).to_dict()
    rows = [{"algorithm": k, f"goodput at {fleet:,} chips": f"{v:.4f}"} for k, v in here.items()]
    caption = (
        f"Fleet like this scenario: {fleet:,} chips, {cpn} per node, islands of {island} chips, rounds of "
        f"{units.format_duration(round_h * 3600)}{note}. Failures only (communication is in the estimate)."
    )
    return {
        "chips": chips,
        "curves": curves,
        "rows": rows,
        "fleet_chips": fleet,
        "caption": caption,
        "spec": spec.to_dict(),
    }


# --- optional views (modules written in parallel; imported lazily) ---------------------------------------


def countermeasures_view(st: Any, scenario: Any, mode: Any) -> str | None:
    """Cost vs P(detect) per countermeasure bundle; a message when not available."""
    mod = optional_module("countermeasures")
    if mod is None:
        return f"Countermeasures: {NOT_AVAILABLE}."
    return f"Countermeasures: {NOT_AVAILABLE} (module present, interface not recognised)."


def uncertainty_view(st: Any, scenario: Any, mode: Any) -> str | None:
    """P10-P90 bands; a message when not available."""
    mod = optional_module("uncertainty")
    if mod is None:
        return f"Uncertainty: {NOT_AVAILABLE}."
    return f"Uncertainty: {NOT_AVAILABLE} (module present, interface not recognised)."
