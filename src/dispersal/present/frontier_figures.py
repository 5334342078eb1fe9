"""Figures of `dispersal frontier` (from `Frontier.to_dict()`): the frontier over sites x bandwidth
and over targets. Built like `present.figures` (a `Chart`: figure, alt text, hover text per mark; no
pyplot state); the CLI writes them as one PNG (`--plot`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from dispersal.present import formats as F
from dispersal.present.figures import FONT, WIDTH_IN, Chart, _mark, _style

#: Okabe-Ito colours per premium (colour-blind safe); markers differ too.
_PREMIUM_STYLE = (("#0072B2", "o"), ("#E69F00", "s"), ("#009E73", "^"), ("#D55E00", "D"), ("#CC79A7", "v"))


def _bw_axis(ax: Any, which: str) -> None:
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(FuncFormatter(lambda v, _p: F.bandwidth(v)))


def sites_bandwidth_axes(ax: Any, chart: Chart, d: Mapping[str, Any]) -> None:
    """Per target with a building cost and per premium: the fewest-to-most sites within the premium
    at each grid bandwidth (a band, ends marked); grid rates with no plan are left out."""
    grid = d["bandwidth_grid_bits_per_s"]
    prem = d["premiums"]
    most = {r["target_flop"]: r["sites"] for r in d["most_sites_by_bandwidth"]}
    fewest = {r["target_flop"]: r["sites"] for r in d["fewest_sites_by_bandwidth"]}
    dashes = ("-", "--", ":", "-.")
    drawn = 0
    for ti, t in enumerate(d["targets_flop"]):
        for j, x in enumerate(prem):
            colour, marker = _PREMIUM_STYLE[j % len(_PREMIUM_STYLE)]
            pts = [(b, fewest[t][i][j], most[t][i][j]) for i, b in enumerate(grid) if most[t][i][j] > 0]
            if not pts:
                continue
            bs = [p[0] for p in pts]
            ax.fill_between(bs, [p[1] for p in pts], [p[2] for p in pts], color=colour, alpha=0.12)
            ax.plot(
                bs,
                [p[2] for p in pts],
                color=colour,
                ls=dashes[ti % len(dashes)],
                marker=marker,
                ms=4,
                label=f"{F.flop(t)} FLOP, {x:g}x",
            )
            for b, lo, hi in pts:
                (pt,) = ax.plot([b], [hi], ls="", marker="o", ms=10, alpha=0.0)
                _mark(chart, pt, f"{F.flop(t)} FLOP within {x:g}x at {F.bandwidth(b)}: {lo:,}-{hi:,} sites")
            drawn += 1
    ax.set_xscale("log")
    ax.set_yscale("log")
    _style(ax, "Sites within the premium, by bandwidth per site")
    _bw_axis(ax, "x")
    ax.set_xlabel("WAN bandwidth per site")
    ax.set_ylabel("sites (band: fewest to most)")
    # Counts on a log axis: 1-2-5 ticks as plain numbers (the default left one "10" on a short range).
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(F.axis_count))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(alpha=0.3, which="major")
    if drawn:
        ax.legend(fontsize=FONT - 2, ncol=2, loc="lower right", framealpha=0.9)
    else:
        ax.text(0.5, 0.5, "no target reachable within any premium", ha="center", transform=ax.transAxes)


def targets_axes(ax: Any, chart: Chart, d: Mapping[str, Any]) -> None:
    """Per premium: the least bandwidth per site against the target, with the Monte Carlo's
    P10-P90 where drawn (an unreachable quantile drawn at the top edge); targets no grid rate
    reaches within the premium are marked "x" at the top with P(reach)."""
    grid = d["bandwidth_grid_bits_per_s"]
    top = grid[-1] * 3
    lims = d["limits"]
    for j, x in enumerate(d["premiums"]):
        colour, marker = _PREMIUM_STYLE[j % len(_PREMIUM_STYLE)]
        rows = [lim for lim in lims if lim["premium"] == x]
        ok = [
            (r["target_flop"], r["least_bandwidth_bits_per_s"])
            for r in rows
            if r["least_bandwidth_bits_per_s"]
        ]
        if ok:
            ax.plot(
                [p[0] for p in ok], [p[1] for p in ok], color=colour, marker=marker, lw=2, label=f"{x:g}x"
            )
        for r in rows:
            t = r["target_flop"]
            band = r.get("band")
            if band is not None:
                q = band["least_bandwidth_bits_per_s_p10_p50_p90"]
                lo = q[0] if isinstance(q[0], int | float) else top
                hi = q[2] if isinstance(q[2], int | float) else top
                ax.plot([t * (1 + 0.06 * (j - 1))] * 2, [lo, hi], color=colour, lw=5, alpha=0.3)
            pr = f", P(reach) {band['p_reach']:.0%}" if band is not None else ""
            if r["least_bandwidth_bits_per_s"] is None:
                (pt,) = ax.plot([t], [top], ls="", marker="x", ms=9, color=colour)
                _mark(chart, pt, f"{F.flop(t)} FLOP: not within {x:g}x at any grid rate{pr}")
            else:
                (pt,) = ax.plot([t], [r["least_bandwidth_bits_per_s"]], ls="", marker="o", ms=12, alpha=0.0)
                _mark(
                    chart,
                    pt,
                    f"{F.flop(t)} FLOP within {x:g}x: {F.bandwidth(r['least_bandwidth_bits_per_s'])} per site, "
                    f"{r['sites']:,} sites{pr}",
                )
    ax.axhline(top, color="#555555", lw=0.8, ls=":")
    ax.text(d["targets_flop"][0], top * 1.15, "x: not within the premium on the grid", fontsize=FONT - 2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(grid[0] / 2, top * 2.5)
    _style(ax, "Least bandwidth per site, by target")
    _bw_axis(ax, "y")
    ax.set_xlabel(f"target ({d['metric']}, FLOP)")
    ax.set_ylabel("least WAN bandwidth per site")
    ax.grid(alpha=0.3, which="major")
    if any(r.get("band") is not None for r in lims):  # no draws (--samples 0): no P10-P90 key
        ax.plot([], [], color="#555555", lw=5, alpha=0.3, label="draws P10-P90")
    ax.legend(title="premium", fontsize=FONT - 1, loc="lower right")


def frontier_figure(d: Mapping[str, Any]) -> Chart:
    """Both panels of the frontier (`Frontier.to_dict()`): over sites x bandwidth, over targets."""
    fig = Figure(figsize=(WIDTH_IN * 2, 4.2))
    chart = Chart(
        fig,
        "Two charts: the fewest to most sites within each premium by bandwidth per site, and the least "
        "bandwidth per site within each premium by compute target with Monte Carlo P10-P90 bars",
    )
    targets_axes(fig.add_subplot(1, 2, 1), chart, d)
    sites_bandwidth_axes(fig.add_subplot(1, 2, 2), chart, d)
    reach = ", ".join(
        f"{F.flop(r['target_flop'])}: {'not drawn' if r['p_reach'] is None else format(r['p_reach'], '.0%')}"
        for r in d["p_reach"]
    )
    cap = "" if d.get("max_site_kw") is None else f", every site under {d['max_site_kw']:g} kW"
    fig.suptitle(
        f"Where dispersal stops ({d['mode']} mode, regime {d['regime']}{cap}); P(reach) at "
        f"{F.bandwidth(d['reach_bandwidth_bits_per_s'])}: {reach}",
        fontsize=FONT,
    )
    fig.tight_layout()
    return chart


__all__ = ["frontier_figure", "sites_bandwidth_axes", "targets_axes"]
