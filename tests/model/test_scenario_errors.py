"""Every bad Scenario input raises InputError naming the field, in one line."""

from __future__ import annotations

from typing import Any

import pytest

from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.params import ModelParams
from dispersal.model.inputs.presets import load_scenario
from dispersal.model.inputs.scenario import Precision, Scenario, latency_from_distance
from dispersal.model.inputs.timelimit import max_run_length_s

BAD: list[tuple[str, Any]] = [
    ("schema_version", 2),
    ("precision", "fp3"),
    ("algorithm", "gossip"),
    ("straggler", "sometimes"),
    ("pricing", "lease"),
    ("compression_quality", "great"),
    ("activation_quality", "bad"),
    ("hardware", "h100x"),
    ("regime", "mars"),
    ("num_nodes", 0),
    ("num_nodes", -3),
    ("num_nodes", 2.5),
    ("num_nodes", True),
    ("chips_per_node", -1),
    ("inner_steps", -1),
    ("moe_layers", -1),
    ("micro_batches", 0),
    ("group_size", 1),
    ("params", 0.0),
    ("params", -1e9),
    ("params", float("nan")),
    ("params", float("inf")),
    ("active_params", 0.0),
    ("tokens", -1.0),
    ("local_batch_tokens", 0.0),
    ("mfu", 0.0),
    ("mfu", 1.5),
    ("compression_ratio", 0.5),
    ("activation_compression", 0.9),
    ("bandwidth_up_bits_per_s", -5e6),
    ("bandwidth_down_bits_per_s", 0.0),
    ("latency_s", -0.1),
    ("regional_bandwidth_bits_per_s", -1.0),
    ("pp_bandwidth_bits_per_s", 0.0),
    ("regional_latency_s", -1.0),
    ("pp_latency_s", float("nan")),
    ("duration_s", 0.0),
    ("capex_multiplier", -1.0),
    ("pue", 0.9),
    ("electricity_usd_per_kwh", -0.1),
]


@pytest.mark.parametrize(("field", "value"), BAD)
def test_bad_field_raises_input_error(field: str, value: Any) -> None:
    with pytest.raises(InputError) as err:
        Scenario(**{field: value})
    assert err.value.field == field
    msg = str(err.value)
    assert msg.startswith(f"{field}: ")
    assert "\n" not in msg


def test_active_params_above_params() -> None:
    with pytest.raises(InputError) as err:
        Scenario(params=10e9, active_params=20e9)
    assert err.value.field == "active_params"


def test_fp8_on_chip_without_fp8() -> None:
    with pytest.raises(InputError) as err:
        Scenario(hardware="a100_80gb", precision=Precision.FP8)
    assert err.value.field == "precision"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"bandwidth_up_bits_per_s": "100 Mbananas"}, "bandwidth_up_bits_per_s"),
        ({"latency_s": "5 fortnights"}, "latency_s"),
        ({"params": "91Q"}, "params"),
        ({"num_nodes": "two"}, "num_nodes"),
        ({"num_nodes": "2.5"}, "num_nodes"),
        ({"overlap_communication": "maybe"}, "overlap_communication"),
        ({"mfu": "high"}, "mfu"),
        ({"bandwith_up_bits_per_s": "1 Gbps"}, "bandwith_up_bits_per_s"),
        ({"hardware": "h100_sx"}, "hardware"),
    ],
)
def test_from_dict_errors(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        Scenario.from_dict(data)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_unknown_key_suggests() -> None:
    with pytest.raises(InputError) as err:
        Scenario.from_dict({"bandwith_up_bits_per_s": 1e9})
    assert "unknown scenario key" in str(err.value)
    assert "did you mean" in str(err.value)


def test_from_dict_parses_units() -> None:
    s = Scenario.from_dict(
        {
            "bandwidth_up_bits_per_s": "1 Gbps",
            "latency_s": "20 ms",
            "params": "405B",
            "duration_s": "1.5 y",
            "num_nodes": "12",
            "overlap_communication": "no",
        }
    )
    assert (s.bandwidth_up_bits_per_s, s.latency_s, s.params, s.num_nodes) == (1e9, 0.02, 405e9, 12)
    assert s.overlap_communication is False


def test_preset_errors() -> None:
    with pytest.raises(InputError) as err:
        load_scenario("no_such_preset")
    assert err.value.field == "scenario"


def test_shipped_presets_load() -> None:
    from dispersal.model.inputs.presets import scenario_names

    for name in scenario_names():
        assert isinstance(load_scenario(name), Scenario)


def test_other_input_errors() -> None:
    with pytest.raises(InputError) as e1:
        latency_from_distance(-1.0)
    assert e1.value.field == "distance"
    with pytest.raises(InputError) as e2:
        max_run_length_s(1.0, 1.0, 0.9)
    assert e2.value.field == "growth"
    with pytest.raises(InputError) as e3:
        max_run_length_s(-1.0, 1.0, 1.0)
    assert e3.value.field == "hardware_growth"
    with pytest.raises(InputError) as e4:
        ModelParams(eta_h_floor=1.5)
    assert e4.value.field == "eta_h_floor"
    with pytest.raises(InputError) as e5:
        ModelParams.from_dict({"chinchila_e": 1.0})
    assert e5.value.field == "chinchila_e"
    with pytest.raises(InputError) as e6:
        Scenario().replace(num_nodes=0)
    assert e6.value.field == "num_nodes"


def test_set_custom_hardware_with_units() -> None:
    """Custom per-chip figures parse their own units (a FLOP rate is not a duration)."""
    from dispersal.model.inputs.scenario import Scenario

    s = Scenario.from_dict({"chip_fp16_flop_per_s": "500 TFLOP/s", "chip_memory_bytes": "96 GB"})
    assert s.chip_fp16_flop_per_s == 500e12 and s.chip_memory_bytes == 96e9
    import pytest

    with pytest.raises(ValueError, match="chip_fp16_flop_per_s"):
        Scenario.from_dict({"chip_fp16_flop_per_s": "2h"})
