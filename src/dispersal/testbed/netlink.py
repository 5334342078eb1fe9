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
import secrets
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dispersal.testbed.secure import MAC_BYTES, mac, verify
from dispersal.testbed.shaper import (
    MSS_BYTES,
    DelayLine,
    Direction,
    Pipe,
    PipeCounters,
    TokenBucket,
    schedule_round_robin,
)

__all__ = [
    "MSS_BYTES",
    "Aggregator",
    "DelayLine",
    "Direction",
    "Pipe",
    "PipeCounters",
    "Relay",
    "RelaySpec",
    "TokenBucket",
    "encode_message",
    "schedule_round_robin",
    "start_relay",
]

READ_CHUNK_BYTES = 65536
"""Largest read from a worker's socket at once."""
LOOKAHEAD_S = 0.005
"""The uplink reader keeps this much serialisation time queued in the bucket, so that timer wake-up
delays do not leave the emulated link idle between reads."""
WRITE_BATCH_S = 0.0005
"""Downlink segments due within this window are written together (fewer wake-ups; each is late by
at most this much)."""
MAGIC = b"DSPL"
PREFIX = struct.Struct("!4sII")  # magic, metadata length, body length; then meta, body, 32-byte tag
MAX_META_BYTES = 64 << 10
"""Largest metadata a message may announce (a few hundred bytes in practice): more is refused unread."""
MAX_HELLO_BYTES = 512
"""Largest hello (the first message of a connection, ~100 bytes): the only bytes a stranger can make
the relay read, so the only buffering an unauthenticated peer gets."""
MAX_META_DEPTH = 4
"""Deepest JSON nesting a message's metadata may have (frames use 2: an object holding a list);
deeper is refused before parsing, so ``[`` x 60,000 cannot exhaust the parser's recursion."""
HELLO_TIMEOUT_S = 10.0
"""A connection that has not answered its challenge within this time is closed (a slow-loris peer
sending its hello a byte at a time holds one socket for at most this long)."""
NONCE_BYTES = 16
"""The relay's per-connection challenge (128 random bits): a hello answers it, so a replayed hello
(captured from an earlier connection) carries the wrong nonce and is refused."""
WORKER_ID = r"w\d{1,6}"


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


def encode_message(meta: dict[str, Any], body: bytes | memoryview = b"", *, secret: bytes) -> bytes:
    """Length prefix, JSON metadata, body, HMAC-SHA256 tag over (metadata, body)."""
    m = json.dumps(meta, separators=(",", ":")).encode()
    body = memoryview(body).cast("B")  # body: any contiguous buffer (bytes, bytearray, a NumPy array)
    return b"".join([PREFIX.pack(MAGIC, len(m), body.nbytes), m, body, mac(secret, b"relay", m, body)])


def _split(prefix: bytes, max_body: int) -> tuple[int, int]:
    magic, meta_len, body_len = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ConnectionError(f"bad message magic {magic!r}")
    if meta_len > MAX_META_BYTES or body_len > max_body:
        raise ConnectionError(f"message too large ({meta_len} + {body_len} bytes)")
    return meta_len, body_len


def json_depth(raw: bytes | bytearray) -> int:
    """Deepest ``[`` / ``{`` nesting of a JSON text, counting brackets inside strings too (so it is an
    upper bound: a worker's metadata has none there)."""
    depth = deepest = 0
    for b in raw:
        if b in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif b in b"]}":
            depth -= 1
    return deepest


def parse_meta(raw: bytes | bytearray) -> Any:
    """JSON metadata with its nesting bounded by MAX_META_DEPTH; ValueError (never RecursionError)."""
    if json_depth(raw) > MAX_META_DEPTH:
        raise ValueError(f"metadata nested deeper than {MAX_META_DEPTH}")
    try:
        return json.loads(raw)
    except RecursionError:  # unreachable after the depth bound; kept so no parser limit can escape
        raise ValueError("metadata nested too deep") from None


def hello_problem(meta: Any, nonce: bytes, max_gen: int | None) -> str:
    """Why a verified hello is not an answer to this connection's challenge ("" if it is): the nonce
    must be this connection's, the worker id well formed, generation and round integers (the
    generation no newer than the published one)."""
    import re

    if not isinstance(meta, dict) or not meta.get("hello"):
        return "expected a hello"
    if meta.get("nonce") != nonce.hex():
        return "hello does not answer this connection's challenge (replayed?)"
    if not re.fullmatch(WORKER_ID, str(meta.get("worker"))):
        return "bad worker"
    for k in ("gen", "round"):
        v = meta.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**53:
            return f"bad {k}"
    if max_gen is not None and meta["gen"] > max_gen:
        return "generation not published"
    return ""


def _meta_problem(meta: Any, max_numel: int) -> str:
    """Why an (authenticated) upload's metadata cannot be used ("" if it can): types and ranges."""
    import re

    if not isinstance(meta, dict) or not re.fullmatch(WORKER_ID, str(meta.get("worker"))):
        return "bad worker"
    if meta.get("hello"):
        return "a second hello on one connection"
    for k in ("gen", "round", "part", "numel"):
        v = meta.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**53:
            return f"bad {k}"
    members = meta.get("members")
    if (
        not isinstance(members, list)
        or not 0 < len(members) <= 4096
        or not all(isinstance(m, str) and re.fullmatch(WORKER_ID, m) for m in members)
        or meta["worker"] not in members
    ):
        return "bad members"
    if not 0 < meta["numel"] <= max_numel:
        return "bad numel"
    return ""


# ---------------------------------------------------------------------- the relay's aggregation
class Aggregator:
    """Checks and aggregates frames exactly like a worker in virtual-clock mode (outer.combine_frames,
    then the relay's re-encoding), so both modes give the same bits."""

    def __init__(
        self, codec: str, block: int, topk_fraction: float, *, secret: bytes, rule: str = "mean"
    ) -> None:
        from dispersal.testbed.codecs import make_codec
        from dispersal.testbed.outer import NesterovOuter, OuterStep, make_rule

        self.codec = make_codec(codec, block=block, topk_fraction=topk_fraction)
        self.secret = secret
        self.outer = OuterStep(make_rule(rule), NesterovOuter(0))  # only its rule is used here

    def __call__(
        self, frames: Sequence[tuple[str, bytes | bytearray]], numel: int, key: tuple[int, int, int]
    ) -> tuple[bytes, dict[str, list[Any]], bytes]:
        """-> (headers of every frame in worker order, per-frame lists ok/why/trusted/clipped, encoded
        aggregate (empty if nothing is left))."""
        import torch

        from dispersal.testbed.outer import combine_frames
        from dispersal.testbed.wire import frame_context

        gen, rnd, part = key
        agg, infos = combine_frames(
            frames,
            secret=self.secret,
            context=lambda sender: frame_context(gen, rnd, part, sender),
            codec=self.codec,
            numel=numel,
            payload_bytes=self.codec.nbytes(numel),
            outer=self.outer,
        )
        headers = b"".join(torch.tensor(i["header"], dtype=torch.float64).numpy().tobytes() for i in infos)
        lists = {k: [i[k] for i in infos] for k in ("ok", "why", "trusted", "clipped")}
        if agg is None:
            return headers, lists, b""
        return headers, lists, self.codec.encode_average(agg).numpy().tobytes()


# ---------------------------------------------------------------------- the relay
@dataclass
class _Round:
    members: list[str]
    numel: int
    frames: dict[str, tuple[bytearray, Any]] = field(default_factory=dict)
    first_byte_s: float = math.inf
    all_in_s: float = 0.0


#: How long a stopping relay waits for its cancelled connection handlers to finish, s (a bound on a
#: handler that ignores its cancellation; they finish in a loop turn or two).
RELAY_DRAIN_S = 5.0
#: Cancel-and-wait passes over the relay's remaining tasks when it stops.
RELAY_DRAIN_PASSES = 3


class Relay:
    """The relay server (asyncio, one thread). Start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(
        self,
        spec: RelaySpec,
        aggregator: Aggregator,
        *,
        host: str = "127.0.0.1",
        log: Path | None = None,
        on_reject: Callable[[str, str], None] | None = None,
        max_gen: Callable[[], int] | None = None,
        max_numel: int = 1 << 30,
    ) -> None:
        """``on_reject(claimed worker, why)``: an unauthenticated or malformed message (the connection
        is closed); ``max_gen()``: the newest generation really published (a higher claim is refused);
        ``max_numel``: the largest update (values) a frame may carry."""
        self.spec, self.aggregate, self.host, self.log = spec, aggregator, host, log
        self.secret = aggregator.secret
        self.on_reject, self.max_gen, self.max_numel = on_reject, max_gen, max_numel
        self.max_body = 8 * max_numel + (1 << 16)  # the largest codec payload + header + tag, with room
        self.rejected: list[tuple[str, str]] = []
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
            # Let every cancelled connection run its finally (close its writer) before the loop
            # closes: one loop turn was not always enough, and a handler left pending is destroyed
            # later with "Event loop is closed". A cancelled handler may start others (a round's
            # aborts): a few passes, each bounded in case a handler ignores the cancel.
            for _ in range(RELAY_DRAIN_PASSES):
                tasks = asyncio.all_tasks(loop)
                if not tasks:
                    break
                for task in tasks:
                    task.cancel()
                loop.run_until_complete(asyncio.wait(tasks, timeout=RELAY_DRAIN_S))
            loop.run_until_complete(loop.shutdown_asyncgens())
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
        """Challenge, hello, then the worker's messages. Until the hello has answered this
        connection's nonce the peer is a stranger: at most MAX_HELLO_BYTES of it are read, nothing of
        it is shaped or counted on any worker's emulated link, and its refusal aborts no round."""
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        worker = None
        try:
            nonce = secrets.token_bytes(NONCE_BYTES)
            writer.write(encode_message({"challenge": nonce.hex()}, secret=self.secret))
            await writer.drain()
            try:
                worker = await asyncio.wait_for(self._hello(reader, nonce), HELLO_TIMEOUT_S)
            except TimeoutError:
                self._reject("?", f"no hello within {HELLO_TIMEOUT_S:g} s")
                return
            if worker is None:
                return
            self.writers[worker] = writer
            self.closed.discard(worker)
            while True:
                got = await self._read_shaped(reader, worker)
                if got is None:
                    return
                meta, body, first_s = got
                why = _meta_problem(meta, self.max_numel)
                if not why and self.max_gen is not None:
                    why = "generation not published" if meta["gen"] > self.max_gen() else ""
                if why:
                    self._reject(worker, why)
                    return
                self._accept(meta, body, first_s, writer)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            return
        finally:
            if worker is not None:
                if self.writers.get(worker) is writer:
                    self.closed.add(worker)
                self._abort_rounds_of(worker, writer, "connection of " + worker + " closed")
            writer.close()

    async def _hello(self, reader: asyncio.StreamReader, nonce: bytes) -> str | None:
        """The connection's first message: a hello of at most MAX_HELLO_BYTES, no body, whose tag
        verifies and whose nonce is this connection's. Returns the worker, or None (reported)."""
        try:
            prefix = await reader.readexactly(PREFIX.size)
        except asyncio.IncompleteReadError:
            return None
        magic, meta_len, body_len = PREFIX.unpack(prefix)
        if magic != MAGIC or body_len or meta_len > MAX_HELLO_BYTES:
            self._reject("?", "expected a hello (bad magic, a body, or too long): closed unread")
            return None
        raw = await reader.readexactly(meta_len + MAC_BYTES)
        meta_raw, tag = raw[:meta_len], raw[meta_len:]
        if not verify(self.secret, tag, b"relay", meta_raw, b""):
            self._reject(_claimed(meta_raw), "unauthenticated hello")
            return None
        try:
            meta = parse_meta(meta_raw)
        except ValueError as exc:
            self._reject("?", f"malformed hello: {exc}"[:120])
            return None
        why = hello_problem(meta, nonce, None if self.max_gen is None else self.max_gen())
        if why:
            self._reject(_claimed(meta_raw), why)
            return None
        return str(meta["worker"])

    def _reject(self, claimed: str, why: str) -> None:
        self.rejected.append((claimed[:40], why))
        if self.on_reject is not None:
            self.on_reject(claimed[:40], why)

    async def _read_shaped(
        self, reader: asyncio.StreamReader, worker: str
    ) -> tuple[dict[str, Any], bytearray, float] | None:
        """Read one message of ``worker`` (its connection answered the challenge) through its uplink;
        returns when its last segment is delivered. None when the connection closed, or (after
        reporting it) when the message is too large, malformed, claims another worker or fails its tag."""
        loop = asyncio.get_running_loop()
        try:
            prefix = await reader.readexactly(PREFIX.size)
        except asyncio.IncompleteReadError:
            return None
        first_s = loop.time()
        try:
            meta_len, body_len = _split(prefix, self.max_body)
            meta_raw = await reader.readexactly(meta_len)
            meta = parse_meta(meta_raw)
        except (ConnectionError, ValueError) as exc:
            self._reject(worker, f"malformed message: {exc}"[:120])
            return None
        if not isinstance(meta, dict) or meta.get("worker") != worker:
            self._reject(worker, "connection used by another worker")
            return None
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
        tag = await reader.readexactly(MAC_BYTES)
        last = up.schedule(MAC_BYTES, loop.time())[-1][0]
        wait = last - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        if not verify(self.secret, tag, b"relay", meta_raw, body):
            self._reject(worker, "unauthenticated message")
            return None
        return meta, body, first_s

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
            frames = [(m, rnd.frames[m][0]) for m in rnd.members]
            headers, lists, agg = self.aggregate(frames, rnd.numel, key)
        except Exception as exc:  # a bug in a rule must fail the round, not the relay
            self.rounds[key] = rnd
            self._abort(key, f"relay could not aggregate: {exc}"[:200])
            return
        meta = {"gen": key[0], "round": key[1], "part": key[2], "status": "ok", **lists}
        body = headers + agg + struct.pack("!I", zlib.crc32(agg))
        msg = encode_message(meta, body, secret=self.secret)
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
            writer.write(encode_message(reply, secret=self.secret))

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


def _claimed(meta_raw: bytes | bytearray) -> str:
    """The worker a (refused) hello names, for the log only: never parsed as JSON (it is unverified)."""
    import re

    m = re.search(rb'"worker":"(w\d{1,6})"', bytes(meta_raw))
    return m.group(1).decode() if m else "?"


def start_relay(
    cfg: Any,
    out: Path,
    *,
    secret: bytes,
    fresh: bool = True,
    host: str = "127.0.0.1",
    max_gen: Callable[[], int] | None = None,
    max_numel: int = 1 << 30,
) -> Relay:
    """The relay for a TestbedConfig (real-link mode), logging one line per round to OUT/relay.jsonl
    (workers log theirs to OUT/netlink/<worker>.jsonl).

    It runs as a thread of the calling (supervisor) process and sets torch to one thread there, as
    every worker does: with the default pool, averaging 4 frames took 150 ms instead of 3 ms while the
    workers kept the 2 cores busy.
    """
    import torch

    torch.set_num_threads(1)
    from dispersal.testbed.events import log_event

    relay = Relay(
        RelaySpec.from_config(cfg),
        Aggregator(cfg.codec, cfg.block, cfg.topk_fraction, secret=secret, rule=cfg.aggregator),
        host=host,
        log=out / "relay.jsonl",
        on_reject=lambda w, why: log_event(out, worker="relay", event="relay_rejected", claimed=w, why=why),
        max_gen=max_gen,
        max_numel=max_numel,
    )
    if fresh:  # a new run (not --resume): the per-sync logs start empty
        (out / "relay.jsonl").unlink(missing_ok=True)
        for f in (out / "netlink").glob("*.jsonl"):
            f.unlink()
    relay.start()
    return relay
