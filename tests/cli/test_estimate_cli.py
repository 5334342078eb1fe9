"""`dispersal estimate` through Typer's CliRunner: table, --json, and one-line input errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.model.run.estimate import Estimate

runner = CliRunner()


def test_estimate_prints_a_table() -> None:
    r = runner.invoke(app, ["estimate"])
    assert r.exit_code == 0, r.output
    assert "C_local" in r.stdout or "c_local" in r.stdout.lower()
    assert r.stdout.strip()


def test_estimate_json_has_every_field() -> None:
    r = runner.invoke(app, ["estimate", "--json", "--mode", "paper"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    # sites / sync_pacing / churn appear only for a scenario with [[site]] tables (tests/model/test_sites.py).
    assert set(d) == {f.name for f in dataclasses.fields(Estimate)} - {"sites", "sync_pacing", "churn"}
    e = Estimate.from_dict(d)
    assert e.feasible
    assert e.mode == "paper"
    assert e.inner_steps == 18  # Table 1, 1e24 row
    assert e.efficiency.eta == pytest.approx(0.7957, rel=1e-3)


def test_estimate_options_and_out_file(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    r = runner.invoke(
        app,
        [
            "estimate",
            "--json",
            "--hardware",
            "gh200",
            "--nodes",
            "34",
            "--params",
            "160B",
            "--bandwidth",
            "100Mbps/200Mbps",
            "--latency",
            "50ms",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d == json.loads(r.stdout)
    s = d["scenario"]
    assert (s["hardware"], s["num_nodes"], s["params"]) == ("gh200", 34, 160e9)
    assert (s["bandwidth_up_bits_per_s"], s["bandwidth_down_bits_per_s"], s["latency_s"]) == (
        100e6,
        200e6,
        0.05,
    )


def _scenario_file(tmp_path: Path, extra: str) -> str:
    p = tmp_path / "bad.toml"
    p.write_text('hardware = "h100_sxm"\nnum_nodes = 2\n' + extra)
    return str(p)


BAD_CASES = [
    (["--bandwidth=-5Mbps"], "--bandwidth", None),
    (["--hardware", "h100_sx"], "--hardware", "did you mean"),
    (["--nodes", "0"], "--nodes", None),
    (["--bandwidth", "100 Mbananas"], "--bandwidth", None),
    (["--set", "latency_s=-1"], "latency_s", None),
    (["--mode", "papr"], "--mode", None),
    (["--scenario", "FILE"], "bandwith_up_bits_per_s", "unknown scenario key"),
]


@pytest.mark.parametrize(("args", "field", "text"), BAD_CASES)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, args: list[str], field: str, text: str | None
) -> None:
    args = [
        _scenario_file(tmp_path, 'bandwith_up_bits_per_s = "1 Gbps"\n') if a == "FILE" else a for a in args
    ]
    out = tmp_path / "out" / "e.json"
    r = runner.invoke(app, ["estimate", "--json", "--out", str(out), *args])
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {field}: "), lines[0]
    if text:
        assert text in lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert r.stdout == ""
    assert not out.exists()
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_invalid_toml_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "broken.toml"
    p.write_text("num_nodes = = 2\n")
    r = runner.invoke(app, ["estimate", "--scenario", str(p)])
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_infeasible_is_exit_0() -> None:
    r = runner.invoke(
        app, ["estimate", "--json", "--nodes", "1", "--params", "5T", "--algorithm", "streaming"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["feasible"] is False and d["reasons"]
