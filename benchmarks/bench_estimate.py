"""How fast is the analytic model? Scalar `estimate()` and the vectorised `kernel.evaluate`.

Run: ``python benchmarks/bench_estimate.py``. Prints scenarios per second for `estimate()` (one
Scenario at a time, the CLI / web app path) and configurations per second for `kernel.evaluate` on
arrays of 100,000 random configurations (the planner / Monte Carlo path). No assertions.
"""

from __future__ import annotations

import time

import numpy as np

from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Scenario, as_arrays, kernel_inputs
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.run.estimate import estimate


def bench_scalar(seconds: float = 3.0) -> tuple[float, int]:
    rng = np.random.default_rng(0)
    scenarios = [
        Scenario(
            num_nodes=int(rng.integers(1, 5000)),
            params=float(10 ** rng.uniform(9, 12)),
            bandwidth_up_bits_per_s=float(10 ** rng.uniform(7, 10)),
            bandwidth_down_bits_per_s=float(10 ** rng.uniform(7, 10)),
        )
        for _ in range(200)
    ]
    for s in scenarios[:5]:  # warm up
        estimate(s, mode="paper")
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for s in scenarios:
            estimate(s, mode="paper" if n % 2 else "default")
            n += 1
    return n / (time.perf_counter() - t0), n


def random_configs(size: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = as_arrays(kernel_inputs(Scenario(), "paper"))
    x = {k: np.broadcast_to(v, (size,)).copy() for k, v in x.items()}
    x["algorithm"] = rng.choice([1.0, 2.0, 3.0, 4.0], size)
    x["num_nodes"] = rng.integers(1, 100_000, size).astype(float)
    x["params"] = 10 ** rng.uniform(8.7, 13, size)
    x["active_params"] = x["params"]
    x["up_bits_per_s"] = 10 ** rng.uniform(6, 11, size)
    x["down_bits_per_s"] = 10 ** rng.uniform(6, 11, size)
    x["latency_s"] = rng.uniform(0, 0.3, size)
    x["group_size"] = rng.choice([4.0, 8.0, 16.0, 32.0], size)
    x["straggler"] = rng.integers(0, 4, size).astype(float)
    x["compression_ratio"] = 10 ** rng.uniform(0, 3, size)
    return x


def bench_kernel(size: int = 100_000, repeats: int = 5) -> tuple[float, float]:
    x = random_configs(size)
    evaluate(x, DEFAULT_PARAMS)  # warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        evaluate(x, DEFAULT_PARAMS)
        times.append(time.perf_counter() - t0)
    best = min(times)
    return size / best, best


def main() -> None:
    rate, n = bench_scalar()
    print(f"estimate() scalar path: {rate:,.0f} scenarios/s ({n} calls, both modes alternating)")
    kr, best = bench_kernel()
    print(
        f"kernel.evaluate on 100,000 random configurations: {kr:,.0f} configurations/s "
        f"(best of 5: {best * 1e3:.1f} ms per call)"
    )


if __name__ == "__main__":
    main()
