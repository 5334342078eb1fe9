"""How the single-host supervisor starts its worker and learner processes.

Each worker is a real, separate process with its own pid, sockets and memory, killed with a real
SIGKILL and frozen with SIGSTOP, exactly as before. What changes is how it starts: instead of a fresh
interpreter per worker (``python -m dispersal.testbed.worker ...``, which spends about 4.5 s of CPU
importing torch on the 2-core machine before its first step, more than half of a short run's CPU), the
supervisor asks a fork server that imported torch and the worker modules once (Python's
``multiprocessing`` "forkserver" with a preload list) to fork a child, which then runs the very same
``main(argv)`` the command line runs. The fork server is a clean process of its own (no threads, no
sockets of the run), started on first use and kept for the supervisor's life, so a restarted worker
(a planned rejoin) starts in milliseconds too.

What a worker receives is what the command line gave it: its argv, its environment (the run secret
travels in it, never on a command line), and its log file as stdout and stderr. The several-machines
path (``python -m dispersal.testbed.supervisor`` plus workers started by torchrun or by hand) is
untouched: those workers are fresh interpreters started by the user's launcher.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import sys
from collections.abc import Mapping, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path

#: What the fork server imports once: torch and the two process entry points (and through them the
#: model, the wire and the data code a worker runs), and torch._dynamo: torch.optim imports it lazily
#: on an optimizer's first step (its dynamo guard), which cost every worker about 2.2 s of CPU on the
#: 2-core machine (822 modules: dynamo, sympy, mpmath) before its first inner step.
PRELOAD = ("torch", "torch._dynamo", "dispersal.testbed.worker", "dispersal.testbed.learner")


class Launched:
    """A started worker process, with the part of ``subprocess.Popen``'s interface the supervisor uses
    (pid, poll, returncode, wait, kill): a negative return code is the signal that ended it."""

    def __init__(self, proc: BaseProcess) -> None:
        self._proc = proc

    @property
    def pid(self) -> int:
        pid = self._proc.pid
        assert pid is not None  # started in launch()
        return pid

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def poll(self) -> int | None:
        """The exit code once the process has ended, else None (never blocks)."""
        return self._proc.exitcode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait (at most timeout seconds, None: until it ends) and return the exit code."""
        self._proc.join(timeout)
        return self._proc.exitcode

    def kill(self) -> None:
        """SIGKILL: no cleanup, the process's sockets reset."""
        self._proc.kill()


def launch(
    module: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path, *, name: str = ""
) -> Launched:
    """Start ``module.main(argv)`` in a child forked from the warm fork server, with ``env`` as its
    whole environment and ``log_path`` (created or truncated) as its stdout and stderr. ``name``: the
    process name ``ps`` and ``pgrep`` show (Linux keeps 15 bytes), e.g. ``worker w1``: a forked child's
    command line is the fork server's, so this is how an operator tells the workers apart."""
    ctx = multiprocessing.get_context("forkserver")
    # The preload list only takes effect when the fork server starts (the first launch of this
    # process); later calls set the same list.
    ctx.set_forkserver_preload(list(PRELOAD))
    proc = ctx.Process(
        target=_run,
        args=(module, list(argv), dict(env), str(log_path), name),
        name=f"{module} {' '.join(argv)}"[:200],
        # A supervisor that dies takes its workers with it rather than leaving them orphaned.
        daemon=True,
    )
    proc.start()
    return Launched(proc)


def _run(module: str, argv: list[str], env: dict[str, str], log_path: str, name: str) -> None:
    """In the forked child: its name, the log file as fd 1 and 2, the given environment and argv, then
    main."""
    if name:
        _set_process_name(name)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [module, *argv]
    importlib.import_module(module).main(argv)


def _set_process_name(name: str) -> None:
    """prctl(PR_SET_NAME): the name in /proc/PID/comm, ps and pgrep. Best effort: where libc or prctl is
    missing (not Linux) the process keeps the fork server's name and nothing else changes."""
    import ctypes

    pr_set_name = 15
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_name, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        return
