"""Training FLOP per token and model FLOP utilisation (MFU) on one stated convention.

Convention of this project (the paper's and the kernel's C = 6 P D): a training token costs
6 P FLOP, P = the published parameter count (active parameters for a mixture of experts),
embeddings included, attention-score FLOPs excluded. An MFU in this convention is
MFU_6P = 6 P x (tokens/s per chip) / (peak FLOP/s per chip), so that T_comp = 6 P B / (F_peak MFU_6P)
is exact for the catalogue's MFU.

Most published MFUs count attention as well, in the PaLM form 6 N + 12 L H Q T
(Chowdhery et al. 2022, arXiv 2204.02311, App. B; the same matmul count as Hoffmann et al. 2022,
arXiv 2203.15556, App. F, less its softmax terms; used by torchtitan, PRIME/INTELLECT-1, NeMo).
Kaplan et al. 2020 (arXiv 2001.08361, Table 1) count half of it (forward 2 n_layer n_ctx d_attn,
i.e. 6 L s d per training token). `mfu_to_6p` converts the PaLM form to the 6P convention.

All functions take floats or NumPy arrays and broadcast; they never loop in Python.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dispersal.model.inputs.errors import InputError

Arr = npt.NDArray[np.float64]

#: FLOP per parameter per training token: 2 (forward multiply-add) + 4 (backward) = 6
#: (Kaplan et al. 2020, sec. 2.1; the paper's C = 6 P D).
FLOP_PER_PARAM_PER_TOKEN = 6.0
#: FLOP per (layer x attention width x context position) per training token for QK^T and AV:
#: 2 matmuls x 2 FLOP per multiply-add x 3 (forward + backward) = 12; no causal-mask halving
#: (PaLM App. B, 6N + 12LHQT).
ATTENTION_FLOP_COEFF = 12.0


def _positive(value: npt.ArrayLike, field: str, unit: str) -> Arr:
    x = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(x)) or not np.all(x > 0):
        raise InputError(field, f"must be finite and > 0 {unit}, got {value!r}")
    return x


def attention_flop_per_token(layers: npt.ArrayLike, hidden: npt.ArrayLike, seq_len: npt.ArrayLike) -> Arr:
    """Attention-score FLOP per training token: 12 L d s (FLOP per token).

    L = layers, d = attention width (heads x head dimension; equal to d_model for most models,
    12,288 = 48 x 256 for PaLM 540B whose d_model is 18,432), s = training sequence length (tokens).
    Source: Chowdhery et al. 2022 (PaLM), App. B, term 12 L H Q T; no causal-mask halving.
    """
    lay = _positive(layers, "layers", "layers")
    dim = _positive(hidden, "hidden", "(attention width)")
    seq = _positive(seq_len, "seq_len", "tokens")
    return np.asarray(ATTENTION_FLOP_COEFF * lay * dim * seq, dtype=np.float64)


def flop_per_token(
    params: npt.ArrayLike,
    layers: npt.ArrayLike | None = None,
    hidden: npt.ArrayLike | None = None,
    seq_len: npt.ArrayLike | None = None,
    attention: bool = False,
) -> Arr:
    """Training FLOP per token: 6 P, or 6 P + 12 L d s with ``attention=True`` (FLOP per token).

    P = parameters (active parameters for a mixture of experts), L = layers, d = attention width
    (heads x head dimension), s = sequence length in tokens. 6 P: Kaplan et al. 2020, sec. 2.1,
    and the paper's C = 6 P D. The attention term is PaLM's (Chowdhery et al. 2022, App. B:
    6 N + 12 L H Q T), the same matmul count as Chinchilla App. F without its softmax FLOPs;
    Kaplan et al. 2020, Table 1, count half of it (6 L s d). `layers`, `hidden` and `seq_len`
    are needed only with ``attention=True``.
    """
    p = _positive(params, "params", "parameters")
    base = FLOP_PER_PARAM_PER_TOKEN * p
    if not attention:
        return np.asarray(base, dtype=np.float64)
    if layers is None or hidden is None or seq_len is None:
        raise InputError("attention", "needs layers, hidden and seq_len (all > 0)")
    return np.asarray(base + attention_flop_per_token(layers, hidden, seq_len), dtype=np.float64)


def mfu_to_6p(
    mfu_reported: npt.ArrayLike,
    params: npt.ArrayLike,
    layers: npt.ArrayLike,
    hidden: npt.ArrayLike,
    seq_len: npt.ArrayLike,
    reported_params: npt.ArrayLike | None = None,
) -> Arr:
    """Convert an MFU that counts attention (PaLM form) into the 6P convention (fraction of peak).

    MFU_6P = MFU_reported x 6 P / (6 P_r + 12 L d s). P = parameters in this project's convention
    (published count, embeddings included); P_r = the count the report used inside its formula
    (``reported_params``; default P), e.g. torchtitan and PRIME (INTELLECT-1) drop the input
    embedding. L, d, s as in `flop_per_token`. Both MFUs share the same throughput and peak, so
    only the FLOP-per-token ratio changes. Source of the reported form: PaLM App. B.
    """
    m = np.asarray(mfu_reported, dtype=np.float64)
    if not np.all(np.isfinite(m)) or not np.all((m > 0) & (m <= 1)):
        raise InputError("mfu_reported", f"must be in (0, 1], got {mfu_reported!r}")
    p = _positive(params, "params", "parameters")
    p_r = p if reported_params is None else _positive(reported_params, "reported_params", "parameters")
    reported = FLOP_PER_PARAM_PER_TOKEN * p_r + attention_flop_per_token(layers, hidden, seq_len)
    return np.asarray(m * FLOP_PER_PARAM_PER_TOKEN * p / reported, dtype=np.float64)


def mfu_6p_from_throughput(
    tokens_per_s_per_chip: npt.ArrayLike, params: npt.ArrayLike, peak_flop_per_s: npt.ArrayLike
) -> Arr:
    """MFU in the 6P convention from a measured throughput: 6 P x (tokens/s per chip) / peak.

    `tokens_per_s_per_chip` in tokens/s, `params` as in `flop_per_token`, `peak_flop_per_s`
    the chip's dense peak at the precision used (FLOP/s). Definition of MFU: PaLM, sec. 4.1.
    """
    tps = _positive(tokens_per_s_per_chip, "tokens_per_s_per_chip", "tokens/s")
    p = _positive(params, "params", "parameters")
    peak = _positive(peak_flop_per_s, "peak_flop_per_s", "FLOP/s")
    return np.asarray(FLOP_PER_PARAM_PER_TOKEN * p * tps / peak, dtype=np.float64)
