"""Catalogues shipped as TOML package data: accelerators, regimes, reference models, paper tables.

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

from dispersal.model.errors import InputError
from dispersal.model.units import H100E_FLOP_PER_S


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


@cache
def accelerators() -> Mapping[str, Accelerator]:
    """All accelerators by canonical name."""
    out: dict[str, Accelerator] = {}
    for e in _load("hardware.toml")["accelerator"]:
        e = dict(e)
        e["aliases"] = tuple(e.get("aliases", ()))
        for key in (
            "dense_fp16_flop_per_s",
            "dense_fp8_flop_per_s",
            "hbm_bytes",
            "memory_bandwidth_bytes_per_s",
            "tdp_w",
            "price_usd",
            "rental_usd_per_hour",
        ):
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
