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

from dispersal.model.inputs.catalog import (
    Accelerator,
    Regime,
    accelerator,
    codec,
    regime,
)
from dispersal.model.inputs.codes import (
    AGGREGATION_CODES,
    STRAGGLER_CODES,
    TRUST_CODES,
    quality_code,
)
from dispersal.model.inputs.decoupled import MERGE_RULE_CODES
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.fields import ScenarioField, scenario_fields
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario_fields import AGGREGATIONS as AGGREGATIONS
from dispersal.model.inputs.scenario_fields import ALGORITHM_CODE as ALGORITHM_CODE
from dispersal.model.inputs.scenario_fields import PAPER_CAPEX_MULTIPLIER as PAPER_CAPEX_MULTIPLIER
from dispersal.model.inputs.scenario_fields import SCENARIO_ALGORITHM as SCENARIO_ALGORITHM
from dispersal.model.inputs.scenario_fields import SCHEMA_VERSION as SCHEMA_VERSION
from dispersal.model.inputs.scenario_fields import Algorithm as Algorithm
from dispersal.model.inputs.scenario_fields import Mode as Mode
from dispersal.model.inputs.scenario_fields import Offload as Offload
from dispersal.model.inputs.scenario_fields import OuterState as OuterState
from dispersal.model.inputs.scenario_fields import Precision as Precision
from dispersal.model.inputs.scenario_fields import Pricing as Pricing
from dispersal.model.inputs.scenario_fields import ScenarioFields
from dispersal.model.inputs.sites import ChurnEvent, Site, parse_churn, parse_sites, site_scenario

# ZeRO accounting (FP32 master + Adam m, v): BF16/FP16 16 B, FP8 14 B, FP4 13 B (spec sec. 2).
STATE_BYTES_PER_PARAM = {Precision.BF16: 16.0, Precision.FP16: 16.0, Precision.FP8: 14.0, Precision.FP4: 13.0}
# Bits per transmitted pseudo-gradient value before extra compression (spec sec. 3).
BITS_PER_VALUE = {Precision.BF16: 16.0, Precision.FP16: 16.0, Precision.FP8: 8.0, Precision.FP4: 4.0}
# Bytes per activation value on a pipeline boundary (spec sec. 3; FP4 activations kept at FP8).
ACT_BYTES_PER_VALUE = {Precision.BF16: 2.0, Precision.FP16: 2.0, Precision.FP8: 1.0, Precision.FP4: 1.0}

#: Default-mode regional / pipeline link: co-located sites (spec sec. 3 defaults).
DEFAULT_REGIONAL_BITS_PER_S = 1e9
DEFAULT_REGIONAL_LATENCY_S = 0.020
#: Site fabric per node (site_pp_diloco) when none is given, both modes: one 400 Gb/s NDR InfiniBand
#: port (NVIDIA Quantum-2 / ConnectX-7 data sheets; a DGX H100 has eight, so the conservative end).
DEFAULT_SITE_FABRIC_BITS_PER_S = 400e9
#: One-way site fabric latency when none is given. Assumption: a few switch hops of ~1 us plus software.
DEFAULT_SITE_FABRIC_LATENCY_S = 5e-6
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


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario(ScenarioFields):
    """One distributed training run. SI units; None = derived from the mode (module docstring).

    Each field is declared once with `fields.spec`: its unit, bounds, label and help. Validation,
    parsing (`from_dict`, the CLI's --set), ``dispersal fields`` and the app's inputs read it.
    `sites` and `churn` (``[[site]]``, ``[[churn]]``; `inputs.sites`) are the two list fields.
    """

    sites: tuple[Site, ...] = ()
    """Heterogeneous sites (``[[site]]``); empty = `num_nodes` identical nodes. When given,
    `num_nodes` is their total and each site's links, hardware and batch replace the scenario's."""
    churn: tuple[ChurnEvent, ...] = ()
    """Nodes joining / leaving sites on a schedule (``[[churn]]``); needs `sites`."""

    def __post_init__(self) -> None:
        require(
            self.schema_version == SCHEMA_VERSION,
            "schema_version",
            f"must be {SCHEMA_VERSION}, got {self.schema_version!r}",
        )
        # Every declared field: its type and bounds, from its one declaration (enums normalised).
        self._check_fields(SCENARIO_FIELDS)
        self._check_sites()
        self._check_cross()

    def _check_fields(self, fields: tuple[ScenarioField, ...]) -> None:
        for f in fields:
            value = getattr(self, f.name)
            checked = f.check(value)
            if checked is not value:
                object.__setattr__(self, f.name, checked)

    def _check_cross(self) -> None:
        """The rules between fields."""
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

    def _check_sites(self) -> None:
        """Parse `sites` / `churn` (dicts allowed) and set num_nodes to the sites' total."""
        if self.sites:
            sites = parse_sites(self.sites)
            object.__setattr__(self, "sites", sites)
            object.__setattr__(self, "num_nodes", sum(s.nodes for s in sites))
            for i, site in enumerate(sites):
                # Each site's own combination (hardware x precision, ...) passes the scenario's rules.
                site_scenario(self, site, i, self.num_nodes)
        else:
            object.__setattr__(self, "sites", ())
        object.__setattr__(self, "churn", parse_churn(self.churn, self.sites) if self.churn else ())

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
        """A validated copy with some fields changed.

        Without site tables (and not changing them), only the changed fields and the cross-field
        rules are checked: the others were checked when this scenario was made (a solve or a sweep
        makes ~10^5 copies). Same result and same first error as `dataclasses.replace`.
        """
        if self.sites or self.churn or not changes.keys() <= _FAST_REPLACE:
            return dataclasses.replace(self, **changes)
        new = object.__new__(type(self))
        for name in _SLOTS:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        new._check_fields(tuple(f for f in SCENARIO_FIELDS if f.name in changes))
        new._check_cross()
        return new

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (enums as strings, None kept) for JSON and TOML."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in ("sites", "churn"):
                # Listed only when given (TOML's [[site]] / [[churn]] tables), so a plain scenario's
                # dict is as before.
                if v:
                    out["site" if f.name == "sites" else "churn"] = [x.to_dict() for x in v]
                continue
            out[f.name] = v.value if isinstance(v, StrEnum) else v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        """Build from a dict. Unknown keys are an InputError; strings with units are parsed."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("site", "sites", "churn"):
                kwargs["churn" if key == "churn" else "sites"] = value
                continue
            if key not in names:
                close = (
                    difflib.get_close_matches(key, list(names), n=3, cutoff=0.6)
                    or [n for n in names if n.startswith(key.split("_")[0])][:3]
                )
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise InputError(key, f"unknown scenario key{hint}")
            kwargs[key] = coerce_field(key, value)
        s = cls(**kwargs)
        if s.sites and "num_nodes" in kwargs and kwargs["num_nodes"] != s.num_nodes:
            # With [[site]] tables the node count is theirs; a different one given too is a mistake.
            raise InputError(
                "num_nodes",
                f"is the [[site]] tables' total ({s.num_nodes}) here, got {kwargs['num_nodes']}; change a site's nodes",
            )
        return s


#: Every declared Scenario field (name, kind, default, spec) in declaration order.
SCENARIO_FIELDS: tuple[ScenarioField, ...] = scenario_fields(Scenario)
FIELD_BY_NAME: dict[str, ScenarioField] = {f.name: f for f in SCENARIO_FIELDS}
#: Every attribute of a Scenario, and those `Scenario.replace` may change on its fast path (the
#: declared fields but the schema version; the site tables take the full path).
_SLOTS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Scenario))
_FAST_REPLACE: frozenset[str] = frozenset(FIELD_BY_NAME) - {"schema_version"}


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
    A scenario with ``[[site]]`` tables goes through `dispersal.model.sites.reduce.scenario_inputs`
    (the identical-node inputs with its paced figures).
    """
    mode = Mode(mode)
    _refuse_sites(s)
    acc = s.accelerator
    reg = s.regime_entry
    chips = s.resolved_chips_per_node()
    prec = s.precision
    peak = acc.dense_fp8_flop_per_s if prec in (Precision.FP8, Precision.FP4) else acc.dense_fp16_flop_per_s
    paper = mode is Mode.PAPER
    wan_min = min(s.bandwidth_up_bits_per_s, s.bandwidth_down_bits_per_s)
    split = s.links_split()
    if split and not paper:
        side_bw, side_lat = DEFAULT_REGIONAL_BITS_PER_S, DEFAULT_REGIONAL_LATENCY_S
    else:
        side_bw, side_lat = wan_min, s.latency_s
    streaming = _streaming(s)
    on = frozenset() if paper else params.correction_set()
    if paper:
        wire_bits = BITS_PER_VALUE[prec] / s.compression_ratio
        agg, ef, dense_bits, ddp_bits = "paper", s.error_feedback, BITS_PER_VALUE[prec], BITS_PER_VALUE[prec]
        comp_ratio = s.compression_ratio
        outer_bytes, outer_in_hbm = 0.0, True
        mfu = PAPER_MFU if s.mfu is None else s.mfu
    else:
        wire_bits, agg, ef, dense_bits = s.wire()
        # DDP sends dense bf16 gradients for codec "auto"; a named codec is honoured per step (DeMo /
        # DisTrO-style compressed exchange, kernel.algorithms.ddp), with the codec's aggregation.
        ddp_bits = DENSE_WIRE_BITS if s.codec == "auto" else wire_bits
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
        "algorithm": ALGORITHM_CODE[s.algorithm],
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
        "trust": TRUST_CODES[s.trust],
        "local_batch_tokens": s.local_batch_tokens,
        "micro_batches": s.micro_batches,
        "inner_steps": s.inner_steps,
        "duration_s": s.duration_s,
        "tokens": s.tokens or 0.0,
        "moe_layers": s.moe_layers,
        "pp_shard_sync": not paper,
        "nodes_per_site": s.nodes_per_site,
        "site_fabric_bits_per_s": s.site_fabric_bits_per_s or DEFAULT_SITE_FABRIC_BITS_PER_S,
        "site_fabric_latency_s": DEFAULT_SITE_FABRIC_LATENCY_S
        if s.site_fabric_latency_s is None
        else s.site_fabric_latency_s,
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
        "ddp_aggregation": AGGREGATION_CODES[ddp_aggregation(s, paper, agg, ddp_bits, wire_bits)],
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
        "quorum_fraction": s.quorum_fraction,
        "merge_rule": MERGE_RULE_CODES[s.merge_rule],
        "syncer_at_site": s.syncer == "site",
        # Default mode with its quality model: the schedule that maximises C_quality (kernel.choose).
        "schedule_rule": 1 if "quality" in on else 0,
    }
    return x


def _refuse_sites(s: Scenario) -> None:
    """Refuse a scenario with ``[[site]]`` tables: its identical-node figures would silently ignore the
    sites' links and hardware; a command that reads sites calls `sites.reduce.scenario_inputs`."""
    if s.sites:
        raise InputError(
            "site",
            "this command evaluates identical nodes only; [[site]] tables are read by estimate, solve, "
            "validate and plan --sites",
        )


def _streaming(s: Scenario) -> bool:
    """Whether outer steps overlap the next inner steps: `diloco` never, `streaming` always, Decoupled
    DiLoCo always (its learners never block on a sync), otherwise `overlap_communication`."""
    if s.algorithm is Algorithm.DILOCO:
        return False
    if s.algorithm in (Algorithm.STREAMING, Algorithm.DECOUPLED):
        return True
    return s.overlap_communication


def ddp_aggregation(s: Scenario, paper: bool, agg: str, ddp_bits: float, wire_bits: float) -> str:
    """The topology of DDP's per-step exchange: a ring all-reduce of dense gradients, except in
    default mode with a named codec whose bits are on the wire, where the codec's aggregation `agg`
    is used (sparse payloads cannot be summed in transit: gathered or relayed)."""
    compressed = not paper and s.codec != "auto" and ddp_bits == wire_bits and agg != "paper"
    return agg if compressed else "ring"


def as_arrays(x: dict[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """Scalars to 0-d float arrays."""
    return {k: np.asarray(v, dtype=np.float64) for k, v in x.items()}
