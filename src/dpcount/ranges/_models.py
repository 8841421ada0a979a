"""Exact noise models of the range-query mechanisms (data independent).

Every mechanism's release is "true answer + noise" with a known Gaussian noise law,
so each model answers, exactly: the variance of the noise of each range
([a, b) as cuts, half-open), of each dense linear query, and the sum and the maximum
of the range variances over all n(n+1)/2 ranges. :class:`HalvingCascade` (in
:mod:`._halving`) covers the correlated mechanism, Privelet and Hierarchical; this
module has the identity, a dense covariance (EigenDesign) and the 2-D Kronecker
product of two 1-D models.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["DenseCovariance", "IdentityCovariance", "KroneckerModel", "NoiseModel"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class NoiseModel(Protocol):
    """Exact variance functionals of a 1-D additive noise law over n cells."""

    n: int

    def range_variance(self, starts: IntArray, stops: IntArray) -> FloatArray: ...

    def query_variance(self, weights: FloatArray) -> FloatArray: ...

    def all_ranges_total(self) -> float: ...

    def all_ranges_max(self) -> float: ...


class IdentityCovariance:
    """I.i.d. noise of variance v per cell: Var[a, b) = v·(b − a)."""

    def __init__(self, n: int, variance: float) -> None:
        self.n = n
        self.variance = float(variance)

    def range_variance(self, starts: IntArray, stops: IntArray) -> FloatArray:
        return self.variance * (np.asarray(stops) - np.asarray(starts)).astype(np.float64)

    def query_variance(self, weights: FloatArray) -> FloatArray:
        w = np.asarray(weights, dtype=np.float64)
        return np.asarray(self.variance * np.einsum("ij,ij->i", w, w), dtype=np.float64)

    def all_ranges_total(self) -> float:
        """v·Σ_{len=1..n} len·(n − len + 1) = v·n(n+1)(n+2)/6."""
        n = self.n
        return self.variance * n * (n + 1) * (n + 2) / 6.0

    def all_ranges_max(self) -> float:
        return self.variance * self.n


class DenseCovariance:
    """An explicit n×n covariance Σ (small n): Var[a, b) from its 2-D prefix sums."""

    def __init__(self, covariance: FloatArray) -> None:
        cov = np.asarray(covariance, dtype=np.float64)
        self.n = cov.shape[0]
        self.covariance = cov
        table = np.zeros((self.n + 1, self.n + 1))
        np.cumsum(np.cumsum(cov, axis=0), axis=1, out=table[1:, 1:])
        self._table = table

    def range_variance(self, starts: IntArray, stops: IntArray) -> FloatArray:
        a, b = np.asarray(starts), np.asarray(stops)
        t = self._table
        return t[b, b] - t[a, b] - t[b, a] + t[a, a]

    def query_variance(self, weights: FloatArray) -> FloatArray:
        w = np.asarray(weights, dtype=np.float64)
        return np.asarray(np.einsum("ij,jk,ik->i", w, self.covariance, w), dtype=np.float64)

    def all_ranges_total(self) -> float:
        """Σ_{i,j} Σ_ij·#ranges ∋ i, j = Σ_ij Σ_ij·(min(i,j) + 1)(n − max(i,j))."""
        idx = np.arange(self.n)
        lo = np.minimum.outer(idx, idx)
        hi = np.maximum.outer(idx, idx)
        return float(np.sum(self.covariance * (lo + 1) * (self.n - hi)))

    def all_ranges_max(self) -> float:
        a, b = np.triu_indices(self.n + 1, 1)
        return float(np.max(self.range_variance(a, b)))


class KroneckerModel:
    """2-D noise with covariance scale·Σ⁽¹⁾⊗Σ⁽²⁾ (rows ⊗ columns).

    A rectangle R₁×R₂ has variance scale·Var⁽¹⁾(R₁)·Var⁽²⁾(R₂); summing or
    maximizing over all rectangles factorizes the same way (all terms ≥ 0).
    """

    def __init__(self, rows: NoiseModel, cols: NoiseModel, scale: float) -> None:
        self.rows = rows
        self.cols = cols
        self.scale = float(scale)
        self.shape = (rows.n, cols.n)

    def rectangle_variance(
        self, row_starts: IntArray, row_stops: IntArray, col_starts: IntArray, col_stops: IntArray
    ) -> FloatArray:
        return (
            self.scale
            * self.rows.range_variance(row_starts, row_stops)
            * self.cols.range_variance(col_starts, col_stops)
        )

    def all_ranges_total(self) -> float:
        return self.scale * self.rows.all_ranges_total() * self.cols.all_ranges_total()

    def all_ranges_max(self) -> float:
        return self.scale * self.rows.all_ranges_max() * self.cols.all_ranges_max()
