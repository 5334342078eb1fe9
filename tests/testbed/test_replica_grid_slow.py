"""The tail grid on real runs (slow tier): a reduced grid trained with the many-replica engine, resumed,
fitted, and written through the real `dispersal tail-grid` command."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("torch")

from dispersal.testbed import replicas_grid as rg
from dispersal.testbed import replicas_tailreport as rep
from dispersal.testbed.replicas_tailfit import HOLDOUTS

SPEC = rg.GridSpec(
    model="tiny",
    replicas=(2, 4, 8),
    budgets=(512, 1_024),
    batches=(1, 2),
    inner_steps=(1,),
    seeds=(0, 1),
    baseline_fractions=(0.25,),
    eval_batches=2,
    eval_batch_size=4,
)


@pytest.mark.slow
def test_reduced_grid_trains_resumes_and_fits(tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    out = tmp_path / "grid.jsonl"
    runs, _ = rg.plan(SPEC)
    first = rg.run_grid(SPEC, out, tmp_path / "data", only=runs[:5])
    assert len(first) == 5
    with open(out, "a") as fh:
        fh.write('{"key": "interrupted')  # a torn last line, as a kill mid-write leaves it
    rest = rg.run_grid(SPEC, out, tmp_path / "data")
    assert len(rest) == len(runs) - 5
    assert rg.run_grid(SPEC, out, tmp_path / "data") == []  # resumed: nothing left
    records = rg.load_records(out)
    assert sorted(r["key"] for r in records) == sorted(c["key"] for c in runs)
    assert all(r["val_loss"] is not None and 0 < r["val_loss"] < 12 for r in records)

    s = rep.summarize(records, m_x=2, m_fit_max=8, n_boot=20)
    f = s["fit"]
    assert f.n_cells >= 2 and math.isfinite(f.a_tokens) and math.isfinite(f.k_ref) and f.k_ref > 0
    held = s["held"]
    assert held and {r["part"] for r in held} <= set(HOLDOUTS)  # large M, largest budget, extreme batches
    assert [part for part, _, _ in s["holdouts"]] == list(HOLDOUTS)
    assert all(math.isfinite(r["error_ln"]) for r in held)
    # the split: G = 4 (2 x 2, 4 x 1) and G = 8 (4 x 2, 8 x 1) against plain AdamW at batch G
    gb = {(r["global_batch"], r["replicas"]) for r in s["split_rows"]}
    assert {(4, 2), (4, 4), (8, 4), (8, 8)} <= gb
    assert all(0.5 < r["ratio"] < 2.0 for r in s["split_rows"])

    toml_path = tmp_path / "fit.toml"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    cmd = [
        sys.executable,
        "-m",
        "dispersal",
        "tail-grid",
        "--analyse-only",
        "--results",
        str(out),
        "--replicas",
        "2,4,8",
        "--budgets",
        "512,1024",
        "--batches",
        "1,2",
        "--inner-steps",
        "1",
        "--seeds",
        "0,1",
        "--m-x",
        "2",
        "--m-fit-max",
        "4",
        "--bootstrap",
        "20",
        "--toml",
        str(toml_path),
        "--docs",
        str(tmp_path),
        "--json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    data = tomllib.loads(toml_path.read_text())
    for name in ("tail_tokens_exponent", "tail_batch_exponent"):
        assert set(data[name]) >= {"value", "ci_low", "ci_high", "source"}
        assert "measured at small scale" in data[name]["source"]
    assert data["tail_tokens_exponent"]["value"] == pytest.approx(report["fit"]["a_tokens"], rel=1e-5)
    assert (tmp_path / "testbed_tailgrid_g.png").stat().st_size > 1000
    assert (tmp_path / "testbed_tailgrid_split.png").stat().st_size > 1000
    bad = subprocess.run(
        [*cmd[:5], "--results", str(tmp_path / "none.jsonl"), "--analyse-only"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode == 2 and "results" in bad.stderr and "Traceback" not in bad.stderr
