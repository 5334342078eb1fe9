"""`dispersal solve`: the value of one input at which an output reaches a target.

dispersal solve --for bandwidth --where utilisation=0.9
dispersal solve --for distance --where premium=2 --mode paper --plan-hardware h100_sxm
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from dispersal.cli._common import flop_target, guarded, print_json
from dispersal.cli._groups import with_groups
from dispersal.cli._scenario import ScenarioOptions
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.search.solve import (
    DEFAULT_TARGET_FLOP,
    Solution,
    format_output,
    format_value,
    resolve_output,
    resolve_variable,
    solve,
)


def parse_where(text: str) -> tuple[str, float]:
    """``OUTPUT=VALUE`` -> (output name, target in the output's unit). Values may carry units
    (``sync_time=60s``, ``cost=$2B``, ``days=3w``) and fractions may be percentages (``90%``)."""
    if "=" not in text:
        raise InputError("where", f"expected OUTPUT=VALUE, e.g. utilisation=0.9, got {text!r}")
    name, value = (part.strip() for part in text.split("=", 1))
    if not name:
        raise InputError("where", f"expected OUTPUT=VALUE, e.g. utilisation=0.9, got {text!r}")
    if not value:
        raise InputError("where", f"{name}= has no value")
    target = parse_target(name, value)
    if not math.isfinite(target):
        raise InputError("where", f"{name} target must be a finite number, got {value!r}")
    return name, target


def parse_target(output: str, value: str) -> float:
    """A target value in the unit of `output` (see parse_where)."""
    unit = resolve_output(output).unit
    field = "where"
    if value.endswith("%"):
        try:
            return float(value[:-1]) / 100.0
        except ValueError:
            raise InputError(field, f"cannot parse {value!r} as a percentage") from None
    if unit == "s":
        return units.parse_duration(value, field)
    if unit == "d":
        try:
            return float(value)
        except ValueError:
            return units.parse_duration(value, field) / units.SECONDS_PER_DAY
    if unit == "USD":
        return units.parse_money(value, field)
    if unit == "FLOP":
        return units.parse_flop(value, field)
    if unit == "bytes":
        return units.parse_bytes(value, field)
    if unit == "bit/s":
        return units.parse_bandwidth(value, field)
    try:
        return float(value)
    except ValueError:
        raise InputError(field, f"{output} target must be a number, got {value!r}") from None


def parse_bound(variable: str, text: str) -> float:
    """One end of --range in the variable's unit (``1Mbps``, ``50ms``, ``1000km``, ``64``, ``70B``)."""
    v = resolve_variable(variable)
    field = "range"
    if v.name == "bandwidth":
        return units.parse_bandwidth(text, field)
    if v.name == "latency":
        return units.parse_duration(text, field)
    if v.name == "distance":
        return units.parse_distance(text, field)
    value = units.parse_count(text, field)
    if v.integer:
        require(float(value).is_integer(), field, f"{v.name} must be an integer, got {text!r}")
    return value


def parse_range(variable: str, text: str | None) -> tuple[float | None, float | None]:
    """``LO:HI`` (either may be empty for the default) -> (lo, hi) in SI units."""
    if text is None:
        return None, None
    if text.count(":") != 1:
        raise InputError("range", f"expected LO:HI, e.g. 1Mbps:10Gbps, got {text!r}")
    lo_t, hi_t = (part.strip() for part in text.split(":"))
    return (parse_bound(variable, lo_t) if lo_t else None, parse_bound(variable, hi_t) if hi_t else None)


def solution_table(s: Solution) -> Any:
    """A short rich table of a Solution."""
    from rich.table import Table

    t = Table(
        title=f"dispersal solve ({s.mode} mode): {s.variable} where {s.output} = "
        f"{format_output(s.output, s.target)}",
        show_header=False,
    )
    t.add_column("", justify="right")
    t.add_column("")
    if s.reached:
        t.add_row(s.variable, f"[bold]{format_value(s.variable, s.value)}[/]")
        t.add_row(s.output + " there", format_output(s.output, s.achieved))
        t.add_row(
            "bracket", f"{format_value(s.variable, s.bracket[0])} .. {format_value(s.variable, s.bracket[1])}"
        )
    else:
        t.add_row(s.variable, "[red]not reached[/]")
        t.add_row("why", s.reason)
    t.add_row("direction", f"{s.output} {s.direction} along {s.variable}")
    t.add_row(
        "range searched",
        f"{format_value(s.variable, s.search_range[0])} .. {format_value(s.variable, s.search_range[1])}",
    )
    work, caller = ("plans", "planner") if s.output == "premium" else ("configurations", "kernel")
    t.add_row("work", f"{s.evaluations:,} {work} in {s.calls} {caller} call{'s' if s.calls != 1 else ''}")
    if s.reached and s.scenario is not None and s.variable == "bandwidth":
        sc = s.scenario
        t.add_row(
            "up / down",
            f"{units.format_bandwidth(sc.bandwidth_up_bits_per_s, 4)} / "
            f"{units.format_bandwidth(sc.bandwidth_down_bits_per_s, 4)}",
        )
    if s.reached and s.scenario is not None and s.variable == "distance":
        t.add_row("latency", units.format_duration(s.scenario.latency_s, 4))
    return t


#: The scenario fields each solvable link variable moves.
_LINK_FIELDS = {
    "bandwidth": ("bandwidth_up_bits_per_s", "bandwidth_down_bits_per_s"),
    "latency": ("latency_s",),
    "distance": ("latency_s",),
}


def _not_owned_by_sites(s: Any, variable: str) -> None:
    """InputError when every [[site]] table sets the link the variable moves: the scenario's link is
    not used, so the output is flat along it ("utilisation flat along bandwidth" was the answer)."""
    if variable in ("nodes", "sites") and s.sites:
        raise InputError(
            "for",
            f"the node count is this scenario's [[site]] tables' total, so {variable} does not move "
            "the run; change a site's nodes in the file instead",
        )
    fields = _LINK_FIELDS.get(variable)
    if fields and s.sites and all(getattr(t, f) is not None for t in s.sites for f in fields):
        raise InputError(
            "for",
            f"every [[site]] table of this scenario sets its own {' and '.join(fields)}, so {variable} "
            "does not move the run; change the sites in the file instead",
        )


@guarded
@with_groups
def solve_cmd(
    for_: Annotated[
        str,
        typer.Option(
            "--for",
            help="Input to solve for: bandwidth, latency, distance, nodes, "
            "sites (= nodes: every node is its own site), inner_steps, "
            "params.",
        ),
    ],
    where: Annotated[
        str,
        typer.Option(
            "--where",
            help="OUTPUT=TARGET, e.g. utilisation=0.9, sync_time=60s, "
            "days=30, premium=2, or any kernel output.",
        ),
    ],
    sc: ScenarioOptions,
    range_: Annotated[
        str | None,
        typer.Option(
            "--range", help="LO:HI with units, e.g. 1Mbps:10Gbps, 0:500ms, 1:1000 (either end may be empty)."
        ),
    ] = None,
    target: Annotated[
        str, typer.Option("--target", help="premium only: the plans' compute target, FLOP.")
    ] = (f"{DEFAULT_TARGET_FLOP:g}"),
    plan_hardware: Annotated[
        list[str] | None,
        typer.Option(
            "--plan-hardware",
            help="premium only: accelerators the planner may use (repeatable; default all).",
        ),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the Solution as one JSON object.")] = False,
) -> None:
    """Find the value of one input at which an output reaches a target (vectorised bisection).

    The scenario is what `dispersal estimate` would run (--scenario, the same shortcut flags
    --hardware --nodes --bandwidth ..., --set, --mode).

    Whether the output rises or falls along the input is detected, not assumed.

    Integer inputs give the first integer (from LO up) at which the target is reached.

    premium (the planner's cost premium over a centralized cluster) costs one plan per step.

    Exit status: 0 solved or not reached (reason given), 2 bad input.
    """
    m = sc.model_mode()
    variable = resolve_variable(for_).name
    name, value = parse_where(where)
    lo, hi = parse_range(variable, range_)
    s = sc.build()
    _not_owned_by_sites(s, variable)
    extra: dict[str, Any] = {}
    if resolve_output(name).key == "premium":
        extra["target_flop"] = flop_target(target, "target")
        if plan_hardware:
            from dispersal.model.search.planner import Constraints

            extra["constraints"] = Constraints(hardware=tuple(plan_hardware))
    elif plan_hardware:
        raise InputError("plan-hardware", "applies only to --where premium=...")
    sol = solve(s, vary=variable, output=name, target=value, mode=m, lo=lo, hi=hi, **extra)
    if json_:
        print_json(sol.to_dict())
        return
    from dispersal.cli._render import console

    console().print(solution_table(sol))


def register(app: typer.Typer) -> None:
    """Add `solve` to the root app."""
    app.command("solve")(solve_cmd)
