"""Guard: every JSON the project writes is strict JSON (RFC 8259 has no NaN / Infinity).

Python's `json` writes NaN, Infinity and -Infinity by default and reads them back, so a round trip
in Python hides them; browsers, jq and most other parsers reject the file. Every --json output of the
fast CLI commands is parsed here with a parser that refuses those constants, including outputs that
carry non-finite numbers (which must come out as null).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dispersal._io import dumps_json
from dispersal.cli import app

runner = CliRunner()


def strict_loads(text: str) -> Any:
    """json.loads that rejects NaN, Infinity and -Infinity (and duplicate keys)."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError(f"duplicate keys in {keys}")
        return dict(pairs)

    return json.loads(text, parse_constant=no_constant, object_pairs_hook=no_duplicates)


def test_strict_parser_rejects_what_python_writes_by_default() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="non-standard"):
            strict_loads(json.dumps({"x": bad}))


def test_dumps_json_writes_non_finite_numbers_as_null() -> None:
    obj = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": {"d": (math.nan, 2)}, 3: 0.0}
    assert strict_loads(dumps_json(obj)) == {
        "a": None,
        "b": [None, None, 1.5],
        "c": {"d": [None, 2]},
        "3": 0.0,
    }


# Fast commands only (< ~0.3 s each); the slow ones (counter, reproduce) are marked slow; validate --json takes ~30 s and is left to its own tests.
FAST = [
    ["estimate", "--json"],
    [
        "estimate",
        "--json",
        "--set",
        "hardware=h200",
        "--set",
        "chips_per_node=10",
        "--set",
        "regime=treaty_hbm",
    ],
    ["fields", "--json"],
    ["plan", "--json", "--target", "1e24", "--hardware", "h200", "--search", "bisect"],
    ["solve", "--json", "--for", "bandwidth", "--where", "utilisation=0.9"],
    ["resilience", "--json"],
]
SLOW = [
    # 1e23: the same JSON (baseline row, lever row, every field) at a third of 1e24's planning.
    ["counter", "--json", "--mode", "default", "--lever", "hbm", "--target", "1e23"],
    ["reproduce", "--json", "--no-files"],
]


def _check(args: list[str]) -> Any:
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    return strict_loads(r.stdout)


@pytest.mark.parametrize("args", FAST, ids=lambda a: "-".join(a[:4]))
def test_cli_json_is_strict(args: list[str]) -> None:
    _check(args)


def test_non_finite_estimate_fields_become_null() -> None:
    # A 2T-parameter model trains no tokens in paper mode: its loss is infinite, so null in JSON.
    d = _check(["estimate", "--json", "--mode", "paper", "--set", "params=2T"])
    assert d["loss"] is None  # infinite loss (no tokens trained), not "Infinity"


def test_estimate_out_file_is_strict(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    r = runner.invoke(app, ["estimate", "--mode", "paper", "--set", "params=2T", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert strict_loads(out.read_text(encoding="utf-8"))["loss"] is None


def test_app_json_download_is_strict() -> None:
    from dispersal.model import Scenario, estimate
    from dispersal.present import export as logic

    d = estimate(Scenario(params=2e12), mode="paper").to_dict()
    assert math.isinf(d["loss"])
    assert strict_loads(logic.to_json(d))["loss"] is None


@pytest.mark.slow
@pytest.mark.parametrize("args", SLOW, ids=lambda a: "-".join(a[:2]))
def test_slow_cli_json_is_strict(args: list[str]) -> None:
    _check(args)
