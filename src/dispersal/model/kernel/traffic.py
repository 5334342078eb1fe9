"""Traffic per node and direction (spec/model.md sec. 6): per outer step, mean rate, bursts, duty
cycle, link use and the bits of one sync."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dispersal.model.inputs.codes import AGG_PAPER
from dispersal.model.kernel.context import Arr, Common

#: The outputs of each stage.
TRAFFIC_OUTPUTS = (
    "up_bits_per_outer_step",
    "mean_up_bits_per_s",
    "peak_up_bits_per_s",
    "duty_cycle",
    "bytes_per_day_per_node",
    "down_bits_per_outer_step",
    "mean_down_bits_per_s",
    "link_utilisation_up",
    "link_utilisation_down",
    "sync_up_bits",
    "sync_down_bits",
)
TIMELINE_OUTPUTS = (
    "time_compute_s",
    "time_bubble_s",
    "time_pipeline_comm_s",
    "time_expert_parallel_s",
    "time_exposed_comm_s",
    "time_straggler_s",
    "time_hidden_comm_s",
    "time_offload_s",
)


def traffic(c: Common, pick: Callable[[str], Arr], cyc: Arr) -> dict[str, Arr]:
    """Paper topology: the mean upload over nodes, one payload each way per sync, as its relay formula
    charges. Grounded topologies: the busiest node (a hierarchical leader, a middle pipeline stage) on
    its WAN link. `pick(name)` reads a `Branch` field for each configuration's algorithm."""
    grounded = c.agg != AGG_PAPER
    up_bits = down_bits = np.zeros(c.shape)
    if (~grounded).any():
        up_bits = down_bits = pick("traffic_paper")
    if grounded.any():
        up_bits = np.where(grounded, pick("up_busiest"), up_bits)
        down_bits = np.where(grounded, pick("down_busiest"), down_bits)
        sync_up, sync_down = pick("sync_up"), pick("sync_down")
    else:
        sync_up = sync_down = pick("sync_paper")
    mean_up = up_bits / cyc
    mean_down = down_bits / cyc
    link_use_up = (up_bits / c.up) / cyc
    return {
        "up_bits_per_outer_step": up_bits,
        "mean_up_bits_per_s": mean_up,
        "peak_up_bits_per_s": np.where(up_bits > 0, pick("burst_rate"), 0.0),
        "duty_cycle": np.minimum(1.0, link_use_up),
        "bytes_per_day_per_node": (mean_up + mean_down) / 8.0 * 86400.0,
        "down_bits_per_outer_step": down_bits,
        "mean_down_bits_per_s": mean_down,
        "link_utilisation_up": link_use_up,
        "link_utilisation_down": (down_bits / c.down) / cyc,
        "sync_up_bits": sync_up,
        "sync_down_bits": sync_down,
    }


def timeline(c: Common, pick: Callable[[str], Arr], cyc: Arr, n_cycles: Arr) -> dict[str, Arr]:
    """Where the time goes: seconds over the run on one worker's timeline (compute, pipeline bubble
    and links, expert parallelism, offload, exposed and hidden communication, stragglers)."""
    steps = pick("steps_per_cycle")
    busy_step = steps * pick("step_time")
    exposed = np.maximum(cyc - busy_step, 0.0) * n_cycles
    straggler_s = exposed * (1.0 - 1.0 / pick("straggler"))
    return {
        "time_compute_s": steps * pick("compute_per_step") * n_cycles,
        "time_bubble_s": steps * pick("bubble_per_step") * n_cycles,
        "time_pipeline_comm_s": steps * pick("pipeline_comm_per_step") * n_cycles,
        "time_expert_parallel_s": steps * c.T_ep * n_cycles,
        "time_exposed_comm_s": exposed - straggler_s,
        "time_straggler_s": straggler_s,
        "time_hidden_comm_s": np.minimum(pick("sync_time"), busy_step)
        * np.where(c.streaming, 1.0, 0.0)
        * n_cycles,
        "time_offload_s": steps * pick("offload_per_step") * n_cycles,
    }
