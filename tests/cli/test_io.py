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


# --- issue 35: bounded reads of user files, fsync before rename, no temp file after a failure ---


def test_reads_refuse_fifos_and_devices_before_reading(tmp_path: Path) -> None:
    """A FIFO (would block) and /dev/zero (never ends) are refused by name, without a read."""
    from dispersal._io import read_input_bytes

    fifo = tmp_path / "s.toml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(ValueError, match=rf"^scenario: {path}: not a regular file"):
            read_input_bytes(path, "scenario")


def test_reads_are_capped_and_name_the_path(tmp_path: Path) -> None:
    """A file over the cap is refused before it is read; at the cap it is read whole."""
    from dispersal._io import MAX_INPUT_BYTES, read_input_bytes, read_input_toml

    assert MAX_INPUT_BYTES == 16 * 2**20
    p = tmp_path / "x.toml"
    p.write_bytes(b"a" * 11)
    assert read_input_bytes(p, "faults", limit=11) == b"a" * 11
    with pytest.raises(ValueError, match=rf"^faults: {p}: larger than 10 bytes"):
        read_input_bytes(p, "faults", limit=10)
    huge = tmp_path / "huge.toml"
    with open(huge, "wb") as fh:
        fh.truncate(MAX_INPUT_BYTES + 1)  # sparse
    with pytest.raises(ValueError, match=rf"^sites: {huge}: larger than 16,777,216 bytes"):
        read_input_bytes(huge, "sites")
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000)
    with pytest.raises(ValueError, match=rf"^calibration: {deep}: invalid TOML \(nested too deeply\)"):
        read_input_toml(deep, "calibration")
    with pytest.raises(ValueError, match=rf"^scenario: {tmp_path}: is a folder"):
        read_input_bytes(tmp_path, "scenario")
    with pytest.raises(ValueError, match=rf"^scenario: {tmp_path / 'no'}: No such file"):
        read_input_bytes(tmp_path / "no", "scenario")


def test_a_full_disk_names_the_path() -> None:
    """ENOSPC from write() carries no file name; the error names the path (was "No space left on
    device" alone)."""
    with pytest.raises(OSError) as info:
        atomic_write_text(Path("/dev/full"), "x")
    assert info.value.filename == "/dev/full"
    r = runner.invoke(app, ["estimate", "--out", "/dev/full"])
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: /dev/full: No space left on device"


def test_a_failed_write_leaves_no_temp_file_and_fsyncs_before_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data is fsynced before the rename and the folder after it; a failed fsync (full disk)
    leaves neither the target nor a temporary file, and names the path."""

    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def replace(a: str, b: str) -> None:
        calls.append("replace")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write_text(tmp_path / "ok.json", "{}")
    assert calls == ["fsync", "replace", "fsync"]  # file, rename, folder

    def full(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    target = tmp_path / "out.json"
    with pytest.raises(OSError) as info:
        atomic_write_text(target, "{}")
    assert info.value.filename == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.json"]


@pytest.mark.slow  # imports torch
def test_a_failed_checkpoint_write_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The testbed's checkpoint writer removes its temporary file when the write fails (a SIGKILL
    midway still leaves one: that case is tests/testbed/test_rejoin.py's)."""
    pytest.importorskip("torch")
    from dispersal.testbed import checkpoint

    def full(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save_global(tmp_path, 2, {"round": 2})
    left = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert left == [], left


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--out", ""], "error: out: empty path; give a file or folder name"),
        (
            ["--rejoin", "w1@step5"],
            "error: rejoin: w1@step5 has no kill of w1 before step 5 "
            "(add --kill w1@stepS with S < 5, or drop the rejoin)",
        ),
        (
            ["--kill", "w1@step5", "--rejoin", "w1@step5"],
            "error: rejoin: w1@step5 has no kill of w1 before step 5 "
            "(add --kill w1@stepS with S < 5, or drop the rejoin)",
        ),
    ],
)
def test_train_refuses_an_empty_out_and_a_rejoin_without_a_kill(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`train --out ''` wrote into the current folder; a rejoin with no earlier kill was ignored."""
    pytest.importorskip("torch")
    import dispersal.cli.train as train

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("training started")

    monkeypatch.setattr(train, "_run", never)
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["train", "--workers", "3", "--steps", "20", "-H", "5", *argv])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == message
    assert not any(tmp_path.iterdir())


def test_train_accepts_a_rejoin_after_its_kill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check pairs each rejoin with an earlier kill of the same worker: a valid plan passes."""
    pytest.importorskip("torch")
    import dispersal.cli.train as train

    seen: list[tuple[str, ...]] = []
    monkeypatch.setattr(train, "_run", lambda cfg, out, **_k: seen.append(cfg.faults))
    r = runner.invoke(
        app,
        [
            *("train", "--workers", "3", "--steps", "40", "-H", "5", "--out", str(tmp_path / "o")),
            *("--kill", "w1@step5", "--rejoin", "w1@step10", "--kill", "w1@step15", "--rejoin", "w1@step20"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert seen == [("kill w1@step5", "kill w1@step15", "rejoin w1@step10", "rejoin w1@step20")]
