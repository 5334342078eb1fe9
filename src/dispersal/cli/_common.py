"""Shared CLI plumbing: one-line errors with exit status 2, JSON output, atomic file writes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from dispersal._io import atomic_write_bytes, atomic_write_text, dumps_json, print_json, save_figure

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INPUT_ERROR = 2

#: Help of every --set option: the field list comes from the fields' declarations (`dispersal fields`).
SET_HELP = (
    "Any scenario field: key=value, units allowed (latency_s=40ms, chip_memory_bytes=80GB); "
    "`dispersal fields` lists them with units and allowed ranges."
)

#: Where commands write files when no --out is given: a named folder per command under the current
#: directory (never the current directory itself, so a checkout's root is never written into).
OUTPUT_ROOT = Path("dispersal-output")


def field_help(name: str, example: str = "") -> str:
    """Help of a flag that sets one Scenario field: its label and allowed values from its declaration."""
    from dispersal.model.inputs.fields import describe
    from dispersal.model.inputs.scenario import FIELD_BY_NAME

    d = describe(FIELD_BY_NAME[name])
    allowed = f" ({d['allowed']})" if d["allowed"] else ""
    return f"{d['label']}{allowed}{', e.g. ' + example if example else ''}. Sets {name}."


def default_out(command: str) -> Path:
    """The default --out folder of a command: dispersal-output/<command>."""
    return OUTPUT_ROOT / command


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr and return an Exit(2) to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_INPUT_ERROR)


def guarded(func: F) -> F:
    """Turn user errors (ValueError, FileNotFoundError, tomllib errors) into one line + exit 2.

    Bugs (anything else) still raise with a traceback, as they should.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import tomllib

        try:
            return func(*args, **kwargs)
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            raise fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
        except FileNotFoundError as exc:
            raise fail(f"file not found: {exc.filename}") from None

    return wrapper  # type: ignore[return-value]


__all__ = [
    "EXIT_INPUT_ERROR",
    "OUTPUT_ROOT",
    "SET_HELP",
    "atomic_write_bytes",
    "atomic_write_text",
    "default_out",
    "dumps_json",
    "fail",
    "field_help",
    "guarded",
    "print_json",
    "save_figure",
]
