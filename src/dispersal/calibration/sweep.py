"""The calibration sweep: which points, in which order, within which budget; resumable.

Grid (the issue's): sync interval H in {1 (= DDP), 10, 50, 100, 500}, workers M in {1, 2, 4, 8},
codec in {none, int8, int4, topk (error feedback)}, two model sizes, equal total tokens (``steps``
global steps of ``global_batch`` sequences, split over the M workers), plus for each size a DDP
reference curve of runs of several lengths (the effective-compute yardstick).

Priority order (``--budget-minutes`` keeps the longest prefix whose estimated time fits):

  0. DDP reference curve, size A (lengths steps x 1/16, 1/8, 1/4, 1/2, 1, 2), seed 0
  1. H sweep at M = 4, codec none, size A (H = 10, 50, 100, 500)
  2. M sweep at H = 50, codec none, size A (M = 1, 2, 8)
  3. codec sweep at H = 50, M = 4, size A (int8, int4, topk)
  4. size B: DDP reference curve, H sweep at M = 4, M sweep at H = 50
  5. second seed of tiers 1-3 (seed-to-seed spread) and DDP M = 4 at full length (H = 1 sanity point)
  6. codec sweep on size B, H sweeps at M = 1, 2, 8, M sweeps at H = 10, 100, 500
  7. the rest of the full grid (codecs x H x M x sizes, DDP with compressed gradients)

Finished points live in ``OUT/results.jsonl`` (one JSON object per line, appended after each point)
and are never re-run: rerunning the same command resumes.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

H_GRID = (1, 10, 50, 100, 500)
M_GRID = (1, 2, 4, 8)
CODECS = ("none", "int8", "int4", "topk")
REF_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 2.0)

#: Model sizes (testbed GPT presets; B is the tiny preset at width 128).
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"preset": "tiny"},  # 2 x 64, context 64: 120,576 parameters
    "tiny-w128": {"preset": "tiny", "n_embd": 128, "n_head": 4},  # 2 x 128: 437,760 parameters
    "small": {"preset": "small"},  # 4 x 128, context 128: 842,496 parameters (full grid only)
}
DEFAULT_SIZES = ("tiny", "tiny-w128")


@dataclass(frozen=True)
class SweepSpec:
    steps: int = 1000
    global_batch: int = 16
    sizes: tuple[str, ...] = DEFAULT_SIZES
    seeds: tuple[int, ...] = (0, 1)


def point(
    size: str,
    algorithm: str,
    h: int,
    m: int,
    codec: str,
    steps: int,
    seed: int,
    role: str,
    global_batch: int,
    tier: int,
) -> dict[str, Any]:
    p = {
        "size": size,
        "algorithm": algorithm,
        "H": h,
        "workers": m,
        "codec": codec,
        "steps": steps,
        "seed": seed,
        "role": role,
        "global_batch": global_batch,
        "tier": tier,
    }
    p["key"] = f"{size}|{algorithm}|H{h}|M{m}|{codec}|S{steps}|B{global_batch}|seed{seed}|{role}"
    return p


def plan_points(spec: SweepSpec) -> list[dict[str, Any]]:
    """Every point of the full sweep, in priority order (duplicates removed, first tier wins)."""
    s, gb = spec.steps, spec.global_batch
    a = spec.sizes[0]
    b = spec.sizes[1] if len(spec.sizes) > 1 else None
    s0 = spec.seeds[0]
    s1 = spec.seeds[1] if len(spec.seeds) > 1 else None
    out: list[dict[str, Any]] = []

    def ref(size: str, seed: int, tier: int) -> None:
        for f in REF_FRACTIONS:
            out.append(point(size, "ddp", 1, 1, "none", max(1, round(s * f)), seed, "reference", gb, tier))

    def dl(size: str, h: int, m: int, codec: str, seed: int, tier: int) -> None:
        if h == 1:
            out.append(point(size, "ddp", 1, m, codec, s, seed, "sweep", gb, tier))
        else:
            out.append(point(size, "diloco", h, m, codec, s, seed, "sweep", gb, tier))

    ref(a, s0, 0)
    for h in (10, 50, 100, 500):
        dl(a, h, 4, "none", s0, 1)
    for m in (1, 2, 8):
        dl(a, 50, m, "none", s0, 2)
    for c in ("int8", "int4", "topk"):
        dl(a, 50, 4, c, s0, 3)
    if b:
        ref(b, s0, 4)
        for h in (10, 50, 100, 500):
            dl(b, h, 4, "none", s0, 4)
        for m in (1, 2, 8):
            dl(b, 50, m, "none", s0, 4)
    if s1 is not None:
        for h in (10, 50, 100, 500):
            dl(a, h, 4, "none", s1, 5)
        for m in (1, 2, 8):
            dl(a, 50, m, "none", s1, 5)
        for c in ("int8", "int4", "topk"):
            dl(a, 50, 4, c, s1, 5)
    dl(a, 1, 4, "none", s0, 5)
    if s1 is not None:
        dl(a, 1, 4, "none", s1, 5)
    if b:
        for c in ("int8", "int4", "topk"):
            dl(b, 50, 4, c, s0, 6)
    for size in [x for x in (a, b) if x]:
        for m in (1, 2, 8):
            for h in (10, 100, 500):
                dl(size, h, m, "none", s0, 6)
    for size in spec.sizes:
        if size not in (a, b):
            ref(size, s0, 7)
        for c in CODECS:
            for h in H_GRID:
                for m in M_GRID:
                    if h == 1 and m == 1 and c == "none":
                        continue
                    dl(size, h, m, c, s0, 7)
    seen: set[str] = set()
    uniq = []
    for p in out:
        if p["key"] not in seen:
            seen.add(p["key"])
            uniq.append(p)
    return uniq


def estimate_s(p: dict[str, Any], step_s: dict[str, float]) -> float:
    """Estimated seconds for a point: steps x measured seconds per global step, a per-worker
    overhead for the smaller per-worker batches, plus start-up and evaluation."""
    overhead = 1.25 * (1.0 + 0.06 * (p["workers"] - 1))  # 1.25: data, eval, two processes on two cores
    return float(p["steps"] * step_s[p["size"]] * overhead + 5.0)


def select(
    points: list[dict[str, Any]], done: set[str], budget_s: float | None, jobs: int, step_s: dict[str, float]
) -> list[dict[str, Any]]:
    """The longest priority prefix of not-yet-run points that fits ``budget_s`` on ``jobs`` processes."""
    todo = [p for p in points if p["key"] not in done]
    if budget_s is None:
        return todo
    chosen, total = [], 0.0
    for p in todo:
        t = estimate_s(p, step_s)
        if (total + t) / max(1, jobs) > budget_s:
            break
        chosen.append(p)
        total += t
    return chosen


def load_results(path: Path) -> list[dict[str, Any]]:
    """Finished points (a torn last line from an interrupted run is ignored)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def append_result(path: Path, rec: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _run_one(p: dict[str, Any], data_dir: str) -> dict[str, Any]:
    from dispersal.calibration.runner import make_config, train_point

    cfg = make_config(p, SIZES)
    res = train_point(cfg, Path(data_dir))
    return {**p, **res}


def _measure(size: str, global_batch: int, data_dir: str) -> float:
    from dispersal.calibration.runner import make_config, measure_step_s

    cfg = make_config(point(size, "ddp", 1, 1, "none", 16, 0, "reference", global_batch, 0), SIZES)
    return float(measure_step_s(cfg, Path(data_dir)))


def measure_step_times(sizes: list[str], global_batch: int, data_dir: Path) -> dict[str, float]:
    """Seconds per global step for each size, measured here (in a child process, one thread)."""
    with ProcessPoolExecutor(1) as ex:
        return {s: float(ex.submit(_measure, s, global_batch, str(data_dir)).result()) for s in sizes}


def run_points(
    points: list[dict[str, Any]],
    out: Path,
    jobs: int,
    on_done: Callable[[dict[str, Any]], None],
    deadline: float | None = None,
) -> None:
    """Run points on ``jobs`` processes (one torch thread each); append each result as it finishes.
    No new point starts after ``deadline`` (time.monotonic()); the rest wait for the next invocation."""
    import multiprocessing as mp
    import time

    results = out / "results.jsonl"
    data_dir = out / "data"
    if not points:
        return
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max(1, jobs), mp_context=ctx) as ex:
        pending: dict[Future[dict[str, Any]], dict[str, Any]] = {}
        queue = list(points)
        while queue or pending:
            if deadline is not None and time.monotonic() > deadline:
                queue.clear()
            while queue and len(pending) < max(1, jobs):
                p = queue.pop(0)
                pending[ex.submit(_run_one, p, str(data_dir))] = p
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                pending.pop(f)
                rec = f.result()
                if not all(math.isfinite(x) for x in rec["val_losses"]):
                    rec["diverged"] = True
                append_result(results, rec)
                on_done(rec)
