"""The one number formatter of the presentation layer: every figure the app, the CLI and the reports
print goes through here, so a dollar amount, a duration or a FLOP count reads the same everywhere.

The unit scaling itself (``"$31.4M"``, ``"100 Mbps"``, ``"740 d"``) is `dispersal.model.inputs.units`'
``format_*`` (the model's own messages use it too); this module picks the right one by unit or by
key name and adds the plain-number styles the tables use (``"1.5e+25"``, ``"12.3%"``, ``"1,024"``).
"""

from __future__ import annotations

import math
from typing import Any

from dispersal.model.inputs import units

SECONDS_PER_DAY = units.SECONDS_PER_DAY


def plural(n: int, noun: str) -> str:
    """A whole count with its noun, thousands separated: "1 site", "20 sites"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def release() -> str:
    """The release a citation names: "dispersal 0.3.0", plus the commit ("dispersal 0.3.0, commit
    4837990") when running from a git checkout (read from .git without running git; none in a wheel)."""
    from dispersal import __version__

    commit = _commit()
    return f"dispersal {__version__}" + (f", commit {commit}" if commit else "")


def _commit() -> str:
    """The short commit of the source checkout, or "" (no .git above the package, or unreadable)."""
    from pathlib import Path

    here = Path(__file__).resolve()
    for root in here.parents:
        git = root / ".git"
        if git.is_file():  # a worktree: "gitdir: /path/.git/worktrees/name"
            text = git.read_text(encoding="utf-8").strip()
            git = Path(text.removeprefix("gitdir:").strip()) if text.startswith("gitdir:") else git
        if git.is_dir():
            try:
                head = (git / "HEAD").read_text(encoding="utf-8").strip()
                if head.startswith("ref:"):
                    ref = head.split(None, 1)[1]
                    common = git / "commondir"
                    base = (
                        (git / common.read_text(encoding="utf-8").strip()).resolve()
                        if common.is_file()
                        else git
                    )
                    for g in (git, base):
                        if (g / ref).is_file():
                            return (g / ref).read_text(encoding="utf-8").strip()[:7]
                    packed = base / "packed-refs"
                    if packed.is_file():
                        for line in packed.read_text(encoding="utf-8").splitlines():
                            if line.endswith(" " + ref):
                                return line[:7]
                    return ""
                return head[:7]
            except OSError:
                return ""
    return ""


def algorithm(d: Any) -> str:
    """The one name of an algorithm across planner, fleet, app and report: the Scenario's ``algorithm``
    value (what ``--algorithm`` and scenario files take). The planner labels its overlapped DiLoCo
    "diloco" while the plan's scenario says "streaming"; this returns "streaming" for it, so a plan card,
    a fleet answer and a shared URL (``algorithm=streaming``) name the same algorithm. Hierarchical adds
    its group size. ``d``: a plan / option / fleet option dict (with ``scenario`` when known)."""
    sc = d.get("scenario") if hasattr(d, "get") else None
    name = (
        str(sc.get("algorithm")) if isinstance(sc, dict) and sc.get("algorithm") else str(d.get("algorithm"))
    )
    group = d.get("group_size") or 0
    return f"{name} (groups of {group})" if name == "hierarchical" and group else name


def money(usd: float, digits: int = 3) -> str:
    """Dollars with a k/M/B/T suffix: ``"$31.4M"``."""
    return units.format_money(usd, digits)


def money_or(usd: float | None, missing: str = "infeasible") -> str:
    """Dollars, or `missing` for None / a non-finite amount (no plan reaches the target)."""
    return money(usd) if usd is not None and math.isfinite(usd) else missing


def count(n: float, digits: int = 3) -> str:
    """A count with a k/M/B/T suffix: ``"405B"`` parameters, ``"15T"`` tokens."""
    return units.format_count(n, digits)


def data(n_bytes: float, digits: int = 3) -> str:
    """Bytes with decimal prefixes: ``"80 GB"``."""
    return units.format_bytes(n_bytes, digits)


def duration(seconds: float, digits: int = 3) -> str:
    """Seconds in the largest sensible unit: ``"100 ms"``, ``"740 d"``."""
    return units.format_duration(seconds, digits)


def bandwidth(bits_per_s: float, digits: int = 3) -> str:
    """Bits per second: ``"100 Mbps"``."""
    return units.format_bandwidth(bits_per_s, digits)


def sig(x: float, digits: int = 4) -> str:
    """A plain number to `digits` significant digits: ``"1.5e+25"``, ``"149.4"``."""
    return f"{x:.{digits}g}"


def flop(x: float, digits: int = 3, unit: bool = False) -> str:
    """FLOP in scientific notation, with the unit when asked: ``"1e+25"`` / ``"1e+25 FLOP"``."""
    return sig(x, digits) + (" FLOP" if unit else "")


def days(d: float, digits: int = 4, unit: str = "days") -> str:
    """Days as a plain number with its unit: ``"149.4 days"`` (``unit="d"`` for the short form)."""
    return f"{sig(d, digits)} {unit}"


def days_of(seconds: float, digits: int = 4) -> str:
    """Seconds shown as days, number only: ``"149.4"``."""
    return sig(seconds / SECONDS_PER_DAY, digits)


def mbps(x: float, digits: int = 4) -> str:
    """A rate already in Mbps: ``"48.26 Mbps"``."""
    return f"{sig(x, digits)} Mbps"


def percent(fraction: float, decimals: int = 1) -> str:
    """A fraction as a percentage: ``"12.3%"``."""
    return f"{fraction:.{decimals}%}"


def integer(n: float) -> str:
    """A whole number with thousands separators: ``"1,024"``."""
    return f"{n:,.0f}"


def factor(x: float, decimals: int = 2) -> str:
    """A multiple: ``"1.08x"``."""
    return f"{x:.{decimals}f}x"


def typed(x: float) -> str:
    """A number as the user would type it: ``5``, ``-5``, ``0.25``, ``1e+09`` (input error messages)."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:.6g}"


def axis_count(v: float, _pos: Any = None) -> str:
    """Tick text for a log axis (plain, no mathtext): ``10``, ``1k``, ``1M``, ``1e+24``."""
    if v <= 0:
        return ""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if 1 <= v / div < 1000 and v < 1e12:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def band(values: tuple[float, float, float] | list[float], fmt: Any) -> str:
    """P10 / P50 / P90 as ``"a / b / c"``, ``-`` for a non-finite percentile (no feasible draw)."""
    return " / ".join("-" if not math.isfinite(v) else fmt(v) for v in values)


def by_key(key: str, v: Any, *, plain: bool = False) -> str:
    """A value formatted by what its key says it is (``*_usd``, ``*_flop``, ``*_bytes``, ``*_s``,
    ``*bits_per_s``, parameter and token counts).

    ``plain=True`` leaves other numbers as Python prints them (the report's input table); otherwise
    integers get thousands separators and floats 4 significant digits.
    """
    if isinstance(v, bool) or v is None or isinstance(v, str) or not isinstance(v, int | float):
        return str(v)
    if key.endswith("bits_per_s"):
        return bandwidth(v)
    if key.endswith("_usd") and not plain:
        return money(v)
    if key.endswith("_flop") and not plain:
        return flop(v)
    if (key.endswith("_bytes") or key.startswith("bytes")) and not plain:
        return data(v)
    if key.endswith("_s"):
        return duration(v)
    if key in ("params", "active_params", "tokens", "local_batch_tokens"):
        return count(v)
    if plain:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    return sig(v)
