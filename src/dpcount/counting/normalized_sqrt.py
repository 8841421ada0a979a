"""The column-normalized square-root factorization of the counting matrix.

The square root's encoder C = A^{1/2} (lower-triangular Toeplitz of
f(k) = C(2k, k)/4^k, :func:`~dpcount.counting.toeplitz.sqrt_coefficients`) has
columns of unequal norm: column j holds f(0), …, f(T − 1 − j), squared norm
S(T − j) with S(n) = Σ_{k<n} f(k)², largest for j = 0. Only the largest column
sets the ℓ₂ sensitivity, so every other column can be scaled up to it for free:

    C′ = C·D,   D = diag(1/e_0, …, 1/e_{T−1}),   e_s = √(S(T − s)/S(T)),
    B′ = A·C′⁻¹ = A·E·G,   E = diag(e),   G = C⁻¹,

with G the lower-triangular Toeplitz matrix of (1 − x)^{1/2}: g_0 = 1,
g_k = −f(k)/(2k − 1) (k ≥ 1). Every column of C′ has the first column's norm
√S(T), and B′ has smaller rows than A·G (e_s ≤ 1), so the error drops: at
T = 1024 the max loss is 9.491 against the square root's 10.710, at T = 16384
15.65 against 17.27.

Notation (code ↔ math):

==========  =====================================================================
f           ``sqrt_coefficients(T)``: f(k) = C(2k, k)/4^k
S(n)        Σ_{k<n} f(k)², :func:`_prefix_square_sums`
e_s         :func:`normalized_sqrt_weights`: √(S(T − s)/S(T)), e_0 = 1
g_k         :func:`normalized_sqrt_kernel`: coefficients of (1 − x)^{1/2}
V_t         :func:`normalized_sqrt_noise_coefficients`: ‖B′[t, :]‖²
loss_t      S(T)·V_t (variance over that of a sensitivity-1 Gaussian)
==========  =====================================================================

Henzinger, Kalinin, Upadhyay 2025 (arXiv:2509.14334) analyse a "normalized square
root" factorization; dpcount could not check the paper's text, so this column
scaling is dpcount's reading of the idea, not a claim that it is theirs: the
guarantee and the losses here are exact for the construction as stated.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_array, state_keys
from dpcount._validate import check_integer
from dpcount.counting.base import CountingMechanism
from dpcount.counting.sqrt import SENSITIVITY_MARGIN, SqrtNoiseProcess
from dpcount.counting.toeplitz import sqrt_coefficients, sqrt_l2_norm_squared
from dpcount.privacy.budget import Budget, BudgetFields, NoiseKind
from dpcount.privacy.noise import NoiseSampler
from dpcount.privacy.rng import RNGLike

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "NORMALIZED_SQRT_MAX_HORIZON",
    "NormalizedSqrtFactorization",
    "NormalizedSqrtNoiseProcess",
    "normalized_sqrt_kernel",
    "normalized_sqrt_losses",
    "normalized_sqrt_noise_coefficients",
    "normalized_sqrt_weights",
]

Array = NDArray[np.float64]

#: Largest horizon: the exact per-step variances cost O(T²) time (measured on a loaded
#: 2-core machine: 0.16–0.9 s at 2^14, 0.65 s at 2^15, 9.2 s at 2^16;
#: ``benchmarks/bench_normalized_sqrt.py``).
NORMALIZED_SQRT_MAX_HORIZON = 1 << 14
#: steps per block of the prefix sums S(n) behind the weights
_SUM_BLOCK = 256
#: largest horizon for :meth:`NormalizedSqrtFactorization.dense_factorization`
_DENSE_LIMIT = 4096


def _check_horizon(horizon: int) -> int:
    T = check_integer("horizon", horizon, ge=1)
    if T > NORMALIZED_SQRT_MAX_HORIZON:
        raise ValueError(
            f"horizon must be <= {NORMALIZED_SQRT_MAX_HORIZON} for the column-normalized "
            f"square root (its exact variances cost O(T^2) time), got {T}; for longer "
            "streams use 'blt' (optimized buffers, O(1) per step) or 'sqrt'"
        )
    return T


def _prefix_square_sums(f: Array) -> Array:
    """S(n) = Σ_{k<n} f(k)² for n = 1..len(f), each within ~260 ulps: blocks of 256
    summed by ``np.cumsum`` (positive terms: ≤ 255 roundings) on top of the block's
    offset, the correctly rounded ``math.fsum`` of every earlier square."""
    sq = f * f
    out: Array = np.empty(len(f))
    for a in range(0, len(f), _SUM_BLOCK):
        b = min(len(f), a + _SUM_BLOCK)
        block = np.cumsum(sq[a:b])
        block += math.fsum(sq[:a].tolist()) if a else 0.0
        out[a:b] = block
    return out


def normalized_sqrt_weights(horizon: int) -> Array:
    """e_s = √(S(T − s)/S(T)) for s = 0..T − 1 (e_0 = 1 exactly), each rounded up.

    The mechanism is B′ = A·E·G with these e_s (as computed, taken as exact reals) and
    the exact f and g; column s of its encoder C′ = C·diag(1/e) has norm
    √S(T − s)/e_s. Each S(n) is within ~260 ulps, 3·10⁻¹⁴ relative
    (:func:`_prefix_square_sums`; f itself within 2·10⁻¹⁵), so the computed ratio is
    within ~10⁻¹³ of the true one, and every e_s with s ≥ 1 is moved one ulp up
    (``np.nextafter``) after the correctly rounded division and square root. A column
    therefore exceeds the first column's norm √S(T) by at most ~10⁻¹³ relative,
    covered by the mechanism's relative margin of 10⁻¹² on the ℓ₂ sensitivity; tests
    check every column against the calibrated sensitivity with S summed in extended
    precision.
    """
    T = _check_horizon(horizon)
    S = _prefix_square_sums(sqrt_coefficients(T))
    e: Array = np.sqrt(S[::-1] / S[-1])
    e[0] = 1.0
    e[1:] = np.nextafter(e[1:], np.inf)
    return e


def normalized_sqrt_kernel(horizon: int) -> Array:
    """g_0, …, g_{T−1}: the coefficients of (1 − x)^{1/2}, i.e. G = C⁻¹.

    g_0 = 1 and g_k = −f(k)/(2k − 1) for k ≥ 1 (since f(k) = C(2k, k)/4^k are the
    coefficients of (1 − x)^{−1/2} and g_k = g_{k−1}(k − 3/2)/k); from the
    correctly rounded f, so each g_k is within a few ulps (no running product).
    """
    T = check_integer("horizon", horizon, ge=1)
    f = sqrt_coefficients(T)
    g: Array = np.empty(T)
    g[0] = 1.0
    if T > 1:
        k = np.arange(1, T, dtype=np.float64)
        g[1:] = -f[1:] / (2.0 * k - 1.0)
    return g


def normalized_sqrt_noise_coefficients(horizon: int) -> Array:
    """V_t = ‖B′[t, :]‖² for t = 1..T, exactly: O(T²) time, O(T) memory.

    B′[t, j] = Σ_{s=j}^{t} e_s·g_{s−j} (B′ = A·E·G), so row t is row t − 1 plus
    e_t·(g_t, g_{t−1}, …, g_0) in columns 0..t; V_t is its squared norm.

    Raises:
        ValueError: a horizon outside [1, 2^14] (naming ``horizon``).
    """
    T = _check_horizon(horizon)
    e = normalized_sqrt_weights(T)
    grev = normalized_sqrt_kernel(T)[::-1].copy()  # grev[T − 1 − t:] = g_t, …, g_0
    row = np.zeros(T)
    scratch = np.empty(T)
    out: Array = np.empty(T)
    for t in range(T):
        part = row[: t + 1]
        step = scratch[: t + 1]
        np.multiply(grev[T - 1 - t :], e[t], out=step)
        part += step
        out[t] = part @ part
    return out


def normalized_sqrt_losses(horizon: int) -> tuple[float, float]:
    """(mean, max) loss of the column-normalized square root: S(T)·mean(V), S(T)·max(V).

    S(T) = Σ_{k<T} f(k)² is the squared ℓ₂ sensitivity (every column of C′ has that
    norm), from :func:`~dpcount.counting.toeplitz.sqrt_l2_norm_squared`; the max is
    not at the last step (near t ≈ 0.57 T).

    Raises:
        ValueError: a horizon outside [1, 2^14] (naming ``horizon``).
    """
    V = normalized_sqrt_noise_coefficients(horizon)
    S = sqrt_l2_norm_squared(horizon)
    return S * float(V.mean()), S * float(V.max())


class NormalizedSqrtNoiseProcess:
    """N = B′z = A·E·(G z) for one stream.

    w = G z is the causal convolution of z with g, computed in doubling FFT blocks
    by :class:`~dpcount.counting.sqrt.SqrtNoiseProcess` (kernel g; it holds every z
    drawn so far — each future w depends on all of them — and the computed,
    unreleased w). The noise is the running sum N_t = Σ_{s≤t} e_s·w_s, kept as one
    value (one vector for vector steps). ``next`` and ``next_many`` add in the same
    order (previous sum + e_t·w_t), so for the same w any mix of them gives the same
    floats (a checkpoint continues bit for bit).

    Args:
        kernel: g_0, …, g_{T−1}.
        weights: e_0, …, e_{T−1}.
        sampler: draws z (i.i.d.).
        rng: the Generator z is drawn with.
        dim: None for scalar steps, else the vector length.
    """

    def __init__(
        self,
        kernel: Array,
        weights: Array,
        sampler: NoiseSampler,
        rng: np.random.Generator,
        dim: int | None = None,
    ) -> None:
        self._inner = SqrtNoiseProcess(kernel, sampler, rng, dim)
        self.horizon = len(kernel)
        self.dim = dim
        self._weights = weights
        self._weight_list: list[float] | None = None
        self._sum: Any = 0.0 if dim is None else np.zeros(dim)

    @property
    def step(self) -> int:
        return self._inner.step

    def live_count(self) -> int:
        """The inner process's z and unreleased w, plus the running sum."""
        return self._inner.live_count() + 1

    def next(self) -> Any:
        t = self._inner.step
        w = self._inner.next()
        if self.dim is None:
            if self._weight_list is None:
                self._weight_list = self._weights.tolist()
            self._sum = self._sum + self._weight_list[t] * w
            return self._sum
        self._sum = self._sum + self._weights[t] * w
        return self._sum.copy()

    def next_many(self, n: int) -> Array:
        n = check_integer("n", n, ge=1)
        t = self._inner.step
        w = self._inner.next_many(n)  # ours to modify (a copy or a handed-over block)
        e = self._weights[t : t + n]
        w *= e if self.dim is None else e[:, None]
        w[0] += self._sum  # same order of additions as next()
        np.cumsum(w, axis=0, out=w)
        self._sum = float(w[-1]) if self.dim is None else w[-1].copy()
        return w

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The inner process's state (step, z drawn, unreleased w) and the running sum."""
        return {**self._inner.state_dict(), "sum": np.array(self._sum, dtype=np.float64, ndmin=1)}

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same horizon,
        sampler and dim), checking every field; see :mod:`dpcount._state`."""
        owner = "NormalizedSqrtNoiseProcess"
        st = state_keys(owner, state, ("t", "z", "noise", "sum"))
        total = state_array(owner, "sum", st["sum"], rows=None, dim=self.dim or 1)
        if not np.isfinite(total).all():
            raise ValueError(f"corrupt {owner} state: sum must be finite")
        self._inner.load_state_dict({k: st[k] for k in ("t", "z", "noise")})
        self._sum = (
            float(total.reshape(-1)[0]) if self.dim is None else total.astype(np.float64).copy()
        )


class NormalizedSqrtFactorization(CountingMechanism):
    """The column-normalized square-root factorization (Gaussian noise).

    Releases S_t + (B′z)_t with B′ = A·E·G (see the module docstring): the square
    root's encoder with every column scaled to the first column's norm, one noise
    vector z ~ N(0, σ²)^T for the whole stream.

    Formal guarantee:
        Neighbouring relation: event level — two streams that differ at one step by
        at most Δ = ``step_sensitivity`` (ℓ₂ norm of the change for vector steps).
        Under a (k, b)-participation schema (``budget.participation``), up to k steps
        pairwise at least b apart.

        The perturbed vector is C′·x, C′ = C·diag(1/e) = B′⁻¹A; a change of one step
        j by Δ moves it by Δ·(column j of C′), of norm Δ·√S(T − j)/e_j = Δ·√S(T)
        (by construction; the weights are rounded so columns can only shrink,
        :func:`normalized_sqrt_weights`), so the ℓ₂ sensitivity is Δ·√S(T), S(T) from
        :func:`~dpcount.counting.toeplitz.sqrt_l2_norm_squared` enlarged by a relative
        1e-12. σ from the budget's Gaussian calibration (analytic Gaussian mechanism,
        Balle & Wang 2018, Theorem 8, by default) gives (ε, δ)-DP for C′x + z, and the
        release A x + B′z = B′(C′x + z) is post-processing. Gaussian noise only.
        Under a schema: C′ ≥ 0 entrywise, so its Gram matrix is ≥ 0 and the exact
        sensitivity comes from the dense encoder for T ≤ 2048
        (:meth:`dense_factorization`, the base class's default), beyond as k times
        the single-participation value (triangle inequality, certified).

        Exact variance: Var_t = σ²·V_t, V_t = ‖B′[t, :]‖²
        (:func:`normalized_sqrt_noise_coefficients`, O(T²) time, computed once on
        first use). The largest variance is not at the last step (near 0.57 T).

    References:
        * H. Fichtenberger, M. Henzinger, J. Upadhyay. "Constant Matters:
          Fine-grained Error Bound on Differentially Private Continual Observation".
          ICML 2023. https://arxiv.org/abs/2202.11205 (the square root A^{1/2})
        * M. Henzinger, N. Kalinin, J. Upadhyay. 2025. Analyses a "normalized square
          root" factorization; dpcount could not read the paper's text, so neither its
          title nor its construction is checked against this one.
          https://arxiv.org/abs/2509.14334
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530

    Streams: :class:`NormalizedSqrtNoiseProcess` (amortized O(log T) per step, holds
    the z drawn so far, like the square root's stream).

    Args:
        horizon: 1 ≤ T ≤ 2^14.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (epsilon, delta, noise (Gaussian only), calibration, step_sensitivity,
            participation).
        rng: Generator, int seed (not for production) or None (OS entropy).

    Raises:
        ValueError: a horizon above 2^14 (naming ``horizon``) or a noise kind other
            than Gaussian (naming ``noise``).
    """

    name = "normalized-sqrt"
    default_noise = NoiseKind.GAUSSIAN
    #: largest |B′[t, j]|: B′[t, t] = e_t ≤ 1 and |B′[t, j]| ≤ Σ_s |g_s| ≤ 2 (for
    #: Laplace tail bounds, which are never used: Gaussian only)
    max_noise_coefficient = 2.0

    def __init__(
        self,
        horizon: int,
        *,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        T = _check_horizon(horizon)
        resolved = Budget.resolve(budget, fields, owner="NormalizedSqrtFactorization")
        if resolved.noise is not None and resolved.noise != NoiseKind.GAUSSIAN:
            raise ValueError(
                f"noise={resolved.noise.value!r} is not available for "
                "NormalizedSqrtFactorization: it is calibrated for Gaussian noise only "
                "(use noise='gaussian')"
            )
        self._weights = normalized_sqrt_weights(T)
        self._weights.setflags(write=False)
        self._kernel = normalized_sqrt_kernel(T)
        self._kernel.setflags(write=False)
        self._coefficients: Array | None = None
        super().__init__(T, budget=resolved, rng=rng)

    # -- structure --------------------------------------------------------------------
    def weights(self) -> Array:
        """e_0, …, e_{T−1} (read-only)."""
        return self._weights

    def kernel(self) -> Array:
        """g_0, …, g_{T−1} (read-only)."""
        return self._kernel

    def _unit_sensitivities(self) -> tuple[float, float]:
        """(ℓ₁, ℓ₂): the ℓ₂ norm √S(T) of every column; the ℓ₁ norm max_j F(T − j)/e_j,
        F(n) = Σ_{k<n} f(k) (recorded only: the noise is Gaussian)."""
        T = self.horizon
        f = sqrt_coefficients(T)
        l1 = float(np.max(np.cumsum(f)[::-1] / self._weights))
        l2 = math.sqrt(sqrt_l2_norm_squared(T))
        return l1 * (1.0 + SENSITIVITY_MARGIN), l2 * (1.0 + SENSITIVITY_MARGIN)

    def noise_process(
        self, sampler: NoiseSampler, rng: np.random.Generator, dim: int | None = None
    ) -> NormalizedSqrtNoiseProcess:
        return NormalizedSqrtNoiseProcess(self._kernel, self._weights, sampler, rng, dim)

    def _exact_coefficients(self) -> Array:
        """V_t for t = 1..T, computed on first use (O(T²)) and kept (read-only)."""
        if self._coefficients is None:
            v = normalized_sqrt_noise_coefficients(self.horizon)
            v.setflags(write=False)
            self._coefficients = v
        return self._coefficients

    def noise_coefficients(self) -> Array:
        """V_t = ‖B′[t, :]‖² for t = 1..T (a copy of the kept values)."""
        out: Array = self._exact_coefficients().copy()
        return out

    def _noise_coefficient_at(self, t: int) -> float:
        return float(self._exact_coefficients()[t - 1])

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        yield from self._exact_coefficients()[start - 1 :].tolist()

    def dense_factorization(self) -> tuple[Array, Array]:
        """(B′, C′) as dense T×T matrices; for T ≤ 4096.

        B′[t, j] = Σ_{s=j}^{t} e_s·g_{s−j}, C′[i, j] = f(i − j)/e_j (i ≥ j).
        """
        T = self.horizon
        if T > _DENSE_LIMIT:
            raise ValueError(f"dense factorization is for horizon <= {_DENSE_LIMIT}, got {T}")
        f = sqrt_coefficients(T)
        lag = np.arange(T)[:, None] - np.arange(T)[None, :]
        idx = np.clip(lag, 0, None)
        G = np.where(lag >= 0, self._kernel[idx], 0.0)
        B = np.cumsum(self._weights[:, None] * G, axis=0)
        C = np.where(lag >= 0, f[idx], 0.0) / self._weights[None, :]
        return B, C
