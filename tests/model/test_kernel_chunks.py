"""The kernel's speed paths give the same numbers as the plain path: chunked evaluation of a large
call (inputs, Monte Carlo overrides and quality draws sliced alike), the outputs a caller asks for,
and a single-algorithm call against the same configurations in a mixed one."""

from __future__ import annotations

import numpy as np
import pytest

from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Scenario, as_arrays, kernel_inputs
from dispersal.model.kernel import kernel, quality_draws


def _configs(mode: str, n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = {k: np.broadcast_to(v, (n,)).copy() for k, v in as_arrays(kernel_inputs(Scenario(), mode)).items()}
    x["algorithm"] = rng.choice([0.0, 1.0, 2.0, 3.0, 4.0], n)
    x["num_nodes"] = rng.integers(1, 3000, n).astype(float)
    x["params"] = 10 ** rng.uniform(9, 12.5, n)
    x["active_params"] = x["params"]
    x["up_bits_per_s"] = 10 ** rng.uniform(7, 10, n)
    x["down_bits_per_s"] = 10 ** rng.uniform(7, 10, n)
    x["straggler"] = rng.integers(0, 4, n).astype(float)
    x["group_size"] = rng.choice([4.0, 8.0], n)
    if mode == "default":
        x["aggregation"] = rng.integers(0, 6, n).astype(float)
        x["quality_mapping"] = rng.choice([-1.0, 0.0, 1.0], n)
    return x


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-12, atol=0, equal_nan=True, err_msg=k)


# Default mode walks the schedule grid in each of the ~30 chunks: the full suite only.
@pytest.mark.parametrize("mode", ["paper", pytest.param("default", marks=pytest.mark.slow)])
def test_chunked_equals_one_piece(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 100  # 15 chunks of 7 and a remainder of 2; 100 rows x 3 latencies in chunks of 20 configs
    x = _configs(mode, n, 1)
    rng = np.random.default_rng(2)
    ov: dict[str, np.ndarray | float] = {"chinchilla_a": rng.uniform(300, 500, n), "mfu_scale": 1.0}
    qp = quality_draws.sample_quality_params(rng, n)
    whole = kernel.evaluate(x, DEFAULT_PARAMS, ov, qp)
    monkeypatch.setattr(kernel, "CHUNK_CONFIGS", 7)
    _same(kernel.evaluate(x, DEFAULT_PARAMS, ov, qp), whole)
    # A 2-D call (n x 3) is chunked by rows; an input spanning only the second axis is not sliced.
    x2 = {k: v[:, None] for k, v in x.items()}
    x2["latency_s"] = np.asarray([0.0, 0.01, 0.1])
    monkeypatch.setattr(kernel, "CHUNK_CONFIGS", 10**9)
    whole2 = kernel.evaluate(x2, DEFAULT_PARAMS)
    monkeypatch.setattr(kernel, "CHUNK_CONFIGS", 20)
    _same(kernel.evaluate(x2, DEFAULT_PARAMS), whole2)


def test_asked_outputs_equal_the_full_call() -> None:
    x = _configs("default", 200, 3)
    full = kernel.evaluate(x, DEFAULT_PARAMS)
    asked = ("cost_usd", "feasible", "c_quality_flop")
    part = kernel.evaluate(x, DEFAULT_PARAMS, outputs=asked)
    assert list(part) == [k for k in kernel.OUTPUTS if k in asked]
    _same(part, {k: full[k] for k in part})
    with pytest.raises(ValueError, match="no_such_output"):
        kernel.evaluate(x, DEFAULT_PARAMS, outputs=["no_such_output"])


@pytest.mark.slow
def test_each_algorithm_alone_equals_it_in_a_mix() -> None:
    x = _configs("default", 250, 4)
    mixed = kernel.evaluate(x, DEFAULT_PARAMS)
    for code in np.unique(mixed["algorithm_resolved"]):
        rows = mixed["algorithm_resolved"] == code
        alone = kernel.evaluate({k: v[rows] for k, v in x.items()}, DEFAULT_PARAMS)
        _same(alone, {k: v[rows] for k, v in mixed.items()})


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["paper", "default"])
def test_scalar_inputs_give_outputs_of_the_common_shape(mode: str) -> None:
    """The planner passes inputs equal on every node type as 0-d arrays (`CandidateSpace.inputs`):
    every output still has the common shape (`Inputs.g` broadcasts each input it reads) and equals
    the call with every input broadcast."""
    x = _configs(mode, 40, 3)
    scalar = {k: (np.asarray(v[0]) if np.all(v == v[0]) else v) for k, v in x.items()}
    scalar["num_nodes"] = x["num_nodes"]
    assert sum(np.ndim(v) == 0 for v in scalar.values()) > 50
    got = kernel.evaluate(scalar, DEFAULT_PARAMS)
    want = kernel.evaluate(x, DEFAULT_PARAMS)
    for k, v in got.items():
        assert v.shape == (40,), k
        np.testing.assert_array_equal(v, want[k], err_msg=k)
    # Only the node count varies: outputs that do not depend on it come back full-shaped too.
    one = {k: np.asarray(v[0]) for k, v in x.items()}
    one["num_nodes"] = x["num_nodes"]
    for k, v in kernel.evaluate(one, DEFAULT_PARAMS).items():
        assert v.shape == (40,), k


@pytest.mark.parametrize("mode", ["paper", "default"])
def test_straggler_overrides_equal_scaled_parameters(mode: str) -> None:
    """Per-configuration straggler coefficients (kernel overrides: a Monte Carlo draw's straggler
    scale, so draws of several scales share one call) give each configuration exactly what the
    parameters scaled by its own scale give, for every straggler model and algorithm."""
    n = 60
    x = _configs(mode, n, 4)
    scale = np.random.default_rng(5).choice([0.5, 1.0, 2.0], n)
    p = DEFAULT_PARAMS
    ov = {
        "straggler_coeff_relay": p.straggler_coeff_relay * scale,
        "straggler_coeff_sync": p.straggler_coeff_sync * scale,
    }
    mixed = kernel.evaluate(x, p, ov)
    moved = False
    for s in (0.5, 1.0, 2.0):
        at = np.flatnonzero(scale == s)
        ps = p.replace(
            straggler_coeff_relay=p.straggler_coeff_relay * s, straggler_coeff_sync=p.straggler_coeff_sync * s
        )
        own = kernel.evaluate({k: v[at] for k, v in x.items()}, ps)
        _same({k: v[at] for k, v in mixed.items()}, own)
        plain = kernel.evaluate({k: v[at] for k, v in x.items()}, p)
        moved |= s != 1.0 and not np.allclose(plain["sync_time_s"], own["sync_time_s"], equal_nan=True)
    assert moved  # the scale changes the sync: the test would see an override that is ignored
