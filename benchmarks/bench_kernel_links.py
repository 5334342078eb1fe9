"""The user-space link model checked against the kernel: the same DiLoCo run three ways, at two rates.

* ``virtual``: ``--link-mode virtual``: sync time from the formula ``8 V/up + 8 V/down + latency``.
* ``real``: ``--link-mode real``: the relay on 127.0.0.1 shapes every byte in user space
  (token bucket over 1448-byte segments, netlink.py) and the workers measure each sync.
* ``kernel``: three network namespaces on a bridge (netns.Hosts), each worker host's veth shaped by
  ``tc tbf`` at the rate both ways, the head host's link unshaped (the relay's own link is not the
  bottleneck, as in ``real``); the supervisor with the relay on the head host (``--link-mode real``,
  rate infinite: the user-space shaper passes everything through) and one torchrun node per worker
  host; the workers measure each sync exactly as in ``real``.
* ``kernel_shared``: the same with the head host's link shaped at the rate too, so all M uploads
  share the relay's downlink and all M downloads its uplink: formula ``2 M 8 V / rate``.

M = 2 workers, model ``tiny`` (fp32 payload V = 482,308 B), H = 10, 60 steps (6 syncs per worker),
no added latency (``tc netem`` is not available here, so the kernel links have none either).
Needs root (namespaces). Run: ``python benchmarks/bench_kernel_links.py [--rates 20,100]`` (about
6 min on 2 cores); writes ``benchmarks/results/kernel_links_cpu_<yyyymm>_dev.md``; raw runs under
``--out`` (git-ignored ``runs/``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from dispersal.testbed.config import TestbedConfig
from dispersal.testbed.netns import Hosts, unavailable
from dispersal.testbed.secure import new_secret, write_secret_file
from dispersal.testbed.supervisor import run_local

CORPUS = (str(Path(sysconfig.get_paths()["stdlib"]) / "email"),)
WAIT_S = 300.0


def _cfg(mode: str, rate_mbit: float) -> TestbedConfig:
    rate = math.inf if mode.startswith("kernel") else rate_mbit * 1e6  # kernel: the shaper passes all through
    return TestbedConfig(
        algorithm="diloco",
        workers=2,
        steps=60,
        inner_steps=10,
        model="tiny",
        data=CORPUS,
        eval_batches=2,
        run_timeout_s=WAIT_S - 30,
        link_up_bits_per_s=rate,
        link_down_bits_per_s=rate,
        link_mode="virtual" if mode == "virtual" else "real",
    )


def _syncs(outs: list[Path]) -> list[list[float]]:
    """Each worker's measured syncs (netlink/<worker>.jsonl), in order."""
    walls = []
    for out in outs:
        for f in sorted((out / "netlink").glob("*.jsonl")):
            walls.append([json.loads(ln)["wall_s"] for ln in f.read_text().splitlines() if ln])
    return walls


def _kernel(
    cfg: TestbedConfig, rate_mbit: float, out: Path, head_shaped: bool
) -> tuple[dict[str, Any], list[list[float]]]:
    """Supervisor (store + relay) on host 0, worker w{k} under torchrun node k on host k + 1."""
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / "config.json"
    cfg_path.write_text(json.dumps(cfg.to_dict()))
    write_secret_file(out / "run.secret", new_secret())
    env = {k: v for k, v in os.environ.items() if not k.endswith("_SOCKET_IFNAME")}
    env["DISPERSAL_RUN_SECRET_FILE"] = str(out / "run.secret")
    with Hosts(hosts=3, rate_bits_per_s=rate_mbit * 1e6) as h:
        if not head_shaped:
            h.shape(0, None)
        head = h.address(0)
        sup = [sys.executable, "-m", "dispersal.testbed.supervisor", "--config", str(cfg_path)]
        sup += ["--host", head, "--port", "29600", "--out", str(out / "head")]
        with open(out / "head.log", "wb") as log:
            ps = h.popen(0, sup, env=env, stdout=log, stderr=subprocess.STDOUT)
        for k in range(2):
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1"]
            cmd += ["--node-rank", str(k), "--master-addr", h.address(1), "--master-port", "29500"]
            cmd += ["-m", "dispersal.testbed.worker", "--config", str(cfg_path), "--store", f"{head}:29600"]
            cmd += ["--out", str(out / f"node{k}")]
            with open(out / f"node{k}.log", "wb") as log:
                h.popen(k + 1, cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        ps.wait(timeout=WAIT_S)  # ends on the run's ``finished`` key
    summary = json.loads((out / "node0" / "summary.json").read_text())
    return summary, _syncs([out / "node0", out / "node1"])


def _row(
    mode: str, rate: float, summary: dict[str, Any], walls: list[list[float]], wall_s: float
) -> dict[str, Any]:
    rounds = summary["rounds"]
    util = statistics.mean(summary["utilisation"].values())
    if mode == "virtual":
        per = statistics.mean(v / rounds for v in summary["exposed_comm_s_per_worker"].values())
        first = rest = per
    else:
        per = statistics.mean(w for ws in walls for w in ws)
        first = statistics.mean(ws[0] for ws in walls)  # a fresh connection: TCP slow start, if any
        rest = statistics.mean(w for ws in walls for w in ws[1:])
    return {
        "mode": mode,
        "rate_mbit": rate,
        "sync_s": per,
        "first_sync_s": first,
        "later_sync_s": rest,
        "utilisation": util,
        "final_val_loss": summary["final_val_loss"],
        "completed": summary["completed"],
        "run_wall_s": wall_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="20,100", help="Mbit/s, comma-separated")
    ap.add_argument("--modes", default="virtual,real,kernel,kernel_shared")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_kernel_links"))
    args = ap.parse_args()
    why = unavailable()
    if why:
        print(f"error: kernel links: {why}", file=sys.stderr)
        raise SystemExit(2)
    rows = []
    for rate in [float(r) for r in args.rates.split(",")]:
        for mode in args.modes.split(","):
            out = args.out / f"{mode}_{rate:g}"
            cfg = _cfg(mode, rate)
            t0 = time.perf_counter()
            if mode.startswith("kernel"):
                summary, walls = _kernel(cfg, rate, out, head_shaped=mode == "kernel_shared")
            else:
                summary, walls = run_local(cfg, out), _syncs([out])
            rows.append(_row(mode, rate, summary, walls, time.perf_counter() - t0))
            print(json.dumps(rows[-1]), flush=True)
    v = 482308 + 4  # fp32 payload + CRC32 of the tiny model
    lines = [
        f"# Link emulation vs kernel-shaped links ({dt.date.today():%B %Y}, {os.cpu_count()} CPUs)",
        "",
        "DiLoCo, M = 2, H = 10, tiny (V = 482,312 B per upload), 6 syncs per worker, no added latency.",
        "formula = 8 V/up + 8 V/down (virtual mode's charge); kernel_shared: 2 M 8 V / rate (M = 2).",
        "",
        "| rate | mode | sync s (mean) | first sync s | later syncs s | formula s | utilisation | final val loss |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        formula = (4 if r["mode"] == "kernel_shared" else 2) * 8 * v / (r["rate_mbit"] * 1e6)
        lines.append(
            f"| {r['rate_mbit']:g} Mbit/s | {r['mode']} | {r['sync_s']:.4f} | {r['first_sync_s']:.4f} | "
            f"{r['later_sync_s']:.4f} | {formula:.4f} | {r['utilisation']:.3f} | {r['final_val_loss']:.4f} |"
        )
    res = Path(__file__).parent / "results" / f"kernel_links_cpu_{dt.date.today():%Y%m}_dev.md"
    res.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
