"""Privelet (Xiao, Wang, Gehrke 2011, "Differential privacy via wavelet transforms"),
1-D Haar wavelet, with Gaussian noise.

The Haar coefficients of x, each multiplied by Privelet's weight (the size of its
subtree, n for the base coefficient), are the total T = Σx and, for every internal
node u of the perfect tree, the difference D_u = S(left child) − S(right child). A
unit change in one cell changes K + 1 of them by ±1 (the total and the differences
of its K ancestors), so the weighted vector has ℓ₂ sensitivity √(K+1) (ℓ₁: K + 1).
Privelet adds i.i.d. noise to the weighted coefficients — here N(0, σ²) with σ
calibrated for √(K+1) — and inverts the transform: X_root = T̃,
X_{u0} = (X_u + D̃_u)/2, X_{u1} = (X_u − D̃_u)/2.

Guarantee: (ε, δ)-DP for histograms differing by at most 1 in one cell. The released
histogram is consistent; its noise is a halving cascade with root variance σ² and
split variance σ²/4, so a depth-d node has variance σ²(1 + 2·4^{−d})/3 and every
range's variance is exact (:class:`~dpcount.ranges._halving.HalvingCascade`).

``noise="discrete-gaussian"``: for whole-number cells the total and the differences are
integers, and a neighbour shifts K + 1 of them by ±1 (ℓ₂ norm √(K+1)); i.i.d.
N_Z(0, σ²) added in int64 is ρ-zCDP with ρ = (K+1)/(2σ²) (Canonne, Kamath, Steinke
2020, Thm 14; (ε, δ) by Cor. 13). The inverse transform is post-processing of the noisy
integers (released values are multiples of 2^-K); the variances use the exact variance
of N_Z(0, σ²).
Non-power-of-two n: padded with zero cells to 2^K (see :mod:`._perfect`).
"""

from __future__ import annotations

import numpy as np

from dpcount.ranges._haar import haar_coefficients, haar_inverse
from dpcount.ranges._halving import HalvingCascade
from dpcount.ranges._statements import range_statements
from dpcount.ranges._tree import BalancedTree
from dpcount.ranges.baselines._perfect import PaddedTreeMechanism
from dpcount.ranges.mechanism import FloatArray
from dpcount.ranges.release import HistogramRelease

__all__ = ["WaveletMechanism"]


@range_statements
class WaveletMechanism(PaddedTreeMechanism):
    """Privelet with Gaussian noise (1-D). Arguments as for the other mechanisms.

    Formal guarantee:
        [range neighbouring relation]

        The weighted Haar coefficients (the total and, per internal node of the padded
        perfect tree, the difference of its children's sums) change in K + 1
        coordinates by ±1 when one cell changes by 1, so their ℓ₂ sensitivity is
        √(K+1) (ℓ₁: K + 1). The inverse transform is post-processing.

        [range noise kinds: all; Δ₂ = √(K+1)]

        Exact variance: the released histogram's noise is a halving cascade with root
        variance v and split variance v/4 (v = σ², or the exact variance of
        N_Z(0, σ²)): a depth-d node has variance v·(1 + 2·4^{−d})/3, and every range's
        variance is exact.

    References:
        * X. Xiao, G. Wang, J. Gehrke. "Differential privacy via wavelet
          transforms". ICDE 2010 (journal version IEEE TKDE 2011).
          https://doi.org/10.1109/ICDE.2010.5447831, https://arxiv.org/abs/0909.5530
        [noise kinds references]
    """

    name = "wavelet"

    def _release(self, x: FloatArray, rng: np.random.Generator) -> HistogramRelease:
        tree = BalancedTree(1 << self.depth)
        padded = np.zeros(tree.n)
        padded[: x.size] = x
        noisy = [self._noisy(c, rng) for c in haar_coefficients(padded, tree)]
        values = haar_inverse(noisy, tree)[: self.shape[0]].copy()
        return HistogramRelease(values, self.noise_model, self.privacy, self.name)

    def _build_model(self) -> HalvingCascade:
        v = self._sampler.variance
        tree = BalancedTree(1 << self.depth)
        return HalvingCascade(tree, self.shape[0], v, [v / 4.0] * self.depth)
