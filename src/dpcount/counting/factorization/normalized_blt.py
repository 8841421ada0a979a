"""The column-normalized BLT: a BLT encoder with every column scaled to the first one's norm.

The BLT encoder C (:mod:`dpcount.counting.factorization.blt`: lower-triangular Toeplitz, c_0 = 1,
c_k = Σ_i ω_i θ_i^{k−1}) has columns of unequal norm: column j holds c_0, …, c_{T−1−j},
squared norm S(T − j) with S(m) = Σ_{k<m} c_k², largest for j = 0. As for the square
root (:mod:`dpcount.counting.factorization.normalized_sqrt`), every other column can be scaled up to
the first one's norm without changing the ℓ₂ sensitivity:

    C′ = C·diag(1/e),   e_j = √(S(T − j)/S(T)),   B′ = A·C′⁻¹ = A·diag(e)·G,   G = C⁻¹.

The noise B′z is the running sum of e_s·w_s with w = G z, and G = C⁻¹ is again a BLT
(:func:`~dpcount.counting.factorization.blt.blt_inverse`: g_0 = 1, g_k = Σ_i ω′_i λ_i^{k−1}), so the
stream needs n + 1 running values per coordinate — the n buffers of G and the sum —
like the BLT itself, and no per-step table: e_j has a closed form (below).

Notation (code ↔ math):

==========  =====================================================================
θ, ω        ``buffer_decay``, ``output_scale`` of the encoder C (a BLT)
λ, ω′       ``inverse.decay``, ``inverse.scale``: G = C⁻¹ = BLT(λ, ω′)
S(m)        Σ_{k<m} c_k² = 1 + Σ_{i,j} ω_iω_j (1 − (θ_iθ_j)^{m−1})/(1 − θ_iθ_j)
e_j         :func:`normalized_blt_weights`: √(S(T − j)/S(T)), e_0 = 1
p_i(t)      Σ_{s≤t} λ_i^{t−s} z_s, the stream's buffers
V_t         :func:`normalized_blt_noise_coefficients`: ‖B′[t, :]‖²
==========  =====================================================================

Exact variances in O(T·n) (derivation; 0-based t). Row t of B′ is
h_t(j) = Σ_{s=j}^{t} e_s g_{s−j}, so h_t = h_{t−1} + e_t·(g_t, …, g_1, 1) and

    V_t = V_{t−1} + 2 e_t X_t + e_t² G_t,   G_t = Σ_{k≤t} g_k²,
    X_t = Σ_{j<t} h_{t−1}(j) g_{t−j} = Σ_i ω′_i Y_i(t),
    Y_i(t + 1) = λ_i Y_i(t) + e_t P_i(t),   P_i(t) = Σ_{k≤t} g_k λ_i^k,

with Y_i(0) = 0, V_{−1} = 0 (Y_i(t) = Σ_{j<t} h_{t−1}(j) λ_i^{t−1−j}; expanding h_t
gives the recursion). Each is a running sum or a first-order filter, computed in
blocks of 2^16 steps in O(n) memory per step of the block; the tests check them
against the dense B′ = A·C′⁻¹. The running sum of G is compensated (TwoSum,
:func:`_running_sums`): G_t = Σ_{k≤t} g_k² ≥ 1 in plain sums drops every late g_k²
below half its ulp, and V adds that bias up (4·10⁻⁶ of V_T at 2^22 before 0.5.0's
fix); above 2^22 those of P and V are compensated too (:data:`_PLAIN_SUMS_MAX`); compensated, V_T at
2^24 is within 10⁻⁹ of an FFT of B′'s last row (tests/counting/factorization/
test_scaled_build.py). The first rows' variances (their float-safe grids, the std
column of a few-row ``dpcount count``) are read from the first blocks, without the
whole table (:meth:`NormalizedBLT._iter_noise_coefficient_blocks`).

The closed form of S. Every term ω_iω_j (1 − r^{m−1})/(1 − r), r = θ_iθ_j ∈ (0, 1),
is positive and evaluated as expm1(−u(m − 1))/expm1(−u), u = −ln r from
log1p(−(1 − θ)) (no cancellation), so S(m) is within a few dozen ulps. The weights
use it once per aligned group of 512 columns and add the positive c_k² upwards from
there (n exponentials per column instead of n(n + 1)/2), so each S(T − j) is within
~600 ulps (≈ 7·10⁻¹⁴ relative) — far inside the 2^-40 by which every weight is
enlarged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcount._scipy import lfilter
from dpcount._state import state_array, state_int, state_keys
from dpcount._validate import check_choice, check_integer
from dpcount.counting._chunked import ChunkedNoiseProcess
from dpcount.counting.base import MemoryEstimate
from dpcount.counting.factorization._precision import SCALED_BLT_LONG_HORIZON, decay_power_pairs
from dpcount.counting.factorization._types import Array
from dpcount.counting.factorization.blt import (
    BLTInverse,
    _BLTParameters,
    _long_times,
    _ratios,
    _rows_times,
    blt_inverse,
    check_blt_parameters,
    check_float_model,
    compensated_filter,
    decay_residuals,
    encoder_coefficients,
    power_residuals,
)
from dpcount.counting.factorization.scaled import Base, Scaled, Scaling
from dpcount.counting.factorization.sqrt import SENSITIVITY_MARGIN
from dpcount.data import load_table
from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

__all__ = [
    "NORMALIZED_BLT_MAX_HORIZON",
    "NormalizedBLT",
    "NormalizedBLTNoiseProcess",
    "normalized_blt_losses",
    "normalized_blt_noise_coefficients",
    "normalized_blt_weights",
    "shipped_normalized_blt_parameters",
]

#: largest horizon: the float release's error is measured within a quarter of the float
#: model's κ up to 2^24 (``blt.FLOAT_MODEL_HORIZONS``, every block path, seeds 1–3, with
#: the long forms beyond 2^16 and their buffers crossing the chunks unrounded,
#: :func:`across_levels_exact`, 2026-12-07: ≤ 3.9 at 2^20, ≤ 3.4 at 2^22, ≤ 4.5 at 2^24;
#: the max-objective parameters ≤ 6.0 at 2^24; before the unrounded buffers ≤ 18 and ≤ 30
#: at 2^20 and 2^22, growing about 2× per 4× horizon; 78 at 2^17 without the long forms),
#: as far as the module's functions go (``_FUNCTIONS_MAX_HORIZON``, as the shipped
#: parameters); the exact variances cost O(T·n), computed a block of 2^16 steps at a
#: time as the first rows need them.
NORMALIZED_BLT_MAX_HORIZON = SCALED_BLT_LONG_HORIZON
#: steps per block of the variance recursion and of the stream's weight table
_BLOCK = 1 << 16
_WEIGHT_BLOCK = 512
#: steps of a block from which the noise process reads the mechanism's kept weights
_TABLE_STEPS = 1 << 16
#: S(T − j) is anchored on its closed form once per aligned group of this many columns
_ANCHOR = 512
#: every weight e_j (j ≥ 1) is enlarged by this relative amount (≈ 9.1e-13), far above
#: the closed form's rounding (a few dozen ulps), so no column of C′ can exceed √S(T)
_WEIGHT_MARGIN = 2.0**-40
#: column-block width of a normalized vector step (the BLT's was this before its
#: equal-width blocks, ``blt._step_width``; not changed here: not re-measured)
_COLUMNS = 16384
#: steps per chunk of a batch's chunked products (as the BLT's ``blt._BLOCK``)
_CHUNK = 32
#: largest horizon with the exact ℓ₁ sensitivity (recorded only; Cauchy–Schwarz beyond)
_L1_EXACT = 1 << 16


#: largest horizon of the module's functions (weights, variances, losses, the shipped
#: table's lookup): exact arithmetic, no float release, so beyond the mechanism's limit.
#: 2^24, the shipped table's last entry: certified there (tests/counting/factorization/
#: test_scaled_build.py) — S(T − j) against mpmath on group boundaries and sampled
#: columns, the weights above the exact ratio and within 2^-39 of it, V_T against an FFT
#: of B′'s last row (with the compensated running sums above 2^22)
_FUNCTIONS_MAX_HORIZON = 1 << 24


def _check(horizon: int) -> int:
    return check_integer("horizon", horizon, ge=1, le=_FUNCTIONS_MAX_HORIZON)


class _SquareSums:
    """S(m) = Σ_{k<m} c_k² of the encoder BLT(θ, ω), for arrays of m ≥ 1 (closed form)."""

    def __init__(self, theta: Array, omega: Array) -> None:
        x = _ratios(theta, 1.0 - theta)
        iu, ju = np.triu_indices(len(theta))
        self._u = x.u[iu] + x.u[ju]  # −ln(θ_iθ_j) > 0
        # ω_iω_j/(1 − θ_iθ_j), doubled off the diagonal (the sum is symmetric in i, j)
        coef = omega[iu] * omega[ju] / -np.expm1(-self._u)
        self._coef = np.where(iu == ju, 1.0, 2.0) * coef

        self._rate = x.u  # −ln θ_i
        self._omega = omega[:, None]

    def __call__(self, m: Array) -> Array:
        k = np.asarray(m, dtype=np.float64) - 1.0
        terms = np.expm1(-np.multiply.outer(k, self._u))
        terms *= self._coef
        # a row-wise sum (not a matrix product): each S(m) is computed by the same
        # operations whatever the block it is computed in
        out: Array = 1.0 - np.sum(terms, axis=1)
        return out

    def descending(self, T: int, first: int, stop: int) -> Array:
        """S(T − j) for j = first … stop − 1 (stop ≤ T): the closed form at the smallest
        argument m₀ = T − stop + 1, then S(m + 1) = S(m) + c_m² upwards, O(n) per value
        instead of O(n²). Positive terms only: within (a few dozen + stop − first) ulps
        of the closed form's value."""
        m0 = T - stop + 1
        out: Array = np.empty(stop - first)
        k = np.arange(m0, T - first, dtype=np.float64)  # c_k for k = m0 … T − first − 1
        if len(k):
            c = np.sum(self._omega * np.exp(-np.multiply.outer(self._rate, k - 1.0)), axis=0)
            c *= c
            c[0] += float(self(np.array([m0]))[0])
            np.cumsum(c, out=out[-2::-1])
            out[-1] = float(self(np.array([m0]))[0])
        else:
            out[-1] = float(self(np.array([m0]))[0])
        return out


def normalized_blt_weights(
    buffer_decay: Any, output_scale: Any, horizon: int, start: int = 0, count: int | None = None
) -> Array:
    """e_j = √(S(T − j)/S(T)) for j = start … start + count − 1 (e_0 = 1 exactly).

    Each e_j with j ≥ 1 is enlarged by a relative 2^-40 (≈ 9·10⁻¹³): S is within
    ~600 ulps (module docstring), so the computed e_j is above the exact ratio's square
    root and column j of C′ has norm √S(T − j)/e_j < √S(T).
    Each weight is computed from its own index by the same operations whatever the
    block it is computed in, so the variances and every stream use the same floats.

    Raises:
        ValueError: parameters outside the BLT domain or a range outside [0, T).
    """
    theta, omega = check_blt_parameters(buffer_decay, output_scale)
    T = _check(horizon)
    first = check_integer("start", start, ge=0, le=T)
    n = T - first if count is None else check_integer("count", count, ge=0, le=T - first)
    return _weights(_SquareSums(theta, omega), T, first, n)


def _weights(sums: _SquareSums, T: int, start: int, count: int) -> Array:
    """e_j for j in [start, start + count): S(T − j) from :meth:`_SquareSums.descending`
    over aligned groups of 512 columns (so each value is the same float whatever range
    it is asked in), then √(S(T − j)/S(T))·(1 + 2^-40), e_0 = 1."""
    total = float(sums(np.array([T]))[0])
    S: Array = np.empty(count)
    j = start
    while j < start + count:
        g0 = j - j % _ANCHOR
        g1 = min(g0 + _ANCHOR, T)
        group = sums.descending(T, g0, g1)
        take = min(g1, start + count) - j
        S[j - start : j - start + take] = group[j - g0 : j - g0 + take]
        j += take
    e: Array = np.sqrt(S / total) * (1.0 + _WEIGHT_MARGIN)
    if start == 0 and count:
        e[0] = 1.0
    return e


def _powers(r: Array, d: Array, k: Array) -> Array:
    """r_i^k (rows i, columns k) for |r_i| < 1 with d = 1 − r accurate."""
    x = _ratios(r, d)
    out: Array = np.empty((len(r), len(k)))
    for i in range(len(r)):
        out[i] = np.exp(-x.u[i] * k) if r[i] > 0 else np.power(r[i], k)
    return out


def _variance_blocks(
    theta: Array, omega: Array, inv: BLTInverse, T: int
) -> Iterator[tuple[int, Array]]:
    """(first index, V of that block) for blocks of 2^16 steps covering t < T, by the
    recursion of the module docstring, carrying P, Y, G and V across blocks (their
    running sums compensated above :data:`_PLAIN_SUMS_MAX`, :func:`_running_sums`)."""
    lam, wp = inv.decay, inv.scale
    n = len(lam)
    sums = _SquareSums(theta, omega)
    running = _running_sums if T > _PLAIN_SUMS_MAX else _plain_running_sums
    P = np.zeros(n)  # P_i(t0 − 1)
    Y = np.zeros(n)  # Y_i(t0)
    G = 0.0  # G_{t0 − 1}
    V = 0.0  # V_{t0 − 1}
    for t0 in range(0, T, _BLOCK):
        m = min(_BLOCK, T - t0)
        k = np.arange(t0, t0 + m, dtype=np.float64)
        e = _weights(sums, T, t0, m)
        g = np.empty(m)
        if t0 == 0:
            L = _powers(lam, inv.one_minus_decay, k)  # λ_i^k
            g[0] = 1.0
            g[1:] = _long_times(wp, L[:, :-1])
        else:
            both = _powers(lam, inv.one_minus_decay, np.append(k[0] - 1.0, k))
            g[:] = _long_times(wp, both[:, :-1])  # g_k = Σ_i ω′_i λ_i^{k−1}
            L = both[:, 1:].copy()
        L *= g
        L[:, 0] += P
        running(L)  # P_i(t)
        P = L[:, -1].copy()
        L *= e
        X = np.empty(m)
        for i in range(n):  # L[i] becomes Y_i(t + 1)
            L[i] = lfilter([1.0], [1.0, -lam[i]], L[i], zi=[lam[i] * Y[i]])[0]
        X[0] = float(wp @ Y)
        X[1:] = _long_times(wp, L[:, :-1])
        Y = L[:, -1].copy()
        gg = g * g
        gg[0] += G
        _running_sums(gg)  # compensated at every horizon (:data:`_PLAIN_SUMS_MAX`)
        G = float(gg[-1])
        inc = 2.0 * e * X + e * e * gg
        inc[0] += V
        running(inc)
        V = float(inc[-1])
        yield t0, inc


#: horizons up to this keep the plain running sums of P and V in the variance
#: recursion; above it they are compensated too (:func:`_running_sums`). The running
#: sum of G_t = Σ g_k² is compensated at every horizon (2026-12-07): plain, it was the
#: error's cause (V_T low by 7·10⁻¹⁰ at 2^16, 1.0·10⁻⁶ at 2^20, 4.1·10⁻⁶ at 2^22 against an
#: FFT of B′'s last row, shipped parameters); with it compensated and P, V plain, V is
#: within 4.3·10⁻¹¹ of the all-compensated recursion at 2^20 at no measurable cost
#: (0.423 s against 0.424 s CPU for the 2^20 table; all compensated 0.50 s)
_PLAIN_SUMS_MAX = 1 << 22


def _plain_running_sums(x: Array) -> None:
    """x ← its running sums along the last axis (numpy's, in order)."""
    np.cumsum(x, axis=-1, out=x)


def _running_sums(x: Array) -> None:
    """x ← its running sums along the last axis, compensated: the plain running sum
    s_k = fl(s_{k−1} + x_k) plus the running sum of its rounding errors (each exact by
    TwoSum, Knuth), so each value is within u(1 + k²u) of the exact running sum of the
    block. The plain sum alone loses the late, tiny g_k² against G_t ≥ 1 (each below
    half an ulp of G_t vanishes): a bias that the variances add up over T steps, 7·10⁻¹⁰
    of V_T at 2^16, 10⁻⁶ at 2^20 and 1.6·10⁻⁵ at 2^24 with the shipped parameters
    (against an FFT of B′'s last row; compensated, within 5·10⁻¹⁰ up to 2^24)."""
    s = np.cumsum(x, axis=-1)
    err = np.zeros_like(s)
    _two_sum_error(s[..., :-1], x[..., 1:], s[..., 1:], err[..., 1:], np.empty_like(s[..., 1:]))
    np.cumsum(err, axis=-1, out=err)
    np.add(s, err, out=x)


def normalized_blt_noise_coefficients(buffer_decay: Any, output_scale: Any, horizon: int) -> Array:
    """V_t = ‖B′[t, :]‖² for t = 1..T (O(T·n) time; module docstring)."""
    theta, omega = check_blt_parameters(buffer_decay, output_scale)
    T = _check(horizon)
    inv = blt_inverse(theta, omega)
    out: Array = np.empty(T)
    for t0, part in _variance_blocks(theta, omega, inv, T):
        out[t0 : t0 + len(part)] = part
    return out


def normalized_blt_losses(
    buffer_decay: Any, output_scale: Any, horizon: int
) -> tuple[float, float]:
    """(mean, max) loss S(T)·mean(V), S(T)·max(V) in sensitivity-1 Gaussian units, in
    O(T·n) time and O(2^16·n) memory."""
    theta, omega = check_blt_parameters(buffer_decay, output_scale)
    T = _check(horizon)
    return _losses(tuple(theta.tolist()), tuple(omega.tolist()), T)


@lru_cache(maxsize=8)
def _losses(theta: tuple[float, ...], omega: tuple[float, ...], T: int) -> tuple[float, float]:
    th, om = np.array(theta), np.array(omega)
    inv = blt_inverse(th, om)
    total, largest = 0.0, 0.0
    for _, part in _variance_blocks(th, om, inv, T):
        total += float(np.sum(part))
        largest = max(largest, float(part.max()))
    S = float(_SquareSums(th, om)(np.array([T]))[0])
    return S * total / T, S * largest


# -- the noise process -----------------------------------------------------------------

#: Horizons above these compute blocks in the accurate forms (chunked products for vector
#: blocks too, decays r_hi + r_lo across chunks, a TwoSum running sum); up to them the
#: blocks are computed as before, to the bit. Measured (benchmarks/float_model_long.py,
#: the float model's ratio, seed 1): the per-step vector blocks 38 at 2^10, 82 at 2^11,
#: 212 at 2^15 (chunked: ≤ 41 up to 2^16); scalar blocks 33 at 2^15, 64 at 2^16
#: (accurate: 45).
_SCALAR_ACCURATE_ABOVE = 1 << 15
_VECTOR_ACCURATE_ABOVE = 1 << 10
#: horizons above this (the limit measured before the long forms) compute every block in
#: the long forms (:meth:`NormalizedBLTNoiseProcess._compute_long`); up to it the blocks
#: are computed as before, to the bit (the row-scaled BLT's: 2^17)
_LONG_ABOVE = 1 << 16
#: Veltkamp's splitter 2^27 + 1 (:func:`_two_product_error`)
_SPLITTER = float((1 << 27) + 1)
#: steps per block of :func:`_running_sum` (blocks of at least this many steps use it)
_SUM_BLOCK = 64
#: steps per block of :func:`_blocked_sum` (scalar batch blocks at accurate horizons)
_PARTIAL = 32
#: the chunk matrices of a mechanism's processes: c -> (G_c, P, F, λ^c)
#: (:meth:`NormalizedBLTNoiseProcess._chunk_matrices`), ("carry", c, K) ->
#: :func:`_carry_matrices` and ("residuals", kind, c) -> the decays' residuals
#: (:meth:`NormalizedBLTNoiseProcess._residuals`)
ChunkCache = dict[Any, tuple[Array, ...]]
#: chunks per super-chunk of :func:`across_chunks`
_SUPER = 32
#: powers of the decays below this are 0 in :func:`across_chunks`
_TINY = 2.0**-600
#: values per piece of :func:`_running_sum` (its scratch: 5 arrays of this many)
_SUM_PIECE = 1 << 16
#: values (steps × coordinates) per piece of :meth:`NormalizedBLTNoiseProcess.
#: _compute_long`: every array of a piece stays in the core's cache (1 MiB of L2 here)
#: between its passes, where passes over a whole batch of 2^20–2^22 steps go to memory
#: (measured at 2^20, scalar, without the draw: 9.7× the normals in one piece, 4.4–4.8×
#: in pieces of 2^15–2^17; 2^16 = 16384 steps at d = 4, faster there than 8192)
_LONG_PIECE = 1 << 16


def _two_sum_error(a: Array, b: Array, s: Array, out: Array, work: Array) -> None:
    """out = (a − (s − bb)) + (b − bb), bb = s − a: the error of s = fl(a + b) (Knuth's
    TwoSum, s + out = a + b exactly), in place (``work``: scratch of out's shape)."""
    np.subtract(s, a, out=work)  # bb
    np.subtract(s, work, out=out)
    np.subtract(a, out, out=out)
    np.subtract(b, work, out=work)
    np.add(out, work, out=out)


def _carry_matrices(decay: Array, one_minus_decay: Array, c: int, K: int) -> tuple[Array, ...]:
    """For :func:`across_chunks` over K chunks of c steps (ρ_i = λ_i^c, s = :data:`_SUPER`,
    K2 = ⌈K/s⌉): M[i, l, j] = ρ_i^{j−l} (l ≤ j < s), ρ_i^{j+1} (j < s),
    M2[i, l, q] = ρ_i^{s(q−1−l)} (l < q < K2) and ρ_i^{s·q} (q < K2); every power
    e^{−c·k·ln(1/λ_i)} from the accurate 1 − λ_i (:func:`_powers`), read-only."""
    s = _SUPER
    K2 = -(-K // s)
    near = _powers(decay, one_minus_decay, c * np.arange(s + 1, dtype=np.float64))
    far = _powers(decay, one_minus_decay, c * s * np.arange(K2, dtype=np.float64))
    # powers below 2^-600 (a term 2^-547 u of its E) are taken as 0: no subnormal
    # products (each costs ~100 times a normal one)
    near[np.abs(near) < _TINY] = 0.0
    far[np.abs(far) < _TINY] = 0.0
    lag = np.arange(s)[None, :] - np.arange(s)[:, None]  # [l, j]: j − l
    M = np.where(lag >= 0, near[:, np.clip(lag, 0, None)], 0.0)
    lag2 = np.arange(K2)[None, :] - 1 - np.arange(K2)[:, None]  # [l, q]: q − 1 − l
    M2 = np.where(lag2 >= 0, far[:, np.clip(lag2, 0, None)], 0.0)
    out = tuple(np.ascontiguousarray(a) for a in (M, near[:, 1:], M2, far))
    for mat in out:
        mat.setflags(write=False)
    return out


def across_chunks(E: Array, start: Array, mats: tuple[Array, ...]) -> tuple[Array, Array]:
    """The buffers before each chunk, p_i(k) = ρ_i·p_i(k − 1) + E_i(k − 1) from
    p_i(0) = ``start``, and after the last: ``E`` (n, K) or (n, R, K) for R streams
    (coordinates) the chunks' own parts, ``start`` (n,) or (n, R), ``mats`` from
    :func:`_carry_matrices`. In matrix products instead of a recursion: within
    super-chunks of s = 32 chunks L = E·M (sums of ≤ 32 terms ρ^k·E with the accurate
    powers), across them the carries C_q = ρ^{sq}·p(0) + Σ_{l<q} ρ^{s(q−1−l)} L_end(l)
    as one more product, then p = L + ρ^{j+1}·C_q. Each value is a sum of at most
    s + K2 products with accurate powers (a recursion in fl(ρ) instead multiplies by
    ρ(1 + δ) every step, a bias blt.decay_residuals compensates)."""
    M, up, M2, far = mats
    n, K = E.shape[0], E.shape[-1]
    mid = E.shape[1:-1]  # () or (R,)
    ones = (1,) * len(mid)
    s = M.shape[1]
    K2 = M2.shape[1]
    if K2 * s == K and E.flags.c_contiguous:
        X = E.reshape(n, *mid, K2, s)
    else:
        X = np.zeros((n, *mid, K2, s))
        X.reshape(n, *mid, K2 * s)[..., :K] = E
    L = np.matmul(X, M.reshape(n, *ones, s, s))  # within each super-chunk, from zero
    ends = np.ascontiguousarray(L[..., -1])[..., None, :]  # (n, …, 1, K2)
    C = np.matmul(ends, M2.reshape(n, *ones, K2, K2))[..., 0, :]  # the carries
    C += start[..., None] * far.reshape(n, *ones, K2)
    L += C[..., None] * up.reshape(n, *ones, 1, s)
    S = L.reshape(n, *mid, K2 * s)  # S[…, k]: p after chunk k
    prev = np.empty((n, *mid, K))
    prev[..., 0] = start
    prev[..., 1:] = S[..., : K - 1]
    return prev, S[..., K - 1].copy()


def _level_matrices(decay: Array, one_minus_decay: Array, c: int) -> tuple[Array, Array]:
    """For :func:`across_levels` at chunks of c steps (ρ_i = λ_i^c, s = :data:`_SUPER`):
    M[i, l, j] = ρ_i^{j−l} (l ≤ j < s) and up[i, j] = ρ_i^{j+1}, from the accurate
    powers (:func:`_powers`), those below 2^-600 taken as 0; read-only."""
    s = _SUPER
    near = _powers(decay, one_minus_decay, c * np.arange(s + 1, dtype=np.float64))
    near[np.abs(near) < _TINY] = 0.0
    lag = np.arange(s)[None, :] - np.arange(s)[:, None]  # [l, j]: j − l
    out = (np.where(lag >= 0, near[:, np.clip(lag, 0, None)], 0.0), near[:, 1:].copy())
    for mat in out:
        mat.setflags(write=False)
    return out


def across_levels(
    E: Array, start: Array, c: int, mats: Callable[[int], tuple[Array, Array]]
) -> tuple[Array, Array]:
    """:func:`across_chunks` (the buffers before each chunk of c steps and after the
    last, p_i(k) = ρ_i·p_i(k − 1) + E_i(k − 1) from ``start``) with the carries across
    the super-chunks of s = 32 chunks computed the same way one level up — chunks of
    c·s steps whose own parts are the super-chunks' ends — instead of by one K2 × K2
    product (O(K2²) per buffer: 8 MB per buffer at T = 2^20). Each value is a sum of at
    most 32 products with the accurate powers at each of ⌈log_32 K⌉ levels, plus one
    product by the carry; ``mats(c)``: :func:`_level_matrices` for chunks of c steps."""
    M, up = mats(c)
    n, K = E.shape[0], E.shape[-1]
    mid = E.shape[1:-1]
    ones = (1,) * len(mid)
    s = M.shape[1]
    K2 = -(-K // s)
    if K2 * s == K and E.flags.c_contiguous:
        X = E.reshape(n, *mid, K2, s)
    else:
        X = np.zeros((n, *mid, K2, s))
        X.reshape(n, *mid, K2 * s)[..., :K] = E
    L = np.empty_like(X)  # within each super-chunk, from zero: one product per buffer
    rows = X[0].size // s
    if rows * s * s <= _PRODUCT_BLOCK:  # one stacked product (a BLAS call per buffer)
        np.matmul(X.reshape(n, rows, s), M, out=L.reshape(n, rows, s))
    else:  # in row blocks (single-threaded products, ``blt._rows_times``)
        for i in range(n):
            _rows_times(X[i].reshape(-1, s), M[i], L[i].reshape(-1, s))
    if K2 == 1:
        carry = start[..., None]
    else:
        carry = across_levels(np.ascontiguousarray(L[..., -1]), start, c * s, mats)[0]
    L += carry[..., None] * up.reshape(n, *ones, 1, s)
    S = L.reshape(n, *mid, K2 * s)
    prev = np.empty((n, *mid, K))
    prev[..., 0] = start
    prev[..., 1:] = S[..., : K - 1]
    return prev, S[..., K - 1].copy()


def _exact_level_matrices(one_minus_decay: Array, c: int) -> tuple[Any, ...]:
    """For :func:`across_levels_exact` at chunks of c steps (ρ_i = λ_i^c, s =
    :data:`_SUPER`): M[i, l, j] = ρ_i^{j−l} (l ≤ j < s) and up[i, j] = ρ_i^{j+1}, each as a
    pair hi + lo (:func:`._precision.decay_power_pairs`: λ_i^{c·k} from the accurate
    d_i = 1 − λ_i at 50 digits, relative error ≤ 2^-104, the same doubles on every
    platform; tested against mpmath powers, where :func:`_level_matrices`' floats are
    off by ~u), M's high part split for exact products (:func:`_fixed_split`, k = s
    terms): (M₁, [M₂; M] stacked, up, up_lo, β_a); those below 2^-600 taken as 0;
    read-only. The powers come from ``one_minus_decay`` (d_i) alone."""
    s = _SUPER
    hi, lo = decay_power_pairs(one_minus_decay, c * np.arange(s + 1))
    tiny = np.abs(hi) < _TINY
    hi[tiny], lo[tiny] = 0.0, 0.0
    lag = np.arange(s)[None, :] - np.arange(s)[:, None]  # [l, j]: j − l
    at = np.clip(lag, 0, None)
    M = np.where(lag >= 0, hi[:, at], 0.0)
    M_lo = np.where(lag >= 0, lo[:, at], 0.0)
    bits_a, bits_b = _split_bits(s)
    M1, M2 = np.empty_like(M), np.empty_like(M)
    for i in range(len(M)):
        M1[i], M2[i] = _fixed_split(M[i], M_lo[i], bits_b) if M[i].any() else (M[i], M_lo[i])
    out = (M1, np.concatenate([M2, M], axis=1), hi[:, 1:].copy(), lo[:, 1:].copy())
    for mat in out:
        mat.setflags(write=False)
    return (*out, bits_a)


def across_levels_exact(
    E: Array, start: Array, c: int, mats: Callable[[int], tuple[Any, ...]]
) -> tuple[Array, Array]:
    """:func:`across_levels` for the two streams of :meth:`NormalizedBLTNoiseProcess.
    _long_chunks` (``E`` (n, 2R, K): the exact parts, then the rests; ``start`` (n, 2R)),
    without rounding the first stream: per level, each buffer's own parts X split on a
    grid (:func:`_grid_split_rows`, β_a bits) so X₁·M₁ is exact (M = M₁ + M₂ the accurate
    powers' pair, :func:`_exact_level_matrices`), the rest X₂·M + X₁·M₂ (≲ s·2^-22 of
    the scale, its rounding O(s·2^-22·u)) with the second stream's own parts; the carry
    product C·ρ^{j+1} and its sum with the level's part by TwoProduct / TwoSum, their
    errors (and C·ρ_lo) added to the second stream. Returns (prev, end) as
    :func:`across_levels`, the first stream's values exact floats whose sum with the
    second is the recursion's value to O(u²) (:func:`across_levels` rounds the first
    stream's buffers, ≈ u·|p| shared by the chunks after each carry: the float model's
    ratio 45.9 at 2^23, batch, seed 1, this one: see the module's figures)."""
    R = E.shape[1] // 2
    prev_hi, prev_lo, end_hi, end_lo = _exact_levels(
        E[:, :R], E[:, R:], start[:, :R], start[:, R:], c, mats
    )
    prev = np.concatenate([prev_hi, prev_lo], axis=1)
    end = np.concatenate([end_hi, end_lo], axis=1)
    return prev, end


def _exact_levels(
    E_hi: Array, E_lo: Array, s_hi: Array, s_lo: Array, c: int, mats: Callable[[int], Any]
) -> tuple[Array, Array, Array, Array]:
    """:func:`across_levels_exact` on the pair (E_hi, E_lo) (n, R, K) from (s_hi, s_lo):
    (prev_hi, prev_lo, end_hi, end_lo)."""
    M1, M2M, up, up_lo, bits_a = mats(c)
    n, R, K = E_hi.shape
    s = M1.shape[1]
    K2 = -(-K // s)
    X = np.zeros((n, R, K2, s))
    X.reshape(n, R, K2 * s)[..., :K] = E_hi
    left = np.empty((n, R, K2, 2 * s))  # [X₁ | X₂ + E_lo]
    if K2 * s == K:
        left[..., s:] = E_lo.reshape(n, R, K2, s)
    else:
        rest = np.zeros((n, R, K2, s))
        rest.reshape(n, R, K2 * s)[..., :K] = E_lo
        left[..., s:] = rest
    X2 = np.empty((n, R, K2, s))
    _grid_split_rows(X, bits_a, left[..., :s], X2)  # one grid per buffer
    left[..., s:] += X2
    L_hi = np.matmul(left[..., :s], M1[:, None])  # exact
    L_lo = np.matmul(left, M2M[:, None])
    if K2 == 1:
        c_hi, c_lo = s_hi[..., None], s_lo[..., None]
    else:
        c_hi, c_lo, _, _ = _exact_levels(
            np.ascontiguousarray(L_hi[..., -1]),
            np.ascontiguousarray(L_lo[..., -1]),
            s_hi,
            s_lo,
            c * s,
            mats,
        )
    u_hi = np.broadcast_to(up[:, None, None, :], L_hi.shape)
    u_lo = up_lo[:, None, None, :]
    carry = np.broadcast_to(c_hi[..., None], L_hi.shape)
    prod = carry * u_hi
    err = np.zeros(L_hi.shape)
    _add_product_error(np.array(carry), u_hi, prod, err)
    L_lo += c_lo[..., None] * u_hi
    L_lo += c_hi[..., None] * u_lo
    L_lo += err
    total = L_hi + prod
    _two_sum_error(L_hi, prod, total, err, np.empty_like(err))
    L_lo += err
    hi = total.reshape(n, R, K2 * s)
    lo = L_lo.reshape(n, R, K2 * s)
    prev_hi, prev_lo = np.empty((n, R, K)), np.empty((n, R, K))
    prev_hi[..., 0], prev_lo[..., 0] = s_hi, s_lo
    prev_hi[..., 1:], prev_lo[..., 1:] = hi[..., : K - 1], lo[..., : K - 1]
    return prev_hi, prev_lo, hi[..., K - 1].copy(), lo[..., K - 1].copy()


@lru_cache(maxsize=4)
def _partial_sum_matrix(b: int) -> Array:
    """U[i, j] = 1 for i ≤ j (b × b): (x @ U)[j] = Σ_{i≤j} x_i (read-only)."""
    out: Array = np.triu(np.ones((b, b)))
    out.setflags(write=False)
    return out


def _blocked_sum(x: Array, start: Array, dest: Array, work: Array | None = None) -> None:
    """dest_t = start + Σ_{s≤t} x_s for a scalar block ``x`` (m,; overwritten):
    :func:`_block_sums` over blocks of :data:`_PARTIAL` steps, a last partial block
    padded with zeros (``work``: optional scratch of m floats)."""
    m = len(x)
    b = _PARTIAL
    K = -(-m // b)
    direct = m == K * b and dest.flags.c_contiguous and x.flags.c_contiguous
    if direct:
        rows, res = x.reshape(1, K, b), dest.reshape(1, K, b)
    else:
        rows = np.zeros((1, K, b))
        rows.reshape(-1)[:m] = x
        res = np.empty((1, K, b))
    _block_sums(rows, np.reshape(start, (1,)), res, work)
    if not direct:
        dest[...] = res.reshape(-1)[:m]


def _scratch(work: Array | None, size: int) -> Array:
    """``work`` as a flat array of ``size`` floats when it can be (writable, contiguous,
    large enough), else a fresh one: each fresh block-sized array costs its page faults."""
    if (
        work is not None
        and work.dtype == np.float64
        and work.flags.writeable
        and work.flags.c_contiguous
        and work.size >= size
    ):
        out: Array = work.reshape(-1)[:size]
        return out
    return np.empty(size)


#: widths up to which :func:`_copy_transposed` copies column by column
_COLUMN_COPY_WIDTH = 4


def _copy_transposed(dest: Array, src: Array) -> None:
    """dest[t, d] = src[d, t] (``dest`` (T, D) C-contiguous). numpy's copy of the
    transposed view runs D-long inner loops (one per step); a strided column per
    coordinate instead is 2–5× faster for D ≤ 4 (measured at T = 2^16: 112 µs instead
    of 252 at D = 4), slower from D = 8. A copy: the same floats."""
    if src.shape[0] <= _COLUMN_COPY_WIDTH:
        for d, row in enumerate(src):
            dest[:, d] = row
    else:
        np.copyto(dest, src.T)


def _transposed(src: Array) -> Array:
    """src.T as a new C-contiguous array (src (T, d)): :func:`_copy_transposed`'s
    strided copies the other way (the same floats)."""
    out: Array = np.empty(src.shape[::-1])
    if src.shape[1] <= _COLUMN_COPY_WIDTH:
        for d in range(src.shape[1]):
            out[d] = src[:, d]
    else:
        np.copyto(out, src.T)
    return out


def _two_sum_error_into(a: Array, b: Array, s: Array, work: Array) -> None:
    """b = (a − (s − bb)) + (b − bb), bb = s − a: :func:`_two_sum_error` written over
    ``b`` (its operations on the same values: the same floats)."""
    np.subtract(s, a, out=work)  # bb
    np.subtract(b, work, out=b)
    np.subtract(s, work, out=work)
    np.subtract(a, work, out=work)
    np.add(work, b, out=b)


#: multiply-adds per row block of a chunk product (``blt._rows_times``' blocks)
_PRODUCT_BLOCK = 1 << 18


def _upper_times(a: Array, b: Array, out: Array) -> None:
    """out = a @ b for an upper-triangular c × c ``b`` (b[l, j] = 0 for l > j; the
    chunks' Toeplitz G_c transposed, the partial-sum ones), in two halves of columns:
    the first h = c/2 from the first h columns of ``a`` alone, a quarter fewer
    multiply-adds than the full product.

    The same floats as the full product (``blt._rows_times``): BLAS's matrix product
    accumulates each output in one sequence over l from +0 (measured here: ``x @ U``
    is numpy's sequential ``cumsum`` bit for bit), and the terms l > j left out are
    exact zeros, which leave a sum unchanged (a sum that starts at +0 is −0 never). A
    row the full product computes alone (its last block of one row: numpy's
    vector-matrix product, another summation) is computed as it is there. Tested bit
    for bit against the full product for every row count up to 2600 and by the
    release digests (benchmarks/bench_scaled_batch.py ``--digests``).
    """
    k, c = b.shape
    h = c // 2
    if not h:
        _rows_times(a, b, out)
        return
    if a.shape[0] % max(1, _PRODUCT_BLOCK // (k * c)) == 1:  # the single row: as there
        np.matmul(a[-1:], np.ascontiguousarray(b), out=out[-1:])
        a, out = a[:-1], out[:-1]
    if a.shape[0]:
        _rows_times(a[:, :h], b[:h, :h], out[:, :h])
        _rows_times(a, b[:, h:], out[:, h:])


def _block_sums(
    rows: Array,
    start: Array,
    res: Array,
    work: Array | None = None,
    end: bool = False,
    low: Array | None = None,
) -> tuple[Array, Array] | None:
    """res[r, k, j] = start_r + Σ_{l<k} Σ_i rows[r, l, i] + Σ_{i≤j} rows[r, k, i]: the
    running sums of R streams (``start`` (R,)) whose steps come in K blocks of b
    (``rows``, ``res``: (R, K, b), C-contiguous, distinct; ``rows`` is overwritten;
    ``work``: optional scratch of its size).

    The partial sums P_j = Σ_{i≤j} x_i of each block as one matrix product with the
    upper-triangular ones (a sequential sum of at most b values of the block, |error| ≤
    γ_b·Σ_i |x_i|, Higham 2002 §3.1); each block's exact sum P_end + Σ_j err_j with
    err_j the TwoSum error of P_{j−1} + x_j (Knuth TAOCP vol. 2 §4.2.2; so the carries
    do not accumulate the blocks' roundings); the sums before each block
    C_k = start + Σ_{l<k} (P_end(l) + Σ_j err_j(l)) as an unevaluated pair hi + lo (a
    cumsum and the cumsum of its TwoSum errors and the blocks' errors: within O(u²)
    of exact, where a float cumsum over them errs by ≈ u·σ_t·√K); then each value
    fl(fl(hi_k + lo_k) + P_j), two roundings at the noise's size. A float cumsum over
    the m steps instead rounds every partial sum, u·|N_t| each, and those errors add
    up like u·σ_t·√t (measured: the float model's ratio 64 at T = 2^16 with it, 44
    with these pairs or those of :func:`_running_sum`; benchmarks/float_model_long.py).

    Each block's errors are summed by one product per block over its R streams (the
    same products, and floats, as in the blocks-first layout (K, R, b) this had
    before: tested bit for bit). With ``end``, returns the sums after the last block
    as a pair (hi, lo) (R,) each, within O(u²) of start + Σ rows as the carries are
    (the values in ``res`` are the same floats either way). ``low`` (R, K·b), optional:
    low parts of the steps (each ≤ u·|step|), added with the blocks' errors — to the
    carries, not within their own block (each value then misses at most b − 1 of them:
    ≤ b·u·max|step|, an error that does not add up over the blocks).
    """
    R, K, b = rows.shape
    _upper_times(rows.reshape(R * K, b), _partial_sum_matrix(b), res.reshape(R * K, b))
    flat, err = res.reshape(-1), rows.reshape(-1)  # the errors overwrite the steps
    _two_sum_error_into(flat[:-1], err[1:], flat[1:], _scratch(work, R * K * b - 1))
    err[::b] = 0.0  # each block's first step: no addition
    if low is not None:
        err += low.reshape(-1)
    ends = res[:, :-1, -1].copy()  # P_end of every block but the last (one gather)
    hi = np.empty((R, K))
    hi[:, 0] = start
    hi[:, 1:] = ends
    np.cumsum(hi, axis=1, out=hi)  # C_k rounded: hi_k = fl(hi_{k−1} + P_end(k − 1))
    lo = np.zeros((R, K))
    if K > 1:
        _two_sum_error(hi[:, :-1], ends, hi[:, 1:], lo[:, 1:], np.empty((R, K - 1)))
        per_block = err.reshape(R, K, b)[:, :-1].transpose(1, 0, 2)  # (K − 1, R, b)
        lo[:, 1:] += (per_block @ np.ones(b)).T
        np.cumsum(lo, axis=1, out=lo)
    after = None
    if end:  # the last block's sum and errors onto the last carry, renormalized
        last = res[:, -1, -1].copy()
        top = hi[:, -1] + last
        low = np.empty(R)
        _two_sum_error(hi[:, -1], last, top, low, np.empty(R))
        low += lo[:, -1] + np.sum(err.reshape(R, K, b)[:, -1], axis=1)
        after = (top + low, low - ((top + low) - top))
    hi += lo
    res += hi[:, :, None]
    return after


def _running_sum(w: Array, start: Array, dest: Array, scale: Array | None = None) -> None:
    """dest_t = start + Σ_{s≤t} w_s (along axis 0) with one rounding per value; with
    ``scale`` (one per step), of fl(w_s·scale_s) instead (formed as the blocks are read).

    A float cumsum rounds every partial sum, u·|N_t| each, and those errors add up over
    the steps (≈ u·σ_t·√t: 200 u·σ_t·(1 + Z*/σ₁) at T = 2^20, benchmarks/
    float_model_long.py). Here the partial sums are carried as unevaluated pairs
    hi + lo (TwoSum, Knuth TAOCP vol. 2 §4.2.2): within blocks of :data:`_SUM_BLOCK`
    steps, then across the blocks; each value is rounded once (plus O(u²·t) from the
    pairs' low parts). A last partial block takes the carry of the full ones the same
    way (as if padded with zeros).

    Computed over pieces of about :data:`_SUM_PIECE` values (in reused scratch) by
    :func:`_sum_blocks`; the pieces pass the carry pair on, so the result is the same
    floats whatever the piece size.
    """
    m = len(w)
    b = _SUM_BLOCK
    tail = w.shape[1:]
    width = int(np.prod(tail, dtype=np.int64)) if tail else 1
    full = m // b
    carry = (np.array(start, dtype=np.float64).reshape(tail), np.zeros(tail))
    per = max(1, min(full, _SUM_PIECE // (b * width)))
    ones = (1,) * len(tail)
    scratch = np.empty((5, b, per, *tail))
    for k0 in range(0, full, per):
        k1 = min(full, k0 + per)
        rows = w[k0 * b : k1 * b].reshape(k1 - k0, b, *tail)
        part = dest[k0 * b : k1 * b]
        res = part if part.flags.c_contiguous else np.empty(part.shape)
        weights = None if scale is None else scale[k0 * b : k1 * b].reshape(k1 - k0, b, *ones)
        carry = _sum_blocks(rows, carry, res, scratch[:, :, : k1 - k0], weights)
        if res is not part:
            part[...] = res
    if m > full * b:  # the last partial block, padded with zeros
        pad = np.zeros((1, b, *tail))
        pad[0, : m - full * b] = w[full * b :]
        if scale is not None:
            pad[0, : m - full * b] *= scale[full * b :].reshape(-1, *ones)
        res = np.empty((b, *tail))
        _sum_blocks(pad, carry, res, scratch[:, :, :1], None)
        dest[full * b :] = res[: m - full * b]


def _sum_blocks(
    rows: Array, carry: tuple[Array, Array], dest: Array, work: Array, scale: Array | None
) -> tuple[Array, Array]:
    """:func:`_running_sum` of K blocks ``rows`` (K, b, …) from the pair ``carry`` =
    (hi, lo) before them, into ``dest`` (K·b, …, C-contiguous); returns the pair after
    them, the blocks' values first multiplied by ``scale`` (K, b, 1…) when given.
    ``work``: scratch (5, b, K, …) (the blocks' steps along its second axis, so each
    step of the scan is one vectorized sum over the K blocks).

    In block k, hi_j = fl(hi_{j−1} + x_j), lo_j = fl(lo_{j−1} + e_j) with e_j TwoSum's
    error of that sum (lo_0 = +0); across the blocks the carry pair is
    C_k = fl(C_{k−1} + hi_end(k)) and c_k = fl(fl(c_{k−1} + E_k) + lo_end(k)) — sequences
    of sums, computed by cumsum (which adds in sequence: the same floats as a loop; the
    second over the interleaved E_k, lo_end(k)); the value is
    fl(fl(C + hi) + fl(E + fl(c + lo))) with E the error of C + hi.
    """
    x, hi, lo, tmp, err = work
    K, b = rows.shape[:2]
    # vector steps move as whole rows (one void item each): numpy's loops then run over
    # the blocks, not over a short row
    row = np.dtype((np.void, 8 * rows[0, 0].size)) if rows.ndim > 2 else None
    if row is not None and rows.flags.c_contiguous:
        np.copyto(x.view(row)[..., 0].T, rows.view(row)[..., 0])
        if scale is not None:
            np.multiply(x, scale.swapaxes(0, 1), out=x)
    elif scale is None:
        np.copyto(x, rows.swapaxes(0, 1))
    else:
        np.multiply(rows.swapaxes(0, 1), scale.swapaxes(0, 1), out=x)
    hi[0] = x[0]
    for j in range(1, b):
        np.add(hi[j - 1], x[j], out=hi[j])
    lo[0] = 0.0
    _two_sum_error(hi[:-1], x[1:], hi[1:], lo[1:], tmp[1:])
    for j in range(1, b):
        np.add(lo[j - 1], lo[j], out=lo[j])
    # carries: C before block k at ch[k] (ch[K]: after the last), c at cl[2k]
    ch = np.empty((K + 1, *rows.shape[2:]))
    ch[0] = carry[0]
    ch[1:] = hi[-1]
    np.cumsum(ch, axis=0, out=ch)
    cl = np.empty((2 * K + 1, *rows.shape[2:]))
    cl[0] = carry[1]
    _two_sum_error(ch[:-1], hi[-1], ch[1:], cl[1::2], np.empty_like(ch[1:]))
    cl[2::2] = lo[-1]
    np.cumsum(cl, axis=0, out=cl)
    c_hi, c_lo = ch[None, :-1], cl[None, :-1:2]
    np.add(c_hi, hi, out=x)  # C + hi
    _two_sum_error(c_hi, hi, x, err, tmp)  # E
    np.add(c_lo, lo, out=lo)
    np.add(err, lo, out=lo)
    if row is None:
        np.add(x, lo, out=dest.reshape(K, b).T)
    else:
        np.add(x, lo, out=x)
        np.copyto(dest.view(row)[..., 0].reshape(K, b).T, x.view(row)[..., 0])
    return ch[-1].copy(), cl[-1].copy()


def _rows_view(x: Array, N: int, c: int) -> Array:
    """``x`` (R, N·c/R) as (N, c) rows: a view where its layout allows, else a new array."""
    out = x.reshape(N, c)
    return out if np.shares_memory(out, x) else np.empty((N, c))


def _two_sum(a: Array, b: Array) -> tuple[Array, Array]:
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth's TwoSum)."""
    total = a + b
    err = np.empty(np.shape(total))
    _two_sum_error(np.asarray(a), np.asarray(b), total, err, np.empty(np.shape(total)))
    return total, err


def _dd_times(a: tuple[Array, Array], b: tuple[Array, Array]) -> tuple[Array, Array]:
    """The double-double product (a_hi + a_lo)·(b_hi + b_lo) as a pair, relative error
    ≤ 8u² (TwoProduct of the high parts plus the cross terms, renormalized)."""
    p = a[0] * b[0]
    err = _two_product_error(a[0], b[0], p) + (a[0] * b[1] + a[1] * b[0])
    return _two_sum(p, err)


def _long_tables(decay: Array, one_minus_decay: Array, scale: Array, c: int) -> tuple[Array, ...]:
    """The chunk tables of :meth:`NormalizedBLTNoiseProcess._chunk_matrices` — G_c
    (g_0 = 1, g_k = Σ_i ω′_i λ_i^{k−1}), P[i, s] = λ_i^{c−1−s}, F[j, i] = ω′_i λ_i^j —
    each as a pair hi + lo (G_hi, G_lo, P_hi, P_lo, F_hi, F_lo) within O(c·u²) of their
    values for the exact decays λ_i = 1 − d_i (d_i = ``one_minus_decay``, the
    definition the exact noise uses): the decays as pairs (1 − d_i by TwoSum), their
    powers by double-double products, the sums over i as double-double sums. The float
    tables (powers by exp, rounded) are u-close only: their roundings, fixed
    coefficients times the draws, add up like √t over the running sum."""
    one = np.ones_like(one_minus_decay)
    lam_hi, lam_lo = _two_sum(one, -one_minus_decay)
    hi, lo = np.empty((c + 1, len(decay))), np.empty((c + 1, len(decay)))  # λ^j, rows j
    hi[0], lo[0] = 1.0, 0.0
    for j in range(1, c + 1):
        hi[j], lo[j] = _dd_times((hi[j - 1], lo[j - 1]), (lam_hi, lam_lo))
    f_hi = scale * hi[:c]
    f_lo = _two_product_error(np.broadcast_to(scale, f_hi.shape), hi[:c], f_hi) + scale * lo[:c]
    f_hi, f_lo = _two_sum(f_hi, f_lo)  # F[j, i] = ω′_i λ_i^j
    g_hi, g_lo = np.zeros(c), np.zeros(c)
    g_hi[0] = 1.0
    for i in range(len(decay)):  # g_k = Σ_i F[k − 1, i], a double-double sum
        total, err = _two_sum(g_hi[1:], f_hi[: c - 1, i])
        g_hi[1:], g_lo[1:] = _two_sum(total, err + g_lo[1:] + f_lo[: c - 1, i])
    lag = np.arange(c)[:, None] - np.arange(c)[None, :]
    below = lag >= 0
    index = np.clip(lag, 0, None)
    out = (
        np.where(below, g_hi[index], 0.0),
        np.where(below, g_lo[index], 0.0),
        hi[c - 1 :: -1][:c].T.copy(),
        lo[c - 1 :: -1][:c].T.copy(),
        f_hi,
        f_lo,
    )
    for mat in out:
        mat.setflags(write=False)
    return out


def _split_bits(k: int) -> tuple[int, int]:
    """(β_a, β_b) for products with k terms: β_a + β_b = 52 − ⌈log₂ k⌉, β_b = ⌈·/2⌉."""
    bits = 52 - max(0, (k - 1).bit_length())
    return bits // 2, bits - bits // 2


def _grid_split(a: Array, bits: int, high: Array, low: Array) -> None:
    """a = high + low exactly: ``high`` a's values rounded to the grid 2^(E − bits)
    (2^E > the largest |value| of a, 1 for zeros), so |high| ≤ 2^E in at most 2^bits
    units of it; ``low`` = a − high (exact, ≤ 2^(E − bits − 1)). The rounding:
    fl(fl(a + σ) − σ) with σ = 1.5·2^(E + 52 − bits), whose ulp is the grid (a + σ
    stays in σ's binade; the subtraction is exact, Sterbenz). One grid for the whole
    array (a piece's steps or buffers, of one magnitude): the rests of the products are
    then bounded relative to the array's largest value, and the split is four passes
    (a grid per row: twice the time, its short rows' reductions)."""
    _grid_split_rows(a[None], bits, high[None], low[None])


def _grid_split_rows(a: Array, bits: int, high: Array, low: Array) -> None:
    """:func:`_grid_split` of each ``a[i]`` on its own grid, in one pass over ``a`` (σ_i
    from a[i]'s largest |value|; an all-zero a[i] splits into zeros on any grid)."""
    rows = a.reshape(len(a), -1)
    largest = np.maximum(np.max(rows, axis=1), -np.min(rows, axis=1))
    sigma = np.ldexp(1.5, np.frexp(largest)[1] + (52 - bits))
    sigma = sigma.reshape((len(a),) + (1,) * (a.ndim - 1))
    np.add(a, sigma, out=high)
    high -= sigma
    np.subtract(a, high, out=low)


def _fixed_split(b: Array, b_lo: Array, bits: int) -> tuple[Array, Array]:
    """(b₁, b₂′) for the fixed right factor b + b_lo (k, c) of :func:`_grid_split`'s
    products: b₁ = b on the grid 2^(E_b − bits) (2^E_b > max |b|), b₂′ = fl((b − b₁) +
    b_lo) (b − b₁ exact; the one rounding ≤ u·2^(E_b − bits − 1)).

    With a₁ from :func:`_grid_split` on the grid 2^(E_a − β_a) and b₁ here with bits =
    β_b (:func:`_split_bits` of k), every product a₁b₁ is an integer multiple of
    2^(E_a + E_b − β_a − β_b) of at most 2^(β_a + β_b) units, and a sum of k of them at
    most 2^52 units: a₁ @ b₁ is exact in any summation order. The rest, a₂ @ b +
    a₁ @ b₂′ (|a₂| ≤ 2^(E_a − β_a), |b₂′| ≲ 2^(E_b − β_b)), is at most k·2^(1 − min β)
    of the scales 2^(E_a + E_b): its rounding is O(k·2^-22·u) of them, and so are the
    term it drops, a₂ @ b_lo, and the rounding of b₂′ (the error-free splitting of a
    matrix product: Ozaki, Ogita, Oishi & Rump 2012,
    https://doi.org/10.1007/s11075-011-9478-1). A float product instead leaves
    ≈ u·|a @ b| in every value."""
    b_exp = int(np.frexp(np.max(np.abs(b)))[1])
    sigma = math.ldexp(1.5, b_exp + 52 - bits)
    b1 = (b + sigma) - sigma
    b2 = b - b1
    b2 += b_lo
    return b1, b2


def _two_product_error(a: Array, b: Array, p: Array) -> Array:
    """a·b − p for p = fl(a·b), exactly (Dekker 1971's TwoProduct; no overflow or
    underflow for the noise's magnitudes)."""
    out: Array = np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b)))
    _add_product_error(np.array(a, dtype=np.float64, copy=True), b, p, out)
    return out


def _add_product_error(a: Array, b: Array, p: Array, out: Array) -> None:
    """out += a·b − p for p = fl(a·b) (Dekker 1971's TwoProduct, the same operations as
    :func:`_two_product_error`, in place: ``a`` is overwritten; ``b`` broadcasts to a's
    shape, which is out's and p's; four new arrays, each costs its page faults)."""
    ah = np.multiply(a, _SPLITTER)  # Veltkamp's splits: a = ah + a, b = bh + bl
    work = np.subtract(ah, a)
    ah -= work
    a -= ah
    bh = np.multiply(b, _SPLITTER)
    bl = np.subtract(bh, b)
    bh -= bl
    np.subtract(b, bh, out=bl)
    np.multiply(ah, bl, out=work)
    ah *= bh
    ah -= p  # ((ah·bh − p) + ah·bl + al·bh) + al·bl, as there
    ah += work
    np.multiply(a, bh, out=work)
    ah += work
    a *= bl
    ah += a
    out += ah


class NormalizedBLTNoiseProcess(ChunkedNoiseProcess):
    """N = B′z = A·diag(e)·(G z) for one stream with n + 1 running values (×dim).

    State after step t: the buffers p_i(t) = λ_i p_i(t−1) + z_t (i < n) and the noise
    N_t = N_{t−1} + e_t·w_t, w_t = z_t + Σ_i ω′_i p_i(t−1) (= (G z)_t). Memory between
    steps: (n + 1)·dim floats (pairs in the long forms: twice that), plus 512 weights
    shared by all coordinates (computed from the closed form, block by aligned block). A
    vector ``next()`` draws d values and returns them overwritten with the noise, in one
    pass over column blocks of 16384. ``next`` (vector steps) and ``next_many`` add the
    buffers' terms in a different order, so they agree to rounding, not bit for bit;
    each continues a checkpoint bit for bit. Scalar blocks (``next``'s blocks of 4096, a
    batch release) compute G z in chunks of 32 steps (:meth:`_chunked_w`, with the
    decays' accurate powers λ_i^k = e^{k·ln(1 − d_i)}), closer to the exact B′z than the
    per-step recursion in fl(λ_i) (which vector steps keep) at long horizons: at T =
    2^20, measured against long double, 200 and 4913 u·σ_t(1 + Z*/σ₁) at worst. Above
    ``_SCALAR_ACCURATE_ABOVE`` (scalar) / ``_VECTOR_ACCURATE_ABOVE`` (vector blocks,
    then chunked too) the buffers cross the chunks with λ_i^c = r_hi + r_lo
    (``blt.compensated_filter``) and the running sum is carried in TwoSum pairs (blocks
    of at least 32 chunks of 32 steps: :func:`_block_sums`, partial sums of 32 steps by
    one matrix product and the carries between them in pairs, the blocks' rounding
    errors added to the carries; the buffers across the chunks by :func:`across_chunks`,
    matrix products with the accurate powers; shorter vector blocks:
    :func:`_running_sum`): 146 at 2^20 (benchmarks/float_model_long.py; at the limits
    2^16 / 2^17, seeds 1–3: 46 / 37 scalar blocks, 40 / 60 vector blocks, as before
    within 2 where measured before). Above :attr:`long_above` (2^16; the row-scaled
    BLT's 2^17) every block is computed in the long forms instead
    (:meth:`_compute_long`: error-free chunk products, double-double chunk tables,
    TwoProduct for e·w, in cache-sized pieces, the buffers and the running sum kept as
    pairs between calls, the buffers across the chunks unrounded,
    :func:`across_levels_exact`): ≤ 3.9 at 2^20 and ≤ 3.4 at 2^22 on every block
    path, seeds 1–3 (the row-scaled BLT: ≤ 3.7 and ≤ 3.6; before the unrounded
    buffers ≤ 18 and ≤ 30, ≤ 15 and ≤ 29). Beyond
    ``blt.FLOAT_MODEL_HORIZONS`` (blocks 2^24, vector steps 2^12) the process refuses.

    Args:
        inverse: G = C⁻¹ (decays λ, scales ω′).
        sums: the closed form S of the encoder.
        horizon: T.
        sampler: draws z (i.i.d.).
        rng: the Generator z is drawn with.
        dim: None for scalar steps, else the vector length.
        table: returns all T weights (the mechanism's, computed once and kept): blocks
            of at least 2^16 steps (a batch release) read them there, the same floats
            as the aligned blocks of 512 give.
        chunks: the mechanism's kept chunk matrices (a dict this process fills and
            reads; they depend only on the inverse), or None for the process's own.
    """

    #: the mechanism named in a refusal (``blt.check_float_model``)
    float_model_name = "normalized-blt"
    #: horizons above this compute their blocks in the long forms (:meth:`_compute_long`)
    long_above = _LONG_ABOVE

    def __init__(
        self,
        inverse: BLTInverse,
        sums: _SquareSums,
        horizon: int,
        source: NoiseSource,
        dim: int | None = None,
        table: Callable[[], Array] | None = None,
        chunks: ChunkCache | None = None,
    ) -> None:
        self.horizon = horizon
        self._table = table
        if source.width != dim:
            raise ValueError(f"dim {dim!r} must be the source's width {source.width!r}")
        check_float_model(self.float_model_name, "block", horizon, dim)
        self.sampler = source.sampler
        self.noise = source
        self.dim = dim
        self._sums = sums
        self._decay = inverse.decay
        self._scale = inverse.scale
        self._n = len(inverse.decay)
        tail: tuple[int, ...] = () if dim is None else (dim,)
        self._tail = tail
        self._p: Array = np.zeros((self._n, *tail))
        self._sum: Array = np.zeros(tail)
        self._pending: list[Any] = []
        self._t = 0
        self._c = 0  # steps computed: released plus pending
        self._block = -1
        self._e: Array = np.empty(0)
        self._one_minus_decay = inverse.one_minus_decay
        # chunked vector blocks, compensated decays and running sum (else as before)
        self._accurate = horizon > (
            _SCALAR_ACCURATE_ABOVE if dim is None else _VECTOR_ACCURATE_ABOVE
        )
        # the chunk matrices and residuals: the mechanism's (shared by its processes, so
        # a release computes none of them) or this one's
        self._mats: ChunkCache = {} if chunks is None else chunks
        self._lo = self._residuals("decay", 0) * self._accurate
        # beyond the limit measured before them: the long forms (:meth:`_compute_long`),
        # whose buffers and running sum are pairs between calls too (their low parts)
        self._long = horizon > self.long_above
        self._p_lo: Array = np.zeros_like(self._p)
        self._sum_lo: Array = np.zeros(tail)

    @property
    def step(self) -> int:
        return self._t

    def live_count(self) -> int:
        """Buffers (n) and the running sum (each a pair in the long forms), plus
        computed noise not yet released."""
        return (self._n + 1) * (1 + self._long) + len(self._pending)

    def _weights(self, start: int, count: int) -> Array:
        """e_t for t in [start, start + count), from aligned blocks of 512 (the same
        floats whichever way the steps are taken)."""
        out: Array = np.empty(count)
        t = start
        while t < start + count:
            b = t // _WEIGHT_BLOCK
            if b != self._block:
                first = b * _WEIGHT_BLOCK
                size = min(_WEIGHT_BLOCK, self.horizon - first)
                self._e = self._weight_block(first, size)
                self._block = b
            lo = t - b * _WEIGHT_BLOCK
            take = min(len(self._e) - lo, start + count - t)
            out[t - start : t - start + take] = self._e[lo : lo + take]
            t += take
        return out

    def _weight_block(self, first: int, size: int) -> Array:
        """e_t for the aligned block t = first … first + size − 1."""
        return _weights(self._sums, self.horizon, first, size)

    def _draw(self, start: int, shape: tuple[int, ...]) -> Array:
        """The stream's input for steps start, start + 1, … (rows of ``shape``): z."""
        z: Array = self.noise.sample(shape)
        return z

    def _compute(self, dest: Array) -> None:
        """Draw z for len(dest) steps and write their noise to dest, advancing the state."""
        if self._long:
            self._compute_long(dest)
            return
        m = len(dest)
        t = self._c
        z = self._draw(t, (m, *self._tail))
        batch = self._table is not None and m >= _TABLE_STEPS
        if batch:
            assert self._table is not None
            e = self._table()[t : t + m]
        else:
            e = self._weights(t, m)
        vector_sum = self.dim is not None and self._accurate and m >= _CHUNK * _SUPER
        if vector_sum:  # the noise of the full chunks with their running sum
            full = m - m % _CHUNK
            self._vector_block(z[:full], dest[:full], e[:full])
            w = z[full:]
            if m > full:
                self._chunks_w(w, w, m - full)
                w *= e[full:, None]
                w[0] += dest[full - 1]
                np.cumsum(w, axis=0, out=dest[full:])
        elif self.dim is None or self._accurate:  # chunked products
            w = self._chunked_w(z)
        else:
            w = z.copy()
            for i in range(self._n):
                lam, lo = float(self._decay[i]), float(self._lo[i])
                # lfilter's state is λ·p_i(t − 1): its first output is z_t + λ·p_i(t − 1)
                p = compensated_filter(z, lam, lo, self._p[i])
                w[0] += self._scale[i] * self._p[i]
                if m > 1:
                    w[1:] += self._scale[i] * p[:-1]
                self._p[i] = p[-1]
        if self._accurate and m >= _SUM_BLOCK and self.dim is None:
            w *= e
            _blocked_sum(w, self._sum, dest, work=z)  # z is read: its scratch
        elif vector_sum:
            pass  # computed with w (:meth:`_vector_block`)
        elif self._accurate and m >= _SUM_BLOCK:  # w·e formed as its blocks are read
            _running_sum(w, self._sum, dest, scale=e)
        else:
            w *= e if self.dim is None else e[:, None]
            w[0] += self._sum
            np.cumsum(w, axis=0, out=dest)
        self._sum = np.array(dest[-1], dtype=np.float64).reshape(self._tail)
        self._c = t + m

    def _compute_long(self, dest: Array) -> None:
        """:meth:`_compute` at horizons above :attr:`long_above`, every block size and dim:
        w = G z as a pair hi + lo (:meth:`_long_w`), the products e_t·w_t as pairs
        (Dekker's TwoProduct on hi, plus e_t·lo), the high parts summed by
        :func:`_block_sums` (TwoSum pairs across blocks of 32 steps) and the low parts
        (values ≤ u·|w|) added to its carries with the blocks' rounding errors (each
        value misses at most the 31 low parts of its own block before it, an error that
        does not add up over the blocks). Computed in pieces of :data:`_LONG_PIECE`
        values (steps × coordinates) whose arrays stay in the core's cache between
        their passes, the buffers carried across the pieces as their two streams
        (:meth:`_long_chunks`) and the running sum as a pair (hi, lo); between calls
        (a block of ``next``, a checkpoint) both are pairs too (``p`` + ``p_lo``, ``sum``
        + ``sum_lo``: rounding them to one float each per block of ``next`` was the
        largest error of scalar steps: the float model's ratio 49 at 2^22 without the
        pairs, 30 with them, seeds 1–3).

        The float evaluation of the same B′z: the per-step roundings of the chunk
        products and of e·w, ≈ u·|w_t| each, add up like √t over the running sum (the
        float model's ratio 57 at T = 2^18, 146 at 2^20 without these forms, seed 1:
        benchmarks/float_model_long.py); here what remains of them is O(u²) per step,
        and the buffers cross the chunks unrounded too (:func:`across_levels_exact`;
        rounded, ≈ u·|p| shared by the chunks after each carry: 45.9 at 2^23, batch,
        seed 1, 208 at 2^24 on blocks, seed 1; now 3.5 and 4.5)."""
        m = len(dest)
        t = self._c
        z = self._draw(t, (m, *self._tail))
        if self._table is not None and m >= _TABLE_STEPS:
            e = self._table()[t : t + m]
        else:
            e = self._weights(t, m)
        x = z.reshape(m, -1).T  # (R, m): one row per coordinate
        R = len(x)
        # the buffers as two streams (exact parts, rests) and the running sum as a pair
        # (hi, lo) carried across the pieces
        state = np.empty((self._n, 2 * R))
        state[:, :R] = self._p.reshape(self._n, R)
        state[:, R:] = self._p_lo.reshape(self._n, R)
        total = (self._sum.reshape(R).copy(), self._sum_lo.reshape(R).copy())
        out = dest.reshape(m, R)
        step = max(_SUPER * _CHUNK, _LONG_PIECE // R // (_SUPER * _CHUNK) * (_SUPER * _CHUNK))
        for a in range(0, m, step):
            b = min(m, a + step)
            total = self._long_piece(x[:, a:b], e[a:b], state, total, out[a:b])
        # kept as pairs (TwoSum: p + p_lo is the two streams' sum exactly)
        p = state[:, :R] + state[:, R:]
        lo = np.empty_like(p)
        _two_sum_error(state[:, :R], state[:, R:], p, lo, np.empty_like(p))
        self._p[...], self._p_lo[...] = p.reshape(self._p.shape), lo.reshape(self._p.shape)
        self._sum = total[0].reshape(self._tail)
        self._sum_lo = total[1].reshape(self._tail)
        self._c = t + m

    def _long_piece(
        self, x: Array, e: Array, state: Array, total: tuple[Array, Array], out: Array
    ) -> tuple[Array, Array]:
        """:meth:`_compute_long` for one piece of at most :data:`_LONG_PIECE` values: the
        noise of R streams ``x`` (R, m) with weights ``e`` into ``out`` (m, R), from the
        buffers ``state`` (n, 2R: both parts, updated) and the running sum's pair
        ``total`` = (hi, lo) before it; returns the pair after it."""
        R, m = x.shape
        if not x.flags.c_contiguous:  # a row per coordinate (faster than numpy's copy of
            x = _transposed(x.T)  # the transposed view, ``_copy_transposed``)
        hi, lo = self._long_w(x, state)
        b = _PARTIAL
        K = -(-m // b)
        rows = np.zeros((R, K * b)) if K * b > m else np.empty((R, m))
        p = np.multiply(hi, e, out=rows[:, :m])
        lo *= e
        _add_product_error(hi, e, p, lo)  # hi is not read after: the scratch below
        lo[:, 0] += total[1]
        if K * b > m:
            lo = np.concatenate([lo, np.zeros((R, K * b - m))], axis=1)
        direct = R == 1 and K * b == m and out.flags.c_contiguous
        res = out.reshape(R, K, b) if direct else np.empty((R, K, b))
        end = _block_sums(rows.reshape(R, K, b), total[0], res, work=hi, end=True, low=lo)
        if not direct:
            _copy_transposed(out, res.reshape(R, K * b)[:, :m])
        assert end is not None
        return end

    def _long_w(self, x: Array, state: Array | None = None) -> tuple[Array, Array]:
        """w = G z for R streams ``x`` (R, m) as a pair (hi, lo) (R, m) each, advancing
        the buffers ``state`` (n, 2R: the two streams of :meth:`_long_chunks`; None: the
        process's own, their sum written back): full chunks of :data:`_CHUNK` steps,
        then the rest as one chunk."""
        R, m = x.shape
        own = state is None
        if state is None:
            state = np.zeros((self._n, 2 * R))
            state[:, :R] = self._p.reshape(self._n, R)
        hi, lo = np.empty((R, m)), np.empty((R, m))
        full = m - m % _CHUNK
        for a, b in ((0, full), (full, m)):
            if b > a:
                part = slice(a, b)
                c = _CHUNK if b == full else b - a
                self._long_chunks(x[:, part], hi[:, part], lo[:, part], c, state)
        if own:
            self._p[...] = (state[:, :R] + state[:, R:]).reshape(self._p.shape)
        return hi, lo

    def _long_chunks(self, x: Array, hi: Array, lo: Array, c: int, state: Array) -> None:
        """:meth:`_long_w` for K chunks of c steps of R streams (``x`` (R, K·c)), every
        product split error-free (:func:`_grid_split` of the steps and of the buffers,
        the chunk tables' pairs split once, :meth:`_long_split`: an exact part and a
        rest): each chunk's own part of the buffers and of w from one split of the
        steps; the buffers before each chunk from both parts
        (as 2R streams: :func:`across_levels_exact`, the first stream's values not
        rounded), so the carries add no rounding of the chunks' own parts; their part
        F·p: the exact part of the first stream's split, the rests (the second stream's
        and the splits' rests, ≤ c·2^-22 of the rows' scales, their roundings
        O(c·2^-22·u)) all by one
        product with the stacked tables; the exact parts added by TwoSum into the pair,
        the rests into its low part, then the pair renormalized by TwoSum (|lo| ≤ u·|hi|:
        the rests can be far above u·|w|, and the low parts' running sum rounds at their
        size — without it the float model's ratio 20.4 instead of 12.6 at 2^20, blocks,
        seed 3). ``state`` (n, 2R): the two streams' buffers before the chunks, updated
        to after them.

        The left factors share one array L = [x₂ | x₁ | b₂ + p″ | b₁] (rows: chunks;
        x = x₁ + x₂ the steps, b = b₁ + b₂ the first stream's buffers before the chunk,
        p″ the second's), so the rests of w are one product L @ [Gᵀ; G₂ᵀ; Fᵀ; F₂ᵀ]
        (the rounding of b₂ + p″ is ≤ u·2^-22 of the buffers).
        """
        R, n = x.shape[0], self._n
        K = x.shape[1] // c
        gp_exact, p_rest, f_exact, w_rest, bits_x, bits_f = self._long_split(c)
        left = np.empty((R * K, 2 * (c + n)))  # [x₂ | x₁ | b₂ + p″ | b₁]
        x1, x2 = np.empty((R * K, c)), np.empty((R * K, c))  # (contiguous: 3× faster)
        _grid_split(np.ascontiguousarray(x).reshape(R * K, c), bits_x, x1, x2)
        left[:, :c], left[:, c : 2 * c] = x2, x1
        exact = _rows_times(x1, gp_exact)  # [x₁·G₁ᵀ | x₁·P₁ᵀ], exact
        own = exact[:, :c]
        E = np.empty((n, 2 * R, K))  # each chunk's own part of the buffers, both parts
        E[:, :R] = exact[:, c:].reshape(R, K, n).transpose(2, 0, 1)
        E[:, R:] = _rows_times(left[:, : 2 * c], p_rest).reshape(R, K, n).transpose(2, 0, 1)
        prev, end = across_levels_exact(E, state.copy(), c, self._exact_level_matrices)
        state[...] = end
        b1, b2 = np.empty((R * K, n)), np.empty((R * K, n))
        _grid_split(np.ascontiguousarray(prev[:, :R].reshape(n, R * K).T), bits_f, b1, b2)
        b2 += prev[:, R:].reshape(n, R * K).T
        left[:, 2 * c : 2 * c + n], left[:, 2 * c + n :] = b2, b1
        buffers = _rows_times(b1, f_exact)  # exact
        rest = _rows_times(left, w_rest)
        w, err = _rows_view(hi, R * K, c), _rows_view(lo, R * K, c)
        np.add(own, buffers, out=w)
        _two_sum_error(own, buffers, w, err, x1)  # x1 is read: the TwoSum's scratch
        err += rest
        # renormalized (|lo| ≤ u·|hi|): the rests can be far above u·|w|
        np.add(w, err, out=rest)
        _two_sum_error(w, err, rest, x2, buffers)
        np.copyto(w, rest)
        np.copyto(err, x2)
        if not np.shares_memory(w, hi):
            hi[...] = w.reshape(R, K * c)
            lo[...] = err.reshape(R, K * c)

    def _long_split(self, c: int) -> tuple[Any, ...]:
        """For chunks of c steps, the right factors of :meth:`_long_chunks` from the
        chunk tables' pairs (:meth:`_long_tables`) split once (:func:`_fixed_split`):
        [G₁ᵀ | P₁ᵀ] (c, c + n: one exact product for both), [Pᵀ; P₂ᵀ] (2c, n), F₁ᵀ
        (n, c), [Gᵀ; G₂ᵀ; Fᵀ; F₂ᵀ] (2(c + n), c), and β_a of the steps' and of the
        buffers' splits; computed once and kept in the shared cache (read-only)."""
        key = ("long split", c)
        kept: tuple[Any, ...] | None = self._mats.get(key)
        if kept is None:
            G, G_lo, P, P_lo, F, F_lo = self._long_tables(c)
            bits_x, bits_p = _split_bits(c)
            bits_f, bits_g = _split_bits(self._n)
            P1, P2 = _fixed_split(P.T, P_lo.T, bits_p)
            G1, G2 = _fixed_split(G.T, G_lo.T, bits_p)
            F1, F2 = _fixed_split(F.T, F_lo.T, bits_g)
            mats = (
                np.concatenate([G1, P1], axis=1),
                np.concatenate([P.T, P2]),
                F1,
                np.concatenate([G.T, G2, F.T, F2]),
            )
            for mat in mats:
                mat.setflags(write=False)
            kept = (*mats, bits_x, bits_f)
            self._mats[key] = kept  # type: ignore[assignment]  # with the two ints
        return kept

    def _level_matrices(self, c: int) -> tuple[Array, Array]:
        """:func:`_level_matrices` for chunks of c steps, kept in the shared cache."""
        key = ("level", c)
        kept = self._mats.get(key)
        if kept is None:
            kept = self._mats[key] = _level_matrices(self._decay, self._one_minus_decay, c)
        return kept  # type: ignore[return-value]  # the two of this key

    def _exact_level_matrices(self, c: int) -> tuple[Any, ...]:
        """:func:`_exact_level_matrices` for chunks of c steps, kept in the shared cache."""
        key = ("exact level", c)
        kept = self._mats.get(key)
        if kept is None:
            kept = self._mats[key] = _exact_level_matrices(self._one_minus_decay, c)
        return kept

    def _long_tables(self, c: int) -> tuple[Array, ...]:
        """:func:`_long_tables` for chunks of c steps, computed once and kept in the
        shared cache."""
        key = ("long", c)
        kept = self._mats.get(key)
        if kept is None:
            kept = self._mats[key] = _long_tables(
                self._decay, self._one_minus_decay, self._scale, c
            )
        return kept

    def _residuals(self, kind: str, c: int) -> Array:
        """The decays' residuals (``kind`` "decay": :func:`~dpcount.counting.factorization.
        blt.decay_residuals` of λ) or those of the chunk decays λ^c ("power":
        ``power_residuals``), computed by the first process and kept in the shared cache
        (they depend only on λ and c; read-only)."""
        key = ("residuals", kind, c)
        kept = self._mats.get(key)
        if kept is None:
            if kind == "decay":
                lo = decay_residuals(self._decay, self._one_minus_decay)
            else:
                ratios = _ratios(self._decay, self._one_minus_decay)
                lo = power_residuals(ratios, self._chunk_matrices(c)[3], c)
            lo.setflags(write=False)
            kept = self._mats[key] = (lo,)
        return kept[0]

    def _chunk_matrices(self, c: int) -> tuple[Array, Array, Array, Array]:
        """For chunks of c steps: the within-chunk Toeplitz G_c (g_0 = 1,
        g_k = Σ_i ω′_i λ_i^{k−1}), P[i, s] = λ_i^{c−1−s}, F[j, i] = ω′_i λ_i^j and λ_i^c."""
        kept = self._mats.get(c)
        if kept is not None:
            return kept  # type: ignore[return-value]  # the four of this key
        pw = _powers(self._decay, self._one_minus_decay, np.arange(c + 1, dtype=np.float64))
        g = np.ones(c)
        g[1:] = self._scale @ pw[:, : c - 1]
        lag = np.arange(c)[:, None] - np.arange(c)[None, :]
        toeplitz = np.where(lag >= 0, g[np.clip(lag, 0, None)], 0.0)
        P = pw[:, c - 1 :: -1][:, :c].copy()
        F = (pw[:, :c] * self._scale[:, None]).T.copy()
        cached = (toeplitz, P, F, pw[:, c].copy())
        for mat in cached:
            mat.setflags(write=False)  # shared by the mechanism's processes
        if len(self._mats) > 12:  # remainder chunks of many lengths
            self._mats.clear()
        self._mats[c] = cached
        return cached

    def _chunked_w(self, z: Array) -> Array:
        """w = G z for a scalar block (w_t = z_t + Σ_i ω′_i p_i(t − 1)), advancing the
        buffers: chunks of :data:`_CHUNK` steps, one Toeplitz product within each chunk
        and one lfilter per buffer across the chunks (as the BLT's batch; at accurate
        horizons scalar blocks of at least 32 chunks cross them by :func:`across_chunks`,
        two matrix products), instead of one lfilter per buffer over every step. The
        same w as the per-step recursion in fl(λ_i) up to rounding (not bit for bit;
        tested against it). Vector blocks are computed in place (the draw z, the
        process's own, is overwritten with w: one fresh block-sized array fewer, whose
        page faults cost more than its arithmetic)."""
        m = len(z)
        in_place = self.dim is not None and z.flags.writeable and z.flags.c_contiguous
        w = z if in_place else np.empty(z.shape)
        full = (m // _CHUNK) * _CHUNK
        for lo, hi in ((0, full), (full, m)):
            if hi > lo:
                self._chunks_w(z[lo:hi], w[lo:hi], _CHUNK if hi == full else hi - lo)
        return w

    def _chunks_w(self, z: Array, out: Array, c: int) -> None:
        """:meth:`_chunked_w` for K·c steps in chunks of c (into ``out``)."""
        K = len(z) // c
        G, P, F, rc = self._chunk_matrices(c)
        lo = self._residuals("power", c) * self._accurate
        if self.dim is not None:
            self._vector_chunks_w(z, out, c, lo)
            return
        rows = z.reshape(K, c)
        E = np.ascontiguousarray(_rows_times(rows, P.T).T)  # (n, K): each chunk's own part
        p0 = self._p
        if self._accurate and K >= _SUPER:  # matrix products across the chunks
            key = ("carry", c, K)
            carry = self._mats.get(key)
            if carry is None:
                carry = _carry_matrices(self._decay, self._one_minus_decay, c, K)
                self._mats[key] = carry
            prev, p0[:] = across_chunks(E, p0, carry)
            res = out.reshape(K, c)
            _upper_times(rows, G.T, res)
            _rows_times(prev.T, F.T, res, add=True)
            return
        prev = np.empty_like(E)  # prev[i, k]: p_i before chunk k
        prev[:, 0] = p0
        for i in range(self._n):
            if K > 1:
                prev[i, 1:] = compensated_filter(E[i, :-1], rc[i], lo[i], p0[i])
            last = E[i, -1] if lo[i] == 0.0 else lo[i] * prev[i, -1] + E[i, -1]
            p0[i] = rc[i] * prev[i, -1] + last
        res = out.reshape(K, c)
        _rows_times(rows, G.T, res)
        _rows_times(prev.T, F.T, res, add=True)

    def _vector_chunks_w(self, z: Array, out: Array, c: int, lo: Array) -> None:
        """:meth:`_chunks_w` for vector blocks (horizons above ``_VECTOR_ACCURATE_ABOVE``): one
        row per (chunk, coordinate), the chunk's c steps along the row (as the BLT's
        ``_chunks``), the buffers across chunks by :func:`compensated_filter`. ``out``
        may be ``z`` itself (z is read once, into the rows, before ``out`` is written)."""
        G, P, F, rc = self._chunk_matrices(c)
        D, n = z.shape[1], self._n
        K = len(z) // c
        chunks: Array = np.empty((K, D, c))  # always a copy (a reshape could view z)
        np.copyto(chunks, z.reshape(K, c, D).transpose(0, 2, 1))
        rows = chunks.reshape(K * D, c)
        E = _rows_times(rows, P.T).reshape(K, D, n)  # each chunk's own part of the state
        prev = np.empty_like(E)  # the buffers before each chunk
        prev[0] = self._p.T
        for i in range(n):
            ends = compensated_filter(E[:, :, i], rc[i], lo[i], self._p[i])
            prev[1:, :, i] = ends[:-1]
            self._p[i] = ends[-1]
        res = _rows_times(rows, G.T)
        _rows_times(prev.reshape(K * D, n), F.T, res, add=True)
        np.copyto(out.reshape(K, c, D), res.reshape(K, D, c).transpose(0, 2, 1))

    def _vector_block(self, z: Array, dest: Array, e: Array) -> None:
        """The noise of K ≥ 32 full chunks of vector steps (z (K·c, D)) into ``dest``,
        from the buffers and running sum, advancing both: as :meth:`_vector_chunks_w`
        (one row per (coordinate, chunk), coordinate-major) with the buffers across the
        chunks by :func:`across_chunks`, then, in the same rows, w·e and the running
        sums of :func:`_block_sums` (blocks of c = 32 steps), moved into dest once.

        Coordinate-major rows: the buffers before the chunks (``across_chunks``' (n, D,
        K)) are the left operand of their product as a transposed view, and the sums'
        carries run along contiguous rows, where chunk-major rows (K, D, c) needed two
        copies of the state arrays transposed (measured ≈ 0.1× the normals at d = 4).
        Every product has the same operands row for row and the same row count, so the
        noise is the same floats (tested against the chunk-major layout bit for bit)."""
        c = _CHUNK
        G, P, F, _ = self._chunk_matrices(c)
        D, n = z.shape[1], self._n
        K = len(z) // c
        key = ("carry", c, K)
        carry = self._mats.get(key)
        if carry is None:
            carry = _carry_matrices(self._decay, self._one_minus_decay, c, K)
            self._mats[key] = carry
        chunks: Array = np.empty((D, K, c))
        np.copyto(chunks.reshape(D, K * c), z.T)
        rows = chunks.reshape(D * K, c)
        E = _rows_times(rows, P.T).reshape(D, K, n)  # each chunk's own part of the state
        before, self._p[...] = across_chunks(
            np.ascontiguousarray(E.transpose(2, 0, 1)), self._p, carry
        )
        # w in dest's memory (rows of (coordinate, chunk)) until the sums are moved there
        w = _scratch(dest, D * K * c).reshape(D * K, c)
        _upper_times(rows, G.T, w)
        _rows_times(before.reshape(n, D * K).T, F.T, w, add=True)
        x = w.reshape(D, K, c)
        x *= e.reshape(1, K, c)
        res = chunks  # the rows are read: they receive the sums
        _block_sums(x, self._sum, res, work=z)  # z is read: its scratch
        _copy_transposed(dest, res.reshape(D, K * c))
        self._sum = np.array(dest[-1], dtype=np.float64)

    def _vector_next(self) -> Any:
        """One vector step; refused beyond ``blt.FLOAT_MODEL_HORIZONS`` (not taken)."""
        try:
            check_float_model(self.float_model_name, "step", self.horizon, self.dim)
        except ValueError:
            self._t -= 1  # ``next`` counted the step
            raise
        z = self._draw(self._c, self._tail)
        e = float(self._weights(self._c, 1)[0])
        self._c += 1
        p, s, lam, scale = self._p, self._sum, self._decay, self._scale
        for a in range(0, len(z), _COLUMNS):
            cols = slice(a, a + _COLUMNS)
            zb, pb = z[cols], p[:, cols]
            w = zb + np.einsum("i,ij->j", scale, pb)
            pb *= lam[:, None]
            pb += zb
            w *= e
            sb = s[cols]
            sb += w
            zb[:] = sb
        return z

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The step, the buffers and running sum after the last computed step and the
        computed, unreleased noise (in release order); in the long forms also the
        buffers' and the sum's low parts (``p_lo``, ``sum_lo``)."""
        out = {
            "t": self._t,
            "p": self._p.copy(),
            "sum": np.array(self._sum, dtype=np.float64, ndmin=1),
            "pending": np.array(self._pending[::-1], dtype=np.float64),
        }
        if self._long:
            out["p_lo"] = self._p_lo.copy()
            out["sum_lo"] = np.array(self._sum_lo, dtype=np.float64, ndmin=1)
        return out

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same parameters,
        sampler and dim), checking every field; see :mod:`dpcount._state`."""
        owner = type(self).__name__
        pairs = ("p_lo", "sum_lo") if self._long else ()
        st = state_keys(owner, state, ("t", "p", "sum", "pending", *pairs))
        t = state_int(owner, "t", st["t"], 0, self.horizon)
        p = state_array(owner, "p", st["p"], rows=self._n, dim=self.dim, dtypes=(np.float64,))
        total = state_array(owner, "sum", st["sum"], rows=None, dim=self.dim or 1)
        lows = {}
        if self._long:  # the pairs' low parts (:meth:`_compute_long`)
            lows["p_lo"] = state_array(owner, "p_lo", st["p_lo"], rows=self._n, dim=self.dim)
            lows["sum_lo"] = state_array(
                owner, "sum_lo", st["sum_lo"], rows=None, dim=self.dim or 1
            )
        pending = self._read_pending(st["pending"], t)
        fields = {"p": p, "sum": total, "pending": np.asarray(pending), **lows}
        for name, arr in fields.items():
            if not np.isfinite(arr).all():
                raise ValueError(f"corrupt {owner} state: {name} must be finite")
        self._t, self._p = t, p.astype(np.float64)
        self._c = t + len(pending)
        self._sum = total.astype(np.float64).reshape(self._tail)
        self._pending = pending
        if self._long:
            self._p_lo = lows["p_lo"].astype(np.float64)
            self._sum_lo = lows["sum_lo"].astype(np.float64).reshape(self._tail)


# -- shipped parameters ------------------------------------------------------------------


def shipped_entry(table: str, horizon: int, objective: str) -> dict[str, Any]:
    """The entry of the shipped BLT table ``table`` (``dpcount/data``) for ``objective``
    at the smallest power of two ≥ ``horizon`` (or the table's smallest).

    Raises:
        ValueError: an unknown objective.
    """
    check_choice("objective", objective, ("mean", "max"))
    entries: dict[str, Any] = load_table(table)["objectives"][objective]
    k = max((horizon - 1).bit_length(), min(int(key) for key in entries))
    return dict(entries[str(k)])


def shipped_normalized_blt_parameters(
    horizon: int, objective: str = "mean"
) -> tuple[list[float], list[float]]:
    """(buffer_decay, output_scale) shipped for the column-normalized BLT at ``horizon``.

    The table (``dpcount/data/normalized_blt_parameters.json``, made by
    ``benchmarks/make_normalized_blt_parameters.py``) holds parameters chosen for the
    normalized loss at T = 2^k, k = 0…24, per objective; a horizon uses the entry of the
    smallest power of two ≥ T. The mechanism's sensitivity and variances are always
    computed for the actual T.

    Raises:
        ValueError: an unknown objective or a horizon outside [1, 2^24].
    """
    entry = shipped_entry("normalized_blt_parameters.json", _check(horizon), objective)
    return list(entry["buffer_decay"]), list(entry["output_scale"])


# -- the mechanism ---------------------------------------------------------------------


class NormalizedBLT(Scaled, _BLTParameters):
    """The column-normalized BLT factorization (Gaussian noise, bounded-memory stream):
    the :class:`~dpcount.counting.factorization.scaled.Scaled` preset of a BLT encoder
    without row scaling.

    The encoder C′ = C·diag(1/e) with C = BLT(θ, ω) and e_j = √(S(T − j)/S(T)); the
    decoder B′ = A·diag(e)·C⁻¹. Releases S_t + (B′z)_t with one z ~ N(0, σ²)^T for the
    whole stream (see the module docstring).

    Formal guarantee:
        Neighbouring relation: event level — two streams that differ at one step by
        at most Δ = ``step_sensitivity`` (ℓ₂ norm of the change for vector steps).
        Under a (k, b)-participation schema (``budget.participation``), up to k steps
        pairwise at least b apart.

        Sensitivity (single participation). A change of step j by Δ moves C′x by
        Δ·(column j of C′). Column j of the Toeplitz C holds c_0, …, c_{T−1−j}, so its
        squared norm is S(T − j), and column j of C′ = C·diag(1/e) has squared norm
        S(T − j)/e_j². With e_0 = 1 and e_j ≥ √(S(T − j)/S(T)) (the computed weights
        are enlarged by a relative 2^-40, far above their rounding error,
        :func:`normalized_blt_weights`), every column has norm ≤ √S(T), and the first
        has exactly √S(T); so the ℓ₂ sensitivity is Δ·√S(T) (the closed form of
        :func:`~dpcount.counting.factorization.blt.blt_losses`, enlarged by a relative 1e-12).
        ``"gaussian"``: (ε, δ)-DP for C′x + z with σ from the budget's calibration
        (analytic Gaussian mechanism, Balle & Wang 2018, Theorem 8, by default); the
        release A x + B′z = B′(C′x + z) is post-processing. Gaussian noise only.

        Under a schema: C′ ≥ 0 entrywise (c_k > 0, e > 0), so its Gram matrix is ≥ 0
        and the exact sensitivity comes from the dense encoder for T ≤ 2048
        (:meth:`dense_factorization`, the base class's default), beyond as k times the
        single-participation value (triangle inequality, certified).

        Exact variance: Var_t = σ²·V_t, V_t = ‖B′[t, :]‖²
        (:func:`normalized_blt_noise_coefficients`, O(T·n), computed on first use and
        kept).

    Stream: :class:`NormalizedBLTNoiseProcess`, n + 1 values per coordinate (n buffers
    and the running sum) and O(n) work per coordinate and step.

    References:
        * K. Dvijotham, H. B. McMahan, K. Pillutla, T. Steinke, A. Thakurta.
          "Efficient and near-optimal noise generation for streaming differential
          privacy". FOCS 2024. https://arxiv.org/abs/2404.16706 (BLTs and their inverse)
        * M. Henzinger, N. Kalinin, J. Upadhyay. 2025. A "normalized square root"
          factorization; dpcount applies the column scaling (its reading of the idea,
          see :mod:`dpcount.counting.factorization.normalized_sqrt`) to a BLT encoder.
          https://arxiv.org/abs/2509.14334
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530

    Args:
        horizon: 1 ≤ T ≤ 2^24.
        buffer_decay: θ_1…θ_n, distinct, in (0, 1).
        output_scale: ω_1…ω_n > 0 with Σ ω_i/(1 + θ_i) < 1.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (epsilon, delta, noise (Gaussian only), calibration, step_sensitivity,
            participation).
        rng: Generator, int seed (not for production) or None (OS entropy).

    Raises:
        ValueError: parameters outside the BLT domain (naming them), a horizon above
            2^24, or a noise kind other than Gaussian.
    """

    name = "normalized-blt"
    scaling = Scaling(Base.BLT)

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: the n buffers and the running sum, (n + 1)·d floats (pairs in the long
        forms, counted from 2^16 on: 2(n + 1)·d), plus the step's
        draw and its arrays (as for :class:`~dpcount.counting.BLT`); scalar streams
        compute a chunk of steps ahead. Structure: the parameters, the kept variances,
        the weights a batch release keeps and its carry matrices across the chunks
        (:func:`across_chunks`: n·⌈T/1024⌉² floats, up to 2^17 — the plain forms' limit
        of both presets; the long forms beyond hold n·(3·32² + 2·32) floats per level of
        :func:`across_levels_exact` and chunk size, at most 6 levels of full chunks and
        31 sizes of a last partial chunk). ``buffers`` (None: the shipped count)."""
        T = check_integer("horizon", horizon, ge=1)
        buffers = options.get("buffers")
        n = len(shipped_normalized_blt_parameters(T)[0]) if buffers is None else int(buffers)
        stream = cls._stream_bytes(T, dim, 2 * n + 1 if T > _LONG_ABOVE else n)
        carry = (
            8
            * n
            * (
                (-(-min(T, 1 << 17) // (_CHUNK * _SUPER))) ** 2
                + (6 + _CHUNK - 1) * (3 * _SUPER**2 + 2 * _SUPER)
            )
        )
        return MemoryEstimate(structure=64 * n + 16 * T + carry, stream=stream)

    horizon_limit = NORMALIZED_BLT_MAX_HORIZON
    #: largest |B′[t, j]|: ≤ Σ_k |g_k| ≤ 2 (g_0 = 1, Σ_{k≥1} |g_k| = 1 − 1/c(1) < 1)
    max_noise_coefficient: float | None = 2.0

    def _base_options(self) -> dict[str, Any]:
        """θ and ω, the :class:`~dpcount.counting.BLT` this preset scales."""
        return {
            "buffer_decay": self.buffer_decay.tolist(),
            "output_scale": self.output_scale.tolist(),
        }

    def _set_blt_structure(self, horizon: int) -> None:
        self._sums = _SquareSums(self.buffer_decay, self.output_scale)
        self._coefficients: Array | None = None
        #: the noise processes' chunk matrices (:meth:`NormalizedBLTNoiseProcess.
        #: _chunk_matrices`), built by the first and kept: they depend only on λ, ω′
        self._chunk_mats: ChunkCache = {}

    def _kept(self, key: str, compute: Callable[[], Array]) -> Array:
        """``compute()``, computed on first use and kept (read-only) under ``key``."""
        table: Array | None = self.__dict__.get(key)
        if table is None:
            table = compute()
            table.setflags(write=False)
            self.__dict__[key] = table
        return table

    def _weight_table(self) -> Array:
        """:meth:`weights`, computed on the first batch release and kept (read-only):
        each is the float of its aligned block (of 512 here, :func:`_weights`), so every
        stream and release uses the same values."""
        return self._kept("_weight_cache", self.weights)

    @classmethod
    def optimized(
        cls,
        horizon: int,
        *,
        objective: str = "mean",
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> Self:
        """The shipped parameters for ``objective`` ("mean" or "max" normalized loss)
        at the smallest power of two ≥ horizon (:meth:`shipped_parameters`)."""
        shipped = cls.shipped_parameters(horizon, objective)
        return cls(horizon, **shipped, budget=budget, rng=rng, **fields)

    @classmethod
    def shipped_parameters(cls, horizon: int, objective: str = "mean") -> dict[str, list[float]]:
        """The constructor's structure keywords :meth:`optimized` uses
        (:func:`shipped_normalized_blt_parameters`)."""
        decay, scale = shipped_normalized_blt_parameters(horizon, objective)
        return {"buffer_decay": decay, "output_scale": scale}

    def weights(self) -> Array:
        """e_0, …, e_{T−1} (O(T·n²))."""
        return _weights(self._sums, self.horizon, 0, self.horizon)

    def _unit_sensitivities(self) -> tuple[float, float]:
        """(ℓ₁, ℓ₂): ℓ₂ = √S(T) (every column, see the class docstring); ℓ₁ (recorded
        only: the noise is Gaussian) max_j F(T − j)/e_j, F(m) = Σ_{k<m} c_k, for
        T ≤ 2^16, beyond √T·√S(T) (Cauchy–Schwarz)."""
        T = self.horizon
        S = float(self._sums(np.array([T]))[0])
        l2 = math.sqrt(S)
        if T <= _L1_EXACT:
            F = np.cumsum(encoder_coefficients(self.buffer_decay, self.output_scale, T))
            l1 = float(np.max(F[::-1] / self.weights()))
        else:
            l1 = math.sqrt(T) * l2
        return l1 * (1.0 + SENSITIVITY_MARGIN), l2 * (1.0 + SENSITIVITY_MARGIN)

    def noise_process(
        self, source: NoiseSource, width: int | None = None
    ) -> NormalizedBLTNoiseProcess:
        return NormalizedBLTNoiseProcess(
            self.inverse, self._sums, self.horizon, source, width, **self._process_tables()
        )

    def _process_tables(self) -> dict[str, Any]:
        """What a noise process reads from the mechanism: the weight table and the
        chunk matrices (computed once, kept here)."""
        return {"table": self._weight_table, "chunks": self._chunk_mats}

    def _blocks(self) -> Iterator[tuple[int, Array]]:
        return _variance_blocks(self.buffer_decay, self.output_scale, self.inverse, self.horizon)

    def _exact_coefficients(self) -> Array:
        """V_t for t = 1..T (O(T·n)), computed once and kept (read-only)."""
        if self._coefficients is None:
            out: Array = np.empty(self.horizon)
            for t0, part in self._blocks():
                out[t0 : t0 + len(part)] = part
            out.setflags(write=False)
            self._coefficients = out
        return self._coefficients

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        for block in self._iter_noise_coefficient_blocks(start):
            yield from block.tolist()

    def _iter_noise_coefficient_blocks(self, start: int) -> Iterator[Array]:
        """V_t for t = start … T in consecutive arrays: the kept table's when it is
        computed, else the variance recursion's own blocks of 2^16 steps from the one
        holding ``start`` (the floats the table is filled with), computing O(start) steps
        and keeping none: the first rows of a long horizon (a few-row ``dpcount count
        --horizon 16777216``, its float-safe grids and std column) no longer compute all
        T variances."""
        kept = self._coefficients
        if kept is not None:
            if start <= self.horizon:
                yield kept[start - 1 :]
            return
        for t0, part in self._blocks():
            if t0 + len(part) >= start:
                yield part[max(start - 1 - t0, 0) :]

    def losses(self) -> tuple[float, float]:
        """(mean, max) loss in sensitivity-1 Gaussian units (:func:`normalized_blt_losses`)."""
        return _losses(
            tuple(self.buffer_decay.tolist()), tuple(self.output_scale.tolist()), self.horizon
        )

    def _coefficient_summary(self) -> tuple[float, float]:
        S = float(self._sums(np.array([self.horizon]))[0])
        mean, largest = self.losses()
        return mean / S, largest / S

    def mse(self) -> float:
        """Exact MSE: σ²·mean_t V_t (O(T·n) on first use, kept)."""
        return self.sampler.variance * self._coefficient_summary()[0]

    def max_variance(self) -> float:
        """Exact largest variance: σ²·max_t V_t (O(T·n) on first use, kept)."""
        return self.sampler.variance * self._coefficient_summary()[1]

    def _encoder_coefficients(self) -> Array:
        return encoder_coefficients(self.buffer_decay, self.output_scale, self.horizon)

    def _decoder_kernel(self) -> Array:
        """g_0 = 1, g_k = Σ_i ω′_i λ_i^{k−1}: the coefficients of G = C⁻¹."""
        inv, T = self.inverse, self.horizon
        g = np.ones(T)
        if T > 1:
            k = np.arange(T - 1, dtype=np.float64)
            g[1:] = inv.scale @ _powers(inv.decay, inv.one_minus_decay, k)
        return g
