"""The worker's side of real-link mode: one TCP connection to the relay (netlink.py), authenticated.

Each sync uploads the worker's frame in one message and waits for the round's aggregate; every
message carries an HMAC-SHA256 tag under the run secret and the relay's reply is checked the same way.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dispersal.testbed.counters import LinkCounters
from dispersal.testbed.netlink import PREFIX, RelaySpec, _split, encode_message, parse_meta
from dispersal.testbed.secure import MAC_BYTES, verify


# ---------------------------------------------------------------------- the worker's side
@dataclass(frozen=True)
class RelayReply:
    headers: list[list[float]]
    """The emulation header of every member's frame, in worker order."""
    ok: list[bool]
    why: list[str]
    trusted: list[bool]
    """Whether each frame's header passed its checks (an untrusted one is a blank stand-in)."""
    clipped: list[bool]
    aggregate: bytes
    """The encoded average (empty if no frame was valid)."""
    wall_s: float
    """Measured: from the first byte of the upload to the last byte of the aggregate."""
    wire_sent: int
    wire_received: int


class RelayLink:
    """A worker's real link: the relay connection. Times are measured, so the clock methods return 0."""

    relay = True

    def __init__(
        self,
        host: str,
        port: int,
        worker: str,
        timeout_s: float,
        *,
        secret: bytes,
        spec: RelaySpec | None = None,
        log: Path | None = None,
    ) -> None:
        self.host, self.port, self.worker, self.timeout_s, self.log = host, port, worker, timeout_s, log
        self.secret = secret
        self.spec = spec or RelaySpec()
        self.counters = LinkCounters()
        self.sock: socket.socket | None = None
        self.gen, self.round = 0, 0
        """The generation and round this worker is in (the hello binds them to the relay's nonce)."""

    def _deadline_s(self, nbytes: int, members: int) -> float:
        """How long to wait for a reply: ``timeout_s`` on top of twice the shaped transfer time, so a
        slow link is not mistaken for a dead peer."""
        sp = self.spec
        down = max(1.0 / sp.down.bits_per_s, members / sp.relay_down_bits_per_s)
        transfer = 8 * nbytes * (1.0 / sp.up.bits_per_s + down) + 2 * (sp.up.retransmit_s + sp.up.one_way_s)
        return self.timeout_s + 2 * transfer

    def upload_s(self, nbytes: int, rng: random.Random) -> float:
        return 0.0

    def download_s(self, nbytes: int, rng: random.Random) -> float:
        return 0.0

    def wait(self, seconds: float) -> None:
        return None  # the measured part already passed; the rest is other workers' compute

    def _connect(self) -> socket.socket:
        """Connect and say who this is, so that the relay stops treating this worker's earlier
        (closed) connection as a dead member before this one sends its first frame.

        The relay opens with a signed challenge (a fresh nonce); the hello answers it with the nonce,
        this worker, its generation and round under the run secret, so a hello captured from an
        earlier connection is refused."""
        if self.sock is None:
            s = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            try:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                challenge, _, _ = _recv_message(s, time.monotonic() + self.timeout_s, self.secret)
                hello = {
                    "worker": self.worker,
                    "hello": True,
                    "nonce": str(challenge.get("challenge")),
                    "gen": self.gen,
                    "round": self.round,
                }
                s.sendall(encode_message(hello, secret=self.secret))
            except BaseException:
                s.close()
                raise
            self.sock = s
        return self.sock

    def connect(self) -> None:
        """Connect now (at worker start), not at the first sync."""
        self._connect()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(
        self,
        body: memoryview | bytes,
        *,
        gen: int,
        round_index: int,
        part: int,
        numel: int,
        members: list[str],
    ) -> RelayReply:
        """Upload one frame, wait for the round's aggregate. Raises on abort, timeout or a closed link
        (the connection is then dropped and re-opened at the next sync)."""
        meta = {
            "worker": self.worker,
            "gen": gen,
            "round": round_index,
            "part": part,
            "numel": numel,
            "members": list(members),
        }
        msg = encode_message(meta, body, secret=self.secret)
        self.gen, self.round = gen, round_index
        t0 = time.perf_counter()
        wait_s = self._deadline_s(len(msg), len(members))
        deadline = time.monotonic() + wait_s
        try:
            sock = self._connect()
            sock.settimeout(wait_s)
            sock.sendall(msg)
            received = 0
            while True:
                rmeta, rbody, n = _recv_message(sock, deadline, self.secret)
                received += n
                if (rmeta["gen"], rmeta["round"], rmeta["part"]) == (gen, round_index, part):
                    break  # anything else is a late reply to a round this worker gave up
            if rmeta["status"] != "ok":
                raise ConnectionError(f"relay aborted the round: {rmeta.get('why')}")
        except BaseException:
            self.close()
            with contextlib.suppress(OSError):
                self._connect()  # at once: the next round must not find this worker "closed"
            raise
        wall = time.perf_counter() - t0
        from dispersal.testbed.wire import HEADER_BYTES

        m = len(rmeta["ok"])
        hb = HEADER_BYTES * m
        agg, crc = bytes(rbody[hb:-4]), struct.unpack("!I", rbody[-4:])[0]
        if zlib.crc32(agg) != crc:
            raise ConnectionError("aggregate failed its CRC32")
        flat = struct.unpack(f"={hb // 8}d", rbody[:hb])  # native order, as the frames were built
        width = HEADER_BYTES // 8
        headers = [list(flat[k * width : (k + 1) * width]) for k in range(m)]
        c = self.counters
        c.wire_bytes_sent += len(msg)
        c.wire_bytes_received += received
        c.link_s += wall
        if self.log is not None:
            rec = {
                "gen": gen,
                "round": round_index,
                "part": part,
                "wall_s": wall,
                "wire_sent": len(msg),
                "wire_received": received,
            }
            with open(self.log, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
        return RelayReply(
            headers,
            [bool(x) for x in rmeta["ok"]],
            [str(x) for x in rmeta["why"]],
            [bool(x) for x in rmeta["trusted"]],
            [bool(x) for x in rmeta["clipped"]],
            agg,
            wall,
            len(msg),
            received,
        )


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("relay reply timed out")
        sock.settimeout(left)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("relay closed the connection")
        got += k
    return buf


def _recv_message(
    sock: socket.socket, deadline: float, secret: bytes
) -> tuple[dict[str, Any], bytearray, int]:
    """One reply from the relay; ConnectionError if it is malformed or fails its tag."""
    meta_len, body_len = _split(bytes(_recv_exact(sock, PREFIX.size, deadline)), 1 << 40)
    meta_raw = _recv_exact(sock, meta_len, deadline)
    body = _recv_exact(sock, body_len, deadline) if body_len else bytearray()
    tag = _recv_exact(sock, MAC_BYTES, deadline)
    if not verify(secret, tag, b"relay", meta_raw, body):
        raise ConnectionError("relay reply failed its tag")
    try:
        meta = parse_meta(meta_raw)
        if not isinstance(meta, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise ConnectionError(f"malformed relay reply: {exc}") from None
    return meta, body, PREFIX.size + meta_len + body_len + MAC_BYTES
