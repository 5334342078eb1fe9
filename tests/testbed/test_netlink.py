"""Real-link mode: the shaper's arithmetic, the relay on real sockets (127.0.0.1), and whole runs.

Socket tests use small payloads and fast links, so each takes well under a second; the long
measurements at 100 Mbps / 100 ms are in benchmarks/bench_testbed.py.
"""

from __future__ import annotations

import json
import math
import random
import sysconfig
import threading
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

torch = pytest.importorskip("torch")

from dispersal.model.inputs.errors import InputError  # noqa: E402
from dispersal.testbed import checkpoint  # noqa: E402
from dispersal.testbed.config import TestbedConfig, parse_loss  # noqa: E402
from dispersal.testbed.netlink import (  # noqa: E402
    MSS_BYTES,
    Aggregator,
    DelayLine,
    Direction,
    Pipe,
    Relay,
    RelaySpec,
    TokenBucket,
    schedule_round_robin,
)
from dispersal.testbed.relaylink import RelayLink, RelayReply  # noqa: E402
from dispersal.testbed.supervisor import run_local  # noqa: E402
from dispersal.testbed.wire import H_CRC, H_INDEX, HEADER_LEN, frame_context, seal_frame  # noqa: E402

if TYPE_CHECKING:  # ``torch`` above is the module pytest imported, typed Any
    from torch import Tensor

# Real worker processes and sockets: part of the full suite, not of the fast tier (`-m "not slow"`).
pytestmark = [pytest.mark.torch, pytest.mark.slow]

CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)
SECRET = bytes(range(32))


# ---------------------------------------------------------------------- arithmetic
def test_token_bucket_serialises_back_to_back_and_lets_a_burst_through() -> None:
    b = TokenBucket(8e6)  # 1 MB/s, depth 0: a serialising link
    assert b.reserve(1000, 0.0) == pytest.approx(0.001)
    assert b.reserve(1000, 0.0005) == pytest.approx(0.002)  # queued behind the first
    assert b.reserve(1000, 1.0) == pytest.approx(1.001)  # idle link: no credit without depth
    burst = TokenBucket(8e6, burst_bytes=3000)
    assert burst.reserve(2000, 0.0) == 0.0  # within the depth: passes at once
    assert burst.reserve(2000, 0.0) == pytest.approx(0.001)  # 1000 B of debt
    assert burst.reserve(1000, 10.0) == 10.0  # refilled (capped at the depth)
    assert TokenBucket(math.inf).reserve(10**9, 3.0) == 3.0
    with pytest.raises(ValueError):
        TokenBucket(0.0)


def test_delay_line_keeps_order_and_charges_a_round_trip_per_loss() -> None:
    d = DelayLine(0.05, 0.0, 0.0, 0.0, random.Random(0))
    at, retransmitted = d.deliver(1.0)
    assert at == pytest.approx(1.05) and retransmitted is False
    jit = DelayLine(0.05, 0.02, 0.0, 0.0, random.Random(1))
    times = [jit.deliver(1.0 + k * 1e-4)[0] for k in range(200)]
    assert times == sorted(times)  # in order although each draw differs
    assert all(1.05 <= t <= 1.0 + 199e-4 + 0.07 for t in times)
    lossy = DelayLine(0.05, 0.0, 0.5, 0.1, random.Random(2))
    got = [lossy.deliver(k * 1e-3) for k in range(100)]
    lost = [k for k, (_, was_lost) in enumerate(got) if was_lost]
    assert 25 < len(lost) < 75
    k = lost[0]
    assert got[k][0] == pytest.approx(k * 1e-3 + 0.05 + 0.1)  # one retransmission later
    assert all(got[j][0] >= got[k][0] for j in range(k, 100))  # head-of-line blocking


def test_pipe_time_is_size_over_rate_plus_one_way_delay() -> None:
    p = Pipe(Direction(bits_per_s=100e6, one_way_s=0.05), random.Random(0))
    n = 100 * MSS_BYTES + 7
    plan = p.schedule(n, 2.0)
    assert len(plan) == 101 and sum(b for _, b in plan) == n
    assert plan[-1][0] == pytest.approx(2.0 + 8 * n / 100e6 + 0.05)
    assert p.counters.wire_bytes == n and p.counters.segments == 101


def test_shared_relay_downlink_is_served_in_turn() -> None:
    """Two 100 Mbps downloads behind a 100 Mbps relay downlink: each gets half, both end at 2V/R."""
    shared = TokenBucket(100e6)
    pipes = [Pipe(Direction(bits_per_s=100e6), random.Random(k), shared=shared) for k in range(2)]
    n = 50 * MSS_BYTES
    plans = schedule_round_robin([(p, n) for p in pipes], 0.0)
    seg = 8 * MSS_BYTES / 100e6
    # A's k-th segment leaves the relay at (2k + 1) seg and its access link at (2k + 2) seg; B's one
    # segment later (store and forward of one segment per hop).
    assert [plan[-1][0] for plan in plans] == pytest.approx([16 * n / 100e6, 16 * n / 100e6 + seg])
    # Without the shared bucket both would end at V/R.
    free = [Pipe(Direction(bits_per_s=100e6), random.Random(k)) for k in range(2)]
    assert [p[-1][0] for p in schedule_round_robin([(p, n) for p in free], 0.0)] == pytest.approx(
        [8 * n / 100e6] * 2
    )


def test_config_and_loss_errors_name_the_field() -> None:
    assert parse_loss("0.01") == (0.01, 0.01)
    assert parse_loss("0.1%/2%") == pytest.approx((0.001, 0.02))
    for bad in ("lots", "0.9", "0.1/0.2/0.3"):
        with pytest.raises(InputError, match=r"^loss:"):
            parse_loss(bad)
    with pytest.raises(InputError, match=r"^link-mode:"):
        TestbedConfig(link_mode="carrier-pigeon")
    with pytest.raises(InputError, match=r"^link-mode:"):
        TestbedConfig(algorithm="streaming", link_mode="real", inner_steps=50, steps=200)
    with pytest.raises(InputError, match=r"^relay-down:"):
        TestbedConfig(relay_down_bits_per_s=0.0)


# ---------------------------------------------------------------------- the relay on real sockets
def _frame(index: int, values: Tensor, gen: int = 1, round_index: int = 0) -> bytes:
    payload = values.float().contiguous().view(torch.uint8)
    h = torch.zeros(HEADER_LEN, dtype=torch.float64)
    # numpy declares ndarray.__buffer__ (PEP 688) only for Python >= 3.12; it is a buffer on 3.11 too.
    h[H_CRC], h[H_INDEX] = zlib.crc32(payload.numpy()), index  # type: ignore[arg-type]
    ctx = frame_context(gen, round_index, 0, f"w{index}")
    return seal_frame(h, payload, SECRET, ctx).numpy().tobytes()


def _sync_all(
    spec: RelaySpec, vectors: list[Tensor], rounds: int = 1, log: Path | None = None
) -> tuple[Relay, list[RelayLink], dict[int, list[RelayReply]]]:
    """Every worker in its own thread uploads its vector through the relay, ``rounds`` times."""
    relay = Relay(spec, Aggregator("none", 64, 0.01, secret=SECRET), log=log)
    host, port = relay.start()
    members = [f"w{k}" for k in range(len(vectors))]
    links = [RelayLink(host, port, w, 10.0, secret=SECRET, spec=spec) for w in members]
    replies: dict[int, list[RelayReply]] = {k: [] for k in range(len(vectors))}
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            for r in range(rounds):
                replies[k].append(
                    links[k].exchange(
                        _frame(k, vectors[k], round_index=r),
                        gen=1,
                        round_index=r,
                        part=0,
                        numel=vectors[k].numel(),
                        members=members,
                    )
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(vectors))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    relay.stop()
    for link in links:
        link.close()
    assert not errors, errors
    return relay, links, replies


def _wire(n_values: int) -> int:
    return 4 * n_values + 8 * HEADER_LEN  # payload + emulation header (+ small framing, below)


@pytest.mark.parametrize(
    ("up", "down", "latency"),
    [(200e6, 200e6, 0.02), (100e6, 400e6, 0.01)],  # symmetric; asymmetric (download 4x faster)
)
def test_relay_sync_takes_the_shaped_time_and_counts_every_byte(
    up: float, down: float, latency: float
) -> None:
    n = 25_000  # 100 kB per upload
    spec = RelaySpec(
        up=Direction(bits_per_s=up, one_way_s=latency / 2),
        down=Direction(bits_per_s=down, one_way_s=latency / 2),
    )
    vecs = [torch.arange(n, dtype=torch.float32) * (k + 1) for k in range(3)]
    relay, links, replies = _sync_all(spec, vecs, rounds=2)
    v = _wire(n)
    predicted = 8 * v / up + 8 * v / down + latency
    for k in range(3):
        for rep in replies[k]:
            # Never faster than the link (the shaping). The ceiling only catches a gross error: a 20 ms
            # sync beside another test on 2 cores misses a tight one by timer wake-ups alone (CI, xdist:
            # 46.5 ms against 46.0 ms allowed), and a timed assertion must not fail on load.
            assert predicted * 0.99 <= rep.wall_s <= predicted * 3 + 0.25, (rep.wall_s, predicted)
            avg = torch.frombuffer(bytearray(rep.aggregate), dtype=torch.float32)
            assert torch.equal(avg, torch.stack(vecs).sum(0) / 3)
            assert rep.ok == [True, True, True]
    counters = relay.counters()
    for k, link in enumerate(links):
        c = counters[f"w{k}"]
        assert c["wire_bytes_up"] == link.counters.wire_bytes_sent
        assert c["wire_bytes_down"] == link.counters.wire_bytes_received
        assert v < c["wire_bytes_up"] / 2 < v + 400  # framing and metadata: a few hundred bytes


def test_relay_shared_downlink_slows_every_download(tmp_path: Path) -> None:
    n = 12_500  # 50 kB
    fast = Direction(bits_per_s=1e9)
    spec = RelaySpec(up=fast, down=fast, relay_down_bits_per_s=40e6)
    _, _, replies = _sync_all(spec, [torch.ones(n)] * 4, log=tmp_path / "relay.jsonl")
    rec = json.loads((tmp_path / "relay.jsonl").read_text())
    # four downloads share 40 Mbps: 4 x 8 V / 40e6 = 40 ms, where one alone would take 10 ms
    assert rec["download_s"] == pytest.approx(4 * 8 * (_wire(n) + 150) / 40e6, rel=0.05)
    assert min(r[0].wall_s for r in replies.values()) >= 0.038


def test_loss_turns_into_retransmission_delay() -> None:
    n = 25_000
    clean = RelaySpec(
        up=Direction(bits_per_s=500e6, one_way_s=0.005), down=Direction(bits_per_s=500e6, one_way_s=0.005)
    )
    lossy = RelaySpec(
        up=Direction(bits_per_s=500e6, one_way_s=0.005, loss=0.05, retransmit_s=0.1),
        down=Direction(bits_per_s=500e6, one_way_s=0.005, loss=0.05, retransmit_s=0.1),
        seed=3,
    )
    _, _, ok = _sync_all(clean, [torch.ones(n)] * 2)
    relay, _, bad = _sync_all(lossy, [torch.ones(n)] * 2)
    lost = sum(c["lost_segments_up"] + c["lost_segments_down"] for c in relay.counters().values())
    assert lost > 0
    # A lost segment holds back every later one of its direction (in-order delivery) by ~retransmit_s:
    # the worker behind it waits ~0.1 s more, well above the scheduling noise of a loaded 2-core host
    # (the clean sync took 12-40 ms; a 10 ms retransmission was lost in that noise once, CI-like run).
    assert max(r[0].wall_s for r in bad.values()) > max(r[0].wall_s for r in ok.values()) + 0.05
    assert torch.equal(  # loss on TCP delays bytes, it never changes them
        torch.frombuffer(bytearray(bad[0][0].aggregate), dtype=torch.float32), torch.ones(n)
    )


def test_a_member_that_disconnects_aborts_the_round_at_once() -> None:
    spec = RelaySpec()
    relay = Relay(spec, Aggregator("none", 64, 0.01, secret=SECRET))
    host, port = relay.start()
    try:
        # w1 connects (challenge, hello), then its process dies
        w1 = RelayLink(host, port, "w1", 10.0, secret=SECRET, spec=spec)
        w1.connect()
        time.sleep(0.2)
        w1.close()
        time.sleep(0.2)
        link = RelayLink(host, port, "w0", 10.0, secret=SECRET, spec=spec)
        t0 = time.monotonic()
        with pytest.raises(ConnectionError, match="w1 closed"):
            link.exchange(
                _frame(0, torch.ones(4), round_index=1),
                gen=1,
                round_index=1,
                part=0,
                numel=4,
                members=["w0", "w1"],
            )
        assert time.monotonic() - t0 < 1.0  # not the 10 s timeout
    finally:
        relay.stop()


def test_a_malformed_frame_is_rejected_not_the_relay() -> None:
    relay = Relay(RelaySpec(), Aggregator("none", 64, 0.01, secret=SECRET))
    host, port = relay.start()
    try:
        link = RelayLink(host, port, "w0", 10.0, secret=SECRET)
        bad = link.exchange(b"short", gen=1, round_index=0, part=0, numel=4, members=["w0"])
        assert bad.ok == [False] and bad.why[0].startswith("bad length") and bad.aggregate == b""
        good = link.exchange(
            _frame(0, torch.ones(4), round_index=1), gen=1, round_index=1, part=0, numel=4, members=["w0"]
        )
        assert good.ok == [True]
    finally:
        relay.stop()


# ---------------------------------------------------------------------- whole runs
def _run(tmp_path: Path, mode: str) -> tuple[dict[str, Any], Path]:
    cfg = TestbedConfig(
        algorithm="diloco",
        workers=2,
        steps=20,
        inner_steps=5,
        codec="int8",
        data=CORPUS,
        eval_every=10**6,
        eval_batches=2,
        link_mode=mode,
        link_up_bits_per_s=1e9,
        link_down_bits_per_s=1e9,
        link_latency_s=0.004,
        faults=("corrupt w1@step10",),
        run_timeout_s=120,
    )
    out = tmp_path / mode
    return run_local(cfg, out), out


def test_real_link_run_gives_the_virtual_runs_bits_and_charges_measured_time(tmp_path: Path) -> None:
    """Same config (int8, a corrupted frame in round 2) once per link mode: identical weights and
    payload bytes; the real run's exposed time is the measured wall clock, its wire bytes are counted."""
    real, out = _run(tmp_path, "real")
    virtual, _ = _run(tmp_path, "virtual")
    assert real["completed"] and virtual["completed"]
    assert real["final_val_loss"] == virtual["final_val_loss"]
    weights = [
        checkpoint.load(cast(Path, checkpoint.latest(tmp_path / m)) / "global.pt")
        for m in ("real", "virtual")
    ]
    assert torch.equal(weights[0]["global"], weights[1]["global"])  # bit for bit
    assert torch.equal(weights[0]["outer"]["buf"], weights[1]["outer"]["buf"])
    assert real["bytes_sent_per_worker"] == virtual["bytes_sent_per_worker"]
    assert real["bytes_received_per_worker"] == virtual["bytes_received_per_worker"]
    events = [json.loads(ln) for ln in (out / "events.jsonl").read_text().splitlines()]
    assert {(e["worker"], e["bad"]) for e in events if e["event"] == "rejected_update"} == {
        ("w0", "w1"),
        ("w1", "w1"),
    }
    relay = json.loads((out / "relay.json").read_text())
    wire = relay["workers"]
    assert 0 < relay["relay_cpu_s"] < 10
    for w in ("w0", "w1"):
        syncs = [json.loads(ln) for ln in (out / "netlink" / f"{w}.jsonl").read_text().splitlines()]
        assert len(syncs) == real["rounds"] == 4
        assert wire[w]["wire_bytes_up"] == sum(s["wire_sent"] for s in syncs)
        assert wire[w]["wire_bytes_down"] == sum(s["wire_received"] for s in syncs)
        assert wire[w]["wire_bytes_up"] > real["bytes_sent_per_worker"][w]  # framing is on the wire too
        # at least the link's own time (4 ms latency per sync) is charged, and no more than measured
        measured = sum(s["wall_s"] for s in syncs)
        assert measured >= 4 * 0.004
        assert real["exposed_comm_s_per_worker"][w] >= measured - 1e-9


def test_real_link_run_survives_a_kill_and_a_rejoin(tmp_path: Path) -> None:
    """SIGKILL w2 mid-run: its relay connection closes, the round in flight is dropped, the others go
    on through the relay; the replacement connects (hello) and rejoins; the run completes."""
    cfg = TestbedConfig(
        algorithm="diloco",
        workers=3,
        steps=40,
        inner_steps=5,
        data=CORPUS,
        eval_every=10**6,
        eval_batches=2,
        link_mode="real",
        link_up_bits_per_s=1e9,
        link_down_bits_per_s=1e9,
        link_latency_s=0.002,
        faults=("kill w2@step12", "rejoin w2@step25"),
        run_timeout_s=150,
    )
    out = tmp_path / "kill"
    s = run_local(cfg, out)
    assert s["completed"], s
    assert s["final_members"] == ["w0", "w1", "w2"]
    events = [json.loads(ln) for ln in (out / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "killed" and e["worker"] == "w2" for e in events)
    rejoined = [e for e in events if e["event"] == "joined" and e["worker"] == "w2" and e["generation"] > 1]
    assert rejoined and rejoined[0]["round"] == 5  # back at step 25
    # every sync of the last generation went through the relay with all three members
    recs = [json.loads(ln) for ln in (out / "relay.jsonl").read_text().splitlines()]
    assert recs[-1]["members"] == ["w0", "w1", "w2"] and recs[-1]["round"] == 7
