"""Every registered algorithm is present in every table that names algorithms, and every algorithm
module is registered: adding an algorithm (docs/adding_an_algorithm.md) fails here until it is
complete. Likewise every aggregation topology."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from dispersal.model.inputs import codes
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import (
    AGGREGATIONS,
    ALGORITHM_CODE,
    SCENARIO_ALGORITHM,
    Algorithm,
    Scenario,
    as_arrays,
    kernel_inputs,
)
from dispersal.model.kernel import algorithms, topology
from dispersal.model.kernel.algorithms import ALGORITHMS, Branch, base
from dispersal.model.kernel.kernel import INPUTS, OUTPUTS, evaluate
from dispersal.model.run.estimate import estimate

ALGO_DIR = Path(algorithms.__file__).parent


def test_every_algorithm_module_is_registered_under_its_name() -> None:
    modules = {p.stem for p in ALGO_DIR.glob("*.py")} - {"__init__", "base"}
    assert modules == {u.name for u in ALGORITHMS.values()}
    for code, unit in ALGORITHMS.items():
        assert unit.code == code
        assert codes.ALGORITHM_NAMES[code] == unit.name
        assert (unit.runs is None) == (unit.fallback is None), unit.name
        assert unit.fallback is None or unit.fallback in ALGORITHMS
    assert set(codes.ALGORITHM_NAMES) == set(ALGORITHMS)
    assert codes.ALGO_AUTO not in ALGORITHMS


def test_every_algorithm_is_in_the_scenario_tables() -> None:
    assert set(ALGORITHM_CODE) == set(Algorithm), "a scenario algorithm without a kernel code"
    assert set(ALGORITHM_CODE.values()) == set(ALGORITHMS) | {codes.ALGO_AUTO}
    for code, unit in ALGORITHMS.items():
        assert Algorithm(unit.name) in ALGORITHM_CODE, unit.name
        # A plan's scenario (the planner's slots) must run the code it was planned with.
        assert ALGORITHM_CODE[SCENARIO_ALGORITHM[code]] == code, unit.name
    assert set(SCENARIO_ALGORITHM) == set(ALGORITHMS)


@pytest.mark.parametrize("name", [u.name for u in ALGORITHMS.values()])
def test_every_algorithm_estimates_under_its_name(name: str) -> None:
    s = Scenario(algorithm=Algorithm(name), params=1e9, num_nodes=64, group_size=8)
    for mode in ("paper", "default"):
        e = estimate(s, mode=mode)
        assert e.algorithm == name, (mode, e.notes)
        assert e.outer_step_time_s > 0 and np.isfinite(e.c_local_flop)


def test_branches_give_every_field_and_the_kernel_every_output() -> None:
    x = as_arrays(kernel_inputs(Scenario(params=1e9, num_nodes=64), "default"))
    assert set(x) <= set(INPUTS)
    x = {k: np.broadcast_to(v, (len(ALGORITHMS),)) for k, v in x.items()}
    x["algorithm"] = np.asarray([float(c) for c in ALGORITHMS])
    r = evaluate(x, DEFAULT_PARAMS)
    assert tuple(r) == OUTPUTS
    np.testing.assert_array_equal(r["algorithm_resolved"], x["algorithm"])
    required = {f.name for f in dataclasses.fields(Branch) if f.default is dataclasses.MISSING}
    assert {"cycle", "replicas", "fits", "traffic_paper"} <= required


def test_every_aggregation_has_one_topology_function() -> None:
    assert set(topology.TOPOLOGIES) == set(codes.AGGREGATION_CODES.values())
    assert set(AGGREGATIONS) == set(codes.AGGREGATION_CODES) - {"paper"}
    names = {f.__name__ for f in topology.TOPOLOGIES.values()}
    assert names == {"paper_relay"} | set(codes.AGGREGATION_CODES) - {"paper", "ring"} | {"ring"}


def test_the_branch_constructors_pass_on_every_optional_field() -> None:
    # `flat` and `pipelined` forward the optional fields by name: a new `Branch` field with a default
    # must be added to `Extras` (and to `PipelineExtras` unless `pipelined` sets it itself).
    optional = {f.name for f in dataclasses.fields(Branch) if f.default is not dataclasses.MISSING}
    assert set(base.Extras.__optional_keys__) == optional
    assert optional - set(base.PipelineExtras.__optional_keys__) == {"bubble_per_step", "offload_per_step"}
