"""File output shared by every part of dispersal: JSON without NaN, atomic writes, PNG figures.

Writes go to a temporary file in the same folder and are renamed into place, so a crash or an error
never leaves a half-written output file.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any


def _clean(obj: Any) -> Any:
    """Make a structure JSON-safe: non-finite floats become null (JSON has no inf/NaN), numpy
    scalars and arrays become Python numbers and lists, sets and tuples become lists."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy scalar or array, torch tensor
        return _clean(obj.tolist())
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return obj


def dumps_json(obj: Any, *, indent: int | None = 2) -> str:
    """Serialise to strict JSON (RFC 8259: no NaN or Infinity) with non-finite floats as null.

    indent=None gives one line (JSON Lines)."""
    return json.dumps(_clean(obj), indent=indent, allow_nan=False)


def print_json(obj: Any) -> None:
    """Print JSON on stdout."""
    sys.stdout.write(dumps_json(obj) + "\n")


def _umask() -> int:
    """The process umask, read without changing it (Linux: /proc; elsewhere set and restore)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file atomically: a temporary file in the same folder, then renamed.

    The file gets the mode a plain ``open(path, "w")`` would give it (0666 less the umask, or the
    mode of the file it replaces), not mkstemp's 0600. A path that is a device or pipe
    (``/dev/null``, ``/dev/stdout``) is written in place: renaming over it would replace the device.
    Errors are OSError naming the path (the CLI prints them as one line, exit 2)."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        with open(path, "wb") as fh:
            fh.write(data)
        return
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
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
