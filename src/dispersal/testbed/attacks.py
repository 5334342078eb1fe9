"""Attack injection: a worker that sends something other than its honest pseudo-gradient.

Syntax ``WORKER:KIND[=VALUE][@stepN]`` (``dispersal train --attack``), e.g. ``w2:scale=1e6``,
``1:sign_flip@step40``, ``w0:noise=10``. ``WORKER`` is the testbed's name (``w2``) or its index.
The attack is active at every sync at or after inner step N (default 0: from the start).

===========  =====================================================  ===================
kind         what the worker sends instead of its update u          VALUE (default)
===========  =====================================================  ===================
scale        VALUE x u                                               factor (1e6, the issue's case)
sign_flip    -VALUE x u                                              factor (1)
noise        u + N(0, (VALUE x rms(u))^2) per coordinate             std / rms(u) (10)
nan          all NaN                                                 none
huge         all +3e38 (finite in fp32, overflows naive sums)        none
stale        the honest update it computed VALUE rounds earlier      rounds (1)
copy         ``peers[0]`` (another worker's update), else its own    none
lazy         zeros (free-riding: no work done)                       none
===========  =====================================================  ===================

The noise std is relative to the honest update's RMS so one value means the same at every model
size and every point in training (an absolute std would be huge early and negligible late).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from dispersal.model.inputs.errors import InputError

KINDS = ("scale", "sign_flip", "noise", "nan", "huge", "stale", "copy", "lazy")
DEFAULT_VALUE: dict[str, float | None] = {
    "scale": 1e6,
    "sign_flip": 1.0,
    "noise": 10.0,
    "nan": None,
    "huge": None,
    "stale": 1.0,
    "copy": None,
    "lazy": None,
}
HUGE_VALUE = 3e38
"""Finite in float32 (max 3.4e38): passes an isfinite check, but squares and sums overflow."""
_SYNTAX = "WORKER:KIND[=VALUE][@stepN], e.g. w2:scale=1e6@step40"
_PATTERN = re.compile(r"^(w?\d+):([a-z_]+)(?:=([^@]+))?(?:@(?:step)?(\d+))?$")


@dataclass(frozen=True, kw_only=True)
class Attack:
    """One attacking worker: its name, the attack kind, its value (None = the kind's default), first step."""

    worker: str
    kind: str
    value: float | None = None
    from_step: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError("attack", f"kind {self.kind!r} unknown (allowed: {', '.join(KINDS)})")
        if not re.fullmatch(r"w\d+", self.worker):
            raise InputError("attack", f"worker {self.worker!r} must be wN, e.g. w2")
        if self.from_step < 0:
            raise InputError("attack", f"step must be >= 0, got {self.from_step}")
        if self.value is not None:
            if DEFAULT_VALUE[self.kind] is None:
                raise InputError("attack", f"kind {self.kind!r} takes no value, got {self.value!r}")
            if not math.isfinite(self.value):
                raise InputError("attack", f"value must be finite, got {self.value!r}")
            if self.kind == "noise" and self.value <= 0:
                raise InputError("attack", f"noise std must be > 0, got {self.value!r}")
            if self.kind == "stale" and (self.value < 1 or not float(self.value).is_integer()):
                raise InputError("attack", f"stale rounds must be an integer >= 1, got {self.value!r}")

    @property
    def resolved_value(self) -> float | None:
        return self.value if self.value is not None else DEFAULT_VALUE[self.kind]

    def __str__(self) -> str:
        value = "" if self.value is None else f"={self.value:g}"
        step = f"@step{self.from_step}" if self.from_step else ""
        return f"{self.worker}:{self.kind}{value}{step}"


def parse_attack(text: str) -> Attack:
    """Parse ``WORKER:KIND[=VALUE][@stepN]``; InputError (a ValueError) naming 'attack' and the bad part."""
    raw = str(text).strip()
    m = _PATTERN.match(raw)
    if m is None:
        kind = raw.split(":", 1)[1].split("=")[0].split("@")[0] if ":" in raw else ""
        if kind and kind not in KINDS:
            raise InputError("attack", f"kind {kind!r} unknown in {raw!r} (allowed: {', '.join(KINDS)})")
        raise InputError("attack", f"expected {_SYNTAX} (kinds: {', '.join(KINDS)}), got {raw!r}")
    worker, kind, value_text, step = m.groups()
    value: float | None = None
    if value_text is not None:
        try:
            value = float(value_text)
        except ValueError:
            raise InputError("attack", f"value {value_text!r} in {raw!r} is not a number") from None
    name = worker if worker.startswith("w") else f"w{int(worker)}"
    return Attack(worker=name, kind=kind, value=value, from_step=int(step) if step else 0)


class Attacker:
    """Turns a worker's honest update into what it actually sends (see the module table)."""

    def __init__(self, attack: Attack, *, seed: int) -> None:
        self.attack = attack
        self.generator = torch.Generator().manual_seed(seed)
        rounds = int(attack.resolved_value or 1) if attack.kind == "stale" else 1
        self._past: deque[Tensor] = deque(maxlen=rounds)

    def active(self, step: int) -> bool:
        return step >= self.attack.from_step

    def corrupt(self, update: Tensor, *, step: int, peers: Sequence[Tensor] | None = None) -> Tensor:
        """The update sent at the sync at inner step ``step`` (the honest one before ``from_step``)."""
        kind, value = self.attack.kind, self.attack.resolved_value
        if kind == "stale":
            # Remember every honest update so the replay is available once the attack starts.
            replay = self._past[0] if len(self._past) == self._past.maxlen else None
            self._past.append(update.detach().clone())
            if not self.active(step) or replay is None:
                return update
            return replay.clone()
        if not self.active(step):
            return update
        if kind == "scale":
            return update * float(value or 0.0)
        if kind == "sign_flip":
            return update * -float(value or 0.0)
        if kind == "noise":
            rms = float(torch.sqrt(torch.mean(update.double() ** 2)))
            noise = torch.randn(update.shape, generator=self.generator, dtype=torch.float32)
            return update + noise * float(value or 0.0) * rms
        if kind == "nan":
            return torch.full_like(update, math.nan)
        if kind == "huge":
            return torch.full_like(update, HUGE_VALUE)
        if kind == "copy":
            return (peers[0] if peers else update).clone()
        return torch.zeros_like(update)  # lazy
