"""The in-process calibration runner reproduces the multi-process testbed bit for bit (needs torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dispersal.calibration.runner import train_point  # noqa: E402
from dispersal.testbed.config import TestbedConfig  # noqa: E402


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("algorithm", "codec"), [("diloco", "int8"), ("ddp", "topk")])
def test_runner_matches_testbed(tmp_path: Path, algorithm: str, codec: str) -> None:
    from dispersal.testbed.supervisor import run_local

    cfg = TestbedConfig(
        algorithm=algorithm,
        workers=2,
        steps=10,  # two outer rounds of 5 inner steps: the sync and the outer step run twice
        inner_steps=5,
        model="tiny",
        codec=codec,
        seed=3,
        batch_size=8,
    )
    summary = run_local(cfg, tmp_path / "tb")
    mine = train_point(
        cfg, tmp_path / "tb" / "data", eval_batches=cfg.eval_batches, eval_batch_size=cfg.batch_size
    )
    assert mine["val_loss"] == summary["final_val_loss"]


@pytest.mark.slow
@pytest.mark.torch
def test_runner_tiny_point(tmp_path: Path) -> None:
    from dispersal.calibration.runner import make_config
    from dispersal.calibration.sweep import SIZES, point

    p = point("tiny", "diloco", 5, 2, "topk", 10, 0, "sweep", 8, 1)
    r = train_point(make_config(p, SIZES), tmp_path, eval_batches=2)
    assert len(r["val_losses"]) == 2 and r["tokens"] == 10 * 8 * 64 and r["params"] == 120_576
