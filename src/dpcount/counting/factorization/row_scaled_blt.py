"""The row-scaled, column-normalized BLT: bounded-memory noise with scaled rows and columns.

The column-normalized BLT (:mod:`dpcount.counting.factorization.normalized_blt`) scales
the columns of a BLT encoder C to equal norm. Scaling the rows as well, as
:mod:`dpcount.counting.factorization.row_scaled_sqrt` does for the square root, lowers
the loss further (mean 8.938 → 8.746 at T = 1024, dense optimum 8.7347):

    C′ = diag(w)·C·diag(1/n),   n_j = ‖diag(w)·C[:, j]‖,
    B′ = A·diag(n)·G·diag(1/w),  G = C⁻¹ = BLT(λ, ω′)  (so B′·C′ = A),

with w_t = exp(Σ_m a_m·T_m(y_t)), y_t = 2(t + ½)/T − 1 (``log_weights`` a_1…, the
row weights of :func:`~dpcount.counting.factorization.row_scaled_sqrt.row_weights`).
Every column of C′ has norm 1. The noise B′z is the running sum of n_t·v_t with
v = G·(z/w): G is a BLT, so the stream holds its n buffers and the sum, n + 1 values
per coordinate — the stream of :class:`~dpcount.counting.factorization.normalized_blt.
NormalizedBLTNoiseProcess` with input z_t/w_t and weights n_t.

Notation (code ↔ math, 0-based t):

==========  =====================================================================
θ, ω        ``buffer_decay``, ``output_scale`` of the encoder C (a BLT)
λ, ω′       ``inverse.decay``, ``inverse.scale``: G = C⁻¹, g_0 = 1, g_k = Σ_i ω′_i λ_i^{k−1}
a, w_t      ``log_weights``; the row weights
r_p, κ_p    θ_aθ_b and ω_aω_b (doubled for a ≠ b) over pairs p = (a ≤ b): c_k² = Σ_p κ_p r_p^{k−1}
Q_p(j)      Σ_{i>j} w_i² r_p^{i−j−1}: Q_p(T) = 0, Q_p(j) = w_{j+1}² + r_p Q_p(j + 1) (w_T = 0)
n_j         :func:`row_scaled_blt_column_norms`: n_j² = w_j² + Σ_p κ_p Q_p(j)
V_t         :func:`row_scaled_blt_noise_coefficients`: ‖B′[t, :]‖²
==========  =====================================================================

Column norms in O(T·n²). n_j² = Σ_{i≥j} w_i² c_{i−j}² expands as in the table: one
backward first-order filter per pair, computed in aligned blocks of 4096 columns, each
from the filter states Q(g₁) at its right end that one backward pass stores at
construction ((T/4096)·n(n + 1)/2 floats; one filter call per pair and span of 2^20
columns, the floats of the block-by-block pass it replaced: 0.93 s against 1.74 s at
T = 3·10⁶ in one process, 2026-12-07, load 2). Each n_j is therefore the same float
whichever block or process asks for it. All terms are positive (θ, ω > 0), so the
computed n_j² is within a relative γ_{3T+40} = (3T + 40)u/(1 − (3T + 40)u) of the
exact sum for the weights used (each term's path through the filter has at most T
steps of two roundings and one rounded ratio r_p, Higham 2002 §3.1), and the
sensitivity below carries that margin. The encoder the release is post-processing of
is diag(w̃)·C·diag(1/n) with w̃ the weights the stream divides z by: computed by the
same elementwise formula as the norms' w, but numpy's exp may take another (SIMD or
scalar) path for another array length, so w̃_t/w_t is within a relative 4u; the
margin, (4T + 128)·2⁻⁵³ against the (1.5T + 22)·2⁻⁵³ the norms need, covers it.

Exact variances in O(T·n²). Row t of B′ is B′[t, j] = h_t(j)/w_j with
h_t(j) = Σ_{s=j}^{t} n_s g_{s−j}, so with u_j = 1/w_j²

    V_t = V_{t−1} + 2 n_t X_t + n_t² W_t,
    W_t = u_t + Σ_{m,i} ω′_m ω′_i R_{mi}(t),   R_{mi}(t + 1) = λ_mλ_i R_{mi}(t) + u_t,
    X_t = Σ_i ω′_i Y_i(t),                     Y_i(t + 1) = λ_i Y_i(t) + n_t P_i(t),
    P_i(t) = u_t + λ_i Σ_m ω′_m R_{mi}(t),

with R(0) = Y(0) = 0, V_{−1} = 0 (Y_i(t) = Σ_{j<t} h_{t−1}(j) λ_i^{t−1−j} u_j,
R_{mi}(t) = Σ_{j<t} (λ_mλ_i)^{t−1−j} u_j; expanding h_t = h_{t−1} + n_t·(g_t, …, g_0)
gives the recursions). Computed in blocks of 2^16 steps; the tests check them, the
column norms and the stream against the dense T×T matrices.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._scipy import lfilter
from dpcount._validate import check_integer
from dpcount.counting.base import MemoryEstimate
from dpcount.counting.factorization._precision import SCALED_BLT_LONG_HORIZON
from dpcount.counting.factorization.blt import (
    BLTInverse,
    _long_times,
    blt_inverse,
    check_blt_parameters,
)
from dpcount.counting.factorization.normalized_blt import (
    _BLOCK,
    _TABLE_STEPS,
    NormalizedBLT,
    NormalizedBLTNoiseProcess,
    shipped_entry,
)
from dpcount.counting.factorization.scaled import (
    Base,
    Rows,
    Scaling,
    check_log_weights,
    row_weights,
)
from dpcount.counting.factorization.sqrt import SENSITIVITY_MARGIN
from dpcount.privacy._statements import cited
from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ROW_SCALED_BLT_MAX_HORIZON",
    "RowScaledBLT",
    "RowScaledBLTNoiseProcess",
    "row_scaled_blt_column_norms",
    "row_scaled_blt_losses",
    "row_scaled_blt_noise_coefficients",
    "shipped_row_scaled_blt_parameters",
]

Array = NDArray[np.float64]

#: largest horizon: the float release's error is measured within a quarter of the float
#: model's κ up to 2^24 (``blt.FLOAT_MODEL_HORIZONS``, every block path, seeds 1–3, with
#: the column-normalized BLT's long forms beyond 2^17, their buffers across the chunks
#: unrounded since 2026-12-07, ``normalized_blt.across_levels_exact``: ≤ 3.7 at 2^20,
#: ≤ 3.6 at 2^22, ≤ 5.2 at 2^24; the max-objective parameters ≤ 5.4 at 2^24; before ≤ 15
#: and ≤ 29 at 2^20 and 2^22; 60 at 2^17 without them), as far as the module's functions
#: go (``_FUNCTIONS_MAX_HORIZON``, as the shipped parameters); exact variances cost O(T·n²)
ROW_SCALED_BLT_MAX_HORIZON = SCALED_BLT_LONG_HORIZON
#: columns per block of the column-norm filters (a multiple of the stream's 512)
_ANCHOR = 4096
#: columns per filter call of the construction's backward pass (a multiple of _ANCHOR)
_SPAN = 1 << 20
#: largest Σ|a_m|: then |ln w| ≤ 20, so w², 1/w² and the sums stay far inside float64
_MAX_LOG_WEIGHT_SUM = 20.0


#: largest horizon of the module's functions (profiles, losses, the shipped table's
#: lookup): no float release, so beyond the mechanism's limit. 2^24, the shipped table's
#: last entry: certified there (tests/counting/factorization/test_scaled_build.py) —
#: every anchor Q_p(g₁) against an independent blocked sum, sampled n_j against direct
#: sums, V_T against an FFT of B′'s last row
_FUNCTIONS_MAX_HORIZON = 1 << 24


def _check(horizon: int) -> int:
    return check_integer("horizon", horizon, ge=1, le=_FUNCTIONS_MAX_HORIZON)


def _check_log_weights(log_weights: Any) -> tuple[float, ...]:
    a = check_log_weights(log_weights)
    if sum(abs(v) for v in a) > _MAX_LOG_WEIGHT_SUM:
        raise ValueError(
            f"log_weights must have sum |a_m| <= {_MAX_LOG_WEIGHT_SUM:g}, got "
            f"{sum(abs(v) for v in a):.6g}"
        )
    return a


def _norm_margin(T: int) -> float:
    """A relative bound above the rounding of every computed n_j (module docstring):
    n_j² is within γ_{3T+40}, so n_j within half that plus one rounding; doubled."""
    return (4.0 * T + 128.0) * 2.0**-53


class _RowProfile:
    """Row weights w and column norms n of C′ = diag(w)·C·diag(1/n) for one (θ, ω, a, T).

    Holds the filter states Q(g₁) at the right end of each aligned block of 4096
    columns (one backward pass, O(T·n²)), and the last block computed.
    """

    def __init__(
        self, theta: Array, omega: Array, log_weights: tuple[float, ...], T: int, anchor: int
    ):
        iu, ju = np.triu_indices(len(theta))
        self.T = T
        self.anchor = anchor  # columns per block (_ANCHOR, fixed at construction)
        self.log_weights = log_weights
        self._rate = theta[iu] * theta[ju]
        self._coef = np.where(iu == ju, 1.0, 2.0) * omega[iu] * omega[ju]
        self._anchors: Array = self._backward_pass()
        self._cached: tuple[int, Array] = (-1, np.empty(0))

    def _backward_pass(self) -> Array:
        """Q(g₁) at the right end of every aligned block (Q(T) = 0 for the last): one
        first-order filter per pair over all columns, right to left, in spans of
        :data:`_SPAN` columns (each span's filter starts from r_p·Q at its right end,
        the state the filter itself carries, so the values are those of one filter over
        all T columns, and of the block-by-block pass this replaced: tested).

        Q(j) = w_{j+1}² + r_p·Q(j + 1) is the recursion :meth:`_block` runs on one
        block from its anchor; w_{j+1} is the elementwise float of :func:`row_weights`
        (the same whatever array it is computed in), so the anchors are the floats a
        block's own filter reaches at its first column. O(T·n²) time in T·n(n + 1)/2
        filter steps (one call per pair and span instead of one per pair and block of
        4096), O(:data:`_SPAN`) memory beside the anchors."""
        T, anchor = self.T, self.anchor
        span = max(_SPAN // anchor, 1) * anchor
        out: Array = np.zeros((-(-T // anchor), len(self._rate)))
        q = np.zeros(len(self._rate))  # Q(stop) at the right end of the span
        stop = T
        while stop > 0:
            first = (stop - 1) // span * span  # aligned: a multiple of the block size
            w = self.weights(first + 1, stop - first)
            if stop == T:
                w[-1] = 0.0  # w_T = 0: Q(T − 1) = 0
            x = (w * w)[::-1]  # w_{j+1}² for j = stop − 1 down to first
            # Q(g₁) for the blocks ending in the span: g₁ = first (> 0), first + anchor, …
            at = np.arange(first or anchor, stop, anchor)
            for p, r in enumerate(self._rate.tolist()):
                y = lfilter([1.0], [1.0, -r], x, zi=[r * q[p]])[0]  # Q(j), j descending
                out[at // anchor - 1, p] = y[stop - 1 - at]
                q[p] = y[-1]  # Q(first)
            stop = first
        return out

    def weights(self, start: int, count: int) -> Array:
        return row_weights(self.T, self.log_weights, np.arange(start, start + count))

    def _block(self, b: int) -> tuple[Array, Array]:
        """(n_j for the columns of block b, Q(first column of the block))."""
        g0 = b * self.anchor
        g1 = min(g0 + self.anchor, self.T)
        w = self.weights(g0, g1 + 1 - g0)
        if g1 == self.T:
            w[-1] = 0.0  # w_T = 0: Q(T − 1) = 0
        w2 = w * w
        x = w2[:0:-1]  # w_{j+1}² for j = g1 − 1 down to g0
        Q = np.empty((len(self._rate), g1 - g0))
        for p, r in enumerate(self._rate.tolist()):
            Q[p] = lfilter([1.0], [1.0, -r], x, zi=[r * self._anchors[b, p]])[0][::-1]
        n2 = w2[:-1] + self._coef @ Q
        return np.sqrt(n2), Q[:, 0].copy()

    def norms(self, start: int, count: int) -> Array:
        """n_j for j = start … start + count − 1."""
        out: Array = np.empty(count)
        j = start
        while j < start + count:
            b = j // self.anchor
            cached = self._cached  # one read: streams (threads) share the profile
            if cached[0] != b:
                cached = self._cached = (b, self._block(b)[0])
            block = cached[1]
            lo = j - b * self.anchor
            take = min(len(block) - lo, start + count - j)
            out[j - start : j - start + take] = block[lo : lo + take]
            j += take
        return out


def _variance_blocks(profile: _RowProfile, inv: BLTInverse) -> Iterator[tuple[int, Array]]:
    """(first index, V of that block) for blocks of 2^16 steps covering t < T, by the
    recursion of the module docstring, carrying R, Y and V across blocks."""
    lam, wp = inv.decay, inv.scale
    n, T = len(lam), profile.T
    iu, ju = np.triu_indices(n)
    rho = lam[iu] * lam[ju]
    # one product gives Σ_m ω′_m R_{mi} (rows i < n) and Σ_{m,i} ω′_m ω′_i R_{mi} (row n)
    mix = np.zeros((n + 1, len(iu)))
    pairs = np.arange(len(iu))
    mix[ju, pairs] += wp[iu]
    mix[iu[iu != ju], pairs[iu != ju]] += wp[ju[iu != ju]]
    mix[n] = np.where(iu == ju, 1.0, 2.0) * wp[iu] * wp[ju]
    R = np.zeros(len(iu))  # R_p(t0)
    Y = np.zeros(n)  # Y_i(t0)
    V = 0.0
    for t0 in range(0, T, _BLOCK):
        m = min(_BLOCK, T - t0)
        u = 1.0 / profile.weights(t0, m) ** 2
        nt = profile.norms(t0, m)
        Rt = np.empty((len(iu), m))  # R_p(t) for t in the block
        for p, r in enumerate(rho.tolist()):
            out = lfilter([1.0], [1.0, -r], u, zi=[r * R[p]])[0]  # R_p(t + 1)
            Rt[p, 0] = R[p]
            Rt[p, 1:] = out[:-1]
            R[p] = out[-1]
        mixed = _long_times(mix, Rt)
        del Rt
        P = mixed[:n]  # becomes n_t·P_i(t), P_i(t) = u_t + λ_i Σ_m ω′_m R_{mi}(t)
        P *= lam[:, None]
        P += u
        P *= nt
        Yt = np.empty((n, m))
        for i, li in enumerate(lam.tolist()):
            out = lfilter([1.0], [1.0, -li], P[i], zi=[li * Y[i]])[0]  # Y_i(t + 1)
            Yt[i, 0] = Y[i]
            Yt[i, 1:] = out[:-1]
            Y[i] = out[-1]
        W = mixed[n] + u
        inc = 2.0 * nt * _long_times(wp, Yt) + nt * nt * W
        inc[0] += V
        np.cumsum(inc, out=inc)
        V = float(inc[-1])
        yield t0, inc


def _validated(
    buffer_decay: Any, output_scale: Any, log_weights: Any
) -> tuple[Array, Array, tuple[float, ...]]:
    theta, omega = check_blt_parameters(buffer_decay, output_scale)
    return theta, omega, _check_log_weights(log_weights)


def _profile(
    buffer_decay: Any, output_scale: Any, log_weights: Any, horizon: int
) -> tuple[Array, Array, tuple[float, ...], _RowProfile]:
    """The validated (θ, ω, a) and the profile at the horizon."""
    theta, omega, a = _validated(buffer_decay, output_scale, log_weights)
    T = _check(horizon)
    profile = _row_profile(tuple(theta.tolist()), tuple(omega.tolist()), a, T, _ANCHOR)
    return theta, omega, a, profile


@lru_cache(maxsize=4)
def _row_profile(
    theta: tuple[float, ...], omega: tuple[float, ...], a: tuple[float, ...], T: int, anchor: int
) -> _RowProfile:
    """The profile of (θ, ω, a, T), built once (one backward pass over T·n(n + 1)/2
    filters): ``dpcount plan`` builds the same mechanism several times, and every
    mechanism and stream only reads it (its one-block cache aside)."""
    return _RowProfile(np.array(theta), np.array(omega), a, T, anchor)


def row_scaled_blt_column_norms(
    buffer_decay: Any, output_scale: Any, log_weights: Any, horizon: int
) -> Array:
    """n_j = ‖diag(w)·C[:, j]‖ for j = 0 … T − 1 (O(T·n²); module docstring).

    Raises:
        ValueError: parameters outside the BLT domain, bad ``log_weights`` or horizon.
    """
    *_, profile = _profile(buffer_decay, output_scale, log_weights, horizon)
    return profile.norms(0, profile.T)


def row_scaled_blt_noise_coefficients(
    buffer_decay: Any, output_scale: Any, log_weights: Any, horizon: int
) -> Array:
    """V_t = ‖B′[t, :]‖² for t = 1..T (O(T·n²) time; module docstring)."""
    theta, omega, _, profile = _profile(buffer_decay, output_scale, log_weights, horizon)
    out: Array = np.empty(profile.T)
    for t0, part in _variance_blocks(profile, blt_inverse(theta, omega)):
        out[t0 : t0 + len(part)] = part
    return out


def row_scaled_blt_losses(
    buffer_decay: Any, output_scale: Any, log_weights: Any, horizon: int
) -> tuple[float, float]:
    """(mean, max) loss mean_t V_t, max_t V_t in sensitivity-1 Gaussian units (every
    column of C′ has norm 1), in O(T·n²) time and O(2^16·n²) memory."""
    theta, omega, a = _validated(buffer_decay, output_scale, log_weights)
    return _losses(tuple(theta.tolist()), tuple(omega.tolist()), a, _check(horizon))


@lru_cache(maxsize=8)
def _losses(
    theta: tuple[float, ...], omega: tuple[float, ...], a: tuple[float, ...], T: int
) -> tuple[float, float]:
    th, om = np.array(theta), np.array(omega)
    profile = _row_profile(theta, omega, a, T, _ANCHOR)
    total, largest = 0.0, 0.0
    for _, part in _variance_blocks(profile, blt_inverse(th, om)):
        total += float(np.sum(part))
        largest = max(largest, float(part.max()))
    return total / T, largest


# -- the noise process -----------------------------------------------------------------


class RowScaledBLTNoiseProcess(NormalizedBLTNoiseProcess):
    """N = B′z = A·diag(n)·(G·(z/w)) for one stream with n + 1 running values (×dim).

    The column-normalized BLT's process (buffers p_i(t) = λ_i p_i(t−1) + z_t/w_t,
    noise N_t = N_{t−1} + n_t·(G(z/w))_t) with the input divided by the row weights
    and the column norms n_t as weights; checkpoints, vector steps and blocks as there.

    Args:
        mechanism: the :class:`RowScaledBLT` whose noise this is.
        source, dim: as for the column-normalized BLT's process.
    """

    float_model_name = "row-scaled-blt"
    #: the limit measured before the long forms (``NormalizedBLTNoiseProcess._compute_long``)
    long_above = 1 << 17

    def __init__(
        self,
        mechanism: RowScaledBLT,
        source: NoiseSource,
        dim: int | None = None,
    ) -> None:
        m = mechanism
        super().__init__(m.inverse, m._sums, m.horizon, source, dim, **m._process_tables())
        self._profile = m._profile
        self._row_table = m._row_weight_table

    def _weight_block(self, first: int, size: int) -> Array:
        return self._profile.norms(first, size)

    def _draw(self, start: int, shape: tuple[int, ...]) -> Array:
        z = super()._draw(start, shape)
        if len(shape) == len(self._tail):  # one vector step
            z /= self._profile.weights(start, 1)[0]
            return z
        if shape[0] >= _TABLE_STEPS:  # a batch: the kept weights (the same floats)
            w = self._row_table()[start : start + shape[0]]
        else:
            w = self._profile.weights(start, shape[0])
        z /= w.reshape(-1, *(1,) * len(self._tail))
        return z


# -- shipped parameters ------------------------------------------------------------------


def shipped_row_scaled_blt_parameters(
    horizon: int, objective: str = "mean"
) -> tuple[list[float], list[float], list[float]]:
    """(buffer_decay, output_scale, log_weights) shipped for ``horizon`` and ``objective``.

    The table (``dpcount/data/row_scaled_blt_parameters.json``, made by
    ``benchmarks/make_row_scaled_blt_parameters.py``) holds parameters chosen for the
    mean or max loss at T = 2^k; a horizon uses the entry of the smallest power of two
    ≥ T (the row weights are a function of t/T, so they carry over). The mechanism's
    column norms, sensitivity and variances are always computed for the actual T.

    Raises:
        ValueError: an unknown objective or a horizon outside [1, 2^24].
    """
    entry = shipped_entry("row_scaled_blt_parameters.json", _check(horizon), objective)
    return list(entry["buffer_decay"]), list(entry["output_scale"]), list(entry["log_weights"])


# -- the mechanism ---------------------------------------------------------------------


@cited
class RowScaledBLT(NormalizedBLT):
    """The row-scaled, column-normalized BLT factorization (Gaussian, bounded-memory stream).

    The encoder C′ = diag(w)·C·diag(1/n) with C = BLT(θ, ω), w the row weights of
    ``log_weights`` and n_j = ‖diag(w)·C[:, j]‖; the decoder B′ = A·diag(n)·C⁻¹·diag(1/w).
    Releases S_t + (B′z)_t with one z ~ N(0, σ²)^T for the whole stream (module
    docstring). With ``log_weights`` all zero it is the column-normalized BLT.

    Formal guarantee:
        Neighbouring relation: as for :class:`NormalizedBLT` (one step changes by at
        most Δ = ``step_sensitivity`` in ℓ₂; under ``budget.participation``, up to k
        steps pairwise at least b apart).

        Sensitivity (single participation). A change of step j by Δ moves C′x by
        Δ·(column j of C′), of norm ‖diag(w)·C[:, j]‖/n_j = 1 for the exact n_j. The
        computed n_j are sums of positive terms within a relative γ_{3T+40}
        (module docstring), so the ℓ₂ sensitivity is taken as
        Δ·(1 + (4T + 128)·2⁻⁵³)·(1 + 10⁻¹²) ≥ Δ·max_j ‖C′[:, j]‖. ``"gaussian"``:
        (ε, δ)-DP for C′x + z with σ from the budget's calibration (analytic Gaussian
        mechanism, Balle & Wang 2018, Theorem 8, by default); the release
        A x + B′z = B′(C′x + z) is post-processing (the matrix-factorization
        mechanism: Denisov et al. 2022; McMahan, Xu & Zhang 2024). Gaussian only.

        Under a schema: C′ ≥ 0 entrywise (c_k, w, n > 0), so its Gram matrix is ≥ 0
        and the exact sensitivity comes from the dense encoder for T ≤ 2048
        (:meth:`dense_factorization`, the base class's default), beyond as k times the
        single-participation value (triangle inequality, certified).

        Exact variance: Var_t = σ²·V_t, V_t = ‖B′[t, :]‖²
        (:func:`row_scaled_blt_noise_coefficients`, O(T·n²), computed on first use).

    Stream: :class:`RowScaledBLTNoiseProcess`, n + 1 values per coordinate (n buffers
    and the running sum) and O(n) work per coordinate and step.

    References:
        * S. Denisov, H. B. McMahan, K. Rush, A. Smith, A. Thakurta. "Improved
          differential privacy for SGD via optimal private linear operators on adaptive
          streams". NeurIPS 2022. https://arxiv.org/abs/2202.08312
        * H. B. McMahan, Z. Xu, Y. Zhang. "A hassle-free algorithm for private learning
          in practice: don't use tree aggregation, use BLTs". 2024.
          https://arxiv.org/abs/2408.08868
        [references: hku25, bw18]

    Args:
        horizon: 1 ≤ T ≤ 2^24.
        buffer_decay, output_scale, budget, rng: as for :class:`NormalizedBLT`.
        log_weights: Chebyshev coefficients a_1… of ln w (1 to 32 finite numbers,
            |a_m| ≤ 5, Σ|a_m| ≤ 20).

    Raises:
        ValueError: parameters outside the BLT domain or bad ``log_weights`` (naming
            them), a horizon above 2^24, or a noise kind other than Gaussian.
    """

    name = "row-scaled-blt"
    scaling = Scaling(Base.BLT, Rows.CHEBYSHEV)
    horizon_limit = ROW_SCALED_BLT_MAX_HORIZON

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """As :meth:`NormalizedBLT.memory_estimate <dpcount.counting.NormalizedBLT.
        memory_estimate>` (the stream holds (n + 1)·d floats), plus one block of 4096
        column norms per stream and the column-norm anchors, (T/4096)·n(n + 1)/2 floats,
        in the structure. ``buffers`` (None: the shipped count)."""
        T = check_integer("horizon", horizon, ge=1)
        buffers = options.get("buffers")
        n = len(shipped_row_scaled_blt_parameters(T)[0]) if buffers is None else int(buffers)
        base = NormalizedBLT.memory_estimate(T, dim, buffers=n)
        anchors = 8 * -(-T // _ANCHOR) * n * (n + 1) // 2
        return MemoryEstimate(structure=base.structure + anchors, stream=base.stream + 8 * _ANCHOR)

    def __init__(
        self,
        horizon: int,
        *,
        buffer_decay: Any,
        output_scale: Any,
        log_weights: Any,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        theta, omega, a, profile = _profile(buffer_decay, output_scale, log_weights, horizon)
        self.log_weights: tuple[float, ...] = a
        self._profile = profile
        super().__init__(
            horizon, buffer_decay=theta, output_scale=omega, budget=budget, rng=rng, **fields
        )
        self.max_noise_coefficient = None

    @classmethod
    def shipped_parameters(cls, horizon: int, objective: str = "mean") -> dict[str, list[float]]:
        """The structure keywords :meth:`optimized <NormalizedBLT.optimized>` builds with:
        the table for ``objective`` ("mean" or "max" loss) at the smallest power of two
        ≥ horizon (:func:`shipped_row_scaled_blt_parameters`)."""
        decay, scale, log_weights = shipped_row_scaled_blt_parameters(horizon, objective)
        return {"buffer_decay": decay, "output_scale": scale, "log_weights": log_weights}

    def weights(self) -> Array:
        """The column norms n_0, …, n_{T−1} of diag(w)·C (O(T·n²))."""
        return self._profile.norms(0, self.horizon)

    def row_weights(self) -> Array:
        """The row weights w_0, …, w_{T−1}."""
        return self._profile.weights(0, self.horizon)

    def _row_weight_table(self) -> Array:
        """w_0, …, w_{T−1}, computed on the first batch release and kept (read-only):
        each w_k is the same float whatever array it is computed in (``row_weights``)."""
        return self._kept("_row_weight_cache", self.row_weights)

    def _unit_sensitivities(self) -> tuple[float, float]:
        """(ℓ₁, ℓ₂): ℓ₂ = 1 enlarged by the column norms' rounding bound and 10⁻¹² (class
        docstring); ℓ₁ (recorded only: the noise is Gaussian) √T·ℓ₂ (Cauchy–Schwarz)."""
        T = self.horizon
        l2 = (1.0 + _norm_margin(T)) * (1.0 + SENSITIVITY_MARGIN)
        return math.sqrt(T) * l2, l2

    def noise_process(
        self, source: NoiseSource, width: int | None = None
    ) -> RowScaledBLTNoiseProcess:
        return RowScaledBLTNoiseProcess(self, source, width)

    def _blocks(self) -> Iterator[tuple[int, Array]]:
        return _variance_blocks(self._profile, self.inverse)

    def losses(self) -> tuple[float, float]:
        """(mean, max) loss in sensitivity-1 Gaussian units (:func:`row_scaled_blt_losses`)."""
        return _losses(
            tuple(self.buffer_decay.tolist()),
            tuple(self.output_scale.tolist()),
            self.log_weights,
            self.horizon,
        )

    def _coefficient_summary(self) -> tuple[float, float]:
        return self.losses()
