"""What an algorithm unit gives the kernel: its `Branch` (one value per configuration of every figure
that differs between algorithms), built by `flat` or `pipelined` so that a unit states only what it
changes, and its registration record, `AlgorithmUnit`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TypedDict, Unpack

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


class PipelineExtras(TypedDict, total=False):
    """The `Branch` fields with a default that `pipelined` passes on (it sets the bubble and the
    offload itself)."""

    eta_act: Val
    pipeline_comm_per_step: Val
    regional_sync_time: Val
    regional_rounds: Val
    burst_rate: Val | None
    staleness: Val
    merge_rule: Val
    site_nodes: Val


class Extras(PipelineExtras, total=False):
    """The `Branch` fields with a default, as `flat` passes them on (a test keeps this list equal to
    `Branch`'s)."""

    bubble_per_step: Val
    offload_per_step: Val | None


def flat(
    c: Common,
    *,
    cycle: Arr,
    inner_steps: Val,
    sync_time: Arr,
    sync_up: Val,
    sync_down: Val,
    sync_paper: Val,
    steps_per_cycle: Val | None = None,
    inner_steps_effective: Val | None = None,
    replicas: Arr | None = None,
    groups: Val = 1.0,
    straggler: Arr | None = None,
    payload_bits: Arr | None = None,
    traffic_paper: Val | None = None,
    up_busiest: Val | None = None,
    down_busiest: Val | None = None,
    **optional: Unpack[Extras],
) -> Branch:
    """The `Branch` of an algorithm that runs the whole model on every node (no pipeline): every node a
    worker stepping in `c.T_step` (pure compute `c.T_comp`), with the flat memory figures of `c.mem`,
    at least one worker. Defaults of what a unit may change: H inner steps per outer step, all of them
    seen by the quality model (`steps_per_cycle`, `inner_steps_effective`: `inner_steps`); N replicas
    syncing in one group with the straggler factor f_N; a payload of P x wire bits; the paper's mean
    traffic equal to one sync; the busiest node's traffic equal to any node's (`sync_up`, `sync_down`).
    One function call: the shared figures are passed as the same objects, so the kernel's picker
    merges them across branches (`kernel._Picker`)."""
    return Branch(
        cycle=cycle,
        steps_per_cycle=inner_steps if steps_per_cycle is None else steps_per_cycle,
        workers=c.N,
        step_time=c.T_step,
        sync_time=sync_time,
        inner_steps=inner_steps,
        inner_steps_effective=inner_steps if inner_steps_effective is None else inner_steps_effective,
        replicas=c.N if replicas is None else replicas,
        groups=groups,
        stages=1.0,
        straggler=c.f_N if straggler is None else straggler,
        fits=c.mem.fits,
        enough_workers=c.N >= 1,
        memory_per_node=c.mem.need_flat,
        host_per_node=c.mem.host_need_flat,
        payload_bits=c.P * c.wire if payload_bits is None else payload_bits,
        compute_per_step=c.T_comp,
        sync_up=sync_up,
        sync_down=sync_down,
        sync_paper=sync_paper,
        traffic_paper=sync_paper if traffic_paper is None else traffic_paper,
        up_busiest=sync_up if up_busiest is None else up_busiest,
        down_busiest=sync_down if down_busiest is None else down_busiest,
        **optional,
    )


def pipelined(
    c: Common,
    *,
    stages: Arr,
    stage_compute: Arr,
    cycle: Arr,
    inner_steps: Arr,
    step_time: Arr,
    workers: Arr,
    replicas: Arr,
    enough_workers: BoolArr,
    sync_time: Arr,
    straggler: Arr,
    payload_bits: Arr,
    sync_up: Val,
    sync_down: Val,
    sync_paper: Val,
    traffic_paper: Val | None = None,
    up_busiest: Val | None = None,
    down_busiest: Val | None = None,
    **optional: Unpack[PipelineExtras],
) -> Branch:
    """The `Branch` of a GPipe pipeline of S stages per DiLoCo replica (Huang et al. 2019): each node
    holds 1/S of the plain (not offloaded: ``offload_per_step`` 0) accelerator and host state, computes
    `stage_compute` t_c per micro-batch, M_mb micro-batches per step (compute M_mb t_c), and idles
    (S - 1) t_c in the bubble; every replica is one group; H inner steps per outer step, all seen by the
    quality model; the paper's traffic and the busiest node's default to one sync as in `flat`."""
    mem = c.mem
    mem_node, host_node = mem.pp_hbm_total / stages, mem.host_plain / stages
    return Branch(
        cycle=cycle,
        steps_per_cycle=inner_steps,
        workers=workers,
        step_time=step_time,
        sync_time=sync_time,
        inner_steps=inner_steps,
        inner_steps_effective=inner_steps,
        replicas=replicas,
        groups=replicas,
        stages=stages,
        straggler=straggler,
        fits=(mem_node <= mem.usable) & (host_node <= mem.host_mem),
        enough_workers=enough_workers,
        memory_per_node=mem_node,
        host_per_node=host_node,
        payload_bits=payload_bits,
        compute_per_step=c.Mmb * stage_compute,
        sync_up=sync_up,
        sync_down=sync_down,
        sync_paper=sync_paper,
        traffic_paper=sync_paper if traffic_paper is None else traffic_paper,
        up_busiest=sync_up if up_busiest is None else up_busiest,
        down_busiest=sync_down if down_busiest is None else down_busiest,
        bubble_per_step=(stages - 1.0) * stage_compute,
        offload_per_step=0.0,
        **optional,
    )


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
