"""The calibration file: a versioned TOML that replaces some ModelParams fields (pure Python).

Layout (schema_version 1)::

    schema_version = 1
    name, created, command, dispersal_version, torch_version, python_version, machine
    seeds = [0, 1]
    [params]        ModelParams fields this file sets (validated by ModelParams)
    [published]     the values they replace (the shipped defaults), for the record
    [uncertainty]   one-sigma bootstrap error of each fitted field (same units)
    [measured.*]    per-size and per-point measurements behind the fit (informational)

``load_calibration(path)`` returns ``DEFAULT_PARAMS`` with the ``[params]`` fields replaced. Any
problem is an ``InputError`` whose one-line message names the field.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import tomllib
from pathlib import Path
from typing import Any

from dispersal.model.errors import InputError
from dispersal.model.params import DEFAULT_PARAMS, ModelParams

SCHEMA_VERSION = 1
TABLE_FIELDS = {"compression_table": 7, "activation_table": 4}


def _num(v: Any, field: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(field, f"must be a number, got {v!r}")
    if not math.isfinite(float(v)):
        raise InputError(field, f"must be finite, got {v!r}")
    return float(v)


def params_from_mapping(data: dict[str, Any], prefix: str = "params") -> ModelParams:
    """Validate a ``[params]`` table and apply it to the shipped defaults."""
    names = {f.name for f in dataclasses.fields(ModelParams)}
    changes: dict[str, Any] = {}
    for k, v in data.items():
        field = f"{prefix}.{k}"
        if k not in names:
            raise InputError(field, "not a ModelParams field")
        if k in TABLE_FIELDS:
            width = TABLE_FIELDS[k]
            if not isinstance(v, list) or not v:
                raise InputError(field, f"must be a non-empty list of rows of {width} numbers")
            rows: list[tuple[float, ...]] = []
            for i, row in enumerate(v):
                if not isinstance(row, list) or len(row) != width:
                    raise InputError(f"{field}[{i}]", f"must be a row of {width} numbers, got {row!r}")
                vals = tuple(_num(x, f"{field}[{i}]") for x in row)
                if vals[0] < 1 or (rows and vals[0] <= rows[-1][0]):
                    raise InputError(f"{field}[{i}]", "first column must be >= 1 and strictly increasing")
                if not all(0 < x <= 1 for x in vals[1:]):
                    raise InputError(f"{field}[{i}]", f"quality values must be in (0, 1], got {list(vals[1:])}")
                rows.append(vals)
            changes[k] = tuple(rows)
        else:
            changes[k] = _num(v, field)
    try:
        return DEFAULT_PARAMS.replace(**changes)
    except InputError as exc:
        raise InputError(f"{prefix}.{exc.field}", str(exc).split(": ", 1)[-1]) from None


def read_calibration(path: str | Path) -> dict[str, Any]:
    """The raw TOML, with the header checked."""
    p = Path(path)
    if not p.is_file():
        raise InputError("calibration", f"file not found: {p}")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError("calibration", f"{p}: not valid TOML: {str(exc).splitlines()[0]}") from None
    sv = data.get("schema_version")
    if sv is None:
        raise InputError("schema_version", f"missing in {p}")
    if sv != SCHEMA_VERSION:
        raise InputError("schema_version", f"must be {SCHEMA_VERSION}, got {sv!r}")
    if not isinstance(data.get("params"), dict) or not data["params"]:
        raise InputError("params", f"missing or empty [params] table in {p}")
    return data


def load_calibration(path: str | Path) -> ModelParams:
    """ModelParams with a calibration file's ``[params]`` applied (validated; InputError names the field)."""
    return params_from_mapping(read_calibration(path)["params"])


# ---------------------------------------------------------------------------------------- writing
def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(float(f"{v:.6g}"))
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, _dt.date):
        return v.isoformat()
    if isinstance(v, list | tuple):
        inner = ", ".join(_fmt(x) for x in v)
        if v and isinstance(v[0], list | tuple):
            return "[\n  " + ",\n  ".join(_fmt(x) for x in v) + ",\n]"
        return f"[{inner}]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else _fmt(k)


def dumps(data: dict[str, Any], comments: dict[str, str] | None = None) -> str:
    """A small TOML writer (scalars, strings, arrays, nested tables); ``comments`` by table name."""
    comments = comments or {}
    lines: list[str] = []

    def emit(table: dict[str, Any], path: list[str]) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        subs = {k: v for k, v in table.items() if isinstance(v, dict)}
        if path and (scalars or not subs):
            name = ".".join(_key(p) for p in path)
            if lines:
                lines.append("")
            if name in comments:
                lines.extend(f"# {c}" for c in comments[name].splitlines())
            lines.append(f"[{name}]")
        for k, v in scalars.items():
            lines.append(f"{_key(k)} = {_fmt(v)}")
        for k, v in subs.items():
            emit(v, [*path, k])

    emit(data, [])
    return "\n".join(lines) + "\n"
