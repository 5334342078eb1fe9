"""Honest summaries after a crash (issue 35), with real worker processes: a worker killed by someone
other than the fault plan is named in ``workers_lost`` and the run is not ``completed``; a torn
metrics line on --resume is cut off and recorded, and the resumed run equals the uninterrupted one;
a decoupled summary adds up every incarnation and names a replacement that trained nothing."""

from __future__ import annotations

import json
import os
import signal
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from proc_tree import descendants

pytest.importorskip("torch")

from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.supervisor import run_local

CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)


def _events(out: Path) -> list[dict[str, Any]]:
    p = out / "events.jsonl"
    return [json.loads(ln) for ln in p.read_text().splitlines()] if p.exists() else []


def _metrics(out: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------- the rule (fast)
@pytest.mark.torch
def test_honest_summary_rules() -> None:
    from dispersal.testbed.honesty import honest

    cfg = TestbedConfig(workers=3, faults=("kill w2@step10",))
    ok = {"completed": True, "reason": "", "final_members": ["w0", "w1"]}
    assert honest(ok, cfg, [])["completed"] is True  # w2's planned kill: the group meant to finish
    lost = [{"worker": "w1", "incarnation": 0, "reason": "exit code 1", "round": 3}]
    got = honest(ok, cfg, lost)
    assert got["completed"] is False and got["workers_lost"] == lost
    assert got["reason"] == "w1 lost at round 3 (exit code 1)"
    short = honest({"completed": True, "reason": "", "final_members": ["w0"]}, cfg, [])
    assert short["completed"] is False and short["reason"] == "finished with w0 of w0, w1"
    assert short["intended_members"] == ["w0", "w1"]


# ---------------------------------------------------------------------- real processes (slow)
def _kill_when_training(out: Path, worker: str, done: dict[str, Any]) -> None:
    """SIGKILL ``worker``'s process once rank 0 has logged a round: nobody's plan says so."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    # The supervisor's workers are this test process's descendants (forked from its fork server) and
    # carry the process name "worker wN" (launch.py), which ps and pgrep show.
    ours = descendants()
    for pid in sorted(ours - {os.getpid()}):
        try:
            comm = (Path("/proc") / str(pid) / "comm").read_text().strip()
        except OSError:
            continue
        if comm == f"worker {worker}":
            os.kill(pid, signal.SIGKILL)
            done["pid"] = pid
            return


@pytest.mark.slow
@pytest.mark.torch
def test_a_worker_killed_outside_the_plan_is_lost_and_the_run_not_completed(tmp_path: Path) -> None:
    cfg = TestbedConfig(
        workers=3, steps=40, inner_steps=5, data=CORPUS, eval_every=10**6, eval_batches=2, run_timeout_s=240
    )
    done: dict[str, Any] = {}
    t = threading.Thread(target=_kill_when_training, args=(tmp_path, "w1", done), daemon=True)
    t.start()
    s = run_local(cfg, tmp_path)
    t.join(10)
    assert done.get("pid"), "the worker process was not found"
    assert s["final_members"] == ["w0", "w2"] and s["rounds"] == 8  # the survivors finished
    assert s["completed"] is False, s
    assert [(x["worker"], x["reason"]) for x in s["workers_lost"]] == [("w1", "signal SIGKILL")]
    assert 0 <= s["workers_lost"][0]["round"] < 8
    assert "w1 lost at round" in s["reason"] and "finished with w0, w2 of w0, w1, w2" in s["reason"]
    assert any(e["event"] == "worker_lost" and e["worker"] == "w1" for e in _events(tmp_path))


# A torn metrics line on resume (cut, and the resumed run equals the clean one): checked by
# test_processes.py::test_resume_is_bitwise_identical[diloco], whose stop/resume/clean runs were
# the same three runs this file made again.


@pytest.mark.slow
@pytest.mark.torch
def test_decoupled_summary_adds_up_every_incarnation_and_flags_an_idle_replacement(tmp_path: Path) -> None:
    cfg = TestbedConfig(
        algorithm="decoupled",
        workers=3,
        steps=60,
        inner_steps=10,
        link_latency_s=0.5,
        realtime=True,
        data=CORPUS,
        outer_momentum=0.5,
        eval_batches=2,
        eval_every=100,
        # w1 dies at step 20 and comes back at 30; w2's replacement is due only at the very end
        faults=("kill w1@step20", "rejoin w1@step30", "kill w2@step40", "rejoin w2@step60"),
        run_timeout_s=240,
    )
    s = run_local(cfg, tmp_path)
    incs = s["incarnations_per_worker"]
    assert [r["incarnation"] for r in incs["w1"]] == [0, 1]
    first, second = (r.get("rounds", 0) for r in incs["w1"])
    assert first == 2  # rounds 0-1 before the kill at step 20
    assert s["rounds_per_worker"]["w1"] == first + second  # before: the last incarnation only
    assert s["bytes_sent_per_worker"]["w1"] == sum(r.get("bytes_sent", 0) for r in incs["w1"])
    assert incs["w2"][0]["rounds"] == 4 and s["rounds_per_worker"]["w2"] == 4
    # w2's replacement was due at the last step: it trained nothing, and says so. (w1's trained
    # nothing too if the others finished before it had started: how long a start takes varies.)
    idle = [(x["worker"], x["incarnation"]) for x in s["idle_replacements"]]
    assert ("w2", 1) in idle and (("w1", 1) in idle) == (second == 0)
    assert "a replacement trained nothing" in s["reason"] and "w2#1" in s["reason"]


@pytest.mark.torch
def test_decoupled_summary_sums_incarnations_from_the_store(tmp_path: Path) -> None:
    """The summary's arithmetic on hand-made store rows: w1's first process did 2 rounds (80 bytes)
    and was killed; its replacement did 3 (120 bytes); w2's replacement did none."""
    from dispersal.testbed.decoupled_run import summary

    def row(rounds: int) -> dict[str, Any]:
        return {
            "rounds": rounds,
            "bytes_sent": 40 * rounds,
            "bytes_received": 50 * rounds,
            "compute_s": 1.0 * rounds,
            "exposed_s": 0.0,
            "clock_s": 2.0 * rounds,
            "train_wall_s": 1.0,
            "tokens": 10 * rounds,
            "refused": 0,
        }

    values = {
        "incarnation/w0/0": b"x",
        "learner_row/w0/0": row(5),
        "learner_done/w0": row(5),
        "incarnation/w1/0": b"x",
        "learner_row/w1/0": row(2),
        "incarnation/w1/1": b"x",
        "learner_row/w1/1": row(3),
        "learner_done/w1": row(3),
        "incarnation/w2/0": b"x",
        "learner_row/w2/0": row(5),
        "incarnation/w2/1": b"x",
        "learner_row/w2/1": row(0),
        "learner_done/w2": row(0),
    }

    class Store:
        def get(self, key: str) -> bytes | None:
            v = values.get(key)
            return json.dumps(v).encode() if isinstance(v, dict) else v  # type: ignore[return-value]

    class FakeSyncer:
        numel, version, merged_updates = 10, 7, 13
        rejected: ClassVar[dict[str, int]] = {}

    faults = ("kill w1@step20", "rejoin w1@step30", "kill w2@step50", "rejoin w2@step50")
    cfg = TestbedConfig(algorithm="decoupled", workers=3, steps=50, inner_steps=10, faults=faults)
    s = summary(cfg, tmp_path, FakeSyncer(), Store(), False, 3.0, 2.5)
    assert s["rounds_per_worker"] == {"w0": 5, "w1": 5, "w2": 5}  # before: w1 3, w2 0
    assert s["bytes_sent_per_worker"] == {"w0": 200, "w1": 200, "w2": 200}
    assert s["compute_s_per_worker"]["w1"] == 5.0
    assert s["idle_replacements"] == [{"worker": "w2", "incarnation": 1}]
    assert s["reason"] == "a replacement trained nothing: w2#1"
