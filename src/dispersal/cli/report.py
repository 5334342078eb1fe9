"""`dispersal report`: a self-contained HTML report of one scenario (figures embedded as PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dispersal.cli._common import atomic_write_text, default_out, guarded, output_file, print_json
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
    SetOpt,
    TokensOpt,
    build_scenario,
    check_mode,
    scenario_flags,
)


@guarded
def report_cmd(
    scenario: Annotated[
        str, typer.Argument(help="Preset name (e.g. paper_threat_model) or a TOML scenario file.")
    ],
    out: Annotated[
        str | None,
        typer.Option(help="HTML file to write (default: dispersal-output/report/<scenario>.html)."),
    ] = None,
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
    mode: ModeOpt = "default",
    set_: SetOpt = None,
    json_: Annotated[
        bool, typer.Option("--json", help='Print {"path": ..., "scenario": ..., "mode": ...} as JSON.')
    ] = False,
) -> None:
    """Write one self-contained HTML report (tables, embedded plots, full JSON) for a scenario.

    Exit status: 0 written (feasible or not), 2 bad input.
    """
    m = check_mode(mode)
    s = build_scenario(scenario, set_ or [], **scenario_flags(**locals()))
    path = output_file(
        out if out is not None else default_out("report") / f"{Path(scenario).stem}.html", "out"
    )
    from dispersal.present.report import render_html

    atomic_write_text(path, render_html(s, m, source=scenario))
    if json_:
        print_json({"path": str(path), "scenario": scenario, "mode": m.value})
        return
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add `report` to the root app."""
    app.command("report")(report_cmd)
