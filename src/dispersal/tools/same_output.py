"""Check that a refactor changed no output: a baseline git ref's CLI and the working tree's, byte for byte.

    python -m dispersal.tools.same_output --baseline 4837990          # quick set (see below)
    python -m dispersal.tools.same_output --baseline main --full      # the CLI's default frontier draws
    python -m dispersal.tools.same_output --baseline HEAD~3 --keep /tmp/same   # keep every output

The baseline's ``src/`` and ``tests/golden/`` are extracted with ``git archive`` into a temporary
folder; the working tree is used as it is on disk (uncommitted edits included). Both sides run the
same commands as separate processes (``python -m dispersal ...`` with ``PYTHONPATH=<side>/src``,
the same environment and a working directory of the same relative layout), and stdout, stderr,
exit status and every written file are compared as bytes. The commands:

- ``estimate --json --scenario P --mode M`` for every shipped preset P (src/dispersal/data/scenarios)
  in both modes M (paper, default);
- ``frontier --json --mode M`` in both modes, ``frontier --json --year`` and
  ``frontier --json --compare`` (the frontier takes no scenario: it is one run per mode);
- ``reproduce --json --out reproduce`` (stdout and the written report and plots). Its wall-clock
  run time (the JSON ``"seconds"`` and the report's "Run time of the whole reproduction" line) is
  the one figure that differs from run to run: it is masked on both sides before the comparison
  (`mask_wall_clock`), every other byte is compared;
- the golden snapshots: each side writes every snapshot of the baseline's ``tests/golden/cases.toml``
  and presets into an empty folder with ``dispersal.tools.update_golden``; the two folders are
  compared file by file, and the working tree's ``update_golden --check`` against its own
  committed ``tests/golden`` is reported too.

Speed: the frontier's grid is most of the time (about 12-20 s CPU per run on a loaded 2-core
machine, almost all of it independent of the Monte Carlo draws). By default the two grid runs use
``--samples 10`` (the P(reach) bands still run, on fewer draws); ``--full`` uses the CLI default
(100). The quick set took 3 min 10 s CPU for both sides together (16 min 46 s wall at a load
average of about 25 on 2 shared cores); both sides run at once (``--jobs``, default 2).

Exit status: 0 every output identical, 1 something differs (listed), 2 bad input (unknown ref,
not inside a git checkout).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

#: Frontier Monte Carlo draws in the quick set (the CLI default, 100, with --full).
QUICK_SAMPLES = 10
MODES = ("paper", "default")


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """One command: a name (the output's file stem) and the arguments after ``python -m dispersal``."""

    name: str
    argv: tuple[str, ...]


def presets(src: Path) -> list[str]:
    """Shipped preset names: the TOML files of ``<src>/dispersal/data/scenarios``, sorted."""
    return sorted(p.stem for p in (src / "dispersal" / "data" / "scenarios").glob("*.toml"))


def runs(names: list[str], *, full: bool) -> list[Run]:
    """Every command both sides run (see the module docstring)."""
    out = [
        Run(name=f"estimate.{p}.{m}", argv=("estimate", "--json", "--scenario", p, "--mode", m))
        for p in names
        for m in MODES
    ]
    samples = () if full else ("--samples", str(QUICK_SAMPLES))
    out += [Run(name=f"frontier.{m}", argv=("frontier", "--json", "--mode", m, *samples)) for m in MODES]
    out += [
        # --year and --compare draw nothing (the CLI refuses --samples with them).
        Run(name="frontier.year", argv=("frontier", "--json", "--year")),
        Run(name="frontier.compare", argv=("frontier", "--json", "--compare")),
        Run(name="reproduce", argv=("reproduce", "--json", "--out", "reproduce")),
    ]
    return out


def extract(repo: Path, ref: str, dest: Path) -> None:
    """``git archive <ref> src tests/golden`` unpacked into dest (raises CalledProcessError on a bad ref)."""
    dest.mkdir(parents=True)
    blob = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", ref, "src", "tests/golden"],
        check=True,
        capture_output=True,
    ).stdout
    tar_path = dest / ".baseline.tar"
    tar_path.write_bytes(blob)
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            # Only regular files and folders from our own repository; no links, no absolute paths.
            if not (member.isfile() or member.isdir()) or member.name.startswith(("/", "..")):
                continue
            tar.extract(member, dest)
    tar_path.unlink()


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COLUMNS", "LINES"))}
    env.update(PYTHONPATH=str(src), COLUMNS="100", NO_COLOR="1", TERM="dumb", PYTHONHASHSEED="0")
    return env


#: Wall-clock figures of ``reproduce`` (a measurement, not model output): masked before comparing.
WALL_CLOCK = (
    (re.compile(rb'"seconds": [0-9.eE+-]+'), b'"seconds": <wall clock>'),
    (re.compile(rb"(Run time of the whole reproduction [^:\n]*: )[0-9.]+ s\."), rb"\1<wall clock> s."),
)


def mask_wall_clock(path: Path) -> None:
    """Replace reproduce's wall-clock run time in this file by a placeholder (in place)."""
    data = path.read_bytes()
    for pattern, repl in WALL_CLOCK:
        data = pattern.sub(repl, data)
    path.write_bytes(data)


def run_side(tree: Path, golden_cases: Path, out: Path, all_runs: list[Run]) -> None:
    """Run every command with tree's code; write <name>.stdout/.stderr/.rc and files under out."""
    env = _env(tree / "src")
    out.mkdir(parents=True)
    for r in all_runs:
        p = subprocess.run(
            [sys.executable, "-m", "dispersal", *r.argv], cwd=out, env=env, capture_output=True
        )
        (out / f"{r.name}.stdout").write_bytes(p.stdout)
        (out / f"{r.name}.stderr").write_bytes(p.stderr)
        (out / f"{r.name}.rc").write_text(f"{p.returncode}\n")
    mask_wall_clock(out / "reproduce.stdout")
    if (out / "reproduce" / "reproduction.md").is_file():
        mask_wall_clock(out / "reproduce" / "reproduction.md")
    golden = out / "golden"
    golden.mkdir()
    shutil.copy2(golden_cases / "cases.toml", golden / "cases.toml")
    p = subprocess.run(
        [sys.executable, "-m", "dispersal.tools.update_golden", "--dir", str(golden)],
        cwd=out,
        env=env,
        capture_output=True,
    )
    (out / "golden.rc").write_text(f"{p.returncode}\n")
    (out / "golden.stderr").write_bytes(p.stderr)


def differing(a: Path, b: Path) -> list[str]:
    """Relative paths of files that differ in bytes, or exist on one side only."""
    files_a = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    out = [f"{f} (baseline only)" for f in sorted(files_a - files_b)]
    out += [f"{f} (working tree only)" for f in sorted(files_b - files_a)]
    out += [f for f in sorted(files_a & files_b) if not filecmp.cmp(a / f, b / f, shallow=False)]
    return out


def golden_check(tree: Path) -> tuple[int, str]:
    """The working tree's ``update_golden --check`` against its committed tests/golden: (rc, last line)."""
    p = subprocess.run(
        [sys.executable, "-m", "dispersal.tools.update_golden", "--check"],
        cwd=tree,
        env=_env(tree / "src"),
        capture_output=True,
        text=True,
    )
    lines = (p.stdout + p.stderr).strip().splitlines()
    return p.returncode, lines[-1] if lines else ""


def main(argv: list[str] | None = None) -> int:
    """Command line: compare the baseline and the working tree; exit 0 identical, 1 differ, 2 bad input."""
    ap = argparse.ArgumentParser(
        prog="python -m dispersal.tools.same_output", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--baseline", required=True, help="git ref of the baseline (commit, branch, tag)")
    ap.add_argument("--full", action="store_true", help="frontier with the CLI's default --samples (100)")
    ap.add_argument("--keep", type=Path, help="write both sides' outputs here (must not exist) and keep them")
    ap.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="sides run at once (default 2)")
    a = ap.parse_args(argv)
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0:
        print("same_output: not inside a git checkout", file=sys.stderr)
        return 2
    tree = Path(top.stdout.strip())
    if a.keep is not None and a.keep.exists():
        print(f"--keep: {a.keep} already exists", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="same_output.")) if a.keep is None else a.keep
    try:
        base = work / "baseline-tree"
        try:
            extract(tree, a.baseline, base)
        except subprocess.CalledProcessError as exc:
            msg = exc.stderr.decode(errors="replace").strip().splitlines()
            print(f"--baseline: cannot archive {a.baseline!r} ({msg[-1] if msg else exc})", file=sys.stderr)
            return 2
        all_runs = runs(presets(tree / "src"), full=a.full)
        if presets(base / "src") != presets(tree / "src"):
            print("note: the shipped presets differ between the sides; the working tree's are run")
        sides = [(base, work / "baseline"), (tree, work / "working")]
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            jobs = [pool.submit(run_side, t, base / "tests" / "golden", o, all_runs) for t, o in sides]
            for j in jobs:
                j.result()
        diffs = differing(work / "baseline", work / "working")
        rc, line = golden_check(tree)
        n_golden = sum(1 for _ in (work / "working" / "golden").rglob("*.json"))
        print(f"{len(all_runs)} commands + {n_golden} golden snapshots per side, baseline {a.baseline}")
        for r in all_runs:
            mark = "DIFFERS" if any(d.startswith((f"{r.name}.", f"{r.name}/")) for d in diffs) else "same"
            status = (work / "working" / f"{r.name}.rc").read_text().strip()
            print(f"  {mark:7} {r.name} (exit {status})")
        print(f"golden --check of the working tree against its tests/golden: exit {rc}: {line}")
        if diffs:
            print(f"{len(diffs)} files differ:")
            for d in diffs:
                print(f"  {d}")
            return 1
        print("every output byte-identical")
        return 0 if rc == 0 else 1
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
