"""The inputs of one distributed training run (`Scenario`) and their resolution into kernel arrays.

A Scenario is a frozen, keyword-only dataclass in SI units. Optional fields left as None are
derived by the chosen *mode*:

- ``paper``: exactly the settings of Rahman 2026 (spec/model.md sections 1-10) so its tables can be
  reproduced: model + optimizer state only in memory, the PP sync payload is the whole model over one
  node's link, regional and pipeline links equal the WAN at min(up, down) with the WAN latency, cost
  is purchase price x 1.64 x 1.23 with no energy.
- ``default``: the project's model, which adds what the paper leaves out: the outer-optimizer state
  (FP32 global copy + Nesterov momentum, 8 B/param; Douillard et al. 2023) and error-feedback buffer
  (FP32, 4 B/param) and activation memory; each PP stage syncs only its own shard P/S over its own
  link; regional and pipeline links default to 1 Gbps / 20 ms (co-located sites); energy
  (TDP x PUE x hours x price) is costed; rental pricing is available.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import (
    Accelerator,
    Regime,
    accelerator,
    accelerators,
    codec,
    codecs,
    regime,
    regimes,
)
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.fields import ScenarioField, scenario_fields, spec
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.kernel.efficiency import STRAGGLER_CODES, Straggler, quality_code
from dispersal.model.kernel.kernel import (
    AGGREGATION_CODES,
    MODE_AUTO,
    MODE_DDP,
    MODE_FLAT,
    MODE_HIER,
    MODE_PP,
)

#: Aggregations a user may ask for (the paper's relay formula is paper mode's own).
AGGREGATIONS: tuple[str, ...] = tuple(a for a in AGGREGATION_CODES if a != "paper")

SCHEMA_VERSION = 1


class Mode(StrEnum):
    """Which model: the paper's settings, or the project's default (see module docstring)."""

    PAPER = "paper"
    DEFAULT = "default"


class Algorithm(StrEnum):
    """Training algorithm across nodes."""

    AUTO = "auto"
    """Streaming flat DiLoCo when the model fits one node, else PP-group DiLoCo (the paper's rule)."""
    DDP = "ddp"
    """Synchronous data parallel: all-reduce every step (the baseline)."""
    DILOCO = "diloco"
    """Flat DiLoCo, communication not overlapped (Douillard et al. 2023, arXiv 2311.08105)."""
    STREAMING = "streaming"
    """Flat DiLoCo with communication overlapped with the next H inner steps (Douillard et al. 2025)."""
    HIERARCHICAL = "hierarchical"
    """Regional groups on faster links inside a slower global WAN."""
    PP_DILOCO = "pp_diloco"
    """Pipeline-parallel groups (over the WAN when sites are apart), DiLoCo across groups."""


class Precision(StrEnum):
    """Training precision: bytes of state per parameter, bits per transmitted value, peak used."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    FP4 = "fp4"


class OuterState(StrEnum):
    """Where the outer optimizer's state (FP32 global weights, Nesterov momentum, error feedback) lives."""

    HOST = "host"
    """Host DRAM, as OpenDiLoCo, prime (INTELLECT-1), torchft and Templar do (default)."""
    HBM = "hbm"
    """Accelerator memory."""


class Offload(StrEnum):
    """Inner-optimizer offload to host DRAM (ZeRO-Offload style)."""

    AUTO = "auto"
    """Only when the model does not fit the node otherwise."""
    NEVER = "never"
    ALWAYS = "always"


class Pricing(StrEnum):
    """How the hardware is paid for."""

    PURCHASE = "purchase"
    RENTAL = "rental"


# ZeRO accounting (FP32 master + Adam m, v): BF16/FP16 16 B, FP8 14 B, FP4 13 B (spec sec. 2).
STATE_BYTES_PER_PARAM = {Precision.BF16: 16.0, Precision.FP16: 16.0, Precision.FP8: 14.0, Precision.FP4: 13.0}
# Bits per transmitted pseudo-gradient value before extra compression (spec sec. 3).
BITS_PER_VALUE = {Precision.BF16: 16.0, Precision.FP16: 16.0, Precision.FP8: 8.0, Precision.FP4: 4.0}
# Bytes per activation value on a pipeline boundary (spec sec. 3; FP4 activations kept at FP8).
ACT_BYTES_PER_VALUE = {Precision.BF16: 2.0, Precision.FP16: 2.0, Precision.FP8: 1.0, Precision.FP4: 1.0}

#: Cottier et al. 2024 ("The rising costs of training frontier AI models", arXiv 2405.21015):
#: chip -> server 1.64, server -> cluster 1.23 (Rahman 2026 sec. 7).
PAPER_CAPEX_MULTIPLIER = 1.64 * 1.23
#: Default-mode regional / pipeline link: co-located sites (spec sec. 3 defaults).
DEFAULT_REGIONAL_BITS_PER_S = 1e9
DEFAULT_REGIONAL_LATENCY_S = 0.020
#: Default-mode extra state: FP32 global weights + FP32 Nesterov momentum of the outer optimizer.
OUTER_STATE_BYTES_PER_PARAM = 8.0
#: Default-mode error-feedback residual, FP32 (one more model copy).
ERROR_FEEDBACK_BYTES_PER_PARAM = 4.0
#: Compression ratios in the literature are relative to FP32 pseudo-gradients (Covenant-72B's >146x,
#: SparseLoCo, DeMo): default mode puts 32 / C_r bits per parameter on the wire for codec "auto".
RATIO_REFERENCE_BITS = 32.0
#: Codec "auto" above this ratio (more than quantisation alone gives: FP32 -> FP4 is 8x) is sparse
#: (top-k), so payloads from different workers cannot be summed in transit.
SPARSE_RATIO_THRESHOLD = 8.0
#: A dense aggregate returned by a relay, and DDP gradients, go at bf16 (16 bits/param).
DENSE_WIRE_BITS = 16.0
#: Paper-mode MFU (Rahman 2026 sec. 1: PaLM 46.2%, Llama 3.1 405B 38-43%, INTELLECT-1 36-41%).
PAPER_MFU = 0.40
#: Inner-optimizer offload keeps bf16 weights and bf16 gradients in HBM: 4 bytes/param
#: (ZeRO-Offload, Ren et al. 2021, arXiv 2101.06840, sec. 4).
OFFLOAD_HBM_BYTES_PER_PARAM = 4.0
#: Fibre: light travels ~204,000 km/s in glass, i.e. ~4.9 us per km one way (anchors.md).
FIBRE_S_PER_M = 4.9e-9


_MBPS = {"display_unit": "Mbps", "display_scale": 1e6}
_MS = {"display_unit": "ms", "display_scale": 1e-3}
_ETHERNET = (1e5, 8e11)
_ETHERNET_WHY = "the fastest standard Ethernet port is 800 Gb/s"
_QUALITY_NAMES = ("optimistic", "expected", "conservative")


def _codec_names() -> tuple[str, ...]:
    return ("auto", *codecs())


def _codec_lookup(name: str) -> object:
    return None if name == "auto" else codec(name)


# Sanity ranges (the app's warnings; the model computes outside them). Sources: the largest announced
# training clusters hold ~100k-200k GPUs (xAI Colossus 2024); the fastest standard Ethernet port is
# 800 Gb/s (IEEE 802.3df-2024); one-way fibre latency half way round the Earth is ~150 ms (20,000 km x
# 4.9 us/km x 1.5 routing), a geostationary hop ~270 ms; the public human-text stock is ~300T tokens
# (Villalobos et al. 2024, arXiv 2211.04325).
@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    """One distributed training run. SI units; None = derived from the mode (module docstring).

    Each field is declared once with `fields.spec`: its unit, bounds, label and help. Validation,
    parsing (`from_dict`, the CLI's --set), ``dispersal fields`` and the app's inputs read it.
    """

    schema_version: int = SCHEMA_VERSION
    name: str = spec(
        "paper threat model", label="Scenario name", help="A label for exports; not used in any formula."
    )
    hardware: str = spec(
        "h100_sxm",
        label="Accelerator",
        help="Accelerator catalogue entry (dense FLOP/s, memory, host DRAM, MFU, price, TDP; data/hardware.toml).",
        choices=lambda: tuple(accelerators()),
        lookup=accelerator,
        glossary="node",
    )
    chip_fp16_flop_per_s: float | None = spec(
        None,
        label="Custom: dense FP16 compute per chip",
        help="Custom hardware: dense FP16 FLOP/s per chip instead of the catalogue's; FP8 scales with it. "
        "Empty = the catalogue's.",
        unit="FLOP/s",
        quantity="flop_rate",
        lo=0,
        lo_open=True,
        display_unit="TFLOP/s",
        display_scale=1e12,
        plausible=(1e12, 1e17),
        plausible_why="today's fastest chip is ~2,500 TFLOP/s FP16",
        ui_key="chip_tflops",
    )
    chip_memory_bytes: float | None = spec(
        None,
        label="Custom: memory per chip",
        help="Custom hardware: accelerator memory per chip instead of the catalogue's. Empty = the catalogue's.",
        unit="B",
        quantity="bytes",
        lo=0,
        lo_open=True,
        display_unit="GB",
        display_scale=1e9,
        plausible=(1e9, 1e13),
        plausible_why="today's largest is ~300 GB of HBM",
        ui_key="chip_memory_gb",
    )
    chip_price_usd: float | None = spec(
        None,
        label="Custom: price per chip",
        help="Custom hardware: purchase price per chip instead of the catalogue's. Empty = the catalogue's.",
        unit="$",
        quantity="money",
        lo=0,
        lo_open=True,
        display_unit="$",
        plausible=(100, 1_000_000),
        plausible_why="accelerators sell for $1k-$100k",
    )
    chip_tdp_w: float | None = spec(
        None,
        label="Custom: power per chip",
        help="Custom hardware: power per chip instead of the catalogue's. Empty = the catalogue's.",
        unit="W",
        lo=0,
        lo_open=True,
        display_unit="W",
        plausible=(10, 10_000),
        plausible_why="accelerators draw 100-1,500 W",
    )
    chips_per_node: int = spec(
        0,
        label="Chips per node",
        help="Accelerators at one site. 0 = the most the regime's covered-cluster rule allows (8 with no rule).",
        unit="chips",
        lo=0,
        plausible=(0, 100_000),
        plausible_why="no single site holds more than 100,000 chips",
        glossary="node",
    )
    precision: Precision = spec(
        Precision.FP8,
        label="Precision",
        help="Training number format: bytes of state per parameter, bits per transmitted value (paper mode), "
        "peak FLOP/s used.",
    )
    mfu: float | None = spec(
        None,
        label="MFU",
        help="Model FLOP utilisation on the 6 P FLOP/token convention. Empty = the mode's default: paper 0.40 "
        "(PaLM 46.2%, Llama 3.1 405B 38-43%, INTELLECT-1 36-41%); default mode the catalogue's figure for "
        "the accelerator and precision.",
        lo=0,
        lo_open=True,
        hi=1,
        plausible=(0.05, 0.8),
        plausible_why="large runs report 0.35-0.46 (PaLM, Llama 3)",
    )
    num_nodes: int = spec(
        2,
        label="Nodes (sites)",
        help="Separate sites, one node each.",
        unit="nodes",
        lo=1,
        plausible=(1, 1_000_000),
        plausible_why="beyond any plausible evader (largest clusters ~200k GPUs)",
        glossary="site",
    )
    params: float = spec(
        91e9,
        label="Total parameters",
        help="Model size P (all parameters, experts included).",
        unit="parameters",
        quantity="count",
        lo=0,
        lo_open=True,
        display_unit="billions",
        display_scale=1e9,
        plausible=(1e7, 1e14),
        plausible_why="100 trillion parameters",
        ui_key="params_b",
        glossary="C_raw",
    )
    active_params: float | None = spec(
        None,
        label="Active parameters",
        help="Active parameters per token for mixture-of-experts models; empty = dense (= total).",
        unit="parameters",
        quantity="count",
        lo=0,
        lo_open=True,
        display_unit="billions",
        display_scale=1e9,
        ui_key="active_params_b",
    )
    moe_layers: int = spec(
        0,
        label="Expert-parallel MoE layers",
        help="MoE layers whose experts are spread across nodes (expert parallelism over the WAN; each costs a "
        "latency-bound exchange); 0 = none.",
        unit="layers",
        lo=0,
    )
    tokens: float | None = spec(
        None,
        label="Tokens",
        help="Training tokens D. Empty = as many as the time budget allows.",
        unit="tokens",
        quantity="count",
        lo=0,
        lo_open=True,
        display_unit="trillions",
        display_scale=1e12,
        plausible=(1e9, 1e15),
        plausible_why="the public human-text stock is ~300T tokens",
        ui_key="tokens_t",
    )
    local_batch_tokens: float = spec(
        131072.0,
        label="Local batch per node and inner step",
        help="Tokens per inner step per worker; paper 131,072 (32 x 4,096).",
        unit="tokens",
        quantity="count",
        lo=0,
        lo_open=True,
        display_unit="tokens",
        plausible=(1_000, 100_000_000),
        plausible_why="batches of 1k-100M tokens",
        glossary="inner step",
    )
    algorithm: Algorithm = spec(
        Algorithm.AUTO,
        label="Algorithm",
        help="auto: the paper's rule (streaming flat DiLoCo if the model fits one node, else PP-group "
        "DiLoCo); streaming = DiLoCo with overlapped sync; diloco = no overlap; ddp = all-reduce every step.",
        glossary="outer step / round",
    )
    overlap_communication: bool = spec(
        True,
        label="Overlap sync with compute (streaming)",
        help="Overlap syncs with compute (Streaming DiLoCo) for the hierarchical, PP, auto and DDP "
        "algorithms; streaming and diloco fix it.",
        ui_key="overlap",
    )
    inner_steps: int = spec(
        0,
        label="Inner steps H",
        help="Inner steps per outer step; 0 = the smallest compute-bound H (H_min).",
        unit="steps",
        lo=0,
        plausible=(0, 1_000_000),
        plausible_why="DiLoCo runs use H of 10-1,000",
        glossary="H",
    )
    codec: str = spec(
        "auto",
        label="Wire codec",
        help="Codec of the pseudo-gradient (data/codecs.toml): explicit bits per parameter, independent of "
        "the training precision. auto = 32 / compression ratio bits (published ratios are relative to "
        "FP32), sparse above 8x. Paper mode ignores it (precision bits / compression ratio).",
        choices=_codec_names,
        lookup=_codec_lookup,
        glossary="codec",
    )
    aggregation: str = spec(
        "auto",
        label="Aggregation",
        help="How syncs are aggregated (default mode): ring all-reduce, relay, all_gather, relay_dense; "
        "auto = what the codec's cited systems do (dense: ring; sparse: all-gather, or a dense relay "
        "once the gathered payloads outweigh it).",
        choices=lambda: ("auto", *AGGREGATIONS),
    )
    outer_state: OuterState = spec(
        OuterState.HOST,
        label="Outer-optimizer state in",
        help="Where outer-optimizer and error-feedback state live (default mode): host DRAM, as OpenDiLoCo, "
        "prime (INTELLECT-1), torchft and Templar do, or accelerator memory.",
    )
    optimizer_offload: Offload = spec(
        Offload.AUTO,
        label="Inner-optimizer offload",
        help="Inner-optimizer offload to host DRAM (default mode; ZeRO-Offload), with its host-link time per "
        "step; auto = only when the model does not fit otherwise.",
    )
    fragments: int = spec(
        1,
        label="Streaming fragments P",
        help="Streaming DiLoCo fragments (default mode; 1 = the whole model at once).",
        unit="fragments",
        lo=1,
        hi=10_000,
    )
    overlap_depth: int | None = spec(
        None,
        label="Overlap depth tau",
        help="Inner steps a fragment's sync may overlap (default mode); empty = the whole interval H / P, "
        "0 = none (each fragment's sync blocks).",
        unit="steps",
        lo=0,
        hi=10_000,
    )
    quality_mapping: str = spec(
        "compute",
        label="Quality mapping",
        help="Default mode's replica and sync-interval penalty: compute = the multiplier g(M, H, P, "
        "fragments) fitted in compute space to Charles et al. 2025 and Streaming DiLoCo "
        "(dispersal.model.quality); loss = the conservative loss-space bound of the same fit. Paper mode "
        "always uses the paper's form.",
        choices=lambda: ("compute", "loss"),
    )
    inner_optimizer: str = spec(
        "adamw",
        label="Inner optimizer",
        help="Default mode's fitted quality model: the replicas' inner optimizer (adamw = DiLoCo; muon = "
        "MuLoCo, Therien et al. 2025, whose replica penalty is about half AdamW's). g is relative to DP "
        "with the same optimizer. Paper mode ignores it.",
        choices=lambda: ("adamw", "muon"),
    )
    split_links: bool | None = spec(
        None,
        label="Separate side links",
        help="Default mode: false = one WAN link per node carries everything (pipeline, regional and global "
        "syncs share it); true = regional / pipeline links are separate links (default 1 Gbps / 20 ms, "
        "co-located); empty = true exactly when a regional or pipeline link is given.",
    )
    compression_ratio: float = spec(
        150.0,
        label="Pseudo-gradient compression ratio",
        help="Extra compression C_r of the pseudo-gradient, relative to FP32 (Covenant-72B / SparseLoCo: "
        ">146x, arXiv 2603.08163); paper 150.",
        lo=1,
        plausible=(1, 10_000),
        plausible_why="published codecs reach ~150-1,000x",
        glossary="codec",
    )
    error_feedback: bool = spec(
        True, label="Error feedback", help="Keep the compression residual and add it to the next sync."
    )
    compression_quality: str = spec(
        "expected",
        label="Compression quality (heuristic)",
        help="How much of the compression's loss penalty applies (optimistic / expected / conservative).",
        choices=lambda: _QUALITY_NAMES,
    )
    activation_compression: float = spec(
        4.0,
        label="Activation compression ratio",
        help="Compression of activations at pipeline boundaries.",
        lo=1,
        plausible=(1, 1000),
        plausible_why="activation codecs reach ~4-100x",
        glossary="codec",
    )
    activation_quality: str = spec(
        "expected",
        label="Activation compression quality (heuristic)",
        help="How much of the activation compression's loss penalty applies.",
        choices=lambda: _QUALITY_NAMES,
    )
    micro_batches: int = spec(
        8,
        label="Micro-batches (pipeline)",
        help="Micro-batches per pipeline step (sets the bubble).",
        unit="micro-batches",
        lo=1,
    )
    bandwidth_up_bits_per_s: float = spec(
        100e6,
        label="WAN upload",
        help="Each site's upload rate. With Links = one it also sets the regional and pipeline links.",
        unit="bit/s",
        quantity="bandwidth",
        lo=0,
        lo_open=True,
        plausible=_ETHERNET,
        plausible_why=_ETHERNET_WHY,
        ui_key="up_mbps",
        glossary="link",
        **_MBPS,
    )
    bandwidth_down_bits_per_s: float = spec(
        100e6,
        label="WAN download",
        help="Each site's download rate.",
        unit="bit/s",
        quantity="bandwidth",
        lo=0,
        lo_open=True,
        plausible=_ETHERNET,
        plausible_why=_ETHERNET_WHY,
        ui_key="down_mbps",
        glossary="link",
        **_MBPS,
    )
    latency_s: float = spec(
        0.100,
        label="WAN one-way latency",
        help="One-way WAN latency, counted once per message; fibre adds ~7.4 ms per 1,000 km (4.9 us/km x 1.5 "
        "routing).",
        unit="s",
        quantity="duration",
        lo=0,
        plausible=(0, 1.0),
        plausible_why="half way round the Earth is ~150 ms",
        ui_key="latency_ms",
        glossary="link",
        **_MS,
    )
    regional_bandwidth_bits_per_s: float | None = spec(
        None,
        label="Regional bandwidth",
        help="Link inside a regional group (hierarchical). Empty = the mode's default (paper: the WAN; "
        "default: 1 Gbps).",
        unit="bit/s",
        quantity="bandwidth",
        lo=0,
        lo_open=True,
        plausible=_ETHERNET,
        plausible_why=_ETHERNET_WHY,
        ui_key="regional_mbps",
        **_MBPS,
    )
    regional_latency_s: float | None = spec(
        None,
        label="Regional latency",
        help="One-way latency inside a regional group. Empty = the mode's default (paper: the WAN's; "
        "default: 20 ms).",
        unit="s",
        quantity="duration",
        lo=0,
        ui_key="regional_latency_ms",
        **_MS,
    )
    group_size: int = spec(
        8,
        label="Hierarchical group size",
        help="Nodes per regional group (hierarchical).",
        unit="nodes",
        lo=2,
    )
    pp_bandwidth_bits_per_s: float | None = spec(
        None,
        label="Pipeline link bandwidth",
        help="Link between pipeline stages. Empty = the mode's default (paper: the WAN; default: 1 Gbps).",
        unit="bit/s",
        quantity="bandwidth",
        lo=0,
        lo_open=True,
        plausible=_ETHERNET,
        plausible_why=_ETHERNET_WHY,
        ui_key="pp_mbps",
        **_MBPS,
    )
    pp_latency_s: float | None = spec(
        None,
        label="Pipeline link latency",
        help="One-way latency between pipeline stages. Empty = the mode's default (paper: the WAN's; "
        "default: 20 ms).",
        unit="s",
        quantity="duration",
        lo=0,
        ui_key="pp_latency_ms",
        **_MS,
    )
    straggler: Straggler = spec(
        Straggler.RELAY,
        label="Straggler mitigation",
        help="relay (async relay), synchronous, threshold, backup workers.",
    )
    duration_s: float = spec(
        740 * units.SECONDS_PER_DAY,
        label="Maximum duration",
        help="Time budget T. Paper: 740 days (Epoch's longest-rational-run formula, treaty growth rates).",
        unit="s",
        quantity="duration",
        lo=0,
        lo_open=True,
        display_unit="days",
        display_scale=units.SECONDS_PER_DAY,
        plausible=(units.SECONDS_PER_DAY, 3650 * units.SECONDS_PER_DAY),
        plausible_why="a run longer than 10 years",
        ui_key="duration_days",
    )
    pricing: Pricing = spec(
        Pricing.PURCHASE,
        label="Pricing",
        help="purchase (chips x capex multiplier) or rental (default mode only).",
    )
    capex_multiplier: float = spec(
        PAPER_CAPEX_MULTIPLIER,
        label="Capex multiplier (chip -> cluster)",
        help="Chip price to cluster cost; paper 1.64 x 1.23 (Cottier et al. 2024, arXiv 2405.21015).",
        lo=0,
        lo_open=True,
        plausible=(1, 10),
        plausible_why="cluster cost 1-10x the chips",
    )
    pue: float = spec(
        1.56,
        label="PUE",
        help="Power usage effectiveness (Uptime Institute Global Data Center Survey 2024: average 1.56).",
        lo=1,
        hi=5,
    )
    electricity_usd_per_kwh: float = spec(
        0.083,
        label="Electricity",
        help="Electricity price; US industrial average 2024 (EIA Electric Power Monthly, table 5.6.A: "
        "~8.3 cents/kWh).",
        unit="$/kWh",
        lo=0,
        plausible=(0, 1),
        plausible_why="more than $1 per kWh",
    )
    regime: str = spec(
        "treaty",
        label="Regime",
        help="Regime whose covered-cluster rule each node must stay under (none for no rule).",
        choices=lambda: tuple(regimes()),
        lookup=regime,
        glossary="covered cluster",
    )

    def __post_init__(self) -> None:
        require(
            self.schema_version == SCHEMA_VERSION,
            "schema_version",
            f"must be {SCHEMA_VERSION}, got {self.schema_version!r}",
        )
        # Every declared field: its type and bounds, from its one declaration (enums normalised).
        for f in SCENARIO_FIELDS:
            value = getattr(self, f.name)
            checked = f.check(value)
            if checked is not value:
                object.__setattr__(self, f.name, checked)
        # Cross-field rules.
        if self.active_params is not None:
            require(
                self.active_params <= self.params,
                "active_params",
                f"must be <= params ({self.params:g}), got {self.active_params:g}",
            )
        if self.aggregation == "ring" and self.codec_is_sparse:
            raise InputError(
                "aggregation",
                f"a ring all-reduce cannot sum sparse payloads (codec {self.codec!r}, "
                "supports differ between workers); use all_gather or relay_dense",
            )
        acc = self.accelerator
        if self.precision in (Precision.FP8, Precision.FP4):
            require(
                acc.dense_fp8_flop_per_s > 0,
                "precision",
                f"{acc.name} has no FP8 tensor path; use bf16 or fp16",
            )

    # --- derived -----------------------------------------------------------------------------
    @property
    def accelerator(self) -> Accelerator:
        """The catalogue entry for `hardware`, with the custom per-chip figures applied."""
        acc = accelerator(self.hardware)
        changes: dict[str, Any] = {}
        if self.chip_fp16_flop_per_s is not None:
            changes["dense_fp16_flop_per_s"] = self.chip_fp16_flop_per_s
            # FP8 keeps the catalogue chip's FP8 / FP16 ratio (2x on every FP8 chip listed).
            changes["dense_fp8_flop_per_s"] = (
                acc.dense_fp8_flop_per_s / acc.dense_fp16_flop_per_s * self.chip_fp16_flop_per_s
            )
        if self.chip_memory_bytes is not None:
            changes["hbm_bytes"] = self.chip_memory_bytes
        if self.chip_price_usd is not None:
            changes["price_usd"] = self.chip_price_usd
        if self.chip_tdp_w is not None:
            changes["tdp_w"] = self.chip_tdp_w
        return dataclasses.replace(acc, **changes) if changes else acc

    @property
    def codec_is_sparse(self) -> bool:
        """Whether the wire payload is sparse (top-k), so it cannot be summed in transit."""
        if self.codec == "auto":
            return self.compression_ratio > SPARSE_RATIO_THRESHOLD
        return codec(self.codec).sparse

    def wire(self) -> tuple[float, str, bool, float]:
        """Default mode's wire format: (bits/param, aggregation, error feedback, dense aggregate bits).

        Codec "auto": 32 / compression_ratio bits (published ratios are relative to FP32), sparse
        above 8x, error feedback as `error_feedback`. A named codec: its catalogue entry.
        Aggregation "auto": the codec's default (what its cited systems do).
        """
        if self.codec == "auto":
            bits = RATIO_REFERENCE_BITS / self.compression_ratio
            default_agg = "all_gather" if self.codec_is_sparse else "ring"
            ef, dense = self.error_feedback, DENSE_WIRE_BITS
        else:
            c = codec(self.codec)
            bits, default_agg, ef, dense = (
                c.wire_bits_per_param,
                c.default_aggregation,
                c.error_feedback,
                c.dense_aggregate_bits,
            )
        if self.aggregation != "auto":
            agg = self.aggregation
        elif default_agg == "all_gather":
            # Sparse payloads are gathered (as Covenant-72B / Templar do) until the M - 1 others'
            # payloads outweigh a dense aggregate, when a relay returning the dense sum is cheaper.
            agg = "gather_or_dense"
        else:
            agg = default_agg
        return bits, agg, ef, dense

    def links_split(self) -> bool:
        """Default mode: whether regional / pipeline links are separate from the WAN (see split_links)."""
        if self.split_links is not None:
            return self.split_links
        return any(
            v is not None
            for v in (
                self.regional_bandwidth_bits_per_s,
                self.regional_latency_s,
                self.pp_bandwidth_bits_per_s,
                self.pp_latency_s,
            )
        )

    @property
    def regime_entry(self) -> Regime:
        """The catalogue entry for `regime`."""
        return regime(self.regime)

    def resolved_chips_per_node(self) -> int:
        """chips_per_node, or the most chips a node may hold under the regime's rules.

        Compute rule: covered when node FP16 FLOP/s > cap, so floor(cap / chip FP16) chips are allowed.
        Memory rule (when set and the chip's memory counts): floor(cap_mem / chip memory).
        With no rule: 8 (a standard server).
        """
        if self.chips_per_node:
            return self.chips_per_node
        return max_chips_under(self.accelerator, self.regime_entry)

    def replace(self, **changes: Any) -> Scenario:
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (enums as strings, None kept) for JSON and TOML."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.value if isinstance(v, StrEnum) else v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        """Build from a dict. Unknown keys are an InputError; strings with units are parsed."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in names:
                close = (
                    difflib.get_close_matches(key, list(names), n=3, cutoff=0.6)
                    or [n for n in names if n.startswith(key.split("_")[0])][:3]
                )
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise InputError(key, f"unknown scenario key{hint}")
            kwargs[key] = coerce_field(key, value)
        return cls(**kwargs)


#: Every declared Scenario field (name, kind, default, spec) in declaration order.
SCENARIO_FIELDS: tuple[ScenarioField, ...] = scenario_fields(Scenario)
FIELD_BY_NAME: dict[str, ScenarioField] = {f.name: f for f in SCENARIO_FIELDS}


def coerce_field(key: str, value: Any) -> Any:
    """Convert a user value (string with a unit, number, bool text) to the field's type.

    The field's declaration says how (`fields.ScenarioField.parse`: bit/s fields take "100Mbps",
    durations "40ms", counts "91B", ...); bounds are checked when the Scenario is built.
    """
    if value is None:
        return None
    if key == "schema_version":
        try:
            return int(value)
        except (TypeError, ValueError):
            raise InputError(key, f"must be {SCHEMA_VERSION}, got {value!r}") from None
    return FIELD_BY_NAME[key].parse(value)


def max_chips_under(acc: Accelerator, reg: Regime) -> int:
    """Most chips of `acc` one node can hold without being covered by `reg` (>= 1)."""
    limits = []
    if reg.cluster_flop_per_s > 0:
        limits.append(math.floor(reg.cluster_flop_per_s / acc.dense_fp16_flop_per_s * (1 + 1e-12)))
    if reg.cluster_memory_bytes > 0 and acc.memory_counted_by_hbm_rule:
        limits.append(math.floor(reg.cluster_memory_bytes / acc.hbm_bytes * (1 + 1e-12)))
    if not limits:
        return 8
    return max(1, min(limits))


def latency_from_distance(distance_m: float, routing_overhead: float = 1.5) -> float:
    """One-way latency of a fibre route: distance x 4.9 us/km x routing overhead.

    Light in fibre covers ~204,000 km/s (4.9 us/km, anchors.md). Real routes are longer than the
    great circle and pass through routers: the stated overhead (default 1.5, an assumption in line
    with measured internet paths being 1.5-2x the geodesic) multiplies the distance.
    """
    require(distance_m >= 0, "distance", f"must be >= 0 m, got {distance_m}")
    require(routing_overhead >= 1, "routing_overhead", f"must be >= 1, got {routing_overhead}")
    return distance_m * FIBRE_S_PER_M * routing_overhead


def kernel_inputs(s: Scenario, mode: Mode | str, params: ModelParams = DEFAULT_PARAMS) -> dict[str, Any]:
    """Resolve a Scenario under a mode into the scalar inputs of `kernel.evaluate` (SI units).

    Paper mode keeps Rahman 2026's settings (module docstring); default mode resolves the grounded
    time model: codec wire bits and aggregation, where the outer state lives, offload, HBM
    headroom, host DRAM, shared links, fragments and overlap, MFU per accelerator and precision.
    """
    mode = Mode(mode)
    acc = s.accelerator
    reg = s.regime_entry
    chips = s.resolved_chips_per_node()
    prec = s.precision
    peak = acc.dense_fp8_flop_per_s if prec in (Precision.FP8, Precision.FP4) else acc.dense_fp16_flop_per_s
    paper = mode is Mode.PAPER
    wan_min = min(s.bandwidth_up_bits_per_s, s.bandwidth_down_bits_per_s)
    split = s.links_split()
    if paper:
        side_bw, side_lat = wan_min, s.latency_s
    elif split:
        side_bw, side_lat = DEFAULT_REGIONAL_BITS_PER_S, DEFAULT_REGIONAL_LATENCY_S
    else:
        side_bw, side_lat = wan_min, s.latency_s
    mode_code = {
        Algorithm.DDP: MODE_DDP,
        Algorithm.DILOCO: MODE_FLAT,
        Algorithm.STREAMING: MODE_FLAT,
        Algorithm.HIERARCHICAL: MODE_HIER,
        Algorithm.PP_DILOCO: MODE_PP,
        Algorithm.AUTO: MODE_AUTO,
    }[s.algorithm]
    streaming = s.overlap_communication
    if s.algorithm is Algorithm.DILOCO:
        streaming = False
    elif s.algorithm is Algorithm.STREAMING:
        streaming = True
    on = frozenset() if paper else params.correction_set()
    if paper:
        wire_bits = BITS_PER_VALUE[prec] / s.compression_ratio
        agg, ef, dense_bits, ddp_bits = "paper", s.error_feedback, BITS_PER_VALUE[prec], BITS_PER_VALUE[prec]
        comp_ratio = s.compression_ratio
        outer_bytes, outer_in_hbm = 0.0, True
        mfu = PAPER_MFU if s.mfu is None else s.mfu
    else:
        wire_bits, agg, ef, dense_bits = s.wire()
        ddp_bits = DENSE_WIRE_BITS if (s.codec == "auto" or s.codec_is_sparse) else wire_bits
        # The heuristic compression-quality table is keyed on the ratio to FP32.
        comp_ratio = max(1.0, RATIO_REFERENCE_BITS / wire_bits)
        outer_bytes = OUTER_STATE_BYTES_PER_PARAM + (ERROR_FEEDBACK_BYTES_PER_PARAM if ef else 0.0)
        outer_in_hbm = s.outer_state is OuterState.HBM
        if s.mfu is not None:
            mfu = s.mfu
        else:
            catalogue = acc.mfu_fp8 if prec in (Precision.FP8, Precision.FP4) else acc.mfu_bf16
            mfu = min(1.0, catalogue * params.mfu_scale)
    # Switched-off corrections fall back to the paper's form inside default mode (docs/model.md).
    if not paper:
        if "wire" not in on:
            wire_bits, ddp_bits, comp_ratio = (
                BITS_PER_VALUE[prec] / s.compression_ratio,
                BITS_PER_VALUE[prec],
                s.compression_ratio,
            )
        if "aggregation" not in on:
            agg = "paper"
        if "mfu" not in on and s.mfu is None:
            mfu = PAPER_MFU
        if "memory" not in on:
            outer_in_hbm = True
    memory_on = "memory" in on
    overlap_on = "overlap" in on
    x: dict[str, Any] = {
        "mode": mode_code,
        "streaming": streaming,
        "num_nodes": s.num_nodes,
        "chips_per_node": chips,
        "params": s.params,
        "active_params": s.active_params if s.active_params is not None else s.params,
        "node_peak_flop_per_s": chips * peak,
        "mfu": mfu,
        "node_memory_bytes": chips * acc.hbm_bytes,
        "bytes_per_param": STATE_BYTES_PER_PARAM[prec],
        # State beyond the inner optimizer's that sits in HBM (the planner's quick fit filter).
        "extra_bytes_per_param": outer_bytes if outer_in_hbm else 0.0,
        "activation_memory": not paper,
        "activation_bytes_per_value": ACT_BYTES_PER_VALUE[prec],
        "compression_ratio": comp_ratio,
        "error_feedback": ef,
        "compression_quality": quality_code(s.compression_quality, "compression_quality"),
        "activation_compression": s.activation_compression,
        "activation_quality": quality_code(s.activation_quality, "activation_quality"),
        "up_bits_per_s": s.bandwidth_up_bits_per_s,
        "down_bits_per_s": s.bandwidth_down_bits_per_s,
        "latency_s": s.latency_s,
        "regional_bits_per_s": (s.regional_bandwidth_bits_per_s or side_bw) if (paper or split) else side_bw,
        "regional_latency_s": (side_lat if s.regional_latency_s is None else s.regional_latency_s)
        if (paper or split)
        else side_lat,
        "group_size": s.group_size,
        "pp_bits_per_s": (s.pp_bandwidth_bits_per_s or side_bw) if (paper or split) else side_bw,
        "pp_latency_s": (side_lat if s.pp_latency_s is None else s.pp_latency_s)
        if (paper or split)
        else side_lat,
        "straggler": STRAGGLER_CODES[s.straggler],
        "local_batch_tokens": s.local_batch_tokens,
        "micro_batches": s.micro_batches,
        "inner_steps": s.inner_steps,
        "duration_s": s.duration_s,
        "tokens": s.tokens or 0.0,
        "moe_layers": s.moe_layers,
        "pp_shard_sync": not paper,
        "price_usd_per_chip": acc.price_usd,
        "capex_multiplier": s.capex_multiplier,
        "rental_usd_per_chip_hour": acc.rental_usd_per_hour,
        "rental": (s.pricing is Pricing.RENTAL) and not paper,
        "tdp_w": acc.tdp_w,
        "pue": s.pue,
        "electricity_usd_per_kwh": 0.0 if paper else s.electricity_usd_per_kwh,
        "node_fp16_flop_per_s": chips * acc.dense_fp16_flop_per_s,
        "node_counted_memory_bytes": chips * acc.hbm_bytes if acc.memory_counted_by_hbm_rule else 0.0,
        "cap_flop_per_s": reg.cluster_flop_per_s,
        "cap_memory_bytes": reg.cluster_memory_bytes,
        "wire_bits_per_param": wire_bits,
        "ddp_wire_bits_per_param": ddp_bits,
        "aggregation": AGGREGATION_CODES[agg],
        "dense_aggregate_bits_per_param": dense_bits,
        "outer_state_bytes_per_param": outer_bytes,
        "outer_state_in_hbm": outer_in_hbm,
        "offload": {Offload.NEVER: 0, Offload.ALWAYS: 1, Offload.AUTO: 2}[s.optimizer_offload]
        if memory_on
        else 0,
        "offload_hbm_bytes_per_param": OFFLOAD_HBM_BYTES_PER_PARAM,
        "host_memory_bytes": chips * acc.host_memory_bytes if memory_on else math.inf,
        "host_link_bytes_per_s": acc.host_link_bytes_per_s,
        "hbm_usable_fraction": params.hbm_usable_fraction if memory_on else 1.0,
        "auto_policy": 1 if memory_on else 0,
        "link_shared": ("link_budget" in on) and not split,
        "fragments": s.fragments if overlap_on else 1,
        "overlap_depth": -1 if (not overlap_on or s.overlap_depth is None) else s.overlap_depth,
        "sync_backward_overlap": params.ddp_overlap_fraction if overlap_on else 0.0,
        "ddp_overlap_fraction": params.ddp_overlap_fraction if overlap_on else 1.0,
        "quality_mapping": {"compute": 0, "loss": 1}[s.quality_mapping] if "quality" in on else -1,
        "inner_optimizer": {"adamw": 0, "muon": 1}[s.inner_optimizer],
    }
    return x


def as_arrays(x: dict[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """Scalars to 0-d float arrays."""
    return {k: np.asarray(v, dtype=np.float64) for k, v in x.items()}
