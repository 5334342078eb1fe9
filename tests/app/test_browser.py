"""The real app in a real browser: Streamlit served on 127.0.0.1, driven by headless Debian Chromium.

Skips (with the reason) when Playwright's Python package or /usr/bin/chromium is missing; installs
nothing. CI installs Chromium with ``apt-get install -y chromium chromium-driver`` (no
``playwright install``, no browser download). Screenshots go to tests/app/artifacts/ (git-ignored) and
the main views are copied to docs/screenshots/ for the README when DISPERSAL_WRITE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = Path(os.environ.get("DISPERSAL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
DOCS_SHOTS = ROOT / "docs" / "screenshots"
STARTUP_S = 60
STEP_MS = 30_000

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="needs Playwright for Python: pip install 'dispersal[app]'"
)
pytest.importorskip("streamlit", reason="the web app needs streamlit: pip install 'dispersal[app]'")
if not CHROMIUM.is_file():
    pytest.skip(
        f"needs Chromium at {CHROMIUM}: apt-get install -y chromium chromium-driver", allow_module_level=True
    )

from dispersal.app import logic  # noqa: E402
from dispersal.cli.serve import streamlit_command  # noqa: E402
from dispersal.model import Estimate, estimate  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = (ARTIFACTS / "streamlit.log").open("w")
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc = subprocess.Popen(
        streamlit_command("127.0.0.1", port), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}; see {ARTIFACTS / 'streamlit.log'}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit not ready after {STARTUP_S} s")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, timeout=STEP_MS
        )
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000}, accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(STEP_MS)
    try:
        yield pg
    finally:
        ctx.close()


def _open(page: object, base: str, ui: dict | None = None) -> None:
    query = "?" + urlencode(logic.query_from_ui(ui)) if ui else ""
    page.goto(base + "/" + query, wait_until="domcontentloaded")
    _wait_idle(page)
    page.get_by_test_id("stMetric").first.wait_for()


def _wait_idle(page: object) -> None:
    """Wait until Streamlit has finished running the script (bounded)."""
    page.wait_for_timeout(300)
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=STEP_MS)


def _metric(page: object, label: str) -> str:
    m = page.get_by_test_id("stMetric").filter(has_text=label).first
    return m.get_by_test_id("stMetricValue").inner_text().strip()


def _shot(page: object, name: str, docs: bool = False) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    # The README's screenshots are regenerated only on request, so a test run never edits tracked files.
    if docs and os.environ.get("DISPERSAL_WRITE_SCREENSHOTS") == "1":
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_SHOTS / f"{name}.png")


def _set_number(page: object, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    _wait_idle(page)


def test_changing_bandwidth_changes_training_time(page: object, server: str) -> None:
    _open(page, server, logic.default_ui("intellect1"))
    before = _metric(page, "Training time")
    _set_number(page, "WAN upload (Mbps)", "2000")
    _set_number(page, "WAN download (Mbps)", "2000")
    page.wait_for_function(
        "(b) => [...document.querySelectorAll('[data-testid=stMetricValue]')].some(e => e.innerText.trim() !== b)",
        arg=before,
        timeout=STEP_MS,
    )
    after = _metric(page, "Training time")
    assert after != before
    ui = logic.default_ui("intellect1")
    ui["up_mbps"] = ui["down_mbps"] = 2000.0
    expected = estimate(logic.build(ui).scenario, mode="default")
    assert after == f"{expected.days:.4g} d"
    assert "up_mbps=2000" in page.url
    _shot(page, "estimate", docs=True)


def test_shared_link_restores_the_inputs(page: object, server: str) -> None:
    ui = logic.default_ui("gpt4_level_gh200")
    ui.update(up_mbps=250.0, latency_ms=40.0, num_nodes=64, mode="paper")
    _open(page, server, ui)
    assert page.get_by_label("WAN upload (Mbps)", exact=True).input_value() == "250"
    assert page.get_by_label("WAN one-way latency (ms)", exact=True).input_value() == "40"
    assert page.get_by_label("Nodes (sites)", exact=True).input_value() == "64"
    expected = estimate(logic.build(ui).scenario, mode="paper")
    assert _metric(page, "Training time") == f"{expected.days:.4g} d"
    assert _metric(page, "C_local") == f"{expected.c_local_flop:.3g} FLOP"


def test_downloaded_json_is_the_api_estimate(page: object, server: str, tmp_path: Path) -> None:
    ui = logic.default_ui("llama405b_level_a100")
    ui.update(num_nodes=300, mode="paper")
    _open(page, server, ui)
    with page.expect_download(timeout=STEP_MS) as info:
        page.get_by_role("button", name="Download JSON").click()
    path = tmp_path / "estimate.json"
    info.value.save_as(str(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    got = Estimate.from_dict(data)
    want = estimate(logic.build(ui).scenario, mode="paper")
    assert got == want


def test_error_and_other_views(page: object, server: str) -> None:
    _open(page, server)
    page.get_by_role("tab", name="Planner").click()
    page.get_by_role("button", name="Find the cheapest plan").click()
    page.get_by_text("Cheapest:").first.wait_for(timeout=60_000)
    _wait_idle(page)
    _shot(page, "planner", docs=True)
    page.get_by_role("tab", name="Resilience").click()
    page.get_by_text("goodput at").first.wait_for()
    _shot(page, "resilience", docs=True)
    from dispersal.app import views

    if views.optional_module("countermeasures") is not None:
        page.get_by_role("tab", name="Countermeasures").click()
        page.get_by_role("button", name="Evaluate countermeasures").click()
        page.get_by_text("expected detection day").first.wait_for(timeout=60_000)
        _wait_idle(page)
        _shot(page, "countermeasures", docs=True)
    if views.optional_module("uncertainty") is not None:
        page.get_by_role("tab", name="Uncertainty").click()
        page.get_by_role("button", name="Run the Monte Carlo").click()
        page.get_by_text("feasible draws").first.wait_for(timeout=60_000)
        _wait_idle(page)
        _shot(page, "uncertainty", docs=True)
    _set_number(page, "Nodes (sites)", "0")
    # Streamlit's markdown shows ">=" as "≥"
    page.get_by_text(re.compile(r"num_nodes: must be an integer (>=|≥) 1, got 0")).wait_for()
    assert page.get_by_text("Traceback").count() == 0
    _shot(page, "input_error")
