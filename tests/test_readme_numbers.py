"""README's default-plan rows and the frontier's one-building costs are what the code prints now (a row
once kept H 45 after the planner's choice had moved: numbers in prose drift unless a test reads them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _usd(text: str) -> float:
    """README money ("$0.96M", "$102M") in dollars."""
    m = re.fullmatch(r"\$([\d.]+)([kMB])", text.strip())
    assert m, text
    return float(m[1]) * {"k": 1e3, "M": 1e6, "B": 1e9}[m[2]]


def _close(cost_usd: float, text: str) -> bool:
    """cost_usd rounds to README's figure (to the digits it prints)."""
    want = _usd(text)
    digits = len(text.strip().lstrip("$")[:-1].replace(".", "").lstrip("0"))
    return bool(abs(cost_usd - want) <= 0.5 * 10.0 ** (len(str(int(want))) - digits))


def _row(prefix: str) -> str:
    return next(line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith(prefix))


@pytest.mark.slow
@pytest.mark.parametrize("target", [1e24, 1e25])
def test_default_plan_rows_match_the_planner(target: float) -> None:
    from dispersal.model.search.planner import plan

    p = plan(target, regime_name="treaty", mode="default", baseline=True)
    b = p.best
    assert b is not None
    today = _row(f"| {target:.0e} | $".replace("+", "")).split("|")[3]
    m = re.match(r" (\$[\d.]+M) \((\d+) x (\d+)x ([A-Z0-9-]+), (\d+)B, (?:(\w+), )?H ([\d,]+)", today)
    assert m, today
    assert _close(b.cost_usd, m[1]), (b.cost_usd, m[1])
    assert (b.nodes, b.chips_per_node, b.params) == (int(m[2]), int(m[3]), float(m[5]) * 1e9)
    assert b.hardware.replace("_", "-").upper().startswith(m[4])
    assert b.inner_steps == int(m[7].replace(",", ""))
    if m[6]:
        assert b.algorithm == m[6]


@pytest.mark.slow
def test_frontier_table_one_building_costs_match_the_baseline() -> None:
    from dispersal.model.search.planner import Constraints, centralized_baseline

    for target in (1e24, 1e25, 1e26):
        cell = _row(f"| {target:.0e} FLOP".replace("+", "")).split("|")[2].strip()
        base = centralized_baseline(target, constraints=Constraints(), mode="default").best
        assert base is not None
        assert _close(base.cost_usd, cell), (target, base.cost_usd, cell)


@pytest.mark.slow
def test_where_it_stops_1e25_row_matches_the_frontiers_draws() -> None:
    """README's 1e25 row: P(reach) at 100 Mbps, P(reach within 1.5x / 2x / 5x) and the premium's
    P10 / P50 / P90 at 100 Mbps are what `dispersal frontier` (100 draws, seed 0) gives now."""
    from dispersal.model.analyses.frontier import frontier

    cells = [c.strip() for c in _row("| 1e25 FLOP").split("|")]
    f = frontier(targets_flop=(1e25,), samples=100, seed=0, sites=(), quality_lines=False)
    assert cells[3] == f"{f.p_reach[1e25]:.0%}"
    bands = [lim.band for lim in f.limits]
    assert all(b is not None for b in bands)
    assert cells[5] == " / ".join(f"{b.p_reach:.0%}" for b in bands if b is not None)
    q = bands[0].premium_at_reach_bandwidth_q if bands[0] is not None else ()
    assert cells[6] == " / ".join(f"{v:.2g}" for v in q)
