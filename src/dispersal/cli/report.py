"""`dispersal report`: a self-contained HTML report of one scenario and, on request, every other view
(plan, frontier, countermeasures, uncertainty), asked as the app asks them (`present.questions`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from dispersal.cli._common import (
    MAX_SAMPLES,
    MAX_SEED,
    atomic_write_text,
    default_out,
    flop_target,
    guarded,
    number_in,
    output_file,
    print_json,
)
from dispersal.cli._groups import with_groups
from dispersal.cli._scenario import ScenarioArgOptions, check_mode
from dispersal.model.inputs.errors import InputError

_EPILOG = (
    "Same options, same report as the app's 'Download the report' (its Planner settings are --target, "
    "--plan-regime, --metric, --objective, --search, --links; its Countermeasures convention --convention; "
    "its Monte Carlo --uncertainty 200 --seed 0 (default here 100); its Resilience settings --lose-sites, --lose-at, --down-for, "
    "--run-days). --use-plan reports the plan's own scenario, as the app's 'Use this plan as the scenario'. "
    'JSON: {"path", "scenario", "label", "mode", "sections"}. Exit 0 = written (feasible or not), 2 = bad input.'
)

#: Monte Carlo draws of the default report (uncertainty section and the frontier's P(reach)): 100 keeps
#: the default report near a minute of CPU on the 2-core machine (docs/app.md); --uncertainty 200 is the app's.
DEFAULT_DRAWS = 100

_RES_KEYS = {"mtbf": "res_chip_mtbf_h", "restart": "res_restart_h", "max_chips": "res_max_chips"}
_CHOICES = {
    "metric": ("auto", "c_local", "c_quality"),
    "objective": ("cost", "nodes", "time"),
    "search": ("auto", "bisect", "exact"),
    "links": ("one", "split"),
    "convention": ("report", "scenario"),
}


def _choice(value: str, field: str) -> str:
    if value not in _CHOICES[field]:
        raise InputError(field, f"must be one of {', '.join(_CHOICES[field])}, got {value!r}")
    return value


def _optional_days(value: float | None, field: str) -> float | None:
    if value is None:
        return None
    return float(number_in(value, field, 0, 36_525, lo_open=True, unit="days"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ViewOptions:
    """Which of the app's views the report answers, and their draws (cli._groups)."""

    plan: Annotated[
        bool,
        typer.Option(
            "--plan/--no-plan", help="Plan --target with this scenario's links and budget: answer card."
        ),
    ] = True
    use_plan: Annotated[
        bool, typer.Option("--use-plan", help="Report the plan's own scenario (implies --plan).")
    ] = False
    frontier: Annotated[
        bool,
        typer.Option(
            "--frontier/--no-frontier",
            help="The limits of dispersal at --target (premiums 1.5x, 2x, 5x), --uncertainty draws for P(reach).",
        ),
    ] = True
    monitor: Annotated[
        bool,
        typer.Option(
            "--monitor/--no-monitor",
            help="One building vs N sites as a monitor sees them, under the countermeasure --convention.",
        ),
    ] = True
    counter: Annotated[
        bool,
        typer.Option(
            "--counter/--no-counter", help="Every countermeasure lever and the default bundles at --target."
        ),
    ] = True
    uncertainty: Annotated[
        int,
        typer.Option(
            help="Monte Carlo draws per target at 0.01x-10x --target, and per frontier target for its "
            "P(reach) (0 = no uncertainty section, frontier undrawn; the app: 200)."
        ),
    ] = DEFAULT_DRAWS
    seed: Annotated[int, typer.Option(help="Seed of --uncertainty.")] = 0
    monitor_lose_sites: Annotated[
        int,
        typer.Option(help="Monitor: sites lost for ever in its survivability rows (the app's Monitor tab)."),
    ] = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResilienceOptions:
    """The Resilience settings (the app's Resilience tab) as one option group (cli._groups)."""

    lose_sites: Annotated[int, typer.Option(help="Resilience: sites that go dark.")] = 1
    lose_at: Annotated[float, typer.Option(help="Resilience: they go dark after this many days.")] = 10.0
    down_for: Annotated[
        float | None, typer.Option(help="Resilience: dark for this many days (default: for ever).")
    ] = None
    run_days: Annotated[
        float | None, typer.Option(help="Resilience: planned run, days (default: the training time).")
    ] = None
    mtbf: Annotated[
        float | None, typer.Option(help="Resilience: chip MTBF, hours (default: Llama 3's ~50,678 h).")
    ] = None
    restart: Annotated[float | None, typer.Option(help="Resilience: restart time, hours (default 1/6).")] = (
        None
    )
    max_chips: Annotated[
        float | None, typer.Option(help="Resilience: right end of the goodput chart, chips (default 1M).")
    ] = None

    def settings(self) -> dict[str, Any]:
        """The app's ``res_*`` keys (display units), each range-checked."""
        number_in(self.lose_sites, "lose_sites", 0, 1_000_000)
        number_in(self.lose_at, "lose_at", 0, 36_525, unit="days")
        settings: dict[str, Any] = {
            "res_lose_sites": self.lose_sites,
            "res_lose_at_days": self.lose_at,
            "res_down_for_days": _optional_days(self.down_for, "down_for"),
            "res_run_days": _optional_days(self.run_days, "run_days"),
        }
        for opt, num, lo, hi, unit in (
            ("mtbf", self.mtbf, 0.0, 1e9, "h"),
            ("restart", self.restart, 0.0, 1e6, "h"),
            ("max_chips", self.max_chips, 1.0, 1e9, "chips"),
        ):
            if num is not None:
                settings[_RES_KEYS[opt]] = float(
                    number_in(num, opt, lo, hi, lo_open=opt == "mtbf", unit=unit)
                )
        return settings


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannerOptions:
    """The app's Planner settings and Countermeasures convention as one option group (cli._groups)."""

    plan_regime: Annotated[str, typer.Option(help="The planner's regime (the app's Planner: treaty).")] = (
        "treaty"
    )
    metric: Annotated[str, typer.Option(help="auto, c_local or c_quality (auto: the mode's).")] = "auto"
    objective: Annotated[str, typer.Option(help="cost, nodes or time.")] = "cost"
    search: Annotated[str, typer.Option(help="auto, bisect or exact.")] = "auto"
    links: Annotated[str, typer.Option(help="one (the WAN drives every link) or split.")] = "one"
    convention: Annotated[
        str,
        typer.Option(
            help="Countermeasures: report (paper mode, 548 days, 100 Mbps / 100 ms; the default of the app "
            "and `dispersal counter`) or scenario (this scenario's mode, budget and links)."
        ),
    ] = "report"

    def check(self) -> None:
        """InputError naming the first setting out of its choices (the regime last, as before)."""
        for field in ("metric", "objective", "search", "links", "convention"):
            _choice(getattr(self, field), field)


def _preset_label(scenario: str, name: str) -> str:
    """Which scenario: "preset X" while unedited, else the edited scenario's own name."""
    from dispersal.model.inputs.presets import load_scenario_dict, scenario_names

    if scenario in scenario_names() and load_scenario_dict(scenario).get("name") == name:
        return f"preset {scenario}"
    return name


@guarded
@with_groups
def report_cmd(
    *,
    sc: ScenarioArgOptions,
    out: Annotated[
        str | None,
        typer.Option(help="HTML file to write (default: dispersal-output/report/<scenario>.html)."),
    ] = None,
    target: Annotated[
        str,
        typer.Option(help="Compute target, FLOP, of the plan, frontier, countermeasures and uncertainty."),
    ] = "1e25",
    views: ViewOptions,
    planner: PlannerOptions,
    resilience: ResilienceOptions,
    json_: Annotated[
        bool, typer.Option("--json", help='Print {"path", "scenario", "label", "mode", "sections"} as JSON.')
    ] = False,
) -> None:
    """Write one self-contained HTML report (tables, embedded plots, full JSON) for a scenario. By default
    it answers: the plan's answer card (premium, P(reach)), the frontier, the monitor comparison, the
    countermeasures, the uncertainty, the estimate and resilience; --no-plan, --no-frontier, --no-monitor,
    --no-counter and --uncertainty 0 narrow it.

    Exit status: 0 written (feasible or not), 2 bad input.
    """
    m = sc.model_mode()
    planner.check()
    flop_target(target, "target")
    from dispersal.model.inputs.catalog import regime as lookup_regime

    lookup_regime(planner.plan_regime, "plan_regime")
    number_in(views.uncertainty, "uncertainty", 0, MAX_SAMPLES)
    number_in(views.seed, "seed", 0, MAX_SEED)
    settings = resilience.settings()
    s = sc.build()
    scenario = sc.scenario
    path = output_file(
        out if out is not None else default_out("report") / f"{Path(scenario).stem}.html", "out"
    )
    from dispersal.present import questions as q
    from dispersal.present.report import ReportParts, render_html
    from dispersal.present.resilience import DEFAULTS

    args = q.planner_args(
        s.to_dict(),
        target=target,
        regime=planner.plan_regime,
        mode=m.value,
        metric=planner.metric,
        objective=planner.objective,
        search=planner.search,
        links=planner.links,
    )
    label = _preset_label(scenario, s.name)
    p = q.run_plan(args) if (views.plan or views.use_plan) else None
    if views.use_plan:
        if p is None or not p.get("feasible"):
            raise InputError("use_plan", f"no plan reaches {target} FLOP here, so there is no plan to use")
        from dispersal.present.answer import plan_label

        label = plan_label(p)
        s = s.from_dict({**p["scenario"], "name": label})
        m = check_mode(str(p["mode"]))
    unc = q.run_uncertainty(target, args, views.uncertainty, views.seed) if views.uncertainty else None
    conv = q.convention_args(
        planner.convention,
        s.to_dict(),
        mode=m.value,
        metric=planner.metric,
        search=planner.search,
        regime=planner.plan_regime,
    )
    number_in(views.monitor_lose_sites, "monitor_lose_sites", 0, 1_000_000)
    mon_args = q.monitor_args(conv, target, views.monitor_lose_sites) if views.monitor else None
    parts = ReportParts(
        plan=q.with_reach(p, unc) if p is not None else None,
        links=planner.links,
        # the plan's target named, as the app's Frontier view asks it (the same question, one answer)
        frontier=q.run_frontier(args, views.uncertainty, views.seed, targets=[str(args["target"])])
        if views.frontier
        else None,
        counter=q.run_countermeasures(target, conv) if views.counter else None,
        convention=q.describe_convention(conv),
        uncertainty=unc,
        resilience={**DEFAULTS, **settings},
        label=label,
        monitor=q.run_monitor(mon_args) if mon_args is not None else None,
        monitor_days=float(mon_args["max_duration_s"]) / 86400.0 if mon_args is not None else None,
        target=target,
        regime=planner.plan_regime,
    )
    atomic_write_text(path, render_html(s, m, source=scenario, parts=parts))
    if json_:
        _print_json(path, scenario, label, m.value, parts)
        return
    typer.echo(str(path))


def _print_json(path: Path, scenario: str, label: str, mode: str, parts: Any) -> None:
    sections = [
        k for k in ("plan", "frontier", "monitor", "counter", "uncertainty") if getattr(parts, k) is not None
    ]
    print_json(
        {
            "path": str(path),
            "scenario": scenario,
            "label": label,
            "mode": mode,
            "sections": [*sections, "estimate", "resilience"],
        }
    )


def register(app: typer.Typer) -> None:
    """Add `report` to the root app."""
    app.command("report", epilog=_EPILOG)(report_cmd)
