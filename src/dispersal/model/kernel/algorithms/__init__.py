"""The algorithm units: one module each, registered in the one table `ALGORITHMS` (by code).

Adding an algorithm: docs/adding_an_algorithm.md.
"""

from __future__ import annotations

from dispersal.model.kernel.algorithms import ddp, decoupled, diloco, hierarchical, pp_diloco, site_pp_diloco
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch

#: Every algorithm the kernel evaluates, in the order its branches are applied.
ALGORITHMS: dict[int, AlgorithmUnit] = {
    u.code: u
    for u in (ddp.UNIT, diloco.UNIT, hierarchical.UNIT, pp_diloco.UNIT, decoupled.UNIT, site_pp_diloco.UNIT)
}

__all__ = ["ALGORITHMS", "AlgorithmUnit", "Branch"]
