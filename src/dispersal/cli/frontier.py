"""`dispersal frontier`: where dispersal stops, per compute target and premium over one datacenter."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dispersal.cli._common import MAX_SAMPLES, MAX_SEED, flop_target, guarded, number_in, print_json
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError

_EPILOG = "Method and JSON schema: docs/frontier.md."


def _targets(values: list[str] | None, default: tuple[float, ...]) -> tuple[float, ...]:
    """Compute targets (repeatable or comma lists), each in (0, MAX_TARGET_FLOP] FLOP."""
    if not values:
        return default
    return tuple(flop_target(part.strip()) for v in values for part in v.split(","))


def _premiums(values: list[str] | None, default: tuple[float, ...]) -> tuple[float, ...]:
    """Premiums over one datacenter (repeatable or comma lists), each in [1, 1e6] (x)."""
    if not values:
        return default
    out = []
    for v in values:
        for part in v.split(","):
            try:
                x = float(part)
            except ValueError:
                raise InputError("premium", f"cannot parse {part!r} as a number") from None
            out.append(number_in(x, "premium", 1.0, 1e6, unit="x"))
    return tuple(out)


def _fmt_bw(v: float | None) -> str:
    return units.format_bandwidth(v) if v is not None else "-"


def render(f: Any) -> Any:
    """A rich table of a Frontier: P(reach) first, then one row per (target, premium)."""
    from rich.table import Table

    reach = ", ".join(
        f"{t:.0e}: {'-' if f.p_reach[t] is None else format(f.p_reach[t], '.0%')}" for t in f.targets_flop
    )
    t = Table(
        title=f"Where dispersal stops ({f.mode} mode, {f.metric}, regime {f.regime}); P(reach) at 100 Mbps: {reach}",
        caption="least bandwidth: lowest grid point within the premium (the limit lies above the next lower point)",
    )
    for col in ("target", "premium", "budget", "least Mbps/site", "sites", "node", "kW/site", "binds"):
        t.add_column(col, overflow="fold")
    reasons: list[str] = []
    for lim in f.limits:
        text = lim.binds.split("; closest:")[0]
        if text not in reasons:
            reasons.append(text)
        t.add_row(
            f"{lim.target_flop:.0e}",
            f"{lim.premium:g}x",
            units.format_money(lim.budget_usd) if lim.budget_usd is not None else "-",
            _fmt_bw(lim.least_bandwidth_bits_per_s),
            f"{lim.sites:,}" if lim.sites is not None else "-",
            lim.hardware or "-",
            f"{lim.power_per_site_kw:.1f}" if lim.power_per_site_kw is not None else "-",
            f"[{reasons.index(text) + 1}]",
        )
    from rich.console import Group
    from rich.text import Text

    lines = [f"[{i}] {r}" for i, r in enumerate(reasons, 1)]
    distance = {lim.distance_binds for lim in f.limits if lim.distance_binds and lim.sites is not None}
    lines += [f"distance: {d}" for d in sorted(distance)]
    lines += [f"note: {n}" for n in f.notes]
    return Group(t, Text("\n".join(lines)))


def register(app: typer.Typer) -> None:
    """Add the ``frontier`` command to the root app."""

    @app.command("frontier", epilog=_EPILOG)
    @guarded
    def frontier_cmd(
        target: Annotated[
            list[str] | None,
            typer.Option(help="Compute targets, FLOP (repeatable or comma list). Default 1e24..1e27."),
        ] = None,
        premium: Annotated[
            list[str] | None, typer.Option(help="Premiums over one datacenter (default 1.5, 2, 5).")
        ] = None,
        regime: Annotated[str, typer.Option(help="Regime every site stays under.")] = "treaty",
        mode: Annotated[str, typer.Option(help="paper or default.")] = "default",
        samples: Annotated[int, typer.Option(help="Monte Carlo draws for P(reach) (0 = not drawn).")] = 100,
        seed: Annotated[int, typer.Option(help="Seed for --samples.")] = 0,
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON (docs/frontier.md).")] = False,
        year: Annotated[
            bool,
            typer.Option(
                "--year", help="The frontier over time: per algorithm generation, then projections."
            ),
        ] = False,
        until: Annotated[int, typer.Option(help="--year: last projected year.")] = 2030,
        published_h: Annotated[bool, typer.Option("--published-h", help="--year: each paper's H.")] = False,
        plot: Annotated[str | None, typer.Option(help="--year: also draw it to this PNG.")] = None,
        compare: Annotated[
            bool, typer.Option("--compare", help="One building vs N sites: monitor, survivability, power.")
        ] = False,
        wan: Annotated[
            str | None, typer.Option(help="--compare: per-site WAN of the N-site plan (1Gbps).")
        ] = None,
        lose_sites: Annotated[int, typer.Option(help="--compare: sites lost (for ever).")] = 1,
    ) -> None:
        """The limits of dispersal: least bandwidth per site, sites, power per site and distance within each
        premium over one datacenter, with the constraint that binds."""
        if year or compare:  # cli/frontier_time.py (issue 23 items 3-5)
            from dispersal.cli import frontier_time as ftc

            if year and compare:
                raise InputError("compare", "give --year or --compare, not both")
            tg = _targets(target, ()) or None
            if year:
                ftc.run_year(
                    targets=tg,
                    premiums=_premiums(premium, ()) or None,
                    regime=regime,
                    mode=mode,
                    until=until,
                    published_h=published_h,
                    plot=plot,
                    json_out=json_out,
                )
            else:
                ftc.run_compare(
                    targets=tg,
                    wan=wan,
                    premiums=_premiums(premium, ()) or None,
                    regime=regime,
                    mode=mode,
                    lose_sites=lose_sites,
                    json_out=json_out,
                )
            return
        from dispersal.model.analyses.frontier import DEFAULT_PREMIUMS, DEFAULT_TARGETS_FLOP, frontier

        number_in(samples, "samples", 0, MAX_SAMPLES)
        number_in(seed, "seed", 0, MAX_SEED)
        f = frontier(
            targets_flop=_targets(target, DEFAULT_TARGETS_FLOP),
            premiums=_premiums(premium, DEFAULT_PREMIUMS),
            regime_name=regime,
            mode=mode,
            samples=samples,
            seed=seed,
        )
        if json_out:
            print_json(f.to_dict())
            return
        from rich.console import Console

        Console().print(render(f))
