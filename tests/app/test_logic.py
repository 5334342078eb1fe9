"""The web app's pure helpers (no streamlit, no browser): UI state <-> URL <-> Scenario, exports."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest

from dispersal.app import compare, logic, views
from dispersal.model import Estimate, Scenario, estimate
from dispersal.model.inputs.presets import load_scenario, scenario_names
from dispersal.model.inputs.timelimit import TREATY, UNREGULATED, max_run_length_s
from dispersal.present import export, figures
from dispersal.present import rows as present_rows


def _scenario(ui: dict[str, Any]) -> Scenario:
    built = logic.build(ui)
    assert built.scenario is not None, built.error
    return built.scenario


def _close(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], float) and isinstance(b[k], float):
            assert a[k] == pytest.approx(b[k], rel=1e-12), k
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("preset", scenario_names(with_sites=False))
def test_preset_ui_round_trip_gives_the_preset_scenario(preset: str) -> None:
    _close(_scenario(logic.default_ui(preset)).to_dict(), load_scenario(preset).to_dict())


def test_default_link_carries_only_preset_and_mode() -> None:
    assert logic.query_from_ui(logic.default_ui()) == {"preset": "paper_threat_model", "mode": "default"}


def test_query_round_trip() -> None:
    ui = logic.default_ui("intellect1")
    ui.update(
        up_mbps=1234.5,
        latency_ms=0.1 + 0.2,
        num_nodes=7,
        moe=True,
        active_params_b=2.5,
        tokens_t=None,
        algorithm="hierarchical",
        duration_source="growth",
        mode="paper",
        plan_target="3e25",
        regional_mbps=None,
        error_feedback=not ui["error_feedback"],  # a value that differs from the preset's
    )
    q = logic.query_from_ui(ui)
    assert all(isinstance(v, str) for v in q.values())
    assert (
        q["up_mbps"] == "1234.5"
        and q["tokens_t"] == ""
        and q["error_feedback"] == logic.encode(ui["error_feedback"])
    )
    back, warnings = logic.ui_from_query(q)
    assert warnings == []
    assert back == ui
    for k in ui:
        assert type(back[k]) is type(ui[k]), k


def test_query_lists_and_bad_values_are_reported_not_raised() -> None:
    ui, warnings = logic.ui_from_query(
        {
            "preset": ["intellect1"],
            "up_mbps": ["abc"],
            "num_nodes": "2.5",
            "hardware": "nonsense",
            "bogus": "1",
            "moe": "maybe",
        }
    )
    assert ui["preset"] == "intellect1"
    assert ui["up_mbps"] == logic.default_ui("intellect1")["up_mbps"]
    assert len(warnings) == 5
    assert any("up_mbps" in w and "number" in w for w in warnings)
    assert any("bogus" in w for w in warnings)
    ui, warnings = logic.ui_from_query({"preset": "no_such"})
    assert ui["preset"] == "paper_threat_model" and "no such preset" in warnings[0]


def test_changing_an_input_changes_the_result() -> None:
    ui = logic.default_ui("intellect1")
    slow = estimate(logic.build(ui).scenario)
    ui["up_mbps"] = ui["down_mbps"] = 2000.0
    fast = estimate(logic.build(ui).scenario)
    assert fast.days < slow.days


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("num_nodes", 0, "Nodes (sites): must be an integer >= 1, got 0"),
        ("mfu", 1.5, "MFU: must be in (0, 1], got 1.5"),
        ("up_mbps", -5.0, "WAN upload: must be > 0 Mbps, got -5 Mbps"),
        ("num_nodes", 2.5, "Nodes (sites): must be a whole number, got 2.5"),
        ("params_b", None, "Total parameters: must be a number, got nothing"),
        ("compression_ratio", 0.5, "Pseudo-gradient compression ratio: must be >= 1, got 0.5"),
        ("growth_software", 0.5, "growth"),
    ],
)
def test_input_errors_are_one_line_and_name_the_field(key: str, value: object, field: str) -> None:
    ui = logic.default_ui()
    ui[key] = value
    if key.startswith("growth"):
        ui["duration_source"] = "growth"
        ui["growth_hardware"] = ui["growth_investment"] = 1.0
    built = logic.build(ui)
    assert built.scenario is None
    assert built.error is not None and "\n" not in built.error
    # Worded with the field's own label and unit, never the model's SI field names.
    if key.startswith("growth"):
        assert built.error.startswith(field), built.error
    else:
        assert built.error == field


def test_moe_and_duration_from_growth_rates() -> None:
    ui = logic.default_ui()
    ui.update(moe=True, active_params_b=20.0, moe_layers=32, duration_source="growth")
    s = _scenario(ui)
    assert s.active_params == 20e9 and s.moe_layers == 32
    assert s.duration_s == max_run_length_s(*TREATY)
    ui.update(
        moe=False,
        growth_hardware=UNREGULATED[0],
        growth_software=UNREGULATED[1],
        growth_investment=UNREGULATED[2],
    )
    s = _scenario(ui)
    assert s.active_params is None and s.moe_layers == 0
    assert s.duration_s == max_run_length_s(*UNREGULATED)


def test_exports_are_the_estimate() -> None:
    s = load_scenario("gpt4_level_gh200")
    e = estimate(s, mode="paper")
    d = e.to_dict()
    assert Estimate.from_dict(json.loads(export.to_json(d))) == e
    rows = dict(csv.reader(io.StringIO(export.to_csv(d))))
    assert float(rows["c_local_flop"]) == e.c_local_flop
    assert float(rows["efficiency.eta_rep"]) == e.efficiency.eta_rep
    assert rows["scenario.hardware"] == "gh200"


def test_json_export_has_no_nan() -> None:
    d = estimate(Scenario(num_nodes=1)).to_dict()
    json.loads(export.to_json(d))  # strict JSON even if a figure is non-finite


def test_waterfall_ends_at_the_model_figures() -> None:
    d = estimate(load_scenario("llama405b_level_a100")).to_dict()
    steps = present_rows.waterfall_steps(d)
    assert steps[0][1] == d["c_raw_flop"]
    assert steps[3][2] == d["c_local_flop"]
    assert steps[-1][2] == d["c_quality_flop"]
    prod = math.prod(d["efficiency"][k] for k in ("eta_h", "eta_comp", "eta_act", "eta_rep"))
    assert steps[2][2] * d["efficiency"]["eta_rep"] == pytest.approx(d["c_raw_flop"] * prod, rel=1e-12)
    assert d["c_raw_flop"] * d["efficiency"]["eta"] == pytest.approx(d["c_local_flop"], rel=1e-9)


def test_tables_and_figures_render() -> None:
    d = estimate(load_scenario("paper_threat_model")).to_dict()
    for rows in (
        present_rows.summary_rows(d),
        present_rows.breakdown_rows(d),
        present_rows.efficiency_rows(d),
        present_rows.cost_rows(d),
        present_rows.traffic_rows(d),
    ):
        assert rows and all(isinstance(v, str) for r in rows for v in r.values())
    for fig in (figures.waterfall_figure(d), figures.breakdown_figure(d)):
        assert figures.png_bytes(fig).startswith(b"\x89PNG")


def test_planner_view_uses_the_scenario_links() -> None:
    ui = logic.default_ui()
    ui.update(mode="paper", plan_target="1e24")
    args = views.plan_args(ui, logic.scenario_dict(ui))
    assert args["constraints"]["bandwidth_up_bits_per_s"] == 100e6
    p = views.run_plan(args)
    assert p["feasible"] and p["runners_up"]
    assert p["c_local_flop"] >= 1e24 * (1 - 1e-9)
    rows = present_rows.plan_rows(p)
    assert len(rows) == len(p["runners_up"])
    assert figures.png_bytes(figures.plan_figure(p)).startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="target"):
        views.run_plan({**args, "target": "lots"})


def test_resilience_view() -> None:
    d = estimate(load_scenario("gpt4_level_gh200")).to_dict()
    res = views.resilience(d, logic.default_ui())
    assert res["fleet_chips"] == 101 * 16
    assert set(res["curves"]) == {"ddp", "ddp_elastic", "diloco", "decoupled"}
    assert all(0 < y <= 1 for ys in res["curves"].values() for y in ys)
    assert res["chips"] == sorted(res["chips"])


def test_optional_views_say_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "optional_module", lambda name: None)
    s = Scenario()
    assert "not available in this version" in str(views.countermeasures_view(None, s, "default"))
    assert "not available in this version" in str(views.uncertainty_view(None, s, "default"))


def test_optional_module_missing_is_none() -> None:
    assert views.optional_module("no_such_module_here") is None


@pytest.mark.slow
def test_countermeasures_and_uncertainty_views() -> None:
    if views.optional_module("countermeasures") is None or views.optional_module("uncertainty") is None:
        pytest.skip("countermeasures / uncertainty modules not in this version")
    ui = logic.default_ui()
    ui.update(mode="paper", plan_target="1e24")
    conv = views.convention_args(ui, logic.scenario_dict(ui))
    calls: list[tuple[int, int, str]] = []
    outs = views.run_countermeasures("1e24", conv, lambda *a: calls.append(a))
    assert outs[0]["lever"] == "none" and len(outs) > 1
    # Honest progress: one call before each evaluation (naming it) and one at the end; done counts up.
    n = len(outs)
    assert [c[:2] for c in calls] == [(i, n) for i in range(n + 1)]
    assert [c[2] for c in calls[:-1]] == [o["lever"] for o in outs]
    rows = views.countermeasure_rows(outs)
    assert len(rows) == len(outs)
    assert figures.png_bytes(figures.countermeasures_figure(outs)).startswith(b"\x89PNG")
    plan = views.plan_args(ui, logic.scenario_dict(ui))
    seen: list[tuple[int, int, str]] = []
    res = views.run_uncertainty(
        "1e24", plan, samples=20, seed=0, factors=(0.1, 1.0), progress=lambda *a: seen.append(a)
    )
    assert len(res["points"]) == 2
    done = [c[0] for c in seen]
    assert done == sorted(done) and done[0] == 0 and seen[-1][:2] == (40, 40)
    # The chosen target (1e24) is drawn first, so its answer shows while the other is drawn (issue 34).
    assert {c[1] for c in seen} == {40} and seen[0][2] == "target 1 of 2 (1e+24 FLOP)"
    assert (20, 40, "target 2 of 2 (1e+23 FLOP)") in seen
    for p in res["points"]:
        lo, mid, hi = p["percentiles"]["cost_usd"]
        assert lo <= mid <= hi
    assert len(views.uncertainty_rows(res)) == 2
    assert figures.png_bytes(figures.uncertainty_figure(res)).startswith(b"\x89PNG")


def test_custom_hardware_fields_reach_the_model() -> None:
    """Custom per-chip FLOP/s, memory, price and power override the catalogue and round-trip the UI."""
    from dispersal.app import logic
    from dispersal.model.run.estimate import estimate

    ui = logic.default_ui()
    ui.update(
        chip_tflops=495.0, chip_memory_gb=160.0, chip_price_usd=10000.0, chip_tdp_w=350.0, chips_per_node=0
    )
    built = logic.build(ui)
    assert built.error is None and built.scenario is not None
    e = estimate(built.scenario, mode="paper")
    assert e.chips_per_node == 32  # 15,840 / 495 TFLOP/s under the treaty rule
    assert e.node_memory_bytes == 32 * 160e9
    assert logic.ui_from_scenario(built.scenario)["chip_memory_gb"] == 160.0


class _FakeBar:
    def __init__(self) -> None:
        self.states: list[tuple[float, str]] = []

    def progress(self, value: float, text: str = "") -> None:
        self.states.append((value, text))


class _FakeSt:
    def __init__(self) -> None:
        self.bar = _FakeBar()

    def progress(self, value: float, text: str = "") -> _FakeBar:
        self.bar.progress(value, text)
        return self.bar


def test_progress_bar_shows_the_work_done() -> None:
    st = _FakeSt()
    update, bar = views.progress_bar(st, "draws")
    update(0, 800, "target 1 of 4")
    update(200, 800, "target 2 of 4")
    update(800, 800, "")
    assert bar is st.bar
    assert st.bar.states == [
        (0.0, "Starting: 0 draws done"),
        (0.0, "0 of 800 draws done; now: target 1 of 4"),
        (0.25, "200 of 800 draws done; now: target 2 of 4"),
        (1.0, "800 of 800 draws done"),
    ]


@pytest.mark.slow
def test_countermeasures_one_at_a_time_equal_analyse() -> None:
    """The view evaluates bundles one by one (for its progress bar): the outcomes equal `analyse`'s."""
    from dispersal.model.analyses import countermeasures as cm

    ui = logic.default_ui()
    ui.update(mode="paper", plan_target="1e24")
    conv = views.convention_args({**ui, "cm_convention": "scenario"}, logic.scenario_dict(ui))
    picked = ("threshold_4", "bandwidth_cap+hbm")
    got = views.run_countermeasures("1e24", conv, bundles=picked)
    want = [o.to_dict() for o in cm.analyse(1e24, picked, convention=cm.Convention(**conv))]
    assert json.dumps(got, sort_keys=True, default=str) == json.dumps(want, sort_keys=True, default=str)


# --- issue 24: bad links, one scenario through the views ---------------------------------------------------


def test_bad_url_values_are_ignored_with_a_warning_never_applied() -> None:
    base = logic.default_ui()
    ui, warnings = logic.ui_from_query(
        {"num_nodes": "-4", "res_max_chips": "1e30", "latency_ms": "-1", "up_mbps": "250"}
    )
    assert ui["num_nodes"] == base["num_nodes"] and ui["res_max_chips"] == base["res_max_chips"]
    assert ui["latency_ms"] == base["latency_ms"] and ui["up_mbps"] == 250.0
    assert warnings == [
        "ignored num_nodes='-4': Nodes (sites): must be an integer >= 1, got -4",
        "ignored res_max_chips='1e30': Largest fleet on the x axis: must be in [1, 1,000,000,000] chips, "
        "got 1e+30 chips",
        "ignored latency_ms='-1': WAN one-way latency: must be >= 0 ms, got -1 ms",
    ]
    assert logic.build(ui).scenario is not None
    # Values each field allows that the model rejects together: the one that blocks is dropped.
    ui, warnings = logic.ui_from_query({"precision": "fp8", "hardware": "a100_40gb"})
    assert (ui["hardware"], ui["precision"]) == ("h100_sxm", "fp8")
    assert len(warnings) == 1 and warnings[0].startswith("ignored hardware='a100_40gb': Precision:")
    assert logic.build(ui).scenario is not None


def test_every_view_says_which_scenario_and_an_edit_drops_the_preset_title() -> None:
    ui = logic.default_ui()
    assert logic.scenario_label(ui) == "preset paper_threat_model"
    built = logic.build(ui)
    assert built.scenario is not None and built.scenario.name == "paper threat model (Table 1, 1e24 row)"
    ui.update(num_nodes=8, up_mbps=30.0)
    assert logic.scenario_label(ui) == "preset paper_threat_model, edited: Nodes (sites), WAN upload"
    built = logic.build(ui)
    assert built.scenario is not None and "1e24 row" not in built.scenario.name
    assert built.scenario.name == logic.scenario_label(ui)


def test_use_this_plan_makes_the_plan_the_scenario() -> None:
    """The plan's scenario replaces the sidebar's: the Estimate tab then shows the plan's own estimate
    and the Resilience tab a fleet of the plan's sites; the label names the plan until an edit."""
    from dispersal.model import estimate

    ui = logic.default_ui()
    ui.update(mode="paper", plan_target="1e24")
    p = views.run_plan(views.plan_args(ui, logic.scenario_dict(ui)))
    assert p["feasible"]
    new, origin = logic.ui_from_plan(ui, p)
    assert new["plan_target"] == "1e24" and new["mode"] == "paper"
    label = logic.scenario_label(new, origin)
    assert label == logic.plan_label(p) and label.startswith(f"plan: 1e+24 FLOP c_local, {p['nodes']:,} x ")
    built = logic.build(new, origin)
    assert built.scenario is not None and built.scenario.name == label
    got = estimate(built.scenario, mode="paper").to_dict()
    want = estimate(Scenario.from_dict(p["scenario"]), mode="paper").to_dict()
    for d in (got, want):  # the label, and split_links unset (None) vs False: both mean one link
        d["scenario"].pop("name"), d["scenario"].pop("split_links")
        # ...and the override note that names an explicit split_links=false (the planner's).
        d["notes"] = [n for n in d["notes"] if "split_links" not in n]
    assert got == want
    assert got["num_nodes"] == p["nodes"] and got["chips_per_node"] == p["chips_per_node"]
    res = views.resilience(got, new)
    assert res["spec"]["sites"] == p["nodes"]
    new["num_nodes"] = p["nodes"] + 1
    assert logic.scenario_label(new, origin) == f"{label}, edited: Nodes (sites)"


def test_comparison_sweeps_grow_the_chart_on_screen_and_reuse_the_planners_answer() -> None:
    """`compare.sweeps` with a fake planner: the chart on screen is planned first and handed over after each
    point (x order), the point asking for the Planner's own plan (centralized baseline aside) takes that
    plan without planning and comes first, a failing plan is a row with its error, rows come in x order."""
    args = views.plan_args(logic.default_ui(), logic.scenario_dict(logic.default_ui()))
    asked: list[dict[str, Any]] = []

    def plan(a: dict[str, Any]) -> dict[str, Any]:
        asked.append(a)
        c = a["constraints"]
        if c["bandwidth_up_bits_per_s"] == 10e6 and a["target"] == args["target"]:
            raise ValueError("target: cannot plan here")
        return {
            "feasible": True,
            "cost_usd": c["bandwidth_up_bits_per_s"] / 1e6 + float(a["target"]) / 1e24,
            "nodes": 2,
            "chips_per_node": 8,
            "hardware": "h100_sxm",
            "precision": "fp8",
            "algorithm": "diloco",
        }

    mine = {**plan({**args, "baseline": False}), "cost_usd": 1.0}
    asked.clear()
    seen: list[tuple[str, list[float]]] = []
    out = compare.sweeps(
        args,
        plan,
        first="bandwidth",
        on_axis=lambda axis, rows: seen.append((axis, [r["x"] for r in rows])),
        known=({**args, "baseline": True}, mine),
    )
    assert list(out) == list(compare.SWEEPS)
    mbps = list(compare.SWEEP_BANDWIDTH_MBPS)
    own = float(args["constraints"]["bandwidth_up_bits_per_s"]) / 1e6
    assert own in mbps
    # the chart on screen: its own point first (no planning), then one point more each time, x order
    assert seen[0] == ("bandwidth", [own])
    assert [len(x) for a, x in seen if a == "bandwidth"] == [1, 2, 3, 4, 5]
    assert all(x == sorted(x) for _, x in seen)
    assert [a for a, _ in seen[-2:]] == ["distance", "target"]
    bw = out["bandwidth"]
    assert [r["x"] for r in bw] == mbps
    assert bw[mbps.index(own)]["cost_usd"] == 1.0  # the Planner's plan, not re-planned
    assert bw[0]["cost_usd"] is None and "cannot plan here" in bw[0]["label"]
    assert len(asked) == 15 - 2  # the known plan, twice (bandwidth and target axes), never asked
    assert out["target"][compare.SWEEP_TARGET_FACTORS.index(1.0)]["cost_usd"] == 1.0
