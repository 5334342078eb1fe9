"""Testbed benchmark on CPU: quality, bytes, fault tolerance, overhead and link-model agreement.

Run: ``python benchmarks/bench_testbed.py [--steps 3000] [--out runs/bench]`` (about 10 min on 2 cores). Prints the figures and
writes ``benchmarks/results/testbed_cpu_<yyyymm>_dev.md`` with the config and library versions.
Raw runs go under ``--out`` (git-ignored ``runs/``), never into git.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from dispersal.testbed.codecs import CRC_BYTES, make_codec
from dispersal.testbed.config import TestbedConfig, parse_link
from dispersal.testbed.link import predicted_sync_s
from dispersal.testbed.supervisor import run_local


def run(name: str, out: Path, **kw: object) -> tuple[dict, float]:
    cfg = TestbedConfig(**kw)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    summary = run_local(cfg, out / name)
    wall = time.perf_counter() - t0
    print(
        f"  {name}: completed={summary.get('completed')} val={summary.get('final_val_loss'):.4f} wall={wall:.1f}s",
        flush=True,
    )
    return summary, wall


def plain_reference(cfg: TestbedConfig, out: Path) -> dict[str, float]:
    """The bare PyTorch loop (dispersal.testbed.plain) in its own process, started like a worker."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict()) + "\n")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # as supervisor._spawn
    cmd = [
        sys.executable,
        "-m",
        "dispersal.testbed.plain",
        "--config",
        str(out / "config.json"),
        "--out",
        str(out),
    ]
    subprocess.run(cmd, env=env, check=True, timeout=900)
    return json.loads((out / "plain.json").read_text())


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000, help="inner steps per worker for the quality runs")
    ap.add_argument("--out", type=Path, default=Path("runs/bench"))
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--overhead-steps", type=int, default=600, help="steps of each overhead run")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions of the overhead runs")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out, S, H, M = args.out, args.steps, 50, 4
    common = {
        "model": args.model,
        "workers": M,
        "inner_steps": H,
        "eval_every": 10**6,
        "eval_batches": 64,  # final validation on 64 x 8 x 64 = 32,768 held-out bytes
        "seed": 0,
    }
    lines: list[str] = []
    t_start = time.perf_counter()
    load_start = load()

    print("1. DiLoCo vs DDP at equal tokens", flush=True)
    dil, dil_wall = run("diloco", out, algorithm="diloco", steps=S, **common)
    ddp, ddp_wall = run("ddp", out, algorithm="ddp", steps=S, **common)
    ratio = dil["final_val_loss"] / ddp["final_val_loss"]
    lines += [
        "## 1. DiLoCo (M=4, H=50) vs DDP at equal total tokens",
        f"model `{args.model}`: {dil['params']:,} parameters; {S} inner steps per worker; tokens {dil['tokens']:,} (DiLoCo) / {ddp['tokens']:,} (DDP)",
        "",
        "| run | final val loss (nats/byte) | wall s |",
        "|---|---|---|",
        f"| DiLoCo H=50 | {dil['final_val_loss']:.4f} | {dil_wall:.0f} |",
        f"| DDP | {ddp['final_val_loss']:.4f} | {ddp_wall:.0f} |",
        "",
        f"**ratio DiLoCo / DDP = {ratio:.4f}** (target within 5 %: {'met' if abs(ratio - 1) <= 0.05 else 'MISSED'})",
        "",
    ]

    print("2. bytes per worker", flush=True)
    b_ddp = ddp["bytes_sent_per_worker"]["w0"]
    b_dil = dil["bytes_sent_per_worker"]["w0"]
    q, _ = run("diloco_int8", out, algorithm="diloco", steps=4 * H, codec="int8", **{**common, "workers": 2})
    n = dil["params"]
    int8_ratio = (4 * n + CRC_BYTES) / (make_codec("int8").nbytes(n) + CRC_BYTES)
    b_q_per_step = q["bytes_sent_per_worker"]["w0"] / q["steps"]
    lines += [
        "## 2. Bytes sent per worker",
        "| quantity | measured | expected | error |",
        "|---|---|---|---|",
        f"| DDP / DiLoCo (fp32) | {b_ddp / b_dil:.4f} | H = {H} | {abs(b_ddp / b_dil / H - 1):.2%} |",
        f"| DDP fp32 / DiLoCo int8, per step | {(b_ddp / S) / b_q_per_step:.3f} | H x {int8_ratio:.4f} = {H * int8_ratio:.3f} | {abs((b_ddp / S) / b_q_per_step / (H * int8_ratio) - 1):.2%} |",
        f"| DiLoCo payload per sync (fp32) | {b_dil // dil['rounds']:,} B | 4 x {n:,} + {CRC_BYTES} = {4 * n + CRC_BYTES:,} B | |",
        "",
    ]

    print("3. kill 1 of 4 mid-run, rejoin", flush=True)
    kill_at, rejoin_at = S // 2, (3 * S) // 4
    k, k_wall = run(
        "diloco_kill",
        out,
        algorithm="diloco",
        steps=S,
        faults=(f"kill w3@step{kill_at}", f"rejoin w3@step{rejoin_at}"),
        **common,
    )
    events = [json.loads(ln) for ln in (out / "diloco_kill" / "events.jsonl").read_text().splitlines()]

    def first(kind: str, worker: str | None = None, **match: object) -> dict | None:
        for e in events:
            hit = e["event"] == kind and (worker is None or e["worker"] == worker)
            if hit and all(e.get(a) == b for a, b in match.items()):
                return e
        return None

    killed, restarted = first("killed", "w3"), first("restarted", "w3")
    joins = [e for e in events if e["event"] == "joined"]
    shrink = min((e["generation"] for e in joins if "w3" not in e["members"]), default=None)
    grow = min(
        (e["generation"] for e in joins if e["generation"] > (shrink or 0) and "w3" in e["members"]),
        default=None,
    )
    t_shrunk = max((e["t"] for e in joins if e["generation"] == shrink), default=float("nan"))
    grow_joins = [e for e in joins if e["generation"] == grow]
    t_grown = max((e["t"] for e in grow_joins), default=float("nan"))
    req = first("join_requested", "w3")
    same_state = len({e.get("state_crc") for e in grow_joins}) == 1 and len(grow_joins) == 4
    bad = [e["event"] for e in events if e["event"] in ("reform_failed", "rejoin_not_seen")]
    lines += [
        f"## 3. Kill w3 at step {kill_at} (real SIGKILL), rejoin at step {rejoin_at}, M=4, H={H}",
        "| check | result |",
        "|---|---|",
        f"| run completed | {k['completed']} (wall {k_wall:.0f} s) |",
        f"| SIGKILL sent at step | {killed['step'] if killed else 'NO'} |",
        f"| survivors re-formed without w3 (generation {shrink}) | {t_shrunk - killed['t'] if killed else float('nan'):.2f} s after the kill |",
        f"| replacement started by the supervisor | {'yes, ' + format(restarted['t'] - killed['t'], '.2f') + ' s after the kill, standby for step ' + str(restarted['join_at_step']) if restarted and killed else 'NO'} |",
        f"| w3 back in the group (generation {grow}) at round | {grow_joins[0]['round'] if grow_joins else 'NO'} (= step {grow_joins[0]['round'] * H if grow_joins else '-'}); {t_grown - req['t'] if req and grow_joins else float('nan'):.2f} s from its join request |",
        f"| joiner got the current global weights + outer momentum (CRC32 equal on all 4) | {same_state} |",
        f"| state transfer to w3 | {k['state_transfer_bytes']['w3']:,} B |",
        f"| failed re-formations / rejoin timeouts | {len(bad)} |",
        f"| final members | {k.get('final_members')} |",
        f"| final val loss vs no-fault run | {k['final_val_loss']:.4f} vs {dil['final_val_loss']:.4f} (ratio {k['final_val_loss'] / dil['final_val_loss']:.4f}) |",
        f"| bytes sent w3 / w0 | {k['bytes_sent_per_worker']['w3']:,} / {k['bytes_sent_per_worker']['w0']:,} |",
        "",
    ]

    print("4. overhead: 1 worker, instant link vs plain PyTorch loop", flush=True)
    S1, reps = args.overhead_steps, args.reps
    one = {"workers": 1, "steps": S1, "inner_steps": H, "model": args.model, "eval_every": 10**6, "seed": 0}
    ratios: dict[str, list[float]] = {"diloco": [], "ddp": []}
    tps_all: dict[str, list[float]] = {"plain": [], "diloco": [], "ddp": []}
    cpu_step: dict[str, list[float]] = {"plain": [], "diloco": [], "ddp": []}
    for _ in range(reps):  # interleaved, so that load from other processes hits all three alike
        ref = plain_reference(TestbedConfig(algorithm="diloco", **one), out / "plain")
        tps_all["plain"].append(ref["tokens_per_s"])
        cpu_step["plain"].append(ref["cpu_s"] / S1)
        for algo in ("diloco", "ddp"):
            s1, _ = run(f"one_{algo}", out, algorithm=algo, **one)
            tps = s1["tokens"] / s1["train_wall_s"]
            tps_all[algo].append(tps)
            ratios[algo].append(tps / ref["tokens_per_s"])
            cpu_step[algo].append(s1["compute_s_per_worker"]["w0"] / S1)
    med = statistics.median
    rows = [
        f"| plain PyTorch (own process) | {med(tps_all['plain']):,.0f} | 1.000 | - | {med(cpu_step['plain']) * 1e3:.2f} |"
    ]
    for algo in ("diloco", "ddp"):
        rs = ", ".join(f"{r:.3f}" for r in ratios[algo])
        rows.append(
            f"| testbed {algo}, 1 worker | {med(tps_all[algo]):,.0f} | **{med(ratios[algo]):.3f}** | {rs} | {med(cpu_step[algo]) * 1e3:.2f} |"
        )
    lines += [
        f"## 4. Overhead: one worker, instant link, {S1} steps, vs a plain PyTorch loop ({reps} interleaved repetitions, median)",
        "Like-for-like: same model, initial weights, batches, AdamW, clipping, schedule, fp32, one thread, "
        "each in its own process started with the same environment; timed: the training loop only "
        "(testbed: inner steps + syncs, without start-up, validation and checkpoint writes).",
        "",
        "| loop | tokens/s | vs plain | per repetition | compute ms/step |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]

    print("5. utilisation under 100 Mbps / 100 ms vs analytic prediction", flush=True)
    up, down, lat, _ = parse_link("100Mbps/100ms")
    rows = []
    for h in (50, 10):
        u, _ = run(
            f"wan_H{h}",
            out,
            algorithm="diloco",
            steps=10 * h if h == 50 else 200,
            link_up_bits_per_s=up,
            link_down_bits_per_s=down,
            link_latency_s=lat,
            **{**common, "inner_steps": h},
        )
        t_comp = sum(u["compute_s_per_worker"].values()) / len(u["compute_s_per_worker"]) / u["steps"]
        t_sync = predicted_sync_s(u["payload_bytes_per_sync"], up, down, lat)
        pred = h * t_comp / (h * t_comp + t_sync)
        meas = sum(u["utilisation"].values()) / len(u["utilisation"])
        rows.append(
            f"| {h} | {t_comp * 1e3:.2f} | {t_sync:.4f} | {pred:.4f} | {meas:.4f} | {meas / pred - 1:+.2%} | {u['virtual_time_s']:.2f} |"
        )
    lines += [
        "## 5. Utilisation, DiLoCo M=4 over 100 Mbps / 100 ms (virtual clock), measured vs predicted",
        "predicted = H T_comp / (H T_comp + T_sync), T_sync = 8V/up + 8V/down + latency (spec/model.md sec. 3); T_comp = measured CPU time per inner step",
        "",
        "| H | T_comp ms | T_sync s | predicted | measured | diff | virtual time s |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]

    total = time.perf_counter() - t_start
    now = dt.datetime.now()
    header = [
        f"# Testbed on CPU ({now:%Y-%m-%d})",
        "",
        f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, `nproc` cores: {__import__('os').cpu_count()}; "
        f"Python {sys.version.split()[0]}, torch {torch.__version__}, gloo; one thread per worker process.",
        f"Command: `python benchmarks/bench_testbed.py --steps {S} --model {args.model}`; total benchmark time {total:.0f} s; "
        f"seed 0; load average (1/5/15 min) at start {load_start}, at end {load()}.",
        f"Resolved config of run 1 (DiLoCo): `{json.dumps({k: v for k, v in dil['config'].items() if k != 'extra'})}`",
        "",
    ]
    text = "\n".join(header + lines)
    print(text)
    path = Path(__file__).parent / "results" / f"testbed_cpu_{now:%Y%m}_dev.md"
    path.write_text(text + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
