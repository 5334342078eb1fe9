"""`dispersal sweep --field`: any Estimate figure over two Scenario fields (issue 11, item 7)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.model import estimate
from dispersal.model.inputs.presets import load_scenario


@pytest.mark.slow
def test_field_sweep_charts_an_estimate_figure(tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    r = CliRunner().invoke(
        app,
        [
            "sweep",
            "--field",
            "utilisation",
            "--x",
            "bandwidth=100Mbps,1Gbps",
            "--y",
            "inner_steps=10,100",
            "--scenario",
            "intellect1",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    assert len(rows) == 4 and (tmp_path / "sweep.png").exists()
    base = load_scenario("intellect1")
    want = estimate(base.replace(bandwidth_up_bits_per_s=1e9, bandwidth_down_bits_per_s=1e9, inner_steps=100))
    got = next(x for x in rows if x["bandwidth"] == "1Gbps" and x["inner_steps"] == "100")
    assert got["utilisation"] == want.utilisation
    # More bandwidth never lowers utilisation at fixed H.
    for h in ("10", "100"):
        lo, hi = (
            next(x for x in rows if x["bandwidth"] == b and x["inner_steps"] == h)
            for b in ("100Mbps", "1Gbps")
        )
        assert hi["utilisation"] >= lo["utilisation"]
    with out.open() as f:
        assert len(list(csv.DictReader(f))) == 4


def test_field_sweep_nested_figure_and_errors(tmp_path: Path) -> None:
    ok = CliRunner().invoke(
        app,
        [
            "sweep",
            "--field",
            "traffic.mean_mbps",
            "--x",
            "num_nodes=2,4",
            "--y",
            "latency_s=10ms,100ms",
            "--out",
            str(tmp_path / "t.csv"),
            "--no-plot",
        ],
    )
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(
        app,
        [
            "sweep",
            "--field",
            "nonsense",
            "--x",
            "num_nodes=2,4",
            "--y",
            "latency_s=10ms",
            "--out",
            str(tmp_path / "u.csv"),
            "--no-plot",
        ],
    )
    assert bad.exit_code == 2 and "nonsense" in bad.output


def test_field_sweep_offers_only_sweepable_fields(tmp_path: Path) -> None:
    """The list of sweep inputs offered schema_version, name and the [[site]] / [[churn]] tables."""
    for name in ("schema_version", "name", "sites", "churn"):
        r = CliRunner().invoke(
            app,
            [
                "sweep",
                "--field",
                "days",
                "--x",
                f"{name}=1,2",
                "--y",
                "num_nodes=2,3",
                "--out",
                str(tmp_path / "t.csv"),
            ],
        )
        assert r.exit_code == 2, r.output
        assert r.output.startswith(
            f"error: --x: unknown sweep input {name!r} (use bandwidth, distance, hardware, "
        )
        offered = r.output.split("(use ")[1]
        assert all(
            f" {n}," not in offered and f" {n})" not in offered
            for n in ("schema_version", "name", "sites", "churn")
        )
