"""The reference for the overhead figure: the same training in a bare PyTorch loop, no testbed.

Like-for-like with one testbed worker on an instant link: same model and initial weights (seed),
same batches (``ByteData.batch(seed, worker 0, step)``), same AdamW (nanoGPT split, betas
0.9/0.95), clipping at 1.0 and warmup/cosine schedule, fp32, one thread, and it runs in its own
process started with the same environment as a worker (``OMP_NUM_THREADS=1``). The timed part is the
training loop only (after start-up), as the worker's ``train_wall_s``, which also leaves out
validation and checkpoint writes.

``python -m dispersal.testbed.plain --config CFG.json --out DIR`` writes ``DIR/plain.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.data import open_datasets
from dispersal.testbed.gpt import GPT, GPTConfig, configure_adamw, lr_at


def plain_loop(cfg: TestbedConfig, data_dir: Path) -> dict[str, float]:
    """Train ``cfg.steps`` steps on worker 0's batches; returns tokens, wall and CPU seconds, tokens/s."""
    torch.manual_seed(cfg.seed)
    model = GPT(GPTConfig(**cfg.gpt_kwargs()), precision=cfg.precision)
    opt = configure_adamw(model, cfg.inner_lr, cfg.weight_decay)
    data, _ = open_datasets(cfg, data_dir)
    params = list(model.parameters())
    t0, c0 = time.perf_counter(), time.thread_time()
    for step in range(cfg.steps):
        x, y = data.batch(cfg.seed, 0, step)
        _, loss = model(x, y)
        loss.backward()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg.steps, cfg.inner_lr, cfg.warmup_steps)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    tokens = cfg.steps * cfg.batch_size * cfg.block_size
    return {"tokens": tokens, "wall_s": wall, "cpu_s": cpu, "tokens_per_s": tokens / wall}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="dispersal.testbed.plain")
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # as every worker
    cfg = TestbedConfig.from_dict(json.loads(Path(args.config).read_text()))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = plain_loop(cfg, out / "data")
    from dispersal._io import atomic_write_text

    atomic_write_text(out / "plain.json", json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
