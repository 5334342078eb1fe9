"""The tail grid (issue 32) at larger presets on a lent GPU: replicas x tokens x per-replica batch x H.

Not run by the tests and never required. Same engine, plan, results file and fit as
``dispersal tail-grid`` (dispersal.testbed.replicas_grid / replicas_tailfit), on ``cuda`` with one
process; each preset's runs are appended to ``runs/tailgrid/<preset>_gpu.jsonl`` as they finish, so
an interrupted job resumes where it stopped (rerun the same command). Then the fit is printed and,
with ``--toml``, written (the CPU grid's file is src/dispersal/data/testbed_tail_fit.toml; a GPU fit
goes beside it, e.g. ``--toml runs/tailgrid/small_gpu_fit.toml``, to compare before it replaces it).

    python benchmarks/gpu_replica_grid.py --model small --minutes 12
    python benchmarks/gpu_replica_grid.py --model medium --budgets 1048576 4194304 16777216 --minutes 40

Budgets default to 16x apart at 1/4, 1 and 4 times 20 tokens per parameter of the preset (small:
842,496 parameters -> 4.2 M, 16.8 M, 67 M tokens would be too long for one lent slot, so the
defaults are 1/64, 1/16 and 1/4 of 20 tokens per parameter; pass --budgets for more).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dispersal.testbed import replicas_grid as rg  # noqa: E402
from dispersal.testbed import replicas_tailreport as rep  # noqa: E402
from dispersal.testbed.config import MODEL_PRESETS  # noqa: E402
from dispersal.testbed.gpt import param_count  # noqa: E402


def _default_budgets(model: str) -> tuple[int, ...]:
    p = MODEL_PRESETS[model]
    params = param_count(p["n_layer"], p["n_embd"], p["block_size"])
    seq = rg.BLOCK[model] * 256 * 16  # divisible by every M x b x block of the default axes
    return tuple(max(seq, round(20 * params * f / seq) * seq) for f in (1 / 64, 1 / 16, 1 / 4))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="small", choices=["tiny", "small", "medium", "base"])
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    ap.add_argument("--budgets", type=int, nargs="+", default=None)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--inner-steps", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--minutes", type=float, default=12.0, help="stop starting new runs after this (resume later)"
    )
    ap.add_argument("--m-x", type=int, default=4)
    ap.add_argument("--m-fit-max", type=int, default=64)
    ap.add_argument("--toml", default=None)
    a = ap.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    spec = rg.GridSpec(
        model=a.model,
        replicas=tuple(a.replicas),
        budgets=tuple(a.budgets or _default_budgets(a.model)),
        batches=tuple(a.batches),
        inner_steps=tuple(a.inner_steps),
        seeds=tuple(a.seeds),
    )
    out = ROOT / "runs" / "tailgrid" / f"{a.model}_gpu.jsonl"
    runs, skipped = rg.plan(spec)
    done = {r["key"] for r in rg.load_records(out)}
    todo = [c for c in runs if c["key"] not in done]
    print(
        f"{a.model} on {device}: budgets {spec.budgets}, {len(runs)} runs, {len(todo)} to do, {len(skipped)} infeasible"
    )
    t0 = time.monotonic()
    for i, c in enumerate(todo):
        if time.monotonic() - t0 > a.minutes * 60:
            print(f"time limit: {len(todo) - i} runs left for the next invocation")
            break
        rec = rg.run_grid(spec, out, ROOT / "runs" / "data", device=device, only=[c])
        if rec:
            print(
                f"[{i + 1}/{len(todo)}] {c['key']} loss {rec[0]['val_loss']} {rec[0]['wall_s']:.1f} s",
                flush=True,
            )
    records = rg.load_records(out)
    try:
        s = rep.summarize(records, m_x=a.m_x, m_fit_max=a.m_fit_max, n_boot=500)
    except ValueError as exc:
        print(f"no fit yet: {exc}")
        return
    print(rep.cells_md(s))
    print(rep.tables_md(s))
    if a.toml:
        p = MODEL_PRESETS[a.model]
        Path(a.toml).write_text(
            rep.data_toml(
                s,
                "python benchmarks/gpu_replica_grid.py " + " ".join(sys.argv[1:]),
                param_count(p["n_layer"], p["n_embd"], p["block_size"]),
            )
        )
        print(f"wrote {a.toml}")


if __name__ == "__main__":
    main()
