"""`dispersal calibrate --analyse-only --json`: one JSON object on stdout, the tables on stderr."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dispersal.cli import app


def _synthetic_module() -> object:
    path = Path(__file__).resolve().parents[1] / "calibration" / "test_calibration.py"
    spec = importlib.util.spec_from_file_location("_calibration_tests", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_calibrate_json_is_one_object(tmp_path: Path) -> None:
    recs = _synthetic_module()._synthetic(  # type: ignore[attr-defined]
        {"tiny": 0.1, "tiny-w128": 0.08}, {"tiny": 0.05, "tiny-w128": 0.03}, {"int8": 0.99, "topk": 0.95}
    )
    out = tmp_path / "run"
    out.mkdir()
    rng = np.random.default_rng(0)
    with open(out / "results.jsonl", "w") as fh:
        for i, r in enumerate(recs):
            vl = list(np.asarray(r["val_losses"]) + rng.normal(0, 1e-3, 4))
            fh.write(
                json.dumps(
                    {
                        **r,
                        "key": f"k{i}",
                        "val_losses": vl,
                        "val_loss": float(np.mean(vl)),
                        "wall_s": 1.0,
                        "tier": 0,
                        "tokens": 1,
                    }
                )
                + "\n"
            )
    res = CliRunner().invoke(
        app, ["calibrate", "--analyse-only", "--out", str(out), "--bootstrap", "5", "--json"]
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["calibration"] == str(out / "calibration.toml") and d["written"] == [d["calibration"]]
    assert d["points"] == len(recs) and d["sizes"] == ["tiny", "tiny-w128"]
