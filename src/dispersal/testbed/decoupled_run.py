"""``--algorithm decoupled``'s supervisor-side pieces (supervisor.run_decoupled runs them): the syncer
as a thread of the supervisor, its metrics and validation loss (`Metrics`, `Evaluator`), one learner
process per worker id, the fault plan's kills and rejoins as for the other algorithms.

The syncer starts from the same initial weights as every learner (seed ``cfg.seed``), merges with
``cfg.merge`` on a quorum (``cfg.effective_quorum``) or a deadline (``cfg.sync_deadline_s``) and
applies the outer Nesterov step (``outer_lr``, ``outer_momentum``). Each merge is one line of
``metrics.jsonl`` (version, who was merged, their staleness, median training loss, validation loss
every ``eval_every`` versions). When every learner has exited, what is still pending is merged, the
final global state is evaluated on the validation batches and ``summary.json`` is written.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from dispersal.testbed.config import TestbedConfig


def make_syncer(cfg: TestbedConfig, secret: bytes) -> Any:
    from dispersal.testbed.codecs import make_codec
    from dispersal.testbed.gpt import GPT, GPTConfig
    from dispersal.testbed.outer import NesterovOuter, OuterStep, flat_params, make_rule
    from dispersal.testbed.syncer import Syncer

    torch.manual_seed(cfg.seed)  # the learners' initial weights (worker.Worker does the same)
    theta = flat_params(GPT(GPTConfig(**cfg.gpt_kwargs()), precision=cfg.precision))
    return Syncer(
        theta,
        OuterStep(make_rule(cfg.merge), NesterovOuter(theta.numel(), cfg.outer_lr, cfg.outer_momentum)),
        secret=secret,
        codec=make_codec(cfg.codec, block=cfg.block, topk_fraction=cfg.topk_fraction),
        workers=cfg.workers,
        quorum=cfg.effective_quorum,
        deadline_s=cfg.sync_deadline_s,
        max_staleness=cfg.max_staleness,
    )


class Metrics:
    """One metrics.jsonl row per merge (called on the server's tick thread, outside its lock). ``step``
    is the merged inner steps per learner (merged updates x H / workers), so ``train --report`` plots
    it like the other algorithms; ``bytes_sent`` counts what the syncer took from each learner
    (merged updates x (payload + CRC32))."""

    def __init__(self, cfg: TestbedConfig, out: Path, syncer: Any, evaluate: Callable[[Any], float]) -> None:
        from dispersal.testbed.codecs import CRC_BYTES

        self.cfg, self.out, self.syncer, self.evaluate = cfg, out, syncer, evaluate
        self.t0 = time.monotonic()
        self.frame_bytes = syncer.codec.nbytes(syncer.numel) + CRC_BYTES
        self.bytes_sent: dict[str, int] = {}

    def __call__(self, info: dict[str, Any]) -> None:
        from dispersal._io import _clean

        v = info["version"]
        val = None
        if info["applied"] and v % self.cfg.eval_every == 0:
            val = self.evaluate(info["theta"])
        per = self.cfg.inner_steps * self.cfg.batch_size * self.cfg.block_size
        for w in info["senders"]:
            self.bytes_sent[w] = self.bytes_sent.get(w, 0) + self.frame_bytes
        row = {
            "round": v - 1,
            "version": v,
            "step": info["merged_updates"] * self.cfg.inner_steps // self.cfg.workers,
            "merged": info["senders"],
            "staleness": info["staleness"],
            "weights": info["weights"],
            "loss": info["loss"],
            "val_loss": val,
            "waited_s": info["waited_s"],
            "tokens": info["merged_updates"] * per,
            "bytes_sent": dict(sorted(self.bytes_sent.items())),
            "wall_s": time.monotonic() - self.t0,
        }
        with open(self.out / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps(_clean(row), allow_nan=False) + "\n")


def _json(raw: bytes | None) -> dict[str, Any]:
    try:
        row = json.loads(raw) if raw is not None else {}
    except (ValueError, RecursionError):
        return {}
    return row if isinstance(row, dict) else {}


def incarnation_rows(store: Any, worker: str, processes: int) -> list[dict[str, Any]]:
    """One row per process a worker id had (its signed claim ``incarnation/<w>/<n>`` exists; at most
    ``processes``: the first and one per planned rejoin), with that process's last reported counters
    (``learner_row/<w>/<n>``; empty if it reported none)."""
    rows = []
    for n in range(processes):
        if store.get(f"incarnation/{worker}/{n}") is None:
            break
        rows.append({"incarnation": n, **_json(store.get(f"learner_row/{worker}/{n}"))})
    return rows


SUMMED = ("rounds", "bytes_sent", "bytes_received", "compute_s", "exposed_s", "tokens", "refused")


def _add_up(incs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every incarnation's work added up (clock and wall time: the latest, they are not additive)."""
    done = [r for r in incs if r.get("rounds") is not None]
    if not done:
        return {}
    total: dict[str, Any] = {k: sum(r.get(k, 0) for r in done) for k in SUMMED}
    total["clock_s"] = max(r.get("clock_s", 0.0) for r in done)
    total["train_wall_s"] = max(r.get("train_wall_s", 0.0) for r in done)
    return total


def summary(
    cfg: TestbedConfig,
    out: Path,
    syncer: Any,
    store: Any,
    timed_out: bool,
    wall_s: float,
    final_val: float,
    lost: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """summary.json of a decoupled run: every learner's counters added up over its incarnations
    (``incarnations_per_worker`` lists each one), replacements that trained nothing named in
    ``idle_replacements``, lost learners in ``workers_lost`` (supervisor.honest)."""
    from dispersal._io import atomic_write_text, dumps_json
    from dispersal.testbed.faults import FaultPlan
    from dispersal.testbed.honesty import honest
    from dispersal.testbed.rounds import _util

    plan = FaultPlan.parse(cfg.faults)
    rows: dict[str, dict[str, Any]] = {}
    procs = {w: 1 + sum(f.worker == w for f in plan.of("rejoin")) for w in cfg.worker_ids}
    incs = {w: incarnation_rows(store, w, procs[w]) for w in cfg.worker_ids}
    for w in cfg.worker_ids:
        rows[w] = _json(store.get(f"learner_done/{w}"))
    idle = [
        {"worker": w, "incarnation": r["incarnation"]}
        for w, rs in incs.items()
        for r in rs
        if r["incarnation"] > 0 and not r.get("rounds")
    ]
    limit = cfg.divergence_factor * math.log(cfg.vocab_size)
    diverged = "" if final_val <= limit else f"final validation loss {final_val:.4g} > {limit:.3g}"
    # Every learner reached the end except those the fault plan kills for good (their island stopped;
    # the run goes on without them, as a synchronous group does without a dead member).
    gone = {f.worker for f in plan.of("kill")} - {f.worker for f in plan.of("rejoin")}
    done = {w for w, r in rows.items() if r.get("rounds") is not None}
    finished = bool(done) and done >= set(cfg.worker_ids) - gone
    reason = "timed out" if timed_out else ("" if finished else "a learner did not finish")
    stats = {w: t for w in cfg.worker_ids if (t := _add_up(incs[w]))}
    if idle and not reason:
        reason = "a replacement trained nothing: " + ", ".join(
            f"{x['worker']}#{x['incarnation']}" for x in idle
        )
    summary = {
        "completed": not timed_out and finished and not diverged,
        "diverged": bool(diverged),
        "reason": diverged or reason,
        "algorithm": cfg.algorithm,
        "merge": cfg.merge,
        "codec": cfg.codec,
        "workers": cfg.workers,
        "quorum": cfg.effective_quorum,
        "params": syncer.numel,
        "versions": syncer.version,
        "merged_updates": syncer.merged_updates,
        "steps": cfg.steps,
        "tokens": syncer.merged_updates * cfg.inner_steps * cfg.batch_size * cfg.block_size,
        "final_val_loss": final_val,
        "virtual_time_s": max((r["clock_s"] for r in stats.values()), default=0.0),
        "bytes_sent_per_worker": {w: int(r["bytes_sent"]) for w, r in stats.items()},
        "bytes_received_per_worker": {w: int(r["bytes_received"]) for w, r in stats.items()},
        "compute_s_per_worker": {w: r["compute_s"] for w, r in stats.items()},
        "exposed_comm_s_per_worker": {w: r["exposed_s"] for w, r in stats.items()},
        "utilisation": {w: _util(r) for w, r in stats.items()},
        "rounds_per_worker": {w: r["rounds"] for w, r in stats.items()},
        "incarnations_per_worker": {
            w: [{k: r[k] for k in ("incarnation", "rounds", "bytes_sent") if k in r} for r in rs]
            for w, rs in incs.items()
        },
        "idle_replacements": idle,
        "updates_rejected": dict(syncer.rejected),
        "train_wall_s": max((r["train_wall_s"] for r in stats.values()), default=0.0),
        "run_wall_s": wall_s,
        "config": cfg.to_dict(),
    }
    summary = honest(summary, cfg, lost or [], members_key="")
    atomic_write_text(out / "summary.json", dumps_json(summary) + "\n")
    return summary


class Evaluator:
    """Mean validation loss of a flat weight vector on the same fixed batches as
    worker.Worker.evaluate (model and data built once)."""

    def __init__(self, cfg: Any, out: Path) -> None:
        from dispersal.testbed.data import open_datasets
        from dispersal.testbed.gpt import GPT, GPTConfig

        self.cfg = cfg
        self.model = GPT(GPTConfig(**cfg.gpt_kwargs()), precision=cfg.precision)
        self.val = open_datasets(cfg, out / "data", "cpu")[1]

    def __call__(self, theta: torch.Tensor) -> float:
        from dispersal.testbed.outer import set_flat_params

        set_flat_params(self.model, theta)
        with torch.no_grad():
            losses = [
                float(self.model(*self.val.batch(12345, 0, i))[1].item())
                for i in range(self.cfg.eval_batches)
            ]
        mean = sum(losses) / len(losses)
        return mean if math.isfinite(mean) else math.inf
