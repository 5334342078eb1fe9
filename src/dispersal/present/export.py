"""Results as files: JSON (non-finite numbers as null) and two-column CSV, for downloads and reports."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from typing import Any


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
