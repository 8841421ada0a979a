"""Balls-in-bins batches and their Monte Carlo amplified accounting (any Toeplitz encoder).

Balls-in-bins sampling (``sampling="balls-in-bins"`` of
:func:`~dpcount.training.gaussian_privatizer`): every example is put in one of b bins
independently and uniformly at random, once; step t uses bin (t − 1) mod b
(:func:`balls_in_bins_batches`). Each example is then in exactly the k steps J + 1,
J + 1 + b, …, J + 1 + (k − 1)·b of its secret bin J: the same (k, b) participation as
fixed batches, but the adversary does not know J.

Dominating pair. Choquette-Choo, Ganesh, Haque, Steinke, Thakurta, "Near Exact Privacy
Amplification for Matrix Mechanisms", ICLR 2025 (arXiv:2410.06266), balls-in-bins
analysis: for a lower-triangular encoder C with non-negative entries, clipped gradients
(ℓ₂ ≤ 1 per unit of the clip norm) and add/remove-one neighbouring, the run
C·G + Z (Z i.i.d. N(0, σ²), adaptive gradients) is dominated by the pair

    P = (1/b)·Σ_j N(C·x_j, σ²·I_T),    Q = N(0, σ²·I_T),

x_j ∈ {0, 1}^T the indicator of the steps of bin j. This is the pair jax_privacy's
``experimental.monte_carlo.sample_generation`` samples for balls-in-bins (with C a
lower-triangular Toeplitz matrix given by its first column c, non-banded allowed). The
run is (ε, δ)-DP for δ = max(H_{e^ε}(P‖Q), H_{e^ε}(Q‖P)) (the hockey-stick divergences;
both directions, add and remove).

No closed form is known for this δ; it is estimated by Monte Carlo. The privacy loss
of y depends on y only through the b inner products ⟨y, v_j⟩, v_j = C·x_j, so one
sample costs b normals and a b × b triangular product (not T): with G = VᵀV (V = [v_0
… v_{b−1}], positive definite) and its Cholesky factor L, ⟨y, v_j⟩ = (G·e_J)_j + σ·(L·ξ)_j
under P (J uniform, ξ ~ N(0, I_b)) and σ·(L·ξ)_j under Q, and

    ln(P/Q)(y) = logsumexp_j (2⟨y, v_j⟩ − G_jj) / (2σ²) − ln b.

Each direction's δ is the mean of X = (1 − e^{ε − ℓ})₊ ∈ [0, 1] over loss samples ℓ of
that direction (ℓ = ln P/Q under P; ℓ = ln Q/P = −ln P/Q under Q).

Confidence. The estimate is never used as is: :meth:`BallsInBinsAccountant.certify`
states the **upper confidence bound** at level 1 − α (default α = 10⁻³) of Hoeffding's
Chernoff–KL inequality for the mean of m i.i.d. variables in [0, 1] (W. Hoeffding,
"Probability inequalities for sums of bounded random variables", JASA 1963, Theorem 1):
P(X̄ ≤ a) ≤ exp(−m·kl(a, μ)) for a ≤ μ, so μ ≤ sup{u ≥ X̄ : m·kl(X̄, u) ≤ ln(1/α)}
with probability ≥ 1 − α over the accountant's draws (which are independent of the
data). The statement is: with probability ≥ 1 − α over those draws, the run is (ε, δ)-DP
with δ the larger of the two directions' bounds. :meth:`BallsInBinsAccountant.calibrate`
searches σ on common random numbers and then certifies the chosen σ on **fresh**
samples (no selection on the certifying draws); retries split α (α/2, α/4, …, so all
attempts together fail with probability ≤ α); if none passes, it returns the
unamplified σ (a true (ε, δ) guarantee by the convexity of the hockey-stick divergence
in the mixture). The sampling-free Rényi bound of Schuchardt & Kalinin (arXiv:2601.21636),
a deterministic statement, is :mod:`dpcount.training.renyi_allocation`.

References:
    * C. A. Choquette-Choo, A. Ganesh, S. Haque, T. Steinke, A. Thakurta. "Near exact
      privacy amplification for matrix mechanisms". ICLR 2025.
      https://arxiv.org/abs/2410.06266
    * L. Chua, B. Ghazi, C. Harrison, E. Leeman, P. Kamath, R. Kumar, P. Manurangsi,
      A. Sinha, C. Zhang. "Balls-and-bins sampling for DP-SGD". AISTATS 2025.
      https://arxiv.org/abs/2412.16802
    * W. Hoeffding. "Probability inequalities for sums of bounded random variables".
      JASA 58(301), 1963. https://doi.org/10.1080/01621459.1963.10500830
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import rel_entr

from dpcount._validate import check_integer, check_real, check_real_array
from dpcount.privacy.calibration import gaussian_sigma
from dpcount.privacy.rng import RNGLike, as_generator

__all__ = [
    "BallsInBinsAccountant",
    "BallsInBinsBatches",
    "MonteCarlo",
    "MonteCarloCertificate",
    "balls_in_bins_batches",
    "kl_upper_confidence",
]

#: floats per chunk of the Monte Carlo (chunk rows × bins; memory: a few times 16 MiB)
_CHUNK_FLOATS = 1 << 21
#: relative outward margin on every privacy loss (covers the float rounding of a loss)
_LOSS_MARGIN = 1e-9
#: the search aims at this fraction of the threshold the certification must meet
_SEARCH_MARGIN = 0.8
#: certification attempts before falling back to the unamplified σ
_ATTEMPTS = 4


def kl_upper_confidence(mean: float, samples: int, alpha: float) -> float:
    """The (1 − α) upper confidence bound of the mean μ of i.i.d. variables in [0, 1]
    from their sample mean over m samples: sup{u ∈ [X̄, 1] : m·kl(X̄, u) ≤ ln(1/α)},
    kl the Bernoulli relative entropy (Hoeffding 1963, Theorem 1), by bisection keeping
    the upper end (to a relative 1e-9): P(μ > this) ≤ α."""
    x = check_real("mean", mean, ge=0, le=1)
    m = check_integer("samples", samples, ge=1)
    a = check_real("alpha", alpha, gt=0, lt=1)
    budget = math.log(1.0 / a) / m

    def kl(u: float) -> float:
        return float(rel_entr(x, u) + rel_entr(1.0 - x, 1.0 - u))

    if x >= 1.0 or kl(1.0 - 1e-300) <= budget:
        return 1.0
    lo, hi = x, 1.0  # kl(lo) = 0 ≤ budget < kl(hi)
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if kl(mid) <= budget else (lo, mid)
    return hi


@dataclass(frozen=True)
class BallsInBinsBatches:
    """The batches of balls-in-bins sampling: call :meth:`batch` once per step.

    Attributes:
        bins: the b bins (example indices; **secret**: which bin an example is in is
            what the amplification hides; never log or release them).
    """

    bins: tuple[NDArray[np.int64], ...]

    def __repr__(self) -> str:
        return f"BallsInBinsBatches(bins={len(self.bins)})"

    def batch(self, step: int) -> NDArray[np.int64]:
        """The example indices of step ``step`` (1-based): bin (step − 1) mod b. Normalize
        the clipped sum by the public expected batch size n/b, never by this length."""
        t = check_integer("step", step, ge=1)
        return self.bins[(t - 1) % len(self.bins)]


def balls_in_bins_batches(
    examples: int, batches_per_epoch: int, *, rng: RNGLike = None
) -> BallsInBinsBatches:
    """Put each of ``range(examples)`` in one of ``batches_per_epoch`` bins independently
    and uniformly at random (bins may be empty or uneven: that is the sampling).

    Args:
        examples: n ≥ 1.
        batches_per_epoch: b ≥ 1 bins.
        rng: None (default: a cryptographically secure generator from OS entropy: the
            assignment is part of the privacy mechanism), a Generator or an int seed
            (tests only).
    """
    n = check_integer("examples", examples, ge=1)
    b = check_integer("batches_per_epoch", batches_per_epoch, ge=1)
    which = as_generator(rng).integers(0, b, size=n)
    order = np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[order], np.arange(1, b))
    return BallsInBinsBatches(tuple(p.astype(np.int64) for p in np.split(order, cuts)))


@dataclass(frozen=True)
class MonteCarloCertificate:
    """A Monte Carlo (ε, δ) statement for one noise multiplier (module docstring).

    Attributes:
        noise_multiplier: σ per unit of the step sensitivity (clip norm).
        epsilon: ε.
        delta: the larger of the two directions' (1 − α) upper confidence bounds.
        estimate: the larger of the two point estimates (for information only).
        samples: m, the samples of each direction.
        alpha: α: the statement holds with probability ≥ 1 − α over the accountant's
            draws.
        amplified: False when this is the unamplified fallback (then δ is exact:
            the Gaussian mechanism's, and ``samples`` is 0).
    """

    noise_multiplier: float
    epsilon: float
    delta: float
    estimate: float
    samples: int
    alpha: float
    amplified: bool = True


@dataclass(frozen=True)
class MonteCarlo:
    """How the balls-in-bins accounting samples (module docstring).

    Attributes:
        samples: m per direction (None: max(10⁵, ⌈20/δ⌉); the bound needs m ≳ 7/δ
            to certify anything at α = 10⁻³).
        alpha: the statement holds with probability ≥ 1 − α over the accountant's draws.
        rng: the accountant's randomness (None: OS entropy; it need not be secret, but
            must not depend on the data).
    """

    samples: int | None = None
    alpha: float = 1e-3
    rng: RNGLike = None

    def sample_count(self, delta: float) -> int:
        """m for a target δ."""
        if self.samples is not None:
            return check_integer("monte_carlo.samples", self.samples, ge=1)
        return max(100_000, math.ceil(20.0 / delta))


def check_allocation(
    encoder: object, *, epochs: int, batches_per_epoch: int
) -> tuple[NDArray[np.float64], int, int]:
    """(c_0 … c_{T−1}, k, b) of a balls-in-bins run, T = k·b, checked: the dominating
    pair (module docstring) needs a non-negative encoder with c_0 > 0.

    Raises:
        ValueError: a negative or non-finite coefficient, c_0 ≤ 0 (naming ``encoder``),
            or a count below 1 (naming it).
    """
    c = check_real_array("encoder", encoder, ndim=1)
    k = check_integer("epochs", epochs, ge=1)
    b = check_integer("batches_per_epoch", batches_per_epoch, ge=1)
    if c.size == 0 or c[0] <= 0 or np.any(c < 0):
        raise ValueError(
            "encoder must be non-negative with encoder[0] > 0 (the dominating pair of "
            "arXiv:2410.06266 needs a non-negative C)"
        )
    return c[: k * b], k, b


class BallsInBinsAccountant:
    """Monte Carlo accountant of balls-in-bins sampling for a Toeplitz encoder.

    Args:
        encoder: c_0, c_1, …: the first column of the lower-triangular Toeplitz encoder
            C (non-negative, c_0 > 0; shorter than T means banded, zeros after).
        epochs: k, the participations of each example.
        batches_per_epoch: b, the bins (T = k·b steps).

    Raises:
        ValueError: a negative or non-finite coefficient, c_0 ≤ 0 (naming ``encoder``).
    """

    def __init__(self, encoder: object, *, epochs: int, batches_per_epoch: int) -> None:
        self.encoder, self.epochs, self.bins = check_allocation(
            encoder, epochs=epochs, batches_per_epoch=batches_per_epoch
        )
        self.modes = self._modes(self.encoder, self.epochs, self.bins)
        self.gram = self.modes.T @ self.modes
        self._chol = np.linalg.cholesky(self.gram)
        self._diag = np.diag(self.gram).copy()

    @staticmethod
    def _modes(c: NDArray[np.float64], k: int, b: int) -> NDArray[np.float64]:
        """V (T × b): column j is C·x_j, x_j the indicator of steps j, j + b, …."""
        T = k * b
        full = np.zeros(T)
        full[: c.size] = c
        V = np.zeros((T, b))
        for j in range(b):
            for r in range(k):
                start = j + r * b
                V[start:, j] += full[: T - start]
        return V

    @property
    def unsampled_sensitivity(self) -> float:
        """max_j ‖C·x_j‖: the ℓ₂ sensitivity without amplification (per unit clip)."""
        return float(math.sqrt(self._diag.max()))

    def unsampled_noise_multiplier(self, epsilon: float, delta: float) -> float:
        """σ of the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8) for that
        sensitivity: (ε, δ)-DP without amplification, and so with it (the hockey-stick
        divergence is jointly convex, and P is a mixture of such Gaussians)."""
        return float(gaussian_sigma(self.unsampled_sensitivity, epsilon, delta))

    # -- privacy loss samples ---------------------------------------------------------
    def _chunks(
        self, samples: int, rng: np.random.Generator
    ) -> Iterator[tuple[NDArray[np.float64], NDArray[np.int64]]]:
        """(W, J) per chunk: W = L·ξ (b × r: column i is sample i, ⟨Z, v_j⟩ = σ·W_ji)
        and the bins J (r)."""
        b = self.bins
        cols = max(256, _CHUNK_FLOATS // b)
        for start in range(0, samples, cols):
            r = min(cols, samples - start)
            xi = rng.standard_normal((b, r))
            yield self._chol @ xi, rng.integers(0, b, size=r)

    def _loss(self, dots: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
        """ln(P/Q)(y) from the b inner products ⟨y, v_j⟩ (b × r: one column per y)."""
        a = dots * (1.0 / (sigma * sigma))
        a -= (self._diag / (2.0 * sigma * sigma))[:, None]
        top = a.max(axis=0)
        a -= top
        np.exp(a, out=a)
        return np.asarray(np.log(a.sum(axis=0)) + top - math.log(self.bins), dtype=np.float64)

    def privacy_losses(
        self, sigma: float, samples: int, *, rng: RNGLike = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``samples`` privacy-loss samples of each direction at noise multiplier σ:
        ln(P/Q) under P (add) and ln(Q/P) under Q (remove), each moved outward by a
        relative 1e-9 (float rounding)."""
        s = check_real("sigma", sigma, gt=0)
        m = check_integer("samples", samples, ge=1)
        add, remove = [], []
        for W, J in self._chunks(m, as_generator(rng)):
            noise = s * W
            add.append(self._loss(noise + self.gram[:, J], s))
            remove.append(-self._loss(noise, s))
        out = [np.concatenate(x) for x in (add, remove)]
        return out[0] + _LOSS_MARGIN * (1 + np.abs(out[0])), out[1] + _LOSS_MARGIN * (
            1 + np.abs(out[1])
        )

    @staticmethod
    def _delta_terms(epsilon: float, losses: NDArray[np.float64]) -> float:
        """The sample mean of (1 − e^{ε − ℓ})₊."""
        return float(np.mean(-np.expm1(np.minimum(epsilon - losses, 0.0))))

    def estimate(
        self, sigma: float, epsilon: float, samples: int, *, rng: RNGLike = None
    ) -> tuple[float, float]:
        """The point estimates (add, remove) of δ at ε (not a guarantee: see certify)."""
        e = check_real("epsilon", epsilon, ge=0)
        add, remove = self.privacy_losses(sigma, samples, rng=rng)
        return self._delta_terms(e, add), self._delta_terms(e, remove)

    def certify(
        self,
        sigma: float,
        epsilon: float,
        *,
        samples: int,
        alpha: float = 1e-3,
        rng: RNGLike = None,
    ) -> MonteCarloCertificate:
        """The (1 − α) upper confidence bound on δ(ε) at noise multiplier σ, from
        ``samples`` fresh samples of each direction (module docstring)."""
        a = check_real("alpha", alpha, gt=0, lt=1)
        add, remove = self.estimate(sigma, epsilon, samples, rng=rng)
        bound = max(kl_upper_confidence(d, samples, a) for d in (add, remove))
        return MonteCarloCertificate(
            float(sigma), float(epsilon), bound, max(add, remove), samples, a
        )

    # -- calibration -----------------------------------------------------------------
    def _grid_deltas(
        self, sigmas: NDArray[np.float64], epsilon: float, samples: int, seed: int
    ) -> NDArray[np.float64]:
        """max(add, remove) point estimates at each σ, on common random numbers."""
        sums = np.zeros((2, sigmas.size))
        for W, J in self._chunks(samples, np.random.default_rng(seed)):
            for i, s in enumerate(sigmas):
                add = self._loss(s * W + self.gram[:, J], s)
                rem = -self._loss(s * W, s)
                for row, loss in enumerate((add, rem)):
                    sums[row, i] += np.sum(-np.expm1(np.minimum(epsilon - loss, 0.0)))
        return np.asarray(sums.max(axis=0) / samples, dtype=np.float64)

    def _search(
        self, epsilon: float, aim: float, samples: int, lo: float, hi: float, seed: int
    ) -> float:
        """The smallest σ of a geometric grid on [lo, hi] whose CRN estimate is ≤ aim,
        refined twice (12 points on m/16 samples, then twice 6 points on m/4)."""
        quarter = max(samples // 4, 1)
        for count, points in ((max(samples // 16, 1), 12), (quarter, 6), (quarter, 6)):
            grid = np.geomspace(lo, hi, points)
            ok = np.nonzero(self._grid_deltas(grid, epsilon, count, seed) <= aim)[0]
            if ok.size == 0:
                return float(hi)
            first = int(ok[0])
            lo, hi = (grid[max(first - 1, 0)], grid[first]) if first > 0 else (grid[0], grid[0])
            if lo == hi:
                return float(hi)
        return float(hi)

    def calibrate(
        self,
        epsilon: float,
        delta: float,
        *,
        samples: int,
        alpha: float = 1e-3,
        rng: RNGLike = None,
    ) -> MonteCarloCertificate:
        """The smallest noise multiplier found whose certificate (fresh samples, upper
        confidence bound at 1 − α overall) has δ ≤ ``delta``; the unamplified σ (exact
        certificate, ``amplified=False``) if the Monte Carlo cannot beat it, or with one
        bin (then the pair is the Gaussian mechanism itself: the closed form is exact).

        Search: common random numbers on a geometric grid between a quarter of the
        unamplified σ and it, aiming at 0.8 × the largest point estimate whose bound
        passes; then certification on fresh draws, σ × 1.02 per failed attempt (attempt
        i at α/2^i)."""
        e = check_real("epsilon", epsilon, gt=0)
        d = check_real("delta", delta, gt=0, lt=1)
        m = check_integer("samples", samples, ge=1)
        a = check_real("alpha", alpha, gt=0, lt=1)
        generator = as_generator(rng)
        fallback = self.unsampled_noise_multiplier(e, d)
        threshold = _largest_passing_mean(d, m, a / 2)
        if threshold <= 0 or self.bins == 1:  # too few samples; one bin: no amplification
            return MonteCarloCertificate(fallback, e, d, d, 0, a, amplified=False)
        seed = int(generator.integers(0, 2**63 - 1))
        sigma = self._search(e, _SEARCH_MARGIN * threshold, m, 0.25 * fallback, fallback, seed)
        for attempt in range(1, _ATTEMPTS + 1):
            if sigma >= fallback:
                break
            cert = self.certify(sigma, e, samples=m, alpha=a / 2**attempt, rng=generator)
            if cert.delta <= d:
                return MonteCarloCertificate(sigma, e, cert.delta, cert.estimate, m, a)
            sigma *= 1.02
        return MonteCarloCertificate(fallback, e, d, d, 0, a, amplified=False)


def _largest_passing_mean(delta: float, samples: int, alpha: float) -> float:
    """The largest sample mean whose (1 − α) upper confidence bound is ≤ δ (0 if none)."""
    if kl_upper_confidence(0.0, samples, alpha) > delta:
        return 0.0
    lo, hi = 0.0, delta
    while hi - lo > 1e-6 * delta:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if kl_upper_confidence(mid, samples, alpha) <= delta else (lo, mid)
    return lo
