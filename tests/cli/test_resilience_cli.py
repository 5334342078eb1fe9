"""`dispersal resilience`: JSON shape, table, plot, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dispersal.cli import app

runner = CliRunner()


def test_json_has_goodput_for_four_algorithms() -> None:
    """--json prints an object whose goodput has exactly ddp, ddp_elastic, diloco and decoupled."""
    result = runner.invoke(app, ["resilience", "--chips", "1.2M", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["goodput"]) == {"ddp", "ddp_elastic", "diloco", "decoupled"}
    assert all(0 < v <= 1 for v in data["goodput"].values())
    assert data["inputs"]["chips"] == 1_200_000
    assert set(data["site_loss"]["outcomes"]) == set(data["goodput"])
    assert data["simulation"] is None


def test_json_with_simulation_reports_stderr() -> None:
    """--simulate adds a mean and standard error per algorithm, and the same seed repeats exactly."""
    args = ["resilience", "--chips", "50k", "--days", "5", "--simulate", "--replications", "3", "--json"]
    first = runner.invoke(app, args)
    second = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    sim = json.loads(first.stdout)["simulation"]
    assert set(sim["goodput"]["decoupled"]) == {"mean", "stderr"}
    assert first.stdout == second.stdout


def test_never_finishing_run_is_null_in_json() -> None:
    """Losing every site for ever gives time_to_target_h null (JSON has no infinity)."""
    result = runner.invoke(app, ["resilience", "--sites", "2", "--lose-sites", "2", "--json"])
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)["site_loss"]["outcomes"]["decoupled"]
    assert outcome["time_to_target_h"] is None
    assert outcome["finishes_within_budget"] is False


def test_table_and_plot(tmp_path: Path) -> None:
    """The default output is a table naming each algorithm; --plot writes a PNG."""
    png = tmp_path / "goodput.png"
    result = runner.invoke(app, ["resilience", "--mtbf", "1y", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    for name in ("ddp", "ddp_elastic", "diloco", "decoupled"):
        assert name in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_input_exits_2_with_one_line() -> None:
    """A negative MTBF exits with status 2 and one line: error: field: message."""
    result = runner.invoke(app, ["resilience", "--mtbf", "-1h"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: --mtbf: ")
