"""Pipeline-parallel-group DiLoCo: a model that does not fit one node runs as an S-stage GPipe
pipeline (Huang et al. 2019) on the stage links; G = floor(N / S) pipeline groups are the DiLoCo
replicas (Rahman 2026 sec. 3). Default mode syncs each stage's shard P / S."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dispersal.model.inputs.codes import ALGO_PP_DILOCO
from dispersal.model.kernel import schedule, topology
from dispersal.model.kernel.algorithms.base import AlgorithmUnit, Branch, pipelined
from dispersal.model.kernel.context import Common
from dispersal.model.kernel.efficiency import eta_act


def branch(c: Common) -> Branch:
    """PP-group DiLoCo's figures: a pipelined inner step, G replicas syncing their shards."""
    m, p, Mmb = c.mem, c.p, c.Mmb
    S, G = m.stages, m.pp_groups
    A_bits = c.act_bits
    t_c = 6.0 * c.Pa * c.B / (c.F_eff * S * Mmb)
    pp_bw = c.g("pp_bits_per_s")
    t_m = (2.0 * A_bits / Mmb) / pp_bw
    pp_link = np.where(S > 1, (t_m + c.g("pp_latency_s")) * c.straggler(S), 0.0)
    T_pp = (Mmb + S - 1.0) * (t_c + pp_link) + c.T_ep
    P_pp = np.where(c.g("pp_shard_sync") > 0, c.P / S, c.P)
    f_G = c.straggler(G)
    T_sync, u, d = topology.sync(c, P_pp, G, f_G, c.up, c.down, c.lat)
    T_frag = (
        T_sync if c.one_fragment else topology.sync(c, P_pp / c.fragments, G, f_G, c.up, c.down, c.lat)[0]
    )
    if c.inp.has("fragment_sync_time_s"):
        # Sites: each stage's fragment paced on its own slowest edge (`sites.groups`).
        T_frag = np.where(G > 1, c.g("fragment_sync_time_s") * f_G, 0.0)
    # The busiest stage (a middle one) sends activations forward and gradients back every step:
    # 2A bits each way (A for a 2-stage pipeline's end stages).
    act_node_bits = np.where(S > 2, 2.0, 1.0) * A_bits * (S > 1)
    act_busy = np.where(c.shared, act_node_bits / np.minimum(c.up, c.down), 0.0)
    H, cyc = schedule.diloco_steps(c, G, T_sync, T_frag, T_pp, act_busy)
    act_wan = np.where(c.shared, act_node_bits, 0.0)
    paper = P_pp * c.wire * (G > 1)
    return pipelined(
        c,
        stages=S,
        stage_compute=t_c,
        cycle=cyc,
        inner_steps=H,
        step_time=T_pp,
        workers=G,
        replicas=G,
        enough_workers=G >= 1,
        sync_time=T_sync,
        straggler=f_G,
        payload_bits=P_pp * c.wire,
        sync_up=u,
        sync_down=d,
        sync_paper=paper,
        traffic_paper=paper + H * (2.0 * A_bits * (S - 1.0) / S),
        up_busiest=u + H * act_wan,
        down_busiest=d + H * act_wan,
        eta_act=eta_act(c.g("activation_compression"), S, c.g("activation_quality"), p),
        pipeline_comm_per_step=(Mmb + S - 1.0) * pp_link,
        # Bursts run at the link rate; activations use the (possibly faster) stage link.
        burst_rate=np.where(A_bits > 0, np.maximum(c.up, pp_bw), c.up),
    )


def notes(asked: str, resolved: str, r: Mapping[str, float], group_size: int) -> list[str]:
    """A pipeline the scenario did not ask for; a single group (no replicas)."""
    out = []
    # Only a real pipeline (S > 1) chosen by `auto` is "forced"; site_pp_diloco's fallback says why itself.
    if resolved == "pp_diloco" and asked not in ("pp_diloco", "site_pp_diloco") and r["pipeline_stages"] > 1:
        out.append(
            f"the model does not fit one node: {int(r['pipeline_stages'])}-stage pipeline parallelism forced"
        )
    if resolved == "pp_diloco" and int(r["groups"]) == 1:
        out.append("a single pipeline group: no DiLoCo replicas, so no sync across groups")
    return out


UNIT = AlgorithmUnit(
    code=ALGO_PP_DILOCO, name="pp_diloco", outer_sync=True, branch=branch, offload=False, notes=notes
)
