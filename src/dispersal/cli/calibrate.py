"""`dispersal calibrate`: measure eta_H, eta_rep and eta_comp on the testbed, fit the model's forms,
write a calibration file, plots and a report. torch is imported only in the worker processes."""

from __future__ import annotations

import shlex
import sys
import time
from typing import Annotated

import typer

from dispersal.cli._common import (
    MAX_SEED,
    atomic_write_text,
    fail,
    guarded,
    number_in,
    output_dir,
    output_file,
    print_json,
)
from dispersal.model.inputs.errors import InputError

TORCH_MISSING = "calibrate needs torch for training: pip install 'dispersal[train]' (or use --analyse-only)"

_EPILOG = (
    "Priority order for --budget-minutes (the longest prefix that fits is run): 0 DDP reference curve, "
    "size A; 1 H sweep (10, 50, 100, 500) at M=4; 2 M sweep (1, 2, 8) at H=50; 3 codecs int8/int4/topk at "
    "H=50, M=4; 4 size B reference + H and M sweeps; 5 second seed of 1-3 and DDP M=4; 6 codecs on B, H "
    "sweeps at other M; 7 the rest of the full grid. Finished points are kept in OUT/results.jsonl and "
    "never re-run. Exit 0 = done, 2 = bad input."
)


def _ints(text: str, field: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(field, f"expected comma-separated integers, got {text!r}") from None
    for v in values:
        number_in(v, field, 0, MAX_SEED)
    return values


@guarded
def calibrate_cmd(
    out: Annotated[
        str, typer.Option(help="Output folder: results.jsonl (resumable), data cache.")
    ] = "runs/calibration",
    budget_minutes: Annotated[
        float | None, typer.Option(help="Only run the highest-priority points that fit (estimated).")
    ] = None,
    steps: Annotated[
        int,
        typer.Option(
            help="Global steps per sweep point (equal tokens for every point).", min=500, max=10_000_000
        ),
    ] = 1000,
    global_batch: Annotated[
        int, typer.Option(help="Sequences per global step, split over the M workers.", min=8, max=1_000_000)
    ] = 16,
    sizes: Annotated[
        str, typer.Option(help="Model sizes, comma-separated: tiny, tiny-w128, small.")
    ] = "tiny,tiny-w128",
    seeds: Annotated[
        str, typer.Option(help="Training seeds, comma-separated (the second is tier 5).")
    ] = "0,1",
    jobs: Annotated[
        int, typer.Option(help="Parallel training processes (one torch thread each).", min=1, max=1024)
    ] = 2,
    bootstrap: Annotated[
        int, typer.Option(help="Bootstrap replicates for the error bars.", min=0, max=1_000_000)
    ] = 200,
    toml: Annotated[
        str | None, typer.Option(help="Write the calibration TOML here (default OUT/calibration.toml).")
    ] = None,
    docs: Annotated[
        str | None, typer.Option(help="Also write calibration.md and calibration_*.png into this folder.")
    ] = None,
    bench: Annotated[
        str | None, typer.Option(help="Also write the benchmark note (markdown) to this file.")
    ] = None,
    analyse_only: Annotated[
        bool, typer.Option("--analyse-only", help="Train nothing; analyse OUT/results.jsonl.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the points that would run, then exit.")
    ] = False,
    json_: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print {"written": [...], "calibration": ..., "points": N, "sizes": [...]} as JSON; tables go to stderr.',
        ),
    ] = False,
) -> None:
    """Sweep H x M x codec x model size on the testbed at equal tokens, convert each run's loss to
    effective DDP compute (eta), fit eta_H / replica / compression forms, write a calibration TOML.

    One command for the committed file and report (about 20 minutes on 2 CPU cores):

      dispersal calibrate --budget-minutes 20 --out runs/calibration
        --toml src/dispersal/data/calibration/cpu-small.toml --docs docs
        --bench benchmarks/results/calibration_cpu_YYYYMM_dev.md
    """
    from dispersal.calibration import report, sweep

    t_start = time.perf_counter()
    size_list = tuple(s.strip() for s in sizes.split(",") if s.strip())
    for s in size_list:
        if s not in sweep.SIZES:
            raise InputError("sizes", f"each one of {', '.join(sweep.SIZES)}, got {s!r}")
    if not size_list:
        raise InputError("sizes", "give at least one size")
    seed_list = _ints(seeds, "seeds")
    if not seed_list:
        raise InputError("seeds", "give at least one seed")
    if steps < 500 or steps % 500:
        raise InputError("steps", f"must be a multiple of 500 (H up to 500), got {steps}")
    if global_batch < 8 or global_batch % 8:
        raise InputError("global_batch", f"must be a multiple of 8 (M up to 8), got {global_batch}")
    if budget_minutes is not None:
        number_in(budget_minutes, "budget_minutes", 0, 525_600, lo_open=True, unit="min")
    # Every output is checked before the step-time probe and the training (minutes to hours).
    out_dir = output_dir(out, "out")
    toml_path = output_file(toml, "toml", (".toml",)) if toml is not None else out_dir / "calibration.toml"
    docs_dir = output_dir(docs, "docs") if docs is not None else None
    bench_file = output_file(bench, "bench") if bench is not None else None
    spec = sweep.SweepSpec(steps=steps, global_batch=global_batch, sizes=size_list, seeds=seed_list)
    results = out_dir / "results.jsonl"
    done = {r["key"] for r in sweep.load_results(results)}
    from rich.console import Console

    from dispersal.cli._render import console

    con = Console(stderr=True, highlight=False) if json_ else console()
    if not analyse_only:
        try:
            import torch  # noqa: F401
        except ImportError:
            raise fail(TORCH_MISSING) from None
        allp = sweep.plan_points(spec)
        step_s = sweep.measure_step_times(list(size_list), global_batch, out_dir / "data")
        budget_s = None
        if budget_minutes is not None:
            # keep ~1.5 min for the step-time probe, analysis, bootstrap and plots
            budget_s = max(0.0, budget_minutes * 60 - 90 - (time.perf_counter() - t_start))
        chosen = sweep.select(allp, done, budget_s, jobs, step_s)
        est = sum(sweep.estimate_s(p, step_s) for p in chosen) / jobs
        con.print(
            f"{len(allp)} points in the full sweep, {len(done)} already done, running {len(chosen)} "
            f"(estimated {est / 60:.1f} min on {jobs} processes; s/step {', '.join(f'{k} {v * 1e3:.0f} ms' for k, v in step_s.items())})"
        )
        if dry_run:
            for p in chosen:
                con.print(f"  tier {p['tier']}: {p['key']}  ~{sweep.estimate_s(p, step_s):.0f} s")
            return
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
            task = bar.add_task("calibration sweep", total=len(chosen))

            def on_done(rec: dict[str, object]) -> None:
                bar.update(
                    task,
                    advance=1,
                    description=f"{str(rec['key']).split('|seed')[0]} loss {rec['val_loss']:.3f}",
                )

            deadline = None if budget_s is None else time.monotonic() + budget_s
            sweep.run_points(chosen, out_dir, jobs, on_done, deadline=deadline)
    records = sweep.load_results(results)
    if not records:
        raise InputError("out", f"no finished points in {results}; run without --analyse-only first")
    summary = report.summarize(records, n_boot=bootstrap)
    if not summary["sizes"]:
        raise InputError(
            "out", "not enough points to fit (need the DDP reference curve and one DiLoCo point)"
        )
    cmd = (
        "dispersal calibrate " + " ".join(shlex.quote(a) for a in sys.argv[2:])
        if len(sys.argv) > 1 and sys.argv[1] == "calibrate"
        else "dispersal calibrate"
    )
    meta = report.meta_info(cmd, sorted({int(r["seed"]) for r in summary["records"]}))
    atomic_write_text(toml_path, report.calibration_toml(summary, meta))
    from dispersal.calibration.tomlio import load_calibration

    cal = load_calibration(toml_path, extrapolate=True)  # what-ifs; in-range is what --calibration applies
    h_pub, h_cal = report.headline_variants(cal, list(summary["params"]), load_calibration(toml_path)), None
    con.print(report.tables_md(summary))
    for line in report.direction_checks(summary):
        con.print("direction: " + line)
    for n in summary["notes"]:
        con.print("note: " + n)
    con.print(report.headline_md(h_pub, h_cal))
    written = [toml_path]
    if docs_dir is not None or bench_file is not None:
        import datetime as _dt

        bench_path = bench_file or out_dir / f"calibration_cpu_{_dt.date.today():%Y%m}_dev.md"
        written += report.write_docs(
            summary,
            meta,
            h_pub,
            h_cal,
            toml_path,
            docs_dir or out_dir,
            bench_path,
            {
                "results": str(results),
                "steps": steps,
                "global_batch": global_batch,
                "eval_batches": 32,
                "budget": "n/a (--analyse-only: trains nothing)"
                if analyse_only
                else (f"{budget_minutes} min" if budget_minutes else "none (full sweep)"),
                "wall_s": time.perf_counter() - t_start,
            },
        )
    if json_:
        print_json(
            {
                "written": [str(p) for p in written],
                "calibration": str(toml_path),
                "points": len(records),
                "sizes": sorted(summary["sizes"]),
            }
        )
        return
    con.print("wrote: " + ", ".join(str(p) for p in written))


def register(app: typer.Typer) -> None:
    """Add `calibrate` to the root app."""
    app.command("calibrate", epilog=_EPILOG)(calibrate_cmd)
