"""The shaper's primitives for real-link mode (netlink.py): token bucket, delay line, pipes.

Rate is a token bucket over segments of ``MSS_BYTES``; latency, jitter and loss (as a retransmission
delay, in order) are a delay line; a :class:`Pipe` is one direction of one worker's access link,
optionally behind the relay's shared downlink. See netlink.py's docstring for what is and is not
emulated.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

MSS_BYTES = 1448
"""TCP payload per segment: 1500-byte Ethernet MTU - 20 (IPv4) - 20 (TCP) - 12 (timestamp option,
RFC 7323 sec. 3). The unit the shaper schedules and loses."""


# ---------------------------------------------------------------------- shaping primitives
class TokenBucket:
    """Rate ``bits_per_s``, depth ``burst_bytes``. ``reserve`` returns when the bytes have passed.

    Tokens (bytes) refill at rate/8 per second up to the depth; sending n bytes takes n tokens and may
    leave a debt, which is the time the bytes still need: done = now + debt / rate. With depth 0, n
    bytes offered to an idle bucket pass at now + 8 n / rate, and back-to-back offers queue behind
    each other exactly (a serialising link).
    """

    def __init__(self, bits_per_s: float, burst_bytes: float = 0.0) -> None:
        if not bits_per_s > 0:
            raise ValueError(f"bits_per_s must be > 0, got {bits_per_s}")
        if burst_bytes < 0:
            raise ValueError(f"burst_bytes must be >= 0, got {burst_bytes}")
        self.bytes_per_s = bits_per_s / 8.0
        self.burst = float(burst_bytes)
        self.tokens = float(burst_bytes)
        self.last_s = -math.inf
        self.busy_until_s = -math.inf

    @property
    def unlimited(self) -> bool:
        return math.isinf(self.bytes_per_s)

    def reserve(self, nbytes: int, now_s: float) -> float:
        if self.unlimited:
            return now_s
        now_s = max(now_s, self.last_s)
        if self.last_s > -math.inf:
            self.tokens = min(self.burst, self.tokens + (now_s - self.last_s) * self.bytes_per_s)
        self.last_s = now_s
        self.tokens -= nbytes
        done = now_s + max(0.0, -self.tokens) / self.bytes_per_s
        self.busy_until_s = done
        return done


class DelayLine:
    """One-way delay + uniform jitter in [0, jitter_s] + loss as a retransmission delay, in order."""

    def __init__(
        self, one_way_s: float, jitter_s: float, loss: float, retransmit_s: float, rng: random.Random
    ) -> None:
        self.one_way_s, self.jitter_s, self.loss, self.retransmit_s = one_way_s, jitter_s, loss, retransmit_s
        self.rng = rng
        self.last_delivery_s = -math.inf

    @property
    def zero(self) -> bool:
        return self.one_way_s == 0 and self.jitter_s == 0 and (self.loss == 0 or self.retransmit_s == 0)

    def deliver(self, sent_s: float) -> tuple[float, bool]:
        """Delivery time of a segment whose last bit left at ``sent_s``, and whether it was lost once."""
        t = sent_s + self.one_way_s
        if self.jitter_s:
            t += self.rng.uniform(0.0, self.jitter_s)
        lost = self.loss > 0 and self.rng.random() < self.loss
        if lost:
            t += self.retransmit_s
        t = max(t, self.last_delivery_s)
        self.last_delivery_s = t
        return t, lost


@dataclass(frozen=True, kw_only=True)
class Direction:
    """One direction of one worker's access link."""

    bits_per_s: float = math.inf
    one_way_s: float = 0.0
    jitter_s: float = 0.0
    """Upper end of the uniform extra delay per segment (s)."""
    loss: float = 0.0
    """Probability that a segment is lost once (and retransmitted)."""
    retransmit_s: float = 0.0
    """Extra delay of a lost segment (s): one round trip."""
    burst_bytes: float = 0.0


@dataclass
class PipeCounters:
    wire_bytes: int = 0
    segments: int = 0
    lost_segments: int = 0


class Pipe:
    """A token bucket (and optionally a shared one before it) feeding a delay line."""

    def __init__(self, d: Direction, rng: random.Random, shared: TokenBucket | None = None) -> None:
        self.bucket = TokenBucket(d.bits_per_s, d.burst_bytes)
        self.delay = DelayLine(d.one_way_s, d.jitter_s, d.loss, d.retransmit_s, rng)
        self.shared = shared
        self.counters = PipeCounters()

    @property
    def transparent(self) -> bool:
        return self.bucket.unlimited and self.delay.zero and (self.shared is None or self.shared.unlimited)

    @property
    def busy_until_s(self) -> float:
        return self.bucket.busy_until_s

    def segment(self, nbytes: int, ready_s: float) -> float:
        """Schedule one segment offered at ``ready_s``; returns its delivery time."""
        c = self.counters
        c.wire_bytes += nbytes
        c.segments += 1
        if self.transparent:
            return ready_s
        t = ready_s if self.shared is None else self.shared.reserve(nbytes, ready_s)
        t = self.bucket.reserve(nbytes, t)
        t, lost = self.delay.deliver(t)
        c.lost_segments += lost
        return t

    def schedule(self, nbytes: int, ready_s: float) -> list[tuple[float, int]]:
        """Segments of ``nbytes`` offered together: [(delivery time, segment bytes), ...]."""
        if self.transparent:
            c = self.counters
            c.wire_bytes += nbytes
            c.segments += max(1, math.ceil(nbytes / MSS_BYTES))
            return [(ready_s, nbytes)]
        out = []
        for off in range(0, nbytes, MSS_BYTES):
            n = min(MSS_BYTES, nbytes - off)
            out.append((self.segment(n, ready_s), n))
        return out


def schedule_round_robin(jobs: list[tuple[Pipe, int]], ready_s: float) -> list[list[tuple[float, int]]]:
    """Segments of several downloads offered at once, one segment per download in turn (so a shared
    bucket serves them fairly). Returns each download's [(delivery time, bytes), ...]."""
    out: list[list[tuple[float, int]]] = [[] for _ in jobs]
    if all(p.transparent for p, _ in jobs):
        return [p.schedule(n, ready_s) for p, n in jobs]
    offsets = [0] * len(jobs)
    remaining = True
    while remaining:
        remaining = False
        for k, (pipe, nbytes) in enumerate(jobs):
            if offsets[k] < nbytes:
                n = min(MSS_BYTES, nbytes - offsets[k])
                out[k].append((pipe.segment(n, ready_s), n))
                offsets[k] += n
                remaining = remaining or offsets[k] < nbytes
    return out
