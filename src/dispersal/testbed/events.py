"""The run's event log: one JSON line per event in OUT/events.jsonl, appended by every process."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any


def log_event(out: Path, **fields: Any) -> None:
    """Append one JSON line to events.jsonl (small O_APPEND writes from several processes).

    Strict JSON: a non-finite float is written as its string ("nan", "inf")."""
    line = json.dumps({"t": round(time.time(), 3), **_strict(fields)}, allow_nan=False, default=str) + "\n"
    fd = os.open(out / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _strict(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, dict):
        return {str(k): _strict(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_strict(x) for x in v]
    return v
