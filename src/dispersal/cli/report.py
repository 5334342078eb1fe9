"""`dispersal report`: a self-contained HTML report of one scenario (figures embedded as PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dispersal.cli._common import SET_HELP, atomic_write_text, default_out, guarded, print_json


@guarded
def report_cmd(
    scenario: Annotated[
        str, typer.Argument(help="Preset name (e.g. paper_threat_model) or a TOML scenario file.")
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="HTML file to write (default: dispersal-output/report/<scenario>.html)."),
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", help="paper (the paper's settings exactly) or default.")
    ] = "default",
    set_: Annotated[list[str] | None, typer.Option("--set", help=SET_HELP)] = None,
    json_: Annotated[
        bool, typer.Option("--json", help='Print {"path": ..., "scenario": ..., "mode": ...} as JSON.')
    ] = False,
) -> None:
    """Write one self-contained HTML report (tables, embedded plots, full JSON) for a scenario.

    Exit status: 0 written (feasible or not), 2 bad input.
    """
    from dispersal.cli.estimate import build_scenario, check_mode
    from dispersal.present.report import render_html

    m = check_mode(mode)
    s = build_scenario(scenario, set_ or [])
    path = out if out is not None else default_out("report") / f"{Path(scenario).stem}.html"
    atomic_write_text(path, render_html(s, m, source=scenario))
    if json_:
        print_json({"path": str(path), "scenario": scenario, "mode": m.value})
        return
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add `report` to the root app."""
    app.command("report")(report_cmd)
