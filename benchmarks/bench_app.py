"""Time from an input change to updated results in the web app, with every view's results present.

Drives the real Streamlit script headless (``streamlit.testing.v1.AppTest``, no browser): first run,
then press every view's button (Find the cheapest plan, Draw the comparison charts, Evaluate
countermeasures, Run the Monte Carlo, and since issue 34 Compute the frontier, Compare one building with
N sites, Find the best use of this fleet), timing each one's first answer and the same press again (what
the caches save), so every view holds results and figures; then change the WAN upload ``--edits`` times
and time each full rerun. A tree with stateful tabs (issue 34: only the open view is drawn) opens each
view's tab first, timed apart (``open_view_s``). Reports the cold start, each view's first answer and
second press, the median and the worst edit; with --baseline, the ratios.

``--baseline COMMIT`` also runs the same measurement on the app as it was at COMMIT (its ``src``
tree exported with ``git archive`` into a temporary folder and put first on PYTHONPATH, in a
separate process), and prints the ratio: the before/after figure the issue asks for.

    python benchmarks/bench_app.py --baseline 38e72dd        # this tree and the app before issue 14
    python benchmarks/bench_app.py --edits 3 --json          # this tree only, JSON
    python benchmarks/bench_app.py --mode default --target 1e25   # the app's own default question

Timings depend on the machine's load: compare the two numbers of one run, not runs on different days.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The tab each timed button is in (a tree with stateful tabs draws only the open one).
VIEW_OF = {
    "plan_go": "Planner",
    "cmp_go": "Planner",
    "cm_go": "Countermeasures",
    "unc_go": "Uncertainty",
    "fr_go": "Frontier",
    "mon_go": "Monitor",
    "fleet_go": "Fleet",
}


def measure(
    src: Path, edits: int, views: tuple[str, ...], mode: str = "paper", target: str = "1e24"
) -> dict[str, Any]:
    """Run in this process: the app under ``src`` (a folder holding the ``dispersal`` package)."""
    from streamlit.delta_generator import DeltaGenerator
    from streamlit.testing.v1 import AppTest

    # The first number a cold session shows: the first st.metric call (the Estimate view's training
    # time), before the tables (pandas) and figures (matplotlib) of the same run.
    first_metric: list[float] = []
    metric = DeltaGenerator.metric

    def timed_metric(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not first_metric:
            first_metric.append(time.perf_counter())
        return metric(self, *args, **kwargs)

    DeltaGenerator.metric = timed_metric  # type: ignore[method-assign]
    # The first answer a press shows: the first table, dataframe or markdown (figures are inline SVG in
    # markdown) drawn after the pressed button returns True in that run, which for a view that streams
    # (the Frontier's per-target curve, the Countermeasures' growing table, the Monte Carlo's first
    # point, the comparison's first chart) comes before the run ends.
    pressed: dict[str, float] = {}
    shown: dict[str, float] = {}
    press = DeltaGenerator.button

    def timed_button(self: Any, *args: Any, **kwargs: Any) -> Any:
        hit = press(self, *args, **kwargs)
        if hit and kwargs.get("key") in VIEW_OF and "now" not in pressed:
            pressed["now"] = time.perf_counter()
        return hit

    def answer(name: str) -> Any:
        draw = getattr(DeltaGenerator, name)

        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            if "now" in pressed and "now" not in shown:
                shown["now"] = time.perf_counter()
            return draw(self, *args, **kwargs)

        return timed

    DeltaGenerator.button = timed_button  # type: ignore[method-assign]
    for name in ("table", "markdown", "dataframe"):
        setattr(DeltaGenerator, name, answer(name))
    # `st.button`, `st.markdown`, ... are methods of the main container bound when streamlit is imported:
    # rebind them to the timed ones.
    import streamlit

    main = streamlit._main
    for name in ("button", "table", "markdown", "dataframe"):
        setattr(streamlit, name, getattr(main, name))
    script = src / "dispersal" / "app" / "streamlit_app.py"
    t0 = time.perf_counter()
    at = AppTest.from_file(str(script), default_timeout=600)
    at.query_params["mode"] = mode
    at.query_params["plan_target"] = target
    at.run()
    cold = time.perf_counter() - t0
    assert not at.exception, at.exception
    first: dict[str, float] = {}
    shown_s: dict[str, float] = {}
    opened: dict[str, float] = {}
    again: dict[str, float] = {}
    stateful = "view_tab" in at.session_state  # since issue 34: only the open tab is drawn
    for key in views:
        if stateful:
            # Open the view as a click on its tab does (a rerun drawing that view only), timed apart.
            t = time.perf_counter()
            at.session_state["view_tab"] = VIEW_OF[key]
            at.run()
            opened[key] = time.perf_counter() - t
        try:
            button = at.button(key=key)
        except KeyError:
            continue  # a view this tree does not have (the baseline has no Frontier / Monitor / Fleet)
        pressed.clear()
        shown.clear()
        t = time.perf_counter()
        button.click().run()
        first[key] = time.perf_counter() - t
        if "now" in shown:
            shown_s[key] = shown["now"] - t
        assert not at.exception, at.exception
        # The same question again (same inputs): what a cache saves.
        t = time.perf_counter()
        at.button(key=key).click().run()
        again[key] = time.perf_counter() - t
        assert not at.exception, at.exception
    if stateful:
        at.session_state["view_tab"] = "Estimate"  # the edits from the first view, as the baseline's
        at.run()
    times = []
    for i in range(edits):
        t = time.perf_counter()
        at.number_input(key="up_mbps").set_value(100.0 + 10.0 * (i + 1)).run()
        times.append(time.perf_counter() - t)
        assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    import dispersal

    return {
        "package": str(Path(dispersal.__file__).parent),
        "cold_s": cold,
        "cold_first_number_s": first_metric[0] - t0 if first_metric else None,
        "first_answer_s": first,
        "first_shown_s": shown_s,
        "open_view_s": opened,
        "again_s": again,
        "edit_s": times,
        "median_edit_s": statistics.median(times),
        "max_edit_s": max(times),
        "edits": edits,
        "mode": mode,
        "target": target,
    }


def _run_child(src: Path, edits: int, views: str, mode: str, target: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, __file__, "--child", str(src), "--edits", str(edits), "--views", views]
    cmd += ["--mode", mode, "--target", target]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"benchmark child failed for {src}:\n{r.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def _export(commit: str, dest: Path) -> Path:
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "src"], capture_output=True, check=True
    ).stdout
    tar_path = dest / "src.tar"
    tar_path.write_bytes(data)
    with tarfile.open(tar_path) as tf:
        tf.extractall(dest, filter="data")
    return dest / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=5, help="input changes timed (default 5)")
    ap.add_argument(
        "--views",
        default="plan_go,cmp_go,cm_go,unc_go,fr_go,mon_go,fleet_go",
        help="buttons pressed (and each timed: the view's first answer) before the edits",
    )
    ap.add_argument("--baseline", default=None, help="also time the app at this git commit")
    ap.add_argument(
        "--mode",
        default="paper",
        choices=("paper", "default"),
        help="the app's mode (default paper, the figures of docs/app.md's earlier runs; the app opens in default)",
    )
    ap.add_argument(
        "--target", default="1e24", help="the Planner's target, FLOP (default 1e24; the app's is 1e25)"
    )
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.edits < 1:
        ap.error("--edits must be >= 1")
    views = tuple(v for v in a.views.split(",") if v)
    if a.child:
        print(json.dumps(measure(Path(a.child), a.edits, views, a.mode, a.target)))
        return
    out: dict[str, Any] = {"this_tree": _run_child(ROOT / "src", a.edits, a.views, a.mode, a.target)}
    if a.baseline:
        with tempfile.TemporaryDirectory() as tmp:
            out["baseline"] = _run_child(_export(a.baseline, Path(tmp)), a.edits, a.views, a.mode, a.target)
            out["baseline_commit"] = a.baseline
        base, now = out["baseline"], out["this_tree"]
        out["ratio_median_edit"] = float(base["median_edit_s"]) / float(now["median_edit_s"])
    if a.json:
        print(json.dumps(out, indent=2))
        return
    for name in ("this_tree", "baseline"):
        if name in out:
            r = out[name]
            print(
                f"{name:10s} cold {r['cold_s']:.2f} s, edit median {r['median_edit_s']:.3f} s, "
                f"max {r['max_edit_s']:.3f} s over {r['edits']} edits"
            )
    if "ratio_median_edit" in out:
        print(f"baseline / this tree (median edit): {out['ratio_median_edit']:.2f}x")
    if "baseline" in out:
        for key, what in (
            ("cold_s", "cold start, whole first run"),
            ("cold_first_number_s", "cold start to first number"),
        ):
            b, n = out["baseline"][key], out["this_tree"][key]
            print(f"{what}: baseline {b:.2f} s, this tree {n:.2f} s, ratio {b / n:.2f}x")
    for what in ("first_shown_s", "first_answer_s", "again_s"):
        now = out["this_tree"].get(what, {})
        base = out.get("baseline", {}).get(what, {})
        for key, sec in now.items():
            old = base.get(key)
            ratio = f", baseline {old:.2f} s, ratio {old / sec:.2f}x" if old else " (new view)"
            opened = out["this_tree"]["open_view_s"].get(key)
            tab = f" (+ {opened:.2f} s to open its tab)" if what == "first_answer_s" and opened else ""
            print(f"{what[:-2].replace('_', ' '):12s} {key:9s} {sec:7.2f} s{tab}{ratio}")


if __name__ == "__main__":
    main()
