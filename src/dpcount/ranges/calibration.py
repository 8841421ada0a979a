"""Privacy calibration for range-query mechanisms with (correlated) Gaussian noise.

Neighbouring relation (all of :mod:`dpcount.ranges`): histograms x, x' that differ in
one cell by at most 1, ‖x − x'‖₁ ≤ 1 — adding or removing one record (the paper's
§2.1 and §4.2). A change of one record's value moves a count between two cells;
that is two such steps (see docs/ranges.md for its exact sensitivity).

Notation (correlated-input-perturbation → code):

==========================  =====================================================
C                           leaf covariance / σ² (``cascade.level_profile``)
‖diag(C⁻¹)‖_∞               :func:`precision_max_diag`
√(max diag C⁻¹)             Mahalanobis sensitivity: ℓ₂ sensitivity of C^{-1/2}x
σ² ≥ 2‖diag C⁻¹‖ ln(2/δ)/ε²  Thm 3.7 / 3.8 (:func:`paper_gaussian_sigma`, ε ≤ 1)
==========================  =====================================================

Why the analytic calibration is exact: for x' = x + e_i the privacy loss of
x + N(0, σ²C) is N(μ, 2μ) with μ = (C⁻¹)_ii/(2σ²) (Thm 3.7's proof), the loss of
the plain Gaussian mechanism with ℓ₂ sensitivity √((C⁻¹)_ii). So the analytic
Gaussian mechanism (Balle & Wang 2018) with sensitivity √(max_i (C⁻¹)_ii) gives
exactly (ε, δ)-DP for every ε, and never more noise than Thm 3.7, whose tail bound
is loose and which needs ε ≤ 1 (see /work/shared/papers/README.md, errata).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    check_choice,
    check_integer,
    check_iterable,
    check_probability,
    check_real,
)
from dpcount.privacy.calibration import gaussian_sigma
from dpcount.ranges._tree import BalancedTree
from dpcount.ranges.cascade import _check_cascade_profile, split_variances

__all__ = [
    "CALIBRATIONS",
    "Calibration",
    "calibrated_sigma",
    "depth_precisions",
    "paper_gaussian_sigma",
    "precision_diagonal",
    "precision_max_diag",
]

Calibration = Literal["analytic", "paper", "classic"]
CALIBRATIONS: tuple[str, ...] = ("analytic", "paper", "classic")

# Relative margin on closed-form noise scales: absorbs a few ulps of rounding so the
# returned σ is never below the formula's exact value.
_ROUND_UP = 1e-12


def depth_precisions(profile: Sequence[float]) -> tuple[float, ...]:
    """(C⁻¹)_ii of a leaf at depth d, for d = 0..K: 1/v_0 + Σ_{d'<d} 1/(4β_{d'}²).

    The cascade is an invertible linear map from independent inputs to leaves:
    σ²√v_0·Z_root and σβ_d·Z_u at each split u (Z standard normal). Inverting,
    √v_0·Z_root = (sum of leaves) and 2β_d·Z_u = (left child − right child), so
    leaf i enters the root input with coefficient 1/√v_0 and each split above it
    with ±1/(2β_d); (C⁻¹)_ii is the sum of their squares. For the default profile
    (v ≡ 1, β² = 3/4) this is 1 + d/3: Corollary 3.10, extended to every balanced
    tree (errata in the papers' README).
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


def paper_gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """σ = Δ·√(2 ln(2/δ))/ε: correlated-input-perturbation Theorem 3.7 (and 3.8).

    For correlated noise Δ² = ‖diag C⁻¹‖_∞ (the theorem's statement); for i.i.d.
    noise on a vector with ℓ₂ sensitivity Δ it is the same tail bound. Valid only for
    ε ∈ (0, 1] and δ ∈ (0, 1/2], as the theorem requires. Rounded up by a relative
    1e-12.

    Raises:
        ValueError: ε > 1 or δ > 1/2 (use ``calibration="analytic"``, exact for all ε).
    """
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    eps = check_real("epsilon", epsilon, gt=0)
    dlt = check_probability("delta", delta)
    if eps > 1.0:
        raise ValueError(
            f"epsilon must be <= 1 for calibration='paper' (Theorem 3.7 assumes epsilon in "
            f"(0, 1]), got {epsilon!r}; use calibration='analytic', exact for every epsilon"
        )
    if dlt > 0.5:
        raise ValueError(
            f"delta must be <= 0.5 for calibration='paper' (Theorem 3.7 assumes delta in "
            f"(0, 1/2]), got {delta!r}"
        )
    return d2 * math.sqrt(2.0 * math.log(2.0 / dlt)) / eps * (1.0 + _ROUND_UP)


def calibrated_sigma(
    l2_sensitivity: float, epsilon: float, delta: float, calibration: str = "analytic"
) -> float:
    """σ for Gaussian noise whose (Mahalanobis) ℓ₂ sensitivity is ``l2_sensitivity``.

    ``"analytic"``: :func:`dpcount.privacy.gaussian_sigma` (Balle & Wang 2018,
    exact, every ε > 0); ``"paper"``: :func:`paper_gaussian_sigma` (Thm 3.7, ε ≤ 1);
    ``"classic"``: Dwork & Roth Thm A.1 (ε < 1), for comparison.
    """
    check_choice("calibration", calibration, CALIBRATIONS)
    if calibration == "paper":
        return paper_gaussian_sigma(l2_sensitivity, epsilon, delta)
    return gaussian_sigma(l2_sensitivity, epsilon, delta, method=calibration)  # type: ignore[arg-type]
