"""The app's inputs: one `Field` per UI input (label, unit, help, allowed and plausible ranges), the
sidebar layout, and the one-line messages for a value outside its field's range.

The Scenario's own fields are derived from their one declaration in `dispersal.model.inputs.scenario`
(`SCENARIO_FIELDS`); only the app's own inputs and settings are listed here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispersal.model.inputs.catalog import regimes
from dispersal.model.inputs.fields import ScenarioField
from dispersal.model.inputs.presets import scenario_names
from dispersal.model.inputs.scenario import SCENARIO_FIELDS, Mode
from dispersal.present.formats import typed as show

QUALITIES = ("optimistic", "expected", "conservative")
DURATION_SOURCES = ("manual", "growth")
PLAN_METRICS = ("auto", "c_local", "c_quality")
PLAN_OBJECTIVES = ("cost", "nodes", "time")
PLAN_SEARCHES = ("auto", "bisect", "exact")
LINK_CHOICES = ("one", "split")


@dataclass(frozen=True)
class Field:
    """One UI input: its query-parameter name, kind, label, help, unit and allowed / plausible ranges.

    ``lo``/``hi`` are the allowed bounds in the field's own unit (open when ``lo_open``/``hi_open``):
    they mirror the model's rules so an error can be worded in the unit the user typed ("WAN upload:
    must be > 0 Mbps, got -5 Mbps"); the model still validates every value it is given.
    ``plausible`` is a sanity range: a value outside it is allowed but draws a warning.
    """

    key: str
    kind: str
    """str, choice, int, float, optfloat (None allowed, shown empty) or bool."""
    label: str
    help: str = ""
    choices: tuple[str, ...] = ()
    scenario: bool = True
    """Part of the Scenario (reset when the preset changes) or an app setting (kept)."""
    unit: str = ""
    lo: float | None = None
    lo_open: bool = False
    hi: float | None = None
    hi_open: bool = False
    plausible: tuple[float, float] | None = None
    plausible_why: str = ""

    @property
    def name(self) -> str:
        """The label without its trailing unit: 'WAN upload (Mbps)' -> 'WAN upload'."""
        suffix = f" ({self.unit})"
        return self.label.removesuffix(suffix) if self.unit else self.label


def _choices() -> dict[str, tuple[str, ...]]:
    return {
        # Every CLI preset, mixed-site ([[site]]) ones included (issue 34).
        "preset": tuple(scenario_names()),
        "mode": tuple(m.value for m in Mode),
        "regime": tuple(regimes()),
    }


#: Glossary anchors (docs/glossary.md, shown in the app's Glossary section) used in help texts.
def _g(term: str) -> str:
    return f" [Glossary: {term}](#g-{slug(term)})"


def slug(term: str) -> str:
    """Anchor id of a glossary term: lower case, runs of other characters -> '-'."""
    return "".join(c if c.isalnum() else "-" for c in term.lower()).strip("-")


def _fields() -> tuple[Field, ...]:
    """Every app-only input and setting: scenario extras, then the Planner's and Resilience's settings."""
    c = _choices()
    return _scenario_extras(c) + _planner_fields(c) + _resilience_fields() + _view_fields()


def _scenario_extras(c: Mapping[str, tuple[str, ...]]) -> tuple[Field, ...]:
    """Preset, mode and the app's own scenario inputs (MoE, links, the duration's source and growth)."""
    f = Field
    # App-only inputs and settings. The Scenario's own fields are not listed here: `_scenario_fields`
    # derives them from their one declaration in dispersal.model.inputs.scenario (label, unit, bounds, help).
    return (
        f(
            "preset",
            "choice",
            "Preset scenario",
            "A shipped scenario: the paper's Table 1 rows and INTELLECT-1. Changing it resets every scenario input.",
            c["preset"],
            scenario=False,
        ),
        f(
            "mode",
            "choice",
            "Mode",
            "paper: Rahman 2026's settings exactly (its tables quote this mode, metric C_local); default: the "
            "project's model (adds outer-optimizer state, activations, energy, co-located side links)."
            + _g("paper mode / default mode"),
            c["mode"],
            scenario=False,
        ),
        f("moe", "bool", "Mixture of experts", "Active parameters per token differ from the total."),
        f(
            "links",
            "choice",
            "Links",
            "one: the WAN above drives every link (regional and pipeline links = min(up, down), WAN latency), as "
            "in the paper and `dispersal plan`; split: set the regional and pipeline links yourself "
            "(Hierarchical and pipeline links section).",
            LINK_CHOICES,
        ),
        f(
            "duration_source",
            "choice",
            "Maximum duration from",
            "manual days, or Epoch's growth-rate formula for the longest rational run.",
            DURATION_SOURCES,
        ),
        f(
            "growth_hardware",
            "float",
            "Hardware growth (x per year)",
            "Treaty scenario: 1.06.",
            unit="x per year",
            lo=0,
            lo_open=True,
            plausible=(1, 10),
            plausible_why="growth outside 1-10x a year",
        ),
        f(
            "growth_software",
            "float",
            "Software growth (x per year)",
            "Treaty scenario: 1.50.",
            unit="x per year",
            lo=0,
            lo_open=True,
            plausible=(1, 10),
            plausible_why="growth outside 1-10x a year",
        ),
        f(
            "growth_investment",
            "float",
            "Investment growth (x per year)",
            "Treaty scenario: 1.03.",
            unit="x per year",
            lo=0,
            lo_open=True,
            plausible=(1, 10),
            plausible_why="growth outside 1-10x a year",
        ),
    )


def _planner_fields(c: Mapping[str, tuple[str, ...]]) -> tuple[Field, ...]:
    """The Planner tab's settings (kept across presets)."""
    f = Field
    return (
        f(
            "plan_target",
            "str",
            "Target compute (FLOP)",
            "e.g. 1e25, measured in the metric below." + _g("C_local"),
            scenario=False,
        ),
        f(
            "plan_regime",
            "choice",
            "Regime",
            "Covered-cluster rule every planned node stays under.",
            c["regime"],
            scenario=False,
        ),
        f(
            "plan_metric",
            "choice",
            "Metric",
            "auto = c_local in paper mode (the paper's tables), c_quality in default." + _g("C_quality"),
            PLAN_METRICS,
            scenario=False,
        ),
        f(
            "plan_objective",
            "choice",
            "Objective",
            "What the planner minimises.",
            PLAN_OBJECTIVES,
            scenario=False,
        ),
        f(
            "plan_search",
            "choice",
            "Search",
            "auto = bisect in paper mode (the paper's), exact in default (the true optimum).",
            PLAN_SEARCHES,
            scenario=False,
        ),
    )


#: The Fleet view's metrics (`dispersal fleet --metric`).
FLEET_METRICS = ("c_quality", "c_local", "loss")
#: The app's views, in tab order (``?view=frontier`` opens the Frontier tab); the tab label is the title.
VIEWS = (
    "estimate",
    "planner",
    "frontier",
    "monitor",
    "fleet",
    "countermeasures",
    "uncertainty",
    "resilience",
)


def _view_fields() -> tuple[Field, ...]:
    """The Frontier, Monitor and Fleet views' settings (kept across presets; in the URL), and the mixed
    sites of the scenario (a Scenario input: reset with the preset)."""
    f = Field
    return (
        f(
            "view",
            "choice",
            "View",
            "The open tab: a shared link reopens the same view (?view=frontier).",
            VIEWS,
            scenario=False,
        ),
        f(
            "sites_toml",
            "str",
            "Sites ([[site]] / [[churn]] TOML)",
            "Mixed sites, as in a scenario file: one [[site]] table per site (name, nodes, region, hardware, "
            "chips_per_node, bandwidth_up_bits_per_s, bandwidth_down_bits_per_s, latency_s; units as text "
            "such as '1.2 Gbps' allowed) and optional [[churn]] rows (hour, site, nodes). Empty = Nodes (sites) "
            "identical nodes on the WAN above. With sites, each site's fields override the sidebar's.",
        ),
        f(
            "fr_targets",
            "str",
            "Frontier targets (FLOP)",
            "Comma list, e.g. 1e24, 1e25, 1e26; empty = the Planner's target.",
            scenario=False,
        ),
        f(
            "fr_premiums",
            "str",
            "Premiums (x one datacenter)",
            "Comma list of cost multiples of one building's plan, each >= 1 (dispersal frontier --premium).",
            scenario=False,
        ),
        f(
            "fr_samples",
            "int",
            "Monte Carlo draws per target",
            "For P(reach) and the P10-P90 bands per cell (dispersal frontier --samples); 0 = none.",
            scenario=False,
            lo=0,
            hi=10_000,
        ),
        f(
            "mon_lose_sites",
            "int",
            "Sites lost (for ever)",
            "Survivability: this many of the N sites go dark (dispersal frontier --compare --lose-sites).",
            scenario=False,
            lo=0,
            hi=1_000_000,
        ),
        f(
            "fleet_metric",
            "choice",
            "Best by",
            "c_quality / c_local: the most compute; loss: the lowest final loss (dispersal fleet --metric).",
            FLEET_METRICS,
            scenario=False,
        ),
    )


def _resilience_fields() -> tuple[Field, ...]:
    """The Resilience tab's settings (kept across presets)."""
    f = Field
    return (
        f(
            "res_chip_mtbf_h",
            "float",
            "Chip MTBF (h)",
            "Mean time between interruptions per chip; Llama 3: ~50,678 h.",
            scenario=False,
            unit="h",
            lo=0,
            lo_open=True,
            plausible=(100, 10_000_000),
            plausible_why="chips failing more often than every 100 h or less than every 1,000 years",
        ),
        f(
            "res_restart_h",
            "float",
            "Restart time (h)",
            "Time to restart a job or island from saved state.",
            scenario=False,
            unit="h",
            lo=0,
            plausible=(0, 168),
            plausible_why="a restart longer than a week",
        ),
        f(
            "res_max_chips",
            "float",
            "Largest fleet on the x axis (chips)",
            "Right end of the goodput chart.",
            scenario=False,
            unit="chips",
            lo=1,
            # The most chips `dispersal resilience --chips` takes (its MAX_CHIPS): beyond it the chart's
            # log axis overflowed ("math domain error" at 1e30, issue 24).
            hi=1e9,
            plausible=(1, 1e9),
            plausible_why="more than a billion chips",
        ),
        f(
            "res_lose_sites",
            "int",
            "Sites that go dark",
            "How many of the scenario's sites are lost at once (0 = none); sites are equal shares, so which ones "
            "does not matter." + _g("site"),
            scenario=False,
            unit="sites",
            lo=0,
        ),
        f(
            "res_lose_at_days",
            "float",
            "Go dark after (days)",
            "When the sites are lost, after the start.",
            scenario=False,
            unit="days",
            lo=0,
        ),
        f(
            "res_down_for_days",
            "optfloat",
            "Dark for (days)",
            "How long they stay dark; empty = for ever.",
            scenario=False,
            unit="days",
            lo=0,
            lo_open=True,
        ),
        f(
            "res_run_days",
            "optfloat",
            "Planned run (days)",
            "Sets the target work: what the intact fleet does in this time. Empty = this scenario's training time.",
            scenario=False,
            unit="days",
            lo=0,
            lo_open=True,
        ),
    )


#: Scenario fields the app handles itself: the schema version, and split_links (set by Links).
_NOT_INPUTS = ("schema_version", "split_links")
#: Sidebar sections (title, expanded, keys); scenario fields in none of them go to "More model settings".
LAYOUT: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
    (
        "Model and data",
        True,
        ("params_b", "moe", "active_params_b", "moe_layers", "tokens_t", "local_batch_tokens"),
    ),
    ("Nodes and network", True, ("num_nodes", "up_mbps", "down_mbps", "latency_ms", "links")),
    (
        "Hardware",
        False,
        (
            "hardware",
            "chips_per_node",
            "precision",
            "mfu",
            "chip_tflops",
            "chip_memory_gb",
            "chip_price_usd",
            "chip_tdp_w",
        ),
    ),
    ("Algorithm", False, ("algorithm", "overlap", "inner_steps", "straggler")),
    (
        "Compression",
        False,
        (
            "compression_ratio",
            "error_feedback",
            "compression_quality",
            "activation_compression",
            "activation_quality",
        ),
    ),
    (
        "Hierarchical and pipeline links",
        False,
        ("group_size", "regional_mbps", "regional_latency_ms", "pp_mbps", "pp_latency_ms", "micro_batches"),
    ),
    (
        "Maximum duration",
        False,
        ("duration_source", "duration_days", "growth_hardware", "growth_software", "growth_investment"),
    ),
    ("Regime and cost", False, ("regime", "pricing", "capex_multiplier", "pue", "electricity_usd_per_kwh")),
)


def ui_key(sf: ScenarioField) -> str:
    """The app's key (form and URL) of a Scenario field: its declared ui_key, else its name."""
    return sf.spec.ui_key or sf.name


def _scale(x: float | None, sf: ScenarioField) -> float | None:
    return None if x is None else x / sf.spec.display_scale


def _scenario_field(sf: ScenarioField) -> Field:
    """The UI input of one Scenario field, from its declaration (label, unit, bounds, help, plausible).

    Bounds and the plausible range are converted to the display unit (bit/s -> Mbps), so an error
    reads in the unit the user typed.
    """
    sp = sf.spec
    number = sf.kind in ("int", "float")
    unit = sp.display_unit or (sp.unit if sf.kind == "float" else "")
    kind = {
        "bool": "bool",
        "choice": "choice",
        "text": "str",
        "int": "optfloat" if sf.optional else "int",
        "float": "optfloat" if sf.optional else "float",
    }[sf.kind]
    label = f"{sp.label} ({unit})" if unit else sp.label
    plausible = None
    if sp.plausible is not None:
        lo, hi = sp.plausible
        plausible = (lo / sp.display_scale, hi / sp.display_scale)
    return Field(
        ui_key(sf),
        kind,
        label,
        sp.help + (_g(sp.glossary) if sp.glossary else ""),
        sf.choices(),
        unit=unit if sf.kind == "float" else (sp.unit if number else ""),
        lo=_scale(sp.lo, sf) if number else None,
        lo_open=sp.lo_open,
        hi=_scale(sp.hi, sf) if number else None,
        hi_open=sp.hi_open,
        plausible=plausible,
        plausible_why=sp.plausible_why,
    )


_INPUT_FIELDS: tuple[ScenarioField, ...] = tuple(sf for sf in SCENARIO_FIELDS if sf.name not in _NOT_INPUTS)
_SCENARIO_UI: tuple[Field, ...] = tuple(_scenario_field(sf) for sf in _INPUT_FIELDS)
_LAID_OUT = {k for _t, _e, keys in LAYOUT for k in keys}
#: Scenario fields in no sidebar section (new model fields appear here on their own).
GENERIC_KEYS: tuple[str, ...] = tuple(
    f.key for f in _SCENARIO_UI if f.key not in _LAID_OUT and f.key != "name"
)
FIELDS: tuple[Field, ...] = _fields() + _SCENARIO_UI
FIELD_BY_KEY: dict[str, Field] = {f.key: f for f in FIELDS}
SCENARIO_KEYS: tuple[str, ...] = tuple(f.key for f in FIELDS if f.scenario)
#: Scenario field -> UI field, so a model error names the input the user sees.
SCENARIO_TO_UI: dict[str, str] = {sf.name: ui_key(sf) for sf in _INPUT_FIELDS if ui_key(sf) != sf.name}


def _bound_text(f: Field) -> str:
    parts = []
    u = f" {f.unit}" if f.unit and f.kind != "int" else ""
    if f.lo is not None and f.hi is not None:
        left, right = ("(" if f.lo_open else "["), (")" if f.hi_open else "]")
        return f"in {left}{show(f.lo)}, {show(f.hi)}{right}{u}"
    if f.lo is not None:
        parts.append(f"{'>' if f.lo_open else '>='} {show(f.lo)}{u}")
    if f.hi is not None:
        parts.append(f"{'<' if f.hi_open else '<='} {show(f.hi)}{u}")
    return " and ".join(parts)


def check_field(key: str, value: Any) -> str | None:
    """The one-line error for one UI value in the field's own label and unit, or None when allowed.

    E.g. ``WAN upload: must be > 0 Mbps, got -5 Mbps``. Only kinds and bounds are checked here;
    cross-field rules (active <= total parameters, FP8 on a chip without it) stay with the model.
    """
    f = FIELD_BY_KEY[key]
    if f.kind not in ("int", "float", "optfloat"):
        return None
    if value is None:
        return None if f.kind == "optfloat" else f"{f.name}: must be a number, got nothing"
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            value = float(value)
        except (TypeError, ValueError):
            return f"{f.name}: must be a number, got {value!r}"
    x = float(value)
    u = f" {f.unit}" if f.unit and f.kind != "int" else ""
    if not math.isfinite(x):
        return f"{f.name}: must be a finite number, got {x}"
    if f.kind == "int" and not x.is_integer():
        return f"{f.name}: must be a whole number, got {show(x)}{u}"
    below = f.lo is not None and (x <= f.lo if f.lo_open else x < f.lo)
    above = f.hi is not None and (x >= f.hi if f.hi_open else x > f.hi)
    if below or above:
        kind = "an integer " if f.kind == "int" else ""
        return f"{f.name}: must be {kind}{_bound_text(f)}, got {show(x)}{u}"
    return None


def plausibility_warnings(ui: Mapping[str, Any]) -> list[str]:
    """Values that are allowed but outside any plausible range, one sentence each."""
    out = []
    for f in FIELDS:
        v = ui.get(f.key)
        if f.plausible is None or v is None or isinstance(v, bool) or not isinstance(v, int | float):
            continue
        lo, hi = f.plausible
        if not lo <= float(v) <= hi:
            u = f" {f.unit}" if f.unit else ""
            out.append(
                f"{f.name}: {show(float(v))}{u} is outside any plausible range ({show(lo)} to {show(hi)}{u}; "
                f"{f.plausible_why}). The model still computes it; read the result as an extrapolation."
            )
    return out


def relabel(message: str) -> str:
    """A model error 'field: ...' with the field replaced by the UI label ('bandwidth_up_bits_per_s' -> 'WAN upload')."""
    key, sep, rest = message.partition(":")
    ui_key = SCENARIO_TO_UI.get(key.strip(), key.strip())
    if sep and ui_key in FIELD_BY_KEY:
        return f"{FIELD_BY_KEY[ui_key].name}:{rest}"
    return message
