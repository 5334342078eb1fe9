"""Glue from UI state to the model's planner, resilience, countermeasure and uncertainty functions.

No Streamlit import at module level (the HTML report uses this too); views that draw receive the
``st`` module. Optional model modules are imported lazily: when one is missing from this version, the
view says so instead of failing.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dispersal.app import logic
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.present import formats as F
from dispersal.present import resilience as present_resilience
from dispersal.present.rows import (
    blocks_the_run,
    countermeasure_order,
    countermeasure_rows,
    sweep_row,
    uncertainty_rows,
)

__all__ = [
    "NOT_AVAILABLE",
    "SWEEPS",
    "countermeasure_rows",
    "countermeasures_view",
    "optional_module",
    "plan_args",
    "resilience",
    "resilience_spec",
    "run_countermeasures",
    "run_plan",
    "run_uncertainty",
    "sweep_points",
    "sweep_row",
    "uncertainty_rows",
    "uncertainty_view",
]

NOT_AVAILABLE = "not available in this version"
#: progress(done, total, what is being computed now): called as long work completes.
Progress = Callable[[int, int, str], None]


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
        # The answer card's premium over one datacenter: plan the centralized baseline too.
        "baseline": True,
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
        baseline=bool(args.get("baseline", False)),
    ).to_dict() | {"constraints": dict(args["constraints"])}


def plan_estimate(p: Mapping[str, Any]) -> dict[str, Any] | None:
    """The plan's own estimate (its scenario, its mode): the traffic in both directions for the answer
    card. None for an infeasible plan."""
    if not p.get("feasible") or not p.get("scenario"):
        return None
    from dispersal.model.inputs.scenario import Scenario
    from dispersal.model.kernel.estimate import estimate

    return estimate(Scenario.from_dict(dict(p["scenario"])), mode=p["mode"]).to_dict()


def uncertainty_key(plan: Mapping[str, Any]) -> str:
    """The key a Monte Carlo result is stored under: its planner arguments."""
    return repr(sorted((k, repr(v)) for k, v in plan.items()))


def reach_samples(stored: Any, args: Mapping[str, Any]) -> dict[str, Any] | None:
    """P(reach) and the cost band at the plan's own target, from the Uncertainty tab's last result
    when it was run for these planner arguments; None otherwise."""
    if not stored or stored[0] != uncertainty_key(args) or isinstance(stored[1], str):
        return None
    t0 = logic.parse_flop(str(args["target"]))
    for pt in stored[1]["points"]:
        if math.isclose(float(pt["target_flop"]), t0, rel_tol=1e-9):
            lo, _mid, hi = pt["percentiles"]["cost_usd"]
            return {
                "feasible_fraction": pt["feasible_fraction"],
                "samples": stored[1]["samples"],
                "cost_usd_p10": lo,
                "cost_usd_p90": hi,
            }
    return None


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

    # The charts need each point's cost only: no centralized baseline per point.
    args = {**args, "baseline": False}
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


# --- resilience ------------------------------------------------------------------------------------------


def resilience_spec(est: Mapping[str, Any], ui: Mapping[str, Any]) -> tuple[Any, str]:
    """A ResilienceSpec for a fleet shaped like this scenario (`present.resilience.fleet_spec`), after
    checking the chip MTBF and restart time against their fields."""
    for key in ("res_chip_mtbf_h", "res_restart_h"):
        err = logic.check_field(key, ui[key])
        if err:
            raise InputError(key, err.partition(": ")[2])
    return present_resilience.fleet_spec(est, ui)


def resilience(est: Mapping[str, Any], ui: Mapping[str, Any], points: int = 25) -> dict[str, Any]:
    """Goodput vs scale and the site-loss outcome (`present.resilience.resilience`), after checking
    every resilience setting against its field (one-line error naming the first bad one)."""
    resilience_spec(est, ui)
    err = logic.check_field("res_max_chips", ui["res_max_chips"])
    if err:
        raise InputError("res_max_chips", err.partition(": ")[2])
    for key in ("res_lose_sites", "res_lose_at_days", "res_down_for_days", "res_run_days"):
        err = logic.check_field(key, ui.get(key))
        if err:
            raise InputError(logic.FIELD_BY_KEY[key].name, err.partition(": ")[2])
    return present_resilience.resilience(est, ui, points)


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


def run_countermeasures(
    target: str,
    conv: Mapping[str, Any],
    progress: Progress | None = None,
    bundles: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """`countermeasures.analyse` (the no-lever baseline, then every lever alone and the default bundles,
    or `bundles`) -> Outcome.to_dict() rows; the same outcomes in the same order.

    The bundles are evaluated one at a time here (`evaluate_bundle` against the baseline's cost, as
    `analyse` does) so that ``progress(done, total, name)`` can be called after each one: the bar of a
    two-minute default-mode run then moves with the re-plans actually finished.
    """
    cm = optional_module("countermeasures")
    if cm is None:
        raise InputError("countermeasures", NOT_AVAILABLE)
    t = logic.parse_flop(target)
    convention = cm.Convention(**conv)
    items = [cm.NO_LEVER]
    for w in bundles if bundles is not None else [*cm.levers(), *cm.default_bundles()]:
        b = cm.parse_bundle(w)
        if b.name not in {x.name for x in items}:
            items.append(b)
    if progress is not None:
        progress(0, len(items), items[0].name)
    base = cm.evaluate_bundle(t, cm.NO_LEVER, convention=convention)
    outs = [base]
    for b in items[1:]:
        if progress is not None:
            progress(len(outs), len(items), b.name)
        outs.append(cm.evaluate_bundle(t, b, convention=convention, baseline_cost_usd=base.cost_usd))
    if progress is not None:
        progress(len(outs), len(items), "")
    return [o.to_dict() for o in outs]


def run_uncertainty(
    target: str,
    plan: Mapping[str, Any],
    samples: int,
    seed: int,
    factors: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """`uncertainty.plan_samples` at several targets around the chosen one: P10/P50/P90 bands.

    ``progress(draws_done, draws_total, label)`` counts the draws of all targets together, as
    `plan_samples` reports them (its nominal plan runs before a target's first draw).
    """
    unc = optional_module("uncertainty")
    if unc is None:
        raise InputError("uncertainty", NOT_AVAILABLE)
    from dispersal.model.search.planner import Constraints

    t0 = logic.parse_flop(target)
    c = Constraints(**plan["constraints"])
    points = []
    total = samples * len(factors)
    for i, f in enumerate(factors):
        label = f"target {i + 1} of {len(factors)} ({F.flop(t0 * f, unit=True)})"

        def report(done: int, _n: int, i: int = i, label: str = label) -> None:
            if progress is not None:
                progress(i * samples + done, total, label)

        report(0, samples)
        r = unc.plan_samples(
            t0 * f,
            samples=samples,
            seed=seed,
            regime_name=plan["regime"],
            constraints=c,
            mode=plan["mode"],
            metric=plan["metric"],
            search=plan["search"],
            progress=report,
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


def _show(st: Any, show: Any, kind: str, data: Any) -> None:
    if show is not None:
        show(kind, data)
        return
    from dispersal.present import figures

    chart = (
        figures.countermeasures_figure(data["outcomes"])
        if kind == "countermeasures"
        else figures.uncertainty_figure(data)
    )
    st.html(figures.svg_markup(chart))


def progress_bar(st: Any, unit: str) -> tuple[Progress, Any]:
    """A `Progress` callback that drives ``st.progress`` with the work actually completed, and the bar.

    The text says how many of how many `unit` are done and what is being computed now; the caller
    empties the bar when the work ends.
    """
    bar = st.progress(0.0, text=f"Starting: 0 {unit} done")

    def update(done: int, total: int, now: str) -> None:
        frac = min(1.0, done / total) if total > 0 else 1.0
        text = f"{done:,} of {total:,} {unit} done" + (f"; now: {now}" if now else "")
        bar.progress(frac, text=text)

    return update, bar


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
            update, bar = progress_bar(st, "levers and bundles")
            try:
                st.session_state["_cm"] = (key, run_countermeasures(str(ui["plan_target"]), conv, update))
            finally:
                bar.empty()
        except ValueError as exc:
            st.session_state["_cm"] = (key, logic.one_line(exc))
    stored = st.session_state.get("_cm")
    if stored is None:
        return (
            "Press the button to evaluate every lever and the default bundles (each one a re-plan: seconds "
            "in paper mode, up to about two minutes in default mode; a bar shows how many are done)."
        )
    if stored[0] != key:
        st.info("Inputs changed since this was computed; press the button to update.")
    if isinstance(stored[1], str):
        st.error(stored[1])
        return None
    blocked = sum(1 for o in stored[1] if blocks_the_run(o))
    st.caption(
        f"{blocked} of {len(stored[1]) - 1} levers and bundles block the run (no plan reaches the target); they "
        "come first, then the rest by the cost multiple they impose. Numbers on the chart are the table's #."
    )
    _show(st, show, "countermeasures", {"outcomes": countermeasure_order(stored[1])})
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
    key = uncertainty_key(plan)
    if st.button("Run the Monte Carlo", key="unc_go"):
        try:
            update, bar = progress_bar(st, "draws")
            try:
                st.session_state["_unc"] = (
                    key,
                    run_uncertainty(str(ui["plan_target"]), plan, 200, 0, progress=update),
                )
            finally:
                bar.empty()
        except ValueError as exc:
            st.session_state["_unc"] = (key, logic.one_line(exc))
    stored = st.session_state.get("_unc")
    if stored is None:
        return (
            "Press the button to run the Monte Carlo (4 targets x 200 draws: seconds in paper mode, up to "
            "about a minute in default mode; a bar shows the draws done)."
        )
    if stored[0] != key:
        st.info("Inputs changed since this was computed; press the button to update.")
    if isinstance(stored[1], str):
        st.error(stored[1])
        return None
    _show(st, show, "uncertainty", stored[1])
    st.table(uncertainty_rows(stored[1]))
    return None
