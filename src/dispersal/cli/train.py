"""``dispersal train``: the testbed (needs the ``train`` extra). torch is imported only inside the command."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from dispersal.cli._common import fail, guarded, input_file, output_dir

TORCH_MISSING = "the testbed needs torch: pip install 'dispersal[train]'"


@guarded
def train(
    algorithm: Annotated[
        str, typer.Option(help="ddp | diloco | streaming | decoupled (asynchronous learners + a syncer)")
    ] = "diloco",
    workers: Annotated[int, typer.Option(help="Worker processes M.")] = 4,
    inner_steps: Annotated[
        int, typer.Option("--inner-steps", "-H", help="H: inner steps between syncs.")
    ] = 50,
    steps: Annotated[
        int, typer.Option(help="Inner steps per worker (equal tokens across algorithms).")
    ] = 500,
    model: Annotated[
        str, typer.Option(help="tiny | small | medium | base (0.12 M to 89 M parameters)")
    ] = "tiny",
    link: Annotated[
        # "\\[" keeps Rich from reading "[/DOWN]" as a closing markup tag (it crashed --help).
        str, typer.Option(help="UP\\[/DOWN]/LATENCY\\[/JITTER], e.g. 100Mbps/100ms, or 'instant'.")
    ] = "instant",
    codec: Annotated[str, typer.Option(help="none | bf16 | int8 | int4 | topk")] = "none",
    # str, not Path: typer turns '' into Path('.'), which would write into the current folder.
    out: Annotated[
        str, typer.Option(help="Output folder (metrics.jsonl, summary.json, ckpt/).")
    ] = "runs/train",
    seed: Annotated[int, typer.Option()] = 0,
    realtime: Annotated[
        bool, typer.Option(help="Really sleep for link time instead of a virtual clock.")
    ] = False,
    link_mode: Annotated[
        str,
        typer.Option(
            "--link-mode",
            help="virtual: link time from the formula (fast); real: a relay on real sockets shapes "
            "every byte and the measured wall-clock sync time is charged.",
        ),
    ] = "virtual",
    loss: Annotated[
        str,
        typer.Option(help="Real link: TCP segment loss probability P or UP_P/DOWN_P (costs a round trip)."),
    ] = "0",
    relay_down: Annotated[
        str,
        typer.Option(
            "--relay-down", help="Real link: the relay's downlink shared by all downloads, e.g. 1Gbps."
        ),
    ] = "inf",
    resume: Annotated[bool, typer.Option(help="Continue from OUT/ckpt/LATEST.")] = False,
    data: Annotated[
        list[Path] | None, typer.Option(help="Text files/folders (default: the stdlib's *.py).")
    ] = None,
    tokenizer: Annotated[
        str, typer.Option(help="byte (vocab 256) | bpe (byte-level BPE trained here on the corpus).")
    ] = "byte",
    vocab_size: Annotated[int, typer.Option(help="BPE vocabulary (0 = 4096); byte is always 256.")] = 0,
    device: Annotated[
        str, typer.Option(help="cpu | cuda (worker i on GPU LOCAL_RANK or i mod count).")
    ] = "cpu",
    precision: Annotated[str, typer.Option(help="fp32 | bf16 (autocast of the forward pass).")] = "fp32",
    comm_backend: Annotated[
        str, typer.Option(help="gloo (host tensors) | nccl (GPU tensors; needs --device cuda).")
    ] = "gloo",
    eval_batches: Annotated[
        int, typer.Option(help="Validation batches per evaluation (same batches every time).")
    ] = 8,
    fragments: Annotated[int | None, typer.Option(help="Streaming: P fragments (default 2).")] = None,
    overlap_steps: Annotated[int, typer.Option(help="Streaming: tau, steps that hide the sync.")] = 1,
    mixing_alpha: Annotated[float, typer.Option(help="Streaming: merge alpha.")] = 0.5,
    topk_fraction: Annotated[float, typer.Option(help="topk: fraction of values sent.")] = 0.01,
    checkpoint_every: Annotated[int, typer.Option(help="Checkpoint every N outer rounds (0 = end).")] = 0,
    stop_after: Annotated[int, typer.Option(help="Stop after N rounds (simulated interruption).")] = 0,
    eval_every: Annotated[int, typer.Option(help="Validation every N logged rounds.")] = 1,
    kill: Annotated[list[str] | None, typer.Option(help="wN@stepS: SIGKILL a worker (repeatable).")] = None,
    rejoin: Annotated[list[str] | None, typer.Option(help="wN@stepS: restart a killed worker.")] = None,
    straggle: Annotated[list[str] | None, typer.Option(help="wN:Fx@A-B: slow compute F times.")] = None,
    corrupt: Annotated[list[str] | None, typer.Option(help="wN@stepS: damage a payload on the wire.")] = None,
    faults: Annotated[str | None, typer.Option(help="File of fault specs, one per line.")] = None,
    report: Annotated[str | None, typer.Option(help="Only plot DIR's metrics to PNG and exit.")] = None,
    run_timeout: Annotated[
        float, typer.Option("--run-timeout", help="Seconds; the whole run is stopped after this.")
    ] = 3600.0,
    attack: Annotated[
        list[str] | None,
        typer.Option(
            help="WORKER:KIND\\[=VALUE]\\[@stepN]: what a worker sends instead of its update (repeatable); "
            "KIND: scale, sign_flip, noise, nan, huge, stale, copy, lazy."
        ),
    ] = None,
    aggregator: Annotated[
        str,
        typer.Option(
            help="Aggregation rule of the outer step: mean, norm_preserving, clip, trimmed_mean, median, "
            "gauntlet. Default: trimmed_mean with 3 or more workers or --trust untrusted, else mean."
        ),
    ] = "",
    outer_lr: Annotated[
        float, typer.Option("--outer-lr", help="Outer Nesterov learning rate (DiLoCo: 0.7).")
    ] = 0.7,
    outer_momentum: Annotated[
        float,
        typer.Option(
            "--outer-momentum",
            help="Outer Nesterov momentum (DiLoCo: 0.9; from scratch it can overshoot early, docs/testbed.md).",
        ),
    ] = 0.9,
    merge: Annotated[
        str, typer.Option(help="Decoupled: the syncer's merge rule, mean | norm_preserving.")
    ] = "mean",
    quorum: Annotated[
        int, typer.Option(help="Decoupled: learners the syncer waits for before merging (0 = majority).")
    ] = 0,
    sync_deadline: Annotated[
        float,
        typer.Option(
            "--sync-deadline", help="Decoupled: seconds an update waits before a merge without quorum."
        ),
    ] = 2.0,
    max_staleness: Annotated[
        int, typer.Option(help="Decoupled: drop an update built on a global version older than this many.")
    ] = 4,
    trust: Annotated[
        str,
        typer.Option(
            help="trusted (one operator's workers) | untrusted (peers may lie: robust default rule)."
        ),
    ] = "trusted",
) -> None:
    """Train a small GPT with several workers over an emulated WAN; break them on purpose; count bytes."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise fail(TORCH_MISSING) from None
    if report is not None:
        from dispersal.testbed.report import make_report

        if not report.strip():  # Path('') would be the current folder
            raise fail("report: empty path; give a run's output folder")
        for p in make_report(Path(report)):
            typer.echo(str(p))
        return
    out_dir = output_dir(out, "out")  # '' or a file refused by name, before any worker starts
    cfg = _config(locals())
    _run(cfg, out_dir, resume=resume, stopping=bool(stop_after))


def _config(opts: dict[str, Any]) -> Any:
    """The TestbedConfig of ``train``'s options (every check is TestbedConfig's: one line, exit 2)."""
    from dispersal.model.inputs.units import parse_bandwidth
    from dispersal.testbed.config import TestbedConfig, parse_link, parse_loss
    from dispersal.testbed.faults import FaultPlan

    up, down, latency, jitter = parse_link(opts["link"])
    loss_up, loss_down = parse_loss(opts["loss"])
    relay_down = opts["relay_down"]
    relay_down_bps = (
        math.inf if relay_down.strip().lower() == "inf" else parse_bandwidth(relay_down, "relay-down")
    )
    specs = [f"{kind} {v}" for kind in ("kill", "rejoin", "straggle", "corrupt") for v in opts[kind] or []]
    if opts["faults"] is not None:
        path = input_file(opts["faults"], "faults")
        try:
            specs += FaultPlan.from_file(path)
        except ValueError as exc:  # a bad line: name the file, and keep a huge line to one short line
            line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if line.startswith("faults: "):  # the reader's own error already names the path
                raise
            raise fail(f"faults: {path}: {line[:200]}{'...' if len(line) > 200 else ''}") from None
    if opts["fragments"] is not None and opts["algorithm"] == "decoupled":
        raise fail("fragments: decoupled learners send the whole model (fragments are Streaming DiLoCo's)")
    opts = {**opts, "fragments": 2 if opts["fragments"] is None else opts["fragments"]}
    same = [
        "algorithm",
        "workers",
        "inner_steps",
        "steps",
        "model",
        "codec",
        "link_mode",
        "realtime",
        "seed",
        "tokenizer",
        "vocab_size",
        "device",
        "precision",
        "comm_backend",
        "eval_batches",
        "fragments",
        "overlap_steps",
        "mixing_alpha",
        "topk_fraction",
        "checkpoint_every",
        "eval_every",
        "outer_lr",
        "outer_momentum",
        "aggregator",
        "trust",
        "merge",
        "quorum",
        "max_staleness",
    ]
    cfg = TestbedConfig(
        **{k: opts[k] for k in same},
        link_up_bits_per_s=up,
        link_down_bits_per_s=down,
        link_latency_s=latency,
        link_jitter_s=jitter,
        link_loss_up=loss_up,
        link_loss_down=loss_down,
        relay_down_bits_per_s=relay_down_bps,
        data=tuple(str(p) for p in opts["data"] or ()),
        stop_after_rounds=opts["stop_after"],
        faults=tuple(specs),
        attacks=tuple(opts["attack"] or ()),
        run_timeout_s=opts["run_timeout"],
        sync_deadline_s=opts["sync_deadline"],
    )
    if cfg.algorithm == "decoupled" and opts["resume"]:
        raise fail("resume: decoupled writes no checkpoints yet; start the run again without --resume")
    if cfg.device == "cuda":
        from dispersal.testbed.device import resolve_device

        resolve_device(cfg.device)  # no GPU: one line naming --device, before any worker starts
    for f in FaultPlan.parse(cfg.faults).faults:
        if int(f.worker[1:]) >= cfg.workers:
            raise fail(f"fault: worker {f.worker} does not exist (w0..w{cfg.workers - 1})")
    _check_rejoins(FaultPlan.parse(cfg.faults).faults)
    return cfg


def _check_rejoins(faults: Any) -> None:
    """Each rejoin must restart a worker a kill stopped at an earlier step (kills and rejoins of one
    worker pair off in step order); a rejoin of a worker that is running would be ignored silently."""
    killed: dict[str, int] = {}
    # At one step a rejoin sorts before a kill: a worker cannot come back at the step it dies.
    for f in sorted(faults, key=lambda f: (f.step, f.kind != "rejoin")):
        if f.kind == "kill":
            killed[f.worker] = killed.get(f.worker, 0) + 1
        elif f.kind == "rejoin":
            if not killed.get(f.worker):
                raise fail(
                    f"rejoin: {f.worker}@step{f.step} has no kill of {f.worker} before step {f.step} "
                    f"(add --kill {f.worker}@stepS with S < {f.step}, or drop the rejoin)"
                )
            killed[f.worker] -= 1


def _what_ran(cfg: Any, summary: dict[str, Any]) -> dict[str, Any]:
    """What the summary line describes: algorithm, workers, links (and for decoupled the merge rule and
    quorum the run used), so a pasted result says how it was produced."""
    from dispersal.model.inputs import units

    up, down = float(cfg.link_up_bits_per_s), float(cfg.link_down_bits_per_s)
    if math.isinf(up) and math.isinf(down) and not cfg.link_latency_s:
        link = "instant"
    else:
        rate = [("inf" if math.isinf(b) else units.format_bandwidth(b)) for b in (up, down)]
        link = f"{rate[0]} up / {rate[1]} down, {units.format_duration(cfg.link_latency_s)} ({cfg.link_mode})"
    out: dict[str, Any] = {"algorithm": cfg.algorithm, "workers": cfg.workers, "link": link}
    if cfg.algorithm == "decoupled":
        out |= {"merge": summary.get("merge", cfg.merge), "quorum": summary.get("quorum", cfg.quorum)}
    return out


def _run(cfg: Any, out: Path, *, resume: bool, stopping: bool) -> None:
    """Run with a progress bar, print the short summary (strict JSON), exit 1 unless it completed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from dispersal._io import _clean
    from dispersal.testbed.checkpoint import CheckpointError
    from dispersal.testbed.supervisor import run_local

    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    ) as bar:
        task = bar.add_task(f"{cfg.algorithm} x{cfg.workers}", total=cfg.steps)
        try:
            summary = run_local(
                cfg, out, resume=resume, on_progress=lambda s, n: bar.update(task, completed=s)
            )
        except CheckpointError as exc:
            raise fail(f"resume: {exc}") from None
    util = summary.get("utilisation") or {}
    mean_util = sum(util.values()) / len(util) if util else None
    short = {
        **_what_ran(cfg, summary),
        "completed": summary.get("completed"),
        "diverged": summary.get("diverged"),
        "reason": summary.get("reason"),
        "final_val_loss": summary.get("final_val_loss"),
        "virtual_time_s": summary.get("virtual_time_s"),
        "mean_utilisation": mean_util,
        "bytes_sent_per_worker": summary.get("bytes_sent_per_worker"),
        "updates_rejected": summary.get("updates_rejected"),
        "out": str(out),
    }
    typer.echo(json.dumps(_clean(short), allow_nan=False))
    if summary.get("diverged") or (not summary.get("completed") and not stopping):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("train")(train)
