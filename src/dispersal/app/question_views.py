"""The three question views of the app (issue 34): where does it stop (Frontier), what does a monitor
see (Monitor) and what does my fleet best train (Fleet). Each draws with the ``st`` module it receives,
reads its answer through `views.cached` (one store of long results per server) and shares
`dispersal.present` with the CLI and the report; the requests they compute are built in `views`, which
the report uses too."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dispersal.app import logic
from dispersal.app.views import (
    CONVENTION_LABELS,
    ResultStore,
    _digest,
    _usd,
    adopt,
    frontier_request,
    monitor_request,
    run_frontier_request,
    stored_answer,
    uncertainty_key,
    uncertainty_request,
)
from dispersal.present import fleet as present_fleet
from dispersal.present import questions


def frontier_view(
    st: Any,
    ui: Mapping[str, Any],
    show: Any,
    store: ResultStore | None,
    run_year: Callable[[dict[str, Any]], dict[str, Any]],
) -> str | None:
    """Where dispersal stops: the frontier table (every field the analysis returns), P(reach) and the
    bands per cell, the largest target at N sites, what binds, and on request the algorithm generations
    (`--year`). The frontier is computed once per question in ``store`` (shared with the report); the
    Uncertainty tab's Monte Carlo for the same planner arguments is shown beside it, never drawn again.
    ``run_year``: the cached `--year` computation (JSON in, dict out)."""
    import time

    from dispersal.present import frontier as pf

    try:
        req = frontier_request(ui)
    except ValueError as exc:
        st.error(logic.relabel(logic.one_line(exc)))
        return None
    st.caption(
        "The limits of a dispersed run per target and premium over one datacenter (one building of the same "
        f"compute): regime {req['plan']['regime']} (Planner tab), {req['plan']['mode']} mode, "
        f"{req['samples']:,} Monte Carlo draws per target, seed 0. Same numbers as `"
        + questions.frontier_command(req["plan"], req["samples"], 0, req["targets"], req["premiums"])
        + "` (the frontier replaces the links by each grid bandwidth and uses the planner's budget)."
    )
    key = _digest(req)
    if st.button("Compute the frontier", key="fr_go", type="primary"):
        t0 = time.perf_counter()
        # Each target's premium at every grid bandwidth is shown as soon as its search is done (the first
        # answer, above the status); the cells, the draws and the other targets follow.
        first = st.empty()
        curves: list[dict[str, Any]] = []

        def on_curve(c: dict[str, Any]) -> None:
            curves.append(c)
            with first.container():
                st.caption(
                    "First answer, per target as its search ends (the full table replaces it when all is done):"
                )
                st.table(pf.curve_rows(curves))

        with st.status(
            f"Searching {len(req['targets'])} target(s) x {len(req['premiums'])} premiums on the bandwidth "
            f"grid, then {req['samples']:,} Monte Carlo draws per target...",
            expanded=False,
        ) as status:
            try:
                out, hit = (
                    store.get_or_run("frontier", req, lambda: run_frontier_request(req, on_curve))
                    if store is not None
                    else (run_frontier_request(req, on_curve), False)
                )
                st.session_state["_fr"] = (key, out)
                status.update(
                    label="The frontier, "
                    + ("kept from an earlier run" if hit else f"computed in {time.perf_counter() - t0:.1f} s")
                    + " (kept for these inputs: the report reuses it)",
                    state="complete",
                )
            except ValueError as exc:
                st.session_state["_fr"] = (key, logic.one_line(exc))
                status.update(label="The frontier: no answer", state="error")
            finally:
                first.empty()
    adopt(st, "_fr", key, store, "frontier", req)
    fr, msg = stored_answer(
        st,
        "_fr",
        key,
        "Press 'Compute the frontier' (one target without draws: seconds; 100 draws per target: tens of "
        "seconds on two cores).",
    )
    if fr is None:
        return msg
    st.markdown("**" + pf.headline(fr) + "**")
    show("frontier", fr)
    st.subheader("Where it stops, per target and premium")
    st.table(pf.limit_rows(fr))
    _uncertainty_beside(st, ui, req, store)
    st.subheader("The largest target at N sites")
    st.table(pf.at_sites_rows(fr))
    for n in fr.get("notes", []):
        st.caption(str(n))
    if st.checkbox("Algorithm generations (dispersal frontier --year)", key="fr_year"):
        ykey = _digest({"plan": req["plan"], "premiums": req["premiums"]})
        cached = st.session_state.get("_fr_year")
        if cached is None or cached[0] != ykey:
            with st.spinner("Planning each algorithm generation on the bandwidth grid..."):
                cached = (ykey, run_year({"plan": req["plan"], "premiums": req["premiums"]}))
            st.session_state["_fr_year"] = cached
        st.table(pf.year_rows(cached[1]))
        for n in cached[1].get("notes", []):
            st.caption(str(n))
    return None


def _uncertainty_beside(
    st: Any, ui: Mapping[str, Any], req: Mapping[str, Any], store: ResultStore | None
) -> None:
    """The Uncertainty tab's Monte Carlo at the frontier's targets, when it was run for these planner
    arguments (the same parameter draws: one spec, one seed): P(reach) and the cost band at this
    scenario's own links, read from the stored result, not drawn again."""
    from dispersal.present import formats as F

    ureq = uncertainty_request(ui)
    unc = store.peek("uncertainty", ureq) if store is not None else None
    if unc is None:
        own = st.session_state.get("_unc")
        unc = (
            own[1]
            if own and own[0] == uncertainty_key(ureq["plan"]) and not isinstance(own[1], str)
            else None
        )
    rows = []
    for t in req["targets"]:
        r = questions.reach_samples(unc, t)
        if r is not None:
            rows.append(
                {
                    "target": F.flop(questions.parse_target(t), unit=True),
                    "P(reach) at this scenario's links": F.percent(r["feasible_fraction"]),
                    "cost P10-P90": f"{_usd(r['cost_usd_p10'])} - {_usd(r['cost_usd_p90'])}",
                }
            )
    if not rows or unc is None:
        return
    st.subheader("At this scenario's own links (the Uncertainty tab's Monte Carlo)")
    st.caption(
        f"From the Uncertainty tab's {int(unc['samples']):,} draws (seed {int(unc['seed'])}) for these planner "
        "arguments, read from its stored result (not drawn again): the cheapest plan at the scenario's "
        "links, where the table above prices each grid bandwidth."
    )
    st.table(rows)


def monitor_view(
    st: Any, ui: Mapping[str, Any], run: Callable[[dict[str, Any]], dict[str, Any]]
) -> str | None:
    """One building vs N sites as a monitor sees them: power per site against grid classes, shipments,
    staff, WAN, P(detect) per channel and aggregated, survivability."""
    from dispersal.present import monitor as pm

    convention = str(st.session_state.get("cm_convention", "report"))
    try:
        args = monitor_request(ui, convention)
    except ValueError as exc:
        st.error(logic.relabel(logic.one_line(exc)))
        return None
    days = float(args["max_duration_s"]) / 86400.0
    st.caption(
        f"Convention (shared with the Countermeasures tab, whose radio picks it): {CONVENTION_LABELS[convention]}"
        f": {args['mode']} mode, {days:g}-day budget, {float(args['wan_bits_per_s']) / 1e6:g} Mbps / "
        f"{float(args['latency_s']) * 1e3:g} ms per site, regime {args['regime_name']}, target "
        f"{ui['plan_target']} FLOP. Same numbers as `{questions.monitor_command(args)}` (its `--days` is "
        "this convention's time budget)."
    )
    key = _digest(args)
    if st.button("Compare one building with N sites", key="mon_go", type="primary"):
        with st.spinner("Planning one building and the N-site plan, then what each monitor sees..."):
            try:
                st.session_state["_mon"] = (key, run(args))
            except ValueError as exc:
                st.session_state["_mon"] = (key, logic.one_line(exc))
    d, msg = stored_answer(st, "_mon", key, "Press the button (two plans and the detection model: seconds).")
    if d is None:
        return msg
    st.markdown("**" + pm.convention_line(d, days) + ".**")
    st.table(pm.compare_table(d))
    for c in d["comparisons"]:
        for r in c["reasons"]:
            st.warning(r)
    with st.expander("Detection rates and monitor parameters (sourced or assumed)"):
        st.table(pm.rate_rows(d))
        for k, v in d["formulas"].items():
            st.caption(f"{k}: {v}")
    return None


def fleet_view(
    st: Any, ui: Mapping[str, Any], mode: str, run: Callable[[str, str, str], dict[str, Any]]
) -> str | None:
    """What the sidebar's fleet best trains (`dispersal fleet`): model, tokens, H, codec, algorithm, with
    the binding constraint. ``run(scenario_json, mode, metric)``: the cached search."""
    import json

    sd = logic.scenario_dict(ui)
    metric = str(ui.get("fleet_metric", "c_quality"))
    st.caption(
        "The sidebar's fleet (nodes, hardware, links, days, regime) as it stands; the search runs over "
        f"algorithm, codec, model size and H (metric {metric}). Same as `dispersal fleet` on this scenario "
        f"with `--mode {mode} --metric {metric}`."
    )
    key = json.dumps([sd, mode, metric], sort_keys=True)
    # On a button (not on every rerun: Streamlit draws every tab on each edit, and the search takes a
    # second or two); the answer is cached per fleet, mode and metric.
    if st.button("Find the best use of this fleet", key="fleet_go", type="primary"):
        with st.spinner("Searching algorithm x codec x model size x H for this fleet..."):
            try:
                st.session_state["_fleet"] = (key, run(json.dumps(sd, sort_keys=True), mode, metric))
            except ValueError as exc:
                st.session_state["_fleet"] = (key, logic.relabel(logic.one_line(exc)))
    d, msg = stored_answer(
        st,
        "_fleet",
        key,
        "Press the button (one to two seconds; cached per fleet).",
        stale="The fleet changed since this was computed; press the button to update.",
    )
    if d is None:
        return msg
    for line in d.get("lines", []):
        st.markdown(line.replace("$", "\\$"))
    if d.get("binding"):
        st.caption(
            f"What binds: {d['binding']} (gains if relaxed: "
            + ", ".join(f"{k} x{float(v):.3g}" for k, v in (d.get("gains") or {}).items())
            + ")."
        )
    rows = present_fleet.fleet_rows(d)
    if rows:
        st.subheader("Best per algorithm")
        st.table(rows)
    return None
