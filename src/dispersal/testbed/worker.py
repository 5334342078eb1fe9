"""One worker process: inner steps on its own data, syncs through the emulated link, survives faults.

Read top to bottom, one round at a time (a round = the inner steps between two syncs)::

    form_group()                            # join generation g of the process group, get state
    for each round r:
        inner steps                         # AdamW; ddp: one forward/backward, step after the sync
        frame = header + codec(update)      # pseudo-gradient (diloco, streaming) or gradient (ddp)
        barrier; all_gather(frame)          # every worker plays the relay: same frames, same order
        reject frames failing CRC32 or with non-finite values; average the rest
        outer step (Nesterov) / AdamW step  # identical on every worker
        on any error: drop the round, form_group(g + 1)

Membership lives in a TCPStore that outlives the workers (see supervisor.Coordinator): a
generation counter ``gen``, ``members/<g>`` and ``incarnations/<g>``. A new group is
``init_process_group(store=PrefixStore(f"gen{g}", store))``; the member with the newest round then
broadcasts the global weights, outer optimizer state, inner AdamW state and round to everyone, and
every member behind it (however it was started) resets its local model from them (_sync_state).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import zlib
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import torch

# torch.distributed imports TCPStore and PrefixStore from torch._C._distributed_c10d without re-exporting
# them (no ``as`` alias, no __all__), so mypy takes them for private although they are documented public
# API; their uses below carry ``# type: ignore[attr-defined]``.
import torch.distributed as dist

from dispersal.testbed import checkpoint
from dispersal.testbed.codecs import CRC_BYTES, make_codec
from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.data import open_datasets
from dispersal.testbed.device import ComputeClock, comm_device, process_group_backend, resolve_device
from dispersal.testbed.faults import FaultPlan
from dispersal.testbed.gpt import GPT, GPTConfig, configure_adamw, lr_at
from dispersal.testbed.link import link_for, relay_finish_s, sync_rng
from dispersal.testbed.outer import (
    NesterovOuter,
    flat_grads,
    flat_params,
    fragment_indices,
    set_flat_grads,
    set_flat_params,
)

# Header fields (float64) sent with every frame; emulation metadata, not charged to the link
# except the CRC32 (CRC_BYTES), which a real system would send too.
H_CRC, H_GEN, H_ARRIVAL, H_LOSS, H_COMPUTE, H_EXPOSED, H_CLOCK, H_SENT, H_RECV, H_INDEX = range(10)
HEADER_LEN = 10
HEADER_BYTES = 8 * HEADER_LEN
MAX_REFORMS = 50


def check_payload(payload: torch.Tensor, crc: int, codec: Any, numel: int) -> tuple[torch.Tensor | None, str]:
    """Decode a received payload, or say why it is left out: CRC32 mismatch, undecodable, non-finite."""
    # numpy declares ndarray.__buffer__ (PEP 688) only for Python >= 3.12, so mypy at 3.11 rejects an
    # ndarray as a buffer; it has the buffer protocol on every version.
    if zlib.crc32(payload.numpy()) != crc:  # type: ignore[arg-type]
        return None, "checksum"
    try:
        v = codec.decode(payload, numel)
    except (ValueError, RuntimeError) as exc:
        return None, f"undecodable: {exc}"
    # If the sum is finite, every value is (a NaN or an unmatched inf would make it non-finite);
    # only when it is not (or on overflow) look at every value.
    if not torch.isfinite(v.sum()) and not torch.isfinite(v).all():
        return None, "non-finite"
    return v, ""


def log_event(out: Path, **fields: Any) -> None:
    """Append one JSON line to events.jsonl (small O_APPEND writes from several processes)."""
    line = json.dumps({"t": round(time.time(), 3), **fields}) + "\n"
    fd = os.open(out / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class Heartbeat(threading.Thread):
    """Writes hb/<worker> = time every 0.3 s on its own store connection (a frozen worker stops)."""

    def __init__(self, host: str, port: int, worker: str) -> None:
        super().__init__(daemon=True)
        self.store = dist.TCPStore(  # type: ignore[attr-defined]  # torch re-export
            host, port, is_master=False, timeout=timedelta(seconds=30)
        )
        self.worker = worker

    def run(self) -> None:
        while True:
            try:
                self.store.set(f"hb/{self.worker}", repr(time.time()))
            except Exception:
                return
            time.sleep(0.3)


class Worker:
    def __init__(
        self, cfg: TestbedConfig, worker: str, host: str, port: int, out: Path, incarnation: int
    ) -> None:
        self.cfg, self.wid, self.out, self.incarnation = cfg, worker, out, incarnation
        self.index = int(worker[1:])
        self.plan = FaultPlan.parse(cfg.faults)
        self.store = dist.TCPStore(  # type: ignore[attr-defined]  # torch re-export
            host, port, is_master=False, timeout=timedelta(seconds=60)
        )
        # Every process start takes the next incarnation from the store, so a process restarted with
        # an unchanged argv (torchrun --max-restarts, systemd, Kubernetes) is still a new one; the
        # ``incarnation`` argument is only a label for logs.
        self.incarnation = int(self.store.add(f"incarnation/{worker}", 1)) - 1
        self.heartbeat = Heartbeat(host, port, worker)
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
        self.frags = fragment_indices(self.model, cfg.fragments) if cfg.algorithm == "streaming" else None
        n_codecs = cfg.fragments if self.frags is not None else 1  # error feedback is per fragment
        self.codecs = [
            make_codec(cfg.codec, block=cfg.block, topk_fraction=cfg.topk_fraction) for _ in range(n_codecs)
        ]
        self.link = link_for(cfg, worker, self.store, out)  # virtual clock, or the relay (real sockets)
        self.train, self.val = open_datasets(cfg, out / "data", self.device)
        self.round = 0
        self.tokens = 0
        self.stats: dict[str, dict[str, float]] = {}
        self.pending: dict[str, Any] | None = None  # streaming: a fragment merge waiting for tau steps
        self.gen, self.members, self.rank = 0, [self.wid], 0
        self.rejected_total = 0
        self.kill_steps = set(self.plan.kill_steps(self.wid))
        self.kill_sync_steps = self.plan.kill_steps(self.wid, phase="allgather")
        self.kill_ckpt_steps = self.plan.kill_steps(self.wid, phase="checkpoint")
        self.pause_steps = self.plan.pauses(self.wid)
        self.straggles = bool(self.plan.of("straggle", self.wid))
        # Store round trips are rate-limited on the hot path (one per step would cost ~5 % with ddp).
        self._gen_seen, self._gen_polled = 0, -1e9
        self._progress_set = -1e9
        self.train_wall_s = 0.0  # inner steps + syncs, without validation and checkpoint writes
        self._excluded_s = 0.0

    # ------------------------------------------------------------------ membership
    def form_group(self, min_gen: int, mode: str) -> bool:
        """Join the newest generation >= min_gen that lists this worker; False when the run is over.

        ``mode``: "start" (first group), "grow" (after a good round, someone joins), "failure" (the
        round was dropped: local weights reset to global), "join" (a restarted worker heals).
        """
        for _ in range(MAX_REFORMS):
            found = self._wait_for_generation(min_gen)
            if found is None:
                return False
            g, members = found
            if not self._rendezvous(g, members):
                min_gen = g + 1
                continue
            if dist.is_initialized():
                dist.destroy_process_group()
            # torch names each new group by a per-process counter; members with different histories
            # would then rendezvous under different names. The PrefixStore already makes g unique.
            dist.distributed_c10d._world.group_count = 0
            try:
                dist.init_process_group(
                    process_group_backend(self.device, self.cfg.comm_backend),
                    store=dist.PrefixStore(f"gen{g}", self.store),  # type: ignore[attr-defined]
                    rank=members.index(self.wid),
                    world_size=len(members),
                    timeout=timedelta(seconds=self.cfg.collective_timeout_s),
                )
                self.gen, self.members, self.rank = g, members, members.index(self.wid)
                reset = self._sync_state(mode)
            except Exception as exc:
                log_event(
                    self.out, worker=self.wid, event="reform_failed", generation=g, error=str(exc)[:200]
                )
                self.store.set(f"failed/{g}/{self.wid}", "1")
                min_gen = g + 1
                mode = "join" if mode == "join" else "failure"
                continue
            local_crc, global_crc = self._join_check(reset)
            log_event(
                self.out,
                worker=self.wid,
                event="joined",
                generation=g,
                members=members,
                incarnation=self.incarnation,
                round=self.round,
                reset_local=reset,
                state_crc=self._state_crc(),
                global_crc=global_crc,
                local_crc=local_crc,
            )
            return True
        raise RuntimeError(f"{self.wid}: no stable group after {MAX_REFORMS} generations")

    def _global_vector(self) -> torch.Tensor:
        return self.global_flat if self.cfg.algorithm != "ddp" else flat_params(self.params)

    def _state_crc(self) -> int:
        """CRC32 of the global weights and the outer momentum: equal on every member after a (re)join."""
        return _crc32(self.outer.buf, _crc32(self._global_vector()))

    def _join_check(self, reset: bool) -> tuple[int, int]:
        """Hash this member's local weights against the global ones after a (re)join.

        At a round boundary DiLoCo's local weights are the global weights (and DDP has only one copy),
        and any member that was reset took them; only Streaming DiLoCo survivors legitimately differ
        (fragments merge tau steps late). A mismatch where they must be equal is the silent corruption
        of a stale local model: it is logged as ``join_check_failed`` and repaired from the global."""
        local_crc, global_crc = _crc32(flat_params(self.params)), _crc32(self._global_vector())
        if local_crc != global_crc and (reset or self.cfg.algorithm != "streaming"):
            log_event(
                self.out,
                worker=self.wid,
                event="join_check_failed",
                generation=self.gen,
                round=self.round,
                local_crc=local_crc,
                global_crc=global_crc,
            )
            set_flat_params(self.params, self._global_vector())
            local_crc = global_crc
        return local_crc, global_crc

    def _generation(self, g: int) -> tuple[list[str], dict[str, int]]:
        """Generation g's member list and each member's incarnation (both written before ``gen`` moves)."""
        members = json.loads(self.store.get(f"members/{g}"))
        key = f"incarnations/{g}"
        incs = json.loads(self.store.get(key)) if self.store.check([key]) else {}
        return members, {w: int(i) for w, i in incs.items()}

    def _wait_for_generation(self, min_gen: int) -> tuple[int, list[str]] | None:
        deadline = time.monotonic() + self.cfg.run_timeout_s
        while time.monotonic() < deadline:
            if self.store.check(["finished"]):
                return None
            g = self.store.add("gen", 0)
            if g >= min_gen:
                members, incs = self._generation(g)
                # A generation that lists this worker under another incarnation was formed for the
                # previous process (this one was restarted): it is not ours to enter.
                if self.wid in members and incs.get(self.wid, self.incarnation) == self.incarnation:
                    return g, members
                # Dropped from the group (e.g. declared dead) or listed as an older process: ask to join.
                self.store.set(f"joinreq/{self.wid}", str(self.incarnation))
                min_gen = g + 1
            time.sleep(0.01)
        raise TimeoutError(f"{self.wid}: no generation >= {min_gen} within run_timeout_s")

    def _membership_broken(self, gen: int, members: list[str]) -> bool:
        """A generation newer than ``gen`` that drops one of ``members``, or lists one of them as another
        incarnation (it was restarted), means that member's process is gone: stop waiting."""
        g = self.store.add("gen", 0)
        if g <= gen:
            return False
        newer, newer_incs = self._generation(g)
        if not set(members) <= set(newer):
            return True
        incs = self._generation(gen)[1]
        return any(w in incs and newer_incs.get(w, incs[w]) != incs[w] for w in members)

    def _barrier(self, key: str, members: list[str], gen: int | None = None) -> bool:
        """Store barrier of ``members`` (of generation ``gen``, default the current one): wait until every
        member arrived, giving up if a newer generation drops one of them (bounded by run_timeout_s)."""
        if len(members) == 1:
            return True
        gen = self.gen if gen is None else gen
        if self.store.add(key, 1) >= len(members):
            self.store.set(key + "/go", "1")
            return True
        deadline = time.monotonic() + self.cfg.run_timeout_s
        while time.monotonic() < deadline:
            try:
                self.store.wait([key + "/go"], timedelta(seconds=0.2))
                return True
            except Exception:
                if self._membership_broken(gen, members) or self.store.check(["finished"]):
                    return False
        return False

    def _rendezvous(self, g: int, members: list[str]) -> bool:
        # Judged against generation g's own member list: comparing with the old group (which still
        # lists the dead worker) would make a survivor leave the rendezvous its peers then wait for.
        return self._barrier(f"rdv/{g}", members, gen=g)

    def _transfer_state(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "tokens": self.tokens,
            "stats": self.stats,
            "global": self.global_flat if self.cfg.algorithm != "ddp" else flat_params(self.params),
            "outer": self.outer.state_dict(),
            "inner": self.opt.state_dict(),
        }

    def _sync_state(self, mode: str) -> bool:
        """The group's state goes to every member; returns whether this member's local state was reset.

        Decided by state, not by how the process was started: the members exchange their rounds, the
        first member with the newest round is the source (survivors come first, so normally rank 0),
        and it broadcasts round, global weights, outer momentum and its inner AdamW state. A member
        whose round differs (a restarted process, whatever its argv; a resume on a host without the
        checkpoint; a worker thawed after SIGSTOP) takes the local model, inner optimizer state and a
        fresh codec residual from it too. After a dropped round (``mode`` "failure") local weights go
        back to the global ones as well. Returns True when local weights were reset."""
        reset_local = mode == "failure"
        if len(self.members) == 1:
            return reset_local  # alone: the caller already put local weights back to the global ones
        rounds: list[Any] = [None] * len(self.members)
        dist.all_gather_object(rounds, self.round)
        src = rounds.index(max(rounds))
        obj: list[Any] = [self._transfer_state() if self.rank == src else None]
        dist.broadcast_object_list(obj, src=src)
        s = obj[0]
        behind = self.round != s["round"]
        self.round, self.tokens, self.stats = s["round"], s["tokens"], s["stats"]
        self.global_flat = s["global"].clone()
        self.outer.load_state_dict(s["outer"])
        if self.cfg.algorithm == "ddp" or reset_local or behind:
            set_flat_params(self.params, self.global_flat)
            self.pending = None
        if self.cfg.algorithm == "ddp" or behind:
            self.opt.load_state_dict(s["inner"])
        if behind:
            cfg = self.cfg
            self.codecs = [
                make_codec(cfg.codec, block=cfg.block, topk_fraction=cfg.topk_fraction) for _ in self.codecs
            ]
            state_bytes = 4 * (2 * self.numel) + sum(
                t.numel() * t.element_size() for st in s["inner"]["state"].values() for t in st.values()
            )
            self.link.counters.state_bytes += state_bytes
            mine = self.stats.get(self.wid)
            c = self.link.counters
            if mine and c.bytes_sent == 0:  # a rejoined worker continues its own byte counts
                c.bytes_sent, c.bytes_received = int(mine["bytes_sent"]), int(mine["bytes_received"])
                c.compute_s, c.comm_exposed_s = mine["compute_s"], mine["exposed_s"]
            c.clock_s = max([c.clock_s] + [v["clock_s"] for v in self.stats.values()])
        return reset_local or behind

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

    def _charge_compute(self, seconds: float, step: int) -> None:
        factor = self.plan.straggle_factor(self.wid, step) if self.straggles else 1.0
        if factor > 1 and self.cfg.realtime:
            time.sleep(seconds * (factor - 1))
        c = self.link.counters
        c.compute_s += seconds * factor
        c.clock_s += seconds * factor

    def _maybe_get_killed(self, step: int) -> None:
        """At a planned kill (or pause) step, tell the supervisor and wait for its SIGKILL (bounded)."""
        if self.incarnation != 0:
            return
        if step in self.kill_steps:
            self._await_kill(step, "step")
        if step in self.pause_steps:
            # The supervisor SIGSTOPs this process, SIGCONTs it after the pause, then sets resumed/<w>.
            pause_s = self.pause_steps.pop(step)
            log_event(self.out, worker=self.wid, event="awaiting_stop", step=step)
            self.store.set(f"stopme/{self.wid}", str(step))
            try:
                self.store.wait([f"resumed/{self.wid}"], timedelta(seconds=60.0 + pause_s))
            except Exception:
                sys.exit(3)  # nobody stopped us: fail loudly rather than continue
            log_event(self.out, worker=self.wid, event="resumed", step=step)

    def _kill_due(self, steps: list[int], first_step: int) -> int | None:
        """The planned kill in ``steps`` that falls due at an event covering inner steps from
        ``first_step`` on (the first sync or checkpoint at or after the planned step), if any."""
        if self.incarnation != 0:
            return None
        due = [s for s in steps if s <= first_step + self.cfg.round_steps - 1]
        return due[0] if due else None

    def _await_kill(self, step: int, phase: str) -> None:
        log_event(self.out, worker=self.wid, event="awaiting_kill", step=step, phase=phase)
        self.store.set(f"killme/{self.wid}", str(step))
        time.sleep(60.0)
        sys.exit(3)  # nobody killed us: fail loudly rather than continue

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

    def _frame(self, update: torch.Tensor, codec_index: int, first_step: int, loss: float) -> torch.Tensor:
        payload = self.codecs[codec_index].encode(update)
        crc = zlib.crc32(payload.numpy())  # type: ignore[arg-type]  # numpy stub: see check_payload
        if self.plan.corrupts(self.wid, first_step, first_step + self.cfg.round_steps - 1):
            payload = payload.clone()
            payload[: min(16, payload.numel())] ^= 0x5A  # damage on the wire, after the checksum
            log_event(self.out, worker=self.wid, event="corrupted_payload", round=self.round)
        c = self.link.counters
        rng = sync_rng(self.cfg.seed, self.wid, self.round)
        arrival = c.clock_s + self.link.upload_s(payload.numel() + CRC_BYTES, rng)
        header = torch.zeros(HEADER_LEN, dtype=torch.float64)
        header[H_CRC], header[H_GEN], header[H_ARRIVAL], header[H_LOSS] = (
            crc,
            self._published_gen(),
            arrival,
            loss,
        )
        header[H_COMPUTE], header[H_EXPOSED], header[H_CLOCK] = c.compute_s, c.comm_exposed_s, c.clock_s
        header[H_SENT], header[H_RECV], header[H_INDEX] = c.bytes_sent, c.bytes_received, self.index
        self._rng = rng
        return torch.cat([header.view(torch.uint8), payload])

    def _published_gen(self) -> int:
        """The newest published generation, read from the store at most every 0.5 s. Members agree on
        when to re-form through the maximum over the exchanged headers, so staleness only delays it."""
        now = time.monotonic()
        if now - self._gen_polled > 0.5:
            self._gen_seen, self._gen_polled = self.store.add("gen", 0), now
        return self._gen_seen

    def _set_progress(self, force: bool = False) -> None:
        """progress/<w> = inner steps done (for the supervisor and standby joiners), rate-limited."""
        now = time.monotonic()
        if force or now - self._progress_set > 0.25:
            self.store.set(f"progress/{self.wid}", str(self.round * self.cfg.round_steps))
            self._progress_set = now

    def _exchange(self, frame: torch.Tensor) -> list[torch.Tensor] | None:
        """Barrier then all_gather; None on any error (the round is dropped)."""
        if len(self.members) == 1:
            return [frame]
        try:
            if not self._barrier(f"bar/{self.gen}/{self.round}", self.members):
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

    def _exchange_relay(
        self, frame: torch.Tensor, numel: int, codec_index: int
    ) -> tuple[torch.Tensor | None, list[dict[str, Any]], int, float] | None:
        """Real-link mode: barrier, then upload to the relay and wait for its aggregate over real,
        shaped sockets. Returns (average, frame infos, download bytes, measured wall-clock seconds),
        or None on any error (the round is dropped)."""
        try:
            if not self._barrier(f"bar/{self.gen}/{self.round}", self.members):
                raise RuntimeError("a member of the group is gone")
            reply = self.link.exchange(  # type: ignore[attr-defined]
                frame.numpy(),
                gen=self.gen,
                round_index=self.round,
                part=codec_index,
                numel=numel,
                members=self.members,
            )
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
        infos = []
        for h, ok, why in zip(reply.headers, reply.ok, reply.why, strict=True):
            info = {"worker": f"w{int(h[H_INDEX])}", "header": h, "ok": ok}
            if not ok:
                info["why"] = why
                self.rejected_total += 1
                log_event(
                    self.out,
                    worker=self.wid,
                    event="rejected_update",
                    round=self.round,
                    bad=info["worker"],
                    why=why,
                )
            infos.append(info)
        avg = None
        if any(reply.ok):  # (a top-k average of zeros is a valid, empty payload)
            agg = torch.frombuffer(bytearray(reply.aggregate), dtype=torch.uint8)
            avg = self.codecs[codec_index].decode(agg, numel)
        return avg, infos, len(reply.aggregate) + CRC_BYTES, reply.wall_s

    def _average(
        self, frames: list[torch.Tensor], numel: int, codec_index: int
    ) -> tuple[torch.Tensor | None, list[dict[str, Any]]]:
        """Check and average the frames in worker order; a bad frame is logged and left out."""
        codec = self.codecs[codec_index]
        infos, valid = [], []
        for f in sorted(frames, key=lambda t: t[:HEADER_BYTES].view(torch.float64)[H_INDEX].item()):
            h = f[:HEADER_BYTES].view(torch.float64).tolist()
            payload = f[HEADER_BYTES:]
            info = {"worker": f"w{int(h[H_INDEX])}", "header": h, "ok": False}
            v, why = check_payload(payload, int(h[H_CRC]), codec, numel)
            if v is None:
                info["why"] = why
            else:
                valid.append(v)
                info["ok"] = True
            if not info["ok"]:
                self.rejected_total += 1
                log_event(
                    self.out,
                    worker=self.wid,
                    event="rejected_update",
                    round=self.round,
                    bad=info["worker"],
                    why=info["why"],
                )
            infos.append(info)
        if not valid:
            return None, infos
        avg = valid[0] if len(valid) == 1 else torch.stack(valid).sum(0) / len(valid)
        return avg, infos

    def _sync(self, first_step: int, loss: float) -> tuple[bool, int]:
        """One sync. Returns (ok, highest generation any member has seen published)."""
        update, index, ci = self._update_vector()
        frame = self._frame(update, ci, first_step, loss)
        up_bytes = frame.numel() - HEADER_BYTES + CRC_BYTES
        codec = self.codecs[ci]
        if getattr(self.link, "relay", False):  # real-link mode: the relay averages (netlink.py)
            got = self._exchange_relay(frame, update.numel(), ci)
            if got is None:
                return False, self.gen
            avg, infos, down_bytes, link_s = got
        else:
            frames = self._exchange(frame)
            if frames is None:
                return False, self.gen
            avg, infos = self._average(frames, update.numel(), ci)
            if avg is None:
                down_bytes = CRC_BYTES
            elif codec.name == "none":  # fp32 round-trips exactly: only the size matters
                down_bytes = codec.nbytes(update.numel()) + CRC_BYTES
            else:
                down = codec.encode_average(avg)
                down_bytes = down.numel() + CRC_BYTES
                avg = codec.decode(down, update.numel())  # what the relay's download carries
            link_s = self.link.download_s(down_bytes, self._rng)
        c = self.link.counters
        # Real-link mode: arrivals are the members' clocks (upload_s = 0) and link_s the measured sync.
        done = relay_finish_s([i["header"][H_ARRIVAL] for i in infos], link_s)
        c.bytes_sent += up_bytes
        c.bytes_received += down_bytes
        c.messages += 1
        if self.cfg.algorithm == "ddp":
            if avg is not None:
                set_flat_grads(self.params, avg)
                t0 = self._now()
                self._adamw_step(first_step)
                self._charge_compute(self._now() - t0, first_step)
            self.opt.zero_grad(set_to_none=True)
        elif avg is not None:
            self.outer.step(self.global_flat, avg, index)
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
        return True, max(int(i["header"][H_GEN]) for i in infos)

    def _record(self, infos: list[dict[str, Any]], up_bytes: int, down_bytes: int) -> None:
        self.tokens += len(infos) * self.cfg.round_steps * self.cfg.batch_size * self.cfg.block_size
        self.last_infos = infos
        for i in infos:
            h = i["header"]
            self.stats[i["worker"]] = {
                "bytes_sent": h[H_SENT] + up_bytes,
                "bytes_received": h[H_RECV] + down_bytes,
                "compute_s": h[H_COMPUTE],
                "exposed_s": h[H_EXPOSED],
                "clock_s": h[H_CLOCK],
            }

    # ------------------------------------------------------------------ metrics, checkpoints
    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean loss of the global weights on fixed validation batches (same for every run and seed)."""
        t0 = time.perf_counter()
        try:
            return self._evaluate()
        finally:
            self._excluded_s += time.perf_counter() - t0

    @torch.no_grad()
    def _evaluate(self) -> float:
        local = flat_params(self.params)
        set_flat_params(self.params, self.global_flat if self.cfg.algorithm != "ddp" else local)
        losses = []
        for i in range(self.cfg.eval_batches):
            x, y = self.val.batch(12345, 0, i)
            losses.append(float(self.model(x, y)[1].item()))
        set_flat_params(self.params, local)
        return sum(losses) / len(losses)

    def _log_round(self, r: int, final: bool) -> None:
        log_every = self.cfg.inner_steps if self.cfg.algorithm == "ddp" else 1
        if not final and (r + 1) % log_every:
            return
        logged = (r + 1) // log_every
        val = self.evaluate() if final or logged % self.cfg.eval_every == 0 else None
        infos = self.last_infos
        row = {
            "round": r,
            "step": (r + 1) * self.cfg.round_steps,
            "loss": sum(i["header"][H_LOSS] for i in infos) / len(infos),
            "val_loss": val,
            "tokens": self.tokens,
            "generation": self.gen,
            "active_workers": [i["worker"] for i in infos],
            "rejected": [i["worker"] for i in infos if not i["ok"]],
            "compute_s": {w: s["compute_s"] for w, s in self.stats.items()},
            "virtual_time_s": max(s["clock_s"] for s in self.stats.values()),
            "bytes_sent": {w: int(s["bytes_sent"]) for w, s in self.stats.items()},
            "bytes_received": {w: int(s["bytes_received"]) for w, s in self.stats.items()},
            "utilisation": {w: _util(s) for w, s in self.stats.items()},
        }
        with open(self.out / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")

    def _worker_state(self) -> dict[str, Any]:
        c = self.link.counters
        return {
            "model": flat_params(self.params),
            "inner": self.opt.state_dict(),
            "codecs": [getattr(k, "state_dict", dict)() for k in self.codecs],
            "counters": dict(vars(c)),
            "pending": self.pending,
        }

    def _checkpoint(self) -> None:
        r = self.round  # rounds completed
        # Fault plan: killed half-way through this checkpoint's write (rank 0: global.pt; others:
        # their own file). The write is atomic, so only a temporary file is left behind.
        due = [s for s in self.kill_ckpt_steps if s <= r * self.cfg.round_steps and self.incarnation == 0]
        kill_midway = (lambda: self._await_kill(due[0], "checkpoint")) if due else None
        checkpoint.save_worker(
            self.out, r, self.wid, self._worker_state(), midway=None if self.rank == 0 else kill_midway
        )
        if len(self.members) > 1 and not self._barrier(f"ckpt/{self.gen}/{r}", self.members):
            return
        if self.rank == 0:
            checkpoint.save_global(
                self.out,
                r,
                {"round": r, **{k: v for k, v in self._transfer_state().items() if k != "round"}},
                midway=kill_midway,
            )

    def _resume(self) -> None:
        d = checkpoint.latest(self.out)
        if d is None:
            return
        g = checkpoint.load(d / "global.pt")
        self.round, self.tokens, self.stats = g["round"], g["tokens"], g["stats"]
        self.global_flat = g["global"].clone()
        self.outer.load_state_dict(g["outer"])
        wfile = d / f"{self.wid}.pt"
        if wfile.exists():
            w = checkpoint.load(wfile)
            set_flat_params(self.params, w["model"])
            self.opt.load_state_dict(w["inner"])
            for codec, st in zip(self.codecs, w["codecs"], strict=True):
                if st:
                    codec.load_state_dict(st)  # type: ignore[attr-defined]
            for k, v in w["counters"].items():
                setattr(self.link.counters, k, v)
            self.pending = w["pending"]
        else:
            set_flat_params(self.params, self.global_flat)
            self.opt.load_state_dict(g["inner"])

    # ------------------------------------------------------------------ main loop
    def _wait_until_step(self, step: int) -> bool:
        """A standby replacement: wait until the group reaches ``step`` (False if the run ends first)."""
        deadline = time.monotonic() + self.cfg.run_timeout_s
        while time.monotonic() < deadline:
            if self.store.check(["finished"]):
                return False
            done = [
                int(self.store.get(f"progress/{w}"))
                for w in self.cfg.worker_ids
                if w != self.wid and self.store.check([f"progress/{w}"])
            ]
            if max(done, default=0) >= step:
                return True
            time.sleep(0.05)
        return False

    def _await_member(self, worker: str, timeout_s: float) -> int:
        """Wait (bounded) until a published generation lists ``worker``; returns that generation, or the
        current one if it does not come (the run goes on without it)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            g = self.store.add("gen", 0)
            if g > self.gen and worker in json.loads(self.store.get(f"members/{g}")):
                return g
            if self.store.check(["finished"]):
                break
            time.sleep(0.02)
        log_event(self.out, worker=self.wid, event="rejoin_not_seen", awaited=worker, waited_s=timeout_s)
        return self.gen

    def run(self, resume: bool, join_at_step: int = 0) -> None:
        self.heartbeat.start()
        if resume:
            self._resume()
        if join_at_step and not self._wait_until_step(join_at_step):
            return
        if self.incarnation > 0:
            log_event(self.out, worker=self.wid, event="join_requested", incarnation=self.incarnation)
        self.store.set(f"joinreq/{self.wid}", str(self.incarnation))
        if not self.form_group(min_gen=1, mode="join" if self.incarnation > 0 else "start"):
            return
        if resume and self.rank == 0:
            _truncate_metrics(self.out / "metrics.jsonl", self.round)
        stop = self.cfg.rounds
        if self.cfg.stop_after_rounds:
            stop = min(stop, self.round + self.cfg.stop_after_rounds)
        k = self.cfg.round_steps
        rejoins = [f for f in self.plan.of("rejoin") if f.step > self.round * k]
        t_loop = time.perf_counter()
        while self.round < stop:
            for f in list(rejoins):
                # The plan says this worker is back by now: hold the round boundary until it is in
                # (bounded by rejoin_timeout_s: a worker that never comes back does not hang the run).
                if f.step <= self.round * k:
                    rejoins.remove(f)
                    if f.worker in self.members:
                        continue
                    self._set_progress(force=True)  # the standby joiner waits for this step
                    t_hold = time.perf_counter()
                    g = self._await_member(f.worker, self.cfg.rejoin_timeout_s)
                    if g > self.gen:
                        self.form_group(min_gen=g, mode="grow")
                    self._excluded_s += time.perf_counter() - t_hold
            r, first = self.round, self.round * k
            loss_sum = torch.zeros(())
            for s in range(k):
                self._maybe_get_killed(first + s)
                if self.pending is not None and s == self.cfg.overlap_steps:
                    self._merge_pending()
                loss_sum += self._inner_step(first + s)
            ok, seen_gen = self._sync(first, loss_sum.item() / k)
            self.round += 1
            self._set_progress(force=not ok or self.round == stop)
            if not ok:
                # Drop the round: back to the global weights, then re-form the group without the failed peer.
                if self.cfg.algorithm != "ddp":
                    set_flat_params(self.params, self.global_flat)
                self.opt.zero_grad(set_to_none=True)
                self.pending = None
                self.store.set(f"failed/{self.gen}/{self.wid}", "1")
                if not self.form_group(min_gen=self.gen + 1, mode="failure"):
                    return
                continue
            final = self.round == self.cfg.rounds
            if self.rank == 0:
                self._log_round(r, final)
            every = self.cfg.checkpoint_every
            if final or self.round == stop or (every and self.round % every == 0):
                t_ck = time.perf_counter()
                self._checkpoint()
                self._excluded_s += time.perf_counter() - t_ck
            if seen_gen > self.gen and self.round < stop:
                self.form_group(min_gen=seen_gen, mode="grow")
        self.train_wall_s = time.perf_counter() - t_loop - self._excluded_s
        self._finish(completed=self.round == self.cfg.rounds)

    def _finish(self, completed: bool) -> None:
        """Gather exact final counters, write summary.json (rank 0), and tell everyone the run is over."""
        c = self.link.counters
        mine = torch.tensor(
            [
                self.index,
                c.bytes_sent,
                c.bytes_received,
                c.compute_s,
                c.comm_exposed_s,
                c.clock_s,
                c.state_bytes,
            ],
            dtype=torch.float64,
        )
        rows = [mine]
        if len(self.members) > 1:
            try:
                rows = [torch.empty_like(mine) for _ in self.members]
                dist.all_gather(rows, mine)
            except Exception:
                rows = [mine]
        for row in rows:
            w = f"w{int(row[0])}"
            self.stats[w] = {
                "bytes_sent": row[1].item(),
                "bytes_received": row[2].item(),
                "compute_s": row[3].item(),
                "exposed_s": row[4].item(),
                "clock_s": row[5].item(),
                "state_bytes": row[6].item(),
            }
        if self.rank == 0:
            from dispersal._io import atomic_write_text, dumps_json

            summary = {
                "completed": completed,
                "algorithm": self.cfg.algorithm,
                "codec": self.cfg.codec,
                "workers": self.cfg.workers,
                "params": self.numel,
                "rounds": self.round,
                "steps": self.round * self.cfg.round_steps,
                "tokens": self.tokens,
                "final_val_loss": self.evaluate(),
                "virtual_time_s": max(s["clock_s"] for s in self.stats.values()),
                "bytes_sent_per_worker": {w: int(s["bytes_sent"]) for w, s in sorted(self.stats.items())},
                "bytes_received_per_worker": {
                    w: int(s["bytes_received"]) for w, s in sorted(self.stats.items())
                },
                "state_transfer_bytes": {
                    w: int(s.get("state_bytes", 0)) for w, s in sorted(self.stats.items())
                },
                "compute_s_per_worker": {w: s["compute_s"] for w, s in sorted(self.stats.items())},
                "exposed_comm_s_per_worker": {w: s["exposed_s"] for w, s in sorted(self.stats.items())},
                "utilisation": {w: _util(s) for w, s in sorted(self.stats.items())},
                "final_members": self.members,
                "train_wall_s": self.train_wall_s,
                "generation": self.gen,
                "payload_bytes_per_sync": self.codecs[0].nbytes(
                    self.numel if self.frags is None else self.frags[0].numel()
                )
                + CRC_BYTES,
                "config": self.cfg.to_dict(),
            }
            atomic_write_text(self.out / "summary.json", dumps_json(summary) + "\n")
            self.store.set("finished", "1" if completed else "stopped")
        self.store.set(f"done/{self.wid}", "1")
        if dist.is_initialized():
            dist.destroy_process_group()


def _crc32(t: torch.Tensor, value: int = 0) -> int:
    """CRC32 of a tensor's bytes (copied to the CPU first if it lives on an accelerator)."""
    data = t.detach().cpu().contiguous().numpy()
    return zlib.crc32(data, value)  # type: ignore[arg-type]  # numpy stub: see check_payload


def _util(s: dict[str, float]) -> float:
    """Utilisation = compute / (compute + exposed communication)."""
    total = s["compute_s"] + s["exposed_s"]
    return s["compute_s"] / total if total > 0 else 1.0


def _truncate_metrics(path: Path, rounds_done: int) -> None:
    if not path.exists():
        return
    keep = [ln for ln in path.read_text().splitlines() if ln and json.loads(ln)["round"] < rounds_done]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(ln + "\n" for ln in keep))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> None:
    """``python -m dispersal.testbed.worker --config CFG.json --worker w0 --store HOST:PORT --out DIR``."""
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
    torch.set_num_threads(1)  # several workers share few cores; more threads thrash (spec/testbed.md)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cfg = TestbedConfig.from_dict(json.loads(Path(args.config).read_text()))
    wid = args.worker or f"w{os.environ.get('RANK', '0')}"
    host, port = args.store.rsplit(":", 1)
    Worker(cfg, wid, host, int(port), Path(args.out), args.incarnation).run(args.resume, args.join_at_step)


if __name__ == "__main__":
    main()
