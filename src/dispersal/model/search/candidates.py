"""What the planner searches over: the evader's constraints, the node types, and the candidate
space of spec/model.md sec. 10 with its validity rule and overtraining window.

One implementation, shared by the planner's searches (`dispersal.model.search.planner`) and the Monte
Carlo over uncertain parameters (`dispersal.model.analyses.uncertainty`):

- `Constraints`: links, time budget, hardware list, node cap, overtraining window, budget.
- `hardware_variants`: the node types (accelerator x precision at the most chips a regime allows).
- `CandidateSpace`: for each node type and model size P, the algorithm slots: if the model fits
  one node, flat Streaming DiLoCo plus hierarchical DiLoCo for each group size n_g; otherwise
  PP-group DiLoCo with S stages. H = H_min (the kernel's). `validity` drops candidates outside
  min_overtraining <= OT <= max_overtraining, hierarchical groups with N < 2 n_g, PP-group runs
  with fewer than 2 groups and plans over budget; `node_window` turns the overtraining window
  into a node-count range per candidate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs import units
from dispersal.model.inputs.catalog import Accelerator, Regime, accelerator, accelerators, regime, regimes
from dispersal.model.inputs.codes import (
    ALGO_AUTO,
    ALGO_DDP,
    ALGO_DECOUPLED,
    ALGO_HIERARCHICAL,
    ALGO_PP_DILOCO,
    ALGO_SITE_PP,
    Straggler,
    Trust,
)
from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.params import ModelParams
from dispersal.model.inputs.scenario import (
    Algorithm,
    Mode,
    Precision,
    Pricing,
    Scenario,
    kernel_inputs,
    max_chips_under,
)
from dispersal.model.kernel.kernel import evaluate

Arr = npt.NDArray[np.float64]
BoolArr = npt.NDArray[np.bool_]

#: The paper's model-size grid, billions of parameters (71 values, spec sec. 10).
PAPER_PARAM_GRID_B: tuple[float, ...] = (
    0.5,
    1,
    2,
    5,
    10,
    25,
    28,
    30,
    32,
    35,
    40,
    45,
    50,
    60,
    70,
    78,
    85,
    91,
    92,
    100,
    110,
    120,
    130,
    140,
    150,
    155,
    160,
    165,
    170,
    172,
    175,
    178,
    180,
    185,
    195,
    200,
    210,
    225,
    235,
    240,
    245,
    248,
    250,
    252,
    255,
    258,
    260,
    265,
    270,
    275,
    280,
    290,
    300,
    310,
    315,
    320,
    325,
    330,
    335,
    340,
    350,
    375,
    400,
    450,
    500,
    625,
    750,
    1000,
    1500,
    2500,
    5000,
    10000,
)
#: Hierarchical group sizes searched (spec sec. 10).
PAPER_GROUP_SIZES: tuple[int, ...] = (4, 8, 10, 12, 14, 16, 18, 20, 24, 32)


#: Kernel outputs the searches and the validity rule read (`CandidateSpace.run`).
SEARCH_OUTPUTS: tuple[str, ...] = (
    "feasible",
    "fits",
    "under_cap",
    "algorithm_resolved",
    "groups",
    "pipeline_stages",
    "inner_steps",
    "regional_rounds",
    "eta",
    "overtraining_ratio",
    "c_local_flop",
    "c_quality_flop",
    "cost_usd",
)


#: Scenario fields `Constraints.scenario_overrides` may set: how replicas sync, not what is searched.
OVERRIDABLE_FIELDS: tuple[str, ...] = (
    "codec",
    "aggregation",
    "overlap_communication",
    "fragments",
    "overlap_depth",
    "inner_steps",
    "error_feedback",
    "capex_multiplier",
    "merge_rule",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Constraints:
    """What the evader must live with. SI units."""

    bandwidth_up_bits_per_s: float = 100e6
    bandwidth_down_bits_per_s: float = 100e6
    latency_s: float = 0.100
    max_duration_s: float = 740 * units.SECONDS_PER_DAY
    hardware: tuple[str, ...] = ()
    """Accelerators to consider; empty = the paper's nine (paper mode) or the whole catalogue."""
    max_nodes: int = 100_000
    min_overtraining: float = 1.0
    max_overtraining: float = 100.0
    compression_ratio: float = 150.0
    mfu: float | None = None
    """Hardware MFU (6 P FLOP/token); None = 0.40 in paper mode, the catalogue's figure for each
    accelerator and precision in default mode."""
    straggler: str = "relay"
    pricing: Pricing = Pricing.PURCHASE
    max_cost_usd: float = math.inf
    """Budget; used by the time objective (and as a hard cap for every objective)."""
    regional_bandwidth_bits_per_s: float | None = None
    """Regional link for hierarchical DiLoCo; None = the WAN (min of up and down), in both modes:
    each node is a separate site (co-located nodes would form one covered cluster)."""
    pp_bandwidth_bits_per_s: float | None = None
    """Pipeline-stage link; None = the WAN, as above."""
    trust: Trust = Trust.TRUSTED
    """trusted (one operator's sites) or permissionless (independent providers: validators, validation
    time and discarded updates are paid for; `dispersal.model.kernel.trust`)."""
    quality_mapping: str = "compute"
    """Default mode's quality mapping (Scenario.quality_mapping): compute, or the loss-space bound."""
    inner_optimizer: str = "adamw"
    """The replicas' inner optimizer for the fitted quality model (Scenario.inner_optimizer)."""
    data_parallel: bool = False
    """Also search synchronous data parallelism (every step's gradients all-reduced, no replica
    penalty) for models that fit one node. The default-mode centralized baseline sets it: one
    datacenter trains synchronously."""
    chips_per_node: int | None = None
    """Fix the node size (capped at the regime's cap); None = the exact search tries every size of
    `node_sizes`, the bisection the regime's cap (the paper's)."""
    algorithms: tuple[str, ...] = ()
    """Restrict the search slots to these kinds (`SLOT_KINDS`: auto = flat Streaming DiLoCo or
    PP-group, hierarchical, ddp, decoupled); empty = the mode's usual slots (auto and hierarchical; ddp
    only with `data_parallel`). Decoupled DiLoCo is searched only when named here, in default mode."""
    site_sizes: tuple[int, ...] = ()
    """Also search site-pipeline DiLoCo with sites of each of these node counts on a fast local fabric
    (the scenario's default fabric; the covered-cluster rule counts a site as one cluster). Empty =
    none: every node its own site, the paper's threat model."""
    scenario_overrides: tuple[tuple[str, Any], ...] = ()
    """Scenario fields set on every candidate, (name, value) pairs from `OVERRIDABLE_FIELDS` (an
    algorithm generation's codec, overlap, fragments, H: `dispersal.model.analyses.frontier.over_time`).
    `planner.centralized_baseline` passes them on; callers wanting a plain baseline drop them."""

    def __post_init__(self) -> None:
        for name in (
            "bandwidth_up_bits_per_s",
            "bandwidth_down_bits_per_s",
            "max_duration_s",
            "mfu",
            "compression_ratio",
            "max_cost_usd",
        ):
            v = getattr(self, name)
            if v is not None:
                require(v > 0 and not math.isnan(v), name, f"must be > 0, got {v}")
        require(self.latency_s >= 0, "latency_s", f"must be >= 0 s, got {self.latency_s}")
        require(self.mfu is None or self.mfu <= 1, "mfu", f"must be in (0, 1], got {self.mfu}")
        require(
            isinstance(self.max_nodes, int) and 1 <= self.max_nodes <= 10_000_000,
            "max_nodes",
            f"must be an integer in [1, 10,000,000], got {self.max_nodes}",
        )
        require(
            0 < self.min_overtraining <= self.max_overtraining,
            "min_overtraining",
            f"must be in (0, max_overtraining], got {self.min_overtraining}",
        )
        try:
            object.__setattr__(self, "pricing", Pricing(self.pricing))
            object.__setattr__(self, "trust", Trust(self.trust))
            Straggler(self.straggler)
        except ValueError as exc:
            field = next((f for f in ("straggler", "trust") if f.capitalize() in str(exc)), "pricing")
            raise InputError(field, str(exc)) from None
        require(
            self.chips_per_node is None
            or (
                isinstance(self.chips_per_node, int)
                and 1 <= self.chips_per_node <= NO_RULE_MAX_CHIPS_PER_NODE
            ),
            "chips_per_node",
            f"must be an integer in [1, {NO_RULE_MAX_CHIPS_PER_NODE:,}], got {self.chips_per_node}",
        )
        for hw in self.hardware:
            accelerator(hw)
        object.__setattr__(self, "algorithms", tuple(self.algorithms))
        for name in self.algorithms:
            require(
                name in SLOT_KINDS,
                "algorithms",
                f"must be a comma-separated list of {', '.join(SLOT_KINDS)}, got {name!r}",
            )
        require(
            all(isinstance(k, int) and 2 <= k <= 10_000 for k in self.site_sizes),
            "site_sizes",
            f"must be integers in [2, 10,000] nodes per site, got {self.site_sizes}",
        )
        for name, _ in self.scenario_overrides:
            require(
                name in OVERRIDABLE_FIELDS,
                "scenario_overrides",
                f"{name!r} cannot be overridden; allowed: {', '.join(OVERRIDABLE_FIELDS)}",
            )
        require(
            self.quality_mapping in ("compute", "loss"),
            "quality_mapping",
            f"must be compute or loss, got {self.quality_mapping!r}",
        )
        require(
            self.inner_optimizer in ("adamw", "muon"),
            "inner_optimizer",
            f"must be adamw or muon, got {self.inner_optimizer!r}",
        )

    def replace(self, **changes: Any) -> Constraints:
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class NodeType:
    """One node type searched: an accelerator, a precision, and the most chips per node the regime allows."""

    name: str
    precision: Precision
    chips: int


#: The kinds of search slot `Constraints.algorithms` may keep, by kernel algorithm code.
SLOT_KINDS: dict[str, int] = {
    "auto": ALGO_AUTO,
    "hierarchical": ALGO_HIERARCHICAL,
    "ddp": ALGO_DDP,
    "decoupled": ALGO_DECOUPLED,
}


#: The largest node (chips at one site) the exact search tries where no rule caps it. An
#: assumption: the largest single-site clusters reported in 2024-25 hold ~100,000 accelerators
#: (xAI Colossus, 100k H100), so 2^16 is the last power of two below that.
NO_RULE_MAX_CHIPS_PER_NODE = 65_536


def _has_rule(reg: Regime) -> bool:
    return reg.cluster_flop_per_s > 0 or reg.cluster_memory_bytes > 0


def node_sizes(acc: Accelerator, reg: Regime) -> tuple[int, ...]:
    """Chips per node the exact search tries for `acc` under `reg`, ascending.

    Every power of two below the regime's cap, every other catalogue regime's cap below it, and the
    cap itself (`max_chips_under`). Where `reg` has no rule the cap is NO_RULE_MAX_CHIPS_PER_NODE.
    Because each catalogue regime's cap is in every looser regime's list, a regime whose rule
    allows every node another allows never searches a size the other does not: a stricter regime
    can never come out cheaper. Sizes between the listed ones are not tried (the search is exact
    over this ladder, not over every integer).
    """
    cap = max_chips_under(acc, reg) if _has_rule(reg) else NO_RULE_MAX_CHIPS_PER_NODE
    caps = {max_chips_under(acc, r) for r in regimes().values() if _has_rule(r)}
    powers = {1 << i for i in range(cap.bit_length())}
    return tuple(sorted({k for k in powers | caps if k < cap} | {cap}))


def hardware_variants(
    mode: Mode, constraints: Constraints, regime_name: str, *, all_sizes: bool = False
) -> list[NodeType]:
    """The node types searched: each accelerator at FP16/BF16 and, where searched, FP8.

    Paper mode: the paper's nine node types plus FP8 variants of H100, GH200 and TPU v6e (12).
    Default mode: every catalogue accelerator, with FP8 wherever the chip has it.
    Node size: the most chips the regime allows (`max_chips_under`; 8 where there is no rule), or
    `constraints.chips_per_node` capped at that; with `all_sizes` (and no fixed size), every size of
    `node_sizes` below the cap instead (the exact search's extra node types, cap excluded).
    """
    reg = regime(regime_name)
    names = constraints.hardware or tuple(
        a.name for a in accelerators().values() if (a.paper_search or mode is Mode.DEFAULT)
    )
    out: list[NodeType] = []
    for n in names:
        acc = accelerator(n)
        cap = max_chips_under(acc, reg)
        fixed = constraints.chips_per_node
        if fixed is not None:
            sizes: tuple[int, ...] = () if all_sizes else (min(fixed, cap) if _has_rule(reg) else fixed,)
        elif all_sizes:
            sizes = tuple(k for k in node_sizes(acc, reg) if k != cap)
        else:
            sizes = (cap,)
        fp8 = acc.paper_fp8 if mode is Mode.PAPER else acc.dense_fp8_flop_per_s > 0
        for chips in sizes:
            out.append(NodeType(acc.name, Precision.BF16, chips))
            if fp8:
                out.append(NodeType(acc.name, Precision.FP8, chips))
    return out


class CandidateSpace:
    """The planner's candidate set: (node type, P, slot) combinations as flat arrays over kernel inputs.

    Slot 0 is the paper's automatic choice (flat if the model fits one node, else PP-group);
    slots 1.. are hierarchical DiLoCo with each group size, then (default mode) DDP when asked and
    Decoupled DiLoCo, only for models that fit one node. `Constraints.algorithms` keeps a subset.
    The planner's searches and the Monte Carlo (`dispersal.model.analyses.uncertainty`) both evaluate it:
    `inputs` builds the kernel inputs of (combo, N) pairs, `validity` is the rule of spec sec. 10
    and `node_window` the overtraining window in N.
    """

    def __init__(
        self,
        variants: list[NodeType],
        mode: Mode,
        c: Constraints,
        regime_name: str,
        params_grid: Sequence[float],
        group_sizes: Sequence[int],
        p: ModelParams,
    ) -> None:
        self.variants, self.mode, self.c, self.p = variants, mode, c, p
        self.params_grid = np.asarray(params_grid, dtype=np.float64)
        self.group_sizes = tuple(group_sizes)
        wan_min = min(c.bandwidth_up_bits_per_s, c.bandwidth_down_bits_per_s)
        self.base_scenarios = [
            Scenario(
                name="plan",
                hardware=v.name,
                precision=v.precision,
                chips_per_node=v.chips,
                num_nodes=1,
                params=1e9,
                algorithm=Algorithm.AUTO,
                compression_ratio=c.compression_ratio,
                mfu=c.mfu,
                bandwidth_up_bits_per_s=c.bandwidth_up_bits_per_s,
                bandwidth_down_bits_per_s=c.bandwidth_down_bits_per_s,
                latency_s=c.latency_s,
                duration_s=c.max_duration_s,
                straggler=Straggler(c.straggler),
                trust=c.trust,
                pricing=c.pricing,
                regime=regime_name,
                # Every node is its own site: links between sites are the WAN unless the user says
                # otherwise. Faster (co-located) links would make nodes one facility, i.e. one
                # cluster that the covered-cluster rule counts as a whole.
                regional_bandwidth_bits_per_s=c.regional_bandwidth_bits_per_s or wan_min,
                regional_latency_s=c.latency_s,
                pp_bandwidth_bits_per_s=c.pp_bandwidth_bits_per_s or wan_min,
                pp_latency_s=c.latency_s,
                # Default mode: one WAN link per node carries pipeline, regional and global traffic
                # together, unless the user gave separate links.
                split_links=c.regional_bandwidth_bits_per_s is not None
                or c.pp_bandwidth_bits_per_s is not None,
                quality_mapping=c.quality_mapping,
                inner_optimizer=c.inner_optimizer,
            )
            for v in variants
        ]
        if c.scenario_overrides:
            self.base_scenarios = [s.replace(**dict(c.scenario_overrides)) for s in self.base_scenarios]
        rows = [kernel_inputs(s, mode, p) for s in self.base_scenarios]
        self.hw_inputs = {k: np.asarray([float(r[k]) for r in rows]) for k in rows[0]}
        # Inputs equal on every node type go to the kernel as 0-d arrays (`Inputs.g` broadcasts them;
        # tests/model/test_kernel_chunks.py): most of them are links, budget and fitted constants,
        # and gathering each per candidate was about a sixth of a probe call's time.
        self._hw_const = {k: np.asarray(v[0]) for k, v in self.hw_inputs.items() if np.all(v == v[0])}
        self._hw_vary = {k: v for k, v in self.hw_inputs.items() if k not in self._hw_const}
        ddp = [ALGO_DDP] if c.data_parallel else []
        # Decoupled DiLoCo (arXiv 2604.21428): default mode only (paper mode keeps the paper's slots), and
        # only when asked for: the planner prices no failures, where its advantage lies; without them it
        # ties with Streaming DiLoCo (docs/model.md: no cheapest plan at 1e25 / 1e26 changes, 1e24 gains
        # 0.07% C_quality at the same cost) while its slot costs ~12% more CPU per plan.
        asked = "decoupled" in c.algorithms
        dec = [ALGO_DECOUPLED] if Mode(mode) is Mode.DEFAULT and asked else []
        slots = [ALGO_AUTO] + [ALGO_HIERARCHICAL] * len(self.group_sizes) + ddp + dec
        groups = [8, *self.group_sizes] + [8] * (len(ddp) + len(dec))
        if c.algorithms:
            kept = {SLOT_KINDS[a] for a in c.algorithms}
            keep = [i for i, code in enumerate(slots) if code in kept]
            slots, groups = [slots[i] for i in keep], [groups[i] for i in keep]
        # A model that does not fit one node runs only the automatic (PP-group) slot and site pipelines.
        auto_slot = [0] if slots and slots[0] == ALGO_AUTO else []
        self.slot_mode = np.asarray(slots, dtype=np.float64)
        self.slot_group = np.asarray(groups, dtype=np.float64)
        self.slot_hier = self.slot_mode == ALGO_HIERARCHICAL
        # Site-pipeline slots (appended): one per site size, for every model size.
        sites = tuple(c.site_sizes)
        self.slot_mode = np.concatenate([self.slot_mode, np.full(len(sites), float(ALGO_SITE_PP))])
        self.slot_group = np.concatenate([self.slot_group, np.full(len(sites), 8.0)])
        self.slot_hier = np.concatenate([self.slot_hier, np.zeros(len(sites), dtype=bool)])
        self.slot_site = np.asarray(
            [1.0] * (len(self.slot_mode) - len(sites)) + list(sites), dtype=np.float64
        )
        self.slot_is_site = self.slot_mode == ALGO_SITE_PP
        site_slots = [int(i) for i in np.flatnonzero(self.slot_is_site)]
        self.n_hw, self.n_p, self.n_slot = len(variants), len(self.params_grid), len(self.slot_mode)
        hw_l, p_l, s_l = [], [], []
        for h, r in enumerate(rows):
            for i, P in enumerate(self.params_grid):
                fits = P * (r["bytes_per_param"] + r["extra_bytes_per_param"]) <= r["node_memory_bytes"]
                for sl in range(self.n_slot) if fits else [*auto_slot, *site_slots]:
                    hw_l.append(h)
                    p_l.append(i)
                    s_l.append(sl)
        self.combo_hw = np.asarray(hw_l, dtype=np.int64)
        self.combo_p = np.asarray(p_l, dtype=np.int64)
        self.combo_slot = np.asarray(s_l, dtype=np.int64)
        self.hw_start = np.searchsorted(self.combo_hw, np.arange(self.n_hw))
        # Cost of one node over the whole time budget, exactly as the kernel costs it (plans use the
        # full budget): purchase x multiplier plus energy, or rental. It orders and prunes hardware.
        hours = c.max_duration_s / 3600.0
        self.node_cost = np.asarray(
            [
                r["chips_per_node"]
                * (
                    r["rental_usd_per_chip_hour"] * hours
                    if r["rental"]
                    else r["price_usd_per_chip"] * r["capex_multiplier"]
                    + r["tdp_w"] * r["pue"] * hours / 1000.0 * r["electricity_usd_per_kwh"]
                )
                for r in rows
            ]
        )
        self.evaluations = 0
        # Largest node count per node type: max_nodes, and what the budget buys (cost = N x node cost).
        budget_nodes = (
            np.floor(c.max_cost_usd / self.node_cost * (1 + 1e-12))
            if math.isfinite(c.max_cost_usd)
            else np.full(self.n_hw, float(c.max_nodes))
        )
        self.n_cap = np.clip(budget_nodes, 0.0, float(c.max_nodes))

    def combos_of(self, h: int) -> npt.NDArray[np.int64]:
        """Indices of hardware h's combos."""
        end = self.hw_start[h + 1] if h + 1 < self.n_hw else len(self.combo_hw)
        return np.arange(self.hw_start[h], end, dtype=np.int64)

    def run_raw(self, combo: npt.NDArray[np.int64], n: npt.ArrayLike) -> dict[str, Arr]:
        """Evaluate without the Chinchilla part (efficiency NaN): times, H, tokens, feasibility."""
        x = self.inputs(combo, n)
        x["min_overtraining"] = np.asarray(np.inf)
        self.evaluations += int(np.size(x["params"]))
        return evaluate(x, self.p)

    def inputs(self, combo: npt.NDArray[np.int64], n: npt.ArrayLike) -> dict[str, Arr]:
        """Kernel inputs of combos at node counts n (same shape or scalar); no overtraining window."""
        hw = self.combo_hw[combo]
        x: dict[str, Arr] = {k: v[hw] for k, v in self._hw_vary.items()}
        x.update(self._hw_const)
        sl = self.combo_slot[combo]
        x["algorithm"] = self.slot_mode[sl]
        x["group_size"] = self.slot_group[sl]
        x["nodes_per_site"] = self.slot_site[sl]
        P = self.params_grid[self.combo_p[combo]]
        x["params"] = P
        x["active_params"] = P
        x["num_nodes"] = np.broadcast_to(np.asarray(n, dtype=np.float64), P.shape)
        # inner_steps stays the base scenario's: 0 (H_min) unless `scenario_overrides` fixes H.
        x["tokens"] = np.zeros(())
        return x

    def with_window(self, x: dict[str, Arr]) -> dict[str, Arr]:
        """Kernel inputs `x` with the overtraining window (the kernel skips the Chinchilla part outside it)."""
        x["min_overtraining"] = np.asarray(self.c.min_overtraining)
        x["max_overtraining"] = np.asarray(self.c.max_overtraining)
        return x

    def run(
        self,
        combo: npt.NDArray[np.int64],
        n: npt.ArrayLike,
        *,
        every_output: bool = False,
        floor: float | None = None,
    ) -> dict[str, Arr]:
        """Evaluate combos at node counts n (same shape or scalar) and add the validity mask of sec. 10.

        The searches read only `SEARCH_OUTPUTS` (the kernel then skips the traffic and time-breakdown
        stages); `every_output` returns all of them (a plan's reported option). With `floor` (FLOP of
        C_quality) only "valid and C_quality >= floor" is exact (the kernel's ``quality_floor``: the
        schedule walk stops there)."""
        x = self.with_window(self.inputs(combo, n))
        if floor is not None:
            x["quality_floor"] = np.asarray(floor)
        r = evaluate(x, self.p, outputs=None if every_output else SEARCH_OUTPUTS)
        self.evaluations += int(np.size(r["eta"]))
        r["valid"] = self.validity(r, combo, x["num_nodes"]).astype(np.float64)
        return r

    def validity(self, r: Mapping[str, Arr], combo: npt.NDArray[np.int64], n: npt.ArrayLike) -> BoolArr:
        """The validity rule of spec sec. 10 on kernel outputs `r` of combos at node counts n.

        Valid: feasible under the kernel (memory, time budget, covered-cluster cap); overtraining
        ratio inside [min_overtraining, max_overtraining] (relative tolerance 1e-9, the kernel's);
        a hierarchical slot needs N >= 2 x group size and a model that fits one node (not PP);
        PP-group DiLoCo needs >= 2 groups; cost within max_cost_usd.
        """
        c = self.c
        sl = self.combo_slot[combo]
        group = self.slot_group[sl]
        n_ = np.asarray(n, dtype=np.float64)
        is_pp = r["algorithm_resolved"] == ALGO_PP_DILOCO
        is_site = self.slot_is_site[sl]
        ot = r["overtraining_ratio"]
        return np.asarray(
            (r["feasible"] > 0)
            & (ot >= c.min_overtraining * (1 - 1e-9))
            & (ot <= c.max_overtraining * (1 + 1e-9))
            & np.where(self.slot_hier[sl], (n_ >= 2 * group) & ~is_pp, True)
            & np.where(is_pp, r["groups"] >= 2, True)
            # A site slot counts only as itself (not its pp_diloco fallback), with >= 2 sites.
            & np.where(is_site, (r["algorithm_resolved"] == ALGO_SITE_PP) & (r["groups"] >= 2), True)
            & (r["cost_usd"] <= c.max_cost_usd),
            dtype=bool,
        )

    def reference_nodes(self, combo: npt.NDArray[np.int64]) -> Arr:
        """The node count at which `node_window` reads each combo's overtraining ratio per worker:
        2 x group size for hierarchical slots (their smallest valid N), 64 otherwise."""
        sl = self.combo_slot[combo]
        ref = np.where(self.slot_hier[sl], 2.0 * self.slot_group[sl], 64.0)
        return np.asarray(np.where(self.slot_is_site[sl], np.maximum(64.0, 2.0 * self.slot_site[sl]), ref))

    def node_window(
        self, ref: Mapping[str, Arr], combo: npt.NDArray[np.int64], n_ref: Arr, *, slack: float | None = None
    ) -> tuple[BoolArr, Arr, Arr]:
        """The node counts [n_lo, n_hi] inside the overtraining window, per combo.

        Tokens are proportional to the worker count (N for flat and hierarchical, floor(N / S) for
        PP-group with S stages), compute-bound by construction of H_min, so the overtraining ratio
        per worker read from kernel outputs `ref` at `n_ref` (`reference_nodes`) gives the window
        in workers, hence in N. n_lo is also at least the structural minimum (2 x group size for
        hierarchical slots, 2 groups of S stages for PP-group, else 1). n_hi is not capped.

        slack None: exact, rounded inward with the kernel's 1e-9 tolerance (the planner's exact
        search). slack s > 0: widened by the relative s and rounded outward (a search whose
        parameters differ from those `ref` was read with; the validity rule then trims it).

        Returns (usable, n_lo, n_hi); usable is False where `ref` gives no finite positive ratio
        or the model does not fit or the node is over the covered-cluster cap.
        """
        c = self.c
        sl = self.combo_slot[combo]
        group = self.slot_group[sl]
        stages = ref["pipeline_stages"]
        workers_ref = np.where(stages > 1, np.floor(n_ref / stages), n_ref)
        ot_per_worker = ref["overtraining_ratio"] / np.maximum(workers_ref, 1.0)
        usable = np.isfinite(ot_per_worker) & (ot_per_worker > 0) & (ref["fits"] > 0) & (ref["under_cap"] > 0)
        opw = np.where(usable, ot_per_worker, 1.0)
        if slack is None:
            w_lo = np.ceil(c.min_overtraining / opw * (1 - 1e-9))
            w_hi = np.floor(c.max_overtraining / opw * (1 + 1e-9))
        else:
            w_lo = np.floor(c.min_overtraining / opw * (1 - slack))
            w_hi = np.ceil(c.max_overtraining / opw * (1 + slack))
        n_lo = np.where(stages > 1, w_lo * stages, w_lo)
        n_lo = np.maximum(
            n_lo, np.where(self.slot_hier[sl], 2.0 * group, np.where(stages > 1, 2.0 * stages, 1.0))
        )
        n_hi = np.where(stages > 1, w_hi * stages + stages - 1, w_hi)
        # Site slots: floor(N / n_s) sites of k = floor(n_s / S) pipelines are the workers.
        site = self.slot_is_site[sl]
        if site.any():
            n_s = self.slot_site[sl]
            k = np.maximum(np.floor(n_s / np.maximum(stages, 1.0)), 1.0)
            workers_site = np.floor(n_ref / n_s) * k
            opw_s = np.where(usable, ref["overtraining_ratio"] / np.maximum(workers_site, 1.0), 1.0)
            if slack is None:
                ws_lo = np.ceil(c.min_overtraining / opw_s * (1 - 1e-9))
                ws_hi = np.floor(c.max_overtraining / opw_s * (1 + 1e-9))
            else:
                ws_lo = np.floor(c.min_overtraining / opw_s * (1 - slack))
                ws_hi = np.ceil(c.max_overtraining / opw_s * (1 + slack))
            n_lo = np.where(site, np.maximum(np.ceil(ws_lo / k) * n_s, 2.0 * n_s), n_lo)
            n_hi = np.where(site, np.floor(ws_hi / k) * n_s + n_s - 1.0, n_hi)
        return (
            np.asarray(usable, dtype=bool),
            np.asarray(n_lo, dtype=np.float64),
            np.asarray(n_hi, dtype=np.float64),
        )


def make_space(
    mode: Mode,
    c: Constraints,
    regime_name: str,
    params: ModelParams,
    params_grid: Sequence[float] | None = None,
    group_sizes: Sequence[int] = PAPER_GROUP_SIZES,
    variants: list[NodeType] | None = None,
) -> CandidateSpace:
    """The candidate space of `plan()`: every node type of `hardware_variants` (or `variants`), the
    model sizes `params_grid` (parameters; default the paper's grid) and the hierarchical `group_sizes`."""
    grid = [v * 1e9 for v in PAPER_PARAM_GRID_B] if params_grid is None else list(params_grid)
    require(len(grid) > 0 and all(g > 0 for g in grid), "params_grid", "must be non-empty and positive")
    vs = hardware_variants(mode, c, regime_name) if variants is None else variants
    return CandidateSpace(vs, mode, c, regime_name, grid, group_sizes, params)


__all__ = [
    "NO_RULE_MAX_CHIPS_PER_NODE",
    "PAPER_GROUP_SIZES",
    "PAPER_PARAM_GRID_B",
    "SLOT_KINDS",
    "CandidateSpace",
    "Constraints",
    "NodeType",
    "hardware_variants",
    "make_space",
    "node_sizes",
]
