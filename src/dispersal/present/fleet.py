"""What a fleet best trains (`FleetAnswer`) in sentences, shared by `dispersal fleet`, the app's Fleet view
and the report: the choice, utilisation and time, compute, traffic, what binds, and a "cite this" line
naming the release, mode, metric and links."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispersal.model.inputs import units
from dispersal.model.inputs.scenario import DEFAULT_SITE_FABRIC_BITS_PER_S
from dispersal.model.search.fleet import FleetAnswer, FleetOption
from dispersal.present import formats as F


def _links(ans: FleetAnswer) -> str:
    f = ans.fleet
    if f.sites:
        return "per site: " + "; ".join(ans.sites)
    up, down = f.bandwidth_up_bits_per_s, f.bandwidth_down_bits_per_s
    rate = F.bandwidth(up) if up == down else f"{F.bandwidth(up)} up / {F.bandwidth(down)} down"
    return f"{rate} per node, {units.format_duration(f.latency_s)} one way"


def _algo(o: FleetOption) -> str:
    return f"hierarchical n_g={o.group_size}" if o.group_size else o.algorithm


def _algo_long(o: FleetOption) -> str:
    """The algorithm with the scenario's settings that it runs with (not searched)."""
    s = o.scenario
    if o.algorithm == "decoupled":
        return f"decoupled (merge {s.merge_rule}, quorum {s.quorum_fraction:g} of the learners, syncer {s.syncer})"
    if o.algorithm == "site_pp_diloco":
        fabric = s.site_fabric_bits_per_s or DEFAULT_SITE_FABRIC_BITS_PER_S
        return f"site_pp_diloco (sites of {s.nodes_per_site} nodes on a {fabric / 1e9:.4g} Gbps fabric)"
    return _algo(o)


def answer_lines(ans: FleetAnswer) -> list[str]:
    """The answer in sentences: the choice, utilisation and time, compute, traffic, what binds,
    and one "cite this" sentence naming mode, metric and links."""
    f = ans.fleet
    days = f.duration_s / units.SECONDS_PER_DAY
    where = (
        f"{f.num_nodes:,} nodes in {len(f.sites)} sites, {f.precision.value} ({_links(ans)}; {days:.4g} days; "
        f"regime {f.regime})"
        if f.sites
        else f"{f.num_nodes:,} nodes x {f.resolved_chips_per_node()} {f.hardware} {f.precision.value} "
        f"({_links(ans)}; {days:.4g} days; regime {f.regime})"
    )
    skipped = ["Not searched:", *(f"  - {why}" for why in ans.skipped)] if ans.skipped else []
    if ans.best is None:
        return [
            f"No configuration of the fleet {where} is valid:",
            *(f"  - {r}" for r in ans.reasons),
            *skipped,
        ]
    b = ans.best
    h = f"H = {b.inner_steps:,}" + (" (H_min)" if b.inner_steps_requested == 0 else "")
    run_days = b.run_time_s / units.SECONDS_PER_DAY
    lines = [
        f"Fleet {where}.",
        f"Best use ({ans.metric}): a {units.format_count(b.params)}-parameter model on "
        f"{units.format_count(b.tokens)} tokens ({b.overtraining_ratio:.3g}x the compute-optimal tokens/param), "
        f"{_algo_long(b)}, {h}, codec {b.codec}.",
        f"Time {run_days:.4g} days"
        + (" (stops early: more tokens would pass the overtraining window)" if b.stopped_early else "")
        + f"; accelerator utilisation {b.utilisation:.1%}; cost {units.format_money(b.cost_usd)}.",
        f"Compute: C_local {b.c_local_flop:.3g} FLOP, C_quality {b.c_quality_flop:.3g} FLOP, final loss {b.loss:.4g}.",
        f"Traffic per node: mean {F.bandwidth(b.mean_up_bits_per_s)} up / {F.bandwidth(b.mean_down_bits_per_s)} "
        f"down, peak {F.bandwidth(b.peak_up_bits_per_s)} up, {F.data(b.bytes_per_day_per_node)}/day.",
    ]
    if b.sync_pacing:
        lines.append(
            f"Sites paced (as estimate does): sync by the {b.sync_pacing}; compute by site "
            f"{b.compute_pacing_site} (the slowest inner step; the other sites wait at each lock-step)"
            + (
                f"; the [[churn]] schedule ({len(f.churn)} events) is not searched: the sites as listed, "
                f"{f.num_nodes:,} nodes."
                if f.churn
                else "."
            )
        )
    lines += skipped
    if ans.gains:
        g = ", ".join(f"{k} x{v:.3g}" for k, v in ans.gains.items())
        lines.append(f"Binding constraint: {ans.binding} (C_quality gain when doubled: {g}).")
    lines.append(
        f"Cite this: {F.release()}, {ans.mode} mode, metric {ans.metric}, links {_links(ans)}; "
        f"{ans.configurations:,} configurations searched."
    )
    lines.append("Assumptions: " + "; ".join(ans.assumptions) + ".")
    return lines


def fleet_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """The best option of each algorithm (`FleetAnswer.to_dict()['per_algorithm']`), best first, with the
    shared algorithm name (`formats.algorithm`)."""
    out = []
    for o in d.get("per_algorithm", []):
        out.append(
            {
                "algorithm": F.algorithm(o),
                "codec": str(o["codec"]),
                "model": F.count(float(o["params"])),
                "tokens": F.count(float(o["tokens"])),
                "H": f"{int(o['inner_steps']):,}",
                "days": F.sig(float(o["run_time_s"]) / 86400.0, 4),
                "utilisation": F.percent(float(o["utilisation"]), 1),
                "C_local": F.flop(float(o["c_local_flop"])),
                "C_quality": F.flop(float(o["c_quality_flop"])),
                "loss": F.sig(float(o["loss"]), 4),
                "cost": F.money(float(o["cost_usd"])),
            }
        )
    return out
