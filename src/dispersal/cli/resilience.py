"""`dispersal resilience`: goodput of ddp, elastic ddp, DiLoCo and Decoupled DiLoCo under failures."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from dispersal.cli._common import MAX_DAYS, MAX_SEED, days_in, guarded, number_in, output_file, print_json
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.units import parse_count, parse_duration

#: Most chips a fleet may have here (assumption: ~1,000x today's largest clusters of ~1M chips).
MAX_CHIPS = 1e9
#: Longest duration any input may take, hours (a century, as the scenario's time budget).
MAX_HOURS = MAX_DAYS * 24

_EPILOG = (
    "JSON keys: inputs (every fleet field, hours), goodput (closed form per algorithm: ddp, "
    "ddp_elastic, diloco, decoupled), simulation (mean and stderr per algorithm, or null), "
    "site_loss (scenario and per-algorithm time_to_target_h, delay_h, lost_useful_fraction, "
    "finishes_within_budget; time_to_target_h is null when the run never finishes). Exit 0 = computed, "
    "2 = bad input."
)


def _hours(text: str, field: str, *, positive: bool = False) -> float:
    """A duration option in hours, finite, in [0, a century] (or (0, ...] when positive)."""
    return number_in(parse_duration(text, field) / 3600.0, field, 0, MAX_HOURS, lo_open=positive, unit="h")


def _plot(spec: Any, path: Path) -> None:
    """The app's goodput-vs-scale figure (10 to 10M chips), as PNG."""
    import numpy as np

    from dispersal.model.analyses.resilience import goodput_vs_scale
    from dispersal.present import figures

    chips = [int(c) for c in np.unique(np.round(np.logspace(1, 7, 61)).astype(int))]
    curves = {k: v.tolist() for k, v in goodput_vs_scale(spec, chips).items()}
    chart = figures.goodput_figure(chips, curves, marker=spec.chips)
    chart.figure.axes[0].set_title(
        f"Goodput vs scale, chip MTBF {spec.chip_mtbf_h:,.0f} h", fontsize=figures.TITLE_FONT
    )
    figures.save_png(chart, path)


def _print_table(spec: Any, closed: Any, sim: Any, loss: Any, lose_sites: int, sites: int) -> None:
    """The goodput table: closed form, the simulation when run, and the site-loss columns."""
    from rich.table import Table

    from dispersal.cli._render import console
    from dispersal.model.analyses.resilience import ALGORITHMS

    table = Table(
        title=(
            f"Goodput at {spec.chips:,} chips, chip MTBF {spec.chip_mtbf_h:,.0f} h, "
            f"{spec.islands:,} island{'s' if spec.islands != 1 else ''} over {spec.sites:,} sites"
        )
    )
    table.add_column("algorithm")
    table.add_column("goodput (closed form)", justify="right")
    if sim is not None:
        table.add_column(f"DES ({sim.replications} x {sim.horizon_h:g} h)", justify="right")
    if lose_sites:
        # Each algorithm's target is its own no-loss useful work over the planned run.
        table.add_column(f"lose {lose_sites}/{sites} sites: time to own target", justify="right")
        table.add_column("lost by plan end", justify="right")
        table.add_column("in budget", justify="center")
    for name in ALGORITHMS:
        row = [name, f"{closed.to_dict()[name]:.3f}"]
        if sim is not None:
            est = sim.goodput[name]
            row.append(f"{est.mean:.3f} ± {est.stderr:.3f}")
        if lose_sites:
            o = loss.outcomes[name]
            t = "never" if math.isinf(o.time_to_target_h) else f"{o.time_to_target_h / 24:.1f} d"
            row += [t, f"{o.lost_useful_fraction:.1%}", "yes" if o.finishes_within_budget else "no"]
        table.add_row(*row)
    console().print(table)


def register(app: typer.Typer) -> None:
    """Add the ``resilience`` command to the root app."""

    @app.command("resilience", epilog=_EPILOG)
    @guarded
    def resilience(
        chips: Annotated[str, typer.Option(help="Chips provisioned, e.g. 1.2M.")] = "1.2M",
        mtbf: Annotated[
            str,
            typer.Option(help="Mean time between interruptions per chip, e.g. 50000h (default: Llama 3)."),
        ] = "",
        sites: Annotated[
            int, typer.Option(help="Separate sites the fleet is spread over.", min=1, max=1_000_000)
        ] = 8,
        chips_per_island: Annotated[
            int,
            typer.Option(
                help="Chips per DiLoCo worker / Decoupled DiLoCo learner.", min=1, max=int(MAX_CHIPS)
            ),
        ] = 16_384,
        chips_per_node: Annotated[
            int,
            typer.Option(
                help="Chips per host; a node fails as a unit (default: an 8-GPU HGX host).",
                min=1,
                max=1_000_000,
            ),
        ] = 8,
        restart: Annotated[str, typer.Option(help="Restart time of a job or island.")] = "10min",
        round_time: Annotated[
            str, typer.Option(help="DiLoCo round (outer step) length, e.g. 30min (default).")
        ] = "30min",
        lose_sites: Annotated[
            int, typer.Option(help="Sites lost in the site-loss scenario (0 = none).", min=0, max=1_000_000)
        ] = 1,
        lose_at: Annotated[str, typer.Option(help="When the sites go dark, after the start.")] = "10d",
        down_for: Annotated[
            str, typer.Option(help="How long they stay dark; 'forever' or a duration.")
        ] = "forever",
        days: Annotated[
            float, typer.Option(help="Planned run length in days (sets the target work).")
        ] = 30.0,
        simulate: Annotated[bool, typer.Option("--simulate/--no-simulate", help="Also run the DES.")] = False,
        replications: Annotated[int, typer.Option(help="DES replications.", min=1, max=100_000)] = 8,
        seed: Annotated[
            int, typer.Option(help="DES seed (same seed, same numbers).", min=0, max=MAX_SEED)
        ] = 0,
        plot: Annotated[
            str | None, typer.Option(help="Write goodput vs scale (10 to 10M chips) to this PNG.")
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Goodput (useful / provisioned compute) of four algorithms as chips fail and sites go dark.

        Closed form (Young 1974 / Daly 2006 for ddp; renewal-reward for the others), optionally
        checked by a discrete-event simulation, plus a scripted loss of whole sites.
        """
        from dispersal.model.analyses.resilience import (
            LLAMA3_CHIP_MTBI_H,
            ResilienceSpec,
            SiteLossScenario,
            goodput,
            site_loss,
        )

        n_chips = number_in(parse_count(chips, "chips"), "chips", 1, MAX_CHIPS)
        if n_chips != math.floor(n_chips):
            raise InputError("chips", f"must be a whole number of chips, got {chips!r}")
        days_in(days, "days")
        if lose_sites > sites:
            raise InputError("lose_sites", f"must be in [0, {sites}] (the fleet's --sites), got {lose_sites}")
        plot_path = output_file(plot, "plot", (".png",)) if plot is not None else None
        spec = ResilienceSpec(
            chips=int(n_chips),
            chip_mtbf_h=_hours(mtbf, "mtbf", positive=True) if mtbf else LLAMA3_CHIP_MTBI_H,
            sites=sites,
            chips_per_island=chips_per_island,
            chips_per_node=chips_per_node,
            restart_time_h=_hours(restart, "restart"),
            round_time_h=_hours(round_time, "round_time", positive=True),
        )
        forever = down_for.strip().lower() in {"forever", "inf", "never"}
        down = None if forever else _hours(down_for, "down_for")
        scenario = SiteLossScenario(
            lose_sites=lose_sites, lose_at_h=_hours(lose_at, "lose_at"), down_for_h=down, run_h=days * 24
        )
        closed = goodput(spec)
        loss = site_loss(spec, scenario)
        sim = None
        if simulate:
            from dispersal.sim import simulate as run_des

            horizon = min(days * 24, 720.0)
            if json_out:
                sim = run_des(spec, horizon_h=horizon, replications=replications, seed=seed)
            else:
                from rich.progress import Progress

                with Progress(transient=True) as bar:
                    task = bar.add_task("simulating", total=replications)
                    sim = run_des(
                        spec,
                        horizon_h=horizon,
                        replications=replications,
                        seed=seed,
                        progress=lambda k: bar.advance(task, k),
                    )
        if plot_path is not None:
            _plot(replace(spec), plot_path)
        if json_out:
            print_json(
                {
                    "inputs": spec.to_dict(),
                    "goodput": closed.to_dict(),
                    "simulation": sim.to_dict() if sim is not None else None,
                    "site_loss": loss.to_dict(),
                }
            )
            return
        _print_table(spec, closed, sim, loss, lose_sites, sites)
        if lose_sites:
            typer.echo(
                "Site loss: each algorithm's target is the useful work it would do over the planned run without "
                "the loss; 'time to own target' and 'lost' compare it with itself, not across algorithms."
            )
        if plot_path is not None:
            typer.echo(f"wrote {plot_path}")
