"""The M-sweep's arithmetic: the quality factor g from measured losses, and the results file.

g is docs/quality.md's definition measured in the testbed:

    g(M, H) = (compute the baseline needs to reach the DiLoCo run's loss) / (the DiLoCo run's compute)

with compute proportional to tokens (same model, same sequence length), and the baseline's own
loss-vs-compute law measured, not assumed: single-replica AdamW (``algorithm="dp"``, M = 1: data
parallelism at the per-replica batch) trained to several token budgets, each with its full
warmup + cosine schedule. ``baseline_tokens_for_loss`` interpolates ln(tokens) against ln(loss)
piecewise linearly between those runs and extends the end segments' slopes beyond them (flagged:
``in_range`` False), so g > C_max / C_run or below C_min / C_run is an extrapolation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class BaselineLaw:
    """Measured (tokens, final validation loss) of the baseline at several budgets, loss falling."""

    tokens: tuple[float, ...]
    losses: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) < 2 or len(self.tokens) != len(self.losses):
            raise ValueError("baseline: at least two (tokens, loss) points of equal count")
        if any(t <= 0 for t in self.tokens) or any(not (math.isfinite(v) and v > 0) for v in self.losses):
            raise ValueError("baseline: tokens and losses must be positive and finite")
        if list(self.tokens) != sorted(self.tokens):
            raise ValueError("baseline: tokens must be increasing")

    def tokens_for_loss(self, loss: float) -> tuple[float, bool]:
        """(tokens the baseline needs to reach ``loss``, whether that lies inside the measured range).

        Piecewise linear in (ln loss, ln tokens) over the points sorted by loss; a non-monotone
        stretch (noise) is made monotone by a running minimum of the loss over increasing tokens.
        """
        if not math.isfinite(loss) or loss <= 0:
            return 0.0, False
        best: list[tuple[float, float]] = []
        low = math.inf
        for t, v in zip(self.tokens, self.losses, strict=True):
            if v < low:
                best.append((math.log(t), math.log(v)))
                low = v
        if len(best) < 2:
            best = [
                (math.log(self.tokens[0]), math.log(self.losses[0])),
                (math.log(self.tokens[-1]), math.log(self.losses[0]) - 1e-9),
            ]
        y = math.log(loss)
        pts = sorted(best, key=lambda p: -p[1])  # loss decreasing = tokens increasing
        inside = pts[-1][1] <= y <= pts[0][1]
        if y >= pts[0][1]:
            (x0, y0), (x1, y1) = pts[0], pts[1]
        elif y <= pts[-1][1]:
            (x0, y0), (x1, y1) = pts[-2], pts[-1]
        else:
            k = next(i for i in range(len(pts) - 1) if pts[i][1] >= y >= pts[i + 1][1])
            (x0, y0), (x1, y1) = pts[k], pts[k + 1]
        x = x0 + (y - y0) * (x1 - x0) / (y1 - y0) if y1 != y0 else x1
        return math.exp(x), inside


def quality_factor(law: BaselineLaw, loss: float, tokens: float) -> tuple[float, bool]:
    """g = C_baseline(loss) / C_run with compute proportional to tokens; (g, inside measured range)."""
    need, inside = law.tokens_for_loss(loss)
    return need / tokens, inside


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    n = len(values)
    mu = sum(values) / n
    sd = math.sqrt(sum((v - mu) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mu, sd


def toml_value(v: object) -> str:
    """A TOML literal for str / bool / int / float / list of those (floats with 6 significant digits)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if math.isnan(v):
            return "nan"
        return f"{v:.6g}" if ("e" in f"{v:.6g}" or "." in f"{v:.6g}") else f"{v:.6g}.0"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"toml: cannot write {type(v).__name__}")


def toml_tables(name: str, rows: Sequence[dict[str, object]]) -> str:
    """``[[name]]`` array-of-tables text, one table per row, keys in the row's order."""
    out = []
    for row in rows:
        out.append(f"[[{name}]]")
        out.extend(f"{k} = {toml_value(v)}" for k, v in row.items())
        out.append("")
    return "\n".join(out)


def loss_slope(law: BaselineLaw) -> float:
    """s = -d ln L / d ln C, least squares over the baseline points (the local power law L ~ C^-s)."""
    xs = [math.log(t) for t in law.tokens]
    ys = [math.log(v) for v in law.losses]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return -sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def g_from_ratio(ratio: float, slope: float) -> float:
    """docs/quality.md's map from a loss ratio r = L_DiLoCo / L_DP at equal compute to g = r^(-1/s)."""
    if slope <= 0 or not math.isfinite(ratio) or ratio <= 0:
        return 0.0
    return float(ratio ** (-1.0 / slope))
