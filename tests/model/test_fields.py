"""Each Scenario field is declared once; validation, parsing, the CLI and the app read that declaration."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from dispersal.app import logic
from dispersal.cli import app
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.fields import FieldSpec, ScenarioField, markdown_table
from dispersal.model.inputs.scenario import FIELD_BY_NAME, SCENARIO_FIELDS, Scenario

ROOT = Path(__file__).resolve().parents[2]
NUMERIC = [f for f in SCENARIO_FIELDS if f.kind in ("int", "float")]
BOUNDED_BELOW = [f for f in NUMERIC if f.spec.lo is not None]


def test_every_scenario_field_is_declared() -> None:
    declared = {f.name for f in SCENARIO_FIELDS}
    names = {f.name for f in dataclasses.fields(Scenario)}
    # sites / churn are lists of tables, declared in dispersal.model.inputs.sites.
    assert names - declared == {"schema_version", "sites", "churn"}
    for f in SCENARIO_FIELDS:
        assert f.spec.label and f.spec.help.endswith("."), f.name
        # A unit in the name means the declaration states that unit.
        for suffix, unit in (("_bits_per_s", "bit/s"), ("_latency_s", "s"), ("_bytes", "B"), ("_usd", "$")):
            if f.name.endswith(suffix):
                assert f.spec.unit == unit, f.name


@pytest.mark.parametrize("f", BOUNDED_BELOW, ids=lambda f: f.name)
def test_just_below_the_lower_bound_is_refused_with_the_declared_range(f: ScenarioField) -> None:
    lo = f.spec.lo
    assert lo is not None
    bad: float = lo if f.spec.lo_open else (lo - 1 if f.kind == "int" else lo - abs(lo) * 1e-6 - 1e-9)
    value: Any = int(bad) if f.kind == "int" else float(bad)
    with pytest.raises(InputError) as err:
        Scenario(**{f.name: value})
    assert err.value.field == f.name
    assert f.spec.bound_text(unit="" if f.kind == "int" else None) in str(err.value)


@pytest.mark.parametrize("f", [f for f in NUMERIC if f.spec.hi is not None], ids=lambda f: f.name)
def test_above_the_upper_bound_is_refused(f: ScenarioField) -> None:
    hi = f.spec.hi
    assert hi is not None
    value: Any = int(hi) + 1 if f.kind == "int" else float(hi) * 1.5
    with pytest.raises(InputError) as err:
        Scenario(**{f.name: value})
    assert err.value.field == f.name


@pytest.mark.parametrize("f", NUMERIC, ids=lambda f: f.name)
def test_non_finite_and_wrong_types_are_refused(f: ScenarioField) -> None:
    bads: tuple[Any, ...] = (math.nan, math.inf, True, "5")
    for bad in bads:
        with pytest.raises(InputError) as err:
            Scenario(**{f.name: bad})
        assert err.value.field == f.name
        assert "\n" not in str(err.value)


def test_closed_bounds_are_allowed() -> None:
    assert Scenario(latency_s=0.0).latency_s == 0.0
    assert Scenario(pue=1.0).pue == 1.0 and Scenario(pue=5.0).pue == 5.0
    assert Scenario(mfu=1.0).mfu == 1.0
    assert Scenario(chips_per_node=0).chips_per_node == 0


def test_messages_match_the_declaration() -> None:
    with pytest.raises(InputError, match=r"^num_nodes: must be an integer >= 1, got 0$"):
        Scenario(num_nodes=0)
    with pytest.raises(
        InputError, match=r"^bandwidth_up_bits_per_s: must be a finite number > 0 bit/s, got -5"
    ):
        Scenario(bandwidth_up_bits_per_s=-5.0)
    with pytest.raises(InputError, match=r"^mfu: must be a finite number in \(0, 1\], got 1.5$"):
        Scenario(mfu=1.5)


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("bandwidth_up_bits_per_s", "250Mbps", 250e6),
        ("latency_s", "40ms", 0.040),
        ("duration_s", "2d", 2 * 86400.0),
        ("chip_memory_bytes", "80GB", 80e9),
        ("chip_fp16_flop_per_s", "990 TFLOP/s", 990e12),
        ("chip_price_usd", "$25,000", 25_000.0),
        ("params", "91B", 91e9),
        ("num_nodes", "64", 64),
        ("overlap_depth", "2", 2),
        ("split_links", "true", True),
        ("codec", "int8", "int8"),
    ],
)
def test_text_is_parsed_by_the_declared_quantity(name: str, text: str, value: object) -> None:
    s = Scenario.from_dict({name: text})
    assert getattr(s, name) == value


@given(st.floats(min_value=1e3, max_value=1e12, allow_nan=False))
def test_parse_then_check_round_trips_numbers(x: float) -> None:
    f = FIELD_BY_NAME["bandwidth_up_bits_per_s"]
    assert f.check(f.parse(x)) == x
    assert f.check(f.parse(f"{x!r} bit/s")) == pytest.approx(x)


def test_spec_refuses_an_unknown_quantity() -> None:
    with pytest.raises(InputError, match="quantity"):
        FieldSpec(label="x", help="y.", quantity="furlongs")


def test_app_inputs_come_from_the_declaration() -> None:
    for sf in SCENARIO_FIELDS:
        if sf.name in ("split_links",):
            continue
        key = sf.spec.ui_key or sf.name
        f = logic.FIELD_BY_KEY[key]
        assert f.name == sf.spec.label
        assert f.help.startswith(sf.spec.help)
        if sf.kind in ("int", "float") and sf.spec.lo is not None:
            assert f.lo == pytest.approx(sf.spec.lo / sf.spec.display_scale)
        if sf.kind == "choice":
            assert f.choices == sf.choices()
    # Bounds in the unit the user types, from bit/s to Mbps and seconds to days.
    assert logic.check_field("up_mbps", -5.0) == "WAN upload: must be > 0 Mbps, got -5 Mbps"
    assert logic.check_field("duration_days", 0.0) == "Maximum duration: must be > 0 days, got 0 days"
    assert (
        logic.check_field("fragments", 20_000)
        == "Streaming fragments P: must be an integer in [1, 10,000], got 20,000"
    )
    assert logic.check_field("codec", "int8") is None
    # A value the app builds is the value the model gets.
    ui = logic.default_ui()
    ui["latency_ms"] = 40.0
    ui["codec"] = "int8"
    built = logic.build(ui)
    assert built.scenario is not None
    assert built.scenario.latency_s == pytest.approx(0.040) and built.scenario.codec == "int8"


def test_docs_table_is_current() -> None:
    text = (ROOT / "docs" / "scenario_fields.md").read_text(encoding="utf-8")
    assert text == markdown_table(SCENARIO_FIELDS), (
        "regenerate: dispersal fields --markdown > docs/scenario_fields.md"
    )


def test_cli_fields_lists_every_field_and_refuses_unknown_names() -> None:
    import json

    r = CliRunner().invoke(app, ["fields", "--json"])
    assert r.exit_code == 0
    rows = json.loads(r.output)
    assert [row["name"] for row in rows] == [f.name for f in SCENARIO_FIELDS]
    up = next(row for row in rows if row["name"] == "bandwidth_up_bits_per_s")
    assert up["unit"] == "bit/s" and up["allowed"] == "> 0 bit/s" and up["display_unit"] == "Mbps"
    bad = CliRunner().invoke(app, ["fields", "latency"])
    assert bad.exit_code == 2
    assert "unknown scenario field" in bad.output
    r = CliRunner().invoke(app, ["estimate", "--set", "chip_memory_bytes=-1GB"])
    assert r.exit_code == 2
    assert "chip_memory_bytes: must be a finite number > 0 B" in r.output


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**7),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["ring", "relay", "fp8", "bf16", "h100_sxm", "gh200", "diloco", "int8", "nope", ""]),
)


def _outcome(make: Any) -> Any:
    try:
        return make()
    except InputError as exc:
        return ("error", str(exc))


@given(
    changes=st.dictionaries(st.sampled_from([f.name for f in SCENARIO_FIELDS]), _VALUES, max_size=3),
    base=st.sampled_from(["paper_threat_model", "intellect1", "gpt4_level_gh200"]),
)
def test_replace_checks_what_a_new_scenario_checks(changes: dict[str, Any], base: str) -> None:
    """`Scenario.replace` checks only the changed fields and the cross-field rules (the others were
    checked already): the same scenario, or the same first error, as building it from scratch."""
    from dispersal.model.inputs.presets import load_scenario

    s = load_scenario(base)
    fast = _outcome(lambda: s.replace(**changes))
    full = _outcome(lambda: dataclasses.replace(s, **changes))
    assert fast == full
    if isinstance(fast, Scenario):
        assert fast.to_dict() == full.to_dict() and type(fast.hardware) is type(full.hardware)
