"""Decoupled DiLoCo's syncer as a component: checks what learners deliver, merges it on a quorum or a
deadline, applies the outer step and versions the global state. No sockets, no clock of its own.

Decoupled DiLoCo (Douillard et al. 2026, arXiv 2604.21428): learners run inner steps on their own
clocks and send pseudo-gradients whenever they finish a round; a central syncer merges "whatever has
arrived" once a minimum quorum of learners has delivered, or when a grace window runs out, so a dead
or slow learner never stops the others. Here (a simplification of the paper, stated):

* whole-model updates, not fragments; every update weighs the same (each is H inner steps of one
  learner, the same tokens), where the paper weighs by tokens;
* quorum: ``quorum`` distinct learners have an update pending; deadline: the oldest pending update
  has waited ``deadline_s`` (the paper's grace window is adaptive; this one is fixed);
* staleness: an update built on global version ``b`` while the syncer is at version ``v`` has
  staleness ``v - b``; one with ``v - b > max_staleness`` is dropped, one with ``b > v`` is refused
  (bounded staleness, as asynchronous Local-SGD, Liu et al. 2024, arXiv 2401.09135);
* the merged update goes through :class:`outer.OuterStep`: the merge rule (``mean`` or
  ``norm_preserving``, robust.py) and the outer optimizer (Nesterov, outer.NesterovOuter), both
  swappable; the unit tests pass fakes.

Everything a learner sends is checked by ``wire.open_frame`` before it is kept (length, HMAC tags
bound to sender, incarnation, sequence number and base version, header values, CRC32, decoding,
finiteness); a replayed frame fails its sequence number, a frame for a version that does not exist
is refused, and the number of pending updates is bounded.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

import torch

from dispersal.testbed.outer import OuterStep
from dispersal.testbed.wire import H_LOSS, open_frame

WORKER_ID = re.compile(r"w\d{1,6}")
PENDING_PER_LEARNER = 4
"""Updates the syncer holds per learner at most (a learner delivers about one per merge; more means
the others are slow or gone): a learner with this many pending makes a merge due, and an update
beyond it is refused as ``queue full``."""


def update_context(sender: str, incarnation: int, seq: int, base_version: int) -> bytes:
    """What an update frame's tags bind: replaying it under another sender, process, sequence number
    or base version fails the tag."""
    return f"decoupled/{sender}/{incarnation}/{seq}/{base_version}".encode()


@dataclass(frozen=True, kw_only=True)
class Pending:
    """One checked update waiting for a merge."""

    sender: str
    base_version: int
    update: torch.Tensor
    arrived_s: float
    loss: float


class Syncer:
    """The global state and the merge policy. ``offer`` a frame, ``merge`` when due, read ``snapshot``.

    Not thread-safe: the server (decoupled_wire.py) calls it under one lock."""

    def __init__(
        self,
        global_flat: torch.Tensor,
        outer_step: OuterStep,
        *,
        secret: bytes,
        codec: Any,
        workers: int,
        quorum: int,
        deadline_s: float,
        max_staleness: int,
    ) -> None:
        if not 1 <= quorum <= workers:
            raise ValueError(f"quorum: in 1..{workers}, got {quorum}")
        self.theta = global_flat.detach().clone().float()
        self.numel = self.theta.numel()
        self.outer_step, self.secret, self.codec = outer_step, secret, codec
        self.workers, self.quorum = workers, quorum
        self.deadline_s, self.max_staleness = deadline_s, max_staleness
        self.version = 0
        self.pending: list[Pending] = []
        self.last_seq: dict[str, tuple[int, int]] = {}  # sender -> (incarnation, seq) last accepted
        self.rejected: dict[str, int] = {}  # "w1: why" -> count
        self.merged_updates = 0

    # ------------------------------------------------------------------ receiving
    def offer(
        self, sender: str, incarnation: int, seq: int, base_version: int, frame: Any, now_s: float
    ) -> str:
        """Check one learner's update frame and keep it for the next merge. Returns "" when kept, else
        why it was refused (also counted in ``rejected``). Never raises on what a peer sent."""
        why = self._refuse(sender, incarnation, seq, base_version)
        header = None
        if not why:
            header, v, why = open_frame(
                frame,
                secret=self.secret,
                context=update_context(sender, incarnation, seq, base_version),
                sender_index=int(sender[1:]),
                codec=self.codec,
                numel=self.numel,
                payload_bytes=self.codec.nbytes(self.numel),
            )
        if not why:
            assert header is not None and v is not None
            self.last_seq[sender] = (incarnation, seq)
            loss = header[H_LOSS]
            self.pending.append(
                Pending(sender=sender, base_version=base_version, update=v, arrived_s=now_s, loss=loss)
            )
            return ""
        key = f"{sender if WORKER_ID.fullmatch(str(sender)) else '?'}: {why}"
        self.rejected[key] = self.rejected.get(key, 0) + 1
        return why

    def _refuse(self, sender: str, incarnation: int, seq: int, base_version: int) -> str:
        """The checks that need no frame bytes: who, which process, in order, which version."""
        if not isinstance(sender, str) or not WORKER_ID.fullmatch(sender) or int(sender[1:]) >= self.workers:
            return "unknown sender"
        for name, x in (("incarnation", incarnation), ("seq", seq), ("base version", base_version)):
            if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < 2**53:
                return f"bad {name}"
        last = self.last_seq.get(sender)
        if last is not None and (incarnation, seq) <= last:
            return "replayed or out of order"
        if base_version > self.version:
            return f"version {base_version} does not exist (newest {self.version})"
        if self.version - base_version > self.max_staleness:
            return f"stale: {self.version - base_version} versions behind (max {self.max_staleness})"
        if sum(p.sender == sender for p in self.pending) >= PENDING_PER_LEARNER:
            return "queue full"
        return ""

    # ------------------------------------------------------------------ merging
    def due(self, now_s: float) -> bool:
        """A quorum of distinct learners has delivered, or the oldest update has waited deadline_s, or
        one learner has PENDING_PER_LEARNER updates waiting (it is that far ahead of the others)."""
        if not self.pending:
            return False
        senders = [p.sender for p in self.pending]
        if len(set(senders)) >= self.quorum or max(map(senders.count, senders)) >= PENDING_PER_LEARNER:
            return True
        return now_s - min(p.arrived_s for p in self.pending) >= self.deadline_s

    def merge(self, now_s: float, force: bool = False) -> dict[str, Any] | None:
        """When due (or ``force``, with anything pending): merge the pending updates with the rule,
        apply the outer step, publish version + 1. Returns what was merged (for the metrics), or None.
        (Staleness was checked on arrival; the version moves only here, and a merge takes everything
        pending, so nothing goes stale while it waits.)"""
        if not (self.due(now_s) or (force and self.pending)):
            return None
        fresh, self.pending = self.pending, []
        agg, verdicts = self.outer_step.aggregate([p.update for p in fresh])
        info: dict[str, Any] = {
            "senders": [p.sender for p in fresh],
            "staleness": [self.version - p.base_version for p in fresh],
            "weights": [v.weight for v in verdicts],
            "loss": statistics.median(p.loss for p in fresh),
            "waited_s": now_s - min(p.arrived_s for p in fresh),
            "applied": agg is not None,
        }
        if agg is not None:
            self.outer_step.apply(self.theta, agg)
            self.version += 1
            self.merged_updates += len(fresh)
        info["version"], info["merged_updates"] = self.version, self.merged_updates
        return info

    def snapshot(self) -> tuple[int, torch.Tensor]:
        """(version, a copy of the global weights)."""
        return self.version, self.theta.clone()
