"""Hierarchical (Hay, Rastogi, Miklau, Suciu 2010, "Boosting the accuracy of
differentially private histograms through consistency"), binary, Gaussian noise.

Every node of the perfect binary tree gets a noisy count ỹ_u = x(u) + N(0, σ²); a
cell lies on K + 1 nodes, so the ℓ₂ sensitivity is √(K+1) (ℓ₁: K + 1). The release is
the least-squares consistent estimate (Hay et al. §4, Theorem 3, here in
inverse-variance form, O(n)):

* bottom-up, the best estimate z_u of x(u) from u's subtree and its variance V_h
  (h = height, in σ² units): V_0 = 1, z_leaf = ỹ_leaf;
  z_u = V_h·(ỹ_u + (z_{u0} + z_{u1})/(2V_{h−1})), V_h = 1/(1 + 1/(2V_{h−1}));
* top-down, h̄_root = z_root and h̄_{ui} = z_{ui} + (h̄_u − z_{u0} − z_{u1})/2.

For k = 2 these are Hay et al.'s weights (2^ℓ − 2^{ℓ−1})/(2^ℓ − 1) and
(2^{ℓ−1} − 1)/(2^ℓ − 1), ℓ = h + 1.

Exact variances: the error h̄ − x has covariance σ²(AᵀA)⁻¹ (A = node–cell
incidence), which is the flat-prior posterior covariance of x; by the tree's
conditional independence that posterior is a halving cascade — the root with
variance V_K, and given a node, its children X/2 ± η with Var(η) = V_{h−1}/2 — so
every range's variance is exact (:class:`~dpcount.ranges._halving.HalvingCascade`).

Guarantee: (ε, δ)-DP for histograms differing by at most 1 in one cell.
``noise="discrete-gaussian"``: the node counts are integers (whole-number cells), a
neighbour shifts K + 1 of them by ±1, and i.i.d. N_Z(0, σ²) added in int64 is ρ-zCDP
with ρ = (K+1)/(2σ²) (Canonne, Kamath, Steinke 2020, Thm 14; (ε, δ) by Cor. 13); the
least-squares step is post-processing of the noisy integer counts (its output is real),
and the exact variances hold with σ² replaced by the exact variance of N_Z(0, σ²).
Non-power-of-two n: padded with zero cells to 2^K (see :mod:`._perfect`).
"""

from __future__ import annotations

import numpy as np

from dpcount.ranges._halving import HalvingCascade
from dpcount.ranges._statements import range_statements
from dpcount.ranges._tree import BalancedTree
from dpcount.ranges.baselines._perfect import PaddedTreeMechanism, level_sums
from dpcount.ranges.mechanism import FloatArray
from dpcount.ranges.release import HistogramRelease

__all__ = ["HierarchicalMechanism", "subtree_variances"]


def subtree_variances(depth: int) -> tuple[float, ...]:
    """V_h for h = 0..depth (σ² units): variance of the subtree-only estimate of a node."""
    v = [1.0]
    for _ in range(depth):
        v.append(1.0 / (1.0 + 1.0 / (2.0 * v[-1])))
    return tuple(v)


def least_squares(noisy: list[FloatArray]) -> FloatArray:
    """Hay et al.'s consistent estimate of the leaves from noisy counts per depth (root first)."""
    depth = len(noisy) - 1
    v = subtree_variances(depth)
    z = [noisy[depth]]  # z per depth, leaves first while building
    for d in range(depth - 1, -1, -1):
        h = depth - d
        children = z[0].reshape(-1, 2).sum(axis=1)
        z.insert(0, v[h] * (noisy[d] + children / (2.0 * v[h - 1])))
    estimate = z[0]
    for d in range(depth):
        pairs = z[d + 1].reshape(-1, 2)
        gap = (estimate - pairs.sum(axis=1)) / 2.0
        estimate = (pairs + gap[:, None]).reshape(-1)
    return estimate


@range_statements
class HierarchicalMechanism(PaddedTreeMechanism):
    """Noisy binary tree + least-squares consistency (1-D). Arguments as for the others.

    Formal guarantee:
        [range neighbouring relation]

        Every node of the perfect binary tree (padded with public zero cells to 2^K)
        gets its count plus independent noise; a cell lies on K + 1 nodes, so the ℓ₂
        sensitivity is √(K+1) (ℓ₁: K + 1). The least-squares consistent estimate (Hay
        et al. §4, Theorem 3) is post-processing of the noisy counts.

        [range noise kinds: all; Δ₂ = √(K+1)]

        Exact variance: the error has covariance v·(AᵀA)⁻¹ (A the node–cell incidence, v the
        variance of one node noise: σ², or the exact variance of N_Z(0, σ²)), a
        halving cascade, so every range's variance is exact.

    References:
        * M. Hay, V. Rastogi, G. Miklau, D. Suciu. "Boosting the accuracy of
          differentially private histograms through consistency". PVLDB 3(1–2), 2010.
          https://arxiv.org/abs/0904.0942
        [noise kinds references]
    """

    name = "hierarchical"

    def _release(self, x: FloatArray, rng: np.random.Generator) -> HistogramRelease:
        noisy = [
            np.asarray(self._noisy(s, rng), dtype=np.float64) for s in level_sums(x, self.depth)
        ]
        values = least_squares(noisy)[: self.shape[0]].copy()
        return HistogramRelease(values, self.noise_model, self.privacy, self.name)

    def _build_model(self) -> HalvingCascade:
        s2 = self._sampler.variance
        v = subtree_variances(self.depth)
        # A depth-d node has height K − d; its children's subtree variance is V_{K−d−1}.
        splits = [s2 * v[self.depth - d - 1] / 2.0 for d in range(self.depth)]
        return HalvingCascade(BalancedTree(1 << self.depth), self.shape[0], s2 * v[-1], splits)
