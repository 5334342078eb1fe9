"""Matplotlib figures shared by the web app (st.pyplot) and the HTML report (embedded PNG).

Figures are built with `matplotlib.figure.Figure` directly (no pyplot global state), so concurrent
Streamlit sessions cannot draw into each other's axes. Every plotted number comes from
`dispersal.model` results (dicts from ``to_dict()``) passed in.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from dispersal.app.logic import BREAKDOWN_PARTS, waterfall_steps
from dispersal.model import units

_ALGO_COLOURS = {"ddp": "#d62728", "ddp_elastic": "#ff7f0e", "diloco": "#1f77b4", "decoupled": "#2ca02c"}


def waterfall_figure(d: Mapping[str, Any]) -> Figure:
    """C_raw -> (eta_H, eta_comp, eta_act, eta_rep) -> C_local -> chi -> C_quality, log scale.

    Full bars are the model's C_raw, C_local and C_quality; red floating bars are the drops.
    """
    steps = waterfall_steps(d)
    c_raw, c_local, c_quality = float(d["c_raw_flop"]), float(d["c_local_flop"]), float(d["c_quality_flop"])
    bars: list[tuple[str, float, float, bool]] = [("C_raw", 0.0, c_raw, True)]
    names = ["x eta_H", "x eta_comp", "x eta_act", "x eta_rep"]
    for name, (_label, before, after) in zip(names, steps[:4], strict=True):
        bars.append((name, after, before, False))
    bars.append(("C_local", 0.0, c_local, True))
    bars.append(("x chi", steps[4][2], steps[4][1], False))
    bars.append(("C_quality", 0.0, c_quality, True))
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    for i, (_name, lo, hi, full) in enumerate(bars):
        if full:
            ax.bar(i, hi, color="#7f7f7f" if i == 0 else "#1f77b4")
            ax.text(i, hi, f"{hi:.3g}", ha="center", va="bottom", fontsize=8)
        else:
            ax.bar(i, max(hi - lo, hi * 1e-3), bottom=lo, color="#d62728", alpha=0.9)
            ax.text(i, hi, f"x{lo / hi if hi else 0.0:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    positive = [v for b in bars for v in b[1:3] if v > 0]
    if positive:
        ax.set_ylim(min(positive) / 3, max(positive) * 4)
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    ax.set_ylabel("FLOP")
    ax.set_title("From raw compute to effective compute (model factors)", fontsize=10)
    ax.grid(axis="y", alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def breakdown_figure(d: Mapping[str, Any]) -> Figure:
    """Where the run time goes, days per part (TimeBreakdown)."""
    b = d["breakdown"]
    labels = [label for _k, label in BREAKDOWN_PARTS] + ["(hidden sync)"]
    values = [b[k] / units.SECONDS_PER_DAY for k, _l in BREAKDOWN_PARTS] + [
        b["hidden_comm_s"] / units.SECONDS_PER_DAY
    ]
    fig = Figure(figsize=(7.5, 3.0))
    ax = fig.add_subplot()
    colours = ["#2ca02c", "#bcbd22", "#9467bd", "#8c564b", "#d62728", "#ff7f0e", "#c7c7c7"]
    bars = ax.barh(range(len(values)), values, color=colours)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    for bar, v in zip(bars, values, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v:.3g} d", va="center", fontsize=8)
    ax.set_xlabel("days")
    ax.set_title(f"Where the {d['days']:.4g} days go (per node)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def goodput_figure(
    chips: Sequence[float], curves: Mapping[str, Sequence[float]], marker: float | None = None
) -> Figure:
    """Goodput per algorithm against fleet size (resilience.goodput_vs_scale)."""
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    for name, ys in curves.items():
        ax.plot(chips, ys, label=name, color=_ALGO_COLOURS.get(name), lw=2)
    if marker is not None:
        ax.axvline(marker, color="k", ls=":", lw=1, label="this scenario")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("chips in the fleet")
    ax.set_ylabel("goodput (useful / provisioned)")
    ax.set_title("Resilience: goodput vs scale", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plan_figure(plan_dict: Mapping[str, Any]) -> Figure:
    """Cost of the best plan per hardware (the planner's runners-up)."""
    opts = plan_dict.get("runners_up", [])
    fig = Figure(figsize=(7.5, max(2.0, 0.35 * len(opts) + 1)))
    ax = fig.add_subplot()
    labels = [f"{o['nodes']:,} x ({o['chips_per_node']}x {o['hardware']} {o['precision']})" for o in opts]
    costs = [o["cost_usd"] for o in opts]
    ax.barh(range(len(costs)), costs, color=["#1f77b4"] + ["#aec7e8"] * (len(costs) - 1))
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("cost (USD)")
    ax.set_title(
        f"Cheapest way per hardware to {plan_dict.get('target_flop', 0):.3g} FLOP ({plan_dict.get('metric')})",
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def countermeasures_figure(outcomes: Sequence[Mapping[str, Any]]) -> Figure:
    """Evader cost multiple against P(detect) per bundle (countermeasures.analyse)."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    for o in outcomes:
        if not o["feasible"]:
            continue
        x, y = float(o["p_detect"]), float(o["cost_multiple"])
        ax.scatter([x], [y], color="#d62728" if "+" in o["lever"] else "#1f77b4", s=30)
        ax.annotate(
            o["lever"] if len(o["lever"]) < 32 else o["lever"][:30] + "...",
            (x, y),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
        )
    ax.set_xlim(-0.02, 1.05)
    ax.set_yscale("log")
    ax.set_xlabel("P(detected before completion)")
    ax.set_ylabel("evader cost / no-lever cost")
    ax.set_title("Countermeasures: cost imposed vs chance of detection (red: bundles)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def uncertainty_figure(res: Mapping[str, Any]) -> Figure:
    """P10-P90 band and P50 of the planner's cost against the target (uncertainty.plan_samples)."""
    pts = res["points"]
    xs = [p["target_flop"] for p in pts]
    lo = [p["percentiles"]["cost_usd"][0] for p in pts]
    mid = [p["percentiles"]["cost_usd"][1] for p in pts]
    hi = [p["percentiles"]["cost_usd"][2] for p in pts]
    nom = [p["nominal"]["cost_usd"] for p in pts]
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    ax.fill_between(xs, lo, hi, color="#1f77b4", alpha=0.25, label="P10-P90")
    ax.plot(xs, mid, color="#1f77b4", lw=2, label="P50")
    ax.plot(xs, nom, color="k", ls="--", lw=1, marker="o", ms=3, label="nominal plan")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"target ({pts[0]['metric'] if pts else ''}, FLOP)")
    ax.set_ylabel("cheapest plan cost (USD)")
    ax.set_title("Uncertainty of the planner's cost", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    """A figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def png_data_uri(fig: Figure) -> str:
    """A figure as a ``data:image/png;base64,...`` URI (self-contained HTML)."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode("ascii")
