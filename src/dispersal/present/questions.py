"""The analyst's questions, asked the same way by the app, `dispersal report` and `dispersal counter`.

Each function turns a scenario (its SI dict, as `Scenario.to_dict()`) and the planner settings into
the model call the app's view makes, and returns the model's own ``to_dict()`` output; nothing is
computed here but arguments. The app (`dispersal.app.views`) and the CLI (`dispersal.cli.report`)
both call these, so the report written from the app's state and the one `dispersal report` writes
with the same options hold the same numbers.

The countermeasure convention (issue 24): both the app and `dispersal counter` default to the
report's convention, `countermeasures.Convention()` (paper mode, C_quality target, 548-day window,
chip-only cost, exact search, 100 Mbps / 100 ms links); the target and the baseline regime are the
question's. The app can switch to "this scenario" (its mode, time budget and links), which is
`dispersal counter --mode M --days D --bandwidth B --latency L`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError

#: progress(done, total, what is being computed now): called as long work completes.
Progress = Callable[[int, int, str], None]
#: The two countermeasure conventions: the report's (shared default of app and CLI), or the scenario's.
CONVENTIONS = ("report", "scenario")
#: Targets of the uncertainty question, multiples of the plan's target.
UNCERTAINTY_FACTORS: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)


def parse_target(text: str) -> float:
    """'1e25' or '10 YFLOP' -> FLOP (the model's unit parser; InputError naming 'target')."""
    return units.parse_flop(str(text), "target")


def parse_targets(text: str, *, allow_empty: bool = True) -> list[str]:
    """A comma list of compute targets ("1e24, 1e25") -> the texts, each checked (InputError naming
    'target'); empty -> [] when allowed. At most 8 targets (each one is a frontier search)."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts and not allow_empty:
        raise InputError("target", "must be a compute target such as 1e25, got nothing")
    if len(parts) > 8:
        raise InputError("target", f"at most 8 targets, got {len(parts)}")
    for p in parts:
        parse_target(p)
    return parts


def parse_premiums(text: str) -> list[float]:
    """A comma list of premiums over one datacenter ("1.5, 2, 5") -> floats in [1, 1e6] (x); 1 to 5 of
    them (InputError naming 'premium')."""
    out = []
    for p in [p.strip() for p in str(text).split(",") if p.strip()]:
        try:
            x = float(p)
        except ValueError:
            raise InputError("premium", f"cannot parse {p!r} as a number") from None
        if not (math.isfinite(x) and 1.0 <= x <= 1e6):
            raise InputError("premium", f"must be in [1, 1e6] x one datacenter, got {p}")
        out.append(x)
    if not 1 <= len(out) <= 5:
        raise InputError("premium", f"give 1 to 5 premiums, got {len(out)}")
    return out


def planner_args(
    sd: Mapping[str, Any],
    *,
    target: str,
    regime: str = "treaty",
    mode: str = "default",
    metric: str | None = None,
    objective: str = "cost",
    search: str | None = None,
    links: str = "one",
) -> dict[str, Any]:
    """JSON-able planner arguments: the planner settings plus the scenario's links and time budget.

    With links = "one" the regional and pipeline links are left to the planner, which makes them the
    WAN (as `dispersal plan` does). An unset MFU keeps the planner's own default. ``baseline``: the
    centralized baseline is planned too, for the premium over one datacenter.
    """
    split = links == "split"
    constraints: dict[str, Any] = {
        "bandwidth_up_bits_per_s": sd["bandwidth_up_bits_per_s"],
        "bandwidth_down_bits_per_s": sd["bandwidth_down_bits_per_s"],
        "latency_s": sd["latency_s"],
        "max_duration_s": sd["duration_s"],
        "compression_ratio": sd["compression_ratio"],
        "straggler": sd["straggler"],
        "pricing": sd["pricing"],
    }
    if sd.get("mfu") is not None:
        constraints["mfu"] = sd["mfu"]
    if split:
        constraints["regional_bandwidth_bits_per_s"] = sd["regional_bandwidth_bits_per_s"]
        constraints["pp_bandwidth_bits_per_s"] = sd["pp_bandwidth_bits_per_s"]
    return {
        "target": str(target),
        "regime": regime,
        "mode": mode,
        "metric": None if metric in (None, "auto") else metric,
        "objective": objective,
        "search": None if search in (None, "auto") else search,
        "links": "split" if split else "one",
        "constraints": constraints,
        "baseline": True,
    }


def run_plan(args: Mapping[str, Any]) -> dict[str, Any]:
    """`planner.plan(...)` on `planner_args` output -> Plan.to_dict() plus the constraints used."""
    from dispersal.model.search.planner import Constraints, plan

    c = Constraints(**args["constraints"])
    return plan(
        parse_target(args["target"]),
        regime_name=args["regime"],
        constraints=c,
        mode=args["mode"],
        metric=args["metric"],
        objective=args["objective"],
        search=args["search"],
        baseline=bool(args.get("baseline", False)),
    ).to_dict() | {"constraints": dict(args["constraints"])}


def convention_args(
    kind: str, sd: Mapping[str, Any] | None, *, mode: str, metric: str | None, search: str | None, regime: str
) -> dict[str, Any]:
    """`countermeasures.Convention` keywords: "report" = its defaults (the shared default of the app and
    `dispersal counter`) with the question's baseline regime; "scenario" = this scenario's mode, time
    budget (days, clipped to [1, 3650]) and links (min(up, down), latency), the planner's metric and search."""
    if kind not in CONVENTIONS:
        raise InputError("convention", f"must be one of {', '.join(CONVENTIONS)}, got {kind!r}")
    if kind == "report" or sd is None:
        return {"base_regime": regime}
    days = min(3650.0, max(1.0, float(sd["duration_s"]) / units.SECONDS_PER_DAY))
    return {
        "mode": mode,
        "metric": "c_quality" if metric in (None, "auto") else metric,
        "days": days,
        "bandwidth_bits_per_s": min(sd["bandwidth_up_bits_per_s"], sd["bandwidth_down_bits_per_s"]),
        "latency_s": sd["latency_s"],
        "search": "exact" if search in (None, "auto") else search,
        "base_regime": regime,
    }


def describe_convention(conv: Mapping[str, Any]) -> str:
    """`Convention.describe()` of these keywords (one line)."""
    from dispersal.model.analyses.countermeasures import Convention

    return str(Convention(**conv).describe())


def run_countermeasures(
    target: str,
    conv: Mapping[str, Any],
    progress: Progress | None = None,
    bundles: Sequence[str] | None = None,
    on_outcome: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """`countermeasures.analyse` (the no-lever baseline, then every lever alone and the default bundles,
    or `bundles`) -> Outcome.to_dict() rows; the same outcomes in the same order.

    The bundles are evaluated one at a time (`evaluate_bundle` against the baseline's cost, as
    `analyse` does) so that ``progress(done, total, name)`` can be called after each one, and
    ``on_outcome(rows so far)`` too (the app shows the table as it grows).
    """
    from dispersal.model.analyses import countermeasures as cm

    t = parse_target(target)
    convention = cm.Convention(**conv)
    items = [cm.NO_LEVER]
    for w in bundles if bundles is not None else [*cm.levers(), *cm.default_bundles()]:
        b = cm.parse_bundle(w)
        if b.name not in {x.name for x in items}:
            items.append(b)
    if progress is not None:
        progress(0, len(items), items[0].name)
    base = cm.evaluate_bundle(t, cm.NO_LEVER, convention=convention)
    outs = [base]
    if on_outcome is not None:
        on_outcome([base.to_dict()])
    for b in items[1:]:
        if progress is not None:
            progress(len(outs), len(items), b.name)
        outs.append(cm.evaluate_bundle(t, b, convention=convention, baseline_cost_usd=base.cost_usd))
        if on_outcome is not None:
            on_outcome([o.to_dict() for o in outs])
    if progress is not None:
        progress(len(outs), len(items), "")
    return [o.to_dict() for o in outs]


def run_uncertainty(
    target: str,
    plan: Mapping[str, Any],
    samples: int,
    seed: int,
    factors: tuple[float, ...] = UNCERTAINTY_FACTORS,
    progress: Progress | None = None,
    on_point: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """`uncertainty.plan_samples` at several targets around the chosen one (`planner_args` output as
    ``plan``): per target P(reach) (``feasible_fraction``), the P10/P50/P90 over the draws that reach
    it, and the nominal plan. ``progress(draws_done, draws_total, label)`` counts all targets' draws.

    The chosen target (factor 1) is drawn first and handed to ``on_point`` as soon as it is done (the
    app shows its P(reach) while the others are drawn); every target's draws are independent (same
    seed each), so the order changes no number. Points are returned in ``factors`` order."""
    from dispersal.model.analyses import uncertainty as unc
    from dispersal.model.search.planner import Constraints
    from dispersal.present import formats as F

    t0 = parse_target(target)
    c = Constraints(**plan["constraints"])
    points: dict[int, dict[str, Any]] = {}
    total = samples * len(factors)
    order = sorted(range(len(factors)), key=lambda i: factors[i] != 1.0)
    for n_done, i in enumerate(order):
        f = factors[i]
        label = f"target {n_done + 1} of {len(factors)} ({F.flop(t0 * f, unit=True)})"

        def report(done: int, _n: int, k: int = n_done, label: str = label) -> None:
            if progress is not None:
                progress(k * samples + done, total, label)

        report(0, samples)
        r = unc.plan_samples(
            t0 * f,
            samples=samples,
            seed=seed,
            regime_name=plan["regime"],
            constraints=c,
            mode=plan["mode"],
            metric=plan["metric"],
            search=plan["search"],
            progress=report,
        )
        points[i] = {
            "target_flop": t0 * f,
            "feasible_fraction": r.feasible_fraction,
            "percentiles": {k: list(v) for k, v in r.percentiles.items()},
            "nominal": dict(r.nominal),
            "metric": r.metric,
        }
        if on_point is not None:
            on_point(points[i])
    return {"points": [points[i] for i in range(len(factors))], "samples": samples, "seed": seed}


#: The Frontier view's premiums over one datacenter (as `dispersal frontier`'s default).
FRONTIER_PREMIUMS: tuple[float, ...] = (1.5, 2.0, 5.0)
#: The Frontier view's site counts for "the largest target at N sites" (`dispersal frontier`'s default).
FRONTIER_SITES: tuple[int, ...] = (10, 100, 1000)


def run_frontier(
    plan: Mapping[str, Any],
    samples: int = 0,
    seed: int = 0,
    *,
    targets: Sequence[str] | None = None,
    premiums: Sequence[float] = FRONTIER_PREMIUMS,
    sites: Sequence[int] = FRONTIER_SITES,
    on_curve: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """`frontier.frontier` at the plan's target (or ``targets``), regime and mode, the plan's constraints
    (its links are replaced by each grid bandwidth there), ``samples`` Monte Carlo draws per target for
    P(reach) and the bands -> Frontier.to_dict(). ``on_curve`` gets each target's first answer
    (`PremiumCurve.to_dict()`) as soon as its search is done."""
    from dispersal.model.analyses.frontier import frontier
    from dispersal.model.search.planner import Constraints

    return dict(
        frontier(
            targets_flop=tuple(parse_target(t) for t in (targets or [plan["target"]])),
            premiums=tuple(float(x) for x in premiums),
            sites=tuple(int(n) for n in sites),
            regime_name=plan["regime"],
            constraints=Constraints(**plan["constraints"]),
            mode=plan["mode"],
            samples=samples,
            seed=seed,
            on_curve=None if on_curve is None else (lambda c: on_curve(c.to_dict())),
        ).to_dict()
    )


def frontier_command(
    plan: Mapping[str, Any], samples: int, seed: int, targets: Sequence[str], premiums: Sequence[float]
) -> str:
    """The `dispersal frontier` command line with the same targets, premiums, regime, mode and draws
    (the CLI plans with the planner's default links and budget: 100 ms, 740 days)."""
    out = [
        "dispersal frontier",
        "--target " + ",".join(str(t) for t in targets),
        "--premium " + ",".join(f"{float(x):g}" for x in premiums),
        f"--regime {plan['regime']} --mode {plan['mode']} --samples {int(samples)} --seed {int(seed)}",
    ]
    return " ".join(out)


def run_frontier_year(
    plan: Mapping[str, Any], premiums: Sequence[float] = FRONTIER_PREMIUMS
) -> dict[str, Any]:
    """`frontier.over_time.frontier_over_time` at the plan's target, regime and mode: the least
    bandwidth per site within each premium per algorithm generation, then trend projections
    (`dispersal frontier --year`)."""
    from dispersal.model.analyses.frontier import over_time as ft

    return dict(
        ft.frontier_over_time(
            target_flop=parse_target(plan["target"]),
            premiums=tuple(float(x) for x in premiums),
            regime_name=plan["regime"],
            mode=plan["mode"],
        ).to_dict()
    )


def monitor_args(conv: Mapping[str, Any], target: str, lose_sites: int = 1) -> dict[str, Any]:
    """`monitor.compare` keywords under a countermeasure convention (`convention_args` output), so the
    Monitor view's P(detect) and the Countermeasures tab's are computed under ONE convention: its mode,
    regime, WAN (as the N-site plan's per-site link), latency and window (the time budget)."""
    from dispersal.model.analyses.countermeasures import Convention

    c = Convention(**conv)
    return {
        "targets_flop": [parse_target(target)],
        "wan_bits_per_s": c.bandwidth_bits_per_s,
        "latency_s": c.latency_s,
        "max_duration_s": c.days * units.SECONDS_PER_DAY,
        "regime_name": c.base_regime,
        "mode": c.mode,
        "lose_sites": int(lose_sites),
    }


def run_monitor(args: Mapping[str, Any]) -> dict[str, Any]:
    """`monitor.compare(**args)` (one building vs the N-site plan; `monitor_args` output as ``args``)."""
    from dispersal.model.analyses import monitor

    return dict(monitor.compare(**{**args, "targets_flop": tuple(args["targets_flop"])}))


#: `dispersal frontier --compare`'s planner defaults: latency, s and time budget, days (`--latency`, `--days`).
COMPARE_DEFAULT_LATENCY_S = 0.1
COMPARE_DEFAULT_DAYS = 740.0


def monitor_command(args: Mapping[str, Any]) -> str:
    """The `dispersal frontier --compare` command with the same target, WAN, mode, regime, site loss,
    time budget (``--days``) and latency (``--latency``); the last two only where they differ from the
    planner's defaults (740 days, 100 ms)."""
    t = ",".join(f"{float(x):g}" for x in args["targets_flop"])
    out = (
        f"dispersal frontier --compare --target {t} --wan {float(args['wan_bits_per_s']) / 1e6:g}Mbps "
        f"--mode {args['mode']} --regime {args['regime_name']} --lose-sites {int(args['lose_sites'])}"
    )
    days = float(args["max_duration_s"]) / units.SECONDS_PER_DAY
    if not math.isclose(days, COMPARE_DEFAULT_DAYS, rel_tol=1e-12):
        out += f" --days {days:.15g}"
    latency = float(args["latency_s"])
    if not math.isclose(latency, COMPARE_DEFAULT_LATENCY_S, rel_tol=1e-12):
        out += f" --latency {latency * 1e3:.15g}ms"
    return out


def run_fleet(sd: Mapping[str, Any], mode: str, metric: str = "c_quality") -> dict[str, Any]:
    """`fleet.fleet_search` on this scenario (the sidebar's fleet) -> FleetAnswer.to_dict() plus its
    answer sentences (`dispersal fleet`'s, shared)."""
    from dispersal.model.inputs.scenario import Scenario
    from dispersal.model.search.fleet import fleet_search
    from dispersal.present.fleet import answer_lines

    ans = fleet_search(Scenario.from_dict(dict(sd)), mode=mode, metric=metric)
    return {**ans.to_dict(), "lines": answer_lines(ans)}


def reach_samples(unc: Mapping[str, Any] | None, target: str) -> dict[str, Any] | None:
    """P(reach) and the cost band at ``target`` from a `run_uncertainty` result (the answer card's
    keys), or None when it has no point at that target."""
    if not unc:
        return None
    t0 = parse_target(target)
    for pt in unc["points"]:
        if math.isclose(float(pt["target_flop"]), t0, rel_tol=1e-9):
            lo, _mid, hi = pt["percentiles"]["cost_usd"]
            return {
                "feasible_fraction": pt["feasible_fraction"],
                "samples": unc["samples"],
                "cost_usd_p10": lo,
                "cost_usd_p90": hi,
            }
    return None


def with_reach(plan: Mapping[str, Any], unc: Mapping[str, Any] | None) -> dict[str, Any]:
    """The plan dict with P(reach) and its cost band at the plan's target merged in (the keys
    `dispersal plan --samples` adds), when ``unc`` (a `run_uncertainty` result) has that target."""
    out = dict(plan)
    r = reach_samples(unc, repr(float(plan["target_flop"])))
    if r is not None:
        out.update(r)
    return out
