"""Published fits and heuristics the model uses, as one frozen, documented parameter set.

Three layers are kept apart (spec/model.md): physics (exact arithmetic, not here), published
fits (a paper and table behind each constant) and heuristics (modelling choices with no published
law, each labelled and given a range in `dispersal.model.analyses.uncertainty`). Every field can be an
array in the vectorised kernel, which is how Monte Carlo and calibration vary them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from dispersal.model.inputs.errors import InputError

#: The default mode's corrections to the paper's model, each switchable (`ModelParams.corrections`).
CORRECTIONS: tuple[str, ...] = ("memory", "wire", "aggregation", "link_budget", "overlap", "mfu", "quality")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelParams:
    """Constants of the efficiency model, each with its source.

    Chinchilla refit (published fit): L(N, D) = E + A N^-alpha + B D^-beta, Besiroglu et al. 2024,
    "Chinchilla Scaling: A replication attempt" (arXiv 2404.10102), Table 1 / eq. 4.
    """

    chinchilla_e: float = 1.8172
    """Irreducible loss E (nats/token). Besiroglu et al. 2024; standard error 0.03."""
    chinchilla_a: float = 482.01
    """Parameter term A. Besiroglu et al. 2024; standard error 124.6."""
    chinchilla_b: float = 2085.43
    """Data term B. Besiroglu et al. 2024; standard error 1293."""
    chinchilla_alpha: float = 0.3478
    """Parameter exponent alpha. Besiroglu et al. 2024; standard error 0.02."""
    chinchilla_beta: float = 0.3658
    """Data exponent beta. Besiroglu et al. 2024; standard error 0.02."""
    tokens_per_param_optimal: float = 25.6
    """Compute-optimal tokens per parameter D*/N along which chi is measured (Besiroglu et al.
    2024 refit; spec/model.md sec. 5: D* = 25.6 N, C = 153.6 N^2)."""

    eta_h_alpha0: float = 0.08
    """Heuristic: eta_H = max(eta_h_floor, 1 - alpha(P) log10 H), alpha(P) = alpha0 / (1 + log10(P/1e9)/s).
    No published H-law exists (Charles et al. 2025 only report that loss rises with H, less for
    larger models). Rahman 2026 sec. 4."""
    eta_h_size_scale: float = 5.0
    """Heuristic: the divisor s in alpha(P) (Rahman 2026 sec. 4)."""
    eta_h_floor: float = 0.4
    """Heuristic: floor of eta_H (Rahman 2026 sec. 4)."""

    replica_beta_coeff: float = 1.0923
    """Published fit + heuristic extension: beta_0(P) = c P^-k, the exponent of the replica loss
    multiplier L_rep = M^beta at H = 30; fit to Charles et al. 2025 (arXiv 2503.09799) Table 4,
    35M-2.4B parameters, M in {1, 2, 4, 8}. Rahman 2026 sec. 4."""
    replica_beta_exponent: float = 0.2342
    """k in beta_0(P) = c P^-k (same fit)."""
    replica_reference_h: float = 30.0
    """H at which beta_0 was fitted (Charles et al. 2025 use H = 30); beta scales as ln H / ln 30
    (unvalidated heuristic extension, Rahman 2026)."""

    straggler_coeff_relay: float = 0.02
    """Heuristic: f(n) = 1 + c log2 n for an async relay via object storage (Covenant-72B style);
    engineering estimate, Rahman 2026 sec. 3 (paper default)."""
    straggler_coeff_sync: float = 0.05
    """Heuristic: f(n) = 1 + c log2 n for a synchronous all-reduce (Rahman 2026 sec. 3)."""
    backup_worker_fraction: float = 0.3
    """Heuristic: with backup workers, f' = 1 + 0.3 (f - 1) (Rahman 2026 sec. 3)."""
    backup_overprovision: float = 1.1
    """Heuristic: with backup workers only N / 1.1 nodes do useful work (the rest are spares);
    Rahman 2026 sec. 3 ("backup workers N/1.1 effective")."""

    hierarchical_h_exponent: float = 0.5
    """Heuristic: H_eff = H_inner * H_regional^0.5 for hierarchical DiLoCo (Rahman 2026 sec. 3)."""
    hidden_size_coeff: float = 0.03
    """Heuristic: hidden size h ~ 0.03 sqrt(P) for the activation payload (Rahman 2026 sec. 3;
    Llama 3 405B: 0.03 * sqrt(405e9) = 19,092 vs 16,384 actual)."""

    hbm_usable_fraction: float = 0.90
    """Heuristic: fraction of accelerator memory a training job can fill with state and activations;
    the rest goes to the CUDA context, communication buffers and allocator fragmentation (default
    mode; range 0.80-0.95). Paper mode uses all of it."""
    ddp_overlap_fraction: float = 2.0 / 3.0
    """Fraction of a training step that can hide a reduction that starts layer by layer as the
    backward pass produces each layer's gradient (DDP) or last inner update (a DiLoCo outer sync):
    the backward pass, 4 of the 6 P FLOP per token (Kaplan et al. 2020, arXiv 2001.08361, sec. 2.1).
    Streaming DiLoCo's simulator overlaps every method's reduction with the backward pass this way
    (Douillard et al. 2025, Figure 3). Paper mode hides DDP behind the whole step (1) and DiLoCo
    syncs behind none of it (0)."""

    validation_eval_tokens_per_update: float = 65536.0
    """Permissionless runs (``trust = permissionless``): tokens on which a validator scores each
    submitted update per round, with one forward pass before and one after applying it (Templar's
    Gauntlet: loss before minus loss after on the peer's assigned data and on held-out data;
    Lidin et al. 2026, Covenant-72B, arXiv 2603.08163, sec. 3). The batch size is an assumption:
    two batches (assigned + held-out) of 16 sequences of 2,048 tokens."""
    validator_nodes: float = 1.0
    """Permissionless runs: nodes of the run's own type that only validate (score updates and
    aggregate), bought or rented on top of the N training nodes. Assumption: one validator, as in
    Covenant-72B's run (arXiv 2603.08163 sec. 3 describes a validator that scores every
    submission every round)."""
    permissionless_discard_fraction: float = 0.25
    """Permissionless runs: fraction of submitted updates that validation leaves out of the
    aggregate each round (the top-k rule keeps the best-scoring ones; honest but slow or
    low-scoring peers are dropped with the attackers). Assumption: Covenant-72B aggregated about 20
    peers per round (arXiv 2603.08163) and reports no submission count per round; 0.25 is the
    middle of the plausible range 0-0.5."""
    robust_quality_factor: float = 0.99
    """Permissionless runs: quality-adjusted compute of a run whose updates pass a robust rule
    relative to plain averaging, with no attacker: the robustness tax. Assumption informed by the
    testbed (docs/testbed.md, "Robust aggregation and attacks": the untrusted default, a coordinate-wise
    trimmed mean, ends 0.2-0.6% above plain averaging's final loss on the tiny and small presets,
    3 seeds); the conversion of that loss gap to compute is not measured, and small models only."""
    mfu_scale: float = 1.0
    """Multiplier on the catalogue MFU a default-mode scenario uses when it sets none (capped at 1).
    Not a model figure: 1 = the catalogue's sourced value. The sensitivity analysis sets it so an
    MFU draw moves every accelerator's MFU by the same factor (`uncertainty.nominal_plan`)."""

    corrections: str = "all"
    """Which of the default mode's corrections to the paper's time and quality model apply
    (comma-separated, "all" or "none"): memory (state placement, offload, HBM headroom, host DRAM,
    no 1-group pipeline), wire (codec bits per parameter, ratios vs FP32), aggregation (ring /
    relay / all-gather topologies, separate upload and download), link_budget (one shared WAN link
    per node), overlap (backward-pass overlap, fragments, overlap depth), mfu (per accelerator and
    precision), quality (compute-space fitted penalty). For the one-at-a-time table in
    docs/model.md; paper mode ignores it."""

    compression_table: tuple[tuple[float, ...], ...] = field(
        default=(
            (1, 1.00, 1.00, 1.00, 1.00, 1.00, 1.00),
            (4, 1.00, 1.00, 0.99, 1.00, 1.00, 0.99),
            (16, 1.00, 1.00, 0.97, 1.00, 0.99, 0.95),
            (100, 1.00, 0.99, 0.93, 1.00, 0.98, 0.90),
            (150, 1.00, 0.99, 0.91, 0.99, 0.96, 0.85),
            (500, 0.99, 0.96, 0.80, 0.99, 0.95, 0.75),
        )
    )
    """Heuristic eta_comp table: rows (C_r, EF optimistic, EF expected, EF conservative,
    no-EF optimistic, no-EF expected, no-EF conservative); interpolated linearly in log10 C_r,
    held above 500. Rahman 2026 sec. 4, anchored on Covenant-72B (>146x with EF, arXiv 2603.08163)
    and SparseLoCo."""
    activation_table: tuple[tuple[float, ...], ...] = field(
        default=(
            (1, 1.000, 1.000, 1.000),
            (2, 1.000, 1.000, 0.990),
            (4, 0.995, 1.000, 0.960),
            (10, 0.980, 0.995, 0.900),
        )
    )
    """Heuristic per-boundary activation-compression quality q: rows (C_act, expected, optimistic,
    conservative), log-interpolated; eta_act = q^(2(S-1)). Rahman 2026 sec. 4."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float | int) and not value > 0:
                raise InputError(f.name, f"must be > 0, got {value}")
        bad = set(self.correction_set()) - set(CORRECTIONS)
        if bad:
            raise InputError(
                "corrections",
                f"unknown correction {sorted(bad)[0]!r}; known: all, none, {', '.join(CORRECTIONS)}",
            )
        for name in ("hbm_usable_fraction", "ddp_overlap_fraction"):
            if not getattr(self, name) <= 1:
                raise InputError(name, f"must be in (0, 1], got {getattr(self, name)}")
        if not self.eta_h_floor < 1:
            raise InputError("eta_h_floor", f"must be in (0, 1), got {self.eta_h_floor}")

    def correction_set(self) -> frozenset[str]:
        """The enabled corrections (see `corrections`)."""
        text = self.corrections.strip().lower()
        if text == "all":
            return frozenset(CORRECTIONS)
        if text in ("none", ""):
            return frozenset()
        return frozenset(t.strip() for t in text.split(","))

    def replace(self, **changes: Any) -> ModelParams:
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (tables as lists)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = [list(r) for r in v] if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelParams:
        """Build from a dict; unknown keys are an InputError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise InputError(unknown[0], f"unknown model parameter (known: {', '.join(sorted(names))})")
        kwargs: dict[str, Any] = {}
        for k, v in data.items():
            if isinstance(v, list):
                kwargs[k] = tuple(tuple(float(x) for x in r) for r in v)
            else:
                kwargs[k] = v if isinstance(v, str) else float(v)
        return cls(**kwargs)


DEFAULT_PARAMS = ModelParams()
