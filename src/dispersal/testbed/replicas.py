"""Many replicas in one process: DiLoCo with M = 1 ... 256 replicas as stacked parameters.

Each of the model's parameters is held once per replica, stacked on a leading axis of size M. One
inner step is one ``torch.func.vmap`` of ``torch.func.grad`` over ``functional_call`` of the
testbed's GPT (gpt.py), followed by per-replica gradient clipping (norm 1.0) and an AdamW step
written on the stacked tensors (the same update as ``torch.optim.AdamW``: decoupled decay on
matrices only, betas (0.9, 0.95), eps 1e-8, nanoGPT's warmup + cosine schedule). Every H inner
steps the pseudo-gradients ``delta_m = theta_global - theta_m`` go through an aggregation rule
(robust.py: ``mean`` is DiLoCo, ``norm_preserving`` the Decoupled DiLoCo merge, or a robust rule),
optionally corrupted first by attackers (attacks.py), and the outer Nesterov step of outer.py moves
the global weights; every replica then restarts from them, keeping its own AdamW state, exactly as
the multi-process worker does (worker.py). Replica m reads ``train.batch(seed, m, step)``, the
batch worker ``wm`` reads, and validation uses the workers' fixed batches, so a run here and a
``dispersal train`` run with the same settings differ only by floating-point summation order.

``algorithm="dp"`` is the data-parallel baseline: the M replicas' gradients are averaged every
step and one AdamW step is taken (global batch M x batch_size); with M = 1 it is plain AdamW.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.func import functional_call, grad_and_value, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from dispersal.model.inputs.errors import require
from dispersal.testbed.attacks import Attacker, parse_attack
from dispersal.testbed.config import MODEL_PRESETS, TestbedConfig
from dispersal.testbed.data import open_datasets
from dispersal.testbed.gpt import GPT, GPTConfig, lr_at
from dispersal.testbed.outer import NesterovOuter
from dispersal.testbed.robust import AGGREGATORS, Aggregator, UpdateVerdict, make_aggregator

ALGORITHMS = ("diloco", "dp")
MAX_REPLICAS = 4096
SCORE_SEED = 777
"""Seed of the held-out training batches the gauntlet rule scores updates on (no replica reads them)."""
SCORE_WORKER = 1_000_000
"""Worker index of those batches: far above any replica index, so the windows are not a replica's."""
BETAS = (0.9, 0.95)
EPS = 1e-8
CLIP_NORM = 1.0
DIVERGED_FACTOR = 1.5
"""A run is flagged diverged when its validation loss is non-finite or above 1.5 x ln(vocab),
worse than a uniform guess by half."""


@dataclass(frozen=True, kw_only=True)
class ReplicaConfig:
    """One many-replica run. ``steps`` counts inner steps per replica (tokens = M x steps x batch x block)."""

    algorithm: str = "diloco"
    replicas: int = 4
    inner_steps: int = 50
    steps: int = 200
    model: str = "tiny"
    batch_size: int = 0
    """Sequences per replica per step; 0 = the preset's."""
    # The optimizer defaults are the worker processes' own (one declaration, in TestbedConfig).
    inner_lr: float = TestbedConfig.inner_lr
    warmup_steps: int = TestbedConfig.warmup_steps
    weight_decay: float = TestbedConfig.weight_decay
    outer_lr: float = TestbedConfig.outer_lr
    outer_momentum: float = TestbedConfig.outer_momentum
    merge: str = "mean"
    merge_params: tuple[tuple[str, float], ...] = ()
    attacks: tuple[str, ...] = ()
    seed: int = 0
    eval_batches: int = 8
    eval_batch_size: int = 0
    """Sequences per validation batch; 0 = the training batch size (the workers' validation). A
    fixed value gives every run of a grid over batch sizes the same validation sequences."""
    eval_every: int = 0
    """Validation every this many rounds (0 = only at the end)."""
    score_batches: int = 1
    """Held-out batches the gauntlet rule scores each update on."""
    data: tuple[str, ...] = ()
    device: str = "cpu"
    chunk: int = 0
    """vmap chunk size (bounds activation memory); 0 = all replicas at once."""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(
            self.algorithm in ALGORITHMS,
            "algorithm",
            f"one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}",
        )
        require(
            1 <= self.replicas <= MAX_REPLICAS,
            "replicas",
            f"an integer in 1..{MAX_REPLICAS}, got {self.replicas}",
        )
        require(
            self.model in MODEL_PRESETS, "model", f"one of {', '.join(MODEL_PRESETS)}, got {self.model!r}"
        )
        require(self.inner_steps >= 1, "inner-steps", f"an integer >= 1, got {self.inner_steps}")
        require(
            self.steps >= 1 and self.steps % self.inner_steps == 0,
            "steps",
            f"a positive multiple of inner-steps={self.inner_steps}, got {self.steps}",
        )
        require(self.merge in AGGREGATORS, "merge", f"one of {', '.join(AGGREGATORS)}, got {self.merge!r}")
        make_aggregator(self.merge, **dict(self.merge_params))  # validates the parameters
        for text in self.attacks:
            a = parse_attack(text)
            require(
                int(a.worker[1:]) < self.replicas,
                "attack",
                f"worker {a.worker} is not among {self.replicas} replicas",
            )
        require(self.chunk >= 0, "chunk", f"an integer >= 0, got {self.chunk}")
        require(self.eval_batch_size >= 0, "eval-batch-size", f"an integer >= 0, got {self.eval_batch_size}")

    def testbed_config(self) -> TestbedConfig:
        """The testbed config whose model, data and schedule this run shares (workers capped at 64)."""
        return TestbedConfig(
            algorithm="diloco",
            workers=min(self.replicas, 64),
            steps=self.steps,
            inner_steps=self.inner_steps,
            model=self.model,
            batch_size=self.batch_size,
            inner_lr=self.inner_lr,
            warmup_steps=self.warmup_steps,
            weight_decay=self.weight_decay,
            outer_lr=self.outer_lr,
            outer_momentum=self.outer_momentum,
            seed=self.seed,
            data=self.data,
            device=self.device,
            eval_batches=self.eval_batches,
        )

    @property
    def rounds(self) -> int:
        return self.steps // self.inner_steps


@dataclass(frozen=True, kw_only=True)
class ReplicaResult:
    final_val_loss: float
    val_curve: tuple[tuple[int, float], ...]
    """(round, validation loss) at the evaluated rounds."""
    tokens: int
    diverged: bool
    rejected: int
    """Updates given weight 0 over the run (rejections and gauntlet drops)."""
    clipped: int
    reasons: tuple[str, ...]
    """The distinct reasons the rule gave (first few), for the log."""
    wall_s: float
    round_s: float
    """Mean wall time of a round (inner steps + outer step, validation excluded)."""
    aggregate_s_per_round: float
    """Mean wall time of the aggregation (+ scoring) per round: the rule's own time cost."""


class ReplicaEngine:
    """State and steps of one many-replica run (see the module docstring)."""

    def __init__(self, cfg: ReplicaConfig, data_dir: Path) -> None:
        self.cfg = cfg
        tb = cfg.testbed_config()
        self.tb = tb
        self.device = torch.device(cfg.device)
        torch.manual_seed(cfg.seed)  # the workers' initial weights (worker.py seeds the same way)
        self.model = GPT(GPTConfig(**tb.gpt_kwargs())).to(self.device)
        self.names = [n for n, _ in self.model.named_parameters()]
        self.decay = [p.dim() >= 2 for _, p in self.model.named_parameters()]
        self.shapes = [p.shape for _, p in self.model.named_parameters()]
        self.sizes = [p.numel() for _, p in self.model.named_parameters()]
        self.global_flat = torch.cat([p.detach().reshape(-1) for p in self.model.parameters()]).float().cpu()
        m = cfg.replicas if cfg.algorithm == "diloco" else 1
        # One contiguous [m, numel] buffer per state: AdamW and clipping are a few whole-tensor ops,
        # and each parameter is a view of its columns (split last dim: a valid view).
        self.flat = self.global_flat.to(self.device).unsqueeze(0).repeat(m, 1)
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.decay_mask = torch.cat(
            [torch.full((n,), float(d)) for n, d in zip(self.sizes, self.decay, strict=True)]
        ).to(self.device)
        self.stacked = self._views(self.flat)
        self.adam_steps = 0
        self.outer = NesterovOuter(self.global_flat.numel(), cfg.outer_lr, cfg.outer_momentum)
        self.aggregator: Aggregator = make_aggregator(cfg.merge, **dict(cfg.merge_params))
        self.attackers = {
            int(a.worker[1:]): Attacker(a, seed=cfg.seed * 7919 + int(a.worker[1:]))
            for a in map(parse_attack, cfg.attacks)
        }
        self.train, self.val = open_datasets(tb, data_dir, self.device)
        if cfg.eval_batch_size:
            self.val.batch_size = cfg.eval_batch_size
        self._grad_fn = self._make_grad_fn()
        self.verdicts: list[list[UpdateVerdict]] = []

    # ----------------------------------------------------------------- inner steps
    def _make_grad_fn(self) -> Callable[..., Any]:
        model, names = self.model, self.names

        def loss_fn(params: tuple[Tensor, ...], x: Tensor, y: Tensor) -> Tensor:
            _, loss = functional_call(model, dict(zip(names, params, strict=True)), (x, y))
            assert isinstance(loss, Tensor)
            return loss

        def with_loss(params: tuple[Tensor, ...], x: Tensor, y: Tensor) -> tuple[Any, Tensor]:
            return grad_and_value(loss_fn)(params, x, y)  # (grads, loss) in one backward pass

        chunk = self.cfg.chunk or None
        return vmap(with_loss, in_dims=(0, 0, 0), chunk_size=chunk)

    def _batches(self, step: int) -> tuple[Tensor, Tensor]:
        xs, ys = zip(
            *(self.train.batch(self.cfg.seed, m, step) for m in range(self.cfg.replicas)), strict=True
        )
        return torch.stack(xs), torch.stack(ys)

    def _views(self, flat: Tensor) -> list[Tensor]:
        out, offset = [], 0
        for n, shape in zip(self.sizes, self.shapes, strict=True):
            out.append(flat[:, offset : offset + n].view(flat.shape[0], *shape))
            offset += n
        return out

    def _adamw(self, g: Tensor, lr: float) -> None:
        """torch.optim.AdamW's update (same formula, same order of operations) on the flat buffers."""
        self.adam_steps += 1
        b1, b2 = BETAS
        bc1 = 1 - b1**self.adam_steps
        bc2 = 1 - b2**self.adam_steps
        self.flat.mul_(1 - lr * self.cfg.weight_decay * self.decay_mask)
        self.exp_avg.lerp_(g, 1 - b1)
        self.exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (self.exp_avg_sq.sqrt() / math.sqrt(bc2)).add_(EPS)
        self.flat.addcdiv_(self.exp_avg, denom, value=-lr / bc1)

    @staticmethod
    def _clip(g: Tensor) -> None:
        """Per replica (row): torch.nn.utils.clip_grad_norm_(max_norm=1.0)."""
        coef = (CLIP_NORM / (g.pow(2).sum(dim=1).sqrt() + 1e-6)).clamp(max=1.0)
        g.mul_(coef.unsqueeze(1))

    def inner_step(self, step: int) -> float:
        """One inner step for every replica; returns the mean training loss."""
        x, y = self._batches(step)
        m = self.cfg.replicas
        params = (
            tuple(p.expand(m, *p.shape[1:]) for p in self.stacked)
            if self.cfg.algorithm == "dp"
            else tuple(self.stacked)
        )
        # The math attention kernel: vmap has no batching rule for the fused CPU kernel (it would
        # loop over replicas); same result up to summation order.
        with sdpa_kernel(SDPBackend.MATH):
            grads, losses = self._grad_fn(params, x, y)
        g = torch.cat([t.reshape(m, -1) for t in grads], dim=1)
        if self.cfg.algorithm == "dp":
            g = g.mean(dim=0, keepdim=True)
        self._clip(g)
        self._adamw(g, lr_at(step, self.cfg.steps, self.cfg.inner_lr, self.cfg.warmup_steps))
        return float(losses.mean())

    # ----------------------------------------------------------------- outer step
    def _flat_replicas(self) -> Tensor:
        return self.flat.float().cpu()

    def _set_replicas(self, flat: Tensor) -> None:
        self.flat.copy_(flat.to(self.device).unsqueeze(0).expand_as(self.flat))

    @torch.no_grad()
    def loss_at(self, flat: Tensor, batches: list[tuple[Tensor, Tensor]]) -> float:
        """Mean loss of the flat weights ``flat`` on ``batches``."""
        params = {}
        offset = 0
        for name, n, shape in zip(self.names, self.sizes, self.shapes, strict=True):
            params[name] = flat[offset : offset + n].view(shape).to(self.device)
            offset += n
        losses = [float(functional_call(self.model, params, (x, y))[1]) for x, y in batches]
        return sum(losses) / len(losses)

    def evaluate(self) -> float:
        """The workers' validation: fixed batches ``val.batch(12345, 0, i)`` on the global weights."""
        flat = self.global_flat if self.cfg.algorithm == "diloco" else self._flat_replicas()[0]
        return self.loss_at(flat, [self.val.batch(12345, 0, i) for i in range(self.cfg.eval_batches)])

    def outer_step(self, r: int, first_step: int) -> float:
        """Aggregate the pseudo-gradients (attacks applied first), step the global weights. Returns seconds."""
        honest = self.global_flat.unsqueeze(0) - self._flat_replicas()
        updates = [honest[m] for m in range(self.cfg.replicas)]
        for m, attacker in self.attackers.items():
            peer = honest[(m + 1) % self.cfg.replicas]
            updates[m] = attacker.corrupt(honest[m], step=first_step, peers=[peer])
        t0 = time.perf_counter()
        score = None
        if self.cfg.merge == "gauntlet":
            held = [
                self.train.batch(SCORE_SEED + r, SCORE_WORKER + i, 0) for i in range(self.cfg.score_batches)
            ]
            before = self.loss_at(self.global_flat, held)

            def score(u: Tensor) -> float:
                return before - self.loss_at(self.global_flat - u, held)

        agg, verdicts = self.aggregator(updates, score=score)
        self.outer.step(self.global_flat, agg)
        seconds = time.perf_counter() - t0
        self.verdicts.append(verdicts)
        self._set_replicas(self.global_flat)
        return seconds


def run_replicas(
    cfg: ReplicaConfig, data_dir: Path, *, log: Callable[[str], None] | None = None
) -> ReplicaResult:
    """Run ``cfg`` to the end (stopping early once diverged) and return its result."""
    eng = ReplicaEngine(cfg, data_dir)
    limit = DIVERGED_FACTOR * math.log(eng.tb.vocab_size)
    t0 = time.perf_counter()
    curve: list[tuple[int, float]] = []
    agg_s = 0.0
    diverged = False
    h = cfg.inner_steps
    train_s = 0.0
    for r in range(cfg.rounds):
        t_round = time.perf_counter()
        loss = 0.0
        for s in range(h):
            loss = eng.inner_step(r * h + s)
        if cfg.algorithm == "diloco":
            agg_s += eng.outer_step(r, r * h)
        train_s += time.perf_counter() - t_round
        if not math.isfinite(loss):
            diverged = True
        last = r == cfg.rounds - 1
        if last or diverged or (cfg.eval_every and (r + 1) % cfg.eval_every == 0):
            val = eng.evaluate()
            curve.append((r, val))
            if log:
                log(f"round {r} train {loss:.4f} val {val:.4f}")
            if not math.isfinite(val) or val > limit:
                diverged = True
        if diverged:
            break
    final = curve[-1][1] if curve else math.inf
    flat = [v for vs in eng.verdicts for v in vs]
    reasons: list[str] = []
    for v in flat:
        if v.reason and v.reason not in reasons and len(reasons) < 5:
            reasons.append(v.reason)
    tokens = cfg.replicas * cfg.steps * eng.tb.batch_size * eng.tb.block_size
    return ReplicaResult(
        final_val_loss=final if math.isfinite(final) else math.inf,
        val_curve=tuple(curve),
        tokens=tokens,
        diverged=diverged,
        rejected=sum(1 for v in flat if v.weight == 0.0),
        clipped=sum(1 for v in flat if v.clipped),
        reasons=tuple(reasons),
        wall_s=time.perf_counter() - t0,
        round_s=train_s / max(1, len(curve) and (curve[-1][0] + 1)),
        aggregate_s_per_round=agg_s / max(1, len(eng.verdicts)),
    )
