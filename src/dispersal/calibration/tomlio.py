"""The calibration file: a versioned TOML that replaces some ModelParams fields (pure Python).

Layout (schema_version 1)::

    schema_version = 1
    name, created, command, dispersal_version, torch_version, python_version, machine
    seeds = [0, 1]
    [params]        ModelParams fields this file sets (validated by ModelParams)
    [published]     the values they replace (the shipped defaults), for the record
    [uncertainty]   one-sigma bootstrap error of each fitted field (same units)
    [measured.*]    per-size and per-point measurements behind the fit (informational)

    [range]         what the runs measured: params = [lo, hi] (parameters), compression_ratio_ef,
                    compression_ratio_no_ef = [lo, hi] (C_r against a 16-bit payload); optional:
                    derived from [measured.*] when absent
    [measured_points] per-configuration efficiencies (parallel arrays; the shape checks' input)

``load_calibration(path)`` returns ``DEFAULT_PARAMS`` with the ``[params]`` fields replaced **only
inside the range the file measured** (issue 12: published tables are the default source of the
penalty fits; a calibration file never replaces a published entry outside the range it measured):

* ``compression_table``: columns with error feedback take the file's values up to the largest
  ratio measured with error feedback, columns without up to the largest measured without; beyond
  that the published rows stay (a row is added at each measured edge, from the file's table).
* size laws (``eta_h_alpha0``, ``eta_h_size_scale``, ``replica_beta_coeff``,
  ``replica_beta_exponent``) and any other field act at every model size, so a file that measured
  a parameter range does not apply them (they are reported in ``apply_calibration(...).withheld``)
  unless ``extrapolate=True`` (the calibration report's what-if headline).
* A file that declares no measured range at all (no ``[range]``, no ``[measured.*]``) is an explicit
  hand-written override and is applied as written, with a note saying so.

Any problem is an ``InputError`` whose one-line message names the field.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from pathlib import Path
from typing import Any

from dispersal._io import read_input_toml
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams

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
                    raise InputError(
                        f"{field}[{i}]", f"quality values must be in (0, 1], got {list(vals[1:])}"
                    )
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
    if not p.exists():
        raise InputError("calibration", f"file not found: {p}")
    # Bounded (dispersal._io.MAX_INPUT_BYTES), regular files only; every error names the path.
    data = read_input_toml(p, "calibration")
    sv = data.get("schema_version")
    if sv is None:
        raise InputError("schema_version", f"missing in {p}")
    if sv != SCHEMA_VERSION:
        raise InputError("schema_version", f"must be {SCHEMA_VERSION}, got {sv!r}")
    if not isinstance(data.get("params"), dict) or not data["params"]:
        raise InputError("params", f"missing or empty [params] table in {p}")
    return data


EF_CODECS = frozenset({"topk"})
"""Testbed codecs that use error feedback (the table's EF columns); the rest (int8, int4, bf16) do not."""


def measured_range(data: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """The ranges a calibration file measured: ``[range]`` if present, else derived from
    ``[measured.*]`` (sizes' ``params``; codecs' ``ratio``, error feedback for top-k). Empty when the
    file declares none (a hand-written override)."""
    out: dict[str, tuple[float, float]] = {}
    rng = data.get("range")
    if isinstance(rng, dict):
        for k, v in rng.items():
            if not isinstance(v, list) or len(v) != 2:
                raise InputError(f"range.{k}", f"must be [low, high], got {v!r}")
            lo, hi = _num(v[0], f"range.{k}"), _num(v[1], f"range.{k}")
            if not 0 < lo <= hi:
                raise InputError(f"range.{k}", f"must satisfy 0 < low <= high, got {v!r}")
            out[k] = (lo, hi)
        return out
    measured = data.get("measured")
    if not isinstance(measured, dict):
        return out
    sizes = [float(v["params"]) for v in measured.values() if isinstance(v, dict) and "params" in v]
    if sizes:
        out["params"] = (min(sizes), max(sizes))
    for key, v in measured.items():
        if not (key.startswith("codec_") and isinstance(v, dict) and "ratio" in v):
            continue
        name = "compression_ratio_ef" if key[len("codec_") :] in EF_CODECS else "compression_ratio_no_ef"
        lo, hi = out.get(name, (1.0, 1.0))
        out[name] = (min(lo, 1.0), max(hi, float(v["ratio"])))
    return out


def _interp_rows(rows: tuple[tuple[float, ...], ...], cr: float, col: int) -> float:
    """A table column at C_r, linear in log10 C_r, held outside the table (as the kernel reads it)."""
    xs = [math.log10(r[0]) for r in rows]
    ys = [r[col] for r in rows]
    x = math.log10(max(cr, rows[0][0]))
    if x >= xs[-1]:
        return ys[-1]
    for i in range(len(xs) - 1):
        if x <= xs[i + 1]:
            t = (x - xs[i]) / (xs[i + 1] - xs[i])
            return ys[i] + t * (ys[i + 1] - ys[i])
    return ys[-1]


def merge_compression_table(
    published: tuple[tuple[float, ...], ...],
    measured: tuple[tuple[float, ...], ...],
    ef_max: float,
    no_ef_max: float,
) -> tuple[tuple[float, ...], ...]:
    """The published table with the measured values only up to the measured ratios: EF columns
    (1-3) from ``measured`` for C_r <= ef_max, no-EF columns (4-6) for C_r <= no_ef_max; rows at the
    two edges are added (from the measured table) so its values hold exactly up to each edge."""
    grid = sorted(
        {r[0] for r in published}
        | {r[0] for r in measured if r[0] <= max(ef_max, no_ef_max)}
        | {ef_max, no_ef_max}
    )
    out = []
    for cr in grid:
        row = [cr]
        for col in range(1, 7):
            edge = ef_max if col <= 3 else no_ef_max
            src = measured if cr <= edge * (1 + 1e-12) else published
            row.append(round(_interp_rows(src, cr, col), 6))
        out.append(tuple(row))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class AppliedCalibration:
    """What a calibration file changed: the parameters, and which fields it applied or withheld."""

    params: ModelParams
    applied: tuple[str, ...]
    withheld: tuple[str, ...]
    notes: tuple[str, ...]
    ranges: dict[str, tuple[float, float]]


def apply_calibration(data: dict[str, Any], *, extrapolate: bool = False) -> AppliedCalibration:
    """Apply a read calibration file under the range rule (module docstring)."""
    full = params_from_mapping(data["params"])  # validates every field first
    ranges = measured_range(data)
    if extrapolate or not ranges:
        note = (
            "extrapolate: every field applied at every size"
            if extrapolate
            else "no measured range declared: applied as an explicit override"
        )
        return AppliedCalibration(full, tuple(sorted(data["params"])), (), (note,), ranges)
    applied, withheld, notes = [], [], []
    changes: dict[str, Any] = {}
    lo, hi = ranges.get("params", (math.nan, math.nan))
    for k in sorted(data["params"]):
        if k == "compression_table":
            ef = ranges.get("compression_ratio_ef", (1.0, 1.0))[1]
            no_ef = ranges.get("compression_ratio_no_ef", (1.0, 1.0))[1]
            changes[k] = merge_compression_table(
                DEFAULT_PARAMS.compression_table, full.compression_table, ef, no_ef
            )
            applied.append(k)
            notes.append(
                f"compression_table: measured values used up to C_r {ef:g} (error feedback) and "
                f"{no_ef:g} (without); published rows beyond"
            )
        else:
            withheld.append(k)
            notes.append(
                f"{k}: not applied (a law for every model size; measured at {lo:.3g}-{hi:.3g} "
                "parameters): the published value stays; extrapolate=True applies it"
            )
    params = DEFAULT_PARAMS.replace(**changes) if changes else DEFAULT_PARAMS
    return AppliedCalibration(params, tuple(applied), tuple(withheld), tuple(notes), ranges)


def load_calibration(path: str | Path, *, extrapolate: bool = False) -> ModelParams:
    """ModelParams with a calibration file's ``[params]`` applied inside its measured range
    (validated; InputError names the field). See the module docstring for the rule."""
    return apply_calibration(read_calibration(path), extrapolate=extrapolate).params


def calibration_notes(path: str | Path) -> list[str]:
    """One line per field: applied inside its range, or withheld and why."""
    return list(apply_calibration(read_calibration(path)).notes)


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
