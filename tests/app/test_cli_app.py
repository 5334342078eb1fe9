"""`dispersal app`: the command it runs, and the message when streamlit is missing."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from typer.testing import CliRunner

from dispersal.cli import app as root
from dispersal.cli.serve import APP_SCRIPT, streamlit_command


def test_app_script_exists_and_command_binds_localhost() -> None:
    assert APP_SCRIPT.is_file()
    cmd = streamlit_command("127.0.0.1", 8765)
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4] == str(APP_SCRIPT)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8765"
    assert cmd[cmd.index("--server.headless") + 1] == "true"
    assert cmd[cmd.index("--browser.gatherUsageStats") + 1] == "false"


def test_app_runs_streamlit_with_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from dispersal.cli import serve

    seen: dict[str, list[str]] = {}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(serve, "run_server", lambda cmd: seen.setdefault("cmd", cmd) and 0)
    r = CliRunner().invoke(root, ["app", "--port", "8599"])
    assert r.exit_code == 0, r.output
    cmd = seen["cmd"]
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8599"


def test_app_without_streamlit_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    r = CliRunner().invoke(root, ["app"])
    assert r.exit_code == 2
    assert r.output.strip() == "error: the app needs streamlit: pip install 'dispersal[app]'"


def test_bad_port_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    r = CliRunner().invoke(root, ["app", "--port", "0"])
    assert r.exit_code == 2 and "port" in r.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
            return bool(r.read().strip() == b"ok")
    except OSError:
        return False


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_the_launcher_stops_the_server(sig: signal.Signals) -> None:
    """A real `dispersal app` on 127.0.0.1: after the launcher is killed, nothing serves the port."""
    pytest.importorskip("streamlit", reason="the web app needs streamlit: pip install 'dispersal[app]'")
    port = _free_port()
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "dispersal", "app", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while not _healthy(port):
            assert launcher.poll() is None, f"launcher exited early with {launcher.returncode}"
            assert time.monotonic() < deadline, "streamlit not ready after 90 s"
            time.sleep(0.3)
        launcher.send_signal(sig)
        launcher.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _port_open(port):
            assert time.monotonic() < deadline, (
                f"port {port} still served 30 s after {sig.name} to the launcher"
            )
            time.sleep(0.2)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(timeout=10)
