"""Query workloads over a 1-D histogram of n cells (correlated-input-perturbation §3.4, §4, App. C).

* :class:`AllRanges`: all n(n+1)/2 contiguous ranges — implicit, never listed; the
  exact metrics use closed forms, and :meth:`AllRanges.sample` draws ranges uniformly
  (the paper's scheme, App. C.4) for its Monte Carlo estimator.
* :func:`nodal_ranges`: the 2n − 1 nodes of the balanced binary tree (§3.4.2, App. C.1).
* :func:`random_dense_queries`: sums over random subsets of k ∈ {⌊n/4⌋, ..., n} cells
  (App. C.2), a dense 0/1 matrix.
* :class:`RangeWorkload` (explicit inclusive ranges) and :class:`DenseWorkload` (a
  weight matrix) for anything else.

Every workload gives its Gram matrix WᵀW (n×n) for workload-adaptive mechanisms
(EigenDesign).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    as_array,
    check_index_array,
    check_integer,
    check_real_array,
    check_real_dtype,
)
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.ranges._tree import BalancedTree

__all__ = [
    "AllRanges",
    "DenseWorkload",
    "RangeWorkload",
    "Workload",
    "nodal_ranges",
    "random_dense_queries",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class AllRanges:
    """All n(n+1)/2 ranges [lo, hi], 0 ≤ lo ≤ hi < n (never materialized)."""

    n: int

    def __post_init__(self) -> None:
        check_integer("n", self.n, ge=1)

    @property
    def count(self) -> int:
        return self.n * (self.n + 1) // 2

    def gram(self) -> FloatArray:
        """(WᵀW)_ij = number of ranges containing i and j = (min(i,j) + 1)(n − max(i,j))."""
        idx = np.arange(self.n)
        gram = (np.minimum.outer(idx, idx) + 1.0) * (self.n - np.maximum.outer(idx, idx))
        return np.asarray(gram, dtype=np.float64)

    def sample(self, size: int, rng: RNGLike = None) -> tuple[IntArray, IntArray]:
        """``size`` ranges drawn uniformly from all n(n+1)/2 (App. C.4).

        With probability 2/(n+1) a single cell, else the span of two distinct
        uniformly chosen cells — uniform over ranges since there are n single-cell
        ranges among n(n+1)/2.
        """
        size = check_integer("size", size, ge=1)
        gen = as_generator(rng)
        n = self.n
        single = gen.random(size) < 2.0 / (n + 1)
        i = gen.integers(0, n, size)
        j = gen.integers(0, n - 1, size) if n > 1 else np.zeros(size, dtype=np.int64)
        j = j + (j >= i)  # distinct from i
        lo = np.where(single, i, np.minimum(i, j))
        hi = np.where(single, i, np.maximum(i, j))
        return lo.astype(np.int64), hi.astype(np.int64)

    def ranges(self) -> tuple[IntArray, IntArray]:
        """All ranges listed (lo, hi) — only for small n (tests, brute force)."""
        if self.n > 4096:
            raise ValueError(f"listing all ranges needs n <= 4096, got n={self.n}")
        lo, hi = np.triu_indices(self.n)
        return lo.astype(np.int64), hi.astype(np.int64)


@dataclass(frozen=True, eq=False)
class RangeWorkload:
    """Explicit inclusive ranges [lo[i], hi[i]] over n cells (``depth``: optional tag)."""

    n: int
    lo: IntArray
    hi: IntArray
    depth: IntArray | None = field(default=None)

    def __post_init__(self) -> None:
        check_integer("n", self.n, ge=1)
        lo = check_index_array("lo", self.lo, size=self.n).ravel()
        hi = check_index_array("hi", self.hi, size=self.n).ravel()
        if lo.shape != hi.shape:
            raise ValueError(f"lo and hi must have the same length, got {lo.size} and {hi.size}")
        if (lo > hi).any():
            i = int(np.argmax(lo > hi))
            raise ValueError(f"lo must be <= hi, got lo={int(lo[i])} > hi={int(hi[i])}")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def count(self) -> int:
        return int(self.lo.size)

    def gram(self) -> FloatArray:
        """WᵀW = Σ over ranges of the all-ones block on [lo, hi]², by 2-D differences."""
        n = self.n
        diff = np.zeros((n + 1, n + 1))
        np.add.at(diff, (self.lo, self.lo), 1.0)
        np.add.at(diff, (self.lo, self.hi + 1), -1.0)
        np.add.at(diff, (self.hi + 1, self.lo), -1.0)
        np.add.at(diff, (self.hi + 1, self.hi + 1), 1.0)
        return np.cumsum(np.cumsum(diff, axis=0), axis=1)[:n, :n]

    def weights(self) -> FloatArray:
        """The 0/1 workload matrix (count × n)."""
        idx = np.arange(self.n)
        return ((idx >= self.lo[:, None]) & (idx <= self.hi[:, None])).astype(np.float64)


@dataclass(frozen=True, eq=False)
class DenseWorkload:
    """A dense workload matrix W (queries × n): query i answers W[i]·x."""

    weights: FloatArray

    def __post_init__(self) -> None:
        w = check_real_dtype("weights", as_array("weights", self.weights))
        if w.ndim != 2 or w.shape[0] == 0 or w.shape[1] == 0:
            raise ValueError(f"weights must be a non-empty 2-D array, got shape {w.shape}")
        object.__setattr__(self, "weights", check_real_array("weights", w))

    @property
    def n(self) -> int:
        return int(self.weights.shape[1])

    @property
    def count(self) -> int:
        return int(self.weights.shape[0])

    def gram(self) -> FloatArray:
        return np.asarray(self.weights.T @ self.weights, dtype=np.float64)


Workload = AllRanges | RangeWorkload | DenseWorkload


def nodal_ranges(n: int) -> RangeWorkload:
    """The 2n − 1 nodes of the balanced binary tree over n cells, root first (with depths)."""
    n = check_integer("n", n, ge=1)
    start, stop, depth = BalancedTree(n).node_ranges()
    return RangeWorkload(n, start, stop - 1, depth)


def random_dense_queries(n: int, count: int = 2500, rng: RNGLike = None) -> DenseWorkload:
    """App. C.2: each query sums k distinct uniform cells, k uniform in {⌊n/4⌋, ..., n}."""
    n = check_integer("n", n, ge=1)
    count = check_integer("count", count, ge=1)
    gen = as_generator(rng)
    weights = np.zeros((count, n))
    sizes = gen.integers(max(1, n // 4), n + 1, size=count)
    for row, k in zip(weights, sizes.tolist(), strict=True):
        row[gen.choice(n, size=k, replace=False)] = 1.0
    return DenseWorkload(weights)


def as_workload(value: Any, n: int) -> Workload:
    """Accept a workload object; reject anything else with a clear message."""
    if isinstance(value, (AllRanges, RangeWorkload, DenseWorkload)):
        if value.n != n:
            raise ValueError(f"workload is over n={value.n} cells, the mechanism over n={n}")
        return value
    raise TypeError(
        "workload must be AllRanges, RangeWorkload or DenseWorkload (see nodal_ranges, "
        f"random_dense_queries), got {type(value).__name__}"
    )
