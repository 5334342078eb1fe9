"""The tail grid's plan, results file and fit (fast tier: no training; the real runs are in
test_replica_grid_slow.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from dispersal.model.inputs.errors import InputError
from dispersal.testbed import replicas_grid as rg
from dispersal.testbed import replicas_tailfit as tf

TRUTH = tf.TailFit(
    m_x=4,
    k_ref=12.0,
    a_tokens=0.45,
    a_batch=0.9,
    a_h=0.3,
    d_ref=32_768.0,
    b_ref=4.0,
    h_ref=4.0,
    rms_ln=0.0,
    n_cells=0,
    free=(),
)
CELLS = [
    (d, b, h, m) for d in (8_192, 32_768, 131_072) for b in (1, 4, 16) for h in (2, 8) for m in (16, 64, 256)
]


@pytest.mark.slow
def test_fit_recovers_known_exponents() -> None:
    pts = tf.synthetic_points(TRUTH, CELLS, seeds=(0, 1, 2), noise_ln=0.02, rng_seed=1)
    fit = tf.fit_tail(pts, 4, refs=(TRUTH.d_ref, TRUTH.b_ref, TRUTH.h_ref))
    assert fit.free == ("a_tokens", "a_batch", "a_h")
    assert fit.a_tokens == pytest.approx(0.45, abs=0.05)
    assert fit.a_batch == pytest.approx(0.9, abs=0.05)
    assert fit.a_h == pytest.approx(0.3, abs=0.05)
    assert fit.k_ref == pytest.approx(12.0, rel=0.1)
    assert fit.rms_ln < 0.03


def test_fit_is_exact_without_noise_and_k_is_the_contract_form() -> None:
    pts = tf.synthetic_points(TRUTH, CELLS[:24], seeds=(0,), noise_ln=0.0)
    fit = tf.fit_tail(pts, 4, refs=(TRUTH.d_ref, TRUTH.b_ref, TRUTH.h_ref))
    assert fit.a_tokens == pytest.approx(0.45, abs=1e-5)
    assert fit.a_batch == pytest.approx(0.9, abs=1e-5)
    # K = K_ref (D/D_ref)^a_D (b/b_ref)^-a_B (H/H_ref)^-a_H, g ratio = (M_x + K) / (M + K)
    k = 12.0 * (131_072 / 32_768) ** 0.45 * (16 / 4) ** -0.9 * (8 / 4) ** -0.3
    assert TRUTH.k(131_072, 16, 8) == pytest.approx(k, rel=1e-12)
    assert TRUTH.ratio(131_072, 16, 8, 64) == pytest.approx((4 + k) / (64 + k), rel=1e-12)


def test_an_axis_with_one_value_is_not_fitted() -> None:
    cells = [c for c in CELLS if c[2] == 2]
    fit = tf.fit_tail(tf.synthetic_points(TRUTH, cells, seeds=(0, 1), noise_ln=0.01), 4)
    assert fit.free == ("a_tokens", "a_batch")
    assert "a_h" not in fit.free and fit.a_h == 0.0
    with pytest.raises(ValueError, match="at least 2 cells"):
        tf.fit_tail(tf.synthetic_points(TRUTH, CELLS[:1], seeds=(0,), noise_ln=0.0), 4)


@pytest.mark.slow
def test_bootstrap_interval_covers_the_truth_and_narrows_with_less_noise() -> None:
    cells = [c for c in CELLS if c[2] == 2]
    wide = tf.bootstrap(tf.synthetic_points(TRUTH, cells, (0, 1, 2, 3, 4), 0.1, rng_seed=3), 4, range(5), 30)
    narrow = tf.bootstrap(
        tf.synthetic_points(TRUTH, cells, (0, 1, 2, 3, 4), 0.01, rng_seed=3), 4, range(5), 40
    )
    for key, true in (("a_tokens", 0.45), ("a_batch", 0.9)):
        lo, hi = wide[key]
        assert lo - 0.05 <= true <= hi + 0.05
        assert narrow[key][0] - 0.02 <= true <= narrow[key][1] + 0.02
        assert narrow[key][1] - narrow[key][0] < hi - lo
    cells_ci = tf.bootstrap(
        tf.synthetic_points(TRUTH, cells, (0, 1, 2), 0.05, rng_seed=4), 4, range(3), 30, by_cells=True
    )
    assert cells_ci["a_batch"][0] - 0.05 <= 0.9 <= cells_ci["a_batch"][1] + 0.05


def test_held_back_parts_are_named_and_scored() -> None:
    pts = tf.synthetic_points(TRUTH, CELLS, seeds=(0, 1, 2), noise_ln=0.02)
    split = tf.Split(m_fit_max=64, d_max=131_072, b_max=16, b_min=1)
    assert [p.replicas for p in pts if split.held(p, "large M")] == [256] * 18
    assert {p.tokens for p in pts if split.held(p, "largest budget")} == {131_072}
    assert {p.batch for p in pts if split.held(p, "smallest batch")} == {1}
    parts = tf.holdout_fits(pts, 4, split)
    assert [part for part, _, _ in parts] == list(tf.HOLDOUTS)
    for part, fit, rows in parts:
        assert fit is not None and fit.n_cells == len(pts) - len(rows)
        assert rows and all(r["part"] == part for r in rows)
        assert fit.a_batch == pytest.approx(0.9, abs=0.1)  # each part's fit still finds the truth
        assert max(abs(r["error_ln"]) for r in rows) < 0.15  # and extrapolates into the part


def test_too_few_cells_drop_exponents_rather_than_interpolate() -> None:
    cells = [(8_192, 1, 2, 16), (32_768, 1, 2, 16), (8_192, 4, 8, 16), (32_768, 4, 2, 64)]
    fit = tf.fit_tail(tf.synthetic_points(TRUTH, cells, seeds=(0,), noise_ln=0.0), 4)
    assert fit.free == ("a_tokens",) and fit.a_batch == 0.0 and fit.a_h == 0.0


def test_g_uses_each_cells_own_baseline_law() -> None:
    recs = [
        {"algorithm": "dp", "replicas": 1, "batch": 4, "seed": 0, "tokens": t, "val_loss": v}
        for t, v in ((1000, 4.0), (4000, 3.0), (16000, 2.0))
    ]
    recs.append(
        {
            "algorithm": "diloco",
            "replicas": 16,
            "batch": 4,
            "seed": 0,
            "tokens": 16000,
            "inner_steps": 2,
            "val_loss": 3.0,
        }
    )
    recs.append(
        {
            "algorithm": "diloco",
            "replicas": 16,
            "batch": 1,
            "seed": 0,
            "tokens": 16000,
            "inner_steps": 2,
            "val_loss": 3.0,
        }
    )
    g = tf.cell_g(recs)
    assert g == {(0, (16000, 4, 2, 16)): (pytest.approx(0.25), True)}  # type: ignore[comparison-overlap]  # batch 1 has no law: skipped


# ----------------------------------------------------------------------------- plan and file
def test_plan_keeps_whole_rounds_and_lists_the_rest() -> None:
    spec = rg.GridSpec(seeds=(0, 1))
    runs, skipped = rg.plan(spec)
    keys = [c["key"] for c in runs]
    assert len(keys) == len(set(keys))
    for c in runs:
        assert c["replicas"] * c["batch"] * c["steps"] * spec.block == c["tokens"]
        if c["algorithm"] == "diloco":
            assert c["steps"] >= c["inner_steps"] and c["steps"] % c["inner_steps"] == 0
    assert all(
        not rg.feasible(spec, c["replicas"], c["batch"], c["tokens"], c["inner_steps"]) for c in skipped
    )
    assert spec.split_batches() == (4, 16, 64, 256, 1024)
    # M = 1 DiLoCo runs last; the baselines of a seed come before its DiLoCo cells
    roles = [(c["role"], c["replicas"]) for c in runs]
    first_m1 = roles.index(("diloco", 1))
    assert all(r == ("diloco", 1) for r in roles[first_m1:])
    seed0 = [c["role"] for c in runs if c["seed"] == 0 and c["role"] != "diloco"]
    assert seed0 and runs[0]["role"] == "baseline"


def test_spec_rejects_bad_axes() -> None:
    with pytest.raises(InputError, match="replicas"):
        rg.GridSpec(replicas=(0, 4))
    with pytest.raises(InputError, match="model"):
        rg.GridSpec(model="huge")


def test_results_file_tolerates_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    rg.append_record(path, {"key": "a", "val_loss": 1.0})
    with open(path, "a") as fh:
        fh.write('{"key": "b", "val_lo')  # interrupted write
    assert [r["key"] for r in rg.load_records(path)] == ["a"]
    rg.append_record(path, {"key": "c", "val_loss": 2.0})
    assert [r["key"] for r in rg.load_records(path)] == ["a", "c"]
    assert path.read_text().count("\n") == 2
    path.write_text('{"key": "a"}\nnot json\n{"key": "c"}\n')
    with pytest.raises(InputError, match=r"r\.jsonl:2"):
        rg.load_records(path)


def test_resume_skips_done_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake(c: dict[str, Any], spec_d: dict[str, Any], data_dir: str, device: str = "cpu") -> dict[str, Any]:
        calls.append(c["key"])
        return dict(c, val_loss=3.0, diverged=False, wall_s=0.0)

    monkeypatch.setattr(rg, "run_cell", fake)
    spec = rg.GridSpec(replicas=(1, 4), budgets=(8_192,), batches=(1, 4), inner_steps=(2,), seeds=(0,))
    out = tmp_path / "r.jsonl"
    runs = rg.plan(spec)[0]
    rg.run_grid(spec, out, tmp_path, only=runs[:3])
    with open(out, "a") as fh:
        fh.write('{"key": "tor')
    new = rg.run_grid(spec, out, tmp_path)
    assert len(calls) == len(runs) and len(set(calls)) == len(runs)
    assert [r["key"] for r in new] == [c["key"] for c in runs[3:]]
    assert [json.loads(x)["key"] for x in out.read_text().splitlines()] == [c["key"] for c in runs]
    assert rg.run_grid(spec, out, tmp_path) == []
    assert math.isfinite(rg.estimate_s(runs[0]))
