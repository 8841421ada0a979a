"""Correlated input perturbation: x + N(0, σ²C) with C drawn by Cascade Sampling.

Dharangutte, Gao, Gong, Wang, "Differentially Private Range Queries with Correlated
Input Perturbation" (§3; App. B for any n and 2-D).

Guarantee: (ε, δ)-DP for histograms that differ by at most 1 in one cell. The
privacy loss of x + N(0, σ²C) for x' = x ± e_i is exactly that of a Gaussian
mechanism with ℓ₂ sensitivity √((C⁻¹)_ii) (Thm 3.7's proof), so σ is calibrated for
the Mahalanobis sensitivity √(‖diag C⁻¹‖_∞):

* ``calibration="analytic"`` (default): the analytic Gaussian mechanism, exact for
  every ε, never more noise than the paper's bound;
* ``calibration="paper"``: Thm 3.7/3.8, σ² = 2‖diag C⁻¹‖_∞·ln(2/δ)/ε², ε ≤ 1;

with ‖diag C⁻¹‖_∞ = 1 + K/3 (K = ⌈log₂ n⌉) by default, and in general
1/v_0 + Σ_{d<K} 1/(4β_d²) (:mod:`.calibration`); in 2-D the product over the axes.

Properties (§2.2): unbiased (zero-mean noise), consistent (one noisy histogram answers
every query), statistically transparent (every answer's variance is known exactly:
:meth:`CorrelatedPerturbation.range_variance`), utility control (``level_variances``).
Every tree node's answer has variance σ²·v_depth (σ² by default, Theorem 3.3).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpcount._validate import check_integer
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.ranges._halving import HalvingCascade
from dpcount.ranges._models import KroneckerModel, NoiseModel
from dpcount.ranges._tree import BalancedTree
from dpcount.ranges.calibration import precision_max_diag
from dpcount.ranges.cascade import _profiles, sample_with, split_variances
from dpcount.ranges.mechanism import FloatArray, RangeMechanism
from dpcount.ranges.release import HistogramRelease

__all__ = ["CorrelatedPerturbation"]


class CorrelatedPerturbation(RangeMechanism):
    """x + σ·(Cascade Sampling noise): the correlated input perturbation mechanism.

    Args:
        shape: n, (n,) or (n₁, n₂) — any sizes (balanced trees, App. B.1/B.2).
        epsilon: ε > 0.
        delta: δ ∈ (0, 1).
        calibration: ``"analytic"`` (default, exact) or ``"paper"`` (Thm 3.7/3.8,
            ε ≤ 1); ``"classic"`` (Dwork & Roth) for comparison.
        rng: Generator, int seed (research only) or None (OS entropy).
        level_variances: per-depth node variances in σ² units, root first (K + 1
            positive numbers with v_{d+1} > v_d/4); for 2-D a pair of profiles
            (rows, columns). Default: all ones.

    Attributes:
        sigma: σ, the standard deviation of every tree node's noise (default profile).
        precision_max_diag: ‖diag C⁻¹‖_∞.
        level_variances: the profile(s) used, one tuple per axis.
        privacy: the :class:`~dpcount.privacy.PrivacyGuarantee`; its
            ``l2_sensitivity`` (and ``l1_sensitivity``, recorded equal) is the
            Mahalanobis sensitivity √(‖diag C⁻¹‖_∞): the ℓ₂ sensitivity of the
            whitened vector C^{-1/2}x, the only one the Gaussian calibration uses.
    """

    name = "correlated"
    max_dims = 2

    def __init__(
        self,
        shape: int | tuple[int, ...],
        epsilon: float,
        delta: float,
        calibration: str = "analytic",
        rng: RNGLike = None,
        *,
        level_variances: Any = None,
    ) -> None:
        self.shape = self._check_shape(shape, self.max_dims)
        self.level_variances = _profiles(self.shape, level_variances)
        self.precision_max_diag = precision_max_diag(self.level_variances)
        sensitivity = math.sqrt(self.precision_max_diag)
        super().__init__(
            self.shape,
            epsilon=epsilon,
            delta=delta,
            calibration=calibration,
            rng=rng,
            l2_sensitivity=sensitivity,
            l1_sensitivity=sensitivity,
        )

    def describe(self) -> str:
        return (
            f"{super().describe()}; Mahalanobis sensitivity sqrt(max diag C^-1) = "
            f"{math.sqrt(self.precision_max_diag):.6g}"
        )

    @property
    def depth(self) -> tuple[int, ...]:
        """K = ⌈log₂ n⌉ per axis."""
        return tuple(BalancedTree(n).depth for n in self.shape)

    def sample_noise(self, rng: RNGLike = None) -> FloatArray:
        """One draw of the release noise (from ``rng`` if given, else the mechanism's)."""
        gen = self._rng if rng is None else as_generator(rng)
        return sample_with(self.shape, self.level_variances, self._sampler, gen)

    def _release(self, x: FloatArray, rng: np.random.Generator) -> HistogramRelease:
        values = sample_with(self.shape, self.level_variances, self._sampler, rng)
        values += x
        return HistogramRelease(values, self.noise_model, self.privacy, self.name)

    def _axis_model(self, axis: int, scale: float) -> HalvingCascade:
        n = self.shape[axis]
        profile = self.level_variances[axis]
        splits = [scale * s for s in split_variances(profile)]
        return HalvingCascade(BalancedTree(n), n, scale * profile[0], splits)

    def _build_model(self) -> NoiseModel | KroneckerModel:
        variance = self._sampler.variance
        if len(self.shape) == 1:
            return self._axis_model(0, variance)
        return KroneckerModel(self._axis_model(0, 1.0), self._axis_model(1, 1.0), variance)

    def node_variance(self, depth: int, axis: int = 0) -> float:
        """σ²·v_depth: the exact variance of every depth-``depth`` node of the tree on ``axis``.

        In 2-D a rectangle (row node at depth d₁) × (column node at depth d₂) has
        variance σ²·v⁽¹⁾_{d₁}·v⁽²⁾_{d₂}; this returns the 1-D factor times σ².
        """
        axis = check_integer("axis", axis, ge=0, le=len(self.shape) - 1)
        depth = check_integer("depth", depth, ge=0, le=len(self.level_variances[axis]) - 1)
        return self._sampler.variance * self.level_variances[axis][depth]
