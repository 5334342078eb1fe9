"""Help text as the user reads it: Typer renders option help and docstrings as Rich markup, so a
literal ``[[site]]`` or ``[x]`` is eaten unless escaped (``plan --help`` once read "a scenario TOML
with [] tables")."""

from __future__ import annotations

from typing import Any

import typer
from rich.text import Text

from dispersal.cli import app


def _commands(cmd: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out = [(prefix or "dispersal", cmd)]
    if hasattr(cmd, "commands"):  # a group (Typer ships its own click, so no isinstance)
        for name, sub in cmd.commands.items():
            out += _commands(sub, f"{prefix} {name}".strip())
    return out


def test_no_help_text_loses_brackets_to_markup() -> None:
    """Every command's and option's help renders to exactly its text (escaped brackets unescaped)."""
    bad = []
    for name, cmd in _commands(typer.main.get_command(app)):
        assert cmd.params or name == "dispersal", name
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        for text in texts:
            expected = text.replace("\\[", "[")
            if Text.from_markup(text).plain != expected:
                bad.append(f"{name}: {text[:60]!r}")
    assert not bad, bad


def test_estimate_time_table_uses_the_apps_labels() -> None:
    """`estimate`'s "where the time goes" headed its columns with model keys (exposed_comm,
    pipeline_comm, expert_parallel); it uses present.rows' labels like the app and the report."""
    from typer.testing import CliRunner

    from dispersal.present.rows import BREAKDOWN_PARTS

    r = CliRunner().invoke(app, ["estimate"])
    assert r.exit_code == 0, r.output
    assert all(label in r.output for _k, label in BREAKDOWN_PARTS)
    assert "exposed_comm" not in r.output and "pipeline_comm" not in r.output
