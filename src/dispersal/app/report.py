"""A self-contained HTML report of one scenario, for readers who will not run anything.

One file: inline CSS, figures as base64 PNG, tables, and the full `Estimate.to_dict()` JSON at the
end. Needs matplotlib (a core dependency), not streamlit.
"""

from __future__ import annotations

import datetime as _dt
import html
from collections.abc import Mapping, Sequence
from typing import Any

from dispersal import __version__
from dispersal.app import figures, logic, views
from dispersal.model.inputs import units
from dispersal.model.inputs.scenario import Mode, Scenario
from dispersal.model.kernel.estimate import estimate

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}
.ok{color:#1a7f37;font-weight:600}.bad{color:#b42318;font-weight:600}.note{color:#4a4a4a;font-size:.9em}
img{max-width:100%;height:auto}pre{background:#f7f7f7;padding:.8em;overflow:auto;font-size:.8em}
"""


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "<p class='note'>(none)</p>"
    cols = list(rows[0].keys())
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(chart: figures.Chart, alt: str) -> str:
    """The app's own figure as inline SVG (alt text as its accessible name, values on hover)."""
    chart.alt = f"{alt}. {chart.alt}"
    return f"<figure>{figures.svg_markup(chart)}</figure>"


def _inputs_rows(s: Scenario) -> list[dict[str, str]]:
    out = []
    for k, v in s.to_dict().items():
        if v is None:
            text = "(mode default)" if k not in ("tokens", "active_params") else "(derived)"
        elif k.endswith("bits_per_s"):
            text = units.format_bandwidth(v)
        elif k.endswith("_s"):
            text = units.format_duration(v)
        elif k in ("params", "active_params", "tokens", "local_batch_tokens"):
            text = units.format_count(v)
        else:
            text = str(v)
        out.append({"input": k, "value": text})
    return out


def render_html(scenario: Scenario, mode: Mode | str = Mode.DEFAULT, *, source: str = "") -> str:
    """The report as one HTML string (every number from `dispersal.model`)."""
    m = Mode(mode)
    est = estimate(scenario, mode=m).to_dict()
    status = (
        "<span class='ok'>feasible</span>"
        if est["feasible"]
        else "<span class='bad'>infeasible</span>: " + html.escape("; ".join(est["reasons"]))
    )
    res_ui = {k: v for k, v in logic.default_ui().items() if k.startswith("res_")}
    res = views.resilience(est, res_ui)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>dispersal report: {html.escape(scenario.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(scenario.name)}</h1>",
        f"<p class='note'>dispersal {html.escape(__version__)}, {m.value} mode"
        + (f", scenario {html.escape(source)}" if source else "")
        + f", generated {_dt.date.today().isoformat()}. Status: {status}.</p>",
        "<h2>Headline</h2>",
        f"<p class='note'>{html.escape(logic.estimate_provenance(est, logic.links_of(scenario)))}</p>",
        _table(logic.summary_rows(est)),
        "<h2>Efficiency: from raw compute to effective compute</h2>",
        "<p class='note'>C_local = C_raw x eta_H x eta_comp x eta_act x eta_rep; C_quality = C_local x chi. "
        "eta_H, eta_comp and eta_act are heuristics; eta_rep is a published fit with a heuristic extension; "
        "chi is the Chinchilla refit (Besiroglu et al. 2024).</p>",
        _img(figures.waterfall_figure(est), "efficiency waterfall"),
        _table(logic.efficiency_rows(est)),
        "<h2>Where the time goes</h2>",
        _img(figures.breakdown_figure(est), "time breakdown"),
        _table(logic.breakdown_rows(est)),
        "<h2>Cost</h2>",
        _table(logic.cost_rows(est)),
        "<h2>WAN traffic per node</h2>",
        _table(logic.traffic_rows(est)),
        "<h2>Resilience: goodput vs scale</h2>",
        f"<p class='note'>{html.escape(res['caption'])}</p>",
        _img(
            figures.goodput_figure(res["chips"], res["curves"], marker=res["fleet_chips"]), "goodput vs scale"
        ),
        _table(res["rows"]),
        "<h3>Site loss</h3>",
        f"<p class='note'>{html.escape(res['site_loss_caption'])}</p>",
        _table(res["site_loss_rows"]),
        "<h2>Inputs</h2>",
        _table(_inputs_rows(scenario)),
        "<h2>Full result (Estimate.to_dict())</h2>",
        f"<details><summary>JSON</summary><pre>{html.escape(logic.to_json(est))}</pre></details>",
        "</body></html>\n",
    ]
    return "\n".join(parts)
