"""Resilience for a fleet shaped like an estimate: goodput vs scale and one site-loss question, as
curves, rows and captions (the app's Resilience tab and the HTML report).

Settings are a plain mapping with the app's keys (``res_chip_mtbf_h``, ``res_restart_h``,
``res_max_chips``, ``res_lose_sites``, ``res_lose_at_days``, ``res_down_for_days``, ``res_run_days``)
in their display units; the app checks them against its fields before calling, the model's
`ResilienceSpec` and `SiteLossScenario` validate them again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dispersal.present import formats as F

#: The app's defaults for the resilience settings (Llama 3's interruption rate: ~50,678 h per chip,
#: Dubey et al. 2024 sec. 3.3.4; a 10-minute restart is an assumption).
DEFAULTS: dict[str, Any] = {
    "res_chip_mtbf_h": 50_678.0,
    "res_restart_h": 10 / 60,
    "res_max_chips": 1_000_000.0,
    "res_lose_sites": 1,
    "res_lose_at_days": 10.0,
    "res_down_for_days": None,
    "res_run_days": None,
}


def fleet_spec(est: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[Any, str]:
    """A ResilienceSpec for a fleet shaped like this estimate, and a note on any assumption made.

    A node is a host that fails as a unit; an island (a DiLoCo worker) is one node, or one pipeline
    of ``pipeline_stages`` nodes; a round is the scenario's outer step. A site is a node, except in a
    scenario with ``[[site]]`` tables: there the sites with nodes as first listed (the estimate's site
    rows), which the site-loss model treats as equal shares of the fleet.
    """
    from dispersal.model.analyses.resilience import ResilienceSpec

    cpn = max(1, int(est["chips_per_node"]))
    island = cpn * max(1, int(est["pipeline_stages"]))
    fleet = cpn * int(est["num_nodes"])
    round_h = float(est["outer_step_time_s"]) / 3600.0
    note = ""
    if not (math.isfinite(round_h) and round_h > 0):
        round_h, note = 0.5, " (no outer step in this scenario: 30-minute rounds assumed)"
    site_rows = est.get("sites") or []
    sites = len(site_rows) if site_rows else max(1, int(est["num_nodes"]))
    spec = ResilienceSpec(
        chips=fleet,
        chip_mtbf_h=float(settings["res_chip_mtbf_h"]),
        chips_per_node=cpn,
        chips_per_island=island,
        sites=sites,
        restart_time_h=float(settings["res_restart_h"]),
        round_time_h=round_h,
    )
    return spec, note


def _site_note(est: Mapping[str, Any]) -> str:
    """What the sites are, for a scenario with ``[[site]]`` tables ("" otherwise)."""
    return (
        " (the scenario's sites with nodes as first listed, taken as equal shares)"
        if est.get("sites")
        else ""
    )


def site_loss_inputs(est: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The site-loss question in hours: k sites dark at L for D (None = for ever) in a run of R hours
    (R: the settings' planned run, else the estimate's training time, else 30 days)."""
    run_days = settings.get("res_run_days")
    if run_days is None:
        run_days = float(est["days"]) if math.isfinite(float(est["days"])) and est["days"] > 0 else 30.0
    down = settings.get("res_down_for_days")
    return {
        "lose_sites": int(settings["res_lose_sites"]),
        "lose_at_h": float(settings["res_lose_at_days"]) * 24.0,
        "down_for_h": None if down is None else float(down) * 24.0,
        "run_h": float(run_days) * 24.0,
    }


def _loss_rows(loss: Any, budget_days: float) -> list[dict[str, str]]:
    budget = f"finishes within {F.days(budget_days)} (1.2 x the run)"
    rows = []
    for name, o in loss.outcomes.items():
        rows.append(
            {
                "algorithm": name,
                "time to own target": "never"
                if math.isinf(o.time_to_target_h)
                else F.days(o.time_to_target_h / 24, unit="d"),
                "delay": "never finishes" if math.isinf(o.delay_h) else F.days(o.delay_h / 24, unit="d"),
                "useful work lost by plan end": F.percent(o.lost_useful_fraction),
                budget: "yes" if o.finishes_within_budget else "no",
            }
        )
    return rows


def which_site(est: Mapping[str, Any], lose: int) -> str:
    """Which site(s) go dark, and why it matters. Identical nodes: equal shares, so which ones does not
    matter. Mixed sites: the ones with the largest share of the work (nodes x tokens per inner step; ties
    broken by the site that paces the compute), the worst case; the loss model itself takes equal shares
    of 1/N, so the text says how far the picked sites' share is from that."""
    sites = [s for s in est.get("sites") or [] if int(s.get("nodes", 0)) > 0]
    if not sites or lose <= 0:
        return "sites are equal shares, so which ones does not matter"
    total = sum(float(s["nodes"]) * float(s.get("local_batch_tokens") or 0.0) for s in sites) or 1.0

    def share(s: Mapping[str, Any]) -> float:
        return float(s["nodes"]) * float(s.get("local_batch_tokens") or 0.0) / total

    worst = sorted(sites, key=lambda s: (-share(s), not s.get("paces_compute")))[:lose]
    shares = [share(s) for s in worst]
    if max(shares) - min(share(s) for s in sites) < 1e-9:
        return "the sites carry equal shares of the work, so which ones does not matter"
    names = ", ".join(f"{s['name']} ({F.percent(share(s), 0)} of the work)" for s in worst)
    paces = [s["name"] for s in worst if s.get("paces_compute")]
    why = f"; {', '.join(paces)} also paces the compute" if paces else ""
    return (
        f"the worst case: {names} {'goes' if len(worst) == 1 else 'go'} dark, the largest share of the work{why}; the loss model counts each "
        f"site as 1/{len(sites)} = {F.percent(1 / len(sites), 0)}, so with unequal sites it understates a "
        f"large site's loss and overstates a small one's"
    )


def resilience(est: Mapping[str, Any], settings: Mapping[str, Any], points: int = 25) -> dict[str, Any]:
    """Goodput vs scale and the site-loss outcome for a fleet shaped like this estimate
    (`resilience.goodput_vs_scale`, `resilience.goodput`, `resilience.site_loss`)."""
    from dispersal.model.analyses.resilience import SiteLossScenario, goodput, goodput_vs_scale, site_loss

    spec, note = fleet_spec(est, settings)
    fleet, island, cpn = spec.chips, spec.chips_per_island, spec.chips_per_node
    hi = max(float(settings["res_max_chips"]), fleet * 1.0, island * 2.0)
    chips = sorted({round(float(x)) for x in np.geomspace(island, hi, points)})
    curves = {k: v.tolist() for k, v in goodput_vs_scale(spec, chips).items()}
    here = goodput(spec).to_dict()
    rows = [{"algorithm": k, f"goodput at {fleet:,} chips": f"{v:.4f}"} for k, v in here.items()]
    caption = (
        f"Fleet like this scenario: {fleet:,} chips, {cpn} per node, islands of {island} chips, "
        f"{F.plural(spec.sites, 'site')}{_site_note(est)}, rounds of {F.duration(spec.round_time_h * 3600)}{note}. "
        "Failures only (communication is in the estimate)."
    )
    loss_in = site_loss_inputs(est, settings)
    loss_scenario = SiteLossScenario(**loss_in)
    loss = site_loss(spec, loss_scenario)
    budget_days = float(loss_scenario.deadline_h) / 24.0
    down = loss_in["down_for_h"]
    loss_caption = (
        f"{loss_in['lose_sites']} of {F.plural(spec.sites, 'site')} "
        f"{'goes' if loss_in['lose_sites'] == 1 else 'go'} dark after {F.sig(loss_in['lose_at_h'] / 24)} days, "
        + ("for ever" if down is None else f"for {F.days(down / 24)}")
        + f", in a planned run of {F.days(loss_in['run_h'] / 24)} ({which_site(est, loss_in['lose_sites'])}). "
        "Each algorithm's target is its own no-loss work over the planned run: the rows compare "
        "each algorithm with itself. The budget is 1.2 x the planned run, "
        f"{F.days(budget_days)} (`SiteLossScenario`'s 20% schedule slack, an assumption), not the scenario's "
        "time limit. Same numbers as `dispersal resilience` with these inputs."
    )
    return {
        "chips": chips,
        "curves": curves,
        "rows": rows,
        "fleet_chips": fleet,
        "caption": caption,
        "spec": spec.to_dict(),
        "site_loss": loss.to_dict(),
        "site_loss_inputs": loss_in,
        "site_loss_rows": _loss_rows(loss, budget_days),
        "site_loss_caption": loss_caption,
    }
