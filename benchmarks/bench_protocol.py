"""The protocol half of the threat table (issue 35): attacks that never reach an aggregation rule,
run against real worker processes and a real relay by a local process that knows no secret.

    python benchmarks/bench_protocol.py --seeds 0 1 2 --rules trimmed_mean   # appends runs/robust/protocol.jsonl
    python benchmarks/bench_protocol.py --summarize

Attacks (each from the moment the first group has formed until the run ends):

* ``replay``: two captured heartbeats of w1 and every other captured signed store value
  (members, generation, incarnations) written back over and over; w1's relay hello replayed.
* ``forged_store``: ``killme/w2``, ``finished``, ``genv`` = 10^9 written without the secret.
* ``relay_garbage``: 50 connections to the relay sending random bytes, a forged hello, a frame with
  a wrong tag, and ``[`` x 60,000 as metadata.
* ``slow_loris``: 20 connections to the relay that send a message prefix one byte a second and hold.

3 workers, ``tiny``, H 5, 30 inner steps, real-link mode (1 Gbit/s, 2 ms), eval on 8 batches. The
loss is compared with the clean run of the same rule and seed. The rule cannot matter (nothing of
these reaches it); ``--rules`` measures others (docs/testbed.md lists what was run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import socket
import sysconfig
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.netlink import PREFIX, encode_message
from dispersal.testbed.supervisor import run_local

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "runs" / "robust" / "protocol.jsonl"
CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)
ATTACKS = ("none", "replay", "forged_store", "relay_garbage", "slow_loris")


def _events(out: Path) -> list[dict[str, Any]]:
    p = out / "events.jsonl"
    rows = []
    for ln in p.read_text().splitlines() if p.exists() else []:
        with contextlib.suppress(ValueError):
            rows.append(json.loads(ln))
    return rows


def _send(addr: tuple[str, int], data: bytes) -> None:
    try:
        with socket.create_connection(addr, timeout=2) as s:
            s.sendall(data)
            s.settimeout(2)
            while s.recv(65536):
                pass
    except OSError:
        pass


def _attack(kind: str, out: Path, stop: threading.Event) -> None:
    while not stop.is_set():
        ev = _events(out)
        where = next((e for e in ev if e["event"] == "listening"), None)
        if where and sum(e["event"] == "joined" for e in ev) >= 3:
            break
        time.sleep(0.1)
    else:
        return
    host, port = where["store"].rsplit(":", 1)
    store = torch.distributed.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=10))
    rhost, rport = where["relay"].rsplit(":", 1)
    relay = (rhost, int(rport))
    rng = random.Random(0)
    if kind == "forged_store":
        store.set("killme/w2", "5")
        store.set("finished", "1")
        store.set("genv", "1000000000")
        return
    if kind == "replay":
        keys = ["members/1", "incarnations/1", "genv"]
        captured = {k: store.get(k) for k in keys if store.check([k])}
        beats: list[bytes] = []
        while len(beats) < 2 and not stop.is_set():
            v = store.get("hb/w1")
            if v not in beats:
                beats.append(v)
            time.sleep(0.05)
        hello = encode_message(
            {"worker": "w1", "hello": True, "nonce": "00" * 16, "gen": 1, "round": 0}, secret=bytes(32)
        )
        i = 0
        while not stop.is_set():
            store.set("hb/w1", beats[i % 2])
            for k, v in captured.items():
                store.set(k, v)
            if i % 10 == 0:
                _send(relay, hello)
            i += 1
            time.sleep(0.1)
        return
    if kind == "relay_garbage":
        nested = b"[" * 60_000
        meta = {"worker": "w0", "gen": 1, "round": 0, "part": 0, "numel": 4, "members": ["w0"]}
        msgs = [
            bytes(rng.getrandbits(8) for _ in range(4096)),
            encode_message({"worker": "w1", "hello": True}, secret=bytes(32)),
            encode_message(meta, bytes(112), secret=bytes(32)),
            PREFIX.pack(b"DSPL", len(nested), 0) + nested + bytes(32),
        ]
        for i in range(50):
            if stop.is_set():
                return
            _send(relay, msgs[i % len(msgs)])
        return
    if kind == "slow_loris":
        socks = []
        for _ in range(20):
            with contextlib.suppress(OSError):
                socks.append(socket.create_connection(relay, timeout=2))
        prefix = PREFIX.pack(b"DSPL", 60, 0)
        for b in prefix:
            if stop.wait(1.0):
                break
            for s in socks:
                with contextlib.suppress(OSError):
                    s.send(bytes([b]))
        stop.wait()
        for s in socks:
            s.close()


def _run(a: argparse.Namespace) -> None:
    RAW.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if RAW.exists():
        for ln in RAW.read_text().splitlines():
            r = json.loads(ln)
            done.add((r["seed"], r["rule"], r["attack"]))
    for seed in a.seeds:
        for rule in a.rules:
            for kind in a.attacks:
                if (seed, rule, kind) in done:
                    continue
                out = ROOT / "runs" / "robust" / "protocol" / f"{rule}-{kind}-{seed}"
                shutil.rmtree(out, ignore_errors=True)
                cfg = TestbedConfig(
                    workers=3,
                    steps=a.steps,
                    inner_steps=5,
                    data=CORPUS,
                    eval_every=10**6,
                    eval_batches=8,
                    link_mode="real",
                    link_up_bits_per_s=1e9,
                    link_down_bits_per_s=1e9,
                    link_latency_s=0.002,
                    aggregator=rule,
                    seed=seed,
                    run_timeout_s=600,
                )
                stop = threading.Event()
                t = threading.Thread(target=_attack, args=(kind, out, stop), daemon=True)
                t0 = time.perf_counter()
                t.start()
                s = run_local(cfg, out)
                stop.set()
                t.join(5)
                ev = _events(out)
                row = {
                    "seed": seed,
                    "rule": rule,
                    "attack": kind,
                    "final_val_loss": s.get("final_val_loss"),
                    "completed": s.get("completed"),
                    "reason": s.get("reason"),
                    "final_members": s.get("final_members"),
                    "relay_rejected": sum(e["event"] == "relay_rejected" for e in ev),
                    "forged_store_value": sum(e["event"] == "forged_store_value" for e in ev),
                    "sync_failed": sum(e["event"] == "sync_failed" for e in ev),
                    "wall_s": time.perf_counter() - t0,
                }
                with open(RAW, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)


def _summarize() -> None:
    rows = [json.loads(ln) for ln in RAW.read_text().splitlines()]
    clean = {(r["seed"], r["rule"]): r["final_val_loss"] for r in rows if r["attack"] == "none"}
    print(
        "| attack | rule | loss / clean (per seed) | completed | relay refusals | forged values logged | failed syncs | wall s | seeds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in ATTACKS:
        for rule in sorted({r["rule"] for r in rows}):
            rs = sorted(
                (r for r in rows if r["attack"] == kind and r["rule"] == rule), key=lambda r: r["seed"]
            )
            if not rs:
                continue
            ratios = [
                f"{r['final_val_loss'] / clean[(r['seed'], rule)]:.3f}"
                if r["final_val_loss"] and (r["seed"], rule) in clean
                else "-"
                for r in rs
            ]
            cells = [
                kind,
                rule,
                ", ".join(ratios),
                f"{sum(bool(r['completed']) for r in rs)}/{len(rs)}",
                ", ".join(str(r["relay_rejected"]) for r in rs),
                ", ".join(str(r["forged_store_value"]) for r in rs),
                ", ".join(str(r["sync_failed"]) for r in rs),
                ", ".join(f"{r['wall_s']:.0f}" for r in rs),
                ", ".join(str(r["seed"]) for r in rs),
            ]
            print("| " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rules", nargs="+", default=["trimmed_mean", "mean"])
    ap.add_argument("--attacks", nargs="+", default=list(ATTACKS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--summarize", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("DISPERSAL_THREADS", "1")))
    if a.summarize:
        _summarize()
    else:
        _run(a)


if __name__ == "__main__":
    main()
