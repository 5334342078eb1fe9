"""Results as table rows: the one layout of every figure the app, the CLI and the HTML report show.

Rows are lists of ``{column: text}`` dicts; every number comes from a model result (``to_dict()``)
passed in and is formatted by `dispersal.present.formats`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispersal.present import formats as F


def summary_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """Headline figures of an Estimate.to_dict()."""
    s = d["scenario"]
    algo = d["algorithm"]
    # The model's `streaming` flag is "the sync overlaps compute"; fragments are a separate input.
    # Neither means anything to per-step ddp (H = 1: every step syncs everything).
    if d["streaming"] and d["algorithm"] != "ddp":
        # Paper mode syncs the whole model at once whatever `fragments` says (its override note).
        frags = 1 if d["mode"] == "paper" else int(s.get("fragments") or 1)
        algo += f" (streaming, {frags} fragments)" if frags > 1 else " (sync overlapped with compute)"
    if d["algorithm"] == "hierarchical":
        # With [[site]] tables the groups are the sites' regions, not group_size nodes each.
        algo += f", {d['groups']} regional groups" if d.get("sites") else f", groups of {s['group_size']}"
    if d["algorithm"] in ("pp_diloco", "site_pp_diloco"):
        algo += f", {d['pipeline_stages']} stages x {d['groups']} groups"
    rows = [
        ("status", "feasible" if d["feasible"] else "INFEASIBLE: " + "; ".join(d["reasons"])),
        (
            "hardware",
            f"{d['num_nodes']:,} nodes x {d['chips_per_node']} x {s['hardware']} ({s['precision']}), "
            f"{d['node_h100_equivalents']:.2f} H100-equivalents per node",
        ),
        (
            "algorithm",
            f"{algo}, H = {d['inner_steps']}"
            + (
                f" (H_eff {F.sig(d['inner_steps_effective'], 3)})" if d["algorithm"] == "hierarchical" else ""
            ),
        ),
        (
            "model",
            f"{F.count(d['params'])} parameters ({F.count(d['active_params'])} active), "
            f"{F.count(d['tokens'])} tokens, overtraining {F.sig(d['overtraining_ratio'], 3)}x",
        ),
        (
            "memory per node",
            f"{F.data(d['memory_required_bytes_per_node'])} needed of {F.data(d['node_memory_bytes'])}",
        ),
        ("training time", F.days(d["days"])),
        ("outer steps", f"{F.sig(d['num_outer_steps'])} of {F.duration(d['outer_step_time_s'])}"),
        (
            "inner step / sync",
            f"{F.duration(d['step_time_s'])} / {F.duration(d['sync_time_s'])}",
        ),
        ("payload per sync", F.data(d["payload_bytes_per_sync"])),
        ("C_raw", F.flop(d["c_raw_flop"], 4, unit=True)),
        ("C_local", F.flop(d["c_local_flop"], 4, unit=True)),
        ("C_quality", F.flop(d["c_quality_flop"], 4, unit=True)),
        ("loss (Chinchilla fit)", f"{d['loss']:.4f}"),
        (
            "compute utilisation",
            f"{F.percent(d['utilisation'])} (compute time / wall time; hardware MFU {F.sig(d['mfu'], 3)})",
        ),
        ("global MFU (C_local / peak)", F.percent(d["mfu_global"])),
    ]
    tr = d.get("traffic") or {}
    if tr:
        rows.append(
            (
                "sync payload up / down",
                f"{F.data(tr.get('sync_upload_bytes', 0.0))} / {F.data(tr.get('sync_download_bytes', 0.0))}"
                f"; busiest link {F.percent(max(tr.get('link_utilisation_up', 0.0), tr.get('link_utilisation_down', 0.0)), 0)} used",
            )
        )
    if d.get("extrapolation"):
        rows.append(("extrapolation", "; ".join(d["extrapolation"])))
    return [{"quantity": k, "value": v} for k, v in rows]


BREAKDOWN_PARTS = (
    ("compute_s", "compute"),
    ("bubble_s", "pipeline bubble"),
    ("pipeline_comm_s", "pipeline transfers"),
    ("expert_parallel_s", "expert-parallel latency"),
    ("exposed_comm_s", "exposed sync"),
    ("straggler_s", "straggler wait"),
)


def breakdown_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """Where the run time goes (the model's TimeBreakdown), with shares of the run time."""
    b = d["breakdown"]
    total = d["run_time_s"] or 1.0
    rows = [
        {"part": label, "days": F.days_of(b[k]), "share": F.percent(b[k] / total)}
        for k, label in BREAKDOWN_PARTS
    ]
    rows.append(
        {
            "part": "sync hidden behind compute (not in the sum)",
            "days": F.days_of(b["hidden_comm_s"]),
            "share": "",
        }
    )
    return rows


EFFICIENCY_STEPS = (
    ("eta_h", "sync interval (eta_H, heuristic)"),
    ("eta_comp", "compression (eta_comp, heuristic)"),
    ("eta_act", "activation compression (eta_act, heuristic)"),
    ("eta_rep", "replicas (eta_rep, fit + heuristic)"),
)


def waterfall_steps(d: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """(label, level before, level after) from C_raw through each factor to C_local, then chi to C_quality.

    The factors and the end points are the model's; the intermediate levels are C_raw times the
    running product of the factors (the spec's eta = eta_H x eta_comp x eta_act x eta_rep). The last
    two levels are the model's own C_local and C_quality.
    """
    e = d["efficiency"]
    level = float(d["c_raw_flop"])
    steps = []
    for i, (k, label) in enumerate(EFFICIENCY_STEPS):
        after = level * float(e[k]) if i < len(EFFICIENCY_STEPS) - 1 else float(d["c_local_flop"])
        steps.append((f"{label} x{float(e[k]):.3f}", level, after))
        level = after
    steps.append(
        (f"Chinchilla over/under-training (chi) x{float(e['chi']):.3f}", level, float(d["c_quality_flop"]))
    )
    return steps


def efficiency_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each efficiency factor, its label and the compute level after it."""
    rows = [{"step": "C_raw (6 P D)", "factor": "", "compute (FLOP)": F.flop(d["c_raw_flop"], 4)}]
    for label, _before, after in waterfall_steps(d):
        name, _, factor = label.rpartition(" x")
        rows.append({"step": name, "factor": factor, "compute (FLOP)": F.flop(after, 4)})
    rows.append({"step": "eta (product)", "factor": f"{d['efficiency']['eta']:.4f}", "compute (FLOP)": ""})
    return rows


def cost_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """The model's Cost, formatted."""
    c = d["cost"]
    return [
        {"item": "total (under the scenario's pricing)", "value": F.money(c["total_usd"])},
        {"item": "hardware purchase (x capex multiplier)", "value": F.money(c["hardware_usd"])},
        {"item": "rental alternative", "value": F.money(c["rental_usd"])},
        {"item": "energy", "value": f"{F.money(c['energy_usd'])} ({F.sig(c['energy_kwh'])} kWh)"},
    ]


def traffic_node(d: Mapping[str, Any]) -> str:
    """Which node the traffic figures describe (the model's Traffic: the busiest node in default
    mode, the mean over nodes in paper mode)."""
    if d["mode"] == "paper":
        return "the mean node (paper mode: the mean over nodes of the upload)"
    busiest = {"hierarchical": "a group leader", "pp_diloco": "a middle pipeline stage"}.get(d["algorithm"])
    return "the busiest node" + (f" ({busiest})" if busiest else "")


def _down_peak_mbps(d: Mapping[str, Any]) -> float:
    """The download's peak: bursts arrive at the downlink rate (0 when nothing is downloaded). With
    mixed sites each site sets its own link (the scenario's is not used), so the peak is the downlink of
    the site whose downlink is busiest."""
    t = d["traffic"]
    if t.get("mean_down_mbps", 0.0) <= 0:
        return 0.0
    sites = [s for s in d.get("sites") or [] if s.get("nodes", 0) > 0]
    if sites:
        busiest = max(sites, key=lambda s: float(s.get("link_utilisation_down", 0.0)))
        return float(busiest["down_bits_per_s"]) / 1e6
    return float(d["scenario"]["bandwidth_down_bits_per_s"]) / 1e6


def traffic_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """The model's per-node WAN Traffic in both directions: per sync, mean and peak rate and how busy
    each link is (the direction that fills first is what limits the run), for the node it describes."""
    t = d["traffic"]
    up_busy, down_busy = t.get("link_utilisation_up", t["duty_cycle"]), t.get("link_utilisation_down", 0.0)
    return [
        {"item": "node", "value": traffic_node(d)},
        {
            "item": "bytes per sync up / down",
            "value": f"{F.data(t['bytes_per_sync'])} / {F.data(t.get('down_bytes_per_sync', 0.0))}",
        },
        {"item": "syncs per day", "value": F.sig(t["syncs_per_day"])},
        {
            "item": "mean upload / download",
            "value": f"{F.mbps(t['mean_mbps'])} / {F.mbps(t.get('mean_down_mbps', 0.0))}",
        },
        {
            "item": "peak upload / download (link rates while a burst runs)",
            "value": f"{F.mbps(t['peak_mbps'])} / {F.mbps(_down_peak_mbps(d))}",
        },
        {
            "item": "uplink / downlink busy",
            "value": f"{F.percent(up_busy)} / {F.percent(down_busy)}"
            + (" (the downlink is the busier one)" if down_busy > up_busy else ""),
        },
        {"item": "bytes per day (up + down)", "value": F.data(t["bytes_per_day"])},
    ]


def _rate(mbps: float) -> str:
    """A rate in Mbps with its unit scaled (``"96.5 Mbps"``, ``"3.5 Gbps"``, never ``"3.5e+03 Mbps"``)."""
    return F.bandwidth(mbps * 1e6, 3)


def traffic_text(d: Mapping[str, Any]) -> str:
    """The traffic rows on one line (the CLI's estimate table): up and down, mean and peak, busiest link."""
    t = d["traffic"]
    up_busy, down_busy = t.get("link_utilisation_up", t["duty_cycle"]), t.get("link_utilisation_down", 0.0)
    return (
        f"up mean {_rate(t['mean_mbps'])} / peak {_rate(t['peak_mbps'])}, down mean "
        f"{_rate(t.get('mean_down_mbps', 0.0))} / peak {_rate(_down_peak_mbps(d))}; links busy "
        f"{F.percent(up_busy, 0)} up / {F.percent(down_busy, 0)} down; "
        f"{F.data(t['bytes_per_day'])}/day; {traffic_node(d)}"
    )


def plan_rows(plan_dict: Mapping[str, Any]) -> list[dict[str, str]]:
    """The planner's cheapest option and runners-up (one per hardware), formatted."""
    rows = []
    for i, o in enumerate(plan_dict.get("runners_up", [])):
        rows.append(
            {
                "rank": str(i + 1),
                "node": f"{o['chips_per_node']}x {o['hardware']} {o['precision']}",
                "nodes": f"{o['nodes']:,}",
                "algorithm": F.algorithm(o),
                "params": F.count(o["params"]),
                "days": F.sig(o["days"]),
                "cost": F.money(o["cost_usd"]),
                "C_local": F.flop(o["c_local_flop"]),
                "C_quality": F.flop(o["c_quality_flop"]),
                "WAN upload Mbps/node mean / peak": f"{F.sig(o['mean_wan_mbps_per_node'], 3)} / "
                f"{F.sig(o['peak_wan_mbps_per_node'], 3)}",
            }
        )
    return rows


@dataclass
class Section:
    """A titled group of rows (for the report and the optional views)."""

    title: str
    rows: list[dict[str, str]] = field(default_factory=list)


def sweep_row(x: float, p: Mapping[str, Any]) -> dict[str, Any]:
    """One point of a comparison chart: x, cost (None when infeasible) and what the plan chose."""
    ok = bool(p.get("feasible")) and "cost_usd" in p
    return {
        "x": x,
        "cost_usd": float(p["cost_usd"]) if ok else None,
        "label": (
            f"{p['nodes']:,} x {p['chips_per_node']}x {p['hardware']} {p['precision']}, {F.algorithm(p)}"
            if ok
            # The first reason whole, without its "closest" tail (never cut mid-sentence).
            else "infeasible: " + (str((p.get("reasons") or ["no plan"])[0]).split("; closest:")[0])
        ),
    }


def lever_description(bundle: str) -> str:
    """What a lever or a '+'-joined bundle does, from levers.toml ('no lever' for the baseline)."""
    from dispersal.model.analyses.countermeasures import levers

    table = levers()
    parts = [p.strip() for p in str(bundle).split("+") if p.strip()]
    known = [table[p].description for p in parts if p in table]
    return (
        "; ".join(known)
        if known
        else ("no lever (the evader's baseline)" if not parts or parts == ["none"] else "")
    )


def blocks_the_run(o: Mapping[str, Any]) -> bool:
    """True when a lever leaves the evader no plan that reaches the target (the strongest outcome)."""
    return not o["feasible"]


def countermeasure_order(outcomes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The no-lever baseline (the reference of every cost multiple) first, then the levers and bundles
    that block the run, then the rest by the cost they impose (highest cost multiple first); ties keep
    their order. The table's '#' and the chart's point numbers follow this order."""
    base = [o for o in outcomes if o["lever"] == "none"]
    rest = [o for o in outcomes if o["lever"] != "none"]
    blocked = [o for o in rest if blocks_the_run(o)]
    ok = [o for o in rest if not blocks_the_run(o)]
    ok.sort(key=lambda o: -o["cost_multiple"] if math.isfinite(o["cost_multiple"]) else math.inf)
    return [*base, *blocked, *ok]


def collateral_text(o: Mapping[str, Any]) -> str:
    """Legitimate activity the lever also catches, in the model's own short labels ('-' for none)."""
    from dispersal.model.analyses.countermeasures import Collateral

    c = o.get("collateral")
    return Collateral(**c).short() if c else "-"


def _effect(o: Mapping[str, Any]) -> str:
    if o["lever"] == "none":
        return "baseline (no lever)"
    if blocks_the_run(o):
        return "blocks the run: " + ("; ".join(o.get("reasons") or ()) or "no plan reaches the target")
    return f"cost x{F.sig(o['cost_multiple'], 3)}"


def countermeasure_rows(outcomes: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One row per bundle in `countermeasure_order`: its effect (blocks the run, with the reason, or
    the cost multiple), evader cost, P(detect), expected detection day, collateral, what it does and
    the evader's adapted node."""
    rows = []
    for i, o in enumerate(countermeasure_order(outcomes)):
        ok = bool(o["feasible"])
        day = o.get("expected_detection_day")
        rows.append(
            {
                "#": str(i + 1),
                "bundle": o["lever"],
                "effect": _effect(o),
                "evader cost": F.money(o["cost_usd"]) if ok else "-",
                "cost multiple": F.sig(o["cost_multiple"], 3) if ok else "-",
                "P(detect)": f"{o['p_detect']:.3f}" if ok and math.isfinite(o["p_detect"]) else "-",
                "expected detection day": f"{day:.0f}" if day is not None and math.isfinite(day) else "-",
                "collateral": collateral_text(o),
                "what it does": lever_description(o["lever"]) or "no lever (the evader's baseline)",
                "nodes": f"{o['nodes']:,}" if ok else "-",
                "node": f"{o['chips_per_node']}x {o['hardware']}" if ok else "-",
            }
        )
    return rows


def uncertainty_rows(res: Mapping[str, Any]) -> list[dict[str, str]]:
    """P10 / P50 / P90 of cost, nodes, compute and days at each target."""
    rows = []
    for p in res["points"]:
        pc = p["percentiles"]

        def band(k: str, fmt: Any, pc: Mapping[str, Any] = pc) -> str:
            return F.band(pc[k], fmt)

        rows.append(
            {
                "target (FLOP)": F.flop(p["target_flop"]),
                "feasible draws": F.percent(p["feasible_fraction"], 0),
                "cost P10 / P50 / P90": band("cost_usd", F.money),
                "nodes": band("nodes", F.integer),
                "C_quality": band("c_quality_flop", F.flop),
                "days": band("days", F.sig),
                "nominal cost": F.money_or(p["nominal"]["cost_usd"], "-"),
            }
        )
    return rows


def site_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """Per site of a mixed-site estimate (``Estimate.to_dict()["sites"]``): its share of the work (its
    nodes' tokens per inner step over the fleet's), hardware, utilisation, whether it paces the compute,
    and how busy its link is each way. [] for identical nodes."""
    sites = d.get("sites") or []
    total = sum(float(s["nodes"]) * float(s.get("local_batch_tokens") or 0.0) for s in sites) or 1.0
    out = []
    for s in sites:
        share = float(s["nodes"]) * float(s.get("local_batch_tokens") or 0.0) / total
        out.append(
            {
                "site": f"{s['name']}" + (f" ({s['region']})" if s.get("region") else ""),
                "nodes": f"{int(s['nodes']):,} x {s['chips_per_node']}x {s['hardware']}",
                "share of the work": F.percent(share, 0),
                "utilisation": F.percent(float(s["utilisation"]), 0),
                "paces compute": "yes (slowest inner step)" if s.get("paces_compute") else "no",
                "link up / down": f"{F.bandwidth(float(s['up_bits_per_s']))} / {F.bandwidth(float(s['down_bits_per_s']))}",
                "link busy up / down": f"{F.percent(float(s['link_utilisation_up']), 0)} / "
                f"{F.percent(float(s['link_utilisation_down']), 0)}",
                "fits memory": "yes" if s.get("fits", True) else "no",
            }
        )
    return out


def sync_pacing_text(d: Mapping[str, Any]) -> str:
    """What paces the sync of a mixed-site estimate, in words ("" for identical nodes)."""
    pacing = d.get("sync_pacing")
    if not pacing or not d.get("sites"):
        return ""
    return f"The sync is paced by the {pacing}; the compute by the site marked 'paces compute'."


def plan_download(plan_dict: Mapping[str, Any]) -> dict[str, float] | None:
    """The download side of a plan's WAN traffic per node, from the plan's own estimate (its scenario,
    its mode): mean and peak Mbps, bytes per sync and how busy the downlink is; the upload side is the
    plan's own ``mean_wan_mbps_per_node`` / ``peak_wan_mbps_per_node``. None for an infeasible plan."""
    if not plan_dict.get("feasible") or not plan_dict.get("scenario"):
        return None
    from dispersal.model.inputs.scenario import Scenario
    from dispersal.model.run.estimate import estimate

    est = estimate(Scenario.from_dict(dict(plan_dict["scenario"])), mode=str(plan_dict["mode"])).to_dict()
    t = est["traffic"]
    return {
        "mean_down_mbps_per_node": float(t.get("mean_down_mbps", 0.0)),
        "peak_down_mbps_per_node": _down_peak_mbps(est),
        "down_bytes_per_sync": float(t.get("down_bytes_per_sync", 0.0)),
        "link_utilisation_down": float(t.get("link_utilisation_down", 0.0)),
    }
