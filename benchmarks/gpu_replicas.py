"""The M-sweep on a GPU, for the presets a CPU cannot afford (never required by the tests).

Run where a CUDA device is available::

    python benchmarks/gpu_replicas.py                      # small, then medium; 3 seeds
    python benchmarks/gpu_replicas.py --models small --seeds 0

It calls benchmarks/bench_replicas.py with ``--device cuda`` and a larger budget (``--replica-steps``
per preset below, batch 4 sequences per replica, M up to 256, H in {4, 16}), then ``--summarize``,
which writes the preset's rows into src/dispersal/data/testbed_msweep.toml and redraws
docs/testbed_msweep.png. Memory: M = 256 replicas of ``medium`` (~11 M parameters each) hold
~4 copies x 256 x 11 M fp32 = 45 GB of weights and optimizer state plus activations bounded by
the vmap chunk (--chunk 16): size the GPU accordingly or drop 256 from --replicas.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
BUDGET = {"small": 4096, "medium": 8192}
"""Total replica-steps per preset: the fixed token budget is this x 4 sequences x the preset's context."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["small", "medium"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_replicas: no CUDA device here (this script is for a machine with one)")
    for model in a.models:
        common = ["--model", model, "--batch-size", "4", "--replica-steps", str(BUDGET.get(model, 4096))]
        run = [
            sys.executable,
            str(HERE / "bench_replicas.py"),
            *common,
            "--device",
            "cuda",
            "--chunk",
            "16",
            "--inner-steps",
            "4",
            "16",
            "--eval-batches",
            "64",
            "--seeds",
            *map(str, a.seeds),
            "--replicas",
            *map(str, a.replicas),
        ]
        subprocess.run(run, check=True)
        subprocess.run(
            [sys.executable, str(HERE / "bench_replicas.py"), "--model", model, "--summarize"], check=True
        )


if __name__ == "__main__":
    main()
