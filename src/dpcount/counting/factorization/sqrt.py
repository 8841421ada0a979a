"""The square-root factorization mechanism (constant-matters Alg. 1, Thm 1.2).

The counting matrix A (all-ones, lower-triangular) is factored as A = L·R with
L = R the lower-triangular Toeplitz matrix of f(k) = f(k−1)(2k−1)/(2k), f(0) = 1
(:mod:`dpcount.counting.factorization.sqrt_toeplitz`). The mechanism releases

    output_t = S_t + (L z)_t,   z ~ i.i.d. noise,  ONE z for the whole stream,

which is L(Rx + z) with Rx released privately: its sensitivities are the column
norms of R for the horizon, ‖R‖₁→₂ = √(Σ_{k<T} f(k)²) and ‖R‖₁→₁ = Σ_{k<T} f(k).

Errata to Fichtenberger, Henzinger, Upadhyay, "Constant Matters" (ICML 2023,
https://arxiv.org/abs/2202.11205), checked numerically and implemented here:

* constant-matters §4 draws "a freshly sampled Gaussian vector z_t" each round,
  which would compose T releases; here one z serves every step, so the outputs
  at two times s ≤ t have covariance σ²·Σ_{k<s} f(k)·f(t−s+k).
* Ψ(T) (eq. 4) is below the true Σ_{k<T} f(k)²; σ is calibrated with the exact
  column norm, never with Ψ.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_array
from dpcount._validate import check_integer
from dpcount.counting._process import SourcedNoiseProcess
from dpcount.counting.base import (
    CountingMechanism,
    MemoryEstimate,
    step_bytes,
)
from dpcount.counting.factorization.sqrt_toeplitz import (
    causal_convolution,
    psi_bound,
    sqrt_coefficient_block,
    sqrt_coefficients,
    sqrt_l1_norm,
    sqrt_l2_norm_squared,
    sqrt_mean_variance_coefficient,
)
from dpcount.counting.participation import Sensitivity, toeplitz_sensitivities
from dpcount.privacy._statements import noise_statements
from dpcount.privacy.budget import NoiseKind, Participation
from dpcount.privacy.calibration import fhu_constant
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.source import NoiseSource
from dpcount.privacy.tails import check_beta

if TYPE_CHECKING:
    pass

__all__ = ["SENSITIVITY_MARGIN", "SqrtFactorization", "SqrtNoiseProcess"]

#: relative amount added to the computed column norms before calibration, so
#: floating-point error in the norms can only add noise
SENSITIVITY_MARGIN = 1e-12

# Per-step next() hands out values from a Python list of this many steps.
_CHUNK = 4096
# Steps per block of the running sum S(t) behind variance_at / iter_variances.
_VARIANCE_BLOCK = 1 << 16


def fft_stream_memory(horizon: int, dim: int | None, *, arrays: int) -> MemoryEstimate:
    """The memory of a stream whose noise is an FFT convolution of every z drawn (the
    square root's :class:`SqrtNoiseProcess` and its variants): about 6·T·d floats at the
    peak, measured with tracemalloc (:meth:`SqrtFactorization.memory_estimate`), and a
    structure of ``arrays`` length-T float64 arrays."""
    T = check_integer("horizon", horizon, ge=1)
    d = 1 if dim is None else dim
    return MemoryEstimate(structure=8 * arrays * T, stream=48 * T * d + step_bytes(dim))


class SqrtNoiseProcess(SourcedNoiseProcess):
    """N = L z of the square-root factorization for one stream, computed block by block.

    N_t = Σ_{s≤t} f(t − s)·z_s. The noise does not depend on the data, so the
    process draws z ahead and computes N in blocks by FFT
    (:func:`~dpcount.counting.factorization.sqrt_toeplitz.causal_convolution`). When the computed
    noise runs out at step E it computes the block [E, E') with
    E' = min(T, max(2E, E + 1024, E + requested)): blocks double, so T steps cost
    O(T log T) in total and amortized O(log T) per step; one request for all T
    steps (a batch release) is a single convolution. The price of doubling is
    latency: the ``update`` that starts a block pays for all of it (the last
    block, at t ≈ T/2, costs about a batch release of 0.75·T steps).

    Memory at step t: the z drawn so far (≤ max(2t, t + requested, 1024) values —
    all of them are needed, since every future N depends on every past z), the
    computed but unreleased noise (at most as many values), and f(0..T−1) shared
    with the mechanism; ×dim for vector steps. During a block computation FFT
    buffers of ~3× the block's z are held briefly. All state lives in plain
    attributes (ints, numpy arrays, a list).

    Args:
        kernel: f(0), …, f(T − 1).
        source: the sampler z is drawn from (i.i.d.), its Generator and ``dim`` (None
            for scalar steps, else the vector length).
        first_block: size of the first block (later blocks double).
        spectra: the kernel's owner's cache of its spectra (``causal_convolution``'s
            ``spectra``: the streams and releases of one mechanism transform the
            kernel once per block size), or None.
    """

    #: N of the steps t, t + 1, …, chunk_end − 1 as Python objects, reversed: popping one
    #: is :meth:`next` (a stream's float-safe fast path pops it directly); one list for
    #: the process's life, emptied and refilled in place
    handout: list[Any]
    #: the step after the hand-out list's last
    handout_end: int
    #: an upper bound on |N| over the values the hand-out list was last filled with
    #: (scalar steps; inf before the first fill): a stream's fast path reads it to
    #: skip its rounding's range check (:meth:`CountingStream._arm
    #: <dpcount.counting.base.CountingStream._arm>`)
    handout_bound: float

    def __init__(
        self,
        kernel: NDArray[np.float64],
        source: NoiseBuffer,
        first_block: int = 1024,
        spectra: dict[tuple[int, int], NDArray[np.complex128]] | None = None,
    ) -> None:
        self.handout = []
        self.handout_bound = math.inf
        self._spectra = spectra
        self.handout_end = 0  # the step after the hand-out list's last
        super().__init__(len(kernel), source)
        self.kernel = kernel
        self.first_block = check_integer("first_block", first_block, ge=1)
        tail: tuple[int, ...] = () if self.dim is None else (self.dim,)
        self._z: NDArray[np.float64] = np.empty((0, *tail))  # z_0 .. z_{len-1}
        self._noise: NDArray[np.float64] = np.empty((0, *tail))  # N for steps from _start
        self._start = 0  # step index (0-based) of _noise[0]

    @property
    def _t(self) -> int:
        """The step: the hand-out list's end less what is still in it."""
        return self.handout_end - len(self.handout)

    @_t.setter
    def _t(self, t: int) -> None:  # a step set from outside next(): nothing to hand out
        self.handout.clear()
        self.handout_end = t

    def live_count(self) -> int:
        """z values held plus computed noise values not yet released (per coordinate)."""
        return len(self._z) + (self._start + len(self._noise) - self._t)

    def _ensure(self, end: int) -> None:
        """Make N available for steps [_t, end)."""
        computed = self._start + len(self._noise)
        if end <= computed:
            return
        T = self.horizon
        new_end = min(T, max(end, 2 * computed, computed + self.first_block))
        have = len(self._z)
        if new_end > have:
            shape = (new_end - have,) if self.dim is None else (new_end - have, self.dim)
            fresh = self.noise.sample(shape)
            self._z = fresh if have == 0 else np.concatenate([self._z, fresh])
        block = causal_convolution(self.kernel, self._z, computed, new_end, spectra=self._spectra)
        keep = self._noise[self._t - self._start :]
        self._noise = block if len(keep) == 0 else np.concatenate([keep, block])
        self._start = self._t

    def next(self) -> Any:
        handout = self.handout
        if handout:
            return handout.pop()
        t = self.handout_end
        if t >= self.horizon:
            raise ValueError(f"noise process is at its horizon ({self.horizon} steps)")
        self._ensure(t + 1)
        piece = self._noise[t - self._start : t - self._start + _CHUNK]
        if self.dim is None:
            handout.extend(piece[::-1].tolist())
            self.handout_bound = max(float(piece.max()), -float(piece.min()))
        else:
            handout.extend(list(piece[::-1].copy()))
        self.handout_end = t + len(piece)
        return handout.pop()

    def next_many(self, n: int) -> NDArray[np.float64]:
        n = check_integer("n", n, ge=1)
        t0 = self._t
        if t0 + n > self.horizon:
            raise ValueError(f"noise process holds {self.horizon} steps, asked for {t0 + n}")
        self._ensure(t0 + n)
        lo = t0 - self._start
        if lo == 0 and n == len(self._noise):
            out = self._noise  # hand the block over without copying
            self._noise = np.empty((0, *out.shape[1:]))
            # The (empty) computed noise now starts after the block, so the next
            # _ensure continues at t0 + n instead of recomputing from t0.
            self._start = t0 + n
        else:
            out = self._noise[lo : lo + n].copy()
        self._t = t0 + n
        return out

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What this process needs to continue exactly: the step, every z drawn so far
        (each future N depends on all of them) and the computed noise not yet released.

        The arrays are the process's own (not copies): do not modify them.
        """
        return self._state(z=self._z, noise=self._noise[self._t - self._start :])

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same kernel,
        sampler and dim), checking every field; see :mod:`dpcount._state`.

        Needs t ≤ (computed end) = t + len(noise) ≤ len(z) ≤ horizon.
        """
        st, t = self._read_state(state, ("z", "noise"))
        owner = self._owner
        z = state_array(owner, "z", st["z"], rows=-1, dim=self.dim)
        noise = state_array(
            owner, "noise", st["noise"], rows=-1, dim=self.dim, dtypes=(np.float64,)
        )
        if not t + len(noise) <= len(z) <= self.horizon:
            raise ValueError(
                f"corrupt {owner} state: need t + len(noise) <= len(z) <= horizon, got "
                f"t={t}, len(noise)={len(noise)}, len(z)={len(z)}, horizon={self.horizon}"
            )
        self._z, self._noise, self._start, self._t = z, noise, t, t


@noise_statements
class SqrtFactorization(CountingMechanism):
    """Square-root factorization mechanism (constant-matters Alg. 1; Henzinger et al. √A).

    Releases S_t + (L z)_t with L the lower-triangular Toeplitz matrix of
    f(k) = f(k−1)(2k−1)/(2k), f(0) = 1, and one noise vector z for the whole
    stream (the paper's per-round fresh z_t is an erratum).

    Formal guarantee:
        [neighbouring: event level]

        The perturbed vector is R·x (R = L), which a change of one step by Δ moves by
        Δ·(a column of R); the worst column is the first, so the ℓ₂ sensitivity is
        Δ₂ = Δ·√S(T), S(T) = Σ_{k<T} f(k)², and the ℓ₁ sensitivity Δ₁ = Δ·Σ_{k<T} f(k) =
        Δ·(2T−1)f(T−1). The release S_t + (L z)_t = (L(Rx + z))_t is post-processing
        of Rx + z with ONE noise vector z for the whole stream (the paper's per-round
        fresh z_t would compose T releases: erratum). Both norms are computed exactly
        (:mod:`dpcount.counting.factorization.sqrt_toeplitz`) and enlarged by a relative 1e-12 so
        rounding can only add noise; the paper's Ψ(T) (eq. 4) lies *below* S(T)
        (T = 2^16: Ψ = 4.396, S = 4.596) and is never used to calibrate.

        [noise kinds: continuous]

        Exact variance: Var_t = v·S(t) (v the variance of one z: σ² for Gaussian, 2λ² for
        Laplace), increasing in t; ``max_variance`` = v·S(T); ``mse`` =
        v·(S(T) − Σ_{k<T} k f(k)²/T).

    References:
        [noise kinds references]
        * M. Henzinger, J. Upadhyay, S. Upadhyay. "Almost tight error bounds on
          differentially private continual counting". SODA 2023.
          https://doi.org/10.1137/1.9781611977554.ch183

    Release by FFT convolution, O(T log T); ``stream()`` computes L z block by block
    (:class:`SqrtNoiseProcess`), amortized O(log T) per step.

    Args:
        horizon: T ≥ 1.
        epsilon: ε > 0.
        delta: δ ∈ (0, 1), or None for pure ε-DP (Laplace only).
        noise: ``"gaussian"`` or ``"laplace"``.
        calibration: Gaussian method (None means ``"analytic"``); for Laplace None.
        rng: Generator, int seed (not for production) or None (OS entropy).
        step_sensitivity: Δ, the largest change of one step.
        step_l2_sensitivity: ℓ₂ bound of one step's change for Laplace noise with a
            delta and vector steps (defaults to ``step_sensitivity``).
    """

    _kernel: NDArray[np.float64] | None = None  # f(0..T-1), computed once
    name = "sqrt"
    #: largest |L[t, s]| (f(0) = 1), used by Laplace tail bounds
    max_noise_coefficient = 1.0

    default_noise = NoiseKind.GAUSSIAN

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """O(T·d): the stream keeps every z drawn (T·d at the end) and computes its noise
        in doubling blocks by FFT (:class:`~dpcount.counting.factorization.sqrt.SqrtNoiseProcess`);
        measured with tracemalloc, the peak is about 6·T·d floats (the z array while it
        is extended, the last block's noise and the FFT buffers). Structure: the
        kernel f(0..T−1) (and the kernel's kept spectra, at most ~7 MiB: FFT lengths
        up to 2^18, not counted here)."""
        return fft_stream_memory(horizon, dim, arrays=1)

    # -- structure --------------------------------------------------------------------
    def coefficients(self) -> NDArray[np.float64]:
        """f(0), …, f(T − 1) (computed once, shared by every noise process; read-only)."""
        if self._kernel is None:
            kernel = sqrt_coefficients(self.horizon)
            kernel.setflags(write=False)
            self._kernel = kernel
        return self._kernel

    def _unit_sensitivities(self) -> tuple[float, float]:
        l1 = sqrt_l1_norm(self.horizon)
        l2 = math.sqrt(sqrt_l2_norm_squared(self.horizon))
        return l1 * (1.0 + SENSITIVITY_MARGIN), l2 * (1.0 + SENSITIVITY_MARGIN)

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """Under (k, b)-participation: R is lower-triangular Toeplitz with f(k) ≥ 0
        non-increasing, so the earliest pattern 0, b, …, (k−1)b is a worst case and both
        sensitivities are exact (:func:`~dpcount.counting.participation.toeplitz_sensitivities`;
        Kalinin & Lampert 2024, Thm 2, https://arxiv.org/abs/2405.13763)."""
        return toeplitz_sensitivities(self.coefficients(), schema)

    def noise_process(self, source: NoiseSource, width: int | None = None) -> SqrtNoiseProcess:
        # the kernel's spectra are kept for the next stream or release (same floats)
        spectra = self.__dict__.setdefault("_spectra", {})
        return SqrtNoiseProcess(self.coefficients(), NoiseBuffer(source, width), spectra=spectra)

    def noise_coefficients(self) -> NDArray[np.float64]:
        """S(t) = Σ_{k<t} f(k)² for t = 1..T."""
        f = self.coefficients()
        return np.cumsum(f * f)

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        for block in self._iter_noise_coefficient_blocks(start):
            yield from block.tolist()

    def _iter_noise_coefficient_blocks(self, start: int) -> Iterator[NDArray[np.float64]]:
        """S(t) for t = start..T, as ``np.cumsum(f * f)`` computes it (sequentially, so
        bit for bit), by blocks of f: O(block) memory, O(T) time (the steps before
        ``start`` are summed too: a closed form would differ in the last bits)."""
        T, acc = self.horizon, 0.0
        for a in range(0, T, _VARIANCE_BLOCK):
            b = min(T, a + _VARIANCE_BLOCK)
            # the kept kernel when a process made it: sqrt_coefficients(T)[a:b], bit for bit
            kept = self._kernel
            sq = sqrt_coefficient_block(a, b) if kept is None else kept[a:b] * kept[a:b]
            if kept is None:
                sq *= sq
            sq[0] += acc  # S(a + 1) = S(a) + f(a)²
            np.cumsum(sq, out=sq)
            acc = float(sq[-1])
            if b >= start:
                yield sq[max(0, start - 1 - a) :]

    def _noise_coefficient_at(self, t: int) -> float:
        return next(self._iter_noise_coefficients(t))

    def dense_factorization(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(L, R) as dense T×T matrices (L = R, L[i, j] = f(i − j)); for T ≤ 4096."""
        T = self.horizon
        if T > 4096:
            raise ValueError(f"dense factorization is for horizon <= 4096, got {T}")
        f = self.coefficients()
        i = np.arange(T)
        lag = i[:, None] - i[None, :]
        L = np.where(lag >= 0, f[np.clip(lag, 0, None)], 0.0)
        return L, L.copy()

    # -- exact error ------------------------------------------------------------------
    def mse(self) -> float:
        """Exact MSE, O(1): σ_z²·(1/T)·Σ_t S(t)."""
        return self.sampler.variance * sqrt_mean_variance_coefficient(self.horizon)

    def max_variance(self) -> float:
        """Exact largest variance, O(1): σ_z²·S(T) (the variance grows with t)."""
        return self.sampler.variance * sqrt_l2_norm_squared(self.horizon)

    def paper_linf_bound(self, beta: float = 0.05) -> float:
        """The paper's Theorem 1.2 expression C_{ε,δ}·Ψ(T)·√(ln(6T/β)), for comparison only.

        Uses the guarantee's (ε, δ), C_{ε,δ} of constant-matters eq. (2) (defined for
        ε < 1) and Ψ(T) of eq. (4), which is below the true Σf² (erratum). Not a
        bound this implementation relies on; see :meth:`linf_bound`.

        Raises:
            ValueError: no (ε, δ) guarantee (pure DP or a test sampler), or ε ≥ 1.
        """
        b = check_beta(beta)
        if self.privacy is None or self.privacy.delta == 0.0:
            raise ValueError("the paper's Theorem 1.2 bound needs an (epsilon, delta) guarantee")
        c = fhu_constant(self.privacy.epsilon, self.privacy.delta)
        T = self.horizon
        return c * self.step_sensitivity * psi_bound(T) * math.sqrt(math.log(6.0 * T / b))
