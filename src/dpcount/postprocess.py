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
both the raw release and its std next to the post-processed values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcount._validate import as_array

__all__ = ["clamp", "isotonic_pav", "monotone", "round_half_even"]


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
