"""The frontier as rows (`Frontier.to_dict()` and `FrontierOverTime.to_dict()` -> table rows), shared by
the app's Frontier view and the HTML report.

Generic on purpose: every scalar field of a limit row and every field of its Monte Carlo band is shown,
formatted by its key name (`formats.by_key`: ``*_usd`` as money, ``*_bits_per_s`` as a rate, ``p_*`` as a
share ...), so a field the analysis adds later (a P10/P50/P90 per cell, a "where it stops" range) appears
in the app and the report without a second implementation. Only the column order and a few labels are
chosen here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from dispersal.present import formats as F

#: Columns shown first, in this order (the README's frontier table); every other scalar key follows.
LEAD = (
    "target_flop",
    "premium",
    "p_reach",
    "least_bandwidth_bits_per_s",
    "sites",
    "hardware",
    "power_per_site_kw",
    "days",
    "cost_usd",
    "binds",
)
#: Keys not shown as columns: the budget is premium x the one-building cost (its own line), brackets
#: and the "most sites" / "least power" hardware repeat what the row already says.
HIDDEN = frozenset({"band", "chips_per_site"})
LABELS = {
    "target_flop": "target",
    "premium": "premium",
    "p_reach": "P(reach within premium)",
    "least_bandwidth_bits_per_s": "least bandwidth per site",
    "sites": "sites",
    "hardware": "node",
    "power_per_site_kw": "kW per site",
    "days": "days",
    "cost_usd": "cost",
    "budget_usd": "budget",
    "binds": "what binds",
    "mean_wan_mbps_per_site": "mean WAN per site (Mbps)",
    "most_sites": "most sites",
    "least_power_per_site_kw": "least kW per site",
    "shortest_run_days": "shortest run (days)",
    "longest_distance_m": "longest distance",
    "distance_binds": "distance",
}


def label(key: str) -> str:
    """The column heading of a field (its key with underscores as spaces when not named here)."""
    return LABELS.get(key, key.replace("_bits_per_s", "").replace("_", " "))


def cell(key: str, v: Any) -> str:
    """One value as text: None as "-", "cannot reach" kept, lists as "a / b / c" (P10 / P50 / P90)."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return " / ".join(cell(key, x) for x in v)
    # "cost_usd_p10_p50_p90" is formatted as "cost_usd": the unit is the key without its percentile tail.
    key = re.sub(r"(_p\d+)+$", "", key)
    if key == "target_flop" or key.endswith("_flop"):
        return F.flop(float(v))
    if key.startswith("premium") and not key.endswith("_usd"):
        return f"{F.sig(float(v), 3)}x"
    if key.startswith("p_reach") or key.startswith("p_") or key.endswith("_share"):
        return F.percent(float(v), 0)
    if key.endswith("_bits_per_s") or "bandwidth_bits_per_s" in key:
        return F.bandwidth(float(v))
    if key.endswith("_m"):
        return f"{float(v) / 1e3:,.0f} km"
    if key.endswith("_kw"):
        return F.sig(float(v), 4)
    if key.endswith("_days") or key == "days":
        return F.sig(float(v), 4)
    if key.endswith("_usd"):
        return F.money(float(v))
    if isinstance(v, int):
        return f"{v:,}"
    return F.sig(float(v), 4)


def _flat(lim: Mapping[str, Any]) -> dict[str, Any]:
    """A limit row with its band's fields merged in (prefixed ``band`` unless the key says P(reach))."""
    out = {k: v for k, v in lim.items() if k not in HIDDEN and not isinstance(v, Mapping)}
    band = lim.get("band")
    if isinstance(band, Mapping):
        for k, v in band.items():
            if k == "p_reach":
                out["p_reach"] = v
            elif k == "p_reach_by_bandwidth":
                continue  # per grid rate: the chart's, not a cell
            else:
                out[f"band {k}"] = v
    elif "p_reach" not in out:
        out["p_reach"] = "not drawn"
    return out


def limit_rows(fr: Mapping[str, Any], *, keys: Sequence[str] | None = None) -> list[dict[str, str]]:
    """One row per (target, premium): the lead columns, then every other field the analysis returns
    (or only ``keys``), each labelled and formatted by its key."""
    flats = [_flat(lim) for lim in fr.get("limits", [])]
    if not flats:
        return []
    seen: list[str] = [k for k in LEAD if any(k in f for f in flats)]
    for f in flats:
        seen += [k for k in f if k not in seen and not k.endswith("_bracket_bits_per_s")]
    cols = [k for k in seen if keys is None or k in keys]
    return [{label(k): cell(k.removeprefix("band "), f.get(k)) for k in cols} for f in flats]


def at_sites_rows(fr: Mapping[str, Any]) -> list[dict[str, str]]:
    """The largest target reachable with at most N sites, per premium ("any cost" when None)."""
    out = []
    for r in fr.get("at_sites", []):
        row = {"sites (at most)": f"{int(r['sites']):,}"}
        row["premium"] = "any cost" if r.get("premium") is None else f"{F.sig(float(r['premium']), 3)}x"
        t = r.get("largest_target_flop")
        row["largest target"] = F.flop(float(t), unit=True) if t else "-"
        row["node x sites used"] = f"{r['hardware']} x {int(r['sites_used']):,}" if r.get("hardware") else "-"
        for k, v in r.items():
            if k not in ("sites", "premium", "largest_target_flop", "hardware", "sites_used", "binds"):
                row[label(k)] = cell(k, v)
        row["what binds"] = str(r.get("binds", ""))
        out.append(row)
    return out


def curve_rows(curves: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The first answer of each target searched so far (`PremiumCurve.to_dict()`): per target and grid
    bandwidth, the cheapest plan's cost and its premium over one building ("-": none within the largest
    premium searched)."""
    out = []
    for c in curves:
        c0 = c.get("centralized_cost_usd")
        for b, cost in zip(c["bandwidth_grid_bits_per_s"], c["cost_by_bandwidth_usd"], strict=True):
            prem = "-" if cost is None or not c0 else f"{F.sig(float(cost) / float(c0), 3)}x"
            out.append(
                {
                    "target": F.flop(float(c["target_flop"]), unit=True),
                    "WAN per site": F.bandwidth(float(b)),
                    "one building": F.money_or(c0, "cannot reach"),
                    "cheapest dispersed plan": F.money_or(cost, "-"),
                    "premium": prem,
                }
            )
    return out


def headline(fr: Mapping[str, Any]) -> str:
    """One sentence per target: the one-building cost and P(reach) at the reach bandwidth (or why not)."""
    metric = {"c_quality": "C_quality", "c_local": "C_local"}.get(
        str(fr.get("metric")), str(fr.get("metric"))
    )
    rate = fr.get("reach_bandwidth_bits_per_s")
    at = F.bandwidth(float(rate)) if rate is not None else "the reach bandwidth"
    building = {float(c["target_flop"]): c.get("cost_usd") for c in fr.get("centralized_cost_usd", [])}
    parts = []
    for r in fr.get("p_reach", []):
        t = float(r["target_flop"])
        reach = (
            "not drawn (0 Monte Carlo draws)"
            if r.get("p_reach") is None
            else F.percent(float(r["p_reach"]), 0)
        )
        parts.append(
            f"{F.flop(t, unit=True)}: one building {F.money_or(building.get(t), 'cannot reach')}, "
            f"P(reach) at {at} {reach}"
        )
    draws = int(fr.get("samples") or 0)
    return (
        f"{fr.get('mode')} mode, metric {metric}, regime {fr.get('regime')}, "
        f"{draws:,} Monte Carlo draws per target. " + "; ".join(parts) + "."
    )


def year_rows(y: Mapping[str, Any]) -> list[dict[str, str]]:
    """`FrontierOverTime.to_dict()`: the least bandwidth per site within each premium, one row per
    algorithm generation, then the trend projections (marked as such)."""
    prem = [float(x) for x in y.get("premiums", [])]
    out = []
    for g in y.get("generations", []):
        row = {
            "year": str(g["year"]),
            "generation": f"{g['label']} ({g['codec']}, {'overlap' if g['overlap_communication'] else 'no overlap'}, "
            f"{g['sync']})",
        }
        by = {float(lim["premium"]): lim for lim in g.get("limits", [])}
        for x in prem:
            lim = by.get(x) or {}
            bw = lim.get("least_bandwidth_bits_per_s")
            row[f"within {F.sig(x, 3)}x"] = F.bandwidth(float(bw)) if bw else "none on the grid"
        row["line a fixed spend buys"] = "-"
        out.append(row)
    for pr in y.get("projections", []):
        row = {"year": f"{pr['year']} (projection)", "generation": str(pr.get("basis", "best by then, held"))}
        by = {float(r["premium"]): r.get("bits_per_s") for r in pr.get("least_bandwidth_bits_per_s", [])}
        for x in prem:
            bw = by.get(x)
            row[f"within {F.sig(x, 3)}x"] = F.bandwidth(float(bw)) if bw else "none on the grid"
        line = pr.get("line_bits_per_s")
        row["line a fixed spend buys"] = F.bandwidth(float(line)) if line else "-"
        out.append(row)
    return out


def limit_columns(fr: Mapping[str, Any]) -> list[dict[str, str]]:
    """`limit_rows` turned on its side for print: one row per field, one column per (target, premium)
    ("1e+25 within 2x"), so many fields fit a page's width (the report's table)."""
    rows = limit_rows(fr)
    if not rows:
        return []
    heads = [f"{r['target']} within {r['premium']}" for r in rows]
    keys = [k for k in rows[0] if k not in ("target", "premium")]
    return [{"": k, **{h: r.get(k, "-") for h, r in zip(heads, rows, strict=True)}} for k in keys]
