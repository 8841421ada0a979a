"""Released histograms that answer range and rectangle queries with exact error bars.

A release is statistically transparent: it is "true answer + noise" with a noise law
known exactly (the mechanism's noise model), so each answer comes with its exact
variance and (Gaussian noise) an exact confidence interval. Bounds are 0-based and inclusive:
``query(lo, hi)`` is x[lo] + ... + x[hi] (1-D), or the sum over rows lo[0]..hi[0]
and columns lo[1]..hi[1] (2-D, ``lo``/``hi`` with a last axis of length 2). Scalars
or arrays (broadcast together); each answer costs O(1) from prefix sums (summed-area
table in 2-D), its variance O(log n) from the noise model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

from dpcount._validate import (
    as_array,
    check_index_array,
    check_probability,
    check_real_array,
    check_real_dtype,
)
from dpcount.privacy.guarantee import PrivacyGuarantee
from dpcount.ranges._models import KroneckerModel, NoiseModel

__all__ = ["HistogramRelease", "RangeAnswers", "range_bounds"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _scalar_or_array(values: FloatArray) -> Any:
    return float(values) if values.ndim == 0 else values


def range_bounds(lo: Any, hi: Any, shape: tuple[int, ...]) -> tuple[IntArray, ...]:
    """Validated inclusive bounds → half-open cuts per axis, broadcast together.

    1-D: returns (a, b) with a = lo, b = hi + 1. 2-D: (row a, row b, col a, col b).

    Raises:
        TypeError: non-integer bounds.
        ValueError: out-of-range bounds, lo > hi, or (2-D) a last axis not of length 2.
    """
    if len(shape) == 1:
        a = check_index_array("lo", lo, size=shape[0])
        b = check_index_array("hi", hi, size=shape[0])
        a, b = _broadcast(a, b)
        _check_order(a, b, "lo", "hi")
        return a, b + 1
    lo_arr, hi_arr = as_array("lo", lo), as_array("hi", hi)
    for name, arr in (("lo", lo_arr), ("hi", hi_arr)):
        if arr.ndim == 0 or arr.shape[-1] != 2:
            raise ValueError(
                f"{name} must have a last axis of length 2 (row, column) for a 2-D release, "
                f"got shape {arr.shape}"
            )
    r0 = check_index_array("lo[..., 0] (row)", lo_arr[..., 0], size=shape[0])
    c0 = check_index_array("lo[..., 1] (column)", lo_arr[..., 1], size=shape[1])
    r1 = check_index_array("hi[..., 0] (row)", hi_arr[..., 0], size=shape[0])
    c1 = check_index_array("hi[..., 1] (column)", hi_arr[..., 1], size=shape[1])
    r0, r1, c0, c1 = _broadcast(r0, r1, c0, c1)
    _check_order(r0, r1, "lo row", "hi row")
    _check_order(c0, c1, "lo column", "hi column")
    return r0, r1 + 1, c0, c1 + 1


def _broadcast(*arrays: IntArray) -> list[IntArray]:
    try:
        return list(np.broadcast_arrays(*arrays))
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(
            f"lo and hi must have shapes that broadcast together, got {shapes}"
        ) from None


def _check_order(a: IntArray, b: IntArray, lo_name: str, hi_name: str) -> None:
    bad = a > b
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
        raise ValueError(
            f"{lo_name} must be <= {hi_name}, got {lo_name}={int(a[i])} > {hi_name}={int(b[i])}"
        )


def _z(level: float) -> float:
    lv = check_probability("level", level)
    return float(ndtri(0.5 + lv / 2.0))


class RangeAnswers:
    """Common interface: answers, exact variances and intervals for ranges/rectangles."""

    shape: tuple[int, ...]
    privacy: PrivacyGuarantee | None
    mechanism: str

    def query(self, lo: Any, hi: Any) -> Any:
        """Released sum over the inclusive range [lo, hi] (a float, or an array)."""
        return _scalar_or_array(self._answer(*range_bounds(lo, hi, self.shape)))

    def range_variance(self, lo: Any, hi: Any) -> Any:
        """Exact variance of ``query(lo, hi)`` (its error is N(0, this))."""
        return _scalar_or_array(self._variance(*range_bounds(lo, hi, self.shape)))

    def interval(self, lo: Any, hi: Any, level: float = 0.95) -> tuple[Any, Any]:
        """Exact ``level`` confidence interval for the true sum: answer ∓ z·√variance.

        With ``noise="gaussian"`` the noise is Gaussian with the exact variance of
        :meth:`range_variance`, so the interval covers the true sum with probability
        exactly ``level``. With ``noise="discrete-gaussian"`` the noise is a sum of
        discrete Gaussians with that exact variance but not normal: the interval is the
        normal approximation and its coverage is close to, not exactly, ``level``
        (lattice effects grow as σ falls towards 1).
        """
        z = _z(level)
        cuts = range_bounds(lo, hi, self.shape)
        answer = self._answer(*cuts)
        half = z * np.sqrt(self._variance(*cuts))
        return _scalar_or_array(answer - half), _scalar_or_array(answer + half)

    def _answer(self, *cuts: IntArray) -> FloatArray:
        raise NotImplementedError

    def _variance(self, *cuts: IntArray) -> FloatArray:
        raise NotImplementedError


class HistogramRelease(RangeAnswers):
    """A consistent release: one noisy histogram ``values``; every answer is a sum of it.

    Internal consistency (Proposition 2.3): any range's answer equals the sum of
    ``values`` over it, so the answers of nested and adjacent ranges add up.
    """

    def __init__(
        self,
        values: FloatArray,
        model: NoiseModel | KroneckerModel,
        privacy: PrivacyGuarantee | None,
        mechanism: str,
    ) -> None:
        self.values = values
        self.values.flags.writeable = False
        self.shape = values.shape
        self.privacy = privacy
        self.mechanism = mechanism
        self._model = model
        if values.ndim == 1:
            prefix = np.zeros(values.size + 1)
            np.cumsum(values, out=prefix[1:])
        else:
            prefix = np.zeros((values.shape[0] + 1, values.shape[1] + 1))
            np.cumsum(values, axis=0, out=prefix[1:, 1:])
            np.cumsum(prefix[1:, 1:], axis=1, out=prefix[1:, 1:])
        self._prefix = prefix

    def __repr__(self) -> str:
        return f"HistogramRelease(mechanism={self.mechanism!r}, shape={self.shape})"

    def _answer(self, *cuts: IntArray) -> FloatArray:
        p = self._prefix
        if len(cuts) == 2:
            a, b = cuts
            return p[b] - p[a]
        r0, r1, c0, c1 = cuts
        return p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0]

    def _variance(self, *cuts: IntArray) -> FloatArray:
        model = self._model
        if isinstance(model, KroneckerModel):
            return model.rectangle_variance(*cuts)
        return model.range_variance(*cuts)

    def answer(self, weights: Any) -> FloatArray:
        """Answers W·values of a dense workload (rows of ``weights``, 1-D releases)."""
        w = check_weights(weights, self.shape)
        return w @ self.values

    def query_variance(self, weights: Any) -> FloatArray:
        """Exact variance of each row of :meth:`answer` (1-D releases)."""
        w = check_weights(weights, self.shape)
        if isinstance(self._model, KroneckerModel):
            raise ValueError("dense workloads are supported for 1-D releases only")
        return self._model.query_variance(w)

    def max_abs_range_sum(self) -> float:
        """max over all ranges of |sum of values| = max − min of the prefix sums, O(n).

        In 2-D: over all rectangles, O(n₁²·n₂). With x = 0 this is the worst error of
        one draw over all ranges (Def. 3.13's inner maximum).
        """
        p = self._prefix
        if p.ndim == 1:
            return float(p.max() - p.min())
        # 2-D: for every pair of row cuts r0 < r1 the rectangle sums are differences of
        # the column prefix sums of P[r1] − P[r0]: O(n₁²·n₂).
        best = 0.0
        for r0 in range(p.shape[0] - 1):
            strips = p[r0 + 1 :] - p[r0]
            best = max(best, float(np.max(strips.max(axis=1) - strips.min(axis=1))))
        return best


def check_weights(weights: Any, shape: tuple[int, ...]) -> FloatArray:
    if len(shape) != 1:
        raise ValueError("dense workloads are supported for 1-D releases only")
    w = check_real_dtype("weights", as_array("weights", weights))
    if w.ndim != 2 or w.shape[1] != shape[0]:
        raise ValueError(f"weights must have shape (queries, {shape[0]}), got shape {w.shape}")
    return check_real_array("weights", w, allow_empty=True)
