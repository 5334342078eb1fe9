"""The fleet's paced half (`fleet` calls it): the fleet question for scenarios with ``[[site]]`` tables
(issue 24 item 7 on issue 22's mixed sites): each configuration is evaluated through
`sites.reduce.scenario_inputs`, the identical-node equivalent paced by the slowest edge / busiest
downlink and the slowest site, exactly as `estimate` evaluates that scenario.

The paced inputs depend on the model size P only through what paces the run (the pacing site, the
pacing edge or node for a payload of P x wire bits); between two sizes with the same paced inputs
(every key but the size itself), the sizes in between get those inputs too (bisection over the
sorted size grid). Exact where the pacing changes at most once between two sampled sizes: the sync
edges' times are linear in the payload (slope 1 / rate, intercept latency), so the slowest edge
changes monotonically with P; the slowest site's inner step is assumed to do the same (an
assumption; the brute-force test in tests/model/test_fleet_sites.py checks it on a mixed fleet).
When the paced inputs differ at every size, every size is evaluated: slow, never inexact.

A site whose nodes cannot hold the model makes the configuration infeasible, as in `estimate`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.params import ModelParams
from dispersal.model.inputs.scenario import Mode, Scenario, as_arrays, kernel_inputs
from dispersal.model.inputs.sites import site_scenario
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.sites.reduce import scenario_inputs

Arr = npt.NDArray[np.float64]
BoolArr = npt.NDArray[np.bool_]

#: Inputs a fleet row sets itself (the model size, H, tokens): left out when two sizes' paced inputs
#: are compared.
ROW_KEYS = frozenset({"params", "active_params", "inner_steps", "tokens"})


def _key(x: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, float(v)) for k, v in x.items() if k not in ROW_KEYS))


def paced_table(
    v: Scenario, mode: Mode, p: ModelParams, grid: Arr
) -> tuple[list[dict[str, Any]], npt.NDArray[np.int64]]:
    """(distinct paced inputs, index into them of each size of `grid`) for scenario `v` (module
    docstring: bisection over the sorted grid; every size whose inputs are not implied is evaluated).
    """
    order = np.argsort(grid, kind="stable")
    memo: dict[int, dict[str, Any]] = {}

    def at(j: int) -> dict[str, Any]:
        if j not in memo:
            P = float(grid[order[j]])
            memo[j] = scenario_inputs(v.replace(params=P, active_params=None), mode, p)
        return memo[j]

    keys: dict[tuple[tuple[str, float], ...], int] = {}
    xs: list[dict[str, Any]] = []
    which = np.zeros(grid.size, dtype=np.int64)

    def put(j: int, x: dict[str, Any]) -> None:
        k = _key(x)
        if k not in keys:
            keys[k] = len(xs)
            xs.append(x)
        which[order[j]] = keys[k]

    def fill(lo: int, hi: int) -> None:
        a, b = at(lo), at(hi)
        put(lo, a)
        put(hi, b)
        if hi - lo <= 1:
            return
        if _key(a) == _key(b):
            for j in range(lo + 1, hi):
                put(j, a)
            return
        mid = (lo + hi) // 2
        fill(lo, mid)
        fill(mid, hi)

    fill(0, grid.size - 1)
    return xs, which


def sites_fit(v: Scenario, mode: Mode, p: ModelParams, grid: Arr) -> BoolArr:
    """Whether every site with nodes holds the model at each size of `grid` (each site evaluated as
    identical nodes with its own hardware, as `estimate` does for its per-site fit reasons)."""
    ok = np.ones(grid.size, dtype=bool)
    total = v.num_nodes
    for i, site in enumerate(v.sites):
        if site.nodes <= 0:
            continue
        x = as_arrays(kernel_inputs(site_scenario(v, site, i, total), mode, p))
        x["params"] = grid
        x["active_params"] = grid
        fits = evaluate(x, p, outputs=("fits",))["fits"]
        ok &= np.broadcast_to(np.asarray(fits) > 0, grid.shape)
    return ok


def doubled(fleet: Scenario) -> dict[str, Scenario]:
    """The fleet with days, WAN bandwidth (both directions, every site's own too) or node count
    (every site's) doubled; the churn schedule is left out of the node doubling (a site's events
    name node counts, not fractions)."""

    def links(site: Any) -> Any:
        up, down = site.bandwidth_up_bits_per_s, site.bandwidth_down_bits_per_s
        return dataclasses.replace(
            site,
            bandwidth_up_bits_per_s=None if up is None else 2 * up,
            bandwidth_down_bits_per_s=None if down is None else 2 * down,
        )

    base = {
        "bandwidth_up_bits_per_s": 2 * fleet.bandwidth_up_bits_per_s,
        "bandwidth_down_bits_per_s": 2 * fleet.bandwidth_down_bits_per_s,
    }
    if not fleet.sites:
        return {
            "days": fleet.replace(duration_s=2 * fleet.duration_s),
            "bandwidth": fleet.replace(**base),
            "nodes": fleet.replace(num_nodes=2 * fleet.num_nodes),
        }
    two = tuple(dataclasses.replace(site, nodes=2 * site.nodes) for site in fleet.sites)
    return {
        "days": fleet.replace(duration_s=2 * fleet.duration_s),
        "bandwidth": fleet.replace(sites=tuple(links(site) for site in fleet.sites), **base),
        "nodes": fleet.replace(sites=two, churn=()),
    }


def pacing(s: Scenario, mode: Mode, p: ModelParams, estimate: Callable[..., Any]) -> tuple[str, str]:
    """(what paces the sync, the site whose inner step paces the compute) of scenario `s`, from
    `estimate` (its `sync_pacing` and the site row with `paces_compute`); churn left out."""
    e = estimate(s.replace(churn=()), mode=mode, params=p)
    slow = [row.name for row in e.sites if row.paces_compute]
    return e.sync_pacing, (slow[0] if slow else "")


def describe(s: Scenario) -> list[str]:
    """One phrase per site: name, nodes, chips x hardware, links, latency (the scenario's where the
    site leaves a field out)."""
    out = []
    for i, site in enumerate(s.sites):
        hw = site.hardware or s.hardware
        chips = site_scenario(s, site, i, s.num_nodes).resolved_chips_per_node()
        up = site.bandwidth_up_bits_per_s or s.bandwidth_up_bits_per_s
        down = site.bandwidth_down_bits_per_s or s.bandwidth_down_bits_per_s
        lat = s.latency_s if site.latency_s is None else site.latency_s
        rate = f"{up / 1e6:.4g} Mbps" if up == down else f"{up / 1e6:.4g}/{down / 1e6:.4g} Mbps up/down"
        out.append(f"{site.name}: {site.nodes} x {chips} {hw}, {rate}, {lat * 1e3:.3g} ms")
    return out


def group_by_keys(xs: Sequence[dict[str, Any]]) -> list[list[int]]:
    """Indices of `xs` grouped by their key sets (one kernel call per group: a site scenario's paced
    inputs may carry keys an identical-node one does not)."""
    groups: dict[frozenset[str], list[int]] = {}
    for i, x in enumerate(xs):
        groups.setdefault(frozenset(x), []).append(i)
    return list(groups.values())


__all__ = ["ROW_KEYS", "describe", "doubled", "group_by_keys", "paced_table", "pacing", "sites_fit"]
