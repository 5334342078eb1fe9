"""Plots for a finished run: loss curves and bytes per worker, from DIR/metrics.jsonl (matplotlib, Agg)."""

from __future__ import annotations

import json
from pathlib import Path


def load_metrics(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(2, "no metrics", str(path))
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def make_report(out: Path) -> list[Path]:
    """Write loss.png and bytes.png into ``out``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dispersal._io import save_figure

    rows = load_metrics(out)
    steps = [r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, [r["loss"] for r in rows], label="train (mean of workers)")
    val = [(r["step"], r["val_loss"]) for r in rows if r.get("val_loss") is not None]
    if val:
        ax.plot(*zip(*val, strict=True), marker="o", ms=3, label="validation (global weights)")
    ax.set(xlabel="inner step per worker", ylabel="loss (nats/byte)", title=out.name)
    ax.legend()
    loss_png = out / "loss.png"
    save_figure(fig, loss_png)
    fig, ax = plt.subplots(figsize=(6, 4))
    workers = sorted({w for r in rows for w in r["bytes_sent"]}, key=lambda w: int(w[1:]))
    for w in workers:
        ax.plot(steps, [r["bytes_sent"].get(w, float("nan")) / 1e6 for r in rows], label=f"{w} sent")
    ax.set(xlabel="inner step per worker", ylabel="MB sent (cumulative)", title="bytes on the emulated link")
    ax.legend()
    bytes_png = out / "bytes.png"
    save_figure(fig, bytes_png)
    return [loss_png, bytes_png]
