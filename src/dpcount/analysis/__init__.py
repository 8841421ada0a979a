"""Exact error analysis and mechanism comparison."""

from dpcount.analysis.advisor import TreeChoice, best_k
from dpcount.analysis.cbnorm import CbNormBounds, cb_norm_bounds, mathias_gamma_hat
from dpcount.analysis.compare import METRICS, Candidate, compare
from dpcount.analysis.recommend import Recommendation, recommend_mechanism
from dpcount.analysis.threshold import (
    DeltaThreshold,
    cor22_variance_ratio,
    huu_leading_constant,
    laplace_gaussian_variance_ratio,
    laplace_vs_gaussian_delta,
    lemma19_exponent,
)

__all__ = [
    "METRICS",
    "Candidate",
    "CbNormBounds",
    "DeltaThreshold",
    "Recommendation",
    "TreeChoice",
    "best_k",
    "cb_norm_bounds",
    "compare",
    "cor22_variance_ratio",
    "huu_leading_constant",
    "laplace_gaussian_variance_ratio",
    "laplace_vs_gaussian_delta",
    "lemma19_exponent",
    "mathias_gamma_hat",
    "recommend_mechanism",
]
