"""Catalogues (TOML package data): sources, the paper's node sizes, lookups with did-you-mean."""

from __future__ import annotations

import pytest

from dispersal.model.catalog import accelerator, accelerators, paper_tables, reference_models, regime, regimes
from dispersal.model.errors import InputError
from dispersal.model.scenario import Scenario, max_chips_under

# spec/model.md sec. 8: chips per node under the 15,840 TFLOP/s cap (> 16 H100-equivalents covered).
PAPER_CHIPS = {
    "a100_80gb": 50,
    "h100_sxm": 16,
    "gh200": 16,
    "ascend_910b": 49,
    "ascend_910c": 26,
    "tpu_v4": 57,
    "tpu_v5e": 80,
    "tpu_v5p": 34,
    "tpu_v6e": 17,
}


def test_every_entry_has_a_source() -> None:
    for a in accelerators().values():
        assert a.source.strip(), a.name
        assert a.dense_fp16_flop_per_s > 0 and a.hbm_bytes > 0 and a.price_usd > 0 and a.tdp_w > 0, a.name
    for r in regimes().values():
        assert r.source.strip(), r.name
    for m in reference_models().values():
        assert m.source.strip(), m.name


@pytest.mark.parametrize(("name", "chips"), sorted(PAPER_CHIPS.items()))
def test_paper_chips_per_node(name: str, chips: int) -> None:
    """Sec. 8: floor(15,840 / chip FP16 TFLOP/s), the rule being strictly > 16 H100-equivalents."""
    acc = accelerator(name)
    assert max_chips_under(acc, regime("treaty")) == chips
    assert chips * acc.dense_fp16_flop_per_s <= 15840e12 * (1 + 1e-12)
    assert (chips + 1) * acc.dense_fp16_flop_per_s > 15840e12
    assert Scenario(hardware=name, precision="bf16").resolved_chips_per_node() == chips


def test_paper_search_set() -> None:
    """Sec. 10: nine FP16 node types, FP8 variants for H100, GH200 and TPU v6e."""
    accs = accelerators().values()
    assert {a.name for a in accs if a.paper_search} == set(PAPER_CHIPS)
    assert {a.name for a in accs if a.paper_fp8} == {"h100_sxm", "gh200", "tpu_v6e"}


def test_paper_prices() -> None:
    """Sec. 8 prices per chip."""
    prices = {
        "a100_80gb": 7000,
        "gh200": 28000,
        "h100_sxm": 25000,
        "ascend_910b": 16000,
        "ascend_910c": 26000,
        "tpu_v4": 12000,
        "tpu_v5e": 6000,
        "tpu_v5p": 20000,
        "tpu_v6e": 25000,
    }
    for name, usd in prices.items():
        assert accelerator(name).price_usd == usd, name


def test_h100_equivalents() -> None:
    assert accelerator("h100_sxm").h100_equivalents == 1.0
    assert accelerator("a100_80gb").h100_equivalents == pytest.approx(312 / 990, rel=1e-12)


def test_memory_rule_caps_h100_at_16() -> None:
    """Sec. 9: the 1,280 GB memory rule allows 16 x H100 80 GB, 9 x GH200 144 GB."""
    assert max_chips_under(accelerator("h100_sxm"), regime("treaty_hbm")) == 16
    assert max_chips_under(accelerator("gh200"), regime("treaty_hbm")) == 8
    assert max_chips_under(accelerator("h100_sxm"), regime("none")) == 8


def test_regime_thresholds() -> None:
    assert regime("treaty").training_threshold_flop == 1e24
    assert regime("treaty").cluster_flop_per_s == 15840e12
    assert regime("eu_ai_act").training_threshold_flop == 1e25
    assert regime("eo14110").training_threshold_flop == 1e26


def test_lookup_aliases_case_insensitive() -> None:
    assert accelerator("H100").name == "h100_sxm"
    assert accelerator("h100-sxm").name == "h100_sxm"
    assert accelerator("H100 SXM").name == "h100_sxm"
    assert regime("MIRI").name == "treaty"


def test_did_you_mean() -> None:
    with pytest.raises(InputError) as err:
        accelerator("h100_sx")
    assert err.value.field == "hardware"
    assert "did you mean" in str(err.value)
    with pytest.raises(InputError) as err2:
        regime("tready")
    assert err2.value.field == "regime"
    assert "did you mean 'treaty'" in str(err2.value)


def test_paper_tables_load() -> None:
    assert paper_tables()
