"""Decoupled DiLoCo vs synchronous DiLoCo in the testbed at equal tokens and the same link (issue 22).

Both run ``--workers 3 --inner-steps H --steps S`` (every worker / learner does S inner steps of the
same batch, so the same tokens), the same virtual-clock link, seed, model and outer optimizer; the
decoupled syncer merges with ``--merge mean`` on a quorum of 2 (a majority) or a 2 s deadline, and a
learner mixes a newer global state in with alpha 0.5. Each (algorithm, outer momentum, seed) is one
run of ``supervisor.run_local``; the script reports the final validation loss, the training wall
time (the slowest worker's loop, without evaluation), the whole run's wall time, the virtual-clock
time, and the CPU seconds of all the run's processes (so a reader can tell load from algorithm).

Run: ``python benchmarks/bench_decoupled.py [--steps 100] [--seeds 0 1 2] [--momenta 0.9 0.5]``
(about 6 minutes on a loaded 2-core machine). Writes ``benchmarks/results/decoupled_cpu_<yyyymm>_dev.md``
and ``.json``; raw runs go under ``--out`` (git-ignored ``runs/``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from dispersal.testbed.config import TestbedConfig, parse_link
from dispersal.testbed.supervisor import run_local

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_one(
    algorithm: str, momentum: float, seed: int, args: argparse.Namespace, out: Path
) -> dict[str, Any]:
    up, down, latency, jitter = parse_link(args.link)
    cfg = TestbedConfig(
        algorithm=algorithm,
        workers=3,
        steps=args.steps,
        inner_steps=args.inner_steps,
        model="tiny",
        seed=seed,
        outer_momentum=momentum,
        link_up_bits_per_s=up,
        link_down_bits_per_s=down,
        link_latency_s=latency,
        link_jitter_s=jitter,
        eval_batches=32,
        eval_every=1000,
        run_timeout_s=900.0,
    )
    cpu0, self0, t0 = _children_cpu_s(), time.process_time(), time.perf_counter()
    s = run_local(cfg, out)
    wall = time.perf_counter() - t0
    cpu = _children_cpu_s() - cpu0 + time.process_time() - self0
    return {
        "algorithm": algorithm,
        "outer_momentum": momentum,
        "seed": seed,
        "completed": s.get("completed"),
        "final_val_loss": s.get("final_val_loss"),
        "train_wall_s": s.get("train_wall_s"),
        "run_wall_s": wall,
        "cpu_s": cpu,
        "virtual_time_s": s.get("virtual_time_s"),
        "versions": s.get("versions", s.get("rounds")),
        "updates_rejected": s.get("updates_rejected"),
        "out": str(out),
    }


def _table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| algorithm | outer momentum | seed | final val loss | train wall s | run wall s | CPU s | "
        "CPU / run wall | virtual time s | outer steps |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['algorithm']} | {r['outer_momentum']:g} | {r['seed']} | {r['final_val_loss']:.4f} | "
            f"{r['train_wall_s']:.1f} | {r['run_wall_s']:.1f} | {r['cpu_s']:.1f} | "
            f"{r['cpu_s'] / r['run_wall_s']:.2f} | {r['virtual_time_s']:.2f} | {r['versions']} |"
        )
    return lines


def _summary(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| algorithm | outer momentum | final val loss, mean (min-max) | train wall s, mean | CPU s, mean |",
        "|---|---|---|---|---|",
    ]
    keys = sorted({(r["algorithm"], r["outer_momentum"]) for r in rows}, key=lambda k: (-k[1], k[0]))
    for alg, mom in keys:
        g = [r for r in rows if (r["algorithm"], r["outer_momentum"]) == (alg, mom)]
        loss = [r["final_val_loss"] for r in g]
        lines.append(
            f"| {alg} | {mom:g} | {statistics.mean(loss):.4f} ({min(loss):.4f}-{max(loss):.4f}) | "
            f"{statistics.mean(r['train_wall_s'] for r in g):.1f} | {statistics.mean(r['cpu_s'] for r in g):.1f} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--inner-steps", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--momenta", type=float, nargs="+", default=[0.9, 0.5])
    ap.add_argument("--link", default="100Mbps/100ms")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_decoupled")
    args = ap.parse_args()
    stamp = dt.datetime.now(dt.UTC)
    base = args.out / stamp.strftime("%Y%m%d-%H%M%S")
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    rows = []
    for momentum in args.momenta:
        for seed in args.seeds:
            for alg in ("diloco", "decoupled"):
                r = run_one(alg, momentum, seed, args, base / f"{alg}_m{momentum:g}_s{seed}")
                print(json.dumps(r), flush=True)
                rows.append(r)
    total = time.perf_counter() - t0
    load1 = os.getloadavg()
    res = ROOT / "benchmarks" / "results"
    name = f"decoupled_cpu_{stamp:%Y%m}_dev"
    (res / f"{name}.json").write_text(json.dumps(rows, indent=1) + "\n")
    head = [
        f"# Decoupled vs synchronous DiLoCo, CPU ({stamp:%Y-%m-%d})",
        "",
        f"Machine: {platform.machine()}, `nproc` cores: {os.cpu_count()}; Python {platform.python_version()}, "
        f"torch {torch.__version__}; one thread per process. Command: `python benchmarks/bench_decoupled.py "
        f"{' '.join(sys.argv[1:])}`; {total:.0f} s for all runs; load average (1/5/15 min) at start "
        f"{' / '.join(f'{x:.2f}' for x in load0)}, at end {' / '.join(f'{x:.2f}' for x in load1)}.",
        "",
        f"Setup: 3 workers / learners, model `tiny`, H = {args.inner_steps}, {args.steps} inner steps each "
        f"(equal tokens), link {args.link} (virtual clock), outer lr 0.7, default corpus; decoupled: merge mean, "
        "quorum 2 of 3, deadline 2 s, max staleness 4, alpha 0.5. Validation: the same 32 batches for every run. "
        "Wall times are on a machine shared with other jobs: compare CPU / run wall across rows before "
        "reading a wall-time difference as the algorithm's.",
        "",
        *_summary(rows),
        "",
        *_table(rows),
        "",
        f"Raw runs: `{base.relative_to(ROOT) if base.is_relative_to(ROOT) else base}` (not in git).",
    ]
    (res / f"{name}.md").write_text("\n".join(head) + "\n")
    print("\n".join(head))


if __name__ == "__main__":
    main()
