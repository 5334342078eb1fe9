"""A hostile process on the same host during a real run: nothing listens outside loopback, forged store
keys, relay messages and frames are dropped and logged, the run completes; a poisoned or damaged
checkpoint never runs code on --resume and the newest intact round is used."""

from __future__ import annotations

import json
import socket
import sysconfig
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from proc_tree import descendants

torch = pytest.importorskip("torch")

from dispersal.testbed import checkpoint  # noqa: E402
from dispersal.testbed.config import TestbedConfig  # noqa: E402
from dispersal.testbed.netlink import encode_message  # noqa: E402
from dispersal.testbed.supervisor import run_local  # noqa: E402

# Real worker processes and sockets: part of the full suite, not of the fast tier (`-m "not slow"`).
pytestmark = [pytest.mark.torch, pytest.mark.slow]

CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)
WRONG = bytes(32)  # the attacker does not know the run secret


def _events(out: Path) -> list[dict[str, Any]]:
    p = out / "events.jsonl"
    return [json.loads(ln) for ln in p.read_text().splitlines()] if p.exists() else []


def _our_socket_inodes() -> set[str]:
    """Socket inodes held by this process and its descendants (the supervisor, workers, relay)."""
    import os

    ours = descendants()
    inodes = set()
    for pid in ours:
        try:
            for fd in (Path("/proc") / str(pid) / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    return inodes


def _listeners() -> list[str]:
    """Local addresses of every listening TCP socket of this run (/proc/net/tcp and tcp6)."""
    inodes = _our_socket_inodes()
    found = []
    for name, width in (("tcp", 8), ("tcp6", 32)):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # TCP_LISTEN, ours
                found.append(cols[1][:width])
    return found


def _loopback(hex_addr: str) -> bool:
    if len(hex_addr) == 8:  # IPv4, little-endian hex: 127.x.x.x has its first byte last
        return hex_addr[6:8] == "7F"
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return words == bytes(15) + b"\x01" or (words[:12] == bytes(10) + b"\xff\xff" and words[12] == 127)


def _attack(out: Path, seen: dict[str, Any], stop: threading.Event) -> None:
    """Wait until the group has formed, then look at the listeners and forge everything we can."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not stop.is_set():
        ev = _events(out)
        where = next((e for e in ev if e["event"] == "listening"), None)
        if where and sum(e["event"] == "joined" for e in ev) >= 3:
            break
        time.sleep(0.2)
    else:
        return
    seen["listeners"] = _listeners()
    host, port = where["store"].rsplit(":", 1)
    store = torch.distributed.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=10))
    store.set("killme/w2", "5")  # the supervisor obeyed this before
    store.set("finished", "1")  # would end every worker's run
    store.set("genv", "1000000000")
    rhost, rport = where["relay"].rsplit(":", 1)
    for meta, body in (
        ({"worker": "w1", "hello": True}, b""),  # take over w1's relay connection
        ({"worker": "w1", "gen": 10**9, "round": 0, "part": 0, "numel": 4, "members": ["w1"]}, bytes(112)),
        ({"worker": "w0", "gen": 1, "round": 3, "part": 0, "numel": 4, "members": ["w0"]}, bytes(112)),
    ):
        with socket.create_connection((rhost, int(rport)), timeout=5) as s:
            s.sendall(encode_message(meta, body, secret=WRONG))
            s.settimeout(5)
            while s.recv(65536):  # the relay's challenge, then the close
                pass
            seen.setdefault("relay_closed", []).append(True)
    seen["done"] = True


def test_a_hostile_process_on_the_host_cannot_steer_a_run(tmp_path: Path) -> None:
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
        run_timeout_s=150,
    )
    seen: dict[str, Any] = {}
    stop = threading.Event()
    t = threading.Thread(target=_attack, args=(tmp_path, seen, stop), daemon=True)
    t.start()
    summary = run_local(cfg, tmp_path)
    stop.set()
    t.join(30)
    assert seen.get("done"), seen
    # none of the run's processes listens outside loopback (store, relay, gloo), several of them do listen
    assert len(seen["listeners"]) >= 3 and all(_loopback(a) for a in seen["listeners"]), seen["listeners"]
    assert seen["relay_closed"] == [True, True, True]  # the relay hung up on each forged message
    assert summary["completed"] is True and summary["final_members"] == ["w0", "w1", "w2"], summary
    assert summary["rounds"] == 8 and not summary["updates_rejected"]
    ev = _events(tmp_path)
    assert not [e for e in ev if e["event"] in ("killed", "sync_failed", "reform_failed")]
    forged = {(e["worker"], e["key"]) for e in ev if e["event"] == "forged_store_value"}
    # the supervisor saw (and ignored) the forged kill order; the forged generation was caught by the
    # coordinator, which restores `genv` within a tick (issue 35), or else by every worker (the forged
    # "finished" ended nothing: all 8 rounds ran)
    workers_saw_genv = {("w0", "genv"), ("w1", "genv"), ("w2", "genv")} <= forged
    assert ("supervisor", "killme/w2") in forged
    assert ("supervisor", "genv") in forged or workers_saw_genv, forged
    relay = [(e["claimed"], e["why"]) for e in ev if e["event"] == "relay_rejected"]
    unread = "expected a hello (bad magic, a body, or too long): closed unread"
    assert relay == [("w1", "unauthenticated hello"), ("?", unread), ("?", unread)]  # frames: not even read
    # every later sync still went through the relay with all three members
    recs = [json.loads(ln) for ln in (tmp_path / "relay.jsonl").read_text().splitlines()]
    assert [r["round"] for r in recs] == list(range(8)) and all(len(r["members"]) == 3 for r in recs)


def test_resume_never_runs_a_planted_pickle_and_skips_a_damaged_round(tmp_path: Path) -> None:
    """Stop after round 4 (checkpoints at rounds 2 and 4). Truncate round 4's global.pt and plant a
    pickle payload in round 2's w1.pt (hash updated to match): --resume must go on from round 2, must
    not run the payload (w1 starts from round 2's global weights instead), log both, and finish."""
    import hashlib
    import io

    kw: dict[str, Any] = {
        "algorithm": "diloco",
        "workers": 2,
        "steps": 40,
        "inner_steps": 5,
        "data": CORPUS,
        "eval_batches": 2,
        "checkpoint_every": 2,
        "run_timeout_s": 120,
    }
    stopped = run_local(TestbedConfig(**kw, stop_after_rounds=4), tmp_path)
    assert stopped["completed"] is False and (tmp_path / "ckpt" / "LATEST").read_text() == "r000004"
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> Any:
            return (Path.touch, (marker,))

    w1 = checkpoint.round_dir(tmp_path, 2) / "w1.pt"
    buf = io.BytesIO()
    torch.save({"model": Payload()}, buf)
    w1.write_bytes(buf.getvalue())
    w1.with_name("w1.pt.sha256").write_text(hashlib.sha256(buf.getvalue()).hexdigest())
    g4 = checkpoint.round_dir(tmp_path, 4) / "global.pt"
    g4.write_bytes(g4.read_bytes()[: g4.stat().st_size // 2])
    summary = run_local(TestbedConfig(**kw), tmp_path, resume=True)
    assert not marker.exists()
    assert summary["completed"] is True and summary["rounds"] == 8
    ev = _events(tmp_path)
    fallbacks = {(e["worker"], e["round_dir"]) for e in ev if e["event"] == "checkpoint_fallback"}
    assert fallbacks == {("supervisor", "r000004"), ("w0", "r000004"), ("w1", "r000004"), ("w1", "r000002")}
    rows = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == list(range(8))  # rounds 2..3 were run again from round 2's state
    # LATEST naming a round that is gone: an error, not a silent restart from round 0
    (tmp_path / "ckpt" / "LATEST").write_text("r000099")
    with pytest.raises(checkpoint.CheckpointError, match="r000099"):
        run_local(TestbedConfig(**kw), tmp_path, resume=True)


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"bare {name} in testbed JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_poisoned_update_under_plain_averaging_ends_the_run_as_diverged(tmp_path: Path) -> None:
    """w2 sends its pseudo-gradient x1e6 from the start under plain averaging (``--aggregator mean``, one flag away from the default):
    the model is wrecked in the first round, every member stops in the same round, and the run ends
    completed: false, diverged: true, with the reason, the attack and strict JSON outputs."""
    cfg = TestbedConfig(
        algorithm="diloco",
        workers=3,
        steps=20,
        inner_steps=5,
        data=CORPUS,
        eval_batches=2,
        attacks=("w2:scale=1e6",),
        aggregator="mean",
        run_timeout_s=120,
    )
    summary = run_local(cfg, tmp_path)
    assert summary["completed"] is False and summary["diverged"] is True, summary
    assert "diverged" in summary["reason"] and summary["rounds"] < 4
    assert summary["attacks"] == ["w2:scale=1e6"] and summary["attacks_seen"] == {"w2": summary["rounds"]}
    _strict((tmp_path / "summary.json").read_text())
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        _strict(line)
    stopped = {e["worker"]: e["round"] for e in _events(tmp_path) if e["event"] == "diverged"}
    assert set(stopped) == {"w0", "w1", "w2"} and len(set(stopped.values())) == 1
