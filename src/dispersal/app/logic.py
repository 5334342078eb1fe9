"""UI state <-> URL query parameters <-> Scenario: the app's own logic, no presentation.

No model formulas live here. The inputs themselves (labels, units, bounds, the sidebar layout) are
`dispersal.app.fields`; results become rows, figures and text in `dispersal.present`, which the CLI
and the HTML report share. This module converts units between the UI and the Scenario, validates
nothing itself beyond each field's bounds (the model's `InputError` is the one source of validation
messages), and reads and writes shared links.

The UI state is a flat dict of friendly-unit values keyed by the names in `FIELDS`; those names are
also the query parameters of a shared link (``?preset=intellect1&up_mbps=2000``). A link carries the
preset, the mode and only the values that differ from that preset.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from dispersal.app.fields import (
    _INPUT_FIELDS,
    FIELD_BY_KEY,
    FIELDS,
    GENERIC_KEYS,
    LAYOUT,
    SCENARIO_KEYS,
    SCENARIO_TO_UI,
    Field,
    check_field,
    plausibility_warnings,
    relabel,
    slug,
    ui_key,
)
from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.fields import ScenarioField
from dispersal.model.inputs.presets import DEFAULT_SCENARIO, load_scenario_dict
from dispersal.model.inputs.scenario import Mode, Scenario
from dispersal.model.inputs.timelimit import TREATY, max_run_length_s
from dispersal.present.answer import plan_label
from dispersal.present.provenance import links_of
from dispersal.present.resilience import DEFAULTS as RESILIENCE_DEFAULTS

__all__ = [
    "FIELDS",
    "FIELD_BY_KEY",
    "GENERIC_KEYS",
    "LAYOUT",
    "SCENARIO_KEYS",
    "SCENARIO_TO_UI",
    "Built",
    "Field",
    "build",
    "check_field",
    "decode",
    "default_ui",
    "duration_s",
    "edited_keys",
    "encode",
    "links_of",
    "one_line",
    "parse_flop",
    "plan_label",
    "plausibility_warnings",
    "query_from_ui",
    "relabel",
    "scenario_dict",
    "scenario_inputs",
    "scenario_label",
    "slug",
    "ui_from_plan",
    "ui_from_query",
    "ui_from_scenario",
    "ui_key",
]

_APP_DEFAULTS: dict[str, Any] = {
    "mode": Mode.DEFAULT.value,
    "plan_target": "1e25",
    "plan_regime": "treaty",
    "plan_metric": "auto",
    "plan_objective": "cost",
    "plan_search": "auto",
    "fr_targets": "",
    "fr_premiums": "1.5, 2, 5",
    "fr_samples": 100,
    "mon_lose_sites": 1,
    "fleet_metric": "c_quality",
    "view": "estimate",
    **RESILIENCE_DEFAULTS,
}


def _nice(x: float) -> float:
    """A unit-converted float rounded to 12 significant digits (so 0.1 s -> 100 ms exactly)."""
    return float(f"{x:.12g}")


def _links_dict(
    ui: Mapping[str, Any], one: bool, wan_min: float, wan_latency: float, opt: Any
) -> dict[str, Any]:
    """Scenario link fields for Links = one (the WAN drives every link) or split (as set).

    one: every side link the scenario has follows the WAN (min(up, down) and the WAN latency); side
    links it leaves empty stay empty, which the model reads as the WAN's own link. split: the side
    links as typed, as separate links (``split_links`` where the model has it).
    """
    keys = (
        ("regional_bandwidth_bits_per_s", "regional_mbps", 1e6, wan_min),
        ("regional_latency_s", "regional_latency_ms", 1e-3, wan_latency),
        ("pp_bandwidth_bits_per_s", "pp_mbps", 1e6, wan_min),
        ("pp_latency_s", "pp_latency_ms", 1e-3, wan_latency),
    )
    if one:
        # A scenario with any side link gets every side link (rate and latency) set to the WAN's.
        if all(ui[u] is None for _k, u, _scale, _wan in keys):
            return dict.fromkeys(k for k, *_ in keys)
        return {k: wan for k, _u, _scale, wan in keys}
    return {
        **{k: opt(u, scale) for k, u, scale, _wan in keys},
        "split_links": True,
    }


def _to_ui(sf: ScenarioField, v: Any) -> Any:
    """One Scenario value in the UI's unit and type (floats rounded to 12 digits only when scaled)."""
    if v is None:
        return None
    if isinstance(v, StrEnum):
        return v.value
    if sf.kind == "bool":
        return bool(v)
    if sf.kind == "int":
        return int(v)
    if sf.kind == "float":
        scale = sf.spec.display_scale
        return _nice(v / scale) if scale != 1.0 else float(v)
    return v


def sites_toml(d: Mapping[str, Any]) -> str:
    """The ``[[site]]`` and ``[[churn]]`` tables of a scenario dict (`Scenario.to_dict()`: keys ``site``
    and ``churn``) as TOML text, SI numbers; "" when it has none."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v) if isinstance(v, float) else str(v)
        return json.dumps(str(v))

    out = []
    for table in ("site", "churn"):
        for row in d.get(table) or []:
            out.append(f"[[{table}]]")
            out += [f"{k} = {value(v)}" for k, v in row.items() if v is not None]
            out.append("")
    return "\n".join(out).strip()


def parse_sites_toml(text: str) -> dict[str, Any]:
    """Sites TOML text -> {"site": [...], "churn": [...]} (empty text: {}); InputError naming 'sites'."""
    import tomllib

    if not str(text or "").strip():
        return {}
    try:
        d = tomllib.loads(str(text))
    except tomllib.TOMLDecodeError as exc:
        raise InputError("sites", f"not valid TOML: {exc}") from None
    extra = sorted(set(d) - {"site", "churn"})
    if extra:
        raise InputError("sites", f"only [[site]] and [[churn]] tables allowed here, got {', '.join(extra)}")
    if "site" not in d:
        raise InputError("sites", "needs at least one [[site]] table (or leave the field empty)")
    return d


def ui_from_scenario(s: Scenario) -> dict[str, Any]:
    """The scenario part of the UI state, in friendly units (every declared field, plus the app's own)."""
    ui = {ui_key(sf): _to_ui(sf, getattr(s, sf.name)) for sf in _INPUT_FIELDS}
    ui.update(
        {
            "sites_toml": sites_toml(s.to_dict()),
            "moe": s.active_params is not None,
            "links": links_of(s),
            "duration_source": "manual",
            "growth_hardware": TREATY[0],
            "growth_software": TREATY[1],
            "growth_investment": TREATY[2],
        }
    )
    return ui


def default_ui(preset: str = DEFAULT_SCENARIO) -> dict[str, Any]:
    """Full UI state for a preset, with the app settings at their defaults."""
    ui: dict[str, Any] = {"preset": preset, **_APP_DEFAULTS}
    ui.update(ui_from_scenario(Scenario.from_dict(load_scenario_dict(preset))))
    return ui


def duration_s(ui: Mapping[str, Any]) -> float:
    """The time budget: manual days, or `timelimit.max_run_length_s` from the growth rates."""
    if ui["duration_source"] == "growth":
        return max_run_length_s(
            float(ui["growth_hardware"]), float(ui["growth_software"]), float(ui["growth_investment"])
        )
    return float(ui["duration_days"]) * units.SECONDS_PER_DAY


def _num(ui: Mapping[str, Any], key: str) -> float:
    v = ui[key]
    if v is None or isinstance(v, bool):
        raise InputError(key, f"must be a number, got {v!r}")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise InputError(key, f"must be a number, got {v!r}") from None


def _int(ui: Mapping[str, Any], key: str) -> int:
    v = _num(ui, key)
    if not v.is_integer():
        raise InputError(key, f"must be an integer, got {ui[key]!r}")
    return int(v)


def _from_ui(sf: ScenarioField, ui: Mapping[str, Any]) -> Any:
    """One UI value back in the Scenario's SI unit (only unit conversion; the model validates)."""
    key = ui_key(sf)
    if sf.kind in ("int", "float"):
        if sf.optional and ui[key] is None:
            return None
        if sf.kind == "int":
            return _int(ui, key)
        return _num(ui, key) * sf.spec.display_scale
    if sf.kind == "bool":
        return bool(ui[key])
    if sf.kind == "text":
        return str(ui[key])
    return ui[key]


def scenario_dict(ui: Mapping[str, Any]) -> dict[str, Any]:
    """UI state -> the SI dict `Scenario.from_dict` takes (only unit conversion; the model validates).

    Every declared field converts by its display scale; the app's own inputs then apply: MoE off
    clears the active parameters, the duration may come from the growth formula, Links = one drives
    the side links from the WAN.
    """

    def opt(key: str, scale: float) -> float | None:
        return None if ui[key] is None else _num(ui, key) * scale

    out = {sf.name: _from_ui(sf, ui) for sf in _INPUT_FIELDS}
    if not bool(ui["moe"]):
        out["active_params"], out["moe_layers"] = None, 0
    out["duration_s"] = duration_s(ui)
    one = ui.get("links", "one") == "one"
    wan_min = min(_num(ui, "up_mbps"), _num(ui, "down_mbps")) * 1e6
    out.update(_links_dict(ui, one, wan_min, _num(ui, "latency_ms") * 1e-3, opt))
    mixed = parse_sites_toml(str(ui.get("sites_toml") or ""))
    if mixed:
        out["site"] = mixed["site"]
        if mixed.get("churn"):
            out["churn"] = mixed["churn"]
        out.pop("num_nodes", None)  # the sites' total
    return out


@dataclass
class Built:
    """A UI state turned into a Scenario, or the one-line reason it could not be; plus warnings."""

    scenario: Scenario | None
    mode: Mode
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


#: The state a "use this plan" action (or a preset) started from: a label and its scenario inputs.
Origin = Mapping[str, Any]


def scenario_inputs(ui: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario part of a UI state (every scenario input but the name), to compare two states."""
    return {k: ui.get(k) for k in SCENARIO_KEYS if k != "name"}


def edited_keys(ui: Mapping[str, Any], origin: Origin | None = None) -> list[str]:
    """The scenario inputs that differ from where the state started: the plan taken with "use this plan"
    (``origin["inputs"]``), else the preset."""
    start = origin["inputs"] if origin else scenario_inputs(default_ui(ui.get("preset", DEFAULT_SCENARIO)))
    now = scenario_inputs(ui)
    return [k for k in now if now[k] != start.get(k) or type(now[k]) is not type(start.get(k))]


def scenario_label(ui: Mapping[str, Any], origin: Origin | None = None) -> str:
    """Which scenario every view shows: "preset intellect1", "preset intellect1, edited: Nodes (sites),
    WAN upload" or "plan: 1e25 FLOP, 48 x 8x a100_80gb fp16, ..." (plus ", edited: ..." after an edit)."""
    head = str(origin["label"]) if origin else f"preset {ui.get('preset', DEFAULT_SCENARIO)}"
    keys = edited_keys(ui, origin)
    if not keys:
        return head
    names = [FIELD_BY_KEY[k].name for k in keys]
    more = f" and {len(names) - 4} more" if len(names) > 4 else ""
    return f"{head}, edited: {', '.join(names[:4])}{more}"


def ui_from_plan(ui: Mapping[str, Any], p: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """ "Use this plan": the UI state with the plan's scenario (`Plan.to_dict()["scenario"]`) and mode in
    place of the sidebar's, and its origin (label, inputs) for `scenario_label`. App settings are kept."""
    new = dict(ui)
    new.update(ui_from_scenario(Scenario.from_dict(dict(p["scenario"]))))
    new["mode"] = str(p["mode"])
    return new, {"label": plan_label(p), "inputs": scenario_inputs(new)}


def build(ui: Mapping[str, Any], origin: Origin | None = None) -> Built:
    """Check every input in its own unit, then validate through the model (one-line errors either way).

    The scenario's name says where it came from: the preset's own title only while no input differs
    from the preset (an edited paper_threat_model is not "Table 1, 1e24 row"), else `scenario_label`."""
    try:
        mode = Mode(ui.get("mode", Mode.DEFAULT.value))
    except ValueError:
        return Built(None, Mode.DEFAULT, f"Mode: must be paper or default, got {ui.get('mode')!r}")
    keys = [f.key for f in FIELDS if f.scenario and not (f.key in _SPLIT_ONLY and ui.get("links") == "one")]
    for key in keys:
        if key in ("active_params_b", "moe_layers") and not ui.get("moe"):
            continue
        if key.startswith("growth_") and ui.get("duration_source") != "growth":
            continue
        if key == "duration_days" and ui.get("duration_source") == "growth":
            continue
        err = check_field(key, ui.get(key))
        if err:
            return Built(None, mode, err)
    warnings = plausibility_warnings(ui)
    try:
        s = Scenario.from_dict(scenario_dict(ui))
        if origin or edited_keys(ui):
            s = replace(s, name=scenario_label(ui, origin))
        return Built(s, mode, warnings=warnings)
    except (InputError, ValueError) as exc:
        return Built(None, mode, relabel(one_line(exc)), warnings=warnings)


_SPLIT_ONLY = ("regional_mbps", "regional_latency_ms", "pp_mbps", "pp_latency_ms")


def one_line(exc: BaseException) -> str:
    """First line of an exception's message (the model's InputError text is one line already)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- query parameters ------------------------------------------------------------------------------------


def encode(value: Any) -> str:
    """A UI value as query text: '' for None, 'true'/'false', repr for floats (exact round trip)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else repr(value).removesuffix(".0")
    return str(value)


def decode(key: str, text: str) -> Any:
    """Query text -> a UI value of the field's kind; ValueError with a readable reason."""
    fld = FIELD_BY_KEY[key]
    text = text.strip()
    if fld.kind in ("str",):
        return text
    if fld.kind == "choice":
        if text not in fld.choices:
            raise ValueError(f"must be one of {', '.join(fld.choices)}")
        return text
    if fld.kind == "bool":
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError("must be true or false")
    if fld.kind == "optfloat" and text == "":
        return None
    try:
        x = float(text)
    except ValueError:
        raise ValueError("must be a number") from None
    if not math.isfinite(x):
        raise ValueError("must be finite")
    if fld.kind == "int":
        if not x.is_integer():
            raise ValueError("must be an integer")
        return int(x)
    return x


def _first(v: Any) -> str:
    if isinstance(v, list | tuple):
        return str(v[-1]) if v else ""
    return str(v)


def check_text(key: str, value: Any) -> str | None:
    """The one-line error of a text setting the model parses (targets, premiums), or None."""
    from dispersal.present.questions import parse_premiums, parse_targets

    try:
        if key == "plan_target":
            parse_targets(str(value), allow_empty=False)
        elif key == "fr_targets":
            parse_targets(str(value), allow_empty=True)
        elif key == "fr_premiums":
            parse_premiums(str(value))
    except ValueError as exc:
        return f"{FIELD_BY_KEY[key].name}: {one_line(exc)}"
    return None


def ui_from_query(params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Query parameters -> full UI state, plus warnings for parameters that were ignored."""
    warnings: list[str] = []
    preset = _first(params.get("preset", DEFAULT_SCENARIO)) or DEFAULT_SCENARIO
    if preset not in FIELD_BY_KEY["preset"].choices:
        warnings.append(f"ignored preset={preset!r}: no such preset")
        preset = DEFAULT_SCENARIO
    ui = default_ui(preset)
    base = dict(ui)
    applied: dict[str, str] = {}
    for key, raw in params.items():
        if key in ("preset", ORIGIN_PARAM):
            continue
        if key not in FIELD_BY_KEY:
            warnings.append(f"ignored unknown parameter {key!r}")
            continue
        try:
            value = decode(key, _first(raw))
        except ValueError as exc:
            warnings.append(f"ignored {key}={_first(raw)!r}: {exc}")
            continue
        # A value outside its field's allowed range is never applied (issue 24: num_nodes=-4 blocked
        # every view): the preset's value stays and the warning names the field, range and value.
        err = check_field(key, value) or check_text(key, value)
        if err:
            warnings.append(f"ignored {key}={_first(raw)!r}: {err}")
            continue
        ui[key] = value
        applied[key] = _first(raw)
    if build(ui).scenario is None and build(base).scenario is not None:
        _drop_blocking(ui, base, applied, warnings)
    return ui, warnings


def _drop_blocking(
    ui: dict[str, Any], base: Mapping[str, Any], applied: Mapping[str, str], warnings: list[str]
) -> None:
    """Undo the link's values that the model rejects together (active > total parameters, FP8 on a chip
    without it): the last one whose undoing makes the scenario valid, else every scenario value. A link
    never opens on a blocked view (issue 24)."""
    keys = [k for k in applied if FIELD_BY_KEY[k].scenario]
    error = build(ui).error
    for key in reversed(keys):
        trial = {**ui, key: base[key]}
        if build(trial).scenario is not None:
            ui[key] = base[key]
            warnings.append(f"ignored {key}={applied[key]!r}: {error}")
            return
    for key in keys:
        ui[key] = base[key]
    warnings.append(f"ignored {', '.join(f'{k}={applied[k]!r}' for k in keys)}: together they give {error}")


#: The query parameter that carries a used plan's provenance ("plan: 1e+25 FLOP c_quality, ..."): a link
#: made after "use this plan" opens on the same scenario with the same "Scenario: plan: ..." label.
ORIGIN_PARAM = "from_plan"


def origin_from_query(params: Mapping[str, Any], ui: Mapping[str, Any]) -> dict[str, Any] | None:
    """The used plan's origin of a shared link (its label, with the link's scenario inputs as the plan's),
    or None when the link has none or a label that is not a plan's."""
    raw = params.get(ORIGIN_PARAM)
    text = str(raw[0] if isinstance(raw, list | tuple) and raw else raw or "").strip()
    if not text.startswith("plan: ") or len(text) > 400:
        return None
    return {"label": text, "inputs": scenario_inputs(ui)}


def query_from_ui(ui: Mapping[str, Any], origin: Origin | None = None) -> dict[str, str]:
    """UI state -> query parameters: preset, mode, every value that differs from the preset, and the used
    plan's label (`ORIGIN_PARAM`) while the scenario is that plan's (unedited)."""
    base = default_ui(ui.get("preset", DEFAULT_SCENARIO))
    out = {"preset": str(ui.get("preset", DEFAULT_SCENARIO)), "mode": encode(ui.get("mode", base["mode"]))}
    if origin and str(origin["label"]).startswith("plan: ") and not edited_keys(ui, origin):
        out[ORIGIN_PARAM] = str(origin["label"])
    for f in FIELDS:
        if f.key in ("preset", "mode") or f.key not in ui:
            continue
        if ui[f.key] != base[f.key] or type(ui[f.key]) is not type(base[f.key]):
            out[f.key] = encode(ui[f.key])
    return out


def parse_flop(text: str) -> float:
    """'1e25' or '10 YFLOP'-style text -> FLOP (the model's unit parser)."""
    return units.parse_flop(text, "target")
