"""Optimized (banded) Toeplitz factorizations of the counting matrix.

The counting matrix A (all-ones, lower-triangular, T×T) is factored as A = B·C with
the **encoder** C the lower-triangular Toeplitz matrix of coefficients
c_0, …, c_{n−1} (``bands`` = n ≤ T, c_0 > 0, c_k = 0 for k ≥ n) and the **decoder**
B = A·C⁻¹. Choquette-Choo, Dvijotham, Pillutla, Ganesh, Steinke, Thakurta,
"Correlated noise provably beats independent noise for differentially private
learning" (ICLR 2024, arXiv:2310.06771) optimize such Toeplitz encoders; McKenna,
"Scaling up the banded matrix factorization mechanism for differentially private
ML" (arXiv:2405.15913) and Kalinin, Lampert "Banded square root matrix
factorization for differentially private model training" (arXiv:2405.13763) use
banded ones.

Notation (paper → code):

=============  ===================================================================
c_k            ``coefficients`` (encoder C, lower-triangular Toeplitz)
d_k            coefficients of C⁻¹: the power series 1/c(x) truncated to T terms,
               :func:`toeplitz_inverse_coefficients`
b_k            decoder B = A·C⁻¹, Toeplitz with b = cumsum(d)
V_t            per-step noise coefficient Σ_{k<t} b_k² (variance / σ²)
sens²          squared ℓ₂ sensitivity Σ_{k<min(n,T)} c_k² (the first column of C)
=============  ===================================================================

Why the first column: column j of C holds c_0, …, c_{T−1−j}, a prefix of the first
column, so its ℓ₁ and ℓ₂ norms are at most the first column's, whatever the signs.

Losses (single participation; McMahan et al. arXiv:2408.08868 units): the variance
divided by that of a sensitivity-1 Gaussian at the same (ε, δ),

    mean loss = sens² · (1/T)·Σ_{t=1}^{T} V_t = sens² · Σ_{k<T} b_k²·(T − k)/T,
    max loss  = sens² · V_T = sens² · Σ_{k<T} b_k²   (V_t increases in t).

(k, b)-participation (each user contributes to at most k steps, at least b apart) of
a banded encoder with n ≤ b bands: two columns at least b ≥ n apart have disjoint
supports, so a user's k columns are orthogonal and the squared sensitivity is at
most k·Σ c_j² (exactly that when k columns fit: (k − 1)·b + n ≤ T). The losses then
scale by k (:func:`banded_participation_loss`). Without bands ≤ b the columns
overlap and this bound does not hold (refused).

:func:`optimize_toeplitz` minimizes log(loss) over c_1, …, c_{n−1} with c_0 = 1 (the
loss is invariant to scaling c) by L-BFGS-B (scipy) with analytic gradients, each
evaluation O(T log T) by FFT convolutions; see its docstring for the start and the
stopping rule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.fft as sfft

from dpcount._scipy import lfilter, minimize
from dpcount._state import state_array
from dpcount._validate import check_choice, check_integer, check_real_array
from dpcount.counting._chunked import ChunkedNoiseProcess, read_sum, sum_state
from dpcount.counting.base import (
    MAX_HORIZON,
    MAX_NOISE_COEFFICIENT,
    CountingMechanism,
    MemoryEstimate,
    step_bytes,
)
from dpcount.counting.factorization._losses import Losses
from dpcount.counting.factorization._types import Array
from dpcount.counting.factorization.sqrt import SENSITIVITY_MARGIN, SqrtNoiseProcess
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients
from dpcount.counting.participation import Sensitivity, toeplitz_sensitivities
from dpcount.privacy.budget import Budget, BudgetFields, NoiseKind, Participation
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ToeplitzFactorization",
    "ToeplitzLosses",
    "ToeplitzNoiseProcess",
    "ToeplitzOptimum",
    "banded_participation_loss",
    "check_toeplitz_coefficients",
    "optimize_toeplitz",
    "optimized_coefficients",
    "toeplitz_inverse_coefficients",
    "toeplitz_losses",
]

OBJECTIVES = ("mean", "max")
#: up to this many coefficients C⁻¹ comes from the recursion, beyond by Newton/FFT
_RECURSION_BANDS = 64
#: scalar streams with more bands compute B z by FFT convolution instead of the filter
_FILTER_BANDS = 512
#: largest horizon :meth:`ToeplitzFactorization.optimized` optimizes for
MAX_OPTIMIZED_HORIZON = 1 << 16
#: largest horizon of vector steps (the all-pole filter, :class:`ToeplitzNoiseProcess`):
#: the float model's ratio (``benchmarks/float_model_long.py``, vector batch, max over
#: seeds 1–3) is ≤ 29.7 at 2^15 but 86.8 > κ/4 = 64 at 2^16 (seed 3; 50.3 and 44.9 for
#: seeds 1 and 2) on an AMD EPYC machine, 2026-12-07 (61 where it was first measured).
#: Scalar steps with more than 512 bands take the FFT convolution: 2.9–3.3 at 2^16.
VECTOR_FILTER_MAX_HORIZON = 1 << 15


def check_toeplitz_coefficients(coefficients: Any, horizon: int | None = None) -> Array:
    """Validate encoder coefficients c_0, …, c_{n−1}: finite reals, c_0 > 0, n ≤ horizon.

    Raises:
        TypeError: non-numeric ``coefficients``.
        ValueError: naming ``coefficients``: not 1-D, empty, not finite, c_0 ≤ 0,
            or more coefficients than the horizon.
    """
    c = check_real_array("coefficients", coefficients, ndim=1)
    if not c[0] > 0:
        raise ValueError(f"coefficients[0] must be > 0, got {float(c[0])!r}")
    largest = float(np.max(np.abs(c)))
    if not 2.0**-500 <= largest <= 2.0**500:
        raise ValueError(
            f"coefficients must have their largest magnitude within [2^-500, 2^500] (so "
            f"the squared norm is a finite, nonzero float64), got {largest!r}; rescale them"
        )
    if horizon is not None and len(c) > horizon:
        raise ValueError(
            f"coefficients must have at most horizon={horizon} entries (bands <= horizon), "
            f"got {len(c)}"
        )
    return c


def _convolve(a: Array, b: Array, n: int) -> Array:
    """The first n terms of the full convolution a * b (one real FFT)."""
    a, b = a[:n], b[:n]
    size = sfft.next_fast_len(len(a) + len(b) - 1, real=True)
    out: Array = sfft.irfft(sfft.rfft(a, size) * sfft.rfft(b, size), size)[:n]
    return out


def toeplitz_inverse_coefficients(coefficients: Any, horizon: int) -> Array:
    """d_0, …, d_{T−1}: the lower-triangular Toeplitz C⁻¹ (the series 1/c(x) mod x^T).

    For at most 64 coefficients by the recursion d_k = −(Σ_{i=1}^{min(k,n−1)} c_i
    d_{k−i})/c_0 (:func:`scipy.signal.lfilter` of an impulse), O(T·n). Otherwise
    Newton's iteration g ← g·(2 − c·g) mod x^{2m} doubles the number of correct
    terms each round, O(T log T) with FFT products (Cook 1966; see Knuth, TAOCP
    vol. 2, §4.7); exact in exact arithmetic, in floating point accurate to a few
    ulps of the largest partial product. d_0 = 1/c_0 and Σ_{i≤k} c_i d_{k−i} = 0
    for k ≥ 1.
    """
    T = check_integer("horizon", horizon, ge=1)
    given = check_toeplitz_coefficients(coefficients)[:T]
    if len(given) <= _RECURSION_BANDS:  # the recursion, O(T·n), is cheaper here
        impulse = np.zeros(T)
        impulse[0] = 1.0
        out: Array = lfilter([1.0], given, impulse)
        return out
    c = np.zeros(T)
    c[: len(given)] = given
    g = np.array([1.0 / c[0]])
    m = 1
    while m < T:
        m2 = min(2 * m, T)
        e = -_convolve(c, g, m2)
        e[0] += 2.0
        g = _convolve(g, e, m2)
        m = m2
    return g


@dataclass(frozen=True)
class ToeplitzLosses(Losses):
    """Exact quantities of C = Toeplitz(c) at a horizon (unit sample variance).

    Attributes:
        sensitivity_squared: Σ_{k<min(n,T)} c_k² (first column of C).
        l1_sensitivity: Σ_{k<min(n,T)} |c_k|.
        mean_variance: (1/T)·Σ_t V_t = Σ_{k<T} b_k²·(T − k)/T.
        max_variance: V_T = Σ_{k<T} b_k².
    """

    sensitivity_squared: float
    l1_sensitivity: float
    mean_variance: float
    max_variance: float


def _decoder(c: Array, T: int) -> Array:
    return np.cumsum(toeplitz_inverse_coefficients(c, T))


def toeplitz_losses(coefficients: Any, horizon: int) -> ToeplitzLosses:
    """Sensitivities and mean/max variance of the Toeplitz encoder ``coefficients`` at
    ``horizon`` (see the module docstring), O(T log T)."""
    T = check_integer("horizon", horizon, ge=1)
    c = check_toeplitz_coefficients(coefficients)[:T]
    b = _decoder(c, T)
    b2 = b * b
    weights = (T - np.arange(T, dtype=np.float64)) / T
    return ToeplitzLosses(
        sensitivity_squared=math.fsum((c * c).tolist()),
        l1_sensitivity=math.fsum(np.abs(c).tolist()),
        mean_variance=float(np.sum(b2 * weights)),
        max_variance=float(np.sum(b2)),
    )


def banded_participation_loss(
    coefficients: Any,
    horizon: int,
    *,
    participations: int,
    min_separation: int,
    objective: str = "mean",
) -> float:
    """The mean or max loss of a banded Toeplitz encoder under (k, b)-participation.

    With n = len(coefficients) ≤ b = ``min_separation``, the k ≤ ``participations``
    columns one user touches are at least b ≥ n apart, so their supports are disjoint
    and the squared ℓ₂ sensitivity of C·x is at most k·Σ c_j² (equality when k columns
    fit, (k − 1)·b + n ≤ T; otherwise an upper bound). The loss is therefore k times
    the single-participation loss (Choquette-Choo et al. 2023, arXiv:2306.08153, §4 on
    b-banded matrices; McKenna 2024, arXiv:2405.15913).

    Raises:
        ValueError: naming the parameter: more bands than ``min_separation`` (the
            columns would overlap and the bound would not hold), or a schema that
            cannot exist (k participations b apart do not fit in the horizon).
    """
    T = check_integer("horizon", horizon, ge=1)
    k = check_integer("participations", participations, ge=1)
    sep = check_integer("min_separation", min_separation, ge=1)
    check_choice("objective", objective, OBJECTIVES)
    c = check_toeplitz_coefficients(coefficients, T)
    if len(c) > sep:
        raise ValueError(
            f"coefficients has {len(c)} bands, more than min_separation={sep}: the columns a "
            "user touches would overlap and k·‖c‖² would not bound the sensitivity"
        )
    if (k - 1) * sep + 1 > T:
        raise ValueError(
            f"participations={k} at least min_separation={sep} apart do not fit in "
            f"horizon={T} (need (k - 1)·b + 1 <= T)"
        )
    losses = toeplitz_losses(c, T)
    return k * (losses.mean_loss if objective == "mean" else losses.max_loss)


# -- the optimizer -------------------------------------------------------------------------


@dataclass(frozen=True)
class ToeplitzOptimum:
    """Optimized Toeplitz encoder coefficients and how the optimizer ended.

    Attributes:
        horizon: T the loss was optimized for.
        objective: ``"mean"`` or ``"max"``.
        bands: n, the number of coefficients.
        coefficients: c_0 = 1, c_1, …, c_{n−1}.
        loss: the objective's single-participation loss at T (exact, recomputed).
        mean_loss, max_loss: both losses at T.
        iterations: L-BFGS-B iterations over all runs.
        evaluations: loss-and-gradient evaluations.
        converged: the stopping rule was met.
        stopping_rule: the rule, in words.
        seconds: wall time.
        message: the last L-BFGS-B message.
    """

    horizon: int
    objective: str
    bands: int
    coefficients: list[float]
    loss: float
    mean_loss: float
    max_loss: float
    iterations: int
    evaluations: int
    converged: bool
    stopping_rule: str
    seconds: float
    message: str


class _LogLoss:
    """log(loss) and its gradient in c_1..c_{n−1} (c_0 = 1), O(T log T) per call.

    L = S·Q, S = Σ c², Q = Σ_k w_k b_k², b = cumsum(d), d = 1/c mod x^T.
    ∂Q/∂d_k = Σ_{j≥k} 2 w_j b_j (reverse cumulative sum); δd = −d * δc * d, so
    ∂Q/∂c_i = −Σ_m e_m · (∂Q/∂d)_{m+i} with e = d * d mod x^T (a correlation).
    """

    def __init__(self, horizon: int, bands: int, objective: str) -> None:
        self.T = horizon
        self.n = bands
        T = horizon
        self.w = (T - np.arange(T, dtype=np.float64)) / T if objective == "mean" else np.ones(T)
        self.evaluations = 0

    def coefficients(self, x: Array) -> Array:
        return np.concatenate([[1.0], x])

    def __call__(self, x: Array) -> tuple[float, Array]:
        self.evaluations += 1
        T, n = self.T, self.n
        c = self.coefficients(x)
        d = toeplitz_inverse_coefficients(c, T)
        b = np.cumsum(d)
        S = float(np.dot(c, c))
        Q = float(np.dot(self.w, b * b))
        if not (math.isfinite(Q) and Q > 0 and math.isfinite(S)):
            return 1e6, np.zeros_like(x)
        gd = 2.0 * np.cumsum((self.w * b)[::-1])[::-1]
        e = _convolve(d, d, T)
        # corr_i = Σ_m e_m gd_{m+i} for i < n: the convolution of e with gd reversed.
        size = sfft.next_fast_len(2 * T - 1, real=True)
        full = sfft.irfft(sfft.rfft(e, size) * sfft.rfft(gd[::-1], size), size)
        corr = full[T - 1 : T - 1 - n : -1] if n < T else full[T - 1 :: -1][:n]
        grad_q = -corr[1:n]
        grad = 2.0 * c[1:] / S + grad_q / Q
        return math.log(S) + math.log(Q), grad


_STOPPING_RULE = (
    "L-BFGS-B stops when the relative reduction of log(loss) in an iteration is "
    "below ftol={ftol:g} or every gradient entry is below gtol={gtol:g} in absolute "
    "value; a run ending otherwise (a line search that cannot progress at floating-point "
    "precision) is restarted once from its end point and accepted if the restart "
    "changes log(loss) by less than {accept:g}"
)


def optimize_toeplitz(
    horizon: int,
    *,
    objective: str = "mean",
    bands: int | None = None,
    start: Any = None,
    max_iterations: int = 5000,
    ftol: float = 1e-12,
    gtol: float = 1e-7,
) -> ToeplitzOptimum:
    """Toeplitz encoder coefficients minimizing the mean or max loss at ``horizon``.

    Minimizes log(Σ c² · Σ_k w_k b_k²) (see the module docstring; w_k = (T − k)/T
    for the mean, 1 for the max) over c_1, …, c_{n−1} with c_0 = 1 by L-BFGS-B with
    the analytic gradient (:class:`_LogLoss`), following Choquette-Choo et al.
    (arXiv:2310.06771) in optimizing the Toeplitz coefficients directly. The loss is
    not convex in c, so the result is a local optimum from the deterministic start:
    the square-root factorization's coefficients f(0..n−1) (constant-matters
    Algorithm 1, arXiv:2202.11205), truncated to n bands, or ``start``.

    Stopping rule: L-BFGS-B's — the relative reduction of log(loss) in an iteration
    is below ``ftol``, or the largest gradient entry below ``gtol``; at most
    ``max_iterations`` iterations. A run that stops for another reason is restarted
    once from its end point and accepted if the restart changes log(loss) by less
    than 1e-9; otherwise RuntimeError.

    Args:
        horizon: T ≥ 1.
        objective: ``"mean"`` or ``"max"``.
        bands: n, 1 ≤ n ≤ T (None: T, a full Toeplitz matrix).
        start: starting coefficients of length n (scaled so c_0 = 1), or None.
        max_iterations: L-BFGS-B iteration limit per run.
        ftol, gtol: the stopping tolerances above.

    Raises:
        ValueError: bad arguments (naming them).
        RuntimeError: the stopping rule was not met within ``max_iterations``.
    """
    T = check_integer("horizon", horizon, ge=1)
    check_choice("objective", objective, OBJECTIVES)
    n = T if bands is None else check_integer("bands", bands, ge=1, le=T)
    iters = check_integer("max_iterations", max_iterations, ge=1)
    begin = time.perf_counter()
    if start is None:
        c0 = sqrt_coefficients(n)
    else:
        c0 = check_toeplitz_coefficients(start, T)
        if len(c0) != n:
            raise ValueError(f"start must have bands={n} entries, got {len(c0)}")
        c0 = c0 / c0[0]
    fun = _LogLoss(T, n, objective)
    accept = 1e-9
    rule = _STOPPING_RULE.format(ftol=ftol, gtol=gtol, accept=accept)
    x = c0[1:].copy()
    total, message, converged = 0, "bands=1: nothing to optimize", True
    if n > 1:
        options = {"maxiter": iters, "ftol": ftol, "gtol": gtol, "maxcor": 20}
        res = minimize(fun, x, jac=True, method="L-BFGS-B", options=options)
        total, message, converged = int(res.nit), str(res.message), bool(res.success)
        x, f = np.asarray(res.x), float(res.fun)
        if not converged:
            res2 = minimize(fun, x, jac=True, method="L-BFGS-B", options=options)
            total += int(res2.nit)
            message = str(res2.message)
            converged = bool(res2.success) or abs(float(res2.fun) - f) < accept
            if float(res2.fun) < f:
                x = np.asarray(res2.x)
        if not converged:
            raise RuntimeError(
                f"optimize_toeplitz did not converge within max_iterations={iters} for "
                f"horizon={T}, bands={n}, objective={objective!r}: {message}"
            )
    c = np.concatenate([[1.0], x])
    losses = toeplitz_losses(c, T)
    return ToeplitzOptimum(
        horizon=T,
        objective=objective,
        bands=n,
        coefficients=c.tolist(),
        loss=losses.mean_loss if objective == "mean" else losses.max_loss,
        mean_loss=losses.mean_loss,
        max_loss=losses.max_loss,
        iterations=total,
        evaluations=fun.evaluations,
        converged=converged,
        stopping_rule=rule,
        seconds=time.perf_counter() - begin,
        message=message,
    )


@lru_cache(maxsize=16)
def _optimized_cached(horizon: int, objective: str, bands: int | None) -> tuple[float, ...]:
    return tuple(optimize_toeplitz(horizon, objective=objective, bands=bands).coefficients)


def optimized_coefficients(
    horizon: int, objective: str = "mean", bands: int | None = None
) -> tuple[float, ...]:
    """The coefficients :meth:`ToeplitzFactorization.optimized` uses (computed once per
    ``(horizon, objective, bands)`` and shared with it)."""
    return _optimized_cached(horizon, objective, bands)


# -- the noise process ---------------------------------------------------------------------


class ToeplitzNoiseProcess(ChunkedNoiseProcess):
    """(B z)_t = Σ_{s≤t} w_s with w = C⁻¹ z, for one stream, in O(n·dim) state.

    w_t = (z_t − Σ_{i=1}^{n−1} c_i w_{t−i})/c_0 is the all-pole filter 1/c(x) applied
    to z (:func:`scipy.signal.lfilter`, whose n − 1 delay values are the state), and
    the noise is the running sum of w. State between steps: the filter's n − 1 values
    and the running sum, (n·dim floats), plus computed unreleased noise for scalar
    streams (``next()`` computes 4096 steps at once). Blocks cost O(block·n).
    """

    def __init__(self, coefficients: Array, horizon: int, source: NoiseBuffer) -> None:
        super().__init__(horizon, source)
        self.coefficients = coefficients
        tail: tuple[int, ...] = () if self.dim is None else (self.dim,)
        self._tail = tail
        self._n = len(coefficients)
        self._zi: Array = np.zeros((max(self._n - 1, 0), *tail))
        self._sum: Array = np.zeros(tail)
        self._pending: list[Any] = []

    def live_count(self) -> int:
        """Filter values (n − 1) and the running sum, plus computed unreleased noise."""
        return self._n + len(self._pending)

    def _compute(self, dest: Array) -> None:
        """Draw z for len(dest) steps and write their noise to ``dest``."""
        z = self.noise.sample((len(dest), *self._tail))
        if self._n > 1:
            w, self._zi = lfilter([1.0], self.coefficients, z, axis=0, zi=self._zi)
        else:
            w = z / self.coefficients[0]
        np.cumsum(w, axis=0, out=dest)
        dest += self._sum
        self._sum = dest[-1].copy()

    def state_dict(self) -> dict[str, Any]:
        """The step, the filter state, the running sum after the last computed step and
        the computed, unreleased noise (in release order)."""
        return self._state(
            zi=self._zi.copy(), sum=sum_state(self._sum), pending=self._pending_state()
        )

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same coefficients,
        sampler and dim), checking every field; see :mod:`dpcount._state`."""
        st, t = self._read_state(state, ("zi", "sum", "pending"))
        rows = max(self._n - 1, 0)
        zi = state_array(self._owner, "zi", st["zi"], rows=rows, dim=self.dim, dtypes=(np.float64,))
        total = read_sum(self._owner, st["sum"], self._tail)
        self._pending = self._read_pending(st["pending"], t)
        self._t, self._zi, self._sum = t, zi, total


# -- the mechanism -------------------------------------------------------------------------


class ToeplitzFactorization(CountingMechanism):
    """A (banded) Toeplitz factorization A = B·C with given encoder coefficients.

    The encoder C is lower-triangular Toeplitz with c_0 > 0, …, c_{n−1} (n = bands ≤ T),
    the decoder B = A·C⁻¹ (Toeplitz, b = cumsum(d), d the coefficients of C⁻¹). Releases
    S_t + (B z)_t with one z ~ N(0, σ²)^T for the whole stream. Optimized coefficients
    come from :func:`optimize_toeplitz` (or :meth:`optimized`).

    Formal guarantee:
        Neighbouring relation: event level, single participation — two streams that
        differ at one step by at most Δ = ``step_sensitivity`` (ℓ₂ norm of the change
        for vector steps).

        The perturbed vector is C·x; a change of one step by Δ moves it by Δ·(column j
        of C), which holds the prefix c_0, …, c_{T−1−j} of the first column, so the ℓ₂
        sensitivity is Δ·√(Σ_{k<min(n,T)} c_k²) (computed with math.fsum and enlarged by
        a relative 1e-12 so rounding can only add noise). ``"gaussian"``: (ε, δ)-DP with
        σ from the budget's calibration (analytic Gaussian mechanism, Balle & Wang 2018,
        Theorem 8, by default). The release (B(Cx + z))_t = S_t + (B z)_t is
        post-processing of Cx + z. Gaussian noise only.

        Under a (k, b)-participation schema (``budget.participation``) the
        sensitivity is that of :meth:`_schema_sensitivities` (exact for at most b
        bands: k·Σ c² when k columns fit, so the losses scale by k —
        :func:`banded_participation_loss`).

        Exact variance: Var_t = σ²·V_t, V_t = Σ_{k<t} b_k² (:func:`toeplitz_losses`).

    Streams: :meth:`noise_process` (the filter 1/c(x) with O(bands·d) state, or for
    scalar steps with more than 512 bands an FFT convolution with b).

    References:
        * C. A. Choquette-Choo, K. Dvijotham, K. Pillutla, A. Ganesh, T. Steinke,
          A. Thakurta. "Correlated noise provably beats independent noise for
          differentially private learning". ICLR 2024. https://arxiv.org/abs/2310.06771
        * C. A. Choquette-Choo, A. Ganesh, R. McKenna, H. B. McMahan, K. Rush,
          A. Thakurta, Z. Xu. "(Amplified) banded matrix factorization: a unified
          approach to private training". NeurIPS 2023. https://arxiv.org/abs/2306.08153
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530

    Args:
        horizon: T ≥ 1.
        coefficients: c_0 > 0, c_1, …, c_{n−1}, finite, n ≤ T.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (epsilon, delta, noise (Gaussian only), calibration, step_sensitivity).
        rng: Generator, int seed (not for production) or None (OS entropy).

    Raises:
        ValueError: bad coefficients (naming ``coefficients``) or a noise kind other
            than Gaussian.
    """

    name = "toeplitz"
    default_noise = NoiseKind.GAUSSIAN
    continuous_noise = frozenset({NoiseKind.GAUSSIAN})

    def __init__(
        self,
        horizon: int,
        *,
        coefficients: Any,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        T = check_integer("horizon", horizon, ge=1, le=MAX_HORIZON)
        c = check_toeplitz_coefficients(coefficients, T)
        c.setflags(write=False)
        self.coefficients: Array = c
        resolved = Budget.resolve(budget, fields, owner="ToeplitzFactorization").gaussian_only(
            "ToeplitzFactorization"
        )
        self._losses: ToeplitzLosses | None = None
        self._decoder: Array | None = None
        self._losses = toeplitz_losses(c, T)
        largest = self._losses.max_variance
        if not largest <= MAX_NOISE_COEFFICIENT:
            raise ValueError(
                f"coefficients give a decoder B = A·C⁻¹ whose largest row has squared norm "
                f"{largest:.3g} > 2^64 at horizon={T} (the inverse series 1/c(x) grows): "
                "the noise would overflow float64; choose coefficients with a stable inverse"
            )
        super().__init__(T, budget=resolved, rng=rng)

    @classmethod
    def optimized(
        cls,
        horizon: int,
        *,
        objective: str = "mean",
        bands: int | None = None,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> ToeplitzFactorization:
        """The Toeplitz factorization with coefficients optimized by
        :func:`optimize_toeplitz` for ``objective`` at ``horizon`` (``bands`` None: a
        full Toeplitz matrix), computed on the fly (cached per process); for horizon
        ≤ 2^16 (larger horizons: use BLT, whose optimized parameters are shipped)."""
        T = check_integer("horizon", horizon, ge=1, le=MAX_OPTIMIZED_HORIZON)
        check_choice("objective", objective, OBJECTIVES)
        n = None if bands is None else check_integer("bands", bands, ge=1, le=T)
        coefficients = list(_optimized_cached(T, objective, n))
        return cls(T, coefficients=coefficients, budget=budget, rng=rng, **fields)

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: the filter state of bands − 1 rows and its copy inside ``lfilter``,
        (2·bands)·d floats, and a step's arrays; scalar streams compute 4096 steps ahead.
        ``bands`` (None: the full band, T)."""
        T = check_integer("horizon", horizon, ge=1)
        bands = options.get("bands")
        b = T if bands is None else min(T, int(bands))
        chunk = min(4096, T)
        stream = 16 * b + chunk * (32 + 8 * 4) if dim is None else 16 * b * dim + step_bytes(dim)
        return MemoryEstimate(structure=8 * b, stream=stream)

    def _repr_fields(self) -> dict[str, object]:
        return {"bands": len(self.coefficients)}

    def _config_kwargs(self) -> dict[str, Any]:
        return {**super()._config_kwargs(), "coefficients": self.coefficients.tolist()}

    def losses(self) -> ToeplitzLosses:
        """Sensitivities, mean and largest variance (unit sample variance), O(T log T)."""
        if self._losses is None:
            self._losses = toeplitz_losses(self.coefficients, self.horizon)
        return self._losses

    def decoder_coefficients(self) -> Array:
        """b_0, …, b_{T−1} of B = A·C⁻¹ (read-only)."""
        if self._decoder is None:
            b = _decoder(self.coefficients, self.horizon)
            b.setflags(write=False)
            self._decoder = b
        return self._decoder

    def _unit_sensitivities(self) -> tuple[float, float]:
        c = self.coefficients
        l1 = math.fsum(np.abs(c).tolist())
        l2 = math.sqrt(math.fsum((c * c).tolist()))
        return l1 * (1.0 + SENSITIVITY_MARGIN), l2 * (1.0 + SENSITIVITY_MARGIN)

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """Under a (k, b)-participation schema (``budget.participation``): the encoder is
        lower-triangular Toeplitz, so :func:`~dpcount.counting.participation.toeplitz_sensitivities`
        applies to its first column (zero past the bands): exact for at most b bands
        (disjoint columns: sens² = Σ_j ‖C_{jb}‖², e.g. k·Σ c² when every column fits) and
        for non-negative non-increasing coefficients (earliest pattern, Kalinin &
        Lampert 2024, Thm 2, arXiv:2405.13763); otherwise the dense computation for
        T ≤ 2048, else k × the single-participation value (certified)."""
        c = np.zeros(self.horizon)
        c[: len(self.coefficients)] = self.coefficients
        return toeplitz_sensitivities(c, schema)

    def noise_process(
        self, source: NoiseSource, width: int | None = None
    ) -> ToeplitzNoiseProcess | SqrtNoiseProcess:
        """The filter (:class:`ToeplitzNoiseProcess`, O(bands·dim) state, O(bands) per
        step) for vector steps and for scalar steps with at most 512 bands; for scalar
        steps with more bands the decoder convolution B z by FFT in doubling blocks
        (:class:`~dpcount.counting.factorization.sqrt.SqrtNoiseProcess` with kernel b: amortized
        O(log T) per step, holding the z drawn so far), since the filter would cost
        O(T·bands) for a batch release (5.7 s against 0.02 s at T = bands = 2^16)."""
        if width is None and len(self.coefficients) > _FILTER_BANDS:
            return SqrtNoiseProcess(self.decoder_coefficients(), NoiseBuffer(source, width))
        if width is not None and self.horizon > VECTOR_FILTER_MAX_HORIZON:
            raise ValueError(
                f"toeplitz with vector steps (dim={width}) is measured within the float model "
                f"up to horizon {VECTOR_FILTER_MAX_HORIZON} (its all-pole filter), not "
                f"{self.horizon}: use a shorter horizon, scalar steps, or another mechanism"
            )
        return ToeplitzNoiseProcess(self.coefficients, self.horizon, NoiseBuffer(source, width))

    def noise_coefficients(self) -> Array:
        """V_t = Σ_{k<t} b_k² for t = 1..T."""
        b = self.decoder_coefficients()
        return np.cumsum(b * b)

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        yield from self.noise_coefficients()[start - 1 :].tolist()

    def mse(self) -> float:
        """Exact MSE: σ²·Σ_{k<T} b_k²·(T − k)/T."""
        return self.sampler.variance * self.losses().mean_variance

    def max_variance(self) -> float:
        """Exact largest variance: σ²·V_T."""
        return self.sampler.variance * self.losses().max_variance

    def dense_factorization(self) -> tuple[Array, Array]:
        """(B, C) as dense T×T matrices; for T ≤ 4096."""
        T = self.horizon
        if T > 4096:
            raise ValueError(f"dense factorization is for horizon <= 4096, got {T}")
        c = np.zeros(T)
        c[: len(self.coefficients)] = self.coefficients
        b = self.decoder_coefficients()
        lag = np.arange(T)[:, None] - np.arange(T)[None, :]
        idx = np.clip(lag, 0, None)
        return np.where(lag >= 0, b[idx], 0.0), np.where(lag >= 0, c[idx], 0.0)
