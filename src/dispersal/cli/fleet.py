"""`dispersal fleet`: the best use of a given fleet (issue 24 item 7): model size, tokens, H, codec
and algorithm, with utilisation, time, compute, traffic and the binding constraint."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from dispersal.cli._common import guarded, print_json
from dispersal.cli._scenario import (
    AlgorithmOpt,
    BandwidthOpt,
    DaysOpt,
    DistanceOpt,
    HardwareOpt,
    LatencyOpt,
    ModeOpt,
    NodesOpt,
    ParamsOpt,
    RegimeOpt,
    ScenarioOpt,
    SetOpt,
    TokensOpt,
    build_scenario,
    check_mode,
    scenario_flags,
)
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.model.search.fleet import FleetAnswer, fleet_search
from dispersal.present.fleet import _algo, answer_lines


@guarded
def fleet_cmd(
    scenario: ScenarioOpt = None,
    hardware: HardwareOpt = None,
    nodes: NodesOpt = None,
    bandwidth: BandwidthOpt = None,
    latency: LatencyOpt = None,
    distance: DistanceOpt = None,
    days: DaysOpt = None,
    params: ParamsOpt = None,
    tokens: TokensOpt = None,
    algorithm: AlgorithmOpt = None,
    regime: RegimeOpt = None,
    set_: SetOpt = None,
    mode: ModeOpt = "default",
    metric: Annotated[
        str, typer.Option(help="What to optimise: c_quality (highest), c_local (highest) or loss (lowest).")
    ] = "c_quality",
    json_: Annotated[bool, typer.Option("--json", help="Print the answer as one JSON object.")] = False,
) -> None:
    """I have this fleet: which model size, tokens, H and codec, what utilisation, how long?

    The fleet is the scenario (preset or file, then --hardware, --nodes, --bandwidth, --latency or
    --distance, --days, --regime, --set). The search runs over the algorithm, the wire codec, the model
    size (the planner's grid) and H; --params, --algorithm fix those, --tokens caps the tokens.
    With no options: the paper's threat model fleet (16 x H100 FP8, 100 Mbps, 100 ms, 740 days).
    """
    m = check_mode(mode)
    flags = scenario_flags(**locals())
    s = build_scenario(scenario, set_ or [], **flags)
    if metric not in ("c_quality", "c_local", "loss"):
        raise InputError("metric", f"must be c_quality, c_local or loss, got {metric!r}")
    ans = fleet_search(
        s,
        mode=m,
        metric=metric,
        params_grid=[s.params] if params is not None else None,
        algorithms=[s.algorithm.value] if algorithm is not None and s.algorithm.value != "auto" else None,
        max_tokens=s.tokens if tokens is not None and s.tokens else float("inf"),
    )
    if json_:
        print_json(ans.to_dict())
        return
    from dispersal.cli._render import console

    con = console()
    if ans.per_algorithm:
        con.print(fleet_table(ans))
    for line in answer_lines(ans):
        con.print(line, markup=False, highlight=False, soft_wrap=True)


def fleet_table(ans: FleetAnswer) -> Table:
    """The best option of each algorithm (hierarchical per group size), best first."""
    t = Table(title=f"dispersal fleet ({ans.mode} mode, metric {ans.metric}): best per algorithm")
    for col in (
        "algorithm",
        "codec",
        "model",
        "tokens",
        "H",
        "days",
        "util.",
        "C_local",
        "C_quality",
        "loss",
    ):
        t.add_column(col, justify="left" if col in ("algorithm", "codec") else "right")
    for o in ans.per_algorithm:
        t.add_row(
            _algo(o),
            o.codec,
            units.format_count(o.params),
            units.format_count(o.tokens),
            f"{o.inner_steps:,}",
            f"{o.run_time_s / units.SECONDS_PER_DAY:.4g}",
            f"{o.utilisation:.1%}",
            f"{o.c_local_flop:.3g}",
            f"{o.c_quality_flop:.3g}",
            f"{o.loss:.4g}",
        )
    return t


def register(app: typer.Typer) -> None:
    """Add `fleet` to the root app."""
    app.command("fleet")(fleet_cmd)


__all__: list[str] = ["answer_lines", "fleet_cmd", "fleet_table", "register"]
