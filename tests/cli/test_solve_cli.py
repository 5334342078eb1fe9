"""`dispersal solve` through Typer's CliRunner: the table, the --json object, units in --where and
--range, and one-line input errors with exit status 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.model.inputs.scenario import Scenario
from dispersal.model.search.solve import Solution, solve

runner = CliRunner()

CASE = """
name = "10B 2-site DiLoCo"
hardware = "h100_sxm"
chips_per_node = 8
precision = "bf16"
num_nodes = 2
params = "10B"
tokens = "1T"
algorithm = "diloco"
inner_steps = 100
codec = "int8"
local_batch_tokens = 1048576
regime = "none"
duration_s = "10 y"
"""


@pytest.fixture
def case(tmp_path: Path) -> Path:
    path = tmp_path / "case.toml"
    path.write_text(CASE, encoding="utf-8")
    return path


def test_json_is_one_stable_object_equal_to_the_model(case: Path) -> None:
    r = runner.invoke(
        app, ["solve", "--for", "bandwidth", "--where", "utilisation=0.9", "--scenario", str(case), "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert set(d) == {f.name for f in dataclasses.fields(Solution)}
    sc = Scenario.from_dict(d.pop("scenario"))
    expected = solve(
        sc.replace(bandwidth_up_bits_per_s=100e6, bandwidth_down_bits_per_s=100e6),
        vary="bandwidth",
        output="utilisation",
        target=0.9,
    ).to_dict()
    expected.pop("scenario")
    assert d == json.loads(json.dumps(expected))
    assert d["reached"] is True and d["unit"] == "bit/s" and d["direction"] == "rises"
    assert d["bracket"][0] < d["value"] == d["bracket"][1]


def test_table_prints_the_value_with_units(case: Path) -> None:
    r = runner.invoke(
        app, ["solve", "--for", "bandwidth", "--where", "utilisation=90%", "--scenario", str(case)]
    )
    assert r.exit_code == 0, r.output
    assert "Mbps" in r.stdout and "rises along bandwidth" in r.stdout


def test_units_in_where_and_range_and_set(case: Path) -> None:
    r = runner.invoke(
        app,
        [
            "solve",
            "--for",
            "latency",
            "--where",
            "sync_time=13.65min",
            "--range",
            "0:2s",
            "--scenario",
            str(case),
            "--set",
            "bandwidth_up_bits_per_s=100Mbps",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["target"] == pytest.approx(819.0) and d["search_range"] == [0.0, 2.0] and d["reached"] is True
    assert d["unit"] == "s" and d["achieved"] >= 819.0


def test_not_reached_is_a_result_with_a_reason(case: Path) -> None:
    r = runner.invoke(
        app,
        [
            "solve",
            "--for",
            "bandwidth",
            "--where",
            "utilisation=0.9",
            "--range",
            "1Mbps:100Mbps",
            "--scenario",
            str(case),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["reached"] is False and d["value"] is None and d["scenario"] is None
    assert d["reason"].startswith("utilisation stays below 0.9 up to 100 Mbps")


def test_integer_answer_for_sites(case: Path) -> None:
    r = runner.invoke(
        app, ["solve", "--for", "H", "--where", "utilisation=0.95", "--scenario", str(case), "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["integer"] is True and d["variable"] == "inner_steps"
    assert d["value"] == int(d["value"]) and d["bracket"] == [d["value"] - 1, d["value"]]


@pytest.mark.slow  # a bisection of paper-mode planner searches (several seconds)
def test_premium_in_paper_mode_with_one_accelerator() -> None:
    r = runner.invoke(
        app,
        [
            "solve",
            "--for",
            "bandwidth",
            "--where",
            "premium=2",
            "--mode",
            "paper",
            "--range",
            "100Mbps:3Gbps",
            "--plan-hardware",
            "h100_sxm",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["reached"] is True and d["output"] == "premium" and d["achieved"] <= 2.0
    assert d["calls"] == d["evaluations"] >= 3


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--for", "colour", "--where", "utilisation=0.9"], "for"),
        (["--for", "bandwidth", "--where", "happiness=1"], "where"),
        (["--for", "bandwidth", "--where", "utilisation"], "where"),
        (["--for", "bandwidth", "--where", "utilisation=high"], "where"),
        (["--for", "bandwidth", "--where", "utilisation=0.9", "--range", "1Gbps:1Mbps"], "range"),
        (["--for", "bandwidth", "--where", "utilisation=0.9", "--range", "1 parsec:2"], "range"),
        (["--for", "bandwidth", "--where", "utilisation=0.9", "--range", "1Mbps"], "range"),
        (["--for", "nodes", "--where", "utilisation=0.9", "--range", "1.5:10"], "range"),
        (["--for", "nodes", "--where", "premium=2"], "for"),
        (
            ["--for", "bandwidth", "--where", "utilisation=0.9", "--plan-hardware", "h100_sxm"],
            "plan-hardware",
        ),
        (["--for", "bandwidth", "--where", "utilisation=0.9", "--mode", "fast"], "mode"),
        (["--for", "bandwidth", "--where", "utilisation=0.9", "--set", "num_nodes=0"], "num_nodes"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], field: str) -> None:
    r = runner.invoke(app, ["solve", *args])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith((f"error: --{field}:", f"error: {field}:")), r.stderr
    assert "Traceback" not in r.output
