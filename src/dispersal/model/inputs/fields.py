"""One declaration per Scenario field: its unit, bounds, label and help.

`Scenario` declares every field as ``name: type = spec(default, label=..., unit=..., lo=...)``.
Everything else reads that one declaration:

- `Scenario.__post_init__` checks the type and the bounds (`FieldSpec.check`);
- `Scenario.from_dict`, and so the CLI's ``--set key=value`` and scenario files, parse text with
  units ("100Mbps", "40ms", "91B") by the field's quantity (`FieldSpec.parse`);
- the web app builds its inputs from it (label, display unit and scale, bounds, plausible range,
  help: `dispersal.app.logic`);
- ``dispersal fields`` and docs/scenario_fields.md list it.

Cross-field rules (active <= total parameters, FP8 on a chip that has it, a ring cannot sum sparse
payloads) stay in `Scenario.__post_init__`. Pure: stdlib only, plus the model's `units` and `errors`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError

T = TypeVar("T")

#: How text is parsed, per quantity (numbers pass through unchanged).
_PARSERS: dict[str, Callable[[Any, str], float]] = {
    "bandwidth": units.parse_bandwidth,
    "duration": units.parse_duration,
    "bytes": units.parse_bytes,
    "flop_rate": units.parse_flop_rate,
    "count": units.parse_count,
    "money": units.parse_money,
}
QUANTITIES: tuple[str, ...] = ("", *_PARSERS)

KINDS = ("float", "int", "bool", "choice", "text")


@dataclass(frozen=True, kw_only=True, slots=True)
class FieldSpec:
    """What one Scenario field means and allows. Bounds and the plausible range are in SI units."""

    label: str
    """Short human name, e.g. "WAN upload"; the app and error messages use it."""
    help: str
    """One or two sentences: what it is, the default's source, what empty means."""
    unit: str = ""
    """Unit of the stored (SI) value, e.g. "bit/s", "s", "B"; "" for dimensionless."""
    quantity: str = ""
    """Unit family for parsing text (bandwidth, duration, bytes, flop_rate, count, money); "" = plain."""
    lo: float | None = None
    lo_open: bool = False
    hi: float | None = None
    hi_open: bool = False
    display_unit: str = ""
    """Unit a person types in the app ("Mbps"); "" = the SI unit as it is."""
    display_scale: float = 1.0
    """SI units per display unit (1e6 for Mbps over bit/s)."""
    plausible: tuple[float, float] | None = None
    """Sanity range (SI): outside it the model still computes, the app warns."""
    plausible_why: str = ""
    ui_key: str = ""
    """The app's form / URL key when it differs from the field name (stable shared links)."""
    glossary: str = ""
    """Glossary term (docs/glossary.md) the app links from the help."""
    choices: Callable[[], Sequence[str]] | None = None
    """Allowed names for a text field (catalogue entries); enums list their own values."""
    lookup: Callable[[str], object] | None = None
    """Raises InputError (with suggestions) for an unknown name; used instead of a bare list."""

    def __post_init__(self) -> None:
        if self.quantity not in QUANTITIES:
            raise InputError("quantity", f"must be one of {', '.join(QUANTITIES)}, got {self.quantity!r}")
        if not self.display_scale > 0:
            raise InputError("display_scale", f"must be > 0, got {self.display_scale}")

    def bound_text(self, scale: float = 1.0, unit: str | None = None) -> str:
        """The allowed range in words: '> 0 bit/s', 'in (0, 1]', '>= 1'; '' when unbounded."""
        u = f" {self.unit if unit is None else unit}" if (self.unit if unit is None else unit) else ""

        def num(x: float) -> str:
            v = x / scale
            return f"{int(v):,}" if float(v).is_integer() and abs(v) < 1e15 else f"{v:.6g}"

        if self.lo is not None and self.hi is not None:
            left, right = ("(" if self.lo_open else "["), (")" if self.hi_open else "]")
            return f"in {left}{num(self.lo)}, {num(self.hi)}{right}{u}"
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {num(self.lo)}")
        if self.hi is not None:
            parts.append(f"{'<' if self.hi_open else '<='} {num(self.hi)}")
        return " and ".join(parts) + (u if parts else "")

    def in_bounds(self, x: float) -> bool:
        """Whether x (SI) lies within lo / hi."""
        if self.lo is not None and (x <= self.lo if self.lo_open else x < self.lo):
            return False
        return not (self.hi is not None and (x >= self.hi if self.hi_open else x > self.hi))


@dataclass(frozen=True, slots=True)
class ScenarioField:
    """A Scenario field with its declaration: name, kind, optional, default and spec."""

    name: str
    kind: str
    """float, int, bool, choice (an enum or a catalogue name) or text."""
    optional: bool
    """None is allowed (the mode derives the value)."""
    default: Any
    spec: FieldSpec
    enum: type[StrEnum] | None = None

    def choices(self) -> tuple[str, ...]:
        """The allowed values of a choice field (enum values or catalogue names); () otherwise."""
        if self.enum is not None:
            return tuple(e.value for e in self.enum)
        if self.spec.choices is not None:
            return tuple(self.spec.choices())
        return ()

    def check(self, value: Any) -> Any:
        """Validate one value of this field and return it normalised (enum members, ints).

        Raises InputError naming the field with the allowed range in the field's SI unit, e.g.
        ``num_nodes: must be an integer >= 1, got 0``.
        """
        name, sp = self.name, self.spec
        if value is None:
            if self.optional:
                return None
            raise InputError(name, "must be given (None is not allowed here)")
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise InputError(name, f"must be true or false, got {value!r}")
            return value
        if self.kind == "choice":
            if self.enum is not None:
                try:
                    return self.enum(value)
                except ValueError:
                    raise InputError(
                        name, f"must be one of {', '.join(self.choices())}, got {value!r}"
                    ) from None
            if sp.lookup is not None:
                sp.lookup(value)
            elif value not in self.choices():
                raise InputError(name, f"must be one of {', '.join(self.choices())}, got {value!r}")
            return value
        if self.kind == "text":
            if not isinstance(value, str):
                raise InputError(name, f"must be text, got {value!r}")
            return value
        if self.kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
            if not ok or not sp.in_bounds(float(value)):
                # Integers are counts of things named by the field itself: no unit in the message.
                bounds = sp.bound_text(unit="")
                raise InputError(name, f"must be an integer{' ' + bounds if bounds else ''}, got {value!r}")
            return value
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not sp.in_bounds(float(value)):
            # The message is built only here: a scenario checks ~55 fields every time it is made.
            bounds = sp.bound_text()
            raise InputError(name, f"must be a finite number{' ' + bounds if bounds else ''}, got {value!r}")
        return value

    def parse(self, value: Any) -> Any:
        """A user value (text with a unit, number, 'true') -> this field's type; None stays None.

        Text goes through the quantity's parser (units.parse_bandwidth for bit/s fields, ...);
        bounds are checked later by `check`.
        """
        name = self.name
        if value is None:
            return None
        if self.spec.quantity:
            return _PARSERS[self.spec.quantity](value, name)
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise InputError(name, f"must be true or false, got {value!r}")
        if self.kind in ("int", "float"):
            if isinstance(value, bool):
                raise InputError(
                    name, f"must be {'an integer' if self.kind == 'int' else 'a number'}, got {value!r}"
                )
            try:
                x = float(value)
            except (TypeError, ValueError):
                what = "an integer" if self.kind == "int" else "a number"
                raise InputError(name, f"must be {what}, got {value!r}") from None
            if self.kind == "int":
                if not x.is_integer():
                    raise InputError(name, f"must be an integer, got {value!r}")
                return int(x)
            return x
        return value if isinstance(value, str) else str(value)


def spec(default: T, **kw: Any) -> T:
    """A dataclass field with `default` and its `FieldSpec(**kw)` in the field's metadata.

    Typed as the default so ``x: float = spec(1.0, ...)`` reads as a plain default to type checkers.
    """
    field: T = dataclasses.field(default=default, metadata={"spec": FieldSpec(**kw)})
    return field


def _kind(type_text: str, default: Any) -> tuple[str, bool, type[StrEnum] | None]:
    optional = "None" in type_text
    base = type_text.replace("| None", "").replace("None |", "").strip()
    if isinstance(default, StrEnum):
        return "choice", optional, type(default)
    return {"bool": "bool", "int": "int", "float": "float"}.get(base, "text"), optional, None


def scenario_fields(cls: type) -> tuple[ScenarioField, ...]:
    """Every declared field of a dataclass (those built with `spec`), in declaration order."""
    out = []
    for f in dataclasses.fields(cls):
        sp = f.metadata.get("spec")
        if sp is None:
            continue
        kind, optional, enum = _kind(str(f.type), f.default)
        if kind == "text" and (sp.choices is not None or sp.lookup is not None):
            kind = "choice"
        out.append(ScenarioField(f.name, kind, optional, f.default, sp, enum))
    return tuple(out)


def describe(f: ScenarioField) -> dict[str, Any]:
    """One field as a plain dict (for ``dispersal fields --json`` and the docs table)."""
    sp = f.spec
    default = f.default.value if isinstance(f.default, StrEnum) else f.default
    return {
        "name": f.name,
        "label": sp.label,
        "kind": f.kind,
        "optional": f.optional,
        "default": default,
        "unit": sp.unit,
        "allowed": sp.bound_text() or (", ".join(f.choices()) if f.kind == "choice" else ""),
        "display_unit": sp.display_unit or sp.unit,
        "display_scale": sp.display_scale,
        "plausible": list(sp.plausible) if sp.plausible else None,
        "help": sp.help,
    }


def markdown_table(fields: Sequence[ScenarioField]) -> str:
    """docs/scenario_fields.md: every Scenario field with its unit, default, allowed values and help."""

    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = [
        "# Scenario fields",
        "",
        "Every input of a run, declared once in `src/dispersal/model/inputs/scenario_fields.py` (unit, bounds, label,",
        "help). Validation, parsing of `--set key=value` and scenario files, the CLI's `dispersal fields`",
        "and the web app's inputs all read that declaration. Values are in SI units; text with units",
        '("100Mbps", "40ms", "91B", "80GB") is parsed by the field\'s quantity. Regenerate this page with',
        "`dispersal fields --markdown > docs/scenario_fields.md` (a test checks it is current).",
        "",
        "| field | label | unit | default | allowed | help |",
        "|---|---|---|---|---|---|",
    ]
    for f in fields:
        d = describe(f)
        default = "None" if d["default"] is None else d["default"]
        allowed = d["allowed"] + (" or None" if f.optional else "")
        lines.append(
            f"| `{f.name}` | {cell(d['label'])} | {cell(d['unit'])} | {cell(default)} | {cell(allowed)} | "
            f"{cell(d['help'])} |"
        )
    return "\n".join(lines) + "\n"
