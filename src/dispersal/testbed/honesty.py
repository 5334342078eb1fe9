"""Honest completion (issue 35): a run is ``completed`` only if no worker ended other than by the fault
plan and it finished with the group it was meant to have; otherwise summary.json says what it
finished with. Used by the supervisor (synchronous algorithms) and decoupled_run (learners)."""

from __future__ import annotations

from typing import Any

from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.faults import FaultPlan


def intended_members(cfg: TestbedConfig) -> list[str]:
    """The group the run was meant to finish with: every worker but those the fault plan kills and
    does not bring back."""
    plan = FaultPlan.parse(cfg.faults)
    gone = {f.worker for f in plan.of("kill")} - {f.worker for f in plan.of("rejoin")}
    return [w for w in cfg.worker_ids if w not in gone]


def honest(
    summary: dict[str, Any],
    cfg: TestbedConfig,
    lost: list[dict[str, Any]],
    members_key: str = "final_members",
) -> dict[str, Any]:
    """summary.json with ``workers_lost`` and ``intended_members``; ``completed`` stays true only if
    no worker was lost and the run finished with the group it was meant to have (``members_key``
    names the list it finished with; absent: not checked), else ``reason`` says what it finished with."""
    intended = intended_members(cfg)
    out = dict(summary, workers_lost=lost, intended_members=intended)
    why = [f"{x['worker']} lost at round {x['round']} ({x['reason']})" for x in lost]
    final = summary.get(members_key)
    if isinstance(final, list) and sorted(final) != sorted(intended):
        why.append(f"finished with {', '.join(final) or 'nobody'} of {', '.join(intended)}")
    if why and out.get("completed"):
        out["completed"] = False
        out["reason"] = "; ".join(why)
    elif why and not out.get("reason"):
        out["reason"] = "; ".join(why)
    return out
