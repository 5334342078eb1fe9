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
    MAX_COMPRESSION,
    MAX_NODES,
    atomic_write_bytes,
    atomic_write_text,
    days_in,
    default_out,
    flop_target,
    guarded,
    latency,
    link_rates,
    number_in,
    output_file,
    print_json,
    save_figure,
)
from dispersal.cli._groups import with_groups
from dispersal.cli._scenario import (
    SHORTCUT_FLAGS,
    ScenarioOptions,
    check_bounds,
    latency_of_distance,
)
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.scenario import Mode, Scenario, latency_from_distance
from dispersal.model.run.estimate import Estimate, estimate
from dispersal.model.search.planner import Constraints, plan

#: Sweepable inputs and how each value is parsed.
AXES = ("target", "bandwidth", "latency", "distance", "regime", "max_days", "compression", "mfu", "sites")


#: With --field: the sweep runs estimate() over Scenario fields (these aliases set several at once).
FIELD_AXIS_ALIASES = ("bandwidth", "distance")


def _parse_axis(text: str, option: str, allowed: tuple[str, ...] = AXES) -> tuple[str, list[str]]:
    """``NAME=v1,v2,...`` of --x / --y -> (NAME, values); errors name the option."""
    if "=" not in text:
        raise InputError(option, f"expected NAME=v1,v2,... with NAME in {', '.join(allowed)}, got {text!r}")
    name, values = text.split("=", 1)
    name = name.strip()
    if name not in allowed:
        raise InputError(option, f"unknown sweep input {name!r} (use {', '.join(allowed)})")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not vals:
        raise InputError(option, f"{name} needs at least one value")
    if len(vals) > 200:
        raise InputError(option, f"at most 200 values, got {len(vals)}")
    return name, vals


def _check_values(option: str, name: str, values: list[str], check: Any) -> None:
    """Run check({name: value}) on every value first, so a bad one fails before any work."""
    for v in values:
        try:
            check({name: v})
        except InputError as exc:
            raise InputError(option, f"{name}={v}: {exc}") from None


def _number(text: str, field: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(field, f"not a number: {text!r}") from None


def _apply(point: dict[str, str], base: dict[str, Any]) -> tuple[float, str, Constraints]:
    """One grid point -> (target FLOP, regime, Constraints); every value range-checked."""
    from dispersal.model.inputs.catalog import regime as lookup_regime

    target = flop_target(point.get("target", "1e25"), "target")
    regime = lookup_regime(point.get("regime", base["regime"]), "regime").name
    kw: dict[str, Any] = {}
    if "bandwidth" in point:
        up, down = link_rates(point["bandwidth"], "bandwidth")
        kw.update(bandwidth_up_bits_per_s=up, bandwidth_down_bits_per_s=down)
    if "latency" in point:
        kw["latency_s"] = latency(point["latency"], "latency")
    if "distance" in point:
        kw["latency_s"] = latency_of_distance(point["distance"])
    if "max_days" in point:
        kw["max_duration_s"] = (
            days_in(_number(point["max_days"], "max_days"), "max_days") * units.SECONDS_PER_DAY
        )
    if "compression" in point:
        kw["compression_ratio"] = number_in(
            _number(point["compression"], "compression"), "compression", 1, MAX_COMPRESSION
        )
    if "mfu" in point:
        kw["mfu"] = number_in(_number(point["mfu"], "mfu"), "mfu", 0, 1, lo_open=True)
    if "sites" in point:
        # The most separate sites (nodes) the evader can run: how far the run may spread.
        sites = number_in(_number(point["sites"], "sites"), "sites", 1, MAX_NODES)
        if sites != int(sites):
            raise InputError("sites", f"must be a whole number, got {point['sites']!r}")
        kw["max_nodes"] = int(sites)
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
    return check_bounds(Scenario.from_dict(data))


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
@with_groups
def sweep_cmd(
    sc: ScenarioOptions,
    x: Annotated[
        str,
        typer.Option(
            "--x",
            help="First input: NAME=v1,v2,... (target, bandwidth, latency, distance, regime, max_days, compression, mfu, sites).",
        ),
    ] = "target=1e24,3e24,1e25,3e25,1e26",
    y: Annotated[str, typer.Option("--y", help="Second input, same form.")] = "regime=treaty,treaty_hbm",
    search: Annotated[str | None, typer.Option(help="bisect or exact.")] = None,
    metric: Annotated[str | None, typer.Option(help="c_local or c_quality.")] = None,
    out: Annotated[
        str | None,
        typer.Option(
            help="CSV (.csv) or Parquet (.parquet, needs pyarrow) file (default: dispersal-output/sweep/sweep.csv)."
        ),
    ] = None,
    plot: Annotated[
        str | None,
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
) -> None:
    """Run the planner over a grid of two inputs (default: target FLOP x regime) and plot cost to evade;
    with --field, chart any Estimate figure over two Scenario fields of the scenario the shared options
    describe (the planner sweep takes only --regime and --mode of them: the regime when not swept,
    default treaty)."""
    m = sc.model_mode()
    if search is not None and search not in ("bisect", "exact"):
        raise InputError("search", f"must be bisect or exact, got {search!r}")
    if metric is not None and metric not in ("c_local", "c_quality"):
        raise InputError("metric", f"must be c_local or c_quality, got {metric!r}")
    out_path = output_file(
        out if out is not None else default_out("sweep") / "sweep.csv", "out", (".csv", ".parquet")
    )
    plot_path = (
        None
        if no_plot
        else output_file(plot if plot is not None else out_path.with_name("sweep.png"), "plot", (".png",))
    )

    if field is not None:
        if not field.strip():
            raise InputError("field", "empty; name an Estimate figure, e.g. utilisation")
        _field_sweep(field, sc.build(), x, y, m, out_path, plot_path, json_)
        return
    flags = {k: getattr(sc, k) for k in SHORTCUT_FLAGS if k != "regime"}
    flags.update(scenario=sc.scenario, set=sc.set_)
    given = [k for k, v in flags.items() if v]
    if given:
        raise InputError(
            given[0], "is a scenario flag: it applies with --field only (the planner sweep takes --x / --y)"
        )
    _sweep_plans(
        x, y, "treaty" if sc.regime is None else sc.regime, m, search, metric, out_path, plot_path, json_
    )


def _sweep_plans(
    x: str,
    y: str,
    regime: str,
    m: Mode,
    search: str | None,
    metric: str | None,
    out: Path,
    plot: Path | None,
    json_: bool,
) -> None:
    """The planner over the grid (every point checked before the first plan)."""
    xn, xv = _parse_axis(x, "x")
    yn, yv = _parse_axis(y, "y")
    if xn == yn:
        raise InputError("y", f"must differ from --x ({xn})")
    from dispersal.model.inputs.catalog import regime as lookup_regime

    lookup_regime(regime, "regime")
    _check_values("x", xn, xv, lambda p: _apply(p, {"regime": regime}))
    _check_values("y", yn, yv, lambda p: _apply(p, {"regime": regime}))
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
    _write_rows(rows, out)
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


#: Scenario fields that are not numbers or choices to sweep: bookkeeping and the [[site]] / [[churn]] tables.
_NOT_SWEPT = frozenset({"schema_version", "name", "sites", "churn"})


def _field_sweep(
    field: str, base: Scenario, x: str, y: str, m: Mode, out: Path, plot: Path | None, json_: bool
) -> None:
    """estimate() over a grid of two Scenario fields, charting one Estimate figure."""
    allowed = (
        *FIELD_AXIS_ALIASES,
        *(f.name for f in dataclasses.fields(Scenario) if f.name not in _NOT_SWEPT),
    )
    xn, xv = _parse_axis(x, "x", allowed)
    yn, yv = _parse_axis(y, "y", allowed)
    if xn == yn:
        raise InputError("y", f"must differ from --x ({xn})")
    _check_values("x", xn, xv, lambda p: _scenario_at(base, p))
    _check_values("y", yn, yv, lambda p: _scenario_at(base, p))
    estimate_field(estimate(base, mode=m), field)  # an unknown figure fails before the grid runs
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
