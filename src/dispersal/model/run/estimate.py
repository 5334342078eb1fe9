"""`estimate(scenario) -> Estimate`: every figure of one distributed run, as a typed result.

The numbers come from `kernel.evaluate` (the single implementation of the formulas) evaluated on
one configuration; this module turns them into typed, documented results and readable reasons.
Infeasible is a result (``feasible=False`` with reasons), never an exception.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dispersal.model.inputs import units
from dispersal.model.inputs.codes import ALGORITHM_NAMES
from dispersal.model.inputs.overrides import override_notes
from dispersal.model.inputs.params import DEFAULT_PARAMS, ModelParams
from dispersal.model.inputs.scenario import Mode, Scenario, as_arrays
from dispersal.model.kernel import quality
from dispersal.model.kernel.algorithms import ALGORITHMS
from dispersal.model.kernel.kernel import evaluate
from dispersal.model.sites.churn import ChurnSummary, churn_summary
from dispersal.model.sites.reduce import scenario_inputs, site_rows


@dataclass(frozen=True, kw_only=True, slots=True)
class Efficiency:
    """Efficiency factors (each in (0, 1]): eta = eta_h x eta_comp x eta_act x eta_rep; chi separately."""

    eta_h: float
    """Sync-interval penalty (heuristic, spec sec. 4)."""
    eta_comp: float
    """Compression quality (heuristic table)."""
    eta_act: float
    """Activation-compression quality on pipeline boundaries (heuristic)."""
    eta_rep: float
    """Replica penalty converted to compute through Chinchilla (published fit + heuristic)."""
    eta: float
    """Product of the four."""
    chi: float
    """Chinchilla penalty for over/under-training (published fit)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TimeBreakdown:
    """Where one worker's wall-clock time goes over the whole run, in seconds (sums to run_time_s)."""

    compute_s: float
    bubble_s: float
    """Pipeline fill/drain idle time."""
    pipeline_comm_s: float
    """Activation transfers and their latency on pipeline boundaries."""
    expert_parallel_s: float
    """MoE all-to-all latency across nodes."""
    exposed_comm_s: float
    """Sync communication not hidden behind compute."""
    straggler_s: float
    """Extra exposed wait caused by the slowest participant."""
    hidden_comm_s: float
    """Sync communication overlapped with compute (not counted in the sum)."""
    offload_s: float = 0.0
    """Host-link transfers of an offloaded inner optimizer (default mode)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Cost:
    """Money and energy."""

    hardware_usd: float
    """Purchase: chips x price x capex multiplier."""
    rental_usd: float
    """On-demand rental of the same chips for the run (reported either way)."""
    energy_kwh: float
    energy_usd: float
    total_usd: float
    """What the run costs under the scenario's pricing (paper mode: hardware only)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Traffic:
    """WAN traffic of one node. Default mode: the busiest node (a hierarchical leader, a middle
    pipeline stage), with everything that crosses its WAN link; paper mode: the mean over nodes of
    the upload."""

    bytes_per_sync: float
    """Upload per outer step."""
    syncs_per_day: float
    mean_mbps: float
    """Mean upload rate."""
    peak_mbps: float
    duty_cycle: float
    """Fraction of time the uplink is busy."""
    bytes_per_day: float
    """Up + down."""
    down_bytes_per_sync: float = 0.0
    """Download per outer step."""
    mean_down_mbps: float = 0.0
    link_utilisation_up: float = 0.0
    """Busy time of the uplink / wall time (> 1 would be an overcommitted link)."""
    link_utilisation_down: float = 0.0
    sync_upload_bytes: float = 0.0
    """One worker's upload in one sync of the pseudo-gradient (or gradient, for DDP)."""
    sync_download_bytes: float = 0.0
    """One worker's download in one sync (an all-gather downloads the other M - 1 payloads)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SiteRow:
    """One ``[[site]]`` of a heterogeneous run (`sites.reduce`): its node is the site's busiest (all
    its nodes are the same)."""

    name: str
    region: str
    nodes: int
    hardware: str
    chips_per_node: int
    local_batch_tokens: float
    step_compute_time_s: float
    utilisation: float
    """Compute share of this site's nodes (faster sites wait for the slowest at each lock-step)."""
    paces_compute: bool
    """This site's inner step is the slowest (the run's step time)."""
    fits: bool
    memory_required_bytes_per_node: float
    node_memory_bytes: float
    up_bits_per_s: float
    down_bits_per_s: float
    sync_up_bytes: float
    """One node's upload in one sync."""
    sync_down_bytes: float
    link_utilisation_up: float
    """Busy time of the uplink / wall time."""
    link_utilisation_down: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    """All figures of one run. SI units. See docs/model.md for each formula."""

    scenario: Scenario
    mode: str
    feasible: bool
    reasons: tuple[str, ...]
    algorithm: str
    """Resolved algorithm: ddp, diloco, hierarchical or pp_diloco."""
    streaming: bool
    chips_per_node: int
    num_nodes: int
    node_h100_equivalents: float
    node_memory_bytes: float
    memory_required_bytes_per_node: float
    pipeline_stages: int
    groups: int
    replicas: int
    params: float
    active_params: float
    tokens: float
    run_time_s: float
    days: float
    step_compute_time_s: float
    step_time_s: float
    sync_time_s: float
    inner_steps: int
    inner_steps_effective: float
    outer_step_time_s: float
    num_outer_steps: float
    payload_bytes_per_sync: float
    c_raw_flop: float
    c_local_flop: float
    c_quality_flop: float
    loss: float
    overtraining_ratio: float
    utilisation: float
    """Compute utilisation: pure compute time / wall time of a worker (what Streaming DiLoCo,
    INTELLECT-1 and OpenDiLoCo report): idle time for syncs, pipeline bubbles and transfers,
    expert-parallel latency and offload all count against it."""
    max_params_flat: float
    """Largest model (parameters) that fits one node without pipeline parallelism."""
    host_memory_required_bytes_per_node: float
    optimizer_offloaded: bool
    mfu: float
    """The hardware MFU used (6 P FLOP/token convention)."""
    mfu_global: float
    """Global MFU: C_local / (N x node peak FLOP/s x run time): useful, quality-adjusted compute per
    peak compute (hardware MFU x every efficiency factor and idle time)."""
    efficiency: Efficiency
    breakdown: TimeBreakdown
    cost: Cost
    traffic: Traffic
    notes: tuple[str, ...] = ()
    """What the model did that the scenario did not ask for (a fallback, a forced pipeline)."""
    extrapolation: tuple[str, ...] = ()
    """Where the run lies outside the evidence the quality penalties are fitted on (replicas M,
    inner steps H, model size P, fragments, compression), each with the fitted range
    (`dispersal.model.kernel.quality.FIT_RANGES`). Empty for a run with no DiLoCo replicas."""
    sites: tuple[SiteRow, ...] = ()
    """Per-site rows of a scenario with ``[[site]]`` tables (empty otherwise)."""
    sync_pacing: str = ""
    """What paces the sync of a heterogeneous run (the slowest ring edge, the busiest downlink)."""
    churn: ChurnSummary | None = None
    """The run under its ``[[churn]]`` schedule (the other figures are for the sites as listed)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the `--json` output and the web app's schema)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in ("sites", "sync_pacing", "churn"):
                # Only for a heterogeneous scenario, so other estimates' JSON is as before.
                if v:
                    out[f.name] = (
                        v.to_dict()
                        if isinstance(v, ChurnSummary)
                        else ([dataclasses.asdict(row) for row in v] if f.name == "sites" else v)
                    )
                continue
            if isinstance(v, Scenario):
                out[f.name] = v.to_dict()
            elif dataclasses.is_dataclass(v) and not isinstance(v, type):
                out[f.name] = dataclasses.asdict(v)
            elif isinstance(v, tuple):
                out[f.name] = list(v)
            else:
                out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Estimate:
        """Inverse of to_dict."""
        nested = {"efficiency": Efficiency, "breakdown": TimeBreakdown, "cost": Cost, "traffic": Traffic}
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in ("notes", "extrapolation", "sites", "sync_pacing", "churn") and f.name not in data:
                continue
            v = data[f.name]
            if f.name == "sites":
                kwargs[f.name] = tuple(SiteRow(**row) for row in v)
                continue
            if f.name == "churn":
                kwargs[f.name] = ChurnSummary.from_dict(v)
                continue
            if f.name == "scenario":
                kwargs[f.name] = Scenario.from_dict(v)
            elif f.name in nested:
                kwargs[f.name] = nested[f.name](**{k: float("inf") if x is None else x for k, x in v.items()})
            elif f.name in ("reasons", "notes", "extrapolation"):
                kwargs[f.name] = tuple(v)
            elif v is None and f.type == "float":
                # JSON has no infinity: the CLI writes an undefined figure (e.g. the loss of a run that
                # trains nothing) as null.
                kwargs[f.name] = float("inf")
            else:
                kwargs[f.name] = v
        return cls(**kwargs)


def estimate(
    scenario: Scenario | None = None, *, mode: Mode | str = Mode.DEFAULT, params: ModelParams = DEFAULT_PARAMS
) -> Estimate:
    """Evaluate one scenario: step time, communication, efficiency, C_local, C_quality, cost, traffic.

    Args:
        scenario: the run (defaults to the paper's threat model, `Scenario()`).
        mode: ``"paper"`` (Rahman 2026's settings exactly) or ``"default"`` (adds energy, extra
            memory, per-shard PP sync; see `dispersal.model.inputs.scenario`).
        params: published fits and heuristics.

    Returns:
        An Estimate; ``feasible`` is False with reasons when the configuration cannot run.
    """
    s = scenario if scenario is not None else Scenario()
    m = Mode(mode)
    x = scenario_inputs(s, m, params)
    r = {k: float(np.asarray(v)) for k, v in evaluate(as_arrays(x), params).items()}
    e = _to_estimate(s, m, x, r, params)
    if not s.sites:
        return e
    rows, pacing = site_rows(s, m, params, r)
    reasons = list(e.reasons) + [
        f"site {row['name']}: model does not fit: needs "
        f"{units.format_bytes(row['memory_required_bytes_per_node'])} per node, node has "
        f"{units.format_bytes(row['node_memory_bytes'])}"
        for row in rows
        if not row["fits"]
    ]
    churn = churn_summary(s, m, params) if s.churn else None
    n_sites = f"{len(s.sites)} site{'s' if len(s.sites) > 1 else ''}"
    notes = [*e.notes, f"{n_sites}: sync paced by the {pacing}"]
    unused = [
        name
        for name in (
            "hardware",
            "chips_per_node",
            "bandwidth_up_bits_per_s",
            "bandwidth_down_bits_per_s",
            "latency_s",
        )
        if all(getattr(site, name) is not None for site in s.sites)
    ]
    if s.algorithm.value == "hierarchical" and e.algorithm != "hierarchical":
        notes.append("hierarchical groups are the sites' regions: fewer than 2 regions, so flat DiLoCo")
    if unused:
        notes.append(f"every site sets its own {', '.join(unused)}: the scenario's are not used")
    if churn is not None:
        # The time budget is judged on the run as scheduled, not on the sites as first listed (an
        # INTELLECT-1-style schedule starts small and grows).
        budget = "run exceeds the time budget"
        static = [x for x in reasons if x.startswith(budget)]
        reasons = [x for x in reasons if not x.startswith(budget)]
        need, have = units.format_duration(churn.run_time_s), units.format_duration(s.duration_s)
        if churn.run_time_s > s.duration_s * (1 + 1e-12):
            reasons.append(f"{budget} under the churn schedule: needs {need}, budget {have}")
        else:
            notes.append(
                f"time budget judged under the churn schedule: {need} of {have}"
                + (
                    f" (the sites as first listed alone would need {units.format_duration(e.run_time_s)})"
                    if static
                    else ""
                )
            )
    return dataclasses.replace(
        e,
        # With a schedule every reason is in `reasons` (the static time-budget one replaced above).
        feasible=(e.feasible or churn is not None) and not reasons,
        reasons=tuple(reasons),
        notes=tuple(notes),
        sites=tuple(SiteRow(**row) for row in rows),
        sync_pacing=pacing,
        churn=churn,
    )


def _to_estimate(
    s: Scenario, m: Mode, x: dict[str, Any], r: dict[str, float], params: ModelParams = DEFAULT_PARAMS
) -> Estimate:
    reasons = []
    algo = ALGORITHM_NAMES[int(r["algorithm_resolved"])]
    if not r["fits"]:
        reasons.append(
            f"model does not fit: needs {units.format_bytes(r['memory_required_bytes_per_node'])} per node, "
            f"node has {units.format_bytes(x['node_memory_bytes'])}"
            + (" (use pp_diloco or auto)" if algo != "pp_diloco" else "")
        )
    if not r["fits"] and algo != "pp_diloco" and np.isfinite(r["max_params_flat"]):
        reasons.append(
            f"the largest model that fits one node flat is {units.format_count(r['max_params_flat'])} "
            "parameters"
        )
    if r["host_memory_required_bytes_per_node"] > x["host_memory_bytes"]:
        reasons.append(
            f"host memory: needs {units.format_bytes(r['host_memory_required_bytes_per_node'])} per node, "
            f"node has {units.format_bytes(x['host_memory_bytes'])}"
        )
    if algo == "pp_diloco" and r["groups"] < 1:
        reasons.append(f"{s.num_nodes} nodes cannot hold one pipeline of {int(r['pipeline_stages'])} stages")
    if not r["time_ok"]:
        reasons.append(
            f"run exceeds the time budget: needs {units.format_duration(r['run_time_s'])}, "
            f"budget {units.format_duration(s.duration_s)}"
        )
    # A site-pipeline run's nodes share one fabric: the rule counts the site.
    site = s.nodes_per_site if algo == "site_pp_diloco" else 1
    what = f"site of {site} nodes" if site > 1 else "node"
    if not r["under_flop_cap"]:
        reasons.append(
            f"{what} over the {s.regime} covered-cluster rule: {site * r['node_h100_equivalents']:.2f} "
            f"H100-equivalents > {x['cap_flop_per_s'] / units.H100E_FLOP_PER_S:.0f}"
        )
    if not r["under_memory_cap"]:
        reasons.append(
            f"{what} over the {s.regime} memory rule: "
            f"{units.format_bytes(site * x['node_counted_memory_bytes'])} "
            f"> {units.format_bytes(x['cap_memory_bytes'])}"
        )
    if r["feasible"] and not np.isfinite(r["c_local_flop"]):
        reasons.append("non-finite result")
    notes = []
    for unit in ALGORITHMS.values():
        if unit.notes is not None:
            notes += unit.notes(s.algorithm.value, algo, r, s.group_size)
    notes += override_notes(s, m, params)
    if r["offload"]:
        notes.append(
            f"inner optimizer offloaded to host DRAM: +{r['offload_time_s']:.3g} s host-link time per step"
        )
    if r["validator_nodes"] > 0:
        hidden = "hidden under" if r["validation_time_s"] <= r["outer_step_time_s"] * (1 - 1e-9) else "sets"
        notes.append(
            f"permissionless: {r['validator_nodes']:.3g} validator node(s) paid on top; scoring a round's updates "
            f"takes {units.format_duration(r['validation_time_s'])} ({hidden} the round); "
            f"{1 - r['useful_update_fraction']:.0%} of updates discarded"
        )
    payload_bits = r["payload_bits"]
    up = x["up_bits_per_s"]
    return Estimate(
        scenario=s,
        mode=m.value,
        feasible=bool(r["feasible"]) and not reasons,
        reasons=tuple(reasons),
        algorithm=algo,
        streaming=bool(x["streaming"]),
        chips_per_node=int(x["chips_per_node"]),
        num_nodes=s.num_nodes,
        node_h100_equivalents=r["node_h100_equivalents"],
        node_memory_bytes=float(x["node_memory_bytes"]),
        memory_required_bytes_per_node=r["memory_required_bytes_per_node"],
        pipeline_stages=int(r["pipeline_stages"]),
        groups=int(r["groups"]),
        replicas=int(r["replicas"]),
        params=float(x["params"]),
        active_params=float(x["active_params"]),
        tokens=r["tokens"],
        run_time_s=r["run_time_s"],
        days=r["run_time_s"] / units.SECONDS_PER_DAY,
        step_compute_time_s=r["step_compute_time_s"],
        step_time_s=r["step_time_s"],
        sync_time_s=r["sync_time_s"],
        inner_steps=int(r["inner_steps"]),
        inner_steps_effective=r["inner_steps_effective"],
        outer_step_time_s=r["outer_step_time_s"],
        num_outer_steps=r["num_outer_steps"],
        payload_bytes_per_sync=payload_bits / 8.0,
        c_raw_flop=r["c_raw_flop"],
        c_local_flop=r["c_local_flop"],
        c_quality_flop=r["c_quality_flop"],
        loss=r["loss"],
        overtraining_ratio=r["overtraining_ratio"],
        utilisation=r["utilisation"],
        max_params_flat=r["max_params_flat"],
        host_memory_required_bytes_per_node=r["host_memory_required_bytes_per_node"],
        optimizer_offloaded=bool(r["offload"]),
        mfu=float(x["mfu"]),
        mfu_global=r["mfu_global"],
        efficiency=Efficiency(
            eta_h=r["eta_h"],
            eta_comp=r["eta_comp"],
            eta_act=r["eta_act"],
            eta_rep=r["eta_rep"],
            eta=r["eta"],
            chi=r["chi"],
        ),
        breakdown=TimeBreakdown(
            compute_s=r["time_compute_s"],
            bubble_s=r["time_bubble_s"],
            pipeline_comm_s=r["time_pipeline_comm_s"],
            expert_parallel_s=r["time_expert_parallel_s"],
            exposed_comm_s=r["time_exposed_comm_s"],
            straggler_s=r["time_straggler_s"],
            hidden_comm_s=r["time_hidden_comm_s"],
            offload_s=r["time_offload_s"],
        ),
        cost=Cost(
            hardware_usd=r["hardware_usd"],
            rental_usd=r["rental_usd"],
            energy_kwh=r["energy_kwh"],
            energy_usd=r["energy_usd"],
            total_usd=r["cost_usd"],
        ),
        traffic=Traffic(
            bytes_per_sync=r["up_bits_per_outer_step"] / 8.0,
            syncs_per_day=units.SECONDS_PER_DAY / r["outer_step_time_s"],
            mean_mbps=r["mean_up_bits_per_s"] / 1e6,
            peak_mbps=r["peak_up_bits_per_s"] / 1e6,
            duty_cycle=min(1.0, r["duty_cycle"]),
            bytes_per_day=r["bytes_per_day_per_node"],
            down_bytes_per_sync=r["down_bits_per_outer_step"] / 8.0,
            mean_down_mbps=r["mean_down_bits_per_s"] / 1e6,
            link_utilisation_up=r["link_utilisation_up"],
            link_utilisation_down=r["link_utilisation_down"],
            sync_upload_bytes=r["sync_up_bits"] / 8.0,
            sync_download_bytes=r["sync_down_bits"] / 8.0,
        )
        if up > 0
        else Traffic(
            bytes_per_sync=0, syncs_per_day=0, mean_mbps=0, peak_mbps=0, duty_cycle=0, bytes_per_day=0
        ),
        notes=tuple(notes),
        extrapolation=tuple(extrapolation_messages(r, x)),
    )


def extrapolation_messages(r: dict[str, float], x: dict[str, Any]) -> list[str]:
    """Flags for a run outside the quality fit's ranges (replicas, H, P, fragments, compression vs a
    16-bit payload); none for a run without DiLoCo replicas."""
    if r["replicas"] <= 1 or not ALGORITHMS[int(r["algorithm_resolved"])].outer_sync:
        return []
    streaming = bool(x["streaming"])
    flags = quality.extrapolation_flags(
        r["replicas"],
        r["inner_steps_effective"],
        x["params"],
        x["fragments"] if streaming else 1.0,
        max(1.0, 16.0 / x["wire_bits_per_param"]),
    )
    return flags.messages()
