"""The supervisor: hosts the TCPStore, runs the membership coordinator, spawns and kills workers.

Membership protocol (plain torch.distributed, no torchft): the store outlives the workers and holds

    incarnation/<w>               counter: every worker process takes the next number when it starts,
                                  so a process restarted with the same argv is still a new incarnation
    joinreq/<w> = incarnation     a worker process asks to be in the group
    hb/<w>                        heartbeat, rewritten every 0.3 s by each worker
    failed/<g>/<w>                a worker's collective failed in generation g
    members/<g>, gen              the coordinator's published generations (gen is a counter)
    incarnations/<g>              {worker: incarnation} of generation g's members
    killme/<w>, stopme/<w>        fault plan hand-shakes (SIGKILL; SIGSTOP, SIGCONT, then resumed/<w>)
    progress/<w>, finished        progress; the run is over

The coordinator publishes generation g+1 when a member is lost (process exit seen by the
supervisor, or heartbeat older than ``heartbeat_timeout_s``), when a member registers a new
incarnation (it was restarted: the process in the group is gone, whatever its argv said), when a
worker asks to join, or when a failure is reported. Survivors come first in the member list. What a
member takes at a join is decided by state, not by this list: the member with the newest round is
the source, and everyone behind it resets its local model and inner optimizer (worker._sync_state).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch.distributed as dist

if TYPE_CHECKING:
    # torch.distributed imports TCPStore from here without re-exporting it (no ``as`` alias, no __all__),
    # so mypy takes ``dist.TCPStore`` for private although it is documented public API: annotations name
    # the defining module, and the calls carry ``# type: ignore[attr-defined]``.
    from torch._C._distributed_c10d import TCPStore

from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.data import prepare_data
from dispersal.testbed.faults import FaultPlan
from dispersal.testbed.netlink import start_relay
from dispersal.testbed.worker import log_event


class Coordinator:
    """Decides the member list of each generation from registrations, deaths and failure reports."""

    def __init__(self, store: TCPStore, worker_ids: list[str], heartbeat_timeout_s: float) -> None:
        self.store, self.worker_ids, self.hb_timeout = store, worker_ids, heartbeat_timeout_s
        self.gen = 0
        self.members: list[str] = []
        self.member_inc: dict[str, int] = {}  # incarnation of each member when it was published
        self.registered: dict[str, int] = {}
        self.dead: dict[str, int] = {}
        self._hb_seen: dict[str, tuple[bytes, float]] = {}
        self._failure_since: float | None = None
        self.started = time.monotonic()

    def mark_dead(self, worker: str, incarnation: int) -> None:
        self.dead[worker] = max(incarnation, self.dead.get(worker, -1))

    def _fresh(self, worker: str, now: float) -> bool:
        """Heartbeat changed within the timeout (judged on this clock, so machines' clocks may differ)."""
        key = f"hb/{worker}"
        if not self.store.check([key]):
            return True  # just registered, first beat not yet written
        value = self.store.get(key)
        last = self._hb_seen.get(worker)
        if last is None or last[0] != value:
            self._hb_seen[worker] = (value, now)
            return True
        return now - last[1] < self.hb_timeout

    def alive(self, now: float) -> list[str]:
        out = []
        for w in self.worker_ids:
            if self.store.check([f"joinreq/{w}"]):
                inc = int(self.store.get(f"joinreq/{w}"))
                if inc != self.registered.get(w):
                    self.registered[w] = inc
                    self._hb_seen.pop(w, None)
            reg = self.registered.get(w)
            if reg is not None and self.dead.get(w, -1) < reg and self._fresh(w, now):
                out.append(w)
        return out

    def publish(self, members: list[str]) -> None:
        g = self.gen + 1
        incs = {w: self.registered[w] for w in members}
        self.store.set(f"members/{g}", json.dumps(members))
        self.store.set(f"incarnations/{g}", json.dumps(incs))
        self.gen = self.store.add("gen", 1)
        assert self.gen == g, "only the coordinator bumps gen"
        self.members, self.member_inc = members, incs
        self._failure_since = None

    def tick(self, expected_at_start: int, start_grace_s: float = 120.0) -> None:
        now = time.monotonic()
        alive = self.alive(now)
        if self.gen == 0:
            if alive and (len(alive) >= expected_at_start or now - self.started > start_grace_s):
                self.publish(sorted(alive, key=lambda w: int(w[1:])))
            return
        # A member whose registered incarnation changed was restarted: the process in the group is
        # gone, so it leaves, and its new incarnation joins in the same generation.
        kept = [w for w in self.members if w in alive and self.registered[w] == self.member_inc[w]]
        joiners = sorted((w for w in alive if w not in kept), key=lambda w: int(w[1:]))
        if not kept and not joiners:
            return
        if len(kept) < len(self.members) or joiners:
            self.publish(kept + joiners)
            return
        if any(self.store.check([f"failed/{self.gen}/{w}"]) for w in self.members):
            # A collective failed but nobody is known dead yet: give heartbeats time to tell.
            if self._failure_since is None:
                self._failure_since = now
            elif now - self._failure_since > self.hb_timeout:
                self.publish(kept)


def _spawn(
    cfg_path: Path, out: Path, worker: str, port: int, incarnation: int, resume: bool, join_at_step: int = 0
) -> subprocess.Popen[bytes]:
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "dispersal.testbed.worker",
        "--config",
        str(cfg_path),
        "--worker",
        worker,
        "--store",
        f"127.0.0.1:{port}",
        "--out",
        str(out),
        "--incarnation",
        str(incarnation),
    ]
    if resume and incarnation == 0:
        cmd.append("--resume")
    if join_at_step:
        cmd += ["--join-at-step", str(join_at_step)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with open(logs / f"{worker}.{incarnation}.log", "wb") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def _progress(store: TCPStore, workers: list[str]) -> int:
    done = [int(store.get(f"progress/{w}")) for w in workers if store.check([f"progress/{w}"])]
    return max(done, default=0)


def run_local(
    cfg: TestbedConfig,
    out: Path,
    *,
    resume: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run a whole training job on this machine: one OS process per worker. Returns summary.json's dict."""
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        for name in ("metrics.jsonl", "events.jsonl", "summary.json"):
            (out / name).unlink(missing_ok=True)
    (out / "summary.json").unlink(missing_ok=True)
    cfg_path = out / "config.json"
    from dispersal._io import atomic_write_text

    atomic_write_text(cfg_path, json.dumps(cfg.to_dict(), indent=2) + "\n")
    prepare_data(cfg, out / "data")  # once here (bytes, or BPE + token shards); workers memory-map it
    store = dist.TCPStore(  # type: ignore[attr-defined]  # torch re-export
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30)
    )
    coord = Coordinator(store, cfg.worker_ids, cfg.heartbeat_timeout_s)
    relay = start_relay(cfg, out, fresh=not resume) if cfg.link_mode == "real" else None  # netlink.py
    if relay is not None:
        store.set("relay", f"{relay.host}:{relay.port}")
    plan = FaultPlan.parse(cfg.faults)
    procs = {w: _spawn(cfg_path, out, w, store.port, 0, resume) for w in cfg.worker_ids}
    incarnation = dict.fromkeys(cfg.worker_ids, 0)
    exited: set[tuple[str, int]] = set()
    rejoins = list(plan.of("rejoin"))
    thaw_at: dict[str, float] = {}  # SIGSTOPped worker -> when to SIGCONT it
    deadline = time.monotonic() + cfg.run_timeout_s
    timed_out = True
    while time.monotonic() < deadline:
        coord.tick(expected_at_start=len(cfg.worker_ids))
        for w, p in procs.items():
            if store.check([f"killme/{w}"]) and p.poll() is None and incarnation[w] == 0:
                os.kill(p.pid, signal.SIGKILL)  # a real SIGKILL: no cleanup, sockets reset
                p.wait()
                log_event(out, worker=w, event="killed", step=int(store.get(f"killme/{w}")))
            if store.check([f"stopme/{w}"]) and p.poll() is None and incarnation[w] == 0:
                at_step = int(store.get(f"stopme/{w}"))
                store.delete_key(f"stopme/{w}")
                os.kill(p.pid, signal.SIGSTOP)  # frozen: no exit, no socket reset, heartbeats stop
                thaw_at[w] = time.monotonic() + plan.pauses(w).get(at_step, 0.0)
                log_event(out, worker=w, event="stopped", step=at_step, pause_s=plan.pauses(w).get(at_step))
            if w in thaw_at and time.monotonic() >= thaw_at[w]:
                del thaw_at[w]
                store.set(f"resumed/{w}", "1")
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGCONT)
                    log_event(out, worker=w, event="continued")
            if p.poll() is not None and (w, incarnation[w]) not in exited:
                exited.add((w, incarnation[w]))
                coord.mark_dead(w, incarnation[w])
        step = _progress(store, cfg.worker_ids)
        for f in list(rejoins):
            # Start the replacement as soon as the old process is gone, as a warm standby: it loads
            # torch, the model and the data now and registers only when the group reaches f.step (the
            # group holds that boundary for it, at most rejoin_timeout_s). Waiting for the group to
            # reach f.step before even starting it would make the group wait for process start-up,
            # and if the group never got there (a stall) the replacement would never be started.
            if procs[f.worker].poll() is not None and not store.check(["finished"]):
                incarnation[f.worker] += 1
                procs[f.worker] = _spawn(
                    cfg_path, out, f.worker, store.port, incarnation[f.worker], False, join_at_step=f.step
                )
                log_event(
                    out,
                    worker=f.worker,
                    event="restarted",
                    step=step,
                    join_at_step=f.step,
                    incarnation=incarnation[f.worker],
                )
                rejoins.remove(f)
        if on_progress:
            on_progress(step, cfg.steps)
        if all(p.poll() is not None for p in procs.values()):
            timed_out = False
            break
        time.sleep(0.1)
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()
    if relay is not None:
        relay.close(out / "relay.json")
    summary_path = out / "summary.json"
    if summary_path.exists():
        return cast(dict[str, Any], json.loads(summary_path.read_text()))
    from dispersal._io import atomic_write_text, dumps_json

    summary = {
        "completed": False,
        "reason": "timed out" if timed_out else "all workers exited without a summary",
    }
    atomic_write_text(summary_path, dumps_json(summary) + "\n")
    return summary


def serve(cfg: TestbedConfig, port: int, host: str = "0.0.0.0") -> None:
    """Coordinator only, for several machines: workers are started elsewhere (e.g. by torchrun).

    ``host`` is the address the store listens on (all interfaces by default; tests use 127.0.0.1)."""
    store = dist.TCPStore(  # type: ignore[attr-defined]  # torch re-export
        host, port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30)
    )
    coord = Coordinator(store, cfg.worker_ids, cfg.heartbeat_timeout_s)
    deadline = time.monotonic() + cfg.run_timeout_s
    while time.monotonic() < deadline and not store.check(["finished"]):
        coord.tick(expected_at_start=len(cfg.worker_ids))
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="dispersal.testbed.supervisor")
    ap.add_argument("--config", required=True, help="config.json written by `dispersal train` (or by hand)")
    ap.add_argument("--port", type=int, default=29600)
    ap.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all interfaces)")
    args = ap.parse_args(argv)
    serve(TestbedConfig.from_dict(json.loads(Path(args.config).read_text())), args.port, args.host)


if __name__ == "__main__":
    main()
