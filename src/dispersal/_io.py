"""File output shared by every part of dispersal: JSON without NaN, atomic writes, PNG figures.

Writes go to a temporary file in the same folder and are renamed into place, so a crash or an error
never leaves a half-written output file.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def _clean(obj: Any) -> Any:
    """Make a structure JSON-safe: non-finite floats become null (JSON has no inf/NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def dumps_json(obj: Any) -> str:
    """Serialise to indented JSON with non-finite floats as null."""
    return json.dumps(_clean(obj), indent=2, allow_nan=False)


def print_json(obj: Any) -> None:
    """Print JSON on stdout."""
    sys.stdout.write(dumps_json(obj) + "\n")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file atomically: a temporary file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write text atomically (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def save_figure(fig: Any, path: Path) -> None:
    """Save a matplotlib figure as PNG atomically, then close it (every caller is done with it)."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    finally:
        plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())
