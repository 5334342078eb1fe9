"""A declarative fault plan: what goes wrong, to whom, at which inner step.

Syntax (command line or one per line in a file, ``#`` starts a comment)::

    kill w2@step300          SIGKILL worker w2 when it reaches inner step 300 (supervisor does it)
    kill w2@step300/allgather  ... at its first sync at/after step 300, after the barrier, while
                             its peers are inside all_gather waiting for its frame
    kill w2@step300/checkpoint ... in the middle of its first checkpoint write at/after step 300
                             (rank 0: half of global.pt written; others: half of its own file)
    rejoin w2@step500        start w2 again once the others reach step 500; it heals from global state
    pause w2:5s@step300      SIGSTOP w2 when it reaches inner step 300, SIGCONT 5 s later
    straggle w1:3x@100-200   w1's compute counts 3x for inner steps 100..199
    corrupt w3@step400       w3's payload is damaged on the wire at its first sync at/after step 400

The plan is data only; the supervisor (kill, pause, rejoin) and the worker (straggle, corrupt)
apply it, in the spirit of torchft's ``EventInjector``. Kills and pauses hit a worker's first
incarnation only (a restarted process does not kill itself again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dispersal._io import read_input_text
from dispersal.model.inputs.errors import InputError

_WORKER = r"(w\d+)"
KILL_PHASES = ("step", "allgather", "checkpoint")
"""Where a kill lands: before the inner step, inside the sync's all_gather, inside a checkpoint write."""
_PATTERNS = {
    "kill": re.compile(rf"^{_WORKER}@(?:step)?(\d+)(?:/({'|'.join(KILL_PHASES)}))?$"),
    "pause": re.compile(rf"^{_WORKER}:(\d+(?:\.\d+)?)s@(?:step)?(\d+)$"),
    "rejoin": re.compile(rf"^{_WORKER}@(?:step)?(\d+)$"),
    "corrupt": re.compile(rf"^{_WORKER}@(?:step)?(\d+)$"),
    "straggle": re.compile(rf"^{_WORKER}:(\d+(?:\.\d+)?)x@(\d+)-(\d+)$"),
}
_ALLOWED = (
    "kill wN@stepS[/allgather|/checkpoint], rejoin wN@stepS, pause wN:Ds@stepS, straggle wN:Fx@A-B, "
    "corrupt wN@stepS"
)


@dataclass(frozen=True)
class Fault:
    kind: str
    worker: str
    step: int
    until: int = 0
    factor: float = 1.0
    phase: str = "step"
    """kill only: one of KILL_PHASES."""
    duration_s: float = 0.0
    """pause only: seconds between SIGSTOP and SIGCONT."""

    def __str__(self) -> str:
        if self.kind == "straggle":
            return f"straggle {self.worker}:{self.factor:g}x@{self.step}-{self.until}"
        if self.kind == "pause":
            return f"pause {self.worker}:{self.duration_s:g}s@step{self.step}"
        if self.kind == "kill" and self.phase != "step":
            return f"kill {self.worker}@step{self.step}/{self.phase}"
        return f"{self.kind} {self.worker}@step{self.step}"


@dataclass(frozen=True)
class FaultPlan:
    """An ordered, immutable list of faults with small builder methods (``FaultPlan().kill("w2", 300)``)."""

    faults: tuple[Fault, ...] = field(default_factory=tuple)

    def _with(self, fault: Fault) -> FaultPlan:
        return FaultPlan((*self.faults, fault))

    def kill(self, worker: str, step: int, phase: str = "step") -> FaultPlan:
        if phase not in KILL_PHASES:
            raise InputError("fault", f"kill phase is one of {', '.join(KILL_PHASES)}; got {phase!r}")
        return self._with(Fault("kill", worker, step, phase=phase))

    def pause(self, worker: str, duration_s: float, step: int) -> FaultPlan:
        if not 0 < duration_s <= 3600:
            raise InputError("fault", f"pause needs 0 < D <= 3600 seconds; got {duration_s:g}")
        return self._with(Fault("pause", worker, step, duration_s=duration_s))

    def rejoin(self, worker: str, step: int) -> FaultPlan:
        return self._with(Fault("rejoin", worker, step))

    def corrupt(self, worker: str, step: int) -> FaultPlan:
        return self._with(Fault("corrupt", worker, step))

    def straggle(self, worker: str, factor: float, start: int, stop: int) -> FaultPlan:
        return self._with(Fault("straggle", worker, start, stop, factor))

    @classmethod
    def parse(cls, specs: tuple[str, ...] | list[str]) -> FaultPlan:
        """Parse specs like ``'kill w2@step300'`` (kind first) into a plan; InputError('fault', ...) if bad."""
        plan = cls()
        for raw in specs:
            text = raw.split("#", 1)[0].strip()
            if not text:
                continue
            kind, _, rest = text.partition(" ")
            rest = rest.replace(" ", "")
            pattern = _PATTERNS.get(kind)
            m = pattern.match(rest) if pattern else None
            if m is None:
                raise InputError("fault", f"expected {_ALLOWED}; got {text!r}")
            if kind == "straggle":
                factor, a, b = float(m.group(2)), int(m.group(3)), int(m.group(4))
                if factor < 1 or b <= a:
                    raise InputError("fault", f"straggle needs factor >= 1 and A < B; got {text!r}")
                plan = plan.straggle(m.group(1), factor, a, b)
            elif kind == "kill":
                plan = plan.kill(m.group(1), int(m.group(2)), m.group(3) or "step")
            elif kind == "pause":
                plan = plan.pause(m.group(1), float(m.group(2)), int(m.group(3)))
            else:
                plan = plan._with(Fault(kind, m.group(1), int(m.group(2))))
        return plan

    @classmethod
    def from_file(cls, path: str | Path) -> list[str]:
        """Read fault specs from a file (one per line) and return them as strings (validated)."""
        lines = [ln.split("#", 1)[0].strip() for ln in read_input_text(path, "faults").splitlines()]
        specs = [ln for ln in lines if ln]
        cls.parse(specs)
        return specs

    def of(self, kind: str, worker: str | None = None) -> list[Fault]:
        return [f for f in self.faults if f.kind == kind and (worker is None or f.worker == worker)]

    def straggle_factor(self, worker: str, step: int) -> float:
        """Compute-time multiplier for ``worker`` at inner ``step`` (1.0 when not straggling)."""
        factor = 1.0
        for f in self.of("straggle", worker):
            if f.step <= step < f.until:
                factor = max(factor, f.factor)
        return factor

    def corrupts(self, worker: str, first_step: int, last_step: int) -> bool:
        """Whether ``worker``'s sync covering inner steps [first_step, last_step] is corrupted."""
        return any(first_step <= f.step <= last_step for f in self.of("corrupt", worker))

    def kill_steps(self, worker: str, after: int = -1, phase: str = "step") -> list[int]:
        """Inner steps at which ``worker`` is killed in ``phase`` (default: before the inner step)."""
        return sorted(f.step for f in self.of("kill", worker) if f.step > after and f.phase == phase)

    def pauses(self, worker: str) -> dict[int, float]:
        """Inner step -> seconds for which ``worker`` is SIGSTOPped there."""
        return {f.step: f.duration_s for f in self.of("pause", worker)}
