"""A square-root factorization without a horizon: log-damped Toeplitz coefficients.

The square root's encoder coefficients f(k) = C(2k, k)/4^k do not depend on the
horizon, but its sensitivity does: Σ_{k<T} f(k)² grows like ln(T)/π, so it diverges
over an infinite stream. Damping them by a slowly decaying factor makes the infinite
column norm finite (Jacobsen & Fawaz 2025 damp the generating function (1 − x)^{-1/2}
by a power of ln(1/(1 − x)); here the coefficients themselves are damped):

    c_k = f(k)·g(k),   g(k)² = (1 + a·ln(1 + k/κ))^{-1} · (1 + e·ln(1 + k/K))^{-2q},

with q > ½, so c_k² ≤ g(k)²/(πk) is summable. C = Toeplitz(c) (the encoder, one
column per step, every column the same infinite norm) and the decoder
B = A·C⁻¹ = Toeplitz(b), b_k = Σ_{j≤k} u_j with u the coefficients of 1/c(x); both are
horizon-free, so ONE calibration serves every prefix of an infinite stream.

Notation (paper → code):

=========  =========================================================================
c_k        :func:`encoder_coefficients` (the parameters :data:`HORIZON_FREE_PARAMETERS`:
           a, κ, e, q, K)
b_k        :func:`decoder_coefficients` — B = A·C⁻¹ (power-series inversion by Newton
           iteration with FFT products, checked against the direct recursion)
‖c‖²       :func:`encoder_norm_squared` — the certified infinite column norm (below)
V(t)/σ²    Σ_{k<t} b_k² (:func:`variance_coefficients`)
=========  =========================================================================

Certified sensitivity (Gaussian noise): the ℓ₂ norm of every column of the infinite
encoder is ‖c‖ = (Σ_{k≥0} c_k²)^{1/2}. It is bounded above by the exact sum over
k < 2^16 plus the tail: for k ≥ 1, πk·f(k)² increases to 1 (the ratio of consecutive
terms is (2k+1)²/(4k(k+1)) > 1; the limit is Stirling's), so c_k² ≤ g(k)²/(πk), which
decreases in k, hence Σ_{k≥N} c_k² ≤ ∫_{N−1}^∞ g(x)²/(πx) dx = ∫_{ln(N−1)}^∞ h(u) du
with h(u) = g(e^u)²/π decreasing: bounded by its left Riemann sum on a fine grid up to
U = ln(N−1) + 200 and, beyond U, by (1/π)(1 + a·ln(1 + e^U/κ))^{-1}·∫_U^∞ (1 + e·(u −
ln K))^{-2q} du (closed form). The total is enlarged by a relative 10⁻⁹ for the
rounding of the sums (each term has relative error ≤ 10⁻¹⁵).

Parameters: a, κ, e, q fitted by Nelder–Mead on the largest ratio of V(t) to the
plain square root's variance at step t told the horizon t (t = 2^4 … 2^20), then K
chosen among 2^22 … 2^30 for the largest ratio over t = 2^4 … 2^24: 1.678 at K = 2^26
(ratios 1.50–1.68; 1.95–2.11 against the row-scaled square root told t, t ≤ 2^14;
``benchmarks/bench_unbounded.py --horizon-free``, docs/unbounded.md).

Release: noise N = B z, one z for the whole stream; a stream computes N in doubling
blocks by FFT (:class:`HorizonFreeNoiseProcess`), amortized O(log t) per step, and
holds every z drawn so far: O(t) state per coordinate (a Toeplitz decoder whose
generating function is not rational needs the whole past; the doubling counter holds
O(log t)).

References:
    [references: jf25, fhu23, bw18]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.fft as sf
from numpy.typing import NDArray

from dpcount._validate import check_integer
from dpcount.counting.base import MAX_HORIZON, CountingMechanism, MemoryEstimate, step_bytes
from dpcount.counting.factorization.sqrt import SqrtNoiseProcess
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients
from dpcount.privacy._statements import cite, cited
from dpcount.privacy.budget import Budget, NoiseKind, Participation
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from dpcount.counting.participation import Sensitivity

__doc__ = cite(__doc__)

__all__ = [
    "HORIZON_FREE_PARAMETERS",
    "HorizonFreeNoiseProcess",
    "HorizonFreeSqrt",
    "decoder_coefficients",
    "encoder_coefficients",
    "encoder_norm_squared",
    "variance_coefficients",
]

Array = NDArray[np.float64]

#: (a, κ, e, q, K) of g (module docstring)
HORIZON_FREE_PARAMETERS = (0.4256441, 1.00065926, 1.0151169, 1.97, float(1 << 26))
#: steps summed exactly in the certified norm (the rest: the integral bound)
_EXACT_TERMS = 1 << 16
#: relative margin on the certified norm (rounding of the sums)
_NORM_MARGIN = 1e-9
#: the tables grow by doubling from this length
_FIRST = 1 << 12


def single_participation(budget: Budget, owner: str) -> Budget:
    """``budget``, refused when it names a participation schema: the horizon-free
    factorizations are calibrated for one participation over the infinite stream.

    Raises:
        ValueError: a participation schema, naming ``owner``.
    """
    if budget.participation is not None:
        raise ValueError(
            f"{owner} is calibrated for single participation: participation must be None, "
            f"got {budget.participation!r}"
        )
    return budget


def _damping_squared(x: Array, params: tuple[float, ...]) -> Array:
    """g(x)² for real x ≥ 0 (module docstring)."""
    a, kappa, e, q, K = params
    out: Array = (1.0 + a * np.log1p(x / kappa)) ** -1.0 * (1.0 + e * np.log1p(x / K)) ** (-2 * q)
    return out


def encoder_coefficients(n: int, params: tuple[float, ...] = HORIZON_FREE_PARAMETERS) -> Array:
    """c_0, …, c_{n−1}: the square root's f(k) times g(k)."""
    n = check_integer("n", n, ge=0)
    k = np.arange(n, dtype=np.float64)
    out: Array = sqrt_coefficients(n) * np.sqrt(_damping_squared(k, params))
    return out


def encoder_norm_squared(params: tuple[float, ...] = HORIZON_FREE_PARAMETERS) -> float:
    """A certified upper bound on Σ_{k≥0} c_k² (module docstring: exact sum below
    2^16, integral bound of the tail, relative margin 10⁻⁹)."""
    a, kappa, e, q, K = (float(v) for v in params)
    if not (a > 0 and kappa > 0 and e > 0 and q > 0.5 and K > 0):
        raise ValueError(f"need a, kappa, e, K > 0 and q > 1/2, got {params}")
    c = encoder_coefficients(_EXACT_TERMS, params)
    head = math.fsum((c * c).tolist())
    u0 = math.log(_EXACT_TERMS - 1)
    du, span = 1e-3, 200.0
    u = u0 + du * np.arange(int(span / du))
    riemann = math.fsum(_damping_squared(np.exp(u), params).tolist()) * du / math.pi
    U = u0 + span
    if 1.0 + e * (U - math.log(K)) <= 0:
        raise ValueError(f"K = {K} too large for the tail bound")
    beyond: float = (
        (1.0 + a * math.log1p(math.exp(U) / kappa)) ** -1.0
        * (1.0 + e * (U - math.log(K))) ** (1.0 - 2.0 * q)
        / (e * (2.0 * q - 1.0) * math.pi)
    )
    return (head + riemann + beyond) * (1.0 + _NORM_MARGIN)


def _product(x: Array, y: Array, n: int) -> Array:
    """(x·y mod X^n) of two power series, by one real FFT."""
    size = sf.next_fast_len(2 * n - 1, real=True)
    out: Array = sf.irfft(sf.rfft(x[:n], size) * sf.rfft(y[:n], size), size)[:n]
    return out


def _newton_step(c: Array, u: Array, m: int) -> Array:
    """From u with u·c = 1 mod X^len(u), the inverse mod X^m (len(u) < m ≤ 2·len(u)):
    Newton's step u(2 − c·u), which doubles the precision in powers of X."""
    err = -_product(c, u, m)
    err[0] += 2.0
    return _product(np.concatenate([u, np.zeros(m - len(u))]), err, m)


def _inverse(c: Array) -> Array:
    """u with u·c = 1 mod X^len(c), by Newton steps from 1/c_0, O(n log n)."""
    u = np.array([1.0 / c[0]])
    while len(u) < len(c):
        u = _newton_step(c, u, min(2 * len(u), len(c)))
    return u


class _Tables:
    """u = 1/c(X), b = Σ_{j≤k} u_j and V = prefix sums of b², to a length that doubles
    on demand. Each doubling is one Newton step from the current u, and the entries
    already computed are kept as they are, so every value is the same whenever and
    however often it is asked for (bit for bit)."""

    def __init__(self, params: tuple[float, ...]) -> None:
        self.params = params
        c = encoder_coefficients(_FIRST, params)
        self.u = _inverse(c)
        self.b = np.cumsum(self.u)
        self.v = np.cumsum(self.b * self.b)
        for arr in (self.u, self.b, self.v):
            arr.setflags(write=False)

    def ensure(self, n: int) -> None:
        while len(self.b) < n:
            m = len(self.b)
            u = _newton_step(encoder_coefficients(2 * m, self.params), self.u, 2 * m)
            u[:m] = self.u
            b = np.concatenate([self.b, np.cumsum(u[m:])])
            b[m:] += self.b[-1]
            sq = b[m:] * b[m:]
            sq[0] += self.v[-1]
            v = np.concatenate([self.v, np.cumsum(sq)])
            for arr in (u, b, v):
                arr.setflags(write=False)
            self.u, self.b, self.v = u, b, v


_TABLES: list[_Tables] = []  # built on first use


def _tables(n: int) -> _Tables:
    """The shared tables, grown to at least n entries."""
    if not _TABLES:
        _TABLES.append(_Tables(HORIZON_FREE_PARAMETERS))
    _TABLES[0].ensure(n)
    return _TABLES[0]


def decoder_coefficients(n: int) -> Array:
    """b_0, …, b_{n−1} of the decoder B = A·C⁻¹ (read-only view of a shared table)."""
    n = check_integer("n", n, ge=0)
    return _tables(n).b[:n]


def variance_coefficients(n: int) -> Array:
    """Σ_{k<t} b_k² for t = 1..n: the variance at step t in units of σ²."""
    n = check_integer("n", n, ge=0)
    return _tables(n).v[:n]


class HorizonFreeNoiseProcess(SqrtNoiseProcess):
    """N = B z for one stream (b of :func:`decoder_coefficients`), computed in doubling
    blocks by FFT like :class:`~dpcount.counting.factorization.sqrt.SqrtNoiseProcess`,
    whose kernel here grows with the stream instead of being fixed by the horizon.
    Checkpoints as that process (the step, every z drawn, the unreleased noise)."""

    def __init__(
        self,
        horizon: int,
        kernel: Callable[[int], Array],
        source: NoiseSource,
        width: int | None = None,
    ) -> None:
        super().__init__(kernel(min(horizon, _FIRST)), NoiseBuffer(source, width))
        self.horizon = horizon
        self._grow = kernel

    def _ensure(self, end: int) -> None:
        computed = self._start + len(self._noise)
        if end > computed:
            need = min(self.horizon, max(end, 2 * computed, computed + self.first_block))
            if len(self.kernel) < need:
                self.kernel = self._grow(need)
        super()._ensure(end)


@cited
class HorizonFreeSqrt(CountingMechanism):
    """The square root damped to a finite infinite-stream sensitivity (module docstring).

    Its coefficients do not depend on the horizon and it is calibrated for an infinite
    stream, so every prefix of any length has the guarantee; ``horizon`` only bounds the
    steps one instance releases (any value up to 2^53 costs nothing up front). It is the
    horizon-free inner of :class:`~dpcount.counting.UnboundedCounter`
    (``inner="horizon-free-sqrt"``).

    Formal guarantee:
        Neighbouring relation: event level, single participation — two streams (of any
        length, finite or infinite) that differ at one step by at most Δ =
        ``step_sensitivity`` in ℓ₂ norm. The release A x + B z equals the
        post-processing B(C x + z) because B·C = A (B = A·C⁻¹); a change at one step
        moves C x by Δ times one column of C, whose ℓ₂ norm over the infinite stream is
        at most the certified ‖c‖ (:func:`encoder_norm_squared`, module docstring), so
        Gaussian z calibrated to Δ·‖c‖ gives (ε, δ)-DP for the whole infinite release
        (analytic Gaussian mechanism, Balle & Wang 2018, Thm 8, by default). Gaussian
        noise only (Σ c_k diverges: no finite ℓ₁ sensitivity over an infinite
        stream); no participation schema.

        Exact variance: Var_t = σ²·Σ_{k<t} b_k², the same for every horizon.

    References:
        [references: jf25, fhu23, bw18]

    Args:
        horizon: the most steps this instance releases, 1 … 2^53.
        budget: a :class:`~dpcount.privacy.Budget` with δ (Gaussian noise), or its
            fields as keywords.
        rng: None (OS entropy), or a Generator / int seed (research and tests only).

    Raises:
        ValueError: a horizon outside [1, 2^53], a noise kind other than Gaussian, or a
            participation schema (naming them).
    """

    name = "horizon-free-sqrt"
    default_noise = NoiseKind.GAUSSIAN
    continuous_noise = frozenset({NoiseKind.GAUSSIAN})
    _norm: float | None = None

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """The stream holds every z drawn and its computed noise: about 48 bytes per step
        and coordinate, growing with the stream (declared for min(T, 2^20) steps; the
        state of an endless stream has no bound). Structure: the shared tables b and
        Σb², 16 bytes per step reached."""
        T = check_integer("horizon", horizon, ge=1, le=MAX_HORIZON)
        d = 1 if dim is None else dim
        steps = min(T, 1 << 20)
        return MemoryEstimate(structure=16 * steps, stream=48 * steps * d + step_bytes(dim))

    def _accept_budget(self, budget: Budget) -> Budget:
        return single_participation(budget.gaussian_only("HorizonFreeSqrt"), "HorizonFreeSqrt")

    def _unit_sensitivities(self) -> tuple[float, float]:
        norm = type(self)._norm
        if norm is None:
            norm = math.sqrt(encoder_norm_squared())
            type(self)._norm = norm
        # ℓ₁ (recorded only, Gaussian noise): over T steps Σ_{k<T} c_k ≤ 1 + Σ_{1≤k<T}
        # 1/√(πk) ≤ 1 + 2√(T/π) (c_k ≤ f(k) ≤ 1/√(πk), decreasing); it diverges with T
        return 1.0 + 2.0 * math.sqrt(self.horizon / math.pi), norm

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        raise ValueError("HorizonFreeSqrt takes no participation schema")  # refused in __init__

    def noise_process(
        self, source: NoiseSource, width: int | None = None
    ) -> HorizonFreeNoiseProcess:
        return HorizonFreeNoiseProcess(self.horizon, decoder_coefficients, source, width)

    def noise_coefficients(self) -> Array:
        """Σ_{k<t} b_k² for t = 1..T (T ≤ 2^26: the whole table is built)."""
        T = check_integer("horizon", self.horizon, le=1 << 26)
        return np.array(variance_coefficients(T))

    def _noise_coefficient_at(self, t: int) -> float:
        return float(variance_coefficients(t)[t - 1])

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        t = start
        while t <= self.horizon:
            stop = min(self.horizon, max(2 * t, _FIRST))
            yield from variance_coefficients(stop)[t - 1 :].tolist()
            t = stop + 1

    def dense_factorization(self) -> tuple[Array, Array]:
        """(B, C) as dense T×T matrices (T ≤ 4096): B = Toeplitz(b), C = Toeplitz(c)."""
        T = check_integer("horizon", self.horizon, le=4096)
        i = np.arange(T)
        lag = i[:, None] - i[None, :]
        b, c = decoder_coefficients(T), encoder_coefficients(T)
        lower = lag >= 0
        return (
            np.where(lower, b[np.maximum(lag, 0)], 0.0),
            np.where(lower, c[np.maximum(lag, 0)], 0.0),
        )
