"""A self-contained HTML report of one scenario, for readers who will not run anything.

One file: inline CSS, figures as inline SVG, tables, and the full `Estimate.to_dict()` JSON at the
end. It covers every view of the app (issue 24): the plan with its answer card, the frontier, the
countermeasures, the uncertainty, and the scenario's estimate and resilience; the app writes it from
its current state, `dispersal report` from the same options. Needs matplotlib, not streamlit.
"""

from __future__ import annotations

import datetime as _dt
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dispersal.model.inputs.scenario import Mode, Scenario
from dispersal.model.run.estimate import estimate
from dispersal.present import export, provenance, rows
from dispersal.present import formats as F
from dispersal.present import frontier as present_frontier
from dispersal.present import monitor as present_monitor
from dispersal.present.answer import plan_card
from dispersal.present.resilience import DEFAULTS as RESILIENCE_DEFAULTS
from dispersal.present.resilience import resilience

if TYPE_CHECKING:
    from dispersal.present import figures

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
table{max-width:100%}td,th{overflow-wrap:anywhere;word-break:break-word}
svg{max-width:100%;height:auto}
@media print{body{max-width:none;margin:0;padding:0;font-size:10pt}table{font-size:8pt}td,th{padding:2px 4px}
details{display:none}h2{break-after:avoid}figure,table{break-inside:avoid}}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}
.ok{color:#1a7f37;font-weight:600}.bad{color:#b42318;font-weight:600}.note{color:#4a4a4a;font-size:.9em}
img{max-width:100%;height:auto}.answer{border:1px solid #bbb;padding:.2em 1em;border-radius:6px}pre{background:#f7f7f7;padding:.8em;overflow:auto;font-size:.8em}
"""


def _table(table_rows: Sequence[Mapping[str, Any]]) -> str:
    if not table_rows:
        return "<p class='note'>(none)</p>"
    cols = list(table_rows[0].keys())
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>"
        for r in table_rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(chart: figures.Chart, alt: str) -> str:
    """The app's own figure as inline SVG (alt text as its accessible name, values on hover)."""
    from dispersal.present import figures  # matplotlib on first use: the app starts without it

    chart.alt = f"{alt}. {chart.alt}"
    return f"<figure>{figures.svg_markup(chart)}</figure>"


def _inputs_rows(s: Scenario) -> list[dict[str, str]]:
    out = []
    for k, v in s.to_dict().items():
        if k in ("site", "churn"):
            continue  # the sites are their own table (`_site_input_rows`), not a Python list
        if v is None:
            text = "(mode default)" if k not in ("tokens", "active_params") else "(derived)"
        else:
            text = F.by_key(k, v, plain=True)
        out.append({"input": k, "value": text})
    return out


def _site_input_rows(s: Scenario) -> list[dict[str, str]]:
    """The scenario's [[site]] tables, one row each, every key formatted by its name."""
    d = s.to_dict().get("site") or []
    keys = list(dict.fromkeys(k for r in d for k in r))
    return [{k: F.by_key(k, r[k], plain=True) if k in r else "-" for k in keys} for r in d]


def _churn_rows(s: Scenario) -> list[dict[str, str]]:
    return [{k: str(v) for k, v in r.items()} for r in s.to_dict().get("churn") or []]


@dataclass(frozen=True, kw_only=True)
class ReportParts:
    """What a report covers beyond the scenario's estimate, each the model's own ``to_dict()`` output, as
    the app holds it and `dispersal report` computes it with the same options (`present.questions`).

    plan: `Plan.to_dict()` (+ ``constraints``; + Monte Carlo keys for P(reach)); frontier:
    `Frontier.to_dict()`; counter: `Outcome.to_dict()` rows, the no-lever baseline first; uncertainty:
    `questions.run_uncertainty` output; resilience: the settings (``res_*`` keys, display units);
    label: which scenario (`dispersal.app.logic.scenario_label`, or the CLI's "preset X" / "plan: ...");
    convention: the countermeasure convention's one-line description."""

    plan: Mapping[str, Any] | None = None
    links: str = "one"
    frontier: Mapping[str, Any] | None = None
    counter: Sequence[Mapping[str, Any]] | None = None
    convention: str = ""
    uncertainty: Mapping[str, Any] | None = None
    resilience: Mapping[str, Any] = field(default_factory=lambda: dict(RESILIENCE_DEFAULTS))
    label: str = ""
    monitor: Mapping[str, Any] | None = None
    """`monitor.compare` output (one building vs N sites), under the countermeasure convention."""
    monitor_days: float | None = None
    target: str = ""
    regime: str = ""


def _frontier_chart(fr: Mapping[str, Any]) -> figures.Chart:
    from dispersal.present.frontier_figures import frontier_figure

    return frontier_figure(fr)


def _sections(parts: ReportParts) -> list[str]:
    """The plan, frontier, countermeasures and uncertainty sections that were asked for."""
    from dispersal.present import figures

    out: list[str] = []
    if parts.plan is not None:
        p = parts.plan
        out += ["<h2>Plan</h2>", plan_card(p, links=parts.links).html()]
        if p.get("constraints"):  # the app's and `report --plan`'s plans; a `plan --json` object has none
            out.append(f"<p class='note'>{html.escape(provenance.plan_provenance(p, parts.links))}</p>")
        if p.get("feasible"):
            out += [_img(figures.plan_figure(p), "plan"), _table(rows.plan_rows(p))]
    if parts.frontier is not None:
        fr = parts.frontier
        out += [
            "<h2>Frontier: where dispersal stops</h2>",
            f"<p class='note'>{html.escape(present_frontier.headline(fr))} Links: each grid bandwidth per site "
            f"(the frontier replaces the scenario's WAN), the planner's budget. "
            + html.escape("; ".join(str(n) for n in fr.get("notes", [])))
            + "</p>",
            _img(_frontier_chart(fr), "frontier"),
            # On its side (one column per target and premium): every field the analysis returns fits A4.
            _table(
                present_frontier.limit_columns(fr)
                if len(fr.get("limits", [])) <= 6
                else present_frontier.limit_rows(fr)
            ),
            "<h3>The largest target at N sites</h3>",
            _table(present_frontier.at_sites_rows(fr)),
        ]
    if parts.monitor is not None:
        d = parts.monitor
        out += [
            "<h2>Monitor: one building vs N sites</h2>",
            f"<p class='note'>Convention (shared with the countermeasures below): "
            f"{html.escape(present_monitor.convention_line(d, parts.monitor_days))}.</p>",
            _table(present_monitor.compare_table(d)),
            "<p class='note'>"
            + html.escape(
                "; ".join(
                    f"{r['channel']} {r['parameter']} = {r['value']:g} ({r['status']})" for r in d["rates"]
                )
            )
            + "</p>",
        ]
    if parts.counter is not None:
        cm = list(parts.counter)
        blocked = sum(1 for o in cm if rows.blocks_the_run(o))
        out += [
            "<h2>Countermeasures</h2>",
            f"<p class='note'>Convention: {html.escape(parts.convention)}. {blocked} of {len(cm) - 1} levers "
            "and bundles block the run (no plan reaches the target); they come first, then the rest by the "
            "cost multiple they impose.</p>",
            _img(figures.countermeasures_figure(rows.countermeasure_order(cm)), "countermeasures"),
            _table(rows.countermeasure_rows(cm)),
        ]
    if parts.uncertainty is not None:
        u = parts.uncertainty
        out += [
            "<h2>Uncertainty</h2>",
            f"<p class='note'>Monte Carlo over the uncertain fits and heuristics, {int(u['samples']):,} draws "
            f"per target, seed {int(u['seed'])}: P(reach) first (the share of draws in which some plan reaches "
            "the target), then the cost band over the draws that reach it.</p>",
            _img(figures.uncertainty_figure(u), "uncertainty"),
            _table(rows.uncertainty_rows(u)),
        ]
    return out


def _title(label: str, m: Mode, parts: ReportParts, scenario: Scenario) -> str:
    """The report's title names what it shows: the scenario (label, not a preset's paper-row title in
    another mode), the mode, the regime and the target of its plan and frontier."""
    # The planner's regime when a planner section is shown; else the scenario's own.
    asked = any(
        x is not None for x in (parts.plan, parts.frontier, parts.monitor, parts.counter, parts.uncertainty)
    )
    bits = [f"{m.value} mode", f"regime {(parts.regime if asked and parts.regime else scenario.regime)}"]
    if parts.target and (parts.plan is not None or parts.frontier is not None):
        bits.append(f"target {parts.target} FLOP")
    return f"{label} ({', '.join(bits)})"


def _contents(parts: ReportParts) -> str:
    """The sections this report holds, in order (a reader sees at once what was asked)."""
    names = [
        ("Plan (answer card)", parts.plan),
        ("Frontier", parts.frontier),
        ("Monitor", parts.monitor),
        ("Countermeasures", parts.counter),
        ("Uncertainty", parts.uncertainty),
    ]
    have = [n for n, v in names if v is not None] + ["Estimate", "Resilience", "Inputs"]
    return f"<p class='note'>Sections: {html.escape(', '.join(have))}.</p>"


def render_html(
    scenario: Scenario,
    mode: Mode | str = Mode.DEFAULT,
    *,
    source: str = "",
    plan: Mapping[str, Any] | None = None,
    parts: ReportParts | None = None,
) -> str:
    """The report as one HTML string (every number from `dispersal.model`).

    `parts`: the other views' results (`ReportParts`); `plan` alone is kept as a shorthand for
    ``ReportParts(plan=plan)``. The scenario's estimate, resilience and inputs are always included.
    """
    from dispersal.present import figures

    if parts is None:
        parts = ReportParts(plan=plan)
    m = Mode(mode)
    est = estimate(scenario, mode=m).to_dict()
    status = (
        "<span class='ok'>feasible</span>"
        if est["feasible"]
        else "<span class='bad'>infeasible</span>: " + html.escape("; ".join(est["reasons"]))
    )
    res = resilience(est, parts.resilience)
    label = parts.label or (f"scenario {source}" if source else scenario.name)
    title = _title(label, m, parts, scenario)
    parts_html = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>dispersal report: {html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='note'>Scenario shown: {html.escape(label)} (its title: {html.escape(scenario.name)}). "
        f"{html.escape(F.release())}, {m.value} mode"
        + (f", from {html.escape(source)}" if source else "")
        + f", generated {_dt.date.today().isoformat()}. Status: {status}. Cite this as: "
        f"{html.escape(F.release())}, dispersal report {html.escape(source or scenario.name)}, {m.value} mode"
        + (f", target {html.escape(parts.target)} FLOP" if parts.target else "")
        + (f", planner regime {html.escape(parts.regime)}" if parts.regime else "")
        + ".</p>",
        _contents(parts),
        *_sections(parts),
        "<h2>Estimate: headline</h2>",
        f"<p class='note'>{html.escape(provenance.estimate_provenance(est, provenance.links_of(scenario)))}</p>",
        _table(rows.summary_rows(est)),
        "<h2>Efficiency: from raw compute to effective compute</h2>",
        "<p class='note'>C_local = C_raw x eta_H x eta_comp x eta_act x eta_rep; C_quality = C_local x chi. "
        "eta_H, eta_comp and eta_act are heuristics; eta_rep is a published fit with a heuristic extension; "
        "chi is the Chinchilla refit (Besiroglu et al. 2024).</p>",
        _img(figures.waterfall_figure(est), "efficiency waterfall"),
        _table(rows.efficiency_rows(est)),
        "<h2>Where the time goes</h2>",
        _img(figures.breakdown_figure(est), "time breakdown"),
        _table(rows.breakdown_rows(est)),
        "<h2>Cost</h2>",
        _table(rows.cost_rows(est)),
        "<h2>WAN traffic per node</h2>",
        _table(rows.traffic_rows(est)),
        *(
            [
                "<h2>Per site</h2>",
                f"<p class='note'>{html.escape(rows.sync_pacing_text(est))}</p>",
                _table(rows.site_rows(est)),
            ]
            if est.get("sites")
            else []
        ),
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
        *(["<h3>Sites</h3>", _table(_site_input_rows(scenario))] if scenario.sites else []),
        *(
            ["<h3>Churn (nodes joining and leaving)</h3>", _table(_churn_rows(scenario))]
            if scenario.churn
            else []
        ),
        "<h2>Full result (Estimate.to_dict())</h2>",
        f"<details><summary>JSON</summary><pre>{html.escape(export.to_json(est))}</pre></details>",
        "</body></html>\n",
    ]
    return "\n".join(parts_html)
