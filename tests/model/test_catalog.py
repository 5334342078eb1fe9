"""Catalogues (TOML package data): sources, the paper's node sizes, lookups with did-you-mean."""

from __future__ import annotations

from dataclasses import replace
from statistics import median

import pytest

from dispersal.model.inputs.catalog import (
    AGGREGATIONS,
    _check_codec,
    accelerator,
    accelerators,
    codec,
    codecs,
    paper_tables,
    reference_models,
    regime,
    regimes,
)
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.scenario import Precision, Scenario, max_chips_under
from dispersal.model.kernel.flops import mfu_6p_from_throughput, mfu_to_6p

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
    assert Scenario(hardware=name, precision=Precision.BF16).resolved_chips_per_node() == chips


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


# --- host memory / host link (issue 11, item 1) ---------------------------------------------


def test_every_accelerator_has_host_fields_with_a_source() -> None:
    for a in accelerators().values():
        assert a.host_memory_bytes > 0 and a.host_link_bytes_per_s > 0, a.name
        assert a.host_source.strip(), a.name
        # Host DRAM per chip exceeds its accelerator memory in every reference server listed.
        assert a.host_memory_bytes > a.hbm_bytes, a.name


@pytest.mark.parametrize(
    ("name", "host_bytes", "link"),
    [
        ("h100_sxm", 2048e9 / 8, 64e9),  # DGX H100: 2 TB / 8 GPUs, PCIe Gen5 x16
        ("a100_80gb", 2048e9 / 8, 32e9),  # DGX A100 640GB: 2 TB, PCIe Gen4 x16
        ("a100_40gb", 1024e9 / 8, 32e9),  # DGX A100 320GB: 1 TB
        ("gh200", 480e9, 900e9 / 2),  # 480 GB LPDDR5X, NVLink-C2C 900 GB/s bidirectional
        ("tpu_v5p", 448e9 / 4, 32e9),  # 448 GB per 4-chip VM
        ("tpu_v6e", 1536 * 2**30 / 8, 64e9),  # 1,536 GiB per 8-chip host, PCIe Gen5
        ("mi300x", 1850 * 2**30 / 8, 64e9),  # Azure ND MI300X v5: 1,850 GiB / 8
    ],
)
def test_host_values(name: str, host_bytes: float, link: float) -> None:
    a = accelerator(name)
    assert a.host_memory_bytes == pytest.approx(host_bytes, rel=1e-12)
    assert a.host_link_bytes_per_s == link


# --- MFU per accelerator and precision (issue 11, item 2) ----------------------------------


def test_every_accelerator_has_mfu_with_a_source() -> None:
    for a in accelerators().values():
        assert 0.1 < a.mfu_bf16 < 0.7, a.name
        assert "6P convention" in a.mfu_source, a.name
        if a.dense_fp8_flop_per_s > 0:
            # End-to-end FP8 speed-ups are 1.25-1.5x, not the 2x of the peaks.
            assert 1.0 < a.fp8_speedup < 2.0, a.name
            assert a.mfu_fp8 == pytest.approx(a.mfu_bf16 * a.fp8_speedup / 2, abs=5e-4), a.name
            assert a.mfu_fp8 * a.dense_fp8_flop_per_s > a.mfu_bf16 * a.dense_fp16_flop_per_s, a.name
        else:
            assert a.mfu_fp8 == 0 and a.fp8_speedup == 0, a.name


# Published runs behind the catalogue MFUs, converted to the 6P convention (sources in hardware.toml).
INTELLECT1_P = (
    42 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 4096 + 2 * 128256 * 4096
)
H100_RUNS = {
    "llama31_405b_8k_gpus": mfu_to_6p(0.43, 405e9, 126, 16384, 8192),
    "llama31_405b_16k_gpus": mfu_to_6p(0.41, 405e9, 126, 16384, 8192),
    "nemotron4_340b": mfu_6p_from_throughput(2304 * 4096 / 8.0 / 6144, 340e9, 989e12),
    "intellect1_no_comm": mfu_to_6p(
        0.433, INTELLECT1_P, 42, 4096, 8192, reported_params=INTELLECT1_P - 128256 * 4096
    ),
}


def test_h100_mfu_is_the_median_of_converted_runs() -> None:
    runs = {k: float(v) for k, v in H100_RUNS.items()}
    assert INTELLECT1_P == 10_211_381_248
    assert runs["llama31_405b_8k_gpus"] == pytest.approx(0.3969, abs=1e-4)
    assert runs["intellect1_no_comm"] == pytest.approx(0.3536, abs=1e-4)
    assert accelerator("h100_sxm").mfu_bf16 == round(median(runs.values()), 3)


def test_other_mfus_follow_their_evidence() -> None:
    assert accelerator("tpu_v4").mfu_bf16 == round(float(mfu_to_6p(0.462, 540.35e9, 118, 12288, 2048)), 3)
    assert accelerator("a100_80gb").mfu_bf16 == round(float(mfu_to_6p(0.542, 530e9, 105, 20480, 2048)), 3)
    h100 = accelerator("h100_sxm")
    # torchtitan Llama 3 8B on 8 GPUs (torchao.float8 README): tokens/s per GPU, bf16.
    ratio = (5376.5 / 6150) * (989 / 1307.4)
    assert accelerator("mi300x").mfu_bf16 == round(h100.mfu_bf16 * ratio, 3)
    assert accelerator("rtx_4090").mfu_bf16 == round(float(mfu_6p_from_throughput(6150, 8.03e9, 989e12)), 3)
    for same in ("h200", "gh200", "b200", "b100", "ascend_910b", "ascend_910c"):
        assert accelerator(same).mfu_bf16 == h100.mfu_bf16, same
    for same in ("tpu_v5e", "tpu_v5p", "tpu_v6e"):
        assert accelerator(same).mfu_bf16 == accelerator("tpu_v4").mfu_bf16, same


def test_deepseek_v3_fp8_is_below_the_h100_fp8_mfu() -> None:
    """DeepSeek-V3 (FP8, MoE, H800): 6 x 37B x 14.8T tokens in 2.664M GPU-hours = 17.3% of the FP8 peak."""
    ds = float(mfu_6p_from_throughput(14.8e12 / (2.664e6 * 3600), 37e9, 1979e12))
    assert ds == pytest.approx(0.1731, abs=1e-4)
    assert ds < accelerator("h100_sxm").mfu_fp8


# --- wire codecs (issue 11, item 6) ---------------------------------------------------------

WIRE_BITS = {
    "fp32": 32.0,
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8_e4m3": 8.0,
    "int8": 8.0,
    "int4": 4.0 + 32 / 64,
    "fp4_e3m0": 4.0,
    "sparseloco": (64 / 4096) * (2 + 12),
    "demo": (32 / 4096) * (32 + 64),
    "topk1_int8": 0.01 * (8 + 32),
}


@pytest.mark.parametrize(("name", "bits"), sorted(WIRE_BITS.items()))
def test_codec_wire_bits_exact(name: str, bits: float) -> None:
    c = codec(name)
    assert c.wire_bits_per_param == bits
    assert c.wire_bits_per_param == c.density * (c.value_bits + c.index_bits) + c.overhead_bits_per_param
    assert c.compression_vs_fp32 == 32.0 / bits
    assert c.to_dict()["wire_bits_per_param"] == bits


def test_codec_catalogue_is_complete_and_sourced() -> None:
    table = codecs()
    assert set(WIRE_BITS) <= set(table)
    for c in table.values():
        assert c.source.strip() and c.quality_key == c.name, c.name
        assert c.default_aggregation in AGGREGATIONS, c.name
        assert c.sparse == (c.density < 1), c.name
        if c.sparse:
            assert c.default_aggregation != "ring" and c.index_bits > 0, c.name
        else:
            assert c.index_bits == 0 and c.dense_aggregate_bits == c.wire_bits_per_param, c.name


def test_sparseloco_is_covenant_146x() -> None:
    """Covenant-72B: '>146x' vs FP32 with 1.56% density, 2-bit values and 12-bit chunk indices."""
    c = codec("sparseloco")
    assert c.wire_bits_per_param == 0.21875
    assert 146 < c.compression_vs_fp32 < 147
    assert c.error_feedback and c.sparse


def test_codec_lookup_and_errors() -> None:
    assert codec("FP8-E4M3").name == "fp8_e4m3"
    assert (
        codec("fp8").name == "fp8_e4m3" and codec("none").name == "fp32" and codec("FP4").name == "fp4_e3m0"
    )
    assert codec(" SparseLoCo ").name == "sparseloco"
    with pytest.raises(InputError) as err:
        codec("sparselocoo")
    assert err.value.field == "codec"
    msg = str(err.value)
    assert "did you mean 'sparseloco'" in msg and "known: bf16, demo, fp16" in msg and "\n" not in msg
    with pytest.raises(InputError) as err2:
        codec("zstd", field="wire_codec")
    assert err2.value.field == "wire_codec"
    assert "unknown codec 'zstd'" in str(err2.value)


def test_codec_cache_is_read_only() -> None:
    table = codecs()
    with pytest.raises(TypeError):
        table["x"] = table["fp32"]  # type: ignore[index]
    assert codecs() is table


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"density": 0.0}, "density"),
        ({"density": 1.5}, "density"),
        ({"value_bits": 0.0}, "value_bits"),
        ({"index_bits": -1.0}, "index_bits"),
        ({"default_aggregation": "gossip"}, "default_aggregation"),
        ({"sparse": False}, "sparse"),
        ({"default_aggregation": "ring"}, "ring"),
    ],
)
def test_malformed_codec_entry_fails_loudly(change: dict[str, object], needle: str) -> None:
    with pytest.raises(InputError) as err:
        _check_codec(replace(codec("sparseloco"), **change))  # type: ignore[arg-type]
    assert err.value.field == "codecs.toml[sparseloco]"
    assert needle in str(err.value)
