"""Calibration: effective compute on a known curve, form fits, the file round trip, CLI wiring (fast)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dispersal.calibration import fit as F
from dispersal.calibration.effective import ScalingCurve, efficiency, fit_scaling_curve
from dispersal.calibration.tomlio import dumps, load_calibration
from dispersal.cli import app
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS

E, A, AEXP = 1.5, 40.0, 0.25
TRUE = ScalingCurve("power", E, A, AEXP)


def test_scaling_fit_recovers_known_curve_and_eta() -> None:
    c = np.array([1e9, 2e9, 4e9, 8e9, 1.6e10, 3.2e10])
    curve = fit_scaling_curve(c, TRUE.loss(c))
    assert curve.kind == "power"
    assert curve.e == pytest.approx(E, abs=0.02)
    assert curve.a_exp == pytest.approx(AEXP, rel=0.05)
    # a run that spent 1.6e10 and reached the DDP loss at 8e9 has eta = 0.5
    eta = efficiency(curve, TRUE.loss(8e9), 1.6e10)
    assert float(eta) == pytest.approx(0.5, rel=0.01)
    assert float(efficiency(curve, TRUE.loss(1.6e10), 1.6e10)) == pytest.approx(1.0, rel=1e-3)


def test_interpolation_fallback_is_monotone_and_exact_at_points() -> None:
    c = np.array([1e9, 4e9])
    curve = fit_scaling_curve(c, TRUE.loss(c))
    assert curve.kind == "interp"
    assert float(curve.compute_for_loss(TRUE.loss(4e9))) == pytest.approx(4e9, rel=1e-6)
    mid = float(curve.compute_for_loss(TRUE.loss(2e9)))
    assert 1e9 < mid < 4e9


def _synthetic(
    alpha: dict[str, float], beta0: dict[str, float], comp: dict[str, float]
) -> list[dict[str, Any]]:
    """Records generated from the model's own structure on a known DDP curve (no noise)."""
    recs = []
    sizes = {"tiny": 1.2e5, "tiny-w128": 4.4e5}
    for size, p in sizes.items():
        curve = ScalingCurve("power", E, A * (p / 1.2e5) ** 0.1, AEXP)
        base = dict(size=size, codec="none", global_batch=16, seed=0, params=p)
        for f in (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2):
            flop = 6 * p * 16 * 64 * 1000 * f
            recs.append(
                {
                    **base,
                    "algorithm": "ddp",
                    "H": 1,
                    "workers": 1,
                    "steps": round(1000 * f),
                    "role": "reference",
                    "flop": flop,
                    "val_losses": [float(curve.loss(flop))] * 4,
                }
            )
        flop = 6 * p * 16 * 64 * 1000
        pts = [(h, 4, "none") for h in (10, 50, 100, 500)] + [(50, m, "none") for m in (1, 2, 8)]
        pts += [(50, 4, c) for c in comp]
        for h, m, codec in pts:
            eta = float(
                F._predict(
                    curve,
                    np.array(flop),
                    np.array(h, float),
                    np.array(m, float),
                    np.array(alpha[size]),
                    np.array(beta0[size]),
                )
            )
            eta *= comp.get(codec, 1.0)
            loss = float(curve.loss(eta * flop))
            recs.append(
                {
                    **base,
                    "algorithm": "diloco",
                    "H": h,
                    "workers": m,
                    "codec": codec,
                    "steps": 1000,
                    "role": "sweep",
                    "flop": flop,
                    "val_losses": [loss] * 4,
                }
            )
    return recs


def test_form_fits_recover_known_parameters() -> None:
    alpha = {"tiny": 0.10, "tiny-w128": 0.08}
    beta0 = {"tiny": 0.05, "tiny-w128": 0.03}
    comp = {"int8": 0.99, "topk": 0.95}
    recs = _synthetic(alpha, beta0, comp)
    out = F.analyse_once(recs, {i: float(np.mean(r["val_losses"])) for i, r in enumerate(recs)})
    for s in alpha:
        assert out["sizes"][s]["alpha"] == pytest.approx(alpha[s], abs=2e-3)
        assert out["sizes"][s]["beta0"] == pytest.approx(beta0[s], abs=2e-3)
    assert out["codecs"]["int8"] == pytest.approx(0.99, abs=2e-3)
    assert out["codecs"]["topk"] == pytest.approx(0.95, abs=2e-3)
    # exact through two sizes: the cross-size laws reproduce the per-size values
    p = np.array([1.2e5, 4.4e5])
    a = out["alpha0"] / (1 + np.log10(p / 1e9) / out["size_scale"])
    assert a == pytest.approx([alpha["tiny"], alpha["tiny-w128"]], abs=3e-3)
    b = out["beta_coeff"] * p ** -out["beta_exponent"]
    assert b == pytest.approx([beta0["tiny"], beta0["tiny-w128"]], abs=3e-3)
    # eta falls with H (M = 4) on this synthetic truth
    etas = [out["points"][("tiny", "diloco", h, 4, "none", 1000, "sweep")] for h in (10, 50, 100, 500)]
    assert all(b < a for a, b in itertools.pairwise(etas))


def _write_cal(path: Path, params: dict[str, Any]) -> Path:
    path.write_text(dumps({"schema_version": 1, "name": "t", "seeds": [0], "params": params}))
    return path


def test_calibration_file_round_trips(tmp_path: Path) -> None:
    table = [list(r) for r in F.compression_table(0.02, 0.05)]
    p = _write_cal(
        tmp_path / "c.toml",
        {
            "eta_h_alpha0": 0.031,
            "eta_h_size_scale": 7.5,
            "replica_beta_coeff": 0.5,
            "replica_beta_exponent": 0.2,
            "compression_table": table,
        },
    )
    mp = load_calibration(p)
    assert mp.eta_h_alpha0 == 0.031 and mp.eta_h_size_scale == 7.5
    assert mp.replica_beta_exponent == 0.2
    assert mp.compression_table[3][2] == pytest.approx(1 - 0.02 * 2, abs=1e-4)
    assert mp.chinchilla_e == DEFAULT_PARAMS.chinchilla_e  # untouched fields stay published


def test_shipped_calibration_loads() -> None:
    path = Path(__file__).resolve().parents[2] / "src/dispersal/data/calibration/cpu-small.toml"
    if not path.exists():
        pytest.skip("cpu-small.toml not generated yet")
    mp = load_calibration(path)
    assert mp != DEFAULT_PARAMS


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("schema_version = 1\n[params]\neta_h_alpha0 = -0.1\n", "params.eta_h_alpha0"),
        ("schema_version = 1\n[params]\nnot_a_field = 1.0\n", "params.not_a_field"),
        ('schema_version = 1\n[params]\neta_h_alpha0 = "x"\n', "params.eta_h_alpha0"),
        ("schema_version = 2\n[params]\neta_h_alpha0 = 0.1\n", "schema_version"),
        ("[params]\neta_h_alpha0 = 0.1\n", "schema_version"),
        ("schema_version = 1\n", "params"),
        ("schema_version = 1\n[params]\ncompression_table = [[1, 1, 1]]\n", "params.compression_table[0]"),
        ("schema_version = 1\n[params\n", "calibration"),
    ],
)
def test_malformed_calibration_is_one_line_input_error(tmp_path: Path, text: str, field: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        load_calibration(p)
    assert exc.value.field == field
    assert "\n" not in str(exc.value)


@pytest.mark.slow
def test_estimate_and_plan_accept_calibration(tmp_path: Path) -> None:
    p = _write_cal(tmp_path / "c.toml", {"eta_h_alpha0": 0.3, "eta_h_size_scale": 50.0})
    runner = CliRunner()
    # The calibrated eta_H form acts where the model uses eta_H: paper mode. (Default mode's fitted
    # compute-space multiplier g carries the H effect itself, so its eta_H is 1 with or without it.)
    base = json.loads(
        runner.invoke(app, ["estimate", "--json", "--algorithm", "diloco", "--mode", "paper"]).stdout
    )
    res = runner.invoke(
        app, ["estimate", "--json", "--algorithm", "diloco", "--mode", "paper", "--calibration", str(p)]
    )
    assert res.exit_code == 0, res.output
    cal = json.loads(res.stdout)
    assert cal["efficiency"]["eta_h"] < base["efficiency"]["eta_h"]
    res = runner.invoke(app, ["plan", "--target", "1e24", "--json", "--calibration", str(p)])
    assert res.exit_code == 0, res.output
    bad = tmp_path / "bad.toml"
    bad.write_text("schema_version = 1\n[params]\neta_h_floor = 3\n")
    res = runner.invoke(app, ["estimate", "--calibration", str(bad)])
    assert res.exit_code == 2
    assert "eta_h_floor" in res.output


@pytest.mark.slow
def test_counter_accepts_calibration(tmp_path: Path) -> None:
    p = _write_cal(
        tmp_path / "c.toml", {"eta_h_alpha0": 0.3, "eta_h_size_scale": 50.0, "replica_beta_coeff": 5.0}
    )
    runner = CliRunner()
    # 1e24 (not the default 1e25): a third of the planning, and the penalties still bind (~5x the cost).
    args = ["counter", "--lever", "bandwidth_cap", "--json", "--target", "1e24"]
    base = json.loads(runner.invoke(app, args).stdout)
    res = runner.invoke(app, [*args, "--calibration", str(p)])
    assert res.exit_code == 0, res.output
    cal = json.loads(res.stdout)
    assert cal[0]["cost_usd"] > base[0]["cost_usd"]  # harsher penalties cost the evader more
    # and the wrapper is undone afterwards
    again = json.loads(runner.invoke(app, args).stdout)
    assert again[0]["cost_usd"] == base[0]["cost_usd"]


@pytest.mark.slow
def test_calibrate_analyse_only_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`calibrate --analyse-only`: the TOML, the docs page with its headline table and the plot.

    The headline table plans 1e25 FLOP for every parameter set in both modes (12 plans, most of this
    test's time); here they are asked at 1e23, so the table is still computed and written through the
    same code (`report.headline_variants`, `headline_md`, `write_docs`) from a smaller plan."""
    from dispersal.model.search import planner

    asked: list[float] = []
    real_plan = planner.plan

    def small_plan(target_flop: float, *a: Any, **k: Any) -> Any:
        asked.append(target_flop)
        return real_plan(1e23, *a, **k)

    monkeypatch.setattr(planner, "plan", small_plan)
    recs = _synthetic(
        {"tiny": 0.1, "tiny-w128": 0.08}, {"tiny": 0.05, "tiny-w128": 0.03}, {"int8": 0.99, "topk": 0.95}
    )
    out = tmp_path / "run"
    out.mkdir()
    rng = np.random.default_rng(0)
    with open(out / "results.jsonl", "w") as fh:
        for i, r in enumerate(recs):
            r = {
                **r,
                "key": f"k{i}",
                "val_losses": list(np.asarray(r["val_losses"]) + rng.normal(0, 1e-3, 4)),
                "val_loss": float(np.mean(r["val_losses"])),
                "wall_s": 1.0,
                "tier": 0,
                "tokens": 1,
            }
            fh.write(json.dumps(r) + "\n")
    res = CliRunner().invoke(
        app,
        [
            "calibrate",
            "--analyse-only",
            "--out",
            str(out),
            "--bootstrap",
            "5",
            "--docs",
            str(tmp_path / "docs"),
            "--bench",
            str(tmp_path / "b.md"),
        ],
    )
    assert res.exit_code == 0, res.output
    mp = load_calibration(out / "calibration.toml")
    assert mp.eta_h_alpha0 > 0
    md = (tmp_path / "docs" / "calibration.md").read_text(encoding="utf-8")
    assert (tmp_path / "docs" / "calibration_penalties.png").exists()
    assert math.isfinite(mp.replica_beta_coeff)
    # the headline: published, in-range and what-if parameter sets, each planned in both modes
    assert asked and set(asked) == {1e25} and len(asked) % 2 == 0 and len(asked) >= 6
    for label in (
        "| default | published |",
        "| paper | published |",
        "| default | what-if: measured (all fields) |",
    ):
        assert label in md


# ------------------------------------------------------------- the range rule (issue 12)
def _ranged(tmp_path: Path, extra: str = "") -> Path:
    table = [list(r) for r in F.compression_table(0.3, 0.01, (3.5, 25.0))]
    p = _write_cal(
        tmp_path / "r.toml", {"eta_h_alpha0": 0.031, "replica_beta_coeff": 0.5, "compression_table": table}
    )
    p.write_text(
        p.read_text() + "\n[range]\nparams = [1.2e5, 4.4e5]\ncompression_ratio_ef = [1.0, 25.0]\n"
        "compression_ratio_no_ef = [1.0, 3.5]\n" + extra
    )
    return p


def test_calibration_never_replaces_published_entries_outside_its_range(tmp_path: Path) -> None:
    from dispersal.calibration.tomlio import apply_calibration, read_calibration

    p = _ranged(tmp_path)
    res = apply_calibration(read_calibration(p))
    mp = res.params
    # size laws act at every size: withheld, published values stay
    assert mp.eta_h_alpha0 == DEFAULT_PARAMS.eta_h_alpha0
    assert mp.replica_beta_coeff == DEFAULT_PARAMS.replica_beta_coeff
    assert set(res.withheld) == {"eta_h_alpha0", "replica_beta_coeff"} and res.applied == (
        "compression_table",
    )
    rows = {r[0]: r for r in mp.compression_table}
    # with error feedback: measured up to 25x (row at 25 = 1 - 0.3 log10 25), published beyond
    assert rows[25.0][2] == pytest.approx(1 - 0.3 * math.log10(25), abs=1e-4)
    assert rows[16][2] == pytest.approx(1 - 0.3 * math.log10(16), abs=1e-4)
    pub = {r[0]: r for r in DEFAULT_PARAMS.compression_table}
    for cr in (100, 150, 500):
        assert rows[cr] == pytest.approx(pub[cr])
    # without error feedback: measured only up to 3.5x, so the 16x row keeps its published no-EF columns
    assert rows[16][4:] == pytest.approx(pub[16][4:])
    assert rows[3.5][5] == pytest.approx(1 - 0.01 * math.log10(3.5), abs=1e-4)
    assert any("withheld" in n or "not applied" in n for n in res.notes)
    # the what-if path applies everything, as before
    full = load_calibration(p, extrapolate=True)
    assert full.eta_h_alpha0 == 0.031 and full.replica_beta_coeff == 0.5


def test_range_derived_from_measured_tables(tmp_path: Path) -> None:
    from dispersal.calibration.tomlio import measured_range, read_calibration

    p = _write_cal(tmp_path / "m.toml", {"eta_h_alpha0": 0.031})
    p.write_text(
        p.read_text() + "\n[measured.tiny]\nparams = 120576.0\n[measured.big]\nparams = 437760.0\n"
        "[measured.codec_topk]\nratio = 25.0\n[measured.codec_int8]\nratio = 1.88\n"
    )
    rng = measured_range(read_calibration(p))
    assert rng == {
        "params": (120576.0, 437760.0),
        "compression_ratio_ef": (1.0, 25.0),
        "compression_ratio_no_ef": (1.0, 1.88),
    }
    assert load_calibration(p).eta_h_alpha0 == DEFAULT_PARAMS.eta_h_alpha0


def test_bad_range_is_one_line_input_error(tmp_path: Path) -> None:
    p = _write_cal(tmp_path / "b.toml", {"eta_h_alpha0": 0.031})
    p.write_text(p.read_text() + "\n[range]\nparams = [5.0, 1.0]\n")
    with pytest.raises(InputError) as exc:
        load_calibration(p)
    assert exc.value.field == "range.params" and "\n" not in str(exc.value)


def test_shipped_calibration_applies_only_in_range() -> None:
    path = Path(__file__).resolve().parents[2] / "src/dispersal/data/calibration/cpu-small.toml"
    mp = load_calibration(path)
    assert mp.eta_h_alpha0 == DEFAULT_PARAMS.eta_h_alpha0
    assert mp.replica_beta_coeff == DEFAULT_PARAMS.replica_beta_coeff
    rows = {r[0]: r for r in mp.compression_table}
    assert rows[25.0][2] == pytest.approx(0.1294, abs=1e-4)  # top-k 1 % measured at 25x
    pub = {r[0]: r for r in DEFAULT_PARAMS.compression_table}
    assert rows[150] == pytest.approx(pub[150])  # not extrapolated to the planner's 150x
