"""File input and output shared by every part of dispersal: bounded reads of user files, JSON
without NaN, atomic writes, PNG figures.

Writes go to a temporary file in the same folder, are flushed to disk (fsync) and renamed into
place, so a crash or an error never leaves a half-written output file, and a failed write never
leaves its temporary file behind. Reads of user files (scenario, sites, faults, calibration,
uncertainty) accept regular files only, up to `MAX_INPUT_BYTES`, and every error names the path.
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

from dispersal.errors import InputError

MAX_INPUT_BYTES = 16 * 2**20
"""Largest user input file read, bytes (16 MiB). The largest file dispersal ships is
``data/published_runs.toml`` at 0.4 MB and a hand-written scenario with a thousand sites is well
under 1 MB, so 16 MiB leaves 40x headroom while refusing a mistyped multi-GB file before it is read
into memory (assumption: no legitimate input is larger)."""


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


def _input_error(option: str, message: str) -> ValueError:
    return InputError(option, message)


def read_input_bytes(path: str | os.PathLike[str], option: str, *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """A user file's bytes: a regular file of at most ``limit`` bytes, else one InputError naming
    ``option`` and the path (missing, a folder, a pipe or device, too large, unreadable).

    A FIFO or device is refused before it is opened for reading (``/dev/zero`` would never end; a
    FIFO would block), and the size is checked again on the open file, in case it changed."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise _input_error(option, f"{p}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise _input_error(option, f"{p}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise _input_error(option, f"{p}: not a regular file (a pipe, socket or device); give a file")
    too_big = f"{p}: larger than {limit:,} bytes, the limit for input files"
    if st.st_size > limit:
        raise _input_error(option, too_big)
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO since the stat, open returns instead of waiting.
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _input_error(option, f"{p}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _input_error(option, f"{p}: not a regular file (a pipe, socket or device); give a file")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise _input_error(option, f"{p}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > limit:
        raise _input_error(option, too_big)
    return b"".join(chunks)


def read_input_text(path: str | os.PathLike[str], option: str, *, limit: int = MAX_INPUT_BYTES) -> str:
    """`read_input_bytes` decoded as UTF-8; bytes that are not UTF-8 are an InputError naming the path."""
    data = read_input_bytes(path, option, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _input_error(option, f"{Path(path)}: not UTF-8 text (byte {exc.start})") from None


def load_toml_text(text: str, option: str, where: str) -> dict[str, Any]:
    """Parse TOML; malformed or too deeply nested input is one InputError naming ``where``."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _input_error(option, f"{where}: invalid TOML ({str(exc).splitlines()[0]})") from None
    except RecursionError:  # tomllib recurses once per nesting level
        raise _input_error(option, f"{where}: invalid TOML (nested too deeply)") from None


def read_input_toml(path: str | os.PathLike[str], option: str) -> dict[str, Any]:
    """A user TOML file (bounded, regular file only) as a dict; every problem names the path."""
    return load_toml_text(read_input_text(path, option), option, str(Path(path)))


def _fsync_dir(folder: Path) -> None:
    """Flush a folder's entries to disk, so a rename survives a power cut (best effort: some file
    systems cannot open a folder for fsync)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file atomically: a temporary file in the same folder, then renamed.

    The file gets the mode a plain ``open(path, "w")`` would give it (0666 less the umask, or the
    mode of the file it replaces), not mkstemp's 0600. A path that is a device or pipe
    (``/dev/null``, ``/dev/stdout``) is written in place: renaming over it would replace the device.
    Errors are OSError naming the path (the CLI prints them as one line, exit 2), including those
    the OS reports without one (a full disk: ``ENOSPC`` on write). The data is fsynced before the
    rename and the folder after it, so after a crash the path holds the old or the new file."""
    path = Path(path)
    if str(path) in ("", "."):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
    try:
        _atomic_write(path, data)
    except OSError as exc:
        if exc.filename is None:  # write() and fsync() errors carry no path: name the file
            raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise


def _atomic_write(path: Path, data: bytes) -> None:
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
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())  # the bytes are on disk before the name points at them
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)  # the rename itself survives a crash


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
