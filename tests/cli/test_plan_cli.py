"""`dispersal plan`, `dispersal sweep` and `dispersal reproduce` from the command line."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.model.checks import reproduction

REQUIRED = (
    "feasible",
    "target_flop",
    "hardware",
    "chips_per_node",
    "nodes",
    "params",
    "tokens",
    "days",
    "cost_usd",
    "c_local_flop",
    "c_quality_flop",
    "mean_wan_mbps_per_node",
    "algorithm",
    "inner_steps",
    "compression_ratio",
    "eta_h",
    "eta_comp",
    "eta_act",
    "eta_rep",
    "eta",
    "chi",
)


@pytest.fixture(scope="module")
def one_reproduction() -> Iterator[None]:
    """One paper-mode reproduction (minutes of planner searches) shared by the `reproduce` tests: the
    rows and the HBM countermeasure are computed once (paper mode is deterministic); each test still
    runs the whole command (its folder check, report, plots and JSON)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("dispersal.cli.reproduce.run_rows", functools.cache(reproduction.run_rows))
        mp.setattr(
            "dispersal.cli.reproduce.hbm_countermeasure", functools.cache(reproduction.hbm_countermeasure)
        )
        yield


def test_plan_json_one_target_has_the_issue_keys() -> None:
    """--json is always a list (one shape for the command); one target gives a list of one plan object
    with every key issue #3 names."""
    r = CliRunner().invoke(app, ["plan", "--target", "1e25", "--mode", "paper", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert isinstance(out, list) and len(out) == 1
    d = out[0]
    for k in REQUIRED:
        assert k in d, k
    assert d["nodes"] == 34 and d["hardware"] == "gh200"


@pytest.mark.slow
def test_plan_defaults_prints_three_targets_and_asymmetric_bandwidth() -> None:
    """With no target: 1e24, 1e25, 1e26; UP/DOWN bandwidth is accepted; --json gives a list."""
    r = CliRunner().invoke(app, ["plan", "--mode", "paper", "--bandwidth", "57Mbps/310Mbps", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert [p["target_flop"] for p in d] == [1e24, 1e25, 1e26]


def test_plan_bad_input_is_one_line_exit_2() -> None:
    """Unparseable bandwidth: exit 2, one line naming the field, no traceback."""
    r = CliRunner().invoke(app, ["plan", "--bandwidth", "fast"])
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bandwidth" in lines[0] and "Traceback" not in r.output


@pytest.mark.slow
def test_sweep_writes_csv_and_png(tmp_path: Path) -> None:
    """A 2 x 2 sweep writes a CSV with four plans and a PNG."""
    out, png = tmp_path / "s.csv", tmp_path / "s.png"
    r = CliRunner().invoke(
        app,
        [
            "sweep",
            "--x",
            "target=1e24,1e25",
            "--y",
            "bandwidth=30Mbps,100Mbps",
            "--mode",
            "paper",
            "--out",
            str(out),
            "--plot",
            str(png),
        ],
    )
    assert r.exit_code == 0, r.output
    assert len(out.read_text().strip().splitlines()) == 5
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_reproduce_headlines_within_five_percent(tmp_path: Path, one_reproduction: None) -> None:
    """Paper mode reproduces the headline costs (1e24 / 1e25 / 1e26), the GPT-4 and Llama-405B node counts
    and the datacenter cost ratio within 5% of the published values; reproduction.md is written."""
    r = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    heads = {h["name"]: h for h in d["headlines"]}
    for name in (
        "cost to reach C_local 1e24",
        "cost to reach C_local 1e25",
        "cost to reach C_local 1e26",
        "nodes, GPT-4 level (C_local 2.1e25)",
        "nodes, Llama 3.1 405B level (C_local 3.8e25)",
        "cost ratio 100 Mbps / datacenter (1e25)",
    ):
        assert abs(heads[name]["ratio"] - 1) <= 0.05, (name, heads[name])
    assert (tmp_path / "reproduction.md").exists() and (tmp_path / "reproduction_cost.png").exists()


@pytest.mark.slow
def test_plan_samples_adds_percentiles_and_is_reproducible() -> None:
    """--samples N --seed S adds P10/P50/P90 fields; the same seed gives the same numbers."""
    args = ["plan", "--target", "1e25", "--samples", "40", "--seed", "3", "--json"]
    (a,) = json.loads(CliRunner().invoke(app, args).stdout)  # --json is always a list
    (b,) = json.loads(CliRunner().invoke(app, args).stdout)
    assert a["cost_usd_p10"] <= a["cost_usd_p50"] <= a["cost_usd_p90"]
    assert a["cost_usd_p50"] == b["cost_usd_p50"]


@pytest.mark.slow
def test_sweep_defaults_write_into_a_named_folder_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --out: the CSV and PNG go to dispersal-output/sweep/, never the current directory; --json
    prints the rows and both paths."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        app, ["sweep", "--x", "target=1e24", "--y", "regime=treaty", "--mode", "paper", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    folder = Path("dispersal-output") / "sweep"
    assert d["out"] == str(folder / "sweep.csv") and d["plot"] == str(folder / "sweep.png")
    assert len(d["rows"]) == 1 and d["rows"][0]["feasible"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dispersal-output"]
    assert sorted(p.name for p in (tmp_path / folder).iterdir()) == ["sweep.csv", "sweep.png"]


@pytest.mark.slow
def test_reproduce_default_out_is_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_reproduction: None
) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["reproduce"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dispersal-output"]
    assert (tmp_path / "dispersal-output" / "reproduce" / "reproduction.md").is_file()


@pytest.mark.slow
def test_plan_sites_gives_a_missed_targets_reason_below_the_table() -> None:
    """`plan --sites`: a target the mix cannot reach says why on its own line, not in the table's
    utilisation column; the headers name the metric as the docs do (C_quality)."""
    import dispersal.data

    path = str(Path(dispersal.data.__file__).parent / "scenarios" / "intellect1_schedule.toml")
    r = CliRunner().invoke(app, ["plan", "--target", "1e25", "--sites", path])
    assert r.exit_code == 0, r.output
    assert "C_quality (FLOP)" in r.output and "us nodes" in r.output
    assert "not reached at 1e+25 FLOP: " in r.output
    table_rows = [line for line in r.output.splitlines() if line.startswith("│")]
    assert table_rows and all("reaches" not in line for line in table_rows)
    by_name = CliRunner().invoke(app, ["plan", "--target", "1e25", "--sites", "intellect1_schedule"])
    assert by_name.exit_code == 0 and "not reached at 1e+25 FLOP: " in by_name.output, by_name.output


def test_plan_cites_the_algorithms_and_site_sizes_it_searched() -> None:
    """`plan --site-nodes 4` printed the same card as without it: the cite line now names the slots
    searched (paper mode has no decoupled slot) and the site sizes, and --json carries them."""
    argv = ["plan", "--target", "1e22", "--mode", "paper", "--search", "bisect", "--site-nodes", "4"]
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 0, r.output
    assert "algorithms searched: auto, hierarchical; site pipelines of 4 nodes:" in " ".join(r.output.split())
    (d,) = json.loads(CliRunner().invoke(app, [*argv, "--json"]).output)
    assert d["searched"] == {"algorithms": ["auto", "hierarchical"], "site_nodes": [4]}
