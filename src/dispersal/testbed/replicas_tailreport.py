"""The tail grid's summary: per-cell g, the fit with intervals, held-back errors, the fixed-global-batch
split, the data file (src/dispersal/data/testbed_tail_fit.toml) and the plots."""

from __future__ import annotations

import math
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dispersal.testbed import replicas_tailfit as tf
from dispersal.testbed.replicas_grid import BLOCK
from dispersal.testbed.replicas_sweep import mean_sd, quality_factor, toml_value

LITERATURE = (
    (
        "a_D (tokens)",
        "Zhang et al. 2024, arXiv 2410.21676 (critical batch ~ D^0.47, hardly with P at fixed D)",
        0.47,
    ),
    ("a_D (tokens)", "Bergsma et al. 2025, arXiv 2505.13738 'Power Lines' (B_crit ~ D^0.46)", 0.46),
    (
        "a_D (tokens)",
        "Merrill et al. 2025, arXiv 2505.23971 (the critical batch plateaus after early training)",
        0.0,
    ),
    ("a_B (batch)", "McCandlish et al. 2018, arXiv 1812.06162 sec. 2.2 (K = B_crit / b)", 1.0),
)
"""The published values the measured exponents are set beside (the model's defaults: 0.47 and 1)."""


def summarize(records: Sequence[dict[str, Any]], *, m_x: int, m_fit_max: int, n_boot: int) -> dict[str, Any]:
    """Everything the report prints and writes, from the grid's records."""
    g = tf.cell_g(records)
    seeds = sorted({s for s, _ in g})
    cells: dict[tf.Cell, list[tuple[float, bool, float]]] = {}
    loss = {
        (r["seed"], (r["tokens"], r["batch"], r["inner_steps"], r["replicas"])): r.get("val_loss")
        for r in records
        if r["algorithm"] == "diloco"
    }
    for (s, c), (gv, inside) in g.items():
        lv = loss[(s, c)]
        cells.setdefault(c, []).append((gv, inside, float(lv) if lv is not None else math.inf))
    table = []
    for c, vs in sorted(cells.items()):
        g_mu, g_sd = mean_sd([v[0] for v in vs])
        l_mu, l_sd = mean_sd([v[2] for v in vs])
        table.append(
            dict(zip(("tokens", "batch", "inner_steps", "replicas"), c, strict=True))
            | {
                "seeds": len(vs),
                "loss": l_mu,
                "loss_sd": l_sd,
                "g": g_mu,
                "g_sd": g_sd,
                "in_range": all(v[1] for v in vs),
            }
        )
    points = tf.tail_points(g, m_x)
    dil = [r for r in records if r["algorithm"] == "diloco"]
    split = tf.Split(
        m_fit_max=m_fit_max,
        d_max=max(r["tokens"] for r in dil),
        b_max=max(r["batch"] for r in dil),
        b_min=min(r["batch"] for r in dil),
    )
    fit = tf.fit_tail(points, m_x)
    ci_seeds = tf.bootstrap(points, m_x, seeds, n_boot) if n_boot else {}
    ci_cells = tf.bootstrap(points, m_x, seeds, n_boot, by_cells=True) if n_boot else {}
    # The interval written and shown is the envelope of both resamplings (seeds and cells).
    ci = {k: (min(ci_seeds[k][0], ci_cells[k][0]), max(ci_seeds[k][1], ci_cells[k][1])) for k in ci_seeds}
    holdouts = tf.holdout_fits(points, m_x, split)
    held = [row for _, _, rows in holdouts for row in rows]
    return {
        "model": records[0]["model"],
        "seeds": seeds,
        "table": table,
        "fit": fit,
        "ci": ci,
        "ci_seeds": ci_seeds,
        "ci_cells": ci_cells,
        "split": split,
        "holdouts": holdouts,
        "held": held,
        "groups": tf.per_group_k(points, m_x),
        "split_rows": split_rows(records),
        "n_records": len(records),
        "wall_s": sum(float(r.get("wall_s", 0.0)) for r in records),
    }


def split_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixed-global-batch split: for every DiLoCo run with global batch G = M b whose data-parallel
    reference (plain AdamW at batch G, same tokens and seed) exists, L / L_DP(G) and g vs that law."""
    dp = {
        (r["seed"], r["batch"], r["tokens"]): r["val_loss"]
        for r in records
        if r["algorithm"] == "dp" and r["replicas"] == 1 and r.get("val_loss") is not None
    }
    laws = tf.baseline_laws(records)
    groups: dict[tuple[int, int, int, int], list[tuple[float, float]]] = {}
    for r in records:
        gb = r["replicas"] * r["batch"]
        ref = dp.get((r["seed"], gb, r["tokens"]))
        if r["algorithm"] != "diloco" or ref is None or r.get("val_loss") is None:
            continue
        law = laws.get((r["seed"], gb))
        gv = quality_factor(law, r["val_loss"], r["tokens"])[0] if law else math.nan
        groups.setdefault((gb, r["tokens"], r["inner_steps"], r["replicas"]), []).append(
            (r["val_loss"] / ref, gv)
        )
    out = []
    for (gb, d, h, m), vs in sorted(groups.items()):
        r_mu, r_sd = mean_sd([v[0] for v in vs])
        g_mu, g_sd = mean_sd([v[1] for v in vs])
        out.append(
            {
                "global_batch": gb,
                "tokens": d,
                "inner_steps": h,
                "replicas": m,
                "batch": gb // m,
                "seeds": len(vs),
                "ratio": r_mu,
                "ratio_sd": r_sd,
                "g_vs_dp": g_mu,
                "g_vs_dp_sd": g_sd,
            }
        )
    return out


def _ci(s: dict[str, Any], key: str) -> tuple[float, float]:
    lo, hi = s["ci"].get(key, (math.nan, math.nan))
    return float(lo), float(hi)


def tables_md(s: dict[str, Any]) -> str:
    """The markdown tables: fit vs literature, held-back errors, per-group K, split, per-cell g."""
    f: tf.TailFit = s["fit"]
    sp: tf.Split = s["split"]
    block = BLOCK[s["model"]]
    lines = [
        f"All tail cells (M > M_x = {f.m_x}, {f.n_cells} cells, seed means of ln g(M)/g(M_x)); references: "
        f"D_ref = {f.d_ref:,.0f} tokens, b_ref = {f.b_ref:.3g} sequences ({f.b_ref * block:,.0f} tokens), "
        f"H_ref = {f.h_ref:.3g}.",
        "",
        "| parameter | measured (testbed, all cells) | 95 % interval (envelope of bootstraps over seeds and over cells) | literature / model default |",
        "|---|---|---|---|",
        f"| a_D, tokens exponent | {f.a_tokens:.3f} | [{_ci(s, 'a_tokens')[0]:.3f}, {_ci(s, 'a_tokens')[1]:.3f}] | "
        "0.47 Zhang et al. 2024; 0.46 Bergsma et al. 2025; ~0 late in training, Merrill et al. 2025 (model default 0.47) |",
        f"| a_B, batch exponent | {f.a_batch:.3f} | [{_ci(s, 'a_batch')[0]:.3f}, {_ci(s, 'a_batch')[1]:.3f}] | "
        "1 McCandlish et al. 2018 (model default 1) |",
        f"| a_H, H exponent (K ~ H^-a_H) | {f.a_h:.3f} | [{_ci(s, 'a_h')[0]:.3f}, {_ci(s, 'a_h')[1]:.3f}] | model: K ~ 1 / h(H) |",
        f"| K_ref, replicas | {f.k_ref:.2f} | [{_ci(s, 'k_ref')[0]:.2f}, {_ci(s, 'k_ref')[1]:.2f}] | testbed units only |",
        f"| rms residual of ln g(M)/g(M_x) | {f.rms_ln:.3f} | | |",
        "",
        "Intervals by resampling: seeds "
        + ", ".join(f"{k} [{v[0]:.3f}, {v[1]:.3f}]" for k, v in s["ci_seeds"].items())
        + "; cells "
        + ", ".join(f"{k} [{v[0]:.3f}, {v[1]:.3f}]" for k, v in s["ci_cells"].items())
        + ".",
        "",
        f"Held-back parts (large M: M > {sp.m_fit_max}; largest budget: {sp.d_max:,} tokens; largest / smallest "
        f"batch: {sp.b_max} / {sp.b_min} sequences). Each part: one fit on every other tail cell, judged on the part:",
        "",
        "| held back | fit cells | a_D | a_B | a_H | K_ref | fit rms (ln) | held cells | held rms (ln) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for part, hf, rows in s["holdouts"]:
        if hf is None:
            lines.append(f"| {part} | too few | | | | | | {len(rows)} | |")
            continue
        e = np.array([r["error_ln"] for r in rows]) if rows else np.array([math.nan])
        lines.append(
            f"| {part} | {hf.n_cells} | {hf.a_tokens:.3f} | {hf.a_batch:.3f} | {hf.a_h:.3f} | {hf.k_ref:.2f} | "
            f"{hf.rms_ln:.3f} | {len(rows)} | {float(np.sqrt(np.mean(e**2))):.3f}"
            + (f" (at bound: {', '.join(hf.at_bound)})" if hf.at_bound else "")
            + " |"
        )
    lines += [
        "",
        "Per held-back cell (measured g(M)/g(M_x): seed mean; error = ln predicted - ln measured):",
        "",
        "| held back | tokens | batch | H | M | seeds | measured | sd of ln | predicted | error (ln) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s["held"]:
        lines.append(
            f"| {r['part']} | {r['tokens']:,} | {r['batch']} | {r['inner_steps']} | {r['replicas']} | {r['seeds']} | "
            f"{r['measured_ratio']:.3f} | {r['ln_sd']:.3f} | {r['predicted_ratio']:.3f} | {r['error_ln']:+.3f} |"
        )
    lines += [
        "",
        "K fitted freely per (tokens, batch, H) group (M > M_x cells of the group, all of them):",
        "",
        "| tokens | batch | H | cells | K |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['tokens']:,} | {r['batch']} | {r['inner_steps']} | {r['cells']} | {r['k']:.2f} |"
        for r in s["groups"]
    ]
    lines += [
        "",
        "Fixed global batch G = M x b (sequences per step), split over M replicas; L / L_DP(G) against plain "
        "AdamW at batch G with the same tokens and steps; g vs DP(G) from that batch's own law:",
        "",
        "| G | tokens | H | M x b | seeds | L / L_DP(G) | g vs DP(G) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in s["split_rows"]:
        lines.append(
            f"| {r['global_batch']} | {r['tokens']:,} | {r['inner_steps']} | {r['replicas']} x {r['batch']} | {r['seeds']} | "
            f"{r['ratio']:.4f} +- {r['ratio_sd']:.4f} | {r['g_vs_dp']:.3f} +- {r['g_vs_dp_sd']:.3f} |"
        )
    return "\n".join(lines)


def cells_md(s: dict[str, Any]) -> str:
    """The per-cell table: validation loss and g against the cell's own baseline law."""
    lines = [
        "| tokens | batch | H | M | seeds | val loss | g vs own baseline |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in s["table"]:
        flag = "" if r["in_range"] else " (extrap.)"
        lines.append(
            f"| {r['tokens']:,} | {r['batch']} | {r['inner_steps']} | {r['replicas']} | {r['seeds']} | "
            f"{r['loss']:.3f} +- {r['loss_sd']:.3f} | {r['g']:.3f} +- {r['g_sd']:.3f}{flag} |"
        )
    return "\n".join(lines)


def data_toml(s: dict[str, Any], command: str, params: int) -> str:
    """src/dispersal/data/testbed_tail_fit.toml: the two exponents with intervals (the contract's
    tables), then the fit's other numbers."""
    f: tf.TailFit = s["fit"]
    sp: tf.Split = s["split"]
    block = BLOCK[s["model"]]
    where = (
        f"testbed grid, measured at small scale ({s['model']} GPT, {params:,} parameters, "
        f"{min(r['tokens'] for r in s['table']):,}-{max(r['tokens'] for r in s['table']):,} tokens, "
        f"per-replica batch {min(r['batch'] for r in s['table'])}-{max(r['batch'] for r in s['table'])} x {block} tokens, "
        f"H {'/'.join(str(h) for h in sorted({r['inner_steps'] for r in s['table']}))}, M_x = {f.m_x}, "
        f"{len(s['seeds'])} seeds; interval: envelope of bootstraps over seeds and over cells; docs/testbed.md 'Many replicas')"
    )
    held = s["held"]
    e = [r["error_ln"] for r in held]
    out = [
        "# The critical-batch tail measured on the testbed (issue 32): K = K_ref (D / D_ref)^a_D (b / b_ref)^-a_B (H / H_ref)^-a_H",
        "# fitted on a named part of the replicas x tokens x per-replica batch x H grid (dispersal.testbed.replicas_tailfit).",
        "# Measured at small scale: the exponents are the model's second source (issue 31), not its default.",
        f"# ci_at_fit_bound [low, high] true: that end is the fit's bound (+-{tf.EXPONENT_BOUND:g}), i.e. not bounded by the data.",
        f"# Produced by: {command}",
        f"# Machine: {platform.machine()} CPU, 1 torch thread per run, shared 2-core host.",
        "",
    ]
    for name, key in (("tail_tokens_exponent", "a_tokens"), ("tail_batch_exponent", "a_batch")):
        lo, hi = _ci(s, key)
        out += [
            f"[{name}]",
            f"value = {toml_value(getattr(f, key))}",
            f"ci_low = {toml_value(lo)}",
            f"ci_high = {toml_value(hi)}",
            f"source = {toml_value(where)}",
            f"ci_at_fit_bound = {toml_value([abs(v) >= tf.EXPONENT_BOUND - 1e-6 for v in (lo, hi)])}",
            "",
        ]
    lo, hi = _ci(s, "a_h")
    out += [
        "[fit]",
        f"preset = {toml_value(s['model'])}",
        f"parameters = {params}",
        f"m_x = {f.m_x}",
        f"k_ref_replicas = {toml_value(f.k_ref)}",
        f"d_ref_tokens = {toml_value(f.d_ref)}",
        f"b_ref_tokens = {toml_value(f.b_ref * block)}",
        f"h_ref = {toml_value(f.h_ref)}",
        f"h_exponent = {toml_value(f.a_h)}",
        f"h_exponent_ci = {toml_value([lo, hi])}",
        f"fit_part = {toml_value('all tail cells M > M_x (value, ci); each held-back part: one fit on the rest')}",
        f"fit_cells = {f.n_cells}",
        f"fit_rms_ln = {toml_value(f.rms_ln)}",
        f"held_back_parts = {toml_value([part for part, _, _ in s['holdouts']])}",
        f"held_back_definition = {toml_value(f'M > {sp.m_fit_max}; tokens = {sp.d_max}; batch = {sp.b_max}; batch = {sp.b_min} sequences')}",
        f"held_back_tokens_exponents = {toml_value([hf.a_tokens if hf else math.nan for _, hf, _ in s['holdouts']])}",
        f"held_back_batch_exponents = {toml_value([hf.a_batch if hf else math.nan for _, hf, _ in s['holdouts']])}",
        f"held_back_cells = {len(held)}",
        f"held_back_rms_ln = {toml_value(float(np.sqrt(np.mean(np.square(e)))) if e else math.nan)}",
        f"seeds = {toml_value(list(s['seeds']))}",
        f"runs = {s['n_records']}",
        f"train_s_sum = {toml_value(round(s['wall_s'], 1))}",
        "",
    ]
    return "\n".join(out)


def plot(s: dict[str, Any], folder: Path) -> list[Path]:
    """testbed_tailgrid_g.png (g against M per budget, one panel per (H, batch), fitted tail dashed)
    and testbed_tailgrid_split.png (L / L_DP(G) against M at fixed global batch G)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f: tf.TailFit = s["fit"]
    hs = sorted({r["inner_steps"] for r in s["table"]})
    bs = sorted({r["batch"] for r in s["table"]})
    ds = sorted({r["tokens"] for r in s["table"]})
    fig, axes = plt.subplots(
        len(hs), len(bs), figsize=(4 * len(bs), 3.3 * len(hs)), squeeze=False, sharey=True
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, h in enumerate(hs):
        for j, b in enumerate(bs):
            ax = axes[i][j]
            for k, d in enumerate(ds):
                pts = sorted(
                    (r["replicas"], r["g"], r["g_sd"])
                    for r in s["table"]
                    if (r["inner_steps"], r["batch"], r["tokens"]) == (h, b, d)
                )
                if not pts:
                    continue
                ms, gs, sds = zip(*pts, strict=True)
                ax.errorbar(
                    ms, gs, yerr=sds, fmt="o-", color=colors[k % len(colors)], capsize=2, label=f"D = {d:,}"
                )
                anchor = [g for m, g, _ in pts if m == f.m_x]
                if anchor and max(ms) > f.m_x:
                    grid = np.geomspace(f.m_x, max(ms), 30)
                    ax.plot(
                        grid,
                        [anchor[0] * f.ratio(d, b, h, m) for m in grid],
                        "--",
                        color=colors[k % len(colors)],
                        lw=1,
                    )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"H = {h}, b = {b} seq/replica", fontsize=9)
            ax.set_xlabel("replicas M")
            if j == 0:
                ax.set_ylabel("g vs own baseline (AdamW at batch b)")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
    fig.suptitle(
        f"Tail grid ({s['model']}): g against M per budget; dashed = fitted tail from M_x = {f.m_x} "
        f"(a_D = {f.a_tokens:.2f}, a_B = {f.a_batch:.2f})",
        fontsize=10,
    )
    fig.tight_layout()
    p1 = folder / "testbed_tailgrid_g.png"
    fig.savefig(p1, dpi=100)
    plt.close(fig)
    rows = s["split_rows"]
    fig, axes = plt.subplots(1, len(ds), figsize=(4.2 * len(ds), 3.5), squeeze=False, sharey=True)
    for j, d in enumerate(ds):
        ax = axes[0][j]
        for k, gb in enumerate(sorted({r["global_batch"] for r in rows})):
            for h, style in zip(hs, ("o-", "s--", "^:"), strict=False):
                pts = sorted(
                    (r["replicas"], r["ratio"], r["ratio_sd"])
                    for r in rows
                    if (r["global_batch"], r["tokens"], r["inner_steps"]) == (gb, d, h)
                )
                if pts:
                    ms, qs, sds = zip(*pts, strict=True)
                    ax.errorbar(
                        ms,
                        qs,
                        yerr=sds,
                        fmt=style,
                        color=colors[k % len(colors)],
                        capsize=2,
                        label=f"G = {gb}, H = {h}",
                    )
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"D = {d:,} tokens", fontsize=9)
        ax.set_xlabel("replicas M (global batch G = M x b fixed)")
        if j == 0:
            ax.set_ylabel("L_DiLoCo(M, G / M) / L_AdamW(G)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    fig.suptitle("Fixed global batch split over M replicas (mean +- sd over seeds)", fontsize=10)
    fig.tight_layout()
    p2 = folder / "testbed_tailgrid_split.png"
    fig.savefig(p2, dpi=100)
    plt.close(fig)
    return [p1, p2]
