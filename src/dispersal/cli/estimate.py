"""`dispersal estimate`: one scenario through the analytic model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dispersal.cli._common import SET_HELP, field_help, guarded, print_json
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.presets import DEFAULT_SCENARIO, load_scenario_dict
from dispersal.model.inputs.scenario import Mode, Scenario, latency_from_distance
from dispersal.model.kernel.estimate import estimate

ModeOpt = Annotated[str, typer.Option("--mode", help="paper (the paper's settings exactly) or default.")]


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """--set key=value pairs to a dict (values parsed later by Scenario.from_dict)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise InputError("--set", f"expected key=value, got {pair!r}")
        k, v = pair.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def check_mode(mode: str) -> Mode:
    """Validate --mode."""
    try:
        return Mode(mode)
    except ValueError:
        raise InputError("mode", f"must be paper or default, got {mode!r}") from None


def build_scenario(
    scenario: str | None,
    sets: list[str],
    *,
    hardware: str | None = None,
    nodes: int | None = None,
    bandwidth: str | None = None,
    latency: str | None = None,
    distance: str | None = None,
    days: float | None = None,
    params: str | None = None,
    tokens: str | None = None,
    algorithm: str | None = None,
    regime: str | None = None,
) -> Scenario:
    """Precedence: built-in preset < scenario file < common flags < --set."""
    data = load_scenario_dict(scenario or DEFAULT_SCENARIO)
    if hardware is not None:
        data["hardware"] = hardware
    if nodes is not None:
        data["num_nodes"] = nodes
    if bandwidth is not None:
        up, down = units.parse_up_down(bandwidth, "bandwidth")
        data["bandwidth_up_bits_per_s"], data["bandwidth_down_bits_per_s"] = up, down
    if latency is not None and distance is not None:
        raise InputError("latency", "give --latency or --distance, not both")
    if latency is not None:
        data["latency_s"] = units.parse_duration(latency, "latency")
    if distance is not None:
        data["latency_s"] = latency_from_distance(units.parse_distance(distance, "distance"))
    if days is not None:
        if not days > 0:
            raise InputError("days", f"must be > 0, got {days}")
        data["duration_s"] = days * units.SECONDS_PER_DAY
    if params is not None:
        data["params"] = params
    if tokens is not None:
        data["tokens"] = tokens
    if algorithm is not None:
        data["algorithm"] = algorithm
    if regime is not None:
        data["regime"] = regime
    data.update(parse_sets(sets))
    return Scenario.from_dict(data)


@guarded
def estimate_cmd(
    scenario: Annotated[
        str | None, typer.Option("--scenario", help="TOML scenario file or preset name.")
    ] = None,
    hardware: Annotated[str | None, typer.Option(help=field_help("hardware"))] = None,
    nodes: Annotated[int | None, typer.Option(help=field_help("num_nodes"))] = None,
    bandwidth: Annotated[
        str | None, typer.Option(help="WAN rate, e.g. 100Mbps or UP/DOWN 57Mbps/310Mbps.")
    ] = None,
    latency: Annotated[str | None, typer.Option(help="One-way WAN latency, e.g. 100ms.")] = None,
    distance: Annotated[
        str | None, typer.Option(help="Fibre distance instead of latency, e.g. 1000km.")
    ] = None,
    days: Annotated[float | None, typer.Option(help="Time budget in days.")] = None,
    params: Annotated[str | None, typer.Option(help=field_help("params", "91B"))] = None,
    tokens: Annotated[str | None, typer.Option(help=field_help("tokens", "15T"))] = None,
    algorithm: Annotated[str | None, typer.Option(help=field_help("algorithm"))] = None,
    regime: Annotated[str | None, typer.Option(help=field_help("regime"))] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help=SET_HELP)] = None,
    mode: ModeOpt = "default",
    json_: Annotated[bool, typer.Option("--json", help="Print Estimate.to_dict() as JSON.")] = False,
    out: Annotated[Path | None, typer.Option(help="Also write the JSON to this file (atomically).")] = None,
    calibration: Annotated[
        Path | None, typer.Option(help="Calibration TOML (dispersal calibrate) replacing model parameters.")
    ] = None,
) -> None:
    """Estimate one distributed training run: time, efficiency, C_local, C_quality, cost, traffic.

    With no options: the paper's threat model (16 x H100 FP8 nodes, 100 Mbps, 100 ms, 740 days).
    Exit status: 0 computed (feasible or not), 2 bad input.
    """
    m = check_mode(mode)
    s = build_scenario(
        scenario,
        set_ or [],
        hardware=hardware,
        nodes=nodes,
        bandwidth=bandwidth,
        latency=latency,
        distance=distance,
        days=days,
        params=params,
        tokens=tokens,
        algorithm=algorithm,
        regime=regime,
    )
    if calibration is not None:
        from dispersal.calibration import load_calibration

        result = estimate(s, mode=m, params=load_calibration(calibration)).to_dict()
    else:
        result = estimate(s, mode=m).to_dict()
    if out is not None:
        from dispersal.cli._common import atomic_write_text, dumps_json

        atomic_write_text(out, dumps_json(result) + "\n")
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
