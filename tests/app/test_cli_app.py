"""`dispersal app`: the command it runs, and the message when streamlit is missing."""

from __future__ import annotations

import importlib.util
import subprocess

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
    seen = {}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(subprocess, "call", lambda cmd: seen.setdefault("cmd", cmd) and 0)
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
