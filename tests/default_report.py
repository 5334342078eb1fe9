"""The product's default report, built by a test helper: `shared_default_report` builds it once per test
run for every test that reads it (the CLI's report tests and the browser's print check), whichever xdist
worker asks first; any test may still call `build_default_report` itself."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

#: The scenario of the default report the tests read (the app's default preset).
DEFAULT_REPORT_SCENARIO = "paper_threat_model"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DefaultReport:
    """One `dispersal report SCENARIO --out PATH --json` run with no other flag: what it printed and wrote."""

    path: Path
    summary: dict[str, Any]
    html: str


def build_default_report(folder: Path, scenario: str = DEFAULT_REPORT_SCENARIO) -> DefaultReport:
    """Run the product's default report (plan, frontier, monitor, countermeasures, uncertainty with the
    CLI's default draws, estimate, resilience) in-process into folder/r.html; minutes of CPU."""
    from typer.testing import CliRunner

    from dispersal.cli import app

    out = folder / "r.html"
    r = CliRunner().invoke(app, ["report", scenario, "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    return DefaultReport(path=out, summary=json.loads(r.stdout), html=out.read_text(encoding="utf-8"))


def shared_default_report(factory: pytest.TempPathFactory) -> DefaultReport:
    """The default report of DEFAULT_REPORT_SCENARIO, built once per test run: under pytest-xdist every
    worker's temporary folder sits in the run's common one, so the first caller builds there under an
    exclusive lock and the others (blocked on the lock meanwhile) read what it wrote. A build that
    failed leaves no summary, so the next caller builds again and fails with its own message."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "default-report-shared"
    summary = folder / "summary.json"
    with open(root / "default-report.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if summary.exists():
                out = folder / "r.html"
                return DefaultReport(
                    path=out, summary=json.loads(summary.read_text()), html=out.read_text(encoding="utf-8")
                )
            folder.mkdir(exist_ok=True)
            report = build_default_report(folder)
            summary.write_text(json.dumps(report.summary))
            return report
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
