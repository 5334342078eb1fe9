"""What a monitor sees of one building vs N sites (`monitor.compare`'s dict) as rows, shared by
`dispersal frontier --compare`, the app's Monitor view and the HTML report.

The detection numbers follow one convention, stated with them (`convention_line`): the mode, the time
budget (detection runs over the plan's days), the WAN and the regime the N-site plan is made under; the
app's Countermeasures tab and this view read the same convention (`present.questions.monitor_args`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispersal.model.inputs import units


def _pct(v: float) -> str:
    return f"{v:.1%}" if v < 0.999 else f"{v:.4%}" if v < 1 else "100%"


def compare_rows(d: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(row label, one cell per layout) for every comparison of `monitor.compare`'s dict."""
    cols = [(c, c[k]) for c in d["comparisons"] for k in ("building", "sites") if c[k] is not None]

    def surv(L: dict[str, Any], algo: str) -> str:
        s = next((x for x in L["survival"] if x["algorithm"] == algo), None)
        if s is None:
            return "-"
        delay = "never finishes" if s["delay_days"] is None else f"+{s['delay_days']:.1f} d"
        q = "" if s["quality_ratio"] is None else f", quality x{s['quality_ratio']:.4f}"
        return f"{delay}, {s['lost_work_fraction']:.1%} work lost{q}"

    k = d["lose_sites"]
    rows: list[tuple[str, list[str]]] = [
        ("target", [f"{c['target_flop']:.0e}" for c, _ in cols]),
        ("layout", [L["name"] for _, L in cols]),
        (
            "WAN per site asked",
            [
                "datacenter" if L["name"] == "one building" else units.format_bandwidth(c["wan_bits_per_s"])
                for c, L in cols
            ],
        ),
        ("hardware", [L["hardware"] for _, L in cols]),
        ("chips", [f"{L['chips']:,}" for _, L in cols]),
        ("kW per site", [f"{L['power']['site_kw']:,.1f}" for _, L in cols]),
        ("total MW", [f"{L['power']['total_mw']:,.2f}" for _, L in cols]),
        (
            "grid class per site",
            [f"{L['power']['grid_class']} ({L['power']['grid_class_status']})" for _, L in cols],
        ),
        ("shipments / delivery sites", [f"{L['shipments']:,} / {L['delivery_sites']:,}" for _, L in cols]),
        ("workforce", [f"{L['workforce']:,.0f}" for _, L in cols]),
        (
            "WAN per site / total",
            [f"{L['wan_mbps_per_site']:,.0f} Mbps / {L['wan_gbps_total']:,.1f} Gbps" for _, L in cols],
        ),
        ("days", [f"{L['days']:,.0f}" for _, L in cols]),
        ("hardware spend", [units.format_money(L["hardware_usd"]) for _, L in cols]),
        (
            "hardware spend vs one building",
            [
                f"{L['hardware_usd'] / c['building']['hardware_usd']:.2f}x"
                if c["building"] is not None and c["building"]["hardware_usd"]
                else "-"
                for c, L in cols
            ],
        ),
        (
            "power bill per site-month",
            [units.format_money(L["electricity_usd_per_site_month"]) for _, L in cols],
        ),
        ("P(detect) one site", [_pct(L["p_site"]) for _, L in cols]),
        ("P(detect) building finder", [_pct(L["p_building_finder"]) for _, L in cols]),
        ("P(detect) aggregate, independent", [_pct(L["p_independent"]) for _, L in cols]),
        ("P(detect) aggregate, correlated", [_pct(L["p_correlated"]) for _, L in cols]),
    ]
    for ch in ("whistleblower", "power", "finance"):
        rows.append((f"  {ch} alone", [_pct(L["channels"][ch]) for _, L in cols]))
    rows.append(
        (
            f"lose {k} site(s): DiLoCo / ddp",
            [surv(L, "ddp" if L["name"] == "one building" else "diloco") for _, L in cols],
        )
    )
    rows.append((f"lose {k} site(s): Decoupled", [surv(L, "decoupled") for _, L in cols]))
    return rows


def compare_table(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """`compare_rows` as table rows: one row per quantity, one column per layout ("1e+25: one building",
    "1e+25: 48 sites")."""
    rows = compare_rows(d)
    if not rows or not rows[0][1]:
        return []
    heads = [f"{t}: {name}" for t, name in zip(rows[0][1], rows[1][1], strict=True)]
    return [{"": label.strip(), **dict(zip(heads, cells, strict=True))} for label, cells in rows[2:]]


def convention_line(d: Mapping[str, Any], days: float | None = None) -> str:
    """The convention the detection numbers were computed under, in one sentence."""
    wan = ", ".join(
        units.format_bandwidth(float(c["wan_bits_per_s"]))
        for c in d["comparisons"]
        if c.get("wan_bits_per_s")
    )
    budget = f"{days:g}-day time budget" if days is not None else "the planner's 740-day time budget"
    prem = "" if d.get("premium") is None else f", the N-site plan is the {d['premium']:g}x frontier plan"
    return (
        f"{d['mode']} mode, regime {d['regime']}, {budget} (detection over each plan's days), "
        f"N-site WAN {wan or '-'} per site{prem}; P(detect) per channel over the run, aggregated as "
        "independent (1 - prod(1 - p_i)) and correlated (rho = site_correlation)"
    )


def rate_rows(d: Mapping[str, Any]) -> list[dict[str, str]]:
    """The detection rates and the monitor's parameters with their status (sourced / assumed)."""
    out = [
        {"name": f"{r['channel']}: {r['parameter']}", "value": f"{r['value']:g}", "status": str(r["status"])}
        for r in d.get("rates", [])
    ]
    out += [
        {"name": str(p["name"]), "value": f"{p['value']:g} {p['unit']}", "status": str(p["status"])}
        for p in d.get("monitor_parameters", [])
    ]
    return out
