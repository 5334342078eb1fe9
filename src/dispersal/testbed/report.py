"""Plots for a finished run (loss curves, bytes per worker, from DIR/metrics.jsonl; matplotlib, Agg), and
the statistics of repeated runs: a mean with a Student-t confidence interval over seeds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dispersal.model.inputs.errors import require

SIMPSON_INTERVALS = 2000
"""Even number of Simpson intervals for the Student-t CDF integral (error below 1e-10 for df >= 1 at
the quantiles used here; tests check against closed forms for df 1 and 2)."""


def t_cdf(x: float, df: int) -> float:
    """Student-t CDF with ``df`` degrees of freedom (Simpson's rule on the density from 0 to x).

    On ``u = atan(x / sqrt(df))`` the integrand is ``c cos(u)^(df - 1)``, smooth and bounded for any x.
    """
    require(df >= 1, "df", f"an integer >= 1, got {df}")
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2)) * math.sqrt(df)
    hi = math.atan(abs(x) / math.sqrt(df))
    n = SIMPSON_INTERVALS
    h = hi / n
    total = 1.0 + math.cos(hi) ** (df - 1)
    for i in range(1, n):
        total += (4 if i % 2 else 2) * math.cos(i * h) ** (df - 1)
    half = c * total * h / 3
    return 0.5 + half if x >= 0 else 0.5 - half


def t_quantile(p: float, df: int) -> float:
    """Inverse of :func:`t_cdf` by bisection (to 1e-12), for p in (0, 1)."""
    require(0 < p < 1, "p", f"in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


@dataclass(frozen=True, kw_only=True)
class Interval:
    """Mean of n values with a two-sided Student-t confidence interval (values assumed i.i.d. normal)."""

    mean: float
    low: float
    high: float
    sd: float
    n: int
    confidence: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """``mean +- t_{(1+c)/2, n-1} sd / sqrt(n)`` with the sample standard deviation (n - 1); n >= 2."""
    n = len(values)
    require(n >= 2, "seeds", f"at least 2 values for an interval, got {n}")
    require(0 < confidence < 1, "confidence", f"in (0, 1), got {confidence}")
    require(all(math.isfinite(v) for v in values), "values", "must all be finite")
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = t_quantile((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean=m, low=m - half, high=m + half, sd=sd, n=n, confidence=confidence)


def loss_unit(out: Path) -> str:
    """ "nats/byte" for the byte tokenizer, "nats/token" otherwise (from OUT/config.json if present)."""
    cfg = out / "config.json"
    tokenizer = json.loads(cfg.read_text()).get("tokenizer", "byte") if cfg.exists() else "byte"
    return "nats/byte" if tokenizer == "byte" else "nats/token"


def load_metrics(out: Path) -> list[dict[str, Any]]:
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
    ax.set(xlabel="inner step per worker", ylabel=f"loss ({loss_unit(out)})", title=out.name)
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
