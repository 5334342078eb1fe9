"""`dispersal counter`: JSON schema, plot, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app

runner = CliRunner()


def test_json_schema(tmp_path: Path) -> None:
    png = tmp_path / "c.png"
    r = runner.invoke(
        app, ["counter", "--lever", "hbm", "--bundle", "hbm+chip_registry", "--json", "--plot", str(png)]
    )
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [row["lever"] for row in rows] == ["none", "hbm", "hbm+chip_registry"]
    for row in rows:
        for k in ("lever", "cost_usd", "cost_multiple", "nodes", "p_detect", "expected_detection_day"):
            assert k in row
    assert rows[0]["cost_multiple"] == 1.0
    assert png.stat().st_size > 1000


def test_table_runs() -> None:
    r = runner.invoke(app, ["counter", "--lever", "whistleblower", "--detection", "people_per_site=5"])
    assert r.exit_code == 0, r.output
    assert "whistleblower" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--lever", "nope"],
        ["--target", "abc"],
        ["--bundle", "hbm+zzz"],
        ["--detection", "foo=1"],
        ["--detection", "people_per_site"],
        ["--days", "0"],
        ["--mode", "weird"],
        ["--regime", "narnia"],
        ["--bandwidth", "-5Mbps"],
    ],
)
def test_bad_input_exit_2_one_line(args: list[str]) -> None:
    r = runner.invoke(app, ["counter", *args])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
