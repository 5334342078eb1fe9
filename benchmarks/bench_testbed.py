"""Testbed benchmark on CPU: quality, bytes, fault tolerance, overhead and link-model agreement.

Run: ``python benchmarks/bench_testbed.py [--steps 2000] [--out runs/bench]``. Prints the figures and
writes ``benchmarks/results/testbed_cpu_<yyyymm>_dev.md`` with the config and library versions.
Raw runs go under ``--out`` (git-ignored ``runs/``), never into git.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path

import torch

from dispersal.testbed.codecs import CRC_BYTES, make_codec
from dispersal.testbed.config import TestbedConfig, parse_link
from dispersal.testbed.data import ByteData, prepare_corpus
from dispersal.testbed.gpt import GPT, GPTConfig, configure_adamw, lr_at
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


def train_wall_s(run_dir: Path) -> float:
    """Training-phase wall time: first 'joined' event to summary.json being written (no start-up)."""
    events = [json.loads(ln) for ln in (run_dir / "events.jsonl").read_text().splitlines()]
    start = min(e["t"] for e in events if e["event"] == "joined")
    return (run_dir / "summary.json").stat().st_mtime - start


def plain_loop(cfg: TestbedConfig, steps: int, data_dir: Path) -> float:
    """The same model, data, AdamW, clipping and schedule in a bare PyTorch loop; returns tokens/s."""
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    model = GPT(
        GPTConfig(n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd, block_size=cfg.block_size)
    )
    opt = configure_adamw(model, cfg.inner_lr, cfg.weight_decay)
    train_bin, _ = prepare_corpus(cfg.data, data_dir)
    data = ByteData(train_bin, cfg.block_size, cfg.batch_size)
    t0 = time.perf_counter()
    for step in range(steps):
        x, y = data.batch(cfg.seed, 0, step)
        _, loss = model(x, y)
        loss.backward()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, cfg.inner_lr, cfg.warmup_steps)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return steps * cfg.batch_size * cfg.block_size / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000, help="inner steps per worker for the quality runs")
    ap.add_argument("--out", type=Path, default=Path("runs/bench"))
    ap.add_argument("--model", default="tiny")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out, S, H, M = args.out, args.steps, 50, 4
    common = {"model": args.model, "workers": M, "inner_steps": H, "eval_every": 10**6, "seed": 0}
    lines: list[str] = []
    t_start = time.perf_counter()

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
    killed = any(e["event"] == "killed" for e in events)
    rejoined = any(e["event"] == "joined" and e["worker"] == "w3" and e["generation"] > 1 for e in events)
    lines += [
        f"## 3. Kill w3 at step {kill_at} (SIGKILL), rejoin at step {rejoin_at}",
        f"completed: {k['completed']}; killed: {killed}; w3 rejoined: {rejoined}; final members {k.get('final_members')}; generations {k.get('generation')}",
        f"final val loss {k['final_val_loss']:.4f} vs no-fault {dil['final_val_loss']:.4f} (ratio {k['final_val_loss'] / dil['final_val_loss']:.4f}); wall {k_wall:.0f} s",
        f"w3 bytes sent {k['bytes_sent_per_worker']['w3']:,} vs w0 {k['bytes_sent_per_worker']['w0']:,}; state transfer to w3 {k['state_transfer_bytes']['w3']:,} B",
        "",
    ]

    print("4. overhead: 1 worker, instant link vs plain PyTorch loop", flush=True)
    S1 = 600
    one_cfg = TestbedConfig(
        algorithm="diloco", workers=1, steps=S1, inner_steps=H, model=args.model, eval_every=10**6
    )
    plain_tps = plain_loop(one_cfg, S1, out / "plain_data")
    rows = []
    for algo in ("diloco", "ddp"):
        s1, _ = run(
            f"one_{algo}",
            out,
            algorithm=algo,
            steps=S1,
            workers=1,
            inner_steps=H,
            model=args.model,
            eval_every=10**6,
        )
        tps = s1["tokens"] / train_wall_s(out / f"one_{algo}")
        rows.append(f"| testbed {algo}, 1 worker | {tps:,.0f} | {tps / plain_tps:.3f} |")
    lines += [
        f"## 4. Overhead: one worker, instant link, {S1} steps (tokens/s, training phase, one eval at the end)",
        "| loop | tokens/s | vs plain |",
        "|---|---|---|",
        f"| plain PyTorch | {plain_tps:,.0f} | 1.000 |",
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
        f"Command: `python benchmarks/bench_testbed.py --steps {S} --model {args.model}`; total benchmark time {total:.0f} s.",
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
