"""Chinchilla arithmetic: loss of a (P, D) run, the compute-optimal compute at equal loss, chi and
the compute value of the replica penalty. Published fit: Besiroglu et al. 2024 (arXiv 2404.10102).

All functions take NumPy arrays (or floats) and broadcast; they never loop in Python.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]


def loss(
    params: npt.ArrayLike,
    tokens: npt.ArrayLike,
    e: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    alpha: npt.ArrayLike,
    beta: npt.ArrayLike,
) -> Arr:
    """L(N, D) = E + A N^-alpha + B D^-beta (nats per token). Besiroglu et al. 2024, eq. 4."""
    n = np.asarray(params, dtype=np.float64)
    d = np.asarray(tokens, dtype=np.float64)
    return np.asarray(e + a * n ** -np.asarray(alpha) + b * d ** -np.asarray(beta), dtype=np.float64)


#: Newton iterations `optimal_params_for_loss` takes before it tests for convergence: every call of
#: `dispersal frontier --samples 100` settled in 5 or 6 (2,417 calls), so testing earlier only costs.
NEWTON_MIN_STEPS = 4


def optimal_params_for_loss(
    target_loss: npt.ArrayLike,
    e: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    alpha: npt.ArrayLike,
    beta: npt.ArrayLike,
    tokens_per_param: npt.ArrayLike,
) -> Arr:
    """N' such that a compute-optimal run (D = k N') reaches `target_loss`.

    Solves E + A N^-alpha + B (k N)^-beta = L for N. In x = ln N the left side minus L is convex
    and decreasing, so Newton's method started left of the root (at the larger of the two
    one-term solutions) converges monotonically; 30 iterations reach machine precision.
    Returns +inf where L <= E (unreachable).
    """
    lt = np.asarray(target_loss, dtype=np.float64)
    e_ = np.asarray(e, dtype=np.float64)
    a_ = np.asarray(a, dtype=np.float64)
    al = np.asarray(alpha, dtype=np.float64)
    be = np.asarray(beta, dtype=np.float64)
    b_eff = np.asarray(b, dtype=np.float64) * np.asarray(tokens_per_param, dtype=np.float64) ** -be
    r = lt - e_
    ok = r > 0
    r_safe = np.where(ok, r, 1.0)
    x = np.maximum(np.log(a_ / r_safe) / al, np.log(b_eff / r_safe) / be)
    # The iteration below in preallocated arrays (the same operations in the same order as
    # ta = a e^(-alpha x), tb = b' e^(-beta x), step = (ta + tb - r) / -(alpha ta + beta tb)):
    # on the kernel's small calls the allocations cost as much as the arithmetic.
    x = np.array(x, dtype=np.float64)
    shape = np.broadcast_shapes(x.shape, a_.shape, al.shape, be.shape, b_eff.shape, r_safe.shape)
    if x.shape != shape:
        x = np.array(np.broadcast_to(x, shape))
    n_al, n_be = -al, -be
    ta, tb, f, fp, step = (np.empty(shape) for _ in range(5))
    for i in range(30):
        np.multiply(a_, np.exp(np.multiply(n_al, x, out=ta), out=ta), out=ta)
        np.multiply(b_eff, np.exp(np.multiply(n_be, x, out=tb), out=tb), out=tb)
        np.subtract(np.add(ta, tb, out=f), r_safe, out=f)
        np.negative(np.add(np.multiply(al, ta, out=fp), np.multiply(be, tb, out=step), out=fp), out=fp)
        np.divide(f, fp, out=step)
        np.subtract(x, step, out=x)
        # (from the start above no call has settled in fewer than NEWTON_MIN_STEPS iterations: the
        # test before then is wasted work, and a step more on a settled root moves it < 1e-13)
        if i + 1 >= NEWTON_MIN_STEPS and np.all(np.abs(step) < 1e-13 * np.maximum(1.0, np.abs(x))):
            break
    return np.asarray(np.where(ok, np.exp(x), np.inf), dtype=np.float64)


def optimal_compute_for_loss(
    target_loss: npt.ArrayLike,
    e: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    alpha: npt.ArrayLike,
    beta: npt.ArrayLike,
    tokens_per_param: npt.ArrayLike,
) -> Arr:
    """C'(L) = 6 k N'^2 FLOP: the compute of the compute-optimal run with loss L (k = 25.6: 153.6 N^2)."""
    n = optimal_params_for_loss(target_loss, e, a, b, alpha, beta, tokens_per_param)
    return np.asarray(6.0 * np.asarray(tokens_per_param) * n * n, dtype=np.float64)
