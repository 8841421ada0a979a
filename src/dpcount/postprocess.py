"""Post-processing of a released series of running counts, chosen by the user.

Each function reads the *released* values only (never the data), so its output has
the release's privacy guarantee: differential privacy is closed under
post-processing (Dwork & Roth, *The Algorithmic Foundations of Differential
Privacy*, 2014, Proposition 2.1).

Accuracy, for running counts ``s`` of non-negative steps (so ``s`` is
non-decreasing and non-negative) and a release ``r``:

* :func:`monotone` is the Euclidean projection of ``r`` onto the closed convex
  cone of non-decreasing sequences (isotonic regression). ``s`` lies in that
  cone, and a projection onto a closed convex set ``C`` is non-expansive towards
  every point of ``C``: ``‖P(r) − s‖₂ ≤ ‖r − s‖₂`` (Bauschke & Combettes, *Convex
  Analysis and Monotone Operator Theory in Hilbert Spaces*, 2nd ed., 2017,
  Prop. 4.16: projections are firmly non-expansive, and ``P(s) = s``).
  This holds for *every* noise draw, not just on average; per step the error can
  grow (it is redistributed along the series).
* :func:`clamp` (``max(r, 0)``) is the projection onto the non-negative orthant,
  which contains ``s``: no step's error grows (``|max(r,0) − s| ≤ |r − s|`` for
  ``s ≥ 0``).
* :func:`round_half_even` moves each value by at most 1/2 (it is not a
  projection: the error of one step can grow by up to 1/2).

Order used by the command line: monotone, then clamp, then round. Clamp and round
are non-decreasing maps, so a monotone series stays monotone.

The exact standard deviations that come with a release (its ``std`` column)
describe the *raw* release, not the post-processed one; the command line writes
both the raw release and its std next to the post-processed values. The monotone
fit has no exact per-step error and is biased step by step: correlated noise
drifts for many steps and the fit follows it, so a sparse series can look flat,
too low, over a long stretch. :func:`monotone_gls` (the fit in the metric of the
exact noise covariance) is non-expansive in that metric, but its ℓ₂ error was
larger than the isotonic fit's (and mostly than the raw release's) on every real
series measured (benchmarks/bench_monotone.py, docs/tutorials/dashboard.md): it
is kept for comparison, and ``--monotone`` is the isotonic fit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcount._validate import as_array

__all__ = [
    "GLS_MAX_HORIZON",
    "MONOTONE_NOTE",
    "clamp",
    "gls_fitter",
    "isotonic_pav",
    "monotone",
    "monotone_gls",
    "noise_matrix",
    "round_half_even",
]


#: what a front end says about a monotone fit (its columns: the fit ``private_count``,
#: the release ``raw_private_count`` and its exact std ``raw_std``)
MONOTONE_NOTE = (
    "raw_std is the exact error of raw_private_count only; the fitted private_count has "
    "no exact per-step error: its l2 error summed over the series is at most the raw "
    "release's, but single steps can be off by more, with a bias (it follows drifting "
    "correlated noise)"
)


def _vector(name: str, values: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(as_array(name, values), dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite")
    return arr


def isotonic_pav(values: ArrayLike) -> NDArray[np.float64]:
    """The non-decreasing least-squares fit by pool-adjacent-violators (Ayer et al.,
    *Ann. Math. Statist.* 26, 1955): O(n), written here; :func:`monotone` uses
    scipy's ``isotonic_regression`` when available (scipy ≥ 1.12), else this."""
    y = _vector("values", values)
    means: list[float] = []
    sizes: list[int] = []
    for v in y.tolist():
        mean, size = v, 1
        while means and means[-1] > mean:  # pool with the previous block
            prev_mean, prev_size = means.pop(), sizes.pop()
            total = prev_size + size
            mean = (prev_mean * prev_size + mean * size) / total
            size = total
        means.append(mean)
        sizes.append(size)
    return np.repeat(np.asarray(means, dtype=np.float64), sizes)


def monotone(values: ArrayLike) -> NDArray[np.float64]:
    """The Euclidean projection of ``values`` onto non-decreasing sequences (isotonic
    regression; see the module docstring for the ℓ₂ guarantee)."""
    y = _vector("values", values)
    try:
        from scipy.optimize import isotonic_regression
    except ImportError:  # scipy < 1.12
        return isotonic_pav(y)
    fit: Any = isotonic_regression(y, increasing=True)
    return np.asarray(fit.x, dtype=np.float64)


def clamp(values: ArrayLike, low: float = 0.0) -> NDArray[np.float64]:
    """``max(values, low)``: the projection onto ``[low, ∞)`` per step."""
    return np.maximum(_vector("values", values), low)


def round_half_even(values: ArrayLike) -> NDArray[np.int64]:
    """The nearest integers (ties to even), as int64; values must be below 2^53."""
    y = _vector("values", values)
    if (np.abs(y) >= 2.0**53).any():
        raise ValueError("values must be below 2^53 in magnitude to round exactly")
    return np.rint(y).astype(np.int64)


#: the largest horizon :func:`monotone_gls` takes (its dense T × T whitened system)
GLS_MAX_HORIZON = 4096


class _UnitDraws:
    """A sampler whose k-th scalar draw is the k-th unit vector of the trailing axis:
    running a linear noise process with it gives the matrix L of its noise (noise of
    step t = Σ_k L[t, k] z_k for i.i.d. draws z). ``size=None`` counts draws only."""

    integer = False

    def __init__(self, width: int | None) -> None:
        self.width = width
        self.drawn = 0

    @property
    def variance(self) -> float:
        return 1.0

    def sample(self, rng: np.random.Generator, size: Any) -> NDArray[np.float64]:
        shape = (size,) if isinstance(size, int) else tuple(size)
        draws = int(np.prod(shape[:-1], dtype=np.int64))
        out = np.zeros((draws, shape[-1]))
        if self.width is not None:
            if shape[-1] != self.width or self.drawn + draws > self.width:
                raise RuntimeError("the noise process drew differently on the second pass")
            out[np.arange(draws), self.drawn + np.arange(draws)] = 1.0
        self.drawn += draws
        return out.reshape(shape)


def noise_matrix(mechanism: Any, steps: int) -> NDArray[np.float64]:
    """``L`` (steps × draws) with ``release noise = L z`` for i.i.d. unit-variance draws
    ``z``, so the exact noise covariance of the first ``steps`` releases is
    ``sampler.variance · L Lᵀ``. Read off the mechanism's own noise process (two
    passes: count the draws, then draw unit vectors), so it is exact for every
    linear mechanism without a formula per class."""
    counter = _UnitDraws(None)
    mechanism.with_sampler(counter).release(np.zeros((steps, 1)))
    probe = _UnitDraws(counter.drawn)
    noise = mechanism.with_sampler(probe).release(np.zeros((steps, counter.drawn)))
    return np.asarray(noise, dtype=np.float64)


def monotone_gls(values: ArrayLike, mechanism: Any) -> NDArray[np.float64]:
    """The closest series with non-negative steps (non-decreasing and ≥ 0) in the metric
    of the release's exact noise covariance Σ (generalized least squares under the
    constraint): ``argmin (r − s)ᵀ Σ⁻¹ (r − s)`` over ``s = cumsum(d), d ≥ 0``.

    Σ is read off ``mechanism`` (:func:`noise_matrix`); the whitened problem
    ``min ‖G⁻¹(r − C d)‖₂, d ≥ 0`` (Σ = G Gᵀ, C the prefix-sum matrix) is solved by
    non-negative least squares (Lawson & Hanson, *Solving Least Squares Problems*,
    1974, ch. 23; scipy's ``nnls``).

    Guarantee: the fit is the projection of ``r`` onto a closed convex set holding
    the true running counts of non-negative steps in the inner product ⟨u, v⟩ =
    uᵀ Σ⁻¹ v, so ``‖P(r) − s‖_Σ⁻¹ ≤ ‖r − s‖_Σ⁻¹`` for every noise draw (Bauschke &
    Combettes 2017, Prop. 4.16). Unlike :func:`monotone` it weighs each step by
    how the noise is correlated: a stretch where correlated noise drifts is not
    followed as if each step were an independent reading. Dense: O(T²) memory,
    horizon at most :data:`GLS_MAX_HORIZON`.
    """

    r = _vector("values", values)
    return gls_fitter(mechanism, r.size)(r)


def gls_fitter(mechanism: Any, steps: int) -> Callable[[ArrayLike], NDArray[np.float64]]:
    """:func:`monotone_gls` for ``steps`` releases of ``mechanism``, with the whitened
    system computed once (for fitting many releases of one mechanism)."""
    from scipy.linalg import cholesky, solve_triangular
    from scipy.optimize import nnls

    if steps > GLS_MAX_HORIZON:
        raise ValueError(
            f"values must have at most {GLS_MAX_HORIZON} steps for the covariance fit, got {steps}"
        )
    L = noise_matrix(mechanism, steps)
    cov = L @ L.T  # the unit-variance covariance: its scale does not move the fit
    # a relative 1e-12 ridge guards the Cholesky factorization against rounding
    G = cholesky(cov + 1e-12 * np.trace(cov) / steps * np.eye(steps), lower=True)
    A = solve_triangular(G, np.tril(np.ones((steps, steps))), lower=True)

    def fit(values: ArrayLike) -> NDArray[np.float64]:
        r = _vector("values", values)
        if r.size != steps:
            raise ValueError(f"values must have {steps} steps, got {r.size}")
        d, _ = nnls(A, solve_triangular(G, r, lower=True), maxiter=50 * steps)
        return np.cumsum(d)

    return fit
