"""Glue from UI state to the model's planner, resilience, countermeasure and uncertainty functions.

No Streamlit import at module level (the HTML report uses this too); views that draw receive the
``st`` module. Optional model modules are imported lazily: when one is missing from this version, the
view says so instead of failing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from dispersal.app import logic
from dispersal.model.inputs.errors import InputError
from dispersal.present import formats as F
from dispersal.present import questions
from dispersal.present import resilience as present_resilience
from dispersal.present.report import ReportParts
from dispersal.present.rows import (
    blocks_the_run,
    countermeasure_order,
    countermeasure_rows,
    uncertainty_rows,
)

__all__ = [
    "NOT_AVAILABLE",
    "countermeasure_rows",
    "countermeasures_view",
    "optional_module",
    "plan_args",
    "resilience",
    "resilience_spec",
    "run_countermeasures",
    "run_plan",
    "run_uncertainty",
    "uncertainty_rows",
    "uncertainty_view",
]

NOT_AVAILABLE = "not available in this version"
#: progress(done, total, what is being computed now): called as long work completes.
Progress = questions.Progress


class ResultStore:
    """Long results (Monte Carlo, frontier, countermeasures) keyed by their inputs, at most
    ``max_entries`` (least recently used dropped): one cache the views and the report share, so the same
    question is never computed twice. The app holds one per server (``st.cache_resource``); thread-safe
    because Streamlit runs each session in its own thread. Only answers are kept, never errors."""

    def __init__(self, max_entries: int = 64) -> None:
        import threading
        from collections import OrderedDict

        if max_entries < 1:
            raise InputError("max_entries", f"must be >= 1, got {max_entries}")
        self._max = max_entries
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(kind: str, inputs: Mapping[str, Any]) -> str:
        """The digest of a question: its kind and its JSON inputs."""
        return _digest({"kind": kind, "inputs": inputs})

    def peek(self, kind: str, inputs: Mapping[str, Any]) -> Any | None:
        """The stored answer to this question, or None (nothing is computed)."""
        k = self.key(kind, inputs)
        with self._lock:
            if k not in self._items:
                return None
            self._items.move_to_end(k)
            return self._items[k]

    def get_or_run(self, kind: str, inputs: Mapping[str, Any], run: Callable[[], Any]) -> tuple[Any, bool]:
        """(answer, True) when stored; else (run(), False) after storing it. ``run`` is called outside
        the lock (a long computation does not block other sessions)."""
        hit = self.peek(kind, inputs)
        if hit is not None:
            return hit, True
        out = run()
        with self._lock:
            self._items[self.key(kind, inputs)] = out
            while len(self._items) > self._max:
                self._items.popitem(last=False)
        return out, False


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
    """JSON-able planner arguments: the Planner tab's settings plus this scenario's links and budget
    (`present.questions.planner_args`, which `dispersal report --plan` uses too)."""
    return questions.planner_args(
        sd,
        target=str(ui["plan_target"]),
        regime=ui["plan_regime"],
        mode=ui["mode"],
        metric=ui["plan_metric"],
        objective=ui["plan_objective"],
        search=ui["plan_search"],
        links=ui.get("links", "one"),
    )


run_plan = questions.run_plan
run_countermeasures = questions.run_countermeasures
run_uncertainty = questions.run_uncertainty


def plan_estimate(p: Mapping[str, Any]) -> dict[str, Any] | None:
    """The plan's own estimate (its scenario, its mode): the traffic in both directions for the answer
    card. None for an infeasible plan."""
    if not p.get("feasible") or not p.get("scenario"):
        return None
    from dispersal.model.inputs.scenario import Scenario
    from dispersal.model.run.estimate import estimate

    return estimate(Scenario.from_dict(dict(p["scenario"])), mode=p["mode"]).to_dict()


def uncertainty_key(plan: Mapping[str, Any]) -> str:
    """The key a Monte Carlo result is stored under: its planner arguments."""
    return repr(sorted((k, repr(v)) for k, v in plan.items()))


def reach_samples(stored: Any, args: Mapping[str, Any]) -> dict[str, Any] | None:
    """P(reach) and the cost band at the plan's own target, from the Uncertainty tab's last result
    when it was run for these planner arguments; None otherwise."""
    if not stored or stored[0] != uncertainty_key(args) or isinstance(stored[1], str):
        return None
    return questions.reach_samples(stored[1], str(args["target"]))


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


def convention_args(ui: Mapping[str, Any], sd: Mapping[str, Any]) -> dict[str, Any]:
    """The countermeasure convention of the UI state (`present.questions.convention_args`): the
    report's by default, shared with `dispersal counter`; or this scenario's."""
    return questions.convention_args(
        ui.get("cm_convention", "report"),
        sd,
        mode=ui["mode"],
        metric=ui["plan_metric"],
        search=ui["plan_search"],
        regime=ui["plan_regime"],
    )


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


def cached(store: ResultStore | None, kind: str, inputs: Mapping[str, Any], run: Callable[[], Any]) -> Any:
    """``run()`` through the shared store (computed once per inputs), or directly without one."""
    return run() if store is None else store.get_or_run(kind, inputs, run)[0]


def adopt(
    st: Any, slot: str, key: str, store: ResultStore | None, kind: str, inputs: Mapping[str, Any]
) -> None:
    """Show a stored answer without a button press: when the session's ``slot`` holds nothing for
    ``key`` and the shared store already answered these inputs (this view earlier, another view such as
    the report, or another session), the session takes it."""
    stored = st.session_state.get(slot)
    if store is None or (stored is not None and stored[0] == key):
        return
    hit = store.peek(kind, inputs)
    if hit is not None:
        st.session_state[slot] = (key, hit)


STALE = "Inputs changed since this was computed; press the button to update."


def stored_answer(st: Any, slot: str, key: str, prompt: str, stale: str = STALE) -> tuple[Any, str | None]:
    """The answer a view keeps in the session's ``slot`` as ``(key, answer or error line)``:
    ``(answer, None)`` to draw (with a note when it was computed for other inputs than ``key``),
    ``(None, prompt)`` when nothing is stored yet, ``(None, None)`` after showing a stored error."""
    stored = st.session_state.get(slot)
    if stored is None:
        return None, prompt
    if stored[0] != key:
        st.info(stale)
    if isinstance(stored[1], str):
        st.error(stored[1])
        return None, None
    return stored[1], None


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


CONVENTION_LABELS = {
    "report": "the report's (paper mode, 548 days, 100 Mbps / 100 ms; as `dispersal counter`)",
    "scenario": "this scenario's (its mode, time budget and links)",
}


def countermeasures_view(
    st: Any,
    scenario: Any,
    mode: Any,
    ui: Mapping[str, Any] | None = None,
    show: Any = None,
    store: ResultStore | None = None,
) -> str | None:
    """Cost vs P(detect) per countermeasure bundle; a message when not available."""
    if optional_module("countermeasures") is None or ui is None:
        return f"Countermeasures: {NOT_AVAILABLE}."
    choice = st.radio(
        "Convention",
        list(CONVENTION_LABELS),
        format_func=CONVENTION_LABELS.__getitem__,
        horizontal=True,
        key="cm_convention",
        help="The report's convention is the default of both the app and `dispersal counter`; 'this "
        "scenario' is `dispersal counter --mode M --days D --bandwidth B --latency L` with its values.",
    )
    ui = {**ui, "cm_convention": choice}
    conv = convention_args(ui, logic.scenario_dict(ui))
    st.caption(
        f"The evader re-plans under each lever or bundle to reach {ui['plan_target']} FLOP (target and "
        f"regime from the Planner tab). Convention: {questions.describe_convention(conv)}. Same as "
        f"`{counter_command(ui, conv)}`."
    )
    key = cm_key(ui, conv)
    inputs = {"target": str(ui["plan_target"]), "convention": conv}
    if st.button("Evaluate countermeasures", key="cm_go"):
        try:
            update, bar = progress_bar(st, "levers and bundles")
            # The table grows as the levers are evaluated (the baseline first): the first answer at once.
            partial = st.empty()
            try:
                out = cached(
                    store,
                    "countermeasures",
                    inputs,
                    lambda: run_countermeasures(
                        str(ui["plan_target"]),
                        conv,
                        update,
                        on_outcome=lambda rows: partial.table(countermeasure_rows(rows)),
                    ),
                )
                st.session_state["_cm"] = (key, out)
            finally:
                bar.empty()
                partial.empty()
        except ValueError as exc:
            st.session_state["_cm"] = (key, logic.one_line(exc))
    adopt(st, "_cm", key, store, "countermeasures", inputs)
    outcomes, msg = stored_answer(
        st,
        "_cm",
        key,
        "Press the button to evaluate every lever and the default bundles (each one a re-plan: seconds "
        "in paper mode, up to about two minutes in default mode; a bar shows how many are done).",
    )
    if outcomes is None:
        return msg
    blocked = sum(1 for o in outcomes if blocks_the_run(o))
    st.caption(
        f"{blocked} of {len(outcomes) - 1} levers and bundles block the run (no plan reaches the target); they "
        "come first, then the rest by the cost multiple they impose. Numbers on the chart are the table's #."
    )
    _show(st, show, "countermeasures", {"outcomes": countermeasure_order(outcomes)})
    st.table(countermeasure_rows(outcomes))
    return None


def cm_key(ui: Mapping[str, Any], conv: Mapping[str, Any]) -> str:
    """The key a countermeasures result is stored under: target and convention."""
    return repr((ui["plan_target"], sorted(conv.items())))


def counter_command(ui: Mapping[str, Any], conv: Mapping[str, Any]) -> str:
    """The `dispersal counter` command line that computes the same outcomes (defaults left out)."""
    from dispersal.model.analyses.countermeasures import Convention

    c, d = Convention(**conv), Convention()
    parts = ["dispersal counter", f"--target {ui['plan_target']}"]
    if c.base_regime != d.base_regime:
        parts.append(f"--regime {c.base_regime}")
    if c.mode != d.mode:
        parts.append(f"--mode {c.mode}")
    if c.days != d.days:
        parts.append(f"--days {c.days:g}")
    if c.metric != d.metric:
        parts.append(f"--metric {c.metric}")
    if c.bandwidth_bits_per_s != d.bandwidth_bits_per_s:
        parts.append(f"--bandwidth {c.bandwidth_bits_per_s / 1e6:g}Mbps")
    if c.latency_s != d.latency_s:
        parts.append(f"--latency {c.latency_s * 1e3:g}ms")
    if c.search != d.search:
        parts.append(f"--search {c.search}")
    return " ".join(parts)


#: The Uncertainty tab's Monte Carlo: draws per target and seed (`dispersal report --uncertainty 200`).
UNCERTAINTY_SAMPLES = 200
UNCERTAINTY_SEED = 0


def uncertainty_request(ui: Mapping[str, Any]) -> dict[str, Any]:
    """The Uncertainty tab's Monte Carlo question (the shared store's key): target, planner arguments,
    draws and seed."""
    return {
        "target": str(ui["plan_target"]),
        "plan": plan_args(ui, logic.scenario_dict(ui)),
        "samples": UNCERTAINTY_SAMPLES,
        "seed": UNCERTAINTY_SEED,
    }


def uncertainty_view(
    st: Any,
    scenario: Any,
    mode: Any,
    ui: Mapping[str, Any] | None = None,
    show: Any = None,
    store: ResultStore | None = None,
) -> str | None:
    """P10-P90 bands of the planner's answer; a message when not available."""
    if optional_module("uncertainty") is None or ui is None:
        return f"Uncertainty: {NOT_AVAILABLE}."
    req = uncertainty_request(ui)
    plan = req["plan"]
    st.caption(
        f"Monte Carlo over the uncertain fits and heuristics (data/uncertainty.toml): the planner's answer "
        f"at 0.01x, 0.1x, 1x and 10x the Planner tab's target ({ui['plan_target']} FLOP), "
        f"{UNCERTAINTY_SAMPLES} draws each, seed {UNCERTAINTY_SEED}; computed once per inputs and kept "
        "(the Frontier view, the answer card and the report reuse it). P(reach) first: the share of draws that reach each target (the chart's top panel, with the "
        "share that cannot); the P10-P90 band is over the draws that reach it."
    )
    key = uncertainty_key(plan)
    if st.button("Run the Monte Carlo", key="unc_go"):
        try:
            update, bar = progress_bar(st, "draws")
            first = st.empty()
            try:
                out = cached(
                    store,
                    "uncertainty",
                    req,
                    lambda: run_uncertainty(
                        req["target"],
                        plan,
                        req["samples"],
                        req["seed"],
                        progress=update,
                        on_point=lambda pt: first.markdown(_first_point_line(pt, req["samples"])),
                    ),
                )
                st.session_state["_unc"] = (key, out)
            finally:
                bar.empty()
                first.empty()
        except ValueError as exc:
            st.session_state["_unc"] = (key, logic.one_line(exc))
    adopt(st, "_unc", key, store, "uncertainty", req)
    res, msg = stored_answer(
        st,
        "_unc",
        key,
        "Press the button to run the Monte Carlo (4 targets x 200 draws: seconds in paper mode, up to "
        "about a minute in default mode; a bar shows the draws done).",
    )
    if res is None:
        return msg
    _show(st, show, "uncertainty", res)
    st.table(uncertainty_rows(res))
    return None


def _first_point_line(pt: Mapping[str, Any], samples: int) -> str:
    """The chosen target's answer while the other targets are drawn (the Monte Carlo's first number)."""
    lo, _mid, hi = pt["percentiles"].get("cost_usd", [None, None, None])
    return (
        f"**{F.flop(float(pt['target_flop']), unit=True)}: P(reach) {F.percent(float(pt['feasible_fraction']))} "
        f"of {samples:,} draws, cost P10-P90 {_usd(lo)} - {_usd(hi)}**; drawing the other targets..."
    )


# --- the report of the app's state -----------------------------------------------------------------------


def _digest(args: Mapping[str, Any]) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()


#: The session keys `report_parts` reads: the stored results, the used plan and the convention.
REPORT_STATE = ("_plan", "_unc", "_cm", "_origin", "cm_convention", "_mon", "_fr")


def report_parts(
    ui: Mapping[str, Any],
    label: str,
    session: Mapping[str, Any],
    *,
    frontier: bool = False,
    run_frontier: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report's parts from the app's state: the last plan, countermeasures and Monte Carlo that were
    computed for the current inputs (a plan taken with "use this plan" counts as current), the frontier
    when asked (``run_frontier(request)``: the app's shared store, so the Frontier view's answer to the
    same question is reused), the resilience settings and the label.
    Returns {"parts": ReportParts, "plan", "counter", "uncertainty", "use_plan"} (the flags of the
    equivalent `dispersal report` command)."""
    sd = logic.scenario_dict(ui)
    args = plan_args(ui, sd)
    origin = session.get("_origin")
    plan = None
    use_plan = False
    stored = session.get("_plan")
    if stored and "error" not in stored[1]:
        if stored[0] == _digest(args):
            plan = stored[1]
        elif origin and stored[1].get("feasible") and origin["label"] == label == logic.plan_label(stored[1]):
            plan, use_plan = stored[1], True
    unc_stored = session.get("_unc")
    unc = unc_stored[1] if unc_stored and unc_stored[0] == uncertainty_key(args) else None
    unc = None if isinstance(unc, str) else unc
    conv = convention_args({**ui, "cm_convention": session.get("cm_convention", "report")}, sd)
    cm_stored = session.get("_cm")
    cm = cm_stored[1] if cm_stored and cm_stored[0] == cm_key(ui, conv) else None
    cm = None if isinstance(cm, str) else cm
    fr = None
    if frontier:
        # The frontier's P(reach) takes as many draws as the Monte Carlo (`dispersal report --uncertainty N`
        # draws both); none when the Uncertainty tab has not run.
        # The Frontier view's question shape, so a frontier the view computed at the plan's target with
        # the default premiums and as many draws is the report's too (one store key).
        req = {
            "plan": args,
            "targets": [str(ui["plan_target"])],
            "premiums": [float(x) for x in questions.FRONTIER_PREMIUMS],
            "samples": int(unc["samples"]) if unc else 0,
            "seed": int(unc["seed"]) if unc else 0,
        }
        fr = (run_frontier or run_frontier_request)(req)
    convention = str(session.get("cm_convention", "report"))
    mon_args = monitor_request(ui, convention)
    mon_stored = session.get("_mon")
    mon = mon_stored[1] if mon_stored and mon_stored[0] == _digest(mon_args) else None
    mon = None if isinstance(mon, str) else mon
    parts = ReportParts(
        plan=questions.with_reach(plan, unc) if plan is not None else None,
        links=args["links"],
        frontier=fr,
        counter=cm,
        convention=questions.describe_convention(conv),
        uncertainty=unc,
        resilience={k: ui[k] for k in present_resilience.DEFAULTS},
        label=label,
        monitor=mon,
        monitor_days=float(mon_args["max_duration_s"]) / 86400.0 if mon is not None else None,
        target=str(ui["plan_target"]),
        regime=str(ui["plan_regime"]),
    )
    return {"parts": parts, "use_plan": use_plan, "convention": convention}


def report_command(ui: Mapping[str, Any], parts: Mapping[str, Any], frontier: bool) -> str:
    """The `dispersal report` options for the same questions (the scenario's own edits, if any, are
    --set options of the sidebar's values; a used plan is --use-plan from the scenario it was planned in)."""
    rp: ReportParts = parts["parts"]
    out = [f"dispersal report {ui['preset']} --mode {ui['mode']} --target {ui['plan_target']}"]
    # `dispersal report` answers everything by default: the sections the app has not computed are
    # switched off (--no-...), those it has are the defaults.
    out.append(("--use-plan" if parts["use_plan"] else "") if rp.plan is not None else "--no-plan")
    if not frontier:
        out.append("--no-frontier")
    if rp.monitor is None:
        out.append("--no-monitor")
    elif int(ui.get("mon_lose_sites", 1)) != 1:
        out.append(f"--monitor-lose-sites {int(ui['mon_lose_sites'])}")
    if rp.counter is None:
        out.append("--no-counter")
    if parts["convention"] == "scenario" and (rp.counter is not None or rp.monitor is not None):
        out.append("--convention scenario")
    if rp.uncertainty is not None:
        out.append(f"--uncertainty {int(rp.uncertainty['samples'])} --seed {int(rp.uncertainty['seed'])}")
    else:
        out.append("--uncertainty 0")
    for key, flag in (
        ("plan_regime", "--plan-regime"),
        ("plan_metric", "--metric"),
        ("plan_objective", "--objective"),
        ("plan_search", "--search"),
        ("links", "--links"),
    ):
        if ui.get(key) != logic.default_ui(ui["preset"]).get(key):
            out.append(f"{flag} {ui[key]}")
    for key, flag in (
        ("res_lose_sites", "--lose-sites"),
        ("res_lose_at_days", "--lose-at"),
        ("res_down_for_days", "--down-for"),
        ("res_run_days", "--run-days"),
    ):
        if ui.get(key) is not None and ui.get(key) != present_resilience.DEFAULTS[key]:
            out.append(f"{flag} {ui[key]:g}")
    for key, flag in (
        ("res_chip_mtbf_h", "--mtbf"),
        ("res_restart_h", "--restart"),
        ("res_max_chips", "--max-chips"),
    ):
        if ui.get(key) != present_resilience.DEFAULTS[key]:
            out.append(f"{flag} {ui[key]!r}")
    if not parts["use_plan"]:
        out += [f"--set {k}={v}" for k, v in set_options(ui)]
    return " ".join(x for x in out if x)


def set_options(ui: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, value) of every Scenario field (SI units) that differs from the preset's: the `--set`
    options that make `dispersal report PRESET` the sidebar's scenario."""
    now = logic.scenario_dict(ui)
    base = logic.scenario_dict(logic.default_ui(ui["preset"]))
    out = []
    for k, v in now.items():
        if k == "name" or v == base.get(k) or v is None:
            continue
        text = (
            ("true" if v else "false") if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)
        )
        out.append((k, text))
    return out


# --- Frontier, Monitor and Fleet (issue 34) --------------------------------------------------------------


def frontier_request(ui: Mapping[str, Any]) -> dict[str, Any]:
    """The Frontier view's question from the UI state: planner arguments (the Planner's regime, the
    sidebar's mode, links and budget), the targets (empty = the Planner's), premiums, draws and seed."""
    plan = plan_args(ui, logic.scenario_dict(ui))
    targets = questions.parse_targets(str(ui.get("fr_targets") or "")) or [str(ui["plan_target"])]
    return {
        "plan": plan,
        "targets": targets,
        "premiums": questions.parse_premiums(str(ui.get("fr_premiums") or "1.5, 2, 5")),
        "samples": int(ui.get("fr_samples", 100)),
        "seed": 0,
    }


def run_frontier_request(
    req: Mapping[str, Any], on_curve: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """`questions.run_frontier` for a `frontier_request` (the app caches this on its JSON); ``on_curve``
    gets each target's first answer as soon as its search is done."""
    return questions.run_frontier(
        req["plan"],
        int(req["samples"]),
        int(req["seed"]),
        targets=req["targets"],
        premiums=req["premiums"],
        on_curve=on_curve,
    )


def _usd(x: Any) -> str:
    """Money, or "-" where no draw reached the target (no band)."""
    import math

    return F.money(float(x)) if x is not None and math.isfinite(float(x)) else "-"


def monitor_request(ui: Mapping[str, Any], convention: str) -> dict[str, Any]:
    """The Monitor view's `monitor.compare` arguments under the countermeasure convention ``convention``
    (the Countermeasures tab's radio): one convention for both tabs' P(detect)."""
    conv = convention_args({**ui, "cm_convention": convention}, logic.scenario_dict(ui))
    return questions.monitor_args(conv, str(ui["plan_target"]), int(ui.get("mon_lose_sites", 1)))
