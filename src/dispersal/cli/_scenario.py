"""The scenario every scenario-taking command builds the same way (estimate, fleet, solve, report,
sweep --field): a preset or TOML file, then the shortcut flags, then ``--set key=value``.

The options are declared once here, as the option group ``ScenarioOptions`` (cli._groups): estimate,
fleet, solve and report take it as one parameter, so ``--nodes 64`` means the same thing, with the
same help, everywhere (issue 24 item 6, issue 36 item 5). sweep --field, whose --scenario has a
default and whose --regime and --mode also drive the planner sweep, lists the same shortcut types.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from dispersal.cli._common import SET_HELP, field_help, input_file, link_rates, read_toml, show_number
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.presets import DEFAULT_SCENARIO, load_scenario_dict, scenario_names
from dispersal.model.inputs.scenario import FIELD_BY_NAME, Mode, Scenario, latency_from_distance

ScenarioOpt = Annotated[str | None, typer.Option("--scenario", help="TOML scenario file or preset name.")]
HardwareOpt = Annotated[str | None, typer.Option("--hardware", help=field_help("hardware"))]
NodesOpt = Annotated[
    int | None,
    typer.Option("--nodes", help=field_help("num_nodes"), min=1, max=10_000_000),
]
BandwidthOpt = Annotated[
    str | None, typer.Option("--bandwidth", help="WAN rate, e.g. 100Mbps or UP/DOWN 57Mbps/310Mbps.")
]
LatencyOpt = Annotated[str | None, typer.Option("--latency", help="One-way WAN latency, e.g. 100ms.")]
DistanceOpt = Annotated[
    str | None, typer.Option("--distance", help="Fibre distance instead of latency, e.g. 1000km.")
]
DaysOpt = Annotated[float | None, typer.Option("--days", help="Time budget in days.")]
ParamsOpt = Annotated[str | None, typer.Option("--params", help=field_help("params", "91B"))]
TokensOpt = Annotated[str | None, typer.Option("--tokens", help=field_help("tokens", "15T"))]
AlgorithmOpt = Annotated[str | None, typer.Option("--algorithm", help=field_help("algorithm"))]
RegimeOpt = Annotated[str | None, typer.Option("--regime", help=field_help("regime"))]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help=SET_HELP)]
ModeOpt = Annotated[str, typer.Option("--mode", help="paper (the paper's settings exactly) or default.")]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScenarioOptions:
    """The scenario option group (cli._groups): every command that runs one scenario (estimate, fleet,
    solve, report) takes these options, declared here once, with the same names, defaults and help.

    ``scenario`` is a preset name or TOML file; the shortcut flags and ``--set`` edit it
    (build_scenario has the precedence); ``mode`` is the model mode it runs in."""

    scenario: ScenarioOpt = None
    hardware: HardwareOpt = None
    nodes: NodesOpt = None
    bandwidth: BandwidthOpt = None
    latency: LatencyOpt = None
    distance: DistanceOpt = None
    days: DaysOpt = None
    params: ParamsOpt = None
    tokens: TokensOpt = None
    algorithm: AlgorithmOpt = None
    regime: RegimeOpt = None
    set_: SetOpt = None
    mode: ModeOpt = "default"

    def build(self) -> Scenario:
        """The scenario these options describe (build_scenario: preset < file < flags < --set)."""
        flags = {k: getattr(self, k) for k in SHORTCUT_FLAGS}
        return build_scenario(self.scenario, self.set_ or [], **flags)

    def model_mode(self) -> Mode:
        """--mode, checked."""
        return check_mode(self.mode)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScenarioArgOptions(ScenarioOptions):
    """ScenarioOptions with the scenario a required argument (`dispersal report SCENARIO`)."""

    scenario: Annotated[
        str, typer.Argument(help="Preset name (e.g. paper_threat_model) or a TOML scenario file.")
    ] = dataclasses.field()  # no default: required (a bare annotation would inherit None)


#: The shortcut flags (the keyword arguments of build_scenario) every scenario command accepts.
SHORTCUT_FLAGS = (
    "hardware",
    "nodes",
    "bandwidth",
    "latency",
    "distance",
    "days",
    "params",
    "tokens",
    "algorithm",
    "regime",
)

#: Scenario field -> the flag that set it, so an error names the flag the user typed.
_FIELD_FLAG = {
    "hardware": "hardware",
    "num_nodes": "nodes",
    "bandwidth_up_bits_per_s": "bandwidth",
    "bandwidth_down_bits_per_s": "bandwidth",
    "latency_s": "latency",
    "duration_s": "days",
    "params": "params",
    "tokens": "tokens",
    "algorithm": "algorithm",
    "regime": "regime",
}


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """--set key=value pairs to a dict (values parsed later by Scenario.from_dict)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep or not k.strip():
            raise InputError("set", f"expected key=value (see `dispersal fields`), got {pair!r}")
        if not v.strip():
            raise InputError(k.strip(), f"--set {k.strip()}= has no value")
        out[k.strip()] = v.strip()
    return out


def check_mode(mode: str) -> Mode:
    """Validate --mode."""
    try:
        return Mode(mode)
    except ValueError:
        raise InputError("mode", f"must be paper or default, got {mode!r}") from None


def load_scenario_data(scenario: str | None) -> dict[str, Any]:
    """A preset name or TOML file as a dict (not yet validated); bad paths and TOML name the file."""
    if scenario is None:
        return load_scenario_dict(DEFAULT_SCENARIO)
    if not scenario.strip():
        raise InputError(
            "scenario", f"empty; give a preset name ({', '.join(scenario_names())}) or a TOML file"
        )
    path = Path(scenario)
    if scenario in scenario_names() and not path.exists():
        return load_scenario_dict(scenario)
    if path.suffix.lower() == ".toml" or path.exists() or "/" in scenario:
        return read_toml(input_file(scenario, "scenario"), "scenario")
    return load_scenario_dict(scenario)  # unknown name: its error lists the presets


def _days_to_seconds(days: float) -> float:
    hi = UPPER_BOUNDS["duration_s"][0] / units.SECONDS_PER_DAY
    if not (math.isfinite(days) and 0 < days <= hi):
        raise InputError(
            "days", f"must be a number of days in (0, {show_number(hi)}], got {show_number(days)}"
        )
    return days * units.SECONDS_PER_DAY


def latency_of_distance(text: str) -> float:
    """One-way latency of a fibre distance (``1000km``), at most the latency field's bound."""
    metres = units.parse_distance(text, "distance")
    hi = UPPER_BOUNDS["latency_s"][0]
    if metres < 0:
        raise InputError("distance", f"must be >= 0 km, got {text!r}")
    latency = latency_from_distance(metres)
    if latency > hi:
        raise InputError(
            "distance",
            f"{text!r} gives a one-way latency of {units.format_duration(latency)}; at most "
            f"{units.format_duration(hi)} ({units.format_count(hi / latency_from_distance(1e3))} km)",
        )
    return latency


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
    """Precedence: built-in preset < scenario file < shortcut flags < --set.

    An invalid value set by a flag is reported under the flag's name (``--days: duration_s: ...``);
    one from the file or --set under the field's (``hardware: ...``)."""
    data = load_scenario_data(scenario)
    _links_owned_by_sites(data, bandwidth=bandwidth, latency=latency, distance=distance)
    given: set[str] = set()
    if hardware is not None:
        data["hardware"] = hardware
    if nodes is not None:
        data["num_nodes"] = nodes
    if bandwidth is not None:
        up, down = link_rates(bandwidth, "bandwidth")
        data["bandwidth_up_bits_per_s"], data["bandwidth_down_bits_per_s"] = up, down
    if latency is not None and distance is not None:
        raise InputError("latency", "give --latency or --distance, not both")
    if latency is not None:
        data["latency_s"] = units.parse_duration(latency, "latency")
    if distance is not None:
        data["latency_s"] = latency_of_distance(distance)
        given.add("distance")
    if days is not None:
        data["duration_s"] = _days_to_seconds(days)
    if params is not None:
        data["params"] = params
    if tokens is not None:
        data["tokens"] = tokens
    if algorithm is not None:
        data["algorithm"] = algorithm
    if regime is not None:
        data["regime"] = regime
    values = (hardware, nodes, bandwidth, latency, distance, days, params, tokens, algorithm, regime)
    flags = {k for k, v in zip(SHORTCUT_FLAGS, values, strict=True) if v is not None}
    set_data: dict[str, Any] = {}
    try:
        set_data = parse_sets(sets)
        data.update(set_data)
        s = check_bounds(Scenario.from_dict(data))
        return _edited_name(s, scenario, flags, set_data)
    except InputError as exc:
        flag = _FIELD_FLAG.get(exc.field)
        if flag == "latency" and "distance" in given:
            flag = "distance"
        if flag in flags and exc.field not in set_data:
            message = str(exc)
            if (
                flag == exc.field
            ):  # "--hardware: unknown hardware ..." rather than "--hardware: hardware: ..."
                message = message.removeprefix(f"{exc.field}: ")
            raise InputError(f"--{flag}", message) from None
        # The value came from the scenario file or --set: the message names the scenario field, and
        # the CLI must not present it as the command's option of the same name.
        exc.from_scenario = True  # type: ignore[attr-defined]
        raise


def _links_owned_by_sites(data: dict[str, Any], **flags: str | None) -> None:
    """InputError for a link flag that the scenario's [[site]] tables make moot: when every site sets
    that link itself the scenario's is not used, so `--bandwidth 10Gbps` would change nothing (it did,
    silently, with only a note in the output)."""
    sites = data.get("site")
    if not isinstance(sites, list) or not sites:
        return
    keys = {
        "bandwidth": ("bandwidth_up_bits_per_s", "bandwidth_down_bits_per_s"),
        "latency": ("latency_s",),
        "distance": ("latency_s",),
    }
    for flag, value in flags.items():
        if value is not None and all(isinstance(t, dict) and all(k in t for k in keys[flag]) for t in sites):
            raise InputError(
                f"--{flag}",
                f"every [[site]] table of this scenario sets its own {' and '.join(keys[flag])}, so the "
                "scenario's is not used; change the sites in the file instead",
            )


def _edited_name(s: Scenario, scenario: str | None, flags: set[str], set_data: dict[str, Any]) -> Scenario:
    """A scenario changed by flags or --set no longer carries its preset's title (issue 24: an edited
    paper_threat_model is not "Table 1, 1e24 row"): "<preset or file> edited: --nodes, num_nodes"."""
    changed = [f"--{f}" for f in SHORTCUT_FLAGS if f in flags] + [k for k in set_data if k != "name"]
    if not changed or "name" in set_data:
        return s
    origin = Path(scenario).stem if scenario else DEFAULT_SCENARIO
    return dataclasses.replace(s, name=f"{origin} edited: {', '.join(changed)}")


#: Hard upper bounds the CLI puts on Scenario fields the model leaves open (assumption: far past the
#: fields' plausible ranges, where the formulas stop meaning anything; e.g. 1e23 nodes gave
#: "feasible" with C_local 1e-261, issue 19). Field -> (bound, unit, formatter).
UPPER_BOUNDS: dict[str, tuple[float, str]] = {
    "num_nodes": (1e7, "nodes"),  # 10x the plausible 1M sites
    "params": (1e16, "parameters"),  # 100x the plausible 1e14
    "tokens": (1e18, "tokens"),  # 1,000x the plausible 1e15
    "latency_s": (3600.0, "s"),  # one hour one way
    "regional_latency_s": (3600.0, "s"),
    "pp_latency_s": (3600.0, "s"),
    "duration_s": (36_525 * units.SECONDS_PER_DAY, "s"),  # a century
    "bandwidth_up_bits_per_s": (1e15, "bit/s"),  # 1 Pbit/s per node
    "bandwidth_down_bits_per_s": (1e15, "bit/s"),
}


def check_bounds(s: Scenario) -> Scenario:
    """s, or InputError naming the first field above its hard upper bound (UPPER_BOUNDS)."""
    for name, (hi, unit) in UPPER_BOUNDS.items():
        value = getattr(s, name)
        if value is not None and value > hi:
            label = FIELD_BY_NAME[name].spec.label
            raise InputError(
                name, f"{label} must be at most {show_number(hi)} {unit}, got {show_number(value)} {unit}"
            )
    return s
