"""Issue 31 item 4 and issue 34: the frontier's answer carries its spread.

- P(reach) and every band are properties of the scenario, not of the --premium list;
- "where it stops" per premium: the share of draws per target and the 90/50/10% largest targets;
- each cell names its replicas beyond the published evidence;
- the Sobol' sensitivity (SALib) returns indices per group, and says so in one line when SALib is
  missing."""

from __future__ import annotations

import builtins
import json
import math
from typing import Any

import numpy as np
import pytest

from dispersal.model.analyses.frontier import frontier
from dispersal.model.analyses.frontier import sensitivity as sens
from dispersal.model.analyses.frontier.bands import Draws, least_costs
from dispersal.model.analyses.frontier.table import Condition, Engine
from dispersal.model.analyses.uncertainty.draws import eta_h_rescale, kernel_scores
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Mode
from dispersal.model.kernel.quality import EVIDENCE_REPLICAS_MAX, replicas_beyond_evidence
from dispersal.model.search.candidates import Constraints

SMALL = Constraints(hardware=("h100_sxm", "a100_80gb"))
GRID = (100e6, 1e9)


def test_replicas_beyond_evidence() -> None:
    assert EVIDENCE_REPLICAS_MAX == 16.0
    assert replicas_beyond_evidence(1) == 0
    assert replicas_beyond_evidence(16) == 0
    assert replicas_beyond_evidence(100) == 84


def _run(premiums: tuple[float, ...]) -> Any:
    return frontier(
        targets_flop=(1e24, 1e25),
        premiums=premiums,
        constraints=SMALL,
        bandwidth_grid_bits_per_s=GRID,
        samples=8,
        seed=3,
        quality_lines=False,
        sites=(),
    )


@pytest.mark.slow
def test_p_reach_does_not_depend_on_the_premium_list() -> None:
    a, b = _run((2.0,)), _run((1.5, 2.0, 5.0))
    assert a.p_reach == b.p_reach
    # the 2x cell is the same cell in both runs, band included
    la = next(lim for lim in a.limits if lim.target_flop == 1e25 and lim.premium == 2.0)
    lb = next(lim for lim in b.limits if lim.target_flop == 1e25 and lim.premium == 2.0)
    assert la.band == lb.band
    assert la.least_bandwidth_bits_per_s == lb.least_bandwidth_bits_per_s
    # where it stops: per premium, each target's share is that cell's P(reach); the 90/50/10% answers
    # are the largest targets reached that often, so they are ordered
    d = json.loads(json.dumps(b.to_dict(), allow_nan=False))
    for w in d["where_it_stops"]:
        cells = {
            lim["target_flop"]: lim["band"]["p_reach"]
            for lim in d["limits"]
            if lim["premium"] == w["premium"]
        }
        assert {s["target_flop"]: s["share"] for s in w["share_of_draws"]} == cells
        p90, p50, p10 = (-math.inf if v is None else v for v in w["largest_target_p90_p50_p10"])
        assert p90 <= p50 <= p10
    for lim in d["limits"]:
        if lim["sites"] is not None:
            assert lim["replicas_beyond_evidence"] is not None and lim["replicas_beyond_evidence"] >= 0


def test_sensitivity_without_salib_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_salib(name: str, *args: Any, **kw: Any) -> Any:
        if name.startswith("SALib"):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_salib)
    with pytest.raises(InputError, match="SALib"):
        sens.sensitivity(base_samples=2)


def test_sensitivity_rejects_a_base_sample_count_that_is_not_a_power_of_two() -> None:
    with pytest.raises(InputError, match="power of 2"):
        sens.sensitivity(base_samples=12)


def test_design_keeps_each_group_joint() -> None:
    """Every key of one group takes the same pool row, so a fit's draws stay together."""
    pool = {
        "q_u0": np.arange(5.0),
        "q_b0": 10 + np.arange(5.0),
        "mfu": 20 + np.arange(5.0),
        "raw_x": np.zeros(5),
    }
    u = np.array([[0.0, 0.99, 0.5] + [0.0] * (len(sens.GROUPS) - 3)] * 2)
    u[:, 1] = [0.99, 0.3]  # the quality-fit group
    out = sens._design(pool, u)
    assert np.array_equal(out["q_b0"] - 10, out["q_u0"])
    assert out["q_u0"].tolist() == [0.0, 4.0, 2.0]  # row 0 nominal, then 1 + floor(u K), K = 4
    assert out["raw_x"].tolist() == [0.0, 0.0, 0.0]


def test_sensitivity_confidence_intervals_repeat() -> None:
    """The Sobol' indices' bootstrap intervals are seeded (SALib leaves a seed of 0 unseeded): the same
    answers and seed give the same +- every run, another seed other ones."""
    pytest.importorskip("SALib")
    _, analyze = sens._salib()
    g = len(sens.GROUPS)
    problem = {"num_vars": g, "names": [n for n, _ in sens.GROUPS], "bounds": [[0.0, 1.0]] * g}
    y = np.random.default_rng(3).normal(size=16 * (g + 2))
    a, b = (sens._indices(analyze, problem, "y", y, 0) for _ in range(2))
    assert a == b
    assert sens._indices(analyze, problem, "y", y, 1).first_order_ci != a.first_order_ci


@pytest.mark.slow
def test_sensitivity_indices_per_group() -> None:
    pytest.importorskip("SALib")
    s = sens.sensitivity(
        base_samples=2, sites=(10,), constraints=SMALL, bandwidth_grid_bits_per_s=GRID, target_flop=1e24
    )
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    assert d["evaluations"] == 2 * (len(sens.GROUPS) + 2)
    assert [o["output"].split(",")[0] for o in d["outputs"]][:2] == [
        "premium at 100 Mbps",
        "least bandwidth per site within 5x",
    ]
    for o in d["outputs"]:
        assert [g["group"] for g in o["groups"]] == [g for g, _ in sens.GROUPS]


def test_the_paper_eta_h_scale_rescales_only_the_paper_mapping() -> None:
    """A draw's eta_H scale (the paper's alpha0) rescales the metric only where the kernel charged eta_H
    (the paper's loss multiplier, ``quality_mapping`` < 0): default mode's fitted mapping carries the H
    effect, so there the factor is 1 and the kernel's own score (and floor) stands."""
    x = {"params": np.full(4, 1e10), "quality_mapping": np.array([0.0, 1.0, -1.0, -1.0])}
    r = {"inner_steps_effective": np.full(4, 100.0), "replicas": np.array([8.0, 8.0, 8.0, 1.0])}
    ratio = np.full(4, 1.3)
    fac = eta_h_rescale(x, r, ratio, DEFAULT_PARAMS)
    assert fac[0] == fac[1] == fac[3] == 1.0
    assert 0.8 < fac[2] < 1.0  # eta_H = 1 - 0.0667 x 2 = 0.867 nominal, 0.827 at 1.3x alpha0
    assert kernel_scores(x, ratio).tolist() == [True, True, False, False]
    assert kernel_scores(x, np.ones(4)).all()


@pytest.mark.slow
@pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.PAPER])
def test_default_mode_bands_do_not_move_with_the_paper_eta_h_scale(mode: Mode) -> None:
    """The frontier's draws with every eta_H scale set to 1 give default mode the same least costs (its
    metric carries no eta_H: docs/uncertainty.md), and paper mode other ones (there eta_H is charged)."""
    eng = Engine(mode, SMALL, "treaty")
    dr = Draws(mode, SMALL, 12, 5)
    assert np.any(dr.arrays["eta_h_ratio"] != 1.0)
    flat = dr.with_arrays({**dr.arrays, "eta_h_ratio": np.ones_like(dr.arrays["eta_h_ratio"])})
    conds = [Condition(bandwidth_bits_per_s=b, latency_s=0.1, duration_s=SMALL.max_duration_s) for b in GRID]
    combos = np.arange(len(eng.space.combo_hw), dtype=np.int64)
    draws = np.arange(1, 13, dtype=np.int64)
    target = 3e24 if mode is Mode.DEFAULT else 1e24
    drawn = least_costs(eng, dr, target, combos, conds, draws)
    nominal_h = least_costs(eng, flat, target, combos, conds, draws)
    assert np.isfinite(drawn).sum() >= 6
    if mode is Mode.DEFAULT:
        np.testing.assert_array_equal(drawn, nominal_h)
    else:
        assert not np.array_equal(drawn, nominal_h)
