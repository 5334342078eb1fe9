"""Real-link mode: a relay on real sockets (127.0.0.1) that shapes every byte in user space.

Topology: the analytic model's *relay* aggregation (parameter-server style). Every worker holds one
TCP connection to the relay. Per sync, each worker uploads its frame; the relay waits for every
member of the generation, checks and averages the frames exactly as the workers do in
virtual-clock mode (same CRC32, decode and finiteness checks, same order, same arithmetic), and
sends the aggregate down to each member. So a run gives bit-identical weights in both modes; only
the clock differs: here the sync time is *measured* on the wall clock and charged.

What the shaper emulates, per direction and per worker (no ``tc netem`` needed, nothing privileged):

* **rate**: a token bucket (rate in bit/s, depth ``burst_bytes``; depth 0 is a link that
  serialises one segment after the other), applied to segments of ``MSS_BYTES``;
* **latency and jitter**: a delay line: a segment is delivered ``one_way_s`` plus a uniform draw in
  ``[0, jitter_s]`` after its last bit left the bucket; delivery stays in order (TCP delivers a
  byte stream in order, so a late segment holds back the ones behind it);
* **loss**: TCP turns loss into delay. A segment is lost with probability ``loss``; it arrives
  ``retransmit_s`` later (one round trip: fast retransmit after three duplicate ACKs, RFC 5681
  sec. 3.2) and holds back the segments behind it (head-of-line blocking). The sender's congestion
  window reaction (halving, slow recovery; Mathis et al. 1997 put the long-run rate near
  ``MSS / RTT x 1.22 / sqrt(p)``) is **not** emulated: at high loss rates real TCP is slower.
* **the relay's shared downlink**: one more token bucket (``relay_down_bits_per_s``) that every
  download passes before the worker's own downlink, served one segment per member in turn.

The uplink is shaped where the relay reads: it takes bytes out of the worker's socket only as fast
as the bucket allows (the worker's ``sendall`` then blocks on real TCP flow control once the socket
buffers are full), and hands a message on when its last segment has been delivered. The downlink is
shaped where the relay writes: each segment is written to the socket at its delivery time.

Bytes on the wire: every application byte that passes a shaper (length prefix, JSON metadata,
the 80-byte emulation header and the payload), per worker and direction. TCP/IP headers are not
shaped or counted (on 127.0.0.1 they never leave the machine); a 100 Mbps link here carries 100 Mbit/s
of application bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MSS_BYTES = 1448
"""TCP payload per segment: 1500-byte Ethernet MTU - 20 (IPv4) - 20 (TCP) - 12 (timestamp option,
RFC 7323 sec. 3). The unit the shaper schedules and loses."""
READ_CHUNK_BYTES = 65536
"""Largest read from a worker's socket at once."""
LOOKAHEAD_S = 0.005
"""The uplink reader keeps this much serialisation time queued in the bucket, so that timer wake-up
delays do not leave the emulated link idle between reads."""
WRITE_BATCH_S = 0.0005
"""Downlink segments due within this window are written together (fewer wake-ups; each is late by
at most this much)."""
MAGIC = b"DSPL"
PREFIX = struct.Struct("!4sII")  # magic, metadata length, body length


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


# ---------------------------------------------------------------------- configuration
@dataclass(frozen=True, kw_only=True)
class RelaySpec:
    """Every worker's access link (the same for all) and the relay's shared downlink."""

    up: Direction = field(default_factory=Direction)
    down: Direction = field(default_factory=Direction)
    relay_down_bits_per_s: float = math.inf
    seed: int = 0

    @classmethod
    def from_config(cls, cfg: Any) -> RelaySpec:
        """From a TestbedConfig: latency is the round trip (half each way, as in the virtual-clock link),
        jitter likewise (uniform in [0, jitter/2] each way), a lost segment costs one round trip."""
        half_lat, half_jit = cfg.link_latency_s / 2, cfg.link_jitter_s / 2
        rtt = cfg.link_latency_s
        return cls(
            up=Direction(
                bits_per_s=cfg.link_up_bits_per_s,
                one_way_s=half_lat,
                jitter_s=half_jit,
                loss=cfg.link_loss_up,
                retransmit_s=rtt,
            ),
            down=Direction(
                bits_per_s=cfg.link_down_bits_per_s,
                one_way_s=half_lat,
                jitter_s=half_jit,
                loss=cfg.link_loss_down,
                retransmit_s=rtt,
            ),
            relay_down_bits_per_s=cfg.relay_down_bits_per_s,
            seed=cfg.seed,
        )


def encode_message(meta: dict[str, Any], body: bytes | memoryview = b"") -> bytes:
    m = json.dumps(meta, separators=(",", ":")).encode()
    n = memoryview(body).nbytes  # body: any contiguous buffer (bytes, bytearray, a NumPy array)
    return b"".join([PREFIX.pack(MAGIC, len(m), n), m, body])


def _split(prefix: bytes) -> tuple[int, int]:
    magic, meta_len, body_len = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ConnectionError(f"bad message magic {magic!r}")
    return meta_len, body_len


# ---------------------------------------------------------------------- the relay's aggregation
class Aggregator:
    """Checks and averages frames exactly like ``Worker._average`` + the relay's re-encoding in
    ``Worker._sync`` (virtual-clock mode), so both modes give the same bits."""

    def __init__(self, codec: str, block: int, topk_fraction: float) -> None:
        from dispersal.testbed.codecs import make_codec

        self.codec = make_codec(codec, block=block, topk_fraction=topk_fraction)

    def __call__(
        self, frames: list[bytes | bytearray], numel: int
    ) -> tuple[bytes, list[bool], list[str], bytes]:
        """-> (headers of every frame in worker order, ok flags, reasons, encoded aggregate)."""
        import torch

        from dispersal.testbed.worker import H_CRC, H_INDEX, HEADER_BYTES, check_payload

        items = []
        for f in frames:
            t = torch.frombuffer(f if isinstance(f, bytearray) else bytearray(f), dtype=torch.uint8)
            items.append((t[:HEADER_BYTES].view(torch.float64), t[HEADER_BYTES:]))
        items.sort(key=lambda it: it[0][H_INDEX].item())
        valid, oks, whys = [], [], []
        for h, payload in items:
            v, why = check_payload(payload, int(h[H_CRC].item()), self.codec, numel)
            oks.append(v is not None)
            whys.append(why)
            if v is not None:
                valid.append(v)
        headers = b"".join(h.numpy().tobytes() for h, _ in items)
        if not valid:
            return headers, oks, whys, b""
        avg = valid[0] if len(valid) == 1 else torch.stack(valid).sum(0) / len(valid)
        return headers, oks, whys, self.codec.encode_average(avg).numpy().tobytes()


# ---------------------------------------------------------------------- the relay
@dataclass
class _Round:
    members: list[str]
    numel: int
    frames: dict[str, tuple[bytearray, Any]] = field(default_factory=dict)
    first_byte_s: float = math.inf
    all_in_s: float = 0.0


class Relay:
    """The relay server (asyncio, one thread). Start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(
        self, spec: RelaySpec, aggregator: Aggregator, *, host: str = "127.0.0.1", log: Path | None = None
    ) -> None:
        self.spec, self.aggregate, self.host, self.log = spec, aggregator, host, log
        self.shared_down = TokenBucket(spec.relay_down_bits_per_s)
        self.up: dict[str, Pipe] = {}
        self.down: dict[str, Pipe] = {}
        self.rounds: dict[tuple[int, int, int], _Round] = {}
        self.newest_gen = 0
        self.writers: dict[str, asyncio.StreamWriter] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        self.closed: set[str] = set()
        """Workers whose latest connection closed (killed, or gave up a round) and did not reconnect."""
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.cpu_s = math.nan

    # -- pipes, one pair per worker id (kept across reconnections and incarnations)
    def _pipes(self, worker: str) -> tuple[Pipe, Pipe]:
        if worker not in self.up:
            rng_up = random.Random(f"{self.spec.seed}/up/{worker}")
            rng_down = random.Random(f"{self.spec.seed}/down/{worker}")
            self.up[worker] = Pipe(self.spec.up, rng_up)
            self.down[worker] = Pipe(self.spec.down, rng_down, shared=self.shared_down)
        return self.up[worker], self.down[worker]

    def counters(self) -> dict[str, dict[str, int]]:
        out = {}
        for w in sorted(self.up, key=lambda w: (len(w), w)):
            u, d = self.up[w].counters, self.down[w].counters
            out[w] = {
                "wire_bytes_up": u.wire_bytes,
                "wire_bytes_down": d.wire_bytes,
                "segments_up": u.segments,
                "segments_down": d.segments,
                "lost_segments_up": u.lost_segments,
                "lost_segments_down": d.lost_segments,
            }
        return out

    # -- lifecycle
    def start(self) -> tuple[str, int]:
        self._thread = threading.Thread(target=self._run, name="dispersal-relay", daemon=True)
        self._thread.start()
        if not self._ready.wait(10.0) or self._error is not None:
            raise RuntimeError(f"relay did not start: {self._error}")
        return self.host, self.port

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            server = loop.run_until_complete(asyncio.start_server(self._serve, self.host, 0))
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            loop.run_forever()
            server.close()
            loop.run_until_complete(server.wait_closed())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
        finally:
            self.cpu_s = time.thread_time()  # this thread's CPU time: the relay's whole cost
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    def close(self, counters_path: Path | None = None) -> None:
        """Stop, and write the per-worker wire counters and the relay thread's CPU seconds (atomically)."""
        self.stop()
        if counters_path is not None:
            from dispersal._io import atomic_write_text, dumps_json

            atomic_write_text(
                counters_path, dumps_json({"workers": self.counters(), "relay_cpu_s": self.cpu_s}) + "\n"
            )

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)

    # -- per connection
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        worker = None
        try:
            while True:
                got = await self._read_shaped(reader, worker)
                if got is None:
                    return
                meta, body, first_s, worker = got
                if meta.get("hello"):  # a (re)connected worker: its earlier connection is history
                    self.writers[worker] = writer
                    self.closed.discard(worker)
                    continue
                self._accept(meta, body, first_s, writer)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            return
        finally:
            if worker is not None:
                if self.writers.get(worker) is writer:
                    self.closed.add(worker)
                self._abort_rounds_of(worker, writer, "connection of " + worker + " closed")
            writer.close()

    async def _read_shaped(
        self, reader: asyncio.StreamReader, worker: str | None
    ) -> tuple[dict[str, Any], bytearray, float, str] | None:
        """Read one message through the worker's uplink; returns when its last segment is delivered."""
        loop = asyncio.get_running_loop()
        try:
            prefix = await reader.readexactly(PREFIX.size)
        except asyncio.IncompleteReadError:
            return None
        first_s = loop.time()
        meta_len, body_len = _split(prefix)
        meta_raw = await reader.readexactly(meta_len)  # small: read first to learn the sender
        meta = json.loads(meta_raw)
        worker = str(meta["worker"])
        if meta.get("hello"):  # connection set-up, like TCP's handshake: not shaped, not counted
            await reader.readexactly(body_len)
            return meta, bytearray(), first_s, worker
        up, _ = self._pipes(worker)
        last = up.schedule(PREFIX.size + meta_len, first_s)[-1][0]
        body = bytearray()
        while len(body) < body_len:
            wait = up.busy_until_s - LOOKAHEAD_S - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            chunk = await reader.read(min(READ_CHUNK_BYTES, body_len - len(body)))
            if not chunk:
                raise ConnectionError("closed mid-message")
            body += chunk
            last = up.schedule(len(chunk), loop.time())[-1][0]
        wait = last - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        return meta, body, first_s, worker

    def _key(self, meta: dict[str, Any]) -> tuple[int, int, int]:
        return int(meta["gen"]), int(meta["round"]), int(meta["part"])

    def _accept(
        self, meta: dict[str, Any], body: bytearray, first_s: float, writer: asyncio.StreamWriter
    ) -> None:
        key = self._key(meta)
        if key[0] > self.newest_gen:
            self.newest_gen = key[0]
            for old in [k for k in self.rounds if k[0] < key[0]]:
                self._abort(old, "superseded by generation " + str(key[0]))
        if key[0] < self.newest_gen:
            self._send_abort(writer, meta, "generation " + str(key[0]) + " is superseded")
            return
        worker = str(meta["worker"])
        self.writers[worker] = writer
        self.closed.discard(worker)
        rnd = self.rounds.setdefault(key, _Round(members=list(meta["members"]), numel=int(meta["numel"])))
        rnd.frames[worker] = (body, writer)
        gone = [m for m in rnd.members if m in self.closed and m not in rnd.frames]
        if gone:
            self._abort(key, "connection of " + gone[0] + " closed")
            return
        rnd.first_byte_s = min(rnd.first_byte_s, first_s)
        if all(m in rnd.frames for m in rnd.members):
            del self.rounds[key]
            rnd.all_in_s = asyncio.get_running_loop().time()
            task = asyncio.ensure_future(self._complete(key, rnd))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _complete(self, key: tuple[int, int, int], rnd: _Round) -> None:
        loop = asyncio.get_running_loop()
        try:
            headers, oks, whys, agg = self.aggregate([rnd.frames[m][0] for m in rnd.members], rnd.numel)
        except Exception as exc:  # e.g. a frame too short to hold a header: fail the round, not the relay
            self.rounds[key] = rnd
            self._abort(key, f"relay could not average: {exc}"[:200])
            return
        meta = {"gen": key[0], "round": key[1], "part": key[2], "status": "ok", "ok": oks, "why": whys}
        body = headers + agg + struct.pack("!I", zlib.crc32(agg))
        msg = encode_message(meta, body)
        ready = loop.time()
        jobs = [(self._pipes(m)[1], len(msg)) for m in rnd.members]
        plans = schedule_round_robin(jobs, ready)
        sends = [
            self._write_shaped(rnd.frames[m][1], msg, plan)
            for m, plan in zip(rnd.members, plans, strict=True)
        ]
        await asyncio.gather(*sends, return_exceptions=True)
        if self.log is not None:
            rec = {
                "gen": key[0],
                "round": key[1],
                "part": key[2],
                "members": rnd.members,
                "upload_s": rnd.all_in_s - rnd.first_byte_s,
                "aggregate_s": ready - rnd.all_in_s,
                "download_s": max(p[-1][0] for p in plans) - ready,
                "sync_s": max(p[-1][0] for p in plans) - rnd.first_byte_s,
                "message_bytes_down": len(msg),
            }
            with open(self.log, "a") as fh:
                fh.write(json.dumps(rec) + "\n")

    async def _write_shaped(
        self, writer: asyncio.StreamWriter, msg: bytes, plan: list[tuple[float, int]]
    ) -> None:
        loop = asyncio.get_running_loop()
        view = memoryview(msg)
        pos, i = 0, 0
        while i < len(plan):
            j, n = i, 0
            while j < len(plan) and plan[j][0] <= plan[i][0] + WRITE_BATCH_S:
                n += plan[j][1]
                j += 1
            wait = plan[j - 1][0] - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(view[pos : pos + n])
            await writer.drain()
            pos, i = pos + n, j

    # -- failures
    def _send_abort(self, writer: asyncio.StreamWriter, meta: dict[str, Any], why: str) -> None:
        reply = {
            "gen": meta["gen"],
            "round": meta["round"],
            "part": meta["part"],
            "status": "abort",
            "why": why,
        }
        with contextlib.suppress(ConnectionError, RuntimeError, OSError):
            writer.write(encode_message(reply))

    def _abort(self, key: tuple[int, int, int], why: str) -> None:
        rnd = self.rounds.pop(key, None)
        if rnd is None:
            return
        meta = {"gen": key[0], "round": key[1], "part": key[2]}
        for _, w in rnd.frames.values():
            self._send_abort(w, meta, why)

    def _abort_rounds_of(self, worker: str, writer: asyncio.StreamWriter, why: str) -> None:
        """A member's connection is gone: every round waiting for it (or holding its frame) fails now."""
        for key in [k for k, r in self.rounds.items() if worker in r.members]:
            rnd = self.rounds[key]
            mine = rnd.frames.get(worker)
            if mine is None or mine[1] is writer:
                rnd.frames.pop(worker, None)
                self._abort(key, why)


# ---------------------------------------------------------------------- the worker's side
@dataclass(frozen=True)
class RelayReply:
    headers: list[list[float]]
    """The emulation header of every member's frame, in worker order."""
    ok: list[bool]
    why: list[str]
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
        spec: RelaySpec | None = None,
        log: Path | None = None,
    ) -> None:
        from dispersal.testbed.link import LinkCounters

        self.host, self.port, self.worker, self.timeout_s, self.log = host, port, worker, timeout_s, log
        self.spec = spec or RelaySpec()
        self.counters = LinkCounters()
        self.sock: socket.socket | None = None

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
        (closed) connection as a dead member before this one sends its first frame."""
        if self.sock is None:
            s = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(encode_message({"worker": self.worker, "hello": True}))
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
        msg = encode_message(meta, body)
        t0 = time.perf_counter()
        wait_s = self._deadline_s(len(msg), len(members))
        deadline = time.monotonic() + wait_s
        try:
            sock = self._connect()
            sock.settimeout(wait_s)
            sock.sendall(msg)
            received = 0
            while True:
                rmeta, rbody, n = _recv_message(sock, deadline)
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
        from dispersal.testbed.worker import HEADER_BYTES

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
        return RelayReply(headers, list(rmeta["ok"]), list(rmeta["why"]), agg, wall, len(msg), received)


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


def _recv_message(sock: socket.socket, deadline: float) -> tuple[dict[str, Any], bytearray, int]:
    meta_len, body_len = _split(bytes(_recv_exact(sock, PREFIX.size, deadline)))
    meta = json.loads(_recv_exact(sock, meta_len, deadline))
    body = _recv_exact(sock, body_len, deadline) if body_len else bytearray()
    return meta, body, PREFIX.size + meta_len + body_len


def start_relay(cfg: Any, out: Path, *, fresh: bool = True, host: str = "127.0.0.1") -> Relay:
    """The relay for a TestbedConfig (real-link mode), logging one line per round to OUT/relay.jsonl
    (workers log theirs to OUT/netlink/<worker>.jsonl).

    It runs as a thread of the calling (supervisor) process and sets torch to one thread there, as
    every worker does: with the default pool, averaging 4 frames took 150 ms instead of 3 ms while the
    workers kept the 2 cores busy.
    """
    import torch

    torch.set_num_threads(1)
    relay = Relay(
        RelaySpec.from_config(cfg),
        Aggregator(cfg.codec, cfg.block, cfg.topk_fraction),
        host=host,
        log=out / "relay.jsonl",
    )
    if fresh:  # a new run (not --resume): the per-sync logs start empty
        (out / "relay.jsonl").unlink(missing_ok=True)
        for f in (out / "netlink").glob("*.jsonl"):
            f.unlink()
    relay.start()
    return relay
