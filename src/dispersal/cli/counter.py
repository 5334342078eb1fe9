"""`dispersal counter`: countermeasure levers and bundles, the evader's cheapest adapted run, P(detect)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from dispersal.cli._common import (
    days_in,
    flop_target,
    guarded,
    input_file,
    link_rates,
    output_file,
    print_json,
)
from dispersal.cli._common import (
    latency as parse_latency,
)
from dispersal.cli._groups import with_groups
from dispersal.present.formats import money_or as _fmt_money

_EPILOG = (
    "JSON: a list of rows, the no-lever baseline first. Keys: lever (bundle name), levers, feasible, "
    "cost_usd, cost_multiple, nodes, p_detect, expected_detection_day (mean day given detection before "
    "completion), hardware, chips_per_node, params, algorithm, days, regime, bandwidth_bits_per_s, "
    "lines_per_site, traffic (bytes_per_day, mean_mbps, peak_mbps, burst_period_s, duty_cycle), detection "
    "(channels), collateral, convention. Non-finite numbers are null. Exit 0 = computed, 2 = bad input."
)


def _plot(rows: list[Any], path: Path, title: str) -> None:
    """The app's countermeasures figure (numbered points, as in the table's order), as PNG."""
    from dispersal.present import figures

    chart = figures.countermeasures_figure([o.to_dict() for o in rows])
    chart.figure.axes[0].set_title(title, fontsize=figures.FONT - 1)
    figures.save_png(chart, path)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConventionOptions:
    """The countermeasures convention (``countermeasures.Convention``) as one option group
    (cli._groups): the defaults are the app's "report" convention."""

    mode: Annotated[
        str,
        typer.Option(help="paper or default (model mode of the planner); the shared convention: paper."),
    ] = "paper"
    regime: Annotated[str, typer.Option(help="Baseline regime the levers tighten.")] = "treaty"
    bandwidth: Annotated[str, typer.Option(help="Evader's link per site before any cap.")] = "100Mbps"
    latency: Annotated[str, typer.Option(help="One-way WAN latency.")] = "100ms"
    days: Annotated[
        float,
        typer.Option(help="Time window, days (the shared convention: 548, the report's 1.5 years)."),
    ] = 548.0
    metric: Annotated[str, typer.Option(help="c_quality (report convention) or c_local.")] = "c_quality"
    search: Annotated[
        str, typer.Option(help="exact (the shared convention) or bisect: the evader's node-count search.")
    ] = "exact"
    capex: Annotated[
        bool,
        typer.Option("--capex/--chip-only", help="Cost with the paper's capex multiplier, or chips only."),
    ] = False

    def rate_bits_per_s(self) -> float:
        """Checks --days, --regime and --bandwidth (one rate per site, up = down); the rate."""
        from dispersal.model.inputs.catalog import regime as lookup_regime
        from dispersal.model.inputs.errors import InputError

        days_in(self.days, "days")
        lookup_regime(self.regime, "regime")
        up, down = link_rates(self.bandwidth, "bandwidth")
        if up != down:
            raise InputError("bandwidth", f"one rate per site here (up = down), got {self.bandwidth!r}")
        return up

    def convention(self, rate_bits_per_s: float, **extra: Any) -> Any:
        """The Convention these options describe (extra: e.g. calibrated ``params``)."""
        from dispersal.model.analyses.countermeasures import Convention

        return Convention(
            mode=self.mode,
            metric=self.metric,
            days=self.days,
            bandwidth_bits_per_s=rate_bits_per_s,
            latency_s=parse_latency(self.latency, "latency"),
            chip_only=not self.capex,
            search=self.search,
            base_regime=self.regime,
            **extra,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeverOptions:
    """Which levers and bundles `counter` prices, and the detection defaults it overrides
    (cli._groups)."""

    lever: Annotated[
        list[str] | None, typer.Option("--lever", help="A lever (repeatable); default: every lever.")
    ] = None
    bundle: Annotated[
        list[str] | None, typer.Option("--bundle", help="Levers joined by '+' (repeatable).")
    ] = None
    set_param: Annotated[
        list[str] | None,
        typer.Option(
            "--detection",
            help="Override a detection default (data/detection.toml), NAME=VALUE (repeatable). "
            "(--set is kept for scenario fields, as in estimate and report.)",
        ),
    ] = None

    def detection_params(self) -> Any:
        """The detection defaults with each --detection NAME=VALUE applied (finite numbers only)."""
        from dispersal.model.analyses.detection import default_detection_params
        from dispersal.model.inputs.errors import InputError

        overrides: dict[str, float] = {}
        for item in self.set_param or []:
            if "=" not in item:
                raise InputError("detection", f"expected NAME=VALUE, got {item!r}")
            k, v = item.split("=", 1)
            try:
                overrides[k.strip()] = float(v)
            except ValueError:
                raise InputError("detection", f"{k.strip()}: not a number: {v!r}") from None
            if not math.isfinite(overrides[k.strip()]):
                raise InputError("detection", f"{k.strip()}: must be a finite number, got {v!r}")
        return default_detection_params().replace(**overrides)

    def wanted(self) -> list[str]:
        """The bundle names asked for (each --lever, then each --bundle); none: every lever and the
        default bundles."""
        from dispersal.model.analyses.countermeasures import default_bundles, levers, parse_bundle
        from dispersal.model.inputs.errors import InputError

        wanted: list[str] = []
        for option, names in (("lever", self.lever or []), ("bundle", self.bundle or [])):
            for name in names:
                if not name.strip():
                    raise InputError(option, "empty name; `dispersal counter --help` lists the levers")
                if option == "lever" and "+" in name:
                    raise InputError(
                        "lever", f"one lever per --lever; join levers with + in --bundle, got {name!r}"
                    )
                try:
                    wanted.append(parse_bundle(name).name)
                except InputError as exc:
                    raise InputError(option, str(exc)) from None
        return wanted or [*levers(), *default_bundles()]


def register(app: typer.Typer) -> None:
    """Add the ``counter`` command to the root app."""

    @app.command("counter", epilog=_EPILOG)
    @guarded
    @with_groups
    def counter(
        *,
        target: Annotated[str, typer.Option(help="Compute target, FLOP (e.g. 1e25).")] = "1e25",
        convention: ConventionOptions,
        asked: LeverOptions,
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
        markdown: Annotated[
            bool, typer.Option("--markdown", help="Print the table as markdown (as docs/countermeasures.md).")
        ] = False,
        plot: Annotated[str | None, typer.Option(help="Save evader cost vs P(detect) as PNG.")] = None,
        calibration: Annotated[
            str | None,
            typer.Option(help="Calibration TOML (dispersal calibrate) replacing model parameters."),
        ] = None,
    ) -> None:
        """Each countermeasure lever and bundle: the evader's cheapest adapted run and P(detect).

        Defaults are the one convention the app's Countermeasures tab uses too (its "report" convention,
        `countermeasures.Convention()`): paper mode, C_quality target, 548-day window, chip-only cost,
        exact search, 100 Mbps / 100 ms links, treaty baseline; the app's "this scenario" convention is
        --mode, --days, --bandwidth and --latency set to the scenario's values.
        """
        from dispersal.calibration import load_calibration
        from dispersal.model.analyses.countermeasures import analyse
        from dispersal.model.inputs import units

        tgt = flop_target(target, "target")
        rate = convention.rate_bits_per_s()
        plot_path = output_file(plot, "plot", (".png",)) if plot is not None else None
        conv_kw: dict[str, Any] = (
            {"params": load_calibration(input_file(calibration, "calibration"))}
            if calibration is not None
            else {}
        )
        conv = convention.convention(rate, **conv_kw)
        dp = asked.detection_params()
        wanted = asked.wanted()
        rows = analyse(tgt, wanted, convention=conv, detection_params=dp)
        if plot_path is not None:
            _plot(rows, plot_path, f"{units.format_flop(tgt)} under {conv.base_regime}: {conv.describe()}")
        if json_out:
            print_json([o.to_dict() for o in rows])
            return
        if markdown:
            print(markdown_table(rows))
            return
        from rich.table import Table

        from dispersal.cli._render import console

        t = Table(
            title=f"dispersal counter: {units.format_flop(tgt)} {conv.metric}, evader re-plans under each lever",
            caption=f"Convention: {conv.describe()}. Detection day: mean given detection before completion.",
        )
        for col in COLUMNS:
            t.add_column(col, justify="left" if col in ("lever / bundle", "node", "collateral") else "right")
        for o in rows:
            t.add_row(*table_row(o))
        console().print(t)


COLUMNS = (
    "lever / bundle",
    "evader cost",
    "x no lever",
    "nodes",
    "node",
    "model",
    "mean Mbps/site",
    "P(detect)",
    "det. day",
    "collateral",
)


def money_millions(v: float) -> str:
    """Dollars in millions: 0.1 M steps from $10M up, 0.01 M below ($0.68M, $14.7M, $2,144.1M)."""
    return f"${v / 1e6:,.1f}M" if v >= 1e7 else f"${v / 1e6:,.2f}M"


def table_row(o: Any, exact: bool = False) -> tuple[str, ...]:
    """One countermeasure Outcome as the table's cells (infeasible rows keep only their collateral).

    exact: money in $M to 0.1 and collateral as full counts (the markdown form), not rounded."""
    name = o.bundle.replace("+", " + ")
    coll = o.collateral.long() if exact else o.collateral.short()
    if not o.feasible:
        return (name, "infeasible", "-", "-", "-", "-", "-", "-", "-", coll)
    day = o.expected_detection_day
    return (
        name,
        money_millions(o.cost_usd) if exact else _fmt_money(o.cost_usd),
        f"{o.cost_multiple:.2f}",
        f"{o.nodes:,}",
        f"{o.chips_per_node}x {o.hardware} {o.precision}",
        f"{o.params / 1e9:.0f}B",
        f"{o.traffic.mean_mbps:.1f}" if o.traffic else "-",
        f"{o.p_detect:.3f}",
        f"{day:.0f}" if math.isfinite(day) else "-",
        coll,
    )


def markdown_table(rows: list[Any]) -> str:
    """The counter table as GitHub markdown (the form docs/countermeasures.md quotes)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(table_row(o, exact=True)) + " |" for o in rows]
    return "\n".join(lines)
