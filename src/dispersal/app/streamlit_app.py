"""The interactive simulator: a thin Streamlit layer over `dispersal.model`.

Run with ``dispersal app`` (or ``streamlit run`` on this file). All state lives in the URL query
parameters (see `dispersal.app.logic`), so a configuration can be shared by link. Every number comes
from `dispersal.model`; this file only lays out widgets, tables and figures.

State: every widget is drawn on every run (an invalid scenario shows its error inside each view
instead of skipping the views), so Streamlit never drops a widget's value; a canonical copy of the
UI state (``_store``) restores any key that is missing all the same. Results that do not change
with an edit are cached: the estimate and every figure on their JSON input, planner runs per
argument set, and the Countermeasures / Uncertainty results together with their figures.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

import streamlit as st

from dispersal.app import compare, logic, page_text, question_views, sites_panel, views
from dispersal.model.inputs.scenario import Scenario
from dispersal.model.run.estimate import estimate
from dispersal.present import answer, export, provenance, questions
from dispersal.present import formats as F
from dispersal.present import rows as present_rows
from dispersal.present.report import render_html

#: The sidebar: logic.LAYOUT's sections, then every other Scenario field (derived from its declaration).
SIDEBAR_GROUPS: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
    *logic.LAYOUT,
    ("More model settings", False, logic.GENERIC_KEYS),
)
PLAN_KEYS = ("plan_target", "plan_regime", "plan_metric", "plan_objective", "plan_search")
RES_KEYS = ("res_chip_mtbf_h", "res_restart_h", "res_max_chips")
LOSS_KEYS = ("res_lose_sites", "res_lose_at_days", "res_down_for_days", "res_run_days")
#: The views' tab labels by their ``?view=`` name (`fields.VIEWS`, in tab order), and back.
VIEW_LABELS = {v: v.capitalize() for v in logic.FIELD_BY_KEY["view"].choices}
VIEW_SLUGS = {label: v for v, label in VIEW_LABELS.items()}
#: The tabs widget's key: its state is the open tab's label (bound to the "view" field, so the URL).
VIEW_TAB = "view_tab"
#: Widget settings outside `logic.FIELDS` that must outlive a view that is not drawn.
KEPT_WIDGETS = ("cm_convention", "cmp_axis", "fr_year", "report_frontier")


def _init_state() -> None:
    """First run of a session: the UI state from the URL (a shared link) or the default preset.

    Later runs: any UI key missing from the session (Streamlit drops the state of a widget that was
    not drawn) is restored from the canonical copy of the last run, never from a widget default.
    """
    if st.session_state.get("_init"):
        store = st.session_state.get("_store") or logic.default_ui()
        for f in logic.FIELDS:
            if f.key not in st.session_state:
                st.session_state[f.key] = store[f.key]
        # Only the open view is drawn, and Streamlit drops the state of a widget it did not draw: the
        # settings kept outside `logic.FIELDS` are re-set here, which keeps them (Streamlit's idiom).
        for k in KEPT_WIDGETS:
            if k in st.session_state:
                st.session_state[k] = st.session_state[k]
        st.session_state["view"] = VIEW_SLUGS.get(str(st.session_state.get(VIEW_TAB)), "estimate")
        return
    params = st.query_params.to_dict()
    ui, warnings = logic.ui_from_query(params)
    for k, v in ui.items():
        st.session_state[k] = v
    origin = logic.origin_from_query(params, ui)
    if origin is not None:
        st.session_state["_origin"] = origin
    # The open tab of a shared link (?view=frontier); the tabs widget holds its label.
    st.session_state[VIEW_TAB] = VIEW_LABELS[ui["view"]]
    st.session_state["_store"] = dict(ui)
    st.session_state["_warnings"] = warnings
    st.session_state["_init"] = True


def _on_preset() -> None:
    base = logic.default_ui(st.session_state["preset"])
    for k in logic.SCENARIO_KEYS:
        st.session_state[k] = base[k]
    st.session_state.pop("_origin", None)


def _use_plan(p: dict[str, Any]) -> None:
    """ "Use this plan as the scenario": the plan's scenario and mode replace the sidebar's, so Estimate,
    Countermeasures, Uncertainty, Resilience and the report all show it (issue 24)."""
    new, origin = logic.ui_from_plan(st.session_state["_store"], p)
    for k in (*logic.SCENARIO_KEYS, "mode"):
        st.session_state[k] = new[k]
    st.session_state["_store"] = new
    st.session_state["_origin"] = origin


def _scenario_caption(label: str) -> None:
    st.caption(f"Scenario: {label}")


def widget(key: str, container: Any = st) -> Any:
    """Render the input for one field, bound to st.session_state[key], with its help text."""
    f = logic.FIELD_BY_KEY[key]
    kw: dict[str, Any] = {"key": key, "help": f.help or None}
    if f.kind == "choice":
        return container.selectbox(
            f.label, list(f.choices), on_change=_on_preset if key == "preset" else None, **kw
        )
    if f.kind == "bool":
        return container.checkbox(f.label, **kw)
    if f.kind == "str":
        return container.text_input(f.label, **kw)
    if f.kind == "int":
        return container.number_input(f.label, step=1, format="%d", **kw)
    return container.number_input(
        f.label,
        step=page_text.STEPS.get(key, 0.1),
        format="%g",
        placeholder=page_text.PLACEHOLDERS.get(key, "mode default") if f.kind == "optfloat" else None,
        **kw,
    )


def _sidebar() -> None:
    sb = st.sidebar
    sb.header("Scenario")
    widget("preset", sb)
    widget("mode", sb)
    for title, expanded, keys in SIDEBAR_GROUPS:
        if not keys:
            continue
        with sb.expander(title, expanded=expanded):
            for k in keys:
                widget(k)
    sites_panel.sites_editor(sb, _ui)
    sb.caption(
        "Custom hardware: pick the closest accelerator, then override its per-chip FLOP/s, memory, price "
        "and power (Hardware section); empty fields keep the catalogue's values."
    )


def _ui() -> dict[str, Any]:
    ui = {f.key: st.session_state.get(f.key, st.session_state["_store"][f.key]) for f in logic.FIELDS}
    st.session_state["_store"] = dict(ui)
    return ui


def _sync_url(ui: dict[str, Any]) -> None:
    q = logic.query_from_ui(ui, st.session_state.get("_origin"))
    if st.query_params.to_dict() != q:
        st.query_params.from_dict(q)


@st.cache_data(show_spinner=False, max_entries=128)
def _estimate_cached(scenario_json: str, mode: str) -> dict[str, Any]:
    return estimate(Scenario.from_dict(json.loads(scenario_json)), mode=mode).to_dict()


def _builders() -> dict[str, Any]:
    """Each figure kind's builder (JSON input -> Chart). Matplotlib is imported here, on the first
    figure, so a cold session shows its first numbers before paying for it."""
    from dispersal.present import figures

    return {
        "waterfall": lambda d: figures.waterfall_figure(d),
        "breakdown": lambda d: figures.breakdown_figure(d),
        "plan": lambda d: figures.plan_figure(d),
        "goodput": lambda d: figures.goodput_figure(d["chips"], d["curves"], marker=d["fleet_chips"]),
        "curve": lambda d: figures.cost_curve_figure(
            d["axis"],
            d["current"],
            d.get("baseline"),
            current_label=d["current_label"],
            baseline_label=d.get("baseline_label", "pinned baseline"),
            building_usd=d.get("building_usd"),
        ),
        "countermeasures": lambda d: figures.countermeasures_figure(d["outcomes"]),
        "uncertainty": lambda d: figures.uncertainty_figure(d),
        "frontier": lambda d: _frontier_figure(d),
    }


def _frontier_figure(d: dict[str, Any]) -> Any:
    from dispersal.present.frontier_figures import frontier_figure

    return frontier_figure(d)


#: Matplotlib is not thread-safe and Streamlit runs each session in its own thread: one figure at a time.
_DRAW_LOCK = threading.Lock()


@st.cache_data(show_spinner=False, max_entries=128)
def _figure_svg(kind: str, payload: str) -> str:
    """Inline SVG of one figure, cached on its JSON input (reruns with unchanged inputs redraw nothing)."""
    from dispersal.present import figures

    with _DRAW_LOCK:
        return figures.svg_markup(_builders()[kind](json.loads(payload)))


def show_figure(kind: str, data: Any) -> None:
    """Draw a figure (SVG with hover values and alt text) from its JSON-able input."""
    # Inline (not an <img>), so the <title> of each mark shows as a tooltip; one line, so markdown keeps it
    # as one raw HTML block.
    st.markdown(_figure_svg(kind, json.dumps(data, sort_keys=True, default=str)), unsafe_allow_html=True)


def _blocked() -> None:
    st.info("This view updates once the input error shown above is fixed; its inputs are kept.")


def _table(rows: list[dict[str, str]]) -> None:
    st.table(rows)


def _estimate_tab(est: dict[str, Any], ui: dict[str, Any]) -> None:
    if est["feasible"]:
        st.success("Feasible under the model.")
    else:
        st.warning("Infeasible: " + "; ".join(est["reasons"]))
    st.caption(provenance.estimate_provenance(est, ui.get("links", "one")))
    c = st.columns(4)
    c[0].metric("Training time", F.days(est["days"], unit="d"))
    c[1].metric(
        "C_local", F.flop(est["c_local_flop"], unit=True), help="C_raw x eta; the paper's target metric."
    )
    c[2].metric(
        "C_quality",
        F.flop(est["c_quality_flop"], unit=True),
        help="C_local x chi; the countermeasure metric.",
    )
    c[3].metric("Cost", F.money(est["cost"]["total_usd"]))
    name = logic.slug(est["scenario"]["name"])[:40] or "scenario"
    d1, d2, _ = st.columns([1, 1, 4])
    d1.download_button(
        "Download JSON", export.to_json(est), file_name=f"{name}.json", mime="application/json", key="dl_json"
    )
    d2.download_button(
        "Download CSV", export.to_csv(est), file_name=f"{name}.csv", mime="text/csv", key="dl_csv"
    )
    left, right = st.columns(2)
    with left:
        st.subheader("Summary")
        _table(present_rows.summary_rows(est))
    with right:
        st.subheader("Efficiency: C_raw to C_local to C_quality")
        show_figure("waterfall", est)
        _table(present_rows.efficiency_rows(est))
    left, right = st.columns(2)
    with left:
        st.subheader("Time breakdown")
        show_figure("breakdown", est)
        _table(present_rows.breakdown_rows(est))
    with right:
        st.subheader("Cost")
        _table(present_rows.cost_rows(est))
        st.subheader("WAN traffic per node")
        _table(present_rows.traffic_rows(est))
    if est.get("sites"):
        st.subheader("Per site")
        st.caption(present_rows.sync_pacing_text(est))
        _table(present_rows.site_rows(est))


@st.cache_data(show_spinner=False, max_entries=256)
def _plan_cached(args_json: str) -> dict[str, Any]:
    return views.run_plan(json.loads(args_json))


@st.cache_data(show_spinner=False, max_entries=64)
def _plan_estimate(scenario_json: str, mode: str) -> dict[str, Any] | None:
    return views.plan_estimate({"feasible": True, "scenario": json.loads(scenario_json), "mode": mode})


def _plan(args: dict[str, Any]) -> dict[str, Any]:
    return _plan_cached(json.dumps(args, sort_keys=True))


def _sweeps(
    args: dict[str, Any],
    first: str | None = None,
    on_axis: Any = None,
    known: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """`compare.sweeps` with each plan cached on its arguments and a bar counting the plans done."""
    update, bar = views.progress_bar(st, "plans")
    try:
        return compare.sweeps(args, _plan, first=first, on_axis=on_axis, known=known, progress=update)
    finally:
        bar.empty()


def _args_label(args: dict[str, Any]) -> str:
    c = args["constraints"]
    return (
        f"{args['target']} FLOP, {F.bandwidth(c['bandwidth_up_bits_per_s'])}, "
        f"{F.duration(c['latency_s'])}, {args['mode']} mode, {args['regime']}"
    )


def _planner_tab(ui: dict[str, Any], built: logic.Built) -> None:
    st.caption(
        "The cheapest configuration reaching a compute target while every node stays under the regime's "
        "covered-cluster rule, using this scenario's WAN, time budget, compression, MFU and stragglers."
    )
    c = st.columns(5)
    for col, k in zip(c, PLAN_KEYS, strict=True):
        widget(k, col)
    if built.scenario is None:
        _blocked()
        return
    args = views.plan_args(ui, logic.scenario_dict(ui))
    key = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()
    b1, b2, b3 = st.columns([2, 2, 2])
    if b1.button("Find the cheapest plan", key="plan_go", type="primary"):
        try:
            st.session_state["_plan"] = (key, _plan(args), args)
        except ValueError as exc:
            st.session_state["_plan"] = (key, {"error": logic.relabel(logic.one_line(exc))}, args)
    stored = st.session_state.get("_plan")
    if stored is None:
        st.info(
            "Press the button to search (about a second in paper mode; up to a minute for a default-mode exact search that finds no plan)."
        )
        return
    p, p_args = stored[1], stored[2]
    origin = st.session_state.get("_origin")
    if stored[0] != key and not (origin and "error" not in p and origin["label"] == logic.plan_label(p)):
        st.info("Inputs changed since this plan was computed; press the button to update.")
    if "error" in p:
        st.error(p["error"])
        return
    card = answer.answer_card(
        p,
        links=p_args.get("links", "one"),
        estimate=_plan_estimate(json.dumps(p.get("scenario"), sort_keys=True), p["mode"])
        if p["feasible"]
        else None,
        samples=views.reach_samples(_unc_for(p_args), p_args),
    )
    with st.container(border=True):
        st.markdown(card.markdown())
        if p["feasible"]:
            st.button(
                "Use this plan as the scenario",
                key="plan_use",
                on_click=_use_plan,
                args=(p,),
                help="The plan's sites, hardware, model and links become the sidebar scenario: Estimate, "
                "Countermeasures, Uncertainty, Resilience and the report then show this plan.",
            )
    st.caption(provenance.plan_provenance(p, p_args.get("links", "one")))
    if not p["feasible"]:
        st.warning("No plan reaches the target: " + "; ".join(p["reasons"]))
    else:
        st.success(
            f"Cheapest: {p['nodes']:,} nodes of {p['chips_per_node']}x {p['hardware']} {p['precision']}, "
            f"{F.algorithm(p)}, {F.count(p['params'])} parameters, {F.days(p['days'])}, "
            f"{F.money(p['cost_usd'])}."
        )
        show_figure("plan", p)
        st.subheader("Best plan per hardware (runners-up)")
        _table(present_rows.plan_rows(p))
    if p.get("failures"):
        with st.expander("Hardware that cannot reach the target"):
            _table([{"hardware": k, "why": v} for k, v in p["failures"].items()])
    _compare(p_args, b2, b3, p)


def _unc_for(p_args: dict[str, Any]) -> Any:
    """The Uncertainty tab's Monte Carlo for these planner arguments: this session's, else the shared
    store's (another session or an earlier run), else whatever the session holds (reach_samples checks)."""
    own = st.session_state.get("_unc")
    if own and own[0] == views.uncertainty_key(p_args):
        return own
    req = {
        "target": str(p_args["target"]),
        "plan": p_args,
        "samples": views.UNCERTAINTY_SAMPLES,
        "seed": views.UNCERTAINTY_SEED,
    }
    hit = _results().peek("uncertainty", req)
    return (views.uncertainty_key(p_args), hit) if hit is not None else own


def _compare(p_args: dict[str, Any], pin_col: Any, clear_col: Any, plan: dict[str, Any]) -> None:
    """Cost vs bandwidth / distance / target for the last plan (`plan`, found with `p_args`), with a
    pinned baseline beside it."""
    building_usd = plan.get("centralized_cost_usd")
    st.subheader("Compare: cost vs bandwidth, distance and target")
    if pin_col.button("Pin this plan as the baseline", key="pin_go"):
        # Only the arguments are kept; the baseline's curves are planned (and cached) when drawn.
        st.session_state["_baseline"] = {"args": p_args, "label": "baseline: " + _args_label(p_args)}
    if st.session_state.get("_baseline") and clear_col.button("Clear the baseline", key="pin_clear"):
        st.session_state.pop("_baseline", None)
    if st.button("Draw the comparison charts (15 plans, cached)", key="cmp_go"):
        # The chart on screen is planned first and drawn as its points arrive (the Planner's own plan
        # first); the other two follow (a bar counts).
        shown = str(st.session_state.get("cmp_axis", compare.SWEEPS[0]))
        early = st.empty()

        def draw_first(axis: str, rows: list[dict[str, Any]]) -> None:
            if axis == shown:
                with early.container():
                    show_figure("curve", _curve_data(axis, rows, None, building_usd))

        try:
            st.session_state["_cmp"] = (
                json.dumps(p_args, sort_keys=True),
                _sweeps(p_args, first=shown, on_axis=draw_first, known=(p_args, plan)),
            )
        finally:
            early.empty()
        base = st.session_state.get("_baseline")
        if base and "sweeps" not in base:
            base["sweeps"] = _sweeps(base["args"])
    cmp = st.session_state.get("_cmp")
    base = st.session_state.get("_baseline")
    if base:
        st.caption(f"Pinned {base['label']}.")
    if cmp is None or cmp[0] != json.dumps(p_args, sort_keys=True):
        st.info(
            "Press 'Draw the comparison charts' to plan this scenario at 5 bandwidths, 5 distances and 5 "
            "targets; 'Pin' keeps a plan as the baseline the next scenario is drawn against."
        )
        return
    if base and "sweeps" not in base:
        base["sweeps"] = _sweeps(base["args"])
    axis = st.radio("Chart cost against", list(compare.SWEEPS), horizontal=True, key="cmp_axis")
    show_figure(
        "curve", _curve_data(axis, cmp[1][axis], base["sweeps"][axis] if base else None, building_usd)
    )
    rows = []
    for i, r in enumerate(cmp[1][axis]):
        row = {
            axis: F.sig(r["x"], 3),
            "cost": F.money(r["cost_usd"]) if r["cost_usd"] else "infeasible",
            "premium": F.factor(r["cost_usd"] / building_usd)
            if r["cost_usd"] and building_usd and axis != "target"
            else "-",
            "plan": r["label"],
        }
        if base:
            b = base["sweeps"][axis][i]
            row["baseline cost"] = F.money(b["cost_usd"]) if b["cost_usd"] else "infeasible"
        rows.append(row)
    _table(rows)


def _curve_data(
    axis: str, rows: list[dict[str, Any]], baseline: list[dict[str, Any]] | None, building_usd: float | None
) -> dict[str, Any]:
    """The comparison chart's input: this scenario's points, the pinned baseline's, the premium axis."""
    data: dict[str, Any] = {"axis": axis, "current": rows, "current_label": "this scenario"}
    if building_usd and axis != "target":
        # One building's cost is the same at every WAN rate and distance (it has no WAN): the premium axis.
        data["building_usd"] = float(building_usd)
    if baseline is not None:
        data.update(baseline=baseline, baseline_label="pinned baseline")
    return data


def _optional_tab(render: Any, built: logic.Built, ui: dict[str, Any], label: str) -> None:
    _scenario_caption(label)
    if built.scenario is None:
        _blocked()
        return
    msg = render(st, built.scenario, built.mode, ui, show_figure, store=_results())
    if msg:
        st.info(msg)


def _resilience_tab(est: dict[str, Any] | None, built: logic.Built, label: str) -> None:
    _scenario_caption(label)
    c = st.columns(3)
    for col, k in zip(c, RES_KEYS, strict=True):
        widget(k, col)
    st.markdown("**Site loss**: which sites go dark, when, and for how long")
    c4 = st.columns(4)
    for col, k in zip(c4, LOSS_KEYS, strict=True):
        widget(k, col)
    if est is None:
        _blocked()
        return
    try:
        res = views.resilience(est, _ui())
    except ValueError as exc:
        st.error(logic.relabel(logic.one_line(exc)))
        return
    st.caption(res["caption"])
    show_figure("goodput", {k: res[k] for k in ("chips", "curves", "fleet_chips")})
    _table(res["rows"])
    st.subheader("Site loss")
    st.caption(res["site_loss_caption"])
    _table(res["site_loss_rows"])


@st.cache_resource(show_spinner=False)
def _results() -> views.ResultStore:
    """The long answers (Monte Carlo, frontier, countermeasures) by their inputs, for every session of
    this server: a question asked again, in any view, the report or another session, is not recomputed."""
    return views.ResultStore(max_entries=64)


def _report_frontier(req: dict[str, Any]) -> dict[str, Any]:
    return dict(_results().get_or_run("frontier", req, lambda: views.run_frontier_request(req))[0])


@st.cache_data(show_spinner=False, max_entries=8)
def _frontier_year_cached(req_json: str) -> dict[str, Any]:
    req = json.loads(req_json)
    return questions.run_frontier_year(req["plan"], req["premiums"])


@st.cache_data(show_spinner=False, max_entries=16)
def _monitor_cached(args_json: str) -> dict[str, Any]:
    return questions.run_monitor(json.loads(args_json))


@st.cache_data(show_spinner=False, max_entries=32)
def _fleet_cached(scenario_json: str, mode: str, metric: str) -> dict[str, Any]:
    return questions.run_fleet(json.loads(scenario_json), mode, metric)


def _json_arg(fn: Any) -> Any:
    return lambda d: fn(json.dumps(d, sort_keys=True, default=str))


def _frontier_tab(built: logic.Built, ui: dict[str, Any], label: str) -> None:
    st.subheader("Where does it stop? The frontier of dispersal")
    _scenario_caption(label)
    c = st.columns(3)
    for col, k in zip(c, ("fr_targets", "fr_premiums", "fr_samples"), strict=True):
        widget(k, col)
    if built.scenario is None:
        _blocked()
        return
    msg = question_views.frontier_view(st, _ui(), show_figure, _results(), _json_arg(_frontier_year_cached))
    if msg:
        st.info(msg)


def _monitor_tab(built: logic.Built, ui: dict[str, Any], label: str) -> None:
    st.subheader("What does a monitor see? One building vs N sites")
    _scenario_caption(label)
    widget("mon_lose_sites", st.columns(3)[0])
    if built.scenario is None:
        _blocked()
        return
    msg = question_views.monitor_view(st, _ui(), _json_arg(_monitor_cached))
    if msg:
        st.info(msg)


def _fleet_tab(built: logic.Built, ui: dict[str, Any], label: str) -> None:
    st.subheader("What does my fleet best train?")
    _scenario_caption(label)
    widget("fleet_metric", st.columns(3)[0])
    if built.scenario is None:
        _blocked()
        return
    msg = question_views.fleet_view(st, _ui(), built.mode.value, _fleet_cached)
    if msg:
        st.info(msg)


def _view(view: str, ui: dict[str, Any], built: logic.Built, est: dict[str, Any] | None, label: str) -> None:
    """Draw the open view (`fields.VIEWS` name) inside its tab."""
    if view in ("estimate", "planner"):
        _scenario_caption(label)
    if view == "estimate":
        if est is not None:
            _estimate_tab(est, ui)
        else:
            _blocked()
    elif view == "planner":
        _planner_tab(ui, built)
    elif view == "frontier":
        _frontier_tab(built, ui, label)
    elif view == "monitor":
        _monitor_tab(built, ui, label)
    elif view == "fleet":
        _fleet_tab(built, ui, label)
    elif view == "countermeasures":
        _optional_tab(views.countermeasures_view, built, ui, label)
    elif view == "uncertainty":
        _optional_tab(views.uncertainty_view, built, ui, label)
    else:
        _resilience_tab(est, built, label)


def _report_section(ui: dict[str, Any], built: logic.Built, label: str) -> None:
    """One HTML file of every view as it stands (issue 24): the last plan, countermeasures and Monte Carlo
    when they were computed for the current inputs, the frontier on request, the estimate and resilience.
    `dispersal report` with the options shown writes the same report."""
    st.subheader("Report")
    if built.scenario is None:
        _blocked()
        return
    frontier = st.checkbox(
        "Include the frontier at the planner's target (about 10 plans: seconds in paper mode, up to a "
        "minute in default mode)",
        key="report_frontier",
    )
    # A Monte Carlo already drawn for these inputs (any view or session) goes into the report as well.
    ureq = views.uncertainty_request(ui)
    views.adopt(st, "_unc", views.uncertainty_key(ureq["plan"]), _results(), "uncertainty", ureq)
    session = {k: st.session_state[k] for k in views.REPORT_STATE if k in st.session_state}
    parts = views.report_parts(ui, label, session, frontier=frontier, run_frontier=_report_frontier)
    st.caption("Same report from the command line: `" + views.report_command(ui, parts, frontier) + "`")
    if st.button("Build the report", key="report_go"):
        st.session_state["_report"] = (
            label,
            render_html(built.scenario, built.mode, source=str(ui["preset"]), parts=parts["parts"]),
        )
    stored = st.session_state.get("_report")
    if stored is None:
        st.info("Press 'Build the report' to write it from this state; a download button follows.")
        return
    if stored[0] != label:
        st.info("The scenario changed since the report was built; press the button to update it.")
    st.download_button(
        "Download the report (HTML)",
        stored[1],
        file_name=f"dispersal-report-{logic.slug(stored[0])[:60]}.html",
        mime="text/html",
        key="report_dl",
    )


def main() -> None:
    """Render the whole app once (Streamlit reruns the script on every interaction)."""
    st.set_page_config(page_title="dispersal: distributed-training simulator", layout="wide")
    st.html(page_text.CSS)
    _init_state()
    _sidebar()
    ui = _ui()
    st.title("dispersal: how far can training spread?")
    for w in st.session_state.get("_warnings", []):
        st.warning(w)
    origin = st.session_state.get("_origin")
    built = logic.build(ui, origin)
    label = logic.scenario_label(ui, origin)
    for w in built.warnings:
        st.warning(w)
    est: dict[str, Any] | None = None
    if built.scenario is None:
        st.error(built.error)
    else:
        # A shared link only ever holds a valid state: an invalid edit is not written into the URL.
        _sync_url(ui)
        try:
            est = _estimate_cached(json.dumps(built.scenario.to_dict(), sort_keys=True), built.mode.value)
        except ValueError as exc:
            built = logic.Built(None, built.mode, logic.relabel(logic.one_line(exc)))
            st.error(built.error)
    if built.scenario is not None and est is not None:
        st.caption(
            f"Scenario: {label} | {built.mode.value} mode | max duration "
            f"{F.days_of(built.scenario.duration_s)} days | share this view by copying the URL"
        )
    # Stateful tabs (on_change="rerun"): a tab switch reruns the script with the new label in
    # st.session_state[VIEW_TAB], which the URL carries (?view=...); only the open view is computed.
    tabs = dict(
        zip(VIEW_LABELS, st.tabs(list(VIEW_LABELS.values()), key=VIEW_TAB, on_change="rerun"), strict=True)
    )
    view = VIEW_SLUGS.get(str(st.session_state.get(VIEW_TAB)), "estimate")
    with tabs[view]:
        _view(view, ui, built, est, label)
    _report_section(ui, built, label)
    sites_panel.glossary()


main()
