"""The answer card: a plan's answer in one block, the same in the app's Planner, `dispersal plan` and
the HTML report.

What it says (issue 24): the cost; the premium over one datacenter (`plan(..., baseline=True)`);
P(reach) with the cost band when a Monte Carlo ran (`uncertainty.plan_samples`: the fraction of
draws in which some plan reaches the target, and the P10-P90 cost over those draws); the
extrapolation flags; what binds; and one "cite this" sentence naming mode, metric, search and links.
Every figure is read from the plan's ``to_dict()`` (and, for the traffic, the plan's own estimate);
nothing is computed here but text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispersal.present import formats as F

#: A run this close to its time budget (fraction) is said to use all of it.
_FULL_BUDGET = 0.999


@dataclass(frozen=True, kw_only=True)
class AnswerCard:
    """A plan's answer: a headline, labelled lines and the "cite this" sentence."""

    headline: str
    lines: tuple[tuple[str, str], ...]
    cite: str

    def rows(self) -> list[dict[str, str]]:
        """The lines as table rows (``{"": label, "answer": text}``), the citation last."""
        return [{"": k, "answer": v} for k, v in (*self.lines, ("cite this", self.cite))]

    def text(self) -> str:
        """Plain text, one line per item (the CLI)."""
        return "\n".join(
            [self.headline, *(f"  {k}: {v}" for k, v in self.lines), f"  cite this: {self.cite}"]
        )

    def markdown(self) -> str:
        """Markdown: bold headline, a bullet per line, the citation last (the app). Plain paragraphs only:
        Streamlit draws a quote in a grey below the 4.5:1 contrast the app keeps."""
        bullets = "\n".join(f"- **{k}**: {v}" for k, v in self.lines)
        return f"**{self.headline}**\n\n{bullets}\n\n**Cite this:** {self.cite}"

    def html(self) -> str:
        """An HTML block for the report (escaped)."""
        items = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in self.lines)
        return (
            f"<div class='answer'><p><b>{html.escape(self.headline)}</b></p><ul>{items}</ul>"
            f"<p class='note'>Cite this: {html.escape(self.cite)}</p></div>"
        )


def _links(p: Mapping[str, Any], links: str) -> str:
    c = p.get("constraints") or {}
    s = p.get("scenario") or {}
    up = c.get("bandwidth_up_bits_per_s", s.get("bandwidth_up_bits_per_s"))
    down = c.get("bandwidth_down_bits_per_s", s.get("bandwidth_down_bits_per_s"))
    lat = c.get("latency_s", s.get("latency_s"))
    if up is None or down is None or lat is None:
        return "links as planned"
    side = "every link = the WAN" if links == "one" else "regional and pipeline links split"
    return f"WAN {F.bandwidth(up)} up / {F.bandwidth(down)} down, {F.duration(lat)} one way, {side}"


def _budget_days(p: Mapping[str, Any]) -> float | None:
    c = p.get("constraints") or {}
    s = p.get("scenario") or {}
    sec = c.get("max_duration_s", s.get("duration_s"))
    return None if sec is None else float(sec) / F.SECONDS_PER_DAY


def _premium(p: Mapping[str, Any]) -> str:
    prem, base = p.get("cost_premium"), p.get("centralized_cost_usd")
    if "cost_premium" not in p:
        return "not planned (plan with the centralized baseline: `dispersal plan` does by default)"
    if base is None:
        return "- (no single-datacenter plan reaches the target)"
    if prem is None:  # one datacenter reaches it; the dispersed plan does not
        return f"- (no plan under the rule reaches the target; one datacenter: {F.money(float(base))})"
    return f"{F.factor(float(prem))} the cost of one datacenter ({F.money(float(base))}, datacenter links, no rule)"


def _reach(samples: Mapping[str, Any] | None) -> str:
    if not samples:
        return "not sampled (the Uncertainty tab, or `dispersal plan --samples 200`)"
    frac = float(samples["feasible_fraction"])
    lo, hi = samples.get("cost_usd_p10", math.nan), samples.get("cost_usd_p90", math.nan)
    band = (
        f"; cost P10-P90 {F.money(lo)} - {F.money(hi)} over those draws"
        if math.isfinite(lo) and math.isfinite(hi)
        else ""
    )
    return f"{F.percent(frac, 0)} of {int(samples['samples']):,} Monte Carlo draws reach the target{band}"


def _binding(p: Mapping[str, Any], est: Mapping[str, Any] | None) -> str:
    """What limits the plan: the time budget, the node rule, and the busier WAN direction."""
    if not p.get("feasible"):
        return "; ".join(p.get("reasons") or ()) or "no plan reaches the target"
    parts = []
    budget = _budget_days(p)
    days = float(p["days"])
    if budget is not None and days >= _FULL_BUDGET * budget:
        parts.append(f"the time budget (the run uses all {F.days(budget)})")
    elif budget is not None:
        parts.append(f"not the time budget ({F.days(days)} of {F.days(budget)})")
    parts.append(
        f"the {p.get('regime', '')} rule caps each node at {p['chips_per_node']} x {p['hardware']} {p['precision']}"
    )
    if est is not None and est.get("traffic"):
        t = est["traffic"]
        up, down = float(t.get("link_utilisation_up", 0.0)), float(t.get("link_utilisation_down", 0.0))
        which, busy = ("downlink", down) if down > up else ("uplink", up)
        parts.append(f"WAN {which} {F.percent(busy, 0)} busy")
    return "; ".join(parts)


def answer_card(
    p: Mapping[str, Any],
    *,
    links: str = "one",
    estimate: Mapping[str, Any] | None = None,
    samples: Mapping[str, Any] | None = None,
    version: str | None = None,
) -> AnswerCard:
    """The answer card of a plan (`Plan.to_dict()`, optionally with the app's ``constraints``).

    `estimate`: the plan's own estimate (``estimate(plan.scenario).to_dict()``) for the traffic in
    both directions; `samples`: `UncertaintyResult.to_dict()` of the same target for P(reach).
    """
    target = F.flop(float(p["target_flop"]), unit=True)
    metric = str(p["metric"])
    links_text = _links(p, links)
    if p.get("feasible"):
        headline = (
            f"{target} ({metric}) for {F.money(float(p['cost_usd']))}: {int(p['nodes']):,} nodes of "
            f"{p['chips_per_node']}x {p['hardware']} {p['precision']}, {F.algorithm(p)}, "
            f"{F.count(float(p['params']))} parameters, {F.days(float(p['days']))}"
        )
        cost = F.money(float(p["cost_usd"]))
    else:
        headline = f"No plan reaches {target} ({metric})"
        cost = "infeasible"
    extrap = p.get("extrapolation") or []
    lines: list[tuple[str, str]] = [
        ("cost", cost),
        ("premium over one datacenter", _premium(p)),
        ("P(reach)", _reach(samples)),
        ("extrapolation", "; ".join(extrap) if extrap else "none (inside every fitted range)"),
        ("binding constraint", _binding(p, estimate)),
    ]
    if estimate is not None and estimate.get("traffic"):
        from dispersal.present.rows import traffic_text

        lines.append(("WAN traffic per node", traffic_text(estimate)))
    prem = p.get("cost_premium")
    cite = (
        f"{('dispersal ' + version) if version else F.release()}, {p['mode']} mode, metric {metric}, {p['search']} search, "
        f"objective {p.get('objective', 'cost')}, regime {p.get('regime', '')}; {links_text}"
        + (f", {F.days(b)} budget" if (b := _budget_days(p)) is not None else "")
        + _searched(p)
        + ": "
        + (
            f"reaching {target} of {metric} costs {cost}"
            + (f" ({F.factor(float(prem))} one datacenter)" if prem is not None else "")
            if p.get("feasible")
            else f"no plan reaches {target} of {metric}"
        )
        + "."
    )
    return AnswerCard(headline=headline, lines=tuple(lines), cite=cite)


def _searched(p: Mapping[str, Any]) -> str:
    """ ", algorithms searched: auto, hierarchical, decoupled; no site pipelines" (when the plan says)."""
    sr = p.get("searched")
    if not sr:
        return ""
    sites = sr.get("site_nodes") or []
    where = (
        "site pipelines of " + " / ".join(str(n) for n in sites) + " nodes" if sites else "no site pipelines"
    )
    return f", algorithms searched: {', '.join(sr.get('algorithms') or [])}; {where}"


def plan_label(p: Mapping[str, Any]) -> str:
    """Which scenario a view shows once a plan is taken as the scenario ("use this plan", `dispersal
    report --use-plan`): "plan: 1e25 FLOP c_quality, 48 x 8x a100_80gb fp16, diloco, 740 d, ..."."""
    return (
        f"plan: {F.flop(float(p['target_flop']), unit=True)} {p['metric']}, {int(p['nodes']):,} x "
        f"{p['chips_per_node']}x {p['hardware']} {p['precision']}, {F.algorithm(p)}, "
        f"{F.days(float(p['days']))}, {p['mode']} mode, regime {p.get('regime', '')}"
    )


def plan_card(d: Mapping[str, Any], *, links: str = "one") -> AnswerCard:
    """The card of one `dispersal plan --json` object: the plan's own estimate for the traffic, and its
    Monte Carlo keys (``feasible_fraction``, ``cost_usd_p10`` ..., present with ``--samples``) for P(reach)."""
    est = None
    if d.get("feasible") and d.get("scenario"):
        from dispersal.model.inputs.scenario import Scenario
        from dispersal.model.run.estimate import estimate

        est = estimate(Scenario.from_dict(dict(d["scenario"])), mode=d["mode"]).to_dict()
    return answer_card(d, links=links, estimate=est, samples=d if "feasible_fraction" in d else None)
