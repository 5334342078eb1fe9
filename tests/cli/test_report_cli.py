"""`dispersal report`: one self-contained HTML file with embedded images; bad input exits 2."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from typer.testing import CliRunner

from dispersal.cli import app


def test_report_writes_self_contained_html(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "r.html"
    r = CliRunner().invoke(app, ["report", "gpt4_level_gh200", "--out", str(out), "--mode", "paper"])
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and text.rstrip().endswith("</html>")
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)
    assert len(images) >= 3
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    # nothing fetched from elsewhere
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", text)
    assert "paper mode" in text and "C_local" in text
    assert list(out.parent.iterdir()) == [out]  # atomic: no temporary file left


def test_report_default_out_name(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["report", "intellect1", "--set", "num_nodes=4"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "intellect1.html").is_file()


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
