"""Issue 24: `dispersal report` covers every view with the app's options; an edited preset loses its
title; `dispersal counter` and the app share one countermeasure convention."""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.present import questions

runner = CliRunner()
#: Narrows the default report to the estimate and resilience.
NARROW = ["--no-plan", "--no-frontier", "--no-monitor", "--no-counter", "--uncertainty", "0"]


@pytest.mark.slow
def test_edited_preset_loses_its_title_in_estimate_and_report(tmp_path: Path) -> None:
    r = runner.invoke(app, ["estimate", "--nodes", "4", "--set", "pue=1.2", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["scenario"]["name"] == "paper_threat_model edited: --nodes, pue"
    plain = runner.invoke(app, ["estimate", "--json"])
    assert json.loads(plain.stdout)["scenario"]["name"] == "paper threat model (Table 1, 1e24 row)"
    out = tmp_path / "r.html"
    r = runner.invoke(
        app,
        ["report", "paper_threat_model", "--bandwidth", "30Mbps", "--out", str(out), *NARROW],
    )
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert "1e24 row" not in text
    assert "<h1>paper_threat_model edited: --bandwidth (default mode, regime treaty)</h1>" in text


def _cli_defaults(command: str) -> dict[str, Any]:
    click_cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {p.name: p.default for p in click_cmd.params}


def test_counter_and_the_app_share_one_default_convention() -> None:
    """The app's default ("report") convention is exactly `dispersal counter`'s defaults."""
    from dispersal.app import logic, views
    from dispersal.cli._common import link_rates
    from dispersal.model.analyses.countermeasures import Convention
    from dispersal.model.inputs.units import parse_duration

    d = _cli_defaults("counter")
    cli = Convention(
        mode=d["mode"],
        metric=d["metric"],
        days=d["days"],
        bandwidth_bits_per_s=link_rates(d["bandwidth"])[0],
        latency_s=parse_duration(d["latency"], "latency"),
        chip_only=not d["capex"],
        search=d["search"],
        base_regime=d["regime"],
    )
    ui = logic.default_ui()
    assert ui["plan_target"] == d["target"]
    for mode in ("default", "paper"):  # the sidebar's mode does not change the shared convention
        got = Convention(**views.convention_args({**ui, "mode": mode}, logic.scenario_dict(ui)))
        assert got == cli
    assert views.counter_command(ui, views.convention_args(ui, logic.scenario_dict(ui))) == (
        "dispersal counter --target 1e25"
    )
    # "this scenario" is the scenario's mode, budget and links: a counter command with those flags.
    scen = views.convention_args({**ui, "cm_convention": "scenario"}, logic.scenario_dict(ui))
    assert scen["mode"] == "default" and scen["days"] == pytest.approx(ui["duration_days"])
    assert views.counter_command(ui, scen).startswith("dispersal counter --target 1e25 --mode default")


def _no_svg_ids(text: str) -> str:
    """The HTML without matplotlib's per-drawing random SVG ids (clip paths and glyph references)."""
    return re.sub(r"\b[a-z][0-9a-f]{8,}\b", "ID", text)


#: The computations the app and `dispersal report` share (`present.questions`).
ASKED = ("run_plan", "run_uncertainty", "run_countermeasures", "run_frontier", "run_monitor")


class Asked:
    """`present.questions.run_*` memoised on their full arguments (defaults filled, progress dropped):
    a question asked twice with the same arguments is computed once (the answers are deterministic:
    seeded draws). ``misses`` lists the questions that were computed, ``hits`` those answered from
    an earlier identical question."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.hits: list[str] = []
        self.misses: list[str] = []

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)

        def memo(*a: Any, **k: Any) -> Any:
            bound = sig.bind(*a, **k)
            bound.apply_defaults()
            args = {key: v for key, v in bound.arguments.items() if key != "progress"}
            key = name + json.dumps(args, sort_keys=True, default=repr)
            if key in self.answers:
                self.hits.append(name)
                return copy.deepcopy(self.answers[key])
            self.misses.append(name)
            out = fn(*a, **k)
            self.answers[key] = copy.deepcopy(out)
            return out

        return memo


@pytest.mark.slow
def test_report_from_the_app_state_equals_the_cli_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every section the app's report holds (plan with P(reach), countermeasures, uncertainty, frontier,
    resilience settings), computed as the app's views compute them, gives the same HTML as `dispersal
    report` with the options the app shows.

    The CLI asks `present.questions` exactly the questions the app asked (same arguments, checked:
    no question is computed anew), so their answers are computed once, by the app, and reused."""
    from dispersal.app import logic, views
    from dispersal.present.report import render_html

    asked = Asked()
    for name in ASKED:
        memo = asked.wrap(name, getattr(questions, name))
        monkeypatch.setattr(questions, name, memo)
        if hasattr(views, name):  # views binds some of them at import
            monkeypatch.setattr(views, name, memo)
    ui = logic.default_ui()
    ui.update(mode="paper", plan_target="1e24", res_lose_sites=2, res_down_for_days=7.0, mon_lose_sites=3)
    sd = logic.scenario_dict(ui)
    args = views.plan_args(ui, sd)
    conv = views.convention_args(ui, sd)
    bundles = None
    session: dict[str, Any] = {
        "_plan": (views._digest(args), views.run_plan(args), args),
        "_unc": (views.uncertainty_key(args), views.run_uncertainty("1e24", args, 20, 0)),
        "_cm": (views.cm_key(ui, conv), views.run_countermeasures("1e24", conv, bundles=bundles)),
    }
    mon_args = views.monitor_request(ui, "report")
    session["_mon"] = (views._digest(mon_args), questions.run_monitor(mon_args))
    label = logic.scenario_label(ui)
    parts = views.report_parts(ui, label, session, frontier=True)
    rp = parts["parts"]
    assert (
        rp.plan is not None
        and rp.plan["feasible_fraction"] == session["_unc"][1]["points"][2]["feasible_fraction"]
    )
    assert rp.counter is not None and rp.uncertainty is not None and rp.frontier is not None
    assert rp.monitor is not None
    command = views.report_command(ui, parts, frontier=True)
    # every section computed: the report's defaults, no --no-... flag
    assert command.startswith(
        "dispersal report paper_threat_model --mode paper --target 1e24 --monitor-lose-sites 3 --uncertainty 20 "
    )
    assert "--no-" not in command and "--monitor-lose-sites 3" in command
    built = logic.build(ui)
    assert built.scenario is not None
    from_app = render_html(built.scenario, built.mode, source="paper_threat_model", parts=rp)
    out = tmp_path / "r.html"
    argv = command.split()[1:]
    argv[argv.index("--uncertainty") + 1] = "20"  # the app runs 200 draws; 20 keep the test quick
    assert sorted(set(asked.misses)) == sorted(ASKED)  # the app computed every section
    asked.misses.clear()
    asked.hits.clear()
    r = runner.invoke(app, [*argv, "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert asked.misses == [], f"the CLI asked questions the app did not: {asked.misses}"
    assert sorted(asked.hits) == sorted(
        ASKED
    )  # one each: the report's plan, draws, levers, frontier, monitor
    assert json.loads(r.stdout)["sections"] == [
        "plan",
        "frontier",
        "monitor",
        "counter",
        "uncertainty",
        "estimate",
        "resilience",
    ]
    from_cli = out.read_text(encoding="utf-8")
    assert _no_svg_ids(from_cli) == _no_svg_ids(from_app)
    for head in (
        "Plan",
        "Frontier: where dispersal stops",
        "Monitor: one building vs N sites",
        "Uncertainty",
    ):
        assert f"<h2>{head}</h2>" in from_cli
    assert "2 of 1 sites" not in from_cli and re.search(r"2 of [\d,]+ sites go dark", from_cli)
    assert "Scenario shown: preset paper_threat_model (its title: " in from_cli
    # the uncertainty chart shows the share of draws that cannot reach each target
    assert "cannot reach" in from_cli and "P(reach)" in from_cli
