"""One calibration point, trained in one process with the testbed's own pieces (needs torch).

The multi-process testbed (``dispersal train``) spends most of a short run on process start-up,
gloo rendezvous and store round trips; on a 2-core machine a sweep of ~100 points through it does not
fit in 20 minutes. This runner replays the *same algorithm* in one process: the testbed's ``GPT``,
``configure_adamw`` and ``lr_at`` (AdamW, warmup + cosine), ``ByteData`` batches (a pure function of
seed, worker index and step, so worker ``m`` sees exactly the batches testbed worker ``wm`` sees),
the codecs (encode -> decode, relay ``encode_average`` -> decode, error feedback per worker) and
``NesterovOuter``. M workers are simulated one after another; no bytes or clocks are modelled (the
calibration measures loss, not time). ``tests/calibration`` checks it against ``run_local``.

Equal total tokens: a global batch of ``global_batch`` sequences per step is split evenly over the M
workers (Charles et al. 2025 keep the global batch fixed as M grows), so every point with the same
``steps`` trains on the same number of tokens and spends the same compute 6 N T.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import torch

from dispersal.testbed.codecs import make_codec
from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.data import ByteData, prepare_corpus
from dispersal.testbed.gpt import GPT, GPTConfig, configure_adamw, lr_at
from dispersal.testbed.outer import NesterovOuter, flat_grads, flat_params, set_flat_grads, set_flat_params

EVAL_SEED = 12345  # the testbed's fixed validation batches


def make_config(point: dict[str, Any], sizes: dict[str, dict[str, Any]]) -> TestbedConfig:
    """The TestbedConfig of a point (validates H, M, codec, steps exactly as `dispersal train` does)."""
    size = sizes[point["size"]]
    m = int(point["workers"])
    gb = int(point["global_batch"])
    if gb % m:
        raise ValueError(f"global_batch: {gb} is not divisible by workers={m}")
    return TestbedConfig(
        algorithm=point["algorithm"],
        workers=m,
        steps=int(point["steps"]),
        inner_steps=int(point["H"]) if point["algorithm"] != "ddp" else 1,
        model=size["preset"],
        n_layer=size.get("n_layer", 0),
        n_head=size.get("n_head", 0),
        n_embd=size.get("n_embd", 0),
        block_size=size.get("block_size", 0),
        batch_size=gb // m,
        codec=point["codec"],
        seed=int(point["seed"]),
        inner_lr=float(point.get("inner_lr", 1e-3)),
        topk_fraction=float(point.get("topk_fraction", 0.01)),
    )


@torch.no_grad()
def eval_losses(model: GPT, val: ByteData, batches: int) -> list[float]:
    """Per-batch validation loss on the fixed batches (same for every run of a size)."""
    return [float(model(*val.batch(EVAL_SEED, 0, i))[1].item()) for i in range(batches)]


def train_point(
    cfg: TestbedConfig, data_dir: Path, *, eval_batches: int = 32, eval_batch_size: int = 16
) -> dict[str, Any]:
    """Train one point; return final per-batch validation losses and bookkeeping."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    train_bin, val_bin = prepare_corpus(cfg.data, data_dir)
    train = ByteData(train_bin, cfg.block_size, cfg.batch_size)
    val = ByteData(val_bin, cfg.block_size, eval_batch_size)
    torch.manual_seed(cfg.seed)
    gcfg = GPTConfig(n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd, block_size=cfg.block_size)
    model = GPT(gcfg)
    n_params = model.num_params()
    codecs = [
        make_codec(cfg.codec, block=cfg.block, topk_fraction=cfg.topk_fraction) for _ in range(cfg.workers)
    ]
    relay = make_codec(cfg.codec, block=cfg.block, topk_fraction=cfg.topk_fraction)

    def adamw_step(m: GPT, opt: torch.optim.Optimizer, step: int) -> None:
        lr = lr_at(step, cfg.steps, cfg.inner_lr, cfg.warmup_steps)
        for group in opt.param_groups:
            group["lr"] = lr
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def exchange(updates: list[torch.Tensor]) -> torch.Tensor:
        n = updates[0].numel()
        decoded = [c.decode(c.encode(u), n) for c, u in zip(codecs, updates, strict=True)]
        avg = torch.stack(decoded).sum(0) / len(decoded)
        return relay.decode(relay.encode_average(avg), n)

    if cfg.algorithm == "ddp":
        opt = configure_adamw(model, cfg.inner_lr, cfg.weight_decay)
        for step in range(cfg.steps):
            grads = []
            for w in range(cfg.workers):
                _, loss = model(*train.batch(cfg.seed, w, step))
                loss.backward()
                grads.append(flat_grads(model))
                model.zero_grad(set_to_none=True)
            set_flat_grads(model, exchange(grads))
            adamw_step(model, opt, step)
        final = model
    elif cfg.algorithm == "diloco":
        global_flat = flat_params(model)
        outer = NesterovOuter(global_flat.numel(), cfg.outer_lr, cfg.outer_momentum)
        locals_ = [copy.deepcopy(model) for _ in range(cfg.workers)]
        opts = [configure_adamw(m, cfg.inner_lr, cfg.weight_decay) for m in locals_]
        for r in range(cfg.rounds):
            for w, (m, opt) in enumerate(zip(locals_, opts, strict=True)):
                for s in range(cfg.inner_steps):
                    step = r * cfg.inner_steps + s
                    _, loss = m(*train.batch(cfg.seed, w, step))
                    loss.backward()
                    adamw_step(m, opt, step)
            avg = exchange([global_flat - flat_params(m) for m in locals_])
            outer.step(global_flat, avg)
            for m in locals_:
                set_flat_params(m, global_flat)
        set_flat_params(model, global_flat)
        final = model
    else:
        raise ValueError(f"algorithm: the calibration runs ddp or diloco, got {cfg.algorithm!r}")
    losses = eval_losses(final, val, eval_batches)
    tokens = cfg.steps * cfg.workers * cfg.batch_size * cfg.block_size
    return {
        "val_losses": losses,
        "val_loss": sum(losses) / len(losses),
        "params": n_params,
        "tokens": tokens,
        "flop": 6.0 * n_params * tokens,
        "wall_s": time.perf_counter() - t0,
    }


def measure_step_s(cfg: TestbedConfig, data_dir: Path, steps: int = 4) -> float:
    """Seconds per global step (all M workers) for this config on this machine, after one warm-up step."""
    torch.set_num_threads(1)
    train_bin, _ = prepare_corpus(cfg.data, data_dir)
    train = ByteData(train_bin, cfg.block_size, cfg.batch_size * cfg.workers)
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd, block_size=cfg.block_size)
    )
    opt = configure_adamw(model, 1e-3, 0.1)
    t = 0.0
    for i in range(steps + 1):
        t0 = time.perf_counter()
        _, loss = model(*train.batch(0, 0, i))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:
            t += time.perf_counter() - t0
    return t / steps
