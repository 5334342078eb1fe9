"""launch.py: a worker forked from the warm fork server gets exactly its argv, its environment and its
log file, runs in a process of its own, and reports its exit the way subprocess.Popen does."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from dispersal.testbed.launch import launch
from dispersal.testbed.secure import secret_env

pytestmark = [pytest.mark.torch, pytest.mark.slow]

MODULE = "dispersal.testbed.worker"


def _wait(p: object, timeout_s: float = 60.0) -> int:
    code = p.wait(timeout_s)  # type: ignore[attr-defined]
    assert code is not None, "the launched process did not end in time"
    return int(code)


def test_argv_and_log_reach_the_child(tmp_path: Path) -> None:
    """A missing required option: argparse's usage error goes to the log and the exit code is 2."""
    log = tmp_path / "w0.log"
    p = launch(MODULE, ["--worker", "w0"], dict(os.environ), log)
    assert p.pid != os.getpid()
    assert _wait(p) == 2 and p.poll() == 2 and p.returncode == 2
    text = log.read_text()
    assert "dispersal.testbed.worker" in text and "--config" in text and "required" in text


def test_the_environment_is_the_one_given(tmp_path: Path) -> None:
    """The child's environment is replaced, not merged: without the run secret the worker refuses to
    start (exit 2, the secret named); with it, the same argv gets past the secret to the config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISPERSAL_RUN_SECRET")}
    argv = [
        "--config",
        str(tmp_path / "missing.json"),
        "--worker",
        "w0",
        "--store",
        "127.0.0.1:1",
        "--out",
        "x",
    ]
    p = launch(MODULE, argv, env, tmp_path / "a.log")
    assert _wait(p) == 2
    assert "DISPERSAL_RUN_SECRET" in (tmp_path / "a.log").read_text()
    p = launch(MODULE, argv, {**env, **secret_env(bytes(range(32)))}, tmp_path / "b.log")
    assert _wait(p) == 1  # the missing config file: a traceback, past the secret check
    assert "missing.json" in (tmp_path / "b.log").read_text()


def test_exit_codes_and_signals_as_popen_reports_them(tmp_path: Path) -> None:
    """main's SystemExit code is the exit code; SIGSTOP (by pid, as the fault plan's hand-shake) leaves
    it running (poll() None) and SIGKILL gives -9. The environment given is the whole environment."""
    env = {"LAUNCH_PROBE": "yes", "PATH": os.environ.get("PATH", "")}
    p = launch("launch_target", ["0", "3"], env, tmp_path / "a.log")
    assert _wait(p) == 3
    text = (tmp_path / "a.log").read_text()
    assert "argv ['0', '3'] sys.argv ['0', '3'] LAUNCH_PROBE yes" in text
    p = launch("launch_target", ["30", "0"], {}, tmp_path / "b.log", name="probe w9")
    deadline = time.monotonic() + 30
    log = tmp_path / "b.log"  # created by the child once it runs
    while not (log.exists() and "argv" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "LAUNCH_PROBE None" in (tmp_path / "b.log").read_text()
    assert (Path("/proc") / str(p.pid) / "comm").read_text().strip() == "probe w9"  # what ps shows
    os.kill(p.pid, signal.SIGSTOP)
    time.sleep(0.2)
    assert p.poll() is None
    os.kill(p.pid, signal.SIGKILL)
    assert _wait(p) == -signal.SIGKILL and p.returncode == -signal.SIGKILL


def test_a_workers_first_optimizer_step_imports_nothing_heavy(tmp_path: Path) -> None:
    """torch.optim imports torch._dynamo (with sympy and mpmath: about 800 modules, 2.2 s of CPU on the
    2-core machine) when the first optimizer is built; the fork server preloads it, so a forked
    worker's first AdamW step imports (almost) nothing."""
    log = tmp_path / "opt.log"
    p = launch("launch_target", ["optimizer"], {"PATH": os.environ.get("PATH", "")}, log)
    assert _wait(p) == 0, log.read_text()
    words = log.read_text().split()
    new = int(words[words.index("modules") + 1])
    assert words[words.index("dynamo") + 1] == "False" and new < 20, log.read_text()
