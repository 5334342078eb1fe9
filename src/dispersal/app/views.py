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
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError

NOT_AVAILABLE = "not available in this version"


def optional_module(name: str) -> Any | None:
    """Import dispersal.model.analyses.<name>, or None when this version does not have it."""
    full = f"dispersal.model.analyses.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if exc.name in (full, "dispersal.model", "dispersal.model.analyses"):
            return None
        raise


# --- planner ---------------------------------------------------------------------------------------------


def plan_args(ui: Mapping[str, Any], sd: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-able planner arguments: the planner settings plus this scenario's links and budget.

    With Links = one the regional and pipeline links are left to the planner, which makes them the
    WAN (as `dispersal plan` does), so one WAN setting drives every link. MFU left empty in the
    scenario keeps the planner's own default.
    """
    split = ui.get("links", "one") == "split"
    constraints: dict[str, Any] = {
        "bandwidth_up_bits_per_s": sd["bandwidth_up_bits_per_s"],
        "bandwidth_down_bits_per_s": sd["bandwidth_down_bits_per_s"],
        "latency_s": sd["latency_s"],
        "max_duration_s": sd["duration_s"],
        "compression_ratio": sd["compression_ratio"],
        "straggler": sd["straggler"],
        "pricing": sd["pricing"],
    }
    if sd.get("mfu") is not None:
        constraints["mfu"] = sd["mfu"]
    if split:
        constraints["regional_bandwidth_bits_per_s"] = sd["regional_bandwidth_bits_per_s"]
        constraints["pp_bandwidth_bits_per_s"] = sd["pp_bandwidth_bits_per_s"]
    return {
        "target": str(ui["plan_target"]),
        "regime": ui["plan_regime"],
        "mode": ui["mode"],
        "metric": None if ui["plan_metric"] == "auto" else ui["plan_metric"],
        "objective": ui["plan_objective"],
        "search": None if ui["plan_search"] == "auto" else ui["plan_search"],
        "links": "split" if split else "one",
        "constraints": constraints,
    }


def run_plan(args: Mapping[str, Any]) -> dict[str, Any]:
    """`planner.plan(...)` on plan_args output -> Plan.to_dict(). InputError for bad input."""
    from dispersal.model.search.planner import Constraints, plan

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
    ).to_dict() | {"constraints": dict(args["constraints"])}


#: The x values of the comparison charts (around the paper's 100 Mbps / 100 ms / 1e25 point).
SWEEP_BANDWIDTH_MBPS = (10.0, 30.0, 100.0, 300.0, 1000.0)
SWEEP_DISTANCE_KM = (100.0, 1000.0, 3000.0, 10000.0, 20000.0)
SWEEP_TARGET_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
SWEEPS = ("bandwidth", "distance", "target")


def sweep_points(args: Mapping[str, Any], axis: str) -> list[tuple[float, dict[str, Any]]]:
    """(x, planner arguments) for each point of one comparison chart; the rest as in ``args``.

    bandwidth: symmetric WAN in Mbps; distance: fibre km -> one-way latency
    (`scenario.latency_from_distance`, 4.9 us/km x 1.5 routing); target: FLOP, multiples of the target.
    """
    from dispersal.model.inputs.scenario import latency_from_distance

    out = []
    if axis == "bandwidth":
        for mbps in SWEEP_BANDWIDTH_MBPS:
            c = {
                **args["constraints"],
                "bandwidth_up_bits_per_s": mbps * 1e6,
                "bandwidth_down_bits_per_s": mbps * 1e6,
            }
            out.append((mbps, {**args, "constraints": c}))
    elif axis == "distance":
        for km in SWEEP_DISTANCE_KM:
            c = {**args["constraints"], "latency_s": latency_from_distance(km * 1e3)}
            out.append((km, {**args, "constraints": c}))
    elif axis == "target":
        t0 = logic.parse_flop(str(args["target"]))
        for k in SWEEP_TARGET_FACTORS:
            out.append((t0 * k, {**args, "target": repr(t0 * k)}))
    else:
        raise InputError("axis", f"must be one of {', '.join(SWEEPS)}, got {axis!r}")
    return out


def sweep_row(x: float, p: Mapping[str, Any]) -> dict[str, Any]:
    """One point of a comparison chart: x, cost (None when infeasible) and what the plan chose."""
    ok = bool(p.get("feasible")) and "cost_usd" in p
    return {
        "x": x,
        "cost_usd": float(p["cost_usd"]) if ok else None,
        "label": (
            f"{p['nodes']:,} x {p['chips_per_node']}x {p['hardware']} {p['precision']}, {p['algorithm']}"
            if ok
            else "infeasible: " + "; ".join(p.get("reasons", []))[:80]
        ),
    }


# --- resilience ------------------------------------------------------------------------------------------


def resilience_spec(est: Mapping[str, Any], ui: Mapping[str, Any]) -> tuple[Any, str]:
    """A ResilienceSpec for a fleet shaped like this scenario, and a note on any assumption made.

    A node is a host that fails as a unit; an island (a DiLoCo worker) is one node, or one pipeline
    of ``pipeline_stages`` nodes; a site is a node; a round is the scenario's outer step.
    """
    from dispersal.model.analyses.resilience import ResilienceSpec

    cpn = max(1, int(est["chips_per_node"]))
    island = cpn * max(1, int(est["pipeline_stages"]))
    fleet = cpn * int(est["num_nodes"])
    round_h = float(est["outer_step_time_s"]) / 3600.0
    note = ""
    if not (math.isfinite(round_h) and round_h > 0):
        round_h, note = 0.5, " (no outer step in this scenario: 30-minute rounds assumed)"
    for key in ("res_chip_mtbf_h", "res_restart_h"):
        err = logic.check_field(key, ui[key])
        if err:
            raise InputError(key, err.partition(": ")[2])
    spec = ResilienceSpec(
        chips=fleet,
        chip_mtbf_h=float(ui["res_chip_mtbf_h"]),
        chips_per_node=cpn,
        chips_per_island=island,
        sites=max(1, int(est["num_nodes"])),
        restart_time_h=float(ui["res_restart_h"]),
        round_time_h=round_h,
    )
    return spec, note


def site_loss_inputs(est: Mapping[str, Any], ui: Mapping[str, Any]) -> dict[str, Any]:
    """The site-loss question in hours: k sites dark at L for D (None = for ever) in a run of R hours."""
    for key in ("res_lose_sites", "res_lose_at_days", "res_down_for_days", "res_run_days"):
        err = logic.check_field(key, ui.get(key))
        if err:
            f = logic.FIELD_BY_KEY[key]
            raise InputError(f.name, err.partition(": ")[2])
    run_days = ui.get("res_run_days")
    if run_days is None:
        run_days = float(est["days"]) if math.isfinite(float(est["days"])) and est["days"] > 0 else 30.0
    down = ui.get("res_down_for_days")
    return {
        "lose_sites": int(ui["res_lose_sites"]),
        "lose_at_h": float(ui["res_lose_at_days"]) * 24.0,
        "down_for_h": None if down is None else float(down) * 24.0,
        "run_h": float(run_days) * 24.0,
    }


def resilience(est: Mapping[str, Any], ui: Mapping[str, Any], points: int = 25) -> dict[str, Any]:
    """Goodput vs scale and the site-loss outcome for a fleet shaped like this scenario
    (`resilience.goodput_vs_scale`, `resilience.goodput`, `resilience.site_loss`)."""
    from dispersal.model.analyses.resilience import SiteLossScenario, goodput, goodput_vs_scale, site_loss

    spec, note = resilience_spec(est, ui)
    fleet, island, cpn = spec.chips, spec.chips_per_island, spec.chips_per_node
    err = logic.check_field("res_max_chips", ui["res_max_chips"])
    if err:
        raise InputError("res_max_chips", err.partition(": ")[2])
    hi = max(float(ui["res_max_chips"]), fleet * 1.0, island * 2.0)
    chips = sorted({round(float(x)) for x in np.geomspace(island, hi, points)})
    curves = {k: v.tolist() for k, v in goodput_vs_scale(spec, chips).items()}
    here = goodput(spec).to_dict()
    rows = [{"algorithm": k, f"goodput at {fleet:,} chips": f"{v:.4f}"} for k, v in here.items()]
    caption = (
        f"Fleet like this scenario: {fleet:,} chips, {cpn} per node, islands of {island} chips, "
        f"{spec.sites:,} sites, rounds of {units.format_duration(spec.round_time_h * 3600)}{note}. "
        "Failures only (communication is in the estimate)."
    )
    loss_in = site_loss_inputs(est, ui)
    loss = site_loss(spec, SiteLossScenario(**loss_in))
    loss_rows = []
    for name, o in loss.outcomes.items():
        loss_rows.append(
            {
                "algorithm": name,
                "time to own target": "never"
                if math.isinf(o.time_to_target_h)
                else f"{o.time_to_target_h / 24:.4g} d",
                "delay": "never finishes" if math.isinf(o.delay_h) else f"{o.delay_h / 24:.4g} d",
                "useful work lost by plan end": f"{o.lost_useful_fraction:.1%}",
                "finishes within budget": "yes" if o.finishes_within_budget else "no",
            }
        )
    down = loss_in["down_for_h"]
    loss_caption = (
        f"{loss_in['lose_sites']} of {spec.sites:,} sites go dark after {loss_in['lose_at_h'] / 24:.4g} days, "
        + ("for ever" if down is None else f"for {down / 24:.4g} days")
        + f", in a planned run of {loss_in['run_h'] / 24:.4g} days (sites are equal shares, so which ones does "
        "not matter). Each algorithm's target is its own no-loss work over the planned run: the rows compare "
        "each algorithm with itself. Same numbers as `dispersal resilience` with these inputs."
    )
    return {
        "chips": chips,
        "curves": curves,
        "rows": rows,
        "fleet_chips": fleet,
        "caption": caption,
        "spec": spec.to_dict(),
        "site_loss": loss.to_dict(),
        "site_loss_inputs": loss_in,
        "site_loss_rows": loss_rows,
        "site_loss_caption": loss_caption,
    }


# --- optional views (modules written in parallel; imported lazily) ---------------------------------------


def _convention_args(ui: Mapping[str, Any], scenario: Any) -> dict[str, Any]:
    days = min(3650.0, max(1.0, float(scenario.duration_s) / units.SECONDS_PER_DAY))
    return {
        "mode": ui["mode"],
        "metric": "c_quality" if ui["plan_metric"] == "auto" else ui["plan_metric"],
        "days": days,
        "bandwidth_bits_per_s": min(scenario.bandwidth_up_bits_per_s, scenario.bandwidth_down_bits_per_s),
        "latency_s": scenario.latency_s,
        "search": "exact" if ui["plan_search"] == "auto" else ui["plan_search"],
        "base_regime": ui["plan_regime"],
    }


def run_countermeasures(target: str, conv: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`countermeasures.analyse` (every lever alone, then the default bundles) -> Outcome.to_dict() rows."""
    cm = optional_module("countermeasures")
    if cm is None:
        raise InputError("countermeasures", NOT_AVAILABLE)
    outs = cm.analyse(logic.parse_flop(target), convention=cm.Convention(**conv))
    return [o.to_dict() for o in outs]


def lever_description(bundle: str) -> str:
    """What a lever or a '+'-joined bundle does, from levers.toml ('no lever' for the baseline)."""
    cm = optional_module("countermeasures")
    if cm is None:
        return ""
    table = cm.levers()
    parts = [p.strip() for p in str(bundle).split("+") if p.strip()]
    known = [table[p].description for p in parts if p in table]
    return (
        "; ".join(known)
        if known
        else ("no lever (the evader's baseline)" if not parts or parts == ["none"] else "")
    )


def countermeasure_rows(outcomes: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per bundle: what it does, evader cost, cost multiple, P(detect), expected detection day."""
    rows = []
    for i, o in enumerate(outcomes):
        rows.append(
            {
                "#": str(i + 1),
                "bundle": o["lever"],
                "what it does": lever_description(o["lever"]) or "no lever (the evader's baseline)",
                "feasible": "yes" if o["feasible"] else "no",
                "evader cost": units.format_money(o["cost_usd"]) if o["feasible"] else "",
                "cost multiple": f"{o['cost_multiple']:.3g}" if o["feasible"] else "",
                "P(detect)": f"{o['p_detect']:.3f}" if o["feasible"] and math.isfinite(o["p_detect"]) else "",
                "expected detection day": (
                    f"{o['expected_detection_day']:.0f}"
                    if math.isfinite(o["expected_detection_day"] or math.nan)
                    else ""
                ),
                "nodes": f"{o['nodes']:,}" if o["feasible"] else "",
                "node": f"{o['chips_per_node']}x {o['hardware']}" if o["feasible"] else "",
            }
        )
    return rows


def run_uncertainty(
    target: str,
    plan: Mapping[str, Any],
    samples: int,
    seed: int,
    factors: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0),
) -> dict[str, Any]:
    """`uncertainty.plan_samples` at several targets around the chosen one: P10/P50/P90 bands."""
    unc = optional_module("uncertainty")
    if unc is None:
        raise InputError("uncertainty", NOT_AVAILABLE)
    from dispersal.model.search.planner import Constraints

    t0 = logic.parse_flop(target)
    c = Constraints(**plan["constraints"])
    points = []
    for f in factors:
        r = unc.plan_samples(
            t0 * f,
            samples=samples,
            seed=seed,
            regime_name=plan["regime"],
            constraints=c,
            mode=plan["mode"],
            metric=plan["metric"],
            search=plan["search"],
        )
        points.append(
            {
                "target_flop": t0 * f,
                "feasible_fraction": r.feasible_fraction,
                "percentiles": {k: list(v) for k, v in r.percentiles.items()},
                "nominal": dict(r.nominal),
                "metric": r.metric,
            }
        )
    return {"points": points, "samples": samples, "seed": seed}


def uncertainty_rows(res: Mapping[str, Any]) -> list[dict[str, str]]:
    """P10 / P50 / P90 of cost, nodes, compute and days at each target."""
    rows = []
    for p in res["points"]:
        pc = p["percentiles"]

        def band(k: str, fmt: Any, pc: Mapping[str, Any] = pc) -> str:
            lo, mid, hi = pc[k]
            return " / ".join("-" if not math.isfinite(v) else fmt(v) for v in (lo, mid, hi))

        rows.append(
            {
                "target (FLOP)": f"{p['target_flop']:.3g}",
                "feasible draws": f"{p['feasible_fraction']:.0%}",
                "cost P10 / P50 / P90": band("cost_usd", units.format_money),
                "nodes": band("nodes", lambda v: f"{v:,.0f}"),
                "C_quality": band("c_quality_flop", lambda v: f"{v:.3g}"),
                "days": band("days", lambda v: f"{v:.4g}"),
                "nominal cost": units.format_money(p["nominal"]["cost_usd"])
                if math.isfinite(p["nominal"]["cost_usd"])
                else "-",
            }
        )
    return rows


def _show(st: Any, show: Any, kind: str, data: Any) -> None:
    if show is not None:
        show(kind, data)
        return
    from dispersal.app import figures

    chart = (
        figures.countermeasures_figure(data["outcomes"])
        if kind == "countermeasures"
        else figures.uncertainty_figure(data)
    )
    st.html(figures.svg_markup(chart))


def countermeasures_view(
    st: Any, scenario: Any, mode: Any, ui: Mapping[str, Any] | None = None, show: Any = None
) -> str | None:
    """Cost vs P(detect) per countermeasure bundle; a message when not available."""
    if optional_module("countermeasures") is None or ui is None:
        return f"Countermeasures: {NOT_AVAILABLE}."
    conv = _convention_args(ui, scenario)
    st.caption(
        f"The evader re-plans under each lever or bundle to reach {ui['plan_target']} FLOP (target, "
        f"regime, metric and search from the Planner tab; links and window from this scenario: "
        f"{conv['days']:.0f} days). Chip-only cost, as in the report's countermeasure convention."
    )
    key = repr((ui["plan_target"], sorted(conv.items())))
    if st.button("Evaluate countermeasures", key="cm_go"):
        try:
            st.session_state["_cm"] = (key, run_countermeasures(str(ui["plan_target"]), conv))
        except ValueError as exc:
            st.session_state["_cm"] = (key, logic.one_line(exc))
    stored = st.session_state.get("_cm")
    if stored is None:
        return "Press the button to evaluate every lever and the default bundles (a few seconds)."
    if stored[0] != key:
        st.info("Inputs changed since this was computed; press the button to update.")
    if isinstance(stored[1], str):
        st.error(stored[1])
        return None
    _show(st, show, "countermeasures", {"outcomes": stored[1]})
    st.table(countermeasure_rows(stored[1]))
    return None


def uncertainty_view(
    st: Any, scenario: Any, mode: Any, ui: Mapping[str, Any] | None = None, show: Any = None
) -> str | None:
    """P10-P90 bands of the planner's answer; a message when not available."""
    if optional_module("uncertainty") is None or ui is None:
        return f"Uncertainty: {NOT_AVAILABLE}."
    plan = plan_args(ui, logic.scenario_dict(ui))
    st.caption(
        f"Monte Carlo over the uncertain fits and heuristics (data/uncertainty.toml): the planner's answer "
        f"at 0.01x, 0.1x, 1x and 10x the Planner tab's target ({ui['plan_target']} FLOP), 200 draws each, "
        "seed 0. Bands are P10-P90 over feasible draws."
    )
    key = repr(sorted((k, repr(v)) for k, v in plan.items()))
    if st.button("Run the Monte Carlo", key="unc_go"):
        try:
            st.session_state["_unc"] = (key, run_uncertainty(str(ui["plan_target"]), plan, 200, 0))
        except ValueError as exc:
            st.session_state["_unc"] = (key, logic.one_line(exc))
    stored = st.session_state.get("_unc")
    if stored is None:
        return "Press the button to run the Monte Carlo (a few seconds)."
    if stored[0] != key:
        st.info("Inputs changed since this was computed; press the button to update.")
    if isinstance(stored[1], str):
        st.error(stored[1])
        return None
    _show(st, show, "uncertainty", stored[1])
    st.table(uncertainty_rows(stored[1]))
    return None
