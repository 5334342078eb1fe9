"""What an algorithm unit gives the kernel: its `Branch` (one value per configuration of every figure
that differs between algorithms) and its registration record, `AlgorithmUnit`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from dispersal.model.kernel.context import Arr, BoolArr, Common

Val = Arr | float


@dataclasses.dataclass(slots=True)
class Branch:
    """One algorithm's figures for every configuration of the evaluation (only those that run it are
    kept). Times in seconds, traffic in bits, memory in bytes per node."""

    cycle: Arr
    """Outer-step wall time (one inner step for DDP)."""
    steps_per_cycle: Val
    """Inner steps per outer step."""
    workers: Arr
    """Workers that each process B tokens per inner step."""
    step_time: Arr
    """Wall time of one inner step."""
    sync_time: Arr
    """The WAN sync of one outer step (the global one for hierarchical)."""
    inner_steps: Val
    """H reported (the inner H of hierarchical)."""
    inner_steps_effective: Val
    """H that the quality penalty sees."""
    replicas: Arr
    """DiLoCo replicas M (1 for DDP)."""
    groups: Val
    stages: Val
    """Pipeline stages per replica (1 unless pipelined)."""
    straggler: Arr
    """Straggler factor of the sync."""
    fits: BoolArr
    enough_workers: BoolArr
    memory_per_node: Arr
    host_per_node: Arr
    payload_bits: Arr
    """Bits one worker sends per sync."""
    compute_per_step: Arr
    """Pure compute of one inner step (no bubble, no link)."""
    sync_up: Val
    """Upload bits of one sync (grounded topologies)."""
    sync_down: Val
    sync_paper: Val
    """Bits each way of one sync as the paper's relay charges them."""
    traffic_paper: Val
    """Paper: mean upload bits per node and outer step."""
    up_busiest: Val
    """Grounded: the busiest node's WAN upload bits per outer step."""
    down_busiest: Val
    eta_act: Val = 1.0
    bubble_per_step: Val = 0.0
    pipeline_comm_per_step: Val = 0.0
    offload_per_step: Val | None = None
    """Host-link time per step (None: the common offload time)."""
    regional_sync_time: Val = 0.0
    regional_rounds: Val = 1.0
    burst_rate: Val | None = None
    """Bits/s of a traffic burst (None: the WAN upload rate)."""
    staleness: Val = 0.0
    """Outer steps between a worker's delivery and the merged state reaching it (decoupled)."""
    merge_rule: Val = -1.0
    """The outer merge the quality model applies (`inputs.decoupled.MERGE_RULE_CODES`); -1: the
    quality parameters' own rule (DiLoCo's mean by default)."""
    site_nodes: Val = 1.0
    """Nodes that the covered-cluster rule counts as one cluster (a site's nodes on one fabric)."""


@dataclasses.dataclass(frozen=True, slots=True)
class AlgorithmUnit:
    """The registration of one algorithm: its code (`inputs.codes`), name, and the functions the kernel
    and `estimate` call."""

    code: int
    name: str
    outer_sync: bool
    """Replicas that train apart and sync every H steps (DiLoCo family; quality penalties apply)."""
    branch: Callable[[Common], Branch]
    """Its figures for every configuration of the evaluation."""
    runs: Callable[[Common], BoolArr] | None = None
    """Where it can run; elsewhere it falls back to `fallback` (None: everywhere)."""
    fallback: int | None = None
    offload: bool = True
    """Whether the inner optimizer may be offloaded to host DRAM (not in a pipeline)."""
    notes: Callable[[str, str, Mapping[str, float], int], list[str]] | None = None
    """Estimate notes: (asked name, resolved name, scalar outputs, group size) -> lines."""
    auto: Callable[[Common, Arr], Arr] | None = None
    """Where ``auto`` resolves to this unit: (shared figures, resolved codes) -> codes (None: never)."""


def no_sync(c: Common) -> tuple[Arr, Arr]:
    """(zeros, ones) of the evaluation's shape: the figures of a part of a run that does not exist."""
    return np.zeros(c.shape), np.ones(c.shape)


def flag(x: npt.ArrayLike) -> BoolArr:
    """x as a boolean array."""
    return np.asarray(x, dtype=bool)
