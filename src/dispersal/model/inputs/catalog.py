"""Catalogues shipped as TOML package data: accelerators, regimes, reference models, paper tables,
wire codecs.

Loaded with the standard library (tomllib + importlib.resources); data, not code. Each entry keeps
its `source`. Lookups accept names and aliases, case-insensitively, and suggest the nearest name.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.units import H100E_FLOP_PER_S


def _load(name: str) -> dict[str, Any]:
    text = resources.files("dispersal.data").joinpath(name).read_text(encoding="utf-8")
    return tomllib.loads(text)


@dataclass(frozen=True, kw_only=True, slots=True)
class Accelerator:
    """One accelerator chip. Per-chip figures in SI units."""

    name: str
    aliases: tuple[str, ...]
    vendor: str
    dense_fp16_flop_per_s: float
    """Dense FP16/BF16 tensor FLOP/s."""
    dense_fp8_flop_per_s: float
    """Dense FP8 tensor FLOP/s; 0 = no FP8 path."""
    hbm_bytes: float
    memory_bandwidth_bytes_per_s: float
    tdp_w: float
    price_usd: float
    rental_usd_per_hour: float
    memory_kind: str
    paper_search: bool
    paper_fp8: bool
    source: str
    host_memory_bytes: float = 0.0
    """Host DRAM per chip in the vendor's reference server (bytes); default mode only."""
    host_link_bytes_per_s: float = 0.0
    """Per-direction host<->chip bandwidth (bytes/s, raw: PCIe Gen4 x16 32e9, Gen5 x16 64e9)."""
    host_source: str = ""
    mfu_bf16: float = 0.0
    """MFU at BF16/FP16, fraction of `dense_fp16_flop_per_s`, 6P convention (`dispersal.model.kernel.flops`)."""
    mfu_fp8: float = 0.0
    """MFU at FP8, fraction of `dense_fp8_flop_per_s` (= mfu_bf16 x fp8_speedup / 2); 0 = no FP8 path."""
    fp8_speedup: float = 0.0
    """End-to-end FP8/BF16 training-throughput ratio behind `mfu_fp8`; 0 = no FP8 path."""
    mfu_source: str = ""

    @property
    def h100_equivalents(self) -> float:
        """Dense FP16 FLOP/s / 990e12 (MIRI treaty proposal's H100-equivalence)."""
        return self.dense_fp16_flop_per_s / H100E_FLOP_PER_S

    @property
    def memory_counted_by_hbm_rule(self) -> bool:
        """An HBM rule counts HBM or chip-addressable stacked memory, not GDDR."""
        return not self.memory_kind.upper().startswith("GDDR")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, with the derived H100-equivalence."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["aliases"] = list(self.aliases)
        d["h100_equivalents"] = self.h100_equivalents
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class Regime:
    """A governance regime: training-compute threshold and covered-cluster rule."""

    name: str
    aliases: tuple[str, ...]
    training_threshold_flop: float
    cluster_flop_per_s: float
    """A node is covered when its dense FP16 FLOP/s is above this; 0 = no compute rule."""
    cluster_memory_bytes: float
    """A node is covered when its accelerator memory is above this; 0 = no memory rule."""
    description: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["aliases"] = list(self.aliases)
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class ReferenceModel:
    """A published training run used as a compute landmark."""

    name: str
    label: str
    params: float
    total_params: float
    tokens: float
    training_flop: float
    source: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Codec:
    """A wire codec for the outer sync: bits one worker sends per model parameter.

    Bits are per parameter of the synced tensor and independent of the training precision.
    Entries and sources: ``data/codecs.toml``.
    """

    name: str
    value_bits: float
    """Bits per transmitted value."""
    density: float
    """Fraction of the parameters transmitted, in (0, 1]; 1 = dense."""
    index_bits: float
    """Bits per transmitted value that locate it (0 for dense codecs)."""
    overhead_bits_per_param: float
    """Scales, codebooks and headers amortised over all parameters (bits per parameter)."""
    sparse: bool
    """Supports differ between workers: payloads cannot be summed in transit."""
    error_feedback: bool
    default_aggregation: str
    """ring | relay | all_gather | relay_dense: what the cited real systems do."""
    dense_aggregate_bits: float
    """Bits per parameter of the dense aggregate a relay returns for this codec."""
    quality_key: str
    source: str
    note: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def wire_bits_per_param(self) -> float:
        """density x (value_bits + index_bits) + overhead_bits_per_param (bits per parameter)."""
        return self.density * (self.value_bits + self.index_bits) + self.overhead_bits_per_param

    @property
    def compression_vs_fp32(self) -> float:
        """32 / wire bits per parameter: the ratio the literature quotes (relative to FP32)."""
        return 32.0 / self.wire_bits_per_param

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, with the derived wire bits per parameter."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["aliases"] = list(self.aliases)
        d["wire_bits_per_param"] = self.wire_bits_per_param
        return d


#: Aggregation patterns a codec may name (``Codec.default_aggregation``).
AGGREGATIONS = ("ring", "relay", "all_gather", "relay_dense")

_ACCELERATOR_FLOATS = (
    "dense_fp16_flop_per_s",
    "dense_fp8_flop_per_s",
    "hbm_bytes",
    "memory_bandwidth_bytes_per_s",
    "tdp_w",
    "price_usd",
    "rental_usd_per_hour",
    "host_memory_bytes",
    "host_link_bytes_per_s",
    "mfu_bf16",
    "mfu_fp8",
    "fp8_speedup",
)


@cache
def accelerators() -> Mapping[str, Accelerator]:
    """All accelerators by canonical name."""
    out: dict[str, Accelerator] = {}
    for e in _load("hardware.toml")["accelerator"]:
        e = dict(e)
        e["aliases"] = tuple(e.get("aliases", ()))
        for key in _ACCELERATOR_FLOATS:
            if key in e:
                e[key] = float(e[key])
        out[e["name"]] = Accelerator(**e)
    # Read-only: the cache is shared by every caller in the process.
    return MappingProxyType(out)


@cache
def regimes() -> Mapping[str, Regime]:
    """All regimes by canonical name."""
    out: dict[str, Regime] = {}
    for e in _load("regimes.toml")["regime"]:
        e = dict(e)
        e["aliases"] = tuple(e.get("aliases", ()))
        for key in ("training_threshold_flop", "cluster_flop_per_s", "cluster_memory_bytes"):
            e[key] = float(e[key])
        out[e["name"]] = Regime(**e)
    # Read-only: the cache is shared by every caller in the process.
    return MappingProxyType(out)


@cache
def reference_models() -> Mapping[str, ReferenceModel]:
    """Reference runs (GPT-4, Llama 3.1 405B, DeepSeek-V3, ...) by name."""
    out: dict[str, ReferenceModel] = {}
    for e in _load("reference_models.toml")["model"]:
        e = dict(e)
        for key in ("params", "total_params", "tokens", "training_flop"):
            e[key] = float(e[key])
        out[e["name"]] = ReferenceModel(**e)
    # Read-only: the cache is shared by every caller in the process.
    return MappingProxyType(out)


def _check_codec(c: Codec) -> Codec:
    """Data-file sanity: a malformed entry fails loudly at load, naming the codec and field."""
    where = f"codecs.toml[{c.name}]"
    if not 0 < c.density <= 1:
        raise InputError(where, f"density must be in (0, 1], got {c.density}")
    for key in ("value_bits", "dense_aggregate_bits"):
        if not getattr(c, key) > 0:
            raise InputError(where, f"{key} must be > 0, got {getattr(c, key)}")
    for key in ("index_bits", "overhead_bits_per_param"):
        if getattr(c, key) < 0:
            raise InputError(where, f"{key} must be >= 0, got {getattr(c, key)}")
    if c.default_aggregation not in AGGREGATIONS:
        raise InputError(
            where,
            f"default_aggregation must be one of {', '.join(AGGREGATIONS)}, got {c.default_aggregation!r}",
        )
    if c.sparse != (c.density < 1):
        raise InputError(where, f"sparse must be {c.density < 1} for density {c.density}")
    if c.sparse and c.default_aggregation == "ring":
        raise InputError(
            where, "a sparse codec cannot be summed in a ring; use relay_dense, all_gather or relay"
        )
    return c


@cache
def codecs() -> Mapping[str, Codec]:
    """All wire codecs by name (read-only)."""
    out: dict[str, Codec] = {}
    for e in _load("codecs.toml")["codec"]:
        e = dict(e)
        e["aliases"] = tuple(e.get("aliases", ()))
        for key in ("value_bits", "density", "index_bits", "overhead_bits_per_param", "dense_aggregate_bits"):
            e[key] = float(e[key])
        out[e["name"]] = _check_codec(Codec(**e))
    # Read-only: the cache is shared by every caller in the process.
    return MappingProxyType(out)


def codec(name: str, field: str = "codec") -> Codec:
    """Find a codec by name or alias, case-insensitively; InputError listing the known ones otherwise."""
    result: Codec = _lookup(codecs(), name, field, "codec")
    return result


@cache
def paper_tables() -> dict[str, Any]:
    """The paper's published tables (Table 1, bandwidth and latency sweeps, headline figures)."""
    return _load("paper_tables.toml")


def _lookup(table: Mapping[str, Any], name: str, field: str, kind: str) -> Any:
    key = str(name).strip()
    if key in table:
        return table[key]
    norm = key.lower().replace("-", "_").replace(" ", "_")
    for entry in table.values():
        names = [entry.name, *entry.aliases]
        if any(norm == n.lower().replace("-", "_").replace(" ", "_") for n in names):
            return entry
    all_names = sorted({n for e in table.values() for n in (e.name, *e.aliases)})
    close = difflib.get_close_matches(key, all_names, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise InputError(field, f"unknown {kind} {name!r}{hint}; known: {', '.join(sorted(table))}")


def accelerator(name: str, field: str = "hardware") -> Accelerator:
    """Find an accelerator by name or alias; InputError with a did-you-mean otherwise."""
    result: Accelerator = _lookup(accelerators(), name, field, "hardware")
    return result


def regime(name: str, field: str = "regime") -> Regime:
    """Find a regime by name or alias; InputError with a did-you-mean otherwise."""
    result: Regime = _lookup(regimes(), name, field, "regime")
    return result
