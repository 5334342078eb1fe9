"""Replays and strangers on real sockets (issue 35): captured heartbeats, a captured relay hello,
unauthenticated bytes on the relay, deeply nested metadata, a replayed incarnation counter, the trim
count. Each test fails on the code before issue 35 (see the report in CHANGELOG.md)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from dispersal.testbed.membership import Heartbeat  # noqa: E402
from dispersal.testbed.netlink import PREFIX, Aggregator, Relay, RelaySpec, encode_message  # noqa: E402
from dispersal.testbed.relaylink import RelayLink  # noqa: E402
from dispersal.testbed.robust import TrimmedMeanAggregator  # noqa: E402
from dispersal.testbed.secure import (  # noqa: E402
    MAC_BYTES,
    SignedStore,
    listen_store,
)
from dispersal.testbed.shaper import Direction  # noqa: E402
from dispersal.testbed.supervisor import Coordinator  # noqa: E402
from dispersal.testbed.wire import H_CRC, H_INDEX, HEADER_LEN, frame_context, seal_frame  # noqa: E402

pytestmark = pytest.mark.torch

SECRET = bytes(range(32))


def _client(port: int) -> Any:
    """A store client that knows no secret: any local process can be one."""
    return torch.distributed.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))


# ---------------------------------------------------------------------- heartbeats
class _Freezable:
    """The heartbeat thread's store connection; ``frozen`` blocks its writes for ever, as SIGSTOP
    freezes a worker process (its heartbeat thread included)."""

    def __init__(self, store: SignedStore) -> None:
        self.store, self.frozen = store, threading.Event()

    def set(self, key: str, value: str | bytes) -> None:
        while self.frozen.is_set():
            time.sleep(3600)
        self.store.set(key, value)


def _heartbeat(store: Any, worker: str) -> Any:
    import inspect

    if "incarnation" in inspect.signature(Heartbeat).parameters:
        return Heartbeat(store, worker, incarnation=0, generation=lambda: 1)
    return Heartbeat(store, worker)  # before issue 35


@pytest.mark.slow
def test_replayed_heartbeats_do_not_keep_a_frozen_worker_in_the_group() -> None:
    """Two captured signed beats written back in turn (no secret needed) used to count as fresh beats
    for ever (the value changed); now a beat counts only if its signed counter rises."""
    master = listen_store("127.0.0.1", 0)
    store = SignedStore(master, SECRET)
    store.set("joinreq/w0", "0")
    coord = Coordinator(store, ["w0"], heartbeat_timeout_s=1.0)
    conn = _Freezable(SignedStore(_client(master.port), SECRET))
    _heartbeat(conn, "w0").start()
    captured: list[bytes] = []
    t = 100.0
    while len(captured) < 2:  # the live worker beats; a local process records two beats
        _until(lambda: master.check(["hb/w0"]) and master.get("hb/w0") not in captured)
        captured.append(master.get("hb/w0"))
        assert coord.alive(t) == ["w0"]
        t += 0.3
    conn.frozen.set()  # SIGSTOP: no more beats
    time.sleep(0.4)  # a write already under way lands
    frozen_at = t
    assert coord.alive(t) == ["w0"]
    # The attacker writes the captured beats back, alternately (they stay genuinely signed).
    attacker = _client(master.port)
    for i in range(10):
        t += 0.3
        attacker.set("hb/w0", captured[i % 2])
        alive = coord.alive(t)
        if t - frozen_at >= 1.0:
            assert alive == [], f"kept alive by replayed beats {t - frozen_at:.1f} s after the last real one"


def test_a_beat_of_another_incarnation_or_an_older_generation_is_no_beat() -> None:
    from dispersal.testbed.membership import heartbeat_value

    master = listen_store("127.0.0.1", 0)
    store = SignedStore(master, SECRET)
    store.set("joinreq/w0", "1")  # incarnation 1 is registered
    coord = Coordinator(store, ["w0"], heartbeat_timeout_s=1.0)
    store.set("hb/w0", heartbeat_value(1, 5, 3))
    assert coord.alive(0.0) == ["w0"]
    store.set("hb/w0", heartbeat_value(0, 50, 3))  # the dead incarnation 0's beat, replayed
    assert coord.alive(0.9) == ["w0"] and coord.alive(1.1) == []
    store.set("hb/w0", heartbeat_value(1, 6, 2))  # counter rises but the generation went back
    assert coord.alive(1.2) == []
    store.set("hb/w0", heartbeat_value(1, 7, 3))
    assert coord.alive(1.3) == ["w0"]


def test_a_replayed_incarnation_counter_does_not_give_two_processes_one_incarnation() -> None:
    try:
        from dispersal.testbed.membership import claim_incarnation
    except ImportError:  # before issue 35: Worker.__init__ took the unsigned counter's value

        def claim_incarnation(store: SignedStore, worker: str) -> int:
            return int(store.raw.add(f"incarnation/{worker}", 1)) - 1

    master = listen_store("127.0.0.1", 0)
    first = claim_incarnation(SignedStore(_client(master.port), SECRET), "w1")
    second = claim_incarnation(SignedStore(_client(master.port), SECRET), "w1")
    assert (first, second) == (0, 1)
    _client(master.port).set("incarnation/w1", "0")  # the unsigned counter written back
    third = claim_incarnation(SignedStore(_client(master.port), SECRET), "w1")
    assert third == 2  # not 0 again: the signed claims 0 and 1 are taken


# ---------------------------------------------------------------------- the relay
def _frame(index: int, values: Any, gen: int = 1, round_index: int = 0) -> bytes:
    import zlib

    payload = values.float().contiguous().view(torch.uint8)
    h = torch.zeros(HEADER_LEN, dtype=torch.float64)
    h[H_CRC], h[H_INDEX] = zlib.crc32(payload.numpy()), index
    return seal_frame(h, payload, SECRET, frame_context(gen, round_index, 0, f"w{index}")).numpy().tobytes()


class _Tap:
    """A man in the middle on loopback that forwards a connection to the relay and keeps a copy of
    what the client sent: how a local process captures a worker's hello."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent = bytearray()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        client, _ = self.listener.accept()
        server = socket.create_connection(self.target)
        for src, dst, keep in ((client, server, True), (server, client, False)):
            threading.Thread(target=self._pump, args=(src, dst, keep), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, keep: bool) -> None:
        try:
            while chunk := src.recv(65536):
                if keep:
                    self.sent += chunk
                dst.sendall(chunk)
        except OSError:
            pass

    def first_message(self) -> bytes:
        _, meta_len, body_len = PREFIX.unpack(bytes(self.sent[: PREFIX.size]))
        return bytes(self.sent[: PREFIX.size + meta_len + body_len + MAC_BYTES])


def _until(cond: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def _drain_until_closed(s: socket.socket) -> None:
    s.settimeout(10)
    while s.recv(65536):
        pass


def test_a_replayed_hello_is_refused_and_aborts_no_round() -> None:
    relay = Relay(RelaySpec(), Aggregator("none", 64, 0.01, secret=SECRET), max_gen=lambda: 1)
    host, port = relay.start()
    tap = _Tap(host, port)
    w0 = RelayLink(host, port, "w0", 10.0, secret=SECRET)
    w1 = RelayLink("127.0.0.1", tap.port, "w1", 10.0, secret=SECRET)  # w1's traffic is captured
    try:
        w0.connect()
        w1.connect()
        _until(lambda: "w1" in relay.writers and len(tap.sent) > PREFIX.size)
        got: dict[str, Any] = {}
        t0 = threading.Thread(
            target=lambda: got.setdefault(
                "w0",
                w0.exchange(
                    _frame(0, torch.ones(4)), gen=1, round_index=0, part=0, numel=4, members=["w0", "w1"]
                ),
            )
        )
        t0.start()
        _until(lambda: any("w0" in r.frames for r in relay.rounds.values()))
        # The attacker replays w1's captured hello on its own connection, then hangs up.
        with socket.create_connection((host, port)) as s:
            s.sendall(tap.first_message())
            _drain_until_closed(s)
        _until(lambda: bool(relay.rejected))
        assert any("challenge" in why for _, why in relay.rejected), relay.rejected
        # w1 uploads as usual: the round was not aborted, both members get the aggregate.
        rep1 = w1.exchange(
            _frame(1, 3 * torch.ones(4)), gen=1, round_index=0, part=0, numel=4, members=["w0", "w1"]
        )
        t0.join(10)
        assert rep1.ok == [True, True] and got["w0"].ok == [True, True]
        assert torch.equal(
            torch.frombuffer(bytearray(rep1.aggregate), dtype=torch.float32), 2 * torch.ones(4)
        )
    finally:
        w0.close()
        w1.close()
        relay.stop()


def test_unauthenticated_bytes_are_not_charged_to_a_workers_link() -> None:
    """A stranger claiming w0 sends 100 kB with a wrong tag over w0's 1 Mbit/s emulated uplink: it
    used to be shaped (0.8 s of w0's link, counted as w0's bytes) before the tag was checked."""
    slow = RelaySpec(up=Direction(bits_per_s=1e6))
    relay = Relay(slow, Aggregator("none", 64, 0.01, secret=SECRET))
    host, port = relay.start()
    try:
        meta = {"worker": "w0", "gen": 1, "round": 0, "part": 0, "numel": 25_000, "members": ["w0"]}
        for msg in (
            encode_message(meta, bytes(100_000), secret=bytes(32)),  # a frame, wrong secret
            encode_message({"worker": "w0", "hello": True}, bytes(100_000), secret=bytes(32)),  # fat hello
        ):
            with socket.create_connection((host, port)) as s:
                with contextlib.suppress(OSError):  # the relay may close before all is sent
                    s.sendall(msg)
                _drain_until_closed(s)
        assert relay.counters().get("w0", {}).get("wire_bytes_up", 0) == 0
        assert "w0" not in relay.up  # no pipe was even made for the claimed worker
        assert len(relay.rejected) == 2
    finally:
        relay.stop()


def test_deeply_nested_metadata_is_refused_cleanly(caplog: pytest.LogCaptureFixture) -> None:
    """``[`` x 60,000 as metadata: from a stranger (first message) and from an authenticated member."""
    relay = Relay(RelaySpec(), Aggregator("none", 64, 0.01, secret=SECRET))
    host, port = relay.start()
    caplog.set_level(logging.ERROR, logger="asyncio")
    nested = b"[" * 60_000
    try:
        with socket.create_connection((host, port)) as s:
            s.sendall(PREFIX.pack(b"DSPL", len(nested), 0) + nested + bytes(MAC_BYTES))
            _drain_until_closed(s)
        member = RelayLink(host, port, "w1", 10.0, secret=SECRET)
        member.connect()
        from dispersal.testbed.secure import mac

        assert member.sock is not None
        member.sock.sendall(
            PREFIX.pack(b"DSPL", len(nested), 0) + nested + mac(SECRET, b"relay", nested, b"")
        )
        _drain_until_closed(member.sock)
        member.close()
        _until(lambda: len(relay.rejected) == 2)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
            r.getMessage() for r in caplog.records
        ]
        # The relay still serves a well-formed round.
        ok = RelayLink(host, port, "w0", 10.0, secret=SECRET).exchange(
            _frame(0, torch.ones(4)), gen=1, round_index=0, part=0, numel=4, members=["w0"]
        )
        assert ok.ok == [True]
    finally:
        relay.stop()


# ---------------------------------------------------------------------- aggregation arithmetic
def test_trim_count_is_rounded_up_trim_025_of_5_drops_2_each_side() -> None:
    """ceil(0.25 x 5) = 2 values dropped at each end: the median of 5 (rounded down, 1: the mean of
    the middle 3, which lets one of two colluding outliers through)."""
    ups = [torch.tensor([v]) for v in (1.0, 2.0, 3.0, 100.0, 1000.0)]
    agg, verdicts = TrimmedMeanAggregator(trim=0.25)(ups)
    assert agg.tolist() == [3.0]  # floor would give (2 + 3 + 100) / 3 = 35
    assert [v.weight for v in verdicts] == [0.0, 0.0, 1.0, 0.0, 0.0]


def test_heartbeat_thread_beats_with_a_rising_counter(tmp_path: Path) -> None:
    from dispersal.testbed.membership import parse_heartbeat

    master = listen_store("127.0.0.1", 0)
    store = SignedStore(master, SECRET)
    hb = Heartbeat(SignedStore(_client(master.port), SECRET), "w2", incarnation=4, generation=lambda: 7)
    hb.start()
    seen: list[tuple[int, int, int]] = []
    _until(
        lambda: (
            (b := parse_heartbeat(store.get("hb/w2"))) is not None
            and (seen.append(b) or (len(seen) > 1 and seen[-1][1] > seen[0][1]))  # type: ignore[func-returns-value]
        )
    )
    assert seen[-1][0] == 4 and seen[-1][2] == 7
    hb.stop()


def test_a_replayed_generation_is_restored_by_the_coordinator_within_a_tick() -> None:
    master = listen_store("127.0.0.1", 0)
    store = SignedStore(master, SECRET)
    coord = Coordinator(store, ["w0"], heartbeat_timeout_s=1.0)
    coord.registered["w0"] = 0
    coord.publish(["w0"])
    old = master.get("genv")  # generation 1, genuinely signed
    coord.publish(["w0"])
    _client(master.port).set("genv", old)  # written back by a local process
    assert store.get_int("genv") == 1
    coord.tick(expected_at_start=1)
    assert store.get_int("genv") == 2


def test_a_rendezvous_moves_on_when_a_newer_generation_is_published(tmp_path: Path) -> None:
    """Generation 2 = [w1, w0], then 3 = [w1, w0, w2] (two joiners a tick apart): w1 waiting at
    rendezvous 2 for a w0 that went on to 3 gives up (it used to wait until the run timeout)."""
    import json

    from dispersal.testbed.membership import Membership

    master = listen_store("127.0.0.1", 0)
    store = SignedStore(master, SECRET)
    for g, members in ((2, ["w1", "w0"]), (3, ["w1", "w0", "w2"])):
        store.set(f"members/{g}", json.dumps(members))
        store.set(f"incarnations/{g}", json.dumps(dict.fromkeys(members, 0)))
    store.set("genv", "3")
    ms = Membership(SignedStore(_client(master.port), SECRET), "w1", 0, tmp_path, run_timeout_s=30.0)
    t0 = time.monotonic()
    assert ms.barrier("rdv/2", ["w1", "w0"], gen=2, newer_aborts=True) is False
    assert time.monotonic() - t0 < 5.0  # not the 30 s run timeout
