"""`dispersal counter`: JSON schema, plot, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.cli.counter import money_millions

runner = CliRunner()


@pytest.mark.slow
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


@pytest.mark.slow
def test_table_runs() -> None:
    r = runner.invoke(app, ["counter", "--lever", "whistleblower", "--detection", "people_per_site=5"])
    assert r.exit_code == 0, r.output
    assert "whistleblower" in r.stdout


def test_money_in_millions() -> None:
    assert [money_millions(v) for v in (680_400.0, 999_722.6, 14.7e6, 2_144.1e6)] == [
        "$0.68M",
        "$1.00M",
        "$14.7M",
        "$2,144.1M",
    ]


@pytest.mark.slow
def test_markdown_matches_the_json_rows() -> None:
    """--markdown prints one table row per JSON row, with the exact collateral counts."""
    args = ["counter", "--lever", "hbm", "--bundle", "bandwidth_cap+chip_registry"]
    md = runner.invoke(app, [*args, "--markdown"])
    js = runner.invoke(app, [*args, "--json"])
    assert md.exit_code == 0 and js.exit_code == 0, md.output + js.output
    lines = md.stdout.strip().splitlines()
    assert lines[0].startswith("| lever / bundle | evader cost |") and lines[1].startswith("|---|")
    rows = json.loads(js.stdout)
    assert len(lines) == 2 + len(rows)
    for line, row in zip(lines[2:], rows, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == row["lever"].replace("+", " + ")
        assert cells[1] == money_millions(row["cost_usd"])
        assert cells[3] == f"{row['nodes']:,}"
    coll = rows[2]["collateral"]
    assert lines[4].endswith(
        f"{coll['broadband_lines_capped']:,.0f} broadband lines capped; "
        f"{coll['installations_registering']:,.0f} installations registering |"
    )


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
