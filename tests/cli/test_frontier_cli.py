"""`dispersal frontier` as a user runs it: the table, strict JSON with its documented keys, the PNG
of `--plot`, and bad input as one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SMALL = ["frontier", "--target", "1e24", "--premium", "2", "--bandwidth", "100Mbps,1Gbps", "--sites", "10"]


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "dispersal", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
def test_json_and_plot(tmp_path: Path) -> None:
    """--json prints the documented keys, P(reach) first, strict numbers; --plot writes a PNG."""
    png = tmp_path / "f.png"
    r = _run([*SMALL, "--samples", "3", "--json", "--plot", str(png)], tmp_path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert next(iter(d)) == "p_reach" and d["schema_version"] == 2
    for key in (
        "limits",
        "at_sites",
        "quality_lines",
        "most_sites_by_bandwidth",
        "fewest_sites_by_bandwidth",
    ):
        assert key in d
    lim = d["limits"][0]
    assert next(iter(lim)) == "band" and 0.0 <= lim["band"]["p_reach"] <= 1.0
    for key in (
        "least_bandwidth_bits_per_s",
        "most_sites",
        "least_power_per_site_kw",
        "shortest_run_days",
        "longest_distance_m",
        "binds",
        "most_sites_binds",
    ):
        assert key in lim
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_table(tmp_path: Path) -> None:
    """The table names the limits and what binds; no traceback."""
    r = _run([*SMALL, "--samples", "0", "--max-site-kw", "50"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Where dispersal stops" in r.stdout and "Largest target" in r.stdout
    # The power cap and the undrawn P(reach) are said, not left as "-".
    flat = " ".join(r.stdout.split())  # the title may wrap
    assert "every site under 50 kW" in flat and "P(reach) at 100 Mbps: 1e+24: not drawn" in flat
    # Piped output is as wide as the other commands' (not squeezed into 80 columns, headers unbroken),
    # and the title names the metric as the docs do and the one-building cost the premiums divide.
    assert "least bw/site" in r.stdout and "premium" in r.stdout
    assert "C_quality" in r.stdout and "one building: 1e+24: $" in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flag", "value"), [("--sites", "0"), ("--sites", "2.5"), ("--bandwidth", "fast"), ("--plot", "x.txt")]
)
def test_bad_input_is_one_line(tmp_path: Path, flag: str, value: str) -> None:
    """Exit 2, one line naming the field, no traceback, before any search."""
    r = _run(["frontier", flag, value], tmp_path)
    assert r.returncode == 2
    assert flag.lstrip("-") in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--lose-sites", "2"], "--lose-sites"),
        (["--wan", "1Gbps"], "--wan"),
        (["--compare", "--plot", "x.png"], "--plot"),
        (["--compare", "--samples", "5"], "--samples"),
        (["--year", "--sites", "10"], "--sites"),
        (["--until", "2028"], "--until"),
    ],
)
def test_a_flag_the_chosen_form_does_not_read_is_an_error(argv: list[str], flag: str) -> None:
    """`frontier --lose-sites 2` without --compare used to run the grid and ignore it: exit 2 naming the
    flag and the form that reads it, before any search."""
    from typer.testing import CliRunner

    from dispersal.cli import app

    r = CliRunner().invoke(app, ["frontier", *argv])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {flag}: is read only with ") and len(r.output.splitlines()) == 1


def test_year_range_error_prints_years_plainly() -> None:
    from typer.testing import CliRunner

    from dispersal.cli import app

    r = CliRunner().invoke(app, ["frontier", "--year", "--until", "1900"])
    assert r.exit_code == 2 and "must be in [2026, 2100] year, got 1900" in r.output, r.output
