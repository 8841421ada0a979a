"""The row-scaled, column-normalized square-root factorization (T ≤ 16384).

The column-normalized square root (:mod:`dpcount.counting.factorization.normalized_sqrt`) scales
the columns of the square root's encoder C (lower-triangular Toeplitz of
f(k) = C(2k, k)/4^k) to equal norm. The dual weights of the max-loss optimum
(:mod:`dpcount.counting.factorization.optimize_max`) are far from uniform, which suggests scaling
the *rows* as well:

    C′ = diag(w)·C·diag(1/n),   n_j = ‖diag(w)·C[:, j]‖ = (Σ_{i≥j} w_i² f(i − j)²)^{1/2},
    B′ = A·diag(n)·G·diag(1/w),  G = C⁻¹ (Toeplitz of (1 − x)^{1/2}: g_0 = 1,
                                  g_k = −f(k)/(2k − 1)),

so B′·C′ = A·diag(n)·G·C·diag(1/n) = A and every column of C′ has norm 1 (w = 1 is
the column-normalized square root). The weights are w_i = exp(Σ_m a_m·T_m(y_i)),
y_i = 2(i + ½)/T − 1, T_m the Chebyshev polynomials (m = 1..8);
:data:`ROW_SCALED_LOG_WEIGHTS` were fitted once at T = 1024 (L-BFGS-B on a soft
maximum of the exact row norms, ``benchmarks/bench_frontier.py``) and are used at
every T. Exact losses (``benchmarks/bench_frontier.py``): max 8.8338 at T = 1024
(certified optimum ≥ 8.7703), 14.975 at 16384 (certified ≥ 14.656; normalized
square root 15.652), mean 14.716 at 16384 (≥ 14.371).

Release: N = B′z = A·diag(n)·(G·(z/w)): z is drawn for the whole horizon when the
stream starts and N is computed by one FFT convolution and a running sum (O(T log T),
O(T) memory), then released step by step (a dense-style process; its checkpoint holds
the unreleased noise).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.fft as sf

from dpcount._validate import check_integer
from dpcount.counting._process import SourcedNoiseProcess
from dpcount.counting.base import MemoryEstimate
from dpcount.counting.factorization._types import Array
from dpcount.counting.factorization.dense import DenseNoiseProcess
from dpcount.counting.factorization.normalized_sqrt import normalized_sqrt_kernel
from dpcount.counting.factorization.scaled import (
    Base,
    Rows,
    Scaled,
    Scaling,
    block_values,
    check_log_weights,
    gaussian_budget,
    row_weights,
)
from dpcount.counting.factorization.sqrt import fft_stream_memory
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients
from dpcount.counting.factorization.toeplitz import toeplitz_inverse_coefficients
from dpcount.privacy._statements import cited
from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ROW_SCALED_LOG_WEIGHTS",
    "ROW_SCALED_MAX_HORIZON",
    "RowScaledSqrtFactorization",
    "block_values",
    "check_log_weights",
    "row_weights",
]

#: largest horizon (exact variances are an O(T²) sum)
ROW_SCALED_MAX_HORIZON = 16384
#: Chebyshev coefficients a_1..a_8 of ln w(y), fitted at T = 1024
ROW_SCALED_LOG_WEIGHTS = (
    -0.09260370447596611, -0.3144317059494991, -0.03813361179719161, -0.08401641386105872,
    -0.012510411552513543, -0.028921415789965023, -0.003542257500684378, -0.008045071073117553,
)  # fmt: skip
#: relative safety margin on the sensitivity: the column norms of C′ are 1 up to the
#: rounding of n_j² (a sum of ≤ T positive terms, relative error ≤ T·u ≈ 2·10⁻¹² at
#: T = 16384, Higham 2002 §4.2), far below it
_SENSITIVITY_MARGIN = 1e-9
_BLOCK = 512


#: what a structure is computed from: (T, log_weights, coefficients, column_scales), the
#: last two None for the square root's coefficients and unit column norms
_Key = tuple[int, tuple[float, ...], tuple[float, ...] | None, tuple[float, ...] | None]


@lru_cache(maxsize=8)
def _structure(key: _Key) -> tuple[Array, Array, Array, Array]:
    """(f, g, w, n) for ``key`` (:data:`_Key`), read-only: f the encoder's Toeplitz
    coefficients padded to T (the square root's, or ``coefficients``), g those of its
    inverse, n the column divisors (the norms of diag(w)·C's columns over
    ``column_scales`` per block: the columns of C′ = diag(w)·C·diag(1/n) have the
    block's scale as norm)."""
    T, log_weights, coefficients, column_scales = key
    k = np.arange(T)
    if coefficients is None:
        f = np.asarray(sqrt_coefficients(T), dtype=np.float64)
        g = normalized_sqrt_kernel(T)  # (1 − x)^{1/2}: g_k = −f(k)/(2k − 1)
    else:
        f = np.zeros(T)
        f[: len(coefficients)] = coefficients
        g = toeplitz_inverse_coefficients(f, T)
    w = row_weights(T, log_weights, k)
    f2, w2 = f * f, w * w
    n2 = np.empty(T)
    for j in range(T):  # direct sums of positive terms (no FFT rounding)
        n2[j] = float(np.dot(w2[j:], f2[: T - j]))
    n = np.sqrt(n2) / block_values(T, column_scales)
    for arr in (f, g, w, n):
        arr.setflags(write=False)
    return f, g, w, n


@lru_cache(maxsize=8)
def _row_norms(key: _Key) -> Array:
    """‖B′[t, :]‖² for t = 0..T−1, exact O(T²) in column blocks (read-only)."""
    T = key[0]
    _, g, w, n = _structure(key)
    k = np.arange(T)
    rows = np.zeros(T)
    for j0 in range(0, T, _BLOCK):
        cols = np.arange(j0, min(T, j0 + _BLOCK))
        d = k[:, None] - cols[None, :]
        block = np.cumsum(n[:, None] * np.where(d >= 0, g[np.maximum(d, 0)], 0.0), axis=0)
        block /= w[cols][None, :]
        rows += np.sum(block * block, axis=1)
    rows.setflags(write=False)
    return rows


class RowScaledNoiseProcess(DenseNoiseProcess):
    """N = A·diag(n)·(G·(z/w)) for one stream, computed when it starts (one FFT
    convolution per coordinate and a running sum), released step by step; checkpoints
    as :class:`~dpcount.counting.factorization.dense.DenseNoiseProcess` (the unreleased noise)."""

    def __init__(self, g: Array, w: Array, n: Array, source: NoiseBuffer) -> None:
        T, dim = len(g), source.dim
        SourcedNoiseProcess.__init__(self, T, source)
        z = np.asarray(self.noise.sample((T,) if dim is None else (T, dim)), dtype=np.float64)
        scale = (1.0 / w) if dim is None else (1.0 / w)[:, None]
        size = sf.next_fast_len(2 * T)
        kernel = sf.rfft(g, size)
        if dim is not None:
            kernel = kernel[:, None]
        conv = sf.irfft(sf.rfft(z * scale, size, axis=0) * kernel, size, axis=0)[:T]
        conv *= n if dim is None else n[:, None]
        self._noise: Array = np.cumsum(conv, axis=0)


@cited
class RowScaledSqrtFactorization(Scaled):
    """The row-scaled, column-normalized square root (module docstring), T ≤ 16384: the
    :class:`~dpcount.counting.factorization.scaled.Scaled` preset of the square root with
    Chebyshev row weights.

    Formal guarantee:
        Neighbouring relation: event level — two streams that differ at one step by at
        most Δ = ``step_sensitivity`` in ℓ₂ norm. The release A x + B′z equals the
        post-processing B′(C′x + z) because B′·C′ = A; every column of C′ has ℓ₂ norm 1
        (by the choice of n; the sensitivity used is 1 + 10⁻⁹ to cover the rounding of
        n), so C′x has ℓ₂ sensitivity Δ(1 + 10⁻⁹) and Gaussian z calibrated to it gives
        (ε, δ)-DP (analytic Gaussian mechanism, Balle & Wang 2018, Thm 8, by default).
        Gaussian noise only. Under (k, b)-participation: the dense encoder C′ for
        T ≤ 2048 (:mod:`dpcount.counting.participation`), else k × the single value.

        Exact variance: Var_t = σ²·‖B′[t, :]‖² (an O(T²) sum, cached).

    References:
        [references: fhu23, hku25, bw18]

    Args:
        horizon: T in [1, 16384].
        log_weights: the Chebyshev coefficients a_1.. of ln w (at most 32 finite
            values, each |a_m| ≤ 5); default :data:`ROW_SCALED_LOG_WEIGHTS`.
        epsilon, delta, noise, calibration, rng, step_sensitivity: as for
            :class:`~dpcount.counting.SqrtFactorization` (noise must be Gaussian).

    Raises:
        ValueError: a horizon outside [1, 16384], bad ``log_weights`` or a noise kind
            other than Gaussian (naming them).
    """

    name = "row-scaled-sqrt"
    scaling = Scaling(Base.SQRT, Rows.CHEBYSHEV)
    #: the encoder's Toeplitz coefficients (None: the square root's) and the column norms
    #: per block (None: all 1), set by subclasses
    _coefficients: tuple[float, ...] | None = None
    _column_scales: tuple[float, ...] | None = None

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """O(T·d), as for :class:`~dpcount.counting.SqrtFactorization`: the stream draws
        every z and computes all T noise values per coordinate when it starts (one FFT);
        declared like the square root's peak (about 6·T·d floats). Structure: the
        weights, norms and cached variances (a few T floats)."""
        return fft_stream_memory(horizon, dim, arrays=4)

    def __init__(
        self,
        horizon: int,
        *,
        log_weights: Any = ROW_SCALED_LOG_WEIGHTS,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        T = check_integer("horizon", horizon, ge=1, le=ROW_SCALED_MAX_HORIZON)
        self.log_weights: tuple[float, ...] = check_log_weights(log_weights)
        resolved = gaussian_budget(budget, fields, "RowScaledSqrtFactorization")
        super().__init__(T, budget=resolved, rng=rng)

    def _key(self) -> _Key:
        return (self.horizon, self.log_weights, self._coefficients, self._column_scales)

    def _unit_sensitivities(self) -> tuple[float, float]:
        f, _, w, n = _structure(self._key())
        T = self.horizon
        f_abs = np.abs(f)
        l1 = max(float(np.dot(w[j:], f_abs[: T - j])) / float(n[j]) for j in range(T))
        l2 = float(np.max(block_values(T, self._column_scales)))
        return l1 * (1.0 + _SENSITIVITY_MARGIN), l2 * (1.0 + _SENSITIVITY_MARGIN)

    def weights(self) -> Array:
        """The column divisors n_0, …, n_{T−1} (read-only)."""
        return _structure(self._key())[3]

    def row_weights(self) -> Array:
        """The row weights w_0, …, w_{T−1} (read-only)."""
        return _structure(self._key())[2]

    def _encoder_coefficients(self) -> Array:
        return _structure(self._key())[0]

    def _decoder_kernel(self) -> Array:
        return _structure(self._key())[1]

    def noise_process(self, source: NoiseSource, width: int | None = None) -> RowScaledNoiseProcess:
        _, g, w, n = _structure(self._key())
        return RowScaledNoiseProcess(g, w, n, NoiseBuffer(source, width))

    def _exact_coefficients(self) -> Array:
        """‖B′[t, :]‖² for t = 1..T (exact, O(T²) once per process and horizon)."""
        return _row_norms(self._key())
