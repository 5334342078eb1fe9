"""Regenerate (or check) the golden snapshots under tests/golden/: one command, never run by pytest.

    python -m dispersal.tools.update_golden            # rewrite every snapshot, list what moved
    python -m dispersal.tools.update_golden --check    # only list what moved; exit 1 if anything did

A snapshot is `Estimate.to_dict()` as strict JSON (non-finite numbers as null) of one case in one
mode. Cases: every shipped scenario (``<name>.<mode>.json``) and every scenario of
``tests/golden/cases.toml`` (``cases/<name>.<mode>.json``), which reach rules that no shipped preset
reaches (the HBM rule, asymmetric links, hierarchical and pipeline groups, codecs and their
aggregations, offload, MoE, rental). tests/test_golden.py only compares against these files; it
imports the functions below and never writes, so a changed model cannot pass against itself.
Writing refuses to run inside pytest.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dispersal._io import atomic_write_text, dumps_json
from dispersal.model import Scenario, estimate
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.presets import load_scenario, scenario_names
from dispersal.model.inputs.scenario import Mode

#: Relative tolerance of a float comparison: tight enough that any formula change shows, loose
#: enough for platform-level rounding of NumPy reductions.
REL_TOL = 1e-9
CASES_FILE = "cases.toml"
CASES_DIR = "cases"


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One snapshot: a scenario in one mode, the file it lives in, and (extra cases) what it must reach."""

    name: str
    mode: str
    scenario: Scenario
    relative_path: str
    """Path of the snapshot under the golden folder."""
    reaches: str = ""
    """Extra cases: the rule this case exists to exercise (cases.toml `reaches`)."""
    expect: dict[str, Any] = field(default_factory=dict)
    """Extra cases: top-level Estimate fields that must hold in every mode, so the case keeps
    reaching its rule when defaults change (cases.toml `expect`)."""
    reason_contains: str = ""
    """Extra cases: a phrase one of the Estimate's reasons must contain (cases.toml)."""


def extra_case_entries(golden_dir: Path) -> list[dict[str, Any]]:
    """The raw [[case]] tables of cases.toml (empty when the file does not exist)."""
    path = golden_dir / CASES_FILE
    if not path.is_file():
        return []
    try:
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get("case", [])
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), f"invalid TOML ({exc})") from None
    names = [str(e.get("name", "")) for e in entries]
    for e, n in zip(entries, names, strict=True):
        if not n or not n.replace("_", "").isalnum():
            raise InputError(f"{path}: case {n!r}", "needs a name of letters, digits and _")
        if not str(e.get("reaches", "")).strip():
            raise InputError(f"{path}: case {n}", "needs `reaches`: the rule it exercises")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(str(path), f"duplicate case names: {', '.join(dup)}")
    return list(entries)


def cases(golden_dir: Path) -> list[Case]:
    """Every snapshot case: shipped scenarios, then cases.toml, each in every mode."""
    out = [
        Case(name=n, mode=m.value, scenario=load_scenario(n), relative_path=f"{n}.{m.value}.json")
        for n in scenario_names()
        for m in Mode
    ]
    for e in extra_case_entries(golden_dir):
        name = str(e["name"])
        try:
            scn = Scenario.from_dict(dict(e.get("scenario", {})))
        except InputError as exc:
            raise InputError(f"{golden_dir / CASES_FILE}: case {name}", str(exc)) from None
        out += [
            Case(
                name=name,
                mode=m.value,
                scenario=scn,
                relative_path=f"{CASES_DIR}/{name}.{m.value}.json",
                reaches=str(e["reaches"]),
                expect=dict(e.get("expect", {})),
                reason_contains=str(e.get("reason_contains", "")),
            )
            for m in Mode
        ]
    return out


def snapshot(case: Case) -> dict[str, Any]:
    """The case's Estimate as the JSON the snapshot holds (a round trip through strict JSON)."""
    out: dict[str, Any] = json.loads(dumps_json(estimate(case.scenario, mode=case.mode).to_dict()))
    return out


def diff(want: Any, got: Any, where: str = "") -> list[str]:
    """Field-by-field differences ("path: old -> new"), floats at REL_TOL relative."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{where}.{k}: missing now" for k in want.keys() - got.keys()]
        out += [f"{where}.{k}: new field" for k in got.keys() - want.keys()]
        for k in want.keys() & got.keys():
            out += diff(want[k], got[k], f"{where}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where}: {len(want)} items -> {len(got)}"]
        return [
            d for i, (a, b) in enumerate(zip(want, got, strict=True)) for d in diff(a, b, f"{where}[{i}]")
        ]
    numbers = isinstance(want, int | float) and isinstance(got, int | float)
    if numbers and not isinstance(want, bool) and not isinstance(got, bool):
        if not math.isclose(float(want), float(got), rel_tol=REL_TOL, abs_tol=1e-300):
            return [f"{where}: {want!r} -> {got!r}"]
        return []
    same = want == got and type(want) is type(got)  # True == 1 in Python; a bool that became 1 moved
    return [] if same else [f"{where}: {want!r} -> {got!r}"]


def compare(golden_dir: Path, case: Case) -> list[str]:
    """Differences between the case's snapshot file and the model now (["no snapshot ..."] if absent)."""
    path = golden_dir / case.relative_path
    if not path.is_file():
        return [f"no snapshot {case.relative_path}"]
    return diff(json.loads(path.read_text(encoding="utf-8")), snapshot(case))


def stale_files(golden_dir: Path, all_cases: Sequence[Case]) -> list[str]:
    """Snapshot files under the golden folder that no case produces (relative paths)."""
    want = {c.relative_path for c in all_cases}
    have = {p.relative_to(golden_dir).as_posix() for p in golden_dir.rglob("*.json")}
    return sorted(have - want)


def _render(d: dict[str, Any]) -> str:
    return json.dumps(d, indent=1, sort_keys=True, allow_nan=False) + "\n"


def write(golden_dir: Path, all_cases: Sequence[Case]) -> list[tuple[str, int]]:
    """Rewrite every snapshot; remove stale ones. Returns (relative path, fields moved; -1 = new)."""
    if os.environ.get("PYTEST_CURRENT_TEST"):
        raise RuntimeError("golden snapshots are never rewritten inside pytest; run the command")
    changed: list[tuple[str, int]] = []
    for c in all_cases:
        path = golden_dir / c.relative_path
        moved = -1 if not path.is_file() else len(compare(golden_dir, c))
        if moved:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, _render(snapshot(c)))
            changed.append((c.relative_path, moved))
    for rel in stale_files(golden_dir, all_cases):
        (golden_dir / rel).unlink()
        changed.append((rel, 0))
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: rewrite (default) or --check the snapshots; exit 0, 1 (--check: moved), 2 (bad input)."""
    ap = argparse.ArgumentParser(
        prog="python -m dispersal.tools.update_golden", description=__doc__.split("\n")[0]
    )
    ap.add_argument(
        "--dir", type=Path, default=Path("tests/golden"), help="golden folder (default: tests/golden)"
    )
    ap.add_argument("--check", action="store_true", help="only list what moved; exit 1 if anything did")
    a = ap.parse_args(argv)
    golden_dir: Path = a.dir
    if not golden_dir.is_dir():
        print(f"--dir: no folder {golden_dir} (run from the repository root)", file=sys.stderr)
        return 2
    try:
        all_cases = cases(golden_dir)
    except InputError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if a.check:
        moved = [(c.relative_path, d) for c in all_cases for d in compare(golden_dir, c)[:5]]
        moved += [(rel, "stale: no such case") for rel in stale_files(golden_dir, all_cases)]
        for rel, d in moved:
            print(f"{rel}: {d}")
        print(f"{len(all_cases)} snapshots; {len({r for r, _ in moved})} differ")
        return 1 if moved else 0
    try:
        changed = write(golden_dir, all_cases)
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    for rel, n in changed:
        print(f"{rel}: {'new' if n < 0 else 'removed (stale)' if n == 0 else f'{n} fields moved'}")
    print(f"{len(all_cases)} snapshots; {len(changed)} written or removed under {golden_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
