"""What a (re)forming group agrees on: who holds the newest state, sending it (an authenticated bundle,
never pickle), and the check that every member's local weights match the global ones afterwards; and
the same state to and from disk (checkpoints, --resume).

:class:`GroupState` is mixed into worker.Worker and uses its attributes.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, cast

import torch
import torch.distributed as dist

from dispersal.testbed import checkpoint
from dispersal.testbed.events import log_event
from dispersal.testbed.outer import flat_params, set_flat_params
from dispersal.testbed.rounds import transfer_bytes
from dispersal.testbed.wire import pack_bundle, unpack_bundle


class GroupState:
    # Attributes of worker.Worker used here (declared for the type checker).
    cfg: Any
    wid: str
    out: Any
    ms: Any
    link: Any
    secret: bytes
    comm_device: Any
    params: list[Any]
    opt: Any
    outer: Any
    outer_step: Any
    numel: int
    round: int
    tokens: int
    stats: dict[str, dict[str, float]]
    verdicts: dict[str, dict[str, int]]
    global_flat: torch.Tensor
    pending: Any
    codecs: list[Any]
    incarnation: int
    kill_ckpt_steps: list[int]
    # rounds.RoundTools's (annotations only: a stub here would shadow them in worker.Worker's MRO)
    _await_kill: Callable[[int, str], None]
    worker_state: Callable[[], dict[str, Any]]

    @property
    def gen(self) -> int:
        return int(self.ms.gen)

    @property
    def members(self) -> list[str]:
        return list(self.ms.members)

    @property
    def rank(self) -> int:
        return int(self.ms.rank)

    def _fresh_codecs(self) -> list[Any]:
        raise NotImplementedError

    def _joined_fields(self, reset: bool) -> dict[str, Any]:
        local_crc, global_crc = self._join_check(reset)
        return {
            "round": self.round,
            "reset_local": reset,
            "state_crc": self._state_crc(),
            "global_crc": global_crc,
            "local_crc": local_crc,
        }

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

    def _transfer_state(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "tokens": self.tokens,
            "stats": self.stats,
            "verdicts": self.verdicts,
            "global": self._global_vector(),
            "outer": self.outer.state_dict(),
            "inner": self.opt.state_dict(),
            "rule": self.outer_step.rule_state(),
        }

    def _receive_state(self, src: int) -> dict[str, Any]:
        """The source member's state as an authenticated bundle (two broadcasts: length, bytes)."""
        ctx = f"state/{self.gen}/{self.members[src]}".encode()
        data = pack_bundle(self._transfer_state(), self.secret, ctx) if self.rank == src else b""
        n = torch.tensor([len(data)], dtype=torch.int64, device=self.comm_device)
        dist.broadcast(n, src=src)
        size = int(n.item())
        if not 0 < size < 1 << 40:
            raise ValueError(f"state bundle of {size} bytes")
        buf = (
            torch.frombuffer(bytearray(data), dtype=torch.uint8)
            if self.rank == src
            else torch.empty(size, dtype=torch.uint8)
        ).to(self.comm_device)
        dist.broadcast(buf, src=src)
        s = cast(dict[str, Any], unpack_bundle(buf.cpu().numpy().tobytes(), self.secret, ctx))
        checkpoint.check_state(s, self.numel, "state transfer")
        return s

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
        mine = torch.tensor([self.round], dtype=torch.int64, device=self.comm_device)
        rounds_t = [torch.empty_like(mine) for _ in self.members]
        dist.all_gather(rounds_t, mine)
        rounds = [int(r.item()) for r in rounds_t]
        src = rounds.index(max(rounds))
        s = self._receive_state(src)
        behind = self.round != s["round"]
        self.round, self.tokens, self.stats = int(s["round"]), int(s["tokens"]), s["stats"]
        self.verdicts = s.get("verdicts") or self.verdicts
        self.global_flat = s["global"].clone()
        self.outer.load_state_dict(s["outer"])
        self.outer_step.load_rule_state(s.get("rule"))
        if self.cfg.algorithm == "ddp" or reset_local or behind:
            set_flat_params(self.params, self.global_flat)
            self.pending = None
        if self.cfg.algorithm == "ddp" or behind:
            self.opt.load_state_dict(s["inner"])
        if behind:
            self.codecs = self._fresh_codecs()
            c = self.link.counters
            c.state_bytes += transfer_bytes(self.numel, s["inner"])
            me = self.stats.get(self.wid)
            if me and c.bytes_sent == 0:  # a rejoined worker continues its own byte counts
                c.bytes_sent, c.bytes_received = int(me["bytes_sent"]), int(me["bytes_received"])
                c.compute_s, c.comm_exposed_s = me["compute_s"], me["exposed_s"]
            c.clock_s = max([c.clock_s] + [v["clock_s"] for v in self.stats.values()])
        return reset_local or behind

    # ------------------------------------------------------------------ checkpoints
    def _checkpoint(self) -> None:
        r = self.round  # rounds completed
        # Fault plan: killed half-way through this checkpoint's write (rank 0: global.pt; others:
        # their own file). The write is atomic, so only a temporary file is left behind.
        due = [s for s in self.kill_ckpt_steps if s <= r * self.cfg.round_steps and self.incarnation == 0]
        kill_midway = (lambda: self._await_kill(due[0], "checkpoint")) if due else None
        checkpoint.save_worker(
            self.out, r, self.wid, self.worker_state(), midway=None if self.rank == 0 else kill_midway
        )
        if len(self.members) > 1 and not self.ms.barrier(f"ckpt/{self.gen}/{r}", self.members):
            return
        if self.rank == 0:
            state = {k: v for k, v in self._transfer_state().items() if k != "round"}
            checkpoint.save_global(self.out, r, {"round": r, **state}, midway=kill_midway)

    def _resume(self) -> None:
        got = checkpoint.load_resume(self.out, self.wid, self.numel, log=self._log_ckpt)
        if got is None:
            return
        g, w = got
        self.round, self.tokens, self.stats = int(g["round"]), int(g["tokens"]), g["stats"]
        self.verdicts = g.get("verdicts") or self.verdicts
        self.global_flat = g["global"].clone()
        self.outer.load_state_dict(g["outer"])
        self.outer_step.load_rule_state(g.get("rule"))
        if w is not None:
            set_flat_params(self.params, w["model"])
            self.opt.load_state_dict(w["inner"])
            for codec, st in zip(self.codecs, w["codecs"], strict=True):
                if st:
                    codec.load_state_dict(st)
            for k, v in w["counters"].items():
                setattr(self.link.counters, k, v)
            self.pending = w["pending"]
        else:
            set_flat_params(self.params, self.global_flat)
            self.opt.load_state_dict(g["inner"])

    def _log_ckpt(self, **fields: Any) -> None:
        log_event(self.out, worker=self.wid, **fields)


def _crc32(t: torch.Tensor, value: int = 0) -> int:
    """CRC32 of a tensor's bytes (copied to the CPU first if it lives on an accelerator)."""
    data = t.detach().cpu().contiguous().numpy()
    return zlib.crc32(data, value)  # type: ignore[arg-type]  # numpy stub: see wire.check_payload
