"""Churn: nodes joining and leaving sites on a schedule (``[[churn]]``), INTELLECT-1 style.

The run is cut into segments between changes of the node counts; each segment runs at the paced
rate of its sites (`sites.reduce`), evaluated by the kernel. A leaving node stops at its hour. A
joining node first downloads the training state at its site's downlink (plus one latency) and
computes only after that: the join transfer is time the node is paid for but does not train
("time lost to joins"); the others go on (PRIME's live checkpoint recovery lets a node join while
the run continues: Jaghouar et al. 2024, arXiv 2412.01152, sec. 2). The state a joining node
downloads is the whole training state: inner-optimizer state at the precision's ZeRO count plus,
in default mode, the outer-optimizer state (assumption: the report does not list what its
checkpoint holds).

Outputs: the time-weighted node count, the tokens and wall time of the run under the schedule, the
node-hours lost to joins and each join's transfer time.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dispersal.model.inputs.params import ModelParams
from dispersal.model.sites.reduce import paced_inputs

if TYPE_CHECKING:
    from dispersal.model.inputs.scenario import Mode, Scenario

SECONDS_PER_HOUR = 3600.0


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ChurnSummary:
    """A run under a churn schedule. Times in seconds, rates in tokens/s."""

    run_time_s: float
    """Wall time to train the scenario's tokens (or its time budget when tokens are not set)."""
    tokens: float
    mean_nodes: float
    """Computing nodes, time-weighted over the run."""
    node_hours_lost_to_joins: float
    """Node-hours spent downloading the state before computing (joins inside the run)."""
    join_lost_fraction: float
    """node_hours_lost_to_joins / all node-hours paid (computing + joining)."""
    join_transfer_s: tuple[float, ...]
    """Transfer time of each join event, in schedule order (leaves are not listed)."""
    segments: tuple[tuple[float, float, int, float], ...]
    """(start s, end s, computing nodes, tokens/s) of each segment inside the run."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples as lists)."""
        d = dataclasses.asdict(self)
        d["join_transfer_s"] = list(self.join_transfer_s)
        d["segments"] = [list(x) for x in self.segments]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChurnSummary:
        """Inverse of to_dict."""
        return cls(
            **{
                **d,
                "join_transfer_s": tuple(float(x) for x in d["join_transfer_s"]),
                "segments": tuple((float(a), float(b), int(n), float(r)) for a, b, n, r in d["segments"]),
            }
        )


def join_time_s(s: Scenario, mode: Mode, params: ModelParams, site_index: int) -> float:
    """Seconds for one node of site `site_index` to download the training state: P x (inner state
    + outer state bytes) x 8 / its downlink + its latency (module docstring)."""
    x = paced_inputs(s, mode, params)[0]
    state_bytes = float(x["params"]) * (float(x["bytes_per_param"]) + float(x["outer_state_bytes_per_param"]))
    site = s.sites[site_index]
    down = site.bandwidth_down_bits_per_s or s.bandwidth_down_bits_per_s
    lat = s.latency_s if site.latency_s is None else site.latency_s
    return state_bytes * 8.0 / down + lat


def _changes(
    s: Scenario, mode: Mode, params: ModelParams
) -> tuple[list[tuple[float, int, int]], list[float]]:
    """(time s, site index, node delta) of every change, sorted; and each join's transfer time."""
    index = {site.name: i for i, site in enumerate(s.sites)}
    joins: dict[int, float] = {}
    changes, transfers = [], []
    for ev in s.churn:
        i = index[ev.site]
        t = ev.hour * SECONDS_PER_HOUR
        if ev.nodes > 0:
            if i not in joins:
                joins[i] = join_time_s(s, mode, params, i)
            transfers.append(joins[i])
            t += joins[i]
        changes.append((t, i, ev.nodes))
    changes.sort(key=lambda c: c[0])
    return changes, transfers


def churn_summary(s: Scenario, mode: Mode, params: ModelParams) -> ChurnSummary:
    """The run under its churn schedule (module docstring)."""
    from dispersal.model.inputs.scenario import as_arrays
    from dispersal.model.kernel.kernel import evaluate

    changes, transfers = _changes(s, mode, params)
    counts = [site.nodes for site in s.sites]
    rates: dict[tuple[int, ...], float] = {}

    def rate(c: tuple[int, ...]) -> float:
        if c not in rates:
            x = paced_inputs(s, mode, params, c)[0]
            r = evaluate(as_arrays(x), params, outputs=("tokens_per_s",))
            rates[c] = float(np.asarray(r["tokens_per_s"]))
        return rates[c]

    target = s.tokens
    t, done, node_s, segments = 0.0, 0.0, 0.0, []
    k = 0
    while True:
        # Apply every change due now (a leave at hour h, a join once its transfer is done).
        while k < len(changes) and changes[k][0] <= t:
            counts[changes[k][1]] += changes[k][2]
            k += 1
        c = tuple(max(0, n) for n in counts)
        nxt = changes[k][0] if k < len(changes) else math.inf
        r = rate(c) if sum(c) > 0 else 0.0
        end = min(nxt, s.duration_s) if target is None else nxt
        if target is not None and r > 0 and done + r * (end - t) >= target:
            end = t + (target - done) / r
        if not math.isfinite(end):
            # No further change and no token target reachable: the run never ends.
            segments.append((t, end, sum(c), r))
            t = end
            break
        done += r * (end - t)
        node_s += sum(c) * (end - t)
        segments.append((t, end, sum(c), r))
        t = end
        if (target is not None and done >= target * (1 - 1e-12)) or (target is None and t >= s.duration_s):
            break
    lost = sum(
        ev.nodes * tr for ev, tr in zip([e for e in s.churn if e.nodes > 0], transfers, strict=True)
        if ev.hour * SECONDS_PER_HOUR < t
    )  # fmt: skip
    return ChurnSummary(
        run_time_s=t,
        tokens=done,
        mean_nodes=node_s / t if 0 < t < math.inf else 0.0,
        node_hours_lost_to_joins=lost / SECONDS_PER_HOUR,
        join_lost_fraction=lost / (lost + node_s) if lost + node_s > 0 else 0.0,
        join_transfer_s=tuple(transfers),
        segments=tuple(segments),
    )
