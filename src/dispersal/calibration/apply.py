"""Applying a calibration where a model API has no ``params`` argument (pure Python).

`dispersal.model.countermeasures` calls ``planner.plan`` without ``params`` (its ``Convention`` has no
such field), so ``dispersal counter --calibration`` runs the analysis with the planner wrapped to pass
the calibrated ModelParams, and the planner cache cleared before and after. Scoped to the ``with``
block; the proper fix is a ``params`` field on ``Convention`` (a model-file change, left to its owner).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from dispersal.model.params import ModelParams


@contextmanager
def planner_params(params: ModelParams) -> Iterator[None]:
    """Within the block, countermeasures' planner calls use ``params``."""
    from dispersal.model import countermeasures, planner

    original = countermeasures.plan  # type: ignore[attr-defined]
    countermeasures._plan_cached.cache_clear()
    countermeasures.plan = functools.partial(planner.plan, params=params)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        countermeasures.plan = original  # type: ignore[attr-defined]
        countermeasures._plan_cached.cache_clear()
