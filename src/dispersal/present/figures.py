"""The one figure layer: matplotlib figures shared by the web app, the HTML report and the CLI plots.

Figures are built with `matplotlib.figure.Figure` directly (no pyplot global state), so concurrent
Streamlit sessions cannot draw into each other's axes. Every plotted number comes from
`dispersal.model` results (dicts from ``to_dict()``) passed in.

Each builder returns a `Chart`: the figure, its alt text and the hover text of its marks. The app and
the report embed `svg_markup(chart)`: inline SVG with a ``<title>`` per mark, which browsers show as a
tooltip (values on hover), ``role="img"`` and the alt text as its accessible name. The CLI writes the
same figure as PNG (`save_png`). Text is at least 10 pt on a 5.2-inch-wide figure, so it stays
readable when the SVG is scaled to a half-page column or a phone.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator

from dispersal.present import formats as F
from dispersal.present.rows import BREAKDOWN_PARTS, waterfall_steps

WIDTH_IN = 5.2
FONT = 10.5
TITLE_FONT = 11.5
#: Colour-blind-safe (Okabe-Ito) colours, each at least 3:1 against white; line styles and markers
#: differ as well, so two curves that coincide stay distinguishable.
_ALGO_STYLE = {
    "ddp": ("#D55E00", "-", "o"),
    "ddp_elastic": ("#E69F00", "--", "s"),
    "diloco": ("#0072B2", "-.", "^"),
    "decoupled": ("#009E73", ":", "D"),
}
CURRENT = "#0072B2"
BASELINE = "#555555"


@dataclass
class Chart:
    """A figure, its alt text and the hover text of its marks (gid -> text)."""

    figure: Figure
    alt: str
    tips: dict[str, str] = field(default_factory=dict)


def _money_axis(ax: Any, which: str, values: Sequence[float | None]) -> None:
    """A readable money axis: log with 1-2-5 ticks when the values span more than 30x, else linear
    with at most 6 ticks; labels like $31M. Either way the tick labels cannot crowd each other."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    axis = ax.yaxis if which == "y" else ax.xaxis
    money = FuncFormatter(lambda v, _pos: F.money(v) if v > 0 else "$0")
    if vals and max(vals) / min(vals) > 30:
        (ax.set_yscale if which == "y" else ax.set_xscale)("log")
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=8))
        axis.set_minor_locator(NullLocator())
    else:
        (ax.set_yscale if which == "y" else ax.set_xscale)("linear")
        axis.set_major_locator(MaxNLocator(nbins=5, min_n_ticks=3))
        if vals:
            lo, hi = min(vals), max(vals)
            pad = (hi - lo) * 0.15 or hi * 0.1
            (ax.set_ylim if which == "y" else ax.set_xlim)(max(0.0, lo - pad), hi + pad)
    axis.set_major_formatter(money)


def _style(ax: Any, title: str) -> None:
    # No minor tick labels: they are unreadable at this size and cost most of the drawing time.
    # Log axes get plain labels: matplotlib's default ones are mathtext, whose parser fails when two
    # Streamlit sessions draw at once.
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_minor_locator(NullLocator())
            if not isinstance(axis.get_major_formatter(), FuncFormatter):
                axis.set_major_formatter(FuncFormatter(F.axis_count))
    ax.set_title(title, fontsize=TITLE_FONT)
    ax.tick_params(labelsize=FONT)
    ax.xaxis.label.set_size(FONT)
    ax.yaxis.label.set_size(FONT)


def _mark(chart: Chart, artist: Any, text: str) -> None:
    gid = f"tip{len(chart.tips)}"
    artist.set_gid(gid)
    chart.tips[gid] = text


def waterfall_figure(d: Mapping[str, Any]) -> Chart:
    """C_raw -> (eta_H, eta_comp, eta_act, eta_rep) -> C_local -> chi -> C_quality, log scale.

    Full bars are the model's C_raw, C_local and C_quality; red floating bars are the drops.
    """
    steps = waterfall_steps(d)
    c_raw, c_local, c_quality = float(d["c_raw_flop"]), float(d["c_local_flop"]), float(d["c_quality_flop"])
    bars: list[tuple[str, float, float, bool]] = [("C_raw", 0.0, c_raw, True)]
    names = ["eta_H", "eta_comp", "eta_act", "eta_rep"]
    for name, (_label, before, after) in zip(names, steps[:4], strict=True):
        bars.append((name, after, before, False))
    bars.append(("C_local", 0.0, c_local, True))
    bars.append(("chi", steps[4][2], steps[4][1], False))
    bars.append(("C_quality", 0.0, c_quality, True))
    fig = Figure(figsize=(WIDTH_IN, 3.4))
    chart = Chart(
        fig,
        f"Bar chart: C_raw {F.flop(c_raw, unit=True)}, C_local {F.flop(c_local, unit=True)}, "
        f"C_quality {F.flop(c_quality, unit=True)}",
    )
    ax = fig.add_subplot()
    for i, (name, lo, hi, full) in enumerate(bars):
        if full:
            (bar,) = ax.bar(i, hi, color="#6E6E6E" if i == 0 else CURRENT)
            _mark(chart, bar, f"{name}: {F.flop(hi, 4, unit=True)}")
        else:
            factor = lo / hi if hi else 0.0
            (bar,) = ax.bar(i, max(hi - lo, hi * 1e-3), bottom=lo, color="#C0392B")
            _mark(chart, bar, f"x {name} = {factor:.4f}: {F.sig(hi)} -> {F.flop(lo, 4, unit=True)}")
    ax.set_yscale("log")
    positive = [v for b in bars for v in b[1:3] if v > 0]
    if positive:
        ax.set_ylim(min(positive) / 3, max(positive) * 4)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=8))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0e}".replace("e+", "e")))
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=35, ha="right")
    ax.set_ylabel("FLOP")
    _style(ax, "Raw compute to effective compute (hover for values)")
    ax.grid(axis="y", alpha=0.3, which="major")
    fig.tight_layout()
    return chart


def breakdown_figure(d: Mapping[str, Any]) -> Chart:
    """Where the run time goes, days per part (TimeBreakdown)."""
    b = d["breakdown"]
    labels = [label for _k, label in BREAKDOWN_PARTS] + ["(hidden sync)"]
    values = [b[k] / F.SECONDS_PER_DAY for k, _l in BREAKDOWN_PARTS] + [
        b["hidden_comm_s"] / F.SECONDS_PER_DAY
    ]
    fig = Figure(figsize=(WIDTH_IN, 3.2))
    chart = Chart(
        fig,
        "Bar chart of run time by part: "
        + ", ".join(f"{lab} {F.days(v, 3)}" for lab, v in zip(labels, values, strict=True)),
    )
    ax = fig.add_subplot()
    colours = ["#009E73", "#E69F00", "#CC79A7", "#8C564B", "#D55E00", "#0072B2", "#9E9E9E"]
    bars = ax.barh(range(len(values)), values, color=colours)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    top = max(values) if values and max(values) > 0 else 1.0
    for bar, label, v in zip(bars, labels, values, strict=True):
        _mark(chart, bar, f"{label}: {F.days(v)}")
        ax.text(
            bar.get_width() + top * 0.01,
            bar.get_y() + bar.get_height() / 2,
            F.days(v, 3, unit="d"),
            va="center",
            fontsize=FONT,
        )
    ax.set_xlim(0, top * 1.25)
    ax.set_xlabel("days")
    _style(ax, f"Where the {F.days(d['days'])} go (per node)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return chart


def goodput_figure(
    chips: Sequence[float], curves: Mapping[str, Sequence[float]], marker: float | None = None
) -> Chart:
    """Goodput per algorithm against fleet size (resilience.goodput_vs_scale).

    Each algorithm has its own colour, line style and marker, drawn in order of increasing goodput
    with the lower curves on top, so a curve that coincides with another is still visible.
    """
    fig = Figure(figsize=(WIDTH_IN, 3.6))
    chart = Chart(fig, "Line chart of goodput against chips in the fleet for " + ", ".join(curves))
    ax = fig.add_subplot()
    order = sorted(curves, key=lambda k: -sum(curves[k]))
    every = max(1, len(chips) // 8)
    for z, name in enumerate(order):
        colour, ls, mk = _ALGO_STYLE.get(name, ("#333333", "-", "o"))
        ys = curves[name]
        ax.plot(
            chips, ys, label=name, color=colour, ls=ls, lw=2, marker=mk, ms=5, markevery=every, zorder=2 + z
        )
        for i in range(0, len(chips), every):
            (pt,) = ax.plot([chips[i]], [ys[i]], ls="", marker=mk, ms=9, alpha=0.0, zorder=10)
            _mark(chart, pt, f"{name}: goodput {ys[i]:.4f} at {chips[i]:,.0f} chips")
    if marker is not None:
        ax.axvline(marker, color="k", ls=":", lw=1, label="this scenario")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("chips in the fleet")
    ax.set_ylabel("goodput (useful / provisioned)")
    _style(ax, "Resilience: goodput vs scale")
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=FONT - 1, loc="lower left")
    fig.tight_layout()
    return chart


def plan_figure(plan_dict: Mapping[str, Any]) -> Chart:
    """Cost of the best plan per hardware (the planner's runners-up)."""
    opts = plan_dict.get("runners_up", [])
    fig = Figure(figsize=(WIDTH_IN, max(2.4, 0.38 * len(opts) + 1.4)))
    chart = Chart(
        fig,
        "Bar chart of the cheapest plan's cost per hardware type: "
        + ", ".join(f"{o['hardware']} {F.money(o['cost_usd'])}" for o in opts),
    )
    ax = fig.add_subplot()
    labels = [f"{o['chips_per_node']}x {o['hardware']} {o['precision']}" for o in opts]
    costs = [o["cost_usd"] for o in opts]
    bars = ax.barh(range(len(costs)), costs, color=[CURRENT] + ["#7FB3D5"] * (len(costs) - 1))
    for bar, o in zip(bars, opts, strict=True):
        _mark(
            chart,
            bar,
            f"{o['nodes']:,} nodes x {o['chips_per_node']}x {o['hardware']} {o['precision']}, "
            f"{o['algorithm']}: {F.money(o['cost_usd'])}",
        )
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    _money_axis(ax, "x", costs)
    ax.set_xlabel("cost (USD)")
    _style(
        ax,
        f"Cheapest per hardware, {F.flop(plan_dict.get('target_flop', 0), unit=True)} {plan_dict.get('metric')}",
    )
    ax.grid(axis="x", alpha=0.3, which="major")
    fig.tight_layout()
    return chart


SWEEP_AXES: dict[str, tuple[str, bool]] = {
    "bandwidth": ("WAN bandwidth per site (Mbps)", True),
    "distance": ("distance between sites (km of fibre)", True),
    "target": ("target compute (FLOP)", True),
}


def cost_curve_figure(
    axis: str,
    current: Sequence[Mapping[str, Any]],
    baseline: Sequence[Mapping[str, Any]] | None = None,
    *,
    current_label: str = "this scenario",
    baseline_label: str = "pinned baseline",
    building_usd: float | None = None,
) -> Chart:
    """Cheapest plan's cost against bandwidth, distance or target; a pinned baseline dashed beside it.

    Rows are `views.sweep_row` dicts: x, cost_usd (None = infeasible) and a label of the plan.
    `building_usd`: one datacenter's cost for the same target (the premium's denominator; not for the
    target axis, where it changes with x): drawn as a line with the 2x line, and a right-hand axis in
    multiples of it, so "when does the premium pass 2x" is read off the chart. Every point carries its
    value label (hover is lost in print).
    """
    xlabel, logx = SWEEP_AXES[axis]
    fig = Figure(figsize=(WIDTH_IN, 3.6))
    chart = Chart(
        fig,
        f"Line chart of the cheapest plan's cost against {xlabel}: {current_label}"
        + (f" and {baseline_label}" if baseline else ""),
    )
    ax = fig.add_subplot()
    series = [(current, current_label, CURRENT, "-", "o")]
    if baseline:
        series.append((baseline, baseline_label, BASELINE, "--", "s"))
    for rows, name, colour, ls, mk in series:
        pts = [
            (float(r["x"]), float(r["cost_usd"]), str(r.get("label", "")))
            for r in rows
            if r.get("cost_usd") is not None and math.isfinite(float(r["cost_usd"]))
        ]
        if not pts:
            continue
        ax.plot(
            [p[0] for p in pts], [p[1] for p in pts], color=colour, ls=ls, lw=2, marker=mk, ms=6, label=name
        )
        for x, y, text in pts:
            (pt,) = ax.plot([x], [y], ls="", marker=mk, ms=12, alpha=0.0)
            xs = F.flop(x, unit=True) if axis == "target" else F.integer(x)
            prem = f", {F.sig(y / building_usd, 3)}x one building" if building_usd else ""
            _mark(chart, pt, f"{name}: {F.money(y)} at {xs}{prem} ({text})")
            ax.annotate(
                F.money(y, 2) + (f" ({F.sig(y / building_usd, 2)}x)" if building_usd else ""),
                (x, y),
                xytext=(0, 7 if colour == CURRENT else -14),
                textcoords="offset points",
                ha="center",
                fontsize=FONT - 1,
                color=colour,
            )
        for r in rows:
            if r.get("cost_usd") is None:
                ax.axvline(float(r["x"]), color=colour, ls=":", lw=1, alpha=0.6)
    if logx:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(
            FuncFormatter(lambda v, _pos: f"{v:,.0f}" if axis != "target" else f"{v:.0e}")
        )
    costs = [r.get("cost_usd") for rows, *_ in series for r in rows]
    if building_usd:
        costs += [building_usd, 2 * building_usd]
        for k, style in ((1.0, "-"), (2.0, "--")):
            ax.axhline(k * building_usd, color="#555555", ls=style, lw=1)
            ax.annotate(
                f"one building {F.money(building_usd)}" if k == 1 else "2x one building",
                (0.01, k * building_usd),
                xycoords=("axes fraction", "data"),
                xytext=(0, 3),
                textcoords="offset points",
                fontsize=FONT - 1,
                color="#333333",
            )
        chart.alt += f"; one building costs {F.money(building_usd)} (solid line; dashed: 2x)"
    _money_axis(ax, "y", costs)
    if building_usd:
        b = float(building_usd)

        def to_premium(y: Any) -> Any:
            return np.asarray(y, dtype=float) / b

        def to_cost(m: Any) -> Any:
            return np.asarray(m, dtype=float) * b

        right = ax.secondary_yaxis("right", functions=(to_premium, to_cost))
        right.set_ylabel("premium over one building")
        right.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cheapest plan cost")
    _style(ax, f"Cost vs {axis} (dotted: no plan reaches the target)")
    ax.grid(alpha=0.3, which="major")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=FONT - 1)
    fig.tight_layout()
    return chart


def countermeasures_figure(outcomes: Sequence[Mapping[str, Any]]) -> Chart:
    """Evader cost multiple against P(detect) per bundle (countermeasures.analyse).

    Points carry their row number (the table's '#' column) instead of their names, so labels do
    not pile up; the full name and values are in each point's hover text.
    """
    fig = Figure(figsize=(WIDTH_IN, 4.0))
    chart = Chart(
        fig,
        "Scatter chart of evader cost multiple against probability of detection, one point per "
        "lever or bundle, numbered as in the table",
    )
    ax = fig.add_subplot()
    placed: list[tuple[int, float, float]] = []
    for i, o in enumerate(outcomes):
        if not o["feasible"] or not math.isfinite(float(o["p_detect"])):
            continue
        x, y = float(o["p_detect"]), float(o["cost_multiple"])
        bundle = "+" in o["lever"]
        (pt,) = ax.plot(
            [x], [y], ls="", marker="D" if bundle else "o", ms=8, color="#D55E00" if bundle else CURRENT
        )
        _mark(chart, pt, f"#{i + 1} {o['lever']}: P(detect) {x:.3f}, cost x{F.sig(y, 3)}")
        placed.append((i + 1, x, y))
    ax.set_xlim(-0.02, 1.08)
    _multiple_axis(ax, [y for _n, _x, y in placed])
    _number_points(ax, placed)
    blocked = [f"#{i + 1}" for i, o in enumerate(outcomes) if not o["feasible"]]
    if blocked:
        # Levers that leave no plan have no cost or P(detect) to plot: name them on the chart.
        ax.text(
            0.01,
            0.98,
            "blocks the run: " + ", ".join(blocked),
            transform=ax.transAxes,
            va="top",
            fontsize=FONT - 1,
            color="#B42318",
            wrap=True,
        )
        chart.alt += "; blocks the run (no plan reaches the target): " + ", ".join(
            f"{o['lever']}" for o in outcomes if not o["feasible"]
        )
    ax.set_xlabel("P(detected before completion)")
    ax.set_ylabel("evader cost / no-lever cost")
    _style(ax, "Cost imposed vs detection (diamonds: bundles)")
    ax.grid(alpha=0.3, which="major")
    fig.tight_layout()
    return chart


def _number_points(ax: Any, points: Sequence[tuple[int, float, float]]) -> None:
    """Write each point's number beside it. Points whose labels would overlap on screen (after the axes'
    limits are set) share one label, "3, 7, 12", written next to the first of them: a number never
    drifts away from its point (it did: "12" stacked up at ~5x for a 1x lever)."""
    fig = ax.figure
    to_px = ax.transData.transform
    line_px = (FONT + 1) * fig.dpi / 72.0
    groups: list[tuple[float, float, list[int], float, float]] = []
    for n, x, y in points:
        px, py = to_px((x, y))
        for g in groups:
            if abs(px - g[0]) < 2.0 * line_px and abs(py - g[1]) < line_px:
                g[2].append(n)
                break
        else:
            groups.append((px, py, [n], x, y))
    for _px, _py, ns, x, y in groups:
        ax.annotate(
            ", ".join(str(n) for n in ns),
            (x, y),
            fontsize=FONT - 1,
            xytext=(6, 2),
            textcoords="offset points",
        )


def _multiple_axis(ax: Any, values: Sequence[float]) -> None:
    """A cost-multiple axis with at least three labelled ticks ("1x", "1.5x", "2x"): log with 1-2-5
    ticks when the multiples span more than 5x, else linear around them."""
    vals = [v for v in values if math.isfinite(v) and v > 0] or [1.0]
    lo, hi = min(vals), max(vals)
    if hi / lo > 5:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=10))
        ax.set_ylim(lo / 1.3, hi * 1.6)
    else:
        pad = max((hi - lo) * 0.15, 0.1 * hi)
        ax.set_ylim(max(0.0, lo - pad), hi + 2 * pad)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, min_n_ticks=3))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x" if v > 0 else ""))


def uncertainty_figure(res: Mapping[str, Any]) -> Chart:
    """P(reach) first, then the cost band (uncertainty.plan_samples, issue 23.6).

    Top: per target, the share of draws that reach it (P(reach)) and the share that cannot, as one
    stacked bar; bottom: the P10-P90 band and P50 of the cheapest plan's cost over the draws that reach
    it (conditional on reaching), and the nominal plan."""
    pts = res["points"]
    xs = [p["target_flop"] for p in pts]
    lo = [p["percentiles"]["cost_usd"][0] for p in pts]
    mid = [p["percentiles"]["cost_usd"][1] for p in pts]
    hi = [p["percentiles"]["cost_usd"][2] for p in pts]
    nom = [p["nominal"]["cost_usd"] for p in pts]
    reach = [float(p["feasible_fraction"]) for p in pts]
    fig = Figure(figsize=(WIDTH_IN, 5.4))
    chart = Chart(
        fig,
        "Bar chart of P(reach), the share of Monte Carlo draws that reach each target, with the share that "
        "cannot reach it; below, a line chart of the planner's cost against target with its P10 to P90 band "
        "over the draws that reach it. "
        + "; ".join(
            f"{F.flop(x, unit=True)}: P(reach) {F.percent(r, 0)}" for x, r in zip(xs, reach, strict=True)
        ),
    )
    top, ax = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1, 1.6]})
    pos = list(range(len(xs)))
    names = [F.flop(x, unit=True) for x in xs]
    ok = top.bar(pos, reach, color=CURRENT, label="reach the target")
    fail = top.bar(
        pos, [1 - r for r in reach], bottom=reach, color="#E69F00", hatch="//", label="cannot reach"
    )
    for i, (a, b) in enumerate(zip(ok, fail, strict=True)):
        _mark(chart, a, f"{names[i]}: P(reach) {F.percent(reach[i], 0)}")
        _mark(chart, b, f"{names[i]}: cannot reach {F.percent(1 - reach[i], 0)}")
        top.text(
            i,
            0.5,
            F.percent(reach[i], 0),
            ha="center",
            va="center",
            fontsize=FONT - 1,
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5},
        )
    top.set_xticks(pos, names)
    # Headroom above 100% for the legend, so it never covers a bar.
    top.set_ylim(0, 1.32)
    top.set_yticks([0, 0.5, 1], ["0%", "50%", "100%"])
    top.set_ylabel("share of draws")
    _style(top, "P(reach): draws that reach each target")
    top.legend(fontsize=FONT - 1, loc="upper center", ncols=2, frameon=False)
    ax.fill_between(xs, lo, hi, color=CURRENT, alpha=0.25, label="P10-P90 (draws that reach)")
    ax.plot(xs, mid, color=CURRENT, lw=2, label="P50")
    ax.plot(xs, nom, color="k", ls="--", lw=1, marker="o", ms=4, label="nominal plan")
    for x, a, m, b, r in zip(xs, lo, mid, hi, reach, strict=True):
        if math.isfinite(m):
            (pt,) = ax.plot([x], [m], ls="", marker="o", ms=12, alpha=0.0)
            _mark(
                chart,
                pt,
                f"{F.flop(x, unit=True)}: P(reach) {F.percent(r, 0)}; over those draws P10 {F.money(a)}, "
                f"P50 {F.money(m)}, P90 {F.money(b)}",
            )
    ax.set_xscale("log")
    _money_axis(ax, "y", [*lo, *mid, *hi, *nom])
    ax.set_xlabel(f"target ({pts[0]['metric'] if pts else ''}, FLOP)")
    ax.set_ylabel("cheapest plan cost")
    _style(ax, "Cost, given the target is reached")
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=FONT - 2)
    fig.tight_layout()
    return chart


# --- output ----------------------------------------------------------------------------------------------


def _figure(chart: Chart | Figure) -> Figure:
    return chart.figure if isinstance(chart, Chart) else chart


def png_bytes(chart: Chart | Figure, dpi: int = 110) -> bytes:
    """A figure as PNG bytes."""
    buf = io.BytesIO()
    _figure(chart).savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def png_data_uri(chart: Chart | Figure) -> str:
    """A figure as a ``data:image/png;base64,...`` URI (self-contained HTML)."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(chart)).decode("ascii")


def save_png(chart: Chart | Figure, path: Path) -> None:
    """Write the figure as PNG atomically (the CLI's --plot)."""
    from dispersal._io import atomic_write_bytes

    atomic_write_bytes(Path(path), png_bytes(chart, dpi=120))


def svg_markup(chart: Chart) -> str:
    """Inline SVG: scales to its container, ``role="img"`` named by the alt text, a tooltip per mark."""
    import matplotlib

    buf = io.BytesIO()
    # Text as <text> (not glyph outlines): a third of the size, faster, and readable by screen readers.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        chart.figure.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue().decode("utf-8")
    text = text[text.index("<svg") :]
    alt = html.escape(chart.alt, quote=True)
    text = re.sub(
        r'<svg([^>]*?) width="[^"]*" height="[^"]*"',
        lambda m: (
            f'<svg{m.group(1)} role="img" aria-label="{alt}" style="width:100%;max-width:760px;height:auto"'
        ),
        text,
        count=1,
    )
    text = re.sub(r"(<svg[^>]*>)", lambda m: m.group(1) + f"<title>{alt}</title>", text, count=1)
    for gid, tip in chart.tips.items():
        text = text.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{html.escape(tip)}</title>', 1)
    # One line: markdown renderers (Streamlit's) end a raw HTML block at a blank line.
    return re.sub(r">\s+<", "><", text).replace("\n", " ").strip()
