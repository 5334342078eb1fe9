"""The presentation layer: the CLI never imports the web app, presentation never imports CLI or app,
and the one number formatter gives the texts every table shows."""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

import pytest

import dispersal
from dispersal.present import formats as F
from dispersal.present.answer import plan_card

PKG = Path(dispersal.__file__).resolve().parent


def _imports(path: Path, pkg: str) -> set[str]:
    """Every module a file of package `pkg` imports (absolute and relative), at any depth of the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def _banned(package: str, banned: tuple[str, ...]) -> list[str]:
    files = sorted((PKG / package).rglob("*.py"))
    assert files, package
    return [
        f"{f.relative_to(PKG)} imports {m}"
        for f in files
        for m in sorted(_imports(f, ".".join(f.relative_to(PKG.parent).parts[:-1])))
        if any(m == b or m.startswith(b + ".") for b in banned)
    ]


def test_no_cli_module_imports_the_web_app() -> None:
    assert _banned("cli", ("dispersal.app", "streamlit")) == []


def test_presentation_imports_neither_cli_nor_app() -> None:
    assert _banned("present", ("dispersal.app", "dispersal.cli", "streamlit", "typer", "rich")) == []


def test_the_import_walk_sees_relative_and_nested_imports(tmp_path: Path) -> None:
    # The guard must not pass vacuously: imports inside a function, relative ones and
    # `from dispersal import app` are all seen.
    f = tmp_path / "probe.py"
    f.write_text("def g():\n    from ..app import logic\n    from dispersal import app\n", encoding="utf-8")
    got = _imports(f, "dispersal.cli")
    assert {"dispersal.app", "dispersal.app.logic"} <= got


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (F.money(31.4e6), "$31.4M"),
        (F.money_or(math.inf), "infeasible"),
        (F.money_or(None, "-"), "-"),
        (F.count(91e9), "91B"),
        (F.data(2.4e9), "2.4 GB"),
        (F.duration(0.1), "100 ms"),
        (F.bandwidth(100e6), "100 Mbps"),
        (F.flop(1.234e25), "1.23e+25"),
        (F.flop(1e25, 4, unit=True), "1e+25 FLOP"),
        (F.days(149.44), "149.4 days"),
        (F.days(39.48, 3, unit="d"), "39.5 d"),
        (F.days_of(86400 * 2.5), "2.5"),
        (F.mbps(48.2618), "48.26 Mbps"),
        (F.percent(0.4826), "48.3%"),
        (F.integer(12345.4), "12,345"),
        (F.factor(1.0849), "1.08x"),
        (F.typed(5.0), "5"),
        (F.typed(0.25), "0.25"),
        (F.typed(1e20), "1e+20"),
        (F.axis_count(1e6), "1M"),
        (F.axis_count(1e24), "1e+24"),
        (F.band((1e6, math.nan, 3e6), F.money), "$1M / - / $3M"),
        (F.by_key("bandwidth_up_bits_per_s", 1e8), "100 Mbps"),
        (F.by_key("latency_s", 0.1), "100 ms"),
        (F.by_key("cost_usd", 2e9), "$2B"),
        (F.by_key("cost_usd", 2e9, plain=True), "2000000000.0"),
        (F.by_key("num_nodes", 1024), "1,024"),
        (F.by_key("tokens", 15e12), "15T"),
    ],
)
def test_one_formatter(text: str, want: str) -> None:
    assert text == want


def _outcome(
    lever: str, multiple: float, feasible: bool = True, reasons: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "lever": lever,
        "feasible": feasible,
        "reasons": list(reasons),
        "cost_usd": 1e6 * multiple if feasible else math.inf,
        "cost_multiple": multiple if feasible else math.inf,
        "p_detect": 0.25 if feasible else math.nan,
        "expected_detection_day": 100.0 if feasible else math.nan,
        "nodes": 10 if feasible else 0,
        "chips_per_node": 8,
        "hardware": "h100_sxm",
        "collateral": {
            "installations_covered": 5e4,
            "broadband_lines_capped": 0.0,
            "installations_registering": 0.0,
        },
    }


def test_countermeasures_blocking_levers_first_then_by_cost_multiple() -> None:
    from dispersal.present import figures, rows

    outs = [
        _outcome("none", 1.0),
        _outcome("threshold_8", 1.12),
        _outcome("bandwidth_cap", 1.0, False, ("no hardware reaches 1e+25 FLOP within 740 days",)),
        _outcome("threshold_4", 2.1),
        _outcome("hbm", 1.04),
        _outcome("threshold_4+hbm", 1.0, False, ()),
    ]
    table = rows.countermeasure_rows(outs)
    assert [r["bundle"] for r in table] == [
        "none",
        "bandwidth_cap",
        "threshold_4+hbm",
        "threshold_4",
        "threshold_8",
        "hbm",
    ]
    assert [r["#"] for r in table] == ["1", "2", "3", "4", "5", "6"]
    assert table[1]["effect"] == "blocks the run: no hardware reaches 1e+25 FLOP within 740 days"
    assert table[2]["effect"] == "blocks the run: no plan reaches the target"
    assert table[3]["effect"] == "cost x2.1" and table[3]["P(detect)"] == "0.250"
    assert table[1]["P(detect)"] == "-" and table[1]["evader cost"] == "-"
    assert table[0]["collateral"] == "50k inst. covered"
    chart = figures.countermeasures_figure(rows.countermeasure_order(outs))
    ax = chart.figure.axes[0]
    assert "blocks the run: #2, #3" in [t.get_text() for t in ax.texts]
    assert "bandwidth_cap, threshold_4+hbm" in chart.alt
    # Readable y axis: at least three labelled ticks, in multiples.
    lo, hi = ax.get_ylim()
    fmt = ax.yaxis.get_major_formatter()
    labels = [fmt(v) for v in ax.yaxis.get_major_locator()() if lo <= v <= hi]
    assert len(labels) >= 3 and all(t.endswith("x") for t in labels)


def test_traffic_rows_show_both_directions_of_the_busiest_node() -> None:
    """The 1e25 default-mode plan's node uploads ~2 Mbps while its downlink is 88% busy: both shown."""
    from dispersal.model import estimate
    from dispersal.model.inputs.presets import load_scenario
    from dispersal.present import rows

    s = load_scenario("paper_threat_model")
    d = estimate(s.replace(bandwidth_down_bits_per_s=57e6), mode="default").to_dict()
    t = d["traffic"]
    got = {r["item"]: r["value"] for r in rows.traffic_rows(d)}
    assert got["node"] == "the busiest node"
    assert got["mean upload / download"] == f"{F.mbps(t['mean_mbps'])} / {F.mbps(t['mean_down_mbps'])}"
    assert got["peak upload / download (link rates while a burst runs)"] == "100 Mbps / 57 Mbps"
    up, down = t["link_utilisation_up"], t["link_utilisation_down"]
    assert down > up
    assert got["uplink / downlink busy"] == (
        f"{F.percent(up)} / {F.percent(down)} (the downlink is the busier one)"
    )
    line = rows.traffic_text(d)
    assert f"down mean {F.bandwidth(t['mean_down_mbps'] * 1e6)} / peak 57 Mbps" in line
    paper = estimate(s, mode="paper").to_dict()
    assert rows.traffic_rows(paper)[0]["value"].startswith("the mean node (paper mode")


def test_traffic_text_takes_mixed_sites_links_and_scales_units() -> None:
    """With [[site]] links the scenario's 100 Mbps is not used: the download's peak is the busiest
    site's downlink (INTELLECT-1's US site, 1.2 Gbps), and rates above 1,000 Mbps read in Gbps."""
    from dispersal.model import estimate
    from dispersal.model.inputs.presets import load_scenario
    from dispersal.present import rows

    d = estimate(load_scenario("intellect1_schedule"), mode="default").to_dict()
    line = rows.traffic_text(d)
    assert "peak 1.2 Gbps, down mean" in line
    assert line.split("down mean ")[1].split(";")[0].endswith("/ peak 1.2 Gbps")
    assert "e+" not in line


@pytest.mark.slow
def test_answer_card_equals_plan_json_in_the_app_cli_and_report() -> None:
    """One card: cost, premium and P(reach) read the same numbers as `dispersal plan --json`, whether
    built from the CLI's JSON, from the app's own plan, or in the HTML report."""
    import json

    from typer.testing import CliRunner

    from dispersal.app import logic, views
    from dispersal.cli import app
    from dispersal.model.inputs.presets import load_scenario
    from dispersal.present.answer import answer_card
    from dispersal.present.report import render_html

    r = CliRunner().invoke(app, ["plan", "--target", "1e24", "--mode", "paper", "--samples", "20", "--json"])
    assert r.exit_code == 0, r.output
    (d,) = json.loads(r.output)
    card = dict(plan_card(d).lines)
    assert card["cost"] == F.money(d["cost_usd"])
    assert card["premium over one datacenter"].startswith(
        F.factor(d["cost_premium"]) + " the cost of one datacenter"
    )
    assert card["P(reach)"] == (
        f"{F.percent(d['feasible_fraction'], 0)} of 20 Monte Carlo draws reach the target; cost P10-P90 "
        f"{F.money(d['cost_usd_p10'])} - {F.money(d['cost_usd_p90'])} over those draws"
    )
    assert card["binding constraint"].startswith("the time budget (the run uses all 740 days)")
    # The app plans the same question itself (Planner tab defaults, paper mode, 1e24).
    ui = logic.default_ui()
    ui.update(mode="paper", plan_target="1e24")
    p = views.run_plan(views.plan_args(ui, logic.scenario_dict(ui)))
    app_card = answer_card(p, estimate=views.plan_estimate(p))
    assert dict(app_card.lines)["cost"] == card["cost"]
    assert dict(app_card.lines)["premium over one datacenter"] == card["premium over one datacenter"]
    assert "paper mode, metric c_local, bisect search" in app_card.cite
    assert "WAN 100 Mbps up / 100 Mbps down, 100 ms one way, every link = the WAN" in app_card.cite
    page = render_html(load_scenario("paper_threat_model"), "paper", plan=d)
    assert "<h2>Plan</h2>" in page and f"Cite this: {plan_card(d).cite}" in page


def test_answer_card_of_an_infeasible_plan_gives_the_reason() -> None:
    d: dict[str, Any] = {
        "feasible": False,
        "target_flop": 1e27,
        "metric": "c_quality",
        "mode": "default",
        "search": "exact",
        "regime": "treaty",
        "reasons": ["no hardware reaches 1e+27 FLOP c_quality: the time budget binds"],
        "extrapolation": [],
    }
    card = plan_card(d)
    assert card.headline == "No plan reaches 1e+27 FLOP (c_quality)"
    assert dict(card.lines)["binding constraint"] == d["reasons"][0]
    assert dict(card.lines)["premium over one datacenter"].startswith("not planned")
    assert card.cite.endswith("no plan reaches 1e+27 FLOP of c_quality.")


def test_answer_card_premium_when_only_the_dispersed_plan_fails() -> None:
    """`plan --algorithms decoupled` at 1e25: one datacenter reaches the target ($10.2M), the plan under
    the rule does not; the card must not claim that no single-datacenter plan reaches it."""
    d: dict[str, Any] = {
        "feasible": False,
        "target_flop": 1e25,
        "metric": "c_quality",
        "mode": "default",
        "search": "exact",
        "regime": "treaty",
        "reasons": ["no hardware reaches 1e+25 FLOP c_quality"],
        "extrapolation": [],
        "centralized_cost_usd": 10.2e6,
        "cost_premium": None,
    }
    premium = dict(plan_card(d).lines)["premium over one datacenter"]
    assert premium == "- (no plan under the rule reaches the target; one datacenter: $10.2M)"
    d["centralized_cost_usd"] = None
    assert dict(plan_card(d).lines)["premium over one datacenter"].startswith("- (no single-datacenter")


def test_report_frontier_rows_name_the_node_once_and_the_reach_rate_asked() -> None:
    """The report's frontier table read "50x 50x a100_40gb BF16" (the hardware string already carries
    the chips per site) and its P(reach) line said 100 Mbps whatever rate the frontier used."""
    from dispersal.present.frontier import headline, limit_rows

    lim = {"target_flop": 1e25, "premium": 2.0, "sites": 31, "chips_per_site": 50}
    fr = {
        "limits": [{**lim, "hardware": "50x a100_40gb BF16", "least_bandwidth_bits_per_s": 1e9}],
        "p_reach": [{"target_flop": 1e25, "p_reach": 0.66}],
        "reach_bandwidth_bits_per_s": 1e9,
        "mode": "default",
        "metric": "c_quality",
        "regime": "treaty",
        "samples": 100,
    }
    (row,) = limit_rows(fr)
    assert row["node"] == "50x a100_40gb BF16" and row["least bandwidth per site"] == "1 Gbps"
    assert "P(reach) at 1 Gbps 66%" in headline(fr)


def test_frontier_rows_show_every_field_the_analysis_returns() -> None:
    """A field the analysis adds later (a P10/P50/P90 per cell, the share of draws) appears as a column
    without a second implementation: the rows are generic on the limit's and the band's keys."""
    from dispersal.present.frontier import limit_rows

    lim = {
        "target_flop": 1e25,
        "premium": 2.0,
        "least_bandwidth_bits_per_s": None,
        "binds": "cost: 2.3x at 10 Gbps",
        "new_cost_usd_p10_p50_p90": [1e7, 2e7, "cannot reach"],
        "band": {"p_reach": 0.4, "stops_share": 0.25, "p_reach_by_bandwidth": [0.1, 0.4]},
    }
    (row,) = limit_rows({"limits": [lim]})
    assert row["P(reach within premium)"] == "40%"
    assert row["least bandwidth per site"] == "-"
    assert row["new cost usd p10 p50 p90"] == "$10M / $20M / cannot reach"
    assert row["band stops share"] == "25%"
    assert not any("by bandwidth" in k for k in row)


def test_algorithm_row_says_what_streaming_means_and_the_site_pipeline_shape() -> None:
    """ddp printed "ddp (streaming), H = 1"; the model's flag means "sync overlapped with compute",
    fragments are their own input; site-pipeline DiLoCo shows its stages and groups like pp_diloco."""
    from dispersal.model import estimate
    from dispersal.model.inputs.presets import load_scenario
    from dispersal.present import rows

    def algo(s: Any) -> str:
        got = {r["quantity"]: r["value"] for r in rows.summary_rows(estimate(s, mode="default").to_dict())}
        return got["algorithm"]

    base = load_scenario("paper_threat_model")
    assert algo(base.replace(algorithm="ddp")) == "ddp, H = 1"
    assert algo(base.replace(algorithm="streaming", fragments=4)).startswith(
        "diloco (streaming, 4 fragments), H = "
    )
    paper = estimate(load_scenario("decoupled_diloco_12b"), mode="paper").to_dict()
    paper_algo = {r["quantity"]: r["value"] for r in rows.summary_rows(paper)}["algorithm"]
    assert "fragments" not in paper_algo, paper_algo  # paper mode ignores fragments (its note says so)
    x = algo(load_scenario("diloco_x_107b"))
    assert x.startswith("site_pp_diloco (sync overlapped with compute), 4 stages x 2 groups, H = "), x


@pytest.mark.slow
def test_frontier_figure_without_draws_says_so_and_has_readable_site_ticks() -> None:
    """`frontier --samples 0 --max-site-kw 50 --plot`: the title read "P(reach) ...: 1e+24: -", left
    out the power cap, the legend offered "draws P10-P90" with no draws, and the sites axis had one tick."""
    from dispersal.model.analyses.frontier import frontier
    from dispersal.present.frontier_figures import frontier_figure

    d = frontier(
        targets_flop=(1e24,),
        premiums=(2.0,),
        sites=(10,),
        bandwidth_grid_bits_per_s=(1e8, 1e9),
        max_site_kw=50.0,
        samples=0,
    ).to_dict()
    fig = frontier_figure(d).figure
    title = fig.get_suptitle()
    assert "every site under 50 kW" in title and "1e+24: not drawn" in title
    left, right = fig.axes[:2]
    legend = left.get_legend()
    assert legend is not None
    assert "draws P10-P90" not in [t.get_text() for t in legend.get_texts()]
    lo, hi = right.get_ylim()
    ticks = [t for t in right.get_yticks() if lo <= t <= hi]
    assert len(ticks) >= 2, ticks


def test_provenance_of_a_sites_scenario_gives_each_sites_link() -> None:
    """The report's "Used:" line of INTELLECT-1's [[site]] scenario named the scenario's unused
    100 Mbps / 100 ms WAN; it must give each site's own link and the pacing edge."""
    from dispersal.model import estimate
    from dispersal.model.inputs.presets import load_scenario
    from dispersal.present.provenance import estimate_provenance

    d = estimate(load_scenario("intellect1_schedule"), mode="default").to_dict()
    used = estimate_provenance(d, "one")
    assert "100 Mbps" not in used and "WAN" not in used
    assert "us: 1.2 Gbps up / 1.2 Gbps down, 20 ms; europe: 320 Mbps up / 320 Mbps down, 45 ms" in used
    assert f"sync paced by the {d['sync_pacing']}" in used
