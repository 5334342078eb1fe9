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


def summary(
    cfg: TestbedConfig, out: Path, syncer: Any, store: Any, timed_out: bool, wall_s: float, final_val: float
) -> dict[str, Any]:
    from dispersal._io import atomic_write_text, dumps_json
    from dispersal.testbed.rounds import _util

    rows: dict[str, dict[str, Any]] = {}
    for w in cfg.worker_ids:
        raw = store.get(f"learner_done/{w}")
        try:
            rows[w] = json.loads(raw) if raw is not None else {}
        except ValueError:
            rows[w] = {}
    limit = cfg.divergence_factor * math.log(cfg.vocab_size)
    diverged = "" if final_val <= limit else f"final validation loss {final_val:.4g} > {limit:.3g}"
    # Every learner reached the end except those the fault plan kills for good (their island stopped;
    # the run goes on without them, as a synchronous group does without a dead member).
    from dispersal.testbed.faults import FaultPlan

    plan = FaultPlan.parse(cfg.faults)
    gone = {f.worker for f in plan.of("kill")} - {f.worker for f in plan.of("rejoin")}
    done = {w for w, r in rows.items() if r.get("rounds") is not None}
    finished = bool(done) and done >= set(cfg.worker_ids) - gone
    reason = "timed out" if timed_out else ("" if finished else "a learner did not finish")
    stats = {w: r for w, r in rows.items() if r}
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
        "updates_rejected": dict(syncer.rejected),
        "train_wall_s": max((r["train_wall_s"] for r in stats.values()), default=0.0),
        "run_wall_s": wall_s,
        "config": cfg.to_dict(),
    }
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
