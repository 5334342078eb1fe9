"""The algorithm units: one module each, named for its kernel name in `inputs.codes.ALGORITHM_NAMES`
and registered from that table in `ALGORITHMS` (by code).

Adding an algorithm: docs/adding_an_algorithm.md.
"""

from __future__ import annotations

import importlib

from dispersal.model.inputs.codes import ALGORITHM_NAMES
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch


def _unit(code: int, name: str) -> AlgorithmUnit:
    """The `UNIT` of module `<name>` of this package, which must carry `code` and `name`."""
    unit = getattr(importlib.import_module(f"{__name__}.{name}"), "UNIT", None)
    if not isinstance(unit, AlgorithmUnit) or (unit.code, unit.name) != (code, name):
        raise ImportError(f"{__name__}.{name}.UNIT must be an AlgorithmUnit with code={code}, name={name!r}")
    return unit


#: Every algorithm the kernel evaluates, in the order of the codes' table (that its branches are applied in).
ALGORITHMS: dict[int, AlgorithmUnit] = {code: _unit(code, name) for code, name in ALGORITHM_NAMES.items()}

__all__ = ["ALGORITHMS", "AlgorithmUnit", "Branch"]
