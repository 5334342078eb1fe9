"""Rendering helpers: readable rich tables for model results."""

from __future__ import annotations

import contextlib
from typing import Any

from rich.console import Console
from rich.table import Table

from dispersal.model.inputs import units


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
    # One presentation layer: the same headline rows as the app's Summary table and the HTML report.
    from dispersal.app.logic import estimate_provenance, links_of, summary_rows
    from dispersal.model.inputs.scenario import Scenario

    rows = [(r["quantity"], r["value"]) for r in summary_rows(d)]
    if not d["feasible"]:
        rows[0] = ("status", "[red]INFEASIBLE[/]: " + "; ".join(d["reasons"]))
    else:
        rows[0] = ("status", "[green]feasible[/]")
    rows.insert(
        2,
        (
            "links",
            f"{units.format_bandwidth(s['bandwidth_up_bits_per_s'])} up / "
            f"{units.format_bandwidth(s['bandwidth_down_bits_per_s'])} down, "
            f"{units.format_duration(s['latency_s'])} latency",
        ),
    )
    rows.append(
        (
            "cost",
            f"{units.format_money(d['cost']['total_usd'])} (hardware {units.format_money(d['cost']['hardware_usd'])}, "
            f"energy {units.format_money(d['cost']['energy_usd'])}, rental alternative "
            f"{units.format_money(d['cost']['rental_usd'])})",
        )
    )
    rows.append(
        (
            "WAN traffic / node",
            f"mean {d['traffic']['mean_mbps']:.3g} Mbps, peak {d['traffic']['peak_mbps']:.3g} Mbps, "
            f"duty {d['traffic']['duty_cycle']:.0%}, {units.format_bytes(d['traffic']['bytes_per_day'])}/day",
        )
    )
    with contextlib.suppress(ValueError):  # a hand-edited dict that is no longer a valid Scenario
        rows.append(("used", estimate_provenance(d, links_of(Scenario.from_dict(dict(s))))))
    for note in reversed(d.get("notes", [])):
        extra = (
            " (default mode counts the outer-optimizer state, error-feedback buffer and activations;"
            " --mode paper counts model + optimizer state only)"
            if "does not fit" in note and d["mode"] == "default"
            else ""
        )
        rows.insert(4, ("note", note + extra))
    for k, v in rows:
        head.add_row(k, v)
    eff = Table(title="efficiency factors")
    for k in ("eta_h", "eta_comp", "eta_act", "eta_rep", "eta", "chi"):
        eff.add_column(k, justify="right")
    eff.add_row(
        *(f"{d['efficiency'][k]:.4f}" for k in ("eta_h", "eta_comp", "eta_act", "eta_rep", "eta", "chi"))
    )
    bd = Table(title="where the time goes")
    b = d["breakdown"]
    total = d["run_time_s"] or 1.0
    for k in (
        "compute_s",
        "bubble_s",
        "pipeline_comm_s",
        "expert_parallel_s",
        "exposed_comm_s",
        "straggler_s",
    ):
        bd.add_column(k.removesuffix("_s"), justify="right")
    bd.add_row(
        *(
            f"{b[k] / total:.1%}"
            for k in (
                "compute_s",
                "bubble_s",
                "pipeline_comm_s",
                "expert_parallel_s",
                "exposed_comm_s",
                "straggler_s",
            )
        )
    )
    return [head, eff, bd]
