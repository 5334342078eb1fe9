"""The several-machines path for real: three hosts (network namespaces on a bridge, links shaped by the
kernel's tc tbf), the documented commands (supervisor on the head host, torchrun on two nodes of two
workers each, a 0600 secret file), nothing set by hand (no GLOO_SOCKET_IFNAME).

Skipped with the reason where namespaces cannot be made (not root, no iproute2). Every wait is bounded
and the namespaces (with their veths, bridge and qdiscs) and every process started in them are removed
at the end, even when a test fails (netns.Hosts.close in the fixture's finalizer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from dispersal.testbed.config import TestbedConfig  # noqa: E402
from dispersal.testbed.netns import Hosts, unavailable  # noqa: E402
from dispersal.testbed.secure import new_secret, write_secret_file  # noqa: E402
from dispersal.testbed.supervisor import run_local  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)
RATE_BITS_PER_S = 100e6  # every host's link, each way (tc tbf)
STORE_PORT, TORCHRUN_PORT = 29600, 29500
HEAD, NODE0, NODE1 = 0, 1, 2  # namespace indices: the supervisor's host and the two torchrun nodes
WAIT_S = 240.0  # the most any one run may take here (the config's run_timeout_s is below it)


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    why = unavailable()
    if why:
        pytest.skip(f"multi-host test: {why}")
    with Hosts(hosts=3, rate_bits_per_s=RATE_BITS_PER_S) as h:
        yield h


@pytest.fixture(scope="module")
def one_host(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference: the same DiLoCo config on one host (run_local, loopback)."""
    summary = run_local(_diloco(steps=40), tmp_path_factory.mktemp("one_host"))
    assert summary["completed"] is True, summary
    return summary


def _env(tmp: Path) -> dict[str, str]:
    secret = tmp / "run.secret"
    if not secret.exists():
        write_secret_file(secret, new_secret())
    env = {k: v for k, v in os.environ.items() if not k.endswith("_SOCKET_IFNAME")}  # nothing by hand
    env["DISPERSAL_RUN_SECRET_FILE"] = str(secret)
    return env


def _launch(h: Hosts, cfg: TestbedConfig, tmp: Path, module: str) -> dict[str, Any]:
    """The documented commands (docs/testbed.md, *Several machines*): supervisor on the head, one
    torchrun per node (``python -m torch.distributed.run`` is torchrun's own entry point)."""
    cfg_path = tmp / "config.json"
    cfg_path.write_text(json.dumps(cfg.to_dict()))
    env = _env(tmp)
    head = h.address(HEAD)
    logs = {}
    sup_cmd = [sys.executable, "-m", "dispersal.testbed.supervisor", "--config", str(cfg_path)]
    sup_cmd += ["--host", head, "--port", str(STORE_PORT), "--out", str(tmp / "head")]
    logs["head"] = open(tmp / "head.log", "wb")  # noqa: SIM115  # closed in _finish
    sup = h.popen(HEAD, sup_cmd, env=env, stdout=logs["head"], stderr=subprocess.STDOUT)
    nodes = []
    for rank, host in enumerate((NODE0, NODE1)):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2"]
        cmd += ["--node-rank", str(rank), "--master-addr", h.address(NODE0)]
        cmd += ["--master-port", str(TORCHRUN_PORT), "-m", module, "--config", str(cfg_path)]
        cmd += ["--store", f"{head}:{STORE_PORT}", "--out", str(tmp / f"node{rank}")]
        logs[f"node{rank}"] = open(tmp / f"node{rank}.log", "wb")  # noqa: SIM115
        nodes.append(h.popen(host, cmd, env=env, stdout=logs[f"node{rank}"], stderr=subprocess.STDOUT))
    return {"sup": sup, "nodes": nodes, "logs": logs, "t0": time.monotonic(), "cfg": cfg}


def _finish(run: dict[str, Any], tmp: Path, wait_nodes: tuple[int, ...] = (0, 1)) -> float:
    """Wait (bounded) for the named torchrun nodes and the supervisor; kill whatever is left."""
    deadline = run["t0"] + WAIT_S
    for i in wait_nodes:
        run["nodes"][i].wait(timeout=max(1.0, deadline - time.monotonic()))
    # The supervisor ends on the run's ``finished`` key (or the syncer's last learner): after the nodes,
    # give it a moment; alone (a node lost), the whole run's time.
    wait_s = deadline - time.monotonic() if not wait_nodes else min(60.0, deadline - time.monotonic())
    run["sup"].wait(timeout=max(1.0, wait_s))
    wall_s = time.monotonic() - run["t0"]
    for p in [run["sup"], *run["nodes"]]:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait(timeout=30)
    for f in run["logs"].values():
        f.close()
    return float(wall_s)


def _events(out: Path) -> list[dict[str, Any]]:
    path = out / "events.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


def _per_host(summary: dict[str, Any]) -> dict[str, int]:
    sent = summary["bytes_sent_per_worker"]
    return {"node0": sent.get("w0", 0) + sent.get("w1", 0), "node1": sent.get("w2", 0) + sent.get("w3", 0)}


def _report(name: str, **fields: Any) -> None:
    print(f"\n[multihost] {name}: " + json.dumps(fields, default=str))


def _diloco(steps: int) -> TestbedConfig:
    return TestbedConfig(
        algorithm="diloco",
        workers=4,
        steps=steps,
        inner_steps=10,
        model="tiny",
        data=CORPUS,
        eval_batches=2,
        run_timeout_s=200,
    )


def test_three_hosts_diloco_matches_one_host(hosts: Hosts, one_host: dict[str, Any], tmp_path: Path) -> None:
    """DiLoCo over three namespace hosts, with the interface chosen by the workers themselves: it
    completes, every worker bound gloo to its host's eth0 address (not loopback), the final loss equals
    the one-host run's (deterministic; within 2 %), and each node's kernel-counted upload is at least
    the payload its two workers sent."""
    cfg = _diloco(steps=40)
    before = {i: hosts.counters(i) for i in (NODE0, NODE1)}
    run = _launch(hosts, cfg, tmp_path, "dispersal.testbed.worker")
    wall_s = _finish(run, tmp_path)
    after = {i: hosts.counters(i) for i in (NODE0, NODE1)}
    assert run["nodes"][0].returncode == 0 and run["nodes"][1].returncode == 0, (
        tmp_path / "node0.log"
    ).read_text()[-3000:] + (tmp_path / "node1.log").read_text()[-3000:]
    summary = json.loads((tmp_path / "node0" / "summary.json").read_text())
    assert summary["completed"] is True, summary
    head_log = (tmp_path / "head.log").read_text()
    assert f"store listening on {hosts.address(HEAD)}:{STORE_PORT}" in head_log
    # Each worker says which interface and address it bound, and it is its host's, not loopback.
    for rank, host in enumerate((NODE0, NODE1)):
        bound = {e["worker"]: e for e in _events(tmp_path / f"node{rank}") if e["event"] == "transport"}
        assert sorted(bound) == [f"w{2 * rank}", f"w{2 * rank + 1}"]
        assert {(e["ifname"], e["address"]) for e in bound.values()} == {("eth0", hosts.address(host))}
        log = (tmp_path / f"node{rank}.log").read_text()
        assert f"gloo/nccl on eth0 ({hosts.address(host)}, route to the store)" in log
    one = one_host
    ratio = summary["final_val_loss"] / one["final_val_loss"]
    assert abs(ratio - 1) <= 0.02, (summary["final_val_loss"], one["final_val_loss"])
    assert summary["bytes_sent_per_worker"] == one["bytes_sent_per_worker"]  # same payloads, counted alike
    payload = _per_host(summary)
    wire = {f"node{k}": after[h]["tx_bytes"] - before[h]["tx_bytes"] for k, h in enumerate((NODE0, NODE1))}
    for node in wire:
        assert wire[node] >= payload[node], (wire, payload)
    _report(
        "diloco",
        final_val_loss_3hosts=summary["final_val_loss"],
        final_val_loss_1host=one["final_val_loss"],
        ratio=ratio,
        wall_s=round(wall_s, 1),
        payload_bytes_sent_per_host=payload,
        kernel_tx_bytes_per_host=wire,
        bytes_sent_per_worker=summary["bytes_sent_per_worker"],
    )


def test_three_hosts_decoupled(hosts: Hosts, one_host: dict[str, Any], tmp_path: Path) -> None:
    """Decoupled DiLoCo over the same hosts: the syncer runs with the supervisor on the head host, the
    learners under torchrun on the two nodes. It completes and, at equal tokens, trains about as well
    as synchronous DiLoCo on one host: within 20 %. Its learners run on their own clocks, so which
    updates meet in a merge depends on timing and two runs differ: this 40-step run measured 1.067-1.081
    (6 runs on an idle machine) and 1.100 once under the full suite's load (2026-12-05), where an
    untrained model would be ~1.7 (ln 256 over DiLoCo's 3.2 nats). Quorum 4 of 4 with outer momentum 0.5,
    the setting where docs/testbed.md measured decoupled = DiLoCo at equal tokens over 100 steps; merges
    wait for the quorum (a 120 s grace window): with the default 2 s one a learner slowed by the full
    suite's load once let the deadline merge updates alone (ratio 1.203), and a 0.05 s window merges
    single updates at the outer rate tuned for four (11 versions, diverged). With the wide window:
    1.067-1.091 (6 runs, 3 of them beside six busy processes)."""
    cfg = TestbedConfig(
        algorithm="decoupled",
        workers=4,
        steps=40,
        inner_steps=10,
        model="tiny",
        data=CORPUS,
        eval_batches=2,
        run_timeout_s=200,
        outer_momentum=0.5,
        quorum=4,
        # Merges on the quorum only: the default 2 s grace window merges without it when a learner's
        # round is slow, which the full suite's load made happen once (a ratio of 1.203, 2026-12-05)
        sync_deadline_s=120.0,
    )
    run = _launch(hosts, cfg, tmp_path, "dispersal.testbed.learner")
    wall_s = _finish(run, tmp_path)
    summary = json.loads((tmp_path / "head" / "summary.json").read_text())
    assert summary["completed"] is True, (summary, (tmp_path / "head.log").read_text()[-2000:])
    assert f"syncer listening on {hosts.address(HEAD)}:" in (tmp_path / "head.log").read_text()
    ratio = summary["final_val_loss"] / one_host["final_val_loss"]
    assert ratio <= 1.20, (summary["final_val_loss"], one_host["final_val_loss"])
    _report(
        "decoupled",
        final_val_loss_3hosts=summary["final_val_loss"],
        final_val_loss_1host_diloco=one_host["final_val_loss"],
        ratio=ratio,
        wall_s=round(wall_s, 1),
        versions=summary.get("versions"),
        bytes_sent_per_worker=summary.get("bytes_sent_per_worker"),
    )


def test_link_cut_is_survived(hosts: Hosts, tmp_path: Path) -> None:
    """Node 1's cable is pulled (eth0 down in its namespace) after two rounds: its workers' heartbeats
    stop reaching the store, the survivors' sync fails or their barrier gives up, the coordinator
    publishes a generation of w0 and w1 only, and they finish the run; summary.json says who was left."""
    cfg = _diloco(steps=80)
    run = _launch(hosts, cfg, tmp_path, "dispersal.testbed.worker")
    metrics = tmp_path / "node0" / "metrics.jsonl"
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 2:
            break
        assert run["nodes"][0].poll() is None, (tmp_path / "node0.log").read_text()[-3000:]
        time.sleep(0.2)
    hosts.link(NODE1, up=False)
    t_cut = time.time()
    try:
        # The run is over when the supervisor sees ``finished`` (summary.json written). Node 0's torchrun
        # itself waits longer: its exit barrier waits for node 1's agent (torchrun's own, 300 s).
        wall_s = _finish(run, tmp_path, wait_nodes=())
    finally:
        hosts.link(NODE1, up=True)
    summary = json.loads((tmp_path / "node0" / "summary.json").read_text())
    assert summary["completed"] is True, summary
    assert summary["final_members"] == ["w0", "w1"]
    assert summary["rounds"] == cfg.rounds
    ev = _events(tmp_path / "node0")
    after = [e for e in ev if e["t"] >= t_cut]
    joined = [e for e in after if e["event"] == "joined"]
    assert {e["worker"] for e in joined} == {"w0", "w1"}, after
    assert all(e["members"] == ["w0", "w1"] for e in joined), joined
    rows = [json.loads(ln) for ln in metrics.read_text().splitlines()]
    assert rows[0]["active_workers"] == ["w0", "w1", "w2", "w3"]
    assert rows[-1]["active_workers"] == ["w0", "w1"] and rows[-1]["round"] == cfg.rounds - 1
    _report(
        "link_cut",
        wall_s=round(wall_s, 1),
        events_node0=[
            {k: e[k] for k in e if k not in ("state_crc", "global_crc", "local_crc")} for e in after
        ],
        summary={k: summary[k] for k in summary if k != "config"},
        active_per_round=[(r["round"], len(r["active_workers"])) for r in rows],
    )


def test_no_route_to_the_store_is_one_line(hosts: Hosts, tmp_path: Path) -> None:
    """A worker on a host with no route to the store (203.0.113.1, TEST-NET-3, is not on the bridge)
    stops at once with one line that says what to check and what to set, exit 2, no traceback."""
    cfg_path = tmp_path / "config.json"
    cfg_path.write_text(json.dumps(_diloco(steps=10).to_dict()))
    cmd = [sys.executable, "-m", "dispersal.testbed.worker", "--config", str(cfg_path), "--worker", "w0"]
    cmd += ["--store", "203.0.113.1:29600", "--out", str(tmp_path / "out")]
    p = hosts.popen(NODE0, cmd, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=120)
    lines = err.decode().strip().splitlines()
    assert p.returncode == 2, err.decode()
    assert len(lines) == 1 and lines[0].startswith("error: store: no route to 203.0.113.1"), lines
    assert "GLOO_SOCKET_IFNAME" in lines[0]
