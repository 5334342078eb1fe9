"""The declaration of every input of a run: the choices (enums) and `ScenarioFields`, one `fields.spec`
per field (unit, bounds, label, help). `scenario.Scenario` adds the validation and the derived
values; everything else reads these declarations."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import accelerator, accelerators, codec, codecs, regime, regimes
from dispersal.model.inputs.codes import (
    AGGREGATION_CODES,
    ALGO_AUTO,
    ALGO_DILOCO,
    ALGORITHM_NAMES,
    Straggler,
    Trust,
)
from dispersal.model.inputs.decoupled import (
    DEFAULT_MERGE_RULE,
    DEFAULT_QUORUM_FRACTION,
    MERGE_RULE_CODES,
    SYNCER_PLACEMENTS,
)
from dispersal.model.inputs.fields import spec

#: Aggregations a user may ask for (the paper's relay formula is paper mode's own).
AGGREGATIONS: tuple[str, ...] = tuple(a for a in AGGREGATION_CODES if a != "paper")

SCHEMA_VERSION = 1


class Mode(StrEnum):
    """Which model: the paper's settings, or the project's default (see `scenario`'s module docstring)."""

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
    DECOUPLED = "decoupled"
    """Decoupled DiLoCo (Google DeepMind, arXiv 2604.21428): learner islands on their own clocks, a
    syncer that merges on a quorum; a failure stops one island only."""
    SITE_PP_DILOCO = "site_pp_diloco"
    """Pipelines inside each site of `nodes_per_site` nodes on a fast local fabric, data parallel across
    a site's pipelines, DiLoCo across sites over the WAN (DiLoCoX, Qi et al. 2025, arXiv 2506.21263)."""


#: Scenario algorithms that are not a kernel algorithm of the same name (`ALGORITHM_NAMES`): ``auto``
#: (resolved by the kernel) and ``streaming`` (flat DiLoCo overlapped).
_OWN_CODE: dict[Algorithm, int] = {Algorithm.AUTO: ALGO_AUTO, Algorithm.STREAMING: ALGO_DILOCO}
_CODE_OF_NAME: dict[str, int] = {name: code for code, name in ALGORITHM_NAMES.items()}


def _code(a: Algorithm) -> int:
    """The kernel code of scenario algorithm `a` (a member without one is a programming error)."""
    if a in _OWN_CODE:
        return _OWN_CODE[a]
    if a.value not in _CODE_OF_NAME:
        raise ValueError(
            f"Algorithm.{a.name}: no kernel code named {a.value!r} in inputs.codes.ALGORITHM_NAMES"
        )
    return _CODE_OF_NAME[a.value]


#: The kernel's algorithm code of each scenario algorithm.
ALGORITHM_CODE: dict[Algorithm, int] = {a: _code(a) for a in Algorithm}


def _member(code: int, name: str) -> Algorithm:
    """The scenario algorithm that runs kernel code `code` (named `name`): the member of its name, flat
    DiLoCo as Streaming DiLoCo (the planner's choice)."""
    if code == ALGO_DILOCO:
        return Algorithm.STREAMING
    if name not in {a.value for a in Algorithm}:
        raise ValueError(f"inputs.codes.ALGORITHM_NAMES[{code}] = {name!r}: no Algorithm member of that name")
    return Algorithm(name)


#: The scenario algorithm that runs a resolved kernel code (a plan's scenario).
SCENARIO_ALGORITHM: dict[int, Algorithm] = {
    code: _member(code, name) for code, name in ALGORITHM_NAMES.items()
}


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


#: Cottier et al. 2024 ("The rising costs of training frontier AI models", arXiv 2405.21015):
#: chip -> server 1.64, server -> cluster 1.23 (Rahman 2026 sec. 7).
PAPER_CAPEX_MULTIPLIER = 1.64 * 1.23

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
class ScenarioFields:
    """Every input of one run, declared once (`fields.spec`); `Scenario` is the class to use."""

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
        "DiLoCo; in default mode pipelines inside sites when nodes_per_site holds one and that is faster); "
        "streaming = DiLoCo with overlapped sync; diloco = no overlap; ddp = all-reduce every step; "
        "site_pp_diloco = pipelines inside sites of nodes_per_site nodes, DiLoCo across sites.",
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
        "(dispersal.model.kernel.quality); loss = the conservative loss-space bound of the same fit. Paper mode "
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
    trust: Trust = spec(
        Trust.TRUSTED,
        label="Trust between sites",
        help="trusted (one operator's sites: updates averaged as they come) or permissionless "
        "(independent providers: each update scored by validators and the worst left out, which costs "
        "validator nodes, validation time and discarded updates).",
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
    quorum_fraction: float = spec(
        DEFAULT_QUORUM_FRACTION,
        label="Decoupled: syncer quorum",
        help="Decoupled DiLoCo: fraction of the learners the syncer waits for before it merges (ceil(q M) "
        "learners). Default 0.5, an assumption (the paper varies the minimum quorum from 1 to M). Other "
        "algorithms ignore it.",
        lo=0,
        lo_open=True,
        hi=1,
    )
    merge_rule: str = spec(
        DEFAULT_MERGE_RULE,
        label="Decoupled: merge rule",
        help="Decoupled DiLoCo: how the syncer merges learner updates: norm_preserving (the paper's: average "
        "directions, keep the mean norm) or mean. Matters to the quality model only where the outer "
        "learning rate is not retuned per M. Other algorithms merge by mean.",
        choices=lambda: tuple(MERGE_RULE_CODES),
    )
    syncer: str = spec(
        "relay",
        label="Decoupled: syncer placement",
        help="Decoupled DiLoCo: where the syncer sits: relay (a separate coordinator, the paper's CPU-only "
        "syncer, whose own link is not the bottleneck) or site (at one learner's site, whose link then "
        "carries every other learner's payload).",
        choices=lambda: SYNCER_PLACEMENTS,
    )
    nodes_per_site: int = spec(
        1,
        label="Nodes per site (site_pp_diloco)",
        help="Nodes that share one site and its fast local fabric (site_pp_diloco: pipelines stay inside a "
        "site, DiLoCo runs across the num_nodes / nodes_per_site sites). Each node keeps its own WAN link; "
        "the covered-cluster rule counts a site's nodes together. 1 = every node its own site.",
        unit="nodes",
        lo=1,
        plausible=(1, 10_000),
        plausible_why="a site of more than 10,000 nodes",
    )
    site_fabric_bits_per_s: float | None = spec(
        None,
        label="Site fabric bandwidth per node",
        help="Each node's link to the other nodes of its site (site_pp_diloco). Empty = 400 Gbps, one NDR "
        "InfiniBand port (NVIDIA Quantum-2 / ConnectX-7; a DGX H100 has eight).",
        unit="bit/s",
        quantity="bandwidth",
        lo=0,
        lo_open=True,
        plausible=(1e9, 1e13),
        plausible_why="datacenter fabrics run 10 Gb/s to a few Tb/s per node",
        **_MBPS,
    )
    site_fabric_latency_s: float | None = spec(
        None,
        label="Site fabric latency",
        help="One-way latency inside a site's fabric (site_pp_diloco). Empty = 5 us (assumption: a few "
        "switch hops of ~1 us plus the software stack).",
        unit="s",
        quantity="duration",
        lo=0,
        plausible=(0, 0.001),
        plausible_why="a local fabric is under a millisecond",
        **_MS,
    )
