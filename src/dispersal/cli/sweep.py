"""`dispersal sweep`: the planner over a grid of two inputs, to CSV (or Parquet) and a PNG plot."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from dispersal.cli._common import (
    atomic_write_bytes,
    atomic_write_text,
    default_out,
    guarded,
    print_json,
    save_figure,
)
from dispersal.cli.estimate import check_mode
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.scenario import Mode, Scenario, latency_from_distance
from dispersal.model.kernel.estimate import Estimate, estimate
from dispersal.model.search.planner import Constraints, plan

#: Sweepable inputs and how each value is parsed.
AXES = ("target", "bandwidth", "latency", "distance", "regime", "max_days", "compression", "mfu", "sites")


#: With --field: the sweep runs estimate() over Scenario fields (these aliases set several at once).
FIELD_AXIS_ALIASES = ("bandwidth", "distance")


def _parse_axis(text: str, allowed: tuple[str, ...] = AXES) -> tuple[str, list[str]]:
    if "=" not in text:
        raise InputError("axis", f"expected NAME=v1,v2,... with NAME in {', '.join(allowed)}, got {text!r}")
    name, values = text.split("=", 1)
    name = name.strip()
    if name not in allowed:
        raise InputError("axis", f"unknown sweep input {name!r} (use {', '.join(allowed)})")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not vals:
        raise InputError(name, "needs at least one value")
    if len(vals) > 200:
        raise InputError(name, f"at most 200 values, got {len(vals)}")
    return name, vals


def _apply(point: dict[str, str], base: dict[str, Any]) -> tuple[float, str, Constraints]:
    target = units.parse_flop(point.get("target", "1e25"), "target")
    regime = point.get("regime", base["regime"])
    kw: dict[str, Any] = {}
    if "bandwidth" in point:
        up, down = units.parse_up_down(point["bandwidth"], "bandwidth")
        kw.update(bandwidth_up_bits_per_s=up, bandwidth_down_bits_per_s=down)
    if "latency" in point:
        kw["latency_s"] = units.parse_duration(point["latency"], "latency")
    if "distance" in point:
        kw["latency_s"] = latency_from_distance(units.parse_distance(point["distance"], "distance"))
    if "max_days" in point:
        kw["max_duration_s"] = float(point["max_days"]) * units.SECONDS_PER_DAY
    if "compression" in point:
        kw["compression_ratio"] = float(point["compression"])
    if "mfu" in point:
        kw["mfu"] = float(point["mfu"])
    if "sites" in point:
        # The most separate sites (nodes) the evader can run: how far the run may spread.
        kw["max_nodes"] = int(float(point["sites"]))
    return target, regime, Constraints(**kw)


def _scenario_at(base: Scenario, point: dict[str, str]) -> Scenario:
    """The base scenario with the grid point's values (Scenario fields, units parsed)."""
    data = base.to_dict()
    for name, value in point.items():
        if name == "bandwidth":
            up, down = units.parse_up_down(value, "bandwidth")
            data.update(bandwidth_up_bits_per_s=up, bandwidth_down_bits_per_s=down)
        elif name == "distance":
            data["latency_s"] = latency_from_distance(units.parse_distance(value, "distance"))
        else:
            data[name] = value
    return Scenario.from_dict(data)


def estimate_field(e: Estimate, field: str) -> float:
    """An Estimate figure by name; nested ones as ``traffic.mean_mbps``, ``cost.total_usd``."""
    obj: Any = e
    for part in field.split("."):
        if not hasattr(obj, part):
            raise InputError(
                "field",
                f"Estimate has no figure {field!r} (e.g. utilisation, days, "
                "c_local_flop, cost.total_usd, traffic.mean_mbps, efficiency.eta)",
            )
        obj = getattr(obj, part)
    if isinstance(obj, bool) or not isinstance(obj, int | float):
        raise InputError("field", f"{field!r} is not a number")
    return float(obj)


@guarded
def sweep_cmd(
    x: Annotated[
        str,
        typer.Option(
            "--x",
            help="First input: NAME=v1,v2,... (target, bandwidth, latency, distance, regime, max_days, compression, mfu, sites).",
        ),
    ] = "target=1e24,3e24,1e25,3e25,1e26",
    y: Annotated[str, typer.Option("--y", help="Second input, same form.")] = "regime=treaty,treaty_hbm",
    regime: Annotated[str, typer.Option(help="Regime when not swept.")] = "treaty",
    mode: Annotated[str, typer.Option(help="paper or default.")] = "default",
    search: Annotated[str | None, typer.Option(help="bisect or exact.")] = None,
    metric: Annotated[str | None, typer.Option(help="c_local or c_quality.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="CSV (.csv) or Parquet (.parquet, needs pyarrow) file (default: dispersal-output/sweep/sweep.csv)."
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="PNG: cost to evade against the first input, one line per second-input value (default: beside --out as sweep.png)."
        ),
    ] = None,
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Do not write the PNG.")] = False,
    json_: Annotated[
        bool,
        typer.Option(
            "--json", help='Print {"out": ..., "plot": ..., "rows": [...]} as JSON (non-finite numbers null).'
        ),
    ] = False,
    field: Annotated[
        str | None,
        typer.Option(
            help="Chart this Estimate figure (e.g. utilisation, days, cost.total_usd, traffic.mean_mbps) over Scenario fields instead of the planner's cost; --x / --y then name Scenario fields (or bandwidth, distance)."
        ),
    ] = None,
    scenario: Annotated[
        str, typer.Option(help="With --field: preset name or TOML file of the base scenario.")
    ] = "paper_threat_model",
) -> None:
    """Run the planner over a grid of two inputs (default: target FLOP x regime) and plot cost to evade;
    with --field, chart any Estimate figure over two Scenario fields."""
    m = check_mode(mode)
    out = out if out is not None else default_out("sweep") / "sweep.csv"
    plot = None if no_plot else (plot if plot is not None else out.with_name("sweep.png"))
    if field is not None:
        _field_sweep(field, scenario, x, y, m, out, plot, json_)
        return
    xn, xv = _parse_axis(x)
    yn, yv = _parse_axis(y)
    if xn == yn:
        raise InputError("y", f"must differ from --x ({xn})")
    if out.suffix not in (".csv", ".parquet"):
        raise InputError("out", f"must end in .csv or .parquet, got {out.name!r}")
    rows: list[dict[str, Any]] = []
    from rich.progress import Progress

    with Progress(transient=True, disable=json_) as prog:
        task = prog.add_task("sweep", total=len(xv) * len(yv))
        for a in xv:
            for b in yv:
                target, reg, c = _apply({xn: a, yn: b}, {"regime": regime})
                p = plan(target, regime_name=reg, constraints=c, mode=m, search=search, metric=metric)
                best = p.best
                rows.append(
                    {
                        xn: a,
                        yn: b,
                        "feasible": p.feasible,
                        "target_flop": target,
                        "regime": reg,
                        "cost_usd": best.cost_usd if best else math.nan,
                        "nodes": best.nodes if best else 0,
                        "hardware": best.label if best else "",
                        "algorithm": best.algorithm if best else "",
                        "params": best.params if best else math.nan,
                        "c_quality_flop": best.c_quality_flop if best else math.nan,
                        "mean_wan_mbps_per_node": best.mean_wan_mbps_per_node if best else math.nan,
                        "reason": "; ".join(p.reasons),
                    }
                )
                prog.advance(task)
    if out.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError("out", "Parquet needs pyarrow: pip install pyarrow (or write .csv)") from None
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buf)
        atomic_write_bytes(out, buf.getvalue())
    else:
        sio = io.StringIO()
        w = csv.DictWriter(sio, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        atomic_write_text(out, sio.getvalue())
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        numeric = xn != "regime"
        for b in yv:
            pts = [r for r in rows if r[yn] == b]
            xs: list[Any] = [units.parse_flop(r[xn]) if xn == "target" else r[xn] for r in pts]
            ax.plot(xs, [r["cost_usd"] for r in pts], "o-", label=f"{yn} = {b}")
        if xn == "target":
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xn + (" (FLOP)" if xn == "target" else ""))
        ax.set_ylabel("cost to evade (USD)")
        ax.set_title(f"Cheapest sub-threshold plan ({m.value} mode)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        if not numeric:
            ax.tick_params(axis="x", rotation=30)
        save_figure(fig, plot)
    if json_:
        print_json({"out": str(out), "plot": str(plot) if plot else None, "rows": rows})
        return
    typer.echo(f"wrote {out}" + (f" and {plot}" if plot else "") + f" ({len(rows)} plans)")


def _write_rows(rows: list[dict[str, Any]], out: Path) -> None:
    if out.suffix not in (".csv", ".parquet"):
        raise InputError("out", f"must end in .csv or .parquet, got {out.name!r}")
    if out.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError("out", "Parquet needs pyarrow: pip install pyarrow (or write .csv)") from None
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buf)
        atomic_write_bytes(out, buf.getvalue())
        return
    sio = io.StringIO()
    w = csv.DictWriter(sio, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(out, sio.getvalue())


def _field_sweep(
    field: str, scenario: str, x: str, y: str, m: Mode, out: Path, plot: Path | None, json_: bool
) -> None:
    """estimate() over a grid of two Scenario fields, charting one Estimate figure."""
    from dispersal.model.inputs.presets import load_scenario

    base = load_scenario(scenario)
    allowed = (*FIELD_AXIS_ALIASES, *(f.name for f in dataclasses.fields(Scenario)))
    xn, xv = _parse_axis(x, allowed)
    yn, yv = _parse_axis(y, allowed)
    if xn == yn:
        raise InputError("y", f"must differ from --x ({xn})")
    rows: list[dict[str, Any]] = []
    for a in xv:
        for b in yv:
            e = estimate(_scenario_at(base, {xn: a, yn: b}), mode=m)
            rows.append(
                {
                    xn: a,
                    yn: b,
                    "feasible": e.feasible,
                    field: estimate_field(e, field),
                    "reason": "; ".join(e.reasons),
                }
            )
    _write_rows(rows, out)
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for b in yv:
            pts = [r for r in rows if r[yn] == b]
            key = {"bandwidth": "bandwidth_up_bits_per_s", "distance": "latency_s"}.get(xn, xn)
            try:
                xs: list[Any] = [float(_scenario_at(base, {xn: r[xn]}).to_dict()[key]) for r in pts]
            except (TypeError, ValueError):
                xs = [r[xn] for r in pts]  # a categorical input (hardware, algorithm, ...)
            ax.plot(xs, [r[field] for r in pts], "o-", label=f"{yn} = {b}")
        ax.set_xlabel(
            {"bandwidth": "WAN upload (bit/s)", "distance": "one-way latency from distance (s)"}.get(xn, xn)
        )
        if xn in ("bandwidth", "bandwidth_up_bits_per_s", "bandwidth_down_bits_per_s"):
            ax.set_xscale("log")
        ax.set_ylabel(field)
        ax.set_title(f"{field} over {xn} ({m.value} mode, {base.name})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        save_figure(fig, plot)
    if json_:
        print_json({"out": str(out), "plot": str(plot) if plot else None, "rows": rows})
        return
    typer.echo(f"wrote {out}" + (f" and {plot}" if plot else "") + f" ({len(rows)} estimates)")


def register(app: typer.Typer) -> None:
    """Add `sweep` to the root app."""
    app.command("sweep")(sweep_cmd)
