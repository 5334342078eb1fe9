"""`dispersal report`: one self-contained HTML file with embedded images; bad input exits 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from default_report import DefaultReport, shared_default_report
from dispersal.cli import app

#: The flags that narrow the default report (which answers everything: plan, frontier, monitor,
#: countermeasures, uncertainty) to the estimate and resilience: the quick tests of the file itself.
NARROW = ["--no-plan", "--no-frontier", "--no-monitor", "--no-counter", "--uncertainty", "0"]


@pytest.fixture(scope="module")
def default_report(tmp_path_factory: pytest.TempPathFactory) -> DefaultReport:
    """The default report of DEFAULT_REPORT_SCENARIO, built once per run for every test that reads it."""
    return shared_default_report(tmp_path_factory)


@pytest.mark.slow
def test_report_writes_self_contained_html(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "r.html"
    r = CliRunner().invoke(app, ["report", "gpt4_level_gh200", "--out", str(out), "--mode", "paper", *NARROW])
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and text.rstrip().endswith("</html>")
    # The app's own figures, inline SVG: an accessible name each and a hover title per mark.
    svgs = re.findall(r"<svg[^>]*>", text)
    assert len(svgs) >= 3
    assert all('role="img"' in s and 'aria-label="' in s for s in svgs)
    assert text.count("<title>") > 3 * len(svgs)
    # nothing fetched from elsewhere
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", text)
    assert "paper mode" in text and "C_local" in text
    assert list(out.parent.iterdir()) == [out]  # atomic: no temporary file left


@pytest.mark.slow
def test_report_default_out_is_a_named_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["report", "intellect1", "--set", "num_nodes=4", "--json", *NARROW])
    assert r.exit_code == 0, r.output
    want = Path("dispersal-output") / "report" / "intellect1.html"
    assert json.loads(r.stdout) == {
        "path": str(want),
        "scenario": "intellect1",
        "label": "intellect1 edited: num_nodes",
        "mode": "default",
        "sections": ["estimate", "resilience"],
    }
    assert (tmp_path / want).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dispersal-output"]  # nothing else in the cwd


def test_report_bad_scenario_exits_2_one_line(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["report", "no_such_scenario", "--out", str(tmp_path / "x.html")])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: scenario:")
    assert not (tmp_path / "x.html").exists()


def test_report_bad_field_exits_2(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        app, ["report", "paper_threat_model", "--set", "num_nodes=0", "--out", str(tmp_path / "x.html")]
    )
    assert r.exit_code == 2
    assert r.output.strip() == "error: num_nodes: must be an integer >= 1, got 0"


def test_plan_provenance_quotes_no_paper_figure_for_another_regime() -> None:
    """Under treaty_hbm the "Used:" line quoted the paper's $30.7M (a Table 1 row under the treaty's
    16-H100 rule) for a plan under a different rule; in default mode it said nothing of the mode."""
    from dispersal.present.provenance import plan_provenance

    c = {"bandwidth_up_bits_per_s": 100e6, "bandwidth_down_bits_per_s": 100e6, "latency_s": 0.1}
    p = {
        "target_flop": 1e25,
        "mode": "default",
        "metric": "c_quality",
        "search": "exact",
        "objective": "cost",
        "regime": "treaty_hbm",
        "constraints": {**c, "max_duration_s": 740 * 86400.0},
    }
    text = plan_provenance(p, "one")
    assert "quotes" not in text and "no row for regime treaty_hbm" in text
    treaty = plan_provenance({**p, "regime": "treaty"}, "one")
    assert "quotes $" in treaty and "(paper mode, c_local; this plan is default mode, c_quality)" in treaty


def test_version_is_declared_once_and_cited_with_the_changelog_release() -> None:
    """`dispersal --version`, pyproject.toml and the CHANGELOG's newest release name one version."""
    import tomllib

    import dispersal

    root = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dispersal.__version__"}
    head = re.search(r"^## (\S+)", (root / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert head is not None and head.group(1) == dispersal.__version__
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.startswith(f"dispersal {dispersal.__version__}")


@pytest.mark.slow
def test_default_report_answers_every_question(default_report: DefaultReport) -> None:
    """`dispersal report SCENARIO` with no flags: the answer card (plan, premium, P(reach)), the frontier
    with its P(reach) drawn, the monitor comparison, countermeasures, uncertainty and resilience; the
    title names the mode, regime and target (not the preset's paper-mode "Table 1, 1e24 row").
    The report is the run's one default build (tests/default_report.py)."""
    assert default_report.summary["sections"] == [
        "plan",
        "frontier",
        "monitor",
        "counter",
        "uncertainty",
        "estimate",
        "resilience",
    ]
    text = default_report.html
    h1 = re.search(r"<h1>(.*)</h1>", text)
    assert h1 is not None
    assert h1.group(1) == "preset paper_threat_model (default mode, regime treaty, target 1e25 FLOP)"
    for head in ("Plan", "Frontier: where dispersal stops", "Monitor: one building vs N sites"):
        assert f"<h2>{head}</h2>" in text
    for head in ("Countermeasures", "Uncertainty", "Resilience: goodput vs scale"):
        assert f"<h2>{head}</h2>" in text
    assert "premium over one datacenter" in text and "P(reach)" in text
    assert "not drawn" not in text  # the frontier's P(reach) uses the report's 100 draws
    assert "P(detect) aggregate, independent" in text
    import dispersal

    assert f"dispersal {dispersal.__version__}" in text


@pytest.mark.slow
def test_plan_json_has_the_download_side_of_the_traffic() -> None:
    """`plan --json` had upload fields only; the downlink is what binds the 1e25 plan (88% busy)."""
    r = CliRunner().invoke(app, ["plan", "--target", "1e24", "--mode", "paper", "--json"])
    assert r.exit_code == 0, r.output
    (d,) = json.loads(r.stdout)
    down = d["wan_download"]
    assert set(down) == {
        "mean_down_mbps_per_node",
        "peak_down_mbps_per_node",
        "down_bytes_per_sync",
        "link_utilisation_down",
    }
    from dispersal.model.inputs.scenario import Scenario
    from dispersal.model.run.estimate import estimate

    t = estimate(Scenario.from_dict(d["scenario"]), mode="paper").to_dict()["traffic"]
    assert down["mean_down_mbps_per_node"] == t["mean_down_mbps"]
    assert down["link_utilisation_down"] == t["link_utilisation_down"]
