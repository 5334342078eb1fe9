"""Decoupled DiLoCo's description, shared by the kernel's algorithm unit (`kernel.algorithms.decoupled`)
and the resilience analysis (`analyses.resilience`): how many learner islands, how many chips each,
the syncer's quorum, the sync interval and the merge rule.

Decoupled DiLoCo (Douillard et al., Google DeepMind, "Decoupled DiLoCo for Resilient Distributed
Pre-training", arXiv 2604.21428, April 2026): M learners train on their own clocks and never wait for
each other or for the syncer; a syncer (a CPU coordinator) merges the pseudo-gradients (or model
fragments) that have arrived once a minimum quorum of learners has delivered, and sends the merged
global state back; a failed learner's island stops alone and rejoins from the current global state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.errors import require

#: Merge rules of the syncer (kernel input ``merge_rule``): the plain mean of DiLoCo, or the paper's
#: norm-preserving merge (average the directions, keep the mean norm: "radial-directional averaging").
MERGE_RULE_CODES: dict[str, int] = {"mean": 0, "norm_preserving": 1}
#: Where the syncer sits (kernel input ``syncer_at_site``): a separate relay / coordinator whose own
#: link is not the bottleneck (the paper's CPU-only syncer), or co-located with one learner's site,
#: whose link then carries every other learner's payload.
SYNCER_PLACEMENTS: tuple[str, ...] = ("relay", "site")

DEFAULT_QUORUM_FRACTION = 0.5
"""Fraction of the learners the syncer waits for before it merges. Assumption: the paper varies the
minimum quorum K between 1 and M (secondary summaries of arXiv 2604.21428; its default not found in
readable text); half the learners is the middle of that range."""

DEFAULT_MERGE_RULE = "norm_preserving"
"""The paper's merge (arXiv 2604.21428: a plain mean of nearly orthogonal learner updates shrinks the
update norm as ~1/sqrt(M); the norm-preserving merge keeps it)."""

STALENESS_H_PER_OUTER_STEP = 1.0
"""kappa, dimensionless: a merge that reaches a learner s outer steps after it delivered is charged,
in the quality model, as kappa x (s - s_free) more sync intervals of drift:
H_quality = H_eff (1 + kappa max(0, s - s_free)). Assumption (kappa = 1: the merged update lands on
weights that are that many intervals further along, as if the interval were that much longer).
Asynchronous Local-SGD (Liu et al. 2024, arXiv 2401.09135) reports that staleness hurts but gives no
size-level law to fit."""

STALENESS_FREE_OUTER_STEPS = 1.0
"""s_free, outer steps: the staleness the model already charges nothing for in synchronous Streaming
DiLoCo, whose overlapped sync (overlap depth = the whole interval, the kernel's default) applies each
merge up to one outer step late (Douillard et al. 2025, arXiv 2501.18512: overlapping is a drop-in
replacement; the fitted streaming term delta is ~0). Decoupled DiLoCo is charged only beyond it, so
the two algorithms are treated alike where their schedules are alike. Model-consistency choice."""


def quorum_learners(learners: npt.ArrayLike, quorum_fraction: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """K = max(1, ceil(q M - 1e-9)): learners the syncer waits for (the tolerance keeps q M = 2.0000001
    from meaning 3). Broadcasts; the kernel's unit and `DecoupledRun.quorum` both use it."""
    k = np.ceil(np.asarray(learners, dtype=np.float64) * np.asarray(quorum_fraction, dtype=np.float64) - 1e-9)
    return np.asarray(np.maximum(1.0, k), dtype=np.float64)


@dataclass(frozen=True, kw_only=True, slots=True)
class DecoupledRun:
    """One Decoupled DiLoCo run as both the planner (kernel) and the resilience analysis see it."""

    learners: int
    """M: learner islands (each a node / site of the scenario; synchronous inside)."""
    chips_per_learner: int
    """Accelerators of one island (a failure anywhere in it stops that island only)."""
    quorum_fraction: float = DEFAULT_QUORUM_FRACTION
    """q in (0, 1]: the syncer merges once ceil(q M) learners have delivered."""
    sync_interval_s: float
    """Wall time between one learner's deliveries to the syncer: H_eff x step time, s."""
    merge_rule: str = DEFAULT_MERGE_RULE
    """'mean' or 'norm_preserving' (`MERGE_RULE_CODES`)."""

    def __post_init__(self) -> None:
        require(
            isinstance(self.learners, int) and self.learners >= 1,
            "learners",
            f"must be an integer >= 1, got {self.learners!r}",
        )
        require(
            isinstance(self.chips_per_learner, int) and self.chips_per_learner >= 1,
            "chips_per_learner",
            f"must be an integer >= 1, got {self.chips_per_learner!r}",
        )
        require(
            0.0 < self.quorum_fraction <= 1.0,
            "quorum_fraction",
            f"must be in (0, 1], got {self.quorum_fraction}",
        )
        require(
            math.isfinite(self.sync_interval_s) and self.sync_interval_s > 0,
            "sync_interval_s",
            f"must be a finite number > 0 s, got {self.sync_interval_s}",
        )
        require(
            self.merge_rule in MERGE_RULE_CODES,
            "merge_rule",
            f"must be one of {', '.join(MERGE_RULE_CODES)}, got {self.merge_rule!r}",
        )

    @property
    def quorum(self) -> int:
        """K: learners the syncer waits for."""
        return int(quorum_learners(self.learners, self.quorum_fraction))

    @property
    def chips(self) -> int:
        """Every accelerator of the run."""
        return self.learners * self.chips_per_learner
