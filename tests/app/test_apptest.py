"""The Streamlit app run headless through streamlit.testing (no browser)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit", reason="the web app needs streamlit: pip install 'dispersal[app]'")

from streamlit.testing.v1 import AppTest

from dispersal.app import logic

APP = Path(__file__).resolve().parents[2] / "src" / "dispersal" / "app" / "streamlit_app.py"
TIMEOUT = 60


def _app(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at.run()


def _open_view(at: AppTest, label: str) -> AppTest:
    """Switch to a view's tab (only the open view is drawn) as a click on the tab does."""
    at.session_state["view_tab"] = label
    return at.run()


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.slow
def test_default_page_renders_an_estimate() -> None:
    at = _app()
    assert not at.exception
    assert not at.error
    assert _metric(at, "Training time") == "740 d"
    assert [t.label for t in at.tabs] == [
        "Estimate",
        "Planner",
        "Frontier",
        "Monitor",
        "Fleet",
        "Countermeasures",
        "Uncertainty",
        "Resilience",
    ]


@pytest.mark.slow
def test_changing_bandwidth_changes_training_time_and_url() -> None:
    at = _app({"preset": "intellect1"})
    before = _metric(at, "Training time")
    at.number_input(key="up_mbps").set_value(2000.0)
    at.number_input(key="down_mbps").set_value(2000.0).run()
    assert not at.exception
    after = _metric(at, "Training time")
    assert before != after
    assert at.query_params["up_mbps"] in ("2000", ["2000"])


@pytest.mark.slow
def test_zero_nodes_shows_an_error_not_a_traceback() -> None:
    at = _app()
    at.number_input(key="num_nodes").set_value(0).run()
    assert not at.exception
    assert [e.value for e in at.error] == ["Nodes (sites): must be an integer >= 1, got 0"]
    at.number_input(key="num_nodes").set_value(3).run()
    assert not at.error and not at.exception


@pytest.mark.slow
def test_bad_link_value_warns_and_keeps_default() -> None:
    at = _app({"num_nodes": "lots"})
    assert not at.exception
    assert any("num_nodes" in w.value for w in at.warning)
    assert at.number_input(key="num_nodes").value == logic.default_ui()["num_nodes"]


@pytest.mark.slow
def test_shared_link_restores_inputs() -> None:
    ui = logic.default_ui("gpt4_level_gh200")
    ui.update(up_mbps=250.0, latency_ms=40.0, algorithm="streaming", mode="paper", inner_steps=50)
    at = _app(logic.query_from_ui(ui))
    assert not at.exception
    assert at.selectbox(key="preset").value == "gpt4_level_gh200"
    assert at.selectbox(key="mode").value == "paper"
    assert at.selectbox(key="algorithm").value == "streaming"
    assert at.number_input(key="up_mbps").value == 250.0
    assert at.number_input(key="latency_ms").value == 40.0
    assert at.number_input(key="inner_steps").value == 50
    assert {f.key: at.session_state[f.key] for f in logic.FIELDS} == ui


@pytest.mark.slow
def test_preset_change_loads_the_preset() -> None:
    at = _app()
    at.selectbox(key="preset").set_value("intellect1").run()
    assert not at.exception
    assert at.number_input(key="num_nodes").value == 14
    assert at.query_params["preset"] in ("intellect1", ["intellect1"])


@pytest.mark.slow
def test_planner_button_finds_a_plan() -> None:
    at = _app({"mode": "paper", "plan_target": "1e24", "view": "planner"})
    at.button(key="plan_go").click().run()
    assert not at.exception
    assert any(s.value.startswith("Cheapest:") for s in at.success)


@pytest.mark.slow
def test_optional_tabs_never_fail() -> None:
    at = _app()
    assert not at.exception
    texts = [i.value for i in at.info]
    # countermeasures / uncertainty either render or say they are not available
    assert all("Traceback" not in t for t in texts)


@pytest.mark.slow
def test_countermeasures_and_uncertainty_tabs() -> None:
    from dispersal.app import views

    if views.optional_module("countermeasures") is None or views.optional_module("uncertainty") is None:
        pytest.skip("countermeasures / uncertainty modules not in this version")
    at = _app({"mode": "paper", "plan_target": "1e24", "view": "countermeasures"})
    at.button(key="cm_go").click().run(timeout=120)
    assert not at.exception and not at.error
    cm_rows = len(at.table[0].value)
    _open_view(at, "Uncertainty")
    at.button(key="unc_go").click().run(timeout=120)
    assert not at.exception and not at.error
    assert len(at.table) == 1
    # Results are kept across views: back in Countermeasures its table shows without a new run.
    _open_view(at, "Countermeasures")
    assert len(at.table) == 1 and len(at.table[0].value) == cm_rows


@pytest.mark.slow
def test_comparison_charts_draw_after_a_plan() -> None:
    """Planner -> 'Draw the comparison charts': 15 plans, a cost curve (SVG) and its table, no exception."""
    at = _app({"mode": "paper", "plan_target": "1e24", "view": "planner"})
    at.button(key="plan_go").click().run(timeout=120)
    assert not at.exception and not at.error
    assert any("premium over one datacenter" in m.value for m in at.markdown)
    at.button(key="cmp_go").click().run(timeout=300)
    assert not at.exception and not at.error
    svgs = [m.value for m in at.markdown if "<svg" in m.value and "this scenario" in m.value]
    assert svgs and "Cost vs bandwidth" in svgs[0]


@pytest.mark.slow
def test_countermeasures_list_blocking_levers_first() -> None:
    """Paper mode, 1e26 FLOP in 365 days: the levers that leave no plan come right after the baseline,
    saying why, then the rest by cost multiple; the progress bar is gone when the run ends."""
    at = _app({"mode": "paper", "plan_target": "1e26", "duration_days": "365", "view": "countermeasures"})
    at.button(key="cm_go").click().run(timeout=300)
    assert not at.exception and not at.error
    table = next(t for t in at.table if "effect" in t.value.columns)
    effects = list(table.value["effect"])
    assert effects[0] == "baseline (no lever)"
    blocked = [e for e in effects if e.startswith("blocks the run: ")]
    assert blocked and effects[1 : 1 + len(blocked)] == blocked
    multiples = [float(m) for m in table.value["cost multiple"][1 + len(blocked) :]]
    assert multiples == sorted(multiples, reverse=True)
    assert any(
        f"{len(blocked)} of {len(effects) - 1} levers and bundles block the run" in c.value
        for c in at.caption
    )


@pytest.mark.slow
def test_the_url_reopens_the_view_and_a_bad_view_is_warned_about() -> None:
    """`?view=monitor` opens the Monitor tab (only it is drawn); switching tabs writes the view into the
    link; `?view=bogus` warns naming the parameter and its allowed values, and keeps the other values."""
    at = _app({"view": "monitor", "mode": "paper"})
    assert not at.exception and not at.warning
    assert {b.key for b in at.button} >= {"mon_go"} and "fr_go" not in {b.key for b in at.button}
    _open_view(at, "Frontier")
    assert at.query_params["view"] in ("frontier", ["frontier"])
    assert "fr_go" in {b.key for b in at.button}
    _open_view(at, "Estimate")
    assert "view" not in at.query_params  # the default view is left out of the link
    bad = _app({"view": "bogus", "up_mbps": "250"})
    assert [w.value for w in bad.warning] == [
        "ignored view='bogus': must be one of " + ", ".join(logic.FIELD_BY_KEY["view"].choices)
    ]
    assert bad.number_input(key="up_mbps").value == 250.0 and _metric(bad, "Training time")
