"""Issue 31: one law of useful tokens and the critical-batch tail with tokens and per-replica batch.

- The tail's formula, exactly: K = K_0 (D / D_ref)^a_D (b / b_ref)^-a_b.
- Properties of the quality model (hypothesis): M g(M) non-decreasing in M, g non-increasing in H,
  eta_rep (g beyond M_x) non-decreasing in tokens and non-increasing in the per-replica batch.
- Properties of the whole estimate (hypothesis over node types, sizes, H and batch, default mode): at
  fixed P and H, C_quality is non-decreasing in the number of sites and the printed loss
  non-increasing with it; the loss and C_quality agree (C_quality = C'(loss)).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from dispersal.model.inputs.catalog import accelerator
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Scenario
from dispersal.model.kernel import chinchilla
from dispersal.model.kernel.quality import (
    QualityParams,
    compute_fraction,
    critical_replicas,
    junction_replicas,
    penalty_amplitude,
)
from dispersal.model.kernel.quality_draws import sample_quality_params, tail_exponent_ranges
from dispersal.model.run.estimate import estimate

Q = QualityParams()


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: float(10**e))


def test_tail_formula_exact() -> None:
    p, h, d, b = 1e10, 100.0, 2e14, 8388608.0
    k0 = float(critical_replicas(h, p))
    got = float(critical_replicas(h, p, tokens=d, replica_batch_tokens=b))
    expect = k0 * (d / (20.0 * p)) ** 0.47 * (b / 131072.0) ** -1.0
    assert got == pytest.approx(expect, rel=1e-12)
    # the fitted sources' own tokens and batch leave K_0 unchanged
    assert float(critical_replicas(h, p, tokens=20.0 * p, replica_batch_tokens=131072.0)) == pytest.approx(k0)
    # beyond M_x: g(M) = g(M_x) (M_x + K) / (M + K)
    g8 = float(compute_fraction(8, h, p))
    g64 = float(compute_fraction(64, h, p, tokens=d, replica_batch_tokens=b))
    assert g64 == pytest.approx(g8 * (8 + got) / (64 + got), rel=1e-12)


def test_junction_holds_elasticity_at_one() -> None:
    # 35M parameters at H = 1000: the fitted curve's elasticity at M = 8 exceeds 1
    p, h = 3.5e7, 1000.0
    a = float(penalty_amplitude(h, p))
    mj = float(junction_replicas(a, Q.p))
    assert 1.0 < mj < 8.0
    assert a * mj**Q.p / Q.loss_compute_slope == pytest.approx(1.0, rel=1e-9)
    m = np.array([mj, 0.5 * (mj + 8.0), 8.0])
    useful = m * compute_fraction(m, h, p)
    assert useful == pytest.approx(np.full(3, useful[0]), rel=1e-9)  # M g(M) flat from M_j to M_x
    # where the elasticity stays below 1 the fitted curve is untouched (every published point)
    assert float(junction_replicas(penalty_amplitude(30.0, 3.5e7), Q.p)) == 8.0


def test_tokens_and_batch_responses_at_64_sites() -> None:
    """Issue 31's check: 64 replicas, 10B, H = 100."""
    g = compute_fraction(64, 100, 1e10, tokens=[2e12, 2e14], replica_batch_tokens=131072.0)
    assert g[1] > 2.0 * g[0]  # 0.235 -> 0.565
    g = compute_fraction(64, 100, 1e10, tokens=5.4e14, replica_batch_tokens=[131072.0, 8388608.0])
    assert g[1] < 0.5 * g[0]  # 0.43 -> 0.13


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    m=log_uniform(1.0, 1e5),
    f=st.floats(1.0, 10.0),
    h=log_uniform(1.0, 1e5),
    n=log_uniform(1e7, 1e13),
    d=log_uniform(1e9, 1e17),
    b=log_uniform(1e3, 1e8),
    opt=st.sampled_from([0, 1]),
)
def test_quality_model_properties(
    m: float, f: float, h: float, n: float, d: float, b: float, opt: int
) -> None:
    s = sample_quality_params(np.random.default_rng(3), 32)
    kw = {"tokens": d, "replica_batch_tokens": b}
    g = compute_fraction(m, h, n, 1, s, opt, **kw)
    tol = 1 + 1e-9
    # more replicas never lower the useful compute M g(M) (and never raise g)
    g2 = compute_fraction(m * f, h, n, 1, s, opt, **kw)
    assert np.all(m * g <= m * f * g2 * tol)
    assert np.all(g2 <= g * tol)
    # a longer inner phase never helps
    assert np.all(compute_fraction(m, h * f, n, 1, s, opt, **kw) <= g * tol)
    # more tokens trained: eta_rep rises (or stays); a larger per-replica batch: it falls (or stays)
    assert np.all(compute_fraction(m, h, n, 1, s, opt, tokens=d * f, replica_batch_tokens=b) >= g / tol)
    assert np.all(compute_fraction(m, h, n, 1, s, opt, tokens=d, replica_batch_tokens=b * f) <= g * tol)


def test_sampled_exponents_cover_their_ranges() -> None:
    s = sample_quality_params(np.random.default_rng(0), 400)
    for name, (lo, hi, _) in tail_exponent_ranges().items():
        v = getattr(s, name)
        assert v.min() >= lo and v.max() <= hi and v.max() - v.min() > 0.8 * (hi - lo)


def test_the_range_is_the_envelope_of_the_literature_and_every_testbed_preset() -> None:
    """The Monte Carlo range of each tail exponent contains the literature range and each testbed
    preset's measured interval (its measured value where the interval runs to the fit's bound), floored
    at 0, and its label names the presets it read (issue 32: tiny and small)."""
    import tomllib
    from importlib import resources

    from dispersal.model.kernel.quality import TAIL_EXPONENT_FLOOR
    from dispersal.model.kernel.quality_draws import TAIL_FILE, TESTBED_TAIL_FILES

    data = resources.files("dispersal.data")
    lit = tomllib.loads(data.joinpath(TAIL_FILE).read_text(encoding="utf-8"))
    tbs = [tomllib.loads(data.joinpath(f).read_text(encoding="utf-8")) for f in TESTBED_TAIL_FILES]
    assert [tb["fit"]["preset"] for tb in tbs] == ["tiny", "small"]
    for name, (lo, hi, label) in tail_exponent_ranges().items():
        ends = [float(v) for v in lit[name]["range"]]
        for tb in tbs:
            m = tb[name]
            at_lo, at_hi = m["ci_at_fit_bound"]
            ends += [m["value"] if at_lo else m["ci_low"], m["value"] if at_hi else m["ci_high"]]
        assert lo == max(min(ends), TAIL_EXPONENT_FLOOR) and hi == max(ends)
        assert "tiny and small" in label


HARDWARE = ["h100_sxm", "gh200", "a100_80gb", "tpu_v5p", "tpu_v6e", "b200", "h200", "tpu_v5e"]


@pytest.mark.slow
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(
    hw=st.sampled_from(HARDWARE),
    n=st.integers(2, 2000),
    k=st.integers(1, 3000),
    p=log_uniform(1e8, 3e11),
    h=st.sampled_from([10, 30, 100, 300, 1000]),
    b=st.sampled_from([32768.0, 131072.0, 1048576.0, 8388608.0]),
    bw=log_uniform(1e8, 1e11),
    algo=st.sampled_from(["diloco", "streaming"]),
)
def test_more_sites_never_lower_c_quality(
    hw: str, n: int, k: int, p: float, h: int, b: float, bw: float, algo: str
) -> None:
    """At fixed P, H and per-node batch, N + k sites give at least N sites' C_quality, and a loss no
    higher; the printed loss is the loss C_quality is the compute-optimal compute of. From N = 2: one
    site has no sync at all, and a forced H (e.g. 1 over 10 Mbps) can make any sync slower than
    training alone; choosing H is the automatic schedule's job (issue 31 item 3, H choice)."""
    note(f"{hw} {n}+{k} sites, P {p:.3g}, H {h}, b {b:g}, {bw:.3g} bit/s, {algo}")
    fp8 = accelerator(hw).dense_fp8_flop_per_s > 0
    kw: dict[str, Any] = {
        "hardware": hw,
        "precision": "fp8" if fp8 else "bf16",
        "params": p,
        "algorithm": algo,
        "inner_steps": h,
        "local_batch_tokens": b,
        "bandwidth_up_bits_per_s": bw,
        "bandwidth_down_bits_per_s": bw,
    }
    e1 = estimate(Scenario(num_nodes=n, **kw), mode="default")
    e2 = estimate(Scenario(num_nodes=n + k, **kw), mode="default")
    assume(e1.feasible and e2.feasible and e1.replicas >= 1 and e1.c_quality_flop > 0)
    # The quality law's guarantee is on the tokens the sites train: each site trains at least as
    # many tokens as before (the sync stays hidden). Where a forced H makes a sync that grows with
    # N outweigh the extra sites' tokens (a relay at 10 Mbps, H = 1: per-site tokens fall as 1/N),
    # that is the schedule's doing (choosing H: issue 31's automatic schedule), not the law's.
    assume(e2.tokens / (n + k) >= e1.tokens / n * (1 - 1e-9))
    assert e2.c_quality_flop >= e1.c_quality_flop * (1 - 1e-9)
    assert e2.loss <= e1.loss * (1 + 1e-12)
    ch = DEFAULT_PARAMS
    c_opt = float(
        chinchilla.optimal_compute_for_loss(
            e2.loss,
            ch.chinchilla_e,
            ch.chinchilla_a,
            ch.chinchilla_b,
            ch.chinchilla_alpha,
            ch.chinchilla_beta,
            ch.tokens_per_param_optimal,
        )
    )
    assert e2.c_quality_flop == pytest.approx(min(c_opt, e2.c_quality_flop), rel=1e-9)
    assert c_opt >= e2.c_quality_flop * (1 - 1e-9)


def test_issue_table_auto_h() -> None:
    """`dispersal estimate --nodes N --params 10B --bandwidth 1Gbps` (automatic H): C_quality never
    below one site's, flat within 10% from 512 to 4,096 sites, and the loss falls as it rises."""
    rows = []
    for n in (1, 16, 64, 512, 4096):
        s = Scenario(num_nodes=n, params=1e10, bandwidth_up_bits_per_s=1e9, bandwidth_down_bits_per_s=1e9)
        e = estimate(s, mode="default")
        rows.append((e.c_quality_flop, e.loss))
    cq = [r[0] for r in rows]
    assert all(c >= cq[0] for c in cq)
    assert abs(cq[4] / cq[3] - 1.0) < 0.10
    order = np.argsort(cq)
    assert np.all(np.diff(np.asarray([r[1] for r in rows])[order]) <= 1e-12)
