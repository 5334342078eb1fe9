"""dispersal._io: atomic writes with normal permissions, strict JSON, and the CLI's path checks."""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dispersal._io import atomic_write_text, dumps_json
from dispersal.cli import app

runner = CliRunner()


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _strict(text: str) -> object:
    def refuse(name: str) -> None:
        raise AssertionError(f"bare {name} in JSON")

    return json.loads(text, parse_constant=refuse)


def test_new_files_get_the_umask_mode_not_0600(tmp_path: Path, umask: None) -> None:
    p = tmp_path / "a" / "b.json"
    atomic_write_text(p, "x")
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    os.umask(0o027)
    q = tmp_path / "c.json"
    atomic_write_text(q, "y")
    assert stat.S_IMODE(q.stat().st_mode) == 0o640


def test_replacing_a_file_keeps_its_mode(tmp_path: Path, umask: None) -> None:
    p = tmp_path / "keep.txt"
    p.write_text("old")
    p.chmod(0o600)
    atomic_write_text(p, "new")
    assert p.read_text() == "new"
    assert stat.S_IMODE(p.stat().st_mode) == 0o600


def test_a_folder_in_place_of_the_file_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    with pytest.raises(IsADirectoryError) as info:
        atomic_write_text(d, "x")
    assert info.value.filename == str(d)
    assert list(tmp_path.iterdir()) == [d] and not any(d.iterdir())


def test_a_device_is_written_in_place_not_replaced() -> None:
    atomic_write_text(Path("/dev/null"), "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_json_is_strict() -> None:
    text = dumps_json(
        {
            "nan": math.nan,
            "inf": [math.inf, -math.inf],
            "np": np.float32(0.5),
            "arr": np.array([1.0, np.nan]),
            "t": (1, 2),
            "p": Path("x"),
        }
    )
    assert _strict(text) == {
        "nan": None,
        "inf": [None, None],
        "np": 0.5,
        "arr": [1.0, None],
        "t": [1, 2],
        "p": "x",
    }
    assert "\n" not in dumps_json({"a": [1, 2]}, indent=None)


def test_estimate_out_is_0644_strict_json(tmp_path: Path, umask: None) -> None:
    out = tmp_path / "new" / "e.json"
    r = runner.invoke(app, ["estimate", "--json", "--out", str(out), "--nodes", "1", "--params", "5T"])
    assert r.exit_code == 0, r.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert _strict(out.read_text()) == _strict(r.stdout)
    assert [p.name for p in out.parent.iterdir()] == ["e.json"]  # no temporary file left


@pytest.mark.parametrize(
    ("command", "option"),
    [(["reproduce"], "--out"), (["validate"], "--out"), (["report", "paper_threat_model"], "--out")],
)
def test_an_empty_output_path_is_refused(
    command: list[str], option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--out ''` used to mean the current folder (reproduce) or `.html` in it (report)."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, [*command, option, ""])
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: --out: empty path; give a file or folder name"
    assert not any(tmp_path.iterdir())
