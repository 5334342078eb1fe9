"""`dispersal frontier`: where dispersal stops, per compute target and premium over one datacenter."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer

from dispersal.cli._common import MAX_SEED, flop_target, guarded, number_in, output_file, print_json
from dispersal.cli._groups import with_groups
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError

_EPILOG = "Method and JSON schema: docs/frontier.md."
#: Draws per target by default: the default grid stays under 10 s of CPU with them
#: (benchmarks/bench_frontier.py).
DEFAULT_SAMPLES = 100
#: The most draws per target the command accepts (each target draws them at every grid bandwidth).
MAX_FRONTIER_SAMPLES = 10_000


def _split(values: list[str] | None) -> list[str]:
    return [part.strip() for v in values or [] for part in v.split(",")]


def _targets(values: list[str] | None, default: tuple[float, ...]) -> tuple[float, ...]:
    """Compute targets (repeatable or comma lists), each in (0, MAX_TARGET_FLOP] FLOP."""
    parts = _split(values)
    return tuple(flop_target(p) for p in parts) if parts else default


def _number(text: str, field: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(field, f"cannot parse {text!r} as a number") from None


def _premiums(values: list[str] | None, default: tuple[float, ...]) -> tuple[float, ...]:
    """Premiums over one datacenter (repeatable or comma lists), each in [1, 1e6] (x)."""
    parts = _split(values)
    if not parts:
        return default
    return tuple(number_in(_number(p, "premium"), "premium", 1.0, 1e6, unit="x") for p in parts)


def _sites(values: list[str] | None, default: tuple[int, ...]) -> tuple[int, ...]:
    """Site counts for the "largest target at N sites" rows, each an integer in [1, 100,000]."""
    parts = _split(values)
    if not parts:
        return default
    out = []
    for p in parts:
        v = number_in(_number(p, "sites"), "sites", 1, 100_000)
        if v != int(v):
            raise InputError("sites", f"must be a whole number of sites, got {p!r}")
        out.append(int(v))
    return tuple(out)


def _bandwidths(values: list[str] | None, default: tuple[float, ...]) -> tuple[float, ...]:
    """The bandwidth grid (e.g. 10Mbps,1Gbps), each in [1 kbit/s, 10 Tbit/s]."""
    parts = _split(values)
    if not parts:
        return default
    out = []
    for p in parts:
        try:
            b = units.parse_bandwidth(p)
        except ValueError as exc:
            raise InputError("bandwidth", str(exc)) from None
        out.append(number_in(b, "bandwidth", 1e3, 1e13, unit="bit/s"))
    return tuple(out)


def _bw(v: float | None) -> str:
    return units.format_bandwidth(v) if v is not None else "-"


def _q_bw(q: list[Any]) -> str:
    return "/".join("inf" if isinstance(v, str) else _bw(v).replace(" ", "") for v in q)


def _beyond(row: dict[str, Any]) -> str:
    """' (k replicas beyond evidence)' where the plan's replicas exceed the published points."""
    k = row.get("replicas_beyond_evidence")
    return f" ({k:,} replicas beyond evidence)" if k else ""


def _word(binds: str) -> str:
    """The binding constraint's word (the part of a `binds` string before its colon)."""
    return binds.split(":")[0]


def _band_text(band: dict[str, Any] | None) -> str:
    if band is None:
        return "not drawn"
    return f"{band['p_reach']:.0%} ({_q_bw(band['least_bandwidth_bits_per_s_p10_p50_p90'])})"


def _premium_q(band: dict[str, Any] | None) -> str:
    """P10/P50/P90 of the premium at the reach bandwidth ('inf' = cannot reach there)."""
    if band is None:
        return "not drawn"
    q = band["premium_at_reach_bandwidth_p10_p50_p90"]
    return "/".join("inf" if isinstance(v, str) else f"{v:.2g}" for v in q)


def _stops_lines(d: dict[str, Any]) -> list[str]:
    """'Where it stops' per premium, as a range with the share of draws behind each target."""
    out = []
    for w in d.get("where_it_stops", []):
        x = w["premium"]
        shares = ", ".join(
            f"{s['target_flop']:.0e} within {x:g}x: {s['share']:.0%} of draws" for s in w["share_of_draws"]
        )
        p90, p50, p10 = ("-" if v is None else f"{v:.0e}" for v in w["largest_target_p90_p50_p10"])
        out.append(
            f"where it stops within {x:g}x: largest target reached by 90% / 50% / 10% of draws {p90} / {p50} / {p10} ({shares})"
        )
    return out


def render(f: Any) -> Any:
    """Rich tables of a Frontier (`Frontier.to_dict()`): P(reach) first, one row per (target,
    premium), the largest target at N sites, the quality lines, then the footnotes."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    d = f.to_dict() if hasattr(f, "to_dict") else f
    reach = ", ".join(
        f"{r['target_flop']:.0e}: {'not drawn' if r['p_reach'] is None else format(r['p_reach'], '.0%')}"
        for r in d["p_reach"]
    )
    building = ", ".join(
        f"{c['target_flop']:.0e}: " + ("-" if c["cost_usd"] is None else units.format_money(c["cost_usd"]))
        for c in d["centralized_cost_usd"]
    )
    metric = {"c_quality": "C_quality", "c_local": "C_local"}.get(d["metric"], d["metric"])
    cap = "" if d.get("max_site_kw") is None else f", every site under {d['max_site_kw']:g} kW"
    t = Table(
        title=f"Where dispersal stops ({d['mode']} mode, {metric}, regime {d['regime']}{cap}); "
        f"one building: {building}; P(reach) at {_bw(d['reach_bandwidth_bits_per_s'])}: {reach}",
        caption="P(reach within x): Monte Carlo, with P10/P50/P90 of the least bandwidth (inf = cannot reach); "
        "premium P10/50/90: the cheapest plan's premium at the reach bandwidth over the draws; "
        "replicas beyond evidence: the plan's replicas past the published M = 16; "
        "(word): what binds that limit; --json has every detail",
    )
    cols = (
        "target",
        "premium",
        "P(reach) (least bw)",
        "premium P10/50/90",
        "least bw/site",
        "sites x node",
        "kW/site",
        "most sites",
        "least kW/site",
        "shortest run",
        "binds",
    )
    for col in cols:
        t.add_column(col, overflow="fold")
    notes: list[str] = []

    def key(text: str) -> str:
        short = text.split("; closest:")[0]
        if short not in notes:
            notes.append(short)
        return f"[{notes.index(short) + 1}]"

    for lim in d["limits"]:
        ok = lim["least_bandwidth_bits_per_s"] is not None
        t.add_row(
            f"{lim['target_flop']:.0e}",
            f"{lim['premium']:g}x",
            _band_text(lim["band"]),
            _premium_q(lim["band"]),
            _bw(lim["least_bandwidth_bits_per_s"]) if ok else "-",
            f"{lim['sites']:,} x {lim['hardware']}{_beyond(lim)}" if ok else "-",
            f"{lim['power_per_site_kw']:.1f}" if ok else "-",
            f"{lim['most_sites']:,} ({_word(lim['most_sites_binds'])})" if lim["most_sites"] else "-",
            f"{lim['least_power_per_site_kw']:.1f} ({_word(lim['least_power_binds'])})"
            if lim["least_power_per_site_kw"]
            else "-",
            f"{lim['shortest_run_days']:g} d ({_word(lim['shortest_run_binds'])})"
            if lim["shortest_run_days"]
            else "-",
            key(lim["binds"]),
        )
    parts: list[Any] = [t]
    if d["at_sites"]:
        a = Table(title="Largest target with at most N sites (top grid rate)")
        for col in ("sites", "premium", "largest target", "node x sites used", "binds"):
            a.add_column(col, overflow="fold")
        for r in d["at_sites"]:
            a.add_row(
                f"{r['sites']:,}",
                "any cost" if r["premium"] is None else f"{r['premium']:g}x",
                f"{r['largest_target_flop']:.3g}" if r["largest_target_flop"] else "-",
                f"{r['hardware']} x {r['sites_used']:,}{_beyond(r)}" if r["hardware"] else "-",
                key(r["binds"]),
            )
        parts.append(a)
    if d["quality_lines"]:
        q = Table(title="The many-replica quality assumptions (least bandwidth per premium)")
        for col in (
            "assumption",
            "target",
            *[f"{x:g}x" for x in d["premiums"]],
            f"premium at {_bw(d['reach_bandwidth_bits_per_s'])}",
        ):
            q.add_column(col, overflow="fold")
        for r in d["quality_lines"]:
            pr = r["premium_at_reach_bandwidth"]
            q.add_row(
                r["assumption"],
                f"{r['target_flop']:.0e}",
                *[_bw(b) for b in r["least_bandwidth_bits_per_s"]],
                f"{pr:.2f}x" if pr is not None else "over the largest",
            )
        parts.append(q)
    lines = _stops_lines(d)
    lines += [f"[{i}] {r}" for i, r in enumerate(notes, 1)]
    distance = sorted(
        {lim["distance_binds"] for lim in d["limits"] if lim["least_bandwidth_bits_per_s"] is not None}
    )
    lines += [f"distance: {x}" for x in distance]
    lines += [f"note: {n}" for n in d["notes"]]
    parts.append(Text("\n".join(lines)))
    return Group(*parts)


def _run_sensitivity(
    target: list[str] | None,
    premium: list[str] | None,
    sites: list[str] | None,
    bandwidth: list[str] | None,
    regime: str,
    seed: int,
    json_out: bool,
) -> None:
    """`frontier --sensitivity`: the Sobol' indices table (or JSON)."""
    from rich.table import Table

    from dispersal.cli._render import console
    from dispersal.model.analyses.frontier import BANDWIDTH_GRID_BITS_PER_S
    from dispersal.model.analyses.frontier import sensitivity as sens

    s = sens.sensitivity(
        target_flop=_targets(target, (1e25,))[0],
        premium=max(_premiums(premium, (5.0,))),
        sites=_sites(sites, sens.DEFAULT_SITES),
        bandwidth_grid_bits_per_s=_bandwidths(bandwidth, BANDWIDTH_GRID_BITS_PER_S),
        regime_name=regime,
        seed=seed,
    )
    d = s.to_dict()
    if json_out:
        print_json(d)
        return

    def f(v: float | None, ci: float | None) -> str:
        return "-" if v is None else f"{v:.2f} +-{ci:.2f}" if ci is not None else f"{v:.2f}"

    t = Table(
        title=f"Sobol' indices (SALib; first-order S1 / total ST, +- 95% half-width) of log10 of each answer; "
        f"N = {d['base_samples']} (Saltelli), {d['evaluations']} draws; "
        f"{d['cannot_reach_share']:.0%} of draws cannot reach {d['target_flop']:.0e} at the reach rate",
        caption="grouped inputs: each group is drawn jointly from the frontier's Monte Carlo (docs/frontier.md)",
    )
    t.add_column("group")
    for o in d["outputs"]:
        t.add_column(f"{o['output']} S1 / ST", overflow="fold")
    for i, g in enumerate(s.groups):
        row = [g]
        for o in d["outputs"]:
            x = o["groups"][i]
            row.append(f"{f(x['S1'], x['S1_ci95'])} / {f(x['ST'], x['ST_ci95'])}")
        t.add_row(*row)
    console().print(t)


#: Which flags each form of `frontier` reads (the grid form is neither --year nor --compare); a flag
#: given to a form that does not read it is an error, not silently ignored.
_FLAGS_OF = {
    "grid": {"sites", "bandwidth", "max-site-kw", "samples", "seed", "plot", "sensitivity"},
    "year": {"until", "published-h", "plot"},
    "compare": {"wan", "lose-sites", "days", "latency"},
}


def _only_with(*, year: bool, compare: bool, given: dict[str, bool]) -> None:
    """InputError naming the first given flag that the chosen form of `frontier` does not read."""
    form = "year" if year else "compare" if compare else "grid"
    for flag, is_given in given.items():
        if is_given and flag not in _FLAGS_OF[form]:
            where = [f for f, flags in _FLAGS_OF.items() if flag in flags]
            needs = " or ".join(
                "the default grid (no --year / --compare)" if f == "grid" else f"--{f}" for f in where
            )
            raise InputError(flag, f"is read only with {needs}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridOptions:
    """The options only the default grid form of `frontier` reads (cli._groups)."""

    sites: Annotated[
        list[str] | None,
        typer.Option(help="Site counts for 'the largest target at N sites' (default 10, 100, 1000)."),
    ] = None
    bandwidth: Annotated[
        list[str] | None,
        typer.Option(help="Bandwidth grid per site (default 10Mbps,30Mbps,...,10Gbps)."),
    ] = None
    max_site_kw: Annotated[
        float | None,
        typer.Option(help="Per-site power cap, kW (chips x TDP x PUE); larger sites are not searched."),
    ] = None
    samples: Annotated[
        int, typer.Option(help="Monte Carlo draws per target for P(reach) and the bands (0 = none).")
    ] = DEFAULT_SAMPLES
    seed: Annotated[int, typer.Option(help="Seed for --samples.")] = 0
    sensitivity: Annotated[
        bool,
        typer.Option(
            "--sensitivity",
            help="Sobol' indices (SALib) of the headline answers over the drawn parameters "
            "(the first --target, default 1e25; the largest --premium; --sites, default 100 and 1,000).",
        ),
    ] = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class YearOptions:
    """`frontier --year` and the options only it reads (cli._groups)."""

    year: Annotated[
        bool,
        typer.Option("--year", help="The frontier over time: per algorithm generation, then projections."),
    ] = False
    until: Annotated[int, typer.Option(help="--year: last projected year.")] = 2030
    published_h: Annotated[bool, typer.Option("--published-h", help="--year: each paper's H.")] = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompareOptions:
    """`frontier --compare` and the options only it reads (cli._groups)."""

    compare: Annotated[
        bool, typer.Option("--compare", help="One building vs N sites: monitor, survivability, power.")
    ] = False
    wan: Annotated[str | None, typer.Option(help="--compare: per-site WAN of the N-site plan (1Gbps).")] = (
        None
    )
    lose_sites: Annotated[int, typer.Option(help="--compare: sites lost (for ever).")] = 1
    days: Annotated[
        float | None,
        typer.Option(
            help="--compare: time budget of both plans, days (the app's Monitor view: its convention's days; "
            "default the planner's 740)."
        ),
    ] = None
    latency: Annotated[
        str | None,
        typer.Option(help="--compare: one-way WAN latency of the N-site plan (default the planner's 100ms)."),
    ] = None


def register(app: typer.Typer) -> None:
    """Add the ``frontier`` command to the root app."""

    @app.command("frontier", epilog=_EPILOG)
    @guarded
    @with_groups
    def frontier_cmd(
        *,
        target: Annotated[
            list[str] | None,
            typer.Option(help="Compute targets, FLOP (repeatable or comma list). Default 1e24..1e27."),
        ] = None,
        premium: Annotated[
            list[str] | None, typer.Option(help="Premiums over one datacenter (default 1.5, 2, 5).")
        ] = None,
        grid: GridOptions,
        regime: Annotated[str, typer.Option(help="Regime every site stays under.")] = "treaty",
        mode: Annotated[str, typer.Option(help="paper or default.")] = "default",
        plot: Annotated[
            str | None,
            typer.Option(help="Write the frontier charts (with --year: the frontier over time) to this PNG."),
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON (docs/frontier.md).")] = False,
        over_time: YearOptions,
        versus: CompareOptions,
    ) -> None:
        """The limits of dispersal per target and premium over one datacenter: least bandwidth per site,
        most sites, least power per site, shortest run, longest distance and the largest target at N
        sites, each with what binds; Monte Carlo bands with P(reach) first."""
        _only_with(
            year=over_time.year,
            compare=versus.compare,
            given={
                "wan": versus.wan is not None,
                "lose-sites": versus.lose_sites != 1,
                "days": versus.days is not None,
                "latency": versus.latency is not None,
                "until": over_time.until != 2030,
                "published-h": over_time.published_h,
                "sites": bool(grid.sites),
                "bandwidth": bool(grid.bandwidth),
                "max-site-kw": grid.max_site_kw is not None,
                "samples": grid.samples != DEFAULT_SAMPLES,
                "seed": grid.seed != 0,
                "plot": plot is not None,
                "sensitivity": grid.sensitivity,
            },
        )
        if over_time.year or versus.compare:  # cli/frontier_time.py (issue 23 items 3-5)
            from dispersal.cli import frontier_time as ftc

            if over_time.year and versus.compare:
                raise InputError("compare", "give --year or --compare, not both")
            tg = _targets(target, ()) or None
            if over_time.year:
                ftc.run_year(
                    targets=tg,
                    premiums=_premiums(premium, ()) or None,
                    regime=regime,
                    mode=mode,
                    until=over_time.until,
                    published_h=over_time.published_h,
                    plot=plot,
                    json_out=json_out,
                )
            else:
                ftc.run_compare(
                    targets=tg,
                    wan=versus.wan,
                    premiums=_premiums(premium, ()) or None,
                    regime=regime,
                    mode=mode,
                    lose_sites=versus.lose_sites,
                    days=versus.days,
                    latency=versus.latency,
                    json_out=json_out,
                )
            return
        from dispersal.model.analyses.frontier import (
            BANDWIDTH_GRID_BITS_PER_S,
            DEFAULT_PREMIUMS,
            DEFAULT_SITES,
            DEFAULT_TARGETS_FLOP,
            frontier,
        )

        number_in(grid.samples, "samples", 0, MAX_FRONTIER_SAMPLES)
        number_in(grid.seed, "seed", 0, MAX_SEED)
        if grid.sensitivity:
            _run_sensitivity(target, premium, grid.sites, grid.bandwidth, regime, grid.seed, json_out)
            return
        kwargs: dict[str, Any] = {
            "targets_flop": _targets(target, DEFAULT_TARGETS_FLOP),
            "premiums": _premiums(premium, DEFAULT_PREMIUMS),
            "sites": _sites(grid.sites, DEFAULT_SITES),
            "bandwidth_grid_bits_per_s": _bandwidths(grid.bandwidth, BANDWIDTH_GRID_BITS_PER_S),
            "regime_name": regime,
            "max_site_kw": None
            if grid.max_site_kw is None
            else number_in(grid.max_site_kw, "max-site-kw", 0, 1e7, lo_open=True, unit="kW"),
            "mode": mode,
            "samples": grid.samples,
            "seed": grid.seed,
        }
        plot_path = output_file(plot, "plot", (".png",)) if plot is not None else None
        f = frontier(**kwargs)
        d = f.to_dict()
        if plot_path is not None:
            from dispersal.present.figures import save_png
            from dispersal.present.frontier_figures import frontier_figure

            save_png(frontier_figure(d), plot_path)
        if json_out:
            print_json(d)
            return
        from dispersal.cli._render import console

        console().print(render(d))
        if plot_path is not None:
            console().print(f"plot: {plot_path}")
