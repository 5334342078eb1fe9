"""Suite-wide pytest hooks: the fast tier's own time, reported by every run.

CI runs the suite once (the README's test command); the fast tier (`-m "not slow"`, under 60 s on
2 cores) is a subset of it, so instead of a second run this prints how long its tests took inside
this one: setup + call + teardown summed over the tests not marked slow (collection not included).
"""

from __future__ import annotations

import pytest

_FAST: dict[str, float] = {}
_SLOW: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add this phase's duration (s) to its test's total, by tier."""
    tier = _SLOW if "slow" in report.keywords else _FAST
    tier[report.nodeid] = tier.get(report.nodeid, 0.0) + float(report.duration)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per tier: tests run and their summed time (s)."""
    if not _FAST and not _SLOW:
        return
    terminalreporter.write_line(
        f"tiers: fast (not slow) {len(_FAST)} tests in {sum(_FAST.values()):.1f} s of test time; "
        f"slow {len(_SLOW)} tests in {sum(_SLOW.values()):.1f} s"
    )
