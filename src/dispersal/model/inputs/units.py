"""The one place where human units are parsed and printed.

Inside dispersal every quantity is in SI base units: seconds, bytes, bits per second, FLOP,
FLOP per second, US dollars, watts, joules. Names carry the unit (``latency_s``,
``hbm_bytes``, ``bandwidth_bits_per_s``). Decimal prefixes throughout (1 GB = 1e9 bytes,
1 Mbps = 1e6 bit/s), as the paper and vendors' datasheets use them; binary ``GiB``/``MiB``
are accepted where written explicitly.
"""

from __future__ import annotations

import math
import re

from dispersal.model.inputs.errors import InputError

_NUMBER = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_PATTERN = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-z/%µ]*)\s*$")

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "w": 7 * 86400.0,
    "week": 7 * 86400.0,
    "weeks": 7 * 86400.0,
    "y": 365.25 * 86400.0,
    "yr": 365.25 * 86400.0,
    "year": 365.25 * 86400.0,
    "years": 365.25 * 86400.0,
}

SECONDS_PER_DAY = 86400.0
#: One H100-equivalent: 990e12 dense FP16 FLOP/s (H100 SXM), the unit of the MIRI treaty proposal's
#: covered-cluster rule (Scher et al. 2025, arXiv 2511.10783: 16 H100e = 15,840 TFLOP/s).
H100E_FLOP_PER_S = 990e12
SECONDS_PER_YEAR = 365.25 * 86400.0


def _split(text: str | float | int, field: str) -> tuple[float, str]:
    if isinstance(text, bool):
        raise InputError(field, f"expected a number with a unit, got {text!r}")
    if isinstance(text, (int, float)):
        return float(text), ""
    m = _PATTERN.match(str(text))
    if not m:
        raise InputError(field, f"cannot parse {text!r} as a number with a unit")
    value = float(m.group(1))
    if not math.isfinite(value):
        raise InputError(field, f"must be finite, got {text!r}")
    return value, m.group(2)


def _scaled(value: float, unit: str, bases: dict[str, float], field: str, kind: str, text: object) -> float:
    for base, mult in bases.items():
        if unit == base:
            return value * mult
        for table in (_BIN, _SI):
            for prefix, scale in table.items():
                if prefix and unit == prefix + base:
                    return value * scale * mult
    allowed = ", ".join(sorted(b for b in bases if b))
    raise InputError(field, f"unknown {kind} unit in {text!r} (use e.g. {allowed} with k/M/G/T prefixes)")


def parse_bandwidth(text: str | float, field: str = "bandwidth") -> float:
    """Parse a link rate to bits per second: ``"100 Mbps"``, ``"1 Gbit/s"``, ``"12.5 MB/s"`` -> 1e8.

    A bare number is bits per second. ``B/s`` and ``Bps`` (capital B) are bytes per second (x 8).
    """
    value, unit = _split(text, field)
    bases = {"bps": 1.0, "bit/s": 1.0, "b/s": 1.0, "Bps": 8.0, "B/s": 8.0, "": 1.0}
    return _scaled(value, unit, bases, field, "bandwidth", text)


def parse_duration(text: str | float, field: str = "duration") -> float:
    """Parse a duration to seconds: ``"100 ms"`` -> 0.1, ``"1.5 y"`` -> 4.73e7, ``"740d"``.

    A bare number is seconds. A year is 365.25 days.
    """
    value, unit = _split(text, field)
    if unit not in _SECONDS and unit != "":
        raise InputError(field, f"unknown time unit in {text!r} (use ns, us, ms, s, min, h, d, w, y)")
    return value * _SECONDS.get(unit, 1.0)


def parse_bytes(text: str | float, field: str = "bytes") -> float:
    """Parse a size to bytes: ``"80 GB"`` -> 8e10 (decimal), ``"80 GiB"`` -> 8.59e10. Bare = bytes."""
    value, unit = _split(text, field)
    return _scaled(value, unit, {"B": 1.0, "": 1.0, "bytes": 1.0}, field, "size", text)


def parse_flop(text: str | float, field: str = "flop") -> float:
    """Parse a compute amount to FLOP: ``"1e25 FLOP"``, ``"3.8e25"``, ``"1 ZFLOP"``."""
    value, unit = _split(text, field)
    bases = {"FLOP": 1.0, "flop": 1.0, "FLOPs": 1.0, "": 1.0}
    si = dict(_SI, Z=1e21, Y=1e24)
    for base, mult in bases.items():
        if unit == base:
            return value * mult
        for prefix, scale in si.items():
            if prefix and unit == prefix + base:
                return value * scale
    raise InputError(field, f"unknown compute unit in {text!r} (use FLOP with k/M/G/T/P/E/Z/Y prefixes)")


def parse_flop_rate(text: str | float, field: str = "flop_per_s") -> float:
    """Parse a compute rate to FLOP/s: ``"990 TFLOP/s"``, ``"990 TFLOPS"``, ``"9.9e14"`` -> 9.9e14."""
    if isinstance(text, str):
        t = text.strip()
        if t.endswith("/s"):
            t = t[:-2]
        elif t.upper().endswith("FLOPS"):
            t = t[:-1]
        text = t
    return parse_flop(text, field)


def parse_count(text: str | float, field: str = "count") -> float:
    """Parse a large count: ``"405B"`` -> 4.05e11, ``"15T"`` -> 1.5e13, ``"70M"``, ``"1e9"``."""
    value, unit = _split(text, field)
    scales = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
    if unit not in scales:
        raise InputError(field, f"unknown count suffix in {text!r} (use k, M, B, T)")
    return value * scales[unit]


def parse_distance(text: str | float, field: str = "distance") -> float:
    """Parse a distance to metres: ``"1000km"`` -> 1e6. Bare = metres."""
    value, unit = _split(text, field)
    scales = {"": 1.0, "m": 1.0, "km": 1e3, "mi": 1609.344}
    if unit not in scales:
        raise InputError(field, f"unknown distance unit in {text!r} (use m, km, mi)")
    return value * scales[unit]


def parse_money(text: str | float, field: str = "money") -> float:
    """Parse US dollars: ``"$1.6M"`` -> 1.6e6, ``"3.8B"``, ``"25000"``."""
    if isinstance(text, str):
        text = text.strip().lstrip("$").replace(",", "")
    return parse_count(text, field)


def parse_up_down(text: str, field: str = "bandwidth") -> tuple[float, float]:
    """Parse ``"100Mbps"`` (symmetric) or ``"57Mbps/310Mbps"`` (up/down) to bits per second."""
    parts = str(text).split("/")
    # "Gbit/s" contains a slash; rejoin a trailing "s".
    merged: list[str] = []
    for part in parts:
        if merged and part.strip() == "s":
            merged[-1] += "/s"
        else:
            merged.append(part)
    if len(merged) == 1:
        v = parse_bandwidth(merged[0], field)
        return v, v
    if len(merged) == 2:
        return parse_bandwidth(merged[0], field), parse_bandwidth(merged[1], field)
    raise InputError(field, f"expected RATE or UP/DOWN, got {text!r}")


def _fmt(value: float, units: list[tuple[float, str]], digits: int) -> str:
    if not math.isfinite(value):
        return str(value)
    for scale, name in units:
        # Compare after rounding to `digits`: 999,500 prints as "1 M", not "1e+03 k".
        if abs(float(f"{value:.{digits}g}")) >= scale:
            return f"{value / scale:.{digits}g} {name}"
    scale, name = units[-1]
    return f"{value / scale:.{digits}g} {name}"


def format_bandwidth(bits_per_s: float, digits: int = 3) -> str:
    """Print bits per second as ``"100 Mbps"``."""
    return _fmt(
        bits_per_s, [(1e12, "Tbps"), (1e9, "Gbps"), (1e6, "Mbps"), (1e3, "kbps"), (1.0, "bps")], digits
    )


def format_duration(seconds: float, digits: int = 3) -> str:
    """Print seconds as the largest sensible unit: ``"740 d"``, ``"100 ms"``."""
    return _fmt(
        seconds,
        [
            (SECONDS_PER_YEAR, "y"),
            (SECONDS_PER_DAY, "d"),
            (3600.0, "h"),
            (60.0, "min"),
            (1.0, "s"),
            (1e-3, "ms"),
            (1e-6, "us"),
            (1e-9, "ns"),
        ],
        digits,
    )


def format_bytes(n: float, digits: int = 3) -> str:
    """Print bytes with decimal prefixes: ``"80 GB"``."""
    return _fmt(n, [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")], digits)


def format_flop(flop: float, digits: int = 3) -> str:
    """Print FLOP in scientific notation: ``"1e+25 FLOP"``."""
    return f"{flop:.{digits}g} FLOP"


def format_money(usd: float, digits: int = 3) -> str:
    """Print dollars: ``"$1.6M"``, ``"$3.8B"``."""
    return "$" + _fmt(usd, [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"), (1.0, "")], digits).replace(
        " ", ""
    )


def format_count(n: float, digits: int = 3) -> str:
    """Print counts: ``"405B"``, ``"15T"``."""
    return _fmt(n, [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"), (1.0, "")], digits).replace(" ", "")
