"""Bounds on the completely bounded (factorization) norm of the counting matrix.

constant-matters eq. (3) (Mathias 1993, Cor. 3.5):
(1/2 + 1/(2T))·γ̂(T) ≤ ‖A‖_cb ≤ γ̂(T)/2 + 1/2, with
γ̂(T) = (1/T)·Σ_{j=1}^{T} |csc((2j − 1)π/(2T))|, against the paper's Ψ(T) (eq. 4)
and the exact ‖L‖₂→∞·‖R‖₁→₂ = Σ_{k<T} f(k)² of the square-root factorization.
Erratum: Ψ(T) is below Σ f(k)² for T ≥ 11, so Theorem 1.1 (‖L‖‖R‖ ≤ Ψ) is false as
stated; Σ f(k)² is a valid upper bound on ‖A‖_cb (it is achieved by a
factorization), and Mathias' lower bound is the true floor.

References:
    * R. Mathias. "The Hadamard operator norm of a circulant and
      applications". SIAM J. Matrix Anal. Appl. 14(4), 1993. (no link)
    * H. Fichtenberger, M. Henzinger, J. Upadhyay. "Constant Matters:
      Fine-grained Error Bound on Differentially Private Continual Observation".
      ICML 2023. https://arxiv.org/abs/2202.11205
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import psi as digamma

from dpcount._validate import check_integer
from dpcount.counting.factorization.sqrt_toeplitz import psi_bound, sqrt_l2_norm_squared

__all__ = ["CbNormBounds", "cb_norm_bounds", "mathias_gamma_hat"]

# Below this T the sum is evaluated term by term (exactly summed); above, the
# expansion below is accurate to < 1e-16 relative.
_DIRECT = 256


def mathias_gamma_hat(horizon: int) -> float:
    """γ̂(T) = (1/T)·Σ_{j=1}^{T} csc((2j − 1)π/(2T)) (constant-matters eq. 3), O(1) for large T.

    For large T: writing csc x = 1/x + 1/(π − x) + h(x) with h smooth and symmetric on
    [0, π], the 1/x terms sum to (4T/π)·Σ_{j≤T} 1/(2j − 1) = (2T/π)(ψ(T + ½) − ψ(½))
    and the h terms form a midpoint rule (Euler–Maclaurin, ∫₀^π h = 2 ln(2/π)):
    γ̂(T) = (2/π)(ψ(T + ½) + γ + ln(8/π)) + (π/(12T²))(1/6 − 1/π²)
           − (14π³/(5760 T⁴))(7/60 − 6/π⁴) + O(T⁻⁶).
    Checked against mpmath in the tests.
    """
    T = check_integer("horizon", horizon, ge=1)
    if T < _DIRECT:
        j = np.arange(1, T + 1)
        return math.fsum(1.0 / np.sin((2 * j - 1) * np.pi / (2 * T))) / T
    pi = math.pi
    lead = (2.0 / pi) * (float(digamma(T + 0.5)) + float(np.euler_gamma) + math.log(8.0 / pi))
    second = (pi / (12.0 * T * T)) * (1.0 / 6.0 - 1.0 / pi**2)
    fourth = (14.0 * pi**3 / (5760.0 * float(T) ** 4)) * (7.0 / 60.0 - 6.0 / pi**4)
    return lead + second - fourth


@dataclass(frozen=True)
class CbNormBounds:
    """Bounds on ‖A‖_cb for the T×T counting matrix A.

    Attributes:
        horizon: T.
        gamma_hat: γ̂(T) of eq. (3).
        mathias_lower: (1/2 + 1/(2T))·γ̂(T) (Mathias 1993), a lower bound.
        mathias_upper: γ̂(T)/2 + 1/2 (Mathias 1993), an upper bound.
        psi: Ψ(T) of eq. (4), the paper's claimed bound (not a valid bound on Σf²).
        sqrt_factorization: Σ_{k<T} f(k)², exactly ‖L‖₂→∞·‖R‖₁→₂ of Algorithm 1.
    """

    horizon: int
    gamma_hat: float
    mathias_lower: float
    mathias_upper: float
    psi: float
    sqrt_factorization: float

    @property
    def psi_is_below_exact(self) -> bool:
        """The erratum: True for every T ≥ 11."""
        return self.psi < self.sqrt_factorization


def cb_norm_bounds(horizon: int) -> CbNormBounds:
    """Mathias' bounds, the paper's Ψ(T) and the exact Σf(k)², all in O(1)."""
    T = check_integer("horizon", horizon, ge=1)
    g = mathias_gamma_hat(T)
    return CbNormBounds(
        horizon=T,
        gamma_hat=g,
        mathias_lower=(0.5 + 0.5 / T) * g,
        mathias_upper=0.5 * g + 0.5,
        psi=psi_bound(T),
        sqrt_factorization=sqrt_l2_norm_squared(T),
    )
