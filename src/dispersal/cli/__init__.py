"""The `dispersal` command line: a thin Typer shell over `dispersal.model`.

Every module in this package that defines ``register(app)`` adds its commands to the root app, so a
new command is a new file (no central list to edit). Heavy imports (torch, streamlit) stay inside
the command functions, so ``dispersal --help`` works on the core install.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
from typing import Any

import typer
from typer.core import TyperGroup

from dispersal.present.formats import release

try:  # typer >= 0.24 vendors Click as typer._click; older releases use click itself
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover
    from click import exceptions as _cx  # type: ignore[no-redef]

#: Ctrl-C at a prompt: typer's own Abort (typer >= 0.24) or Click's.
_ABORT: tuple[type[BaseException], ...] = tuple(
    a for a in (getattr(typer, "Abort", None), getattr(_cx, "Abort", None)) if isinstance(a, type)
)


class OneLineErrors(TyperGroup):
    """The root group: a usage error (bad option value, unknown option, missing value) is one line
    on stderr naming the option, exit 2, like every other input error (not Click's boxed usage text)."""

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        run = functools.partial(
            super().main,
            args,
            prog_name,
            complete_var,
            standalone_mode=False,
            windows_expand_args=windows_expand_args,
            **extra,
        )
        if not standalone_mode:
            return run()
        try:
            rv = run()
        except getattr(_cx, "NoArgsIsHelpError", ()) as exc:
            ctx = getattr(exc, "ctx", None)
            typer.echo(ctx.get_help() if ctx else str(exc))
            sys.exit(exc.exit_code)
        except _cx.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            message = " ".join(exc.format_message().split())
            param = getattr(exc, "param", None)
            flags = [o for o in getattr(param, "opts", []) if o.startswith("--")]
            if isinstance(exc, _cx.BadParameter) and flags:  # "--nodes: ..." as every other input error
                message = f"{flags[0]}: " + " ".join(str(exc.message).split())
            typer.echo(f"error: {message}{where}", err=True)
            sys.exit(exc.exit_code)
        except _ABORT:
            typer.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="dispersal",
    help="How far can frontier-scale AI training spread across small, separate sites?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineErrors,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(release())
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
