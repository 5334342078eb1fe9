"""Rejoin after any restart, with real processes: joins are decided by state, not by a command-line flag.

A worker that comes back (restarted with the very same argv, as torchrun ``--max-restarts``, systemd
or Kubernetes do; resumed on a host without the checkpoint; thawed after SIGSTOP) must take the
group's local model and inner optimizer state as well as its global weights, or its next
pseudo-gradient drags the global model back towards initialisation.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from datetime import timedelta
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dispersal.testbed.config import TestbedConfig  # noqa: E402
from dispersal.testbed.data import prepare_corpus  # noqa: E402

pytestmark = pytest.mark.torch

# A small corpus that is always present and never edited: the standard library's email package.
CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)
ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def _events(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / "events.jsonl").read_text().splitlines()]


def _metrics(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """The documented several-machines path on one host: ``python -m dispersal.testbed.supervisor``
    (store + coordinator only) and standalone worker processes started by hand, all on 127.0.0.1."""

    def __init__(self, cfg: TestbedConfig, tmp: Path) -> None:
        self.cfg, self.tmp = cfg, tmp
        self.cfg_path = tmp / "config.json"
        self.cfg_path.write_text(json.dumps(cfg.to_dict()))
        self.port = _free_port()
        self.logs = tmp / "proc-logs"
        self.logs.mkdir()
        self.procs: list[subprocess.Popen[bytes]] = []
        sup = ["-m", "dispersal.testbed.supervisor", "--config", str(self.cfg_path), "--port", str(self.port)]
        self.sup = self._popen("supervisor", [*sup, "--host", "127.0.0.1"])
        self.store = self._connect()

    def _popen(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.{len(self.procs)}.log", "wb") as log:
            p = subprocess.Popen([sys.executable, *args], stdout=log, stderr=subprocess.STDOUT, env=ENV)
        self.procs.append(p)
        return p

    def _connect(self) -> torch.distributed.TCPStore:
        deadline = time.monotonic() + 60
        while True:
            try:
                return torch.distributed.TCPStore(
                    "127.0.0.1", self.port, is_master=False, timeout=timedelta(seconds=30)
                )
            except Exception:
                if time.monotonic() > deadline or self.sup.poll() is not None:
                    raise
                time.sleep(0.2)

    def worker_argv(self, worker: str, out: Path, *extra: str) -> list[str]:
        return [
            "-m",
            "dispersal.testbed.worker",
            "--config",
            str(self.cfg_path),
            "--worker",
            worker,
            "--store",
            f"127.0.0.1:{self.port}",
            "--out",
            str(out),
            *extra,
        ]

    def start(self, argv: list[str], name: str) -> subprocess.Popen[bytes]:
        return self._popen(name, argv)

    def wait_for_key(self, key: str, timeout_s: float) -> str:
        self.store.wait([key], timedelta(seconds=timeout_s))
        return self.store.get(key).decode()

    def finish(self, timeout_s: float) -> None:
        """Wait (bounded) for every process to exit; kill whatever is left and fail if anything was."""
        deadline = time.monotonic() + timeout_s
        left = []
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                left.append(p.args)
        self.kill_all()
        assert not left, f"still running after {timeout_s} s: {left}"

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def cluster_factory(tmp_path: Path):
    made: list[Cluster] = []

    def make(cfg: TestbedConfig) -> Cluster:
        prepare_corpus(cfg.data, tmp_path / "run" / "data")  # once, before the workers map it
        c = Cluster(cfg, tmp_path)
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill_all()


def test_restart_with_identical_argv_takes_the_groups_local_state(tmp_path: Path, cluster_factory) -> None:
    """The issue's reproduction, scaled down: supervisor + two standalone workers, SIGKILL w1 when it
    reaches step 20, start it again with exactly the same command line. The group holds the boundary
    of step 25 for it (``rejoin w1@step25`` in the shared config, so the argv stays unchanged). The
    restarted w1 must come back with the group's local weights: the validation loss after its first
    round back is not worse than before the kill, and its local weights hash to the global ones."""
    cfg = TestbedConfig(
        algorithm="diloco",
        workers=2,
        steps=60,
        inner_steps=5,
        data=CORPUS,
        eval_batches=4,
        run_timeout_s=120,
        faults=("kill w1@step20", "rejoin w1@step25"),
    )
    c = cluster_factory(cfg)
    out = tmp_path / "run"
    argv = {w: c.worker_argv(w, out) for w in ("w0", "w1")}
    c.start(argv["w0"], "w0")
    w1 = c.start(argv["w1"], "w1")
    assert c.wait_for_key("killme/w1", 60) == "20"  # w1 reached step 20 and waits for its SIGKILL
    os.kill(w1.pid, signal.SIGKILL)
    w1.wait()
    c.start(argv["w1"], "w1-again")  # identical argv: no --incarnation, no --resume, nothing else
    c.finish(timeout_s=110)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] is True and summary["final_members"] == ["w0", "w1"]
    rows = {r["round"]: r for r in _metrics(out)}
    # Round 3 (steps 15-19) is the last before the kill; round 4 is dropped; w1 is back for round 5.
    assert rows[5]["active_workers"] == ["w0", "w1"]
    assert rows[5]["val_loss"] <= rows[3]["val_loss"], (rows[3]["val_loss"], rows[5]["val_loss"])
    ev = _events(out)
    back = [e for e in ev if e["event"] == "joined" and e["worker"] == "w1" and e["round"] == 5]
    assert len(back) == 1, back
    assert back[0]["incarnation"] == 1  # from the store, not from the argv
    assert back[0]["reset_local"] is True and back[0]["local_crc"] == back[0]["global_crc"]
    same_gen = [e for e in ev if e["event"] == "joined" and e["generation"] == back[0]["generation"]]
    assert len({e["state_crc"] for e in same_gen}) == 1 and len({e["local_crc"] for e in same_gen}) == 1
    assert not [e for e in ev if e["event"] == "join_check_failed"]
