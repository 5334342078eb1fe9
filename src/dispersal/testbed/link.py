"""Links: every byte a worker sends or receives is counted here and charged to its clock.

Two modes (``TestbedConfig.link_mode``):

* ``virtual`` (default, fast, deterministic): :class:`VirtualClockLink` computes the time of each
  transfer from the formula below and adds it to a per-worker virtual clock; the payloads themselves
  travel unshaped over gloo on loopback. It is a bookkeeping device, not a network: comparing its
  utilisation with the analytic model only checks the bookkeeping.
* ``real``: :class:`dispersal.testbed.netlink.RelayLink`, a TCP connection to a relay process that
  shapes rate, latency, jitter and loss per direction on real sockets; each sync's wall-clock time is
  measured and charged (see ``netlink.py``).

Virtual-clock link model for one sync through a relay, as in the analytic model's flat DiLoCo sync
(docs: spec/model.md section 3)::

    T_sync = 8 V_up / BW_up + 8 V_down / BW_down + latency      [s; V in bytes, BW in bit/s]

Half the latency (plus a jitter draw, uniform in [0, jitter/2]) is charged each way. With several
workers the relay starts sending down when the last upload has arrived, so worker i finishes at
``max_j(arrival_j) + down_i``: waiting for a straggler is exposed communication too.

By default the time is *virtual* (added to a per-worker clock, deterministic); with
``realtime=True`` the worker also really sleeps for the exposed communication time.
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any, Protocol

from dispersal.testbed.counters import LinkCounters

__all__ = [
    "EmulatedWanLink",
    "InstantLink",
    "Link",
    "LinkCounters",
    "VirtualClockLink",
    "link_for",
    "make_link",
    "predicted_sync_s",
    "relay_finish_s",
    "sync_rng",
]


class Link(Protocol):
    counters: LinkCounters

    def upload_s(self, nbytes: int, rng: random.Random) -> float: ...

    def download_s(self, nbytes: int, rng: random.Random) -> float: ...

    def wait(self, seconds: float) -> None: ...


class InstantLink:
    """Infinitely fast, zero latency; still counts bytes. For tests and overhead runs."""

    def __init__(self) -> None:
        self.counters = LinkCounters()

    def upload_s(self, nbytes: int, rng: random.Random) -> float:
        return 0.0

    def download_s(self, nbytes: int, rng: random.Random) -> float:
        return 0.0

    def wait(self, seconds: float) -> None:
        return None


class VirtualClockLink:
    """The virtual-clock link: up/down rate (bit/s), one-way latency = latency_s / 2, jitter (s).

    Times come from the formula, not from a transfer; see the module docstring.
    """

    def __init__(
        self,
        up_bits_per_s: float,
        down_bits_per_s: float,
        latency_s: float,
        jitter_s: float = 0.0,
        realtime: bool = False,
    ) -> None:
        self.up_bits_per_s = up_bits_per_s
        self.down_bits_per_s = down_bits_per_s
        self.latency_s = latency_s
        self.jitter_s = jitter_s
        self.realtime = realtime
        self.counters = LinkCounters()

    def _one_way(self, rng: random.Random) -> float:
        return self.latency_s / 2 + (rng.uniform(0.0, self.jitter_s / 2) if self.jitter_s else 0.0)

    def upload_s(self, nbytes: int, rng: random.Random) -> float:
        wire = 0.0 if math.isinf(self.up_bits_per_s) else 8 * nbytes / self.up_bits_per_s
        return wire + self._one_way(rng)

    def download_s(self, nbytes: int, rng: random.Random) -> float:
        wire = 0.0 if math.isinf(self.down_bits_per_s) else 8 * nbytes / self.down_bits_per_s
        return wire + self._one_way(rng)

    def wait(self, seconds: float) -> None:
        if self.realtime and seconds > 0:
            time.sleep(seconds)


def make_link(up: float, down: float, latency_s: float, jitter_s: float, realtime: bool) -> Link:
    if math.isinf(up) and math.isinf(down) and latency_s == 0 and jitter_s == 0:
        return InstantLink()
    return VirtualClockLink(up, down, latency_s, jitter_s, realtime)


EmulatedWanLink = VirtualClockLink  # the earlier name


def link_for(cfg: Any, worker: str, store: Any, out: Path, secret: bytes) -> Link:
    """The link of one worker for a TestbedConfig: virtual clock, or (``link_mode="real"``) the
    relay connection whose address the supervisor published in the (signed) store as ``relay``."""
    if cfg.link_mode != "real":
        return make_link(
            cfg.link_up_bits_per_s,
            cfg.link_down_bits_per_s,
            cfg.link_latency_s,
            cfg.link_jitter_s,
            cfg.realtime,
        )
    from dispersal.testbed.netlink import RelaySpec
    from dispersal.testbed.relaylink import RelayLink

    address = store.get_str("relay")
    if address is None:
        raise RuntimeError(
            "link_mode 'real' needs the relay that run_local starts (the serve coordinator has none)"
        )
    host, port = address.rsplit(":", 1)
    (out / "netlink").mkdir(parents=True, exist_ok=True)
    link = RelayLink(
        host,
        int(port),
        worker,
        cfg.collective_timeout_s,
        secret=secret,
        spec=RelaySpec.from_config(cfg),
        log=out / "netlink" / f"{worker}.jsonl",
    )
    link.connect()
    return link


def sync_rng(seed: int, worker: str, round_index: int) -> random.Random:
    """Deterministic jitter draws per (seed, worker, round)."""
    return random.Random(f"{seed}/{worker}/{round_index}")


def relay_finish_s(arrivals_s: list[float], download_s: float) -> float:
    """Time a worker has the averaged update: last upload arrival at the relay + its own download."""
    return max(arrivals_s) + download_s


def predicted_sync_s(
    payload_bytes: int, up_bits_per_s: float, down_bits_per_s: float, latency_s: float
) -> float:
    """T_sync = 8 V / BW_up + 8 V / BW_down + latency (spec/model.md sec. 3, flat sync, no straggler factor)."""
    return 8 * payload_bytes / up_bits_per_s + 8 * payload_bytes / down_bits_per_s + latency_s
