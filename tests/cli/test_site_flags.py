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


@pytest.mark.parametrize("variable", ["bandwidth", "latency", "distance", "nodes", "sites"])
def test_solve_for_what_the_sites_own_is_an_error(variable: str) -> None:
    """`solve --scenario intellect1_schedule --for bandwidth` answered "utilisation flat along
    bandwidth" (the sites' own links are used): exit 2 naming --for."""
    argv = ["solve", "--scenario", "intellect1_schedule", "--for", variable, "--where", "utilisation=0.9"]
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: --for: ") and "[[site]]" in r.output


@pytest.mark.slow
def test_solve_for_h_still_works_on_a_sites_scenario() -> None:
    argv = [
        "solve",
        "--scenario",
        "intellect1_schedule",
        "--for",
        "inner_steps",
        "--where",
        "utilisation=0.9",
    ]
    assert CliRunner().invoke(app, [*argv, "--json"]).exit_code == 0
