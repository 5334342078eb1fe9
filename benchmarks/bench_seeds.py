"""DiLoCo / DDP final validation loss over several seeds, with a Student-t confidence interval.

Run: ``python benchmarks/bench_seeds.py [--seeds 0 1 2] [--steps 1000]`` (about 3-4 min on an idle
2-core machine with the defaults; 11 min under a load of 8-14). For each seed it trains DDP and DiLoCo (M workers, H inner steps) at equal
tokens; the seed sets the initial weights and the training batches, while the validation batches
are the same for every run. The per-seed ratio ``L_diloco / L_ddp`` is paired (same seed, same
initial weights), and the interval is ``mean +- t sd / sqrt(n)`` over seeds
(``dispersal.testbed.report.mean_interval``). Writes
``benchmarks/results/testbed_seeds_cpu_<yyyymm>_dev.md``; raw runs go under ``--out`` (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time
from pathlib import Path

import torch

from dispersal._io import atomic_write_text
from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.gpt import param_count
from dispersal.testbed.report import mean_interval
from dispersal.testbed.supervisor import run_local


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=1000, help="inner steps per worker")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--inner-steps", type=int, default=50, help="H")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--tokenizer", default="byte")
    ap.add_argument("--eval-batches", type=int, default=64)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--out", type=Path, default=Path("runs/bench_seeds"))
    ap.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    args = ap.parse_args()
    if len(args.seeds) < 3:
        ap.error("--seeds: give at least 3 seeds")
    torch.set_num_threads(1)
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    rows = []
    cfg_first: TestbedConfig | None = None
    for seed in args.seeds:
        losses, walls = {}, {}
        for algorithm in ("ddp", "diloco"):
            cfg = TestbedConfig(
                algorithm=algorithm,
                workers=args.workers,
                steps=args.steps,
                inner_steps=args.inner_steps,
                model=args.model,
                tokenizer=args.tokenizer,
                eval_every=10**6,  # final validation only
                eval_batches=args.eval_batches,
                seed=seed,
            )
            cfg_first = cfg_first or cfg
            t0 = time.perf_counter()
            summary = run_local(cfg, args.out / f"seed{seed}_{algorithm}")
            walls[algorithm] = time.perf_counter() - t0
            if not summary.get("completed"):
                raise SystemExit(f"seed {seed} {algorithm}: run did not complete: {summary}")
            losses[algorithm] = float(summary["final_val_loss"])
            print(
                f"  seed {seed} {algorithm}: val {losses[algorithm]:.4f}  wall {walls[algorithm]:.0f} s",
                flush=True,
            )
        rows.append({"seed": seed, **losses, "ratio": losses["diloco"] / losses["ddp"], "wall": walls})
    assert cfg_first is not None
    ratio = mean_interval([r["ratio"] for r in rows], args.confidence)
    ddp = mean_interval([r["ddp"] for r in rows], args.confidence)
    dil = mean_interval([r["diloco"] for r in rows], args.confidence)
    total_s = time.perf_counter() - t_start
    c = cfg_first
    unit = "nats/byte" if c.tokenizer == "byte" else "nats/token"
    params = param_count(c.n_layer, c.n_embd, c.block_size, c.vocab_size)
    tokens = args.steps * args.workers * c.batch_size * c.block_size
    pct = round(100 * args.confidence)
    lines = [
        f"# Testbed: DiLoCo / DDP over {len(rows)} seeds ({dt.date.today().isoformat()})",
        "",
        f"Machine: {platform.machine()}, `nproc` cores: {os.cpu_count()}; Python {platform.python_version()}, "
        f"torch {torch.__version__}, gloo; one thread per worker process.",
        f"Command: `python benchmarks/bench_seeds.py --seeds {' '.join(map(str, args.seeds))} --steps {args.steps} "
        f"--workers {args.workers} --inner-steps {args.inner_steps} --model {args.model} --tokenizer {args.tokenizer} "
        f"--eval-batches {args.eval_batches}`; total time {total_s:.0f} s; load average at start "
        f"{' / '.join(f'{x:.2f}' for x in load_start)}, at end {' / '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        f"Model `{c.model}` ({params:,} parameters, tokenizer `{c.tokenizer}`, vocab {c.vocab_size}); M = {c.workers}, "
        f"H = {c.inner_steps}, {args.steps} inner steps per worker ({tokens:,} tokens per run, "
        f"{args.steps // c.inner_steps} outer rounds); AdamW lr {c.inner_lr} (same for DDP and DiLoCo's inner "
        f"optimizer), outer SGD lr {c.outer_lr}, Nesterov {c.outer_momentum}; nothing tuned. Validation: the same "
        f"{args.eval_batches} batches x {c.batch_size} x {c.block_size} held-out tokens for every run.",
        "",
        f"| seed | DDP val loss ({unit}) | DiLoCo val loss | DiLoCo / DDP | wall s (DDP, DiLoCo) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {r['ddp']:.4f} | {r['diloco']:.4f} | {r['ratio']:.4f} | "
            f"{r['wall']['ddp']:.0f}, {r['wall']['diloco']:.0f} |"
        )
    lines += [
        "",
        f"| figure (n = {ratio.n} seeds) | mean | sd | {pct} % t-interval |",
        "|---|---|---|---|",
        f"| DiLoCo / DDP val loss (paired by seed) | **{ratio.mean:.4f}** | {ratio.sd:.4f} | "
        f"[{ratio.low:.4f}, {ratio.high:.4f}] |",
        f"| DDP val loss | {ddp.mean:.4f} | {ddp.sd:.4f} | [{ddp.low:.4f}, {ddp.high:.4f}] |",
        f"| DiLoCo val loss | {dil.mean:.4f} | {dil.sd:.4f} | [{dil.low:.4f}, {dil.high:.4f}] |",
        "",
        f"The interval assumes the per-seed ratios are independent draws from a normal distribution; with "
        f"{ratio.n} seeds the t quantile is large, so the interval is wide by construction.",
        "",
        f"Resolved config (DDP, seed {args.seeds[0]}): `{json.dumps(c.to_dict())}`",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    path = args.results / f"testbed_seeds_cpu_{dt.date.today():%Y%m}_dev.md"
    atomic_write_text(path, text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
