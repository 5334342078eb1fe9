"""The analyst's nine questions of docs/app.md, asked of the real app in headless Debian Chromium: for
each, the clicks, the seconds from the first click to the answer on the page, the app server's CPU
seconds over the same span, and the answer's first line (what docs/app.md quotes).

The app is served on 127.0.0.1 (a free port) with `dispersal.cli.serve.streamlit_command`, as
`dispersal app` does; Chromium is /usr/bin/chromium (or DISPERSAL_CHROMIUM) with the browser tests'
flags, never a downloaded browser. Every question opens a fresh page of the default scenario (the
paper's threat model, default mode, 1e25 FLOP, treaty) unless it says otherwise, so no answer is read
from another question's cache; within a question, the steps follow docs/app.md.

    python benchmarks/bench_questions.py                 # all nine, a table
    python benchmarks/bench_questions.py --only 6,7 --json

Seconds depend on the machine's load: the server's CPU seconds are the steadier figure. Needs the
`app` extra (streamlit, playwright) and Debian chromium.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("DISPERSAL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
WAIT_MS = 600_000  # one answer, bounded
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One question's measurement."""

    number: int
    question: str
    clicks: int
    seconds: float
    server_cpu_s: float
    answer: str


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


@contextlib.contextmanager
def _server() -> Iterator[tuple[str, int]]:
    """The app on 127.0.0.1 at a free port: (base URL, server pid); stopped on exit."""
    from dispersal.cli.serve import stop, streamlit_command

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    cmd = streamlit_command("127.0.0.1", port)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # 60 s, bounded
            if proc.poll() is not None:
                raise SystemExit(f"streamlit exited with {proc.returncode}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r,
            ):
                if r.read().strip() == b"ok":
                    break
            time.sleep(0.1)
        else:
            raise SystemExit("streamlit not ready after 60 s")
        yield base, proc.pid
    finally:
        stop(proc)


class _Asker:
    """Clicks in one page, counting them; `answer` waits for a text and returns its first line."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.clicks = 0

    def idle(self) -> None:
        self.page.wait_for_timeout(200)
        self.page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=WAIT_MS)

    def tab(self, name: str) -> None:
        self.clicks += 1
        self.page.get_by_role("tab", name=name).click()
        self.page.get_by_role("tab", name=name, selected=True).wait_for(timeout=WAIT_MS)
        self.page.locator("[role=tabpanel]:visible").get_by_text("Scenario: ").first.wait_for(timeout=WAIT_MS)
        self.idle()

    def press(self, name: str) -> None:
        self.clicks += 1
        self.page.get_by_role("button", name=name).first.click()

    def answer(self, text: str | re.Pattern[str]) -> str:
        loc = self.page.get_by_text(text).first
        loc.wait_for(timeout=WAIT_MS)
        self.idle()
        return str(loc.inner_text()).strip().splitlines()[0]


def _q1(a: _Asker) -> str:
    a.tab("Uncertainty")
    a.press("Run the Monte Carlo")
    a.answer("feasible draws")
    a.tab("Planner")
    a.press("Find the cheapest plan")
    a.answer(re.compile(r"^(Cheapest:|No plan reaches the target)"))
    return _card(a)


def _q2(a: _Asker) -> str:
    a.tab("Planner")
    a.press("Find the cheapest plan")
    a.answer(re.compile(r"^(Cheapest:|No plan reaches the target)"))
    a.press("Draw the comparison charts")
    # The chart on screen grows point by point; the answer is whole when the axis choice appears.
    a.answer("Chart cost against")
    return str(a.page.locator("svg[aria-label*='this scenario']").first.get_attribute("aria-label"))


def _q3(a: _Asker) -> str:
    a.tab("Planner")
    a.press("Find the cheapest plan")
    a.answer(re.compile(r"^(Cheapest:|No plan reaches the target)"))
    a.press("Use this plan as the scenario")
    a.idle()
    a.tab("Resilience")
    table = a.page.get_by_test_id("stTable").filter(has_text="time to own target").first
    table.wait_for(timeout=WAIT_MS)
    return _rows(table, 8)


def _q4(a: _Asker) -> str:
    a.tab("Countermeasures")
    a.press("Evaluate countermeasures")
    a.answer(re.compile(r"levers and bundles block the run"))
    return _table_with(a, "P(detect)", 4, columns=8)


def _q5(a: _Asker) -> str:
    a.tab("Planner")
    a.press("Find the cheapest plan")
    a.answer(re.compile(r"^(Cheapest:|No plan reaches the target)"))
    return _card(a)


def _card(a: _Asker) -> str:
    """The answer card's lines before its "Cite this" line, joined."""
    card = a.page.get_by_test_id("stMarkdownContainer").filter(has_text="Cite this:").first
    lines = [ln.strip() for ln in str(card.inner_text()).splitlines() if ln.strip()]
    return " / ".join(ln for ln in lines if not ln.startswith("Cite this"))[:600]


def _q6(a: _Asker) -> str:
    a.tab("Frontier")
    a.press("Compute the frontier")
    a.answer("Where it stops, per target and premium")
    return _table_with(a, "least bandwidth", 4, columns=10)


def _q7(a: _Asker) -> str:
    a.tab("Monitor")
    a.press("Compare one building with N sites")
    a.answer("P(detect) aggregate, independent")
    return _table_with(a, "P(detect) aggregate", 12)


def _q8(a: _Asker) -> str:
    a.tab("Fleet")
    a.press("Find the best use of this fleet")
    a.answer("Best per algorithm")
    return _table_with(a, "algorithm", 3)


def _q9(a: _Asker) -> str:
    a.clicks += 1
    a.page.get_by_text("Mixed sites ([[site]])").first.click()
    a.clicks += 1
    a.page.locator("input[type=file]").first.set_input_files(str(mixed_sites_file()))
    panel = a.page.locator("[role=tabpanel]:visible").first
    panel.get_by_test_id("stTable").filter(has_text="share of the work").filter(
        has_text="asia"
    ).first.wait_for(timeout=WAIT_MS)
    a.idle()
    pacing = panel.get_by_text("The sync is paced by").first.inner_text()
    days = a.page.get_by_test_id("stMetric").first.inner_text().replace("\n", " ")
    return f"{days}; {pacing}; " + _table_with(a, "share of the work", 4)


def mixed_sites_file() -> Path:
    """docs/app.md's mixed fleet as a scenario file: the `intellect1_schedule` preset with europe at 4
    nodes and asia at 2 nodes of a100_80gb (the edits the docs make in the sites table), written once
    under the system's temporary folder and checked by loading it."""
    from importlib import resources

    from dispersal.model.inputs.presets import load_scenario

    text = (
        resources.files("dispersal.data").joinpath("scenarios", "intellect1_schedule.toml").read_text("utf-8")
    )
    blocks = text.split("\n[[")
    for i, blk in enumerate(blocks):
        if blk.startswith("site]]") and 'name = "europe"' in blk:
            blocks[i] = blk.replace("nodes = 0", "nodes = 4", 1)
        if blk.startswith("site]]") and 'name = "asia"' in blk:
            blocks[i] = blk.replace("nodes = 0", 'nodes = 2\nhardware = "a100_80gb"', 1)
    path = Path(tempfile.gettempdir()) / "dispersal_bench_mixed_sites.toml"
    path.write_text("\n[[".join(blocks))
    sites = {s.name: s for s in load_scenario(str(path)).sites or ()}
    if (sites["europe"].nodes, sites["asia"].nodes, sites["asia"].hardware) != (4, 2, "a100_80gb"):
        raise SystemExit(f"the mixed-sites file did not come out as intended: {path}")
    return path


def _rows(table: Any, limit: int, columns: int = 12) -> str:
    """The first `limit` rows of an HTML table (header included) and their first `columns` cells,
    cells joined by ", ", rows by "; "."""
    out = []
    for row in table.locator("tr").all()[:limit]:
        cells = [str(c).strip() for c in row.locator("th, td").all_inner_texts()]
        out.append(", ".join([c for c in cells if c][:columns]))
    return "; ".join(out)


def _table_with(a: _Asker, needle: str, limit: int, columns: int = 12) -> str:
    """`_rows` of the open panel's first table that holds `needle`."""
    panel = a.page.locator("[role=tabpanel]:visible").first
    table = panel.get_by_test_id("stTable").filter(has_text=needle).first
    table.wait_for(timeout=WAIT_MS)
    return _rows(table, limit, columns)


#: (question, UI values the page opens with beyond the defaults, the steps after it is open).
QUESTIONS: dict[int, tuple[str, dict[str, Any], Callable[[_Asker], str]]] = {
    1: ("What does 1e25 FLOP cost below the threshold, and how sure is that?", {}, _q1),
    2: ("How far and how slow before the premium passes 2x?", {}, _q2),
    3: ("A site lost for a week?", {"res_down_for_days": 7.0}, _q3),
    4: ("The strongest countermeasure?", {}, _q4),
    5: ("A memory threshold?", {"plan_regime": "treaty_hbm"}, _q5),
    6: ("Where does it stop?", {}, _q6),
    7: ("What does a monitor see?", {}, _q7),
    8: ("What does my fleet best train?", {}, _q8),
    9: ("A mixed fleet of three sites (a scenario file uploaded)", {}, _q9),
}


def ask(browser: Any, base: str, pid: int, number: int) -> Answer:
    """Open a fresh page with question `number`'s values, then time its steps (module docstring)."""
    from dispersal.app import logic

    question, extra, steps = QUESTIONS[number]
    preset = extra.get("preset")
    ui = logic.default_ui(preset) if preset else logic.default_ui()
    ui.update({k: v for k, v in extra.items() if k != "preset"})
    query = urlencode(logic.query_from_ui(ui))
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        asker = _Asker(page)
        cpu0, t0 = _cpu_s(pid), time.perf_counter()
        # Opening the link counts as the first click; question 9's answer is the opened preset itself.
        asker.clicks = 1
        page.goto(f"{base}/?{query}", wait_until="domcontentloaded")
        page.get_by_test_id("stMetric").first.wait_for(timeout=WAIT_MS)
        asker.idle()
        text = steps(asker)
        return Answer(
            number=number,
            question=question,
            clicks=asker.clicks,
            seconds=round(time.perf_counter() - t0, 2),
            server_cpu_s=round(_cpu_s(pid) - cpu0, 2),
            answer=text,
        )
    finally:
        ctx.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated question numbers (default: all nine)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    try:
        wanted = [int(x) for x in args.only.split(",") if x.strip()] or sorted(QUESTIONS)
    except ValueError:
        print(f"error: --only must be numbers 1-9 separated by commas, got {args.only!r}", file=sys.stderr)
        return 2
    if bad := [n for n in wanted if n not in QUESTIONS]:
        print(f"error: --only: no question {bad[0]} (allowed 1-9)", file=sys.stderr)
        return 2
    if not CHROMIUM.is_file():
        print(f"error: needs Chromium at {CHROMIUM}: apt-get install -y chromium", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    out: list[Answer] = []
    with _server() as (base, pid), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            for n in wanted:
                out.append(ask(browser, base, pid, n))
                if not args.json:
                    a = out[-1]
                    print(
                        f"{a.number}. {a.question}\n   {a.clicks} clicks, {a.seconds:.1f} s "
                        f"(server CPU {a.server_cpu_s:.1f} s): {a.answer}",
                        flush=True,
                    )
        finally:
            browser.close()
    if args.json:
        print(json.dumps([a.__dict__ for a in out], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
