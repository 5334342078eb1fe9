"""GPU smoke test of the testbed: bf16 autocast, CUDA-event timing, the presets, and real worker runs.

For someone with an NVIDIA GPU and a CUDA build of torch (nothing here is needed by the tests):

    python benchmarks/gpu_smoke.py                      # about 2-4 min on one modern GPU
    python benchmarks/gpu_smoke.py --device cpu --presets tiny --steps 5   # checks the script itself

1. Each preset (default tiny, small, medium, base) on one GPU: fp32 and bf16 loss at the same initial
   weights (must agree within 2 %), then ``--steps`` bf16 AdamW steps timed with CUDA events
   (tokens/s, peak memory); the loss must fall.
2. ``dispersal.testbed`` with real worker processes: DiLoCo, 2 workers, BPE tokens, bf16, on the GPU
   (both workers share GPU 0 if there is only one) with ``--comm-backend gloo``; the same run on the
   CPU in fp32 for reference; and with ``--comm-backend nccl`` when there are at least 2 GPUs (NCCL
   refuses two ranks on one GPU).

Writes ``OUT/gpu_smoke.json`` and ``OUT/gpu_smoke.md`` (``--out``, default ``runs/gpu_smoke``) and
exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sysconfig
import time
from pathlib import Path
from typing import Any

import torch

from dispersal._io import atomic_write_text, dumps_json
from dispersal.testbed.config import MODEL_PRESETS, TestbedConfig
from dispersal.testbed.device import ComputeClock, resolve_device
from dispersal.testbed.gpt import GPT, GPTConfig, configure_adamw, param_count
from dispersal.testbed.supervisor import run_local

BF16_LOSS_TOLERANCE = 0.02
"""bf16 and fp32 initial losses must agree within this relative difference (a smoke threshold)."""
SMOKE_VOCAB = 1024
"""BPE vocabulary of the smoke runs (small, so the tokenizer trains in seconds)."""


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def preset_check(name: str, device: torch.device, steps: int) -> dict[str, Any]:
    p = MODEL_PRESETS[name]
    cfg = GPTConfig(
        n_layer=p["n_layer"],
        n_head=p["n_head"],
        n_embd=p["n_embd"],
        block_size=p["block_size"],
        vocab_size=SMOKE_VOCAB,
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, SMOKE_VOCAB, (p["batch_size"], p["block_size"] + 1), generator=g).to(device)
    inp, tgt = x[:, :-1].contiguous(), x[:, 1:].contiguous()
    torch.manual_seed(0)
    model = GPT(cfg, precision="fp32").to(device)
    with torch.no_grad():
        loss32 = model(inp, tgt)[1].item()
        model.precision = "bf16"
        loss16 = model(inp, tgt)[1].item()
    opt = configure_adamw(model, 3e-4, 0.1)
    clock = ComputeClock(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    losses, t0 = [], clock.now()
    for _ in range(steps):
        _, loss = model(inp, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    elapsed = clock.now() - t0
    tokens = steps * p["batch_size"] * p["block_size"]
    row: dict[str, Any] = {
        "preset": name,
        "params": model.num_params(),
        "params_formula": param_count(cfg.n_layer, cfg.n_embd, cfg.block_size, SMOKE_VOCAB),
        "loss_fp32_init": loss32,
        "loss_bf16_init": loss16,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "step_s": elapsed / steps,
        "tokens_per_s": tokens / elapsed,
        "clock": clock.kind,
        "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
    }
    row["ok"] = (
        row["params"] == row["params_formula"]
        and abs(loss16 - loss32) <= BF16_LOSS_TOLERANCE * loss32
        and all(math.isfinite(v) for v in losses)
        and losses[-1] < losses[0]
    )
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def testbed_run(name: str, out: Path, **kw: object) -> dict[str, Any]:
    std = Path(sysconfig.get_paths()["stdlib"])
    cfg = TestbedConfig(
        algorithm="diloco",
        workers=2,
        steps=60,
        inner_steps=20,
        tokenizer="bpe",
        vocab_size=SMOKE_VOCAB,
        data=(str(std / "json"), str(std / "email")),
        eval_batches=8,
        run_timeout_s=600,
        **kw,  # type: ignore[arg-type]
    )
    t0 = time.perf_counter()
    s = run_local(cfg, out / name)
    row: dict[str, Any] = {
        "run": name,
        "completed": bool(s.get("completed")),
        "final_val_loss": s.get("final_val_loss"),
        "wall_s": time.perf_counter() - t0,
        "compute_s_per_worker": s.get("compute_s_per_worker"),
        "bytes_sent_per_worker": s.get("bytes_sent_per_worker"),
        "device": cfg.device,
        "precision": cfg.precision,
        "comm_backend": cfg.comm_backend,
    }
    row["ok"] = row["completed"] and math.isfinite(row["final_val_loss"] or math.nan)
    print(
        f"  {name}: {json.dumps({k: row[k] for k in ('completed', 'final_val_loss', 'wall_s')})}", flush=True
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--presets", nargs="+", default=list(MODEL_PRESETS), choices=list(MODEL_PRESETS))
    ap.add_argument("--steps", type=int, default=20, help="timed bf16 steps per preset")
    ap.add_argument("--out", type=Path, default=Path("runs/gpu_smoke"))
    ap.add_argument("--skip-runs", action="store_true", help="only the single-process preset checks")
    args = ap.parse_args()
    device = resolve_device(args.device)
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "gpus": torch.cuda.device_count() if device.type == "cuda" else 0,
        "cuda": torch.version.cuda,
        "bf16_supported": torch.cuda.is_bf16_supported() if device.type == "cuda" else True,
    }
    print(json.dumps(info), flush=True)
    presets = []
    for name in args.presets:
        row = preset_check(name, device, args.steps)
        presets.append(row)
        print(
            f"  {name}: {row['params']:,} params, loss fp32 {row['loss_fp32_init']:.4f} bf16 "
            f"{row['loss_bf16_init']:.4f}, {row['tokens_per_s']:,.0f} tokens/s, ok={row['ok']}",
            flush=True,
        )
    runs = []
    if not args.skip_runs:
        runs.append(
            testbed_run(f"diloco_{args.device}_bf16_gloo", args.out, device=args.device, precision="bf16")
        )
        runs.append(testbed_run("diloco_cpu_fp32_reference", args.out))
        if device.type == "cuda" and info["gpus"] >= 2:
            runs.append(
                testbed_run(
                    "diloco_cuda_bf16_nccl", args.out, device="cuda", precision="bf16", comm_backend="nccl"
                )
            )
        ref = runs[1]["final_val_loss"]
        for r in runs:
            r["val_loss_vs_cpu_fp32"] = r["final_val_loss"] / ref if ref and r["final_val_loss"] else None
    result = {"info": info, "presets": presets, "runs": runs, "ok": all(r["ok"] for r in presets + runs)}
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / "gpu_smoke.json", dumps_json(result) + "\n")
    lines = [
        f"# GPU smoke: {info['device']} x {info['gpus']}, torch {info['torch']}, CUDA {info['cuda']}",
        "",
        "| preset | params | loss fp32 / bf16 at init | bf16 step ms | tokens/s | peak GiB | ok |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in presets:
        mem = f"{r['peak_mem_gib']:.1f}" if r["peak_mem_gib"] is not None else "-"
        lines.append(
            f"| {r['preset']} | {r['params']:,} | {r['loss_fp32_init']:.4f} / {r['loss_bf16_init']:.4f} | "
            f"{1000 * r['step_s']:.1f} | {r['tokens_per_s']:,.0f} | {mem} | {r['ok']} |"
        )
    if runs:
        lines += ["", "| run | completed | final val loss | vs CPU fp32 | wall s |", "|---|---|---|---|---|"]
        for r in runs:
            lines.append(
                f"| {r['run']} | {r['completed']} | {_fmt(r['final_val_loss'])} | "
                f"{_fmt(r['val_loss_vs_cpu_fp32'])} | {r['wall_s']:.0f} |"
            )
    atomic_write_text(args.out / "gpu_smoke.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {args.out / 'gpu_smoke.md'}; ok={result['ok']}")
    raise SystemExit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
