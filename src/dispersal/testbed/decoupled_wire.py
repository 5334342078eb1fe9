"""Decoupled DiLoCo's wire on real sockets: the syncer's server (a thread of the supervisor) and a
learner's client, one authenticated request / reply at a time on 127.0.0.1.

A message is ``prefix (magic, metadata length, body length) + JSON metadata + body + HMAC-SHA256 tag``
over (metadata, body) under the run secret with the context ``decoupled``. Both sides refuse, before
reading them, a metadata block over ``MAX_META_BYTES`` and a body over what the protocol can carry
(an update frame of the run's exact size up, one global-state bundle down); a bad tag, magic or
metadata closes the connection and is logged (``syncer_rejected``). Nothing is unpickled.

Requests (learner -> syncer)::

    {"op": "push", "worker", "incarnation", "seq", "base", "have"}  body: one update frame (wire.py)
    {"op": "pull", "worker", "incarnation", "have"}                 body: empty

Reply: ``{"ok", "why", "version"}`` and, when ``version > have``, a state bundle (wire.pack_bundle,
context ``global/<version>/<worker>``) holding the global weights; the learner checks shape and
finiteness before they touch its model. A push never waits for other learners: the syncer keeps
the update, merges at once if that completes a quorum, and replies with the newest global state.
"""

from __future__ import annotations

import json
import queue
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from dispersal.testbed.secure import MAC_BYTES, mac, verify
from dispersal.testbed.wire import HEADER_BYTES, TAGS_BYTES, pack_bundle, unpack_bundle

MAGIC = b"DSDC"
PREFIX = struct.Struct("!4sII")
MAX_META_BYTES = 4096
"""Largest metadata a message may announce (about 120 bytes in practice)."""
BUNDLE_SLACK_BYTES = 1 << 16
"""Room for a state bundle's manifest and tag beyond its tensor bytes."""
TICK_S = 0.02
"""How often the server looks for a merge that a deadline (not a push) makes due."""


class ProtocolError(ConnectionError):
    """A message that cannot be trusted or parsed (the connection is closed)."""


def encode(meta: dict[str, Any], body: bytes, secret: bytes) -> bytes:
    m = json.dumps(meta, separators=(",", ":")).encode()
    return b"".join([PREFIX.pack(MAGIC, len(m), len(body)), m, body, mac(secret, b"decoupled", m, body)])


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ProtocolError("connection closed")
        buf += chunk
    return bytes(buf)


def read_message(sock: socket.socket, secret: bytes, max_body: int) -> tuple[dict[str, Any], bytes]:
    """One message: sizes checked before reading, tag checked before parsing. ProtocolError if bad."""
    magic, meta_len, body_len = PREFIX.unpack(_read_exact(sock, PREFIX.size))
    if magic != MAGIC:
        raise ProtocolError("bad magic")
    if meta_len > MAX_META_BYTES or body_len > max_body:
        raise ProtocolError(f"message too large ({meta_len} + {body_len} bytes)")
    m = _read_exact(sock, meta_len)
    body = _read_exact(sock, body_len)
    tag = _read_exact(sock, MAC_BYTES)
    if not verify(secret, tag, b"decoupled", m, body):
        raise ProtocolError("unauthenticated")
    try:
        meta = json.loads(m)
    except ValueError:
        raise ProtocolError("bad metadata") from None
    if not isinstance(meta, dict):
        raise ProtocolError("bad metadata")
    return meta, body


def _int(meta: dict[str, Any], key: str, low: int = -1) -> int:
    v = meta.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v < 2**53:
        raise ProtocolError(f"bad {key}")
    return v


# ---------------------------------------------------------------------- the server (supervisor side)
class SyncServer:
    """Serves one :class:`syncer.Syncer` on 127.0.0.1 (threads; one lock around the syncer).

    ``on_merge(info)`` is called (outside the lock) after every merge; ``log(**fields)`` gets refused
    messages and updates."""

    def __init__(
        self,
        syncer: Any,
        *,
        secret: bytes,
        io_timeout_s: float,
        on_merge: Callable[[dict[str, Any]], None],
        log: Callable[..., None],
        host: str = "127.0.0.1",
        max_connections: int = 64,
    ) -> None:
        self.syncer, self.secret, self.on_merge, self.log = syncer, secret, on_merge, log
        self.lock = threading.Lock()
        self.max_up = HEADER_BYTES + syncer.codec.nbytes(syncer.numel) + TAGS_BYTES
        self._stop = threading.Event()
        self._merged: queue.Queue[dict[str, Any]] = queue.Queue()
        # Connections served at once: a learner holds one; more are refused (a local flood is bounded).
        self._slots = threading.BoundedSemaphore(max_connections)
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                if not outer._slots.acquire(blocking=False):
                    outer.log(event="syncer_rejected", claimed="?", why="too many connections")
                    return
                try:
                    self.request.settimeout(io_timeout_s)
                    outer._serve(self.request)
                finally:
                    outer._slots.release()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server((host, 0), Handler)
        address = self.server.server_address
        self.host, self.port = str(address[0]), int(address[1])
        self._threads = [
            threading.Thread(target=self.server.serve_forever, args=(0.05,), name="syncer", daemon=True),
            threading.Thread(target=self._tick, name="syncer-tick", daemon=True),
        ]

    def start(self) -> SyncServer:
        for t in self._threads:
            t.start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self.merge_if_due()
            self._drain()

    def merge_if_due(self, force: bool = False) -> None:
        """Merge if due; the merge's record (with a copy of the new global weights) is queued for
        ``on_merge``, which runs on the tick thread: a learner's reply never waits for an evaluation."""
        with self.lock:
            info = self.syncer.merge(time.monotonic(), force=force)
            if info is not None:
                info["theta"] = self.syncer.theta.clone()
                self._merged.put(info)

    def _drain(self) -> None:
        while True:
            try:
                info = self._merged.get_nowait()
            except queue.Empty:
                return
            self.on_merge(info)

    def _serve(self, sock: socket.socket) -> None:
        who = "?"
        try:
            while not self._stop.is_set():
                meta, body = read_message(sock, self.secret, self.max_up)
                who = str(meta.get("worker"))[:16]
                sock.sendall(self._answer(meta, body))
        except ProtocolError as exc:
            if str(exc) != "connection closed":
                self.log(event="syncer_rejected", claimed=who, why=str(exc)[:120])
        except OSError:
            return  # a killed learner resets its connection: its island stops, nothing else does

    def _answer(self, meta: dict[str, Any], body: bytes) -> bytes:
        op, worker = meta.get("op"), meta.get("worker")
        have = _int(meta, "have")
        why = ""
        if op == "push":
            inc, seq, base = _int(meta, "incarnation", 0), _int(meta, "seq", 0), _int(meta, "base", 0)
            with self.lock:
                why = self.syncer.offer(str(worker), inc, seq, base, body, time.monotonic())
            if why:
                self.log(event="rejected_update", bad=str(worker)[:16], why=why)
            else:
                self.merge_if_due()
        elif op != "pull":
            raise ProtocolError("bad op")
        with self.lock:
            version = self.syncer.version
            theta = self.syncer.theta.clone() if version > have else None
        out = b""
        if theta is not None:
            ctx = f"global/{version}/{worker}".encode()
            out = pack_bundle({"version": version, "global": theta}, self.secret, ctx)
        return encode({"ok": not why, "why": why, "version": version}, out, self.secret)

    def close(self) -> None:
        """Stop serving; merges still queued for ``on_merge`` are recorded first."""
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
        self._threads[1].join(5.0)
        self._drain()


# ---------------------------------------------------------------------- the client (learner side)
class SyncClient:
    """A learner's connection to the syncer; every reply is checked before it is used."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        worker: str,
        incarnation: int,
        secret: bytes,
        numel: int,
        timeout_s: float,
    ) -> None:
        self.worker, self.incarnation, self.secret, self.numel = worker, incarnation, secret, numel
        self.max_down = 4 * numel + BUNDLE_SLACK_BYTES
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.seq = 0

    def _call(
        self, meta: dict[str, Any], body: bytes
    ) -> tuple[dict[str, Any], tuple[int, torch.Tensor] | None]:
        self.sock.sendall(encode(meta, body, self.secret))
        reply, data = read_message(self.sock, self.secret, self.max_down)
        version = _int(reply, "version", 0)
        if not isinstance(reply.get("ok"), bool) or not isinstance(reply.get("why"), str):
            raise ProtocolError("bad reply")
        if not data:
            return reply, None
        state = unpack_bundle(data, self.secret, f"global/{version}/{self.worker}".encode())
        g = state.get("global") if isinstance(state, dict) else None
        if (
            not isinstance(g, torch.Tensor)
            or g.dtype != torch.float32
            or g.shape != (self.numel,)
            or state.get("version") != version
            or not bool(torch.isfinite(g).all())
        ):
            raise ProtocolError("bad global state")
        return reply, (version, g.clone())

    def pull(self, have: int) -> tuple[int, torch.Tensor] | None:
        """The newest global state if it is newer than ``have``."""
        return self._call(
            {"op": "pull", "worker": self.worker, "incarnation": self.incarnation, "have": have}, b""
        )[1]

    def push(self, frame: bytes, base: int, have: int) -> tuple[str, int, tuple[int, torch.Tensor] | None]:
        """Deliver one update frame (sequence number ``self.seq``); returns (why refused or "", newest
        version, newer global state or None)."""
        meta = {
            "op": "push",
            "worker": self.worker,
            "incarnation": self.incarnation,
            "seq": self.seq,
            "base": base,
            "have": have,
        }
        self.seq += 1
        reply, state = self._call(meta, frame)
        return str(reply["why"]), int(reply["version"]), state

    def close(self) -> None:
        self.sock.close()
