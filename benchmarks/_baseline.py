"""What the A/B benchmarks share: a baseline commit's `src` extracted with `git archive`, and one child
process timed in CPU (user + sys of the child) and wall seconds, single-threaded BLAS/OpenMP so both
trees see the same machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def extract(ref: str, into: Path) -> Path:
    """The `src` folder of git `ref`, extracted under `into`."""
    archive = into / "src.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, stdout=f, check=True)
    with tarfile.open(archive) as t:
        t.extractall(into, filter="data")
    return into / "src"


def run_child(src: Path, args: list[str]) -> tuple[str, float, float]:
    """(stdout, CPU seconds, wall seconds) of `python args` with `src` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    r = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.stdout, cpu, wall


def same_answer(old: Any, new: Any, added: set[str]) -> bool:
    """Whether every value the old tree printed is printed unchanged by the new one. Keys only the
    new tree prints (scenario fields added since the baseline, e.g. `merge_rule`) are not answers
    the old tree gave; they are collected in `added` and reported, not compared."""
    if isinstance(old, dict) and isinstance(new, dict):
        added.update(set(new) - set(old))
        return set(old) <= set(new) and all(same_answer(old[k], new[k], added) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(same_answer(a, b, added) for a, b in zip(old, new, strict=True))
    return bool(old == new)
