"""Shared CLI plumbing: one-line errors with exit status 2, JSON output, atomic file writes."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from dispersal._io import atomic_write_bytes, atomic_write_text, dumps_json, print_json, save_figure

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INPUT_ERROR = 2

#: Help of every --set option: the field list comes from the fields' declarations (`dispersal fields`).
SET_HELP = (
    "Any scenario field: key=value, units allowed (latency_s=40ms, chip_memory_bytes=80GB); "
    "`dispersal fields` lists them with units and allowed ranges."
)

#: Where commands write files when no --out is given: a named folder per command under the current
#: directory (never the current directory itself, so a checkout's root is never written into).
OUTPUT_ROOT = Path("dispersal-output")


def field_help(name: str, example: str = "") -> str:
    """Help of a flag that sets one Scenario field: its label and allowed values from its declaration."""
    from dispersal.model.inputs.fields import describe
    from dispersal.model.inputs.scenario import FIELD_BY_NAME

    d = describe(FIELD_BY_NAME[name])
    allowed = f" ({d['allowed']})" if d["allowed"] else ""
    return f"{d['label']}{allowed}{', e.g. ' + example if example else ''}. Sets {name}."


#: Hard bounds of the planner commands' inputs (assumption: far past anything plausible, so a typo
#: such as 1e400 or a stray sign is refused with the range instead of planning nonsense).
MAX_TARGET_FLOP = 1e35
MAX_BANDWIDTH_BITS_PER_S = 1e15
MAX_LATENCY_S = 3600.0
MAX_DAYS = 36_525.0
MAX_NODES = 10_000_000
MAX_COMPRESSION = 1e6
MAX_SEED = 2**32 - 1
MAX_SAMPLES = 1_000_000


def show_number(v: float) -> str:
    """A number for a message: whole numbers below 1e9 with separators (10,000,000), else 3
    significant digits (1e+23, 0.167), never a raw repr like 0.16666666666666666."""
    if math.isfinite(v) and v == int(v) and abs(v) < 1e9:
        return f"{int(v):,}"
    return f"{v:.3g}"


def number_in(
    value: float, field: str, lo: float, hi: float, *, lo_open: bool = False, unit: str = ""
) -> float:
    """value if it is finite and in [lo, hi] (or (lo, hi]); else InputError naming field and range."""
    from dispersal.model.inputs.errors import InputError

    ok = math.isfinite(value) and (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        u = f" {unit}" if unit else ""
        left = "(" if lo_open else "["
        show = (lambda v: f"{v:g}") if unit == "year" else show_number  # 2026, not 2,026
        raise InputError(field, f"must be in {left}{show(lo)}, {show(hi)}]{u}, got {show(value)}")
    return value


def parse_in(
    parse: Callable[[str, str], float], text: str, field: str, lo: float, hi: float, **kw: Any
) -> float:
    """A units.parse_* value checked with number_in (see there)."""
    return number_in(parse(text, field), field, lo, hi, **kw)


def flop_target(text: str, field: str = "target") -> float:
    """A compute target in FLOP, in (0, MAX_TARGET_FLOP]."""
    from dispersal.model.inputs import units

    return parse_in(units.parse_flop, text, field, 0, MAX_TARGET_FLOP, lo_open=True, unit="FLOP")


def link_rates(text: str, field: str = "bandwidth") -> tuple[float, float]:
    """RATE or UP/DOWN in bit/s, each in (0, MAX_BANDWIDTH_BITS_PER_S]."""
    from dispersal.model.inputs import units

    up, down = units.parse_up_down(text, field)
    for v in (up, down):
        number_in(v, field, 0, MAX_BANDWIDTH_BITS_PER_S, lo_open=True, unit="bit/s")
    return up, down


def latency(text: str, field: str = "latency") -> float:
    """A one-way latency in seconds, in [0, MAX_LATENCY_S]."""
    from dispersal.model.inputs import units

    return parse_in(units.parse_duration, text, field, 0, MAX_LATENCY_S, unit="s")


def days_in(days: float, field: str = "days") -> float:
    """A time budget in days, in (0, MAX_DAYS]."""
    return number_in(days, field, 0, MAX_DAYS, lo_open=True, unit="days")


def default_out(command: str) -> Path:
    """The default --out folder of a command: dispersal-output/<command>."""
    return OUTPUT_ROOT / command


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr and return an Exit(2) to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_INPUT_ERROR)


def os_error_line(exc: OSError) -> str:
    """One line for an OSError on a path: ``PATH: what went wrong`` (the path named first)."""
    what = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is None:
        return what
    target = f" -> {exc.filename2}" if exc.filename2 is not None else ""
    return f"{exc.filename}{target}: {what}"


def _as_flag(field: str | None, line: str) -> str:
    """``lose_sites: ...`` -> ``--lose-sites: ...`` when the field is an option of the running
    command: the message names what the user typed, not an internal parameter name."""
    if not field or not line.startswith(field + ":"):
        return line
    try:  # typer >= 0.24 vendors Click as typer._click
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover
        from click import get_current_context  # type: ignore[no-redef]
    ctx = get_current_context(silent=True)
    # train's messages are the testbed's to word (its tests expect the bare ``field:`` form).
    if ctx is None or ctx.command.name == "train":
        return line
    key = field.replace("-", "_")
    for p in ctx.command.params:
        opts = [o for o in getattr(p, "opts", []) if o.startswith("--")]
        if opts and (p.name == key or opts[0] == "--" + field.replace("_", "-")):
            return str(opts[0]) + line[len(field) :]
    return line


def guarded(func: F) -> F:
    """Turn user errors (ValueError, tomllib errors, OSError on a path) into one line + exit 2.

    Bugs (anything else) still raise with a traceback, as they should.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import tomllib

        try:
            return func(*args, **kwargs)
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if getattr(exc, "from_scenario", False):  # a scenario field, not the option of that name
                raise fail(line) from None
            raise fail(_as_flag(getattr(exc, "field", None), line)) from None
        except OSError as exc:
            import errno

            if exc.errno == errno.EPIPE:  # stdout closed early (| head): not an error of ours
                raise typer.Exit(0) from None
            raise fail(os_error_line(exc)) from None

    return wrapper  # type: ignore[return-value]


def _path_text(text: str | Path | None, option: str) -> Path:
    """An option's path text as a Path; the empty string is an error (Path('') would be '.')."""
    from dispersal.model.inputs.errors import InputError

    if text is None or not str(text).strip():
        raise InputError(option, "empty path; give a file or folder name")
    if "\0" in str(text):
        raise InputError(option, f"{text!r}: a path cannot contain a NUL byte")
    return Path(str(text)).expanduser()


def _nearest_existing(path: Path) -> Path:
    """path itself or its nearest ancestor that exists (the folder a write would start from)."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _probe_folder(folder: Path, shown: Path, option: str) -> None:
    """Raise InputError unless a file can be created under `folder` (what a write would need)."""
    import tempfile

    from dispersal.model.inputs.errors import InputError

    base = _nearest_existing(folder)
    if not base.is_dir():
        raise InputError(option, f"{shown}: {base} is not a folder")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dispersal-probe.", dir=base)
    except OSError as exc:
        raise InputError(option, f"{shown}: cannot write in {base} ({exc.strerror or exc})") from None
    import os

    os.close(fd)
    Path(tmp).unlink(missing_ok=True)


def output_file(text: str | Path | None, option: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Check an output file path before any work: not empty, not a folder, its folder writable.

    Devices (/dev/null, /dev/stdout) are allowed: they are written in place."""
    from dispersal.model.inputs.errors import InputError

    path = _path_text(text, option)
    if path.is_dir():
        raise InputError(option, f"{path}: is a folder; give a file name")
    if suffixes and path.suffix.lower() not in suffixes:
        raise InputError(option, f"{path}: must end in {' or '.join(suffixes)}")
    if path.exists() and not path.is_file():
        return path  # a device or pipe, written in place
    _probe_folder(path.parent, path, option)
    return path


def output_dir(text: str | Path | None, option: str) -> Path:
    """Check an output folder before any work: not empty, not a file, creatable and writable."""
    from dispersal.model.inputs.errors import InputError

    path = _path_text(text, option)
    if path.exists() and not path.is_dir():
        raise InputError(option, f"{path}: is a file, not a folder")
    _probe_folder(path, path, option)
    return path


def input_file(text: str | Path | None, option: str) -> Path:
    """Check an input file: not empty, exists, a regular file, readable."""
    import os

    from dispersal.model.inputs.errors import InputError

    path = _path_text(text, option)
    if not path.exists():
        raise InputError(option, f"{path}: no such file")
    if path.is_dir():
        raise InputError(option, f"{path}: is a folder, not a file")
    if not os.access(path, os.R_OK):
        raise InputError(option, f"{path}: not readable")
    return path


def read_toml(path: Path, option: str) -> dict[str, Any]:
    """A TOML file as a dict; any problem (missing, a folder, a pipe or device, larger than
    ``dispersal._io.MAX_INPUT_BYTES``, unreadable, not UTF-8, malformed) is one InputError naming
    the path."""
    from dispersal._io import read_input_toml

    return read_input_toml(path, option)


__all__ = [
    "EXIT_INPUT_ERROR",
    "OUTPUT_ROOT",
    "SET_HELP",
    "atomic_write_bytes",
    "atomic_write_text",
    "default_out",
    "dumps_json",
    "fail",
    "field_help",
    "guarded",
    "input_file",
    "output_dir",
    "output_file",
    "print_json",
    "read_toml",
    "save_figure",
]
