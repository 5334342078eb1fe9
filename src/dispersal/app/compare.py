"""The Planner's comparison charts: the cheapest plan's cost against WAN bandwidth, distance and the
target, around the scenario's point, each point a `planner.plan` (the app's cached one), the chart on
screen planned first and drawn as it grows. No Streamlit import: the caller passes the planner and the
progress callback (fakes in tests/app/test_logic.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dispersal.app import logic
from dispersal.model.inputs.errors import InputError
from dispersal.present import formats as F
from dispersal.present.questions import Progress
from dispersal.present.rows import sweep_row

#: The x values of the comparison charts (around the paper's 100 Mbps / 100 ms / 1e25 point).
SWEEP_BANDWIDTH_MBPS = (10.0, 30.0, 100.0, 300.0, 1000.0)
SWEEP_DISTANCE_KM = (100.0, 1000.0, 3000.0, 10000.0, 20000.0)
SWEEP_TARGET_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
SWEEPS = ("bandwidth", "distance", "target")


def sweep_points(args: Mapping[str, Any], axis: str) -> list[tuple[float, dict[str, Any]]]:
    """(x, planner arguments) for each point of one comparison chart; the rest as in ``args``.

    bandwidth: symmetric WAN in Mbps; distance: fibre km -> one-way latency
    (`scenario.latency_from_distance`, 4.9 us/km x 1.5 routing); target: FLOP, multiples of the target.
    """
    from dispersal.model.inputs.scenario import latency_from_distance

    # The charts need each point's cost only: no centralized baseline per point.
    args = {**args, "baseline": False}
    out = []
    if axis == "bandwidth":
        for mbps in SWEEP_BANDWIDTH_MBPS:
            c = {
                **args["constraints"],
                "bandwidth_up_bits_per_s": mbps * 1e6,
                "bandwidth_down_bits_per_s": mbps * 1e6,
            }
            out.append((mbps, {**args, "constraints": c}))
    elif axis == "distance":
        for km in SWEEP_DISTANCE_KM:
            c = {**args["constraints"], "latency_s": latency_from_distance(km * 1e3)}
            out.append((km, {**args, "constraints": c}))
    elif axis == "target":
        t0 = logic.parse_flop(str(args["target"]))
        for k in SWEEP_TARGET_FACTORS:
            out.append((t0 * k, {**args, "target": repr(t0 * k)}))
    else:
        raise InputError("axis", f"must be one of {', '.join(SWEEPS)}, got {axis!r}")
    return out


def sweeps(
    args: Mapping[str, Any],
    plan: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    first: str | None = None,
    on_axis: Callable[[str, list[dict[str, Any]]], None] | None = None,
    known: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The comparison charts' rows (`sweep_row` of `plan(arguments)` at each `sweep_points` point), in
    `SWEEPS` order; a point whose plan fails is a row with no cost and the error as its label.

    ``first``: the axis planned first (the chart on screen); ``on_axis(axis, rows)`` is called after
    each of its points but the last with the rows planned so far (in x order), and once for every axis
    when it completes, so the chart on screen grows while the rest is planned. ``known``: (arguments,
    plan) of a plan already found (the Planner's answer): a point asking for the same plan (the
    centralized baseline aside, which changes no plan) takes it, and comes first. ``progress(done, total,
    now)`` after each point."""
    order = sorted(SWEEPS, key=lambda a: a != first)
    points = {axis: sweep_points(args, axis) for axis in order}
    total = sum(len(p) for p in points.values())
    out: dict[str, list[dict[str, Any]]] = {}
    done = 0
    for axis, pts in points.items():
        # The point asking for the known plan (if any) first, the others in x order.
        mine = next((i for i, (_x, a) in enumerate(pts) if known and _same_plan_args(a, known[0])), None)
        rows: dict[int, dict[str, Any]] = {}
        for i in sorted(range(len(pts)), key=lambda j: j != mine):
            x, a = pts[i]
            if progress is not None:
                progress(done, total, f"{axis} = {F.sig(x, 3)}")
            try:
                p = dict(known[1]) if known and i == mine else plan(a)
                rows[i] = sweep_row(x, p)
            except ValueError as exc:
                rows[i] = {"x": x, "cost_usd": None, "label": logic.one_line(exc)}
            done += 1
            if on_axis is not None and axis == first and len(rows) < len(pts):
                on_axis(axis, [rows[j] for j in sorted(rows)])
        out[axis] = [rows[j] for j in sorted(rows)]
        if on_axis is not None:
            on_axis(axis, out[axis])
    return {axis: out[axis] for axis in SWEEPS}


def _same_plan_args(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two planner argument sets ask for the same plan: the same but for the centralized
    baseline (which changes no plan) and the target's spelling ("1e25" and "1e+25")."""

    def norm(x: Mapping[str, Any]) -> dict[str, Any]:
        try:
            target: Any = logic.parse_flop(str(x.get("target")))
        except ValueError:
            target = x.get("target")
        return {**x, "baseline": None, "target": target}

    return norm(a) == norm(b)


__all__ = [
    "SWEEPS",
    "SWEEP_BANDWIDTH_MBPS",
    "SWEEP_DISTANCE_KM",
    "SWEEP_TARGET_FACTORS",
    "sweep_points",
    "sweeps",
]
