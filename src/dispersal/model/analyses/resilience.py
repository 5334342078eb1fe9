"""Resilience: how much useful compute each training algorithm keeps as chips fail and sites go dark.

Goodput = useful compute / provisioned compute, in (0, 1]. Four algorithms:

- ``ddp``: synchronous data parallel. A failure anywhere stops every worker; the job restarts from
  its last checkpoint (restart time R, during which a further failure restarts the restart).
  Expected goodput for exponential failures (Daly 2006, eq. for T_w, exact for this model):
  ``(tau - C) / (M e^(R/M) (e^(tau/M) - 1))``, checkpoint period tau (compute tau - C, then a
  blocking write of C), system MTBF M. The first-order form
  ``(1 - C/tau) / (1 + (R + tau/2)/M)`` (Young 1974) is `ddp_goodput_first_order`.
- ``ddp_elastic``: synchronous, but the job shrinks around a failed node (torchft-style): every
  worker stalls for the resize time S (a failure during a resize restarts it), the failed node is
  out until repaired. The job trains on n = min(nodes up, 1 / (lambda_node S)) nodes (past that a
  node costs more in stalls than it adds; the rest are idle spares). Goodput = (1 - C/tau) (n / N)
  e^(-n lambda_node S).
- ``diloco``: islands run H inner steps per round (round time P) and average at fixed round
  boundaries. A failed island loses its partial round, restarts (time R), then waits for the next
  boundary and rejoins with the current weights; the outer step averages those present.
- ``decoupled`` (Decoupled DiLoCo, Google DeepMind, arXiv 2604.21428): islands are asynchronous;
  a failed island loses its work since its own last sync, restarts and rejoins at once. The run is
  described once (`dispersal.model.inputs.decoupled.DecoupledRun`: learner islands, chips each,
  quorum, sync interval): `decoupled_run` reads it off the planner's / `estimate`'s result and
  `spec_for_run` makes this module's fleet of it, so both see the same islands and sync interval.

Assumptions: failures are Poisson (exponential inter-arrival) per chip and per node, independent;
spare nodes exist, so a restarted job or island comes back at full size; restart time does not
grow with scale (optimistic for ``ddp``); communication time and stragglers are ignored (this
module isolates failure handling; see the efficiency model for communication). Random whole-site
failures enter as an availability factor (approximate); scripted site losses are `site_loss`.

All times are in hours (names end in ``_h``) because failure data are published in hours.

Sources: Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974;
Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3),
2006; Dubey et al., "The Llama 3 Herd of Models", arXiv 2407.21783, 2024, section 3.3.4.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dispersal.model.inputs.decoupled import DecoupledRun
from dispersal.model.inputs.errors import InputError
from dispersal.model.run.estimate import Estimate

ALGORITHMS: tuple[str, ...] = ("ddp", "ddp_elastic", "diloco", "decoupled")

LLAMA3_GPUS = 16_384
LLAMA3_DAYS = 54
LLAMA3_INTERRUPTIONS = 419
LLAMA3_CHIP_MTBI_H = LLAMA3_GPUS * LLAMA3_DAYS * 24 / LLAMA3_INTERRUPTIONS
"""Per-GPU mean time between interruptions, about 50,678 h: 419 unexpected interruptions in 54
days on 16,384 H100 GPUs (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.4). It
counts every cause (GPU, HBM, host, network, software), so it is charged per chip."""


NEGLIGIBLE_RATE_PER_H = 1e-290
"""A node failure rate below this (one failure per ~1e286 years) is treated as no failures: its
products with the time inputs (>= 1e-6 h) would leave the normal float range, where rounding
makes a rarer failure read as a higher or a lower goodput at random. Numerical, not physical."""


def _positive(name: str, value: float, unit: str = "h") -> None:
    if not (isinstance(value, (int, float)) and value > 0 and not math.isnan(value)):
        raise InputError(name, f"must be > 0 {unit}, got {value}")


def _finite_positive(name: str, value: float, unit: str = "h") -> None:
    _positive(name, value, unit)
    if math.isinf(value):
        raise InputError(name, f"must be a finite number > 0 {unit}, got {value}")


def _non_negative(name: str, value: float, unit: str) -> None:
    if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
        raise InputError(name, f"must be a finite number >= 0 {unit}, got {value}")


def _count(name: str, value: int, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(name, f"must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class ResilienceSpec:
    """A training fleet and how it fails and recovers. Every default is labelled with its source."""

    chips: int = 1_200_000
    """Accelerators provisioned. Default: the 1.2M chips of Decoupled DiLoCo's simulation."""
    chip_mtbf_h: float = LLAMA3_CHIP_MTBI_H
    """Mean time between interruptions per chip, h (inf = no chip failures). Source: Llama 3 405B,
    419 interruptions in 54 days on 16,384 GPUs -> ~50,678 h (Dubey et al. 2024, section 3.3.4)."""
    chips_per_node: int = 8
    """Chips per host; a node fails as a unit. Source: an HGX H100 host holds 8 GPUs."""
    node_failure_rate_per_h: float = 0.0
    """Extra failures per node per hour beyond the per-chip figure. Default 0: the Llama 3 figure
    already counts host and network interruptions (assumption)."""
    chips_per_island: int = 16_384
    """Chips per DiLoCo worker / Decoupled DiLoCo learner island (synchronous inside). Assumption:
    one island the size of the Llama 3 cluster; islands = round(chips / chips_per_island) >= 1."""
    sites: int = 8
    """Separate sites the islands are spread over (equal shares). Assumption."""
    restart_time_h: float = 10 / 60
    """Time to restart a job or an island from saved state on a spare node (reschedule, initialise
    communicators, load state). Assumption: 10 min, the same at every scale (optimistic for ddp)."""
    resize_time_h: float = 1 / 60
    """ddp_elastic: time every worker stalls while the group re-forms around a failed node.
    Assumption: 1 min (torchft-style quorum change and live recovery)."""
    node_repair_time_h: float = 4.0
    """ddp_elastic: time until a failed node (or its replacement) rejoins. Assumption: 4 h."""
    checkpoint_write_time_h: float = 1 / 60
    """Blocking part of writing a checkpoint. Assumption: 1 min (Llama 3 reports 2-7 TB/s
    checkpoint storage; a 405B model with Adam state is ~6.5 TB)."""
    checkpoint_interval_h: float | None = None
    """Checkpoint period (compute plus write), used by every algorithm when set. None: ddp uses the
    Daly (2006) optimum capped at ``max_checkpoint_interval_h``; the others, which never roll back
    for a single failure, checkpoint every ``max_checkpoint_interval_h``."""
    max_checkpoint_interval_h: float = 1.0
    """Longest checkpoint period, kept as insurance against losing the whole run. Assumption: 1 h."""
    round_time_h: float = 0.5
    """diloco round / decoupled sync interval (H inner steps). Assumption: 30 min (H = 100 at
    18 s a step)."""
    site_failure_rate_per_h: float = 0.0
    """Random whole-site outages per site per hour (power, fibre cut). Default 0 (assumption);
    scripted losses are `site_loss`."""
    site_repair_time_h: float = 24.0
    """How long a randomly failed site stays dark. Assumption: 24 h."""

    def __post_init__(self) -> None:
        _count("chips", self.chips)
        _positive("chip_mtbf_h", self.chip_mtbf_h)
        _count("chips_per_node", self.chips_per_node)
        _non_negative("node_failure_rate_per_h", self.node_failure_rate_per_h, "per h")
        _count("chips_per_island", self.chips_per_island)
        _count("sites", self.sites)
        _finite_positive("restart_time_h", self.restart_time_h)
        _finite_positive("resize_time_h", self.resize_time_h)
        _finite_positive("node_repair_time_h", self.node_repair_time_h)
        _finite_positive("checkpoint_write_time_h", self.checkpoint_write_time_h)
        _finite_positive("max_checkpoint_interval_h", self.max_checkpoint_interval_h)
        _finite_positive("round_time_h", self.round_time_h)
        _non_negative("site_failure_rate_per_h", self.site_failure_rate_per_h, "per h")
        _finite_positive("site_repair_time_h", self.site_repair_time_h)
        if self.checkpoint_interval_h is not None:
            _finite_positive("checkpoint_interval_h", self.checkpoint_interval_h)
            if self.checkpoint_interval_h <= self.checkpoint_write_time_h:
                raise InputError(
                    "checkpoint_interval_h",
                    f"must be > checkpoint_write_time_h ({self.checkpoint_write_time_h} h), "
                    f"got {self.checkpoint_interval_h}",
                )
        if self.max_checkpoint_interval_h <= self.checkpoint_write_time_h:
            raise InputError(
                "max_checkpoint_interval_h",
                f"must be > checkpoint_write_time_h ({self.checkpoint_write_time_h} h), "
                f"got {self.max_checkpoint_interval_h}",
            )

    @property
    def nodes(self) -> float:
        """Nodes (fractional when chips is not a multiple of chips_per_node)."""
        return self.chips / self.chips_per_node

    @property
    def node_failure_rate_total_per_h(self) -> float:
        """Failures per node per hour: chips_per_node / chip MTBF + extra node failures; 0 below
        `NEGLIGIBLE_RATE_PER_H` (such rates are below the formulas' float resolution)."""
        rate = self.chips_per_node / self.chip_mtbf_h + self.node_failure_rate_per_h
        return rate if rate >= NEGLIGIBLE_RATE_PER_H else 0.0

    @property
    def system_failure_rate_per_h(self) -> float:
        """Failures per hour anywhere in the fleet (node failures, superposed)."""
        return self.nodes * self.node_failure_rate_total_per_h

    @property
    def islands(self) -> int:
        """Number of islands: round(chips / chips_per_island), at least 1."""
        return max(1, round(self.chips / self.chips_per_island))

    @property
    def island_failure_rate_per_h(self) -> float:
        """Failures per island per hour."""
        return self.system_failure_rate_per_h / self.islands

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view of every field (for JSON)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def daly_optimal_period_h(write_time_h: float, mtbf_h: float) -> float:
    """Daly's (2006) optimum checkpoint period (compute + write) for exponential failures.

    Compute between checkpoints: sqrt(2 C M) [1 + sqrt(C / 2M) / 3 + C / 18M] - C for C < 2M,
    else M; the period adds the write time C. Reduces to Young's sqrt(2 C M) when C << M.
    """
    return _daly_compute_h(write_time_h, mtbf_h) + write_time_h


def _daly_compute_h(c: float, m: float) -> float:
    """The compute part of Daly's optimum period (see `daly_optimal_period_h`); inf when m is."""
    if math.isinf(m):
        return math.inf
    return math.sqrt(2 * c * m) * (1 + math.sqrt(c / (2 * m)) / 3 + c / (18 * m)) - c if c < 2 * m else m


def _ddp_compute_h(spec: ResilienceSpec, tau: float) -> float:
    """tau - C for ddp, taken from Daly's compute term where it sets tau: when failures are far more
    frequent than writes the compute part (~ M) is below tau's rounding, and tau - C would be 0."""
    c = spec.checkpoint_write_time_h
    lam = spec.system_failure_rate_per_h
    if spec.checkpoint_interval_h is not None or lam == 0:
        return tau - c
    daly = _daly_compute_h(c, 1 / lam)
    return daly if daly + c < spec.max_checkpoint_interval_h else tau - c


def checkpoint_period_h(spec: ResilienceSpec, algorithm: str) -> float:
    """The checkpoint period each algorithm uses (see ``ResilienceSpec.checkpoint_interval_h``)."""
    _check_algorithm(algorithm)
    if spec.checkpoint_interval_h is not None:
        return spec.checkpoint_interval_h
    if algorithm == "ddp":
        mtbf = 1 / spec.system_failure_rate_per_h if spec.system_failure_rate_per_h > 0 else math.inf
        return min(daly_optimal_period_h(spec.checkpoint_write_time_h, mtbf), spec.max_checkpoint_interval_h)
    return spec.max_checkpoint_interval_h


def _log_expm1(x: float) -> float:
    """log(e^x - 1) for x > 0 without overflow."""
    return x + math.log1p(-math.exp(-x)) if x > 30 else math.log(math.expm1(x))


def _positive_float(log_value: float) -> float:
    """exp(log_value), floored at the smallest normal float so a vanishing goodput stays > 0."""
    return max(math.exp(min(log_value, 0.0)), sys.float_info.min)


def _check_algorithm(algorithm: str) -> None:
    if algorithm not in ALGORITHMS:
        raise InputError("algorithm", f"must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")


def checkpoint_factor(spec: ResilienceSpec, algorithm: str) -> float:
    """1 - C / tau: the goodput with no failures at all."""
    return 1 - spec.checkpoint_write_time_h / checkpoint_period_h(spec, algorithm)


def _site_availability(spec: ResilienceSpec, algorithm: str) -> float:
    """Approximate factor for random whole-site outages (1 when the site failure rate is 0).

    ddp stalls whenever any site is dark: 1 / (1 + S rho T). The others lose that site's share of
    capacity while it is dark: 1 / (1 + rho T).
    """
    rho_t = spec.site_failure_rate_per_h * spec.site_repair_time_h
    if algorithm == "ddp":
        return 1 / (1 + spec.sites * rho_t)
    return 1 / (1 + rho_t)


def ddp_goodput(spec: ResilienceSpec) -> float:
    """Synchronous data parallel with restart from checkpoint (Daly 2006, exact for Poisson failures).

    goodput = (tau - C) / (M e^(R/M) (e^(tau/M) - 1)), M = 1 / (fleet failure rate); failures also
    strike during restarts and checkpoint writes. With no failures it is 1 - C/tau.
    """
    tau = checkpoint_period_h(spec, "ddp")
    c = spec.checkpoint_write_time_h
    lam = spec.system_failure_rate_per_h
    avail = _site_availability(spec, "ddp")
    if lam == 0:
        return (1 - c / tau) * avail
    # Written with expm1 and in log space so huge fleets underflow to a tiny positive value, not 0/0.
    log_denominator = lam * spec.restart_time_h + _log_expm1(lam * tau) - math.log(lam)
    return _positive_float(math.log(_ddp_compute_h(spec, tau)) - log_denominator + math.log(avail))


def ddp_goodput_first_order(spec: ResilienceSpec) -> float:
    """Young's first-order form: (1 - C/tau) / (1 + (R + tau/2) / M). Accurate only when R, tau << M."""
    tau = checkpoint_period_h(spec, "ddp")
    lam = spec.system_failure_rate_per_h
    return (1 - spec.checkpoint_write_time_h / tau) / (1 + lam * (spec.restart_time_h + tau / 2))


def elastic_active_nodes(spec: ResilienceSpec) -> float:
    """Nodes an elastic job trains on: min(nodes up, 1 / (lambda_node S)), the rest idle as hot spares.

    Nodes up on average: N a, a = 1 / (1 + lambda_node T_repair) (alternating renewal). Every failure
    of a node in the job stalls the whole job for S, so n nodes in use do useful work at a rate
    proportional to n e^(-n lambda_node S), which peaks at n* = 1 / (lambda_node S): past n* a node
    costs more in stalls than it adds. An operator never runs more than n* (a failure of an idle
    spare stalls nobody); without that cap fewer nodes up would mean fewer stalls, and a slower
    repair would raise goodput. Fractional n (continuous in its inputs); inf with no failures.
    """
    lam_node = spec.node_failure_rate_total_per_h
    up_nodes = spec.nodes / (1 + lam_node * spec.node_repair_time_h)
    if lam_node == 0:
        return up_nodes
    return min(up_nodes, 1 / (lam_node * spec.resize_time_h))


def elastic_goodput(spec: ResilienceSpec) -> float:
    """Elastic synchronous training: (1 - C/tau) * (n / N) * e^(-n lambda_node S).

    n = `elastic_active_nodes` (the nodes up, a = 1 / (1 + lambda_node T_repair) of N, capped at
    n* = 1 / (lambda_node S)); the n nodes in use fail at n lambda_node, every such failure stalls
    everyone for S and a failure during a stall restarts it, so the time not stalled is
    e^(-n lambda_node S). Non-increasing in the repair time, resize time and failure rates (tested).
    """
    lam_node = spec.node_failure_rate_total_per_h
    active = elastic_active_nodes(spec)
    stall_free = math.exp(-active * lam_node * spec.resize_time_h)
    share = active / spec.nodes
    value = (
        checkpoint_factor(spec, "ddp_elastic") * stall_free * share * _site_availability(spec, "ddp_elastic")
    )
    return max(value, sys.float_info.min)


def diloco_goodput(spec: ResilienceSpec) -> float:
    """Synchronous DiLoCo with drop-out: renewal-reward over one island's cycle.

    Cycle: join at a round boundary, fail after X ~ Exp(lambda) (island rate), keep the completed
    rounds P floor(X/P), restart (R), rejoin at the first boundary b >= X + R with no failure in
    (b - R, b] (probability p = e^(-lambda R) per boundary). goodput = (1 - C/tau) E[work]/E[cycle],
    E[cycle] = 1/lambda + R + E[g] + P (1 - p)/p, g the wait from X + R to the next boundary
    (exact when R <= P; for R > P the per-boundary chances are treated as independent).
    """
    lam = spec.island_failure_rate_per_h
    factor = checkpoint_factor(spec, "diloco") * _site_availability(spec, "diloco")
    if lam == 0:
        return factor
    p_round, r = spec.round_time_h, spec.restart_time_h
    log_work = math.log(p_round) - _log_expm1(lam * p_round)  # E[P floor(X/P)] = P / (e^(lam P) - 1)
    x = lam * p_round
    q = math.exp(-x)
    # E[X mod P] = 1/lam - P q / (1 - q) = P (1/x - 1/(e^x - 1)); the series for small x keeps the
    # two near-equal terms from cancelling (a rarer failure must never read as a higher goodput).
    # 1/(e^x - 1) written as e^(-x) / (1 - e^(-x)) so a large x underflows to 0 instead of overflowing.
    inv_gap = 0.5 - x / 12.0 + x**3 / 720.0 if x < 1e-3 else 1.0 / x - q / -math.expm1(-x)
    mean_u = p_round * inv_gap
    r_mod = r % p_round
    # g = (-(U + R)) mod P with U = X mod P; it wraps past a second boundary when U >= P - (R mod P):
    # P(wrap) = (e^(-lam (P - R mod P)) - q) / (1 - q), written with exponents <= 0 (no overflow).
    p_wrap = math.exp(-lam * (p_round - r_mod)) * -math.expm1(-lam * r_mod) / -math.expm1(-x)
    mean_gap = p_round - r_mod - mean_u + p_round * p_wrap
    # E[cycle] = 1/lam + R + E[g] + P (e^(lam R) - 1), summed in log space.
    a = math.log(1 / lam + r + mean_gap)
    b = math.log(p_round) + _log_expm1(lam * r)
    log_cycle = max(a, b) + math.log1p(math.exp(-abs(a - b)))
    return _positive_float(math.log(factor) + log_work - log_cycle)


def decoupled_goodput(spec: ResilienceSpec) -> float:
    """Decoupled DiLoCo: asynchronous islands; a failure costs only that island's unsynced work.

    Renewal-reward: goodput = (1 - C/tau) * e^(-lambda R) * lambda P / (e^(lambda P) - 1), the
    fraction of an island's time in synced work (sync every P of its own time, restart R with
    failures during a restart restarting it, rejoin at once with the current weights).
    """
    lam = spec.island_failure_rate_per_h
    factor = checkpoint_factor(spec, "decoupled") * _site_availability(spec, "decoupled")
    if lam == 0:
        return factor
    x = lam * spec.round_time_h
    return _positive_float(math.log(factor) - lam * spec.restart_time_h + math.log(x) - _log_expm1(x))


def decoupled_run(est: Estimate) -> DecoupledRun:
    """The Decoupled DiLoCo run an `Estimate` describes: its learners (replicas), chips per learner
    (the scenario's node), the scenario's quorum and merge rule, and the kernel's sync interval (the
    outer-step time, H_eff x step time). InputError when the estimate is not a decoupled run."""
    if est.algorithm != "decoupled":
        raise InputError("algorithm", f"must be decoupled for a Decoupled DiLoCo run, got {est.algorithm!r}")
    return DecoupledRun(
        learners=int(est.replicas),
        chips_per_learner=int(est.chips_per_node),
        quorum_fraction=est.scenario.quorum_fraction,
        sync_interval_s=est.outer_step_time_s,
        merge_rule=est.scenario.merge_rule,
    )


def spec_for_run(run: DecoupledRun, base: ResilienceSpec | None = None) -> ResilienceSpec:
    """`base`'s failure and recovery figures (default `ResilienceSpec()`) on `run`'s fleet: chips =
    learners x chips per learner, one island per learner, the round time = the run's sync interval.
    Sites stay `base`'s unless there are fewer learners than sites (then one site per learner)."""
    b = ResilienceSpec() if base is None else base
    return replace(
        b,
        chips=run.chips,
        chips_per_island=run.chips_per_learner,
        round_time_h=run.sync_interval_s / 3600.0,
        sites=min(b.sites, run.learners),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Goodput:
    """Goodput (useful / provisioned compute) per algorithm, in (0, 1]."""

    ddp: float
    ddp_elastic: float
    diloco: float
    decoupled: float

    def to_dict(self) -> dict[str, float]:
        """``{"ddp": ..., "ddp_elastic": ..., "diloco": ..., "decoupled": ...}``."""
        return {name: float(getattr(self, name)) for name in ALGORITHMS}


def goodput(spec: ResilienceSpec) -> Goodput:
    """Closed-form goodput of every algorithm for one fleet."""
    return Goodput(
        ddp=ddp_goodput(spec),
        ddp_elastic=elastic_goodput(spec),
        diloco=diloco_goodput(spec),
        decoupled=decoupled_goodput(spec),
    )


def goodput_vs_scale(spec: ResilienceSpec, chips: Sequence[int]) -> dict[str, np.ndarray]:
    """Goodput per algorithm at each chip count (other fields as in ``spec``); arrays keyed by algorithm."""
    rows = [goodput(replace(spec, chips=int(n))).to_dict() for n in chips]
    return {name: np.array([row[name] for row in rows]) for name in ALGORITHMS}


# --- scripted site loss -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class SiteLossScenario:
    """k of S sites go dark at one moment, for ever or for a while, during a run of fixed work."""

    lose_sites: int = 1
    """Sites lost (k, 0 <= k <= sites)."""
    lose_at_h: float = 240.0
    """When they go dark, hours after the start."""
    down_for_h: float | None = None
    """How long they stay dark, h; None = for ever."""
    run_h: float = 720.0
    """Planned length: the target work is what the intact fleet does in this time. Default 30 days."""
    budget_h: float | None = None
    """Deadline, h; None = 1.2 x run_h (assumption: 20% schedule slack)."""
    reprovision_time_h: float = 24.0
    """ddp only: time to re-plan a synchronous job for the survivors' smaller world size (new
    parallel layout, re-sharded checkpoint) before it can restart without the lost sites.
    Assumption: 24 h. If the sites come back sooner, ddp waits for them instead."""

    def __post_init__(self) -> None:
        _count("lose_sites", self.lose_sites, minimum=0)
        _non_negative("lose_at_h", self.lose_at_h, "h")
        if self.down_for_h is not None:
            _positive("down_for_h", self.down_for_h)
        _finite_positive("run_h", self.run_h)
        if self.budget_h is not None:
            _finite_positive("budget_h", self.budget_h)
        _non_negative("reprovision_time_h", self.reprovision_time_h, "h")

    @property
    def deadline_h(self) -> float:
        """The budget, defaulting to 1.2 x run_h."""
        return self.budget_h if self.budget_h is not None else 1.2 * self.run_h

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view, with the resolved deadline."""
        d: dict[str, Any] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        d["deadline_h"] = self.deadline_h
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class SiteLossOutcome:
    """What a site loss does to one algorithm's run (expected values)."""

    time_to_target_h: float
    """Wall-clock time to finish the planned work (inf if it never finishes)."""
    delay_h: float
    """time_to_target_h - run_h."""
    lost_useful_fraction: float
    """Fraction of the planned useful compute not done by the planned end (run_h)."""
    finishes_within_budget: bool
    """Whether time_to_target_h <= the deadline."""

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, kw_only=True, slots=True)
class SiteLossResult:
    """Site-loss outcome for every algorithm, with the inputs that produced it."""

    scenario: SiteLossScenario
    outcomes: dict[str, SiteLossOutcome] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"scenario": {...}, "outcomes": {algorithm: {...}}}``."""
        return {
            "scenario": self.scenario.to_dict(),
            "outcomes": {name: o.to_dict() for name, o in self.outcomes.items()},
        }


@dataclass(slots=True)
class _Trajectory:
    """Useful work as piecewise-constant rates with lump losses; the solver for time to target."""

    rates: list[tuple[float, float]]  # (start_h, rate from then on), sorted
    lumps: list[tuple[float, float]]  # (time_h, work lost at that time)

    def work_at(self, t: float) -> float:
        total = 0.0
        for i, (start, rate) in enumerate(self.rates):
            end = self.rates[i + 1][0] if i + 1 < len(self.rates) else math.inf
            if t > start:
                total += rate * (min(t, end) - start)
        return total - sum(w for when, w in self.lumps if when <= t)

    def time_to(self, target: float) -> float:
        # Candidate crossing in each constant-rate piece, after all lumps due by then.
        for i, (start, rate) in enumerate(self.rates):
            end = self.rates[i + 1][0] if i + 1 < len(self.rates) else math.inf
            base = self.work_at(start)
            # Lumps strictly inside a piece: step through them.
            inside = sorted(when for when, _ in self.lumps if start < when < end)
            t0 = start
            for edge in [*inside, end]:
                if rate > 0 and base + rate * (edge - t0) >= target:
                    return t0 + (target - base) / rate
                if math.isinf(edge):
                    break
                base = self.work_at(edge)
                t0 = edge
        return math.inf


def _capped_rate(algorithm: str, spec: ResilienceSpec, chips: int, full_rate: float) -> float:
    """Useful chip-hours per hour on ``chips`` chips, never above the intact fleet's rate.

    The cap encodes that a run never goes faster for losing chips: if a smaller job were faster,
    the operator would have run the smaller job from the start.
    """
    if chips <= 0:
        return 0.0
    small = replace(spec, chips=chips)
    g = getattr(goodput(small), algorithm)
    return min(float(g) * chips, full_rate)


def site_loss(spec: ResilienceSpec, scenario: SiteLossScenario) -> SiteLossResult:
    """Expected effect of losing ``k`` of ``S`` sites on each algorithm (closed form, expected values).

    Work is in useful chip-hours; the intact fleet delivers ``goodput * chips`` per hour, and the
    target is that rate times ``run_h``. At the loss (time L, sites back after D or never):

    - ddp: the job dies, losing half a checkpoint period of work; it waits min(reprovision, D), then
      restarts (R) on the full fleet if the sites are back, else on the survivors (their own, capped,
      goodput); when the sites return it re-expands at the cost of one more restart R.
    - ddp_elastic: one resize stall S, then the survivors' (capped) rate; the sites rejoin for free.
    - diloco: the lost islands' partial rounds (P/2 each, expected) are discarded; survivors keep
      their per-chip rate; returning islands restart (R) and wait half a round on average.
    - decoupled: as diloco, but returning islands rejoin straight after their restart.
    """
    if scenario.lose_sites > spec.sites:
        raise InputError("lose_sites", f"must be <= sites ({spec.sites}), got {scenario.lose_sites}")
    k, s = scenario.lose_sites, spec.sites
    chips_left = round(spec.chips * (s - k) / s)
    lost_share = 1 - chips_left / spec.chips
    big_l = scenario.lose_at_h
    back = math.inf if scenario.down_for_h is None else big_l + scenario.down_for_h
    r = spec.restart_time_h
    g = goodput(spec)
    outcomes: dict[str, SiteLossOutcome] = {}
    for algorithm in ALGORITHMS:
        full = getattr(g, algorithm) * spec.chips
        target = full * scenario.run_h
        if k == 0:
            traj = _Trajectory(rates=[(0.0, full)], lumps=[])
        elif algorithm == "ddp":
            tau = checkpoint_period_h(spec, "ddp")
            lumps = [(big_l, min(spec.chips * (tau - spec.checkpoint_write_time_h) / 2, full * big_l))]
            reprov = big_l + scenario.reprovision_time_h
            if back <= reprov:
                rates = [(0.0, full), (big_l, 0.0), (back + r, full)]
            else:
                survivors = _capped_rate("ddp", spec, chips_left, full)
                rates = [(0.0, full), (big_l, 0.0), (reprov + r, survivors)]
                if math.isfinite(back):
                    t_back = max(back, reprov + r)
                    rates += [(t_back, 0.0), (t_back + r, full)]
            traj = _Trajectory(rates=rates, lumps=lumps)
        elif algorithm == "ddp_elastic":
            survivors = _capped_rate("ddp_elastic", spec, chips_left, full)
            rates = [(0.0, full), (big_l, 0.0), (big_l + spec.resize_time_h, survivors)]
            if math.isfinite(back):
                rates.append((max(back, big_l + spec.resize_time_h), full))
            traj = _Trajectory(rates=rates, lumps=[])
        else:
            p_round = spec.round_time_h
            lumps = [(big_l, min(spec.chips * lost_share * p_round / 2, full * big_l))]
            rates = [(0.0, full), (big_l, full * (1 - lost_share))]
            if math.isfinite(back):
                rejoin = back + r + (p_round / 2 if algorithm == "diloco" else 0.0)
                rates.append((rejoin, full))
            traj = _Trajectory(rates=rates, lumps=lumps)
        t_target = traj.time_to(target)
        done = max(0.0, min(traj.work_at(scenario.run_h), target))
        outcomes[algorithm] = SiteLossOutcome(
            time_to_target_h=t_target,
            delay_h=t_target - scenario.run_h,
            lost_useful_fraction=max(0.0, 1 - done / target),
            finishes_within_budget=t_target <= scenario.deadline_h,
        )
    return SiteLossResult(scenario=scenario, outcomes=outcomes)
