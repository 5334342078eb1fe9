"""The quality fit's uncertainty as data and draws (issues 12, 21, 31, 32): the fitted covariances of
`quality_fit.toml`, the sourced ranges of the tail's exponents (`quality_tail.toml`, widened by the
testbed's measured interval in `testbed_tail_fit.toml`) and the Monte Carlo draws of `QualityParams`
built from them. The model's formulas are in `dispersal.model.kernel.quality`."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from dispersal.model.inputs.errors import InputError
from dispersal.model.kernel.quality import (
    RANGE_FIELDS,
    SAMPLED_FIELDS,
    TAIL_EXPONENT_FLOOR,
    Arr,
    QualityParams,
    QualitySamples,
    _arr,
)

FIT_FILE = "quality_fit.toml"
TAIL_FILE = "quality_tail.toml"
TESTBED_TAIL_FILE = "testbed_tail_fit.toml"
#: The testbed's measured tails (issue 32), one file per preset: tiny, then small.
TESTBED_TAIL_FILES = (TESTBED_TAIL_FILE, "testbed_tail_fit_small.toml")


@cache
def load_fit() -> dict[str, Any]:
    """The fit's data file (`dispersal/data/quality_fit.toml`): values, covariance, residuals."""
    text = resources.files("dispersal.data").joinpath(FIT_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)


def fitted_covariance() -> tuple[tuple[str, ...], Arr, Arr]:
    """(names, mean, covariance) of the stage-1 fitted fields from `quality_fit.toml`."""
    fit = load_fit()
    names = tuple(str(n) for n in fit["names"])
    mean = _arr(fit["values"])
    cov = _arr(fit["covariance"])
    return names, mean, cov


def tail_covariance() -> tuple[tuple[str, ...], Arr, Arr]:
    """(names, mean, covariance) of the stage-2 fields (`TAIL_FIELDS`) from `quality_fit.toml`:
    conditional on the stage-1 values; s^2 (J^T W J)^-1 with the reduced chi-square of stage 2. The
    first name is ln_tail_scale (the fit's variable for tail_scale)."""
    fit = load_fit()["tail"]
    return tuple(str(n) for n in fit["names"]), _arr(fit["values"]), _arr(fit["covariance"])


@cache
def tail_exponent_ranges() -> dict[str, tuple[float, float, str]]:
    """{field: (low, high, label)} the Monte Carlo draws each `RANGE_FIELDS` exponent from: the
    literature range of `quality_tail.toml`, widened to the envelope with each testbed preset's
    measured interval [ci_low, ci_high] (`TESTBED_TAIL_FILES`, issue 32) where that file exists."""
    data = resources.files("dispersal.data")
    lit = tomllib.loads(data.joinpath(TAIL_FILE).read_text(encoding="utf-8"))
    tbs = [
        tomllib.loads(data.joinpath(f).read_text(encoding="utf-8"))
        for f in TESTBED_TAIL_FILES
        if data.joinpath(f).is_file()
    ]
    out: dict[str, tuple[float, float, str]] = {}
    for name in RANGE_FIELDS:
        lo, hi = (float(v) for v in lit[name]["range"])
        presets: list[str] = []
        for tb in tbs:
            if name not in tb:
                continue
            m = tb[name]
            # An interval end that sits at the fit's own bound (`ci_at_fit_bound`) says the data did not
            # bound that side: the envelope then takes the measured value there, not the bound.
            at_lo, at_hi = (bool(b) for b in m.get("ci_at_fit_bound", (False, False)))
            lo = min(lo, float(m["value"]) if at_lo else float(m["ci_low"]))
            hi = max(hi, float(m["value"]) if at_hi else float(m["ci_high"]))
            presets.append(str(tb.get("fit", {}).get("preset", "?")))
        label = (
            f"literature + testbed {' and '.join(presets)} (measured at small scale)"
            if presets
            else "literature"
        )
        # No source reports a critical batch that shrinks as training goes on (Merrill et al. 2025: it
        # plateaus), so a measured interval reaching below 0 is clipped at `TAIL_EXPONENT_FLOOR`.
        out[name] = (max(lo, TAIL_EXPONENT_FLOOR), hi, label)
    return out


def sample_quality_params(
    rng: np.random.Generator,
    n: int,
    base: QualityParams | None = None,
) -> QualitySamples:
    """n draws of the fitted fields from the fit's Gaussian approximations: stage 1 N(theta_1, Sigma_1)
    and, independently, stage 2 N(theta_2, Sigma_2) (`quality_fit.toml`; Sigma = s^2 (J^T W J)^-1, s^2
    the reduced chi-square). Draws are truncated to the model's valid region (b0 > 0, p >= 0.05,
    q >= 0, muon_penalty_ratio > 0; tail_scale is drawn as ln(tail_scale)) so g stays monotone in M
    and H. The tail's exponents (`RANGE_FIELDS`) are drawn uniformly on `tail_exponent_ranges`."""
    if n < 1:
        raise InputError("samples", f"must be >= 1, got {n}")
    cols: dict[str, Arr] = {}
    for names, mean, cov in (fitted_covariance(), tail_covariance()):
        draws = rng.multivariate_normal(mean, cov, size=n, method="cholesky")
        cols.update({name: draws[:, i] for i, name in enumerate(names)})
    cols["b0"] = np.maximum(cols["b0"], 1e-6)
    cols["p"] = np.maximum(cols["p"], 0.05)
    cols["q"] = np.maximum(cols["q"], 0.0)
    cols["tail_scale"] = np.exp(cols.pop("ln_tail_scale"))  # stage 2 is fitted in ln(tail_scale)
    cols["muon_penalty_ratio"] = np.maximum(cols["muon_penalty_ratio"], 1e-3)
    for name, (lo, hi, _) in tail_exponent_ranges().items():  # sourced ranges, drawn uniformly
        cols[name] = rng.uniform(lo, hi, size=n)
    return QualitySamples(
        base=base or QualityParams(),
        **{f: np.asarray(cols[f], dtype=np.float64) for f in SAMPLED_FIELDS},
    )
