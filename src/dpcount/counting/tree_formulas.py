"""Closed forms for the k-ary tree mechanisms (count-on-your-elders §3–4, App. C).

Each formula lives here once; mechanisms, tests and reproductions call these.
"Mean nodes" is the average over t = 1..T of ‖digits(t)‖₁, the number of node
noises summed; the MSE is (node variance) × (mean nodes), with node variance
2(hΔ/ε)² for ε-DP Laplace noise.
"""

from __future__ import annotations

import math

from dpcount._validate import check_integer, check_real

__all__ = [
    "claim29_mean_nodes",
    "even_offset_leading_constant",
    "even_offset_total_nodes",
    "kary_leading_constant",
    "lemma8_mean_nodes",
    "lemma8_mse",
    "lemma14_mean_nodes",
    "lemma14_mse",
    "offset_leading_constant",
    "tree_laplace_node_variance",
]


def _kh(k: int, h: int, *, k_min: int = 2) -> tuple[int, int]:
    return check_integer("k", k, ge=k_min), check_integer("h", h, ge=1)


def tree_laplace_node_variance(h: int, epsilon: float, step_sensitivity: float = 1.0) -> float:
    """Variance of Lap(hΔ/ε) node noise: 2(hΔ/ε)² (Algorithms 1–2, line 4/3)."""
    h = check_integer("h", h, ge=1)
    eps = check_real("epsilon", epsilon, gt=0)
    delta_step = check_real("step_sensitivity", step_sensitivity, gt=0)
    return 2.0 * (h * delta_step / eps) ** 2


def lemma8_mean_nodes(k: int, h: int) -> float:
    """Mean ‖rep_k(t, h)‖₁ over t = 1..k^h − 1: h(k − 1)/(2(1 − k^−h)) (Lemma 8 proof)."""
    k, h = _kh(k, h)
    return h * (k - 1) / (2.0 * (1.0 - float(k) ** -h))


def lemma8_mse(k: int, h: int, epsilon: float) -> float:
    """Lemma 8: MSE of Algorithm 1 at T = k^h − 1 is (k − 1)h³/(ε²(1 − 1/k^h))."""
    return lemma8_mean_nodes(k, h) * tree_laplace_node_variance(h, epsilon)


def lemma14_mean_nodes(k: int, h: int) -> float:
    """Mean offset-digit ℓ₁ norm over t = 1..(k^h − 1)/2, odd k: (kh/4)(1 − 1/k²)/(1 − 1/k^h)."""
    k, h = _kh(k, h, k_min=3)
    if k % 2 == 0:
        raise ValueError(f"k must be odd for Lemma 14, got {k}")
    return (k * h / 4.0) * (1.0 - 1.0 / k**2) / (1.0 - float(k) ** -h)


def lemma14_mse(k: int, h: int, epsilon: float) -> float:
    """Lemma 14: MSE of Algorithm 2 at T = (k^h − 1)/2 is k(1 − 1/k²)h³/(2ε²(1 − 1/k^h))."""
    return lemma14_mean_nodes(k, h) * tree_laplace_node_variance(h, epsilon)


def even_offset_total_nodes(k: int, h: int) -> float:
    """c_h of Claim 29 (even k): total nodes over all T = k(k^h − 1)/(2(k − 1)) steps.

    c_h = ((k + 2)/4 + k(h − 1)/4)·(k/2)·k^{h−1} + c_{h−1}, c_0 = 0. This recursion
    is exact (leading digit 1..k/2 averages (k+2)/4; each other digit in
    [−k/2 + 1, k/2] averages k/4).
    """
    k, h = _kh(k, h)
    if k % 2:
        raise ValueError(f"k must be even for Claim 29, got {k}")
    total = 0.0
    for j in range(1, h + 1):
        total += ((k + 2) / 4.0 + k * (j - 1) / 4.0) * (k / 2.0) * float(k) ** (j - 1)
    return total


def claim29_mean_nodes(k: int, h: int) -> float:
    """Claim 29's leading term of the mean node count for even k: (kh/4)/(1 − 1/k^h).

    The exact mean is ``even_offset_total_nodes(k, h) / T``; the two differ by
    o(h) (the claim's o(h²) after multiplying by the node variance's h²).
    """
    k, h = _kh(k, h)
    return (k * h / 4.0) / (1.0 - float(k) ** -h)


def kary_leading_constant(k: int) -> float:
    """Theorem 9: MSE ≈ (k − 1)/(ε² log₂(k)³)·log₂(T)³; minimized at k = 17 (≈ 0.234)."""
    k = check_integer("k", k, ge=2)
    return (k - 1) / math.log2(k) ** 3


def offset_leading_constant(k: int) -> float:
    """Corollary 15 (odd k): k(1 − 1/k²)/(2 log₂(k)³); minimized at k = 19 (≈ 0.1236)."""
    k = check_integer("k", k, ge=3)
    return k * (1.0 - 1.0 / k**2) / (2.0 * math.log2(k) ** 3)


def even_offset_leading_constant(k: int) -> float:
    """Corollary 30 (even k): k/(2 log₂(k)³); minimized at k = 20 (≈ 0.1238)."""
    k = check_integer("k", k, ge=2)
    return k / (2.0 * math.log2(k) ** 3)
