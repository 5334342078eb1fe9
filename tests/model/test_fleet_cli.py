"""`dispersal fleet`: the fleet question from the command line (JSON equals the model's answer,
the shortcut flags build the fleet, --params / --algorithm / --tokens restrict the search)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from dispersal.cli import app
from dispersal.cli._scenario import build_scenario
from dispersal.model.inputs import units
from dispersal.model.search.fleet import fleet_search

runner = CliRunner()
ARGS = ["--hardware", "h100_sxm", "--nodes", "8", "--bandwidth", "1Gbps", "--days", "90", "--regime", "none"]


@pytest.fixture(scope="module", autouse=True)
def _one_search_per_question() -> Iterator[None]:
    """The CLI's search, remembered per argument set for this module: the table and the JSON of one
    fleet render one answer (the search is deterministic; each test still runs the whole command).
    `test_json_is_the_model_answer` compares against the model's own `fleet_search`, not this one."""
    real: Callable[..., Any] = fleet_search
    seen: list[tuple[tuple[Any, ...], dict[str, Any], Any]] = []

    def remembered(*args: Any, **kwargs: Any) -> Any:
        for a, kw, answer in seen:
            if a == args and kw == kwargs:
                return answer
        answer = real(*args, **kwargs)
        seen.append((args, kwargs, answer))
        return answer

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("dispersal.cli.fleet.fleet_search", remembered)
        yield


def _json(args: list[str]) -> Any:
    r = runner.invoke(app, ["fleet", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.slow  # two fleet searches (the command's and the model's)
def test_json_is_the_model_answer() -> None:
    d = _json([*ARGS, "--params", "7B"])
    s = build_scenario(None, [], hardware="h100_sxm", nodes=8, bandwidth="1Gbps", days=90, regime="none")
    want = fleet_search(s, params_grid=[7e9])
    assert d["question"] == "fleet" and d["mode"] == "default" and d["metric"] == "c_quality"
    assert d["fleet"]["nodes"] == 8 and d["fleet"]["days"] == pytest.approx(90)
    assert d["fleet"]["bandwidth_up_bits_per_s"] == 1e9
    assert want.best is not None
    assert d["best"]["params"] == 7e9
    assert d["best"]["c_quality_flop"] == pytest.approx(want.best.c_quality_flop, rel=1e-12)
    assert d["best"]["days"] == pytest.approx(want.best.run_time_s / units.SECONDS_PER_DAY, rel=1e-12)
    assert set(d["gains"]) == {"days", "bandwidth", "nodes"} and d["binding"]
    assert d["assumptions"]


@pytest.mark.slow
def test_algorithm_and_tokens_restrict_the_search() -> None:
    d = _json([*ARGS, "--params", "7B", "--algorithm", "diloco", "--tokens", "300B"])
    assert {o["algorithm"] for o in d["per_algorithm"]} == {"diloco"}
    assert d["best"]["tokens"] <= 300e9 * (1 + 1e-12)


@pytest.mark.slow  # the search of test_json_is_the_model_answer, shared when both run
def test_table_names_mode_metric_links_and_binding() -> None:
    r = runner.invoke(app, ["fleet", *ARGS, "--params", "7B"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    for token in (
        "default mode",
        "metric c_quality",
        "1 Gbps per node",
        "Binding constraint",
        "utilisation",
    ):
        assert token in text, token


def test_bad_metric_is_one_line_exit_2() -> None:
    r = runner.invoke(app, ["fleet", "--metric", "speed"])
    assert r.exit_code == 2
    assert "metric" in r.output and "Traceback" not in r.output


@pytest.mark.slow
def test_a_site_scenario_file_is_paced_and_says_so(tmp_path: Any) -> None:
    """A [[site]] file: the answer says the sites were paced and by what, and the binding search
    doubles every site's links and nodes."""
    f = tmp_path / "sites.toml"
    f.write_text(
        'hardware = "h100_sxm"\nchips_per_node = 8\nprecision = "bf16"\nregime = "none"\nduration_s = "60 d"\n'
        '[[site]]\nname = "us"\nnodes = 2\nbandwidth_up_bits_per_s = "1.2 Gbps"\nbandwidth_down_bits_per_s = "1.2 Gbps"\n'
        '[[site]]\nname = "eu"\nnodes = 2\nbandwidth_up_bits_per_s = "320 Mbps"\nbandwidth_down_bits_per_s = "320 Mbps"\n'
    )
    args = ["fleet", "--scenario", str(f), "--params", "7B"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    assert "4 nodes in 2 sites" in text and "Sites paced (as estimate does): sync by the" in text
    assert "hierarchical is not paced" not in text  # paced over the regions since sites/groups.py
    d = _json(args[1:])
    assert set(d["gains"]) == {"days", "bandwidth", "nodes"} and all(
        g >= 1 - 1e-9 for g in d["gains"].values()
    )
    # The pacing names a site (decoupled, the best here, names the quorum's last learner's site).
    assert any(n in d["best"]["sync_pacing"] for n in ("us", "eu")) and d["fleet"]["sites"][1]["name"] == "eu"
