"""Several hosts on one Linux machine: network namespaces on a bridge, links shaped by the kernel.

Used by the multi-host test (tests/testbed/test_multihost.py) and the emulator-vs-kernel benchmark
(benchmarks/bench_kernel_links.py). Needs root and iproute2 (``ip netns``, ``tc``). Topology::

    <tag>h0 ... <tag>h{N-1}     one namespace per host: eth0 = 198.18.0.{i+1}/24, lo up
        eth0 <-veth-> p{i}      the other end in the switch namespace <tag>sw, enslaved to bridge br0

Every interface is created inside its namespace (nothing is added to the caller's), and addresses
come from 198.18.0.0/15, the range reserved for benchmarking (RFC 2544, RFC 5735 sec. 4), so they
cannot clash with a real network. A link's rate is a ``tc tbf`` qdisc on both ends of its veth (the
host's end shapes its upload, the switch's end its download); ``tc netem`` (latency, loss) is not
available on every kernel, so links have no added latency. Closing (or leaving the ``with`` block,
even on an exception) kills the process groups started through :meth:`Hosts.popen` and deletes the
namespaces, which deletes their interfaces and qdiscs with them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any

SUBNET = "198.18.0"
"""First three octets of the test hosts' /24, inside 198.18.0.0/15 (RFC 2544 benchmarking range)."""
TBF_LATENCY_MS = 100
"""tc tbf queue limit, as the longest a packet may wait in it (assumption: large enough that a sync's
burst is queued, not dropped, at 20 Mbit/s)."""
TBF_BURST_S = 0.004
"""tbf bucket depth as seconds of the rate (assumption; at least one 16 KiB minimum, tc's rule of thumb
that the burst must exceed rate / HZ with HZ = 250)."""


def unavailable() -> str:
    """Why namespace hosts cannot be made here ('' when they can): not root, or no iproute2."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"iproute2's {tool!r} is not installed"
    probe = f"dsp{os.getpid()}probe"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return f"'ip netns add' failed: {r.stderr.strip()[:120]}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return ""


def _ip(*args: str) -> None:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")


@dataclass(kw_only=True)
class Hosts:
    """``hosts`` namespace hosts on one bridge, each link ``rate_bits_per_s`` each way (None: unshaped).

    ``tag`` makes the namespace names unique per run (default: ``dsp<pid>``)."""

    hosts: int
    rate_bits_per_s: float | None = None
    tag: str = ""
    _made: list[str] = field(default_factory=list)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 1 <= self.hosts <= 200:
            raise ValueError(f"hosts: 1 to 200, got {self.hosts}")
        if self.rate_bits_per_s is not None and not self.rate_bits_per_s >= 1e5:
            raise ValueError(f"rate_bits_per_s: at least 1e5 (100 kbit/s), got {self.rate_bits_per_s}")
        self.tag = self.tag or f"dsp{os.getpid()}"

    # ------------------------------------------------------------------ names
    def ns(self, i: int) -> str:
        return f"{self.tag}h{i}"

    @property
    def switch(self) -> str:
        return f"{self.tag}sw"

    @staticmethod
    def address(i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    # ------------------------------------------------------------------ set up, tear down
    def __enter__(self) -> Hosts:
        try:
            self._add(self.switch)
            _ip("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("ip", "-n", self.switch, "link", "set", "br0", "up")
            for i in range(self.hosts):
                h = self.ns(i)
                self._add(h)
                _ip("ip", "-n", h, "link", "set", "lo", "up")
                _ip("ip", "link", "add", "name", "eth0", "netns", h, "type", "veth", "peer", "name",
                    f"p{i}", "netns", self.switch)  # fmt: skip
                _ip("ip", "-n", self.switch, "link", "set", f"p{i}", "master", "br0")
                _ip("ip", "-n", self.switch, "link", "set", f"p{i}", "up")
                _ip("ip", "-n", h, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
                _ip("ip", "-n", h, "link", "set", "eth0", "up")
                self.shape(i, self.rate_bits_per_s)
        except BaseException:
            self.close()
            raise
        return self

    def _add(self, name: str) -> None:
        _ip("ip", "netns", "add", name)
        self._made.append(name)

    def shape(self, i: int, rate_bits_per_s: float | None) -> None:
        """Set host i's link to ``rate_bits_per_s`` both ways (tbf on both veth ends); None: unshaped."""
        for ns, dev in ((self.ns(i), "eth0"), (self.switch, f"p{i}")):
            subprocess.run(
                ["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True, timeout=30
            )
            if rate_bits_per_s is None:
                continue
            burst = max(16384, int(rate_bits_per_s / 8 * TBF_BURST_S))
            _ip("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{int(rate_bits_per_s)}bit",
                "burst", str(burst), "latency", f"{TBF_LATENCY_MS}ms")  # fmt: skip

    def link(self, i: int, up: bool) -> None:
        """Host i's cable: ``ip link set eth0 down`` (or up) inside its namespace."""
        _ip("ip", "-n", self.ns(i), "link", "set", "eth0", "up" if up else "down")

    def close(self) -> None:
        """Kill what was started in the hosts (whole process groups), then delete every namespace."""
        for p in self._procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)
        for name in reversed(self._made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._made.clear()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def counters(self, i: int) -> dict[str, int]:
        """Host i's eth0 byte counters as the kernel counts them (IP + TCP headers included)."""
        base = ["ip", "netns", "exec", self.ns(i), "cat"]
        got = {}
        for k in ("tx_bytes", "rx_bytes"):
            r = subprocess.run(
                [*base, f"/sys/class/net/eth0/statistics/{k}"], capture_output=True, timeout=30
            )
            got[k] = int(r.stdout or 0)
        return got

    # ------------------------------------------------------------------ processes
    def popen(self, i: int, cmd: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        """Start ``cmd`` inside host i (``ip netns exec``), in its own process group (killed by close)."""
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(i), *cmd], start_new_session=True, **kw)
        self._procs.append(p)
        return p
