"""The `dispersal` command line: a thin Typer shell over `dispersal.model`.

Every module in this package that defines ``register(app)`` adds its commands to the root app, so a
new command is a new file (no central list to edit). Heavy imports (torch, streamlit) stay inside
the command functions, so ``dispersal --help`` works on the core install.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

from dispersal import __version__

app = typer.Typer(
    name="dispersal",
    help="How far can frontier-scale AI training spread across small, separate sites?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dispersal {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """dispersal: an analytic model, planner and testbed for low-communication distributed training."""


def _register_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_all()


def main() -> None:
    """Console-script entry point."""
    app()
