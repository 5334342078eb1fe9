"""The supervisor: hosts the TCPStore, runs the membership coordinator, spawns and kills workers.

Membership protocol (plain torch.distributed, no torchft): the store outlives the workers and holds

    incarnation/<w>               counter: every worker process takes the next number when it starts,
                                  so a process restarted with the same argv is still a new incarnation
    joinreq/<w> = incarnation     a worker process asks to be in the group
    hb/<w>                        heartbeat, rewritten every 0.3 s by each worker
    failed/<g>/<w>                a worker's collective failed in generation g
    members/<g>, genv             the coordinator's published generations (genv: the newest g)
    incarnations/<g>              {worker: incarnation} of generation g's members
    killme/<w>, stopme/<w>        fault plan hand-shakes (SIGKILL; SIGSTOP, SIGCONT, then resumed/<w>)
    progress/<w>, finished        progress; the run is over

Every value is signed with the run secret (secure.SignedStore): a forged key (a ``killme/w2`` from
anyone who can reach the store) is ignored and logged as ``forged_store_value``. The store listens on
127.0.0.1 unless the several-machines coordinator is told another address, and that path refuses to
start without a secret (``DISPERSAL_RUN_SECRET`` or a 0600 ``DISPERSAL_RUN_SECRET_FILE``).

The coordinator publishes generation g+1 when a member is lost (process exit seen by the
supervisor, or heartbeat older than ``heartbeat_timeout_s``), when a member registers a new
incarnation (it was restarted: the process in the group is gone, whatever its argv said), when a
worker asks to join, or when a failure is reported. Survivors come first in the member list. What a
member takes at a join is decided by state, not by this list: the member with the newest round is
the source, and everyone behind it resets its local model and inner optimizer (worker._sync_state).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.data import prepare_data
from dispersal.testbed.events import log_event
from dispersal.testbed.faults import FaultPlan
from dispersal.testbed.honesty import honest
from dispersal.testbed.launch import Launched, launch
from dispersal.testbed.membership import parse_heartbeat
from dispersal.testbed.secure import SignedStore, listen_store, load_secret, new_secret, secret_env


class Coordinator:
    """Decides the member list of each generation from registrations, deaths and failure reports."""

    def __init__(
        self,
        store: SignedStore,
        worker_ids: list[str],
        heartbeat_timeout_s: float,
        on_drop: Callable[[str, str], None] | None = None,
    ) -> None:
        """``on_drop(worker, why)``: a member left the group ("exited", "restarted" or "heartbeat")."""
        self.store, self.worker_ids, self.hb_timeout = store, worker_ids, heartbeat_timeout_s
        self.on_drop = on_drop
        self.gen = 0
        self.members: list[str] = []
        self.member_inc: dict[str, int] = {}  # incarnation of each member when it was published
        self.registered: dict[str, int] = {}
        self.dead: dict[str, int] = {}
        self._hb_seen: dict[str, tuple[int, int, float]] = {}  # worker -> (seq, gen, when it rose)
        self._failure_since: float | None = None
        self.started = time.monotonic()

    def mark_dead(self, worker: str, incarnation: int) -> None:
        self.dead[worker] = max(incarnation, self.dead.get(worker, -1))

    def _fresh(self, worker: str, now: float) -> bool:
        """A new beat within the timeout (judged on this clock, so machines' clocks may differ).

        A beat is new only if it is genuine (signed), from the registered incarnation, its counter is
        higher than the last one seen and its generation not older: a changed value is not enough, or
        writing back two captured beats in turn would keep a frozen worker in the group."""
        key = f"hb/{worker}"
        last = self._hb_seen.get(worker)
        if last is None:
            self._hb_seen[worker] = last = (0, 0, now)  # registered now: the timeout starts here
        if self.store.raw.check([key]):
            beat = parse_heartbeat(self.store.get(key))  # a forged beat counts as no beat
            if (
                beat is not None
                and beat[0] == self.registered.get(worker)
                and beat[1] > last[0]
                and beat[2] >= last[1]
            ):
                self._hb_seen[worker] = last = (beat[1], beat[2], now)
        return now - last[2] < self.hb_timeout

    def alive(self, now: float) -> list[str]:
        out = []
        for w in self.worker_ids:
            inc = self.store.get_int(f"joinreq/{w}")
            if inc is not None and inc != self.registered.get(w):
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
        self.store.set("genv", str(g))  # last: a worker that sees g finds its members
        self.gen = g
        self.members, self.member_inc = members, incs
        self._failure_since = None

    def tick(self, expected_at_start: int, start_grace_s: float = 120.0) -> None:
        now = time.monotonic()
        if self.gen and self.store.get_int("genv") != self.gen:
            # An older signed genv written back (a replay) would hold every worker at that generation:
            # the coordinator owns the key and restores it within one tick.
            self.store.set("genv", str(self.gen))
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
            for w in self.members:
                if w not in kept and self.on_drop is not None:
                    why = "exited" if self.dead.get(w, -1) >= self.member_inc[w] else "heartbeat"
                    self.on_drop(w, "restarted" if self.registered[w] != self.member_inc[w] else why)
            self.publish(kept + joiners)
            return
        if any(self.store.valid(f"failed/{self.gen}/{w}") for w in self.members):
            # A collective failed but nobody is known dead yet: give heartbeats time to tell.
            if self._failure_since is None:
                self._failure_since = now
            elif now - self._failure_since > self.hb_timeout:
                self.publish(kept)


def _spawn(
    cfg_path: Path,
    out: Path,
    worker: str,
    port: int,
    incarnation: int,
    resume: bool,
    secret: bytes,
    join_at_step: int = 0,
    module: str = "dispersal.testbed.worker",
) -> Launched:
    """One worker (or, decoupled, learner: ``module`` dispersal.testbed.learner) process, forked from
    the warm fork server (launch.py) with the argv ``python -m MODULE`` would get."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    argv = [
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
        argv.append("--resume")
    if join_at_step:
        argv += ["--join-at-step", str(join_at_step)]
    # The secret goes through the environment (readable only by this user), never the command line.
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **secret_env(secret))
    name = f"{module.rsplit('.', 1)[-1]} {worker}"  # "worker w1", "learner w1": what ps shows
    return launch(module, argv, env, logs / f"{worker}.{incarnation}.log", name=name)


def _progress(store: SignedStore, workers: list[str]) -> int:
    done = [store.get_int(f"progress/{w}") for w in workers]
    return max((d for d in done if d is not None), default=0)


def _start(cfg: TestbedConfig, out: Path, resume: bool) -> Path:
    """Outputs reset (unless resuming), the resume point checked, config.json written, data prepared."""
    from dispersal._io import atomic_write_text
    from dispersal.testbed import checkpoint

    out.mkdir(parents=True, exist_ok=True)
    if resume:
        from dispersal.testbed.events import repair_jsonl

        # A torn last event line (a process died mid-write) would glue itself to the next event.
        got = repair_jsonl(out / "events.jsonl")
        if got["torn_bytes"] or got["malformed_lines"]:
            log_event(out, worker="supervisor", event="torn_log_line", path=str(out / "events.jsonl"), **got)
        # LATEST naming a missing round, or no intact round: a one-line error before any worker starts.
        checkpoint.resolve(out, log=lambda **f: log_event(out, worker="supervisor", **f))
    else:
        for name in ("metrics.jsonl", "events.jsonl", "summary.json"):
            (out / name).unlink(missing_ok=True)
    (out / "summary.json").unlink(missing_ok=True)
    cfg_path = out / "config.json"
    atomic_write_text(cfg_path, json.dumps(cfg.to_dict(), indent=2) + "\n")
    prepare_data(cfg, out / "data")  # once here (bytes, or BPE + token shards); workers memory-map it
    return cfg_path


class _Handshakes:
    """The supervisor's side of the fault plan: SIGKILL on ``killme/<w>``, SIGSTOP / SIGCONT on
    ``stopme/<w>``; only genuine (signed) requests from a first incarnation are obeyed."""

    def __init__(self, store: SignedStore, plan: FaultPlan, out: Path) -> None:
        self.store, self.plan, self.out = store, plan, out
        self.thaw_at: dict[str, float] = {}  # SIGSTOPped worker -> when to SIGCONT it
        self.killed: set[str] = set()  # workers whose first process the plan killed
        self.stopped: set[str] = set()  # workers the plan froze (a heartbeat drop is then planned)

    def poll(self, w: str, p: Launched, incarnation: int) -> None:
        alive = p.poll() is None and incarnation == 0
        kill_at = self.store.get_int(f"killme/{w}") if alive else None
        if kill_at is not None:
            os.kill(p.pid, signal.SIGKILL)  # a real SIGKILL: no cleanup, sockets reset
            p.wait()
            self.killed.add(w)
            log_event(self.out, worker=w, event="killed", step=kill_at)
            return
        stop_at = self.store.get_int(f"stopme/{w}") if alive else None
        if stop_at is not None:
            self.store.delete(f"stopme/{w}")
            os.kill(p.pid, signal.SIGSTOP)  # frozen: no exit, no socket reset, heartbeats stop
            self.stopped.add(w)
            pause_s = self.plan.pauses(w).get(stop_at, 0.0)
            self.thaw_at[w] = time.monotonic() + pause_s
            log_event(self.out, worker=w, event="stopped", step=stop_at, pause_s=pause_s)
        if w in self.thaw_at and time.monotonic() >= self.thaw_at[w]:
            del self.thaw_at[w]
            self.store.set(f"resumed/{w}", "1")
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                log_event(self.out, worker=w, event="continued")


def _start_relay(
    cfg: TestbedConfig,
    out: Path,
    store: SignedStore,
    secret: bytes,
    host: str,
    coord: Coordinator,
    fresh: bool,
) -> Any:
    """Real-link mode: the relay (netlink.py) as a thread here, listening on ``host``, its address
    published in the store as ``relay``. None in virtual-clock mode."""
    if cfg.link_mode != "real":
        return None
    from dispersal.testbed.gpt import param_count
    from dispersal.testbed.netlink import start_relay

    kw = cfg.gpt_kwargs()
    numel = param_count(kw["n_layer"], kw["n_embd"], kw["block_size"], kw["vocab_size"])
    relay = start_relay(
        cfg, out, secret=secret, fresh=fresh, host=host, max_gen=lambda: coord.gen, max_numel=numel
    )
    store.set("relay", f"{relay.host}:{relay.port}")
    return relay


def run_local(
    cfg: TestbedConfig,
    out: Path,
    *,
    resume: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run a whole training job on this machine: one OS process per worker. Returns summary.json's dict.

    The store and the relay listen on 127.0.0.1 only; a fresh per-run secret signs everything.
    ``--algorithm decoupled`` runs learners and a syncer instead (decoupled_run.run_decoupled)."""
    if cfg.algorithm == "decoupled":
        return run_decoupled(cfg, out, on_progress=on_progress)
    cfg_path = _start(cfg, out, resume)
    secret = new_secret()
    store = SignedStore(
        listen_store("127.0.0.1", 0),
        secret,
        on_forged=lambda key: log_event(out, worker="supervisor", event="forged_store_value", key=key),
    )
    port = store.raw.port
    dropped: dict[str, dict[str, Any]] = {}  # heartbeat drops: a frozen or unreachable process

    def on_drop(w: str, why: str) -> None:
        steps = store.get_int(f"progress/{w}") or 0
        log_event(out, worker=w, event="member_dropped", why=why, round=steps // cfg.round_steps)
        # A process that is past its finish (done/<w>) stops beating while it exits: not lost.
        if why == "heartbeat" and not store.valid(f"done/{w}") and not store.valid("finished"):
            dropped.setdefault(
                w, {"worker": w, "reason": "heartbeat lost", "round": steps // cfg.round_steps}
            )

    coord = Coordinator(store, cfg.worker_ids, cfg.heartbeat_timeout_s, on_drop=on_drop)
    relay = _start_relay(cfg, out, store, secret, "127.0.0.1", coord, fresh=not resume)
    where = {"store": f"127.0.0.1:{port}", "relay": f"{relay.host}:{relay.port}" if relay else None}
    log_event(out, worker="supervisor", event="listening", **where)
    lost: list[dict[str, Any]] = []
    timed_out = supervise(
        cfg,
        out,
        store,
        lambda w, inc, join_at: _spawn(cfg_path, out, w, port, inc, resume, secret, join_at),
        tick=lambda: coord.tick(expected_at_start=len(cfg.worker_ids)),
        on_exit=coord.mark_dead,
        on_progress=on_progress,
        lost=lost,
    )
    if relay is not None:
        relay.close(out / "relay.json")
    planned_stops = {e.get("worker") for e in _read_events(out) if e.get("event") == "stopped"}
    unplanned = {w: row for w, row in dropped.items() if w not in planned_stops}
    return _final_summary(out, timed_out, cfg, lost, unplanned)


def supervise(
    cfg: TestbedConfig,
    out: Path,
    store: SignedStore,
    spawn: Callable[[str, int, int], Launched],
    *,
    tick: Callable[[], None] | None = None,
    on_exit: Callable[[str, int], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    lost: list[dict[str, Any]] | None = None,
) -> bool:
    """Start every worker (``spawn(worker, incarnation, join_at_step)``), obey the fault plan's
    hand-shakes, restart planned rejoins, and wait (bounded by run_timeout_s) until every process has
    exited. ``tick``: the membership coordinator's step, called every 0.1 s; ``on_exit(worker,
    incarnation)``: a process was seen gone. Returns True on timeout."""
    plan = FaultPlan.parse(cfg.faults)
    procs = {w: spawn(w, 0, 0) for w in cfg.worker_ids}
    incarnation = dict.fromkeys(cfg.worker_ids, 0)
    exited: set[tuple[str, int]] = set()
    rejoins = list(plan.of("rejoin"))
    hands = _Handshakes(store, plan, out)
    deadline = time.monotonic() + cfg.run_timeout_s
    timed_out = True
    while time.monotonic() < deadline:
        if tick is not None:
            tick()
        for w, p in procs.items():
            hands.poll(w, p, incarnation[w])
            code = p.poll()
            if code is not None and (w, incarnation[w]) not in exited:
                exited.add((w, incarnation[w]))
                planned = incarnation[w] == 0 and w in hands.killed
                if code != 0 and not planned and _finished(store, w):
                    # Its work was done and handed over (done/<w>): a crash while exiting is an
                    # event, not a lost worker.
                    log_event(out, worker=w, event="exit_after_finish", reason=_exit_reason(code))
                elif code != 0 and not planned:
                    _lost(out, store, cfg, lost, w, incarnation[w], _exit_reason(code))
                if on_exit is not None:
                    on_exit(w, incarnation[w])
        step = _progress(store, cfg.worker_ids)
        for f in list(rejoins):
            # Start the replacement as soon as the old process is gone, as a warm standby: it loads
            # torch, the model and the data now and registers only when the group reaches f.step (the
            # group holds that boundary for it, at most rejoin_timeout_s). Waiting for the group to
            # reach f.step before even starting it would make the group wait for process start-up,
            # and if the group never got there (a stall) the replacement would never be started.
            if procs[f.worker].poll() is not None and _finished(store, f.worker):
                # It ended by finishing its work (done/<w>), not by a fault: nothing to rejoin. (Seen
                # under load: the last worker out exited before "finished" was set, and the pending
                # rejoin started a replacement of a run that was over.)
                rejoins.remove(f)
                continue
            if procs[f.worker].poll() is not None and not store.valid("finished"):
                incarnation[f.worker] += 1
                procs[f.worker] = spawn(f.worker, incarnation[f.worker], f.step)
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
    for w, p in procs.items():
        if p.poll() is None:
            p.kill()
            p.wait()
            _lost(out, store, cfg, lost, w, incarnation[w], "killed at the run timeout")
    return timed_out


def _finished(store: SignedStore, worker: str) -> bool:
    """The worker handed its results over (worker: done/<w>; learner: learner_done/<w>)."""
    return store.valid(f"done/{worker}") or store.valid(f"learner_done/{worker}")


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def _lost(
    out: Path,
    store: SignedStore,
    cfg: TestbedConfig,
    lost: list[dict[str, Any]] | None,
    worker: str,
    incarnation: int,
    reason: str,
) -> None:
    """Record a worker process that ended other than by the plan (event ``worker_lost``)."""
    steps = store.get_int(f"progress/{worker}") or 0
    row = {"worker": worker, "incarnation": incarnation, "reason": reason, "round": steps // cfg.round_steps}
    log_event(out, event="worker_lost", **row)
    if lost is not None:
        lost.append(row)


def run_decoupled(
    cfg: TestbedConfig, out: Path, *, on_progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """``--algorithm decoupled``: the syncer (decoupled_wire.SyncServer) as a thread here, one learner
    process per worker id (learner.py), the same fault hand-shakes and rejoins as the other algorithms.
    Returns summary.json's dict (run_local's contract)."""
    import torch

    from dispersal.testbed.decoupled_run import Evaluator, Metrics, make_syncer, summary
    from dispersal.testbed.decoupled_wire import SyncServer

    torch.set_num_threads(1)  # the syncer shares the cores with the learners
    cfg_path = _start(cfg, out, resume=False)
    secret = new_secret()
    store = SignedStore(
        listen_store("127.0.0.1", 0),
        secret,
        on_forged=lambda key: log_event(out, worker="supervisor", event="forged_store_value", key=key),
    )
    port = store.raw.port
    syncer = make_syncer(cfg, secret)
    evaluate = Evaluator(cfg, out)
    server = SyncServer(
        syncer,
        secret=secret,
        io_timeout_s=cfg.collective_timeout_s,
        on_merge=Metrics(cfg, out, syncer, evaluate),
        max_connections=4 * cfg.workers,
        log=lambda **f: log_event(out, worker="syncer", **f),
    ).start()
    store.set("syncer", f"{server.host}:{server.port}")
    log_event(
        out, worker="supervisor", event="listening", store=f"127.0.0.1:{port}", syncer=store.get_str("syncer")
    )
    module = "dispersal.testbed.learner"
    t0 = time.perf_counter()
    lost: list[dict[str, Any]] = []
    timed_out = supervise(
        cfg,
        out,
        store,
        lambda w, inc, join_at: _spawn(cfg_path, out, w, port, inc, False, secret, join_at, module=module),
        on_progress=on_progress,
        lost=lost,
    )
    wall_s = time.perf_counter() - t0
    server.merge_if_due(force=True)  # what is still pending when the last learner is gone
    server.close()
    return summary(cfg, out, syncer, store, timed_out, wall_s, evaluate(syncer.theta), lost)


def _read_events(out: Path) -> list[dict[str, Any]]:
    path = out / "events.jsonl"
    rows = []
    for ln in path.read_text().splitlines() if path.exists() else []:
        try:
            row = json.loads(ln)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _final_summary(
    out: Path,
    timed_out: bool,
    cfg: TestbedConfig,
    lost: list[dict[str, Any]],
    dropped: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """summary.json as rank 0 wrote it (or a stub if nobody did), made honest about lost workers:
    ``lost`` (processes that ended other than by the plan) and ``dropped`` (members the heartbeat
    declared gone whose process did not exit: frozen or unreachable), the latter only when they are
    not back in the final group."""
    from dispersal._io import atomic_write_text, dumps_json

    summary_path = out / "summary.json"
    summary: dict[str, Any] = {
        "completed": False,
        "diverged": False,
        "reason": "timed out" if timed_out else "all workers exited without a summary",
    }
    if summary_path.exists():
        with contextlib.suppress(ValueError):
            summary = json.loads(summary_path.read_text())
    final = summary.get("final_members") or []
    for w, row in (dropped or {}).items():
        if w not in final and not any(x["worker"] == w for x in lost):
            log_event(out, event="worker_lost", **row)
            lost = [*lost, row]
    summary = honest(summary, cfg, lost)
    atomic_write_text(summary_path, dumps_json(summary) + "\n")
    return summary


def serve(
    cfg: TestbedConfig,
    port: int,
    host: str = "127.0.0.1",
    secret: bytes | None = None,
    out: Path | None = None,
) -> None:
    """Coordinator only, for several machines: workers are started elsewhere (e.g. by torchrun).

    ``host`` is the address the store listens on (loopback by default: name this host's outside
    address to take workers from other machines; ``0.0.0.0`` listens on every interface). The run
    secret is required (``secret``, else DISPERSAL_RUN_SECRET / DISPERSAL_RUN_SECRET_FILE): every
    worker must hold the same one. Decoupled DiLoCo's syncer and real-link mode's relay run here too,
    on the same address, and keep their outputs (metrics and summary; relay.json) in ``out``. Prints
    one line per listener, so the operator sees which address the workers must reach."""
    key = secret if secret is not None else load_secret()
    where = out if out is not None else Path(".")
    store = SignedStore(
        listen_store(host, port),
        key,
        on_forged=lambda k: log_event(where, worker="supervisor", event="forged_store_value", key=k),
    )
    _say(f"store listening on {host}:{store.raw.port}")
    if host in ("0.0.0.0", "::"):
        _say("listening on every interface (--host names one address to narrow it)")
    if cfg.algorithm == "decoupled":
        assert out is not None  # main() checks it
        _serve_decoupled(cfg, out, store, host, key)
        return
    coord = Coordinator(store, cfg.worker_ids, cfg.heartbeat_timeout_s)
    relay = None
    if cfg.link_mode == "real":
        assert out is not None  # main() checks it
        out.mkdir(parents=True, exist_ok=True)
        relay = _start_relay(cfg, out, store, key, host, coord, fresh=True)
        _say(f"relay listening on {relay.host}:{relay.port}")
    deadline = time.monotonic() + cfg.run_timeout_s
    while time.monotonic() < deadline and not store.valid("finished"):
        coord.tick(expected_at_start=len(cfg.worker_ids))
        time.sleep(0.05)
    if relay is not None:
        relay.close(where / "relay.json")


def _say(line: str) -> None:
    print(f"supervisor: {line}", flush=True)


def _serve_decoupled(cfg: TestbedConfig, out: Path, store: SignedStore, host: str, secret: bytes) -> None:
    """serve() for ``--algorithm decoupled``: the syncer on ``host``; waits (bounded by run_timeout_s)
    until every learner the fault plan does not kill for good has reported ``learner_done``, then
    merges what is pending and writes OUT/summary.json (decoupled_run.summary, as run_decoupled)."""
    import torch

    from dispersal.testbed.decoupled_run import Evaluator, Metrics, make_syncer, summary
    from dispersal.testbed.decoupled_wire import SyncServer

    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("metrics.jsonl", "summary.json"):
        (out / name).unlink(missing_ok=True)
    prepare_data(cfg, out / "data")  # the syncer's validation batches
    syncer = make_syncer(cfg, secret)
    evaluate = Evaluator(cfg, out)
    server = SyncServer(
        syncer,
        secret=secret,
        host=host,
        io_timeout_s=cfg.collective_timeout_s,
        on_merge=Metrics(cfg, out, syncer, evaluate),
        max_connections=4 * cfg.workers,
        log=lambda **f: log_event(out, worker="syncer", **f),
    ).start()
    store.set("syncer", f"{server.host}:{server.port}")
    _say(f"syncer listening on {server.host}:{server.port}")
    plan = FaultPlan.parse(cfg.faults)
    gone = {f.worker for f in plan.of("kill")} - {f.worker for f in plan.of("rejoin")}
    waiting = [f"learner_done/{w}" for w in cfg.worker_ids if w not in gone]
    t0 = time.perf_counter()
    deadline = time.monotonic() + cfg.run_timeout_s
    timed_out = True
    while time.monotonic() < deadline:
        if all(store.valid(k) for k in waiting):
            timed_out = False
            break
        time.sleep(0.1)
    wall_s = time.perf_counter() - t0
    server.merge_if_due(force=True)
    server.close()
    summary(cfg, out, syncer, store, timed_out, wall_s, evaluate(syncer.theta))


def main(argv: list[str] | None = None) -> None:
    from dispersal.testbed.secure import SecretError

    ap = argparse.ArgumentParser(
        prog="dispersal.testbed.supervisor",
        epilog="The run secret comes from DISPERSAL_RUN_SECRET (64 hex digits) or a 0600 file named by "
        "DISPERSAL_RUN_SECRET_FILE; never from the command line. Give every worker the same one.",
    )
    ap.add_argument("--config", required=True, help="config.json written by `dispersal train` (or by hand)")
    ap.add_argument("--port", type=int, default=29600)
    ap.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default loopback; 0.0.0.0: all interfaces)"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the syncer's (decoupled) or the relay's (--link-mode real) outputs on this host",
    )
    args = ap.parse_args(argv)
    try:
        secret = load_secret()
    except SecretError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    cfg = TestbedConfig.from_dict(json.loads(Path(args.config).read_text()))
    if args.out is None and (cfg.algorithm == "decoupled" or cfg.link_mode == "real"):
        print(
            "error: --out: decoupled and link_mode 'real' keep the syncer's / relay's outputs here; "
            "name a folder",
            file=sys.stderr,
        )
        raise SystemExit(2)
    try:
        serve(cfg, args.port, args.host, secret, args.out)
    except OSError as exc:  # the address is not this host's, or the port is taken
        print(
            f"error: --host/--port: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
