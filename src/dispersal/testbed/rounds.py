"""The parts of a worker's round that are not the algorithm: fault and attack injection, the frame's
header, the relay exchange, verdict and divergence bookkeeping, metrics rows and the final summary.

:class:`RoundTools` is mixed into worker.Worker and uses its attributes (cfg, wid, out, store, ms,
link, ...); it holds no state of its own beyond what :meth:`setup_faults` sets.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from typing import Any

import torch
import torch.distributed as dist

from dispersal._io import _clean
from dispersal.testbed.codecs import CRC_BYTES
from dispersal.testbed.events import log_event
from dispersal.testbed.wire import (
    H_ARRIVAL,
    H_CLOCK,
    H_COMPUTE,
    H_CRC,
    H_EXPOSED,
    H_GEN,
    H_INDEX,
    H_LOSS,
    H_RECV,
    H_SENT,
    HEADER_LEN,
    frame_context,
    seal_frame,
)


def transfer_bytes(numel: int, inner: dict[str, Any]) -> int:
    """Bytes a (re)joining member receives as state: global weights + outer momentum (fp32) + the inner
    AdamW state tensors."""
    return 4 * (2 * numel) + sum(
        t.numel() * t.element_size()
        for st in inner["state"].values()
        for t in st.values()
        if isinstance(t, torch.Tensor)
    )


def _util(s: dict[str, float]) -> float:
    """Utilisation = compute / (compute + exposed communication)."""
    total = s["compute_s"] + s["exposed_s"]
    return s["compute_s"] / total if total > 0 else 1.0


class RoundTools:
    # Attributes of worker.Worker used here (declared for the type checker).
    cfg: Any
    wid: str
    out: Any
    store: Any
    ms: Any
    link: Any
    plan: Any
    secret: bytes
    index: int
    incarnation: int
    round: int
    tokens: int
    numel: int
    stats: dict[str, dict[str, float]]
    verdicts: dict[str, dict[str, int]]
    last_infos: list[dict[str, Any]]
    peer_updates: list[torch.Tensor]
    codecs: list[Any]
    frags: Any
    diverged: str
    rejected_total: int
    train_wall_s: float
    _excluded_s: float

    # ------------------------------------------------------------------ faults
    def setup_faults(self) -> None:
        self.kill_steps = set(self.plan.kill_steps(self.wid))
        self.kill_sync_steps = self.plan.kill_steps(self.wid, phase="allgather")
        self.kill_ckpt_steps = self.plan.kill_steps(self.wid, phase="checkpoint")
        self.pause_steps = self.plan.pauses(self.wid)
        self.straggles = bool(self.plan.of("straggle", self.wid))
        self.attackers: list[Any] = []
        self.attacked_syncs = 0
        if self.cfg.attacks:
            from dispersal.testbed.attacks import Attacker, parse_attack

            for text in self.cfg.attacks:
                a = parse_attack(text)
                if a.worker == self.wid:
                    self.attackers.append(Attacker(a, seed=self.cfg.seed * 1000 + self.index))

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
            if not self.store.wait_valid([f"resumed/{self.wid}"], 60.0 + pause_s):
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

    def attack(self, update: torch.Tensor, first_step: int) -> torch.Tensor:
        """Fault plan: what an attacking worker sends instead of its honest update (attacks.py)."""
        if not self.attackers:
            return update
        step = first_step + self.cfg.round_steps - 1  # the sync that ends this round
        # "copy": another member's update of the last round (the only ones a worker has seen when it
        # sends; with the relay it has seen none, and copies its own)
        peers = [p for p in self.peer_updates if p.shape == update.shape] or None
        sent = update
        for a in self.attackers:
            sent = a.corrupt(sent, step=step, peers=peers)
        if sent is not update:
            self.attacked_syncs += 1
            if self.attacked_syncs == 1:
                log_event(self.out, worker=self.wid, event="attack_started", round=self.round, step=step)
        return sent

    # ------------------------------------------------------------------ the frame, the relay
    def seal(self, payload: torch.Tensor, crc: int, arrival: float, loss: float, part: int) -> torch.Tensor:
        """Header (emulation metadata) + payload + HMAC tag bound to (generation, round, part, sender)."""
        c = self.link.counters
        h = torch.zeros(HEADER_LEN, dtype=torch.float64)
        h[H_CRC], h[H_GEN], h[H_ARRIVAL], h[H_LOSS] = crc, self.ms.published_gen_cached(), arrival, loss
        h[H_COMPUTE], h[H_EXPOSED], h[H_CLOCK] = c.compute_s, c.comm_exposed_s, c.clock_s
        h[H_SENT], h[H_RECV], h[H_INDEX] = c.bytes_sent, c.bytes_received, self.index
        ctx = frame_context(self.ms.gen, self.round, part, self.wid)
        return seal_frame(h, payload, self.secret, ctx)

    def exchange_relay(
        self, frame: torch.Tensor, numel: int, codec_index: int
    ) -> tuple[torch.Tensor | None, list[dict[str, Any]], int, float] | None:
        """Real-link mode: barrier, then upload to the relay and wait for its aggregate over real,
        shaped sockets. Returns (aggregate, frame infos, download bytes, measured wall-clock seconds),
        or None on any error (the round is dropped)."""
        try:
            if not self.ms.barrier(f"bar/{self.ms.gen}/{self.round}", self.ms.members):
                raise RuntimeError("a member of the group is gone")
            reply = self.link.exchange(
                frame.numpy(),
                gen=self.ms.gen,
                round_index=self.round,
                part=codec_index,
                numel=numel,
                members=self.ms.members,
            )
        except Exception as exc:
            log_event(
                self.out,
                worker=self.wid,
                event="sync_failed",
                round=self.round,
                generation=self.ms.gen,
                error=str(exc)[:200],
            )
            return None
        infos = [
            {"worker": w, "header": h, "ok": ok, "why": why, "trusted": tr, "clipped": cl, "weight": 0.0}
            for w, h, ok, why, tr, cl in zip(
                sorted(self.ms.members, key=lambda m: int(m[1:])),
                reply.headers,
                reply.ok,
                reply.why,
                reply.trusted,
                reply.clipped,
                strict=True,
            )
        ]
        agg = None
        if any(reply.ok):  # (a top-k average of zeros is a valid, empty payload)
            raw = torch.frombuffer(bytearray(reply.aggregate), dtype=torch.uint8)
            try:
                agg = self.codecs[codec_index].decode(raw, numel)
            except (ValueError, RuntimeError, IndexError):
                agg = None
            if agg is not None and not bool(torch.isfinite(agg).all()):
                agg = None  # an aggregate is checked like any frame before it touches the model
        return agg, infos, len(reply.aggregate) + CRC_BYTES, reply.wall_s

    # ------------------------------------------------------------------ verdicts, divergence
    def note_verdicts(self, infos: list[dict[str, Any]]) -> None:
        """Count and log every update left out or clipped, with its reason."""
        for i in infos:
            if i["ok"] and not i["clipped"]:
                continue
            kind = "clipped" if i["ok"] else "rejected"
            key = f"{i['worker']}: {i['why']}"
            self.verdicts[kind][key] = self.verdicts[kind].get(key, 0) + 1
            if not i["ok"]:
                self.rejected_total += 1
            log_event(
                self.out,
                worker=self.wid,
                event="rejected_update" if kind == "rejected" else "clipped_update",
                round=self.round,
                bad=i["worker"],
                why=i["why"],
            )

    def divergence_limit(self) -> float:
        """Loss above which a run has diverged: ``divergence_factor`` x the loss of a uniform guess,
        ln(vocab) nats (config: an assumption, not a measured threshold)."""
        return float(self.cfg.divergence_factor * math.log(self.cfg.vocab_size))

    def check_divergence(self, losses: list[float]) -> None:
        """Every member sees the same frames, so every member reaches the same verdict in the same round:
        the global weights non-finite, or the median reported training loss (one liar cannot move it)
        non-finite or above divergence_limit."""
        if self.diverged:
            return
        g = self.global_flat if self.cfg.algorithm != "ddp" else None  # type: ignore[attr-defined]
        if g is not None and not bool(torch.isfinite(g.sum())) and not bool(torch.isfinite(g).all()):
            self.diverged = "global weights non-finite"
        elif losses:
            m = statistics.median(x if math.isfinite(x) else math.inf for x in losses)
            if not math.isfinite(m) or m > self.divergence_limit():
                self.diverged = f"training loss {m:.4g} > {self.divergence_limit():.3g} (diverged)"
        if self.diverged:
            log_event(self.out, worker=self.wid, event="diverged", round=self.round, reason=self.diverged)

    # ------------------------------------------------------------------ outputs
    def log_round(self, r: int, final: bool) -> None:
        log_every = self.cfg.inner_steps if self.cfg.algorithm == "ddp" else 1
        if not final and (r + 1) % log_every:
            return
        logged = (r + 1) // log_every
        val = self.evaluate() if final or logged % self.cfg.eval_every == 0 else None  # type: ignore[attr-defined]
        infos = [i for i in self.last_infos if i["trusted"]] or self.last_infos
        row = {
            "round": r,
            "step": (r + 1) * self.cfg.round_steps,
            "loss": statistics.median(
                x if math.isfinite(x) else math.inf for x in (i["header"][H_LOSS] for i in infos)
            ),
            "val_loss": val,
            "tokens": self.tokens,
            "generation": self.ms.gen,
            "active_workers": [i["worker"] for i in self.last_infos],
            "rejected": [i["worker"] for i in self.last_infos if not i["ok"]],
            "clipped": [i["worker"] for i in self.last_infos if i["clipped"]],
            "compute_s": {w: s["compute_s"] for w, s in self.stats.items()},
            "virtual_time_s": max(s["clock_s"] for s in self.stats.values()),
            "bytes_sent": {w: int(s["bytes_sent"]) for w, s in self.stats.items()},
            "bytes_received": {w: int(s["bytes_received"]) for w, s in self.stats.items()},
            "utilisation": {w: _util(s) for w, s in self.stats.items()},
        }
        with open(self.out / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps(_clean(row), allow_nan=False) + "\n")

    def worker_state(self) -> dict[str, Any]:
        c = self.link.counters
        return {
            "model": self.flat_local(),
            "inner": self.opt.state_dict(),  # type: ignore[attr-defined]
            "codecs": [getattr(k, "state_dict", dict)() for k in self.codecs],
            "counters": dict(vars(c)),
            "pending": self.pending,  # type: ignore[attr-defined]
        }

    def flat_local(self) -> torch.Tensor:
        from dispersal.testbed.outer import flat_params

        return flat_params(self.params)  # type: ignore[attr-defined]

    def _gather_counters(self) -> None:
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
                self.attacked_syncs,
            ],
            dtype=torch.float64,
        )
        rows = [mine]
        if len(self.ms.members) > 1:
            try:
                rows = [torch.empty_like(mine) for _ in self.ms.members]
                dist.all_gather(rows, mine)
            except Exception:
                rows = [mine]
        self.attacks_seen: dict[str, int] = {}
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
            if row[7].item() > 0:
                self.attacks_seen[w] = int(row[7].item())

    def finish(self, completed: bool) -> None:
        """Gather exact final counters, write summary.json (rank 0), and tell everyone the run is over."""
        self._gather_counters()
        if self.ms.rank == 0:
            from dispersal._io import atomic_write_text, dumps_json

            final_val = self.evaluate()  # type: ignore[attr-defined]
            if not self.diverged and (not math.isfinite(final_val) or final_val > self.divergence_limit()):
                self.diverged = f"final validation loss {final_val:.4g} > {self.divergence_limit():.3g}"
            s = {w: v for w, v in sorted(self.stats.items())}
            summary = {
                "completed": completed and not self.diverged,
                "diverged": bool(self.diverged),
                "reason": self.diverged or ("" if completed else "stopped before the last round"),
                "algorithm": self.cfg.algorithm,
                "codec": self.cfg.codec,
                "aggregator": self.cfg.aggregator,
                "trust": self.cfg.trust,
                "workers": self.cfg.workers,
                "params": self.numel,
                "rounds": self.round,
                "steps": self.round * self.cfg.round_steps,
                "tokens": self.tokens,
                "final_val_loss": final_val,
                "virtual_time_s": max(v["clock_s"] for v in s.values()),
                "bytes_sent_per_worker": {w: int(v["bytes_sent"]) for w, v in s.items()},
                "bytes_received_per_worker": {w: int(v["bytes_received"]) for w, v in s.items()},
                "state_transfer_bytes": {w: int(v.get("state_bytes", 0)) for w, v in s.items()},
                "compute_s_per_worker": {w: v["compute_s"] for w, v in s.items()},
                "exposed_comm_s_per_worker": {w: v["exposed_s"] for w, v in s.items()},
                "utilisation": {w: _util(v) for w, v in s.items()},
                "attacks": list(self.cfg.attacks),
                "attacks_seen": self.attacks_seen,
                "updates_rejected": self.verdicts["rejected"],
                "updates_clipped": self.verdicts["clipped"],
                "final_members": self.ms.members,
                "train_wall_s": self.train_wall_s,
                "generation": self.ms.gen,
                "payload_bytes_per_sync": self.codecs[0].nbytes(
                    self.numel if self.frags is None else self.frags[0].numel()
                )
                + CRC_BYTES,
                "config": self.cfg.to_dict(),
            }
            atomic_write_text(self.out / "summary.json", dumps_json(summary) + "\n")
            self.store.set("finished", "1" if summary["completed"] else "stopped")
        self.store.set(f"done/{self.wid}", "1")
        if dist.is_initialized():
            dist.destroy_process_group()
