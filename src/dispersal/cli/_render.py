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


def estimate_table(d: dict[str, Any]) -> list[Table]:
    """Tables for an Estimate.to_dict()."""
    s = d["scenario"]
    head = Table(title=f"dispersal estimate: {s['name']} ({d['mode']} mode)", show_header=False)
    head.add_column("", style="bold")
    head.add_column("")
    # One presentation layer: the same headline rows as the app's Summary table and the HTML report.
    from dispersal.model.inputs.scenario import Scenario
    from dispersal.present.provenance import estimate_provenance, links_of
    from dispersal.present.rows import summary_rows, traffic_text

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
            f"{units.format_duration(s['latency_s'])} latency"
            if not d.get("sites")
            else f"per site (the sites table); sync paced by the {d.get('sync_pacing', '')}",
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
    rows.append(("WAN traffic / node", traffic_text(d)))
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
    bd = Table(title="where the time goes (share of the run time)")
    b = d["breakdown"]
    total = d["run_time_s"] or 1.0
    from dispersal.present.rows import BREAKDOWN_PARTS

    # The same labels as the app and the report ("exposed sync", not the key "exposed_comm").
    for _key, label in BREAKDOWN_PARTS:
        bd.add_column(label, justify="right")
    bd.add_row(*(f"{b[k] / total:.1%}" for k, _label in BREAKDOWN_PARTS))
    return [head, eff, bd, *site_tables(d)]


def site_tables(d: dict[str, Any]) -> list[Table]:
    """Per-site rows and the churn schedule of a heterogeneous estimate (none otherwise)."""
    out = []
    if d.get("sites"):
        t = Table(title=f"sites (sync paced by the {d.get('sync_pacing', '')})")
        for col in ("site", "region", "nodes", "hardware", "step compute", "compute share", "up", "down",
                    "sync up / down per node", "uplink busy", "downlink busy", "fits"):  # fmt: skip
            t.add_column(col, justify="left" if col in ("site", "region", "hardware") else "right")
        for r in d["sites"]:
            t.add_row(
                r["name"] + (" *" if r["paces_compute"] else ""),
                r["region"],
                str(r["nodes"]),
                f"{r['chips_per_node']} x {r['hardware']}",
                units.format_duration(r["step_compute_time_s"]),
                f"{r['utilisation']:.1%}",
                units.format_bandwidth(r["up_bits_per_s"]),
                units.format_bandwidth(r["down_bits_per_s"]),
                f"{units.format_bytes(r['sync_up_bytes'])} / {units.format_bytes(r['sync_down_bytes'])}",
                f"{r['link_utilisation_up']:.1%}",
                f"{r['link_utilisation_down']:.1%}",
                "yes" if r["fits"] else "[red]no[/]",
            )
        t.caption = "* the site whose inner step paces the run; link busy = busy time / wall time"
        out.append(t)
    c = d.get("churn")
    if c:
        t = Table(title="churn schedule", show_header=False)
        t.add_column("", style="bold")
        t.add_column("")
        t.add_row(
            "run under the schedule", f"{units.format_duration(c['run_time_s'])}, {c['tokens']:.4g} tokens"
        )
        t.add_row("mean computing nodes", f"{c['mean_nodes']:.2f} (time-weighted)")
        joins = ", ".join(units.format_duration(x) for x in c["join_transfer_s"]) or "none"
        t.add_row("join transfers", joins)
        t.add_row(
            "lost to joins", f"{c['node_hours_lost_to_joins']:.3g} node-hours ({c['join_lost_fraction']:.2%})"
        )
        out.append(t)
    return out
