"""Issue 14 without a browser: links, provenance, CLI equality, site loss, input wording, figures, state."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from matplotlib.text import Text
from typer.testing import CliRunner

from dispersal.app import logic, views
from dispersal.cli import app as cli
from dispersal.model import estimate
from dispersal.model.inputs.scenario import Scenario
from dispersal.present import figures, provenance

runner = CliRunner()


def _cli(*args: str) -> Any:
    r = runner.invoke(cli, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _ui(**changes: Any) -> dict[str, Any]:
    ui = logic.default_ui()
    ui.update(changes)
    return ui


@pytest.mark.parametrize("preset_side_link_mbps", [None, 100.0])
@pytest.mark.parametrize("mode", ["default", "paper"])
def test_one_wan_setting_drives_every_link_unless_split(
    preset_side_link_mbps: float | None, mode: str
) -> None:
    """With Links = one, 10 Mbps on the WAN is 10 Mbps on every link the estimate and the planner use,
    whether the preset leaves its side links empty or sets them equal to the WAN; split keeps them."""
    side = {k: preset_side_link_mbps for k in ("regional_mbps", "pp_mbps")}
    ui = _ui(up_mbps=10.0, down_mbps=10.0, mode=mode, links="one", **side)
    s = logic.build(ui).scenario
    assert s is not None
    used = provenance.resolved_links(s.to_dict(), mode)
    assert used == {"regional": (10e6, 0.1), "pipeline": (10e6, 0.1)}
    args = views.plan_args(ui, logic.scenario_dict(ui))
    assert "regional_bandwidth_bits_per_s" not in args["constraints"] and args["links"] == "one"
    split = _ui(up_mbps=10.0, down_mbps=10.0, mode=mode, links="split", regional_mbps=100.0, pp_mbps=100.0)
    s2 = logic.build(split).scenario
    assert s2 is not None and s2.regional_bandwidth_bits_per_s == s2.pp_bandwidth_bits_per_s == 100e6
    assert provenance.resolved_links(s2.to_dict(), mode)["pipeline"][0] == 100e6
    c2 = views.plan_args(split, logic.scenario_dict(split))["constraints"]
    assert c2["regional_bandwidth_bits_per_s"] == c2["pp_bandwidth_bits_per_s"] == 100e6


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["default", "paper"])
def test_10_mbps_planner_answer_equals_the_cli(mode: str) -> None:
    ui = _ui(up_mbps=10.0, down_mbps=10.0, mode=mode, plan_target="1e25")
    got = views.run_plan(views.plan_args(ui, logic.scenario_dict(ui)))
    (want,) = _cli("plan", "--bandwidth", "10Mbps", "--target", "1e25", "--mode", mode, "--no-baseline")
    assert got["feasible"] == want["feasible"]
    for k in ("metric", "search", "mode", "target_flop"):
        assert got[k] == want[k], k
    if want["feasible"]:
        for k in ("cost_usd", "nodes", "hardware", "precision", "chips_per_node", "algorithm", "params"):
            assert got[k] == want[k], k
    text = provenance.plan_provenance(got, "one")
    assert f"{mode} mode, metric {want['metric']}, {want['search']} search" in text
    assert "every link (regional, pipeline) = the WAN" in text
    assert "The paper's bandwidth sweep row '10 Mbps' quotes $2.75B" in text


def test_paper_rows_are_found_only_for_their_settings() -> None:
    row = provenance.paper_row(1e25, 100e6, 100e6, 0.1, 740.0)
    assert row is not None and row.table == "Table 1" and row.cost_usd == 30.7e6  # paper_tables.toml
    assert provenance.paper_row(1e25, 100e6, 100e6, 0.1, 548.0) is None
    assert provenance.paper_row(2e25, 10e6, 10e6, 0.1, 740.0) is None
    lat = provenance.paper_row(1e25, 100e6, 100e6, 0.03, 740.0)
    assert lat is not None and lat.table == "latency sweep" and lat.label == "30 ms"


def test_site_loss_view_equals_the_cli() -> None:
    ui = logic.default_ui("gpt4_level_gh200")
    ui.update(res_lose_sites=3, res_lose_at_days=20.0, res_down_for_days=5.0, res_run_days=100.0)
    s = logic.build(ui).scenario
    assert s is not None
    est = estimate(s, mode="default").to_dict()
    res = views.resilience(est, ui)
    spec, _ = views.resilience_spec(est, ui)
    d = _cli(
        "resilience",
        "--chips",
        str(spec.chips),
        "--mtbf",
        f"{spec.chip_mtbf_h!r}h",
        "--sites",
        str(spec.sites),
        "--chips-per-island",
        str(spec.chips_per_island),
        "--chips-per-node",
        str(spec.chips_per_node),
        "--restart",
        f"{spec.restart_time_h!r}h",
        "--round-time",
        f"{spec.round_time_h!r}h",
        "--lose-sites",
        "3",
        "--lose-at",
        "20d",
        "--down-for",
        "5d",
        "--days",
        "100",
    )
    assert d["site_loss"].keys() == res["site_loss"].keys()
    for name, o in d["site_loss"]["outcomes"].items():
        mine = res["site_loss"]["outcomes"][name]
        for k, v in o.items():
            assert mine[k] == (pytest.approx(v, rel=1e-9) if isinstance(v, float) else v), (name, k)
    assert "3 of 101 sites go dark after 20 days, for 5 days" in res["site_loss_caption"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("up_mbps", -5.0, "WAN upload: must be > 0 Mbps, got -5 Mbps"),
        ("latency_ms", -1.0, "WAN one-way latency: must be >= 0 ms, got -1 ms"),
        ("duration_days", 0.0, "Maximum duration: must be > 0 days, got 0 days"),
        ("pue", 7.0, "PUE: must be in [1, 5], got 7"),
    ],
)
def test_errors_use_the_fields_label_and_unit(key: str, value: float, message: str) -> None:
    assert logic.build(_ui(**{key: value})).error == message


def test_model_errors_are_relabelled() -> None:
    assert logic.relabel("bandwidth_up_bits_per_s: must be > 0").startswith("WAN upload: ")
    assert logic.relabel("something else entirely") == "something else entirely"


def test_implausible_values_warn_but_compute() -> None:
    b = logic.build(_ui(num_nodes=10**9))
    assert b.scenario is not None and b.error is None
    assert len(b.warnings) == 1 and b.warnings[0].startswith(
        "Nodes (sites): 1,000,000,000 nodes is outside any plausible"
    )
    assert logic.build(_ui()).warnings == []


def test_every_input_has_help_and_every_scenario_field_an_input() -> None:
    assert [f.key for f in logic.FIELDS if not f.help] == []
    # sites / churn are lists of tables, written in scenario files; the app leaves site presets out.
    covered = (
        {"schema_version", "split_links", "sites", "churn"}
        | set(logic.GENERIC_KEYS)
        | set(logic.SCENARIO_TO_UI)
    )
    covered |= {f.key for f in logic.FIELDS}
    missing = [f.name for f in dataclasses.fields(Scenario) if f.name not in covered]
    assert missing == []
    glossary = (Path(__file__).resolve().parents[2] / "docs" / "glossary.md").read_text(encoding="utf-8")
    terms = {logic.slug(t) for t in re.findall(r"^\*\*(.+?)\*\*", glossary, flags=re.M)}
    linked = {m for f in logic.FIELDS for m in re.findall(r"\(#g-([a-z0-9-]+)\)", f.help)}
    assert linked and linked <= terms, linked - terms


@pytest.mark.slow
def test_figures_are_svg_with_alt_text_and_hover_values() -> None:
    s = logic.build(_ui()).scenario
    assert s is not None
    est = estimate(s, mode="default").to_dict()
    res = views.resilience(est, _ui())
    rows = [{"x": x, "cost_usd": 1e6 * x, "label": "p"} for x in (10.0, 100.0)]
    charts = [
        figures.waterfall_figure(est),
        figures.breakdown_figure(est),
        figures.goodput_figure(res["chips"], res["curves"], marker=res["fleet_chips"]),
        figures.cost_curve_figure(
            "bandwidth", rows, [{"x": 10.0, "cost_usd": None, "label": "x"}, *rows[1:]]
        ),
    ]
    for chart in charts:
        svg = figures.svg_markup(chart)
        assert (
            svg.startswith("<svg")
            and 'role="img"' in svg
            and f'aria-label="{html.escape(chart.alt, quote=True)}"' in svg
        )
        assert svg.count("<title>") == len(chart.tips) + 1 and len(chart.tips) >= 2
        for tip in chart.tips.values():
            assert f"<title>{html.escape(tip)}</title>" in svg
        for text in chart.figure.findobj(Text):
            assert isinstance(text, Text)
            if text.get_text():
                assert float(text.get_fontsize()) >= 9.5, (chart.alt, text.get_text())


@pytest.mark.slow
def test_invalid_invalid_valid_keeps_every_input_apptest() -> None:
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    script = Path(__file__).resolve().parents[2] / "src" / "dispersal" / "app" / "streamlit_app.py"
    at = AppTest.from_file(str(script), default_timeout=120)
    ui = _ui(plan_target="3e25", res_chip_mtbf_h=40_000.0, res_lose_sites=2)
    for k, v in logic.query_from_ui(ui).items():
        at.query_params[k] = v
    at.run()
    at.number_input(key="num_nodes").set_value(0).run()
    at.number_input(key="up_mbps").set_value(-5.0).run()
    assert at.error[0].value == "Nodes (sites): must be an integer >= 1, got 0"
    assert "num_nodes" not in at.query_params  # an invalid state is never written into the link
    at.number_input(key="num_nodes").set_value(4).run()
    assert at.error[0].value == "WAN upload: must be > 0 Mbps, got -5 Mbps"
    at.number_input(key="up_mbps").set_value(100.0).run()
    assert not at.exception and not at.error
    # Only the open view is drawn: the Planner's and the Resilience tab's inputs are read in their tabs.
    at.session_state["view_tab"] = "Planner"
    at.run()
    assert at.text_input(key="plan_target").value == "3e25"
    at.session_state["view_tab"] = "Resilience"
    at.run()
    assert at.number_input(key="res_chip_mtbf_h").value == 40_000.0
    assert at.number_input(key="res_lose_sites").value == 2
    q = {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert q["plan_target"] == "3e25" and q["res_chip_mtbf_h"] == "40000" and q["num_nodes"] == "4"
