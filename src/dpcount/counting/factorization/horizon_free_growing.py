"""A counter without a horizon whose buffers grow with the stream: a BLT whose columns
change with the step (column-normalized, step-dependent output scales).

A Toeplitz encoder spends the same column on every step, so a counter without a horizon
built on one (:class:`~dpcount.counting.factorization.horizon_free_blt.HorizonFreeBLT`,
:class:`~dpcount.counting.factorization.horizon_free.HorizonFreeSqrt`) must split one
finite column norm over every time scale at once, and its variance ratio to the square
root told the horizon grows with the range of t it covers (1.56 over t = 2^4 … 2^24).
Here the column of step s uses only the time scales a stream of age s needs: buffer i
(decay θ_i, time scale τ_i = 1/(1 − θ_i)) gets the output scale

    ω_i(s) = ω_i·m_i(s),   m_i(s) = (K·s / (K·s + τ_i))^{1/2},

so a step early in the stream puts little weight on the long time scales, and every
column is then scaled to norm at most 1:

    C[s, s] = 1/ν(s),   C[t, s] = Σ_i ω_i(s) θ_i^{t−s−1} / ν(s)  (t > s),
    ν(s)² ≥ 1 + Σ_{i,j} ω_i(s) ω_j(s) / (1 − θ_iθ_j)  (the column's infinite norm², closed form).

The output scales are constant on blocks of steps (every step up to 16, then four blocks
per octave: block j starts at round(2^{4 + (j − 16)/4}), the last at 2^26 lasts forever),
so there are finitely many distinct columns (:func:`block_starts`). The first 16
blocks (steps 1 … 15 one step each, the 16th steps 16 … 18) take head factors: block b
has output scales β_b·ω_i(s) (:data:`HORIZON_FREE_GROWING_HEAD`, each β_b in (0, 1])
and ν(s) from them by the same closed form, so its column keeps norm at most 1. A
smaller tail on an early column lowers the variance at the first steps (at t = 1 it is
ν(1)², 1.5225 without the factor) and raises it a little at the later ones (1.3293
instead of 1.2920 at t = 19, 1.3103 instead of 1.2873 at t = 65, 1.2745 instead of
1.2714 at 2^24); the shipped factors equalize the ratio to the plain square root told
t at 1.3293 over t = 1 … 16 (and 19), the largest over t = 1 … 2^24 (without them:
1.5225 at t = 1, 1.3732 at t = 2, below 1.30 from t = 16 on).

Noise without the inverse: w = C⁻¹z is computed online with the n buffers
u_i(t) = Σ_{s<t} θ_i^{t−1−s} ω_i(s) y_s of y_s = w_s/ν(s) = z_s − Σ_i u_i(s), and the
release's noise is N_t = (A C⁻¹ z)_t = Σ_{s≤t} w_s — 2n + 3 running values per
coordinate (the buffers in double-double and N, summed compensated:
:class:`GrowingNoiseProcess`), whatever t is. The decoder B = A·C⁻¹ is not Toeplitz;
the variance at step t is the (N, N) entry of the covariance of the state (u, N),
propagated exactly: P ← M P Mᵀ + q qᵀ with M = [[diag(θ) − ω(s)1ᵀ, 0],
[−ν(s)1ᵀ, 1]], q = (ω(s), ν(s)), by repeated squaring across each block up to a
restart point (every block start and every multiple of 2^14, sparser past 2^23), and
after it in closed form from the rows r_k = e_Nᵀ M^k: V(p + k) = r_k P_p r_kᵀ +
Σ_{j<k} (r_j·q)² (``_Variances.run``).

Certified sensitivity: every column has the same structure, 1/ν(s) on the diagonal and
a BLT tail, so its squared norm over the infinite stream is the closed form above over
ν(s)². Its terms are positive and each is computed in floating point with relative
error at most 6u + O(u²) (u = 2^−53; 1 − θ_iθ_j as (1 − θ_i) + θ_i(1 − θ_j): each
1 − θ one rounding, exact for θ ≥ 1/2 by Sterbenz's lemma, then a product and a sum;
then w_iw_j and the quotient; Higham 2002, §2.2 and §3.1), summed by ``math.fsum`` (one
rounding), so the float N(s) satisfies N_exact ≤ N(s)·(1 + 8u); ν(s) is the next float
above the computed √(N(s)·(1 + 2^−49)), so ν(s)² ≥ N(s)·(1 + 14u) ≥ N_exact and every
column's norm is at most 1 (tests check every block in exact rational arithmetic). The
ℓ₂ sensitivity is 1 enlarged by a relative 10⁻¹².

Parameters (:data:`HORIZON_FREE_GROWING_PARAMETERS`): θ log-spaced in −ln(1 − θ) with ω
from the quadrature of the square root's arcsine measure (as ``start`` in
``benchmarks/make_horizon_free_blt.py``), then (K, the range of −ln(1 − θ), a tilt)
fitted by Nelder–Mead on the largest ratio of the variance at t to the plain square
root's told the horizon t over t = 2^4 … 2^26, four points per octave
(``benchmarks/make_horizon_free_blt.py --growing``; figures in docs/unbounded.md); then,
with those fixed, the head factors by SLSQP on the largest ratio over t = 1 … 128,
rounded to four digits (``--head``).

References:
    * K. Dvijotham, H. B. McMahan, K. Pillutla, T. Steinke, A. Thakurta. "Efficient and
      near-optimal noise generation for streaming differential privacy". FOCS 2024.
      https://arxiv.org/abs/2404.16706
    * B. Jacobsen, K. Fawaz. "Private Continual Counting of Unbounded Streams".
      NeurIPS 2025. https://arxiv.org/abs/2506.15018
    * N. J. Higham. "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM 2002.
    * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential privacy:
      analytical calibration and optimal denoising". ICML 2018.
      https://arxiv.org/abs/1805.06530
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcount._state import state_array
from dpcount._validate import check_integer, check_real
from dpcount.counting._chunked import ChunkedNoiseProcess
from dpcount.counting.base import MAX_HORIZON, CountingMechanism, MemoryEstimate, step_bytes
from dpcount.counting.factorization._types import Array
from dpcount.counting.factorization.blt import blt_config, check_blt_parameters
from dpcount.counting.factorization.horizon_free import single_participation
from dpcount.counting.factorization.sqrt import SENSITIVITY_MARGIN
from dpcount.privacy.budget import Budget, BudgetFields, NoiseKind, Participation
from dpcount.privacy.float_safe import MODEL_KAPPA
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from dpcount.counting.participation import Sensitivity

__all__ = [
    "FLOAT_MODEL_STEPS",
    "HORIZON_FREE_GROWING_HEAD",
    "HORIZON_FREE_GROWING_PARAMETERS",
    "GrowingColumns",
    "HorizonFreeGrowingBLT",
    "block_starts",
    "growing_columns",
]

#: (buffer_decay θ, output_scale ω, K) fitted as the module docstring says
HORIZON_FREE_GROWING_PARAMETERS: tuple[tuple[float, ...], tuple[float, ...], float] = (
    (
        0.45970554229418714,
        0.8915347748950055,
        0.9782253826792298,
        0.9956287007286712,
        0.9991224526687184,
        0.9998238305659622,
        0.9999646336233011,
        0.9999929001270417,
        0.9999985746858816,
        0.9999997138652553,
        0.9999999425578607,
        0.9999999884683722,
    ),
    (
        0.2547015715587552,
        0.15889217699122893,
        0.07455803472934715,
        0.03369498819597427,
        0.015120549731197589,
        0.006775815627393762,
        0.003035524728023953,
        0.001359820330255415,
        0.0006091501827014365,
        0.00027287656712682583,
        0.0001222384710590189,
        5.475824693832108e-05,
    ),
    19.18841592994059,
)
#: The head factors β_1 … β_16: block b ≤ 16 (steps 1 … 15 one step each, block 16
#: steps 16 … 18) has output scales β_b·ω_i(s), then ν(s) by the same certified closed
#: form, so its column still has norm at most 1 and the sensitivity is unchanged. They
#: lower the ratio to the plain square root told t at the first steps, which the
#: parameters' fit (t = 2^4 … 2^26) leaves high (1.5225 at t = 1: ν(1)², the whole first
#: column; 1.3732 at t = 2), to 1.3293 at every t ≤ 16 (equioscillating: the largest
#: over t = 1 … 2^24, every t ≤ 4096, 2^k ± 1 and 3,000 random t checked; a single
#: factor on step 1 alone gives at best 1.3909, at t = 1 and 2). Fitted by SLSQP on the largest
#: ratio over t = 1 … 128 with the other parameters fixed, rounded to four digits
#: (``benchmarks/make_horizon_free_blt.py --head``; figures in docs/unbounded.md).
HORIZON_FREE_GROWING_HEAD: tuple[float, ...] = (
    0.7939,
    0.8898,
    0.9265,
    0.9395,
    0.9438,
    0.9461,
    0.9486,
    0.952,
    0.956,
    0.9605,
    0.9652,
    0.9699,
    0.9744,
    0.9788,
    0.9829,
    0.9866,
)
#: steps up to here are blocks of one step
_SINGLE_STEPS = 16
#: blocks per octave beyond them
_PER_OCTAVE = 4
#: log2 of the last block's first step (that block lasts forever)
_LAST_LOG2 = 26
#: restart points of the exact variance recursion: every block start and every multiple
_RESTART = 1 << 14
#: the relative enlargement of the float column norm² (16u: covers 8u, module docstring)
_NORM_SLACK = 2.0**-49
#: largest horizon whose full variance table ``noise_coefficients`` builds
_TABLE_LIMIT = 1 << 22
#: The last step whose noise is measured within the float model (F) of
#: :mod:`dpcount.privacy.float_safe` with margin (benchmarks/float_model_growing.py: the
#: largest ratio of the noise's error, against the same recursion in long double, to
#: u·σ_t·(1 + Z*/σ₁); κ = 256; figures in :class:`GrowingNoiseProcess`) with the
#: double-double buffers. Re-measured with the head factors (they change steps 1 … 18's
#: columns; ``--log2 20,22,24,25 --beyond``): scalar ``next_many`` (whose noise is the
#: default counter's block 0 bit for bit), seeds 1 / 2 / 3: 2.39 / 1.83 / 2.30 at 2^25,
#: 2.32 / 1.82 / 2.30 at 2^24, ≤ 2.42 over 2^20 … 2^25; every other path's noise equals
#: the scalar or vector ``next_many``'s bit for bit (``--identical --log2 16``, seeds
#: 1–3, re-run); vector ``next_many`` (dim 2 / 3 / 4, seeds 1 / 2 / 3,
#: ``--by-coordinates``): 2.59 / 3.19 / 2.92 at 2^25, 2.62 / 3.19 / 2.92 at 2^24,
#: ≤ 3.42 over 2^20 … 2^25 (3.41 at 2^20, dim 3). Margin ≥ 18 to κ/4.
#: Before the head factors (the same columns from step 19 on): scalar 2.38 / 1.98 / 2.23
#: and vector 2.74 / 2.40 / 2.81 at 2^25, ≤ 3.1 at 2^17 … 2^22 on every path.
#: With plain float buffers it was 19–26 at 2^17 and up to 145 at 2^20. Later steps are
#: not measured and are refused: a float release there could state too small a δ.
FLOAT_MODEL_STEPS = 1 << 25


def block_starts() -> tuple[int, ...]:
    """The first step of every block: 1, 2, …, 16, then round(2^{4 + k/4}) for k = 1 …
    88 (the last, 2^26, lasts forever)."""
    tail = [
        round(2.0 ** (4 + k / _PER_OCTAVE)) for k in range(1, _PER_OCTAVE * (_LAST_LOG2 - 4) + 1)
    ]
    return (*range(1, _SINGLE_STEPS + 1), *tail)


@dataclass(frozen=True, eq=False)
class GrowingColumns:
    """The distinct columns: block starts, per-block output scales ω(s) (rows) and
    normalizers ν(s) (every column's infinite norm ≤ 1, module docstring)."""

    decay: Array
    starts: tuple[int, ...]
    scales: Array
    normalizers: Array

    def block_of(self, t: int) -> int:
        """The block of step t ≥ 1."""
        return int(np.searchsorted(np.asarray(self.starts), t, side="right")) - 1

    def transition(self, block: int) -> tuple[Array, Array]:
        """(M, q) of one step in ``block``: the state (u, N) moves to M·(u, N) + q·z."""
        n = len(self.decay)
        w, nu = self.scales[block], float(self.normalizers[block])
        M = np.zeros((n + 1, n + 1))
        M[:n, :n] = np.diag(self.decay) - np.outer(w, np.ones(n))
        M[n, :n] = -nu
        M[n, n] = 1.0
        return M, np.append(w, nu)


def _column_norm_squared(theta: Array, w: Array) -> float:
    """1 + Σ_{i,j} w_i w_j/(1 − θ_iθ_j) in floating point, every term positive and
    within a relative 6u + O(u²) of its exact value (module docstring)."""
    one_minus = 1.0 - theta  # exact for θ ≥ 1/2 (Sterbenz), relative u below
    d = one_minus[:, None] + theta[:, None] * one_minus[None, :]
    terms = np.outer(w, w) / d
    return math.fsum([1.0, *terms.ravel().tolist()])


@lru_cache(maxsize=4)
def _columns(
    theta: tuple[float, ...], omega: tuple[float, ...], scale: float, head: tuple[float, ...]
) -> GrowingColumns:
    th, om = np.array(theta), np.array(omega)
    tau = 1.0 / (1.0 - th)
    starts = block_starts()
    s = np.array(starts, dtype=np.float64)[:, None]
    W = om[None, :] * np.sqrt(scale * s / (scale * s + tau[None, :]))
    W[: len(head)] *= np.array(head, dtype=np.float64)[:, None]  # blocks 1 … len(head)
    nu = np.array(
        [
            math.nextafter(math.sqrt(_column_norm_squared(th, w) * (1.0 + _NORM_SLACK)), math.inf)
            for w in W
        ]
    )
    for arr in (th, W, nu):
        arr.setflags(write=False)
    return GrowingColumns(decay=th, starts=starts, scales=W, normalizers=nu)


def growing_columns(
    buffer_decay: Any, output_scale: Any, scale: float, head: Any = ()
) -> GrowingColumns:
    """The checked parameters' blocks (cached); ``head`` the factors β_1 … β_k (k ≤ 16)
    on the output scales of the first k blocks (steps 1 … 15 one each, the 16th steps
    16 … 18; none: every β = 1).

    Raises:
        ValueError: θ, ω outside the BLT domain (:func:`~dpcount.counting.factorization.
            blt.check_blt_parameters`), K not a positive finite number, or ``head`` not
            at most 16 reals in (0, 1].
    """
    th, om = check_blt_parameters(buffer_decay, output_scale)
    K = check_real("scale", scale, gt=0.0)
    return _columns(tuple(th.tolist()), tuple(om.tolist()), float(K), check_head(head))


def check_head(head: Any) -> tuple[float, ...]:
    """The head factors as a tuple of floats: a sequence of at most 16 reals in (0, 1].

    Raises:
        TypeError: ``head`` not a sequence, or an entry not a real number.
        ValueError: more than 16 entries, or one outside (0, 1].
    """
    if isinstance(head, (str, bytes)) or not isinstance(head, (tuple, list, np.ndarray)):
        raise TypeError(f"head_factors must be a sequence of reals, got {type(head).__name__}")
    if len(head) > _SINGLE_STEPS:
        raise ValueError(
            f"head_factors holds at most {_SINGLE_STEPS} factors (blocks 1 … {_SINGLE_STEPS}), "
            f"got {len(head)}"
        )
    return tuple(
        float(check_real(f"head_factors[{i}]", v, gt=0.0, le=1.0)) for i, v in enumerate(head)
    )


class _Variances:
    """The exact variance recursion (module docstring), with the covariance at every
    restart point kept as it is reached, so every value is computed by the same
    operations whoever asks (``noise_coefficients`` and ``variance_at`` agree bit for
    bit)."""

    def __init__(self, columns: GrowingColumns) -> None:
        self.columns = columns
        n = len(columns.decay)
        self.restarts: list[Array] = [np.zeros((n + 1, n + 1))]  # covariance after step 0
        self.points: list[int] = [0]
        self._mats: dict[int, tuple[Array, Array]] = {}

    def _transition(self, block: int) -> tuple[Array, Array]:
        mats = self._mats.get(block)
        if mats is None:
            mats = self.columns.transition(block)
            self._mats[block] = mats
        return mats

    def _next_point(self, p: int) -> int:
        """The restart point after step p: the next block start − 1 or multiple of the
        spacing, 2^14 below 2^23 and 2^(k − 9) in [2^(k−1), 2^k) beyond (256 per octave,
        so a step's value takes at most t/256 steps after its restart point)."""
        starts = self.columns.starts
        b = self.columns.block_of(p + 1)
        spacing = max(_RESTART, 1 << max(0, (p + 1).bit_length() - 9))
        nxt = (p // spacing + 1) * spacing
        if b + 1 < len(starts):
            nxt = min(nxt, starts[b + 1] - 1)
        return nxt

    def covariance_at_point(self, t: int) -> tuple[int, Array]:
        """(p, covariance after step p) for the last restart point p ≤ t (by repeated
        squaring across the segments before it)."""
        while self._next_point(self.points[-1]) <= t:
            p = self.points[-1]
            end = self._next_point(p)
            M, q = self._transition(self.columns.block_of(p + 1))
            self.restarts.append(_advance(self.restarts[-1], M, q, end - p))
            self.points.append(end)
        i = int(np.searchsorted(np.asarray(self.points), t, side="right")) - 1
        return self.points[i], self.restarts[i]

    def run(self, start: int, stop: int) -> Iterator[float]:
        """Var(N_t)/σ² for t = start … stop from the restart points: after point p (state
        covariance P), V(p + k) = r_k P r_kᵀ + Σ_{j<k} (r_j·q)² with r_k = e_Nᵀ M^k, the
        rows r_k computed in chunks of :data:`_ROWS` at fixed offsets from p (so every
        value is the same whoever asks)."""
        t = start
        while t <= stop:
            p, P = self.covariance_at_point(t - 1)  # the last restart point before t
            seg_end = min(stop, self._next_point(p))
            M, q = self._transition(self.columns.block_of(p + 1))
            first = _rows(M, min(_ROWS, seg_end - p + 1))  # r_0 … r_{C−1}
            step = _power(M, _ROWS)
            power = np.eye(len(q))
            carry = 0.0
            for c0 in range(0, seg_end - p + 1, _ROWS):
                count = min(_ROWS, seg_end - p + 1 - c0)
                R = first[:count] if c0 == 0 else np.einsum("ki,ij->kj", first[:count], power)
                forms = np.einsum("ki,ij,kj->k", R, P, R)  # r_k P r_kᵀ
                sums = np.cumsum(np.concatenate([[carry], np.einsum("kj,j->k", R, q) ** 2]))
                values = forms + sums[:-1]  # V(p + k), k = c0 … c0 + count − 1
                lo = max(t - p, c0, 1)
                yield from values[lo - c0 :].tolist()
                carry = float(sums[-1])
                power = power @ step if c0 else step
            t = seg_end + 1


#: rows r_k computed per chunk of the exact variance recursion
_ROWS = 1 << 12


def _rows(M: Array, count: int) -> Array:
    """r_k = e_Nᵀ M^k for k < count, by doubling: rows m … 2m − 1 are rows 0 … m − 1
    times M^m (each row the same whatever the count)."""
    R = np.zeros((count, len(M)))
    R[0, -1] = 1.0
    m, Mm = 1, M
    while m < count:
        take = min(m, count - m)
        R[m : m + take] = np.einsum("ki,ij->kj", R[:take], Mm)
        Mm = Mm @ Mm
        m *= 2
    return R


def _power(M: Array, k: int) -> Array:
    """M^k by repeated squaring (a fixed sequence of products for each k)."""
    out, base = np.eye(len(M)), M
    while k:
        if k & 1:
            out = out @ base
        k >>= 1
        if k:
            base = base @ base
    return out


def _advance(P: Array, M: Array, q: Array, steps: int) -> Array:
    """P after ``steps`` steps of P ← M P Mᵀ + q qᵀ, by repeated squaring."""
    Mk, Sk = M, np.outer(q, q)
    while steps:
        if steps & 1:
            P = Mk @ P @ Mk.T + Sk
        steps >>= 1
        if steps:
            Sk = Sk + Mk @ Sk @ Mk.T
            Mk = Mk @ Mk
    return P


def _split(a: Array) -> tuple[Array, Array]:
    """Veltkamp's split a = hi + lo (exact; hi, lo with at most 26 significant bits)."""
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


@lru_cache(maxsize=4)
def _variances(columns: GrowingColumns) -> _Variances:
    return _Variances(columns)


#: Veltkamp's splitting constant 2^27 + 1: a = hi + lo with 26-bit halves (Dekker's
#: exact product, Higham 2002, §4.4)
_SPLIT = 134217729.0
#: (n, dim) temporaries of one vector step (``GrowingNoiseProcess._compute_vector``)
_VECTOR_TEMPORARIES = 12


class GrowingNoiseProcess(ChunkedNoiseProcess):
    """N_t = (A C⁻¹ z)_t for one stream with 2n + 3 running values (×dim): the buffers u
    as double-double pairs (hi, lo), the running sum's value N₀ at the last block end,
    the sum Y of y since then and Y's compensation c, stored as one array (2n + 3,) or
    (2n + 3, dim). Step t of block b: y = z_t − Σ_i (hi_i + lo_i), Y += y (compensated),
    u ← θ⊙u + ω_b·y (double-double); the noise is N₀ + ν_b·(Y + c); at the block's last
    step N₀ takes that value and Y, c restart.

    Why: in plain floats the buffers' roundings (about u·|u_i| a step) reach the release
    through the slow decays and add up with t, and the running sum N += ν·y rounds at
    every step (a random walk, about u·σ·√t); the float model (F) of
    :mod:`dpcount.privacy.float_safe` measured up to 114 (scalar) and 147 (vector) at
    2^20 steps, > κ/4 (benchmarks/float_model_growing.py). Here θ_i·hi_i and ω_i·y are
    exact products (Dekker, with Veltkamp's split), their sum is split exactly by TwoSum
    (Knuth; Higham 2002, §4.3) and lo_i ← θ_i·lo_i + (the exact residuals), so a buffer
    step errs by O(u·|lo_i|); the running sum is compensated and scaled once per block.
    The exact noise is the same; only its float computation is more accurate. Steps
    beyond :data:`FLOAT_MODEL_STEPS` (the measured limit) are refused."""

    def __init__(self, columns: GrowingColumns, horizon: int, source: NoiseBuffer) -> None:
        super().__init__(min(horizon, FLOAT_MODEL_STEPS), source)  # no chunk beyond it
        self._columns = columns
        self._n = len(columns.decay)
        tail: tuple[int, ...] = () if self.dim is None else (self.dim,)
        self._tail = tail
        self._q: Array = np.zeros((2 * self._n + 3, *tail))
        self._pending: list[Any] = []
        self._done = 0  # steps computed (released or pending)
        shape = (-1, *(1,) * len(tail))
        self._decay = columns.decay.reshape(shape)
        self._decay_hi, self._decay_lo = (x.reshape(shape) for x in _split(columns.decay))

    def live_count(self) -> int:
        """Running values held (2n + 3) plus computed noise not yet released."""
        return 2 * self._n + 3 + len(self._pending)

    def _refuse(self, step: int) -> None:
        if step > FLOAT_MODEL_STEPS:
            raise ValueError(
                f"{HorizonFreeGrowingBLT.name}: noise at step {step} (dim {self.dim}) is "
                "refused: its floating-point error is measured within the float-safe "
                f"release's model (kappa = {MODEL_KAPPA}) only up to step "
                f"{FLOAT_MODEL_STEPS}, and a release beyond it would state too small a delta"
            )

    def next(self) -> Any:
        """The next step's noise; refused beyond :data:`FLOAT_MODEL_STEPS`."""
        self._refuse(self._t + 1)
        return super().next()

    def next_many(self, n: int) -> Array:
        """The next n steps' noise; refused beyond :data:`FLOAT_MODEL_STEPS`."""
        if isinstance(n, int):
            self._refuse(self._t + n)
        return super().next_many(n)

    def _segments(self, count: int) -> Iterator[tuple[int, Array, float, bool]]:
        """(steps, ω_b, ν_b, whether the segment ends block b) for the next ``count``
        computed steps, split at block starts."""
        cols = self._columns
        done, end = self._done, self._done + count
        while done < end:
            block = cols.block_of(done + 1)
            nxt = cols.starts[block + 1] if block + 1 < len(cols.starts) else end + 1
            steps = min(end, nxt - 1) - done
            done += steps
            yield steps, cols.scales[block], float(cols.normalizers[block]), done == nxt - 1

    def _compute(self, dest: Array) -> None:
        """Draw z for the next len(dest) steps and write their noise to dest."""
        if self.dim is None or self.dim == 1:
            self._compute_scalar(dest)
        else:
            self._compute_vector(dest)
        self._done += len(dest)

    def _compute_scalar(self, dest: Array) -> None:
        """One coordinate, step by step in Python floats (faster than numpy's per-call
        overhead on arrays of n values)."""
        z = self.noise.sample((len(dest), *self._tail))
        n, k, S = self._n, 0, _SPLIT
        flat = self._q.reshape(-1).tolist()
        hi, lo = flat[:n], flat[n : 2 * n]
        base, acc, comp = flat[2 * n], flat[2 * n + 1], flat[2 * n + 2]
        zs, out = z.reshape(-1).tolist(), []
        th = self._columns.decay.tolist()
        th_hi, th_lo = (x.tolist() for x in _split(self._columns.decay))
        for steps, w, nu, ends in self._segments(len(dest)):
            w_hi, w_lo = (x.tolist() for x in _split(w))
            coef = list(zip(th, th_hi, th_lo, w.tolist(), w_hi, w_lo, strict=True))
            for zk in zs[k : k + steps]:
                y = zk - (sum(hi) + sum(lo))
                s = acc + y  # TwoSum: acc + y = s + err exactly
                bb = s - acc
                comp += (acc - (s - bb)) + (y - bb)
                acc = s
                c = S * y
                yh = c - (c - y)
                yl = y - yh
                for i, (a, ah, al, b, bh, bl) in enumerate(coef):
                    h = hi[i]
                    c = S * h
                    hh = c - (c - h)
                    hl = h - hh
                    q = a * h  # θ·h = q + qe exactly (Dekker)
                    qe = ((ah * hh - q) + ah * hl + al * hh) + al * hl
                    p = b * y  # ω·y = p + pe exactly
                    pe = ((bh * yh - p) + bh * yl + bl * yh) + bl * yl
                    s = q + p  # TwoSum
                    bb = s - q
                    lo[i] = a * lo[i] + (((q - (s - bb)) + (p - bb)) + (qe + pe))
                    hi[i] = s
                out.append(base + nu * (acc + comp))
            k += steps
            if ends:
                base, acc, comp = out[-1], 0.0, 0.0
        self._q[...] = np.array([*hi, *lo, base, acc, comp]).reshape(self._q.shape)
        dest[...] = np.array(out).reshape(dest.shape)

    def _compute_vector(self, dest: Array) -> None:
        """d coordinates, step by step in numpy (the same operations as the scalar path)."""
        z = self.noise.sample((len(dest), *self._tail))
        n, k, S = self._n, 0, _SPLIT
        hi, lo = self._q[:n], self._q[n : 2 * n]  # views, (n, dim)
        base, acc, comp = self._q[2 * n], self._q[2 * n + 1], self._q[2 * n + 2]  # (dim,)
        a, ah, al = self._decay, self._decay_hi, self._decay_lo
        for steps, w, nu, ends in self._segments(len(dest)):
            b = w[:, None]
            bh, bl = (x[:, None] for x in _split(w))
            for _ in range(steps):
                y = z[k] - (hi.sum(axis=0) + lo.sum(axis=0))
                s = acc + y
                bb = s - acc
                comp += (acc - (s - bb)) + (y - bb)
                acc[...] = s
                c = S * y
                yh = c - (c - y)
                yl = y - yh
                c = S * hi
                hh = c - (c - hi)
                hl = hi - hh
                q = a * hi
                qe = ((ah * hh - q) + ah * hl + al * hh) + al * hl
                p = b * y
                pe = ((bh * yh - p) + bh * yl + bl * yh) + bl * yl
                s2 = q + p
                bb2 = s2 - q
                lo *= a
                lo += ((q - (s2 - bb2)) + (p - bb2)) + (qe + pe)
                hi[...] = s2
                dest[k] = base + nu * (acc + comp)
                k += 1
            if ends:
                base[...] = dest[k - 1]
                acc[...] = 0.0
                comp[...] = 0.0

    def state_dict(self) -> dict[str, Any]:
        """The step, the running values (2n + 3 rows) after the last computed step and
        the computed, unreleased noise (in release order)."""
        return self._state(q=self._q.copy(), pending=self._pending_state())

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process, checking every field."""
        st, t = self._read_state(state, ("q", "pending"))
        q = state_array(
            self._owner, "q", st["q"], rows=2 * self._n + 3, dim=self.dim, dtypes=(np.float64,)
        )
        self._pending = self._read_pending(st["pending"], t)
        self._t, self._q = t, q
        self._done = t + len(self._pending)


class HorizonFreeGrowingBLT(CountingMechanism):
    """A counter without a horizon in bounded state whose columns grow with the stream
    (module docstring): 2n + 3 running values per coordinate, one calibration for every
    prefix of an endless stream.

    Formal guarantee:
        Neighbouring relation: event level, single participation — two streams (of any
        length, finite or infinite) that differ at one step by at most Δ =
        ``step_sensitivity`` (ℓ₂ norm of the change for vector steps). The release
        S_t + (B z)_t equals (B(C x + z))_t with B = A·C⁻¹ (C lower triangular with a
        nonzero diagonal), post-processing of C x + z with ONE Gaussian z for the whole
        stream; a change at step s moves C x by Δ times column s of the infinite C,
        whose ℓ₂ norm is at most 1 for every s (certified, module docstring; enlarged by
        a relative 10⁻¹²). Gaussian z calibrated to Δ gives (ε, δ)-DP for the whole
        infinite release (analytic Gaussian mechanism, Balle & Wang 2018, Theorem 8, by
        default), so every prefix of any length has the guarantee; ``horizon`` only
        bounds the steps one instance releases. Gaussian noise only; no participation
        schema.

        Exact variance: Var_t = σ²·P_t[N, N] from the exact covariance recursion, the
        same for every horizon.

    References:
        * K. Dvijotham, H. B. McMahan, K. Pillutla, T. Steinke, A. Thakurta.
          "Efficient and near-optimal noise generation for streaming differential
          privacy". FOCS 2024. https://arxiv.org/abs/2404.16706
        * B. Jacobsen, K. Fawaz. "Private Continual Counting of Unbounded Streams".
          NeurIPS 2025. https://arxiv.org/abs/2506.15018
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530

    Args:
        horizon: the most steps this instance releases, 1 … 2^53 (nothing is built
            for it up front); its noise process refuses steps beyond
            :data:`FLOAT_MODEL_STEPS` (2^25, the float computation's measured limit).
        buffer_decay: θ (None: the shipped :data:`HORIZON_FREE_GROWING_PARAMETERS`,
            given together with ``output_scale`` and ``scale``).
        output_scale: ω (None: the shipped parameters).
        scale: K (None: the shipped parameters).
        head_factors: β_1 … β_k (k ≤ 16, each in (0, 1]), the factors on the output
            scales of the first k blocks (steps 1 … 15 one each, the 16th steps 16 …
            18; module docstring). None: the shipped
            :data:`HORIZON_FREE_GROWING_HEAD` with the shipped parameters, none (every
            β = 1) with parameters given, as before there were head factors (so a
            checkpoint saved then, whose config has no head factors, resumes with its
            own columns).
        budget: a :class:`~dpcount.privacy.Budget` with δ (Gaussian noise), or its
            fields as keywords.
        rng: None (OS entropy), or a Generator / int seed (research and tests only).

    Raises:
        ValueError: a horizon outside [1, 2^53], only some of ``buffer_decay``,
            ``output_scale`` and ``scale``, parameters outside the BLT domain, K ≤ 0,
            more than 16 head factors or one outside (0, 1], a noise kind other than
            Gaussian, or a participation schema (naming them).
        TypeError: ``head_factors`` not a sequence of reals.
    """

    name = "horizon-free-growing-blt"
    default_noise = NoiseKind.GAUSSIAN
    continuous_noise = frozenset({NoiseKind.GAUSSIAN})

    def __init__(
        self,
        horizon: int,
        *,
        buffer_decay: Any = None,
        output_scale: Any = None,
        scale: float | None = None,
        head_factors: Any = None,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        given = (buffer_decay is not None, output_scale is not None, scale is not None)
        if any(given) and not all(given):
            raise ValueError(
                "give buffer_decay, output_scale and scale together, or none (the shipped "
                "parameters)"
            )
        if head_factors is None:
            head_factors = () if all(given) else HORIZON_FREE_GROWING_HEAD
        if buffer_decay is None:
            buffer_decay, output_scale, scale = HORIZON_FREE_GROWING_PARAMETERS
        assert scale is not None
        self.columns = growing_columns(buffer_decay, output_scale, scale, head_factors)
        self.buffer_decay = self.columns.decay
        self.output_scale = np.array(output_scale, dtype=np.float64)
        self.scale = float(scale)
        self.head_factors = check_head(head_factors)
        super().__init__(horizon, budget=budget, rng=rng, **fields)

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: n double-double buffers and the compensated running sum, (2n + 3)·d
        floats, the vector step's temporaries (n·d floats each) and the step's draw,
        independent of the horizon (n shipped unless ``buffers``);
        structure: the per-block scales (105 blocks)."""
        T = check_integer("horizon", horizon, ge=1, le=MAX_HORIZON)
        buffers = options.get("buffers")
        n = len(HORIZON_FREE_GROWING_PARAMETERS[0]) if buffers is None else int(buffers)
        d = 1 if dim is None else dim
        chunk = min(4096, T) if dim is None else 0  # scalar: a computed chunk as Python floats
        temps = 0 if dim is None else 8 * d * n * _VECTOR_TEMPORARIES
        stream = 32 * 1024 + 8 * d * (2 * n + 3) + temps + chunk * (32 + 8 * (n + 4))
        stream += step_bytes(dim)
        return MemoryEstimate(structure=8 * (n + 1) * len(block_starts()), stream=stream)

    def _memory_options(self) -> dict[str, Any]:
        return {"buffers": len(self.buffer_decay)}

    def _accept_budget(self, budget: Budget) -> Budget:
        owner = type(self).__name__
        return single_participation(budget.gaussian_only(owner), owner)

    def _unit_sensitivities(self) -> tuple[float, float]:
        # ℓ₂: every column's norm is at most 1 (module docstring); ℓ₁ recorded only
        # (Gaussian noise): a column's Σ|C[t, s]| ≤ (1 + Σ_i ω_i(s)/(1 − θ_i))/ν(s)
        cols = self.columns
        l1 = max(
            (1.0 + float(np.sum(w / (1.0 - cols.decay)))) / float(nu)
            for w, nu in zip(cols.scales, cols.normalizers, strict=True)
        )
        return l1 * (1.0 + SENSITIVITY_MARGIN), 1.0 + SENSITIVITY_MARGIN

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        raise ValueError("HorizonFreeGrowingBLT takes no participation schema")  # refused

    def noise_process(self, source: NoiseSource, width: int | None = None) -> GrowingNoiseProcess:
        return GrowingNoiseProcess(self.columns, self.horizon, NoiseBuffer(source, width))

    def noise_coefficients(self) -> Array:
        """P_t[N, N] for t = 1..T (T ≤ 2^22: the whole table is built)."""
        T = check_integer("horizon", self.horizon, le=_TABLE_LIMIT)
        return np.fromiter(_variances(self.columns).run(1, T), dtype=np.float64, count=T)

    def _noise_coefficient_at(self, t: int) -> float:
        return next(_variances(self.columns).run(t, t))

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        return _variances(self.columns).run(start, self.horizon)

    def dense_factorization(self) -> tuple[Array, Array]:
        """(B, C) as dense T×T matrices (T ≤ 4096): C column by column, B = A·C⁻¹ by a
        triangular solve."""
        from scipy.linalg import solve_triangular

        T = check_integer("horizon", self.horizon, le=4096)
        cols = self.columns
        powers = cols.decay[None, :] ** np.arange(max(T - 1, 1))[:, None]
        C = np.zeros((T, T))
        for j in range(T):
            b = cols.block_of(j + 1)
            nu = float(cols.normalizers[b])
            C[j, j] = 1.0 / nu
            C[j + 1 :, j] = powers[: T - j - 1] @ cols.scales[b] / nu
        A = np.tril(np.ones((T, T)))
        B = solve_triangular(C.T, A.T, lower=False).T
        return B, C

    def _repr_fields(self) -> dict[str, object]:
        return {"buffers": len(self.buffer_decay)}

    def _config_kwargs(self) -> dict[str, Any]:
        return {
            **super()._config_kwargs(),
            **blt_config(self.buffer_decay, self.output_scale),
            "scale": self.scale,
            "head_factors": list(self.head_factors),
        }
