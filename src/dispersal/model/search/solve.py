"""`solve()`: the value of one scenario input at which a model output reaches a target.

Questions of the form "what bandwidth gives 90% utilisation?", "how many inner steps until the
sync hides?", "how far apart can the sites be before the cost premium passes 2x?".

Kernel outputs (`kernel.OUTPUTS` and the friendly aliases in `OUTPUT_ALIASES`) are solved by a
vectorised grid bisection: the candidate values of one round (64 by default) become one
Scenario each (`Scenario.replace`), are resolved by `scenario.kernel_inputs` exactly as
`estimate()` resolves them (so every mode rule applies unchanged), are stacked into arrays and go
through `kernel.evaluate` in one call. The first grid cell where the output crosses the target
becomes the next round's range; rounds repeat until the bracket is narrower than `rtol` (relative)
or, for an integer variable, until every integer in it has been evaluated. Grids are logarithmic on
positive ranges and linear when the range starts at 0.

The direction is not assumed: the side of the target the output starts on (at `lo`) decides
whether it must rise to the target or fall to it, and the answer is the first value, scanning
from `lo` upward, at which it has reached the target (>= target when rising, <= when falling). An
integer variable's answer is that first integer exactly.

``premium`` (the planner's cost premium: the evader's cheapest plan / the centralized baseline's)
is solved by scalar bisection over planner calls, one `plan()` per step (seconds each in default
mode); the baseline does not depend on the WAN, so it is planned once.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import Mode, Scenario
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.search.planner import Constraints, Plan, centralized_baseline, plan
from dispersal.model.search.solve_space import (
    _DERIVED,
    OUTPUT_ALIASES,
    PREMIUM_VARIABLES,
    VARIABLE_ALIASES,
    VARIABLES,
    Output,
    Variable,
    apply,
    format_output,
    format_value,
    resolve_output,
    resolve_variable,
)
from dispersal.model.sites.reduce import scenario_inputs

Arr = npt.NDArray[np.float64]

#: Candidate values per kernel call (one grid round).
DEFAULT_GRID_POINTS = 64
#: Relative width of the final bracket of a continuous variable.
DEFAULT_RTOL = 1e-6
#: Relative width of the final bracket when solving for the premium (one plan per halving).
DEFAULT_PREMIUM_RTOL = 1e-3
#: Compute target of the plans behind ``premium``, FLOP.
DEFAULT_TARGET_FLOP = 1e25
#: Bounds on the work of one solve (no unbounded loops).
MAX_ROUNDS = 60
MAX_PREMIUM_STEPS = 60


@dataclass(frozen=True, kw_only=True, slots=True)
class Solution:
    """What `solve` found. SI units (the target and output in the output's unit)."""

    variable: str
    output: str
    target: float
    mode: str
    reached: bool
    reason: str
    """Empty when reached; else one line on why not (e.g. "utilisation stays below 0.9 up to 10 Tbps")."""
    value: float
    """The first value (from `lo` upward) at which the output has reached the target; NaN if not reached."""
    unit: str
    """Unit of `value`."""
    achieved: float
    """The output at `value` (NaN if not reached)."""
    bracket: tuple[float, float]
    """Final bracket (before, at): the output has not reached the target at the first, has at the second."""
    search_range: tuple[float, float]
    """The range searched (lo, hi)."""
    direction: str
    """How the output moves along the variable over the first grid: "rises", "falls", "flat" or
    "not monotonic" (then the answer is the first crossing)."""
    integer: bool
    evaluations: int
    """Configurations evaluated (premium: plans made, the baseline included)."""
    calls: int
    """Kernel calls (premium: planner calls)."""
    output_unit: str = ""
    scenario: Scenario | None = None
    """The scenario with the variable at `value` (None if not reached)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the CLI's --json object)."""
        d: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["bracket"] = list(self.bracket)
        d["search_range"] = list(self.search_range)
        d["scenario"] = self.scenario.to_dict() if self.scenario is not None else None
        return d


def _check_range(v: Variable, lo: float | None, hi: float | None) -> tuple[float, float]:
    a = v.default_lo if lo is None else float(lo)
    b = v.default_hi if hi is None else float(hi)
    low_text = f"{'>' if v.min_exclusive else '>='} {format_value(v.name, v.min_value)}"
    for side, x in (("lo", a), ("hi", b)):
        ok = (
            math.isfinite(x)
            and (x > v.min_value if v.min_exclusive else x >= v.min_value)
            and x <= v.max_value
        )
        require(
            ok,
            "range",
            f"{v.name} {side} must be finite, {low_text}"
            + (f" and <= {format_value(v.name, v.max_value)}" if math.isfinite(v.max_value) else "")
            + f", got {x!r}",
        )
        if v.integer:
            require(float(x).is_integer(), "range", f"{v.name} {side} must be an integer, got {x!r}")
    require(
        a < b, "range", f"{v.name}: lo must be < hi, got {format_value(v.name, a)}:{format_value(v.name, b)}"
    )
    return a, b


def _grid(a: float, b: float, n: int, integer: bool) -> Arr:
    """n values from a to b (both included): geometric when a > 0, linear from 0; integers unique."""
    pts = np.geomspace(a, b, n) if a > 0 else np.linspace(a, b, n)
    pts[0], pts[-1] = a, b
    if integer:
        pts = np.unique(np.round(pts))
    return np.asarray(pts, dtype=np.float64)


def _stack(xs: list[dict[str, Any]]) -> dict[str, Arr]:
    """Per-candidate kernel inputs -> one dict of arrays (constant keys stay 0-d)."""
    out: dict[str, Arr] = {}
    for key in xs[0]:
        col = np.asarray([x[key] for x in xs], dtype=np.float64)
        out[key] = np.asarray(col[0]) if np.all(col == col[0]) else col
    return out


class _Evaluator:
    """Output values of a scenario at candidate values of one variable, counting the work."""

    def __init__(
        self, scenario: Scenario, variable: Variable, output: Output, mode: Mode, params: ModelParams
    ):
        self.scenario, self.variable, self.output, self.mode, self.params = (
            scenario,
            variable,
            output,
            mode,
            params,
        )
        self.evaluations = 0
        self.calls = 0

    def __call__(self, values: Arr) -> Arr:
        xs = [
            scenario_inputs(apply(self.scenario, self.variable.name, float(v)), self.mode, self.params)
            for v in values
        ]
        r = evaluate(_stack(xs), self.params)
        self.evaluations += len(values)
        self.calls += 1
        key = self.output.key
        raw = _DERIVED[key](r) if key in _DERIVED else r[key]
        return np.asarray(np.broadcast_to(raw, values.shape) / self.output.scale, dtype=np.float64)


def _describe(values: Arr) -> str:
    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return "flat"
    d = np.diff(finite)
    if np.all(d >= 0):
        return "flat" if np.all(d == 0) else "rises"
    if np.all(d <= 0):
        return "falls"
    return "not monotonic"


def _not_reached(output: Output, variable: Variable, target: float, grid: Arr, f: Arr) -> str:
    defined = ~np.isnan(f)
    if not defined.any():
        return (
            f"{output.name} is undefined from {format_value(variable.name, grid[0])} "
            f"to {format_value(variable.name, grid[-1])}"
        )
    first = int(np.argmax(defined))
    side = "below" if f[first] < target else "above"
    # Enough digits that a near miss does not print as the target itself.
    return (
        f"{output.name} stays {side} {format_output(output.name, target, 6)} up to "
        f"{format_value(variable.name, grid[-1])} ({format_output(output.name, f[first], 6)} at "
        f"{format_value(variable.name, grid[first])}, {format_output(output.name, f[-1], 6)} at "
        f"{format_value(variable.name, grid[-1])})"
    )


def solve(
    scenario: Scenario,
    *,
    vary: str,
    output: str,
    target: float,
    mode: Mode | str = Mode.DEFAULT,
    params: ModelParams = DEFAULT_PARAMS,
    lo: float | None = None,
    hi: float | None = None,
    rtol: float | None = None,
    grid_points: int = DEFAULT_GRID_POINTS,
    target_flop: float = DEFAULT_TARGET_FLOP,
    constraints: Constraints | None = None,
) -> Solution:
    """The value of `vary` at which `output` reaches `target` (see the module docstring).

    Args:
        scenario: the run; every other input stays as it is.
        vary: bandwidth, latency, distance, nodes (alias sites), inner_steps (alias H), params.
        output: any name in `kernel.OUTPUTS`, an alias in `OUTPUT_ALIASES` (utilisation, cost,
            days, sync_time, c_quality, h_min, link_utilisation ...) or ``premium``.
        target: the output value to reach, in the output's unit (SI; ``days`` in days).
        mode: "default" or "paper".
        lo, hi: the range searched, SI units (None = the variable's default range).
        rtol: relative width of the final bracket (default 1e-6; premium 1e-3).
        grid_points: candidate values per kernel call (>= 3).
        target_flop, constraints: premium only: the plans' compute target and the planner
            constraints the scenario's links, time budget, compression, straggler and pricing
            are applied to (default `Constraints()`: the whole catalogue).

    Returns:
        A Solution; a target not reached within the range gives ``reached=False`` and a reason.
    """
    v = resolve_variable(vary)
    o = resolve_output(output)
    m = _mode(mode)
    require(
        isinstance(target, int | float) and not isinstance(target, bool) and math.isfinite(target),
        "target",
        f"must be a finite number, got {target!r}",
    )
    require(
        isinstance(grid_points, int) and 3 <= grid_points <= 100_000,
        "grid_points",
        f"must be an integer in [3, 100000], got {grid_points!r}",
    )
    tol = rtol if rtol is not None else (DEFAULT_PREMIUM_RTOL if o.key == "premium" else DEFAULT_RTOL)
    require(isinstance(tol, int | float) and 0 < tol < 1, "rtol", f"must be in (0, 1), got {tol!r}")
    a, b = _check_range(v, lo, hi)
    if o.key == "premium":
        require(
            v.name in PREMIUM_VARIABLES,
            "for",
            f"premium can be solved for {', '.join(PREMIUM_VARIABLES)} (the planner's links), got {vary!r}",
        )
        return _solve_premium(scenario, v, o, float(target), m, params, a, b, tol, target_flop, constraints)
    ev = _Evaluator(scenario, v, o, m, params)
    grid = _grid(a, b, grid_points, v.integer)
    f = ev(grid)
    direction = _describe(f)
    start = np.flatnonzero(~np.isnan(f))
    if start.size == 0:
        return _fail(v, o, float(target), m, a, b, direction, ev, _not_reached(o, v, float(target), grid, f))
    f0 = f[start[0]]
    if f0 == target:
        return _found(
            scenario,
            v,
            o,
            float(target),
            m,
            grid[start[0]],
            f0,
            (grid[start[0]], grid[start[0]]),
            (a, b),
            direction,
            ev,
        )
    rising = bool(f0 < target)

    def meets(values: Arr) -> npt.NDArray[np.bool_]:
        with np.errstate(invalid="ignore"):
            return np.asarray(values >= target if rising else values <= target, dtype=np.bool_)

    hit = meets(f)
    if not hit.any():
        return _fail(v, o, float(target), m, a, b, direction, ev, _not_reached(o, v, float(target), grid, f))
    for _ in range(MAX_ROUNDS):
        # hit[0] is False: the first defined value does not meet (it set the direction), and in
        # later rounds grid[0] is the previous bracket's lower end.
        i = int(np.argmax(hit))
        lo_i, hi_i, f_hi = float(grid[i - 1]), float(grid[i]), float(f[i])
        if v.integer and hi_i - lo_i <= 1:
            return _found(scenario, v, o, float(target), m, hi_i, f_hi, (lo_i, hi_i), (a, b), direction, ev)
        if not v.integer and hi_i - lo_i <= tol * abs(hi_i):
            return _found(scenario, v, o, float(target), m, hi_i, f_hi, (lo_i, hi_i), (a, b), direction, ev)
        if v.integer and hi_i - lo_i + 1 <= grid_points:
            grid = np.arange(lo_i, hi_i + 1.0)
        else:
            grid = _grid(lo_i, hi_i, grid_points, v.integer)
            if np.all(grid[1:-1] == grid[0]) or grid.size <= 2:  # floating point cannot split it further
                return _found(
                    scenario, v, o, float(target), m, hi_i, f_hi, (lo_i, hi_i), (a, b), direction, ev
                )
        inner = ev(grid[1:-1])
        f = np.concatenate(([np.nan], inner, [f_hi]))
        hit = meets(f)
        hit[-1] = True
    raise RuntimeError(f"solve did not converge in {MAX_ROUNDS} rounds")  # pragma: no cover (bounded by rtol)


def _mode(mode: Mode | str) -> Mode:
    try:
        return Mode(mode)
    except ValueError:
        raise InputError("mode", f"must be paper or default, got {mode!r}") from None


def _found(
    scenario: Scenario,
    v: Variable,
    o: Output,
    target: float,
    m: Mode,
    value: float,
    achieved: float,
    bracket: tuple[float, float],
    rng: tuple[float, float],
    direction: str,
    ev: Any,
) -> Solution:
    return Solution(
        variable=v.name,
        output=o.name,
        target=target,
        mode=m.value,
        reached=True,
        reason="",
        value=float(value),
        unit=v.unit,
        achieved=float(achieved),
        bracket=(float(bracket[0]), float(bracket[1])),
        search_range=rng,
        direction=direction,
        integer=v.integer,
        evaluations=ev.evaluations,
        calls=ev.calls,
        output_unit=o.unit,
        scenario=apply(scenario, v.name, value),
    )


def _fail(
    v: Variable, o: Output, target: float, m: Mode, a: float, b: float, direction: str, ev: Any, reason: str
) -> Solution:
    return Solution(
        variable=v.name,
        output=o.name,
        target=target,
        mode=m.value,
        reached=False,
        reason=reason,
        value=math.nan,
        unit=v.unit,
        achieved=math.nan,
        bracket=(math.nan, math.nan),
        search_range=(a, b),
        direction=direction,
        integer=v.integer,
        evaluations=ev.evaluations,
        calls=ev.calls,
        output_unit=o.unit,
        scenario=None,
    )


# --- premium: scalar bisection over planner calls -----------------------------------------------


def premium_constraints(scenario: Scenario, base: Constraints | None = None) -> Constraints:
    """Planner constraints carrying the scenario's links, time budget, compression, straggler and
    pricing (and its MFU when set) over `base` (default `Constraints()`)."""
    changes: dict[str, Any] = {
        "bandwidth_up_bits_per_s": scenario.bandwidth_up_bits_per_s,
        "bandwidth_down_bits_per_s": scenario.bandwidth_down_bits_per_s,
        "latency_s": scenario.latency_s,
        "max_duration_s": scenario.duration_s,
        "compression_ratio": scenario.compression_ratio,
        "straggler": scenario.straggler.value,
        "pricing": scenario.pricing,
        "regional_bandwidth_bits_per_s": scenario.regional_bandwidth_bits_per_s,
        "pp_bandwidth_bits_per_s": scenario.pp_bandwidth_bits_per_s,
    }
    if scenario.mfu is not None:
        changes["mfu"] = scenario.mfu
    return (base or Constraints()).replace(**changes)


class _Premium:
    """premium(value): one plan per call under the scenario's regime, against a centralized baseline
    planned once (it runs on datacenter links, so the varied WAN does not change it)."""

    def __init__(
        self,
        scenario: Scenario,
        v: Variable,
        m: Mode,
        params: ModelParams,
        target_flop: float,
        base: Constraints | None,
    ):
        self.scenario, self.v, self.m, self.params, self.target_flop, self.base = (
            scenario,
            v,
            m,
            params,
            target_flop,
            base,
        )
        c = premium_constraints(scenario, base)
        self.baseline: Plan = centralized_baseline(target_flop, constraints=c, mode=m, params=params)
        self.evaluations = 1
        self.calls = 1

    def __call__(self, value: float) -> float:
        c = premium_constraints(apply(self.scenario, self.v.name, value), self.base)
        p = dataclasses.replace(
            plan(
                self.target_flop,
                regime_name=self.scenario.regime,
                constraints=c,
                mode=self.m,
                params=self.params,
            ),
            centralized=self.baseline,
        )
        self.evaluations += 1
        self.calls += 1
        premium = p.cost_premium
        # An evader who cannot reach the target at all pays an unbounded premium.
        return math.inf if premium is None else float(premium)


def _solve_premium(
    scenario: Scenario,
    v: Variable,
    o: Output,
    target: float,
    m: Mode,
    params: ModelParams,
    a: float,
    b: float,
    tol: float,
    target_flop: float,
    base: Constraints | None,
) -> Solution:
    require(
        isinstance(target_flop, int | float) and math.isfinite(target_flop) and target_flop > 0,
        "target_flop",
        f"must be a positive number of FLOP, got {target_flop!r}",
    )
    ev = _Premium(scenario, v, m, params, target_flop, base)
    if ev.baseline.best is None:
        return _fail(
            v,
            o,
            target,
            m,
            a,
            b,
            "flat",
            ev,
            f"the centralized baseline cannot reach {units.format_flop(target_flop)}: no premium to solve for",
        )
    fa, fb = ev(a), ev(b)
    direction = "flat" if fa == fb else ("rises" if fb > fa else "falls")
    if fa == target:
        return _found(scenario, v, o, target, m, a, fa, (a, a), (a, b), direction, ev)
    rising = fa < target

    def meets(x: float) -> bool:
        return x >= target if rising else x <= target

    if not meets(fb):
        return _fail(
            v,
            o,
            target,
            m,
            a,
            b,
            direction,
            ev,
            _not_reached(o, v, target, np.array([a, b]), np.array([fa, fb])),
        )
    lo_v, hi_v, f_hi = a, b, fb
    for _ in range(MAX_PREMIUM_STEPS):
        if hi_v - lo_v <= tol * abs(hi_v):
            break
        mid = math.sqrt(lo_v * hi_v) if lo_v > 0 else 0.5 * (lo_v + hi_v)
        if not lo_v < mid < hi_v:
            break
        fm = ev(mid)
        if meets(fm):
            hi_v, f_hi = mid, fm
        else:
            lo_v = mid
    return _found(scenario, v, o, target, m, hi_v, f_hi, (lo_v, hi_v), (a, b), direction, ev)


__all__ = [
    "DEFAULT_GRID_POINTS",
    "DEFAULT_PREMIUM_RTOL",
    "DEFAULT_RTOL",
    "DEFAULT_TARGET_FLOP",
    "OUTPUT_ALIASES",
    "PREMIUM_VARIABLES",
    "VARIABLES",
    "VARIABLE_ALIASES",
    "Output",
    "Solution",
    "Variable",
    "apply",
    "format_output",
    "format_value",
    "premium_constraints",
    "resolve_output",
    "resolve_variable",
    "solve",
]
