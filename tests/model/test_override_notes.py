"""A note in `Estimate.notes` whenever a mode (or a switched-off correction, or the algorithm)
replaces an input the user gave (issue 22 item 4): each rule of `inputs.overrides` is reached, and
its replacement is real (the kernel input does not follow the given value)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dispersal.model.inputs.overrides import override_notes
from dispersal.model.inputs.params import DEFAULT_PARAMS
from dispersal.model.inputs.scenario import Algorithm, Scenario
from dispersal.model.run.estimate import estimate

OFF = DEFAULT_PARAMS.replace(corrections="none")

# (changes, mode, params, a phrase of the note, the field that is ignored)
RULES: list[tuple[dict[str, Any], str, Any, str, str]] = [
    ({"codec": "demo"}, "paper", DEFAULT_PARAMS, "paper mode ignores codec=demo's wire bits", "codec"),
    # (Off the wire correction a codec still sets error feedback: the same here, so only the bits differ.)
    (
        {"codec": "int8", "error_feedback": False},
        "default",
        OFF,
        "wire correction off ignores codec=int8",
        "codec",
    ),
    ({"aggregation": "relay"}, "paper", DEFAULT_PARAMS, "ignores aggregation=relay", "aggregation"),
    ({"aggregation": "relay"}, "default", OFF, "aggregation correction off", "aggregation"),
    (
        {"optimizer_offload": "always"},
        "paper",
        DEFAULT_PARAMS,
        "optimizer_offload=always",
        "optimizer_offload",
    ),
    ({"outer_state": "hbm"}, "paper", DEFAULT_PARAMS, "paper mode ignores outer_state=hbm", "outer_state"),
    ({"fragments": 4}, "paper", DEFAULT_PARAMS, "fragments=4", "fragments"),
    ({"overlap_depth": 2}, "default", OFF, "overlap_depth=2", "overlap_depth"),
    ({"quality_mapping": "loss"}, "paper", DEFAULT_PARAMS, "quality_mapping=loss", "quality_mapping"),
    ({"inner_optimizer": "muon"}, "default", OFF, "inner_optimizer=muon", "inner_optimizer"),
    ({"pricing": "rental"}, "paper", DEFAULT_PARAMS, "pricing=rental", "pricing"),
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
        "overlap_communication",
    ),
    (
        {"algorithm": "ddp", "compression_ratio": 30.0},
        "default",
        DEFAULT_PARAMS,
        "compression_ratio=30 applies to DiLoCo syncs only",
        "compression_ratio",
    ),
    (
        {"codec": "int8", "compression_ratio": 50.0},
        "default",
        DEFAULT_PARAMS,
        "codec=int8 sets the wire bits: compression_ratio=50 ignored",
        "compression_ratio",
    ),
    (
        {"codec": "sparseloco", "error_feedback": False},
        "default",
        DEFAULT_PARAMS,
        "error_feedback=False ignored",
        "error_feedback",
    ),
    ({"split_links": True, "params": 400e9}, "paper", DEFAULT_PARAMS, "split_links=true", "split_links"),
    (
        {"nodes_per_site": 8, "params": 400e9, "num_nodes": 32},
        "paper",
        DEFAULT_PARAMS,
        "never pipelines inside sites",
        "nodes_per_site",
    ),
    (
        {
            "algorithm": "site_pp_diloco",
            "activation_compression": 10.0,
            "params": 400e9,
            "num_nodes": 32,
            "nodes_per_site": 8,
        },
        "default",
        DEFAULT_PARAMS,
        "activation_compression ignored",
        "activation_compression",
    ),
    (
        {"split_links": False, "pp_bandwidth_bits_per_s": 1e10, "params": 400e9},
        "default",
        DEFAULT_PARAMS,
        "pp_bandwidth_bits_per_s ignored",
        "pp_bandwidth_bits_per_s",
    ),
]

FIGURES = (
    "tokens",
    "run_time_s",
    "step_time_s",
    "sync_time_s",
    "memory_required_bytes_per_node",
    "c_quality_flop",
)


@pytest.mark.parametrize(("changes", "mode", "params", "phrase", "ignored"), RULES)
def test_each_override_is_noted_and_real(
    changes: dict[str, Any], mode: str, params: Any, phrase: str, ignored: str
) -> None:
    s = Scenario(**changes)
    notes = override_notes(s, mode, params)
    assert any(phrase in n for n in notes), notes
    # The replacement is real: the figures are those of the scenario without that input.
    bare = Scenario(**{k: v for k, v in changes.items() if k != ignored})
    e, e_bare = estimate(s, mode=mode, params=params), estimate(bare, mode=mode, params=params)
    assert e.algorithm == e_bare.algorithm
    for f in FIGURES:
        assert getattr(e, f) == getattr(e_bare, f), f
    assert e.cost.total_usd == e_bare.cost.total_usd
    # And the estimate carries the note (the CLI prints Estimate.notes).
    assert any(phrase in n for n in e.notes)


def test_no_note_where_the_input_is_honoured() -> None:
    for changes in RULES:
        s = Scenario(**changes[0])
        if changes[1] == "paper" and changes[2] is DEFAULT_PARAMS and "algorithm" not in changes[0]:
            assert not any("ignores" in n for n in override_notes(s, "default")), changes
    assert override_notes(Scenario(), "paper") == []
    assert override_notes(Scenario(), "default") == []
    # A named codec with ddp is honoured in default mode (no note).
    assert override_notes(Scenario(algorithm=Algorithm.DDP, codec="demo"), "default") == []


def test_the_cli_prints_the_note() -> None:
    from typer.testing import CliRunner

    from dispersal.cli import app

    r = CliRunner().invoke(app, ["estimate", "--mode", "paper", "--set", "codec=demo", "--json"])
    assert r.exit_code == 0, r.output
    assert any("paper mode ignores codec=demo's wire bits" in n for n in json.loads(r.output)["notes"])
