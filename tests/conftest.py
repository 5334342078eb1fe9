"""Suite-wide pytest hooks: the fast tier's own time, reported by every run.

CI runs the suite once (the README's test command); the fast tier (`-m "not slow"`, under 60 s on
2 cores) is a subset of it, so instead of a second run this prints how long its tests took inside
this one: setup + call + teardown summed over the tests not marked slow (collection not included).
"""

from __future__ import annotations

import pytest


class _TierTimes:
    """Summed phase durations (s) per test, by tier; one line at the end of the run."""

    def __init__(self) -> None:
        self.fast: dict[str, float] = {}
        self.slow: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        tier = self.slow if "slow" in report.keywords else self.fast
        tier[report.nodeid] = tier.get(report.nodeid, 0.0) + float(report.duration)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.fast and not self.slow:
            return
        terminalreporter.write_line(
            f"tiers: fast (not slow) {len(self.fast)} tests in {sum(self.fast.values()):.1f} s of test time; "
            f"slow {len(self.slow)} tests in {sum(self.slow.values()):.1f} s"
        )


def pytest_configure(config: pytest.Config) -> None:
    """Register this run's tier timer (its state lives with the run, not in the module)."""
    config.pluginmanager.register(_TierTimes(), "dispersal-tier-times")
