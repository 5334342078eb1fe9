"""What `solve()` can vary and read: the variables (a scenario input each, with its range and how it is
applied), the outputs (kernel outputs and friendly aliases) and their formats."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.scenario import Scenario, latency_from_distance
from dispersal.model.kernel.kernel import OUTPUTS

Arr = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True, slots=True)
class Variable:
    """An input `solve` can vary: its unit, allowed bounds and default search range (SI units)."""

    name: str
    unit: str
    integer: bool
    min_value: float
    """Smallest allowed value (inclusive unless `min_exclusive`)."""
    max_value: float
    min_exclusive: bool
    default_lo: float
    default_hi: float
    description: str


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable(
            name="bandwidth",
            unit="bit/s",
            integer=False,
            min_value=0.0,
            max_value=math.inf,
            min_exclusive=True,
            default_lo=1e3,
            default_hi=1e13,
            description="WAN upload rate per node; the download scales with it, keeping the scenario's "
            "down/up ratio (default range 1 kbps - 10 Tbps)",
        ),
        Variable(
            name="latency",
            unit="s",
            integer=False,
            min_value=0.0,
            max_value=math.inf,
            min_exclusive=False,
            default_lo=0.0,
            default_hi=10.0,
            description="one-way WAN latency (default range 0 - 10 s)",
        ),
        Variable(
            name="distance",
            unit="m",
            integer=False,
            min_value=0.0,
            max_value=math.inf,
            min_exclusive=False,
            default_lo=0.0,
            default_hi=2.0e7,
            description="fibre distance between sites; latency = distance x 4.9 us/km x 1.5 routing "
            "overhead (`scenario.latency_from_distance`; default range 0 - 20,000 km)",
        ),
        Variable(
            name="nodes",
            unit="nodes",
            integer=True,
            min_value=1.0,
            max_value=1e7,
            min_exclusive=False,
            default_lo=1.0,
            default_hi=100_000.0,
            description="number of nodes N (default range 1 - 100,000)",
        ),
        Variable(
            name="inner_steps",
            unit="steps",
            integer=True,
            min_value=1.0,
            max_value=1e7,
            min_exclusive=False,
            default_lo=1.0,
            default_hi=100_000.0,
            description="inner steps per outer step H (default range 1 - 100,000)",
        ),
        Variable(
            name="params",
            unit="parameters",
            integer=False,
            min_value=0.0,
            max_value=math.inf,
            min_exclusive=True,
            default_lo=1e6,
            default_hi=1e14,
            description="total parameters P; a MoE's active parameters keep their share "
            "(default range 1M - 100T)",
        ),
    )
}

#: Other names for the variables. "sites" = nodes: in this model every node is its own site.
VARIABLE_ALIASES: dict[str, str] = {
    "sites": "nodes",
    "h": "inner_steps",
    "H": "inner_steps",
    "bandwidth_bits_per_s": "bandwidth",
    "latency_s": "latency",
    "num_nodes": "nodes",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Output:
    """An output `solve` can target: the kernel key it reads and the unit of its target."""

    name: str
    key: str
    """Kernel output read (`kernel.OUTPUTS`), or "premium" for the planner's cost premium."""
    unit: str
    scale: float = 1.0
    """Divides the kernel value (e.g. seconds -> days)."""


def _unit_of(key: str) -> str:
    for suffix, unit in (
        ("_flop_per_s", "FLOP/s"),
        ("_bits_per_s", "bit/s"),
        ("_usd", "USD"),
        ("_flop", "FLOP"),
        ("_bytes_per_node", "bytes"),
        ("_bytes", "bytes"),
        ("_bits", "bits"),
        ("_s", "s"),
        ("_w", "W"),
        ("_kwh", "kWh"),
    ):
        if key.endswith(suffix):
            return unit
    return ""


#: Friendly names -> outputs. Every kernel output is also accepted by its own name.
OUTPUT_ALIASES: dict[str, Output] = {
    "utilization": Output(name="utilisation", key="utilisation", unit=""),
    "cost": Output(name="cost", key="cost_usd", unit="USD"),
    "days": Output(name="days", key="run_time_s", unit="d", scale=units.SECONDS_PER_DAY),
    "run_time": Output(name="run_time", key="run_time_s", unit="s"),
    "sync_time": Output(name="sync_time", key="sync_time_s", unit="s"),
    "step_time": Output(name="step_time", key="step_time_s", unit="s"),
    "outer_step_time": Output(name="outer_step_time", key="outer_step_time_s", unit="s"),
    "c_local": Output(name="c_local", key="c_local_flop", unit="FLOP"),
    "c_quality": Output(name="c_quality", key="c_quality_flop", unit="FLOP"),
    "c_raw": Output(name="c_raw", key="c_raw_flop", unit="FLOP"),
    "h_min": Output(name="h_min", key="inner_steps", unit="steps"),
    "H_min": Output(name="h_min", key="inner_steps", unit="steps"),
    "H": Output(name="h_min", key="inner_steps", unit="steps"),
    "link_utilisation": Output(name="link_utilisation", key="link_utilisation", unit=""),
    "link_utilization": Output(name="link_utilisation", key="link_utilisation", unit=""),
    "mfu": Output(name="mfu_global", key="mfu_global", unit=""),
    "energy": Output(name="energy_kwh", key="energy_kwh", unit="kWh"),
    "premium": Output(name="premium", key="premium", unit=""),
}
#: Derived outputs computed from kernel outputs (not kernel keys themselves).
_DERIVED: dict[str, Callable[[Mapping[str, Arr]], Arr]] = {
    "link_utilisation": lambda r: np.maximum(r["link_utilisation_up"], r["link_utilisation_down"]),
}
#: Variables the premium can be solved for (the planner's constraints carry the links only).
PREMIUM_VARIABLES: tuple[str, ...] = ("bandwidth", "latency", "distance")


def resolve_variable(name: str) -> Variable:
    """A variable by name or alias; InputError listing the allowed names otherwise."""
    key = VARIABLE_ALIASES.get(name, name)
    if key not in VARIABLES:
        allowed = ", ".join([*VARIABLES, "sites"])
        raise InputError("for", f"unknown variable {name!r} (allowed: {allowed})")
    return VARIABLES[key]


def resolve_output(name: str) -> Output:
    """An output by kernel name or alias; InputError naming the allowed ones otherwise."""
    if name in OUTPUT_ALIASES:
        return OUTPUT_ALIASES[name]
    if name in OUTPUTS:
        return Output(name=name, key=name, unit=_unit_of(name))
    aliases = ", ".join(sorted(OUTPUT_ALIASES))
    raise InputError(
        "where",
        f"unknown output {name!r} (allowed: {aliases}, or any kernel output, e.g. "
        "utilisation, run_time_s, sync_time_s, cost_usd, c_local_flop, link_utilisation_up)",
    )


def format_value(variable: str, value: float) -> str:
    """A variable's value with its unit, e.g. "1.23 Gbps", "100 ms", "1.2e+03 km", "17 nodes"."""
    v = resolve_variable(variable)
    if not math.isfinite(value):
        return str(value)
    if v.name == "bandwidth":
        return units.format_bandwidth(value, 4)
    if v.name == "latency":
        return "0 s" if value == 0 else units.format_duration(value, 4)
    if v.name == "distance":
        return f"{value / 1e3:.4g} km"
    if v.name == "nodes":
        return f"{int(value):,} node{'s' if int(value) != 1 else ''}"
    if v.name == "inner_steps":
        return f"H = {int(value):,}"
    return units.format_count(value, 4)


def format_output(output: str, value: float, digits: int = 4) -> str:
    """An output value with its unit, to `digits` significant digits."""
    o = resolve_output(output)
    if not math.isfinite(value):
        return str(value)
    if o.unit == "s":
        return units.format_duration(value, digits)
    if o.unit == "USD":
        return units.format_money(value, digits)
    if o.unit == "FLOP":
        return units.format_flop(value, digits)
    if o.unit == "bytes":
        return units.format_bytes(value, digits)
    if o.unit == "bit/s":
        return units.format_bandwidth(value, digits)
    return f"{value:.{digits}g}" + (f" {o.unit}" if o.unit else "")


def apply(scenario: Scenario, variable: str, value: float) -> Scenario:
    """The scenario with one variable set (validated by Scenario.replace)."""
    v = resolve_variable(variable)
    if v.name == "bandwidth":
        ratio = scenario.bandwidth_down_bits_per_s / scenario.bandwidth_up_bits_per_s
        return scenario.replace(
            bandwidth_up_bits_per_s=float(value), bandwidth_down_bits_per_s=float(value) * ratio
        )
    if v.name == "latency":
        return scenario.replace(latency_s=float(value))
    if v.name == "distance":
        return scenario.replace(latency_s=latency_from_distance(float(value)))
    if v.name == "nodes":
        return scenario.replace(num_nodes=int(value))
    if v.name == "inner_steps":
        return scenario.replace(inner_steps=int(value))
    changes: dict[str, Any] = {"params": float(value)}
    if scenario.active_params is not None:
        changes["active_params"] = scenario.active_params / scenario.params * float(value)
    return scenario.replace(**changes)
