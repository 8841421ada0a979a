"""Independent dense oracles for the range-query tests (small n only).

Nothing here calls the vectorized code under test: the balanced tree is built by
recursion, the cascade's linear map node by node, C_k by Definition 3.1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def build_tree(n: int) -> list[tuple[int, int, int]]:
    """All nodes (start, stop, depth) of the balanced tree (left child gets ⌈m/2⌉)."""
    nodes: list[tuple[int, int, int]] = []

    def rec(s: int, e: int, d: int) -> None:
        nodes.append((s, e, d))
        if e - s >= 2:
            mid = s + (e - s + 1) // 2
            rec(s, mid, d + 1)
            rec(mid, e, d + 1)

    rec(0, n, 0)
    return nodes


def definition_3_1(k: int) -> FloatArray:
    """C_k of Definition 3.1 (n = 2^k)."""
    c = np.array([[1.0, -0.5], [-0.5, 1.0]])
    for i in range(1, k):
        j = np.ones((2**i, 2**i))
        off = -(2.0 ** (-2 * i - 1)) * j
        c = np.block([[c, off], [off, c]])
    return c


def cascade_map(n: int, profile: Sequence[float]) -> FloatArray:
    """The cascade as a matrix L (leaves × inputs) built node by node (Alg. 1/2)."""
    columns: list[dict[int, float]] = [dict() for _ in range(n)]
    counter = [1]

    def rec(s: int, e: int, d: int, coef: dict[int, float]) -> None:
        if e - s == 1:
            columns[s] = coef
            return
        beta = np.sqrt(profile[d + 1] - profile[d] / 4.0)
        k = counter[0]
        counter[0] += 1
        mid = s + (e - s + 1) // 2
        rec(s, mid, d + 1, {**{i: v / 2 for i, v in coef.items()}, k: beta})
        rec(mid, e, d + 1, {**{i: v / 2 for i, v in coef.items()}, k: -beta})

    rec(0, n, 0, {0: float(np.sqrt(profile[0]))})
    out = np.zeros((n, n))
    for leaf, coef in enumerate(columns):
        for i, v in coef.items():
            out[leaf, i] = v
    return out


def cascade_covariance(n: int, profile: Sequence[float]) -> FloatArray:
    lmap = cascade_map(n, profile)
    return lmap @ lmap.T


def range_variances(cov: FloatArray) -> tuple[NDArray[np.int64], NDArray[np.int64], FloatArray]:
    """All ranges (lo, hi inclusive) and 1ᵀΣ1 over each, by brute force."""
    n = cov.shape[0]
    lo, hi = np.triu_indices(n)
    var = np.array([cov[a : b + 1, a : b + 1].sum() for a, b in zip(lo, hi, strict=True)])
    return lo.astype(np.int64), hi.astype(np.int64), var


def random_profile(n: int, rng: np.random.Generator) -> list[float]:
    """A valid random profile (v_{d+1} > v_d/4) for the balanced tree over n."""
    depth = 0 if n == 1 else (n - 1).bit_length()
    profile = [float(rng.uniform(0.2, 3.0))]
    for _ in range(depth):
        profile.append(profile[-1] / 4.0 + float(rng.uniform(0.05, 2.0)))
    return profile


def perfect_tree_nodes(depth: int) -> list[tuple[int, int]]:
    return [
        (p << (depth - d), (p + 1) << (depth - d)) for d in range(depth + 1) for p in range(1 << d)
    ]


def canonical_count(depth: int, a: int, b: int) -> int:
    """Number of nodes of the minimal decomposition of [a, b) in the perfect tree (recursive)."""

    def rec(s: int, e: int) -> int:
        if b <= s or e <= a:
            return 0
        if a <= s and e <= b:
            return 1
        mid = (s + e) // 2
        return rec(s, mid) + rec(mid, e)

    return rec(0, 1 << depth)


def hierarchical_gls(depth: int, size: int) -> tuple[FloatArray, FloatArray]:
    """Incidence A of the perfect tree over 2^depth cells, and (AᵀA)⁻¹ on the real cells."""
    nodes = perfect_tree_nodes(depth)
    a = np.zeros((len(nodes), 1 << depth))
    for i, (s, e) in enumerate(nodes):
        a[i, s:e] = 1.0
    cov = np.linalg.inv(a.T @ a)
    return a, cov[:size, :size]
