"""Rendering helpers: readable rich tables for model results."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from dispersal.model import units


def console() -> Console:
    """A console on stdout (plain when not a terminal)."""
    import sys

    # Piped output (files, CI logs) gets a wide fixed width so tables are not squeezed to 80 columns.
    return Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)


def fmt_value(key: str, v: Any) -> str:
    """Format a value by what its key says it is."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return str(v)
    if not isinstance(v, int | float):
        return str(v)
    if key.endswith("_usd"):
        return units.format_money(v)
    if key.endswith("_flop"):
        return f"{v:.3g}"
    if key.endswith("_bytes") or key.startswith("bytes") or key.endswith("_bytes_per_node"):
        return units.format_bytes(v)
    if key.endswith("_s"):
        return units.format_duration(v)
    if key in ("params", "active_params", "tokens"):
        return units.format_count(v)
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.4g}"


def estimate_table(d: dict[str, Any]) -> list[Table]:
    """Tables for an Estimate.to_dict()."""
    s = d["scenario"]
    head = Table(title=f"dispersal estimate: {s['name']} ({d['mode']} mode)", show_header=False)
    head.add_column("", style="bold")
    head.add_column("")
    status = "[green]feasible[/]" if d["feasible"] else "[red]INFEASIBLE[/]: " + "; ".join(d["reasons"])
    rows = [
        ("status", status),
        ("hardware", f"{d['num_nodes']:,} nodes x {d['chips_per_node']} x {s['hardware']} ({s['precision']}), "
                     f"{d['node_h100_equivalents']:.2f} H100e/node"),
        ("links", f"{units.format_bandwidth(s['bandwidth_up_bits_per_s'])} up / "
                  f"{units.format_bandwidth(s['bandwidth_down_bits_per_s'])} down, "
                  f"{units.format_duration(s['latency_s'])} latency"),
        ("algorithm", f"{d['algorithm']}{' (streaming)' if d['streaming'] else ''}, H = {d['inner_steps']}"
                      + (f" (H_eff {d['inner_steps_effective']:.3g})" if d['algorithm'] == 'hierarchical' else "")
                      + (f", {d['pipeline_stages']} stages x {d['groups']} groups" if d['algorithm'] == 'pp_diloco' else "")),
        ("model", f"{units.format_count(d['params'])} parameters, {units.format_count(d['tokens'])} tokens "
                  f"(overtraining {d['overtraining_ratio']:.3g}x)"),
        ("memory / node", f"{units.format_bytes(d['memory_required_bytes_per_node'])} of "
                          f"{units.format_bytes(d['node_memory_bytes'])}"),
        ("run time", f"{d['days']:.4g} days, {d['num_outer_steps']:.4g} outer steps of "
                     f"{units.format_duration(d['outer_step_time_s'])}"),
        ("step / sync", f"{units.format_duration(d['step_time_s'])} per inner step, "
                        f"{units.format_duration(d['sync_time_s'])} per sync"),
        ("C_raw", f"{d['c_raw_flop']:.3g} FLOP"),
        ("C_local", f"{d['c_local_flop']:.3g} FLOP"),
        ("C_quality", f"{d['c_quality_flop']:.3g} FLOP"),
        ("global MFU (C_local / peak)", f"{d['mfu_global']:.1%}"),
        ("cost", f"{units.format_money(d['cost']['total_usd'])} (hardware {units.format_money(d['cost']['hardware_usd'])}, "
                 f"energy {units.format_money(d['cost']['energy_usd'])}, rental alternative "
                 f"{units.format_money(d['cost']['rental_usd'])})"),
        ("WAN traffic / node", f"mean {d['traffic']['mean_mbps']:.3g} Mbps, peak {d['traffic']['peak_mbps']:.3g} Mbps, "
                               f"duty {d['traffic']['duty_cycle']:.0%}, {units.format_bytes(d['traffic']['bytes_per_day'])}/day"),
    ]
    for note in reversed(d.get("notes", [])):
        extra = (" (default mode counts the outer-optimizer state, error-feedback buffer and activations;"
                 " --mode paper counts model + optimizer state only)"
                 if "does not fit" in note and d["mode"] == "default" else "")
        rows.insert(4, ("note", note + extra))
    for k, v in rows:
        head.add_row(k, v)
    eff = Table(title="efficiency factors")
    for k in ("eta_h", "eta_comp", "eta_act", "eta_rep", "eta", "chi"):
        eff.add_column(k, justify="right")
    eff.add_row(*(f"{d['efficiency'][k]:.4f}" for k in ("eta_h", "eta_comp", "eta_act", "eta_rep", "eta", "chi")))
    bd = Table(title="where the time goes")
    b = d["breakdown"]
    total = d["run_time_s"] or 1.0
    for k in ("compute_s", "bubble_s", "pipeline_comm_s", "expert_parallel_s", "exposed_comm_s", "straggler_s"):
        bd.add_column(k.removesuffix("_s"), justify="right")
    bd.add_row(*(f"{b[k] / total:.1%}" for k in ("compute_s", "bubble_s", "pipeline_comm_s", "expert_parallel_s",
                                                   "exposed_comm_s", "straggler_s")))
    return [head, eff, bd]
