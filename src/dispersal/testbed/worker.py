"""One worker process: inner steps on its own data, syncs through the emulated link, survives faults.

Read top to bottom, one round at a time (a round = the inner steps between two syncs)::

    form_group()                            # join generation g of the process group, get state
    for each round r:
        inner steps                         # AdamW; ddp: one forward/backward, step after the sync
        frame = header + codec(update) + tag  # pseudo-gradient (diloco, streaming) or gradient (ddp)
        barrier; all_gather(frame)          # every worker plays the relay: same frames, same order
        check every frame (wire.open_frame), aggregate the good ones (outer.OuterStep's rule)
        outer step (Nesterov) / AdamW step  # identical on every worker
        on any error: drop the round, form_group(g + 1)

What to do next (train, drop the round, re-form, hold for a rejoin, record, finish) is decided by the
pure state machine in round_machine.py; this class carries its actions out on the real group (the
store, the process group, the link) and reports back what happened. Membership (generations,
barriers, heartbeats) is membership.py; the frame and the state bundle are
wire.py; the outer step (aggregation rule + outer optimizer) is outer.OuterStep; checkpoints are
checkpoint.py; summary.json is summary.py. A new group is formed on the store the supervisor hosts;
the member with the newest round then sends the global weights, outer optimizer state, inner AdamW
state and round to everyone as an authenticated bundle (never pickle), and every member behind it
(however it was started) resets its local model from them (_sync_state).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import zlib
from pathlib import Path
from typing import Any, cast

import torch
import torch.distributed as dist

from dispersal.testbed.codecs import CRC_BYTES, make_codec
from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.data import open_datasets
from dispersal.testbed.device import ComputeClock, comm_device, process_group_backend, resolve_device
from dispersal.testbed.events import log_event, repair_jsonl
from dispersal.testbed.faults import FaultPlan
from dispersal.testbed.gpt import GPT, GPTConfig, configure_adamw, lr_at
from dispersal.testbed.groupstate import GroupState
from dispersal.testbed.iface import TransportError
from dispersal.testbed.link import link_for, relay_finish_s, sync_rng
from dispersal.testbed.membership import Heartbeat, Membership, claim_incarnation, connect_store
from dispersal.testbed.outer import (
    NesterovOuter,
    OuterStep,
    combine_frames,
    flat_grads,
    flat_params,
    fragment_indices,
    make_rule,
    set_flat_grads,
    set_flat_params,
)
from dispersal.testbed.round_machine import (
    Action,
    Announce,
    Back,
    Begin,
    Drop,
    Event,
    Finish,
    Form,
    Hold,
    Joined,
    Progress,
    Quit,
    Record,
    Rejoin,
    RoundMachine,
    Synced,
    Train,
    Waited,
    WaitForStep,
    seen_generation,
)
from dispersal.testbed.rounds import RoundTools
from dispersal.testbed.secure import SecretError, load_secret, pin_transport
from dispersal.testbed.wire import (
    H_ARRIVAL,
    H_CLOCK,
    H_COMPUTE,
    H_EXPOSED,
    H_GEN,
    H_LOSS,
    H_RECV,
    H_SENT,
    HEADER_BYTES,
    TAGS_BYTES,
    frame_context,
)


class Worker(GroupState, RoundTools):
    def __init__(
        self,
        cfg: TestbedConfig,
        worker: str,
        host: str,
        port: int,
        out: Path,
        incarnation: int,
        secret: bytes,
    ) -> None:
        self.cfg, self.wid, self.out, self.secret = cfg, worker, out, secret
        self.index = int(worker[1:])
        self.plan = FaultPlan.parse(cfg.faults)
        transport = pin_transport(host)  # before any process group: gloo reads it at creation
        self.store = connect_store(host, port, secret, out, worker)
        # Every process start takes the next incarnation from the store, so a process restarted with
        # an unchanged argv (torchrun --max-restarts, systemd, Kubernetes) is still a new one; the
        # ``incarnation`` argument is only a label for logs.
        self.incarnation = claim_incarnation(self.store, worker)
        self.ms = Membership(self.store, worker, self.incarnation, out, cfg.run_timeout_s)
        print(transport.line(worker, f"{host}:{port}"), file=sys.stderr, flush=True)
        out.mkdir(parents=True, exist_ok=True)  # on a host of its own, --out may not exist yet
        log_event(out, worker=worker, event="transport", ifname=transport.ifname, address=transport.address)
        self.heartbeat = Heartbeat(
            connect_store(host, port, secret, out, worker, 30.0),
            worker,
            self.incarnation,
            generation=lambda: self.ms.gen,
        )
        torch.manual_seed(cfg.seed)  # same initial weights everywhere (rank 0 broadcasts them anyway)
        self.device = resolve_device(cfg.device, self.index)
        self.comm_device = comm_device(self.device, cfg.comm_backend)
        self.clock = ComputeClock(self.device, cfg.realtime)
        self.model = GPT(GPTConfig(**cfg.gpt_kwargs()), precision=cfg.precision).to(self.device)
        self.params = list(self.model.parameters())  # walked every step: cache the list once
        self.opt = configure_adamw(self.model, cfg.inner_lr, cfg.weight_decay)
        self.global_flat = flat_params(self.params)
        self.numel = self.global_flat.numel()
        self.outer = NesterovOuter(self.numel, cfg.outer_lr, cfg.outer_momentum)
        self.outer_step = OuterStep(make_rule(cfg.aggregator), self.outer)
        self.frags = fragment_indices(self.model, cfg.fragments) if cfg.algorithm == "streaming" else None
        self.codecs = self._fresh_codecs()
        self.link = link_for(cfg, worker, self.store, out, secret)  # virtual clock, or the relay
        self.train, self.val = open_datasets(cfg, out / "data", self.device)
        self.machine = RoundMachine(
            rounds=cfg.rounds,
            round_steps=cfg.round_steps,
            stop_after_rounds=cfg.stop_after_rounds,
            checkpoint_every=cfg.checkpoint_every,
            incarnation=self.incarnation,
            rejoins=[Rejoin(worker=f.worker, step=f.step) for f in self.plan.of("rejoin")],
        )
        self.tokens = 0
        self.stats: dict[str, dict[str, float]] = {}
        self.verdicts: dict[str, dict[str, int]] = {"rejected": {}, "clipped": {}}
        self.pending: dict[str, Any] | None = None  # streaming: a fragment merge waiting for tau steps
        self.rejected_total = 0
        self.diverged = ""
        self.last_infos: list[dict[str, Any]] = []
        self.peer_updates: list[torch.Tensor] = []
        self.setup_faults()
        self.train_wall_s = 0.0  # inner steps + syncs, without validation and checkpoint writes
        self._excluded_s = 0.0
        self._t_loop = 0.0

    def _fresh_codecs(self) -> list[Any]:
        cfg = self.cfg
        n = cfg.fragments if self.frags is not None else 1  # error feedback is per fragment
        return [make_codec(cfg.codec, block=cfg.block, topk_fraction=cfg.topk_fraction) for _ in range(n)]

    # ------------------------------------------------------------------ membership
    def form_group(self, min_gen: int, mode: str) -> bool:
        """Join the newest generation >= min_gen that lists this worker (membership.form_group)."""
        return bool(
            self.ms.form_group(
                min_gen,
                mode,
                backend=process_group_backend(self.device, self.cfg.comm_backend),
                collective_timeout_s=self.cfg.collective_timeout_s,
                sync_state=self._sync_state,
                joined=self._joined_fields,
            )
        )

    # ------------------------------------------------------------------ compute
    def _now(self) -> float:
        """Compute clock: this thread's CPU time on the virtual clock (so workers sharing cores do not
        charge each other's time slices), wall time with --realtime."""
        return self.clock.now()  # CUDA events on a GPU (device.ComputeClock)

    def _inner_step(self, step: int) -> torch.Tensor:
        """One forward/backward (+ AdamW step unless ddp); returns the (detached) loss. Compute is charged."""
        t0 = self._now()
        x, y = self.train.batch(self.cfg.seed, self.index, step)
        _, loss = self.model(x, y)
        loss.backward()
        if self.cfg.algorithm != "ddp":
            self._adamw_step(step)
        self._charge_compute(self._now() - t0, step)
        return cast(torch.Tensor, loss.detach())  # nn.Module.__call__ is typed Any

    def _adamw_step(self, step: int) -> None:
        lr = lr_at(step, self.cfg.steps, self.cfg.inner_lr, self.cfg.warmup_steps)
        for group in self.opt.param_groups:
            group["lr"] = lr
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def _merge_pending(self) -> None:
        """Streaming DiLoCo merge: local = alpha * local + (1 - alpha) * global on the synced fragment."""
        assert self.pending is not None
        idx, a = self.pending["index"], self.cfg.mixing_alpha
        c = self.link.counters
        wait = max(0.0, self.pending["done_s"] - c.clock_s)  # what the overlap did not hide
        self.link.wait(wait)
        c.comm_exposed_s += wait
        c.clock_s += wait
        local = flat_params(self.params)
        local[idx] = a * local[idx] + (1 - a) * self.global_flat[idx]
        set_flat_params(self.params, local)
        self.pending = None

    @torch.no_grad()
    def _score(self, update: torch.Tensor, index: torch.Tensor | None) -> float:
        """Loss improvement of taking one peer's update alone (global - update) on a held-out training
        batch (worker index 10**6: windows no worker trains on at that step): the Gauntlet's score."""
        local = flat_params(self.params)
        base = self._global_vector()
        trial = base.clone()
        if index is None:
            trial -= update
        else:
            trial[index] -= update
        x, y = self.train.batch(self.cfg.seed, 10**6, self.round)
        losses = []
        for vec in (base, trial):
            set_flat_params(self.params, vec)
            losses.append(float(self.model(x, y)[1].item()))
        set_flat_params(self.params, local)
        return losses[0] - losses[1]

    # ------------------------------------------------------------------ sync
    def _update_vector(self) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """What this round sends: gradient (ddp), pseudo-gradient of all params (diloco) or one fragment."""
        if self.cfg.algorithm == "ddp":
            return flat_grads(self.params), None, 0
        delta = self.global_flat - flat_params(self.params)  # pseudo-gradient, DiLoCo Alg. 1
        if self.frags is None:
            return delta, None, 0
        p = self.round % self.cfg.fragments
        return delta[self.frags[p]], self.frags[p], p

    def _context(self, part: int) -> Any:
        gen, r = self.gen, self.round
        return lambda sender: frame_context(gen, r, part, sender)

    def _frame(self, update: torch.Tensor, codec_index: int, first_step: int, loss: float) -> torch.Tensor:
        payload = self.codecs[codec_index].encode(update)
        crc = zlib.crc32(payload.numpy())
        damaged = self.plan.corrupts(self.wid, first_step, first_step + self.cfg.round_steps - 1)
        c = self.link.counters
        rng = sync_rng(self.cfg.seed, self.wid, self.round)
        arrival = c.clock_s + self.link.upload_s(payload.numel() + CRC_BYTES, rng)
        self._rng = rng
        frame = self.seal(payload, crc, arrival, loss, codec_index)
        if damaged:  # damage on the wire, after the checksum and the tag
            frame[HEADER_BYTES : HEADER_BYTES + min(16, payload.numel())] ^= 0x5A
            log_event(self.out, worker=self.wid, event="corrupted_payload", round=self.round)
        return frame

    def _exchange(self, frame: torch.Tensor) -> list[torch.Tensor] | None:
        """Barrier then all_gather; None on any error (the round is dropped)."""
        if len(self.members) == 1:
            return [frame]
        try:
            if not self.ms.barrier(f"bar/{self.gen}/{self.round}", self.members):
                raise RuntimeError("a member of the group is gone")
            if self.kill_sync_steps:
                due = self._kill_due(self.kill_sync_steps, self.round * self.cfg.round_steps)
                if due is not None:  # fault plan: die while the peers are inside all_gather
                    self._await_kill(due, "allgather")
            wire = frame.to(self.comm_device)  # no copy with gloo; the GPU with NCCL
            frames = [torch.empty_like(wire) for _ in self.members]
            dist.all_gather(frames, wire)
            return [f.cpu() for f in frames]
        except Exception as exc:
            log_event(
                self.out,
                worker=self.wid,
                event="sync_failed",
                round=self.round,
                generation=self.gen,
                error=str(exc)[:200],
            )
            return None

    def _aggregate_here(
        self, frame: torch.Tensor, update: torch.Tensor, ci: int, index: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, list[dict[str, Any]], int, float] | None:
        """Virtual-clock mode: exchange the frames, check and aggregate them here, re-encode the
        aggregate as the relay's download would carry it."""
        frames = self._exchange(frame)
        if frames is None:
            return None
        self.peer_updates = []  # what a "copy" attacker replays next round (rounds.RoundTools.attack)
        codec = self.codecs[ci]
        score = (lambda u: self._score(u, index)) if self.outer_step.rule.name == "gauntlet" else None
        agg, infos = combine_frames(
            list(zip(self.members, frames, strict=True)),
            secret=self.secret,
            context=self._context(ci),
            codec=codec,
            numel=update.numel(),
            payload_bytes=codec.nbytes(update.numel()),
            outer=self.outer_step,
            score=score,
            own=self.wid,
            keep=self.peer_updates,
        )
        if agg is None:
            down_bytes = CRC_BYTES
        elif codec.name == "none":  # fp32 round-trips exactly: only the size matters
            down_bytes = codec.nbytes(update.numel()) + CRC_BYTES
        else:
            down = codec.encode_average(agg)
            down_bytes = down.numel() + CRC_BYTES
            agg = codec.decode(down, update.numel())  # what the relay's download carries
        return agg, infos, down_bytes, self.link.download_s(down_bytes, self._rng)

    def _sync(self, first_step: int, loss: float) -> tuple[bool, int]:
        """One sync. Returns (ok, highest generation any member has seen published)."""
        update, index, ci = self._update_vector()
        update = self.attack(update, first_step)
        frame = self._frame(update, ci, first_step, loss)
        up_bytes = frame.numel() - HEADER_BYTES - TAGS_BYTES + CRC_BYTES
        if getattr(self.link, "relay", False):  # real-link mode: the relay aggregates (netlink.py)
            got = self.exchange_relay(frame, update.numel(), ci)
        else:
            got = self._aggregate_here(frame, update, ci, index)
        if got is None:
            return False, self.gen
        agg, infos, down_bytes, link_s = got
        self.note_verdicts(infos)
        c = self.link.counters
        # Real-link mode: arrivals are the members' clocks (upload_s = 0) and link_s the measured sync.
        done = relay_finish_s([i["header"][H_ARRIVAL] for i in infos], link_s)
        c.bytes_sent += up_bytes
        c.bytes_received += down_bytes
        c.messages += 1
        if self.cfg.algorithm == "ddp":
            if agg is not None:
                set_flat_grads(self.params, agg)
                t0 = self._now()
                self._adamw_step(first_step)
                self._charge_compute(self._now() - t0, first_step)
            self.opt.zero_grad(set_to_none=True)
        elif agg is not None:
            self.outer_step.apply(self.global_flat, agg, index)
        if self.frags is not None:
            self.pending = {"index": index, "done_s": done}
            if self.cfg.overlap_steps == 0:
                self._merge_pending()
        else:
            wait = max(0.0, done - c.clock_s)
            self.link.wait(wait)
            c.comm_exposed_s += wait
            c.clock_s = max(c.clock_s, done)
            if self.cfg.algorithm == "diloco":
                set_flat_params(self.params, self.global_flat)
        self._record(infos, up_bytes, down_bytes)
        claims = [(int(i["header"][H_GEN]), bool(i["trusted"])) for i in infos]
        return True, seen_generation(self.gen, claims, self.ms.published_gen)

    def _record(self, infos: list[dict[str, Any]], up_bytes: int, down_bytes: int) -> None:
        self.tokens += len(infos) * self.cfg.round_steps * self.cfg.batch_size * self.cfg.block_size
        self.last_infos = infos
        for i in infos:
            if not i["trusted"]:
                continue  # its counters cannot be believed: keep the last good ones
            h = i["header"]
            self.stats[i["worker"]] = {
                "bytes_sent": h[H_SENT] + up_bytes,
                "bytes_received": h[H_RECV] + down_bytes,
                "compute_s": h[H_COMPUTE],
                "exposed_s": h[H_EXPOSED],
                "clock_s": h[H_CLOCK],
            }
        self.check_divergence([i["header"][H_LOSS] for i in infos if i["trusted"]])

    # ------------------------------------------------------------------ metrics
    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean loss of the global weights on fixed validation batches (same for every run and seed)."""
        t0 = time.perf_counter()
        try:
            local = flat_params(self.params)
            set_flat_params(self.params, self._global_vector())
            losses = []
            for i in range(self.cfg.eval_batches):
                x, y = self.val.batch(12345, 0, i)
                losses.append(float(self.model(x, y)[1].item()))
            set_flat_params(self.params, local)
            return sum(losses) / len(losses)
        finally:
            self._excluded_s += time.perf_counter() - t0

    # ------------------------------------------------------------------ the loop (round_machine.py decides)
    @property
    def round(self) -> int:
        """Rounds completed: the machine's count (state transfer and resume set it here too)."""
        return self.machine.round

    @round.setter
    def round(self, value: int) -> None:
        self.machine.round = value

    def run(self, resume: bool, join_at_step: int = 0) -> None:
        """Carry out what the round machine says until it says Finish or Quit."""
        self.heartbeat.start()
        if resume:
            self._resume()
        action = self.machine.start(resumed=resume, join_at_step=join_at_step)
        while not isinstance(action, Quit):
            event = self.carry_out(action)
            if isinstance(action, Finish):
                return
            action = self.machine.on(event)

    def carry_out(self, action: Action) -> Event:
        """One action of the round machine on the real group; returns what happened."""
        k = self.cfg.round_steps
        match action:
            case WaitForStep(step=step):
                return Waited(ok=self.ms.wait_until_step(step, self.cfg.worker_ids))
            case Announce(rejoining=rejoining):
                if rejoining:
                    log_event(self.out, worker=self.wid, event="join_requested", incarnation=self.incarnation)
                self.store.set(f"joinreq/{self.wid}", str(self.incarnation))
            case Form(min_gen=g, mode=mode, held=held):
                t0 = time.perf_counter()
                ok = self.form_group(min_gen=g, mode=mode)
                if held:
                    self._excluded_s += time.perf_counter() - t0
                return Joined(
                    ok=ok, gen=self.gen, members=tuple(self.members), rank=self.rank, round=self.round
                )
            case Begin(truncate_metrics=truncate):
                if truncate:
                    _truncate_metrics(self.out / "metrics.jsonl", self.round, self.out, self.wid)
                self._t_loop = time.perf_counter()
            case Hold(worker=who, step=step):
                self.ms.set_progress(step, force=True)  # the standby joiner waits for this step
                t_hold = time.perf_counter()
                g = self.ms.await_member(who, self.cfg.rejoin_timeout_s)
                self._excluded_s += time.perf_counter() - t_hold
                return Back(gen=g)
            case Train(first_step=first):
                loss_sum = torch.zeros(())
                for s in range(k):
                    self._maybe_get_killed(first + s)
                    if self.pending is not None and s == self.cfg.overlap_steps:
                        self._merge_pending()
                    loss_sum += self._inner_step(first + s)
                ok, seen_gen = self._sync(first, loss_sum.item() / k)
                return Synced(ok=ok, seen_gen=seen_gen, diverged=bool(self.diverged))
            case Progress(step=step, force=force):
                self.ms.set_progress(step, force=force)
            case Drop():
                # Back to the global weights; the machine then re-forms the group without the failed peer.
                if self.cfg.algorithm != "ddp":
                    set_flat_params(self.params, self.global_flat)
                self.opt.zero_grad(set_to_none=True)
                self.pending = None
                self.store.set(f"failed/{self.gen}/{self.wid}", "1")
            case Record(round=r, final=final, log=log, checkpoint=ckpt):
                if log:
                    self.log_round(r, final)
                if ckpt:
                    t_ck = time.perf_counter()
                    self._checkpoint()
                    self._excluded_s += time.perf_counter() - t_ck
            case Finish(completed=completed):
                self.train_wall_s = time.perf_counter() - self._t_loop - self._excluded_s
                self.finish(completed=completed)
        return None


def _truncate_metrics(path: Path, rounds_done: int, out: Path | None = None, who: str = "w0") -> None:
    """On --resume: keep the metrics rows of the rounds the checkpoint holds; a torn last line (the
    previous run died mid-write) or a line that is not a JSON row is dropped and recorded as a
    ``torn_log_line`` event, never a crash."""
    got = repair_jsonl(
        path, keep=lambda row: isinstance(row.get("round"), int) and row["round"] < rounds_done
    )
    if out is not None and (got["torn_bytes"] or got["malformed_lines"]):
        log_event(out, worker=who, event="torn_log_line", path=str(path), **got)


def main(argv: list[str] | None = None) -> None:
    """``python -m dispersal.testbed.worker --config CFG.json --worker w0 --store HOST:PORT --out DIR``.

    The run secret comes from ``DISPERSAL_RUN_SECRET`` or ``DISPERSAL_RUN_SECRET_FILE`` (secure.py)."""
    ap = argparse.ArgumentParser(prog="dispersal.testbed.worker")
    ap.add_argument("--config", required=True)
    ap.add_argument("--worker", default=None, help="worker id wN; default w$RANK (torchrun)")
    ap.add_argument("--store", required=True, help="HOST:PORT of the coordinator's TCPStore")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--incarnation",
        type=int,
        default=0,
        help="ignored (kept for old command lines): each process start takes its incarnation from the store",
    )
    ap.add_argument("--resume", action="store_true")
    ap.add_argument(
        "--join-at-step", type=int, default=0, help="standby: join once the group reaches this step"
    )
    args = ap.parse_args(argv)
    try:
        secret = load_secret()
    except SecretError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    torch.set_num_threads(1)  # several workers share few cores; more threads thrash (spec/testbed.md)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cfg = TestbedConfig.from_dict(json.loads(Path(args.config).read_text()))
    wid = args.worker or f"w{os.environ.get('RANK', '0')}"
    host, port = args.store.rsplit(":", 1)
    try:
        w = Worker(cfg, wid, host, int(port), Path(args.out), args.incarnation, secret)
    except TransportError as exc:  # no interface the peers could reach: say what to set, no retry loop
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        w.run(args.resume, args.join_at_step)
    finally:
        # The heartbeat thread must not be inside a store call while the interpreter tears torch
        # down (seen: "terminate called without an active exception", SIGABRT after a clean finish).
        w.heartbeat.stop()
        if w.heartbeat.is_alive():
            w.heartbeat.join(2.0)


if __name__ == "__main__":
    main()
