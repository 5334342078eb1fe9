"""The interactive simulator: a thin Streamlit layer over `dispersal.model`.

Run with ``dispersal app`` (or ``streamlit run`` on this file). All state lives in the URL query
parameters (see `dispersal.app.logic`), so a configuration can be shared by link. Every number comes
from `dispersal.model`; this file only lays out widgets, tables and figures.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import streamlit as st

from dispersal.app import figures, logic, views
from dispersal.model import units
from dispersal.model.estimate import estimate

SIDEBAR_GROUPS: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
    (
        "Model and data",
        True,
        ("params_b", "moe", "active_params_b", "moe_layers", "tokens_t", "local_batch_tokens"),
    ),
    ("Nodes and network", True, ("num_nodes", "up_mbps", "down_mbps", "latency_ms")),
    (
        "Hardware",
        False,
        ("hardware", "chips_per_node", "precision", "mfu", "chip_tflops", "chip_memory_gb", "chip_price_usd",
         "chip_tdp_w"),
    ),
    ("Algorithm", False, ("algorithm", "overlap", "inner_steps", "straggler")),
    (
        "Compression",
        False,
        (
            "compression_ratio",
            "error_feedback",
            "compression_quality",
            "activation_compression",
            "activation_quality",
        ),
    ),
    (
        "Hierarchical and pipeline links",
        False,
        ("group_size", "regional_mbps", "regional_latency_ms", "pp_mbps", "pp_latency_ms", "micro_batches"),
    ),
    (
        "Maximum duration",
        False,
        ("duration_source", "duration_days", "growth_hardware", "growth_software", "growth_investment"),
    ),
    ("Regime and cost", False, ("regime", "pricing", "capex_multiplier", "pue", "electricity_usd_per_kwh")),
)
_PLACEHOLDERS = {
    "tokens_t": "fill the time budget",
    "active_params_b": "dense (= total)",
    "chip_tflops": "catalogue",
    "chip_memory_gb": "catalogue",
    "chip_price_usd": "catalogue",
    "chip_tdp_w": "catalogue",
}
_STEPS = {
    "chip_tflops": 10.0,
    "chip_memory_gb": 8.0,
    "chip_price_usd": 1000.0,
    "chip_tdp_w": 50.0,
    "mfu": 0.01,
    "params_b": 1.0,
    "active_params_b": 1.0,
    "tokens_t": 0.1,
    "up_mbps": 10.0,
    "down_mbps": 10.0,
    "latency_ms": 5.0,
    "compression_ratio": 1.0,
    "activation_compression": 1.0,
    "regional_mbps": 10.0,
    "regional_latency_ms": 1.0,
    "pp_mbps": 10.0,
    "pp_latency_ms": 1.0,
    "duration_days": 1.0,
    "growth_hardware": 0.01,
    "growth_software": 0.01,
    "growth_investment": 0.01,
    "capex_multiplier": 0.01,
    "pue": 0.01,
    "electricity_usd_per_kwh": 0.001,
    "res_chip_mtbf_h": 1000.0,
    "res_restart_h": 0.05,
    "res_max_chips": 1000.0,
}


def _init_state() -> None:
    """First run of a session: the UI state from the URL (a shared link) or the default preset.

    Later runs: Streamlit forgets the state of widgets that were not drawn in the previous run (the
    tabs are skipped while the scenario is invalid), so restore those from the last complete state.
    """
    if st.session_state.get("_init"):
        last = st.session_state.get("_last_ui") or logic.default_ui()
        for f in logic.FIELDS:
            if f.key not in st.session_state:
                st.session_state[f.key] = last[f.key]
        return
    ui, warnings = logic.ui_from_query(st.query_params.to_dict())
    for k, v in ui.items():
        st.session_state[k] = v
    st.session_state["_warnings"] = warnings
    st.session_state["_init"] = True


def _on_preset() -> None:
    base = logic.default_ui(st.session_state["preset"])
    for k in logic.SCENARIO_KEYS:
        st.session_state[k] = base[k]


def widget(key: str, container: Any = st) -> Any:
    """Render the input for one field, bound to st.session_state[key]."""
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
        step=_STEPS.get(key, 0.1),
        format="%g",
        placeholder=_PLACEHOLDERS.get(key, "mode default") if f.kind == "optfloat" else None,
        **kw,
    )


def _sidebar() -> None:
    sb = st.sidebar
    sb.header("Scenario")
    widget("preset", sb)
    widget("mode", sb)
    for title, expanded, keys in SIDEBAR_GROUPS:
        with sb.expander(title, expanded=expanded):
            for k in keys:
                widget(k)
    sb.caption(
        "Custom hardware: pick the closest accelerator, then override its per-chip FLOP/s, memory, price "
        "and power (Hardware section); empty fields keep the catalogue's values."
    )


def _ui() -> dict[str, Any]:
    ui = {f.key: st.session_state[f.key] for f in logic.FIELDS}
    st.session_state["_last_ui"] = dict(ui)
    return ui


def _sync_url(ui: dict[str, Any]) -> None:
    q = logic.query_from_ui(ui)
    if st.query_params.to_dict() != q:
        st.query_params.from_dict(q)


@st.cache_data(show_spinner=False, max_entries=64)
def _figure_png(kind: str, payload: str) -> bytes:
    """PNG of one figure, cached on its JSON input (reruns with unchanged inputs redraw nothing)."""
    d = json.loads(payload)
    if kind == "waterfall":
        fig = figures.waterfall_figure(d)
    elif kind == "breakdown":
        fig = figures.breakdown_figure(d)
    elif kind == "plan":
        fig = figures.plan_figure(d)
    else:
        fig = figures.goodput_figure(d["chips"], d["curves"], marker=d["fleet_chips"])
    return figures.png_bytes(fig, dpi=100)


def _figure(kind: str, data: dict[str, Any]) -> None:
    st.image(_figure_png(kind, json.dumps(data, sort_keys=True, default=str)))


def _table(rows: list[dict[str, str]]) -> None:
    st.table(rows)


def _estimate_tab(est: dict[str, Any]) -> None:
    if est["feasible"]:
        st.success("Feasible under the model.")
    else:
        st.warning("Infeasible: " + "; ".join(est["reasons"]))
    c = st.columns(4)
    c[0].metric("Training time", f"{est['days']:.4g} d")
    c[1].metric("C_local", f"{est['c_local_flop']:.3g} FLOP")
    c[2].metric("C_quality", f"{est['c_quality_flop']:.3g} FLOP")
    c[3].metric("Cost", units.format_money(est["cost"]["total_usd"]))
    name = est["scenario"]["name"].replace(" ", "_")[:40] or "scenario"
    d1, d2, _ = st.columns([1, 1, 4])
    d1.download_button(
        "Download JSON", logic.to_json(est), file_name=f"{name}.json", mime="application/json", key="dl_json"
    )
    d2.download_button(
        "Download CSV", logic.to_csv(est), file_name=f"{name}.csv", mime="text/csv", key="dl_csv"
    )
    left, right = st.columns(2)
    with left:
        st.subheader("Summary")
        _table(logic.summary_rows(est))
    with right:
        st.subheader("Efficiency: C_raw to C_local to C_quality")
        _figure("waterfall", est)
        _table(logic.efficiency_rows(est))
    left, right = st.columns(2)
    with left:
        st.subheader("Time breakdown")
        _figure("breakdown", est)
        _table(logic.breakdown_rows(est))
    with right:
        st.subheader("Cost")
        _table(logic.cost_rows(est))
        st.subheader("WAN traffic per node")
        _table(logic.traffic_rows(est))


@st.cache_data(show_spinner=False, max_entries=32)
def _plan_cached(args_json: str) -> dict[str, Any]:
    return views.run_plan(json.loads(args_json))


def _planner_tab(ui: dict[str, Any], scenario_dict: dict[str, Any]) -> None:
    st.caption(
        "The cheapest configuration reaching a compute target while every node stays under the regime's "
        "covered-cluster rule, using this scenario's WAN, time budget, compression, MFU and stragglers."
    )
    c = st.columns(5)
    for col, k in zip(
        c, ("plan_target", "plan_regime", "plan_metric", "plan_objective", "plan_search"), strict=True
    ):
        widget(k, col)
    args = views.plan_args(ui, scenario_dict)
    key = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()
    if st.button("Find the cheapest plan", key="plan_go", type="primary"):
        try:
            st.session_state["_plan"] = (key, _plan_cached(json.dumps(args, sort_keys=True)))
        except ValueError as exc:
            st.session_state["_plan"] = (key, {"error": logic.one_line(exc)})
    stored = st.session_state.get("_plan")
    if stored is None:
        st.info("Press the button to search (about a second).")
        return
    if stored[0] != key:
        st.info("Inputs changed since this plan was computed; press the button to update.")
    p = stored[1]
    if "error" in p:
        st.error(p["error"])
        return
    if not p["feasible"]:
        st.warning("No plan reaches the target: " + "; ".join(p["reasons"]))
    else:
        st.success(
            f"Cheapest: {p['nodes']:,} nodes of {p['chips_per_node']}x {p['hardware']} {p['precision']}, "
            f"{p['algorithm']}, {units.format_count(p['params'])} parameters, {p['days']:.4g} days, "
            f"{units.format_money(p['cost_usd'])}."
        )
        _figure("plan", p)
        st.subheader("Best plan per hardware (runners-up)")
        _table(logic.plan_rows(p))
    if p.get("failures"):
        with st.expander("Hardware that cannot reach the target"):
            _table([{"hardware": k, "why": v} for k, v in p["failures"].items()])


def _optional_tab(render: Any, *args: Any) -> None:
    msg = render(st, *args)
    if msg:
        st.info(msg)


def _resilience_tab(est: dict[str, Any]) -> None:
    c = st.columns(3)
    for col, k in zip(c, ("res_chip_mtbf_h", "res_restart_h", "res_max_chips"), strict=True):
        widget(k, col)
    try:
        res = views.resilience(est, _ui())
    except ValueError as exc:
        st.error(logic.one_line(exc))
        return
    st.caption(res["caption"])
    _figure("goodput", {k: res[k] for k in ("chips", "curves", "fleet_chips")})
    _table(res["rows"])


def main() -> None:
    """Render the whole app once (Streamlit reruns the script on every interaction)."""
    st.set_page_config(page_title="dispersal: distributed-training simulator", layout="wide")
    _init_state()
    _sidebar()
    ui = _ui()
    _sync_url(ui)
    st.title("dispersal: how far can training spread?")
    for w in st.session_state.get("_warnings", []):
        st.warning(w)
    built = logic.build(ui)
    if built.scenario is None:
        st.error(built.error)
        return
    try:
        est = estimate(built.scenario, mode=built.mode).to_dict()
    except ValueError as exc:
        st.error(logic.one_line(exc))
        return
    st.caption(
        f"{est['scenario']['name']} | {built.mode.value} mode | max duration "
        f"{built.scenario.duration_s / units.SECONDS_PER_DAY:.4g} days | share this view by copying the URL"
    )
    tabs = st.tabs(["Estimate", "Planner", "Countermeasures", "Uncertainty", "Resilience"])
    with tabs[0]:
        _estimate_tab(est)
    with tabs[1]:
        _planner_tab(ui, logic.scenario_dict(ui))
    with tabs[2]:
        _optional_tab(views.countermeasures_view, built.scenario, built.mode, ui)
    with tabs[3]:
        _optional_tab(views.uncertainty_view, built.scenario, built.mode, ui)
    with tabs[4]:
        _resilience_tab(est)


main()
