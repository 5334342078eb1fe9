"""The integer codes that the scenario writes and the kernel reads: algorithms, aggregation
topologies, straggler models and heuristic-table columns.

They live below both layers so that `inputs` never imports the kernel. An algorithm's code is its
kernel name's key in `ALGORITHM_NAMES`; the kernel's unit for it is registered in
`dispersal.model.kernel.algorithms.ALGORITHMS` (docs/adding_an_algorithm.md).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

from dispersal.model.inputs.errors import InputError

#: Algorithm codes (the kernel input ``algorithm``). AUTO is resolved by the kernel's memory stage.
ALGO_DDP, ALGO_DILOCO, ALGO_HIERARCHICAL, ALGO_PP_DILOCO, ALGO_AUTO = 0, 1, 2, 3, 4
#: Decoupled DiLoCo (Google DeepMind, arXiv 2604.21428): asynchronous learner islands and a syncer.
ALGO_DECOUPLED = 5
#: Pipelines inside a site (nodes on a fast local fabric), DiLoCo across sites (DiLoCoX, arXiv
#: 2506.21263).
ALGO_SITE_PP = 6
#: The algorithm table: the kernel name of each concrete algorithm code (``Estimate.algorithm``, plan
#: rows). Everything else follows from it: the kernel's unit is the module
#: `dispersal.model.kernel.algorithms.<name>` (`ALGORITHMS`), the scenario's code is that of the
#: `scenario_fields.Algorithm` member of the same name (`ALGORITHM_CODE`, `SCENARIO_ALGORITHM`).
ALGORITHM_NAMES: dict[int, str] = {
    ALGO_DDP: "ddp",
    ALGO_DILOCO: "diloco",
    ALGO_HIERARCHICAL: "hierarchical",
    ALGO_PP_DILOCO: "pp_diloco",
    ALGO_DECOUPLED: "decoupled",
    ALGO_SITE_PP: "site_pp_diloco",
}

#: Aggregation topology codes (the kernel input ``aggregation``); one function each in
#: `dispersal.model.kernel.topology`.
AGG_PAPER, AGG_RING, AGG_RELAY, AGG_ALL_GATHER, AGG_RELAY_DENSE, AGG_GATHER_OR_DENSE = 0, 1, 2, 3, 4, 5
AGGREGATION_CODES = {
    "paper": AGG_PAPER,
    "ring": AGG_RING,
    "relay": AGG_RELAY,
    "all_gather": AGG_ALL_GATHER,
    "relay_dense": AGG_RELAY_DENSE,
    "gather_or_dense": AGG_GATHER_OR_DENSE,
}


class Straggler(StrEnum):
    """How stragglers stretch a synchronisation (Rahman 2026 sec. 3; all engineering estimates)."""

    RELAY = "relay"
    """Async relay through object storage (Covenant-72B): f = 1 + 0.02 log2 n. Paper default."""
    SYNCHRONOUS = "synchronous"
    """Synchronous all-reduce: f = 1 + 0.05 log2 n."""
    THRESHOLD = "threshold"
    """Proceed once a quorum arrives: f = 1."""
    BACKUP = "backup"
    """Backup workers: f' = 1 + 0.3 (f_sync - 1)."""


class Trust(StrEnum):
    """Who runs the sites: one operator (trusted peers) or independent providers (permissionless)."""

    TRUSTED = "trusted"
    """Every site is the operator's own: updates are averaged as they come (no validation)."""
    PERMISSIONLESS = "permissionless"
    """Anyone may join: each update is scored and filtered before it touches the model (Templar's
    Gauntlet, Covenant-72B), which costs validator nodes, validation time and discarded updates."""


TRUST_CODES = {t: i for i, t in enumerate(Trust)}


class Quality(IntEnum):
    """Which column of a heuristic quality table to read."""

    OPTIMISTIC = 0
    EXPECTED = 1
    CONSERVATIVE = 2


STRAGGLER_CODES = {s: i for i, s in enumerate(Straggler)}
QUALITY_NAMES = {
    "optimistic": Quality.OPTIMISTIC,
    "expected": Quality.EXPECTED,
    "conservative": Quality.CONSERVATIVE,
}


def quality_code(name: str, field: str) -> int:
    """Map 'optimistic' / 'expected' / 'conservative' to its table column."""
    try:
        return int(QUALITY_NAMES[name])
    except KeyError:
        raise InputError(field, f"must be one of {', '.join(QUALITY_NAMES)}, got {name!r}") from None
