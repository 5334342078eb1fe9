"""The product's default report, built by a test helper (tests/cli/conftest.py shares one build per
session; any test may call `build_default_report` itself)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

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
