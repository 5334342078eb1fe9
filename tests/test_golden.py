"""Golden snapshots: every shipped scenario's Estimate in both modes, field by field.

A change to the model shows here as a named field that moved. When the change is intended,
regenerate the snapshots with one command and commit them with the change:

    python tests/test_golden.py            # or: DISPERSAL_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py

Snapshots are `Estimate.to_dict()` as JSON (non-finite numbers as null) under tests/golden/.
Floats compare at 1e-9 relative: tight enough that any formula change is caught, loose enough for
platform-level rounding of NumPy reductions.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from dispersal._io import atomic_write_text, dumps_json
from dispersal.model import estimate
from dispersal.model.inputs.presets import load_scenario, scenario_names
from dispersal.model.inputs.scenario import Mode

GOLDEN = Path(__file__).resolve().parent / "golden"
REL = 1e-9
CASES = [(name, mode.value) for name in scenario_names() for mode in Mode]


def _path(name: str, mode: str) -> Path:
    return GOLDEN / f"{name}.{mode}.json"


def _current(name: str, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(dumps_json(estimate(load_scenario(name), mode=mode).to_dict()))
    return out


def update() -> list[Path]:
    """Rewrite every snapshot from the current model; returns the files written."""
    GOLDEN.mkdir(exist_ok=True)
    written = []
    for name, mode in CASES:
        atomic_write_text(
            _path(name, mode), json.dumps(_current(name, mode), indent=1, sort_keys=True) + "\n"
        )
        written.append(_path(name, mode))
    return written


def _diff(want: Any, got: Any, where: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{where}.{k}: missing now" for k in want.keys() - got.keys()]
        out += [f"{where}.{k}: new field" for k in got.keys() - want.keys()]
        for k in want.keys() & got.keys():
            out += _diff(want[k], got[k], f"{where}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where}: {len(want)} items -> {len(got)}"]
        return [
            d for i, (a, b) in enumerate(zip(want, got, strict=True)) for d in _diff(a, b, f"{where}[{i}]")
        ]
    if isinstance(want, int | float) and isinstance(got, int | float) and not isinstance(want, bool):
        if not math.isclose(float(want), float(got), rel_tol=REL, abs_tol=1e-300):
            return [f"{where}: {want!r} -> {got!r}"]
        return []
    return [] if want == got else [f"{where}: {want!r} -> {got!r}"]


@pytest.mark.parametrize(("name", "mode"), CASES)
def test_estimate_matches_its_golden_snapshot(name: str, mode: str) -> None:
    if os.environ.get("DISPERSAL_UPDATE_GOLDEN") == "1":
        update()
    path = _path(name, mode)
    if not path.is_file():
        pytest.fail(f"no snapshot {path.name}: run `python tests/test_golden.py` and commit tests/golden/")
    diffs = _diff(json.loads(path.read_text(encoding="utf-8")), _current(name, mode))
    assert not diffs, (
        f"{name} ({mode} mode) moved in {len(diffs)} fields (first 20 below); if intended, regenerate with "
        "`python tests/test_golden.py`:\n" + "\n".join(sorted(diffs)[:20])
    )


def test_every_shipped_scenario_has_a_snapshot_and_no_stale_ones() -> None:
    want = {_path(n, m).name for n, m in CASES}
    have = {p.name for p in GOLDEN.glob("*.json")}
    assert want <= have, f"missing: {sorted(want - have)}"
    assert have <= want, f"stale (no such scenario): {sorted(have - want)}"


if __name__ == "__main__":
    for p in update():
        print(p.relative_to(Path.cwd()) if p.is_relative_to(Path.cwd()) else p)
    sys.exit(0)
