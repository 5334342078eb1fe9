"""The DiLoCo round loop's state machine (round_machine.py) driven by a fake group: no processes, no
sockets, no torch. Each test is a scripted run; the assertion is the transcript of actions the machine
asked for (what worker.Worker would do on the real group), so a change in the loop's order shows.
The same loop on real processes is tested end to end in test_processes.py and test_rejoin.py."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

pytest.importorskip("torch")  # the testbed package needs it, though this module does not

from dispersal.testbed.round_machine import (
    Action,
    Announce,
    Back,
    Begin,
    Drop,
    Event,
    Finish,
    Form,
    Hold,
    Joined,
    Progress,
    Quit,
    Record,
    Rejoin,
    RoundMachine,
    Synced,
    Train,
    Waited,
    WaitForStep,
    seen_generation,
)

pytestmark = pytest.mark.torch
K = 5  # inner steps per round


@dataclass
class FakeGroup:
    """Plays the transport: a generation counter, a member list, and scripted outcomes.

    ``fail_rounds``: rounds whose sync fails (a member is gone: it is left out of the next generation);
    ``claims``: round -> each frame's (generation seen published, trusted) in that round's sync;
    ``published``: the newest generation the coordinator really published;
    ``back``: worker -> the generation that lists it when a hold for it ends (absent: the hold times
    out); ``no_group_after``: Form calls after which no group can be formed (the run timed out)."""

    members: list[str] = field(default_factory=lambda: ["w0", "w1"])
    me: str = "w0"
    gen: int = 0
    fail_rounds: set[int] = field(default_factory=set)
    gone: list[str] = field(default_factory=list)
    claims: dict[int, list[tuple[int, bool]]] = field(default_factory=dict)
    published: int = 10**6
    back: dict[str, int] = field(default_factory=dict)
    diverge_round: int = -1
    no_group_after: int = 10**6
    round: int = 0  # this worker's round as the group sees it
    round_after_join: int | None = None  # the state transfer's round (a member ahead of this one)
    forms: int = 0
    log: list[Action] = field(default_factory=list)

    def carry_out(self, action: Action) -> Event:
        self.log.append(action)
        match action:
            case WaitForStep():
                return Waited(ok=True)
            case Form(min_gen=g, mode=mode):
                self.forms += 1
                if self.forms > self.no_group_after:
                    return Joined(
                        ok=False, gen=self.gen, members=tuple(self.members), rank=0, round=self.round
                    )
                if mode == "failure":
                    self.members = [m for m in self.members if m not in self.gone]
                self.gen = max(self.gen + 1, g)
                if self.round_after_join is not None:
                    self.round, self.round_after_join = self.round_after_join, None
                rank = self.members.index(self.me)
                return Joined(ok=True, gen=self.gen, members=tuple(self.members), rank=rank, round=self.round)
            case Hold(worker=w):
                if w in self.back:
                    self.members.append(w)
                    return Back(gen=self.back.pop(w))
                return Back(gen=self.gen)
            case Train(round=r):
                self.round = r + 1  # the worker counts the round done, failed or not
                return Synced(
                    ok=r not in self.fail_rounds,
                    seen_gen=seen_generation(self.gen, self.claims.get(r, []), lambda: self.published),
                    diverged=r == self.diverge_round,
                )
        return None


def drive(machine: RoundMachine, group: FakeGroup, *, resumed: bool = False, join_at_step: int = 0) -> Action:
    """The worker's loop (worker.Worker.run) over the fake group; returns the last action."""
    group.round = machine.round
    action = machine.start(resumed=resumed, join_at_step=join_at_step)
    for _ in range(1000):
        event = group.carry_out(action)
        if isinstance(action, Finish | Quit):
            return action
        action = machine.on(event)
    raise AssertionError("the loop did not end")


def kinds(log: list[Action]) -> list[str]:
    return [type(a).__name__ for a in log]


def trained(log: list[Action]) -> list[int]:
    return [a.round for a in log if isinstance(a, Train)]


def test_a_clean_run_is_one_start_then_train_progress_record_per_round() -> None:
    m, g = RoundMachine(rounds=3, round_steps=K, checkpoint_every=2), FakeGroup()
    assert drive(m, g) == Finish(completed=True)
    assert g.log[:3] == [
        Announce(rejoining=False),
        Form(min_gen=1, mode="start"),
        Begin(truncate_metrics=False),
    ]
    assert kinds(g.log[3:]) == ["Train", "Progress", "Record"] * 3 + ["Finish"]
    assert [a for a in g.log if isinstance(a, Progress)] == [
        Progress(step=5, force=False),
        Progress(step=10, force=False),
        Progress(step=15, force=True),  # the last round is published at once
    ]
    assert [(a.round, a.final, a.checkpoint) for a in g.log if isinstance(a, Record)] == [
        (0, False, False),
        (1, False, True),  # checkpoint_every=2
        (2, True, True),  # the final round always
    ]
    assert m.round == 3 and m.state == "finished"


def test_only_rank_0_logs_metrics_and_truncates_them_on_resume() -> None:
    m, g = RoundMachine(rounds=4, round_steps=K), FakeGroup(me="w1")
    m.round = 2  # resumed from a checkpoint at round 2
    drive(m, g, resumed=True)
    assert Begin(truncate_metrics=False) in g.log
    assert trained(g.log) == [2, 3] and not any(a.log for a in g.log if isinstance(a, Record))
    m0, g0 = RoundMachine(rounds=4, round_steps=K), FakeGroup()
    m0.round = 2
    drive(m0, g0, resumed=True)
    assert Begin(truncate_metrics=True) in g0.log and all(a.log for a in g0.log if isinstance(a, Record))


def test_a_restarted_process_joins_and_a_standby_waits_for_its_step_first() -> None:
    m, g = RoundMachine(rounds=2, round_steps=K, incarnation=1), FakeGroup(round_after_join=1)
    assert drive(m, g, join_at_step=5) == Finish(completed=True)
    assert g.log[:3] == [WaitForStep(step=5), Announce(rejoining=True), Form(min_gen=1, mode="join")]
    assert trained(g.log) == [1]  # it took the group's round with the state transfer


def test_a_member_dropped_mid_sync_loses_the_round_and_reforms_without_it() -> None:
    m = RoundMachine(rounds=4, round_steps=K)
    g = FakeGroup(members=["w0", "w1", "w2"], fail_rounds={1}, gone=["w2"])
    assert drive(m, g) == Finish(completed=True)
    i = g.log.index(Train(round=1, first_step=5))
    assert g.log[i + 1 : i + 4] == [
        Progress(step=10, force=True),
        Drop(round=1),
        Form(min_gen=2, mode="failure"),  # the generation after the one that failed
    ]
    assert not any(isinstance(a, Record) and a.round == 1 for a in g.log)  # no metrics row, no checkpoint
    assert trained(g.log) == [0, 1, 2, 3]  # the dropped round's steps are not redone
    assert m.members == ("w0", "w1") and m.gen == 2


def test_no_group_after_a_dropped_round_quits_without_a_summary() -> None:
    m, g = RoundMachine(rounds=4, round_steps=K), FakeGroup(fail_rounds={0}, no_group_after=1)
    assert drive(m, g) == Quit(why="no group after a dropped round")
    assert not any(isinstance(a, Finish) for a in g.log)
    m2, g2 = RoundMachine(rounds=4, round_steps=K), FakeGroup(no_group_after=0)
    assert drive(m2, g2) == Quit(why="no group to start or join")
    assert not any(isinstance(a, Train) for a in g2.log)


def test_a_planned_rejoin_holds_the_boundary_then_grows_the_group() -> None:
    m = RoundMachine(rounds=4, round_steps=K, rejoins=[Rejoin(worker="w2", step=10)])
    g = FakeGroup(back={"w2": 5})
    assert drive(m, g) == Finish(completed=True)
    i = g.log.index(Hold(worker="w2", step=10))
    assert trained(g.log[:i]) == [0, 1]  # held at the boundary before round 2 (step 10)
    assert g.log[i + 1 : i + 3] == [Form(min_gen=5, mode="grow", held=True), Train(round=2, first_step=10)]
    assert m.members == ("w0", "w1", "w2") and sum(isinstance(a, Hold) for a in g.log) == 1


def test_a_rejoin_that_times_out_goes_on_without_the_worker() -> None:
    m = RoundMachine(
        rounds=3, round_steps=K, rejoins=[Rejoin(worker="w2", step=5), Rejoin(worker="w1", step=5)]
    )
    g = FakeGroup()  # w2 never comes back; w1 never left
    assert drive(m, g) == Finish(completed=True)
    i = g.log.index(Hold(worker="w2", step=5))
    assert g.log[i + 1] == Train(round=1, first_step=5)  # no re-form; w1 (a member) is not held for
    assert sum(isinstance(a, Hold) for a in g.log) == 1 and m.members == ("w0", "w1")


def test_a_rejoin_planned_before_the_resume_point_is_not_held_for() -> None:
    m = RoundMachine(rounds=4, round_steps=K, rejoins=[Rejoin(worker="w2", step=5)])
    m.round = 2
    g = FakeGroup()
    drive(m, g, resumed=True)
    assert not any(isinstance(a, Hold) for a in g.log)


def test_a_newer_generation_seen_in_the_frames_grows_the_group_after_the_round() -> None:
    m, g = (
        RoundMachine(rounds=3, round_steps=K),
        FakeGroup(claims={0: [(1, True), (4, True)], 2: [(9, True)]}),
    )
    drive(m, g)
    i = g.log.index(Record(round=0, final=False, log=True, checkpoint=False))
    assert g.log[i + 1] == Form(min_gen=4, mode="grow")
    assert not any(isinstance(a, Form) and a.min_gen == 9 for a in g.log)  # not after the last round


def test_a_rejected_update_is_a_good_sync_and_its_header_is_not_believed() -> None:
    """w1's frame fails its tag in round 1 (the rule leaves it out, inside the sync) and claims a
    generation 7: the round counts, w1 stays in the group, and nobody re-forms for generation 7. A
    trusted member's claim past what the coordinator published is capped at the published one."""
    m = RoundMachine(rounds=4, round_steps=K)
    g = FakeGroup(claims={1: [(1, True), (7, False)], 2: [(1, True), (8, True)]}, published=3)
    assert drive(m, g) == Finish(completed=True)
    assert m.members == ("w0", "w1")
    assert [
        (type(a).__name__, getattr(a, "round", a.min_gen if isinstance(a, Form) else None))
        for a in g.log
        if isinstance(a, Form | Drop | Hold | Record)
    ] == [
        ("Form", 1),
        ("Record", 0),
        ("Record", 1),  # w1's forged generation 7: no re-form
        ("Record", 2),
        ("Form", 3),  # w0's generation 8 capped at the published generation 3
        ("Record", 3),
    ]


def test_seen_generation_reads_the_published_one_only_when_a_claim_is_newer() -> None:
    def never() -> int:
        raise AssertionError("published generation read without a newer claim")

    assert seen_generation(5, [(5, True), (3, True), (9, False)], never) == 5
    assert seen_generation(5, [], never) == 5
    assert seen_generation(5, [(6, True), (8, True)], lambda: 7) == 7
    assert seen_generation(5, [(6, True)], lambda: 9) == 6


def test_divergence_stops_the_loop_without_a_checkpoint() -> None:
    m, g = RoundMachine(rounds=6, round_steps=K, checkpoint_every=1), FakeGroup(diverge_round=2)
    assert drive(m, g) == Finish(completed=False)
    assert trained(g.log) == [0, 1, 2]
    assert [(a.round, a.checkpoint) for a in g.log if isinstance(a, Record)] == [
        (0, True),
        (1, True),
        (2, False),
    ]


def test_stop_after_rounds_counts_from_the_round_the_group_formed_at() -> None:
    m, g = RoundMachine(rounds=10, round_steps=K, stop_after_rounds=2), FakeGroup(round_after_join=3)
    assert drive(m, g) == Finish(completed=False)
    assert trained(g.log) == [3, 4] and [a for a in g.log if isinstance(a, Record)][-1].checkpoint


def test_an_event_out_of_turn_is_refused() -> None:
    m = RoundMachine(rounds=2, round_steps=K)
    m.start()
    with pytest.raises(ValueError, match="no transition from 'announced'"):
        m.on(Synced(ok=True, seen_gen=0, diverged=False))
    with pytest.raises(ValueError, match="rounds, round_steps"):
        RoundMachine(rounds=0, round_steps=K)
