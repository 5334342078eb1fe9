"""`dispersal report`: one self-contained HTML file with embedded images; bad input exits 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app


def test_report_writes_self_contained_html(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "r.html"
    r = CliRunner().invoke(app, ["report", "gpt4_level_gh200", "--out", str(out), "--mode", "paper"])
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


def test_report_default_out_is_a_named_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["report", "intellect1", "--set", "num_nodes=4", "--json"])
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
