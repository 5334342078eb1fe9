"""The calibration report's two figures: measured vs published penalties, and the fitted size laws
with their bootstrap band beside the DDP reference curves (docs/calibration_*.png)."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np

from dispersal.model.inputs.params import DEFAULT_PARAMS

#: Reference model sizes marked on the size-law panels (the paper's 91B and a 250B frontier run).
REFERENCE_SIZES = ((91e9, "91B"), (250e9, "250B"))


def _alpha_law_ab(x: Any, a: float, b: float) -> Any:
    return a / (1 + np.log10(x / 1e9) / b)


def _beta_law_ab(x: Any, a: float, b: float) -> Any:
    return a * x**-b


def _alpha_law(a: float, b: float) -> Any:
    return functools.partial(_alpha_law_ab, a=a, b=b)


def _beta_law(a: float, b: float) -> Any:
    return functools.partial(_beta_law_ab, a=a, b=b)


def _eta_panels(axes: Any, summary: dict[str, Any], sizes: list[str], colors: dict[str, str]) -> None:
    """eta against H (M = 4) and against M (H = 50), measured and the published forms, per size."""
    pts = summary["points"]
    for ax, (xname, fixed, title) in zip(
        axes,
        (
            ("H", ("M", 4), "eta vs sync interval H (M = 4, fp32)"),
            ("M", ("H", 50), "eta vs replicas M (H = 50, fp32)"),
        ),
        strict=True,
    ):
        for s in sizes:
            sel = sorted(
                (
                    p
                    for p in pts
                    if p["size"] == s
                    and p["codec"] == "none"
                    and p["algorithm"] == "diloco"
                    and p[fixed[0]] == fixed[1]
                ),
                key=lambda p: p[xname],
            )
            if not sel:
                continue
            x = [p[xname] for p in sel]
            y = [p["eta"] for p in sel]
            err = [p["eta_std"] if math.isfinite(p["eta_std"]) else 0 for p in sel]
            ax.errorbar(
                x,
                y,
                yerr=err,
                marker="o",
                color=colors[s],
                capsize=3,
                label=f"measured {s} ({summary['sizes'][s]['params'] / 1e3:.0f}k)",
            )
            ax.plot(
                x,
                [p["eta_published_form"] for p in sel],
                "--",
                color=colors[s],
                alpha=0.7,
                label=f"published forms at {s}",
            )
        ax.set_xscale("log", base=2 if xname == "M" else 10)
        ax.axhline(1, color="grey", lw=0.8)
        ax.set_xlabel(xname)
        ax.set_ylabel("eta = C_DDP(loss) / C_spent")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)


def _compression_panel(ax: Any, summary: dict[str, Any]) -> None:
    """eta_comp against the compression ratio: published expected curves, the fits, the measured codecs."""
    from dispersal.model.kernel.efficiency import eta_comp

    cr = np.geomspace(1, 500, 100)
    ax.plot(cr, eta_comp(cr, True, 1, DEFAULT_PARAMS), "k--", label="published EF expected")
    ax.plot(cr, eta_comp(cr, False, 1, DEFAULT_PARAMS), "k:", label="published no-EF expected")
    g = summary["compression"]
    for gam, style, lab in ((g["gamma_ef"], "-", "fit EF"), (g["gamma_no_ef"], "-.", "fit no-EF")):
        if math.isfinite(gam):
            ax.plot(
                cr,
                np.clip(1 - gam * np.log10(cr), 0.05, 1),
                style,
                color="tab:red",
                label=f"{lab} (gamma {gam:.3f})",
            )
    for k, v in summary["codecs"].items():
        ax.errorbar(
            [v["ratio"]],
            [v["eta_comp"]],
            yerr=[v["std"] if math.isfinite(v["std"]) else 0],
            marker="s",
            capsize=3,
            label=f"measured {k}",
        )
    ax.set_xscale("log")
    ax.set_xlabel("compression ratio C_r (vs 16-bit)")
    ax.set_ylabel("eta_comp")
    ax.set_title("compression quality (H = 50, M = 4)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def _law_panel(ax: Any, summary: dict[str, Any], law: tuple[Any, ...]) -> None:
    """One fitted size law (alpha(P) or beta_0(P)) against the published one, with its bootstrap band."""
    name, pub, fn, key_a, key_b, keysz = law
    P = np.geomspace(1e5, 1e12, 200)
    reps = summary["replicates"]
    fz = summary["fitted"]
    pubv = pub(P)
    ax.plot(P, np.where((pubv > 0) & (pubv < 5), pubv, np.nan), "k--", label="published")
    a, b = (
        fz[{"alpha0": "eta_h_alpha0", "beta_coeff": "replica_beta_coeff"}[key_a]],
        fz[{"size_scale": "eta_h_size_scale", "beta_exponent": "replica_beta_exponent"}[key_b]],
    )
    if math.isfinite(a) and math.isfinite(b):

        def safe(v: Any) -> Any:  # alpha(P) has a pole where 1 + log10(P/1e9)/s = 0: hide it
            v = np.asarray(v, dtype=np.float64)
            return np.where((v > -0.05) & (v < 1.0), v, np.nan)

        ax.plot(P, safe(fn(P, a, b)), "r-", label="fit to measurements")
        band = np.array(
            [
                safe(fn(P, r[key_a], r[key_b]))
                for r in reps
                if math.isfinite(r[key_a]) and math.isfinite(r[key_b])
            ]
        )
        if len(band) > 2:
            ax.fill_between(
                P,
                np.nanpercentile(band, 16, axis=0),
                np.nanpercentile(band, 84, axis=0),
                color="r",
                alpha=0.2,
                label="bootstrap 16-84 %",
            )
    for s, v in summary["sizes"].items():
        val, sd = v[keysz], v[f"{keysz}_std"]
        if math.isfinite(val):
            ax.errorbar(
                [v["params"]],
                [val],
                yerr=[sd if math.isfinite(sd) else 0],
                fmt="o",
                capsize=3,
                label=f"measured {s}",
            )
    for ref, lab in REFERENCE_SIZES:
        ax.axvline(ref, color="grey", lw=0.6, ls=":")
        ax.text(ref, ax.get_ylim()[1] * 0.95 if ax.get_ylim()[1] > 0 else 0, lab, fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("parameters P")
    ax.set_title(name, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def _ddp_panel(ax: Any, summary: dict[str, Any], sizes: list[str], colors: dict[str, str]) -> None:
    """The DDP reference runs, the loss curve used for eta, and the DiLoCo runs (crosses)."""
    pts = summary["points"]
    for s in sizes:
        recs = [r for r in summary["records"] if r["size"] == s and r["role"] == "reference"]
        c = np.array([r["flop"] for r in recs])
        lo = np.array([np.mean(r["val_losses"]) for r in recs])
        ax.scatter(c, lo, color=colors[s], label=f"DDP {s}")
        cv = summary["central"]["curves"][s]
        cc = np.geomspace(c.min() / 2, c.max() * 2, 100)
        ax.plot(cc, cv.loss(cc), color=colors[s], lw=0.8)
        for p in (p for p in pts if p["size"] == s and p["algorithm"] == "diloco"):
            flop = next(r["flop"] for r in summary["records"] if r["size"] == s and r["role"] == "sweep")
            ax.scatter([flop], [p["val_loss"]], marker="x", color=colors[s], alpha=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("training compute C = 6 N T (FLOP)")
    ax.set_ylabel("validation loss (nats/byte)")
    ax.set_title("DDP reference runs and the curve used for eta; x = DiLoCo runs", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


#: The two size laws: title, published law, fitted form, replicate keys (a, b) and the per-size key.
_LAWS = (
    (
        "alpha(P) in eta_H = 1 - alpha log10 H",
        _alpha_law(DEFAULT_PARAMS.eta_h_alpha0, DEFAULT_PARAMS.eta_h_size_scale),
        _alpha_law_ab,
        "alpha0",
        "size_scale",
        "alpha",
    ),
    (
        "beta_0(P) in L_rep = M^beta (at H = 30)",
        _beta_law(DEFAULT_PARAMS.replica_beta_coeff, DEFAULT_PARAMS.replica_beta_exponent),
        _beta_law_ab,
        "beta_coeff",
        "beta_exponent",
        "beta0",
    ),
)


def plots(summary: dict[str, Any], folder: Path, prefix: str = "calibration_") -> list[Path]:
    """Write ``{prefix}penalties.png`` (eta vs H, eta vs M, compression) and ``{prefix}fits.png``
    (the fitted size laws extrapolated, and the DDP curves) into `folder`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dispersal._io import save_figure

    sizes = sorted(summary["sizes"], key=lambda s: summary["sizes"][s]["params"])
    colors = dict(zip(sizes, ["tab:blue", "tab:orange", "tab:green"], strict=False))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    _eta_panels(axes[:2], summary, sizes, colors)
    _compression_panel(axes[2], summary)
    penalties = folder / f"{prefix}penalties.png"
    save_figure(fig, penalties)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, law in zip(axes[:2], _LAWS, strict=True):
        _law_panel(ax, summary, law)
    _ddp_panel(axes[2], summary, sizes, colors)
    fits = folder / f"{prefix}fits.png"
    save_figure(fig, fits)
    return [penalties, fits]
