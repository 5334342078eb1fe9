"""`dispersal frontier --year` (the frontier over time) and `dispersal frontier --compare` (one building
vs N sites: what a monitor sees, survivability and power). cli/frontier.py delegates here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dispersal.cli._common import (
    MAX_BANDWIDTH_BITS_PER_S,
    days_in,
    number_in,
    output_file,
    parse_in,
    print_json,
    save_figure,
)
from dispersal.cli._common import latency as parse_latency
from dispersal.model.inputs import units
from dispersal.present.monitor import compare_rows


def _bw(v: float | None) -> str:
    return units.format_bandwidth(v) if v is not None else "-"


def run_year(
    *,
    targets: tuple[float, ...] | None,
    premiums: tuple[float, ...] | None,
    regime: str,
    mode: str,
    until: int,
    published_h: bool,
    plot: str | None,
    json_out: bool,
) -> None:
    """Compute and print the frontier over time (one target: the first of `targets`, default 1e25)."""
    from dispersal.model.analyses.frontier import over_time as ft

    if targets is not None and len(targets) != 1:
        from dispersal.model.inputs.errors import InputError

        raise InputError("target", f"--year takes one target, got {len(targets)}")
    number_in(until, "until", 2026, 2100, unit="year")
    path = output_file(plot, "plot", (".png",)) if plot is not None else None
    f = ft.frontier_over_time(
        target_flop=targets[0] if targets else ft.DEFAULT_TARGET_FLOP,
        premiums=premiums or ft.DEFAULT_PREMIUMS,
        regime_name=regime,
        mode=mode,
        until_year=until,
        published_h=published_h,
    )
    if path is not None:
        _plot(f, path)
    if json_out:
        print_json(f.to_dict())
        return
    from dispersal.cli._render import console

    console().print(render_year(f))


def _held(pr: Any, x: float) -> str:
    v = pr.least_bandwidth_bits_per_s.get(x)
    return _bw(v) + (" (line covers)" if v is not None and pr.line_bits_per_s >= v else "")


def render_year(f: Any) -> Any:
    """Rich table: least bandwidth per site per premium, one row per generation, then projections."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    c0 = units.format_money(f.centralized_cost_usd) if f.centralized_cost_usd is not None else "cannot reach"
    t = Table(
        title=f"The frontier over time: {f.target_flop:.0e} FLOP ({f.mode} mode, regime {f.regime}, "
        f"{', '.join(f.hardware)}); one datacenter {c0}",
        caption="least grid bandwidth per site within each premium; rows marked 'projection' are trend "
        "projections, not model results",
    )
    t.add_column("year")
    t.add_column("generation", overflow="fold")
    for x in f.premiums:
        t.add_column(f"{x:g}x", justify="right")
    t.add_column("line a fixed spend buys", justify="right")
    t.add_column("compute per $", justify="right")
    for p in f.points:
        g = p.generation
        t.add_row(
            str(g.year),
            f"{g.label} ({g.codec}, {'overlap' if g.overlap_communication else 'no overlap'}, {g.sync})",
            *[_bw(lim.least_bandwidth_bits_per_s) for lim in p.limits],
            "-",
            "-",
        )
    for pr in f.projections:
        t.add_row(
            f"{pr.year} projection",
            "best by then, held",
            *[_held(pr, x) for x in f.premiums],
            _bw(pr.line_bits_per_s),
            f"{pr.compute_per_dollar_gain:.2f}x",
        )
    lines = []
    for p in f.points:
        for lim in p.limits:
            if lim.least_bandwidth_bits_per_s is None:
                lines.append(f"{p.generation.label} {lim.premium:g}x: none on the grid: {lim.binds}")
            else:
                lines.append(
                    f"{p.generation.label} {lim.premium:g}x: {lim.sites:,} sites x {lim.hardware}, "
                    f"{lim.power_per_site_kw:,.1f} kW/site ({lim.grid_class}); binds below it: {lim.binds}"
                )
    lines += [f"trend {tr.name} = {tr.value:g} {tr.unit} ({tr.status}): {tr.source}" for tr in f.trends]
    lines += [f"note: {n}" for n in f.notes]
    return Group(t, Text("\n".join(lines)))


def _plot(f: Any, path: Path) -> None:
    """Least bandwidth per site (log) by year: each generation's point, the envelope (best published
    by then) as a step line, its projection dashed, and the line rate a fixed spend buys dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dispersal.model.analyses.frontier.over_time import envelope

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    env = envelope(f.points)
    for j, x in enumerate(f.premiums):
        colour = ax.plot([], [])[0].get_color()
        width = max(1.0, 4.0 - 1.2 * j)  # wider first: premiums with the same limit stay visible
        pts = [
            (p.generation.year, lim.least_bandwidth_bits_per_s)
            for p in f.points
            for lim in p.limits
            if lim.premium == x
        ]
        ax.scatter([a for a, v in pts if v], [v / 1e6 for _, v in pts if v], color=colour, s=18, alpha=0.6)
        e = [(r["year"], r["bits_per_s"] / 1e6) for r in env if r["premium"] == x and r["bits_per_s"]]
        if e:
            ax.step(
                [a for a, _ in e],
                [b for _, b in e],
                where="post",
                color=colour,
                lw=width,
                label=f"limit within {x:g}x",
            )
            if f.projections:
                ax.plot([e[-1][0], f.projections[-1].year], [e[-1][1]] * 2, "--", color=colour, lw=width)
    seen: dict[int, int] = {}
    for p in f.points:
        v = next((lim.least_bandwidth_bits_per_s for lim in p.limits if lim.least_bandwidth_bits_per_s), None)
        if v:
            n = seen[p.generation.year] = seen.get(p.generation.year, -1) + 1
            ax.annotate(
                p.generation.label,
                (p.generation.year, v / 1e6),
                xytext=(4, 4 - 9 * n),
                textcoords="offset points",
                fontsize=6,
            )
    if f.projections:
        ax.plot(
            [pr.year for pr in f.projections],
            [pr.line_bits_per_s / 1e6 for pr in f.projections],
            ":",
            color="black",
            label="projection: line a fixed spend buys",
        )
    ax.set_yscale("log")
    # Rates as rates ("3 Gbps"), 1-2-5 ticks (the default gave "10^3" / "10^4" Mbps only).
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.format_bandwidth(v * 1e6)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("year (after the last generation: projections)")
    ax.set_ylabel("least WAN bandwidth per site")
    ax.set_title(
        f"The frontier over time, {f.target_flop:.0e} FLOP, {', '.join(f.hardware)} "
        f"({f.mode} mode, regime {f.regime})"
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def run_compare(
    *,
    targets: tuple[float, ...] | None,
    wan: str | None,
    premiums: tuple[float, ...] | None,
    regime: str,
    mode: str,
    lose_sites: int,
    json_out: bool,
    days: float | None = None,
    latency: str | None = None,
) -> None:
    """Compute and print one building vs the N-site plan per target (default 1e25 and 1e26); with one
    premium, the N-site plan is that premium's frontier plan instead of the plan at --wan. ``days`` /
    ``latency``: the time budget (days) and one-way latency text; None keeps the planner's 740 days /
    100 ms (the app's Monitor view passes its convention's)."""
    from dispersal.model.analyses import monitor
    from dispersal.model.inputs.errors import InputError

    if premiums is not None and len(premiums) != 1:
        raise InputError("premium", f"--compare takes one premium, got {len(premiums)}")

    number_in(lose_sites, "lose_sites", 0, 1_000_000)
    window_s = days_in(days, "days") * units.SECONDS_PER_DAY if days is not None else None
    latency_s = parse_latency(latency, "latency") if latency is not None else None
    rate = (
        parse_in(units.parse_bandwidth, wan, "wan", 0, MAX_BANDWIDTH_BITS_PER_S, lo_open=True, unit="bit/s")
        if wan is not None
        else monitor.DEFAULT_WAN_BITS_PER_S
    )
    d = monitor.compare(
        targets_flop=targets or monitor.DEFAULT_TARGETS_FLOP,
        wan_bits_per_s=rate,
        premium=premiums[0] if premiums else None,
        regime_name=regime,
        mode=mode,
        lose_sites=lose_sites,
        latency_s=latency_s,
        max_duration_s=window_s,
    )
    if json_out:
        print_json(d)
        return
    from dispersal.cli._render import console

    console().print(render_compare(d))


def render_compare(d: dict[str, Any]) -> Any:
    """Rich table of `monitor.compare`'s dict, rates marked sourced or assumed below it."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    rows = compare_rows(d)
    t = Table(title=f"One building vs N sites ({d['mode']} mode, regime {d['regime']}): what a monitor sees")
    t.add_column("")
    for _ in rows[0][1]:
        t.add_column("", justify="right", overflow="fold")
    for label, cells in rows:
        t.add_row(label, *cells)
    lines = [f"rate {r['channel']}: {r['parameter']} = {r['value']:g} ({r['status']})" for r in d["rates"]]
    lines += [f"{p['name']} = {p['value']:g} {p['unit']} ({p['status']})" for p in d["monitor_parameters"]]
    lines += [f"formula {k}: {v}" for k, v in d["formulas"].items()]
    for c in d["comparisons"]:
        lines += [f"{c['target_flop']:.0e}: {r}" for r in c["reasons"]]
    return Group(t, Text("\n".join(lines)))


def compare_markdown(d: dict[str, Any]) -> str:
    """`monitor.compare`'s dict as a Markdown table (docs/frontier.md), rates and formulas below it."""
    rows = compare_rows(d)
    head = "| | " + " | ".join(rows[0][1]) + " |"
    out = [head, "|---|" + "--:|" * len(rows[0][1])]
    out += ["| " + label.strip() + " | " + " | ".join(cells) + " |" for label, cells in rows[1:]]
    return "\n".join(out)


def year_markdown(f: Any) -> str:
    """A FrontierOverTime as a Markdown table (docs/frontier.md)."""
    prem = list(f.premiums)
    out = [
        "| year | generation | "
        + " | ".join(f"least bandwidth within {x:g}x" for x in prem)
        + " | line a fixed spend buys |",
        "|---|---|" + "--:|" * (len(prem) + 1),
    ]
    for p in f.points:
        g = p.generation
        cells = [_bw(lim.least_bandwidth_bits_per_s) for lim in p.limits]
        out.append(
            f"| {g.year} | {g.label} ({g.codec}, {'overlap' if g.overlap_communication else 'no overlap'}) | "
            + " | ".join(cells)
            + " | - |"
        )
    for pr in f.projections:
        cells = [_held(pr, x) for x in prem]
        out.append(
            f"| {pr.year} (projection) | best by then, held | "
            + " | ".join(cells)
            + f" | {_bw(pr.line_bits_per_s)} |"
        )
    return "\n".join(out)
