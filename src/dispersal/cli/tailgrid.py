"""`dispersal tail-grid`: the critical-batch tail measured on the testbed (issue 32).

Runs the replicas x token budget x per-replica batch x H grid with the many-replica engine
(dispersal.testbed.replicas_grid), appending every finished run to a JSONL file (a rerun resumes),
then fits the model's tail on a named part and reports the held-back cells, the fixed-global-batch
split, and writes the data file and plots. torch is imported only in the worker processes."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from dispersal.cli._common import atomic_write_text, fail, guarded, output_dir, output_file, print_json
from dispersal.model.inputs.errors import InputError

TORCH_MISSING = "tail-grid needs torch for training: pip install 'dispersal[train]' (or use --analyse-only)"


def _ints(text: str, field: str, lo: int, hi: int) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(field, f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise InputError(field, "give at least one value")
    for v in values:
        if not lo <= v <= hi:
            raise InputError(field, f"each in {lo}..{hi}, got {v}")
    return values


@guarded
def tail_grid_cmd(
    results: Annotated[
        str, typer.Option(help="Results file (JSONL, appended, resumable).")
    ] = "runs/tailgrid/tiny.jsonl",
    model: Annotated[str, typer.Option(help="Testbed preset: tiny, small (medium/base: a GPU).")] = "tiny",
    replicas: Annotated[str, typer.Option(help="Replica counts M, comma-separated.")] = "1,4,16,64,256",
    budgets: Annotated[
        str, typer.Option(help="Token budgets D of a run, comma-separated.")
    ] = "4096,16384,65536",
    batches: Annotated[str, typer.Option(help="Per-replica batches b (sequences per step).")] = "1,4,16",
    inner_steps: Annotated[str, typer.Option(help="Inner steps per round H.")] = "2,8",
    seeds: Annotated[str, typer.Option(help="Training seeds.")] = "0,1,2",
    jobs: Annotated[
        int, typer.Option(help="Parallel training processes (one torch thread each).", min=1, max=256)
    ] = 2,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    m_x: Annotated[
        int, typer.Option(help="Anchor M_x of the tail (g(M) / g(M_x) is fitted beyond it).", min=1, max=4096)
    ] = 4,
    m_fit_max: Annotated[
        int, typer.Option(help="Largest M in the fit part (larger M is held back).", min=2, max=4096)
    ] = 64,
    bootstrap: Annotated[
        int, typer.Option(help="Bootstrap resamples over seeds.", min=0, max=100_000)
    ] = 1000,
    toml: Annotated[
        str | None, typer.Option(help="Write the fitted exponents here (testbed_tail_fit.toml).")
    ] = None,
    docs: Annotated[
        str | None, typer.Option(help="Write testbed_tailgrid_g.png and testbed_tailgrid_split.png here.")
    ] = None,
    analyse_only: Annotated[
        bool, typer.Option("--analyse-only", help="Train nothing; analyse the results file.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the runs still to do, then exit.")] = False,
    json_: Annotated[
        bool, typer.Option("--json", help="Print the fit as JSON; tables go to stderr.")
    ] = False,
) -> None:
    """Measure how the replica penalty's tail moves with tokens, per-replica batch and H.

    The committed data file and docs/testbed.md's tail-grid section come from (tiny preset):

      dispersal tail-grid --results runs/tailgrid/tiny.jsonl --toml src/dispersal/data/testbed_tail_fit.toml --docs docs
    """
    from dispersal.testbed import replicas_grid as rg

    t0 = time.perf_counter()
    spec = rg.GridSpec(
        model=model,
        replicas=_ints(replicas, "replicas", 1, 4096),
        budgets=_ints(budgets, "budgets", 64, 10**12),
        batches=_ints(batches, "batches", 1, 65_536),
        inner_steps=_ints(inner_steps, "inner_steps", 1, 100_000),
        seeds=_ints(seeds, "seeds", 0, 2**31 - 1),
    )
    if device not in ("cpu", "cuda"):
        raise InputError("device", f"cpu or cuda, got {device!r}")
    res_path = output_file(results, "results", (".jsonl",))
    toml_path = output_file(toml, "toml", (".toml",)) if toml is not None else None
    docs_dir = output_dir(docs, "docs") if docs is not None else None
    from rich.console import Console

    from dispersal.cli._render import console

    con = Console(stderr=True, highlight=False) if json_ else console()
    if not analyse_only:
        _train(spec, res_path, jobs, device, con, dry_run)
        if dry_run:
            return
    _analyse(
        spec, res_path, m_x, m_fit_max, bootstrap, toml_path, docs_dir, con, json_, time.perf_counter() - t0
    )


def _train(spec: Any, res_path: Path, jobs: int, device: str, con: Any, dry_run: bool) -> None:
    """Run the grid's missing runs with a progress bar (estimated time from the module's cost model)."""
    from dispersal.testbed import replicas_grid as rg

    runs, skipped = rg.plan(spec)
    done = {r["key"] for r in rg.load_records(res_path)}
    todo = [c for c in runs if c["key"] not in done]
    est = sum(rg.estimate_s(c) for c in todo) / jobs
    con.print(
        f"{len(runs)} runs in the grid ({len(skipped)} DiLoCo cells infeasible: fewer than one round), "
        f"{len(runs) - len(todo)} done, {len(todo)} to run (estimated {est / 60:.0f} min on {jobs} processes, idle host)"
    )
    if dry_run:
        for c in todo:
            con.print(f"  {c['key']}  steps {c['steps']}  ~{rg.estimate_s(c):.0f} s")
        return
    if not todo:
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        raise fail(TORCH_MISSING) from None
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=con,
    ) as bar:
        task = bar.add_task("tail grid", total=len(todo))

        def on_done(rec: dict[str, Any]) -> None:
            loss = rec["val_loss"]
            bar.update(
                task,
                advance=1,
                description=f"{rec['key'].split('|', 1)[1]} loss {loss if loss is None else round(loss, 3)}",
            )

        rg.run_grid(
            spec, res_path, res_path.parent / "data", jobs=jobs, device=device, on_done=on_done, only=todo
        )


def _analyse(
    spec: Any,
    res_path: Path,
    m_x: int,
    m_fit_max: int,
    n_boot: int,
    toml_path: Path | None,
    docs_dir: Path | None,
    con: Any,
    json_: bool,
    wall_s: float,
) -> None:
    from dispersal.testbed import replicas_grid as rg
    from dispersal.testbed import replicas_tailreport as rep
    from dispersal.testbed.config import MODEL_PRESETS
    from dispersal.testbed.gpt import param_count

    # Only this grid's preset and seeds (a file may hold more: e.g. analyse finished seeds while
    # another still runs).
    records = [
        r for r in rg.load_records(res_path) if r.get("model") == spec.model and r["seed"] in spec.seeds
    ]
    if not any(r["algorithm"] == "diloco" for r in records):
        raise InputError(
            "results",
            f"no finished DiLoCo runs of {spec.model} in {res_path}; run without --analyse-only first",
        )
    if m_fit_max <= m_x:
        raise InputError("m_fit_max", f"must be above m_x = {m_x}, got {m_fit_max}")
    try:
        s = rep.summarize(records, m_x=m_x, m_fit_max=m_fit_max, n_boot=n_boot)
    except ValueError as exc:
        raise InputError("results", f"cannot fit the tail yet: {exc}") from None
    tables = rep.tables_md(s)
    con.print(rep.cells_md(s))
    con.print(tables)
    # The command as typed: `dispersal ...` or `python -m dispersal ...` (argv[0] then __main__.py).
    argv = sys.argv[1:] if sys.argv and sys.argv[0].endswith(("dispersal", "__main__.py")) else []
    cmd = "dispersal " + " ".join(shlex.quote(a) for a in argv) if argv else "dispersal tail-grid"
    p = MODEL_PRESETS[spec.model]
    params = param_count(p["n_layer"], p["n_embd"], p["block_size"])
    written: list[Path] = []
    if toml_path is not None:
        atomic_write_text(toml_path, rep.data_toml(s, cmd, params))
        written.append(toml_path)
    if docs_dir is not None:
        docs_dir.mkdir(parents=True, exist_ok=True)
        written += rep.plot(s, docs_dir)
    md = res_path.with_suffix(".tables.md")  # the tables beside the results (docs/testbed.md quotes them)
    atomic_write_text(md, rep.cells_md(s) + "\n\n" + tables + "\n")
    written.append(md)
    f = s["fit"]
    con.print(
        f"{len(records)} runs, {s['wall_s'] / 60:.1f} min of training summed over runs; this command {wall_s / 60:.1f} min"
    )
    if json_:
        print_json(
            {
                "written": [str(w) for w in written],
                "fit": {
                    "a_tokens": f.a_tokens,
                    "a_batch": f.a_batch,
                    "a_h": f.a_h,
                    "k_ref": f.k_ref,
                    "m_x": f.m_x,
                    "ci": s["ci"],
                    "fit_cells": f.n_cells,
                    "held_back_cells": len(s["held"]),
                    "rms_ln": f.rms_ln,
                },
                "runs": len(records),
            }
        )
        return
    if written:
        con.print("wrote: " + ", ".join(str(w) for w in written))


def register(app: typer.Typer) -> None:
    """Add `tail-grid` to the root app."""
    app.command("tail-grid")(tail_grid_cmd)
