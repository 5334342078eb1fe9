"""Testbed benchmark on CPU: quality, bytes, fault tolerance, overhead and link-model agreement.

Run: ``python benchmarks/bench_testbed.py [--steps 3000] [--out runs/bench]`` (about 12 min on 2 cores). Prints the figures and
writes ``benchmarks/results/testbed_cpu_<yyyymm>_dev.md`` with the config and library versions.
``--sections 5,6,7`` runs only the link sections (about 4 min) and writes
``testbed_links_cpu_<yyyymm>_dev.md`` instead. Raw runs go under ``--out`` (git-ignored ``runs/``), never into git.

Sections: 1-3 quality, bytes, kill/rejoin; 4 overhead vs a plain loop; 5 the virtual-clock link's
bookkeeping check (its utilisation against the formula it charges); 6 the real-link mode (relay on
real sockets, ``netlink.py``): measured wall-clock sync time and utilisation against the analytic
prediction; 7 the real-link mode's CPU overhead on an unshaped link.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import resource
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


def predicted_relay_sync_s(
    payload_bytes: float,
    up_bits_per_s: float,
    down_bits_per_s: float,
    latency_s: float,
    workers: int,
    relay_down_bits_per_s: float = math.inf,
    down_payload_bytes: float | None = None,
) -> float:
    """Analytic sync time through a relay (parameter server), the topology ``netlink.py`` implements:

        T_sync = 8 V_up / BW_up + max(8 V_down / BW_down, M 8 V_down / BW_relay) + latency

    Every worker uploads its payload V_up on its own uplink; the relay averages when the last one has
    arrived and sends the aggregate V_down (= V_up for fp32) to each of the M workers, limited by the
    worker's downlink or by the relay's downlink shared by all M downloads; ``latency`` is the round
    trip (half up, half down). With BW_relay = inf this is spec/model.md sec. 3's flat sync
    ``8V/up + 8V/down + latency`` without the straggler factor (the kernel's ``aggregation`` relay
    form with one-way latency = latency / 2). Payload bytes only: framing and the relay's own
    compute are not in the model (they are in the measurement).
    """
    v_down = payload_bytes if down_payload_bytes is None else down_payload_bytes
    down = max(8 * v_down / down_bits_per_s, workers * 8 * v_down / relay_down_bits_per_s)
    return 8 * payload_bytes / up_bits_per_s + down + latency_s


def kernel_relay_sync_s(
    params: int, bits_per_value: float, up: float, down: float, latency_s: float, workers: int
) -> float | None:
    """The same prediction through ``dispersal.model.kernel`` if it has an ``aggregation`` input
    (relay code, one-way latency = latency / 2); None when this kernel has none."""
    try:
        from dispersal.model.inputs import codes
        from dispersal.model.kernel import kernel
    except ImportError:
        return None
    if "aggregation" not in getattr(kernel, "INPUTS", {}):
        return None
    try:
        from dispersal.model.inputs.codes import STRAGGLER_CODES, Straggler
        from dispersal.model.inputs.params import ModelParams

        x = {name: 0.0 for name in kernel.INPUTS}
        x.update(kernel_defaults(kernel))
        x.update(
            params=float(params),
            active_params=float(params),
            num_nodes=float(workers),
            up_bits_per_s=up,
            down_bits_per_s=down,
            latency_s=latency_s / 2,
            wire_bits_per_param=bits_per_value,
            bits_per_value=bits_per_value,
            aggregation=float(codes.AGG_RELAY),
            straggler=float(STRAGGLER_CODES[Straggler.THRESHOLD]),  # f(n) = 1: no straggler factor
        )
        out = kernel.evaluate(x, ModelParams())
        return float(out["sync_time_s"]) if "sync_time_s" in out else None
    except Exception as exc:  # a kernel mid-rewrite: say so rather than fail the benchmark
        print(f"  (kernel prediction unavailable: {type(exc).__name__}: {exc})", flush=True)
        return None


def kernel_defaults(kernel: object) -> dict[str, float]:
    """Neutral values for the kernel inputs that a sync time does not depend on."""
    return {
        "chips_per_node": 1.0,
        "local_batch_tokens": 1.0,
        "micro_batches": 1.0,
        "node_peak_flop_per_s": 1e15,
        "mfu": 0.5,
        "node_memory_bytes": 1e15,
        "node_counted_memory_bytes": 1e15,
        "host_memory_bytes": math.inf,
        "host_link_bytes_per_s": 1e12,
        "hbm_usable_fraction": 1.0,
        "compression_ratio": 1.0,
        "bytes_per_param": 16.0,
        "duration_s": 1e6,
        "tokens": 1e9,
        "group_size": 1.0,
        "fragments": 1.0,
        "activation_bytes_per_value": 2.0,
        "activation_compression": 1.0,
        "pp_bits_per_s": 1e12,
        "regional_bits_per_s": 1e12,
        "algorithm": 1.0,  # flat DiLoCo (inputs.codes.ALGO_DILOCO)
        "inner_steps": 50.0,
        "dense_aggregate_bits_per_param": 32.0,
        "ddp_wire_bits_per_param": 32.0,
    }


def cpu_of_run(cfg: TestbedConfig, out: Path) -> tuple[dict, float]:
    """Run ``run_local`` in a child process; returns its summary and the CPU seconds (user + system)
    of that child and everything it waited for: supervisor, relay thread and worker processes."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_config.json").write_text(json.dumps(cfg.to_dict()) + "\n")
    code = (
        "import json, sys; from pathlib import Path; import torch; torch.set_num_threads(1); "
        "from dispersal.testbed.config import TestbedConfig; from dispersal.testbed.supervisor import run_local; "
        "out = Path(sys.argv[1]); "
        "run_local(TestbedConfig.from_dict(json.loads((out / 'bench_config.json').read_text())), out)"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads((out / "summary.json").read_text()), cpu


def link_syncs(out: Path) -> list[float]:
    """Measured wall-clock seconds of every worker's every sync (real-link mode logs)."""
    walls = []
    for f in sorted((out / "netlink").glob("*.jsonl")):
        walls += [json.loads(ln)["wall_s"] for ln in f.read_text().splitlines()]
    return walls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000, help="inner steps per worker for the quality runs")
    ap.add_argument("--out", type=Path, default=Path("runs/bench"))
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--overhead-steps", type=int, default=600, help="steps of each overhead run")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions of the overhead runs")
    ap.add_argument(
        "--sections", default="1,2,3,4,5,6,7", help="comma-separated; 1-3 run together (they share runs)"
    )
    ap.add_argument("--link-rounds", type=int, default=10, help="outer rounds of each section-6 run")
    args = ap.parse_args()
    sections = {int(x) for x in args.sections.split(",") if x.strip()}
    if sections & {1, 2, 3}:
        sections |= {1, 2, 3}
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

    if 1 in sections:
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
        q, _ = run(
            "diloco_int8", out, algorithm="diloco", steps=4 * H, codec="int8", **{**common, "workers": 2}
        )
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

    if 4 in sections:
        print("4. overhead: 1 worker, instant link vs plain PyTorch loop", flush=True)
        S1, reps = args.overhead_steps, args.reps
        one = {
            "workers": 1,
            "steps": S1,
            "inner_steps": H,
            "model": args.model,
            "eval_every": 10**6,
            "seed": 0,
        }
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

    if 5 in sections:
        print("5. bookkeeping check: virtual-clock utilisation vs the formula it charges", flush=True)
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
            "## 5. Bookkeeping check (virtual-clock link): DiLoCo M=4 at 100 Mbps / 100 ms",
            "The virtual-clock link charges T_sync = 8V/up + 8V/down + latency by formula while the payloads travel "
            "unshaped over gloo, so this compares the formula with itself: it checks that compute, straggler waits and "
            "sync charges are booked correctly, not that a network behaves like the model (that is section 6).",
            "predicted = H T_comp / (H T_comp + T_sync) (spec/model.md sec. 3); T_comp = measured CPU time per inner step",
            "",
            "| H | T_comp ms | T_sync s | predicted | measured | diff | virtual time s |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]

    if 6 in sections:
        print("6. real-link mode: measured wall-clock sync vs the analytic relay prediction", flush=True)
        R = args.link_rounds
        settings = [  # (label, link, relay downlink, target checked)
            ("100 Mbps / 100 ms", "100Mbps/100ms", math.inf, True),
            ("asymmetric 20 Mbps up / 100 Mbps down / 50 ms", "20Mbps/100Mbps/50ms", math.inf, True),
            ("100 Mbps / 100 ms, relay downlink 200 Mbps shared by 4", "100Mbps/100ms", 200e6, False),
        ]
        rows6, rows6u = [], []
        for k, (label, link, relay_down, target) in enumerate(settings):
            up, down, lat, jit = parse_link(link)
            u, wall = run(
                f"real_{k}",
                out,
                algorithm="diloco",
                steps=R * H,
                link_mode="real",
                link_up_bits_per_s=up,
                link_down_bits_per_s=down,
                link_latency_s=lat,
                link_jitter_s=jit,
                relay_down_bits_per_s=relay_down,
                **common,
            )
            walls = link_syncs(out / f"real_{k}")
            relay_recs = [
                json.loads(ln) for ln in (out / f"real_{k}" / "relay.jsonl").read_text().splitlines()
            ]
            V = u["payload_bytes_per_sync"]
            pred = predicted_relay_sync_s(V, up, down, lat, M, relay_down)
            kern = (
                kernel_relay_sync_s(u["params"], 32.0, up, down, lat, M) if math.isinf(relay_down) else None
            )
            mean_w = statistics.fmean(walls)
            med_w = statistics.median(walls)
            relay_s = statistics.fmean(r["sync_s"] for r in relay_recs)
            agg_s = statistics.fmean(r["aggregate_s"] for r in relay_recs)
            ok_t = abs(mean_w / pred - 1) <= 0.15
            t_comp = sum(u["compute_s_per_worker"].values()) / len(u["compute_s_per_worker"]) / u["steps"]
            pred_u = H * t_comp / (H * t_comp + pred)
            meas_u = sum(u["utilisation"].values()) / len(u["utilisation"])
            ok_u = abs(meas_u - pred_u) <= 0.05
            wire = json.loads((out / f"real_{k}" / "relay.json").read_text())["workers"]
            wire_up = statistics.fmean(w["wire_bytes_up"] for w in wire.values()) / u["rounds"]
            lost = sum(w["lost_segments_up"] + w["lost_segments_down"] for w in wire.values())
            verdict = ("met" if ok_t else "MISSED") if target else "(no target)"
            verdict_u = ("met" if ok_u else "MISSED") if target else "(no target)"
            kern_txt = f"{kern:.4f}" if kern is not None else "-"
            rows6.append(
                f"| {label} | {V:,} B; {wire_up:,.0f} B | {pred:.4f} | {kern_txt} | {mean_w:.4f} (median {med_w:.4f}, n={len(walls)}) "
                f"| {relay_s:.4f} ({agg_s * 1e3:.1f} ms averaging) | **{mean_w / pred - 1:+.1%}** {verdict} |"
            )
            rows6u.append(
                f"| {label} | {t_comp * 1e3:.2f} | {pred_u:.4f} | {meas_u:.4f} | **{(meas_u - pred_u) * 100:+.1f} points** {verdict_u} "
                f"| {u['virtual_time_s']:.1f} | {wall:.0f} | {lost} |"
            )
        lines += [
            f"## 6. Real-link mode: DiLoCo M={M}, H={H}, {R} outer rounds, through a relay on real sockets (127.0.0.1)",
            "Every worker uploads its frame over TCP to a relay that shapes each direction in user space (token bucket "
            "over 1448-byte segments, delay line), averages when the last frame is in, and sends the aggregate down "
            "(`src/dispersal/testbed/netlink.py`). The sync time is measured on the wall clock by each worker, from "
            "the first byte of its upload to the last byte of the aggregate, and charged; compute stays CPU time.",
            "predicted: `predicted_relay_sync_s` in this file, T_sync = 8 V/up + max(8 V/down, M 8 V/BW_relay) + "
            "latency, V = payload bytes per sync (fp32 + CRC32); kernel: `dispersal.model.kernel` with the relay "
            "aggregation and one-way latency = latency / 2, where it has that input (`-`: not available).",
            "",
            "| link | payload; wire bytes per upload | predicted s | kernel s | measured mean s (per worker and sync) | relay: first byte to last delivery s | measured / predicted - 1 (target 15 %) |",
            "|---|---|---|---|---|---|---|",
            *rows6,
            "",
            "Utilisation = compute / (compute + exposed), exposed = wait for the last member's compute (on the CPU-time "
            "clock) + measured sync; predicted = H T_comp / (H T_comp + T_sync predicted).",
            "",
            "| link | T_comp ms | predicted | measured | diff (target 5 points) | simulated time s | wall s | lost segments |",
            "|---|---|---|---|---|---|---|---|",
            *rows6u,
            "",
        ]

    if 7 in sections:
        print("7. real-link overhead on an unshaped link: CPU time vs the virtual-clock mode", flush=True)
        reps = args.reps
        rows7 = []
        for algo, workers, steps in (("diloco", M, 600), ("ddp", 2, 300)):
            cpu: dict[str, list[float]] = {"virtual": [], "real": []}
            relay_cpu: list[float] = []
            for _ in range(reps):  # interleaved
                for mode in ("virtual", "real"):
                    cfg = TestbedConfig(
                        algorithm=algo,
                        link_mode=mode,
                        **{**common, "workers": workers, "steps": steps, "eval_batches": 8},
                    )
                    _, c = cpu_of_run(cfg, out / f"cpu_{algo}_{mode}")
                    cpu[mode].append(c)
                    if mode == "real":
                        relay_cpu.append(
                            json.loads((out / f"cpu_{algo}_{mode}" / "relay.json").read_text())["relay_cpu_s"]
                        )
                    print(f"  cpu_{algo}_{mode}: {c:.1f} s CPU", flush=True)
            med = statistics.median
            ratio = med(cpu["real"]) / med(cpu["virtual"])
            each = ", ".join(f"{r / v:.3f}" for r, v in zip(cpu["real"], cpu["virtual"], strict=True))
            rows7.append(
                f"| {algo}, M={workers}, {steps} steps | {med(cpu['virtual']):.1f} | {med(cpu['real']):.1f} | "
                f"**{ratio:.3f}** ({'met' if abs(ratio - 1) <= 0.10 else 'MISSED'}) | {each} | {med(relay_cpu):.2f} |"
            )
        lines += [
            f"## 7. Real-link mode overhead on an unshaped link ({reps} interleaved repetitions, median)",
            "CPU time (user + system) of the whole run: supervisor (with the relay thread in real-link mode) and every "
            "worker process, start-up included, measured with getrusage(RUSAGE_CHILDREN) around a child that runs it. "
            "Link `instant` in both: virtual = gloo all-gather, each worker averages; real = TCP through the relay "
            "(no shaping), the relay averages once.",
            "",
            "| run | virtual CPU s | real CPU s | real / virtual (target within 10 %) | per repetition | of which the relay thread s |",
            "|---|---|---|---|---|---|",
            *rows7,
            "",
        ]

    total = time.perf_counter() - t_start
    now = dt.datetime.now()
    header = [
        f"# Testbed on CPU ({now:%Y-%m-%d})",
        "",
        f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, `nproc` cores: {__import__('os').cpu_count()}; "
        f"Python {sys.version.split()[0]}, torch {torch.__version__}, gloo; one thread per worker process.",
        f"Command: `python benchmarks/bench_testbed.py --steps {S} --model {args.model} --sections {args.sections}`; "
        f"total benchmark time {total:.0f} s; "
        f"seed 0; load average (1/5/15 min) at start {load_start}, at end {load()}.",
    ]
    if 1 in sections:
        header.append(
            f"Resolved config of run 1 (DiLoCo): `{json.dumps({k: v for k, v in dil['config'].items() if k != 'extra'})}`"
        )
    header.append("")
    text = "\n".join(header + lines)
    print(text)
    everything = sections >= {1, 2, 3, 4, 5, 6, 7}
    name = (
        "testbed_cpu" if everything else "testbed_links_cpu" if sections <= {5, 6, 7} else "testbed_part_cpu"
    )
    path = Path(__file__).parent / "results" / f"{name}_{now:%Y%m}_dev.md"
    path.write_text(text + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
