"""Decoupled DiLoCo's syncer with fakes (no processes): quorum, deadline, merge rules, staleness,
replays, and refusal of non-finite, oversize, forged or misaddressed updates. Plus the socket
protocol on 127.0.0.1 (one server thread, one client) and the config's new fields."""

from __future__ import annotations

import json
import math
import socket
import zlib
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import Tensor  # noqa: E402

from dispersal.model.inputs.errors import InputError  # noqa: E402
from dispersal.testbed.codecs import make_codec  # noqa: E402
from dispersal.testbed.config import TestbedConfig  # noqa: E402
from dispersal.testbed.decoupled_wire import PREFIX, SyncClient, SyncServer, encode  # noqa: E402
from dispersal.testbed.learner import mix  # noqa: E402
from dispersal.testbed.outer import OuterStep, make_rule  # noqa: E402
from dispersal.testbed.syncer import PENDING_PER_LEARNER, Syncer, update_context  # noqa: E402
from dispersal.testbed.wire import H_CRC, H_INDEX, H_LOSS, HEADER_LEN, seal_frame  # noqa: E402

pytestmark = pytest.mark.torch
SECRET = bytes(range(32))
N = 6


class FakeOuter:
    """Records each merged update and moves theta by exactly it (lr 1, no momentum)."""

    def __init__(self) -> None:
        self.steps: list[list[float]] = []

    def step(self, theta: Tensor, delta: Tensor, index: Tensor | None = None) -> None:
        self.steps.append(delta.tolist())
        theta.sub_(delta)

    def state_dict(self) -> dict[str, Tensor]:
        return {}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        return None


def make(
    quorum: int = 2, deadline_s: float = 5.0, max_staleness: int = 2, rule: str = "mean"
) -> tuple[Syncer, FakeOuter]:
    fake = FakeOuter()
    s = Syncer(
        torch.zeros(N),
        OuterStep(make_rule(rule), fake),
        secret=SECRET,
        codec=make_codec("none"),
        workers=3,
        quorum=quorum,
        deadline_s=deadline_s,
        max_staleness=max_staleness,
    )
    return s, fake


def frame(values: list[float], sender: str, inc: int, seq: int, base: int, secret: bytes = SECRET) -> bytes:
    payload = make_codec("none").encode(torch.tensor(values, dtype=torch.float32))
    h = torch.zeros(HEADER_LEN, dtype=torch.float64)
    h[H_CRC], h[H_LOSS], h[H_INDEX] = zlib.crc32(payload.numpy()), 3.0, int(sender[1:])  # type: ignore[arg-type]
    return bytes(seal_frame(h, payload, secret, update_context(sender, inc, seq, base)).numpy().tobytes())


def offer(
    s: Syncer, values: list[float], sender: str, seq: int, base: int = 0, now: float = 0.0, inc: int = 0
) -> str:
    return s.offer(sender, inc, seq, base, frame(values, sender, inc, seq, base), now)


def test_quorum_merges_the_mean_and_versions() -> None:
    s, fake = make(quorum=2)
    assert offer(s, [1.0] * N, "w0", 0) == ""
    assert s.merge(0.1) is None  # one learner of a quorum of two: not due
    assert offer(s, [3.0] * N, "w1", 0) == ""
    info = s.merge(0.2)
    assert info is not None and info["version"] == 1 and info["senders"] == ["w0", "w1"]
    assert info["merged_updates"] == 2 and info["staleness"] == [0, 0] and info["weights"] == [0.5, 0.5]
    assert fake.steps == [[2.0] * N]  # the mean of 1 and 3
    assert s.theta.tolist() == [-2.0] * N and s.pending == []
    assert s.merge(0.3) is None  # nothing pending


def test_two_updates_from_one_learner_are_not_a_quorum() -> None:
    s, _ = make(quorum=2)
    offer(s, [1.0] * N, "w0", 0)
    offer(s, [1.0] * N, "w0", 1)
    assert not s.due(0.5)


def test_deadline_merges_without_a_quorum() -> None:
    s, fake = make(quorum=3, deadline_s=2.0)
    offer(s, [1.0] * N, "w0", 0, now=10.0)
    offer(s, [5.0] * N, "w2", 0, now=11.0)
    assert s.merge(11.9) is None  # oldest has waited 1.9 s < 2 s
    info = s.merge(12.0)
    assert info is not None and info["waited_s"] == pytest.approx(2.0) and fake.steps == [[3.0] * N]


def test_norm_preserving_keeps_the_mean_norm() -> None:
    """Orthogonal updates of norm 2 each: the mean has norm sqrt(2); the rule rescales it to 2."""
    s, fake = make(quorum=2, rule="norm_preserving")
    offer(s, [2.0, 0, 0, 0, 0, 0], "w0", 0)
    offer(s, [0, 2.0, 0, 0, 0, 0], "w1", 0)
    s.merge(0.0)
    got = torch.tensor(fake.steps[0])
    assert float(got.norm()) == pytest.approx(2.0, rel=1e-6)
    assert got[:2].tolist() == pytest.approx([math.sqrt(2), math.sqrt(2)], rel=1e-6)


def test_stale_and_future_versions() -> None:
    s, _ = make(quorum=1, max_staleness=1)
    for v in range(3):  # three merges: version 3
        assert offer(s, [0.1] * N, "w0", v, base=v) == ""
        s.merge(0.0)
    assert s.version == 3
    assert offer(s, [0.1] * N, "w1", 0, base=2) == ""  # staleness 1: kept
    assert offer(s, [0.1] * N, "w1", 1, base=1).startswith("stale: 2 versions behind")
    assert offer(s, [0.1] * N, "w2", 0, base=4).startswith("version 4 does not exist")
    assert s.rejected == {
        "w1: stale: 2 versions behind (max 1)": 1,
        "w2: version 4 does not exist (newest 3)": 1,
    }


def test_replays_forgeries_and_bad_payloads_are_refused() -> None:
    s, _ = make(quorum=3)
    assert offer(s, [1.0] * N, "w0", 5) == ""
    assert offer(s, [1.0] * N, "w0", 5) == "replayed or out of order"
    assert offer(s, [1.0] * N, "w0", 4) == "replayed or out of order"
    assert offer(s, [1.0] * N, "w0", 0, inc=1) == ""  # a restarted process starts its own sequence
    assert offer(s, [1.0] * N, "w0", 9, inc=0) == "replayed or out of order"  # the dead one is over
    # re-addressed: w0's frame sent as w1's, or as another base version, fails the tag
    assert s.offer("w1", 0, 0, 0, frame([1.0] * N, "w0", 0, 0, 0), 0.0) == "unauthenticated"
    assert s.offer("w2", 0, 0, 0, frame([1.0] * N, "w2", 0, 0, 0, secret=bytes(32)), 0.0) == "unauthenticated"
    assert offer(s, [float("nan")] + [0.0] * (N - 1), "w1", 1) == "non-finite"
    assert offer(s, [float("inf")] * N, "w1", 2) == "non-finite"
    assert offer(s, [1.0] * (N + 1), "w1", 3).startswith("bad length")  # oversize
    assert offer(s, [1.0] * (N - 1), "w1", 4).startswith("bad length")  # undersize
    assert s.offer("w7", 0, 0, 0, frame([1.0] * N, "w7", 0, 0, 0), 0.0) == "unknown sender"
    assert s.offer("w1", 0, -1, 0, b"", 0.0) == "bad seq"
    assert [p.sender for p in s.pending] == ["w0", "w0"]  # only the two good ones are kept


def test_pending_updates_per_learner_are_bounded() -> None:
    """A learner far ahead makes a merge due at PENDING_PER_LEARNER updates; one more is refused."""
    s, _ = make(quorum=3)
    for i in range(PENDING_PER_LEARNER):
        assert not s.due(0.0)
        assert offer(s, [1.0] * N, "w0", i) == ""
    assert s.due(0.0)
    assert offer(s, [1.0] * N, "w0", PENDING_PER_LEARNER) == "queue full"
    assert s.merge(0.0) is not None and s.pending == []


def test_mix_is_streaming_diloco_merge() -> None:
    got = mix(torch.tensor([4.0, 0.0]), torch.tensor([0.0, 2.0]), 0.25)
    assert got.tolist() == [1.0, 1.5]


def test_server_and_client_on_loopback() -> None:
    """One push over a real socket: the reply carries the merged global state (quorum 1), a pull
    with the newest version gets nothing, and a message with a bad tag closes the connection."""
    syncer, _ = make(quorum=1)
    merges: list[dict[str, Any]] = []
    logged: list[dict[str, object]] = []
    server = SyncServer(
        syncer, secret=SECRET, io_timeout_s=5.0, on_merge=merges.append, log=lambda **f: logged.append(f)
    )
    server.start()
    try:
        client = SyncClient(
            server.host, server.port, worker="w1", incarnation=0, secret=SECRET, numel=N, timeout_s=5.0
        )
        first = client.pull(-1)
        assert first is not None and first[0] == 0 and first[1].tolist() == [0.0] * N
        why, version, state = client.push(frame([0.5] * N, "w1", 0, 0, 0), base=0, have=0)
        assert (why, version) == ("", 1) and state is not None and state[1].tolist() == [-0.5] * N
        assert client.pull(1) is None
        client.close()
        with socket.create_connection((server.host, server.port), timeout=5.0) as raw:
            msg = bytearray(
                encode({"op": "pull", "worker": "w2", "incarnation": 0, "have": -1}, b"", bytes(32))
            )
            raw.sendall(bytes(msg))
            assert raw.recv(16) == b""  # closed, nothing answered
        with socket.create_connection((server.host, server.port), timeout=5.0) as raw:
            raw.sendall(PREFIX.pack(b"DSDC", 10, 1 << 30))  # announces a 1 GiB body: refused unread
            assert raw.recv(16) == b""
    finally:
        server.close()  # records the merges still queued
    assert [m["version"] for m in merges] == [1]
    assert merges[0]["theta"].tolist() == [-0.5] * N  # the state it published, for the evaluation
    assert [f["why"] for f in logged] == ["unauthenticated", "message too large (10 + 1073741824 bytes)"]


def test_config_fields() -> None:
    cfg = TestbedConfig(algorithm="decoupled", workers=3, steps=20, inner_steps=10, merge="norm_preserving")
    assert cfg.effective_quorum == 2 and cfg.round_steps == 10
    assert TestbedConfig(algorithm="decoupled", workers=4, steps=20, inner_steps=10).effective_quorum == 3
    bad: list[tuple[dict[str, Any], str]] = [
        ({"merge": "median"}, "merge"),
        ({"quorum": 4}, "quorum"),
        ({"quorum": -1}, "quorum"),
        ({"sync_deadline_s": 0.0}, "sync-deadline"),
        ({"sync_deadline_s": math.nan}, "sync-deadline"),
        ({"max_staleness": -1}, "max-staleness"),
        ({"link_mode": "real"}, "link-mode"),
        ({"faults": ("kill w1@step10/allgather",)}, "fault"),
        ({"checkpoint_every": 1}, "checkpoint-every"),
    ]
    for extra, field in bad:
        with pytest.raises(InputError) as exc:
            TestbedConfig(algorithm="decoupled", workers=3, steps=20, inner_steps=10, **extra)
        assert exc.value.field == field, (extra, exc.value)
    with pytest.raises(InputError) as exc:
        TestbedConfig(algorithm="diloco", workers=3, steps=20, inner_steps=10, merge="norm_preserving")
    assert exc.value.field == "merge"


def test_server_bounds_its_connections() -> None:
    """A second connection beyond max_connections is closed unanswered; the first still works."""
    syncer, _ = make(quorum=1)
    logged: list[dict[str, object]] = []
    server = SyncServer(
        syncer,
        secret=SECRET,
        io_timeout_s=5.0,
        on_merge=lambda _: None,
        log=lambda **f: logged.append(f),
        max_connections=1,
    ).start()
    try:
        client = SyncClient(
            server.host, server.port, worker="w0", incarnation=0, secret=SECRET, numel=N, timeout_s=5.0
        )
        assert client.pull(-1) is not None  # holds the one slot
        with socket.create_connection((server.host, server.port), timeout=5.0) as raw:
            raw.sendall(encode({"op": "pull", "worker": "w1", "incarnation": 0, "have": -1}, b"", SECRET))
            assert raw.recv(16) == b""
        assert client.pull(-1) is not None
        client.close()
    finally:
        server.close()
    assert logged == [{"event": "syncer_rejected", "claimed": "?", "why": "too many connections"}]


def test_summary_completes_without_a_learner_killed_for_good(tmp_path: Path) -> None:
    """A learner the plan kills without a rejoin stops its island; the run still completes. One that
    should have finished and did not (or a timeout) makes it incomplete."""
    from dispersal.testbed.decoupled_run import summary

    row = {"rounds": 2, "bytes_sent": 10, "bytes_received": 20, "compute_s": 1.0, "exposed_s": 0.5}
    row |= {"clock_s": 1.5, "train_wall_s": 2.0}

    class Store:
        def __init__(self, done: list[str]) -> None:
            self.done = done

        def get(self, key: str) -> bytes | None:
            return json.dumps(row).encode() if key.split("/")[1] in self.done else None

    syncer, _ = make()
    kill = ("kill w1@step10",)
    cfg = TestbedConfig(algorithm="decoupled", workers=3, steps=20, inner_steps=10, faults=kill)
    s = summary(cfg, tmp_path, syncer, Store(["w0", "w2"]), False, 3.0, 2.5)
    assert s["completed"] and s["reason"] == "" and s["rounds_per_worker"] == {"w0": 2, "w2": 2}
    assert s["utilisation"] == {"w0": pytest.approx(2 / 3), "w2": pytest.approx(2 / 3)}
    assert json.loads((tmp_path / "summary.json").read_text())["completed"] is True
    rejoin = TestbedConfig(
        algorithm="decoupled", workers=3, steps=20, inner_steps=10, faults=(*kill, "rejoin w1@step15")
    )
    assert (
        summary(rejoin, tmp_path, syncer, Store(["w0", "w2"]), False, 3.0, 2.5)["reason"]
        == "a learner did not finish"
    )
    assert summary(cfg, tmp_path, syncer, Store(["w0", "w2"]), True, 3.0, 2.5)["reason"] == "timed out"
    assert summary(cfg, tmp_path, syncer, Store(["w0", "w2"]), False, 3.0, 99.0)["diverged"] is True
