"""Golden snapshots: every shipped scenario, and every case of tests/golden/cases.toml (rules no preset
reaches), as an Estimate in both modes, compared field by field.

A change to the model shows here as a named field that moved. This module only compares: it never
writes a snapshot, whatever the environment says. When a change is intended, regenerate with the
separate command and commit the snapshots with the change (CONTRIBUTING.md, "Regenerating golden
files"):

    python -m dispersal.tools.update_golden          # or --check to list what moved

Floats compare at 1e-9 relative (`update_golden.REL_TOL`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dispersal.tools import update_golden as ug

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = ug.cases(GOLDEN)
EXTRA = [c for c in CASES if c.reaches]
REGENERATE = "python -m dispersal.tools.update_golden"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.relative_path.removesuffix(".json"))
def test_estimate_matches_its_golden_snapshot(case: ug.Case) -> None:
    diffs = ug.compare(GOLDEN, case)
    assert not diffs, (
        f"{case.name} ({case.mode} mode) moved in {len(diffs)} fields (first 20 below); if intended, "
        f"regenerate with `{REGENERATE}` and commit tests/golden/:\n" + "\n".join(sorted(diffs)[:20])
    )


def test_every_case_has_a_snapshot_and_no_stale_ones() -> None:
    missing = [c.relative_path for c in CASES if not (GOLDEN / c.relative_path).is_file()]
    assert not missing, f"missing (run `{REGENERATE}`): {missing}"
    stale = ug.stale_files(GOLDEN, CASES)
    assert not stale, f"stale (no such case; `{REGENERATE}` removes them): {stale}"


def test_extra_cases_exist_in_both_modes() -> None:
    assert len(EXTRA) >= 20, "tests/golden/cases.toml: the cases that reach rules no preset reaches"
    assert {c.mode for c in EXTRA} == {"default", "paper"}


@pytest.mark.parametrize("case", EXTRA, ids=lambda c: c.relative_path.removesuffix(".json"))
def test_extra_case_still_reaches_its_rule(case: ug.Case) -> None:
    # Read from the snapshot file, so this holds for what is committed, not only for the model now.
    snap = json.loads((GOLDEN / case.relative_path).read_text(encoding="utf-8"))
    for key, want in case.expect.items():
        assert key in snap, f"{case.name}: expect names {key!r}, not an Estimate field"
        assert snap[key] == want, f"{case.name} ({case.mode}): {key} = {snap[key]!r}, expected {want!r}"
    if case.reason_contains:
        assert any(case.reason_contains in r for r in snap["reasons"]), (case.name, snap["reasons"])


def test_golden_environment_variable_cannot_rewrite_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old DISPERSAL_UPDATE_GOLDEN=1 made this module rewrite snapshots and pass against itself.
    monkeypatch.setenv("DISPERSAL_UPDATE_GOLDEN", "1")
    case = CASES[0]
    dst = tmp_path / case.relative_path
    dst.parent.mkdir(parents=True, exist_ok=True)
    snap = json.loads((GOLDEN / case.relative_path).read_text(encoding="utf-8"))
    snap["sync_time_s"] = 1.2345
    dst.write_text(json.dumps(snap), encoding="utf-8")
    before = dst.read_bytes()
    assert ug.compare(tmp_path, case) == [f".sync_time_s: 1.2345 -> {ug.snapshot(case)['sync_time_s']!r}"]
    assert dst.read_bytes() == before
    # ... and the writer itself refuses to run inside pytest.
    with pytest.raises(RuntimeError, match="never rewritten inside pytest"):
        ug.write(tmp_path, [case])
    assert dst.read_bytes() == before
    assert ug.main(["--dir", str(tmp_path)]) == 2
    assert dst.read_bytes() == before


@pytest.mark.slow
def test_check_mode_reports_a_moved_field_and_a_stale_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(GOLDEN, tmp_path / "g")
    g = tmp_path / "g"
    case = EXTRA[0]
    snap = json.loads((g / case.relative_path).read_text(encoding="utf-8"))
    snap["tokens"] *= 1.01
    (g / case.relative_path).write_text(json.dumps(snap), encoding="utf-8")
    (g / "no_such_scenario.paper.json").write_text("{}", encoding="utf-8")
    assert ug.main(["--check", "--dir", str(g)]) == 1
    out = capsys.readouterr().out
    assert f"{case.relative_path}: .tokens:" in out
    assert "no_such_scenario.paper.json: stale" in out
    assert "2 differ" in out


def test_diff_names_each_kind_of_change() -> None:
    assert ug.diff({"a": 1.0, "b": [1, 2], "c": "x"}, {"a": 1.0 + 1e-12, "b": [1, 2], "c": "x"}) == []
    assert ug.diff({"a": 1.0}, {"a": 1.1}) == [".a: 1.0 -> 1.1"]
    assert ug.diff({"a": {"b": 1}}, {"a": {}}) == [".a.b: missing now"]
    assert ug.diff({}, {"n": None}) == [".n: new field"]
    assert ug.diff({"l": [1]}, {"l": [1, 2]}) == [".l: 1 items -> 2"]
    assert ug.diff({"t": True}, {"t": 1}) == [".t: True -> 1"]
    assert ug.diff({"x": None}, {"x": 0.0}) == [".x: None -> 0.0"]
