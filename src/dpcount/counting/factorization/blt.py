"""Buffered linear Toeplitz (BLT) factorizations of the counting matrix.

Dvijotham, McMahan, Pillutla, Steinke, Thakurta, "Efficient and near-optimal
noise generation for streaming differential privacy" (FOCS 2024,
arXiv:2404.16706), and McMahan, Xu, Zhang, "A hassle-free algorithm for private
learning in practice: don't use tree aggregation, use BLTs" (arXiv:2408.08868).

Which matrix is what. The counting matrix A (all-ones, lower-triangular) is
factored as A = B·C:

* the **encoder** C (the "noise-correlation" side: the mechanism privately
  releases C x + z) is the BLT. It is lower-triangular Toeplitz with
  generating function c(x) = 1 + Σ_i ω_i x/(1 − θ_i x), i.e.

      c_0 = 1,   c_k = Σ_i ω_i θ_i^{k−1}  (k ≥ 1),

  with ``buffer_decay`` θ_i ∈ (0, 1) (distinct) and ``output_scale`` ω_i > 0;
* its inverse C⁻¹ is again a BLT (generating function 1/c(x)):
  C⁻¹ = BLT(λ, ω′) with λ the eigenvalues of diag(θ) − 1ωᵀ, the roots of the
  secular equation Σ_j ω_j/(θ_j − λ) = 1, and ω′_i = −1/Σ_j ω_j/(θ_j − λ_i)²
  (:func:`blt_inverse`). For ω > 0 the roots are real, distinct and interlace
  the θ's: λ_1 < θ_1 < λ_2 < θ_2 < … < λ_n < θ_n;
* the **decoder** B = A·C⁻¹ is lower-triangular Toeplitz with

      b_k = a + Σ_i β_i λ_i^k,  a = 1/c(1) = 1/(1 + Σ_j ω_j/(1 − θ_j)),
      β_i = −ω′_i/(1 − λ_i) > 0,  a + Σ_i β_i = b_0 = 1.

The release at step t is S_t + (B z)_t with z i.i.d. N(0, σ²): one z for the
whole stream. This is B(C x + z) = A x + B z, post-processing of C x + z.

Privacy (event level, step sensitivity Δ, single participation): a change of
one step by Δ changes C x by Δ times a column of C; for a lower-triangular
Toeplitz matrix the first column is the longest, so the ℓ₂ sensitivity is
Δ·√(Σ_{k<T} c_k²) with the closed form
Σ_{k<T} c_k² = 1 + Σ_{i,j} ω_i ω_j (1 − (θ_iθ_j)^{T−1})/(1 − θ_iθ_j).
σ is the Gaussian mechanism's for that sensitivity (analytic Gaussian, Balle &
Wang 2018, Thm 8, unless ``calibration`` says otherwise), after enlarging the
norm by a relative 1e-12 so rounding can only add noise. Only Gaussian noise is
offered.

Exact error: Var_t = σ²·V_t, V_t = Σ_{k<t} b_k² (increasing in t, so the largest
variance is at T), mean over t ≤ T = σ²·(1/T)·Σ_{k<T} (T − k) b_k². Closed
forms expand b_k² into geometric series whose terms are all positive (a, β > 0,
|λ| < 1), so they cannot come out negative; sums near ratio 1 are evaluated
through expm1/log1p and a series for e^{−y} − 1 + y, never as a difference of
two large numbers. Two conditions make these forms valid and are refused
otherwise (ValueError naming the parameter): ω_i > 0 with distinct θ_i ∈ (0, 1)
(real, interlacing inverse decays), and Σ_i ω_i/(1 + θ_i) < 1 (then λ_1 > −1, so
C⁻¹ is stable; otherwise its coefficients grow like |λ_1|^k and so does the
error), with the computed λ_1 > −1 + 10⁻⁶ (so that 1 − λ_1² keeps ten digits).

Streaming: the noise needs n + 1 running values (×d for vector steps): q_i(t) =
λ_i q_i(t−1) + z_t and the running sum of z, with (Bz)_t = a·Σ_{s≤t} z_s +
Σ_i β_i q_i(t). A vector stream therefore holds (n + 1)·d floats between steps.
Blocks (``next_many``) are computed in chunks: within a chunk a small Toeplitz
matrix product, across chunks a first-order recursion per buffer
(:func:`scipy.signal.lfilter`), so there is no Python loop per step.
"""

from __future__ import annotations

import math
import sys
from abc import abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcount._scipy import brentq, lfilter, linear_filter
from dpcount._state import state_array
from dpcount._validate import check_choice, check_integer
from dpcount.counting._chunked import ChunkedNoiseProcess
from dpcount.counting.base import (
    MAX_HORIZON,
    CountingMechanism,
    MemoryEstimate,
    step_bytes,
)
from dpcount.counting.factorization._losses import Losses
from dpcount.counting.factorization._precision import SCALED_BLT_LONG_HORIZON
from dpcount.counting.factorization._types import Array
from dpcount.counting.factorization.sqrt import SENSITIVITY_MARGIN
from dpcount.counting.participation import Sensitivity, toeplitz_sensitivities
from dpcount.data import load_table
from dpcount.privacy.budget import Budget, BudgetFields, NoiseKind, Participation
from dpcount.privacy.float_safe import MODEL_KAPPA
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "BLT",
    "BLTInverse",
    "BLTNoiseProcess",
    "blt_config",
    "blt_inverse",
    "blt_losses",
    "check_blt_parameters",
    "shipped_blt_parameters",
]

#: steps per chunk of the within-chunk Toeplitz product in ``next_many``, scalar and
#: vector steps alike. Vector batches took chunks of 8 until 2026-12-08: their filters
#: across the chunks (two per decayed buffer, compensated) were 0.86× of drawing the
#: normals at T = 10^7, d = 4, release 2.9× in all; with chunks of 32 a quarter as many
#: filter steps for 4× the within-chunk product (``bench_scaled_batch.py --stages
#: blt:10000000:4``: see the closing figures in :meth:`BLTNoiseProcess._vector_chunks`)
_BLOCK = 32
#: values of z per block of a vector batch (whole chunks; at least two; each block's
#: arrays are reused, see :meth:`BLTNoiseProcess._vector_chunks`). Release ÷ drawing the
#: normals, process CPU, loaded 2-core machine, 2^12 .. 2^18 values a block: 5.2, 4.2,
#: 3.7, 3.6, 3.6, 4.2, 6.2× at T = 2^16, d = 4; 5.5, 4.2, 3.6, 3.2, 3.2, 3.0, 3.0× at
#: T = 2^20, d = 16 (smaller blocks: the filters' per-call cost; larger: page faults;
#: measured with chunks of 8 steps).
#: Fixed: the product calls' rows, and so the released floats, follow the blocks
_VECTOR_BLOCK_VALUES = 1 << 16
#: most columns per block of a fused vector step; a step of d columns takes
#: ⌈d / this⌉ blocks of equal width (:func:`_step_width`). Each block costs ~18 µs of
#: Python and ufunc-call overhead with the stream's snap (8 buffers), and at d = 10^5
#: the state (7 MB) lives in the L3 cache whatever the width, so fewer blocks win:
#: ``bench_before_after.py --quick --only blt_step --rounds 8`` against 0.4, A÷B of
#: the least CPU of ``stream.update`` / the noise step (2026-12-07, load 1.9-2.0 on
#: the 2 shared cores): 20000 columns (5 blocks) 1.010 / 0.983, 32768 (4) 1.010-1.016 /
#: 0.974-0.980, 65536 (2) 0.998, 1.003 / 0.968, 0.961, 131072 (1) 1.001, 0.993 / 0.955,
#: 0.952 (16384, 7 blocks with a short last one: 1.03-1.05 / ~1.00). Earlier, loaded:
#: 16384 2.13× drawing d normals, 8192: 2.27×, 4096: 2.41×, the unfused step 2.35×
_STEP_COLUMNS = 65536
#: a batch of at least this many values computes its noise in the array of its draws
#: (:meth:`BLTNoiseProcess._compute_new`: one fresh array's page faults saved, at T =
#: 10^6 0.87-0.91× the release's CPU, ``bench_before_after.py``); below it two arrays
#: (the scratch copy of each block of rows·Bᵀ cost 1-3 % at T = 2^16, where the heap
#: recycles the arrays without faults)
_IN_DRAWS_VALUES = 1 << 18
#: the inverse's smallest decay must exceed −1 by this much (refused otherwise)
_MIN_ONE_PLUS_DECAY = 1e-6
#: smallest decay and scale accepted: far above the subnormals, so that the root
#: finder's offsets (scale × 1e-100) and squared distances stay normal floats
_MIN_PARAMETER = 1e-100
#: smallest relative gap between adjacent decays (the shipped tables keep >= 5e-11)
_MIN_DECAY_GAP = 1e-13


def _step_width(d: int) -> int:
    """Columns per block of a fused vector step of ``d`` columns: ⌈d / b⌉ for the fewest
    blocks b of at most :data:`_STEP_COLUMNS` (equal widths: no short last block that
    costs a block's overhead for a few columns)."""
    blocks = -(-d // _STEP_COLUMNS)
    return max(1, -(-d // max(1, blocks)))


def check_blt_parameters(buffer_decay: Any, output_scale: Any) -> tuple[Array, Array]:
    """Validate BLT parameters; returns (θ, ω) sorted by increasing θ.

    Raises:
        ValueError: naming ``buffer_decay`` or ``output_scale``: different
            lengths, no buffers, a decay outside (0, 1) or repeated, a scale ≤ 0
            or not finite, or Σ ω_i/(1 + θ_i) ≥ 1 (the inverse would be unstable).
    """
    theta = np.array(buffer_decay, dtype=np.float64, ndmin=1)
    omega = np.array(output_scale, dtype=np.float64, ndmin=1)
    if theta.ndim != 1 or len(theta) == 0:
        raise ValueError(f"buffer_decay must be a non-empty 1-D sequence, got shape {theta.shape}")
    if omega.shape != theta.shape:
        raise ValueError(
            f"output_scale must have one entry per buffer ({len(theta)}), got shape {omega.shape}"
        )
    if not np.all(np.isfinite(theta)) or not np.all((theta >= _MIN_PARAMETER) & (theta < 1)):
        raise ValueError(
            f"buffer_decay must lie in (0, 1), at least {_MIN_PARAMETER:g} (not subnormal), "
            f"got {theta.tolist()}"
        )
    if not np.all(np.isfinite(omega)) or not np.all(omega >= _MIN_PARAMETER):
        raise ValueError(
            f"output_scale must be positive and finite, at least {_MIN_PARAMETER:g} (a "
            f"smaller scale adds nothing and underflows the inverse's root finder), got "
            f"{omega.tolist()}"
        )
    order = np.argsort(theta, kind="stable")
    theta, omega = theta[order], omega[order]
    if np.any(np.diff(theta) <= _MIN_DECAY_GAP * theta[1:]):
        raise ValueError(
            f"buffer_decay must be distinct, adjacent values apart by more than "
            f"{_MIN_DECAY_GAP:g} relative (the inverse's roots lie between them), "
            f"got {theta.tolist()}"
        )
    stability = math.fsum(float(w) / (1.0 + float(t)) for t, w in zip(theta, omega, strict=True))
    if not stability < 1.0:
        raise ValueError(
            "output_scale too large: sum(output_scale / (1 + buffer_decay)) must be < 1 "
            f"(got {stability:.6g}); otherwise the inverse BLT has a decay <= -1 and its "
            "noise grows geometrically"
        )
    return theta, omega


def _reference_count(a: Array) -> int:
    """:func:`sys.getrefcount` of ``a`` as a caller's local sees it (−1 where the
    interpreter keeps no reference count)."""
    count = getattr(sys, "getrefcount", None)
    return -1 if count is None else int(count(a))


def _local_references() -> int:
    """:func:`_reference_count` of an array held by one local variable only (3 on CPython
    up to 3.13: the local, the parameter and the call's argument; less where the
    interpreter borrows references), measured once, so an interpreter's counting
    convention cannot make an array that something else holds look unshared."""
    probe = np.empty(0)
    return _reference_count(probe)


#: :func:`_local_references` on this interpreter (≤ 0: nothing is ever "sole")
_LOCAL_REFERENCES = _local_references()


@dataclass(frozen=True)
class BLTInverse:
    """C⁻¹ = BLT(decay, scale) and the decoder B = A·C⁻¹, b_k = a + Σ_i β_i decay_i^k.

    ``one_minus_decay`` holds 1 − λ_i computed without cancellation (the closed
    forms need it accurately for decays near 1).
    """

    decay: Array
    scale: Array
    one_minus_decay: Array
    a: float
    beta: Array


def _root(theta: list[float], omega: list[float], i: int) -> tuple[float, float, float]:
    """Root λ_i of Σ_j ω_j/(θ_j − λ) = 1 in its interlacing interval, as (λ, 1 − λ, g′(λ)).

    Solved for τ = λ − θ_o relative to the nearer pole θ_o, so that θ_j − λ =
    (θ_j − θ_o) − τ keeps full relative precision near the pole (the device of
    LAPACK's dlaed4).
    """
    n = len(theta)
    total = math.fsum(omega)

    def g(lam: float) -> float:
        return math.fsum(w / (t - lam) for t, w in zip(theta, omega, strict=True))

    if i == 0:
        o, lo, hi = 0, -total, -omega[0] * 1e-100  # g(θ_1 − Σω) ≤ 1, g(θ_1−) = +∞
    else:
        mid = 0.5 * (theta[i - 1] + theta[i])
        if g(mid) >= 1.0:  # root left of mid: nearer the left pole
            o, lo, hi = i - 1, omega[i - 1] * 1e-100, mid - theta[i - 1]
            hi = max(hi, lo)
        else:
            o, lo, hi = i, mid - theta[i], -omega[i] * 1e-100
    delta = [t - theta[o] for t in theta]

    def f(tau: float) -> float:
        return math.fsum(w / (dj - tau) for dj, w in zip(delta, omega, strict=True)) - 1.0

    flo, fhi = f(lo), f(hi)
    if flo == 0.0:
        tau = lo
    elif fhi == 0.0:
        tau = hi
    else:
        if not flo < 0.0 < fhi:  # pragma: no cover - guarded by the interlacing argument
            raise ArithmeticError(f"BLT inverse: root {i} not bracketed ({flo}, {fhi}) of {n}")
        tau = float(brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=400))
    lam = theta[o] + tau
    one_minus = (1.0 - theta[o]) - tau
    gprime = math.fsum(w / (dj - tau) ** 2 for dj, w in zip(delta, omega, strict=True))
    return lam, one_minus, gprime


def blt_inverse(buffer_decay: Any, output_scale: Any) -> BLTInverse:
    """The inverse BLT C⁻¹ and the decoder coefficients of C = BLT(θ, ω).

    Dvijotham et al. 2024 (arXiv:2404.16706) show that the inverse of a BLT is a
    BLT; here it is computed from the state-space form of C (state matrix
    diag(θ), input 1, output ω): C⁻¹ has state matrix diag(θ) − 1ωᵀ, whose
    eigenvalues solve Σ_j ω_j/(θ_j − λ) = 1, with right eigenvectors
    (diag(θ) − λ)⁻¹1 and left eigenvectors (diag(θ) − λ)⁻¹ω, which give
    ω′_i = −1/Σ_j ω_j/(θ_j − λ_i)².

    Raises:
        ValueError: parameters outside the domain (:func:`check_blt_parameters`).
    """
    theta_a, omega_a = check_blt_parameters(buffer_decay, output_scale)
    theta, omega = theta_a.tolist(), omega_a.tolist()
    try:
        roots = [_root(theta, omega, i) for i in range(len(theta))]
    except ArithmeticError as err:  # a root finder's failure is the parameters' problem
        raise ValueError(
            "buffer_decay and output_scale are numerically degenerate: the inverse BLT's "
            f"roots cannot be computed ({err})"
        ) from None
    lam = np.array([r[0] for r in roots])
    one_minus = np.array([r[1] for r in roots])
    gprime = np.array([r[2] for r in roots])
    if lam[0] <= -1.0 + _MIN_ONE_PLUS_DECAY:
        raise ValueError(
            "output_scale too large: the inverse BLT's decay lambda_1 = "
            f"{lam[0]:.17g} is within {_MIN_ONE_PLUS_DECAY:g} of -1 (its noise would barely "
            "decay and the closed forms lose accuracy); reduce sum(output_scale / (1 + "
            "buffer_decay))"
        )
    a = 1.0 / (1.0 + math.fsum(w / (1.0 - t) for t, w in zip(theta, omega, strict=True)))
    return BLTInverse(
        decay=lam,
        scale=-1.0 / gprime,
        one_minus_decay=one_minus,
        a=a,
        beta=1.0 / (gprime * one_minus),
    )


# -- geometric sums without cancellation ------------------------------------------------


def _eps(y: Array) -> Array:
    """e^{−y} − 1 + y ≥ 0 for y ≥ 0, accurate to a few ulps (series below 0.5)."""
    y = np.asarray(y, dtype=np.float64)
    direct = np.expm1(-y) + y
    small = y < 0.5
    if np.any(small):
        ys = np.where(small, y, 0.0)
        term = ys * ys / 2.0
        acc = term.copy()
        for m in range(3, 22):
            term = term * (-ys) / m
            acc += term
        direct = np.where(small, acc, direct)
    return direct


@dataclass(frozen=True)
class _Ratios:
    """Ratios r with |r| < 1, with u = −ln r (r > 0; NaN otherwise) and d = 1 − r."""

    r: Array
    u: Array
    d: Array


def _ratios(r: Array, d: Array) -> _Ratios:
    """From r and an accurate d = 1 − r."""
    pos = r > 0
    near_one = r >= 0.5  # log1p(−d) keeps the digits of d = 1 − r; log(r) otherwise
    u = np.where(
        near_one,
        -np.log1p(-np.where(near_one, d, 0.0)),
        -np.log(np.where(pos & ~near_one, r, 1.0)),
    )
    return _Ratios(r=r, u=np.where(pos, u, np.nan), d=d)


def _products(x: _Ratios) -> _Ratios:
    """All pairwise products r_i·r_j (flattened), with their u and d."""
    r = np.multiply.outer(x.r, x.r).ravel()
    u = np.add.outer(x.u, x.u).ravel()  # NaN when either factor is ≤ 0
    both_neg = np.multiply.outer(x.r < 0, x.r < 0).ravel()
    if np.any(both_neg):
        u = np.where(both_neg, -np.log(np.where(both_neg, r, 1.0)), u)
    pos = r > 0
    d = np.where(pos, -np.expm1(-np.where(pos, u, 0.0)), 1.0 - r)
    return _Ratios(r=r, u=u, d=d)


def _geo(x: _Ratios, K: int) -> Array:
    """Σ_{k<K} r^k (positive for |r| < 1, K ≥ 1)."""
    if K == 0:
        return np.zeros_like(x.r)
    pos = x.r > 0
    up = np.where(pos, x.u, 1.0)
    via_u = np.expm1(-up * K) / np.expm1(-up)
    direct = (1.0 - np.power(np.where(pos, 0.0, x.r), K)) / x.d
    return np.where(pos, via_u, direct)


def _wgeo(x: _Ratios, T: int) -> Array:
    """Σ_{k<T} (T − k) r^k = (T(1−r) − r(1 − r^T))/(1 − r)².

    For 0 < r with u = −ln r ≤ 1 the numerator is evaluated as
    u·x − (x + T)·ε(u) + r·ε(x), x = uT, ε(y) = e^{−y} − 1 + y, which has no
    catastrophic cancellation; otherwise directly (then 1 − r ≥ 0.63).
    """
    small = (x.r > 0) & (x.u <= 1.0)
    us = np.where(small, x.u, 0.5)
    xs = us * T
    num_small = us * xs - (xs + T) * _eps(us) + x.r * _eps(xs)
    rT = np.power(np.where(small, 0.0, x.r), T)
    num_direct = T * x.d - x.r * (1.0 - rT)
    return np.where(small, num_small, num_direct) / (x.d * x.d)


@dataclass(frozen=True)
class BLTLosses(Losses):
    """Closed-form error terms of a BLT at horizon T (in units of one sample's variance).

    Attributes:
        sensitivity_squared: Σ_{k<T} c_k², the squared largest column norm of C.
        mean_variance: (1/T)·Σ_{t≤T} V_t with V_t = Σ_{k<t} b_k².
        max_variance: V_T (V_t increases with t).
    """

    sensitivity_squared: float
    mean_variance: float
    max_variance: float


def _theta_ratios(theta: Array) -> _Ratios:
    return _ratios(theta, 1.0 - theta)


def blt_losses(
    buffer_decay: Any, output_scale: Any, horizon: int, inverse: BLTInverse | None = None
) -> BLTLosses:
    """Closed forms, O(n²) for n buffers: sensitivity², mean and largest variance.

    Every term is a positive coefficient times a positive geometric sum, so the
    results are positive; see the module docstring for the formulas.
    """
    T = check_integer("horizon", horizon, ge=1)
    theta, omega = check_blt_parameters(buffer_decay, output_scale)
    inv = blt_inverse(theta, omega) if inverse is None else inverse
    th = _products(_theta_ratios(theta))
    ww = np.multiply.outer(omega, omega).ravel()
    sens2 = 1.0 + float(np.sum(ww * _geo(th, T - 1)))
    lam = _ratios(inv.decay, inv.one_minus_decay)
    ll = _products(lam)
    bb = np.multiply.outer(inv.beta, inv.beta).ravel()
    a = inv.a
    v_max = (
        a * a * T + 2 * a * float(np.sum(inv.beta * _geo(lam, T))) + float(np.sum(bb * _geo(ll, T)))
    )
    total = (
        a * a * (T * (T + 1) / 2.0)
        + 2 * a * float(np.sum(inv.beta * _wgeo(lam, T)))
        + float(np.sum(bb * _wgeo(ll, T)))
    )
    return BLTLosses(sensitivity_squared=sens2, mean_variance=total / T, max_variance=v_max)


def _powers(x: _Ratios, k: NDArray[np.int64]) -> Array:
    """r_i^k for every k (rows) and i (columns)."""
    pos = x.r > 0
    out: Array = np.exp(-np.outer(k, np.where(pos, x.u, 0.0)))
    if not np.all(pos):
        out[:, ~pos] = np.power(x.r[~pos][None, :], k[:, None].astype(np.float64))
    return out


def decoder_coefficients(inv: BLTInverse, count: int, start: int = 0) -> Array:
    """b_k = a + Σ_i β_i λ_i^k for k = start, …, start + count − 1 (O(count·n))."""
    k = np.arange(start, start + count, dtype=np.int64)
    return inv.a + _long_times(_powers(_ratios(inv.decay, inv.one_minus_decay), k), inv.beta)


def encoder_coefficients(theta: Array, omega: Array, count: int) -> Array:
    """c_0 = 1, c_k = Σ_i ω_i θ_i^{k−1} for k < count."""
    out = np.ones(count)
    if count > 1:
        powers = _powers(_theta_ratios(theta), np.arange(count - 1, dtype=np.int64))
        out[1:] = _long_times(powers, omega)
    return out


# -- the noise process -----------------------------------------------------------------

#: decays r with 1 − r below this are applied as r_hi + r_lo (:func:`decay_residuals`);
#: above it the rounded fl(r) alone (its bias, u·r per step, is amplified by at most
#: 1/(1 − r) ≤ 2^10 there)
_COMPENSATE_BELOW = 2.0**-10
#: horizons up to this use fl(r) alone and a plain running sum, as before (outputs
#: unchanged to the bit; measured within κ/4 there); longer ones the compensated forms
COMPENSATE_ABOVE = 1 << 16


#: The largest horizon at which each BLT-family noise path is measured within the float
#: model (F) of :mod:`dpcount.privacy.float_safe` with a ratio ≤ κ/4 = 64
#: (benchmarks/float_model_long.py: the largest ratio of the noise's error, against a
#: long-double computation with the accurate decays, to u·σ_t·(1 + Z*/σ₁); the maximum
#: over seeds 1, 2, 3, vector dims 2, 3, 4; κ = 256; docs/safe-noise.md). "block":
#: scalar steps and ``next_many`` (chunked products): BLT ≤ 20 up to 2^16 and ≤ 53 up
#: to 2^24 ≥ 10^7 (48 at 2^23, 45 at 2^24; 99 at 2^25 on vector blocks, seed 1; 87 at
#: 2^24 without the chunk decays' residuals);
#: column-normalized / row-scaled BLT ≤ 46 / ≤ 61 up to 2^16 / 2^17 in their plain
#: forms (max-objective parameters ≤ 57), beyond them their long forms ≤ 3.9 up to 2^22
#: and ≤ 6.0 at 2^24, both objectives (without them 150 / 115 at 2^20); horizon-free
#: BLT (compensated decays) ≤ 49 up to 2^22, scalar ≤ 41 at 2^24 and 58 at 2^26 (seed 1;
#: 290 at 2^17 without the compensation), its vector blocks ("vector-block") only to
#: 2^22 (67 at 2^24, seed 1). "step": one vector step (``next()`` with dim > 1, a
#: per-step recursion in fl(λ)): BLT ≤ 18 up to 2^16, 365 at 2^17; column-normalized /
#: row-scaled BLT ≤ 39 up to 2^12 (61 with the max-objective parameters, dim 3), 98 and
#: 91 at 2^13; the horizon-free BLT's (a block of one step, compensated) ≤ 24 up to 2^17
#: (the fused fl(λ) step: 126 at 2^13). Longer horizons are refused
#: (:func:`check_float_model`):
#: their float release could state too small a δ. The horizon-free BLT counts steps, not
#: its horizon (:data:`FLOAT_MODEL_BY_STEP`).
FLOAT_MODEL_HORIZONS: dict[str, dict[str, int]] = {
    "blt": {"block": 1 << 24, "step": 1 << 16},
    # the scaled presets: their long forms beyond 2^16 / 2^17 (:mod:`._precision`)
    "normalized-blt": {"block": SCALED_BLT_LONG_HORIZON, "step": 1 << 12},
    "row-scaled-blt": {"block": SCALED_BLT_LONG_HORIZON, "step": 1 << 12},
    "horizon-free-blt": {"block": 1 << 26, "vector-block": 1 << 22, "step": 1 << 17},
}
#: the mechanisms whose paths are refused by the step reached rather than the horizon: a
#: horizon-free BLT's horizon only bounds one instance (the unbounded counter's spans
#: 2^26 − 1 steps) and its noise at step t does not depend on it
FLOAT_MODEL_BY_STEP = frozenset({"horizon-free-blt"})


def check_float_model(mechanism: str | None, path: str, horizon: int, dim: int | None) -> None:
    """Refuse a noise path beyond :data:`FLOAT_MODEL_HORIZONS` (``path``: "block" or
    "step"; blocks with ``dim`` are checked against "vector-block" where it is given);
    ``mechanism`` None (a BLT with other parameters, not measured here) passes. For
    :data:`FLOAT_MODEL_BY_STEP` ``horizon`` is the step reached.

    Raises:
        ValueError: naming the mechanism, the path, the horizon (step) and dim.
    """
    if mechanism is None:
        return
    limits = FLOAT_MODEL_HORIZONS[mechanism]
    if path == "block" and dim is not None and "vector-block" in limits:
        path = "vector-block"  # vector blocks measured to a shorter horizon than scalar ones
    limit = limits[path]
    if horizon > limit:
        what = "vector steps (next() with dim > 1)" if path == "step" else "noise"
        where, fix = (
            ("step", f"release at most {limit} steps")
            if mechanism in FLOAT_MODEL_BY_STEP
            else ("horizon", f"use a horizon <= {limit}")
        )
        raise ValueError(
            f"{mechanism}: {what} at {where} {horizon} (dim {dim}) is refused: its "
            f"floating-point error is measured within the float-safe release's model "
            f"(kappa = {MODEL_KAPPA}) only up to {where} {limit}, and a release "
            f"beyond it would state too small a delta; {fix}"
            f"{' or next_many' if path == 'step' else ''}"
        )


def decay_residuals(r: Array, d: Array) -> Array:
    """r_lo = (1 − r) − d: the exact decay 1 − d is r + r_lo up to u·|r_lo|.

    ``r`` is the decay as a float (fl(1 − d) or the root finder's), ``d`` its accurate
    complement. A recursion in fl(r) alone multiplies by r(1 + δ), |δ| ≤ u, every step,
    a bias whose effect on r^k grows like k·u, up to u/(1 − r) over the buffer's
    memory: at T = 2^20 that is thousands of u·σ_t (measured, benchmarks/
    float_model_long.py). Applying r_hi·q + r_lo·q removes the bias to O(u²) per step
    (1 − r is exact for r ≥ 1/2, Sterbenz). Zero where 1 − r ≥ :data:`_COMPENSATE_BELOW`
    or r < 1/2 (there fl(r) alone is used, as before).
    """
    r = np.asarray(r, dtype=np.float64)
    d = np.asarray(d, dtype=np.float64)
    use = (r >= 0.5) & (d < _COMPENSATE_BELOW)
    out: Array = np.where(use, (1.0 - r) - d, 0.0)
    return out


def power_residuals(x: _Ratios, power: Array, c: int) -> Array:
    """:func:`decay_residuals` of the chunk decays ``power`` = fl(r^c), with the accurate
    1 − r^c = −expm1(−c·u) (r > 0)."""
    pos = x.r > 0
    comp = -np.expm1(-c * np.where(pos, x.u, 0.0))
    return np.where(pos, decay_residuals(power, comp), 0.0)


def compensated_filter(x: Array, r: float, r_lo: float, start: Any) -> Array:
    """s_k = (r + r_lo)·s_{k−1} + x_k along axis 0 from s_{−1} = ``start``: one lfilter
    in fl(r) and, when r_lo ≠ 0, a second for the error e_k = r·e_{k−1} + r_lo·s_{k−1}
    (e_{−1} = 0; s_{k−1} taken from the first pass, an O(u²) difference)."""
    y: Array = lfilter([1.0], [1.0, -r], x, axis=0, zi=(r * np.asarray(start))[None])[0]
    if r_lo != 0.0 and len(x):
        error_in = np.empty_like(y)  # r_lo·s_{k−1}: r_lo·start, then r_lo·y[:-1]
        error_in[0] = r_lo * np.asarray(start, dtype=np.float64)
        np.multiply(y[:-1], r_lo, out=error_in[1:])
        y += lfilter([1.0], [1.0, -r], error_in, axis=0)
    return y


def _product_rows(k: int, n: int) -> int:
    """Rows per block of :func:`_rows_times`' products with a k × n right factor."""
    return max(1, (1 << 18) // (k * n))


def _rows_times(a: Array, b: Array, out: Array | None = None, add: bool = False) -> Array:
    """a @ b (into ``out``, or added to it) for a tall a and a small b, in row blocks
    of ≤ 2^18 multiply-adds.

    OpenBLAS runs a product that small in one thread; one large call of these skinny
    products is multithreaded and, on a machine busy with other work, tens of times
    slower (measured: 52 ms instead of 2 ms for 2^21 × 16 × 16).
    """
    k, n = b.shape
    b = np.ascontiguousarray(b)
    rows = _product_rows(k, n)
    if out is None:
        out = np.empty((a.shape[0], n))
    for start in range(0, a.shape[0], rows):
        block = slice(start, start + rows)
        if add:
            out[block] += a[block] @ b
        else:
            np.matmul(a[block], b, out=out[block])
    return out


#: the blocks of :func:`_long_times` are a multiple of this many rows (columns) long
_ALIGNED = 64
#: matrix products of at most this many multiply-adds take OpenBLAS's small-matrix
#: kernels in one thread (measured here: 9 × 36 × N at N = 3083 and 3091)
_SMALL_PRODUCT = 10**6


def _long_times(a: Array, b: Array) -> Array:
    """a @ b for a tall ``a`` (N × k) and a vector ``b`` (k,), or a short ``a`` (k,) or
    (r × k) and a wide ``b`` (k × N), in blocks of ≤ 2^18 multiply-adds along N.

    One call over all N is a product OpenBLAS runs in two threads above about 2^19
    multiply-adds (vector products; matrix products above 10^6), and its worker thread
    then spins for about 0.1 s (measured here: ~100 ms of the second core after the
    variances of a scaled BLT at 2^17, 60 ms after the BLT's at 2^17, 200 ms at 2^20:
    their first release), which the releases after it pay in process CPU time, or in
    wall-clock on a busy machine. The blocks are multiples of
    :data:`_ALIGNED` long and a matrix product's last block is padded with zero columns
    to that length, so every output is computed by the kernel code of a full tile in N
    and the floats do not depend on the thread count. They are one single-threaded
    call's floats, except where a kernel rounds a call's edge tiles its own way
    (OpenBLAS 0.3.31's Haswell kernel: the last row of a call's last < 64 columns),
    there within the product's rounding bound. Tested: the same floats at 1 and 2 BLAS
    threads, and against one call.
    """
    if b.ndim == 1:  # rows of a tall a: a vector product
        step = max(_ALIGNED, (1 << 18) // (a.shape[1] * _ALIGNED) * _ALIGNED)
        out: Array = np.empty(a.shape[0])
        for start in range(0, a.shape[0], step):
            out[start : start + step] = a[start : start + step] @ b
        return out
    N = b.shape[1]
    if a.ndim == 2 and a.size * N <= _SMALL_PRODUCT:
        return a @ b
    step = max(_ALIGNED, (1 << 18) // (a.size * _ALIGNED) * _ALIGNED)
    out = np.empty((*a.shape[:-1], N))
    for start in range(0, N, step):
        part = b[:, start : start + step]
        if a.ndim == 2 and part.shape[1] % _ALIGNED:  # the last block, padded
            padded = np.zeros((b.shape[0], -(-part.shape[1] // _ALIGNED) * _ALIGNED))
            padded[:, : part.shape[1]] = part
            out[:, start:] = (a @ padded)[:, : part.shape[1]]
        else:
            out[..., start : start + step] = a @ part
    return out


class _Recursion:
    """:func:`compensated_filter` along axis 0 continued block by block: each filter
    starts from the exact final state (zf) of the one before, so every value is the
    double one call over all the blocks gives. The filters are scipy's compiled
    ``_linear_filter`` called as its ``lfilter`` calls it (:func:`dpcount._scipy.
    linear_filter`: the same doubles, without the wrapper's ~7 µs a call)."""

    def __init__(self, r: float, r_lo: float, start: Array) -> None:
        """s_{−1} = ``start`` (shape (D,)); decay r + r_lo."""
        self.r, self.r_lo = r, r_lo
        # lfilter([1.0], [1.0, -r], ...)'s arrays: np.atleast_1d of those lists
        self.b, self.a = np.array([1.0]), np.array([1.0, -r])
        self.filter = linear_filter()
        start = np.array(start, dtype=np.float64)
        self.zi = (r * start)[None]  # the first pass's state
        self.error_zi = np.zeros_like(self.zi)  # the error pass's state
        self.last = start  # s_{k−1} of the next error input (first pass)

    def run(self, x: Array) -> Array:
        """The next len(x) values s_k for the inputs x (len(x) ≥ 1, shape (K, D))."""
        y: Array
        y, self.zi = self.filter(self.b, self.a, x, 0, self.zi)
        if self.r_lo != 0.0:
            error_in = np.empty_like(y)  # r_lo·s_{k−1}
            error_in[0] = self.r_lo * self.last
            np.multiply(y[:-1], self.r_lo, out=error_in[1:])
            self.last = y[-1].copy()
            ezi = self.error_zi
            error, self.error_zi = self.filter(self.b, self.a, error_in, 0, ezi)
            y += error
        return y


class BLTNoiseProcess(ChunkedNoiseProcess):
    """(B z)_t for one stream with n + 1 running values (×dim): the buffers and the sum.

    State after step t: q_i(t) = λ_i q_i(t−1) + z_t (i < n) and q_n(t) = Σ_{s≤t} z_s,
    stored as one array of shape (n + 1,) or (n + 1, dim) with decays (λ, 1) and
    weights (β, a); the noise is (B z)_t = Σ_i w_i q_i(t). Memory between steps:
    (n + 1)·dim floats; a vector ``next()`` draws d values and returns them
    overwritten with the noise, so a step holds (n + 2)·dim floats at its peak.

    Scalar ``next()`` computes 4096 steps at once and hands them out from a list
    (the computed, unreleased values are part of the state); ``next_many`` computes
    its block in chunks (Toeplitz product within a chunk, lfilter across chunks).
    """

    #: a vector ``next()`` returns a new array that nothing else holds (the stream
    #: snaps into it); a subclass whose vector step returns a view must set False
    fresh_vectors = True

    def __init__(
        self,
        inverse: BLTInverse,
        horizon: int,
        source: NoiseBuffer,
        float_model: str | None = "blt",
        shared: tuple[dict[int, Any], dict[int, Array]] | None = None,
    ) -> None:
        """``float_model``: the mechanism whose measured horizons apply
        (:func:`check_float_model`; None: none). ``shared``: the chunk matrices and
        residuals by chunk length, kept by the mechanism for every process of the same
        inverse, horizon and model (computed once; the same floats), or None."""
        super().__init__(horizon, source)
        n, dim = len(inverse.decay), self.dim
        self.float_model_name = float_model
        if float_model not in FLOAT_MODEL_BY_STEP:  # else by the step reached (next_many)
            check_float_model(float_model, "block", horizon, dim)
        self._mats: dict[int, tuple[Array, Array, Array, Array]] = {}
        self._lows: dict[int, Array] = {}
        if shared is not None:
            self._mats, self._lows = shared
        # (λ, 1), (β, a) and the ratios' u, d: kept with the chunk matrices under key 0
        # (no chunk has length 0), computed once per inverse (the same floats)
        kept = self._mats.get(0)
        if kept is None:
            decay = np.append(inverse.decay, 1.0)
            ratios = _ratios(decay[:n], inverse.one_minus_decay)
            kept = (decay, np.append(inverse.beta, inverse.a), ratios.u, ratios.d)
            for a in kept[:3]:  # new arrays (d is the inverse's own)
                a.setflags(write=False)
            self._mats[0] = kept
        self._decay, self._weight = kept[0], kept[1]
        self._ratios = _Ratios(r=kept[0][:n], u=kept[2], d=kept[3])
        self._n = n
        tail: tuple[int, ...] = () if dim is None else (dim,)
        self._tail = tail
        self._q: Array = np.zeros((n + 1, *tail))
        self._pending: list[Any] = []  # computed, unreleased noise (scalar streams)

    def live_count(self) -> int:
        """Running values held (n + 1) plus computed noise not yet released (per coordinate)."""
        return self._n + 1 + len(self._pending)

    def _matrices(self, c: int) -> tuple[Array, Array, Array, Array]:
        """For chunks of c steps: within-chunk Toeplitz B_c, P[i, s] = r_i^{c−1−s},
        F[j, i] = w_i r_i^{j+1}, and r_i^c (buffer i = n is the running sum)."""
        cached = self._mats.get(c)
        if cached is not None:
            return cached
        k = np.arange(c + 1, dtype=np.int64)
        pw = np.ones((c + 1, self._n + 1))
        pw[:, : self._n] = _powers(self._ratios, k)
        b = pw[:c] @ self._weight  # b_0 .. b_{c-1}
        lag = np.arange(c)[:, None] - np.arange(c)[None, :]
        toeplitz = np.where(lag >= 0, b[np.clip(lag, 0, None)], 0.0)
        P = pw[c - 1 :: -1][:c].T.copy()  # (n+1, c): r^{c-1-s}
        F = pw[1 : c + 1] * self._weight[None, :]  # (c, n+1)
        mats = (toeplitz, P, F, pw[c].copy())
        for a in mats:
            a.setflags(write=False)  # shared by the mechanism's processes
        if len(self._mats) > 8:
            kept = self._mats.get(0)
            self._mats.clear()
            if kept is not None:
                self._mats[0] = kept
        self._mats[c] = mats
        return mats

    def _chunks(self, z: Array, c: int, dest: Array) -> None:
        """Noise for K·c steps z (shape (K·c, *tail)) into ``dest``, advancing the state.

        Layout: one row per (chunk, coordinate), the c steps of the chunk along the
        row, so the three products are single matrix products.
        """
        K = len(z) // c
        B, P, F, rc = self._matrices(c)
        lo = self._lows.get(c)
        if lo is None:  # r_i^c's residuals (:func:`power_residuals`; 0 for the sum)
            lo = np.zeros(self._n + 1)
            if self.horizon > COMPENSATE_ABOVE and self.float_model_name is not None:
                lo[: self._n] = power_residuals(self._ratios, rc[: self._n], c)
            lo.setflags(write=False)
            if len(self._lows) > 8:
                self._lows.clear()
            self._lows[c] = lo
        D = 1 if self.dim is None else self.dim
        if D == 1:  # scalar steps or vectors of length 1: dest is (K·c,) or (K·c, 1)
            self._scalar_chunks(z.reshape(K, c), (B, P, F, rc, lo), dest.reshape(K, c))
            return
        mats = (B, P, F, rc, lo)
        if K == 1:
            self._vector_chunk(z, mats, dest)
        else:
            self._vector_chunks(z, mats, dest)

    def _vector_chunk(
        self, z: Array, mats: tuple[Array, Array, Array, Array, Array], dest: Array
    ) -> None:
        """:meth:`_chunks` for one chunk of vector steps z (c, D)."""
        B, P, F, rc, lo = mats
        rows = np.ascontiguousarray(z.T)  # (D, c)
        q0 = self._q
        prev = q0.T.copy()  # (D, n + 1): the state before the chunk
        E = _rows_times(rows, P.T)  # the chunk's own part of the state
        for i in range(len(rc)):
            own = E[:, i] if lo[i] == 0.0 else lo[i] * q0[i] + E[:, i]
            q0[i] = rc[i] * q0[i] + own
        out = _rows_times(rows, B.T)
        _rows_times(prev, F.T, out, add=True)
        np.copyto(dest, out.T)

    def _vector_chunks(
        self, z: Array, mats: tuple[Array, Array, Array, Array, Array], dest: Array
    ) -> None:
        """:meth:`_chunks` for K ≥ 2 chunks of vector steps z (K·c, D), in blocks of
        :data:`_VECTOR_BLOCK_VALUES` steps' values.

        In each block, one row per (chunk, coordinate) with the c steps of the chunk
        along it, so the three products are single matrix products: the rows times P^T
        give each chunk's own part of the state; each buffer's recursion across the
        chunks (:class:`_Recursion`, continued from the block before) gives the state
        before each chunk, kept buffer by buffer ((n + 1, rows): each filter's output is
        one contiguous copy, where the (rows, n + 1) layout took n + 1 strided ones);
        the rows times B^T plus those states times F^T (the transposed operand of the
        same product: the same floats, as in :meth:`_scalar_chunks`) give the noise,
        summed in the block's layout and then moved into the (steps, d) output. The
        block's arrays are allocated once and reused: fresh arrays of the whole batch
        (as before, three of T·d values) cost more in first-touch page faults than the
        products themselves (measured at T = 2^16, d = 4).

        The filters continue from their exact state, so they give the floats of one
        filter over every chunk; the products are :func:`_rows_times`' calls on each
        block's rows, and a row's rounding can depend on its place in a call (OpenBLAS
        here: the last rows of a call whose row count is not a multiple of 4), so the
        blocks (:data:`_VECTOR_BLOCK_VALUES`) are part of the released floats: the same
        blocks, the same floats (tests, and ``benchmarks/release_digests.py`` before
        and after a change).

        Release ÷ drawing the T·d normals, least process CPU, same-run pairs before
        (3d4e7fb: lfilter's wrapper, each filter's output copied into a strided column,
        the noise summed by ``+=``) → after, ``bench_scaled_batch.py --names blt
        --objectives mean`` (2026-12-07, 2 shared cores): 10^7 × 4 at load 1.6-3.0
        (``--T 10000000 --dims 4``): 3.01, 3.24 → 2.76 (a second after-run: 2.40 over a
        slow floor); at load 3.3-5.2, two rounds of ``--horizons 16 18 20 22 --T
        10000000 --dims 2 4 16``: 10^7 × 4 3.34, 3.29 → 3.37, 2.73; 2^16-2^22 × 2, 4, 16:
        after ÷ before 0.77-0.96 in 23 of 24 pairs (2^16 × 2: 1.02 and 0.83), where the
        scalar path, whose code did not change, came out 0.84-1.02 (the loaded machine's
        spread). Idle, before this change: 2.61-2.67 at 10^7 × 4 (not yet measured idle
        after).

        Then (2026-12-08) chunks of 32 steps instead of 8 (:data:`_BLOCK`, as the scalar
        batch): a quarter of the filter steps across the chunks (0.86× of the normals at
        10^7 × 4) for a within-chunk product 4× longer. Idle, the same runs alternating
        (before = chunks of 8), least / median CPU ratio: 10^7 × 4 2.80 / 2.68 and 2.60 /
        2.61 → 2.13 / 2.14, 2.52 / 2.32, 2.17 / 2.22, 2.14 / 2.10; 2^16 × 2 3.19 → 2.49,
        2^16 × 16 3.56 → 2.21, 2^20 × 2 3.26 → 2.31, 2^20 × 16 2.99 → 2.12 (least). The
        noise changes at rounding level (95 % of the raw values at 10^5 × 4 differ, by
        ≤ 4·10⁻¹⁰ relatively); the float-safe releases did not (``release_digests.py``,
        612 of 612, its 153 vector batches included: the snap absorbs it). The float
        model re-measured (benchmarks/float_model_long.py, vbatch, seeds 1-3): the BLT
        17.0 / 17.1 / 23.0 / 37.1 at 2^20 / 2^22 / 2^23 / 2^24 (chunks of 8: 48 at
        2^23), the horizon-free BLT 5.8 / 11.3 / 15.2 at 2^17 / 2^20 / 2^22 (was 49 at
        2^22).
        """
        B, P, F, rc, lo = mats
        c, D, m = len(B), z.shape[1], len(rc)
        per = max(2, _VECTOR_BLOCK_VALUES // (c * D))  # chunks per block
        rows_all = np.empty((per * D, c))  # the steps; then prev·Fᵀ
        own_all = np.empty((per, D, m))  # each chunk's own part of the state
        prev_all = np.empty((m, per * D))  # the state before each chunk, buffer by buffer
        out_all = np.empty_like(rows_all)  # rows·Bᵀ, then the noise
        q = self._q
        recursions = [_Recursion(rc[i], lo[i], q[i]) for i in range(m)]
        for a in range(0, len(z), per * c):
            K = min(per, (len(z) - a) // c)
            rows, out, own, prev = rows_all[: K * D], out_all[: K * D], own_all[:K], prev_all
            np.copyto(rows.reshape(K, D, c), z[a : a + K * c].reshape(K, c, D).transpose(0, 2, 1))
            _rows_times(rows, P.T, own.reshape(K * D, m))
            for i, recursion in enumerate(recursions):
                ends = recursion.run(own[:, :, i])
                before = prev[i, : K * D].reshape(K, D)  # contiguous: no strided copies
                before[0] = q[i]
                before[1:] = ends[:-1]
                q[i] = ends[-1]
            _rows_times(rows, B.T, out)
            # prev·Fᵀ with prev transposed (a transposed operand of the same product: the
            # same floats, as in _scalar_chunks) into the rows, read for the last time above
            _rows_times(prev[:, : K * D].T, F.T, rows)
            np.add(out, rows, out=out)  # contiguous (a transposed add is 3x slower)
            np.copyto(dest[a : a + K * c].reshape(K, c, D), out.reshape(K, D, c).transpose(0, 2, 1))

    def _scalar_chunks(
        self, rows: Array, mats: tuple[Array, Array, Array, Array, Array], out: Array
    ) -> None:
        """:meth:`_chunks` for one coordinate: ``rows`` (K, c) holds the chunks' z, ``out``
        (K, c) receives their noise. The chunks' own parts of the state are laid out one
        buffer per row, (n + 1, K), so each buffer's recursion across chunks is one
        lfilter over a contiguous row, and its output goes straight into the row of the
        states before each chunk (no strided column copies: measured 1.28× → 1.05× the
        time of drawing the block's normals, thread CPU time, loaded 2-core machine).
        Every value is computed by the same operations in the same order as the
        (K, n + 1) layout, so the noise is the same to the bit (tested). ``out`` may be
        ``rows`` itself (:meth:`_compute_new`): rows·Pᵀ reads every block first, and
        each block of rows·Bᵀ goes through a scratch block before it is written back.
        The products keep :func:`_rows_times`' row blocks: with a 32-step inner
        dimension OpenBLAS's rounding can depend on the number of rows of a call
        (measured: 25 of 40 random (M, 32) × (32, 9) products differ in some bit from
        their rows computed in another block), so other blocks would change bits."""
        B, P, F, rc, lo = mats
        K, c = rows.shape
        q0 = self._q.reshape(-1)  # a view: (n + 1,) or (n + 1, 1)
        m = len(q0)
        # the products in _rows_times' row blocks (the same calls, so the same floats:
        # a product's rounding can depend on its row count), rows·Pᵀ written transposed
        # into E block by block while in cache
        per_p, per_b = _product_rows(c, m), _product_rows(c, c)
        E = np.empty((m, K))  # (n + 1, K): each chunk's own part of the state
        own, w_all = np.empty((min(K, per_p), m)), np.empty((min(K, per_b), c))
        PT, BT = np.ascontiguousarray(P.T), np.ascontiguousarray(B.T)
        for a in range(0, K, per_p):
            e = own[: min(K, a + per_p) - a]
            np.matmul(rows[a : a + per_p], PT, out=e)
            E[:, a : a + per_p] = e.T
        prev = np.empty_like(E)  # prev[i, k]: buffer i before chunk k
        prev[:, 0] = q0
        for i in range(m):  # while E is in cache
            if K > 1:  # lfilter's first output is E[i, 0] + rc_i·q0_i, as below
                prev[i, 1:] = compensated_filter(E[i, :-1], rc[i], lo[i], q0[i])
            last = E[i, -1] if lo[i] == 0.0 else lo[i] * prev[i, -1] + E[i, -1]
            q0[i] = rc[i] * prev[i, -1] + last
        in_place = np.may_share_memory(out, rows)
        for a in range(0, K, per_b):  # out = rows·Bᵀ: each block read before it is written
            if not in_place:
                np.matmul(rows[a : a + per_b], BT, out=out[a : a + per_b])
                continue
            w = w_all[: min(K, a + per_b) - a]
            np.matmul(rows[a : a + per_b], BT, out=w)
            out[a : a + per_b] = w
        _rows_times(prev.T, F.T, out, add=True)

    def _compute(self, dest: Array) -> None:
        """Draw z for the next len(dest) computed steps and write their noise to dest."""
        self._fill(self.noise.sample((len(dest), *self._tail)), dest)

    def _compute_new(self, n: int) -> Array | None:
        """The noise of the next n steps computed in the array of their draws z when
        nothing else holds it (every chunk's products read its block of z before its
        noise is written there), so a batch allocates, faults and streams one array of
        n·d values instead of two; else into a new array. The same floats as
        :meth:`_compute`."""
        if n * (1 if self.dim is None else self.dim) < _IN_DRAWS_VALUES:
            return None  # small: from the heap without faults; the copy-free products win
        z = self.noise.sample((n, *self._tail))
        # an array that owns its data, referenced only here: not a view of a sampler's
        # buffer nor one it keeps (e.g. a replay)
        if (
            z.base is None
            and 0 < _reference_count(z) <= _LOCAL_REFERENCES
            and z.dtype == np.float64
            and z.flags.c_contiguous
            and z.flags.writeable
        ):
            self._fill(z, z)
            return z
        out = np.empty(z.shape)
        self._fill(z, out)
        return out

    def _fill(self, z: Array, dest: Array) -> None:
        """The noise of the draws z into dest (which may be z itself)."""
        m = len(dest)
        c = _BLOCK
        full = (m // c) * c
        if full:
            self._chunks(z[:full], c, dest[:full])
        if m > full:
            self._chunks(z[full:], m - full, dest[full:])

    def next(self) -> Any:
        if self.float_model_name in FLOAT_MODEL_BY_STEP and self.dim is None:
            check_float_model(self.float_model_name, "block", self._t + 1, self.dim)
        return super().next()

    def next_many(self, n: int) -> Array:
        if self.float_model_name in FLOAT_MODEL_BY_STEP:  # by the step reached
            check_float_model(self.float_model_name, "block", self._t + n, self.dim)
        return super().next_many(n)

    def next_finished(self, finish: Callable[[int, Array], None]) -> Array | None:
        """A vector ``next()`` that calls ``finish(start, block)`` on each column block of
        the noise right after computing it (``block`` is ``noise[start:start + m]``, a
        view of the returned array; ``finish`` may overwrite it, e.g. with the stream's
        float-safe release, while the block is in cache); None, with nothing drawn or
        counted, where the step is not the fused column-block one (scalar steps, the
        horizon-free BLT): call ``next``."""
        if self.dim is None or self.float_model_name in FLOAT_MODEL_BY_STEP:
            return None
        if self._t >= self.horizon:
            raise ValueError(f"noise process is at its horizon ({self.horizon} steps)")
        self._t += 1
        return self._vector_next(finish)

    def _vector_next(self, finish: Callable[[int, Array], None] | None = None) -> Array:
        """One vector step in one pass over column blocks of :data:`_STEP_COLUMNS`: each
        block of the (n + 1)·d state is decayed, gets z added and gives its noise while it
        is in cache (one pass over the state instead of three), then ``finish`` (if
        given, :meth:`next_finished`) is called on it. Every value is computed by
        the same operations in the same order as a whole-array step (decay, add, then the
        weighted sum over the n + 1 buffers), so the result does not depend on the block
        width (tests compare with the unfused step bit for bit). Refused beyond
        :data:`FLOAT_MODEL_HORIZONS` (the step is not taken)."""
        name = self.float_model_name
        try:  # the horizon-free BLT: by the step reached (``next`` counted it)
            check_float_model(
                name, "step", self._t if name in FLOAT_MODEL_BY_STEP else self.horizon, self.dim
            )
        except ValueError:
            self._t -= 1  # ``next`` counted the step
            raise
        if name in FLOAT_MODEL_BY_STEP:
            # a block of one step (the compensated decays r_hi + r_lo of the blocks): the
            # fused step's recursion in fl(λ) passes κ/4 at step 2^13 for the horizon-free
            # BLT's decays (564 at 2^17); this one ≤ 24 at 2^17
            return super()._vector_next()  # type: ignore[no-any-return]
        z = self.noise.sample(self._tail)
        q, n, weight = self._q, self._n, self._weight
        decay = self._decay[:n, None]
        width = _step_width(len(z))
        for a in range(0, len(z), width):
            qb, zb = q[:, a : a + width], z[a : a + width]
            qb[:n] *= decay
            qb += zb
            # einsum, not np.dot: BLAS gemv is slow here (and threads contend under load)
            np.einsum("i,ij->j", weight, qb, out=zb)
            if finish is not None:
                finish(a, zb)
        return z

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The step, the running values after the last computed step and the computed,
        unreleased noise (in release order)."""
        return self._state(q=self._q.copy(), pending=self._pending_state())

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same parameters,
        sampler and dim), checking every field; see :mod:`dpcount._state`."""
        st, t = self._read_state(state, ("q", "pending"))
        rows = self._n + 1
        q = state_array(self._owner, "q", st["q"], rows=rows, dim=self.dim, dtypes=(np.float64,))
        self._pending = self._read_pending(st["pending"], t)
        self._t, self._q = t, q


# -- the mechanism ---------------------------------------------------------------------


def _shipped() -> dict[str, Any]:
    return load_table("blt_parameters.json")


def shipped_blt_parameters(
    horizon: int, objective: str = "mean", buffers: int | None = None
) -> tuple[list[float], list[float]]:
    """Optimized (buffer_decay, output_scale) shipped with dpcount for ``horizon``.

    The table (``dpcount/data/blt_parameters.json``, made by
    ``benchmarks/make_blt_parameters.py`` with
    :func:`dpcount.counting.factorization.optimize.optimize_blt`) holds parameters optimized at
    T = 2^k, k = 0…24, for each objective and several buffer counts. A horizon uses
    the entry of the smallest power of two ≥ T (2^24 beyond it): the parameters are
    a valid BLT at every horizon, and the mechanism's sensitivity and error are
    always computed for the actual T (they are optimal only at the power of two).

    Args:
        horizon: T ≥ 1.
        objective: ``"mean"`` or ``"max"`` loss.
        buffers: a shipped buffer count, or None for the entry with the lowest loss.

    Raises:
        ValueError: an unknown objective or a buffer count that is not shipped.
    """
    T = check_integer("horizon", horizon, ge=1)
    check_choice("objective", objective, ("mean", "max"))
    table: dict[str, dict[str, Any]] = _shipped()["objectives"][objective]
    if buffers is None:
        counts = sorted(table)
    else:
        n = check_integer("buffers", buffers, ge=1)
        if str(n) not in table:
            raise ValueError(f"buffers must be one of the shipped counts {sorted(table)}, got {n}")
        counts = [str(n)]
    largest = max(int(key) for key in table[counts[0]])
    k = str(min((T - 1).bit_length(), largest))
    entry = min((table[c][k] for c in counts), key=lambda e: float(e[f"{objective}_loss"]))
    return list(entry["buffer_decay"]), list(entry["output_scale"])


def blt_config(buffer_decay: Array, output_scale: Array) -> dict[str, Any]:
    """θ, ω as a mechanism's rebuilding arguments (``config()``, checkpoints): lists of
    floats under their parameter names."""
    return {"buffer_decay": buffer_decay.tolist(), "output_scale": output_scale.tolist()}


class _BLTParameters(CountingMechanism):
    """What the mechanisms built on BLT(θ, ω) parameters share (:class:`BLT`,
    :class:`~dpcount.counting.factorization.normalized_blt.NormalizedBLT`): the checked
    parameters, the inverse, and the parameters in ``repr``, the memory options and the
    rebuilding arguments."""

    buffer_decay: Array
    output_scale: Array
    inverse: BLTInverse

    def _set_parameters(self, theta: Array, omega: Array) -> None:
        """Keep θ, ω (checked by :func:`check_blt_parameters`) and their inverse."""
        self.buffer_decay = theta
        self.output_scale = omega
        self.inverse = blt_inverse(theta, omega)

    #: the largest horizon the class takes
    horizon_limit: ClassVar[int] = MAX_HORIZON

    def __init__(
        self,
        horizon: int,
        *,
        buffer_decay: Any,
        output_scale: Any,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        """Check and keep θ, ω; the budget, Gaussian noise only (the class named in the
        messages); the horizon (≤ :attr:`horizon_limit`) and the structure that follows
        from it (:meth:`_set_blt_structure`); then calibrate."""
        self._set_parameters(*check_blt_parameters(buffer_decay, output_scale))
        owner = type(self).__name__
        resolved = Budget.resolve(budget, fields, owner=owner).gaussian_only(owner)
        T = check_integer("horizon", horizon, ge=1, le=self.horizon_limit)
        self._set_blt_structure(T)
        super().__init__(T, budget=resolved, rng=rng)

    @abstractmethod
    def _set_blt_structure(self, horizon: int) -> None:
        """The structure the class keeps for θ, ω at ``horizon`` (checked)."""

    @staticmethod
    def _stream_bytes(T: int, dim: int | None, n: int) -> int:
        """Peak bytes of a stream of n buffers and the running sum, (n + 1)·d floats, plus
        the step's draw and its arrays ((n + 2)·d at the peak); scalar streams compute a
        chunk of 4096 steps ahead."""
        chunk = min(4096, T)  # scalar streams: pending Python floats, a chunk's arrays
        fixed = 32 * 1024  # Python objects and the chunk matrices
        return fixed + (
            chunk * (32 + 8 * (n + 4)) if dim is None else 8 * dim * (n + 2) + step_bytes(dim)
        )

    def _memory_options(self) -> dict[str, Any]:
        return {"buffers": len(self.buffer_decay)}

    def _repr_fields(self) -> dict[str, object]:
        return {"buffers": len(self.buffer_decay)}

    def _config_kwargs(self) -> dict[str, Any]:
        return {**super()._config_kwargs(), **blt_config(self.buffer_decay, self.output_scale)}


class BLT(_BLTParameters):
    """Buffered linear Toeplitz factorization (Dvijotham et al. 2024; McMahan et al. 2024).

    The encoder C = BLT(θ, ω) (c_0 = 1, c_k = Σ_i ω_i θ_i^{k−1}); the decoder
    B = A·C⁻¹ with C⁻¹ also a BLT (see the module docstring). Releases
    S_t + (B z)_t with one z ~ N(0, σ²)^T for the whole stream.

    Formal guarantee:
        Neighbouring relation: event level, single participation — two streams that
        differ at one step by at most Δ = ``step_sensitivity`` (ℓ₂ norm of the change
        for vector steps).

        The perturbed vector is C·x with ONE Gaussian vector z for the whole stream;
        a change of one step moves it by Δ·(a column of C), and the columns of a
        lower-triangular Toeplitz C are nested, so the ℓ₂ sensitivity is
        Δ·√(Σ_{k<T} c_k²) (the first column; closed form, enlarged by a relative
        1e-12). ``"gaussian"``: (ε, δ)-DP with σ from the budget's calibration
        (analytic Gaussian mechanism, Balle & Wang 2018, Theorem 8, by default). The
        release S_t + (B z)_t = (B(Cx + z))_t is post-processing of Cx + z. Gaussian
        noise only.

        Exact variance: Var_t = σ²·Σ_{k<t} b_k² with b_k = a + Σ_i β_i λ_i^k the
        decoder's coefficients (``noise_coefficients`` in O(T·n); ``mse`` and
        ``max_variance`` in O(n²) by closed forms, :func:`blt_losses`).

    References:
        * K. Dvijotham, H. B. McMahan, K. Pillutla, T. Steinke, A. Thakurta.
          "Efficient and near-optimal noise generation for streaming differential
          privacy". FOCS 2024. https://arxiv.org/abs/2404.16706
        * H. B. McMahan, Z. Xu, Y. Zhang. "A hassle-free algorithm for private
          learning in practice: don't use tree aggregation, use BLTs". arXiv preprint,
          2024. https://arxiv.org/abs/2408.08868
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530

    Args:
        horizon: T ≥ 1.
        buffer_decay: θ_1…θ_n, distinct, in (0, 1).
        output_scale: ω_1…ω_n > 0 with Σ ω_i/(1 + θ_i) < 1.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (epsilon, delta, noise (Gaussian only), calibration, step_sensitivity).
        rng: Generator, int seed (not for production) or None (OS entropy).

    Raises:
        ValueError: parameters outside that domain (naming the parameter), or a
            noise kind other than Gaussian.
    """

    name = "blt"
    default_noise = NoiseKind.GAUSSIAN
    continuous_noise = frozenset({NoiseKind.GAUSSIAN})

    max_noise_coefficient = 1.0  # b_0 = 1 ≥ b_k > 0

    def _set_blt_structure(self, horizon: int) -> None:
        self._losses = blt_losses(self.buffer_decay, self.output_scale, horizon, self.inverse)

    @classmethod
    def optimized(
        cls,
        horizon: int,
        *,
        objective: str = "mean",
        buffers: int | None = None,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> BLT:
        """A BLT with the shipped parameters optimized for ``objective`` ("mean" or
        "max" loss) at the smallest power of two ≥ horizon, with ``buffers`` buffers
        (None: the best shipped count). Instant; see :func:`shipped_blt_parameters`.
        For other horizons or buffer counts use
        :func:`dpcount.counting.factorization.optimize.optimize_blt` and the constructor."""
        decay, scale = shipped_blt_parameters(horizon, objective, buffers)
        return cls(
            horizon, buffer_decay=decay, output_scale=scale, budget=budget, rng=rng, **fields
        )

    @classmethod
    def shipped_parameters(cls, horizon: int, objective: str = "mean") -> dict[str, list[float]]:
        """The structure keywords :meth:`optimized` builds with (best shipped buffer count)
        for ``objective`` at the smallest power of two ≥ horizon
        (:func:`shipped_blt_parameters`)."""
        decay, scale = shipped_blt_parameters(horizon, objective)
        return {"buffer_decay": decay, "output_scale": scale}

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: the n buffers and the running sum, (n + 1)·d floats, plus the step's
        draw (the (n + 2)·d peak of :class:`BLTNoiseProcess`) and its arrays; scalar
        streams compute 4096 steps ahead. ``buffers`` (None: the shipped best count)."""
        T = check_integer("horizon", horizon, ge=1)
        buffers = options.get("buffers")
        n = len(shipped_blt_parameters(T)[0]) if buffers is None else int(buffers)
        return MemoryEstimate(structure=64 * n, stream=cls._stream_bytes(T, dim, n))

    def _unit_sensitivities(self) -> tuple[float, float]:
        T = check_integer("horizon", self.horizon, ge=1)
        th = _theta_ratios(self.buffer_decay)
        l1 = 1.0 + float(np.sum(self.output_scale * _geo(th, T - 1)))
        l2 = math.sqrt(self._losses.sensitivity_squared)
        return l1 * (1.0 + SENSITIVITY_MARGIN), l2 * (1.0 + SENSITIVITY_MARGIN)

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """Under (k, b)-participation: the encoder is lower-triangular Toeplitz with the
        coefficients of :func:`encoder_coefficients`. When they are non-negative and
        non-increasing (checked, not assumed) the earliest pattern is a worst case
        (Kalinin & Lampert 2024, Thm 2, https://arxiv.org/abs/2405.13763) and the
        sensitivities are exact; otherwise the dense computation (T ≤ 4096) or k × the
        single-participation sensitivity, a certified bound
        (:func:`~dpcount.counting.participation.toeplitz_sensitivities`)."""
        c = encoder_coefficients(self.buffer_decay, self.output_scale, self.horizon)
        return toeplitz_sensitivities(c, schema)

    def noise_process(self, source: NoiseSource, width: int | None = None) -> BLTNoiseProcess:
        # the shipped BLT's and the horizon-free BLT's paths are measured
        # (FLOAT_MODEL_HORIZONS; the named ones also get the compensated decays); a
        # subclass with other parameters is not
        name = self.name if self.name in FLOAT_MODEL_HORIZONS else None
        # the chunk matrices, kept for the next stream or release of this inverse
        kept = self.__dict__.get("_chunk_matrices")
        if kept is None or kept[0] is not self.inverse or kept[1] != (self.horizon, name):
            shared: tuple[dict[int, Any], dict[int, Array]] = ({}, {})
            kept = self.__dict__["_chunk_matrices"] = (self.inverse, (self.horizon, name), shared)
        buffer = NoiseBuffer(source, width)
        return BLTNoiseProcess(self.inverse, self.horizon, buffer, name, shared=kept[2])

    def noise_coefficients(self) -> Array:
        """V_t = Σ_{k<t} b_k² for t = 1..T, O(T·n) in blocks."""
        out = np.empty(self.horizon)
        for start, part in self._coefficient_blocks(self.horizon):
            out[start : start + len(part)] = part
        return out

    def _coefficient_blocks(self, stop: int) -> Iterator[tuple[int, Array]]:
        """(first index, V of that block) for the blocks covering steps 1..stop, each
        computed exactly as :meth:`noise_coefficients` does (so bit-identical), in
        memory of one block."""
        total = 0.0
        block = 1 << 16
        for start in range(0, stop, block):
            b = decoder_coefficients(self.inverse, min(block, self.horizon - start), start)
            part = np.cumsum(b * b)
            part += total
            total = float(part[-1])
            yield start, part

    def _noise_coefficient_at(self, t: int) -> float:
        """V_t in O(t·n) time and one block of memory (bit-identical to the full pass)."""
        for start, part in self._coefficient_blocks(t):
            if t - 1 < start + len(part):
                return float(part[t - 1 - start])
        raise AssertionError("unreachable: t is within the horizon")  # pragma: no cover

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        for block in self._iter_noise_coefficient_blocks(start):
            yield from block.tolist()

    def _iter_noise_coefficient_blocks(self, start: int) -> Iterator[Array]:
        for first, part in self._coefficient_blocks(self.horizon):
            if first + len(part) >= start:
                yield part[max(0, start - 1 - first) :]

    def losses(self) -> BLTLosses:
        """Closed-form sensitivity², mean and largest variance (unit sample variance)."""
        return self._losses

    def mse(self) -> float:
        """Exact MSE, O(n²) closed form: σ²·(1/T)·Σ_{k<T} (T − k) b_k²."""
        return self.sampler.variance * self._losses.mean_variance

    def max_variance(self) -> float:
        """Exact largest variance, O(n²) closed form: σ²·V_T."""
        return self.sampler.variance * self._losses.max_variance

    def dense_factorization(self) -> tuple[Array, Array]:
        """(B, C) as dense T×T matrices; for T ≤ 4096."""
        T = self.horizon
        if T > 4096:
            raise ValueError(f"dense factorization is for horizon <= 4096, got {T}")
        b = decoder_coefficients(self.inverse, T)
        c = encoder_coefficients(self.buffer_decay, self.output_scale, T)
        lag = np.arange(T)[:, None] - np.arange(T)[None, :]
        idx = np.clip(lag, 0, None)
        return np.where(lag >= 0, b[idx], 0.0), np.where(lag >= 0, c[idx], 0.0)
