"""The run's event log: one JSON line per event in OUT/events.jsonl, appended by every process."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
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


def repair_jsonl(path: Path, keep: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, int]:
    """Make a JSON-lines log whole again before it is appended to (on --resume): a torn last line (a
    process died mid-write: no newline) is cut off, as is any line that is not a JSON object (a torn
    fragment an older version glued to the next line); rows ``keep`` refuses are dropped too.
    Rewritten atomically only when something changed. Returns {"torn_bytes", "malformed_lines",
    "refused_lines"}."""
    got = {"torn_bytes": 0, "malformed_lines": 0, "refused_lines": 0}
    if not path.exists():
        return got
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    got["torn_bytes"] = len(data) - cut
    kept: list[bytes] = []
    for ln in data[:cut].splitlines():
        if not ln.strip():
            continue
        try:
            row = json.loads(ln)
        except (ValueError, RecursionError):
            row = None
        if not isinstance(row, dict):
            got["malformed_lines"] += 1
        elif keep is not None and not keep(row):
            got["refused_lines"] += 1
        else:
            kept.append(ln)
    if any(got.values()):
        from dispersal._io import atomic_write_text

        atomic_write_text(path, "".join(ln.decode(errors="replace") + "\n" for ln in kept))
    return got
