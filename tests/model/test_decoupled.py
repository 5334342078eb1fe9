"""Decoupled DiLoCo (arXiv 2604.21428) in the model: hand-computed figures on a tiny scenario, its
invariants, the merge rule reaching the quality model, the planner slot, and resilience reading the
same run description as the kernel."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispersal.model import Scenario, estimate
from dispersal.model.analyses.resilience import (
    ResilienceSpec,
    decoupled_goodput,
    decoupled_run,
    spec_for_run,
)
from dispersal.model.inputs.codes import Straggler
from dispersal.model.inputs.decoupled import DecoupledRun, quorum_learners
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Algorithm, Mode, Precision, as_arrays, kernel_inputs
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.kernel.quality import QualityParams
from dispersal.model.search.candidates import Constraints, make_space

# One learner = one chip of 1 PFLOP/s at MFU 0.5: T_step = 6 x 1e9 x 1e5 / 5e14 = 1.2 s exactly.
# bf16 payload: V = 1e9 x 16 = 1.6e10 bits; 1 Gbit/s each way, 10 ms one way.
TINY = Scenario(
    hardware="h100_sxm",
    chip_fp16_flop_per_s=1e15,
    chip_memory_bytes=1e12,
    chips_per_node=1,
    precision=Precision.BF16,
    mfu=0.5,
    params=1e9,
    local_batch_tokens=1e5,
    num_nodes=4,
    algorithm=Algorithm.DECOUPLED,
    codec="bf16",
    aggregation="relay",
    bandwidth_up_bits_per_s=1e9,
    bandwidth_down_bits_per_s=1e9,
    latency_s=0.01,
    regime="none",
    straggler=Straggler.RELAY,
)


def test_hand_computed_relay_syncer() -> None:
    """Relay syncer: t_rt = 16 + 16 + 2 x 0.01 = 32.02 s; link busy max(16, 16) = 16 s per exchange, so
    H = ceil(16 / 1.2) = 14 and the outer step is 14 x 1.2 = 16.8 s (compute only). Quorum ceil(0.5 x 4)
    = 2 learners: f = 1 + 0.02 log2 2 = 1.02; staleness s = 1.02 x 32.02 / 16.8 = 1.944071...; quality
    H = 14 (1 + (s - 1)) = 27.217."""
    assert DEFAULT_PARAMS.straggler_coeff_relay == 0.02
    e = estimate(TINY, mode="default")
    assert e.algorithm == "decoupled" and e.feasible
    assert e.step_time_s == pytest.approx(1.2, rel=1e-12)
    assert e.inner_steps == 14
    assert e.outer_step_time_s == pytest.approx(16.8, rel=1e-12)
    assert e.sync_time_s == pytest.approx(32.02 * 1.02, rel=1e-12)
    assert e.inner_steps_effective == pytest.approx(14 * 1.02 * 32.02 / 16.8, rel=1e-12)
    assert e.utilisation == pytest.approx(1.0, rel=1e-12)
    assert e.tokens / e.run_time_s == pytest.approx(4 * 1e5 / 1.2, rel=1e-12)
    assert "1.94 outer steps stale" in e.notes[0]


def test_hand_computed_syncer_at_a_site() -> None:
    """Syncer at one learner's site: it downloads 3 x 1.6e10 bits (48 s) and uploads 3 copies (48 s):
    t_rt = max(16, 48) + max(48, 16) + 0.02 = 96.02 s, busy 48 s, H = 40, outer step 48 s; the host
    moves 3 payloads each way per outer step (6 GB); staleness 1.02 x 96.02 / 48."""
    e = estimate(TINY.replace(syncer="site"), mode="default")
    assert e.inner_steps == 40
    assert e.outer_step_time_s == pytest.approx(48.0, rel=1e-12)
    assert e.sync_time_s == pytest.approx(96.02 * 1.02, rel=1e-12)
    assert e.inner_steps_effective == pytest.approx(40 * 1.02 * 96.02 / 48.0, rel=1e-12)
    assert e.traffic.bytes_per_sync == pytest.approx(3 * 1.6e10 / 8, rel=1e-12)
    assert e.traffic.down_bytes_per_sync == pytest.approx(3 * 1.6e10 / 8, rel=1e-12)


def test_requested_h_is_stretched_to_what_the_link_carries() -> None:
    """H = 5 cannot carry one exchange per 5 steps (16 s > 6 s): the interval stretches to 14. H = 20
    is kept: outer step 24 s, staleness 1.02 x 32.02 / 24 = 1.3608..., quality H 20 x 1.3608..."""
    short = estimate(TINY.replace(inner_steps=5), mode="default")
    assert short.inner_steps == 14 and short.outer_step_time_s == pytest.approx(16.8, rel=1e-12)
    long = estimate(TINY.replace(inner_steps=20), mode="default")
    assert long.inner_steps == 20 and long.outer_step_time_s == pytest.approx(24.0, rel=1e-12)
    assert long.inner_steps_effective == pytest.approx(20 * 1.02 * 32.02 / 24.0, rel=1e-12)


def test_one_learner_never_syncs() -> None:
    e = estimate(TINY.replace(num_nodes=1), mode="default")
    assert e.inner_steps == 1 and e.sync_time_s == 0.0 and e.outer_step_time_s == pytest.approx(1.2)
    assert e.inner_steps_effective == 1.0 and e.notes == ()


_links = st.floats(min_value=1e7, max_value=1e11)


@settings(max_examples=25, deadline=None)
@given(
    up=_links,
    down=_links,
    more=st.floats(min_value=1.0, max_value=100.0),
    nodes=st.integers(min_value=2, max_value=64),
    params=st.floats(min_value=1e8, max_value=3e10),
    h=st.sampled_from([0, 0, 1, 30, 500]),
    syncer=st.sampled_from(["relay", "site"]),
    codec=st.sampled_from(["auto", "bf16", "int4"]),
)
def test_more_bandwidth_never_slows_it_nor_lowers_quality(
    up: float, down: float, more: float, nodes: int, params: float, h: int, syncer: str, codec: str
) -> None:
    """Run time never grows and the quality compute never falls with faster links (quality H =
    max(H_eff, f t_rt / T_step), both non-increasing in bandwidth)."""
    s = Scenario(
        algorithm=Algorithm.DECOUPLED,
        params=params,
        num_nodes=nodes,
        inner_steps=h,
        syncer=syncer,
        codec=codec,
        bandwidth_up_bits_per_s=up,
        bandwidth_down_bits_per_s=down,
        hardware="h100_sxm",
        chips_per_node=64,
        regime="none",
        tokens=1e12,
    )
    slow = estimate(s, mode="default")
    fast = estimate(s.replace(bandwidth_up_bits_per_s=up * more, bandwidth_down_bits_per_s=down * more))
    assert fast.run_time_s <= slow.run_time_s * (1 + 1e-12)
    assert fast.inner_steps_effective <= slow.inner_steps_effective * (1 + 1e-12)
    assert fast.c_quality_flop >= slow.c_quality_flop * (1 - 1e-9)


@settings(max_examples=25, deadline=None)
@given(
    bw=_links,
    nodes=st.integers(min_value=1, max_value=256),
    params=st.floats(min_value=1e8, max_value=3e10),
    h=st.sampled_from([0, 0, 1, 30, 500]),
    fragments=st.sampled_from([1, 1, 4, 24]),
    quorum=st.floats(min_value=0.05, max_value=1.0),
    mode=st.sampled_from(["default", "paper"]),
)
def test_never_slower_than_synchronous_diloco(
    bw: float, nodes: int, params: float, h: int, fragments: int, quorum: float, mode: str
) -> None:
    """At equal inputs (trusted peers) decoupled trains at least as many tokens in the time budget as
    synchronous DiLoCo, blocking or overlapped: its learners never wait, theirs wait at least H steps."""
    s = Scenario(
        params=params,
        num_nodes=nodes,
        inner_steps=h,
        fragments=fragments,
        quorum_fraction=quorum,
        bandwidth_up_bits_per_s=bw,
        bandwidth_down_bits_per_s=bw,
        hardware="h100_sxm",
        chips_per_node=64,
        regime="none",
    )
    dec = estimate(s.replace(algorithm=Algorithm.DECOUPLED), mode=mode)
    for sync in ("diloco", "streaming"):
        other = estimate(s.replace(algorithm=sync), mode=mode)
        assert dec.tokens >= other.tokens * (1 - 1e-12), sync


def test_merge_rule_reaches_the_quality_model() -> None:
    """With the outer learning rate held (not retuned per M), a plain mean of M > 8 learners' nearly
    orthogonal updates shrinks the step (quality penalty); the norm-preserving merge does not. With
    the retuned rate (the default) the two are the same."""
    s = Scenario(
        algorithm=Algorithm.DECOUPLED,
        params=1e9,
        num_nodes=32,
        hardware="h100_sxm",
        chips_per_node=8,
        regime="none",
    )

    def c_quality(rule: str, q: QualityParams | None) -> float:
        x = as_arrays(kernel_inputs(s.replace(merge_rule=rule), "default"))
        return float(evaluate(x, DEFAULT_PARAMS, quality_params=q)["c_quality_flop"])

    held = QualityParams(outer_lr_retuned=False)
    assert c_quality("norm_preserving", held) > c_quality("mean", held) * 1.01
    assert c_quality("norm_preserving", held) == c_quality("norm_preserving", None)
    assert c_quality("mean", None) == c_quality("norm_preserving", None)


def test_resilience_reads_the_same_run_as_the_kernel() -> None:
    """One description: the learners, chips per learner, quorum and sync interval that `estimate`
    computed are the islands, island size and round time of the resilience fleet, and the kernel's
    quorum straggler factor is the one of that description's K."""
    e = estimate(TINY.replace(num_nodes=12, quorum_fraction=0.25), mode="default")
    run = decoupled_run(e)
    assert (run.learners, run.chips_per_learner, run.quorum) == (12, 1, 3)
    assert run.sync_interval_s == e.outer_step_time_s
    f_k = 1 + DEFAULT_PARAMS.straggler_coeff_relay * math.log2(run.quorum)
    assert e.sync_time_s == pytest.approx(32.02 * f_k, rel=1e-12)
    spec = spec_for_run(run, ResilienceSpec(chip_mtbf_h=1000.0))
    assert spec.islands == run.learners and spec.chips == run.chips
    assert spec.round_time_h * 3600.0 == pytest.approx(e.outer_step_time_s, rel=1e-12)
    lam, p = spec.island_failure_rate_per_h, spec.round_time_h
    expected = (
        (1 - spec.checkpoint_write_time_h / spec.max_checkpoint_interval_h)
        * math.exp(-lam * spec.restart_time_h)
        * (lam * p / math.expm1(lam * p))
    )
    assert decoupled_goodput(spec) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(InputError, match="algorithm"):
        decoupled_run(estimate(TINY.replace(algorithm=Algorithm.DILOCO), mode="default"))


def test_decoupled_run_validation_and_quorum() -> None:
    assert [int(quorum_learners(m, 0.5)) for m in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]
    assert int(quorum_learners(10, 0.2000000001)) == 2
    for bad in (
        {"learners": 0},
        {"quorum_fraction": 0.0},
        {"quorum_fraction": 1.5},
        {"merge_rule": "median"},
    ):
        kw = {"learners": 4, "chips_per_learner": 8, "sync_interval_s": 10.0, **bad}
        with pytest.raises(InputError, match=next(iter(bad))):
            DecoupledRun(**kw)  # type: ignore[arg-type]


def test_planner_slot_in_default_mode_only_when_asked_and_restrictable() -> None:
    c = Constraints(hardware=("h100_sxm",))
    plain = make_space(Mode.DEFAULT, c, "treaty", DEFAULT_PARAMS, [1e9])
    assert 5.0 not in plain.slot_mode.tolist()  # opt-in: --algorithms ...,decoupled
    asked = c.replace(algorithms=("auto", "hierarchical", "decoupled"))
    assert 5.0 in make_space(Mode.DEFAULT, asked, "treaty", DEFAULT_PARAMS, [1e9]).slot_mode.tolist()
    assert 5.0 not in make_space(Mode.PAPER, asked, "treaty", DEFAULT_PARAMS, [1e9]).slot_mode.tolist()
    only = make_space(Mode.DEFAULT, c.replace(algorithms=("decoupled",)), "treaty", DEFAULT_PARAMS, [1e9])
    assert only.slot_mode.tolist() == [5.0]
    without = make_space(
        Mode.DEFAULT, c.replace(algorithms=("auto", "hierarchical")), "treaty", DEFAULT_PARAMS, [1e9]
    )
    assert 5.0 not in without.slot_mode.tolist()
    with pytest.raises(InputError, match="algorithms"):
        Constraints(algorithms=("streamingg",))
