"""A shortcut link flag on a scenario whose [[site]] tables set every site's link changed nothing
(`estimate --scenario intellect1_schedule --bandwidth 10Gbps` printed the same run, titled "edited:
--bandwidth"): exit 2 naming the flag; flags the sites do not own still apply."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dispersal.cli import app


@pytest.mark.parametrize(
    ("flag", "value"), [("--bandwidth", "10Gbps"), ("--latency", "5ms"), ("--distance", "100km")]
)
def test_link_flag_owned_by_every_site_is_an_error(flag: str, value: str) -> None:
    r = CliRunner().invoke(app, ["estimate", "--scenario", "intellect1_schedule", flag, value])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {flag}: every [[site]] table of this scenario sets its own ")
    assert len(r.output.strip().splitlines()) == 1


def test_other_flags_still_apply_to_a_sites_scenario() -> None:
    r = CliRunner().invoke(app, ["estimate", "--scenario", "intellect1_schedule", "--days", "90", "--json"])
    assert r.exit_code == 0, r.output
