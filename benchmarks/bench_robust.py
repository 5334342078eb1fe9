"""The robustness table (issue 19): attacks x aggregation rules, measured with the many-replica engine.

Run (resumable: each run is appended to ``runs/robust/raw.jsonl`` and skipped when re-run)::

    python benchmarks/bench_robust.py --model tiny --workers 3 8 --seeds 0 1 2
    python benchmarks/bench_robust.py --model small --workers 3 --seeds 0 1 2 --kinds scale noise sign_flip
    python benchmarks/bench_robust.py --fractions --model tiny --workers 8      # 2..4 attackers of 8
    python benchmarks/bench_robust.py --summarize                              # markdown tables

Every run is DiLoCo in one process (dispersal.testbed.replicas: the same model, data, AdamW and
outer Nesterov step as the multi-process workers, checked against them by
tests/testbed/test_replicas.py), so a grid of hundreds of runs fits in minutes. One attacker is
the last worker (``w{M-1}``), attacking from step 0 with the kind's default value (attacks.py).
"Clean" is the plain mean with no attacker, same preset, workers and seed. Time per round is the
aggregation's own wall time (plus scoring for gauntlet), measured on a shared 2-core host.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import torch

from dispersal.testbed.attacks import KINDS
from dispersal.testbed.replicas import ReplicaConfig, run_replicas
from dispersal.testbed.replicas_sweep import mean_sd
from dispersal.testbed.robust import AGGREGATORS

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "runs" / "robust" / "raw.jsonl"
KEYS = ("model", "workers", "seed", "rule", "attack", "attackers")


def _key(d: dict[str, Any]) -> str:
    return json.dumps({k: d[k] for k in KEYS}, sort_keys=True)


def _specs(a: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    # Seed-major, so an interrupted grid still has every cell for the first seeds.
    for seed in a.seeds:
        for m in a.workers:
            for rule in a.rules:
                if a.fractions:
                    for k in range(2, m // 2 + 1):
                        for kind in a.kinds:
                            out.append(
                                {"workers": m, "seed": seed, "rule": rule, "attack": kind, "attackers": k}
                            )
                    continue
                for kind in dict.fromkeys(["none", *a.kinds]):
                    out.append(
                        {
                            "workers": m,
                            "seed": seed,
                            "rule": rule,
                            "attack": kind,
                            "attackers": 0 if kind == "none" else 1,
                        }
                    )
    for o in out:
        o["model"] = a.model
    return out


def _run(a: argparse.Namespace) -> None:
    RAW.parent.mkdir(parents=True, exist_ok=True)
    done = {_key(json.loads(ln)) for ln in RAW.read_text().splitlines()} if RAW.exists() else set()
    for spec in _specs(a):
        if _key(spec) in done:
            continue
        m = spec["workers"]
        attacks = tuple(f"w{m - 1 - i}:{spec['attack']}" for i in range(spec["attackers"]))
        cfg = ReplicaConfig(
            replicas=m,
            steps=a.steps,
            inner_steps=a.inner_steps,
            model=spec["model"],
            batch_size=a.batch_size,
            merge=spec["rule"],
            attacks=attacks,
            seed=spec["seed"],
            eval_batches=a.eval_batches,
            warmup_steps=max(1, a.steps // 10),
        )
        res = run_replicas(cfg, ROOT / "runs" / "data")
        row = dict(
            spec,
            steps=a.steps,
            inner_steps=a.inner_steps,
            batch_size=a.batch_size,
            final_val_loss=res.final_val_loss,
            diverged=res.diverged,
            rejected=res.rejected,
            clipped=res.clipped,
            reasons=list(res.reasons),
            aggregate_s=res.aggregate_s_per_round,
            round_s=res.round_s,
        )
        with open(RAW, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def _fmt(ratio: float) -> str:
    if not math.isfinite(ratio):
        return "**diverged**"
    s = f"{ratio:.3f}"
    return f"**{s}**" if ratio > 1.05 else s


def _summarize(a: argparse.Namespace) -> None:
    rows = [json.loads(ln) for ln in RAW.read_text().splitlines()]
    clean = {
        (r["model"], r["workers"], r["seed"]): r["final_val_loss"]
        for r in rows
        if r["rule"] == "mean" and r["attackers"] == 0
    }

    def ratio(r: dict[str, Any]) -> float:
        c = clean.get((r["model"], r["workers"], r["seed"]))
        v = r["final_val_loss"]
        return v / c if c and math.isfinite(v) and not r["diverged"] else math.inf

    rules = [x for x in AGGREGATORS if any(r["rule"] == x for r in rows)]
    for model, m in sorted({(r["model"], r["workers"]) for r in rows}):
        sub = [r for r in rows if (r["model"], r["workers"]) == (model, m) and r["attackers"] <= 1]
        kinds = [k for k in ["none", *KINDS] if any(r["attack"] == k for r in sub)]
        print(
            f"\n**{model}, {m} workers** (final validation loss / clean plain-mean loss, mean over the seeds listed per row; "
            f"bold: > 1.05):\n"
        )
        print("| attack | " + " | ".join(rules) + " | seeds |")
        print("|---|" + "---|" * (len(rules) + 1))
        for kind in kinds:
            cells = []
            for rule in rules:
                vals = [ratio(r) for r in sub if r["attack"] == kind and r["rule"] == rule]
                cells.append(_fmt(sum(vals) / len(vals)) if vals else "")
            n = sorted({r["seed"] for r in sub if r["attack"] == kind})
            print(f"| {kind} | " + " | ".join(cells) + f" | {', '.join(map(str, n))} |")
        taxes = []
        for rule in rules:
            rs = [r for r in sub if r["attack"] == "none" and r["rule"] == rule]
            if rs:
                mu, sd = mean_sd([ratio(r) for r in rs])
                agg = 1e3 * sum(r["aggregate_s"] for r in rs) / len(rs)
                rnd = sum(r["round_s"] for r in rs) / len(rs)
                taxes.append(f"| {rule} | {mu:.4f} +- {sd:.4f} | {agg:.1f} | {rnd:.2f} |")
        print(f"\nRobustness tax, {model}, {m} workers, no attacker:\n")
        print("| rule | loss / clean mean (mean +- sd) | aggregation ms / round | round s (whole) |")
        print("|---|---|---|---|")
        print("\n".join(taxes))
    frac = [r for r in rows if r["attackers"] >= 1]
    for model, m, kind in sorted(
        {(r["model"], r["workers"], r["attack"]) for r in frac if r["attackers"] >= 2}
    ):
        print(
            f"\nLargest attacker count survived (loss within 5% of clean in every seed), {model}, {m} workers, {kind}:\n"
        )
        print("| rule | survives k of " + str(m) + " |")
        print("|---|---|")
        for rule in rules:
            best = 0
            for k in range(1, m // 2 + 1):
                ks = [
                    ratio(r)
                    for r in frac
                    if (r["model"], r["workers"], r["attack"], r["rule"], r["attackers"])
                    == (model, m, kind, rule, k)
                ]
                if ks and all(x <= 1.05 for x in ks):
                    best = k
                elif ks:
                    break
            print(f"| {rule} | {best} ({best / m:.0%}) |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--workers", type=int, nargs="+", default=[3, 8])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rules", nargs="+", default=[r for r in AGGREGATORS if r != "norm_preserving"])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS))
    ap.add_argument("--steps", type=int, default=60, help="inner steps per worker")
    ap.add_argument("--inner-steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--eval-batches", type=int, default=32)
    ap.add_argument("--fractions", action="store_true", help="2 .. M/2 attackers of the given kinds")
    ap.add_argument("--summarize", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("DISPERSAL_THREADS", "1")))
    if a.summarize:
        _summarize(a)
    else:
        _run(a)
    print("# done", file=sys.stderr)


if __name__ == "__main__":
    main()
