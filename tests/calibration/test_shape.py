"""Testbed calibration as sign / shape checks of the published quality model (issue 12)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from dispersal.calibration import shape
from dispersal.calibration.shape import MeasuredPoint
from dispersal.model.inputs.errors import InputError
from dispersal.model.kernel import quality
from dispersal.model.kernel.quality import QualityParams

SHIPPED = Path(__file__).resolve().parents[2] / "src/dispersal/data/calibration/cpu-small.toml"


def _from_form(a: float, c_small: float, sizes: dict[str, float], q: QualityParams) -> list[MeasuredPoint]:
    """Points that follow ln eta = a + c(P) S(M) h(H) exactly, c(P) = c_small (P / P_small)^-kb."""
    p_small = min(sizes.values())
    out = []
    for size, p in sizes.items():
        c = c_small * (p / p_small) ** -q.kb
        for m, h in [(1, 50), (2, 50), (4, 50), (8, 50), (4, 100), (4, 500)]:
            s_m = float(quality.replica_term(m, q.p, q.fit_replicas_max, q.p))
            eta = math.exp(a + c * s_m * (1 + q.q * math.log(h / 30)))
            out.append(MeasuredPoint(size, p, float(h), float(m), "none", eta))
    return out


def test_hold_back_recovers_a_form_that_follows_the_published_law() -> None:
    q = QualityParams()
    pts = _from_form(0.05, -0.2, {"small": 1e5, "large": 4e5}, q)
    hb = shape.hold_back(pts, q)
    assert hb is not None and hb.fit_sizes == ("small",) and hb.held_size == "large"
    assert hb.max_abs_log_error < 1e-9
    assert hb.a == pytest.approx(0.05) and hb.c == pytest.approx(-0.2 * 4**-q.kb)
    # a size law the published one does not have shows up as a held-back error
    bad = [
        p
        if p.size == "small"
        else MeasuredPoint(p.size, p.params, p.inner_steps, p.replicas, p.codec, p.eta * 0.8)
        for p in pts
    ]
    hb2 = shape.hold_back(bad, q)
    assert hb2 is not None and hb2.max_abs_log_error == pytest.approx(-math.log(0.8), rel=1e-9)


def test_sign_checks_flag_disagreement() -> None:
    q = QualityParams()
    pts = _from_form(0.05, -0.2, {"small": 1e5}, q)
    checks = shape.sign_checks(pts, q)
    assert checks and all(c.agrees for c in checks)
    rising = [MeasuredPoint("s", 1e5, 50.0, float(m), "none", e) for m, e in [(1, 1.1), (2, 0.9), (4, 0.95)]]
    by_m = [c for c in shape.sign_checks(rising, q) if c.axis == "M"]
    assert len(by_m) == 1 and not by_m[0].agrees and by_m[0].measured == "non-monotone"
    assert "DISAGREES" in by_m[0].line()


def test_hold_back_needs_two_sizes() -> None:
    assert shape.hold_back(_from_form(0.0, -0.1, {"only": 1e5}, QualityParams())) is None
    assert "not available" in shape.report_md(_from_form(0.0, -0.1, {"only": 1e5}, QualityParams()))


def test_shipped_file_checks(capsys: pytest.CaptureFixture[str]) -> None:
    data = tomllib.loads(SHIPPED.read_text(encoding="utf-8"))
    pts = shape.points_from_toml(data)
    assert len(pts) == 28
    hb = shape.hold_back(pts)
    assert hb is not None and hb.held_size == "tiny-w128"
    # the published g evaluated at 1e5 parameters is far from the testbed: the file cannot calibrate it
    assert hb.published_max_abs_log_error > 1.0
    assert np.isfinite(hb.max_abs_error)
    assert shape.main([str(SHIPPED)]) == 0
    assert "Held-back error" in capsys.readouterr().out


def test_points_from_toml_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="measured_points"):
        shape.points_from_toml({})
    with pytest.raises(InputError, match="same length"):
        shape.points_from_toml(
            {
                "measured_points": {
                    "size": ["a"],
                    "params": [1.0, 2.0],
                    "inner_steps": [1.0],
                    "replicas": [1.0],
                    "codec": ["none"],
                    "eta": [1.0],
                }
            }
        )
    bad = tmp_path / "x.toml"
    bad.write_text("schema_version = 1\n")
    assert shape.main([str(bad)]) == 2
    assert shape.main([]) == 2
