"""`dispersal frontier --year` and `--compare` (cli/frontier_time.py) end to end, on small targets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dispersal.cli import app


def _json(argv: list[str]) -> dict:  # type: ignore[type-arg]
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 0, r.output
    out: dict = json.loads(r.stdout)  # type: ignore[type-arg]
    return out


@pytest.mark.slow
def test_year_json() -> None:
    d = _json(["frontier", "--year", "--target", "1e23", "--premium", "5", "--until", "2027", "--json"])
    assert d["target_flop"] == 1e23 and d["premiums"] == [5.0]
    assert [g["year"] for g in d["generations"]] == sorted(g["year"] for g in d["generations"])
    assert [p["year"] for p in d["projections"]] == [2027] and d["projections"][0]["projection"] is True
    assert {t["status"] for t in d["trends"]} <= {"sourced", "assumption"}
    assert d["envelope"] and all(e["year"] <= 2026 for e in d["envelope"])


@pytest.mark.slow
def test_year_plot(tmp_path: Path) -> None:
    png = tmp_path / "year.png"
    r = CliRunner().invoke(
        app, ["frontier", "--year", "--target", "1e23", "--until", "2027", "--plot", str(png)]
    )
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "projection" in r.stdout


def test_compare_json() -> None:
    d = _json(["frontier", "--compare", "--target", "1e22", "--wan", "1Gbps", "--json"])
    (c,) = d["comparisons"]
    b, s = c["building"], c["sites"]
    assert b["delivery_sites"] == 1 and s["delivery_sites"] >= 1
    for lay in (b, s):
        for k in ("p_site", "p_independent", "p_correlated", "p_building_finder"):
            assert 0.0 <= lay[k] <= 1.0
        assert lay["p_independent"] >= max(lay["p_site"], lay["p_central"]) - 1e-12
    (bs,) = b["survival"]
    assert bs["delay_days"] is None and bs["finishes_within_budget"] is False
    assert {r["status"] for r in d["rates"]} <= {"sourced", "assumed", "baseline"}
    assert set(d["formulas"]) == {"independent", "correlated", "building_finder"}


def test_compare_table_states_days_and_spend_against_one_building() -> None:
    """The monitor table says how long each layout trains and what the N-site layout's hardware costs
    against one building's (the premium the layout was chosen under)."""
    from dispersal.present.monitor import compare_rows

    d = _json(["frontier", "--compare", "--target", "1e22", "--wan", "1Gbps", "--json"])
    rows = dict(compare_rows(d))
    (c,) = d["comparisons"]
    ratio = c["sites"]["hardware_usd"] / c["building"]["hardware_usd"]
    assert rows["hardware spend vs one building"] == ["1.00x", f"{ratio:.2f}x"]
    assert rows["days"] == [f"{c['building']['days']:,.0f}", f"{c['sites']['days']:,.0f}"]


@pytest.mark.slow
def test_year_plot_axis_reads_as_rates_and_names_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The --year chart's y axis read "10^3" / "10^4" (Mbps); it reads "1 Gbps", and the title names
    the mode and regime."""
    from dispersal.cli import frontier_time as ftc
    from dispersal.model.analyses.frontier.over_time import frontier_over_time

    got: dict[str, object] = {}
    monkeypatch.setattr(ftc, "save_figure", lambda fig, path: got.update(fig=fig))
    ftc._plot(frontier_over_time(target_flop=1e23, until_year=2027), tmp_path / "y.png")
    ax = got["fig"].axes[0]  # type: ignore[attr-defined]
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all(x.endswith("bps") for x in labels), labels
    assert "(default mode, regime treaty)" in ax.get_title()
