"""Correlated input perturbation: x + N(0, σ²C) with C drawn by Cascade Sampling.

Dharangutte, Gao, Gong, Wang, "Differentially Private Range Queries with Correlated
Input Perturbation", 2024, https://arxiv.org/abs/2402.07066 (§3; App. B for any n and 2-D).

Guarantee: (ε, δ)-DP for histograms that differ by at most 1 in one cell. The
privacy loss of x + N(0, σ²C) for x' = x ± e_i is exactly that of a Gaussian
mechanism with ℓ₂ sensitivity √((C⁻¹)_ii) (Thm 3.7's proof), so σ is calibrated for
the Mahalanobis sensitivity √(‖diag C⁻¹‖_∞):

* ``calibration="analytic"`` (default): the analytic Gaussian mechanism, exact for
  every ε, never more noise than the paper's bound;
* ``calibration="paper"``: Thm 3.7/3.8, σ² = 2‖diag C⁻¹‖_∞·ln(2/δ)/ε², ε ≤ 1;

with ‖diag C⁻¹‖_∞ = 1 + K/3 (K = ⌈log₂ n⌉) by default, and in general
1/v_0 + Σ_{d<K} 1/(4β_d²) (:mod:`.calibration`); in 2-D the product over the axes.

``noise="discrete-gaussian"`` (1-D): the same mechanism with exact integer noise.
x + L·z (L the cascade, z its independent inputs) equals the inverse unnormalized Haar
transform (:mod:`._haar`) of the integer vector b = (S(root), D_u = S(left) − S(right)
per split) plus independent noise of standard deviation σ√v_0 on S(root) and 2σβ_d on
each D_u at depth d. Here that noise is discrete Gaussian, N_Z(0, σ_j²) with σ_j² the
squares above rounded up, added to b in int64; the inverse transform is post-processing.
A neighbour x ± e_i shifts S(root) and the D_u of i's ancestors by ±1, so the release is
ρ-zCDP with ρ = max_i Σ_{j on i's path} 1/(2σ_j²) ≤ ‖diag C⁻¹‖_∞/(2σ²) (Canonne,
Kamath, Steinke 2020, Thm 14 per coordinate; Rényi divergences of independent
coordinates add), computed exactly from the rounded σ_j² and converted to (ε, δ) by
their Cor. 13 (σ from :func:`dpcount.privacy.discrete_gaussian_sigma` for the
Mahalanobis sensitivity). The noise is a halving cascade with root variance Var N_Z(0,
σ_0²) and split variances Var N_Z(0, σ_{d+1}²)/4: every variance stays exact. Released
values are multiples of 2^-K. Not available in 2-D (the exact variances of N_Z do not
factor over the axes).

Properties (§2.2): unbiased (zero-mean noise), consistent (one noisy histogram answers
every query), statistically transparent (every answer's variance is known exactly:
:meth:`CorrelatedPerturbation.range_variance`), utility control (``level_variances``).
Every tree node's answer has variance σ²·v_depth (σ² by default, Theorem 3.3).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcount._validate import check_instance, check_integer
from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.discrete import DiscreteGaussianNoise
from dpcount.privacy.noise import NoiseSampler
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.ranges._haar import haar_coefficients, haar_inverse
from dpcount.ranges._halving import HalvingCascade
from dpcount.ranges._models import KroneckerModel, NoiseModel
from dpcount.ranges._statements import range_statements
from dpcount.ranges._tree import BalancedTree
from dpcount.ranges.calibration import precision_max_diag
from dpcount.ranges.cascade import _profiles, sample_with, split_variances
from dpcount.ranges.mechanism import FloatArray, RangeMechanism
from dpcount.ranges.release import HistogramRelease

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CorrelatedPerturbation"]


@range_statements
class CorrelatedPerturbation(RangeMechanism):
    """x + σ·(Cascade Sampling noise): the correlated input perturbation mechanism.

    Formal guarantee:
        [range neighbouring relation]

        The release is x + N(0, σ²C), C the leaf covariance of the cascade (Def. 3.1
        for n = 2^K; App. B.1/B.2 for any n and 2-D). For x' = x ± e_i the privacy loss
        is exactly that of a Gaussian mechanism with ℓ₂ sensitivity √((C⁻¹)_ii)
        (Thm 3.7's proof), so σ is calibrated for the Mahalanobis sensitivity
        √(‖diag C⁻¹‖_∞), with ‖diag C⁻¹‖_∞ = 1 + K/3 (K = ⌈log₂ n⌉) for the default
        profile and the product over the axes in 2-D. The paper's Thm 3.7 needs ε ≤ 1
        and uses a loose tail bound; the analytic calibration is exact for every ε and
        never adds more noise.

        [range noise kinds: gaussian; Δ₂ = √(‖diag C⁻¹‖_∞)]
        * ``"discrete-gaussian"`` (whole-number cells, 1-D only): ρ-zCDP with
          ρ = max_i Σ_{j on i's path} 1/(2σ_j²) ≤ ‖diag C⁻¹‖_∞/(2σ²) for the
          halving-cascade coordinates (root sum and split differences) and their
          rounded-up variances σ_j², computed exactly (see the module docstring;
          Canonne, Kamath, Steinke 2020, Thm 14), reported as (ε, δ)-DP by their
          Corollary 13 (``calibration="zcdp"``).

        Exact variance: every depth-d tree node's answer has variance σ²·v_d (σ² for the
        default profile, Theorem 3.3), the leaves have covariance σ²C, and every
        range's variance is exact (:meth:`range_variance`).

    References:
        * P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range
          Queries with Correlated Input Perturbation". 2024.
          https://arxiv.org/abs/2402.07066
        [noise kinds references]

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
        noise: ``"gaussian"`` (default) or ``"discrete-gaussian"`` (1-D, whole-number
            cells; ``calibration`` None or ``"zcdp"``): see the module docstring.

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
    supports_discrete_noise = True

    def __init__(
        self,
        shape: int | tuple[int, ...],
        *,
        level_variances: Any = None,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        budget = Budget.resolve(budget, fields, owner="CorrelatedPerturbation")
        self.shape = self._check_shape(shape, self.max_dims)
        if budget.noise == "discrete-gaussian" and len(self.shape) != 1:
            raise ValueError(
                f"noise='discrete-gaussian' needs a 1-D shape for CorrelatedPerturbation, got "
                f"shape {self.shape} (in 2-D the exact variances of the discrete Gaussian do "
                "not factor over the axes); use noise='gaussian'"
            )
        self._level_samplers: tuple[NoiseSampler, ...] = ()
        self.level_variances = _profiles(self.shape, level_variances)
        self.precision_max_diag = precision_max_diag(self.level_variances)
        sensitivity = math.sqrt(self.precision_max_diag)
        super().__init__(
            self.shape,
            budget=budget,
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

    def _discrete_samplers(self, sigma: float) -> tuple[DiscreteGaussianNoise, ...]:
        """N_Z(0, σ²v_0) for the total, N_Z(0, 4σ²β_d²) for the splits at depth d."""
        profile = self.level_variances[0]
        scales = [math.sqrt(profile[0])] + [2.0 * math.sqrt(b) for b in split_variances(profile)]
        levels = tuple(DiscreteGaussianNoise(sigma * c) for c in scales)
        self._level_samplers = levels
        return (DiscreteGaussianNoise(sigma), *levels)

    def _discrete_rho(self, samplers: tuple[DiscreteGaussianNoise, ...]) -> Fraction:
        """Exact ρ of the worst neighbour: a depth-K leaf shifts the total and one D per
        depth by ±1, so ρ = Σ_j 1/(2σ_j²) over all levels (the largest path sum)."""
        return sum((Fraction(1, 2) / s.sigma2 for s in samplers[1:]), Fraction(0))

    def with_sampler(self, sampler: NoiseSampler) -> RangeMechanism:
        """A copy drawing its inputs from ``sampler`` (testing hook; ``privacy`` is None).

        With ``noise="discrete-gaussian"`` every Haar coefficient then gets one draw of
        ``sampler`` (unscaled): root variance v and split variances v/4.
        """
        other = super().with_sampler(sampler)
        if isinstance(other, CorrelatedPerturbation) and self.discrete:
            other._level_samplers = (sampler,) * len(self._level_samplers)
        return other

    def with_level_samplers(self, samplers: Sequence[NoiseSampler]) -> CorrelatedPerturbation:
        """A discrete-noise copy drawing the total and each depth's D from ``samplers``
        (root first; testing hook; ``privacy`` is None)."""
        if not self.discrete or len(samplers) != len(self._level_samplers):
            raise ValueError(
                f"samplers must hold {len(self._level_samplers)} samplers (root, then one per "
                "depth) of a noise='discrete-gaussian' mechanism"
            )
        for i, s in enumerate(samplers):
            check_instance(f"samplers[{i}]", s, NoiseSampler, "a NoiseSampler")
        other = copy.copy(self)
        other._level_samplers = tuple(samplers)
        other.privacy = None
        other._model = None
        return other

    @property
    def level_samplers(self) -> tuple[NoiseSampler, ...]:
        """Discrete noise: the samplers of the root sum and of the splits at depths 0..K−1."""
        return self._level_samplers

    def sample_noise(self, rng: RNGLike = None) -> FloatArray:
        """One draw of the release noise (from ``rng`` if given, else the mechanism's)."""
        gen = self._rng if rng is None else as_generator(rng)
        if self.discrete:
            tree = BalancedTree(self.shape[0])
            sizes = [c.size for c in haar_coefficients(np.zeros(self.shape[0]), tree)]
            draws = [s.sample(gen, k) for s, k in zip(self._level_samplers, sizes, strict=True)]
            return haar_inverse(draws, tree)
        return sample_with(self.shape, self.level_variances, self._sampler, gen)

    def _release(self, x: FloatArray, rng: np.random.Generator) -> HistogramRelease:
        if self.discrete:
            tree = BalancedTree(self.shape[0])
            coefficients = haar_coefficients(x, tree)
            noisy = [
                self._noisy(c, rng, s)
                for c, s in zip(coefficients, self._level_samplers, strict=True)
            ]
            values = haar_inverse(noisy, tree)
            return HistogramRelease(values, self.noise_model, self.privacy, self.name)
        values = sample_with(self.shape, self.level_variances, self._sampler, rng)
        values += x
        return HistogramRelease(values, self.noise_model, self.privacy, self.name)

    def _axis_model(self, axis: int, scale: float) -> HalvingCascade:
        n = self.shape[axis]
        profile = self.level_variances[axis]
        splits = [scale * s for s in split_variances(profile)]
        return HalvingCascade(BalancedTree(n), n, scale * profile[0], splits)

    def _build_model(self) -> NoiseModel | KroneckerModel:
        if self.discrete:
            v = [s.variance for s in self._level_samplers]
            tree = BalancedTree(self.shape[0])
            return HalvingCascade(tree, tree.n, v[0], [w / 4.0 for w in v[1:]])
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
        model = self.noise_model
        if isinstance(model, HalvingCascade) and self.discrete:
            return model.node_variances[depth]
        return self._sampler.variance * self.level_variances[axis][depth]
