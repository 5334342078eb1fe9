"""`dispersal validate`'s table says NO for a missed case; the reason must follow it, not only live in
docs/validation.md."""

from __future__ import annotations

from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.model.checks.validation import miss_reason


def test_validate_prints_why_each_missed_case_misses() -> None:
    r = CliRunner().invoke(app, ["validate", "--case", "covenant72b", "--no-files"])
    assert r.exit_code == 0, r.output
    assert "NO" in r.output
    reason = miss_reason("covenant72b_util")
    assert reason
    line = next(x for x in r.output.splitlines() if x.startswith("why covenant72b_util"))
    assert line.startswith("why covenant72b_util, covenant72b_comm_per_round miss: ")
    assert line.endswith(reason)
