"""Decoupled DiLoCo with real learner processes and sockets on 127.0.0.1: a killed learner's island
stops while the others go on at an undiminished step rate, it rejoins from the current global state,
and the run ends within 5 % of the no-fault run's loss (issue 22)."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from dispersal.testbed.config import TestbedConfig  # noqa: E402
from dispersal.testbed.supervisor import run_local  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]
CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)
RATE_MARGIN = 0.5
"""The survivors' step rate while a learner is dead must be at least this fraction of their rate
before. Why 0.5 and not 1: on this shared 2-core machine the dead window also holds the replacement
process's start-up (importing torch, building the model and data: seconds of a core, by design a warm
standby) and other jobs' load; measured here the ratio was 0.96-1.4 in this configuration (0.6 in an
earlier one without the slept round trip). A survivor that waited for the dead learner, as a
synchronous DiLoCo group does (the round in flight is dropped, the group re-forms, then holds the
rejoin step until the replacement has started: 5-9 s of start-up, docs/testbed.md), makes no
steps for most of such a window."""


def _events(out: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in (out / "events.jsonl").read_text().splitlines()]


def _cfg(faults: tuple[str, ...] = ()) -> TestbedConfig:
    # outer momentum 0.5: with 0.9 these short asynchronous runs spike (docs/testbed.md, Decoupled).
    # A 1 s round trip really slept (realtime) makes a round last about as long as it would over a WAN,
    # so the survivors are still training when the replacement process has started. (It starts in about
    # a second since the fork server preloads torch._dynamo: the rejoin is planned three rounds after
    # the kill so that the survivors' rate while it is dead is measured over more than a second.)
    return TestbedConfig(
        algorithm="decoupled",
        workers=3,
        steps=120,
        inner_steps=10,
        link_latency_s=1.0,
        realtime=True,
        model="tiny",
        data=CORPUS,
        outer_momentum=0.5,
        eval_batches=16,
        eval_every=100,
        faults=faults,
        run_timeout_s=240.0,
    )


def _step_at(points: list[tuple[float, int]], t: float) -> float:
    """Inner steps a learner had done at time t (piecewise-linear between its round_done events)."""
    prev = points[0]
    for ti, si in points:
        if ti >= t:
            if ti == prev[0]:
                return float(si)
            return prev[1] + (si - prev[1]) * (t - prev[0]) / (ti - prev[0])
        prev = (ti, si)
    return float(points[-1][1])


def _rate(points: list[tuple[float, int]], t0: float, t1: float) -> float:
    return (_step_at(points, t1) - _step_at(points, t0)) / (t1 - t0)


def test_killed_learner_island_stops_others_go_on_and_it_rejoins(tmp_path: Path) -> None:
    clean = run_local(_cfg(), tmp_path / "clean")
    assert clean["completed"], clean
    faulted = run_local(_cfg(("kill w2@step30", "rejoin w2@step60")), tmp_path / "fault")
    assert faulted["completed"], faulted
    ev = _events(tmp_path / "fault")
    t_kill = next(e["t"] for e in ev if e["event"] == "killed" and e["worker"] == "w2")
    back = next(
        e for e in ev if e["event"] == "learner_started" and e["worker"] == "w2" and e["incarnation"] == 1
    )
    t_back = back["t"]
    # The island stopped: w2's first process did no round after its kill step, and its new one began
    # where the others were (at or after the planned step 60), from the syncer's current version.
    w2_rounds = [(e["round"], e["t"]) for e in ev if e["event"] == "round_done" and e["worker"] == "w2"]
    assert not [r for r, t in w2_rounds if t_kill < t < t_back]
    assert back["round"] >= 6 and back["version"] > 0
    # The summary adds up every incarnation (issue 35): the first process's rounds before its kill plus
    # the replacement's 12 - back["round"], which trained at least one round.
    before_kill = len([r for r, t in w2_rounds if t <= t_kill])
    assert 12 - back["round"] >= 1
    assert faulted["rounds_per_worker"]["w2"] == before_kill + 12 - back["round"]
    # It began at the others' progress when it read it (they may finish one more round before it logs).
    others_then = [
        e["step"] for e in ev if e["event"] == "round_done" and e["worker"] != "w2" and e["t"] <= t_back
    ]
    assert back["others_step"] >= 60 and back["round"] * 10 >= back["others_step"] >= max(others_then) - 10
    # The others went on: their step rate while w2 was dead (from its kill until it was back or they
    # had finished) is not below RATE_MARGIN x their rate before it (from their start), summed over
    # the two survivors; both windows hold at least a second of training.
    before = dead = 0.0
    for w in ("w0", "w1"):
        start = next(e["t"] for e in ev if e["event"] == "learner_started" and e["worker"] == w)
        points = [(start, 0)] + [
            (e["t"], e["step"]) for e in ev if e["event"] == "round_done" and e["worker"] == w
        ]
        assert [s for _, s in points] == list(range(0, 130, 10))
        end = min(t_back, points[-1][0])
        assert t_kill - start > 1.0 and end - t_kill > 1.0, (start, t_kill, end)
        before += _rate(points, start, t_kill)
        dead += _rate(points, t_kill, end)
    assert before > 0
    assert dead >= RATE_MARGIN * before, (before, dead)
    # Merges kept coming while w2 was dead (quorum 2 of the two survivors).
    merged_dead = [
        m
        for m in (json.loads(ln) for ln in (tmp_path / "fault" / "metrics.jsonl").read_text().splitlines())
        if "w2" not in m["merged"]
    ]
    assert len(merged_dead) >= 2
    # Quality: within 5 % of the no-fault decoupled run.
    assert faulted["final_val_loss"] == pytest.approx(clean["final_val_loss"], rel=0.05)
    assert faulted["final_val_loss"] < 0.8 * 5.545  # and it learned: well below ln(256)
