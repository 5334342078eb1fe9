"""The tail grid: replicas x token budget x per-replica batch x H, with each cell's own baselines.

The M-sweep (replicas_sweep.py) runs one token budget and one per-replica batch, so it measures g
against M and H only. This grid (issue 32) adds the two axes the critical-batch tail depends on:

* DiLoCo cells: M replicas, b sequences per replica per step, D tokens in all, H inner steps per
  round: ``steps = D / (M b block)`` inner steps per replica, kept when it is a whole number of
  at least ``min_rounds`` rounds (the rest are listed as infeasible, not run).
* The baseline law of each (seed, b): data parallelism at one replica (plain AdamW at batch b,
  ``algorithm="dp"``, M = 1) trained to every grid budget plus ``baseline_fractions`` of the
  smallest one (the high-loss end where the large-M cells land). g of a DiLoCo cell is the tokens
  that law needs to reach the cell's loss over the cell's tokens (replicas_sweep.quality_factor).
* The fixed-global-batch split: for every global batch G = M b reached by two or more (M, b)
  pairs, plain AdamW at batch G at every budget (the data-parallel run with the same global batch,
  steps and tokens as each split), so L_DiLoCo(M, G / M) / L_DP(G) says what spreading G over M
  replicas costs.

Every run validates on the same fixed sequences (``eval_batches`` x ``eval_batch_size``), so cells
with different b are compared on the same data. Results are appended to a JSONL file one line per
finished run; a rerun skips the keys already there and ignores a torn last line (an interrupted
write), so the grid resumes.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dispersal.model.inputs.errors import InputError, require

BLOCK = {"tiny": 64, "small": 128, "medium": 256, "base": 1024}
"""Sequence length (tokens) of the testbed presets (config.MODEL_PRESETS' block_size)."""

# Cost model of one run for the plan and the progress bar's estimate (seconds, one torch thread):
# fixed cost (engine, data, validation) + steps x (per-step overhead + per-sequence cost). Measured on
# the shared 2-core host for tiny (19:50 UTC, load ~2-4): about 2 s, 20 ms and 8 ms. An estimate only.
RUN_S = 2.0
STEP_S = 0.02
SEQ_S = {"tiny": 0.008, "small": 0.05, "medium": 0.4, "base": 4.0}


@dataclass(frozen=True, kw_only=True)
class GridSpec:
    """The grid's axes. Budgets are total tokens of a run; batches are sequences per replica per step."""

    model: str = "tiny"
    replicas: tuple[int, ...] = (1, 4, 16, 64, 256)
    budgets: tuple[int, ...] = (4_096, 16_384, 65_536)
    batches: tuple[int, ...] = (1, 4, 16)
    inner_steps: tuple[int, ...] = (2, 8)
    seeds: tuple[int, ...] = (0, 1, 2)
    baseline_fractions: tuple[float, ...] = (1 / 16, 1 / 4)
    """Extra baseline budgets, as fractions of the smallest grid budget."""
    min_rounds: int = 1
    eval_batches: int = 8
    eval_batch_size: int = 8
    merge: str = "mean"

    def __post_init__(self) -> None:
        require(self.model in BLOCK, "model", f"one of {', '.join(BLOCK)}, got {self.model!r}")
        for name in ("replicas", "budgets", "batches", "inner_steps"):
            vals = getattr(self, name)
            require(
                len(vals) >= 1 and all(isinstance(v, int) and v >= 1 for v in vals),
                name,
                f"one or more integers >= 1, got {vals}",
            )
        require(all(1 <= m <= 4096 for m in self.replicas), "replicas", "each in 1..4096")
        require(len(self.seeds) >= 1 and all(s >= 0 for s in self.seeds), "seeds", "one or more >= 0")
        require(all(0 < f < 1 for f in self.baseline_fractions), "baseline_fractions", "each in (0, 1)")
        require(self.min_rounds >= 1, "min_rounds", f"an integer >= 1, got {self.min_rounds}")
        require(self.eval_batches >= 1 and self.eval_batch_size >= 1, "eval_batches", "both >= 1")

    @property
    def block(self) -> int:
        return BLOCK[self.model]

    def split_batches(self) -> tuple[int, ...]:
        """Global batches G = M b reached by two or more (M, b) pairs of the grid (the split question)."""
        count: dict[int, int] = {}
        for m in self.replicas:
            for b in self.batches:
                count[m * b] = count.get(m * b, 0) + 1
        return tuple(sorted(g for g, n in count.items() if n >= 2))


def cell_key(c: dict[str, Any]) -> str:
    """The identity of a run (what a resumed grid matches on)."""
    return "|".join(
        f"{k}={c[k]}"
        for k in ("model", "algorithm", "replicas", "batch", "tokens", "inner_steps", "seed", "merge")
    )


def _cell(
    spec: GridSpec, alg: str, m: int, b: int, tokens: int, h: int, seed: int, role: str
) -> dict[str, Any]:
    steps = tokens // (m * b * spec.block)
    c = {
        "model": spec.model,
        "algorithm": alg,
        "replicas": m,
        "batch": b,
        "tokens": tokens,
        "inner_steps": h,
        "seed": seed,
        "merge": spec.merge if alg == "diloco" else "dp",
        "steps": steps,
        "role": role,
    }
    c["key"] = cell_key(c)
    return c


def feasible(spec: GridSpec, m: int, b: int, tokens: int, h: int) -> bool:
    """A whole number of steps per replica, a whole number of rounds, at least ``min_rounds`` of them."""
    seqs = m * b * spec.block
    if tokens % seqs:
        return False
    steps = tokens // seqs
    return steps >= h * spec.min_rounds and steps % h == 0


def plan(spec: GridSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(runs in execution order, infeasible DiLoCo cells). Seed by seed, so a cut-short grid has
    whole seeds; within a seed the baselines first (every DiLoCo cell needs its law). DiLoCo at
    M = 1 runs last, after every seed: the tail fit does not use it (its anchor is M_x >= 2) and it
    is the costliest run per token (one sequence per step at b = 1)."""
    runs: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    lo = min(spec.budgets)
    base_budgets = sorted({*spec.budgets, *(int(lo * f) for f in spec.baseline_fractions)})
    for seed in spec.seeds:
        for b in spec.batches:
            for d in base_budgets:
                if feasible(spec, 1, b, d, 1):
                    runs.append(_cell(spec, "dp", 1, b, d, 1, seed, "baseline"))
        for g in spec.split_batches():
            if g in spec.batches:
                continue  # the baseline law at batch g is already the DP reference
            for d in spec.budgets:
                if feasible(spec, 1, g, d, 1):
                    runs.append(_cell(spec, "dp", 1, g, d, 1, seed, "split_dp"))
        for d in spec.budgets:
            for b in spec.batches:
                for h in spec.inner_steps:
                    for m in spec.replicas:
                        if feasible(spec, m, b, d, h):
                            runs.append(_cell(spec, "diloco", m, b, d, h, seed, "diloco"))
                        elif seed == spec.seeds[0]:
                            skipped.append(_cell(spec, "diloco", m, b, d, h, seed, "infeasible"))
    runs.sort(key=lambda c: c["role"] == "diloco" and c["replicas"] == 1)  # stable: order kept
    return runs, skipped


def estimate_s(c: dict[str, Any]) -> float:
    """Estimated seconds of one run on one thread (the module's cost model)."""
    return float(RUN_S + c["steps"] * (STEP_S + SEQ_S[c["model"]] * c["replicas"] * c["batch"]))


# ----------------------------------------------------------------------------- the results file
def load_records(path: Path) -> list[dict[str, Any]]:
    """Finished runs in ``path``. A torn last line (a write cut by an interruption) is ignored; a
    malformed line elsewhere is an error naming the file and line."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # no newline after it: the interrupted last write
                continue
            raise InputError("results", f"{path}:{i + 1} is not a JSON line; fix or remove it") from None
        if not isinstance(rec, dict) or "key" not in rec:
            raise InputError("results", f"{path}:{i + 1} is not a grid record (no 'key')")
        out.append(rec)
    return out


def append_record(path: Path, rec: dict[str, Any]) -> None:
    """Append one record as a line, first cutting a torn last line so the new one starts cleanly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size:
        with open(path, "rb+") as fh:
            data = fh.read()
            if not data.endswith(b"\n"):
                fh.truncate(data.rfind(b"\n") + 1)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


# ----------------------------------------------------------------------------- running
def run_cell(c: dict[str, Any], spec_d: dict[str, Any], data_dir: str, device: str = "cpu") -> dict[str, Any]:
    """Train one grid run (in a worker process, one torch thread) and return its record."""
    import torch

    from dispersal.testbed.replicas import ReplicaConfig, run_replicas

    if device == "cpu":
        torch.set_num_threads(1)
    cfg = ReplicaConfig(
        algorithm=c["algorithm"],
        replicas=c["replicas"],
        inner_steps=c["inner_steps"],
        steps=c["steps"],
        model=c["model"],
        batch_size=c["batch"],
        merge=c["merge"] if c["algorithm"] == "diloco" else "mean",
        seed=c["seed"],
        warmup_steps=max(1, c["steps"] // 10),  # 10 % of the run (the M-sweep's rule)
        eval_batches=spec_d["eval_batches"],
        eval_batch_size=spec_d["eval_batch_size"],
        chunk=64,
        device=device,
    )
    res = run_replicas(cfg, Path(data_dir))
    rec = {k: v for k, v in c.items()}
    rec.update(
        val_loss=res.final_val_loss if math.isfinite(res.final_val_loss) else None,
        diverged=res.diverged,
        wall_s=round(res.wall_s, 3),
    )
    assert res.tokens == c["tokens"], (res.tokens, c)
    return rec


def run_grid(
    spec: GridSpec,
    results: Path,
    data_dir: Path,
    *,
    jobs: int = 1,
    device: str = "cpu",
    on_done: Callable[[dict[str, Any]], None] | None = None,
    only: Iterable[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Run the runs of ``spec`` not yet in ``results`` (or ``only`` those), appending each record as
    it finishes; returns the new records. ``jobs`` worker processes, one torch thread each."""
    done = {r["key"] for r in load_records(results)}
    todo = [c for c in (only if only is not None else plan(spec)[0]) if c["key"] not in done]
    new: list[dict[str, Any]] = []
    if not todo:
        return new
    if jobs <= 1:
        for c in todo:
            rec = run_cell(c, asdict(spec), str(data_dir), device)
            append_record(results, rec)
            new.append(rec)
            if on_done:
                on_done(rec)
        return new
    import multiprocessing as mp

    # Prepare the corpus once before the workers start (each would otherwise race to build it).
    from dispersal.testbed.data import prepare_data
    from dispersal.testbed.replicas import ReplicaConfig

    prepare_data(ReplicaConfig(model=spec.model, steps=1, inner_steps=1).testbed_config(), data_dir)
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as ex:
        pending: dict[Future[dict[str, Any]], dict[str, Any]] = {}
        queue = list(todo)
        while queue or pending:
            while queue and len(pending) < jobs:
                c = queue.pop(0)
                pending[ex.submit(run_cell, c, asdict(spec), str(data_dir), device)] = c
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                pending.pop(f)
                rec = f.result()
                append_record(results, rec)
                new.append(rec)
                if on_done:
                    on_done(rec)
    return new
