"""`dispersal estimate`: one scenario through the analytic model."""

from __future__ import annotations

from typing import Annotated

import typer

from dispersal.cli._common import guarded, input_file, output_file, print_json
from dispersal.cli._groups import with_groups
from dispersal.cli._scenario import ModeOpt, ScenarioOptions, build_scenario, check_mode, parse_sets
from dispersal.model.run.estimate import estimate

# Re-exported: other commands and tests import these from here.
__all__ = ["ModeOpt", "build_scenario", "check_mode", "estimate_cmd", "parse_sets", "register"]

CalibrationOpt = Annotated[
    str | None, typer.Option(help="Calibration TOML (dispersal calibrate) replacing model parameters.")
]


@guarded
@with_groups
def estimate_cmd(
    sc: ScenarioOptions,
    json_: Annotated[bool, typer.Option("--json", help="Print Estimate.to_dict() as JSON.")] = False,
    out: Annotated[str | None, typer.Option(help="Also write the JSON to this file (atomically).")] = None,
    calibration: CalibrationOpt = None,
) -> None:
    """Estimate one distributed training run: time, efficiency, C_local, C_quality, cost, traffic.

    With no options: the paper's threat model (16 x H100 FP8 nodes, 100 Mbps, 100 ms, 740 days).
    Exit status: 0 computed (feasible or not), 2 bad input.
    """
    m = sc.model_mode()
    s = sc.build()
    out_path = output_file(out, "out") if out is not None else None
    if calibration is not None:
        from dispersal.calibration import load_calibration

        result = estimate(
            s, mode=m, params=load_calibration(input_file(calibration, "calibration"))
        ).to_dict()
    else:
        result = estimate(s, mode=m).to_dict()
    if out_path is not None:
        from dispersal.cli._common import atomic_write_text, dumps_json

        atomic_write_text(out_path, dumps_json(result) + "\n")
    if json_:
        print_json(result)
        return
    from dispersal.cli._render import console, estimate_table

    c = console()
    for t in estimate_table(result):
        c.print(t)


def register(app: typer.Typer) -> None:
    """Add `estimate` to the root app."""
    app.command("estimate")(estimate_cmd)
