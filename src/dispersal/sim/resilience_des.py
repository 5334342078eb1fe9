"""Discrete-event simulation of a training run under Poisson failures, one algorithm at a time.

It checks `dispersal.model.analyses.resilience` by brute force: same assumptions, no algebra. Node failures
anywhere in the fleet are the superposition of per-node exponential clocks, so their times are drawn
at once as a Poisson process of rate ``nodes * lambda_node`` over the horizon (sorted uniform times),
and each failure strikes a unit chosen uniformly: an island for ``diloco``/``decoupled``, a node for
``ddp_elastic`` (a failure drawn on a node already down is discarded: exact thinning to the rate of
the nodes up; the job runs on at most n* = 1 / (lambda_node S) of them, as the closed form's
`elastic_active_nodes`, and a failure of an idle spare stalls nobody). That keeps 1.2 million chips to tens of thousands of events per simulated month.

Every replication draws one failure history and runs all four algorithms on it (common random
numbers: differences between algorithms are sharper than their separate errors suggest).
Replications use independent streams spawned from one ``numpy.random.SeedSequence(seed)``, so a
fixed seed reproduces results exactly.

Conventions: checkpoint writes pause compute for C every tau (wall time for the island algorithms,
time since the last restart for ddp, non-stalled time for ddp_elastic); work not yet committed when
the horizon ends counts as done (an edge effect of order one period over the horizon). Random site
failures are not simulated (the closed form's site factor is approximate; scripted site losses are
`dispersal.model.analyses.resilience.site_loss`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dispersal.model.analyses.resilience import ALGORITHMS, ResilienceSpec, checkpoint_period_h
from dispersal.model.inputs.errors import InputError


@dataclass(frozen=True, kw_only=True, slots=True)
class MeanEstimate:
    """A Monte Carlo mean with its standard error (sample std / sqrt(replications)).

    (Named apart from `dispersal.model.Estimate`, the analytic model's result.)"""

    mean: float
    stderr: float

    def to_dict(self) -> dict[str, float]:
        """``{"mean": ..., "stderr": ...}``."""
        return {"mean": self.mean, "stderr": self.stderr}


@dataclass(frozen=True, kw_only=True, slots=True)
class SimulationResult:
    """Simulated goodput per algorithm, with the settings that produced it."""

    goodput: dict[str, MeanEstimate]
    horizon_h: float
    replications: int
    seed: int
    failures_per_replication: float
    """Mean number of node failures drawn per replication."""

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view for JSON."""
        return {
            "goodput": {name: est.to_dict() for name, est in self.goodput.items()},
            "horizon_h": self.horizon_h,
            "replications": self.replications,
            "seed": self.seed,
            "failures_per_replication": self.failures_per_replication,
        }


def _compute_clock(period: float, write: float) -> Callable[[float], float]:
    """F(t): compute time in [0, t] when each period is ``period - write`` of compute, then a write."""
    work = period - write

    def f(t: float) -> float:
        k = math.floor(t / period)
        return k * work + min(t - k * period, work)

    return f


def _ddp(spec: ResilienceSpec, times: np.ndarray, horizon: float) -> float:
    """Synchronous: any failure loses the uncommitted period and restarts the job (restartable)."""
    tau = checkpoint_period_h(spec, "ddp")
    work = tau - spec.checkpoint_write_time_h
    r = spec.restart_time_h
    f = _compute_clock(tau, spec.checkpoint_write_time_h)
    useful = 0.0
    start = 0.0  # when compute (re)started; periods are counted from here
    i, n = 0, len(times)
    while True:
        nxt = float(times[i]) if i < n else math.inf
        if nxt >= horizon:
            return (useful + f(horizon - start)) / horizon
        useful += math.floor((nxt - start) / tau) * work  # committed periods before the failure
        ready = nxt + r
        i += 1
        while i < n and times[i] < ready:  # a failure during the restart restarts it
            ready = float(times[i]) + r
            i += 1
        if ready >= horizon:
            return useful / horizon
        start = ready


def _elastic(spec: ResilienceSpec, times: np.ndarray, accept: np.ndarray, horizon: float) -> float:
    """Elastic: a failure of a node in the job stalls all for S; the node is out until repaired."""
    nodes = max(1, round(spec.nodes))
    f = _compute_clock(checkpoint_period_h(spec, "ddp_elastic"), spec.checkpoint_write_time_h)
    s, repair = spec.resize_time_h, spec.node_repair_time_h
    # The job runs on at most `cap` nodes, the other nodes up idle as hot spares (the closed form's
    # n* = 1 / (lambda_node S), `elastic_active_nodes`); a failure of a spare stalls nobody.
    lam_node = spec.node_failure_rate_total_per_h
    cap = max(1, round(1 / (lam_node * s))) if lam_node > 0 else nodes
    useful, progress, t_prev, stall_end, up = 0.0, 0.0, 0.0, 0.0, nodes
    repairs: list[float] = []

    def advance(t: float) -> None:
        nonlocal useful, progress, t_prev
        d = t - max(t_prev, stall_end)
        if d > 0:
            useful += min(up, cap) / nodes * (f(progress + d) - f(progress))
            progress += d
        t_prev = t

    for t_raw, u in zip(times, accept, strict=True):
        t = float(t_raw)
        if t >= horizon:
            break
        while repairs and repairs[0] <= t:
            advance(heapq.heappop(repairs))
            up += 1
        advance(t)
        if u * nodes < up:  # the struck node is up (thinning to the rate of nodes up)
            if u * nodes < min(up, cap):  # it was in the job (not an idle spare): everyone stalls
                stall_end = t + s
            up -= 1
            heapq.heappush(repairs, t + repair)
    while repairs and repairs[0] <= horizon:
        advance(heapq.heappop(repairs))
        up += 1
    advance(horizon)
    return useful / horizon


def _islands(spec: ResilienceSpec, times: np.ndarray, which: np.ndarray, horizon: float, wait: bool) -> float:
    """diloco (wait=True: rejoin at the next round boundary) or decoupled (rejoin at once).

    ``ready[i]`` is when island i's restart finishes; it joins at ``join(ready)`` and is computing
    from then on until its next failure. A failure while restarting or waiting restarts the restart.
    """
    p = spec.round_time_h
    r = spec.restart_time_h
    f = _compute_clock(
        checkpoint_period_h(spec, "diloco" if wait else "decoupled"), spec.checkpoint_write_time_h
    )
    n_islands = spec.islands
    join = np.zeros(n_islands)  # when each island (re)joined or will rejoin
    useful = 0.0
    for t_raw, i_raw in zip(times, which, strict=True):
        t = float(t_raw)
        if t >= horizon:
            break
        i = int(i_raw)
        j = float(join[i])
        if j <= t:  # it was computing: keep the work up to its last sync
            last = j + math.floor((t - j) / p) * p
            useful += f(last) - f(j)
        ready = t + r
        join[i] = math.ceil(ready / p) * p if wait else ready
    for j in join:
        if j < horizon:
            useful += f(horizon) - f(float(j))
    return useful / (n_islands * horizon)


def simulate(
    spec: ResilienceSpec,
    *,
    horizon_h: float = 720.0,
    replications: int = 8,
    seed: int = 0,
    algorithms: tuple[str, ...] = ALGORITHMS,
    progress: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Simulate ``replications`` runs of ``horizon_h`` hours; goodput per algorithm with its std error.

    Args:
        spec: the fleet (only node failures are simulated; ``site_failure_rate_per_h`` must be 0).
        horizon_h: wall-clock length of each simulated run, h.
        replications: independent runs (>= 2 for a standard error).
        seed: seed of the ``numpy.random.SeedSequence``; equal seeds give identical results.
        algorithms: which of ``ALGORITHMS`` to simulate.
        progress: called with 1 after each replication (for a progress bar).

    Returns:
        SimulationResult with the mean and standard error of goodput for each algorithm.
    """
    if not (isinstance(horizon_h, (int, float)) and 0 < horizon_h < math.inf):
        raise InputError("horizon_h", f"must be a finite number > 0 h, got {horizon_h}")
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 2:
        raise InputError("replications", f"must be an integer >= 2, got {replications!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError("seed", f"must be an integer >= 0, got {seed!r}")
    for name in algorithms:
        if name not in ALGORITHMS:
            raise InputError("algorithms", f"must be among {', '.join(ALGORITHMS)}, got {name!r}")
    if spec.site_failure_rate_per_h != 0:
        raise InputError(
            "site_failure_rate_per_h",
            f"the simulation models node failures only; must be 0, got {spec.site_failure_rate_per_h}",
        )
    rate = spec.system_failure_rate_per_h  # candidate failures, all nodes (thinned for elastic)
    expected = rate * horizon_h
    if expected > 5e7:
        raise InputError("horizon_h", f"~{expected:.3g} failures per run is too many to simulate; shorten it")
    samples: dict[str, list[float]] = {name: [] for name in algorithms}
    counts: list[int] = []
    for child in np.random.SeedSequence(seed).spawn(replications):
        rng = np.random.default_rng(child)
        n = int(rng.poisson(expected))
        times = np.sort(rng.uniform(0.0, horizon_h, size=n))
        which = rng.integers(0, spec.islands, size=n)
        accept = rng.uniform(0.0, 1.0, size=n)
        counts.append(n)
        for name in algorithms:
            if name == "ddp":
                g = _ddp(spec, times, horizon_h)
            elif name == "ddp_elastic":
                g = _elastic(spec, times, accept, horizon_h)
            else:
                g = _islands(spec, times, which, horizon_h, wait=name == "diloco")
            samples[name].append(g)
        if progress is not None:
            progress(1)
    result = {
        name: MeanEstimate(
            mean=float(np.mean(vals)), stderr=float(np.std(vals, ddof=1) / math.sqrt(len(vals)))
        )
        for name, vals in samples.items()
    }
    return SimulationResult(
        goodput=result,
        horizon_h=float(horizon_h),
        replications=replications,
        seed=seed,
        failures_per_replication=float(np.mean(counts)),
    )
