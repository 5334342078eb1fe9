"""The CLI fuzz: every command over many bad inputs ends in exit 2 and one line naming the field or
path, never a traceback (issue 19). In-process through Typer's CliRunner (fast tier); a few cases
again as real processes (slow tier), where a traceback would reach the terminal.

Expensive work (the paper reproduction, the validation cases, testbed training, the app server) is
replaced by a tripwire: a bad input must be refused before any of it starts.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
from fuzz_cases import UNBOUNDED, all_cases
from typer.testing import CliRunner, Result

from dispersal._io import MAX_INPUT_BYTES
from dispersal.cli import app

runner = CliRunner()
CASES = all_cases()
#: Every FAST_STRIDE-th case runs in the fast tier; all of them in the slow tier.
FAST_STRIDE = 6
_COMMAND = typer.main.get_command(app)


def invoke(argv: list[str]) -> Result:
    """runner.invoke on the command built once (typer rebuilds it per call: ~0.1 s for 16 commands)."""
    import typer.testing

    original = getattr(typer.testing, "_get_command")  # noqa: B009 (private: built once here)
    setattr(typer.testing, "_get_command", lambda _app: _COMMAND)  # noqa: B010
    try:
        return runner.invoke(app, argv)
    finally:
        setattr(typer.testing, "_get_command", original)  # noqa: B010


#: A float printed with its full repr (0.16666666666666666) instead of a few digits.
RAW_FLOAT = re.compile(r"\d\.\d{7,}")


class Tripwire(AssertionError):
    """Raised when a bad input reached expensive work."""


def _trip(*_a: object, **_k: object) -> None:
    raise Tripwire("a bad input reached expensive work before being refused")


class UnboundedRead(AssertionError):
    """Raised when a FIFO or an endless device was still being read after READ_LIMIT_S."""


#: Seconds a FIFO or /dev/zero case may take before it counts as an unbounded read (a refusal
#: takes milliseconds; a read of /dev/zero grows by ~300 MB/s, a FIFO read never returns).
READ_LIMIT_S = 20


@contextlib.contextmanager
def read_bound(argv: list[str]) -> Iterator[None]:
    """Raise UnboundedRead if an argv naming a FIFO or an endless device runs past READ_LIMIT_S."""
    if not any(u in a for a in argv for u in UNBOUNDED):
        yield
        return

    def alarm(_sig: int, _frame: object) -> None:
        raise UnboundedRead(f"still reading after {READ_LIMIT_S} s: {' '.join(argv)[:120]}")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(READ_LIMIT_S)
    # A read of /dev/zero loops in C and never sees the alarm: cap the address space for the case so
    # a regression ends in MemoryError (a failed case) instead of eating the machine's memory.
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(_vm_bytes() + READ_MEMORY_BYTES, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


#: Extra address space a FIFO or /dev/zero case may take (256 MiB): a refusal needs kilobytes.
READ_MEMORY_BYTES = 2**28


def _vm_bytes() -> int:
    """This process's virtual memory size (Linux /proc), bytes."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The files the placeholders name: a folder, a file, TOML that is malformed or mistyped."""
    return make_paths(tmp_path_factory.mktemp("fuzz"))


def make_paths(root: Path) -> dict[str, str]:
    """Make the fuzz's files under root; return placeholder -> path."""
    (root / "dir").mkdir()
    (root / "dir.toml").mkdir()
    (root / "file").write_text("x")
    ro = root / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    files = {
        "BADTOML": "num_nodes = = 4\n[",
        "WRONGTYPE": 'num_nodes = "abc"\n',
        "LISTTYPE": "num_nodes = [1, 2]\n",
        "HUGEINT": "num_nodes = 99999999999999999999999\n",
        "UNKNOWNKEY": "num_nodez = 4\n",
        "NESTED": "[latency_s]\nx = 1\n",
        "BOOLPARAMS": "params = true\n",
        "NANBW": "bandwidth_up_bits_per_s = nan\n",
        "SITEBW": '[[site]]\nnodes = 1\n[[site]]\nnodes = 1\n[[site]]\nnodes = 1\nbandwidth_down_bits_per_s = "-5 Mbps"\n',
        "SITEKEY": "[[site]]\nnodes = 1\nspeed = 3\n",
        "SITENODES": "[[site]]\nnodes = -1\n",
        "SITEHW": '[[site]]\nnodes = 1\nhardware = "nope"\n',
        "CHURNSITE": '[[site]]\nname = "a"\nnodes = 1\n[[churn]]\nhour = 1\nsite = "b"\nnodes = 1\n',
        "CHURNNEG": '[[site]]\nname = "a"\nnodes = 1\n[[churn]]\nhour = 1\nsite = "a"\nnodes = -3\n',
    }
    out = {
        "DIR": str(root / "dir"),
        "DIRTOML": str(root / "dir.toml"),
        "FILE": str(root / "file"),
        "MISSING": str(root / "missing.toml"),
        "RODIR": str(ro),
    }
    for key, text in files.items():
        p = root / f"{key.lower()}.toml"
        p.write_text(text)
        out[key] = str(p)
    b = root / "bin.toml"
    b.write_bytes(b"\xff\xfe\x00num_nodes = 4\x80\n")
    out["BINTOML"] = str(b)
    # issue 35: one byte over the input cap (sparse: no disk used), a FIFO, nesting past the
    # parser's recursion limit, a file name longer than NAME_MAX.
    huge = root / "huge.toml"
    with open(huge, "wb") as fh:
        fh.truncate(MAX_INPUT_BYTES + 1)
    out["HUGE"] = str(huge)
    fifo = root / "fifo.toml"
    os.mkfifo(fifo)
    out["FIFO"] = str(fifo)
    deep = root / "deep.toml"
    deep.write_text("num_nodes = " + "[" * 100_000 + "\n")
    out["DEEP"] = str(deep)
    out["LONGNAME"] = str(root / ("n" * 300 + ".toml"))
    return out


def _fill(argv: list[str], paths: dict[str, str]) -> list[str]:
    out = []
    for a in argv:
        for k, v in paths.items():
            a = a.replace("{" + k + "}", v)
        out.append(a)
    return out


def _norm(text: str) -> str:
    return text.lower().replace("-", "_")


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace expensive work by a Tripwire (see the module docstring)."""
    set_tripwires(monkeypatch)


def set_tripwires(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace expensive work by a Tripwire."""
    import dispersal.calibration.sweep as cal_sweep
    import dispersal.cli.reproduce as reproduce
    import dispersal.cli.serve as serve
    import dispersal.cli.sweep as sweep
    import dispersal.model.analyses.countermeasures as countermeasures
    import dispersal.model.analyses.frontier.grid as frontier_grid
    import dispersal.model.analyses.uncertainty as uncertainty
    import dispersal.model.checks.validation as validation

    monkeypatch.setattr(reproduce, "run_rows", _trip)
    monkeypatch.setattr(validation, "run_case", _trip)
    monkeypatch.setattr(cal_sweep, "measure_step_times", _trip)
    monkeypatch.setattr(cal_sweep, "run_points", _trip)
    monkeypatch.setattr(serve, "run_server", _trip)
    monkeypatch.setattr(uncertainty, "tornado", _trip)
    monkeypatch.setattr(countermeasures, "analyse", _trip)
    monkeypatch.setattr(sweep, "plan", _trip)
    monkeypatch.setattr(frontier_grid, "cell_limit", _trip)
    monkeypatch.setattr(frontier_grid, "target_bands", _trip)
    import dispersal.model.analyses.frontier.over_time as over_time
    import dispersal.model.analyses.monitor as monitor

    monkeypatch.setattr(over_time, "frontier_over_time", _trip)
    monkeypatch.setattr(monitor, "compare", _trip)
    import dispersal.cli.train as train

    monkeypatch.setattr(train, "_run", _trip)  # train: no worker may start


def check(r: Result, token: str) -> list[str]:
    """The problems of one bad input's result (empty = as required)."""
    problems = []
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        problems.append(f"exception {type(r.exception).__name__}: {r.exception}")
    if "Traceback" in r.output:
        problems.append("traceback in output")
    if r.exit_code != 2:
        problems.append(f"exit {r.exit_code}")
    lines = r.stderr.strip().splitlines()
    if len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines")
    if _norm(token) not in _norm(r.stderr):
        problems.append(f"stderr does not name {token!r}")
    if RAW_FLOAT.search(r.stderr.replace(str(Path.cwd()), "")):
        problems.append("a raw float (7+ digits) in the message")
    if problems:
        problems.append(f"stderr: {r.stderr.strip()[:300]!r}")
    return problems


def _run_case(argv: list[str], token: str, paths: dict[str, str]) -> None:
    if "{RODIR}" in " ".join(argv) and os.geteuid() == 0:
        pytest.skip("root can write into a read-only folder")
    with read_bound(argv):
        r = invoke(_fill(argv, paths))
    problems = check(r, _fill([token], paths)[0])
    assert not problems, "; ".join(problems)


def _ids(cases: list[tuple[list[str], str]]) -> list[str]:
    return [" ".join(a)[:90] or "empty" for a, _ in cases]


FAST = CASES[::FAST_STRIDE]
SLOW = [c for i, c in enumerate(CASES) if i % FAST_STRIDE]


@pytest.mark.parametrize(("argv", "token"), FAST, ids=_ids(FAST))
def test_bad_input_is_one_line_exit_2(
    argv: list[str], token: str, paths: dict[str, str], tripwires: None
) -> None:
    _run_case(argv, token, paths)


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "token"), SLOW, ids=_ids(SLOW))
def test_bad_input_is_one_line_exit_2_all(
    argv: list[str], token: str, paths: dict[str, str], tripwires: None
) -> None:
    _run_case(argv, token, paths)


def test_the_fuzz_covers_every_command() -> None:
    commands = {argv[0] for argv, _ in CASES}
    registered = set(_COMMAND.commands) - {"train"}  # type: ignore[attr-defined]
    assert registered <= commands, registered - commands
    assert len(CASES) >= 500


@pytest.mark.parametrize(
    "command",
    [
        "estimate",
        "plan",
        "app",
        "counter",
        "report",
        "solve",
        "sweep",
        "train",
    ],
)
def test_help_works(command: str) -> None:
    r = invoke([command, "--help"])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and r.exception is None
    assert "--help" in r.stdout


#: Bad inputs that must also be refused in a real process: a traceback there reaches the terminal
#: (CliRunner catches it), and a refused command must leave nothing in the working folder. A few run
#: as real processes (~3 s each: the interpreter and the CLI's imports); the rest in-process with the
#: same checks (exit 2, one stderr line naming the field, no traceback, nothing left in the cwd).
SUBPROCESS_CASES = [
    (["estimate", "--nodes", "99999999999999999999999"], "nodes"),
    (["app", "--host", "notahost.invalid"], "notahost.invalid"),
    (["sweep", "--out", "/proc/x/y.csv", "--no-plot"], "/proc/x/y.csv"),
]
IN_PROCESS_CASES = [
    (["estimate", "--out", "/dev/null/x.json"], "/dev/null/x.json"),
    (["app", "--host", ""], "host"),
    (["reproduce", "--out", ""], "out"),
    (["solve", "--for", "nodes", "--where", "utilisation=abc"], "where"),
    (["estimate", "--nodes", "abc"], "nodes"),
]


def _check_refusal(code: int, stdout: str, stderr: str, token: str, cwd: Path) -> None:
    """Exit 2, no traceback, one stderr line naming token, nothing written into cwd."""
    assert code == 2, stderr
    assert "Traceback" not in stdout + stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert _norm(token) in _norm(stderr)
    assert not any(cwd.iterdir()), "a refused command left files behind"


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "token"), SUBPROCESS_CASES, ids=[" ".join(a) for a, _ in SUBPROCESS_CASES])
def test_bad_input_in_a_real_process(argv: list[str], token: str, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    p = subprocess.run(
        [sys.executable, "-m", "dispersal", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    _check_refusal(p.returncode, p.stdout, p.stderr, token, tmp_path)


@pytest.mark.parametrize(("argv", "token"), IN_PROCESS_CASES, ids=[" ".join(a) for a, _ in IN_PROCESS_CASES])
def test_bad_input_leaves_the_cwd_untouched(
    argv: list[str], token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tripwires: None
) -> None:
    """The former real-process cases, in-process: the same refusal, and nothing in the working folder."""
    monkeypatch.chdir(tmp_path)
    r = invoke(argv)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    _check_refusal(r.exit_code, r.stdout, r.stderr, token, tmp_path)


def main() -> None:
    """Tally every case (python tests/cli/test_fuzz.py): tracebacks, expensive work reached, other."""
    import tempfile
    import time
    from collections import Counter

    tally: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        set_tripwires(mp)
        paths = make_paths(Path(d))
        t0 = time.perf_counter()
        for argv, token in CASES:
            filled = _fill(argv, paths)
            if "{RODIR}" in " ".join(argv) and os.geteuid() == 0:
                tally["skipped (root)"] += 1
                continue
            t1 = time.perf_counter()
            with read_bound(argv):
                r = invoke(filled)
            dt = time.perf_counter() - t1
            if dt > 0.2 and "-t" in sys.argv:
                print(f"{dt:.2f} s", " ".join(argv)[:100])
            problems = check(r, _fill([token], paths)[0])
            exc = r.exception
            if isinstance(exc, (UnboundedRead, MemoryError)):
                tally["unbounded read"] += 1
            elif isinstance(exc, Tripwire):
                tally["reached expensive work (a wrong success)"] += 1
            elif exc is not None and not isinstance(exc, SystemExit):
                tally["traceback"] += 1
            elif problems:
                tally["other (exit, lines or field name)"] += 1
            else:
                tally["ok"] += 1
            if problems and "-v" in sys.argv:
                print(" ".join(argv)[:80], "|", "; ".join(problems)[:300])
        print(f"{len(CASES)} bad inputs in {time.perf_counter() - t0:.1f} s: {dict(tally)}")


if __name__ == "__main__":
    main()
