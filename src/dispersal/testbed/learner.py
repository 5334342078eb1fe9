"""One Decoupled DiLoCo learner process: inner steps on its own clock, never waiting for another learner.

Read top to bottom, one round at a time::

    pull the newest global state from the syncer (a restarted learner: the current one, not its own)
    for each round r:
        H inner AdamW steps from start_r (the weights this round began with)
        update = start_r - local                  # this round's pseudo-gradient (DiLoCo Alg. 1)
        push(frame(update), base = the global version start_r was mixed from)
        the syncer replies at once (it never waits for other learners) with the newest global state;
        if it is newer: local = alpha local + (1 - alpha) global   (mix below, Streaming DiLoCo's
        merge), start_{r+1} = local

So an update is exactly the displacement of one round's H inner steps, whichever global state the
learner mixed in; with alpha = 0 and a syncer that merges everyone every round it is DiLoCo's
``global - local``. The model, inner optimizer, data, compute clock, link counters, fault and attack
hooks are worker.Worker's (this class only replaces its round loop); there is no process group.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
import zlib
from pathlib import Path
from typing import NoReturn

import torch

from dispersal.testbed.codecs import CRC_BYTES
from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.decoupled_wire import SyncClient
from dispersal.testbed.events import log_event
from dispersal.testbed.link import sync_rng
from dispersal.testbed.outer import flat_params, set_flat_params
from dispersal.testbed.secure import SecretError, load_secret
from dispersal.testbed.syncer import update_context
from dispersal.testbed.wire import (
    H_CLOCK,
    H_COMPUTE,
    H_CRC,
    H_EXPOSED,
    H_GEN,
    H_INDEX,
    H_LOSS,
    H_RECV,
    H_SENT,
    HEADER_BYTES,
    HEADER_LEN,
    seal_frame,
)
from dispersal.testbed.worker import Worker


def mix(local: torch.Tensor, global_flat: torch.Tensor, alpha: float) -> torch.Tensor:
    """A learner picks up a newer global state at the end of a round: ``alpha local + (1 - alpha)
    global``, Streaming DiLoCo's merge (Douillard et al. 2025, arXiv 2501.18512, sec. 2.3), on which
    Decoupled DiLoCo builds (arXiv 2604.21428). alpha = 0 adopts the global state outright."""
    return alpha * local + (1.0 - alpha) * global_flat


class Learner(Worker):
    """worker.Worker's model, data and hooks with the decoupled round loop (module docstring)."""

    version = 0

    def _connect(self) -> SyncClient:
        address = self.store.get_str("syncer")
        if address is None:
            raise RuntimeError("decoupled: no syncer address in the store")
        host, port = address.rsplit(":", 1)
        return SyncClient(
            host,
            int(port),
            worker=self.wid,
            incarnation=self.incarnation,
            secret=self.secret,
            numel=self.numel,
            timeout_s=self.cfg.collective_timeout_s,
        )

    def _take(self, state: tuple[int, torch.Tensor] | None, alpha: float) -> None:
        """Adopt a newer global state (mixed with weight ``alpha`` on the local weights)."""
        if state is None:
            return
        version, theta = state
        set_flat_params(self.params, mix(flat_params(self.params), theta, alpha))
        self.version = version
        c = self.link.counters
        down = 4 * self.numel + CRC_BYTES  # the fp32 global weights, as the relay's download would be
        link_s = self.link.download_s(down, sync_rng(self.cfg.seed, self.wid, self.round))
        c.bytes_received += down
        self._charge_link(link_s)

    def _charge_link(self, seconds: float) -> None:
        """A learner waits only for its own transfer (no other learner): that time is exposed."""
        c = self.link.counters
        self.link.wait(seconds)
        c.comm_exposed_s += seconds
        c.clock_s += seconds

    def _update_frame(self, update: torch.Tensor, seq: int, loss: float, first_step: int) -> bytes:
        payload = self.codecs[0].encode(update)
        c = self.link.counters
        h = torch.zeros(HEADER_LEN, dtype=torch.float64)
        h[H_CRC], h[H_GEN], h[H_LOSS] = zlib.crc32(payload.numpy()), self.version, loss
        h[H_COMPUTE], h[H_EXPOSED], h[H_CLOCK] = c.compute_s, c.comm_exposed_s, c.clock_s
        h[H_SENT], h[H_RECV], h[H_INDEX] = c.bytes_sent, c.bytes_received, self.index
        ctx = update_context(self.wid, self.incarnation, seq, self.version)
        frame = seal_frame(h, payload, self.secret, ctx)
        if self.plan.corrupts(self.wid, first_step, first_step + self.cfg.inner_steps - 1):
            frame[HEADER_BYTES : HEADER_BYTES + min(16, payload.numel())] ^= 0x5A  # damaged on the wire
            log_event(self.out, worker=self.wid, event="corrupted_payload", round=self.round)
        return bytes(frame.numpy().tobytes())

    def run(self, resume: bool, join_at_step: int = 0) -> None:
        """The decoupled round loop (module docstring); a restart begins, from the syncer's current
        state, at the first round boundary at or after ``join_at_step`` and the others' progress."""
        self.heartbeat.start()
        k = self.cfg.inner_steps
        first_round = others_step = 0
        if join_at_step:
            # A standby replacement: once the others are at the planned step, it begins where they are
            # now (its island's steps while it was dead are lost, as a synchronous group's round is).
            if not self.ms.wait_until_step(join_at_step, self.cfg.worker_ids):
                return
            others = [self.store.get_int(f"progress/{w}") for w in self.cfg.worker_ids if w != self.wid]
            others_step = max([p for p in others if p is not None], default=0)
            first_round = math.ceil(max(join_at_step, others_step) / k)
        try:
            client = self._connect()
            self._take(client.pull(-1), alpha=0.0)  # start (or rejoin) from the current global state
        except (OSError, ValueError, RuntimeError) as exc:  # ProtocolError is an OSError
            self._give_up(exc)
        if self.incarnation == 0:
            self._start_together()
        log_event(
            self.out,
            worker=self.wid,
            event="learner_started",
            incarnation=self.incarnation,
            round=first_round,
            version=self.version,
            others_step=others_step,
        )
        done = {"rounds": 0, "refused": 0}
        t_loop = time.perf_counter()
        for r in range(first_round, self.cfg.rounds):
            self.round, first = r, r * k
            start = flat_params(self.params)
            loss_sum = torch.zeros(())
            for s in range(k):
                self._maybe_get_killed(first + s)
                loss_sum += self._inner_step(first + s)
            loss = loss_sum.item() / k
            update = self.attack(start - flat_params(self.params), first)
            frame = self._update_frame(update, client.seq, loss, first)
            c = self.link.counters
            up = len(frame) - HEADER_BYTES - 64 + CRC_BYTES  # payload + CRC; the tags are not charged
            self._charge_link(self.link.upload_s(up, sync_rng(self.cfg.seed, self.wid, r)))
            c.bytes_sent += up
            c.messages += 1
            base = self.version
            try:
                why, _newest, state = client.push(frame, base=base, have=self.version)
            except (OSError, ValueError) as exc:
                self._give_up(exc)
            done["refused"] += bool(why)
            self._take(state, alpha=self.cfg.mixing_alpha)
            self.tokens += k * self.cfg.batch_size * self.cfg.block_size
            done["rounds"] += 1
            log_event(
                self.out,
                worker=self.wid,
                event="round_done",
                round=r,
                step=first + k,
                loss=loss,
                base=base,
                version=self.version,
                refused=why,
            )
            self.ms.set_progress(first + k, force=r == self.cfg.rounds - 1)
            self._report(done, final=False)  # a learner killed later still has its work counted
        self.train_wall_s = time.perf_counter() - t_loop
        client.close()
        self._report(done)

    def _give_up(self, exc: BaseException) -> NoReturn:
        """The syncer is gone or sent something that fails its checks: this island stops (exit 3),
        logged; nothing it received touched the model."""
        log_event(
            self.out, worker=self.wid, event="syncer_unreachable", round=self.round, error=str(exc)[:200]
        )
        sys.exit(3)

    def _start_together(self) -> None:
        """First processes wait (once, at most rejoin_timeout_s) until every learner has loaded: process
        start-up differs by seconds here, and a learner alone at the start would merge with nobody
        (synchronous DiLoCo's first generation waits for everyone likewise). After that no learner
        ever waits for another."""
        self.store.set(f"ready/{self.wid}", "1")
        keys = [f"ready/{w}" for w in self.cfg.worker_ids]
        if not self.store.wait_valid(keys, self.cfg.rejoin_timeout_s):
            log_event(self.out, worker=self.wid, event="start_alone", waited_s=self.cfg.rejoin_timeout_s)

    def _report(self, done: dict[str, int], final: bool = True) -> None:
        """This learner's counters for the supervisor's summary (signed store values, JSON): after
        every round under ``learner_row/<w>/<incarnation>`` (so the summary can add up every
        incarnation, a killed one included), and at the end under ``learner_done/<w>`` too."""
        c = self.link.counters
        row = {
            "incarnation": self.incarnation,
            "rounds": done["rounds"],
            "refused": done["refused"],
            "tokens": self.tokens,
            "bytes_sent": c.bytes_sent,
            "bytes_received": c.bytes_received,
            "compute_s": c.compute_s,
            "exposed_s": c.comm_exposed_s,
            "clock_s": c.clock_s,
            "train_wall_s": self.train_wall_s,
        }
        self.store.set(f"learner_row/{self.wid}/{self.incarnation}", json.dumps(row))
        if final:
            self.store.set(f"learner_done/{self.wid}", json.dumps(row))
            log_event(self.out, worker=self.wid, event="learner_done", **row)


def main(argv: list[str] | None = None) -> None:
    """``python -m dispersal.testbed.learner --config CFG.json --worker w0 --store HOST:PORT --out DIR``
    (the run secret from DISPERSAL_RUN_SECRET / DISPERSAL_RUN_SECRET_FILE, as worker.main)."""
    ap = argparse.ArgumentParser(prog="dispersal.testbed.learner")
    ap.add_argument("--config", required=True)
    ap.add_argument("--worker", default=None, help="learner id wN; default w$RANK (torchrun)")
    ap.add_argument("--store", required=True, help="HOST:PORT of the supervisor's TCPStore")
    ap.add_argument("--out", required=True)
    ap.add_argument("--incarnation", type=int, default=0, help="a label only (worker.main)")
    ap.add_argument("--resume", action="store_true", help="refused: decoupled has no checkpoints yet")
    ap.add_argument("--join-at-step", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        secret = load_secret()
    except SecretError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    torch.set_num_threads(1)  # several learners share few cores (spec/testbed.md)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cfg = TestbedConfig.from_dict(json.loads(Path(args.config).read_text()))
    host, port = args.store.rsplit(":", 1)
    wid = args.worker or f"w{os.environ.get('RANK', '0')}"
    learner = Learner(cfg, wid, host, int(port), Path(args.out), args.incarnation, secret)
    try:
        learner.run(False, args.join_at_step)
    finally:
        # The heartbeat thread must not be inside a store call while the interpreter tears torch
        # down (seen: "terminate called without an active exception", SIGABRT after a clean finish).
        learner.heartbeat.stop()
        if learner.heartbeat.is_alive():
            learner.heartbeat.join(2.0)


if __name__ == "__main__":
    main()
