"""The DiLoCo round loop as a pure state machine: what a worker does next, decided from what its group
did last. No sockets, no torch, no clock (the decoupled mode's syncer.py has the same shape).

worker.Worker owns the transport (the store, the process group, the link) and the model; it carries
out each action the machine returns and answers with what happened::

    action = machine.start(resumed=..., join_at_step=...)
    while not isinstance(action, Finish | Quit):
        action = machine.on(worker.carry_out(action))  # an event, or None for "done"

The transitions (a round = the inner steps between two syncs)::

    opening    [WaitForStep -> Waited]  Announce  Form(1, start|join) -> Joined  Begin
    boundary   for each planned rejoin now due whose worker is not in the group:
                   Hold(worker) -> Back(gen)     a newer generation lists it: Form(gen, grow)
                                                 the hold timed out: go on without it
               Train(round) -> Synced            inner steps, then the sync
    good sync  Progress  Record(round, final, checkpoint)  [Form(seen, grow): a member saw a newer
               generation published]
    failed     Progress(force)  Drop  Form(gen + 1, failure)     a member dropped: the round is lost
    the end    round == stop or diverged: Finish(completed);  a Form that finds no group: Quit

An update the aggregation rule leaves out (rejected: bad tag, non-finite, an outlier) is the rule's
verdict inside a good sync (outer.OuterStep): the round counts and its sender stays in the group, and
a frame whose tag failed cannot make the group re-form (:func:`seen_generation`); only a failed
collective or barrier (a member gone) drops the round.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# ---------------------------------------------------------------------------- actions (machine -> worker)


@dataclass(frozen=True, kw_only=True)
class WaitForStep:
    """Standby: wait until the group has reached ``step`` before asking to join."""

    step: int


@dataclass(frozen=True, kw_only=True)
class Announce:
    """Ask to be in the group (joinreq/<w>); ``rejoining``: a restarted process, logged as such."""

    rejoining: bool


@dataclass(frozen=True, kw_only=True)
class Form:
    """Join the newest generation >= ``min_gen`` that lists this worker (membership.form_group).

    ``mode``: start | join | grow | failure; ``held``: part of holding a round boundary for a rejoin
    (its time is not training time)."""

    min_gen: int
    mode: str
    held: bool = False


@dataclass(frozen=True, kw_only=True)
class Begin:
    """The group is formed: start the training clock; ``truncate_metrics``: a resumed run's rank 0
    drops the metrics rows past the checkpoint's round."""

    truncate_metrics: bool


@dataclass(frozen=True, kw_only=True)
class Hold:
    """A planned rejoin is due: hold the round boundary until ``worker`` is in (bounded)."""

    worker: str
    step: int


@dataclass(frozen=True, kw_only=True)
class Train:
    """Run the inner steps of ``round`` (steps ``first_step`` .. + round_steps - 1), then sync."""

    round: int
    first_step: int


@dataclass(frozen=True, kw_only=True)
class Progress:
    """Publish the steps done; ``force``: write now (a failed round, the last round)."""

    step: int
    force: bool


@dataclass(frozen=True, kw_only=True)
class Drop:
    """The sync failed: local weights back to the global ones, mark this generation failed."""

    round: int


@dataclass(frozen=True, kw_only=True)
class Record:
    """A good round ``round`` ended: its metrics row (``log``: rank 0 writes it), and a checkpoint."""

    round: int
    final: bool
    log: bool
    checkpoint: bool


@dataclass(frozen=True, kw_only=True)
class Finish:
    """The loop is over: final counters, summary.json (rank 0)."""

    completed: bool


@dataclass(frozen=True, kw_only=True)
class Quit:
    """No group to be in (the run is over or timed out): leave without a summary."""

    why: str


Action = WaitForStep | Announce | Form | Begin | Hold | Train | Progress | Drop | Record | Finish | Quit

# ---------------------------------------------------------------------------- events (worker -> machine)


@dataclass(frozen=True, kw_only=True)
class Waited:
    ok: bool


@dataclass(frozen=True, kw_only=True)
class Joined:
    """After a Form: whether a group was formed, and the group as it now stands. ``round`` is this
    worker's round after the state transfer (a member behind the group takes the group's round)."""

    ok: bool
    gen: int
    members: tuple[str, ...]
    rank: int
    round: int


@dataclass(frozen=True, kw_only=True)
class Back:
    """After a Hold: the newest generation listing the held worker (not newer than now: timed out)."""

    gen: int


@dataclass(frozen=True, kw_only=True)
class Synced:
    """After a Train: ``ok`` False when the round was dropped (a member gone); ``seen_gen`` the newest
    generation a trusted member saw published; ``diverged`` the loss or the weights blew up."""

    ok: bool
    seen_gen: int
    diverged: bool


Event = Waited | Joined | Back | Synced | None


def seen_generation(gen: int, claims: Iterable[tuple[int, bool]], published: Callable[[], int]) -> int:
    """Synced's ``seen_gen``: the newest generation the members' frames say was published, from the
    (generation, trusted) claim of each frame of a sync. A frame whose tag failed (untrusted) is not
    believed at all, and no header moves the group past what the coordinator really published
    (``published`` is read only when a claim is newer than ``gen``)."""
    seen = max([g for g, trusted in claims if trusted], default=gen)
    return min(seen, published()) if seen > gen else gen


# ---------------------------------------------------------------------------- the machine


@dataclass(frozen=True, kw_only=True)
class Rejoin:
    """A planned rejoin (fault plan ``rejoin wN@stepS``)."""

    worker: str
    step: int


class RoundMachine:
    """The round loop's state: round, stop, the group as last formed, the rejoins still due."""

    def __init__(
        self,
        *,
        rounds: int,
        round_steps: int,
        stop_after_rounds: int = 0,
        checkpoint_every: int = 0,
        incarnation: int = 0,
        rejoins: Sequence[Rejoin] = (),
    ) -> None:
        if rounds < 1 or round_steps < 1:
            raise ValueError(f"rounds, round_steps: >= 1, got {rounds}, {round_steps}")
        self.rounds, self.k = rounds, round_steps
        self.stop_after, self.every, self.incarnation = stop_after_rounds, checkpoint_every, incarnation
        self.planned = list(rejoins)
        self.round = 0  # rounds completed (the worker's round: it reads and resumes it here)
        self.stop = rounds
        self.gen, self.rank = 0, 0
        self.members: tuple[str, ...] = ()
        self.diverged = False
        self.state = "new"
        self._resumed = False
        self._rejoins: list[Rejoin] = []  # planned rejoins still ahead
        self._scan: list[Rejoin] = []  # those this boundary has not looked at yet
        self._seen = 0

    # ------------------------------------------------------------------ driving
    def start(self, *, resumed: bool = False, join_at_step: int = 0) -> Action:
        """The first action (``round`` already holds a resumed checkpoint's round)."""
        if self.state != "new":
            raise ValueError(f"start: the machine is {self.state}")
        self._resumed = resumed
        if join_at_step:
            self.state = "standby"
            return WaitForStep(step=join_at_step)
        return self._announce()

    def on(self, event: Event) -> Action:
        """The next action, given what the last one did."""
        state = self.state
        if isinstance(event, Joined):
            self.gen, self.members, self.rank, self.round = event.gen, event.members, event.rank, event.round
        match state, event:
            case "standby", Waited(ok=ok):
                return self._announce() if ok else self._quit("the group never reached the join step")
            case "announced", None:
                self.state = "opening"
                return Form(min_gen=1, mode="join" if self.incarnation > 0 else "start")
            case "opening", Joined(ok=ok):
                return self._begin() if ok else self._quit("no group to start or join")
            case "begun", None:
                return self._boundary()
            case "holding", Back(gen=g):
                if g > self.gen:
                    self.state = "grown_for_rejoin"
                    return Form(min_gen=g, mode="grow", held=True)
                return self._next_hold()  # timed out: go on without it
            case "grown_for_rejoin", Joined():
                return self._next_hold()
            case "training", Synced():
                return self._synced(event)
            case "progressed_ok", None:
                return self._record()
            case "progressed_failed", None:
                self.state = "dropped"
                return Drop(round=self.round - 1)
            case "dropped", None:
                self.state = "reforming"
                return Form(min_gen=self.gen + 1, mode="failure")
            case "reforming", Joined(ok=ok):
                return self._boundary() if ok else self._quit("no group after a dropped round")
            case "recorded", None:
                if self._seen > self.gen and self.round < self.stop:
                    self.state = "grown"
                    return Form(min_gen=self._seen, mode="grow")
                return self._boundary()
            case "grown", Joined():
                return self._boundary()
        raise ValueError(f"round machine: no transition from {state!r} on {event!r}")

    # ------------------------------------------------------------------ transitions
    def _announce(self) -> Action:
        self.state = "announced"
        return Announce(rejoining=self.incarnation > 0)

    def _begin(self) -> Action:
        """Stop and the rejoins still ahead count from the round the group formed at."""
        if self.stop_after:
            self.stop = min(self.rounds, self.round + self.stop_after)
        self._rejoins = [f for f in self.planned if f.step > self.round * self.k]
        self.state = "begun"
        return Begin(truncate_metrics=self._resumed and self.rank == 0)

    def _boundary(self) -> Action:
        """The top of the loop: finish, or walk the planned rejoins now due, then train."""
        if not (self.round < self.stop and not self.diverged):
            self.state = "finished"
            return Finish(completed=self.round == self.rounds and not self.diverged)
        self._scan = list(self._rejoins)
        return self._next_hold()

    def _next_hold(self) -> Action:
        """Hold for the next planned rejoin now due whose worker is not in the group (one pass over
        the plan per boundary), else train the next round."""
        while self._scan:
            f = self._scan.pop(0)
            if f.step <= self.round * self.k:
                self._rejoins.remove(f)
                if f.worker in self.members:
                    continue
                self.state = "holding"
                return Hold(worker=f.worker, step=self.round * self.k)
        self.state = "training"
        return Train(round=self.round, first_step=self.round * self.k)

    def _synced(self, ev: Synced) -> Action:
        self.round += 1
        self.diverged = self.diverged or ev.diverged
        self._seen = ev.seen_gen
        self.state = "progressed_ok" if ev.ok else "progressed_failed"
        return Progress(step=self.round * self.k, force=not ev.ok or self.round == self.stop)

    def _record(self) -> Action:
        final = self.round == self.rounds
        due = final or self.round == self.stop or bool(self.every and self.round % self.every == 0)
        self.state = "recorded"
        return Record(
            round=self.round - 1, final=final, log=self.rank == 0, checkpoint=due and not self.diverged
        )

    def _quit(self, why: str) -> Action:
        self.state = "quit"
        return Quit(why=why)
