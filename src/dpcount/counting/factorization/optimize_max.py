"""The max-loss optimum of the counting matrix, with a certified duality gap.

Max loss of a factorization A = B·C of the T×T lower-triangular all-ones matrix
(McMahan et al. arXiv:2408.08868; Dvijotham et al. arXiv:2404.16706): the largest
per-step variance of the release in units of a sensitivity-1 Gaussian,

    max loss(B, C) = max_t ‖B[t, :]‖² · max_j ‖C[:, j]‖² = ‖B‖²_{2→∞}·‖C‖²_{1→2}.

Its minimum over all factorizations is γ₂(A)², the square of the factorization norm
(Linial, Mendelson, Schechtman, Shraibman 2007; Lee, Shraibman, Špalek 2008,
"A direct product theorem for discrepancy", CCC 2008, Theorem 9 (duality)):

    γ₂(A) = min_{A = BC} ‖B‖_{2→∞}‖C‖_{1→2} = max_{u, p ∈ Δ} ‖diag(√u)·A·diag(√p)‖_*,

Δ the probability simplex and ‖·‖_* the nuclear norm. Derivation (the direction used
for certificates, weak duality, is elementary): for any factorization and any
u, p ∈ Δ, ‖U^{1/2}AP^{1/2}‖_* = ‖(U^{1/2}B)(CP^{1/2})‖_* ≤ ‖U^{1/2}B‖_F·‖CP^{1/2}‖_F
(Cauchy–Schwarz for the nuclear norm, ‖XY‖_* ≤ ‖X‖_F‖Y‖_F) and
‖U^{1/2}B‖_F² = Σ_t u_t‖B[t, :]‖² ≤ ‖B‖²_{2→∞}, ‖CP^{1/2}‖_F² ≤ ‖C‖²_{1→2}. So
**every** pair (u, p) of probability vectors gives the lower bound

    max loss(B, C) ≥ ‖U^{1/2}AP^{1/2}‖_*²   for every factorization (B, C),

and equality is attained (strong duality of the convex problem
min_X max_t (A X⁻¹ Aᵀ)_tt over X ⪰ 0 with diag X ≤ 1, X = CᵀC, by the minimax
theorem; the references above).

Symmetry: with J the reversal, J·A·J = Aᵀ, so (u, p) ↦ (Jp, Ju) preserves the dual
value, and the dual function is concave (a minimum of functions linear in (u, v),
v = s·p the diagonal multipliers, see
:func:`dpcount.counting.factorization.optimize.optimize_dense`);
the average of an optimum and its mirror is an optimum, so p = J·u loses nothing.
Then W = U^{1/2}AP^{1/2} = S·J with S = U^{1/2}(AJ)U^{1/2} symmetric (AJ is the
0/1 "anti-triangle" [i + j ≥ T − 1]), and N(u) = ‖W‖_* = tr|S|.

Primal from the weights: with the SVD W = YΣZᵀ, B = U^{−1/2}YΣ^{1/2},
C = Σ^{1/2}ZᵀP^{−1/2} factor A, with ‖B[t, :]‖² = r_t and ‖C[:, j]‖² = r_{T−1−j},
r_t = |S|_tt/u_t. So this factorization's max loss is (max_t r_t)², while the dual
value is N(u)² = (Σ_t u_t r_t)²: the duality gap is the spread of r. The gradient of
N is ∂N/∂u_t = |S|_tt/u_t = r_t (differentiating tr|S| = tr(sign(S)·S)), and the
optimality condition on Δ is r_t = N wherever u_t > 0.

Computation: |S| = (WWᵀ)^{1/2} and K = (WWᵀ)⁻¹ = U^{−1/2}A^{−T}P⁻¹A⁻¹U^{−1/2} is
*tridiagonal* (A⁻¹ is bidiagonal: 1 on the diagonal, −1 below it), so one
eigendecomposition K = Q·diag(κ)·Qᵀ by :func:`scipy.linalg.eigh_tridiagonal` (O(T²))
gives N = Σ_k κ_k^{−1/2} and |S|_tt = Σ_k Q_tk²·κ_k^{−1/2}. The weights are updated by
the multiplicative fixed-point iteration u ← u·(r/N)^α, renormalized (α = 2; 2.5
diverges at T = 256; should an iterate's gap exceed twice the best one's, or its
matrix become numerically singular, the iteration restarts from the best weights with
α = 1; a fixed point satisfies the optimality condition). Every iterate gives both a lower
bound N(u)² and a factorization with max loss (max r)².

The returned factorization is made causal: X = CᵀC = J·Y·J with
Y = U^{−1/2}|S|U^{−1/2}, C the lower-triangular factor of X (the Cholesky factor of Y,
transposed and reversed), B = A·C⁻¹ (lower-triangular); the loss depends only on X,
and the returned loss is recomputed exactly from (B, C).

Floating point: the lower bound is the eigenvalue sum N(u)² times (1 − 10⁻⁹)
(:data:`LOWER_BOUND_MARGIN`), far above the relative error of the tridiagonal
eigenvalues at T ≤ 4096 (the tests compare it with a dense SVD of W to 10⁻¹⁰).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from dpcount._validate import as_array, check_integer, check_real
from dpcount.counting.factorization._types import Array
from dpcount.data import load_table

__all__ = [
    "DENSE_MAX_OPTIMUM_MAX_HORIZON",
    "LOWER_BOUND_MARGIN",
    "DenseMaxOptimum",
    "dense_max_factors",
    "interpolate_weights",
    "max_loss_lower_bound",
    "optimize_dense_max",
    "shipped_beyond_max_optima",
    "shipped_beyond_max_weights",
    "shipped_interpolated_max_bounds",
    "shipped_max_optima",
    "shipped_max_weights",
]

#: largest horizon :func:`optimize_dense_max` accepts (T×T dense factors, O(T³) at the end)
DENSE_MAX_OPTIMUM_MAX_HORIZON = 4096
#: largest T = 2^k with shipped weights (``dpcount/data/dense_max_weights.npy``)
SHIPPED_MAX_LOG2 = 11
#: largest horizon of :func:`dense_max_factors` (that of ``FactorizationMechanism.optimal``)
DENSE_MAX_FACTORS_MAX_HORIZON = 2048
#: relative amount subtracted from the computed dual value (floating-point margin)
LOWER_BOUND_MARGIN = 1e-9
_ALPHA = 2.0


@dataclass(frozen=True)
class DenseMaxOptimum:
    """A dense causal factorization A = B·C minimizing the max loss (to a certified gap).

    Attributes:
        decoder: B = A·C⁻¹ (T × T, lower-triangular).
        encoder: C (T × T, lower-triangular).
        loss: the max loss of exactly this (B, C):
            max_j ‖C[:, j]‖² · max_t ‖B[t, :]‖².
        mean_loss: its mean loss, max_j ‖C[:, j]‖² · mean_t ‖B[t, :]‖².
        lower_bound: a lower bound on the max loss of *every* factorization of A
            (:func:`max_loss_lower_bound` of ``weights``), so
            ``loss / lower_bound − 1`` bounds the distance to the optimum.
        weights: the dual weights u (a probability vector, p = reversed u).
        iterations, seconds: how the iteration ended.
    """

    decoder: Array
    encoder: Array
    loss: float
    mean_loss: float
    lower_bound: float
    weights: Array
    iterations: int
    seconds: float

    @property
    def gap(self) -> float:
        """loss / lower_bound − 1: a certified bound on the relative distance to optimal."""
        return self.loss / self.lower_bound - 1.0


def _check_weights(weights: Any) -> Array:
    arr = as_array("weights", weights)
    if arr.ndim != 1 or len(arr) == 0:
        raise ValueError(f"weights must be a non-empty 1-D array, got shape {arr.shape}")
    u = np.array(arr, dtype=np.float64)
    if not (np.isfinite(u).all() and (u > 0).all()):
        raise ValueError("weights must be finite and positive")
    return u / float(np.sum(u))


def _tridiagonal(u: Array) -> tuple[Array, Array]:
    """(diagonal, off-diagonal) of K = U^{−1/2}·A^{−T}·P⁻¹·A⁻¹·U^{−1/2}, p = reversed u.

    A⁻¹ = D with D[i, i] = 1, D[i, i−1] = −1, so (DᵀP⁻¹D)_ii = 1/p_i + 1/p_{i+1}
    (the last: 1/p_{T−1}) and (DᵀP⁻¹D)_{i,i+1} = −1/p_{i+1}.
    """
    inv_p = 1.0 / u[::-1]
    diagonal = inv_p.copy()
    diagonal[:-1] += inv_p[1:]
    scale = 1.0 / np.sqrt(u)
    return diagonal * scale * scale, -inv_p[1:] * scale[:-1] * scale[1:]


def _step(u: Array) -> tuple[float, Array, Array, Array]:
    """(N(u), r, κ, Q): the nuclear norm, r_t = |S|_tt/u_t and K's eigenpairs."""
    import scipy.linalg as sl

    if len(u) == 1:
        return 1.0, np.ones(1), np.ones(1), np.ones((1, 1))
    d, e = _tridiagonal(u)
    kappa, Q = sl.eigh_tridiagonal(d, e)
    if not kappa.min() > 0:
        raise ValueError("weights too small: the weighted matrix is numerically singular")
    s = 1.0 / np.sqrt(kappa)
    return float(np.sum(s)), (Q * Q) @ s / u, kappa, Q


def max_loss_lower_bound(weights: Any) -> float:
    """‖U^{1/2}·A·P^{1/2}‖_*²·(1 − 10⁻⁹) for u = ``weights``/Σ ``weights`` and p = u
    reversed: a lower bound on the max loss of every factorization of the T×T counting
    matrix, T = len(weights) (weak duality, see the module docstring).

    O(T²) (tridiagonal eigenvalues only); any positive weights give a valid bound,
    the optimized ones (:func:`optimize_dense_max`) the best.

    Raises:
        ValueError: weights not a non-empty 1-D array of finite positive numbers.
    """
    import scipy.linalg as sl

    u = _check_weights(weights)
    if len(u) == 1:
        return 1.0 - LOWER_BOUND_MARGIN
    d, e = _tridiagonal(u)
    kappa = sl.eigvalsh_tridiagonal(d, e)
    if not kappa.min() > 0:
        raise ValueError("weights too small: the weighted matrix is numerically singular")
    n = float(np.sum(1.0 / np.sqrt(kappa)))
    return n * n * (1.0 - LOWER_BOUND_MARGIN)


def interpolate_weights(weights: Any, horizon: int) -> Array:
    """Weights for ``horizon`` from weights for another horizon: linear interpolation of
    T·u_t against the cell midpoint (t + ½)/T, renormalized (a warm start; any positive
    result is a valid dual point)."""
    u = _check_weights(weights)
    T = check_integer("horizon", horizon, ge=1)
    n = len(u)
    x_old = (np.arange(n) + 0.5) / n
    x_new = (np.arange(T) + 0.5) / T
    out = np.interp(x_new, x_old, u * n)
    return np.asarray(out / out.sum(), dtype=np.float64)


def _causal_factors(u: Array, kappa: Array, Q: Array) -> tuple[Array, Array]:
    """(B, C) causal with CᵀC = J·U^{−1/2}|S|U^{−1/2}·J (module docstring)."""
    import scipy.linalg as sl

    T = len(u)
    half = Q / np.sqrt(np.sqrt(kappa))  # half·halfᵀ = K^{−1/2} = |S|
    k = 1.0 / np.sqrt(u)
    half *= k[:, None]
    Y = half @ half.T
    Y = 0.5 * (Y + Y.T)
    lower = sl.cholesky(Y, lower=True)
    C = np.ascontiguousarray(lower.T[::-1, ::-1])  # lower-triangular, CᵀC = J Y J
    A = np.tril(np.ones((T, T)))
    B = sl.solve_triangular(C.T, A.T, lower=False).T
    return np.ascontiguousarray(B), C


def optimize_dense_max(
    horizon: int,
    *,
    rtol: float = 1e-4,
    max_iterations: int = 2000,
    start: Any = None,
) -> DenseMaxOptimum:
    """The dense causal factorization of the counting matrix with the smallest max loss,
    to a certified relative gap, for T ≤ 4096 (see the module docstring).

    Iterates u ← u·(r/N)^α (renormalized, α = 2, or 1 after a setback) from ``start``
    (default: uniform) until the gap (max r)²/N(u)² − 1 ≤ ``rtol`` or
    ``max_iterations``; the best weights are kept, their causal factorization built
    and its max loss recomputed exactly, and the lower bound is
    :func:`max_loss_lower_bound` of the same weights. Cost: one O(T²) tridiagonal
    eigendecomposition per iteration (≈0.3 s at T = 1024) and an O(T³) end.

    Args:
        horizon: T in [1, 4096].
        rtol: target relative gap (> 0).
        max_iterations: iteration limit (the result is still valid; ``gap`` says how
            far from the optimum it may be).
        start: starting weights of length T (e.g. :func:`interpolate_weights` of a
            nearby horizon's), or None.

    Raises:
        ValueError: bad arguments (naming them).
    """
    T = check_integer("horizon", horizon, ge=1, le=DENSE_MAX_OPTIMUM_MAX_HORIZON)
    tol = check_real("rtol", rtol, gt=0)
    iters = check_integer("max_iterations", max_iterations, ge=1)
    begin = time.perf_counter()
    if start is None:
        u = np.full(T, 1.0 / T)
    else:
        u = _check_weights(start)
        if len(u) != T:
            raise ValueError(f"start must have horizon={T} weights, got {len(u)}")
    best_gap, best_u = math.inf, u
    alpha = _ALPHA
    it = 0
    while it < iters:
        it += 1
        try:
            n, r, _, _ = _step(u)
            gap = (float(np.max(r)) / n) ** 2 - 1.0
        except (ValueError, np.linalg.LinAlgError):  # numerically singular weights
            gap = math.nan
        if not gap <= 2.0 * best_gap:  # a setback (or NaN): back to the best, slower
            u, alpha = best_u, 1.0
            continue
        if gap < best_gap:
            best_gap, best_u = gap, u
        if gap <= tol:
            break
        with np.errstate(over="ignore", invalid="ignore"):
            u = u * (r / n) ** alpha
            u = u / float(np.sum(u))
    u = best_u
    _, _, kappa, Q = _step(u)
    if T == 1:
        B, C = np.ones((1, 1)), np.ones((1, 1))
    else:
        B, C = _causal_factors(u, kappa, Q)
    sens2 = float(np.max(np.sum(C * C, axis=0)))
    rows = np.sum(B * B, axis=1)
    return DenseMaxOptimum(
        decoder=B,
        encoder=C,
        loss=sens2 * float(np.max(rows)),
        mean_loss=sens2 * float(np.mean(rows)),
        lower_bound=max_loss_lower_bound(u),
        weights=u,
        iterations=it,
        seconds=time.perf_counter() - begin,
    )


# -- shipped optima (benchmarks/make_dense_max_optima.py) ------------------------------


def _shipped_table() -> dict[str, Any]:
    return load_table("dense_max_optima.json")


def shipped_max_optima() -> dict[int, dict[str, float]]:
    """k -> {max_loss, max_lower_bound, mean_loss, ...} of the shipped optima at T = 2^k
    (``dpcount/data/dense_max_optima.json``)."""
    return {int(k): dict(v) for k, v in _shipped_table()["dense_max_optimum"].items()}


def shipped_interpolated_max_bounds() -> dict[int, float]:
    """k -> :func:`max_loss_lower_bound` of the T = 2^12 weights
    (:func:`shipped_beyond_max_weights`) interpolated to T = 2^k, k = 13, 14 (shipped:
    ≈ 45 s at 2^14)."""
    table = _shipped_table().get("interpolated_max_lower_bound", {})
    return {int(k): float(v) for k, v in table.items()}


def shipped_beyond_max_optima() -> dict[int, dict[str, float]]:
    """k -> {max_loss, max_lower_bound, mean_loss, iterations, seconds} of the max
    optimum at T = 2^k beyond the dense mechanism's horizon (k = 12:
    :func:`optimize_dense_max` at 4096 with gap 10⁻⁴, started from the 2^11 weights
    interpolated; ≈ 13 min). Its lower bound certifies every factorization; the
    factorization itself is not built by any mechanism (``dense-max-optimum`` stops
    at :data:`DENSE_MAX_FACTORS_MAX_HORIZON`)."""
    table = _shipped_table().get("dense_max_optimum_beyond", {})
    return {int(k): {f: float(v[f]) for f in _BEYOND_FIELDS} for k, v in table.items()}


_BEYOND_FIELDS = ("max_loss", "max_lower_bound", "mean_loss", "iterations", "seconds")


@lru_cache(maxsize=1)
def shipped_beyond_max_weights() -> Array:
    """The optimal dual weights at T = 2^12 (``dpcount/data/dense_max_weights_4096.npy``,
    a copy is not made: read-only)."""
    path = resources.files("dpcount.data").joinpath("dense_max_weights_4096.npy")
    with path.open("rb") as fh:
        arr = np.load(fh)
    if arr.dtype != np.float64 or arr.shape != (4096,):
        raise RuntimeError("dense_max_weights_4096.npy does not hold the weights for T = 4096")
    arr.flags.writeable = False
    return np.asarray(arr)


@lru_cache(maxsize=1)
def _shipped_weight_array() -> Array:
    path = resources.files("dpcount.data").joinpath("dense_max_weights.npy")
    with path.open("rb") as fh:
        arr = np.load(fh)
    if arr.dtype != np.float64 or arr.shape != ((1 << (SHIPPED_MAX_LOG2 + 1)) - 1,):
        raise RuntimeError("dense_max_weights.npy does not hold the weights for T = 2^0..2^11")
    return np.asarray(arr)


def shipped_max_weights(horizon: int) -> Array | None:
    """The shipped optimal dual weights for T = ``horizon`` (a power of two ≤ 2^11), or
    None for another horizon (a copy)."""
    T = check_integer("horizon", horizon, ge=1)
    k = T.bit_length() - 1
    if 1 << k != T or k > SHIPPED_MAX_LOG2:
        return None
    return np.array(_shipped_weight_array()[T - 1 : 2 * T - 1])


def _start_weights(T: int) -> Array | None:
    """Shipped weights of the nearest shipped power of two at or above T (≤ 2^11),
    interpolated to T; None above 2^11."""
    k = max(T - 1, 1).bit_length()
    u = shipped_max_weights(1 << min(k, SHIPPED_MAX_LOG2))
    return None if u is None else interpolate_weights(u, T)


@lru_cache(maxsize=4)
def dense_max_factors(horizon: int) -> tuple[Array, Array]:
    """(B, C) of the dense max-loss optimum at ``horizon`` ≤ 2048, read-only, cached:
    rebuilt from the shipped weights (one eigendecomposition) for a power of two, else
    :func:`optimize_dense_max` (gap 10⁻⁴) started from the shipped weights of the next
    power of two, interpolated.

    Raises:
        ValueError: ``horizon`` outside [1, 2048] (naming it).
    """
    T = check_integer("horizon", horizon, ge=1, le=DENSE_MAX_FACTORS_MAX_HORIZON)
    u = shipped_max_weights(T)
    if T == 1:
        B, C = np.ones((1, 1)), np.ones((1, 1))
    elif u is not None:
        _, _, kappa, Q = _step(u)
        B, C = _causal_factors(u, kappa, Q)
    else:
        r = optimize_dense_max(T, start=_start_weights(T))
        B, C = np.array(r.decoder), np.array(r.encoder)
    B.setflags(write=False)
    C.setflags(write=False)
    return B, C
