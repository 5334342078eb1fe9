"""CPU time of the slow search commands, this working tree against a baseline commit, in one run.

Run: ``python benchmarks/bench_reproduce.py [--baseline 0c6818f] [--repeats 3] [--only reproduce]``.

Issue 20's targets (CPU = user + sys of the process, on a quiet machine): ``dispersal reproduce``
<= 4.6 s, ``dispersal counter --mode default`` < 20 s, ``dispersal plan --samples 1000`` < 8 s.
The baseline's ``src`` is extracted with ``git archive`` into a temporary folder; each command runs
in its own process for the old and the new tree in turn (interleaved, best of `--repeats`), so
both see the same machine load; on a shared machine read the ratio, not the seconds. The JSON
outputs are compared (reproduce: its rows and headlines, without its own timing; every command:
without the count of configurations evaluated; keys the baseline did not print, such as scenario
fields added since, are listed rather than compared), so a speed-up that changed an answer shows as
"identical: False". No assertions (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from _baseline import ROOT, extract, run_child, same_answer

DEFAULT_BASELINE = "0c6818f"

#: name -> (argv after `python -m dispersal`, how to reduce the JSON output to what must agree).
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "reproduce": (("reproduce", "--json", "--no-files"), "rows"),
    "counter --mode default": (("counter", "--mode", "default", "--json"), "all"),
    "plan --samples 1000": (("plan", "--samples", "1000", "--json"), "all"),
}


#: Keys whose values may differ between trees: how many configurations a search evaluated (a
#: faster search evaluates fewer), not an answer.
WORK_KEYS = frozenset({"evaluations"})


def _without_work(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _without_work(v) for k, v in d.items() if k not in WORK_KEYS}
    if isinstance(d, list):
        return [_without_work(v) for v in d]
    return d


def answer(stdout: str, how: str) -> Any:
    """The part of a command's JSON that must not change (WORK_KEYS dropped)."""
    d: Any = json.loads(stdout)
    if how == "rows":
        d = {"rows": d["rows"], "headlines": d["headlines"]}
    return _without_work(d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref of the old tree")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--only", action="append", choices=sorted(COMMANDS), help="commands to time (default all)"
    )
    a = ap.parse_args()
    names = a.only or list(COMMANDS)
    best: dict[tuple[str, str], tuple[float, float]] = {}
    same: dict[str, bool] = {}
    added: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": extract(a.baseline, Path(tmp)), "new": ROOT / "src"}
        for _ in range(a.repeats):
            for name in names:
                argv, how = COMMANDS[name]
                outs = {}
                for tree, src in trees.items():
                    out, cpu, wall = run_child(src, ["-m", "dispersal", *argv])
                    outs[tree] = answer(out, how)
                    if (tree, name) not in best or cpu < best[tree, name][0]:
                        best[tree, name] = (cpu, wall)
                new_keys = added.setdefault(name, set())
                same[name] = same.get(name, True) and same_answer(outs["old"], outs["new"], new_keys)
    print(f"baseline {a.baseline} vs working tree; best of {a.repeats}; CPU = user + sys of the process")
    print("| command | old CPU s | new CPU s | old / new | new CPU / wall | output identical |")
    print("|---|---|---|---|---|---|")
    for name in names:
        (oc, _), (nc, nw) = best["old", name], best["new", name]
        print(f"| {name} | {oc:.3g} | {nc:.3g} | {oc / nc:.2f}x | {nc / nw:.2f} | {same[name]} |")
    for name in names:
        if added[name]:
            print(f"{name}: keys only the new tree prints (not compared): {', '.join(sorted(added[name]))}")


if __name__ == "__main__":
    main()
