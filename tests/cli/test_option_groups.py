"""Option groups (cli._groups, issue 36 item 5): the scenario options are declared once and every
scenario command shows them with the same help, in the same order; a group reaches the command as
one typed object; a clash between a group's fields and a command's own options is refused."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.cli._groups import with_groups
from dispersal.cli._scenario import ScenarioOptions

COMMAND = typer.main.get_command(app)
SCENARIO_FIELDS = [f.name for f in dataclasses.fields(ScenarioOptions)]


def _scenario_params(name: str) -> list[tuple[str, Any, Any]]:
    """(name, help, default) of the scenario group's options as the command declares them."""
    cmd = COMMAND.commands[name]  # type: ignore[attr-defined]
    by_name = {p.name: p for p in cmd.params}
    return [
        (n, getattr(by_name[n], "help", None), by_name[n].default) for n in SCENARIO_FIELDS if n in by_name
    ]


def test_scenario_commands_declare_the_same_options() -> None:
    estimate = _scenario_params("estimate")
    assert [n for n, _, _ in estimate] == SCENARIO_FIELDS
    for name in ("fleet", "solve", "sweep"):
        assert _scenario_params(name) == estimate, name
    # report takes the scenario as its argument; every other option is the same
    assert _scenario_params("report")[1:] == estimate[1:]
    report_scenario = next(p for p in COMMAND.commands["report"].params if p.name == "scenario")  # type: ignore[attr-defined]
    assert report_scenario.required and isinstance(report_scenario, typer.core.TyperArgument)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Pair:
    left: Annotated[int, typer.Option(help="Left.")] = 1
    right: Annotated[str | None, typer.Option(help="Right.")] = None


def test_a_group_reaches_the_command_as_one_object() -> None:
    seen: list[Any] = []
    demo = typer.Typer()

    @demo.command()
    @with_groups
    def run(*, first: Annotated[int, typer.Option()] = 0, pair: _Pair, last: bool = False) -> None:
        seen.append((first, pair, last))

    r = CliRunner().invoke(demo, ["--left", "5", "--first", "2", "--last"])
    assert r.exit_code == 0, r.output
    assert seen == [(2, _Pair(left=5, right=None), True)]
    names = [p.name for p in typer.main.get_command(demo).params]
    assert names[:4] == ["first", "left", "right", "last"]  # the group's options stand where it is named


def test_a_field_that_clashes_with_an_option_is_refused() -> None:
    with pytest.raises(TypeError, match=r"clash.*\['left'\]"):

        @with_groups
        def bad(*, left: int = 0, pair: _Pair) -> None:
            pass
