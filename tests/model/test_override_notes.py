"""A note in `Estimate.notes` whenever a mode (or a switched-off correction, or the algorithm)
replaces an input the user gave (issue 22 item 4): each rule of `inputs.overrides` is reached, and
its replacement is real (the kernel input does not follow the given value)."""

from __future__ import annotations

from typing import Any

import pytest

from dispersal.model.inputs.overrides import override_notes
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Scenario, kernel_inputs
from dispersal.model.kernel.estimate import estimate

OFF = DEFAULT_PARAMS.replace(corrections="none")

# (changes, mode, params, a phrase of the note, the kernel input that ignores it, its value without the change)
RULES: list[tuple[dict[str, Any], str, Any, str, str]] = [
    ({"codec": "demo"}, "paper", DEFAULT_PARAMS, "paper mode ignores codec=demo", "wire_bits_per_param"),
    ({"codec": "int8"}, "default", OFF, "wire correction off ignores codec=int8", "wire_bits_per_param"),
    ({"aggregation": "relay"}, "paper", DEFAULT_PARAMS, "ignores aggregation=relay", "aggregation"),
    ({"aggregation": "relay"}, "default", OFF, "aggregation correction off", "aggregation"),
    ({"optimizer_offload": "always"}, "paper", DEFAULT_PARAMS, "optimizer_offload=always", "offload"),
    ({"outer_state": "hbm"}, "paper", DEFAULT_PARAMS, "outer_state=hbm", "outer_state_bytes_per_param"),
    ({"fragments": 4}, "paper", DEFAULT_PARAMS, "fragments=4", "fragments"),
    ({"overlap_depth": 2}, "default", OFF, "overlap_depth=2", "overlap_depth"),
    ({"quality_mapping": "loss"}, "paper", DEFAULT_PARAMS, "quality_mapping=loss", "quality_mapping"),
    ({"inner_optimizer": "muon"}, "default", OFF, "inner_optimizer=muon", "quality_mapping"),
    ({"pricing": "rental"}, "paper", DEFAULT_PARAMS, "pricing=rental", "rental"),
    (
        {"electricity_usd_per_kwh": 0.2},
        "paper",
        DEFAULT_PARAMS,
        "energy is not costed",
        "electricity_usd_per_kwh",
    ),
    (
        {"algorithm": "streaming", "overlap_communication": False},
        "default",
        DEFAULT_PARAMS,
        "overlap_communication=false ignored",
        "streaming",
    ),
    (
        {"algorithm": "ddp", "compression_ratio": 30.0},
        "default",
        DEFAULT_PARAMS,
        "compression_ratio=30 applies to DiLoCo syncs only",
        "ddp_wire_bits_per_param",
    ),
    (
        {"split_links": False, "pp_bandwidth_bits_per_s": 1e10},
        "default",
        DEFAULT_PARAMS,
        "pp_bandwidth_bits_per_s ignored",
        "pp_bits_per_s",
    ),
]


@pytest.mark.parametrize(("changes", "mode", "params", "phrase", "kernel_key"), RULES)
def test_each_override_is_noted_and_real(
    changes: dict[str, Any], mode: str, params: Any, phrase: str, kernel_key: str
) -> None:
    s = Scenario(**changes)
    notes = override_notes(s, mode, params)
    assert any(phrase in n for n in notes), notes
    # The replacement is real: the input resolves as if it had not been given, except for the
    # algorithm/link rules where the kernel input is fixed by another field.
    bare = Scenario(**{k: v for k, v in changes.items() if k in ("algorithm", "split_links")})
    assert kernel_inputs(s, mode, params)[kernel_key] == kernel_inputs(bare, mode, params)[kernel_key]
    # And the estimate carries the note (the CLI prints Estimate.notes).
    assert any(phrase in n for n in estimate(s, mode=mode, params=params).notes)


def test_no_note_where_the_input_is_honoured() -> None:
    for changes in RULES:
        s = Scenario(**changes[0])
        if changes[1] == "paper" and changes[2] is DEFAULT_PARAMS and "algorithm" not in changes[0]:
            assert not any("ignores" in n for n in override_notes(s, "default")), changes
    assert override_notes(Scenario(), "paper") == []
    assert override_notes(Scenario(), "default") == []
    # A named codec with ddp is honoured in default mode (no note).
    assert override_notes(Scenario(algorithm="ddp", codec="demo"), "default") == []
