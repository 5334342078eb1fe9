"""Every command that takes a scenario accepts the same shortcut flags and builds the same scenario
from them (issue 24 item 6): estimate, solve, report and sweep --field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

import dispersal.cli._scenario as scen
from dispersal.cli import app

runner = CliRunner()
COMMAND = typer.main.get_command(app)

FLAGS = [
    "--hardware",
    "h100_sxm",
    "--nodes",
    "7",
    "--bandwidth",
    "57Mbps/310Mbps",
    "--latency",
    "40ms",
    "--days",
    "300",
    "--params",
    "70B",
    "--tokens",
    "2T",
    "--algorithm",
    "diloco",
    "--regime",
    "none",
]
SHORTCUTS = {"--" + f for f in scen.SHORTCUT_FLAGS} | {"--scenario", "--set", "--mode"}


def _commands(tmp: Path) -> dict[str, list[str]]:
    """Each scenario command with its own required options (the scenario part comes after)."""
    return {
        "estimate": ["estimate", "--scenario", "paper_threat_model"],
        "solve": [
            "solve",
            "--for",
            "bandwidth",
            "--where",
            "utilisation=0.9",
            "--scenario",
            "paper_threat_model",
        ],
        "report": ["report", "paper_threat_model", "--out", str(tmp / "r.html")],
        "sweep": [
            "sweep",
            "--no-plot",
            "--field",
            "utilisation",
            "--x",
            "mfu=0.3",
            "--y",
            "micro_batches=1",
            "--out",
            str(tmp / "s.csv"),
            "--scenario",
            "paper_threat_model",
        ],
    }


class Built(Exception):
    """Raised by the spy once the scenario is built (the commands' work is not needed)."""


def test_every_scenario_command_lists_the_same_flags() -> None:
    for name in ("estimate", "solve", "report", "sweep"):
        cmd = COMMAND.commands[name]  # type: ignore[attr-defined]
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        assert opts >= SHORTCUTS - ({"--scenario"} if name == "report" else set()), name


@pytest.mark.parametrize("extra", [["--latency", "40ms"], ["--distance", "2000km"]])
def test_the_same_flags_build_the_same_scenario(
    extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, dict[str, Any]] = {}
    real = scen.build_scenario
    current = [""]

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen[current[0]] = real(*args, **kwargs).to_dict()
        raise Built

    # estimate, solve, report and sweep --field all build through the one option group
    # (ScenarioOptions.build, which calls _scenario.build_scenario).
    monkeypatch.setattr(scen, "build_scenario", spy)
    flags = [*FLAGS[:6], *extra, *FLAGS[8:]]
    for name, argv in _commands(tmp_path).items():
        current[0] = name
        r = runner.invoke(app, [*argv, *flags])
        assert isinstance(r.exception, Built), (name, r.output)
    assert set(seen) == {"estimate", "solve", "report", "sweep"}
    first = seen["estimate"]
    assert all(s == first for s in seen.values())
    assert first["num_nodes"] == 7 and first["hardware"] == "h100_sxm" and first["regime"] == "none"
    assert first["bandwidth_up_bits_per_s"] == 57e6 and first["bandwidth_down_bits_per_s"] == 310e6
    assert first["duration_s"] == 300 * 86400 and first["params"] == 70e9 and first["tokens"] == 2e12
    assert first["algorithm"] == "diloco"
    assert first["latency_s"] == pytest.approx(0.040 if "--latency" in extra else 2000 * 4.9e-6 * 1.5)


def test_sweep_field_with_flags_matches_estimate(tmp_path: Path) -> None:
    """The flags reach the computation, not only the parser: sweep --field equals estimate."""
    import json

    flags = ["--nodes", "5", "--bandwidth", "30Mbps", "--params", "20B"]
    e = runner.invoke(app, ["estimate", "--json", *flags, "--set", "mfu=0.3"])
    assert e.exit_code == 0, e.output
    s = runner.invoke(
        app,
        [
            "sweep",
            "--json",
            "--no-plot",
            "--field",
            "utilisation",
            "--x",
            "mfu=0.3",
            "--y",
            "latency_s=0.1",
            "--out",
            str(tmp_path / "s.csv"),
            *flags,
        ],
    )
    assert s.exit_code == 0, s.output
    assert json.loads(s.stdout)["rows"][0]["utilisation"] == json.loads(e.stdout)["utilisation"]


def test_scenario_flags_without_field_are_refused_by_the_planner_sweep() -> None:
    r = runner.invoke(app, ["sweep", "--no-plot", "--nodes", "4"])
    assert r.exit_code == 2
    assert r.stderr.startswith("error: --nodes: ") and "--field" in r.stderr


@pytest.mark.parametrize(
    ("how", "expected"),
    [("file", "error: hardware: "), ("set", "error: hardware: "), ("flag", "error: --hardware: ")],
)
def test_an_error_names_where_the_value_came_from(how: str, expected: str, tmp_path: Path) -> None:
    """A bad value from the scenario file or --set names the field; one from a flag names the flag."""
    f = tmp_path / "s.toml"
    f.write_text('hardware = "zz"\n')
    args = {
        "file": ["--scenario", str(f)],
        "set": ["--set", "hardware=zz"],
        "flag": ["--hardware", "zz"],
    }[how]
    for command in (["estimate"], ["solve", "--for", "nodes", "--where", "utilisation=0.5"]):
        r = runner.invoke(app, [*command, *args])
        assert r.exit_code == 2 and r.stderr.startswith(expected), r.stderr
        assert "unknown hardware 'zz'" in r.stderr
