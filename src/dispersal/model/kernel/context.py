"""What every stage of one kernel evaluation reads: the inputs (broadcast once each), the model
parameters with their Monte Carlo overrides, and the shared per-step figures (compute, memory)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.params import ModelParams
from dispersal.model.kernel import quality
from dispersal.model.kernel.efficiency import straggler_factor

Arr = npt.NDArray[np.float64]
BoolArr = npt.NDArray[np.bool_]

#: Guards a division by a free time that can reach zero (a fraction of the step time).
TINY = 1e-12


def as_float(x: npt.ArrayLike) -> Arr:
    """x as a float64 array (no copy when it already is one)."""
    return np.asarray(x, dtype=np.float64)


def broadcast(a: Arr, shape: tuple[int, ...]) -> Arr:
    """`a` broadcast to `shape` as a read-only view, like `np.broadcast_to`; a number (0-d) by a direct
    zero-stride view, which costs a fifth of `np.broadcast_to`'s checks (the walk of `kernel.choose`
    builds thousands of small evaluations, each reading ~60 inputs that are one number)."""
    if a.ndim == 0 and shape:
        v: Arr = np.ndarray(shape, np.float64, np.ascontiguousarray(a), 0, (0,) * len(shape))
        v.flags.writeable = False
        return v
    return np.broadcast_to(a, shape)


class Inputs:
    """Read access to one evaluation's inputs: `g(name)` an input broadcast to the common shape
    (once: inputs are read many times, and small calls, the planner's, are dominated by that), `k(name)`
    a model parameter or its override array."""

    __slots__ = ("_cache", "ov", "p", "quality_params", "shape", "x")

    def __init__(
        self,
        x: Mapping[str, npt.ArrayLike],
        p: ModelParams,
        ov: Mapping[str, npt.ArrayLike],
        quality_params: quality.QualityLike | None,
        shape: tuple[int, ...],
    ) -> None:
        self.x, self.p, self.ov, self.quality_params, self.shape = x, p, ov, quality_params, shape
        self._cache: dict[str, Arr] = {}

    def g(self, name: str) -> Arr:
        """Input `name` broadcast to the common shape."""
        v = self._cache.get(name)
        if v is None:
            a = as_float(self.x[name])
            # A full array needs no view (the planner passes every input so): saves a call each.
            v = self._cache[name] = a if a.shape == self.shape else broadcast(a, self.shape)
        return v

    def k(self, name: str) -> Arr:
        """Model parameter `name` (a Monte Carlo override array when given)."""
        return as_float(self.ov[name]) if name in self.ov else as_float(getattr(self.p, name))

    def has(self, name: str) -> bool:
        """Whether the optional input `name` was given."""
        return name in self.x


@dataclasses.dataclass(slots=True)
class Memory:
    """Where each state lives (memory stage, spec/model.md sec. 2), bytes per node."""

    act_per_token: Arr
    """Stored activation bytes per token of a micro-batch (0 where activations are not counted)."""
    usable: Arr
    """Usable accelerator memory of a node."""
    host_mem: Arr
    fits: BoolArr
    """The model and its state fit one node (with offload where allowed)."""
    need_flat: Arr
    host_need_flat: Arr
    pp_hbm_total: Arr
    """Accelerator bytes of a whole pipeline (state + all micro-batches' activations)."""
    host_plain: Arr
    stages: Arr
    """S: pipeline stages a pipelined run needs (1 where the model fits)."""
    pp_groups: Arr
    """floor(N / S): pipeline groups."""
    use_offload: BoolArr
    max_params_flat: Arr


@dataclasses.dataclass(slots=True)
class Common:
    """The figures every algorithm unit shares (one inner step on one node, the links, the memory)."""

    inp: Inputs
    shape: tuple[int, ...]
    streaming: BoolArr
    N: Arr
    P: Arr
    Pa: Arr
    B: Arr
    Mmb: Arr
    up: Arr
    down: Arr
    lat: Arr
    strag: Arr
    h_req: Arr
    F_eff: Arr
    T_comp: Arr
    """6 P_active B / F_eff: one inner step's compute."""
    T_ep: Arr
    """Expert-parallel latency per step."""
    T_ofl: Arr
    """Host-link time of an offloaded inner optimizer per step."""
    T_step: Arr
    hidden: Arr
    """Hidden size estimate from P (activation sizes)."""
    mem: Memory
    act_bits: Arr
    """Activation bits on a pipeline boundary per inner step (0 where the model fits one node)."""
    wire: Arr
    shared: BoolArr
    fragments: Arr
    one_fragment: bool
    tau: Arr
    bwd: Arr
    f_N: Arr
    """Straggler factor of N participants."""
    strag_coeffs: tuple[Arr, Arr]
    """The straggler model's (relay, synchronous) coefficients: the parameters' or a draw's overrides."""
    agg: Arr
    agg_codes: frozenset[int]
    """Aggregation codes present in this evaluation (a topology absent from it is not computed)."""

    @property
    def p(self) -> ModelParams:
        return self.inp.p

    def g(self, name: str) -> Arr:
        """Input `name` broadcast to the common shape."""
        return self.inp.g(name)

    def straggler(self, n: npt.ArrayLike) -> Arr:
        """The straggler factor of n participants under this evaluation's model (`straggler_factor`)."""
        return straggler_factor(n, self.strag, self.inp.p, self.strag_coeffs)
