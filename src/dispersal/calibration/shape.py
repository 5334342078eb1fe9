"""Testbed calibration runs as sign and shape checks of the published quality model (issue 12).

Published tables are the default source of the penalty fits (`dispersal.model.kernel.quality`, fitted to
Charles et al. 2025 and Streaming DiLoCo at 35M-2.4B parameters). The testbed measures the same
quantity, eta = C_DDP(L) / C (DDP-equivalent compute over spent compute, `calibration.effective`),
at 1e5-1e6 parameters, two to three orders of magnitude below the published range, so it cannot
replace a published fit; it can check

* **signs**: does eta fall with M (fixed H) and with H (fixed M, H >= 30), as g does? Does DiLoCo
  with M = 1 beat DDP (eta > 1), as Charles et al. report at every size?
* **shape and extrapolation**: fit the published form, ln eta = a + c S(M) h(H) with the published
  S (exponent p) and h (slope q), to the *smaller* sizes only, carry it to the largest measured
  size with the published size law (c ~ P^-kb), and report the error on those held-back points;
  and report how far the published g itself (evaluated at these sizes: an extrapolation of the
  fit, flagged) is from the measurement.

Pure NumPy; `python -m dispersal.calibration.shape FILE.toml` prints the checks for a calibration
file's ``[measured_points]``.
"""

from __future__ import annotations

import itertools
import math
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dispersal.model.inputs.errors import InputError
from dispersal.model.kernel import quality
from dispersal.model.kernel.quality import QualityParams

MIN_H = 30.0
"""The published form holds H < 30 at H = 30 (no tabulated data below), so shape fits use H >= 30."""


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured configuration: eta = C_DDP(L) / C at (params, H, M, codec)."""

    size: str
    params: float
    inner_steps: float
    replicas: float
    codec: str
    eta: float
    eta_std: float = math.nan
    algorithm: str = "diloco"


@dataclass(frozen=True)
class SignCheck:
    """Measured direction of eta along one axis vs the published model's direction."""

    size: str
    axis: str
    fixed: str
    xs: tuple[float, ...]
    etas: tuple[float, ...]
    published: str
    measured: str
    agrees: bool

    def line(self) -> str:
        seq = ", ".join(f"{x:g}->{e:.3f}" for x, e in zip(self.xs, self.etas, strict=True))
        verdict = "agrees" if self.agrees else "DISAGREES"
        return f"{self.size}: eta vs {self.axis} ({self.fixed}): {seq}; measured {self.measured}, published {self.published}: {verdict}"


@dataclass(frozen=True)
class HoldBack:
    """Shape fit on the smaller sizes, prediction of the largest size's points."""

    fit_sizes: tuple[str, ...]
    held_size: str
    a: float
    c: float
    points: tuple[MeasuredPoint, ...]
    predicted: tuple[float, ...]
    published_g: tuple[float, ...]

    @property
    def max_abs_error(self) -> float:
        return max(abs(p - m.eta) for p, m in zip(self.predicted, self.points, strict=True))

    @property
    def max_abs_log_error(self) -> float:
        return max(abs(math.log(p / m.eta)) for p, m in zip(self.predicted, self.points, strict=True))

    @property
    def published_max_abs_log_error(self) -> float:
        return max(abs(math.log(g / m.eta)) for g, m in zip(self.published_g, self.points, strict=True))


def points_from_toml(data: dict[str, Any]) -> list[MeasuredPoint]:
    """``[measured_points]`` (parallel arrays) of a calibration file."""
    mp = data.get("measured_points")
    if not isinstance(mp, dict):
        raise InputError("measured_points", "missing: this calibration file has no per-point measurements")
    keys = ("size", "params", "inner_steps", "replicas", "codec", "eta")
    for k in keys:
        if not isinstance(mp.get(k), list):
            raise InputError(f"measured_points.{k}", "must be a list")
    n = len(mp["size"])
    if any(len(mp[k]) != n for k in keys):
        raise InputError("measured_points", "all columns must have the same length")
    std = mp.get("eta_std", [math.nan] * n)
    algo = mp.get("algorithm", ["diloco"] * n)
    return [
        MeasuredPoint(
            str(mp["size"][i]),
            float(mp["params"][i]),
            float(mp["inner_steps"][i]),
            float(mp["replicas"][i]),
            str(mp["codec"][i]),
            float(mp["eta"][i]),
            float(std[i]),
            str(algo[i]),
        )
        for i in range(n)
    ]


def points_from_summary(summary: dict[str, Any]) -> list[MeasuredPoint]:
    """The calibration report's summary points (`report.summarize`)."""
    return [
        MeasuredPoint(
            p["size"],
            float(summary["sizes"][p["size"]]["params"]),
            float(p["H"]),
            float(p["M"]),
            p["codec"],
            float(p["eta"]),
            float(p["eta_std"]),
            p["algorithm"],
        )
        for p in summary["points"]
        if p["size"] in summary["sizes"] and math.isfinite(p["eta"])
    ]


def _diloco(points: list[MeasuredPoint]) -> list[MeasuredPoint]:
    return [p for p in points if p.algorithm == "diloco" and p.codec == "none" and p.eta > 0]


def _direction(etas: list[float]) -> str:
    if all(b <= a + 1e-9 for a, b in itertools.pairwise(etas)):
        return "non-increasing"
    if all(b >= a - 1e-9 for a, b in itertools.pairwise(etas)):
        return "increasing"
    return "non-monotone"


def sign_checks(points: list[MeasuredPoint], q: QualityParams | None = None) -> list[SignCheck]:
    """Signs of eta along M (each H), along H >= 30 (each M), and M = 1 vs DDP, per size."""
    qp = q or QualityParams()
    pts = _diloco(points)
    out: list[SignCheck] = []
    for size in sorted({p.size for p in pts}, key=lambda s: min(p.params for p in pts if p.size == s)):
        sp = [p for p in pts if p.size == size]
        for h in sorted({p.inner_steps for p in sp}):
            seq = sorted((p.replicas, p.eta) for p in sp if p.inner_steps == h)
            if len(seq) >= 2:
                meas = _direction([e for _, e in seq])
                out.append(
                    SignCheck(
                        size,
                        "M",
                        f"H={h:g}",
                        tuple(x for x, _ in seq),
                        tuple(e for _, e in seq),
                        "non-increasing",
                        meas,
                        meas == "non-increasing",
                    )
                )
        for m in sorted({p.replicas for p in sp}):
            seq = sorted((p.inner_steps, p.eta) for p in sp if p.replicas == m and p.inner_steps >= MIN_H)
            if len(seq) >= 2:
                meas = _direction([e for _, e in seq])
                pub = "non-increasing" if m > 1 else "flat (no H term at M = 1)"
                ok = (
                    meas == "non-increasing"
                    if m > 1
                    else max(e for _, e in seq) / min(e for _, e in seq) < 1.1
                )
                out.append(
                    SignCheck(
                        size,
                        "H",
                        f"M={m:g}",
                        tuple(x for x, _ in seq),
                        tuple(e for _, e in seq),
                        pub,
                        meas,
                        ok,
                    )
                )
        one = sorted((p.inner_steps, p.eta) for p in sp if p.replicas == 1 and p.inner_steps >= MIN_H)
        if one:
            params = sp[0].params
            g1 = float(quality.compute_fraction(1, MIN_H, params, 1, qp))
            pub = "eta > 1 (DiLoCo M = 1 beats DP)" if g1 > 1 else "eta <= 1"
            meas = ", ".join(f"H={h:g}: {'>' if e > 1 else '<='} 1" for h, e in one)
            agrees = all((e > 1) == (g1 > 1) for _, e in one)
            out.append(
                SignCheck(
                    size,
                    "M = 1 vs DDP",
                    "H >= 30",
                    tuple(h for h, _ in one),
                    tuple(e for _, e in one),
                    pub,
                    meas,
                    agrees,
                )
            )
    return out


def hold_back(points: list[MeasuredPoint], q: QualityParams | None = None) -> HoldBack | None:
    """Fit ln eta = a + c S(M) h(H) (published p, q) on all but the largest size, predict the largest
    with c scaled by the published (P_large / P_small)^-kb. None with fewer than two sizes."""
    qp = q or QualityParams()
    pts = [p for p in _diloco(points) if p.inner_steps >= MIN_H]
    sizes = sorted({p.size for p in pts}, key=lambda s: min(p.params for p in pts if p.size == s))
    if len(sizes) < 2:
        return None
    held, fit_sizes = sizes[-1], tuple(sizes[:-1])
    train = [p for p in pts if p.size in fit_sizes]
    test = [p for p in pts if p.size == held]
    if len(train) < 2 or not test:
        return None

    def term(ps: list[MeasuredPoint]) -> np.ndarray:
        m = np.array([p.replicas for p in ps])
        h = np.array([p.inner_steps for p in ps])
        s_m = quality.replica_term(m, qp.p, qp.fit_replicas_max, qp.p)
        return np.asarray(
            s_m * (1.0 + qp.q * np.log(np.maximum(h, qp.inner_steps_floor) / 30.0)), dtype=np.float64
        )

    # size-normalise the training sizes to the held size with the published law, then fit (a, c)
    p_held = test[0].params
    scale = np.array([(p.params / p_held) ** qp.kb for p in train])  # c(P) = c_held (P / P_held)^-kb
    design = np.stack([np.ones(len(train)), term(train) / scale], axis=1)
    y = np.log([p.eta for p in train])
    (a, c), *_ = np.linalg.lstsq(design, y, rcond=None)
    pred = np.exp(a + c * term(test))
    g = quality.compute_fraction([p.replicas for p in test], [p.inner_steps for p in test], p_held, 1, qp)
    return HoldBack(
        fit_sizes,
        held,
        float(a),
        float(c),
        tuple(test),
        tuple(float(x) for x in pred),
        tuple(float(x) for x in g),
    )


def report_md(points: list[MeasuredPoint], q: QualityParams | None = None) -> str:
    """The shape-check section (markdown) for docs/calibration.md."""
    qp = q or QualityParams()
    lines = [
        "### Sign and shape checks against the published quality model (`dispersal.calibration.shape`)",
        "",
    ]
    checks = sign_checks(points, qp)
    agree = sum(c.agrees for c in checks)
    lines.append(f"Signs: {agree} of {len(checks)} checks agree with the published model's direction.")
    lines.append("")
    lines += [f"* {c.line()}" for c in checks]
    hb = hold_back(points, qp)
    lines.append("")
    if hb is None:
        lines.append("Held-back extrapolation: needs two sizes with H >= 30 DiLoCo points; not available.")
    else:
        lines.append(
            f"Held-back extrapolation: ln eta = a + c S(M) h(H) with the published p = {qp.p:.3f}, "
            f"q = {qp.q:.3f}, fitted on {', '.join(hb.fit_sizes)} (a = {hb.a:+.3f}, c = {hb.c:+.4f} at the "
            f"held size), carried to {hb.held_size} with the published c ~ P^-{qp.kb:.3f}:"
        )
        lines.append("")
        lines.append(
            "| size | M | H | eta measured | +-1 sd | eta predicted (held back) | published g (extrapolated) |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        for m, pr, g in zip(hb.points, hb.predicted, hb.published_g, strict=True):
            sd = f"{m.eta_std:.3f}" if math.isfinite(m.eta_std) else "-"
            lines.append(
                f"| {m.size} | {m.replicas:g} | {m.inner_steps:g} | {m.eta:.3f} | {sd} | {pr:.3f} | {g:.3f} |"
            )
        lines.append("")
        lines.append(
            f"Held-back error: max |eta_pred - eta| {hb.max_abs_error:.3f}, max |ln(eta_pred / eta)| "
            f"{hb.max_abs_log_error:.3f}; published g at these sizes (outside its 3.5e7-2.4e9 range): "
            f"max |ln(g / eta)| {hb.published_max_abs_log_error:.3f}."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dispersal.calibration.shape CALIBRATION.toml", file=sys.stderr)
        return 2
    path = Path(args[0])
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        print(report_md(points_from_toml(data)), end="")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        print(f"calibration: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    except InputError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
