"""Issue 34: the Frontier, Monitor and Fleet views show the CLI's numbers (`--json` through the shared
`dispersal.present` rows), warn about bad link values, and a used plan's provenance survives a link."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dispersal.app import logic
from dispersal.cli import app as cli_app
from dispersal.present import fleet as present_fleet
from dispersal.present import formats as F

APP = Path(__file__).resolve().parents[2] / "src" / "dispersal" / "app" / "streamlit_app.py"


def _cli_json(*argv: str) -> Any:
    r = CliRunner().invoke(cli_app, [*argv, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _apptest(query: dict[str, str]) -> Any:
    pytest.importorskip("streamlit", reason="the web app needs streamlit: pip install 'dispersal[app]'")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=600)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def _tables(at: Any) -> list[list[dict[str, str]]]:
    """Every st.table of the page as rows of strings."""
    out = []
    for t in at.table:
        df = t.value
        out.append(
            [{str(c): str(v) for c, v in zip(df.columns, row, strict=True)} for row in df.itertuples(False)]
        )
    return out


def _button(at: Any, key: str) -> Any:
    return next(b for b in at.button if b.key == key)


def test_bad_view_values_in_a_link_are_warned_about_and_ignored() -> None:
    ui, warnings = logic.ui_from_query(
        {"fr_premiums": "0.5, 2", "fr_samples": "-3", "fr_targets": "1e25, lots", "mon_lose_sites": "x"}
    )
    base = logic.default_ui()
    for key in ("fr_premiums", "fr_samples", "fr_targets", "mon_lose_sites"):
        assert ui[key] == base[key]
        assert any(w.startswith(f"ignored {key}=") for w in warnings), warnings
    assert any("Premiums (x one datacenter): premium: must be in [1, 1e6]" in w for w in warnings), warnings
    ok, none = logic.ui_from_query({"fr_premiums": "1.5, 3", "fr_targets": "1e24,1e26", "fr_samples": "0"})
    assert none == [] and ok["fr_premiums"] == "1.5, 3" and ok["fr_samples"] == 0


def test_a_used_plan_keeps_its_provenance_in_the_url_until_an_edit() -> None:
    p = {
        "target_flop": 1e25,
        "metric": "c_quality",
        "nodes": 48,
        "chips_per_node": 50,
        "hardware": "a100_80gb",
        "precision": "bf16",
        "algorithm": "diloco",
        "days": 740.0,
        "mode": "default",
        "regime": "treaty",
        "scenario": {**logic.scenario_dict(logic.default_ui()), "algorithm": "streaming"},
    }
    ui, origin = logic.ui_from_plan(logic.default_ui(), p)
    assert origin["label"].startswith("plan: 1e+25 FLOP c_quality, 48 x 50x a100_80gb bf16, streaming,")
    q = logic.query_from_ui(ui, origin)
    assert q[logic.ORIGIN_PARAM] == origin["label"] and q["algorithm"] == "streaming"
    back, warnings = logic.ui_from_query(q)
    assert warnings == []
    restored = logic.origin_from_query(q, back)
    assert restored is not None and logic.scenario_label(back, restored) == origin["label"]
    edited = {**ui, "num_nodes": 7}
    assert logic.ORIGIN_PARAM not in logic.query_from_ui(edited, origin)
    assert logic.origin_from_query({logic.ORIGIN_PARAM: "preset x"}, back) is None


def test_one_algorithm_name_across_planner_fleet_and_app() -> None:
    """The planner's overlapped DiLoCo is "streaming" wherever it is named (its scenario's value)."""
    plan = {"algorithm": "diloco", "scenario": {"algorithm": "streaming"}, "group_size": 0}
    assert F.algorithm(plan) == "streaming"
    assert F.algorithm({"algorithm": "diloco", "scenario": {"algorithm": "diloco"}}) == "diloco"
    assert F.algorithm({"algorithm": "hierarchical", "group_size": 4}) == "hierarchical (groups of 4)"


@pytest.mark.slow
def test_fleet_view_equals_dispersal_fleet_json() -> None:
    """The Fleet tab shows `dispersal fleet --json`'s best per algorithm and its answer sentences."""
    at = _apptest({"view": "fleet"})
    _button(at, "fleet_go").click()
    at.run()
    assert not at.exception and not at.error
    cli = _cli_json("fleet", "--scenario", "paper_threat_model", "--mode", "default")
    want = present_fleet.fleet_rows(cli)
    assert want and want in _tables(at)
    text = " ".join(m.value for m in at.markdown)
    assert f"codec {cli['best']['codec']}" in text and f"H = {cli['best']['inner_steps']:,}" in text


@pytest.mark.slow
def test_frontier_view_equals_dispersal_frontier_json() -> None:
    at = _apptest({"fr_samples": "0", "fr_targets": "1e25", "fr_premiums": "1.5, 2, 5", "view": "frontier"})
    _button(at, "fr_go").click()
    at.run()
    assert not at.exception and not at.error
    cli = _cli_json("frontier", "--target", "1e25", "--premium", "1.5,2,5", "--samples", "0")
    from dispersal.present.frontier import at_sites_rows, limit_rows

    tables = _tables(at)
    assert limit_rows(cli) in tables
    assert at_sites_rows(cli) in tables


def _monitor_under(at: Any, convention: str) -> None:
    """Choose the detection `convention` in the Countermeasures tab (open), then open the Monitor tab
    and press its button; no exception, no error."""
    next(r for r in at.radio if r.key == "cm_convention").set_value(convention)
    at.run()
    at.session_state["view_tab"] = "Monitor"
    at.run()
    _button(at, "mon_go").click()
    at.run()
    assert not at.exception and not at.error


@pytest.mark.slow
def test_monitor_view_equals_dispersal_frontier_compare_json() -> None:
    """Under "this scenario's" convention (default mode, 740 days, 100 Mbps / 100 ms: the CLI's
    defaults), the Monitor tab equals `dispersal frontier --compare --wan 100Mbps --json`."""
    at = _apptest({"view": "countermeasures"})
    # The convention chosen in the Countermeasures tab holds in the Monitor tab (one convention).
    _monitor_under(at, "scenario")
    cli = _cli_json("frontier", "--compare", "--target", "1e25", "--wan", "100Mbps", "--mode", "default")
    from dispersal.present.monitor import compare_table

    assert compare_table(cli) in _tables(at)
    assert any("default mode, regime treaty, 740-day time budget" in m.value for m in at.markdown)
    # A non-default window: the report's convention (paper mode, 548 days) is `--days 548` on the CLI.
    at.session_state["view_tab"] = "Countermeasures"
    at.run()
    _monitor_under(at, "report")
    assert any("--mode paper --regime treaty --lose-sites 1 --days 548`" in c.value for c in at.caption)
    cli548 = _cli_json(
        "frontier", "--compare", "--target", "1e25", "--wan", "100Mbps", "--mode", "paper", "--days", "548"
    )
    assert compare_table(cli548) in _tables(at) and compare_table(cli548) != compare_table(cli)


@pytest.mark.slow
def test_monitor_command_days_and_latency_reproduce_the_view() -> None:
    """The Monitor view's CLI line under this scenario's convention with a 365-day budget and 40 ms:
    `--days 365 --latency 40ms`, and running it gives the view's numbers (`questions.run_monitor`)."""
    import shlex

    from dispersal.app import views
    from dispersal.present import questions
    from dispersal.present.monitor import compare_table

    ui = {**logic.default_ui(), "mode": "paper", "duration_days": 365.0, "latency_ms": 40.0}
    args = views.monitor_request(ui, "scenario")
    cmd = questions.monitor_command(args)
    assert cmd.endswith("--lose-sites 1 --days 365 --latency 40ms"), cmd
    cli = _cli_json(*shlex.split(cmd)[1:])
    assert compare_table(cli) == compare_table(questions.run_monitor(args))
    default = questions.run_monitor({**args, "max_duration_s": 740 * 86400.0, "latency_s": 0.1})
    assert compare_table(cli) != compare_table(default)  # the window and latency reach the numbers


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--days", "0"], "error: --days: must be in (0, 36,525] days, got 0"),
        (["--days", "nan"], "error: --days: must be in (0, 36,525] days, got nan"),
        (["--latency", "5parsec"], "error: --latency: unknown time unit in '5parsec'"),
    ],
)
def test_compare_days_and_latency_are_checked(flags: list[str], message: str) -> None:
    r = CliRunner().invoke(cli_app, ["frontier", "--compare", "--target", "1e25", *flags])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr.strip().splitlines()[0].startswith(message), r.stderr
    r = CliRunner().invoke(cli_app, ["frontier", "--days", "30", "--target", "1e25"])
    assert r.exit_code == 2 and "--days: is read only with --compare" in r.stderr


def test_every_cli_preset_is_in_the_app_and_sites_round_trip() -> None:
    """Mixed-site presets were filtered out; `?preset=intellect1_schedule` said "no such preset"."""
    from dispersal.model.inputs.presets import scenario_names

    assert set(scenario_names()) <= set(logic.FIELD_BY_KEY["preset"].choices)
    ui, warnings = logic.ui_from_query({"preset": "intellect1_schedule"})
    assert warnings == [] and "[[site]]" in ui["sites_toml"] and "[[churn]]" in ui["sites_toml"]
    built = logic.build(ui)
    assert built.scenario is not None and len(built.scenario.sites) >= 3 and built.scenario.churn
    edited = {**ui, "sites_toml": ui["sites_toml"].replace("nodes = 4", "nodes = 5", 1)}
    assert logic.build(edited).scenario is not None
    q = logic.query_from_ui(edited)
    back, warnings = logic.ui_from_query(q)
    assert warnings == [] and back["sites_toml"] == edited["sites_toml"]
    bad = {**ui, "sites_toml": "[[site]]\nname = 'x'"}
    assert logic.build(bad).scenario is None


def test_site_loss_names_the_site_that_matters() -> None:
    """Sites of 2, 3 and 1 nodes: the report said which one goes dark "does not matter"."""
    from dispersal.present.resilience import which_site

    est = {
        "sites": [
            {"name": "a", "nodes": 2, "local_batch_tokens": 1e6},
            {"name": "b", "nodes": 3, "local_batch_tokens": 1e6, "paces_compute": True},
            {"name": "c", "nodes": 1, "local_batch_tokens": 1e6},
        ]
    }
    text = which_site(est, 1)
    assert text.startswith("the worst case: b (50% of the work) goes dark") and "1/3 = 33%" in text
    assert "does not matter" in which_site({"sites": []}, 1)


@pytest.mark.slow
def test_mixed_site_preset_per_site_rows_equal_the_cli_estimate() -> None:
    from dispersal.present.rows import site_rows

    at = _apptest({"preset": "intellect1_schedule"})
    assert not at.exception and not at.error and not at.warning
    cli = _cli_json("estimate", "--scenario", "intellect1_schedule")
    want = site_rows(cli)
    assert want and want in _tables(at)


def test_result_store_computes_each_question_once_and_drops_the_oldest() -> None:
    from dispersal.app import views

    store = views.ResultStore(max_entries=2)
    calls: list[int] = []

    def run(x: int) -> Any:
        def once() -> dict[str, int]:
            calls.append(x)
            return {"x": x}

        return once

    assert store.get_or_run("mc", {"t": 1}, run(1)) == ({"x": 1}, False)
    assert store.get_or_run("mc", {"t": 1}, run(1)) == ({"x": 1}, True)
    assert store.peek("frontier", {"t": 1}) is None  # the kind is part of the key
    store.get_or_run("mc", {"t": 2}, run(2))
    store.peek("mc", {"t": 1})  # 1 is now the most recent: 2 goes when 3 comes
    store.get_or_run("mc", {"t": 3}, run(3))
    assert calls == [1, 2, 3]
    assert store.peek("mc", {"t": 2}) is None and store.peek("mc", {"t": 1}) == {"x": 1}
    with pytest.raises(ValueError, match="max_entries"):
        views.ResultStore(max_entries=0)


def test_the_report_reads_the_frontier_view_s_answer() -> None:
    """The report's frontier section asks the Frontier view's question (plan target, default premiums, as
    many draws): with the view's answer stored, the report computes nothing."""
    from dispersal.app import views

    ui = {**logic.default_ui(), "fr_samples": 0}
    store = views.ResultStore()
    store.get_or_run("frontier", views.frontier_request(ui), lambda: {"from": "the Frontier view"})

    def never() -> Any:
        raise AssertionError("the report drew the frontier again")

    parts = views.report_parts(
        ui, "x", {}, frontier=True, run_frontier=lambda r: store.get_or_run("frontier", r, never)[0]
    )
    assert parts["parts"].frontier == {"from": "the Frontier view"}


@pytest.mark.slow
def test_frontier_view_shows_the_uncertainty_tab_s_draws_without_drawing_again() -> None:
    """Uncertainty tab first (paper mode, 1e24), then the Frontier at 1e24 with no draws of its own: the
    Monte Carlo's P(reach) at the scenario's links is shown, equal to the stored result, and pressing the
    Uncertainty button again answers from the store."""
    from dispersal.app import views
    from dispersal.present import questions

    at = _apptest({"mode": "paper", "plan_target": "1e24", "view": "uncertainty"})
    _button(at, "unc_go").click()
    at.run()
    assert not at.exception and not at.error
    unc = at.session_state["_unc"][1]
    at.session_state["view_tab"] = "Frontier"
    at.run()
    at.number_input(key="fr_samples").set_value(0)
    at.text_input(key="fr_targets").set_value("1e24").run()
    _button(at, "fr_go").click()
    at.run()
    assert not at.exception and not at.error
    r = questions.reach_samples(unc, "1e24")
    assert r is not None
    row = {
        "target": F.flop(1e24, unit=True),
        "P(reach) at this scenario's links": F.percent(r["feasible_fraction"]),
        "cost P10-P90": f"{views._usd(r['cost_usd_p10'])} - {views._usd(r['cost_usd_p90'])}",
    }
    assert [row] in _tables(at)
    assert any("not drawn again" in c.value for c in at.caption)


@pytest.mark.slow
def test_the_monte_carlo_draws_the_chosen_target_first_without_changing_a_number() -> None:
    """run_uncertainty hands the chosen target's point over first (the app's first number), returns
    the points in target order, and each point is what drawing that target alone gives."""
    from dispersal.app import views
    from dispersal.present import questions

    ui = {**logic.default_ui(), "mode": "paper", "plan_target": "1e24"}
    args = views.plan_args(ui, logic.scenario_dict(ui))
    seen: list[float] = []
    done: list[int] = []
    out = questions.run_uncertainty(
        "1e24",
        args,
        8,
        3,
        progress=lambda d, _t, _n: done.append(d),
        on_point=lambda p: seen.append(p["target_flop"]),
    )
    assert seen[0] == 1e24 and sorted(seen) == [p["target_flop"] for p in out["points"]]
    assert [p["target_flop"] for p in out["points"]] == pytest.approx([1e22, 1e23, 1e24, 1e25], rel=1e-12)
    assert done == sorted(done) and done[-1] == 32
    for f in (0.01, 1.0):
        alone = questions.run_uncertainty("1e24", args, 8, 3, factors=(f,))["points"][0]
        assert alone == next(p for p in out["points"] if p["target_flop"] == alone["target_flop"])


def test_frontier_view_shows_each_targets_first_answer_before_the_whole_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Frontier view draws each target's premium per grid bandwidth (`curve_rows`) while the search is
    still running, once per target as its search ends, clears it when the whole answer is there, then
    draws the whole answer's table. A fake ``st`` records the order; the frontier is a real small one."""
    from unittest import mock

    from dispersal.app import question_views
    from dispersal.model.analyses.frontier import frontier
    from dispersal.model.search.candidates import Constraints
    from dispersal.present.frontier import curve_rows, limit_rows

    events: list[str] = []
    curves: list[dict[str, Any]] = []

    def run(req: dict[str, Any], on_curve: Any = None) -> dict[str, Any]:
        def seen(c: Any) -> None:
            curves.append(c.to_dict())
            on_curve(c.to_dict())

        f = frontier(
            targets_flop=(1e23, 1e24),
            premiums=(2.0,),
            constraints=Constraints(hardware=("h100_sxm",)),
            mode="paper",
            bandwidth_grid_bits_per_s=(100e6, 1e9),
            sites=(),
            on_curve=seen,
        )
        events.append("done")
        return dict(f.to_dict())

    monkeypatch.setattr(question_views, "run_frontier_request", run)
    st = mock.MagicMock()
    st.session_state = {}
    st.button.return_value = True
    st.checkbox.return_value = False
    tables: list[tuple[int, Any]] = []
    st.table.side_effect = lambda rows: tables.append((len(events), rows))
    first = st.empty.return_value
    first.empty.side_effect = lambda: events.append("cleared")
    ui = {**logic.default_ui(), "mode": "paper", "plan_target": "1e24"}
    assert question_views.frontier_view(st, ui, lambda *a: None, None, lambda d: {}) is None
    assert len(curves) == 2
    assert tables[0] == (0, curve_rows(curves[:1])) and tables[1] == (0, curve_rows(curves))
    assert events == ["done", "cleared"]
    fr = st.session_state["_fr"][1]
    assert (2, limit_rows(fr)) in tables[2:]
