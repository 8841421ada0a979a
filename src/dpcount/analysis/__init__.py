"""Exact error analysis and mechanism comparison."""

from dpcount.analysis.advisor import TreeChoice, best_k
from dpcount.analysis.cbnorm import CbNormBounds, cb_norm_bounds, mathias_gamma_hat
from dpcount.analysis.certificates import (
    Certificate,
    Objective,
    Reference,
    asymptotic_lower_bound,
    best_known_loss,
    certify,
)
from dpcount.analysis.choice import AutoReason, Choice, NoiseNote, choose
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
    "AutoReason",
    "Candidate",
    "CbNormBounds",
    "Certificate",
    "Choice",
    "DeltaThreshold",
    "NoiseNote",
    "Objective",
    "Recommendation",
    "Reference",
    "TreeChoice",
    "asymptotic_lower_bound",
    "best_k",
    "best_known_loss",
    "cb_norm_bounds",
    "certify",
    "choose",
    "compare",
    "cor22_variance_ratio",
    "huu_leading_constant",
    "laplace_gaussian_variance_ratio",
    "laplace_vs_gaussian_delta",
    "lemma19_exponent",
    "mathias_gamma_hat",
    "recommend_mechanism",
]
