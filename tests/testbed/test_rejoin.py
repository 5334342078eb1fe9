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
import sysconfig
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from dispersal.testbed.config import TestbedConfig  # noqa: E402
from dispersal.testbed.data import prepare_corpus  # noqa: E402
from dispersal.testbed.launch import Launched, launch  # noqa: E402
from dispersal.testbed.secure import SignedStore, secret_env  # noqa: E402

# Real worker processes and sockets: part of the full suite, not of the fast tier (`-m "not slow"`).
pytestmark = [pytest.mark.torch, pytest.mark.slow]
# The identical-argv restart (3 s heartbeat) and the fault-plan parser run by default; every other
# real-process case here is marked slow (about 8-12 s each on an idle 2-core machine).

# A small corpus that is always present and never edited: the standard library's email package.
CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)
SECRET = bytes(range(32))
# The several-machines path needs the run secret: every process gets it through the environment.
ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **secret_env(SECRET))


def _events(out: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in (out / "events.jsonl").read_text().splitlines()]


def _metrics(out: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """The documented several-machines path on one host: the supervisor (store + coordinator only) and
    standalone workers, each a separate process running its module's ``main`` with the argv and
    environment a user types, all on 127.0.0.1. They are forked from the warm fork server
    (`dispersal.testbed.launch`) rather than started as fresh interpreters: a fresh one spends about
    6 s of CPU importing torch and torch._dynamo on the 2-core machine, and what these tests check
    (a join decided by state, identical argv) does not depend on it. Fresh interpreters on separate
    hosts are tests/testbed/test_multihost.py's."""

    def __init__(self, cfg: TestbedConfig, tmp: Path) -> None:
        self.cfg, self.tmp = cfg, tmp
        self.cfg_path = tmp / "config.json"
        self.cfg_path.write_text(json.dumps(cfg.to_dict()))
        self.port = _free_port()
        self.logs = tmp / "proc-logs"
        self.logs.mkdir()
        self.procs: list[Launched] = []
        sup = ["-m", "dispersal.testbed.supervisor", "--config", str(self.cfg_path), "--port", str(self.port)]
        self.sup = self._popen("supervisor", [*sup, "--host", "127.0.0.1"])
        self.store = self._connect()

    def _popen(self, name: str, args: list[str]) -> Launched:
        # args as for `python`: ["-m", module, *argv]
        assert args[0] == "-m", args
        log = self.logs / f"{name}.{len(self.procs)}.log"
        p = launch(args[1], args[2:], ENV, log, name=name)
        self.procs.append(p)
        return p

    def _connect(self) -> SignedStore:  # a signed torch.distributed.TCPStore client
        deadline = time.monotonic() + 60
        while True:
            try:
                raw = torch.distributed.TCPStore(
                    "127.0.0.1", self.port, is_master=False, timeout=timedelta(seconds=30)
                )
                return SignedStore(raw, SECRET)
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

    def start(self, argv: list[str], name: str) -> Launched:
        return self._popen(name, argv)

    def wait_for_key(self, key: str, timeout_s: float) -> str:
        assert self.store.wait_valid([key], timeout_s), key
        return str(self.store.get_str(key))

    def finish(self, timeout_s: float) -> None:
        """Wait (bounded) for every process to exit; kill whatever is left and fail if anything was."""
        deadline = time.monotonic() + timeout_s
        left = []
        for p in self.procs:
            if p.wait(timeout=max(0.1, deadline - time.monotonic())) is None:
                left.append(p.pid)
        self.kill_all()
        assert not left, f"still running after {timeout_s} s: {left}"

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[[TestbedConfig], Cluster]]:
    made: list[Cluster] = []

    def make(cfg: TestbedConfig) -> Cluster:
        prepare_corpus(cfg.data, tmp_path / "run" / "data")  # once, before the workers map it
        c = Cluster(cfg, tmp_path)
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill_all()


@pytest.mark.parametrize(
    "heartbeat_timeout_s",
    [3.0, pytest.param(60.0, marks=pytest.mark.slow, id="restart-before-the-heartbeat-times-out")],
)
def test_restart_with_identical_argv_takes_the_groups_local_state(
    tmp_path: Path, cluster_factory: Callable[[TestbedConfig], Cluster], heartbeat_timeout_s: float
) -> None:
    """The issue's reproduction, scaled down: supervisor + two standalone workers, SIGKILL w1 when it
    reaches step 20, start it again with exactly the same command line. The group holds the boundary
    of step 25 for it (``rejoin w1@step25`` in the shared config, so the argv stays unchanged). The
    restarted w1 must come back with the group's local weights: the validation loss after its first
    round back is not worse than before the kill, and its local weights hash to the global ones.
    With a 60 s heartbeat timeout the new process registers while the coordinator still counts the
    old one as alive: its new incarnation alone must end the old generation (it may not enter it)."""
    cfg = TestbedConfig(
        algorithm="diloco",
        workers=2,
        steps=60,
        inner_steps=5,
        data=CORPUS,
        eval_batches=4,
        heartbeat_timeout_s=heartbeat_timeout_s,
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


def _joined(ev: list[dict[str, Any]], worker: str) -> list[dict[str, Any]]:
    return [e for e in ev if e["event"] == "joined" and e["worker"] == worker]


def _assert_consistent_generations(ev: list[dict[str, Any]]) -> None:
    """Every member of a generation holds the same global state; no member failed the join check."""
    by_gen: dict[int, set[int]] = {}
    for e in ev:
        if e["event"] == "joined":
            by_gen.setdefault(e["generation"], set()).add(e["state_crc"])
    assert all(len(crcs) == 1 for crcs in by_gen.values()), by_gen
    assert not [e for e in ev if e["event"] in ("join_check_failed", "reform_failed")]


@pytest.mark.slow
def test_resume_on_a_host_without_the_checkpoint(
    tmp_path: Path, cluster_factory: Callable[[TestbedConfig], Cluster]
) -> None:
    """Resume where w0 (rank 0) runs on a host that has no copy of the checkpoint (no shared
    filesystem) and w1 on the host that has it. The member with the newest round is the source: the
    group goes on from round 4, not from w0's round 0, and w0 takes w1's local model and inner state."""
    from dispersal.testbed.supervisor import run_local

    kw: dict[str, Any] = {
        "algorithm": "diloco",
        "workers": 2,
        "steps": 40,
        "inner_steps": 5,
        "data": CORPUS,
        "eval_batches": 4,
        "checkpoint_every": 2,
        "run_timeout_s": 120,
    }
    has_ckpt, bare = tmp_path / "run", tmp_path / "bare"
    stopped = run_local(TestbedConfig(**kw, stop_after_rounds=4), has_ckpt)
    assert stopped["completed"] is False and (has_ckpt / "ckpt" / "LATEST").read_text() == "r000004"
    before = {r["round"]: r["val_loss"] for r in _metrics(has_ckpt)}
    (has_ckpt / "events.jsonl").unlink()
    c = cluster_factory(TestbedConfig(**kw))
    c.start(c.worker_argv("w0", bare, "--resume"), "w0")  # nothing to resume from on this host
    c.start(c.worker_argv("w1", has_ckpt, "--resume"), "w1")
    c.finish(timeout_s=110)
    summary = json.loads((bare / "summary.json").read_text())  # rank 0 (w0) writes its outputs on its host
    assert summary["completed"] is True and summary["rounds"] == 8
    rows = _metrics(bare)
    assert rows[0]["round"] == 4 and rows[-1]["round"] == 7  # went on from round 4
    assert rows[0]["val_loss"] <= before[3]
    (w0,) = _joined(_events(bare), "w0")
    (w1,) = _joined(_events(has_ckpt), "w1")
    assert w0["round"] == w1["round"] == 4
    assert w0["reset_local"] is True and w1["reset_local"] is False
    assert w0["state_crc"] == w1["state_crc"] and w0["local_crc"] == w1["local_crc"] == w1["global_crc"]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["ddp", "streaming"])
def test_kill_inside_all_gather_then_rejoin(tmp_path: Path, algorithm: str) -> None:
    """w1 passes the round's barrier and dies (SIGKILL) while w0 is inside all_gather waiting for its
    frame: w0's collective fails (not the store barrier), the round is dropped, and the replacement
    comes back with the group's state, under DDP and under Streaming DiLoCo (P = 2, tau = 1)."""
    from dispersal.testbed.supervisor import run_local

    cfg = TestbedConfig(
        algorithm=algorithm,
        workers=2,
        steps=50 if algorithm == "ddp" else 60,
        inner_steps=5 if algorithm == "ddp" else 10,
        fragments=2,
        overlap_steps=1,
        data=CORPUS,
        eval_batches=4,
        run_timeout_s=120,
        faults=("kill w1@step17/allgather", "rejoin w1@step30"),
    )
    summary = run_local(cfg, tmp_path)
    assert summary["completed"] is True and summary["final_members"] == ["w0", "w1"]
    ev = _events(tmp_path)
    assert [(e["worker"], e["step"], e["phase"]) for e in ev if e["event"] == "awaiting_kill"] == [
        ("w1", 17, "allgather")
    ]
    failed = [e for e in ev if e["event"] == "sync_failed"]
    assert [e["worker"] for e in failed] == ["w0"]
    assert failed[0]["error"] != "a member of the group is gone"  # it failed inside the collective
    back = _joined(ev, "w1")[-1]
    assert back["incarnation"] == 1 and back["reset_local"] is True and back["round"] * cfg.round_steps == 30
    assert back["local_crc"] == back["global_crc"]
    _assert_consistent_generations(ev)
    rows = _metrics(tmp_path)
    last_before = max(r["val_loss"] for r in rows if r["step"] <= 15)
    first_back = next(r for r in rows if r["step"] > 30)
    assert first_back["active_workers"] == ["w0", "w1"] and first_back["val_loss"] <= last_before


@pytest.mark.slow
def test_kill_during_a_checkpoint_write(tmp_path: Path) -> None:
    """Rank 0 (w0) is SIGKILLed with half of round 4's global.pt written. LATEST never points at the
    broken checkpoint (only a temporary file is left), w1 carries on as rank 0 and checkpoints again,
    and the replacement rejoins with the group's state."""
    from dispersal.testbed import checkpoint
    from dispersal.testbed.supervisor import run_local

    cfg = TestbedConfig(
        algorithm="diloco",
        workers=2,
        steps=50,
        inner_steps=5,
        data=CORPUS,
        eval_batches=4,
        checkpoint_every=2,
        run_timeout_s=120,
        faults=("kill w0@step20/checkpoint", "rejoin w0@step30"),
    )
    summary = run_local(cfg, tmp_path)
    assert summary["completed"] is True and summary["final_members"] == ["w1", "w0"]
    ev = _events(tmp_path)
    assert [(e["worker"], e["phase"]) for e in ev if e["event"] == "awaiting_kill"] == [("w0", "checkpoint")]
    broken = checkpoint.round_dir(tmp_path, 4)
    assert not (broken / "global.pt").exists()
    (partial,) = broken.glob(".global.pt.*.tmp")
    assert 0 < partial.stat().st_size < (checkpoint.round_dir(tmp_path, 2) / "global.pt").stat().st_size
    assert (tmp_path / "ckpt" / "LATEST").read_text() == "r000010"
    for r in (2, 6, 8, 10):  # every other checkpoint is whole and loads
        g = checkpoint.load(checkpoint.round_dir(tmp_path, r) / "global.pt")
        assert g["round"] == r
    back = _joined(ev, "w0")[-1]
    assert back["incarnation"] == 1 and back["reset_local"] is True and back["round"] == 6
    assert back["local_crc"] == back["global_crc"]
    _assert_consistent_generations(ev)


@pytest.mark.slow
def test_sigstop_then_sigcont(tmp_path: Path) -> None:
    """w1 is frozen (SIGSTOP) at step 20 for 5 s: no exit, no socket reset, just silence. Its heartbeat
    goes stale, w0 drops the round and goes on; after SIGCONT w1 finds its group gone, asks to join
    again, and comes back behind the group: it resets its local model and inner state from w0."""
    from dispersal.testbed.supervisor import run_local

    cfg = TestbedConfig(
        algorithm="diloco",
        workers=2,
        steps=50,
        inner_steps=5,
        data=CORPUS,
        eval_batches=4,
        collective_timeout_s=3,
        run_timeout_s=120,
        faults=("pause w1:5s@step20", "rejoin w1@step30"),
    )
    summary = run_local(cfg, tmp_path)
    assert summary["completed"] is True and summary["final_members"] == ["w0", "w1"]
    # Several processes append to events.jsonl: order by their timestamps, not by file position.
    ev = sorted(_events(tmp_path), key=lambda e: float(e.get("t", 0.0)))
    kinds = [(e["event"], e["worker"]) for e in ev]
    # The supervisor's "continued" (after SIGCONT) and the worker's "resumed" race by a few ms: both
    # come after the stop; the worker resumes only once the 5 s freeze is over.
    assert kinds.index(("stopped", "w1")) < kinds.index(("continued", "w1"))
    assert kinds.index(("stopped", "w1")) < kinds.index(("resumed", "w1"))
    resumed = next(e for e in ev if e["event"] == "resumed")
    assert resumed["t"] - next(e for e in ev if e["event"] == "stopped")["t"] >= 5.0 - 0.05
    assert ("killed", "w1") not in kinds and ("restarted", "w1") not in kinds  # the same process
    stopped = next(e for e in ev if e["event"] == "stopped")
    continued = next(e for e in ev if e["event"] == "continued")
    assert continued["t"] - stopped["t"] >= 5.0
    back = [e for e in _joined(ev, "w1") if e["generation"] > 1]
    assert back and back[-1]["incarnation"] == 0 and back[-1]["reset_local"] is True
    assert back[-1]["round"] > 4 and back[-1]["local_crc"] == back[-1]["global_crc"]
    _assert_consistent_generations(ev)
    rows = _metrics(tmp_path)
    assert rows[-1]["active_workers"] == ["w0", "w1"]


def test_fault_plan_kill_phases_and_pause() -> None:
    from dispersal.model.inputs.errors import InputError
    from dispersal.testbed.faults import FaultPlan

    plan = FaultPlan.parse(
        ["kill w1@step20/allgather", "kill w0@30/checkpoint", "kill w1@step5", "pause w1:2.5s@step40"]
    )
    assert plan == (
        FaultPlan()
        .kill("w1", 20, "allgather")
        .kill("w0", 30, "checkpoint")
        .kill("w1", 5)
        .pause("w1", 2.5, 40)
    )
    assert [str(f) for f in plan.faults] == [
        "kill w1@step20/allgather",
        "kill w0@step30/checkpoint",
        "kill w1@step5",
        "pause w1:2.5s@step40",
    ]
    assert plan.kill_steps("w1") == [5] and plan.kill_steps("w1", phase="allgather") == [20]
    assert plan.kill_steps("w0", phase="checkpoint") == [30] and plan.kill_steps("w0") == []
    assert plan.pauses("w1") == {40: 2.5} and plan.pauses("w0") == {}
    for bad in ("kill w1@step3/everywhere", "pause w1@step3", "pause w1:0s@step3"):
        with pytest.raises(InputError) as err:
            FaultPlan.parse([bad])
        assert err.value.field == "fault" and len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize(("algorithm", "repaired"), [("diloco", True), ("streaming", False)])
def test_join_check_catches_a_stale_local_model(tmp_path: Path, algorithm: str, repaired: bool) -> None:
    """The check behind the ``joined`` event: under DiLoCo local weights that differ from the global
    ones at a boundary are the silent corruption, logged and repaired; a Streaming DiLoCo survivor's
    local weights legitimately differ (fragments merge late) unless it was reset."""
    from types import SimpleNamespace

    from dispersal.testbed.outer import flat_params
    from dispersal.testbed.worker import Worker

    model = torch.nn.Linear(4, 3)
    params = list(model.parameters())
    global_flat = flat_params(params).clone() + 1.0  # the group's weights; the local copy is stale
    me = SimpleNamespace(
        cfg=SimpleNamespace(algorithm=algorithm),
        params=params,
        out=tmp_path,
        wid="w1",
        gen=2,
        round=5,
        _global_vector=lambda: global_flat,
    )
    local_crc, global_crc = Worker._join_check(me, reset=False)  # type: ignore[arg-type]
    failed = _events(tmp_path) if (tmp_path / "events.jsonl").exists() else []
    assert (local_crc == global_crc) is repaired
    assert torch.equal(flat_params(params), global_flat) is repaired
    assert [e["event"] for e in failed] == (["join_check_failed"] if repaired else [])
    if not repaired:  # a reset streaming member must match: now it is checked (and repaired)
        local_crc, global_crc = Worker._join_check(me, reset=True)  # type: ignore[arg-type]
        assert local_crc == global_crc and torch.equal(flat_params(params), global_flat)
