"""A worker's side of the membership protocol: generations, barriers, heartbeats, all through signed keys.

The store (hosted by the supervisor, see supervisor.Coordinator) outlives the workers. Every value a
worker reads is checked with the run secret (secure.SignedStore); a forged one is ignored and logged
(``forged_store_value``). The keys::

    genv                    newest published generation (signed; the coordinator's ``gen`` counter
                            is not trusted: a counter cannot carry a tag)
    members/<g>             generation g's member list (JSON); incarnations/<g> {worker: incarnation}
    joinreq/<w>, hb/<w>     a worker asks to be in the group; its heartbeat
    failed/<g>/<w>          its collective failed in generation g
    <barrier>/<w>           member w reached the barrier (one signed key per member, no counter)
    progress/<w>, finished  steps done; the run is over

A new group is ``init_process_group(store=PrefixStore(f"gen{g}", store))``. Who gives state to whom is
decided by the worker (worker._sync_state), called back from :meth:`Membership.form_group`.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

# torch.distributed imports TCPStore and PrefixStore from torch._C._distributed_c10d without re-exporting
# them (no ``as`` alias, no __all__), so mypy takes them for private although they are documented public
# API; their uses below carry ``# type: ignore[attr-defined]``.
import torch.distributed as dist

from dispersal.testbed.events import log_event
from dispersal.testbed.secure import SignedStore

MAX_REFORMS = 50


def connect_store(
    host: str, port: int, secret: bytes, out: Path, who: str, timeout_s: float = 60.0
) -> SignedStore:
    """A signed client of the run's store; forged values are logged to the event log as ``who``."""
    raw = dist.TCPStore(  # type: ignore[attr-defined]  # torch re-export
        host, port, is_master=False, timeout=timedelta(seconds=timeout_s)
    )
    return SignedStore(
        raw, secret, on_forged=lambda key: log_event(out, worker=who, event="forged_store_value", key=key)
    )


HEARTBEAT_PERIOD_S = 0.3
"""How often a worker rewrites its heartbeat (the coordinator's timeout is several periods)."""


def heartbeat_value(incarnation: int, seq: int, gen: int) -> str:
    """hb/<w>'s value: this process's incarnation, a counter that rises by one every beat, and the
    generation the worker is in. Signed with the key (SignedStore), so it cannot be forged; the
    coordinator accepts a beat only if its counter is higher than the last one it saw from that
    incarnation, so writing back captured beats (a replay) does not count as a beat."""
    return json.dumps({"inc": incarnation, "seq": seq, "gen": gen}, separators=(",", ":"))


def parse_heartbeat(raw: bytes | None) -> tuple[int, int, int] | None:
    """(incarnation, seq, gen) of a verified heartbeat value; None if absent or not one."""
    if raw is None:
        return None
    try:
        d = json.loads(raw)
        vals = (d["inc"], d["seq"], d["gen"])
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return None
    return vals


class Heartbeat(threading.Thread):
    """Writes hb/<worker> = heartbeat_value(incarnation, seq, generation) every HEARTBEAT_PERIOD_S on
    its own store connection, seq rising by one each time (a frozen worker stops)."""

    def __init__(
        self,
        store: SignedStore,
        worker: str,
        incarnation: int = 0,
        generation: Callable[[], int] = lambda: 0,
    ) -> None:
        super().__init__(daemon=True)
        self.store, self.worker = store, worker
        self.incarnation, self.generation = incarnation, generation
        self.seq = 0
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        while not self._halt.is_set():
            self.seq += 1
            try:
                value = heartbeat_value(self.incarnation, self.seq, self.generation())
                self.store.set(f"hb/{self.worker}", value)
            except Exception:
                return
            self._halt.wait(HEARTBEAT_PERIOD_S)


MAX_INCARNATIONS = 1 << 20
"""Claims tried before giving up (a store flooded with forged claim keys is a denial of service)."""


def claim_incarnation(store: SignedStore, worker: str) -> int:
    """This process's incarnation: the lowest n >= the store counter's next value whose signed claim
    key ``incarnation/<w>/<n>`` this process writes first (compare-and-set on an absent key).

    The counter ``incarnation/<w>`` (``add``) cannot carry a tag: a local process can write it back
    to an old value (a replay) and a restarted worker would take an incarnation already used, so the
    group would take it for the old process. The claim keys are signed and only ever created: a number
    once claimed (or occupied by any value, even a forged one) is skipped, so no two processes of a
    run share an incarnation whatever the counter says."""
    n = int(store.raw.add(f"incarnation/{worker}", 1)) - 1
    token = secrets.token_hex(16).encode()
    for _ in range(MAX_INCARNATIONS):
        key = f"incarnation/{worker}/{n}"
        sealed = store.seal(key, token)
        if bytes(store.raw.compare_set(key, "", sealed)) == sealed:
            return n
        n += 1
    raise RuntimeError(f"{worker}: no free incarnation after {MAX_INCARNATIONS} claims")


class Membership:
    """Generations, barriers and progress of one worker process (wid, incarnation) on a signed store."""

    def __init__(
        self, store: SignedStore, wid: str, incarnation: int, out: Path, run_timeout_s: float
    ) -> None:
        self.store, self.wid, self.incarnation, self.out = store, wid, incarnation, out
        self.run_timeout_s = run_timeout_s
        self.gen, self.members, self.rank = 0, [wid], 0
        self._gen_seen, self._gen_polled = 0, -1e9
        self._progress_set = -1e9

    # ------------------------------------------------------------------ reading the store
    def finished(self) -> bool:
        return self.store.valid("finished")

    def published_gen(self) -> int:
        """The newest generation the coordinator published (0 before the first)."""
        return self.store.get_int("genv") or 0

    def published_gen_cached(self) -> int:
        """published_gen read at most every 0.5 s (hot path: once per round). Members agree on when to
        re-form through the maximum over the exchanged headers, so staleness only delays it."""
        now = time.monotonic()
        if now - self._gen_polled > 0.5:
            self._gen_seen, self._gen_polled = self.published_gen(), now
        return self._gen_seen

    def generation(self, g: int) -> tuple[list[str], dict[str, int]] | None:
        """Generation g's member list and each member's incarnation (both written before ``genv`` moves)."""
        members_raw = self.store.get(f"members/{g}")
        if members_raw is None:
            return None
        try:
            members = [str(w) for w in json.loads(members_raw)]
            incs_raw = self.store.get(f"incarnations/{g}")
            incs = {str(w): int(i) for w, i in json.loads(incs_raw).items()} if incs_raw else {}
        except (ValueError, TypeError, AttributeError):
            return None
        return members, incs

    def wait_for_generation(self, min_gen: int) -> tuple[int, list[str]] | None:
        """The newest generation >= min_gen that lists this process; None when the run is over."""
        deadline = time.monotonic() + self.run_timeout_s
        while time.monotonic() < deadline:
            if self.finished():
                return None
            g = self.published_gen()
            found = self.generation(g) if g >= min_gen else None
            if found is not None:
                members, incs = found
                # A generation that lists this worker under another incarnation was formed for the
                # previous process (this one was restarted): it is not ours to enter.
                if self.wid in members and incs.get(self.wid, self.incarnation) == self.incarnation:
                    return g, members
                # Dropped from the group (e.g. declared dead) or listed as an older process: ask to join.
                self.store.set(f"joinreq/{self.wid}", str(self.incarnation))
                min_gen = g + 1
            time.sleep(0.01)
        raise TimeoutError(f"{self.wid}: no generation >= {min_gen} within run_timeout_s")

    def broken(self, gen: int, members: list[str]) -> bool:
        """A generation newer than ``gen`` that drops one of ``members``, or lists one of them as another
        incarnation (it was restarted), means that member's process is gone: stop waiting."""
        g = self.published_gen()
        if g <= gen:
            return False
        newer, old = self.generation(g), self.generation(gen)
        if newer is None or old is None:
            return False
        if not set(members) <= set(newer[0]):
            return True
        incs, newer_incs = old[1], newer[1]
        return any(w in incs and newer_incs.get(w, incs[w]) != incs[w] for w in members)

    def barrier(
        self, key: str, members: list[str], gen: int | None = None, newer_aborts: bool = False
    ) -> bool:
        """Store barrier of ``members`` (of generation ``gen``, default the current one): each member
        writes its own signed ``key/<w>``; wait until every member's is there and genuine, giving up if
        a newer generation drops one of them, or (``newer_aborts``: a rendezvous) if any newer one is
        published (bounded by run_timeout_s)."""
        if len(members) == 1:
            return True
        gen = self.gen if gen is None else gen
        self.store.set(f"{key}/{self.wid}", "1")
        keys = [f"{key}/{m}" for m in members]
        deadline = time.monotonic() + self.run_timeout_s
        while time.monotonic() < deadline:
            if self.store.wait_valid(keys, 0.2):
                return True
            if self.broken(gen, members) or self.finished():
                return False
            # Two joiners registered a tick apart give generations g and g+1; a member still waiting
            # at g's rendezvous for a joiner that went on to g+1 would wait until the run timeout.
            if newer_aborts and self.published_gen() > gen:
                return False
        return False

    def set_progress(self, steps_done: int, force: bool = False) -> None:
        """progress/<w> = inner steps done (for the supervisor and standby joiners), rate-limited."""
        now = time.monotonic()
        if force or now - self._progress_set > 0.25:
            self.store.set(f"progress/{self.wid}", str(steps_done))
            self._progress_set = now

    def wait_until_step(self, step: int, worker_ids: list[str]) -> bool:
        """A standby replacement: wait until the group reaches ``step`` (False if the run ends first)."""
        deadline = time.monotonic() + self.run_timeout_s
        while time.monotonic() < deadline:
            if self.finished():
                return False
            done = [self.store.get_int(f"progress/{w}") for w in worker_ids if w != self.wid]
            if max((d for d in done if d is not None), default=0) >= step:
                return True
            time.sleep(0.05)
        return False

    def await_member(self, worker: str, timeout_s: float) -> int:
        """Wait (bounded) until a published generation lists ``worker``; returns that generation, or the
        current one if it does not come (the run goes on without it)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            g = self.published_gen()
            found = self.generation(g) if g > self.gen else None
            if found is not None and worker in found[0]:
                return g
            if self.finished():
                break
            time.sleep(0.02)
        log_event(self.out, worker=self.wid, event="rejoin_not_seen", awaited=worker, waited_s=timeout_s)
        return self.gen

    # ------------------------------------------------------------------ forming a group
    def form_group(
        self,
        min_gen: int,
        mode: str,
        *,
        backend: str,
        collective_timeout_s: float,
        sync_state: Callable[[str], bool],
        joined: Callable[[bool], dict[str, Any]],
    ) -> bool:
        """Join the newest generation >= min_gen that lists this worker; False when the run is over.

        ``mode``: "start" (first group), "grow" (after a good round, someone joins), "failure" (the
        round was dropped: local weights reset to global), "join" (a restarted worker heals).
        ``sync_state(mode)`` runs inside the new group and returns whether local state was reset;
        ``joined(reset)`` returns the fields of the ``joined`` event."""
        for _ in range(MAX_REFORMS):
            found = self.wait_for_generation(min_gen)
            if found is None:
                return False
            g, members = found
            # Judged against generation g's own member list: comparing with the old group (which still
            # lists the dead worker) would make a survivor leave the rendezvous its peers then wait for.
            if not self.barrier(f"rdv/{g}", members, gen=g, newer_aborts=True):
                min_gen = g + 1
                continue
            if dist.is_initialized():
                dist.destroy_process_group()
            # torch names each new group by a per-process counter; members with different histories
            # would then rendezvous under different names. The PrefixStore already makes g unique.
            dist.distributed_c10d._world.group_count = 0
            try:
                dist.init_process_group(
                    backend,
                    store=dist.PrefixStore(f"gen{g}", self.store.raw),  # type: ignore[attr-defined]
                    rank=members.index(self.wid),
                    world_size=len(members),
                    timeout=timedelta(seconds=collective_timeout_s),
                )
                self.gen, self.members, self.rank = g, members, members.index(self.wid)
                reset = sync_state(mode)
            except Exception as exc:
                log_event(
                    self.out, worker=self.wid, event="reform_failed", generation=g, error=str(exc)[:200]
                )
                self.store.set(f"failed/{g}/{self.wid}", "1")
                min_gen = g + 1
                mode = "join" if mode == "join" else "failure"
                continue
            log_event(
                self.out,
                worker=self.wid,
                event="joined",
                generation=g,
                members=members,
                incarnation=self.incarnation,
                **joined(reset),
            )
            return True
        raise RuntimeError(f"{self.wid}: no stable group after {MAX_REFORMS} generations")
