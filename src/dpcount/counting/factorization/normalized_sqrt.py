"""The column-normalized square-root factorization of the counting matrix.

The square root's encoder C = A^{1/2} (lower-triangular Toeplitz of
f(k) = C(2k, k)/4^k, :func:`~dpcount.counting.factorization.sqrt_toeplitz.sqrt_coefficients`) has
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
            (blocks: e_s = e_{p_b} for s in block b)
p_b         :func:`normalized_sqrt_block_starts`: first column of block b
Y_t         (C z)_t, the square root's noise (:class:`SqrtNoiseProcess`, kernel f)
g_k         :func:`normalized_sqrt_kernel`: coefficients of (1 − x)^{1/2}
V_t         :func:`normalized_sqrt_noise_coefficients`: ‖B′[t, :]‖²
loss_t      S(T)·V_t (variance over that of a sensitivity-1 Gaussian)
==========  =====================================================================

Blocks (``block_ratio = r``). Exact per-column weights make the variances an O(T²)
sum, so beyond T = 2^14 the scale is piecewise constant over m blocks of columns whose
boundaries are geometric in the remaining length u = T − j (u_0 = T,
u_{i+1} = max(1, min(u_i − 1, ⌊u_i/r⌋)), :func:`normalized_sqrt_block_starts`;
m = 126 at T = 2^20, r = 1.1). Block b starting at column p_b uses the weight of its
first column, e_{p_b}, for all its columns: column j then has norm
√S(T − j)/e_{p_b} ≤ √S(T − p_b)/e_{p_b} = √S(T) (S increases), so the sensitivity is
unchanged. Summation by parts with Σ_{s≤t} (G z)_s = (A·G z)_t = (C z)_t = Y_t, the
square root's own noise, gives

    N_t = e_t·Y_t + Σ_{block ends q < t} (e_q − e_{q+1})·Y_q,

so the stream is the square root's noise process plus one carried sum, and the
exact variances cost one FFT correlation per block boundary, O(m·T log T)
(:func:`normalized_sqrt_noise_coefficients`). At T = 2^20 the max loss is 27.95
(square root 30.02; (0.846 + ln T/π)² = 27.65).

Henzinger, Kalinin, Upadhyay 2025 (arXiv:2509.14334) analyse a "normalized square
root" factorization; dpcount could not check the paper's text, so this column
scaling is dpcount's reading of the idea, not a claim that it is theirs: the
guarantee and the losses here are exact for the construction as stated.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.fft as sfft
from numpy.typing import NDArray

from dpcount._state import state_array, state_keys
from dpcount._validate import check_integer
from dpcount.counting.base import MemoryEstimate
from dpcount.counting.factorization._types import Array
from dpcount.counting.factorization.scaled import Base, Scaled, Scaling, gaussian_budget
from dpcount.counting.factorization.sqrt import (
    SENSITIVITY_MARGIN,
    SqrtNoiseProcess,
    fft_stream_memory,
)
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients, sqrt_l2_norm_squared
from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFAULT_BLOCK_RATIO",
    "NORMALIZED_SQRT_BLOCK_MAX_HORIZON",
    "NORMALIZED_SQRT_FLOAT_MODEL_HORIZON",
    "NORMALIZED_SQRT_MAX_HORIZON",
    "NormalizedSqrtBlockNoiseProcess",
    "NormalizedSqrtFactorization",
    "NormalizedSqrtNoiseProcess",
    "default_block_ratio",
    "normalized_sqrt_block_starts",
    "normalized_sqrt_kernel",
    "normalized_sqrt_losses",
    "normalized_sqrt_noise_coefficients",
    "normalized_sqrt_weights",
]

#: Largest horizon with one weight per column: the exact per-step variances cost O(T²)
#: time (measured on a loaded 2-core machine: 0.16–0.9 s at 2^14, 0.65 s at 2^15,
#: 9.2 s at 2^16; ``benchmarks/bench_normalized_sqrt.py``).
NORMALIZED_SQRT_MAX_HORIZON = 1 << 14
#: Largest horizon with blocks: the exact variances cost one FFT correlation of length
#: T per block boundary (measured, r = 1.1: see ``benchmarks/bench_normalized_sqrt.py``).
NORMALIZED_SQRT_BLOCK_MAX_HORIZON = 1 << 22
#: block ratio used beyond :data:`NORMALIZED_SQRT_MAX_HORIZON` when none is given
DEFAULT_BLOCK_RATIO = 1.1
#: most blocks allowed (the variance cost grows linearly with them)
_MAX_BLOCKS = 400
#: most blocks × horizon allowed: the exact variances cost ~1.6 ns per block × T × log2 T
#: (``benchmarks/bench_normalized_sqrt.py``); 150 blocks at 2^22 take ~45 s on the
#: loaded 2-core development machine (140 blocks, r = 1.1: 41 s)
_MAX_WORK = 150 * (1 << 22)
#: steps per block of the prefix sums S(n) behind the weights
_SUM_BLOCK = 256


#: largest horizon the default keeps one weight per column: its noise (an FFT
#: convolution, then a running sum of T weighted values) is measured within a quarter of
#: the float model's κ up to 2^13 (≤ 59; 79 at 2^14, three seeds: benchmarks/
#: float_model_long.py); the blocks' noise (e_t·Y_t plus a carry) ≤ 6 up to 2^22
NORMALIZED_SQRT_FLOAT_MODEL_HORIZON = 1 << 13


def default_block_ratio(horizon: int) -> float | None:
    """The block ratio used when none is given: None (one weight per column) for
    T ≤ :data:`NORMALIZED_SQRT_FLOAT_MODEL_HORIZON` = 2^13, :data:`DEFAULT_BLOCK_RATIO`
    beyond."""
    T = check_integer("horizon", horizon, ge=1)
    return None if T <= NORMALIZED_SQRT_FLOAT_MODEL_HORIZON else DEFAULT_BLOCK_RATIO


def _resolve(horizon: int, block_ratio: float | None) -> tuple[int, float | None]:
    """(T, ratio) after checking both; ``block_ratio`` None → :func:`default_block_ratio`."""
    T = check_integer("horizon", horizon, ge=1)
    if block_ratio is None:
        if T > NORMALIZED_SQRT_BLOCK_MAX_HORIZON:
            raise ValueError(
                f"horizon must be <= {NORMALIZED_SQRT_BLOCK_MAX_HORIZON} for the "
                f"column-normalized square root (its exact variances cost "
                f"O(blocks * T log T) time), got {T}; for longer streams use 'blt' "
                "(optimized buffers, O(1) per step) or 'sqrt'"
            )
        return T, default_block_ratio(T)
    if isinstance(block_ratio, bool) or not isinstance(block_ratio, (int, float)):
        raise TypeError(
            f"block_ratio must be a real number > 1 or None, got {type(block_ratio).__name__}"
        )
    r = float(block_ratio)
    if not (math.isfinite(r) and r > 1.0):
        raise ValueError(f"block_ratio must be a finite number > 1, got {block_ratio!r}")
    if T > NORMALIZED_SQRT_BLOCK_MAX_HORIZON:
        raise ValueError(
            f"horizon must be <= {NORMALIZED_SQRT_BLOCK_MAX_HORIZON} for the blocked "
            f"column-normalized square root (its exact variances cost O(blocks * T log T) "
            f"time), got {T}; for longer streams use 'blt' (optimized buffers, O(1) per "
            "step) or 'sqrt'"
        )
    return T, r


def _check_horizon(horizon: int) -> int:
    T = check_integer("horizon", horizon, ge=1)
    if T > NORMALIZED_SQRT_MAX_HORIZON:
        raise ValueError(
            f"horizon must be <= {NORMALIZED_SQRT_MAX_HORIZON} for the column-normalized "
            f"square root with one weight per column (its exact variances cost O(T^2) "
            f"time), got {T}; pass block_ratio (e.g. {DEFAULT_BLOCK_RATIO}) for blocks "
            f"up to T = {NORMALIZED_SQRT_BLOCK_MAX_HORIZON}, or use 'blt' or 'sqrt'"
        )
    return T


def normalized_sqrt_block_starts(horizon: int, block_ratio: float) -> NDArray[np.int64]:
    """p_0 = 0 < p_1 < … < p_{m−1}: the first column of each block, exactly.

    Integer remaining lengths u_0 = T, u_{i+1} = max(1, min(u_i − 1, ⌊u_i/r⌋)) until
    u = 1, and p_i = T − u_i (so the last block is the last column alone). ⌊u/r⌋ is
    exact: r = n/d as the float's integer ratio, ⌊u·d/n⌋ in integers (no rounding);
    the guarantee does not depend on where the boundaries fall.

    Raises:
        ValueError: r ≤ 1, T outside [1, 2^22], more than 400 blocks, or
            blocks × T above 150·2^22 (over a minute of variance computation) (naming
            ``block_ratio``/``horizon``).
    """
    T, r = _resolve(horizon, block_ratio)
    if r is None:  # pragma: no cover - block_ratio given, so never None
        raise ValueError("block_ratio must be a finite number > 1")
    num, den = r.as_integer_ratio()
    u = [T]
    while u[-1] > 1:
        if len(u) > _MAX_BLOCKS:
            raise ValueError(
                f"block_ratio={block_ratio!r} gives more than {_MAX_BLOCKS} blocks at "
                f"horizon {T}; use a larger ratio (e.g. {DEFAULT_BLOCK_RATIO})"
            )
        u.append(max(1, min(u[-1] - 1, u[-1] * den // num)))
    if len(u) * T > _MAX_WORK:
        raise ValueError(
            f"block_ratio={block_ratio!r} gives {len(u)} blocks at horizon {T}: the exact "
            f"variances would take over a minute (blocks x horizon must be <= "
            f"{_MAX_WORK}); use a larger ratio (e.g. {DEFAULT_BLOCK_RATIO})"
        )
    starts: NDArray[np.int64] = T - np.array(u, dtype=np.int64)
    return starts


def _prefix_square_sums(f: Array) -> Array:
    """S(n) = Σ_{k<n} f(k)² for n = 1..len(f), each within ~260 ulps: blocks of 256
    summed by ``np.cumsum`` (positive terms: ≤ 255 roundings) on top of the block's
    offset, the correctly rounded sum of every earlier square.

    The offsets are exact: each square is M·2^(e−53) with an integer M < 2^53
    (``np.frexp``), a block's M of equal exponent sum exactly in int64 (256 terms:
    < 2^61), and the running total is a Python integer in units of the smallest
    2^(e−53); its conversion by integer true division is correctly rounded (the same
    float as ``math.fsum`` of the squares), in O(T) time.
    """
    sq = f * f
    n = len(f)
    out: Array = np.empty(n)
    if n == 0:
        return out
    mant, expo = np.frexp(sq)
    ints = np.ldexp(mant, 53).astype(np.int64)  # exact: mant·2^53 is an integer < 2^53
    base = int(expo.min())
    total = 0  # Σ of the squares so far, in units of 2^(base − 53)
    for a in range(0, n, _SUM_BLOCK):
        b = min(n, a + _SUM_BLOCK)
        block = np.cumsum(sq[a:b])
        if a:
            block += _ratio(total, base)
        out[a:b] = block
        eb, ib = expo[a:b], ints[a:b]
        for x in np.unique(eb).tolist():
            total += int(ib[eb == x].sum()) << (int(x) - base)
    return out


def _ratio(total: int, base: int) -> float:
    """total·2^(base − 53), correctly rounded (integer true division or multiplication
    by a power of two, both exact or correctly rounded)."""
    shift = base - 53
    if shift >= 0:
        return float(total << shift)
    return total / (1 << -shift)


def _column_weights(T: int) -> Array:
    """e_s = √(S(T − s)/S(T)) for every column s, e_0 = 1, e_s (s ≥ 1) one ulp up."""
    S = _prefix_square_sums(sqrt_coefficients(T))
    e: Array = np.sqrt(S[::-1] / S[-1])
    e[0] = 1.0
    e[1:] = np.nextafter(e[1:], np.inf)
    return e


def normalized_sqrt_weights(horizon: int, *, block_ratio: float | None = None) -> Array:
    """e_s = √(S(T − s)/S(T)) for s = 0..T − 1 (e_0 = 1 exactly), each rounded up;
    with blocks, e_s = e_{p_b} (the weight of the block's first column) for every
    column s of block b.

    The mechanism is B′ = A·E·G with these e_s (as computed, taken as exact reals) and
    the exact f and g; column s of its encoder C′ = C·diag(1/e) has norm
    √S(T − s)/e_s (with blocks ≤ √S(T − p_b)/e_{p_b}, S increasing). Each S(n) is
    within ~260 ulps, 3·10⁻¹⁴ relative (:func:`_prefix_square_sums`; f itself within
    2·10⁻¹⁵), so the computed ratio is within ~10⁻¹³ of the true one, and every e_s
    with s ≥ 1 is moved one ulp up (``np.nextafter``) after the correctly rounded
    division and square root. A column therefore exceeds the first column's norm
    √S(T) by at most ~10⁻¹³ relative, covered by the mechanism's relative margin of
    10⁻¹² on the ℓ₂ sensitivity; tests check every column against the calibrated
    sensitivity with S summed in extended precision.

    Args:
        horizon: T.
        block_ratio: None (:func:`default_block_ratio`: one weight per column for
            T ≤ 2^14) or r > 1 (blocks, :func:`normalized_sqrt_block_starts`).
    """
    T, r = _resolve(horizon, block_ratio)
    if r is None:
        return _column_weights(_check_horizon(T))
    e = _column_weights(T)
    starts = normalized_sqrt_block_starts(T, r)
    lengths = np.diff(np.append(starts, T))
    out: Array = np.repeat(e[starts], lengths)
    return out


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


def normalized_sqrt_noise_coefficients(horizon: int, *, block_ratio: float | None = None) -> Array:
    """V_t = ‖B′[t, :]‖² for t = 1..T, exactly.

    One weight per column (``block_ratio`` None and T ≤ 2^14): O(T²) time, O(T)
    memory. B′[t, j] = Σ_{s=j}^{t} e_s·g_{s−j} (B′ = A·E·G), so row t is row t − 1
    plus e_t·(g_t, g_{t−1}, …, g_0) in columns 0..t; V_t is its squared norm.

    Blocks: :func:`_block_noise_coefficients`, O(m·T log T) time, O(T + m²) memory.

    Raises:
        ValueError: a horizon outside [1, 2^22] or a bad ``block_ratio`` (naming it).
    """
    T, r = _resolve(horizon, block_ratio)
    out: Array = _cached_noise_coefficients(T if r is not None else _check_horizon(T), r).copy()
    return out


@lru_cache(maxsize=2)
def _cached_noise_coefficients(T: int, r: float | None) -> Array:
    """V_t for (T, ratio), read-only, kept for the last two calls (the mechanism, the
    certificates and ``compare`` share one computation)."""
    v = _column_noise_coefficients(T) if r is None else _block_noise_coefficients(T, r)
    v.setflags(write=False)
    return v


def _column_noise_coefficients(T: int) -> Array:
    """V_t with one weight per column: the O(T²) row recursion."""
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


def _block_noise_coefficients(T: int, block_ratio: float) -> Array:
    """V_t (t = 0..T − 1, 0-based) of the blocked mechanism, exactly.

    With Y = C z (Cov(Y_r, Y_r′) = K(r, r′) = Σ_{i=0}^{min(r, r′)} f_i·f_{i+|r−r′|}),
    block ends q_1 < q_2 < … (q = p_{b+1} − 1) and Δ_q = e_q − e_{q+1} > 0, the noise
    N_t = e_t·Y_t + Σ_{q<t} Δ_q·Y_q (module docstring) has

        V_t = e_t²·S(t + 1) + 2·e_t·Σ_{q<t} Δ_q·K(q, t) + Σ_{q, q′<t} Δ_q·Δ_q′·K(q, q′).

    For each end q, corr_q(d) = K(q, q + d) = Σ_{i≤q} f_i·f_{i+d} for d = 0..T − 1 − q
    is one FFT correlation of length N ≥ T (the circular wrap-around lands at indices
    below q, never read). Every term is positive (f > 0, Δ > 0), so there is no
    cancellation: measured agreement with the direct O(T²) row recursion is ~1e-15
    relative (T = 4096, r = 1.1; tests).
    """
    f = sqrt_coefficients(T)
    S = _prefix_square_sums(f)  # S[t] = S(t + 1)
    starts = normalized_sqrt_block_starts(T, block_ratio)
    col = _column_weights(T)
    w = col[starts]
    e_t = np.repeat(w, np.diff(np.append(starts, T)))
    ends = (starts[1:] - 1).tolist()
    deltas = (w[:-1] - w[1:]).tolist()
    nb = len(ends)
    n_fft = sfft.next_fast_len(T, real=True)
    f_hat = sfft.rfft(f, n_fft)
    cross = np.zeros(T)  # Σ_{q<t} Δ_q K(q, t)
    quad = np.zeros(T)  # Σ_{q, q′<t} Δ_q Δ_q′ K(q, q′)
    K = np.zeros((nb, nb))  # K(q_i, q_j) for i ≤ j
    ends_arr = np.array(ends, dtype=np.int64)
    buf = np.zeros(n_fft)
    total = 0.0
    for i, q in enumerate(ends):
        buf[:] = 0.0
        buf[: q + 1] = f[q::-1]
        corr = sfft.irfft(sfft.rfft(buf) * f_hat, n_fft)[q:T]  # corr[d] = corr_q(d)
        cross[q + 1 :] += deltas[i] * corr[1:]
        K[i, i:] = corr[ends_arr[i:] - q]
        # the quadratic term gains the pairs with q_i: Δ_i² K(i, i) + 2 Δ_i Σ_{j<i} Δ_j K(j, i)
        total += deltas[i] * (deltas[i] * K[i, i] + 2.0 * float(np.dot(deltas[:i], K[:i, i])))
        nxt = ends[i + 1] + 1 if i + 1 < nb else T
        quad[q + 1 : nxt] = total
    out: Array = e_t * e_t * S + 2.0 * e_t * cross + quad
    return out


def normalized_sqrt_losses(
    horizon: int, *, block_ratio: float | None = None
) -> tuple[float, float]:
    """(mean, max) loss of the column-normalized square root: S(T)·mean(V), S(T)·max(V).

    S(T) = Σ_{k<T} f(k)² is the squared ℓ₂ sensitivity (every column of C′ has at most
    that norm, the first exactly), from
    :func:`~dpcount.counting.factorization.sqrt_toeplitz.sqrt_l2_norm_squared`; the max is not at
    the
    last step (near t ≈ 0.57 T). ``block_ratio`` as for
    :func:`normalized_sqrt_noise_coefficients` (None: one weight per column for
    T ≤ 2^14, blocks of ratio 1.1 beyond).

    Raises:
        ValueError: a horizon outside [1, 2^22] or a bad ``block_ratio`` (naming it).
    """
    T, r = _resolve(horizon, block_ratio)
    V = _cached_noise_coefficients(T if r is not None else _check_horizon(T), r)
    S = sqrt_l2_norm_squared(T)
    return S * float(V.mean()), S * float(V.max())


class _WeightedSqrtProcess:
    """What the two processes share: the inner square-root-style convolution
    (:class:`~dpcount.counting.factorization.sqrt.SqrtNoiseProcess` with ``kernel``), the column
    weights e_t, and one accumulated value (scalar, or a vector for vector steps)
    saved in checkpoints under :attr:`_KEY`."""

    _KEY = ""

    def __init__(self, kernel: Array, weights: Array, source: NoiseBuffer) -> None:
        self._inner = SqrtNoiseProcess(kernel, source)
        self.horizon = len(kernel)
        self.dim = dim = source.dim
        self._weights = weights
        self._weight_list: list[float] | None = None
        self._acc: Any = 0.0 if dim is None else np.zeros(dim)

    @property
    def step(self) -> int:
        return self._inner.step

    def live_count(self) -> int:
        """The inner process's z and unreleased values, plus the accumulated value."""
        return self._inner.live_count() + 1

    def _weight(self, t: int) -> float:
        """e_t (a Python float for scalar steps: the list is made once)."""
        if self._weight_list is None:
            self._weight_list = self._weights.tolist()
        return self._weight_list[t]

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The inner process's state (step, z drawn, unreleased values) and the
        accumulated value."""
        acc = np.array(self._acc, dtype=np.float64, ndmin=1)
        return {**self._inner.state_dict(), self._KEY: acc}

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same horizon,
        weights, sampler and dim), checking every field; see :mod:`dpcount._state`."""
        owner = type(self).__name__
        st = state_keys(owner, state, ("t", "z", "noise", self._KEY))
        acc = state_array(owner, self._KEY, st[self._KEY], rows=None, dim=self.dim or 1)
        if not np.isfinite(acc).all():
            raise ValueError(f"corrupt {owner} state: {self._KEY} must be finite")
        self._inner.load_state_dict({k: st[k] for k in ("t", "z", "noise")})
        self._acc = float(acc.reshape(-1)[0]) if self.dim is None else acc.astype(np.float64).copy()


class NormalizedSqrtNoiseProcess(_WeightedSqrtProcess):
    """N = B′z = A·E·(G z) for one stream.

    w = G z is the causal convolution of z with g, computed in doubling FFT blocks
    by :class:`~dpcount.counting.factorization.sqrt.SqrtNoiseProcess` (kernel g; it holds every z
    drawn so far — each future w depends on all of them — and the computed,
    unreleased w). The noise is the running sum N_t = Σ_{s≤t} e_s·w_s, kept as one
    value (one vector for vector steps). ``next`` and ``next_many`` add in the same
    order (previous sum + e_t·w_t), so for the same w any mix of them gives the same
    floats (a checkpoint continues bit for bit).

    Args:
        kernel: g_0, …, g_{T−1}.
        weights: e_0, …, e_{T−1}.
        source: the sampler z is drawn from (i.i.d.), its Generator and ``dim``.
    """

    _KEY = "sum"  # the running sum N_t

    def next(self) -> Any:
        t = self._inner.step
        w = self._inner.next()
        if self.dim is None:
            self._acc = self._acc + self._weight(t) * w
            return self._acc
        self._acc = self._acc + self._weights[t] * w
        return self._acc.copy()

    def next_many(self, n: int) -> Array:
        n = check_integer("n", n, ge=1)
        t = self._inner.step
        w = self._inner.next_many(n)  # ours to modify (a copy or a handed-over block)
        e = self._weights[t : t + n]
        w *= e if self.dim is None else e[:, None]
        w[0] += self._acc  # same order of additions as next()
        np.cumsum(w, axis=0, out=w)
        self._acc = float(w[-1]) if self.dim is None else w[-1].copy()
        return w


class NormalizedSqrtBlockNoiseProcess(_WeightedSqrtProcess):
    """N = B′z of the blocked mechanism for one stream: the square root's noise plus a carry.

    N_t = e_t·Y_t + c_t with Y = C z the square root's noise
    (:class:`~dpcount.counting.factorization.sqrt.SqrtNoiseProcess`, kernel f: it holds every z
    drawn so far and the computed, unreleased Y) and the carry
    c_t = Σ_{block ends q < t} (e_q − e_{q+1})·Y_q, one value (one vector for vector
    steps) updated at each block end (module docstring). ``next`` and ``next_many``
    compute e_t·Y_t + c_t and c + Δ_q·Y_q in the same order, so for the same Y any mix
    of them gives the same floats (a checkpoint continues bit for bit).

    Args:
        kernel: f(0), …, f(T − 1).
        weights: e_0, …, e_{T−1} (constant within each block).
        starts: the blocks' first columns p_0 = 0 < p_1 < ….
        source: the sampler z is drawn from (i.i.d.), its Generator and ``dim``.
    """

    def __init__(
        self, kernel: Array, weights: Array, starts: NDArray[np.int64], source: NoiseBuffer
    ) -> None:
        super().__init__(kernel, weights, source)
        ends = [int(p) - 1 for p in starts[1:]]
        #: block end q → Δ_q = e_q − e_{q+1}
        self._delta = {q: float(weights[q] - weights[q + 1]) for q in ends}
        self._ends = np.array(ends, dtype=np.int64)

    _KEY = "carry"  # c_t, the finished blocks' contribution

    def next(self) -> Any:
        t = self._inner.step
        y = self._inner.next()
        if self.dim is None:
            out = self._weight(t) * y + self._acc
        else:
            out = self._weights[t] * y + self._acc
        delta = self._delta.get(t)
        if delta is not None:
            self._acc = self._acc + delta * y
        return out

    def next_many(self, n: int) -> Array:
        n = check_integer("n", n, ge=1)
        t = self._inner.step
        y = self._inner.next_many(n)  # ours to modify (a copy or a handed-over block)
        e = self._weights[t : t + n]
        out = y * (e if self.dim is None else e[:, None])
        lo = np.searchsorted(self._ends, t)
        hi = np.searchsorted(self._ends, t + n)
        a = 0
        for q in self._ends[lo:hi].tolist():
            out[a : q - t + 1] += self._acc
            self._acc = self._acc + self._delta[q] * (
                float(y[q - t]) if self.dim is None else y[q - t]
            )
            a = q - t + 1
        out[a:] += self._acc
        return out


class NormalizedSqrtFactorization(Scaled):
    """The column-normalized square-root factorization (Gaussian noise): the
    :class:`~dpcount.counting.factorization.scaled.Scaled` preset of the square root
    without row scaling.

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
        :func:`normalized_sqrt_weights`), so the ℓ₂ sensitivity is Δ·√S(T), S(T)
        from
        :func:`~dpcount.counting.factorization.sqrt_toeplitz.sqrt_l2_norm_squared` enlarged by a
        relative
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

    Blocks: with ``block_ratio`` r > 1 the weights are constant over geometric blocks
    of columns (:func:`normalized_sqrt_block_starts`), each block using its first
    column's weight, so no column's norm exceeds √S(T) and the guarantee above holds
    unchanged; the exact variances cost O(m·T log T) (m blocks; measured 4.3 s at
    T = 2^20, r = 1.1, computed on first use). The default (None) is one weight per
    column for T ≤ 2^14 and r = 1.1 beyond (:func:`default_block_ratio`): at
    T = 2^20 the max loss is 27.95 (square root 30.02), at T = 2^14 r = 1.1 gives
    15.74 against 15.65 per column.

    Streams: :class:`NormalizedSqrtNoiseProcess` (per column) and
    :class:`NormalizedSqrtBlockNoiseProcess` (blocks: the square root's noise plus
    one carried value); amortized O(log T) per step, holding the z drawn so far, like
    the square root's stream.

    Args:
        horizon: 1 ≤ T ≤ 2^14 with one weight per column, ≤ 2^22 with blocks.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (epsilon, delta, noise (Gaussian only), calibration, step_sensitivity,
            participation).
        rng: Generator, int seed (not for production) or None (OS entropy).
        block_ratio: None (the default above) or r > 1: geometric blocks of columns.

    Raises:
        ValueError: a horizon above 2^22 (naming ``horizon``), a ratio ≤ 1 or giving
            more than 400 blocks (naming ``block_ratio``) or a noise kind other than
            Gaussian (naming ``noise``).
        TypeError: a non-numeric ``block_ratio``.
    """

    name = "normalized-sqrt"
    scaling = Scaling(Base.SQRT)
    #: largest |B′[t, j]|: B′[t, t] = e_t ≤ 1 and |B′[t, j]| ≤ Σ_s |g_s| ≤ 2 (for
    #: Laplace tail bounds, which are never used: Gaussian only)
    max_noise_coefficient = 2.0

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """O(T·d), the square root's stream (:meth:`SqrtFactorization.memory_estimate
        <dpcount.counting.SqrtFactorization.memory_estimate>`); structure: the kernel
        f(0..T−1) and the column weights."""
        return fft_stream_memory(horizon, dim, arrays=2)

    def __init__(
        self,
        horizon: int,
        *,
        budget: Budget | None = None,
        rng: RNGLike = None,
        block_ratio: float | None = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        T, ratio = _resolve(horizon, block_ratio)
        resolved = gaussian_budget(budget, fields, "NormalizedSqrtFactorization")
        #: the resolved block ratio (None: one weight per column)
        self.block_ratio = ratio
        self._starts: NDArray[np.int64] | None = (
            None if ratio is None else normalized_sqrt_block_starts(T, ratio)
        )
        self._weights = normalized_sqrt_weights(T, block_ratio=ratio)
        self._weights.setflags(write=False)
        self._kernel = normalized_sqrt_kernel(T)
        self._kernel.setflags(write=False)
        self._coefficients: Array | None = None
        super().__init__(T, budget=resolved, rng=rng)

    # -- structure --------------------------------------------------------------------
    def _encoder_coefficients(self) -> Array:
        return sqrt_coefficients(self.horizon)

    def _decoder_kernel(self) -> Array:
        return self._kernel

    def weights(self) -> Array:
        """e_0, …, e_{T−1} (read-only)."""
        return self._weights

    def kernel(self) -> Array:
        """g_0, …, g_{T−1} (read-only)."""
        return self._kernel

    def block_starts(self) -> NDArray[np.int64]:
        """The blocks' first columns (every column with one weight per column)."""
        out: NDArray[np.int64] = (
            np.arange(self.horizon, dtype=np.int64) if self._starts is None else self._starts.copy()
        )
        return out

    def _config_kwargs(self) -> dict[str, Any]:
        return {**super()._config_kwargs(), "block_ratio": self.block_ratio}

    def _unit_sensitivities(self) -> tuple[float, float]:
        """(ℓ₁, ℓ₂): the ℓ₂ norm √S(T) of every column; the ℓ₁ norm max_j F(T − j)/e_j,
        F(n) = Σ_{k<n} f(k) (recorded only: the noise is Gaussian)."""
        T = self.horizon
        f = sqrt_coefficients(T)
        l1 = float(np.max(np.cumsum(f)[::-1] / self._weights))
        l2 = math.sqrt(sqrt_l2_norm_squared(T))
        return l1 * (1.0 + SENSITIVITY_MARGIN), l2 * (1.0 + SENSITIVITY_MARGIN)

    def noise_process(
        self, source: NoiseSource, width: int | None = None
    ) -> NormalizedSqrtNoiseProcess | NormalizedSqrtBlockNoiseProcess:
        buffer = NoiseBuffer(source, width)
        if self._starts is None:
            return NormalizedSqrtNoiseProcess(self._kernel, self._weights, buffer)
        f = sqrt_coefficients(self.horizon)
        return NormalizedSqrtBlockNoiseProcess(f, self._weights, self._starts, buffer)

    def _exact_coefficients(self) -> Array:
        """V_t for t = 1..T, computed on first use (O(T²) per column, O(m·T log T)
        with blocks) and kept (read-only)."""
        if self._coefficients is None:
            self._coefficients = _cached_noise_coefficients(self.horizon, self.block_ratio)
        return self._coefficients
