"""`dispersal tornado`: JSON shape, plot, one-line errors; the samples table renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app

runner = CliRunner()
#: Each tornado is ~40 full re-plans. 1e23 on one accelerator: the same JSON shape and 13 bars as 1e25
#: at a third of 1e24's re-planning time (~5 s of CPU); the 1e25 numbers are covered by
#: tests/model/test_uncertainty.py. The table-and-plot run asks the same re-plans (cached by then).
FAST = ["tornado", "--hardware", "h100_sxm", "--target", "1e23"]


@pytest.fixture(scope="module")
def json_out() -> dict[str, object]:
    result = runner.invoke(app, [*FAST, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


@pytest.mark.slow
def test_json_schema(json_out: dict[str, object]) -> None:
    """--json prints the nominal cost and one bar per uncertain parameter with the documented keys."""
    assert set(json_out) == {"target_flop", "regime", "mode", "nominal_cost_usd", "bars"}
    bars = json_out["bars"]
    assert isinstance(bars, list) and len(bars) == 13
    keys = {
        "name",
        "description",
        "low_value",
        "high_value",
        "low_label",
        "high_label",
        "cost_at_low_usd",
        "cost_at_high_usd",
        "cost_low_usd",
        "cost_high_usd",
        "swing_usd",
        "nominal_cost_usd",
    }
    for b in bars:
        assert set(b) == keys
    swings = [b["swing_usd"] for b in bars if b["swing_usd"] is not None]
    assert swings == sorted(swings, reverse=True)


@pytest.mark.slow
def test_table_and_plot(tmp_path: Path) -> None:
    """The table names the parameters, and --plot writes a PNG."""
    png = tmp_path / "tornado.png"
    result = runner.invoke(app, [*FAST, "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "mfu" in result.stdout and "swing" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args",
    [
        ["--target", "-5"],
        ["--bandwidth", "fast"],
        ["--mode", "nope"],
        ["--days", "0"],
        ["--hardware", "abacus"],
        ["--regime", "nowhere"],
    ],
)
def test_bad_input_exits_2(args: list[str]) -> None:
    """Bad input: one line on stderr, exit status 2."""
    result = runner.invoke(app, ["tornado", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_render_samples_table() -> None:
    """render_samples_table gives a table with the P10 / P50 / P90 columns (1e23: ~1 s of draws)."""
    from rich.console import Console

    from dispersal.cli.uncertainty import render_samples_table
    from dispersal.model.analyses.uncertainty import plan_samples
    from dispersal.model.search import planner

    r = plan_samples(1e23, samples=10, seed=0, constraints=planner.Constraints(hardware=("h100_sxm",)))
    console = Console(width=200, record=True)
    console.print(render_samples_table(r))
    text = console.export_text()
    assert "P10" in text and "P90" in text and "cost" in text
