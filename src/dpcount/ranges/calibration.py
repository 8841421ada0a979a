"""Sensitivities of the range mechanisms' (correlated) Gaussian noise.

The calibration itself has one entry point for the whole package,
:func:`dpcount.privacy.calibrate` (the range mechanisms' Gaussian methods are
``"analytic"``, ``"classic"`` and ``"paper"``; discrete Gaussian noise uses zCDP).

Neighbouring relation (all of :mod:`dpcount.ranges`): histograms x, x' that differ in
one cell by at most 1, ‖x − x'‖₁ ≤ 1 — adding or removing one record (the paper's
§2.1 and §4.2). A change of one record's value moves a count between two cells;
that is two such steps, so by group privacy a mechanism calibrated here is
(2ε, (1 + e^ε)δ)-DP for substitution (its exact Gaussian sensitivity is smaller;
dpcount does not calibrate for substitution).

Notation (correlated-input-perturbation → code):

==========================  =====================================================
C                           leaf covariance / σ² (``cascade.level_profile``)
‖diag(C⁻¹)‖_∞               :func:`precision_max_diag`
√(max diag C⁻¹)             Mahalanobis sensitivity: ℓ₂ sensitivity of C^{-1/2}x
σ² ≥ 2‖diag C⁻¹‖ ln(2/δ)/ε²  Thm 3.7 / 3.8 (:func:`dpcount.privacy.paper_gaussian_sigma`, ε ≤ 1)
==========================  =====================================================

Why the analytic calibration is exact: for x' = x + e_i the privacy loss of
x + N(0, σ²C) is N(μ, 2μ) with μ = (C⁻¹)_ii/(2σ²) (Thm 3.7's proof), the loss of
the plain Gaussian mechanism with ℓ₂ sensitivity √((C⁻¹)_ii). So the analytic
Gaussian mechanism (Balle & Wang 2018) with sensitivity √(max_i (C⁻¹)_ii) gives
exactly (ε, δ)-DP for every ε, and never more noise than Thm 3.7, whose tail bound
is loose and which needs ε ≤ 1 (an erratum to the paper, checked numerically: the
loss is exactly Gaussian, so no tail bound is needed).

References: P. Dharangutte, J. Gao, R. Gong, G. Wang, "Differentially Private Range
Queries with Correlated Input Perturbation", 2024, https://arxiv.org/abs/2402.07066;
B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy:
analytical calibration and optimal denoising", ICML 2018,
https://arxiv.org/abs/1805.06530.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    check_integer,
    check_iterable,
)
from dpcount.ranges._tree import BalancedTree
from dpcount.ranges.cascade import _check_cascade_profile, split_variances

__all__ = [
    "depth_precisions",
    "precision_diagonal",
    "precision_max_diag",
]


def depth_precisions(profile: Sequence[float]) -> tuple[float, ...]:
    """(C⁻¹)_ii of a leaf at depth d, for d = 0..K: 1/v_0 + Σ_{d'<d} 1/(4β_{d'}²).

    The cascade is an invertible linear map from independent inputs to leaves:
    σ²√v_0·Z_root and σβ_d·Z_u at each split u (Z standard normal). Inverting,
    √v_0·Z_root = (sum of leaves) and 2β_d·Z_u = (left child − right child), so
    leaf i enters the root input with coefficient 1/√v_0 and each split above it
    with ±1/(2β_d); (C⁻¹)_ii is the sum of their squares. For the default profile
    (v ≡ 1, β² = 3/4) this is 1 + d/3: Corollary 3.10 (stated for n = 2^K),
    extended here to every balanced tree over any n — a leaf's precision is
    1 + (number of splits above it)/3 — and, in 2-D, to the product of the two
    axes' precisions (the covariance is their Kronecker product), which the paper
    leaves open.
    """
    profile = _check_cascade_profile("profile", profile)
    out = [1.0 / profile[0]]
    for beta2 in split_variances(profile):
        out.append(out[-1] + 1.0 / (4.0 * beta2))
    return tuple(out)


def precision_diagonal(n: int, profile: Sequence[float]) -> NDArray[np.float64]:
    """diag(C⁻¹) for every leaf of the balanced tree over n leaves (O(n))."""
    tree = BalancedTree(check_integer("n", n, ge=1))
    prof = _check_cascade_profile("profile", profile)
    if len(prof) != tree.depth + 1:
        raise ValueError(
            f"profile must have {tree.depth + 1} entries (depths 0..{tree.depth} of the "
            f"balanced tree over n={n} leaves), got {len(prof)}"
        )
    return np.asarray(depth_precisions(prof))[tree.leaf_depths()]


def precision_max_diag(profiles: Sequence[Sequence[float]]) -> float:
    """‖diag(C⁻¹)‖_∞ for one profile per axis (1-D or 2-D).

    1-D: the deepest leaves (depth K) have the largest value, since every split adds
    a positive term: 1/v_0 + Σ_{d<K} 1/(4β_d²) (= 1 + K/3 by default, K = ⌈log₂ n⌉).
    2-D: the covariance is C⁽¹⁾⊗C⁽²⁾, so C⁻¹ = C⁽¹⁾⁻¹⊗C⁽²⁾⁻¹ and its diagonal is the
    product of the axes' diagonals; the maximum is the product of the maxima.
    """
    axes = check_iterable("profiles", profiles)
    if not 1 <= len(axes) <= 2:
        raise ValueError(f"profiles must hold one profile per axis (1 or 2), got {len(axes)}")
    return math.prod(depth_precisions(p)[-1] for p in axes)
