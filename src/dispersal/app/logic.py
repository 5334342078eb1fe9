"""Pure helpers behind the web app: UI state <-> URL query parameters <-> Scenario, results -> tables.

No model formulas live here. Every number shown comes from `dispersal.model` (`estimate`, `plan`,
`timelimit.max_run_length_s`, `resilience.goodput_vs_scale`); this module only converts units for
display (Mbps, ms, days, billions), validates nothing itself (the model's `InputError` is the one
source of validation messages) and lays results out as rows, CSV and JSON.

The UI state is a flat dict of friendly-unit values keyed by the names in `FIELDS`; those names are
also the query parameters of a shared link (``?preset=intellect1&up_mbps=2000``). A link carries the
preset, the mode and only the values that differ from that preset.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispersal.model import units
from dispersal.model.catalog import accelerators, regimes
from dispersal.model.efficiency import Straggler
from dispersal.model.errors import InputError
from dispersal.model.presets import DEFAULT_SCENARIO, load_scenario_dict, scenario_names
from dispersal.model.scenario import Algorithm, Mode, Precision, Pricing, Scenario
from dispersal.model.timelimit import TREATY, max_run_length_s

QUALITIES = ("optimistic", "expected", "conservative")
DURATION_SOURCES = ("manual", "growth")
PLAN_METRICS = ("auto", "c_local", "c_quality")
PLAN_OBJECTIVES = ("cost", "nodes", "time")
PLAN_SEARCHES = ("auto", "bisect", "exact")


@dataclass(frozen=True)
class Field:
    """One UI input: its query-parameter name, kind and (for choices) the allowed values."""

    key: str
    kind: str
    """str, choice, int, float, optfloat (None allowed, shown empty) or bool."""
    label: str
    help: str = ""
    choices: tuple[str, ...] = ()
    scenario: bool = True
    """Part of the Scenario (reset when the preset changes) or an app setting (kept)."""


def _choices() -> dict[str, tuple[str, ...]]:
    return {
        "preset": tuple(scenario_names()),
        "mode": tuple(m.value for m in Mode),
        "hardware": tuple(accelerators()),
        "precision": tuple(p.value for p in Precision),
        "algorithm": tuple(a.value for a in Algorithm),
        "straggler": tuple(s.value for s in Straggler),
        "regime": tuple(regimes()),
        "pricing": tuple(p.value for p in Pricing),
    }


def _fields() -> tuple[Field, ...]:
    c = _choices()
    f = Field
    return (
        f(
            "preset",
            "choice",
            "Preset scenario",
            "A shipped scenario (the paper's tables)",
            c["preset"],
            scenario=False,
        ),
        f(
            "mode",
            "choice",
            "Mode",
            "paper: Rahman 2026's settings exactly; default: the project's model",
            c["mode"],
            scenario=False,
        ),
        f("name", "str", "Scenario name"),
        f("hardware", "choice", "Accelerator", "Catalogue entry (FLOP/s, memory, price, TDP)", c["hardware"]),
        f("chips_per_node", "int", "Chips per node", "0 = the most the regime's covered-cluster rule allows"),
        f("chip_tflops", "optfloat", "Custom: dense FP16 TFLOP/s per chip", "Empty = the catalogue's; FP8 scales with it"),
        f("chip_memory_gb", "optfloat", "Custom: memory per chip (GB)", "Empty = the catalogue's"),
        f("chip_price_usd", "optfloat", "Custom: price per chip ($)", "Empty = the catalogue's"),
        f("chip_tdp_w", "optfloat", "Custom: power per chip (W)", "Empty = the catalogue's"),
        f("precision", "choice", "Precision", "", c["precision"]),
        f("mfu", "float", "MFU", "Model FLOP utilisation in (0, 1]; paper 0.40"),
        f("moe", "bool", "Mixture of experts", "Active parameters differ from total"),
        f("params_b", "float", "Total parameters (billions)"),
        f("active_params_b", "optfloat", "Active parameters (billions)", "MoE only; empty = dense"),
        f(
            "moe_layers",
            "int",
            "Expert-parallel MoE layers",
            "MoE layers whose experts are spread over the WAN",
        ),
        f("tokens_t", "optfloat", "Tokens (trillions)", "Empty = as many as the time budget allows"),
        f("local_batch_tokens", "int", "Local batch (tokens per inner step per node)", "Paper: 131,072"),
        f("num_nodes", "int", "Nodes (sites)"),
        f("up_mbps", "float", "WAN upload (Mbps)"),
        f("down_mbps", "float", "WAN download (Mbps)"),
        f("latency_ms", "float", "WAN one-way latency (ms)"),
        f(
            "algorithm",
            "choice",
            "Algorithm",
            "streaming = DiLoCo with overlapped sync; diloco = no overlap",
            c["algorithm"],
        ),
        f(
            "overlap",
            "bool",
            "Overlap sync with compute (streaming)",
            "For auto, hierarchical, pp_diloco and ddp; streaming/diloco fix it",
        ),
        f("inner_steps", "int", "Inner steps H", "0 = the smallest compute-bound H"),
        f("compression_ratio", "float", "Pseudo-gradient compression ratio", ">= 1; paper 150 (SparseLoCo)"),
        f("error_feedback", "bool", "Error feedback"),
        f("compression_quality", "choice", "Compression quality (heuristic)", "", QUALITIES),
        f("activation_compression", "float", "Activation compression ratio", "Pipeline boundaries; >= 1"),
        f("activation_quality", "choice", "Activation compression quality (heuristic)", "", QUALITIES),
        f("micro_batches", "int", "Micro-batches (pipeline)"),
        f("group_size", "int", "Hierarchical group size", "Nodes per regional group (>= 2)"),
        f("regional_mbps", "optfloat", "Regional bandwidth (Mbps)", "Empty = mode default"),
        f("regional_latency_ms", "optfloat", "Regional latency (ms)", "Empty = mode default"),
        f("pp_mbps", "optfloat", "Pipeline link bandwidth (Mbps)", "Empty = mode default"),
        f("pp_latency_ms", "optfloat", "Pipeline link latency (ms)", "Empty = mode default"),
        f(
            "straggler",
            "choice",
            "Straggler mitigation",
            "relay (async relay), synchronous, threshold, backup workers",
            c["straggler"],
        ),
        f(
            "duration_source",
            "choice",
            "Maximum duration from",
            "manual days, or Epoch's growth-rate formula",
            DURATION_SOURCES,
        ),
        f("duration_days", "float", "Maximum duration (days)"),
        f("growth_hardware", "float", "Hardware growth (x per year)", "Treaty scenario: 1.06"),
        f("growth_software", "float", "Software growth (x per year)", "Treaty scenario: 1.50"),
        f("growth_investment", "float", "Investment growth (x per year)", "Treaty scenario: 1.03"),
        f("regime", "choice", "Regime", "Whose covered-cluster rule each node stays under", c["regime"]),
        f("pricing", "choice", "Pricing", "", c["pricing"]),
        f("capex_multiplier", "float", "Capex multiplier (chip -> cluster)"),
        f("pue", "float", "PUE"),
        f("electricity_usd_per_kwh", "float", "Electricity ($/kWh)"),
        # planner (app settings, kept across presets)
        f("plan_target", "str", "Target compute (FLOP)", "e.g. 1e25", scenario=False),
        f("plan_regime", "choice", "Regime", "", c["regime"], scenario=False),
        f(
            "plan_metric",
            "choice",
            "Metric",
            "auto = c_local in paper mode, c_quality in default",
            PLAN_METRICS,
            scenario=False,
        ),
        f("plan_objective", "choice", "Objective", "", PLAN_OBJECTIVES, scenario=False),
        f(
            "plan_search",
            "choice",
            "Search",
            "auto = bisect in paper mode, exact in default",
            PLAN_SEARCHES,
            scenario=False,
        ),
        # resilience (app settings)
        f("res_chip_mtbf_h", "float", "Chip MTBF (h)", "Llama 3: ~50,678 h per GPU", scenario=False),
        f("res_restart_h", "float", "Restart time (h)", scenario=False),
        f("res_max_chips", "float", "Largest fleet on the x axis (chips)", scenario=False),
    )


FIELDS: tuple[Field, ...] = _fields()
FIELD_BY_KEY: dict[str, Field] = {f.key: f for f in FIELDS}
SCENARIO_KEYS: tuple[str, ...] = tuple(f.key for f in FIELDS if f.scenario)

_APP_DEFAULTS: dict[str, Any] = {
    "mode": Mode.DEFAULT.value,
    "plan_target": "1e25",
    "plan_regime": "treaty",
    "plan_metric": "auto",
    "plan_objective": "cost",
    "plan_search": "auto",
    "res_chip_mtbf_h": 50_678.0,
    "res_restart_h": 10 / 60,
    "res_max_chips": 1_000_000.0,
}


def _nice(x: float) -> float:
    """A unit-converted float rounded to 12 significant digits (so 0.1 s -> 100 ms exactly)."""
    return float(f"{x:.12g}")


def ui_from_scenario(s: Scenario) -> dict[str, Any]:
    """The scenario part of the UI state, in friendly units."""
    opt = lambda v, scale: None if v is None else _nice(v / scale)  # noqa: E731
    return {
        "name": s.name,
        "hardware": s.hardware,
        "chips_per_node": int(s.chips_per_node),
        "chip_tflops": opt(s.chip_fp16_flop_per_s, 1e12),
        "chip_memory_gb": opt(s.chip_memory_bytes, 1e9),
        "chip_price_usd": opt(s.chip_price_usd, 1.0),
        "chip_tdp_w": opt(s.chip_tdp_w, 1.0),
        "precision": s.precision.value,
        "mfu": float(s.mfu),
        "moe": s.active_params is not None,
        "params_b": _nice(s.params / 1e9),
        "active_params_b": opt(s.active_params, 1e9),
        "moe_layers": int(s.moe_layers),
        "tokens_t": opt(s.tokens, 1e12),
        "local_batch_tokens": round(s.local_batch_tokens),
        "num_nodes": int(s.num_nodes),
        "up_mbps": _nice(s.bandwidth_up_bits_per_s / 1e6),
        "down_mbps": _nice(s.bandwidth_down_bits_per_s / 1e6),
        "latency_ms": _nice(s.latency_s * 1e3),
        "algorithm": s.algorithm.value,
        "overlap": bool(s.overlap_communication),
        "inner_steps": int(s.inner_steps),
        "compression_ratio": float(s.compression_ratio),
        "error_feedback": bool(s.error_feedback),
        "compression_quality": s.compression_quality,
        "activation_compression": float(s.activation_compression),
        "activation_quality": s.activation_quality,
        "micro_batches": int(s.micro_batches),
        "group_size": int(s.group_size),
        "regional_mbps": opt(s.regional_bandwidth_bits_per_s, 1e6),
        "regional_latency_ms": opt(s.regional_latency_s, 1e-3),
        "pp_mbps": opt(s.pp_bandwidth_bits_per_s, 1e6),
        "pp_latency_ms": opt(s.pp_latency_s, 1e-3),
        "straggler": s.straggler.value,
        "duration_source": "manual",
        "duration_days": _nice(s.duration_s / units.SECONDS_PER_DAY),
        "growth_hardware": TREATY[0],
        "growth_software": TREATY[1],
        "growth_investment": TREATY[2],
        "regime": s.regime,
        "pricing": s.pricing.value,
        "capex_multiplier": float(s.capex_multiplier),
        "pue": float(s.pue),
        "electricity_usd_per_kwh": float(s.electricity_usd_per_kwh),
    }


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


def scenario_dict(ui: Mapping[str, Any]) -> dict[str, Any]:
    """UI state -> the SI dict `Scenario.from_dict` takes (only unit conversion; the model validates)."""
    opt = lambda key, scale: None if ui[key] is None else _num(ui, key) * scale  # noqa: E731
    moe = bool(ui["moe"])
    return {
        "name": str(ui["name"]),
        "hardware": ui["hardware"],
        "chips_per_node": _int(ui, "chips_per_node"),
        "chip_fp16_flop_per_s": opt("chip_tflops", 1e12),
        "chip_memory_bytes": opt("chip_memory_gb", 1e9),
        "chip_price_usd": opt("chip_price_usd", 1.0),
        "chip_tdp_w": opt("chip_tdp_w", 1.0),
        "precision": ui["precision"],
        "mfu": _num(ui, "mfu"),
        "params": _num(ui, "params_b") * 1e9,
        "active_params": opt("active_params_b", 1e9) if moe else None,
        "moe_layers": _int(ui, "moe_layers") if moe else 0,
        "tokens": opt("tokens_t", 1e12),
        "local_batch_tokens": _num(ui, "local_batch_tokens"),
        "num_nodes": _int(ui, "num_nodes"),
        "bandwidth_up_bits_per_s": _num(ui, "up_mbps") * 1e6,
        "bandwidth_down_bits_per_s": _num(ui, "down_mbps") * 1e6,
        "latency_s": _num(ui, "latency_ms") * 1e-3,
        "algorithm": ui["algorithm"],
        "overlap_communication": bool(ui["overlap"]),
        "inner_steps": _int(ui, "inner_steps"),
        "compression_ratio": _num(ui, "compression_ratio"),
        "error_feedback": bool(ui["error_feedback"]),
        "compression_quality": ui["compression_quality"],
        "activation_compression": _num(ui, "activation_compression"),
        "activation_quality": ui["activation_quality"],
        "micro_batches": _int(ui, "micro_batches"),
        "group_size": _int(ui, "group_size"),
        "regional_bandwidth_bits_per_s": opt("regional_mbps", 1e6),
        "regional_latency_s": opt("regional_latency_ms", 1e-3),
        "pp_bandwidth_bits_per_s": opt("pp_mbps", 1e6),
        "pp_latency_s": opt("pp_latency_ms", 1e-3),
        "straggler": ui["straggler"],
        "duration_s": duration_s(ui),
        "regime": ui["regime"],
        "pricing": ui["pricing"],
        "capex_multiplier": _num(ui, "capex_multiplier"),
        "pue": _num(ui, "pue"),
        "electricity_usd_per_kwh": _num(ui, "electricity_usd_per_kwh"),
    }


@dataclass
class Built:
    """A UI state turned into a Scenario, or the one-line reason it could not be."""

    scenario: Scenario | None
    mode: Mode
    error: str | None = None


def build(ui: Mapping[str, Any]) -> Built:
    """Validate through the model: Scenario(...) raises InputError with a one-line message naming the field."""
    try:
        mode = Mode(ui.get("mode", Mode.DEFAULT.value))
    except ValueError:
        return Built(None, Mode.DEFAULT, f"mode: must be paper or default, got {ui.get('mode')!r}")
    try:
        return Built(Scenario.from_dict(scenario_dict(ui)), mode)
    except (InputError, ValueError) as exc:
        return Built(None, mode, one_line(exc))


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


def ui_from_query(params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Query parameters -> full UI state, plus warnings for parameters that were ignored."""
    warnings: list[str] = []
    preset = _first(params.get("preset", DEFAULT_SCENARIO)) or DEFAULT_SCENARIO
    if preset not in FIELD_BY_KEY["preset"].choices:
        warnings.append(f"ignored preset={preset!r}: no such preset")
        preset = DEFAULT_SCENARIO
    ui = default_ui(preset)
    for key, raw in params.items():
        if key == "preset":
            continue
        if key not in FIELD_BY_KEY:
            warnings.append(f"ignored unknown parameter {key!r}")
            continue
        try:
            ui[key] = decode(key, _first(raw))
        except ValueError as exc:
            warnings.append(f"ignored {key}={_first(raw)!r}: {exc}")
    return ui, warnings


def query_from_ui(ui: Mapping[str, Any]) -> dict[str, str]:
    """UI state -> query parameters: preset, mode, and every value that differs from the preset."""
    base = default_ui(ui.get("preset", DEFAULT_SCENARIO))
    out = {"preset": str(ui.get("preset", DEFAULT_SCENARIO)), "mode": encode(ui.get("mode", base["mode"]))}
    for f in FIELDS:
        if f.key in ("preset", "mode") or f.key not in ui:
            continue
        if ui[f.key] != base[f.key] or type(ui[f.key]) is not type(base[f.key]):
            out[f.key] = encode(ui[f.key])
    return out


# --- results -> rows, CSV, JSON -------------------------------------------------------------------------


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def to_json(d: Mapping[str, Any]) -> str:
    """Estimate.to_dict() as indented JSON (non-finite floats as null, since JSON has no inf/NaN)."""
    return json.dumps(_clean(dict(d)), indent=2, allow_nan=False) + "\n"


def flatten(d: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dict -> (dotted key, value) pairs; lists joined with '; '."""
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.extend(flatten(v, key + "."))
        elif isinstance(v, list | tuple):
            out.append((key, "; ".join(str(x) for x in v)))
        else:
            out.append((key, v))
    return out


def to_csv(d: Mapping[str, Any]) -> str:
    """Estimate.to_dict() as two-column CSV (key, value), full precision."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["key", "value"])
    for k, v in flatten(d):
        w.writerow([k, "" if v is None else (repr(v) if isinstance(v, float) else v)])
    return buf.getvalue()


def summary_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """Headline figures of an Estimate.to_dict()."""
    s = d["scenario"]
    algo = d["algorithm"] + (" (streaming)" if d["streaming"] else "")
    if d["algorithm"] == "hierarchical":
        algo += f", groups of {s['group_size']}"
    if d["algorithm"] == "pp_diloco":
        algo += f", {d['pipeline_stages']} stages x {d['groups']} groups"
    rows = [
        ("status", "feasible" if d["feasible"] else "INFEASIBLE: " + "; ".join(d["reasons"])),
        (
            "hardware",
            f"{d['num_nodes']:,} nodes x {d['chips_per_node']} x {s['hardware']} ({s['precision']}), "
            f"{d['node_h100_equivalents']:.2f} H100-equivalents per node",
        ),
        (
            "algorithm",
            f"{algo}, H = {d['inner_steps']}"
            + (f" (H_eff {d['inner_steps_effective']:.3g})" if d["algorithm"] == "hierarchical" else ""),
        ),
        (
            "model",
            f"{units.format_count(d['params'])} parameters ({units.format_count(d['active_params'])} active), "
            f"{units.format_count(d['tokens'])} tokens, overtraining {d['overtraining_ratio']:.3g}x",
        ),
        (
            "memory per node",
            f"{units.format_bytes(d['memory_required_bytes_per_node'])} needed of "
            f"{units.format_bytes(d['node_memory_bytes'])}",
        ),
        ("training time", f"{d['days']:.4g} days"),
        ("outer steps", f"{d['num_outer_steps']:.4g} of {units.format_duration(d['outer_step_time_s'])}"),
        (
            "inner step / sync",
            f"{units.format_duration(d['step_time_s'])} / {units.format_duration(d['sync_time_s'])}",
        ),
        ("payload per sync", units.format_bytes(d["payload_bytes_per_sync"])),
        ("C_raw", f"{d['c_raw_flop']:.4g} FLOP"),
        ("C_local", f"{d['c_local_flop']:.4g} FLOP"),
        ("C_quality", f"{d['c_quality_flop']:.4g} FLOP"),
        ("loss (Chinchilla fit)", f"{d['loss']:.4f}"),
        ("global MFU (C_local / peak)", f"{d['mfu_global']:.1%}"),
    ]
    return [{"quantity": k, "value": v} for k, v in rows]


BREAKDOWN_PARTS = (
    ("compute_s", "compute"),
    ("bubble_s", "pipeline bubble"),
    ("pipeline_comm_s", "pipeline transfers"),
    ("expert_parallel_s", "expert-parallel latency"),
    ("exposed_comm_s", "exposed sync"),
    ("straggler_s", "straggler wait"),
)


def breakdown_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """Where the run time goes (the model's TimeBreakdown), with shares of the run time."""
    b = d["breakdown"]
    total = d["run_time_s"] or 1.0
    rows = [
        {"part": label, "days": f"{b[k] / units.SECONDS_PER_DAY:.4g}", "share": f"{b[k] / total:.1%}"}
        for k, label in BREAKDOWN_PARTS
    ]
    rows.append(
        {
            "part": "sync hidden behind compute (not in the sum)",
            "days": f"{b['hidden_comm_s'] / units.SECONDS_PER_DAY:.4g}",
            "share": "",
        }
    )
    return rows


EFFICIENCY_STEPS = (
    ("eta_h", "sync interval (eta_H, heuristic)"),
    ("eta_comp", "compression (eta_comp, heuristic)"),
    ("eta_act", "activation compression (eta_act, heuristic)"),
    ("eta_rep", "replicas (eta_rep, fit + heuristic)"),
)


def waterfall_steps(d: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """(label, level before, level after) from C_raw through each factor to C_local, then chi to C_quality.

    The factors and the end points are the model's; the intermediate levels are C_raw times the
    running product of the factors (the spec's eta = eta_H x eta_comp x eta_act x eta_rep). The last
    two levels are the model's own C_local and C_quality.
    """
    e = d["efficiency"]
    level = float(d["c_raw_flop"])
    steps = []
    for i, (k, label) in enumerate(EFFICIENCY_STEPS):
        after = level * float(e[k]) if i < len(EFFICIENCY_STEPS) - 1 else float(d["c_local_flop"])
        steps.append((f"{label} x{float(e[k]):.3f}", level, after))
        level = after
    steps.append(
        (f"Chinchilla over/under-training (chi) x{float(e['chi']):.3f}", level, float(d["c_quality_flop"]))
    )
    return steps


def efficiency_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each efficiency factor, its label and the compute level after it."""
    rows = [{"step": "C_raw (6 P D)", "factor": "", "compute (FLOP)": f"{d['c_raw_flop']:.4g}"}]
    for label, _before, after in waterfall_steps(d):
        name, _, factor = label.rpartition(" x")
        rows.append({"step": name, "factor": factor, "compute (FLOP)": f"{after:.4g}"})
    rows.append({"step": "eta (product)", "factor": f"{d['efficiency']['eta']:.4f}", "compute (FLOP)": ""})
    return rows


def cost_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """The model's Cost, formatted."""
    c = d["cost"]
    return [
        {"item": "total (under the scenario's pricing)", "value": units.format_money(c["total_usd"])},
        {"item": "hardware purchase (x capex multiplier)", "value": units.format_money(c["hardware_usd"])},
        {"item": "rental alternative", "value": units.format_money(c["rental_usd"])},
        {"item": "energy", "value": f"{units.format_money(c['energy_usd'])} ({c['energy_kwh']:.4g} kWh)"},
    ]


def traffic_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """The model's per-node WAN Traffic, formatted."""
    t = d["traffic"]
    return [
        {"item": "bytes per sync (each direction)", "value": units.format_bytes(t["bytes_per_sync"])},
        {"item": "syncs per day", "value": f"{t['syncs_per_day']:.4g}"},
        {"item": "mean upload", "value": f"{t['mean_mbps']:.4g} Mbps"},
        {"item": "peak upload", "value": f"{t['peak_mbps']:.4g} Mbps"},
        {"item": "uplink duty cycle", "value": f"{t['duty_cycle']:.1%}"},
        {"item": "bytes per day (up + down)", "value": units.format_bytes(t["bytes_per_day"])},
    ]


def plan_rows(plan_dict: Mapping[str, Any]) -> list[dict[str, str]]:
    """The planner's cheapest option and runners-up (one per hardware), formatted."""
    rows = []
    for i, o in enumerate(plan_dict.get("runners_up", [])):
        rows.append(
            {
                "rank": str(i + 1),
                "node": f"{o['chips_per_node']}x {o['hardware']} {o['precision']}",
                "nodes": f"{o['nodes']:,}",
                "algorithm": o["algorithm"]
                + (f" (groups of {o['group_size']})" if o["algorithm"] == "hierarchical" else ""),
                "params": units.format_count(o["params"]),
                "days": f"{o['days']:.4g}",
                "cost": units.format_money(o["cost_usd"]),
                "C_local": f"{o['c_local_flop']:.3g}",
                "C_quality": f"{o['c_quality_flop']:.3g}",
                "mean WAN Mbps/node": f"{o['mean_wan_mbps_per_node']:.3g}",
            }
        )
    return rows


def parse_flop(text: str) -> float:
    """'1e25' or '10 YFLOP'-style text -> FLOP (the model's unit parser)."""
    return units.parse_flop(text, "target")


@dataclass
class Section:
    """A titled group of rows (for the report and the optional views)."""

    title: str
    rows: list[dict[str, str]] = field(default_factory=list)
