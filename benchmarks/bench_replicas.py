"""The M-sweep: DiLoCo with M = 1 ... 256 replicas in one process at a fixed token budget.

Run (about 30 min on a 2-core machine under a load of ~12; every run is appended to
``runs/replicas/<model>_raw.jsonl`` as it finishes and skipped when re-run, so the sweep resumes)::

    python benchmarks/bench_replicas.py --model tiny --seeds 0 1 2
    python benchmarks/bench_replicas.py --model tiny --summarize     # writes the TOML, the PNG, a table

Per seed: the baseline (single-replica AdamW, ``algorithm="dp"``, M = 1) at 5 token budgets gives
that seed's loss-vs-compute law; each DiLoCo run (M replicas, H, merge rule) at the fixed budget
``--replica-steps`` x batch x block tokens then gets g = C_baseline(L_run) / C_run
(replicas_sweep.quality_factor). Warmup is 10% of each run's steps (at M = 256 a run has 8 steps
per replica; the testbed's fixed 20-step warmup would never end).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

from dispersal._io import atomic_write_text
from dispersal.model.kernel.quality import loss_ratio
from dispersal.testbed.replicas import ReplicaConfig, run_replicas
from dispersal.testbed.replicas_sweep import (
    BaselineLaw,
    g_from_ratio,
    loss_slope,
    mean_sd,
    quality_factor,
    toml_tables,
)

ROOT = Path(__file__).resolve().parents[1]
TOML = ROOT / "src" / "dispersal" / "data" / "testbed_msweep.toml"
PNG = ROOT / "docs" / "testbed_msweep.png"
COMMANDS = {
    "tiny": "--model tiny --seeds 0 1 2   (defaults: --replica-steps 1024 --batch-size 1 --inner-steps 2 8)",
    "small": "--model small --seeds 0 1 2 --replicas 1 4 16 64 --inner-steps 8"
    " --baseline-budgets 0.015625 0.0625 0.125 0.25 0.5 1.0",
}
"""The runs behind the committed TOML (the GPU presets: benchmarks/gpu_replicas.py)."""


def _key(d: dict[str, Any]) -> str:
    return json.dumps(
        {
            k: d[k]
            for k in ("model", "algorithm", "replicas", "inner_steps", "steps", "merge", "seed", "batch_size")
        },
        sort_keys=True,
    )


def _grid(a: argparse.Namespace) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for seed in a.seeds:
        for mult in a.baseline_budgets:
            runs.append(
                {
                    "algorithm": "dp",
                    "replicas": 1,
                    "inner_steps": 1,
                    "steps": int(a.replica_steps * mult),
                    "merge": "mean",
                    "seed": seed,
                }
            )
        for m in a.replicas:  # data parallel at the same global batch (M x batch) and tokens
            if m > 1:
                runs.append(
                    {
                        "algorithm": "dp",
                        "replicas": m,
                        "inner_steps": 1,
                        "steps": a.replica_steps // m,
                        "merge": "mean",
                        "seed": seed,
                    }
                )
        for h in a.inner_steps:
            for m in a.replicas:
                steps = a.replica_steps // m
                if steps < h or steps % h:
                    continue
                for merge in a.merges if m > 1 else ["mean"]:
                    runs.append(
                        {
                            "algorithm": "diloco",
                            "replicas": m,
                            "inner_steps": h,
                            "steps": steps,
                            "merge": merge,
                            "seed": seed,
                        }
                    )
    for r in runs:
        r.update(model=a.model, batch_size=a.batch_size)
    return runs


def _run(a: argparse.Namespace) -> None:
    raw = ROOT / "runs" / "replicas" / f"{a.model}_raw.jsonl"
    raw.parent.mkdir(parents=True, exist_ok=True)
    done = {_key(json.loads(ln)) for ln in raw.read_text().splitlines()} if raw.exists() else set()
    for spec in _grid(a):
        if _key(spec) in done:
            continue
        cfg = ReplicaConfig(
            algorithm=spec["algorithm"],
            replicas=spec["replicas"],
            inner_steps=spec["inner_steps"],
            steps=spec["steps"],
            model=spec["model"],
            batch_size=spec["batch_size"],
            merge=spec["merge"],
            seed=spec["seed"],
            warmup_steps=max(1, spec["steps"] // 10),
            eval_batches=a.eval_batches,
            chunk=a.chunk,
            device=a.device,
        )
        res = run_replicas(cfg, ROOT / "runs" / "data")
        row = dict(
            spec,
            final_val_loss=res.final_val_loss,
            tokens=res.tokens,
            diverged=res.diverged,
            wall_s=round(res.wall_s, 2),
        )
        with open(raw, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def _params(model: str) -> int:
    from dispersal.testbed.config import MODEL_PRESETS
    from dispersal.testbed.gpt import param_count

    p = MODEL_PRESETS[model]
    return param_count(p["n_layer"], p["n_embd"], p["block_size"])


def _summarize(a: argparse.Namespace) -> None:
    raw = ROOT / "runs" / "replicas" / f"{a.model}_raw.jsonl"
    rows = [json.loads(ln) for ln in raw.read_text().splitlines()]
    laws: dict[int, BaselineLaw] = {}
    for seed in sorted({r["seed"] for r in rows}):
        base = sorted(
            (r["tokens"], r["final_val_loss"])
            for r in rows
            if r["seed"] == seed and r["algorithm"] == "dp" and r["replicas"] == 1
        )
        if len(base) >= 2:
            laws[seed] = BaselineLaw(tokens=tuple(t for t, _ in base), losses=tuple(v for _, v in base))
    dp = {
        (r["seed"], r["replicas"]): r["final_val_loss"]
        for r in rows
        if r["algorithm"] == "dp" and r["replicas"] > 1
    }
    groups: dict[tuple[str, int, int, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["seed"] in laws and (r["algorithm"] == "diloco" or r["replicas"] > 1):
            groups.setdefault((r["algorithm"], r["inner_steps"], r["replicas"], r["merge"]), []).append(r)
    out = []
    for (alg, h, m, merge), rs in sorted(groups.items()):
        gs = [quality_factor(laws[r["seed"]], r["final_val_loss"], r["tokens"]) for r in rs]
        g_mu, g_sd = mean_sd([g for g, _ in gs])
        l_mu, l_sd = mean_sd([r["final_val_loss"] for r in rs])
        row: dict[str, Any] = {
            "preset": a.model,
            "algorithm": alg,
            "replicas": m,
            "inner_steps": h,
            "merge": merge if alg == "diloco" else "dp",
            "seeds": sorted(r["seed"] for r in rs),
            "tokens": rs[0]["tokens"],
            "steps_per_replica": rs[0]["steps"],
            "batch_size": rs[0]["batch_size"],
            "val_loss_mean": l_mu,
            "val_loss_sd": l_sd,
            "g_mean": g_mu,
            "g_sd": g_sd,
            "g_in_baseline_range": all(inside for _, inside in gs),
        }
        if alg == "diloco":
            # The analytic model's r at this M, H and parameter count (far outside its 35M-2.4B fit).
            row["model_loss_ratio"] = float(loss_ratio(m, h, _params(a.model)))
        paired = [r for r in rs if (r["seed"], m) in dp]
        if alg == "diloco" and m > 1 and paired:
            ratios = [r["final_val_loss"] / dp[(r["seed"], m)] for r in paired]
            gdp = [g_from_ratio(q, loss_slope(laws[r["seed"]])) for q, r in zip(ratios, paired, strict=True)]
            row["ratio_vs_dp_mean"], row["ratio_vs_dp_sd"] = mean_sd(ratios)
            row["g_vs_dp_mean"], row["g_vs_dp_sd"] = mean_sd(gdp)
        out.append(row)
    base_rows = []
    for seed, law in laws.items():
        for t, v in zip(law.tokens, law.losses, strict=True):
            base_rows.append({"preset": a.model, "seed": seed, "tokens": int(t), "val_loss": v})
        base_rows[-1]["loss_slope"] = loss_slope(law)
    _write_toml(a, out, base_rows)
    _plot(a, out)
    print(
        "| preset | H | M | merge | tokens | val loss (mean +- sd) | g vs 1 replica | L / L_DP(M) | g vs DP(M) | model r |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for o in out:
        flag = "" if o["g_in_baseline_range"] else " (extrap.)"
        rdp = f"{o['ratio_vs_dp_mean']:.4f} +- {o['ratio_vs_dp_sd']:.4f}" if "ratio_vs_dp_mean" in o else ""
        gdp_s = f"{o['g_vs_dp_mean']:.3f} +- {o['g_vs_dp_sd']:.3f}" if "g_vs_dp_mean" in o else ""
        h_s = o["inner_steps"] if o["algorithm"] == "diloco" else "-"
        print(
            f"| {o['preset']} | {h_s} | {o['replicas']} | {o['merge']} | {o['tokens']:,} | "
            f"{o['val_loss_mean']:.3f} +- {o['val_loss_sd']:.3f} | {o['g_mean']:.3f} +- {o['g_sd']:.3f}{flag} | {rdp} | {gdp_s} "
            f"| {o.get('model_loss_ratio', float('nan')):.3f} |"
        )


def _write_toml(a: argparse.Namespace, sweep: list[dict[str, Any]], base: list[dict[str, Any]]) -> None:
    """Replace this preset's tables in the TOML (other presets' rows are kept)."""
    keep_sweep: list[dict[str, Any]] = []
    keep_base: list[dict[str, Any]] = []
    if TOML.exists():
        import tomllib

        old = tomllib.loads(TOML.read_text())
        keep_sweep = [r for r in old.get("sweep", []) if r["preset"] != a.model]
        keep_base = [r for r in old.get("baseline", []) if r["preset"] != a.model]
    header = (
        "# The testbed M-sweep (issue 21 item 3): DiLoCo with M replicas in one process\n"
        "# (dispersal.testbed.replicas), fixed token budget per preset, byte tokenizer, the standard library corpus.\n"
        "# g = (tokens the single-replica AdamW baseline needs to reach the run's validation loss) / (the run's tokens);\n"
        "# the baseline law is measured per seed ([[baseline]]); g_in_baseline_range false = extrapolated.\n"
        "# Produced by (per preset; then the same command with --summarize):\n"
        + "".join(f"#   python benchmarks/bench_replicas.py {cmd}\n" for cmd in COMMANDS.values())
        + f"# Machine: {platform.machine()} CPU, torch {torch.__version__}, 1 thread per run, shared 2-core host.\n\n"
    )
    atomic_write_text(
        TOML,
        header + toml_tables("sweep", keep_sweep + sweep) + "\n" + toml_tables("baseline", keep_base + base),
    )


def _plot(a: argparse.Namespace, sweep: list[dict[str, Any]]) -> None:
    import tomllib

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = tomllib.loads(TOML.read_text())["sweep"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"mean": "-o", "norm_preserving": "--s", "dp": ":^"}
    for preset, h, merge in sorted({(r["preset"], r["inner_steps"], r["merge"]) for r in rows}):
        sel = [r for r in rows if (r["preset"], r["inner_steps"], r["merge"]) == (preset, h, merge)]
        if merge == "norm_preserving":  # M = 1 is the same run for both merges
            sel += [
                r
                for r in rows
                if (r["preset"], r["inner_steps"], r["merge"], r["replicas"]) == (preset, h, "mean", 1)
            ]
        pts = sorted((r["replicas"], r["g_mean"], r["g_sd"]) for r in sel)
        if merge == "dp":
            pts = [(1, 1.0, 0.0), *pts]  # plain AdamW at the budget: g = 1 by construction
        label = f"{preset} " + ("DP, global batch M" if merge == "dp" else f"DiLoCo H={h} {merge}")
        ms, gs, sds = zip(*pts, strict=True)
        ax.errorbar(ms, gs, yerr=sds, fmt=styles.get(merge, "-"), capsize=3, label=label)
        rat = sorted(
            (r["replicas"], r["ratio_vs_dp_mean"], r["ratio_vs_dp_sd"])
            for r in sel
            if "ratio_vs_dp_mean" in r
        )
        if rat:
            ms, qs, sds = zip(*rat, strict=True)
            bx.errorbar(ms, qs, yerr=sds, fmt=styles.get(merge, "-"), capsize=3, label=label)
    for preset in sorted({r["preset"] for r in rows}):
        model = sorted(
            {
                (r["replicas"], r["model_loss_ratio"])
                for r in rows
                if r["preset"] == preset and r.get("model_loss_ratio") and r["replicas"] > 1
            }
        )
        if model:
            ms, qs = zip(*model, strict=True)
            bx.plot(
                ms,
                qs,
                "k-" if preset == "tiny" else "k--",
                lw=0.8,
                label=f"analytic model r, {preset} (P far below its fit)",
            )
    for x in (ax, bx):
        x.set_xscale("log", base=2)
        x.set_xlabel("replicas M (fixed total tokens)")
        x.legend(fontsize=7)
    ax.set_yscale("log")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_ylabel("g vs 1-replica AdamW")
    bx.axhline(1.0, color="gray", lw=0.8)
    bx.set_ylim(0.6, 1.6)
    bx.set_ylabel("L_DiLoCo / L_DP(global batch M), equal tokens")
    fig.suptitle("Testbed M-sweep (mean +- sd over seeds)")
    fig.tight_layout()
    fig.savefig(PNG, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    ap.add_argument("--inner-steps", type=int, nargs="+", default=[2, 8])
    ap.add_argument("--merges", nargs="+", default=["mean", "norm_preserving"])
    ap.add_argument(
        "--replica-steps", type=int, default=1024, help="total replica-steps (fixed token budget)"
    )
    ap.add_argument(
        "--baseline-budgets", type=float, nargs="+", default=[0.015625, 0.0625, 0.125, 0.25, 0.5, 1.0, 2.0]
    )
    ap.add_argument("--batch-size", type=int, default=1, help="sequences per replica per step")
    ap.add_argument("--eval-batches", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=64, help="vmap chunk (memory bound)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (benchmarks/gpu_replicas.py)")
    ap.add_argument("--summarize", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("DISPERSAL_THREADS", "1")))
    t0 = time.perf_counter()
    if a.summarize:
        _summarize(a)
    else:
        _run(a)
    print(f"# {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    _ = math.pi


if __name__ == "__main__":
    main()
