"""Every command that takes a scenario accepts the same shortcut flags (issue 24 item 6), found by
introspecting the click commands rather than from a hand-kept list: a new scenario command that
forgets a flag fails here."""

from __future__ import annotations

from typing import Any

import typer.main

import dispersal.cli._scenario as scen
from dispersal.cli import app

COMMAND = typer.main.get_command(app)
#: Flags every scenario command must accept, besides the scenario itself.
REQUIRED = {"--" + f for f in scen.SHORTCUT_FLAGS} | {"--set", "--mode"}
#: The reference declarations of the flags (`dispersal.cli._scenario`), by option name.
_REFERENCE = {
    "--hardware": scen.HardwareOpt,
    "--nodes": scen.NodesOpt,
    "--bandwidth": scen.BandwidthOpt,
    "--latency": scen.LatencyOpt,
    "--distance": scen.DistanceOpt,
    "--days": scen.DaysOpt,
    "--params": scen.ParamsOpt,
    "--tokens": scen.TokensOpt,
    "--algorithm": scen.AlgorithmOpt,
    "--regime": scen.RegimeOpt,
}


def _walk(cmd: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every leaf command under `cmd` (sub-groups included), by its path of names."""
    subs = getattr(cmd, "commands", None)  # a group (typer vendors its own click: no isinstance)
    if subs is not None:
        out: dict[tuple[str, ...], Any] = {}
        for name, sub in subs.items():
            out.update(_walk(sub, (*path, name)))
        return out
    return {path: cmd}


def _options(cmd: Any) -> dict[str, Any]:
    return {o: p for p in cmd.params for o in getattr(p, "opts", [])}


def _takes_scenario(cmd: Any) -> bool:
    """A command takes a scenario when one of its parameters is named `scenario` (an option such
    as --scenario, or report's positional preset / file)."""
    return any(p.name == "scenario" for p in cmd.params)


def scenario_commands() -> dict[str, Any]:
    return {" ".join(k): v for k, v in _walk(COMMAND).items() if _takes_scenario(v)}


def test_the_scenario_commands_are_found() -> None:
    """The introspection is not vacuous: the commands known to take a scenario are among those found."""
    found = set(scenario_commands())
    assert {"estimate", "solve", "report", "sweep", "fleet"} <= found, found


def test_every_scenario_command_accepts_every_shortcut_flag() -> None:
    missing = {name: sorted(REQUIRED - set(_options(cmd))) for name, cmd in scenario_commands().items()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"scenario commands lacking shortcut flags: {missing}"


def _declared(annotated: Any) -> Any:
    """The typer.Option inside an Annotated[...] flag declaration."""
    return annotated.__metadata__[0]


def test_the_flags_are_declared_alike() -> None:
    """Each flag has the same type and range on every scenario command as its declaration in
    `dispersal.cli._scenario` (so `--nodes 0` fails the same way everywhere)."""
    for name, cmd in scenario_commands().items():
        opts = _options(cmd)
        for flag, ann in _REFERENCE.items():
            p = opts[flag]
            ref = _declared(ann)
            assert getattr(p, "min", None) == getattr(ref, "min", None), (name, flag)
            assert getattr(p, "max", None) == getattr(ref, "max", None), (name, flag)
            assert not p.required, (name, flag)
            assert p.default is None, (name, flag, p.default)


def test_a_command_lacking_a_flag_would_fail() -> None:
    """The check itself catches a missing flag: a copy of `estimate` without --days is reported."""
    est = COMMAND.commands["estimate"]  # type: ignore[attr-defined]
    cut = type(est)("cut", params=[p for p in est.params if p.name != "days"])
    assert _takes_scenario(cut)
    assert REQUIRED - set(_options(cut)) == {"--days"}
