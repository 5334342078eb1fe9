"""`dispersal plan`: the cheapest configuration reaching a compute target under a regime."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dispersal.cli._common import (
    MAX_COMPRESSION,
    MAX_NODES,
    MAX_SAMPLES,
    MAX_SEED,
    days_in,
    field_help,
    flop_target,
    guarded,
    input_file,
    link_rates,
    number_in,
    print_json,
    read_toml,
)
from dispersal.cli._common import (
    latency as parse_latency,
)
from dispersal.cli._scenario import check_mode
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.model.search.planner import Constraints, Plan, plan

DEFAULT_TARGETS = (1e24, 1e25, 1e26)


def build_constraints(
    *,
    bandwidth: str,
    latency: str | None,
    distance: str | None,
    max_days: float,
    hardware: list[str] | None,
    max_nodes: int,
    compression: float,
    mfu: float | None,
    straggler: str,
    max_cost: str | None,
    algorithms: str | None = None,
) -> Constraints:
    """Flags -> Constraints (units parsed and range-checked, latency from distance when given)."""
    up, down = link_rates(bandwidth, "bandwidth")
    if latency is not None and distance is not None:
        raise InputError("latency", "give --latency or --distance, not both")
    if distance is not None:
        from dispersal.cli._scenario import latency_of_distance

        lat = latency_of_distance(distance)
    else:
        lat = parse_latency(latency if latency is not None else "100ms", "latency")
    days_in(max_days, "max_days")
    number_in(compression, "compression", 1, MAX_COMPRESSION)
    if mfu is not None:
        number_in(mfu, "mfu", 0, 1, lo_open=True)
    budget = math.inf
    if max_cost is not None:
        budget = number_in(
            units.parse_money(max_cost, "max_cost"), "max_cost", 0, 1e18, lo_open=True, unit="USD"
        )
    return Constraints(
        bandwidth_up_bits_per_s=up,
        bandwidth_down_bits_per_s=down,
        latency_s=lat,
        max_duration_s=max_days * units.SECONDS_PER_DAY,
        hardware=tuple(hardware or ()),
        max_nodes=max_nodes,
        compression_ratio=compression,
        mfu=mfu,
        straggler=straggler,
        max_cost_usd=budget,
        algorithms=tuple(a.strip() for a in algorithms.split(",")) if algorithms else (),
    )


def plan_table(plans: list[Plan]) -> Table:
    """One row per target: the best plan's key figures (and the centralized premium when planned)."""
    t = Table(
        title=f"dispersal plan ({plans[0].mode} mode, {plans[0].search} search, metric {plans[0].metric}, "
        f"regime {plans[0].regime})"
    )
    for col in (
        "target",
        "hardware",
        "chips/node",
        "nodes",
        "algorithm",
        "model",
        "tokens",
        "H",
        "days",
        "cost",
        "C_local",
        "C_quality",
        "eta",
        "chi",
        "WAN Mbps mean/peak",
        "centralized",
        "premium",
    ):
        t.add_column(col, justify="right")
    for p in plans:
        b = p.best
        if b is None:
            t.add_row(
                f"{p.target_flop:.3g}",
                "[red]infeasible[/]",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "reasons below",
                "",
                "",
            )
            continue
        algo = b.algorithm + (
            f" {b.group_size}x{b.nodes // max(b.group_size, 1)}"
            if b.algorithm == "hierarchical"
            else f" {b.pipeline_stages}x{b.groups}"
            if b.algorithm == "pp_diloco"
            else ""
        )
        t.add_row(
            f"{p.target_flop:.3g}",
            f"{b.hardware} {b.precision}",
            str(b.chips_per_node),
            f"{b.nodes:,}",
            algo,
            units.format_count(b.params),
            units.format_count(b.tokens),
            str(b.inner_steps),
            f"{b.days:.4g}",
            units.format_money(b.cost_usd),
            f"{b.c_local_flop:.3g}",
            f"{b.c_quality_flop:.3g}",
            f"{b.efficiency['eta']:.4f}",
            f"{b.efficiency['chi']:.4f}",
            f"{b.mean_wan_mbps_per_node:.3g} / {b.peak_wan_mbps_per_node:.3g}",
            units.format_money(p.centralized_cost_usd) if p.centralized_cost_usd is not None else "-",
            f"{p.cost_premium:.2f}x" if p.cost_premium is not None else "-",
        )
    return t


def runners_up_table(p: Plan) -> Table:
    """The best option of each hardware type, and why the others failed."""
    t = Table(title=f"runners-up for {p.target_flop:.3g} FLOP")
    for col in ("hardware", "nodes", "algorithm", "model", "cost", "C_quality"):
        # the algorithm column also carries why a node type failed: wrapped, never cut
        t.add_column(col, justify="left" if col == "algorithm" else "right", overflow="fold")
    for o in p.per_hardware:
        t.add_row(
            o.label,
            f"{o.nodes:,}",
            o.algorithm,
            units.format_count(o.params),
            units.format_money(o.cost_usd),
            f"{o.c_quality_flop:.3g}",
        )
    for k, why in p.failures.items():
        t.add_row(k, "-", "[dim]" + why + "[/]", "", "", "")
    return t


@guarded
def plan_cmd(
    target: Annotated[
        list[str] | None,
        typer.Option(help="Target compute, e.g. 1e25 (repeatable). Default: 1e24, 1e25, 1e26."),
    ] = None,
    metric: Annotated[
        str | None, typer.Option(help="c_local or c_quality (paper mode default c_local, else c_quality).")
    ] = None,
    regime: Annotated[str, typer.Option(help=field_help("regime"))] = "treaty",
    bandwidth: Annotated[
        str, typer.Option(help="WAN rate per node, e.g. 100Mbps or UP/DOWN 57Mbps/310Mbps.")
    ] = "100Mbps",
    latency: Annotated[str | None, typer.Option(help="One-way latency, e.g. 100ms (default).")] = None,
    distance: Annotated[
        str | None, typer.Option(help="Fibre distance instead of latency, e.g. 1000km.")
    ] = None,
    max_days: Annotated[float, typer.Option(help="Time budget in days (paper: 740).")] = 740.0,
    hardware: Annotated[
        list[str] | None, typer.Option(help="Restrict to these accelerators (repeatable).")
    ] = None,
    max_nodes: Annotated[
        int, typer.Option(help="Largest node count searched.", min=1, max=MAX_NODES)
    ] = 100_000,
    compression: Annotated[float, typer.Option(help="Pseudo-gradient compression ratio C_r.")] = 150.0,
    mfu: Annotated[
        float | None,
        typer.Option(
            help="Model FLOP utilisation (6 P FLOP/token); default: 0.40 in paper mode, the catalogue's per accelerator and precision in default mode."
        ),
    ] = None,
    straggler: Annotated[str, typer.Option(help=field_help("straggler"))] = "relay",
    max_cost: Annotated[
        str | None, typer.Option(help="Budget, e.g. 500M (binds the time objective).")
    ] = None,
    algorithms: Annotated[
        str | None,
        typer.Option(
            help="Search only these algorithm slots, comma-separated: auto (flat Streaming DiLoCo or "
            "PP-group), hierarchical, ddp, decoupled. Default: auto and hierarchical. Decoupled DiLoCo is "
            "searched only when named (default mode; e.g. auto,hierarchical,decoupled): the planner prices "
            "no failures, and without them it ties with Streaming DiLoCo."
        ),
    ] = None,
    objective: Annotated[str, typer.Option(help="cost, nodes or time.")] = "cost",
    search: Annotated[
        str | None, typer.Option(help="bisect (the paper's) or exact (default mode's default).")
    ] = None,
    mode: Annotated[str, typer.Option(help="paper or default.")] = "default",
    samples: Annotated[
        int,
        typer.Option(
            help="Monte Carlo samples of the uncertain parameters (0 = none).", min=0, max=MAX_SAMPLES
        ),
    ] = 0,
    seed: Annotated[int, typer.Option(help="Random seed for --samples.", min=0, max=MAX_SEED)] = 0,
    runners_up: Annotated[
        bool, typer.Option("--runners-up", help="Also show the best plan per hardware.")
    ] = False,
    baseline: Annotated[
        bool,
        typer.Option(
            help="Also plan the centralized baseline (one cluster, no rule, datacenter links) and report the cost premium."
        ),
    ] = True,
    json_: Annotated[
        bool, typer.Option("--json", help="JSON: always a list of plan objects, one per target.")
    ] = False,
    calibration: Annotated[
        str | None, typer.Option(help="Calibration TOML (dispersal calibrate) replacing model parameters.")
    ] = None,
    site_nodes: Annotated[
        list[int] | None,
        typer.Option(
            help="Also search site-pipeline DiLoCo with sites of this many nodes on a fast local fabric "
            "(repeatable, 2-10,000; a site counts as one cluster under the regime's rule)."
        ),
    ] = None,
    sites: Annotated[
        str | None,
        typer.Option(
            help="A scenario TOML with [\\[site]] tables (a fleet of site types): the smallest multiple of that "
            "mix reaching each target; its own hardware, links, model and days are used, the other flags "
            "except --target, --metric, --mode, --max-nodes and --json are not."
        ),
    ] = None,
) -> None:
    """Find the cheapest way to reach a compute target with every node under the regime's thresholds.

    With no flags: the paper's threat model (100 Mbps, 100 ms, 740 days, treaty) for 1e24, 1e25, 1e26.
    """
    m = check_mode(mode)
    # Repeatable, not a comma list: "1,5" must stay an error (a decimal comma), as the fuzz table says.
    targets = [flop_target(t, "target") for t in (target or [])] or list(DEFAULT_TARGETS)
    if sites is not None:
        _plan_sites(sites, targets, m, metric, max_nodes, json_)
        return
    c = build_constraints(
        bandwidth=bandwidth,
        latency=latency,
        distance=distance,
        max_days=max_days,
        hardware=hardware,
        max_nodes=max_nodes,
        compression=compression,
        mfu=mfu,
        straggler=straggler,
        max_cost=max_cost,
        algorithms=algorithms,
    )
    if site_nodes:
        c = c.replace(site_sizes=_site_sizes(site_nodes))
    extra = _calibration(calibration, samples)
    plans = [
        plan(
            t,
            regime_name=regime,
            constraints=c,
            mode=m,
            metric=metric,
            objective=objective,
            search=search,
            baseline=baseline,
            **extra,
        )
        for t in targets
    ]
    dicts: list[dict[str, Any]] = [p.to_dict() for p in plans]
    searched = _searched(c, m)
    for d in dicts:
        d["searched"] = searched
    tables = _sample_tables(
        plans,
        dicts,
        samples=samples,
        seed=seed,
        regime=regime,
        c=c,
        m=m,
        metric=metric,
        search=search,
        quiet=json_,
    )
    if json_:
        from dispersal.present.rows import plan_download

        for d in dicts:  # the download side of the WAN traffic (the plan's fields are the upload's)
            d["wan_download"] = plan_download(d)
        print_json(dicts)
        return
    _print_plans(plans, dicts, tables, runners_up)


def _calibration(calibration: str | None, samples: int) -> dict[str, Any]:
    """`--calibration`: the fitted model parameters as planner keywords (none without the flag)."""
    if calibration is None:
        return {}
    from dispersal.calibration import load_calibration

    if samples:
        raise InputError(
            "calibration", "cannot be combined with --samples (Monte Carlo samples the published set)"
        )
    return {"params": load_calibration(input_file(calibration, "calibration"))}


def _site_sizes(site_nodes: list[int]) -> tuple[int, ...]:
    """`--site-nodes`, checked: 2 to 10,000 nodes per site."""
    for k in site_nodes:
        if not 2 <= k <= 10_000:
            raise InputError("site_nodes", f"must be in [2, 10,000] nodes per site, got {k}")
    return tuple(site_nodes)


def _sample_tables(
    plans: list[Plan],
    dicts: list[dict[str, Any]],
    *,
    samples: int,
    seed: int,
    regime: str,
    c: Any,
    m: Any,
    metric: str | None,
    search: str | None,
    quiet: bool,
) -> list[Any]:
    """Monte Carlo per plan (`--samples`): each plan's dict gains the sample summary (P(reach) first);
    returns the tables to print. No samples: nothing."""
    tables: list[Any] = []
    if not samples:
        return tables
    from rich.progress import Progress, TaskID

    from dispersal.cli.uncertainty import render_samples_table
    from dispersal.model.analyses import uncertainty

    with Progress(transient=True, disable=quiet) as prog:
        for p, d in zip(plans, dicts, strict=True):
            task = prog.add_task(f"Monte Carlo {p.target_flop:.3g}", total=samples)

            def advance(done: int, total: int, t: TaskID = task) -> None:
                prog.update(t, completed=done, total=total)

            res = uncertainty.plan_samples(
                p.target_flop,
                samples=samples,
                seed=seed,
                regime_name=regime,
                constraints=c,
                mode=m,
                metric=metric,
                search=search,
                progress=advance,
            )
            d.update(res.to_dict())
            tables.append(render_samples_table(res))
    return tables


def _print_plans(plans: list[Plan], dicts: list[dict[str, Any]], tables: list[Any], runners_up: bool) -> None:
    """The plan table, each plan's answer card, every infeasibility reason, runners-up, Monte Carlo."""
    from dispersal.cli._render import console

    con = console()
    con.print(plan_table(plans))
    from dispersal.present.answer import plan_card

    for d in dicts:
        con.print(plan_card(d).text(), markup=False, highlight=False, soft_wrap=True)
    for p in plans:
        if p.best is None:
            con.print(f"[red]infeasible[/red] at {p.target_flop:.3g} FLOP, every reason:")
            for reason in p.reasons:
                con.print(f"  - {reason}", soft_wrap=True, markup=False)
    if runners_up:
        for p in plans:
            con.print(runners_up_table(p))
    for t in tables:
        con.print(t)


def _searched(c: Any, m: Any) -> dict[str, list[Any]]:
    """Which algorithm slots and site sizes the planner searched (the answer card cites them): every
    slot of the mode unless --algorithms restricts it (paper mode has no decoupled slot)."""
    every = ["auto", "hierarchical"] + (["decoupled"] if m.value == "default" else [])
    return {"algorithms": list(c.algorithms) or every, "site_nodes": list(c.site_sizes)}


def _plan_sites(
    path: str, targets: list[float], m: Any, metric: str | None, max_nodes: int, json_: bool
) -> None:
    """``plan --sites``: the smallest multiple of the file's site mix per target (search.plan_sites)."""
    from dispersal.cli._scenario import build_scenario
    from dispersal.model.search.plan_sites import METRICS, plan_site_mix

    if metric is not None and metric not in METRICS:
        raise InputError("metric", f"must be one of {', '.join(METRICS)}, got {metric!r}")
    from dispersal.cli._scenario import load_scenario_data
    from dispersal.model.inputs.presets import scenario_names

    # A preset name works as in `estimate --scenario` (intellect1_schedule); anything else is a file.
    if not (path in scenario_names() and not Path(path).exists()):
        path = str(input_file(path, "sites"))
        read_toml(Path(path), "sites")  # a pipe, device, huge or malformed file is named as --sites
    s = build_scenario(path, [])
    search_params = "params" not in load_scenario_data(str(path))
    if not s.sites:
        raise InputError("sites", f"{path} has no [[site]] tables")
    met = metric or ("c_local" if m.value == "paper" else "c_quality")
    plans = [
        plan_site_mix(s, t, metric=met, mode=m, max_nodes=max_nodes, search_params=search_params)
        for t in targets
    ]
    if json_:
        print_json([p.to_dict() for p in plans])
        return
    from dispersal.cli._render import console

    label = {"c_quality": "C_quality", "c_local": "C_local"}.get(met, met)
    t = Table(
        title=f"dispersal plan --sites {path} ({m.value} mode, metric {label}): smallest multiple of the mix"
    )
    for col in (
        "target",
        "scale",
        *(f"{site.name} nodes" for site in s.sites),
        "model",
        "days",
        "cost",
        f"{label} (FLOP)",
        "utilisation",
        "sync paced by",
    ):
        t.add_column(col, justify="right")
    missed: list[str] = []
    for p in plans:
        e = p.estimate
        if p.scale is None or e is None:
            # The reason goes below the table: in a cell it read as the utilisation column's value.
            t.add_row(f"{p.target_flop:.3g}", "[red]not reached[/]", *("-" for _ in range(len(s.sites) + 6)))
            missed.append(f"not reached at {p.target_flop:.3g} FLOP: {p.reason}")
            continue
        value = e.c_quality_flop if met == "c_quality" else e.c_local_flop
        t.add_row(
            f"{p.target_flop:.3g}",
            f"{p.scale}x",
            *(f"{n:,}" for n in p.nodes),
            units.format_count(e.params),
            f"{e.days:.4g}",
            units.format_money(e.cost.total_usd),
            f"{value:.3g}",
            f"{e.utilisation:.1%}",
            e.sync_pacing,
        )
    console().print(t)
    for line in missed:
        console().print(line, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `plan` to the root app."""
    app.command("plan")(plan_cmd)
