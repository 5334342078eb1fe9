"""`dispersal app`: start the interactive simulator (Streamlit) on this machine."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

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


def _die_with_parent() -> None:
    """In the server process (Linux): ask the kernel for SIGTERM when the launcher dies, even by SIGKILL."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1  # <linux/prctl.h>
        libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux / no prctl: the signal handlers below still apply
        pass


def stop(proc: subprocess.Popen[Any], timeout_s: float = 10.0) -> None:
    """Stop a server process: SIGTERM, then SIGKILL if it is still running after `timeout_s` seconds;
    waits for it either way (nothing is left behind). A process that has already ended is only reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_server(cmd: list[str], stop_timeout_s: float = 10.0) -> int:
    """Run the server and never leave it behind: Ctrl-C, SIGTERM or SIGHUP to the launcher stop it, and
    on Linux the kernel stops it when the launcher is killed outright. Returns its exit status."""
    proc = subprocess.Popen(cmd, preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                rc = proc.wait()
                return 0 if rc in (-signal.SIGTERM, -signal.SIGINT) else rc
            except KeyboardInterrupt:
                forward(int(signal.SIGINT), None)
    finally:
        stop(proc, stop_timeout_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


LOOPBACK = "127.0.0.1"


def check_host(host: str, port: int) -> tuple[str, bool]:
    """The address to bind and whether it is loopback; InputError (one line) when it cannot be.

    An empty host is refused (some servers read it as "every interface"); a name must resolve to an
    address of this machine (checked by binding it once, which also finds a port in use)."""
    import ipaddress
    import socket

    from dispersal.model.inputs.errors import InputError

    name = host.strip()
    if not name:
        raise InputError(
            "host", "empty; give 127.0.0.1 (this machine only) or, to listen on every interface, 0.0.0.0"
        )
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise InputError("host", f"{host!r} is not an address or a name that resolves ({exc})") from None
    family, _, _, _, sockaddr = infos[0]
    address = str(sockaddr[0])
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise InputError("host", f"cannot listen on {address} port {port}: {why}") from None
    return address, ipaddress.ip_address(address.split("%")[0]).is_loopback


def app_cmd(
    port: Annotated[int, typer.Option(help="TCP port to listen on.", min=1, max=65535)] = 8501,
    host: Annotated[
        str,
        typer.Option(
            help="Address to bind; 127.0.0.1 (the default) keeps it on this machine. Any other address "
            "(0.0.0.0: every interface) lets other machines use the app: only when you mean it."
        ),
    ] = LOOPBACK,
) -> None:
    """Start the interactive simulator in a local web server (needs the app extra).

    Open the printed URL in a browser; the page's URL holds the whole configuration, so it can be
    shared. Stop with Ctrl-C (or SIGTERM); the server never outlives
    the launcher. Exit status 2 when streamlit is not installed or the port is invalid.
    """
    if importlib.util.find_spec("streamlit") is None:
        raise fail("the app needs streamlit: pip install 'dispersal[app]'")
    from dispersal.model.inputs.errors import InputError

    if not 1 <= port <= 65535:
        raise fail(f"--port: must be in 1..65535, got {port}")
    try:
        address, loopback = check_host(host, port)
    except InputError as exc:
        raise fail("--" + str(exc)) from None
    if not loopback:
        typer.echo(
            f"warning: listening on {address}, not only this machine: anyone who can reach it can use the app",
            err=True,
        )
    shown = f"[{host.strip()}]" if ":" in host else host.strip()
    typer.echo(f"dispersal app: http://{shown}:{port}  (Ctrl-C to stop)", err=True)
    raise typer.Exit(run_server(streamlit_command(address, port)))


def register(app: typer.Typer) -> None:
    """Add `app` to the root app. (This module is not called ``app``: that name is the root Typer
    object of ``dispersal.cli``, and a submodule of the same name would replace it.)"""
    app.command("app")(app_cmd)
