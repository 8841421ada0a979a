"""Choosing a factorization for a horizon and an objective: BLT parameters.

Loss (McMahan et al. arXiv:2408.08868; Dvijotham et al. arXiv:2404.16706): the
per-step variance of the release divided by the variance of a sensitivity-1
Gaussian at the same (ε, δ), i.e. with the encoder's largest column norm scaled
to 1:

    loss_t = (Σ_{k<T} c_k²) · V_t,   V_t = Σ_{k<t} b_k²,

``"mean"``: (1/T)·Σ_t loss_t; ``"max"``: max_t loss_t = loss_T (V_t increases).
The σ of a calibrated mechanism is proportional to the sensitivity for every
Gaussian calibration, so minimizing the loss minimizes the error at every (ε, δ).

:func:`optimize_blt` evaluates the loss with the O(n²) closed forms of
:func:`dpcount.counting.factorization.blt.blt_losses` (independent of T's size) and minimizes
log(loss) with L-BFGS-B (scipy) over an unconstrained parameterization that
covers exactly the valid BLTs:

    θ_i = exp(−e^{x_i}),   ω_i = (1 + θ_i)·e^{y_i}/(1 + Σ_j e^{y_j}),

so θ_i ∈ (0, 1) and ω_i > 0 with Σ ω_i/(1 + θ_i) < 1. Gradients are central
finite differences (scipy's ``"3-point"``).

Deterministic start: the decays' rates e^{x_i} = −ln θ_i geometrically spaced
over [1/T, 1] and ω_i ∝ √(−ln θ_i) (a quadrature of
k^{−1/2} = π^{−1/2}∫ e^{−uk}u^{−1/2}du, the square-root factorization's shape), plus
optional extra starts (``starts``); the best result is kept.

Stopping rule: L-BFGS-B stops when the relative reduction of log(loss) in an
iteration is below ``ftol`` (1e-13) or the largest projected-gradient entry is below
``gtol`` (1e-9); at most ``max_iterations`` iterations per run. A run that stops for
another reason (e.g. a line search that cannot progress on finite-difference
noise) is restarted once from its end point; the result is accepted if that
restart changes the loss by less than 1e-8 relative, else :func:`optimize_blt`
raises a RuntimeError naming ``max_iterations``.

Mean loss under a max-loss limit (``max_loss_limit``): log(mean loss) plus
w·max(0, log(max loss / (limit·(1 − 10⁻⁶))))², with w = 10², 10⁴, …, 10¹⁰ in turn,
each run from the previous one's end with the same per-run stopping rule; the end
point is accepted only if the closed forms give max loss ≤ limit. The square root's
max loss appears to be the smallest of any Toeplitz factorization (checked
numerically; a BLT approaches it from above as buffers are added), so a limit below
it is refused.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcount._scipy import minimize
from dpcount._validate import check_choice, check_integer, check_real
from dpcount.counting.factorization._types import Array
from dpcount.counting.factorization.blt import blt_losses, check_blt_parameters

__all__ = ["BLTOptimum", "DenseOptimum", "blt_loss", "optimize_blt", "optimize_dense"]

OBJECTIVES = ("mean", "max")
_FTOL = 1e-11
_GTOL = 1e-8
_ACCEPT = 1e-8
_DENSE_POWER = 3


@dataclass(frozen=True)
class BLTOptimum:
    """An optimized BLT: parameters, its loss, and how the optimizer ended.

    Attributes:
        horizon: T the loss was optimized for.
        objective: ``"mean"`` or ``"max"``.
        buffer_decay, output_scale: the parameters (θ sorted increasingly).
        loss: the objective's loss at T (closed form).
        mean_loss, max_loss: both losses at T.
        iterations: L-BFGS-B iterations over all runs.
        evaluations: loss evaluations.
        seconds: wall time.
        message: the last L-BFGS-B message.
    """

    horizon: int
    objective: str
    buffer_decay: list[float]
    output_scale: list[float]
    loss: float
    mean_loss: float
    max_loss: float
    iterations: int
    evaluations: int
    seconds: float
    message: str = field(default="")


def blt_loss(buffer_decay: Any, output_scale: Any, horizon: int, objective: str = "mean") -> float:
    """The mean or max loss of BLT(θ, ω) at ``horizon`` (closed form, O(n²))."""
    check_choice("objective", objective, OBJECTIVES)
    losses = blt_losses(buffer_decay, output_scale, horizon)
    return losses.mean_loss if objective == "mean" else losses.max_loss


def _unpack(v: Array) -> tuple[Array, Array]:
    n = len(v) // 2
    rate = np.exp(v[:n])
    theta = np.exp(-rate)
    share = np.exp(v[n:])
    omega = (1.0 + theta) * share / (1.0 + float(np.sum(share)))
    return theta, omega


def _pack(theta: Array, omega: Array) -> Array:
    rate = -np.log(theta)
    p = omega / (1.0 + theta)
    s = float(np.sum(p))
    return np.concatenate([np.log(rate), np.log(p / (1.0 - s))])


def _default_start(horizon: int, buffers: int) -> Array:
    T = max(horizon, 2)
    rate = np.exp(np.linspace(math.log(1.0 / T), 0.0, buffers))
    step = math.log(T) / max(buffers - 1, 1)
    omega = np.sqrt(rate) * step / math.pi
    theta = np.exp(-rate)
    p = omega / (1.0 + theta)
    if p.sum() >= 0.9:
        p *= 0.9 / p.sum()
    return _pack(theta, p * (1.0 + theta))


class _Objective:
    """log(loss), plus ``weight``·max(0, log(max_loss/limit))² when a limit is set."""

    def __init__(self, horizon: int, objective: str, limit: float | None = None) -> None:
        self.horizon = horizon
        self.mean = objective == "mean"
        self.evaluations = 0
        self.log_limit = None if limit is None else math.log(limit)
        self.weight = 0.0

    def __call__(self, v: Array) -> float:
        self.evaluations += 1
        theta, omega = _unpack(v)
        try:
            losses = blt_losses(theta, omega, self.horizon)
        except ValueError:  # decays merged or left (0, 1) in floating point
            return 1e6
        loss = losses.mean_loss if self.mean else losses.max_loss
        if not (loss > 0 and math.isfinite(loss) and losses.max_loss > 0):
            return 1e6
        value = math.log(loss)
        if self.log_limit is not None:
            excess = max(0.0, math.log(losses.max_loss) - self.log_limit)
            value += self.weight * excess * excess
        return value


def _run(fun: _Objective, v0: Array, max_iterations: int) -> tuple[Array, float, int, bool, str]:
    res = minimize(
        fun,
        v0,
        method="L-BFGS-B",
        jac="3-point",
        bounds=[(-60.0, 5.0)] * (len(v0) // 2) + [(-60.0, 40.0)] * (len(v0) // 2),
        options={"maxiter": max_iterations, "ftol": _FTOL, "gtol": _GTOL, "maxcor": 20},
    )
    return np.asarray(res.x), float(res.fun), int(res.nit), bool(res.success), str(res.message)


def optimize_blt(
    horizon: int,
    *,
    buffers: int = 4,
    objective: str = "mean",
    starts: list[tuple[Any, Any]] | None = None,
    max_iterations: int = 3000,
    max_loss_limit: float | None = None,
) -> BLTOptimum:
    """BLT parameters minimizing the mean or max loss at ``horizon`` (see the module
    docstring for the parameterization, start and stopping rule).

    With ``max_loss_limit`` (mean objective only) it minimizes the mean loss subject to
    max loss ≤ ``max_loss_limit`` by a quadratic penalty on the excess of log(max loss)
    over log(limit·(1 − 10⁻⁶)), with weights 10², 10⁴, 10⁶, 10⁸, 10¹⁰, each run started
    from the previous one's end (same stopping rule per run). The result is checked
    with the closed forms: its max loss is ≤ ``max_loss_limit``, or a RuntimeError
    names ``max_loss_limit`` (e.g. a limit below what the buffers can reach: no
    Toeplitz factorization beats the square root's max loss, see docs/blt.md).

    Args:
        horizon: T ≥ 1.
        buffers: number of buffers n ≥ 1.
        objective: ``"mean"`` or ``"max"``.
        starts: extra starting points (buffer_decay, output_scale) of length n, e.g.
            the optimum of a nearby horizon; the default start is always tried.
        max_iterations: L-BFGS-B iteration limit per run.
        max_loss_limit: an upper bound on the max loss (mean objective), or None.

    Raises:
        ValueError: bad arguments (naming them).
        RuntimeError: no run met the stopping rule within ``max_iterations``, or
            no point found meets ``max_loss_limit``.
    """
    T = check_integer("horizon", horizon, ge=1)
    n = check_integer("buffers", buffers, ge=1, le=16)
    check_choice("objective", objective, OBJECTIVES)
    iters = check_integer("max_iterations", max_iterations, ge=1)
    if max_loss_limit is not None:
        check_real("max_loss_limit", max_loss_limit, gt=0)
        if objective != "mean":
            raise ValueError(f"max_loss_limit needs objective='mean', got objective={objective!r}")
        return _optimize_constrained(T, n, float(max_loss_limit), starts, iters)
    begin = time.perf_counter()
    points = _start_points(T, n, starts)
    fun = _Objective(T, objective)
    best: tuple[Array, float] | None = None
    total_iterations, message = 0, ""
    for v0 in points:
        v, f, nit, ok, message = _run(fun, v0, iters)
        total_iterations += nit
        if not ok:
            v2, f2, nit2, ok2, message = _run(fun, v, iters)
            total_iterations += nit2
            if not (ok2 or abs(f2 - f) < _ACCEPT):
                continue
            v, f = (v2, f2) if f2 < f else (v, f)
        if best is None or f < best[1]:
            best = (v, f)
    if best is None:
        raise RuntimeError(
            f"optimize_blt did not converge within max_iterations={iters} for horizon={T}, "
            f"buffers={n}, objective={objective!r}: {message}"
        )
    return _result(T, objective, best[0], total_iterations, fun.evaluations, begin, message)


def _start_points(T: int, n: int, starts: list[tuple[Any, Any]] | None) -> list[Array]:
    """The runs' starting points: the default start, then each of ``starts`` (checked,
    with n buffers each)."""
    points = [_default_start(T, n)]
    for decay, scale in starts or []:
        theta, omega = check_blt_parameters(decay, scale)
        if len(theta) != n:
            raise ValueError(f"starts must have {n} buffers each, got {len(theta)}")
        points.append(_pack(theta, omega))
    return points


def _result(
    T: int, objective: str, v: Array, iterations: int, evaluations: int, begin: float, message: str
) -> BLTOptimum:
    theta, omega = check_blt_parameters(*_unpack(v))
    losses = blt_losses(theta, omega, T)
    return BLTOptimum(
        horizon=T,
        objective=objective,
        buffer_decay=theta.tolist(),
        output_scale=omega.tolist(),
        loss=losses.mean_loss if objective == "mean" else losses.max_loss,
        mean_loss=losses.mean_loss,
        max_loss=losses.max_loss,
        iterations=iterations,
        evaluations=evaluations,
        seconds=time.perf_counter() - begin,
        message=message,
    )


_PENALTY_WEIGHTS = (1e2, 1e4, 1e6, 1e8, 1e10)
_LIMIT_MARGIN = 1e-6


def _optimize_constrained(
    T: int, n: int, limit: float, starts: list[tuple[Any, Any]] | None, iters: int
) -> BLTOptimum:
    """Mean loss subject to max loss ≤ limit (see :func:`optimize_blt`)."""
    begin = time.perf_counter()
    points = _start_points(T, n, starts)
    fun = _Objective(T, "mean", limit * (1.0 - _LIMIT_MARGIN))
    best: tuple[Array, float] | None = None
    total_iterations, message = 0, ""
    closest = math.inf
    for v in points:
        for weight in _PENALTY_WEIGHTS:
            fun.weight = weight
            v, _, nit, _, message = _run(fun, v, iters)
            total_iterations += nit
        try:
            losses = blt_losses(*_unpack(v), T)
        except ValueError:  # the run left the valid BLTs in floating point
            continue
        closest = min(closest, losses.max_loss)
        if losses.max_loss <= limit and (best is None or losses.mean_loss < best[1]):
            best = (v, losses.mean_loss)
    if best is None:
        raise RuntimeError(
            f"optimize_blt found no BLT with {n} buffers and max loss <= "
            f"max_loss_limit={limit!r} at horizon={T} (closest: {closest!r})"
        )
    return _result(T, "mean", best[0], total_iterations, fun.evaluations, begin, message)


# -- the dense optimum (small T) ----------------------------------------------------------


@dataclass(frozen=True)
class DenseOptimum:
    """A dense factorization A = B·C minimizing the mean loss (to a certified gap, see
    :func:`optimize_dense`), with C lower-triangular (causal, streamable).

    Attributes:
        decoder: B = A·C⁻¹ (T × T, lower-triangular).
        encoder: C (T × T, lower-triangular), largest column norm 1.
        loss: the mean loss of exactly this (B, C): max_j ‖C[:, j]‖² · mean_t ‖B[t, :]‖².
        iterations, seconds, diagonal_error: how the iteration ended
            (diagonal_error = max |X(v)_ii − 1| of the last multipliers v, zero at the
            optimum).
        lower_bound: a lower bound on the mean loss of *every* factorization of A with
            largest column norm 1 (the Lagrange dual value at the best multipliers), so
            ``loss / lower_bound − 1`` bounds how far ``loss`` is from optimal.
    """

    decoder: Array
    encoder: Array
    loss: float
    iterations: int
    seconds: float
    diagonal_error: float
    lower_bound: float = 0.0


def _dense_multiplier_step(v: Array) -> tuple[Array, Array, Array]:
    """Eigen-decomposition of M(v)⁻¹, M(v) = V^{1/2}·AᵀA·V^{1/2}, and diag X(v).

    (AᵀA)⁻¹ = A⁻¹A⁻ᵀ is tridiagonal (A⁻¹ is bidiagonal: 1 on the diagonal, −1 below):
    diagonal (1, 2, …, 2), off-diagonal −1. So M⁻¹ = V^{−1/2}(AᵀA)⁻¹V^{−1/2} is
    tridiagonal too and :func:`scipy.linalg.eigh_tridiagonal` gives M⁻¹ = U·diag(λ)·Uᵀ
    in O(T²) (MRRR) instead of O(T³) for the dense M. Then
    X(v) = V^{−1/2}·M^{1/2}·V^{−1/2} has diagonal X_ii = Σ_k U_ik² λ_k^{−1/2} / v_i.
    Returns (λ, U, diag X).
    """
    import scipy.linalg as sl

    T = len(v)
    diagonal = np.full(T, 2.0)
    diagonal[0] = 1.0
    lam, U = sl.eigh_tridiagonal(diagonal / v, -1.0 / np.sqrt(v[:-1] * v[1:]))
    d = (U * U) @ (1.0 / np.sqrt(lam)) / v
    return lam, U, d


def optimize_dense(
    horizon: int, *, objective: str = "mean", max_iterations: int = 100, rtol: float = 1e-6
) -> DenseOptimum:
    """The optimal dense factorization for the mean loss, for T ≤ 2048.

    Minimizes tr(AᵀA·X⁻¹) over Gram matrices X = CᵀC with diag(X) ≤ 1, a convex
    problem whose optimum satisfies X·V·X = AᵀA for a diagonal V ≥ 0 (the
    Lagrange multipliers of the diagonal constraint; Denisov, McMahan, Rush, Smith,
    Thakurta 2022, arXiv:2202.08312, §4; McKenna et al. 2021), i.e.
    X(v) = V^{−1/2}(V^{1/2}AᵀAV^{1/2})^{1/2}V^{−1/2}. The multipliers are found by the
    fixed-point iteration v ← v ∘ diag(X(v))³ (the exponent 3 converges faster than
    2 here, 4 oscillates), each step one eigendecomposition of the *tridiagonal*
    M(v)⁻¹ (:func:`_dense_multiplier_step`, O(T²)).

    Each iterate gives two numbers:

    * a feasible point: X(v) rescaled to unit diagonal, X′ = D^{−1/2}X(v)D^{−1/2}
      (D = diag X(v)), whose loss tr(AᵀA·X′⁻¹)/T is computed from
      X′⁻¹ = D^{1/2}V^{1/2}·U·diag(λ^{1/2})·Uᵀ·V^{1/2}D^{1/2} (one O(T³) product);
    * a lower bound on every feasible loss, the Lagrange dual value
      (2·tr(M(v)^{1/2}) − Σ v_i)/T = (2·Σ_k λ_k^{−1/2} − Σ v_i)/T (weak duality:
      tr(AᵀA·X⁻¹) + Σ v_i(X_ii − 1) ≥ that value for every X ≻ 0, with equality at
      X(v)).

    Stopping rule: the relative duality gap (best feasible loss − best lower bound) /
    best feasible loss is at most ``rtol``, or ``max_iterations`` iterations (then
    the result is still a valid factorization, and ``lower_bound`` says how far from
    the optimum it may be). The best feasible point is returned, its C the
    lower-triangular factor with X′ = CᵀC (the Cholesky factor of the reversed
    matrix, reversed), so the pair is causal; B = A·C⁻¹ by a triangular solve and
    the returned loss is recomputed exactly from (B, C).

    Raises:
        ValueError: horizon outside [1, 2048] or an objective other than "mean".
    """
    import scipy.linalg as sl

    T = check_integer("horizon", horizon, ge=1, le=2048)
    check_choice("objective", objective, ("mean",))
    iters = check_integer("max_iterations", max_iterations, ge=1)
    begin = time.perf_counter()
    idx = np.arange(T)
    gram = (T - np.maximum.outer(idx, idx)).astype(np.float64)  # AᵀA
    v = np.ones(T)
    best_loss, best_v, lower = math.inf, v, -math.inf
    error = math.inf
    it = 0
    while it < iters:
        it += 1
        lam, U, d = _dense_multiplier_step(v)
        error = float(np.max(np.abs(d - 1.0)))
        lower = max(lower, (2.0 * float(np.sum(1.0 / np.sqrt(lam))) - float(np.sum(v))) / T)
        half = U * np.sqrt(np.sqrt(lam))  # half·halfᵀ = M^{−1/2}
        inverse = half @ half.T
        k = np.sqrt(v * d)
        inverse *= k[:, None]
        inverse *= k[None, :]  # X′⁻¹
        loss = float(np.sum(gram * inverse)) / T
        if loss < best_loss:
            best_loss, best_v = loss, v
        if best_loss - lower <= rtol * best_loss:
            break
        v = v * d**_DENSE_POWER
    lam, U, d = _dense_multiplier_step(best_v)
    half = U / np.sqrt(np.sqrt(lam))  # half·halfᵀ = M^{1/2}
    X = half @ half.T
    k = np.sqrt(best_v * d)
    X /= k[:, None]
    X /= k[None, :]  # X′, unit diagonal
    X = 0.5 * (X + X.T)
    lower_factor = sl.cholesky(X[::-1, ::-1], lower=True)
    C = np.ascontiguousarray(lower_factor.T[::-1, ::-1])  # lower-triangular, X′ = CᵀC
    A = np.tril(np.ones((T, T)))
    B = sl.solve_triangular(C.T, A.T, lower=False).T
    sens2 = float(np.max(np.sum(C * C, axis=0)))
    exact = sens2 * float(np.mean(np.sum(B * B, axis=1)))
    return DenseOptimum(
        decoder=B,
        encoder=C,
        loss=exact,
        iterations=it,
        seconds=time.perf_counter() - begin,
        diagonal_error=error,
        lower_bound=lower,
    )
