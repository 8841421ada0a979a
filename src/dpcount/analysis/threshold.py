"""Laplace vs Gaussian noise for continual counting (count-on-your-elders §5).

* :func:`laplace_vs_gaussian_delta`: the largest δ for which the ε-DP k-ary tree
  with subtraction (Laplace noise, Algorithm 2) has lower exact MSE than the
  (ε, δ)-DP Gaussian square-root factorization, at a given horizon.
* :func:`lemma19_exponent`: the asymptotic version, δ = O(T^{−B_ε/B_{ε,δ}})
  (Lemma 19, Theorem 2): B_ε/B_{ε,δ} ≈ 0.916 for k = 19.
* :func:`cor22_variance_ratio`: Corollary 22's bound on Var(Laplace, Lemma 21) /
  Var(Gaussian) at the same (ε, δ) and ℓ₂ sensitivity.

References:
    * J. D. Andersson, R. Pagh, T. A. Steiner, S. Torkamani. "Count on Your
      Elders: Laplace vs Gaussian Noise". FORC 2025 (LIPIcs 329).
      https://arxiv.org/abs/2408.07021
    * M. Henzinger, J. Upadhyay, S. Upadhyay. "Almost tight error bounds on
      differentially private continual counting". SODA 2023.
      https://doi.org/10.1137/1.9781611977554.ch183
    * H. Fichtenberger, M. Henzinger, J. Upadhyay. "Constant Matters:
      Fine-grained Error Bound on Differentially Private Continual Observation".
      ICML 2023. https://arxiv.org/abs/2202.11205
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpcount._numeric import bisect
from dpcount._validate import check_integer, check_probability, check_real
from dpcount.analysis.advisor import best_k
from dpcount.counting.factorization.sqrt_toeplitz import (
    sqrt_l2_norm_squared,
    sqrt_mean_variance_coefficient,
)
from dpcount.counting.tree import KaryTree
from dpcount.counting.tree_formulas import even_offset_leading_constant, offset_leading_constant
from dpcount.privacy import Budget
from dpcount.privacy.calibration import fhu_delta, gaussian_sigma, laplace_scale_approximate

__all__ = [
    "DeltaThreshold",
    "cor22_variance_ratio",
    "huu_leading_constant",
    "laplace_gaussian_variance_ratio",
    "laplace_vs_gaussian_delta",
    "lemma19_exponent",
]


def huu_leading_constant() -> float:
    """B_{ε,δ} = 4/(π²·log₂(e)³) (count-on-your-elders, proof of Thm 2).

    Henzinger–Upadhyay–Upadhyay's MSE C²_{ε,δ}(1 + ln(4T/5)/π)² with
    C²_{ε,δ} ≈ (4/ε²)·ln(1/δ), written as (B_{ε,δ}/ε²)·log₂(T)²·log₂(1/δ).
    """
    return 4.0 / (math.pi**2 * math.log2(math.e) ** 3)


def lemma19_exponent(k: int = 19) -> float:
    """B_ε/B_{ε,δ} of count-on-your-elders Lemma 19 for the k-ary tree with subtraction.

    B_ε is Corollary 15's k(1 − 1/k²)/(2 log₂(k)³) for odd k (Corollary 30's
    k/(2 log₂(k)³) for even k). The ε-DP tree has the smaller asymptotic MSE when
    δ = O(T^{−B_ε/B_{ε,δ}}); k = 19 gives 0.9157 (the paper's "0.92").
    """
    k = check_integer("k", k, ge=2)
    b_eps = offset_leading_constant(k) if k % 2 else even_offset_leading_constant(k)
    return b_eps / huu_leading_constant()


def cor22_variance_ratio(epsilon: float, delta: float) -> float:
    """Corollary 22's bound w²/(2(√(1 + w) − 1)²), w = ε/ln(1/δ).

    Var of the ℓ₂ Laplace mechanism (Lemma 21) over Var of the classic Gaussian
    mechanism at the same (ε, δ) and ℓ₂ sensitivity is at most this, for
    ε ≤ ln(1/δ); it tends to 2 as ε → 0.
    """
    eps = check_real("epsilon", epsilon, gt=0)
    dlt = check_probability("delta", delta)
    w = eps / math.log(1.0 / dlt)
    if w > 1.0:
        raise ValueError(f"Corollary 22 needs epsilon <= ln(1/delta), got epsilon={epsilon!r}")
    root = w / (math.sqrt(1.0 + w) + 1.0)  # √(1 + w) − 1 without cancellation
    return w * w / (2.0 * root * root)


def laplace_gaussian_variance_ratio(epsilon: float, delta: float, method: str = "classic") -> float:
    """2λ²/σ² for the same ℓ₂ sensitivity: λ from Lemma 21 (ℓ₁ unconstrained), σ by ``method``.

    With ``method="classic"`` this is the quantity Corollary 22 bounds; with
    ``"analytic"`` it compares against the exact Gaussian mechanism.
    """
    # An ℓ₁ sensitivity so large that Theorem 3's ℓ₂ branch (Lemma 21) decides λ.
    lam = laplace_scale_approximate(1e150, 1.0, epsilon, delta)
    sigma = gaussian_sigma(1.0, epsilon, delta, method=method)  # type: ignore[arg-type]
    return 2.0 * lam * lam / (sigma * sigma)


@dataclass(frozen=True)
class DeltaThreshold:
    """Where ε-DP Laplace trees overtake the Gaussian square-root factorization.

    Attributes:
        horizon, epsilon: the setting.
        k: the tree's branching factor (with subtraction).
        tree_mse: exact MSE of the ε-DP k-ary tree with subtraction (Laplace).
        delta: the largest δ at which tree_mse < MSE of the Gaussian square-root
            factorization calibrated with the exact analytic Gaussian mechanism
            (bisection on ln δ); 0.0 if even δ = 1e-300 favours the Gaussian,
            and ``delta_capped`` if the tree wins for every δ in the search range.
        delta_fhu: the same with σ = C_{ε,δ}·√S(T) (constant-matters eq. 2), in
            closed form; None for ε ≥ 1, where C_{ε,δ} is undefined.
        exponent: Lemma 19's B_ε/B_{ε,δ} for this k.
        asymptotic_delta: T^{−exponent}, the asymptotic prediction (up to constants).
        delta_capped: the tree wins even at the top of the search range (δ → 1).
    """

    horizon: int
    epsilon: float
    k: int
    tree_mse: float
    delta: float
    delta_fhu: float | None
    exponent: float
    asymptotic_delta: float
    delta_capped: bool = False


_LOG_DELTA_MIN = math.log(1e-300)
_LOG_DELTA_MAX = math.log1p(-1e-9)


def laplace_vs_gaussian_delta(
    horizon: int, epsilon: float, k: int | None = None, *, step_sensitivity: float = 1.0
) -> DeltaThreshold:
    """The largest δ at which the ε-DP k-ary tree with subtraction beats Gaussian √A in MSE.

    Tree: :class:`~dpcount.counting.KaryTree` (subtraction, Laplace, pure ε-DP),
    exact MSE; k defaults to the best k with subtraction for this horizon.
    Gaussian: the square-root factorization with one z, MSE =
    σ(δ)²·mean_t S(t), σ(δ) = analytic Gaussian σ for ℓ₂ sensitivity √S(T)·Δ.
    σ(δ) decreases in δ, so {δ : tree wins} = (0, δ*]; δ* is found by bisection on
    ln δ (60+ halvings, relative precision ~1e-12).
    """
    T = check_integer("horizon", horizon, ge=1)
    eps = check_real("epsilon", epsilon, gt=0)
    step = check_real("step_sensitivity", step_sensitivity, gt=0)
    if k is None:
        k = best_k(T, budget=Budget(epsilon=eps), subtract=True, k_values=range(3, 65)).k
    k = check_integer("k", k, ge=2)
    tree = KaryTree(T, epsilon=eps, k=k, subtract=True, rng=0, step_sensitivity=step)
    tree_mse = tree.mse()
    l2 = math.sqrt(sqrt_l2_norm_squared(T)) * step
    coef = sqrt_mean_variance_coefficient(T)

    def gauss_mse(log_delta: float) -> float:
        return gaussian_sigma(l2, eps, math.exp(log_delta)) ** 2 * coef

    exponent = lemma19_exponent(k)
    asymptotic = float(T) ** (-exponent)
    lo, hi = _LOG_DELTA_MIN, _LOG_DELTA_MAX
    capped = False
    if tree_mse >= gauss_mse(lo):
        delta = 0.0
    elif tree_mse < gauss_mse(hi):
        delta, capped = math.exp(hi), True
    else:
        # invariant: the tree wins at lo, loses at hi
        lo, hi = bisect(lambda d: tree_mse < gauss_mse(d), lo, hi, done=lambda a, b: b - a < 1e-13)
        delta = math.exp(lo)
    delta_fhu: float | None = None
    if eps < 1.0:
        # σ = C_{ε,δ}·l2 and MSE = S̄·σ², so C² = tree_mse/(S̄·l2²) at the crossing.
        delta_fhu = fhu_delta(eps, math.sqrt(tree_mse / (coef * l2 * l2)))
    return DeltaThreshold(T, eps, k, tree_mse, delta, delta_fhu, exponent, asymptotic, capped)
