"""`dispersal app`: start the interactive simulator (Streamlit) on this machine."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from dispersal.cli._common import fail

APP_SCRIPT = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"


def streamlit_command(host: str, port: int) -> list[str]:
    """The command line that serves the app (headless, no usage statistics)."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_SCRIPT),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]


def app_cmd(
    port: Annotated[int, typer.Option(help="TCP port to listen on.")] = 8501,
    host: Annotated[
        str, typer.Option(help="Address to bind; 127.0.0.1 keeps it on this machine.")
    ] = "127.0.0.1",
) -> None:
    """Start the interactive simulator in a local web server (needs the app extra).

    Open the printed URL in a browser; the page's URL holds the whole configuration, so it can be
    shared. Stop with Ctrl-C. Exit status 2 when streamlit is not installed or the port is invalid.
    """
    if importlib.util.find_spec("streamlit") is None:
        raise fail("the app needs streamlit: pip install 'dispersal[app]'")
    if not 1 <= port <= 65535:
        raise fail(f"port: must be in 1..65535, got {port}")
    typer.echo(f"dispersal app: http://{host}:{port}  (Ctrl-C to stop)", err=True)
    try:
        rc = subprocess.call(streamlit_command(host, port))
    except KeyboardInterrupt:
        rc = 0
    raise typer.Exit(rc)


def register(app: typer.Typer) -> None:
    """Add `app` to the root app. (This module is not called ``app``: that name is the root Typer
    object of ``dispersal.cli``, and a submodule of the same name would replace it.)"""
    app.command("app")(app_cmd)
