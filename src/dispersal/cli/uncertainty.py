"""`dispersal tornado`: which uncertain input moves the cost most; tables for Monte Carlo ranges."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dispersal.cli._common import (
    days_in,
    flop_target,
    guarded,
    latency,
    link_rates,
    output_file,
    print_json,
    save_figure,
)
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError

if TYPE_CHECKING:
    from rich.table import Table

    from dispersal.model.analyses.uncertainty import TornadoBar, UncertaintyResult

_EPILOG = (
    "JSON keys: target_flop, regime, mode, nominal_cost_usd, bars (largest swing first; each: name, "
    "description, low_value, high_value (the parameter's P10 and P90), low_label, high_label, "
    "cost_at_low_usd, cost_at_high_usd, cost_low_usd, cost_high_usd, swing_usd, nominal_cost_usd; "
    "an end that cannot meet the target is null). Costs are the default-mode total (hardware x 1.64 x 1.23 "
    "+ energy) or the paper's hardware-only cost in paper mode. Exit 0 = computed, 2 = bad input."
)
_FIG_NAMES = {
    "cost_usd": "cost",
    "nodes": "nodes",
    "c_quality_flop": "C_quality",
    "days": "days",
    "cost_usd_compute_mapping": "cost, compute-space quality draws",
    "cost_usd_loss_mapping": "cost, loss-space quality draws",
}


def _fmt(key: str, v: float) -> str:
    if not math.isfinite(v):
        return "infeasible" if key.startswith("cost_usd") else "-"
    if key.startswith("cost_usd"):
        return units.format_money(v)
    if key == "nodes":
        return f"{v:,.0f}"
    if key == "c_quality_flop":
        return f"{v:.3g} FLOP"
    return f"{v:.4g} d"


def render_samples_table(result: UncertaintyResult) -> Table:
    """A rich table of a Monte Carlo result: P10 / P50 / P90 and the nominal plan, per figure."""
    from rich.table import Table

    t = Table(
        title=(
            f"Uncertainty: {result.target_flop:.3g} FLOP {result.metric}, {result.samples:,} draws "
            f"(seed {result.seed}), {result.feasible_fraction:.1%} feasible"
        )
    )
    t.add_column("figure")
    for col in ("P10", "P50", "P90", "nominal plan"):
        t.add_column(col, justify="right")
    for key, (p10, p50, p90) in result.percentiles.items():
        t.add_row(
            _FIG_NAMES.get(key, key),
            _fmt(key, p10),
            _fmt(key, p50),
            _fmt(key, p90),
            _fmt(key, result.nominal.get(key, math.nan)),
        )
    if result.hardware_share:
        share = ", ".join(f"{k} {v:.0%}" for k, v in list(result.hardware_share.items())[:3])
        t.caption = f"nominal: {result.nominal_label or 'infeasible'}; draws chose {share}"
    return t


def render_tornado_table(bars: list[TornadoBar]) -> Table:
    """A rich table of tornado bars, largest swing first."""
    from rich.table import Table

    nominal = bars[0].nominal_cost_usd if bars else math.nan
    t = Table(title=f"Cost sensitivity (one at a time, P10 / P90); nominal {_fmt('cost_usd', nominal)}")
    for col, just in (
        ("parameter", "left"),
        ("P10", "right"),
        ("P90", "right"),
        ("cost at P10", "right"),
        ("cost at P90", "right"),
        ("swing", "right"),
    ):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for b in bars:
        t.add_row(
            b.name,
            b.low_label,
            b.high_label,
            _fmt("cost_usd", b.cost_at_low_usd),
            _fmt("cost_usd", b.cost_at_high_usd),
            _fmt("cost_usd", b.swing_usd) if math.isfinite(b.swing_usd) else "inf",
        )
    return t


def _plot(bars: list[TornadoBar], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nominal = bars[0].nominal_cost_usd / 1e6
    shown = [b for b in bars if math.isfinite(b.cost_high_usd)][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(shown) + 1.5))
    for i, b in enumerate(shown):
        lo, hi = b.cost_at_low_usd / 1e6, b.cost_at_high_usd / 1e6
        ax.barh(i, lo - nominal, left=nominal, color="tab:blue", alpha=0.8, label="P10" if i == 0 else None)
        ax.barh(i, hi - nominal, left=nominal, color="tab:orange", alpha=0.8, label="P90" if i == 0 else None)
    ax.axvline(nominal, color="black", lw=1)
    ax.set_yticks(range(len(shown)), [b.name for b in shown])
    ax.set_xlabel("cost (million USD)")
    ax.set_title(title)
    ax.legend(loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    save_figure(fig, path)


def register(app: typer.Typer) -> None:
    """Add the ``tornado`` command to the root app."""

    @app.command("tornado", epilog=_EPILOG)
    @guarded
    def tornado_cmd(
        target: Annotated[str, typer.Option(help="Compute target, e.g. 1e25.")] = "1e25",
        mode: Annotated[str, typer.Option(help="default or paper.")] = "default",
        regime: Annotated[
            str, typer.Option(help="Regime whose covered-cluster rule nodes stay under.")
        ] = "treaty",
        bandwidth: Annotated[
            str, typer.Option(help="WAN bandwidth per node (up = down), e.g. 100Mbps.")
        ] = "100Mbps",
        latency_text: Annotated[
            str, typer.Option("--latency", help="One-way WAN latency, e.g. 100ms.")
        ] = "100ms",
        days: Annotated[float, typer.Option(help="Time budget in days.")] = 740.0,
        hardware: Annotated[
            str, typer.Option(help="Comma-separated accelerators to consider (default: the mode's list).")
        ] = "",
        plot: Annotated[str | None, typer.Option(help="Write the tornado chart to this PNG.")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Tornado: the plan's cost with each uncertain input at its P10 and P90, the others nominal.

        Each end is a full re-plan; distributions and sources are in dispersal/data/uncertainty.toml.
        """
        from dispersal.model.analyses.uncertainty import tornado
        from dispersal.model.inputs.catalog import accelerator
        from dispersal.model.inputs.catalog import regime as lookup_regime
        from dispersal.model.inputs.scenario import Mode
        from dispersal.model.search.planner import Constraints

        target_flop = flop_target(target, "target")
        days_in(days, "days")
        try:
            m = Mode(mode)
        except ValueError:
            raise InputError("mode", f"must be default or paper, got {mode!r}") from None
        lookup_regime(regime, "regime")
        up, down = link_rates(bandwidth, "bandwidth")
        if up != down:
            raise InputError("bandwidth", f"one rate (up = down) here, got {bandwidth!r}")
        bw = up
        names = tuple(h.strip() for h in hardware.split(","))
        if hardware.strip() and not all(names):
            raise InputError("hardware", f"empty name in {hardware!r} (comma-separated accelerators)")
        for name in names if hardware.strip() else ():
            accelerator(name, "hardware")
        plot_path = output_file(plot, "plot", (".png",)) if plot is not None else None
        c = Constraints(
            bandwidth_up_bits_per_s=bw,
            bandwidth_down_bits_per_s=bw,
            latency_s=latency(latency_text, "latency"),
            max_duration_s=days * units.SECONDS_PER_DAY,
            hardware=names if hardware.strip() else (),
        )
        if json_out:
            bars = tornado(target_flop, regime_name=regime, constraints=c, mode=m)
        else:
            from rich.progress import Progress

            with Progress(transient=True) as bar:
                task = bar.add_task("re-planning", total=None)

                def tick(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                bars = tornado(target_flop, regime_name=regime, constraints=c, mode=m, progress=tick)
        if plot_path is not None and bars:
            _plot(
                bars,
                plot_path,
                f"Cost sensitivity, {target_flop:.3g} FLOP, {regime}, {units.format_bandwidth(bw)}",
            )
        if json_out:
            out: dict[str, Any] = {
                "target_flop": target_flop,
                "regime": regime,
                "mode": m.value,
                "nominal_cost_usd": bars[0].nominal_cost_usd if bars else None,
                "bars": [b.to_dict() for b in bars],
            }
            print_json(out)
            return
        from dispersal.cli._render import console

        console().print(render_tornado_table(bars))
        if plot_path is not None:
            typer.echo(f"wrote {plot_path}")
