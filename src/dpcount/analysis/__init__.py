"""Exact error analysis and mechanism comparison.

The names are imported on first use (a module ``__getattr__``, PEP 562): importing
``dpcount.analysis.choice`` (every ``dpcount count``) does not import the
certificates' factorizations (nor scipy.signal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpcount._lazy import lazy_attributes

# eager: the function ``compare`` shares its name with its submodule, which the import
# system would otherwise bind here on first import (the submodule is cheap: it imports
# the certificates only for Gaussian rows)
from dpcount.analysis.compare import METRICS, Candidate, compare

if TYPE_CHECKING:
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
    from dpcount.analysis.recommend import GaussianBounds, Recommendation, recommend_mechanism
    from dpcount.analysis.threshold import (
        DeltaThreshold,
        cor22_variance_ratio,
        huu_leading_constant,
        laplace_gaussian_variance_ratio,
        laplace_vs_gaussian_delta,
        lemma19_exponent,
    )

#: public name -> the submodule that defines it
_WHERE = {
    "TreeChoice": "advisor",
    "best_k": "advisor",
    "CbNormBounds": "cbnorm",
    "cb_norm_bounds": "cbnorm",
    "mathias_gamma_hat": "cbnorm",
    "Certificate": "certificates",
    "Objective": "certificates",
    "Reference": "certificates",
    "asymptotic_lower_bound": "certificates",
    "best_known_loss": "certificates",
    "certify": "certificates",
    "AutoReason": "choice",
    "Choice": "choice",
    "NoiseNote": "choice",
    "choose": "choice",
    "GaussianBounds": "recommend",
    "Recommendation": "recommend",
    "recommend_mechanism": "recommend",
    "DeltaThreshold": "threshold",
    "cor22_variance_ratio": "threshold",
    "huu_leading_constant": "threshold",
    "laplace_gaussian_variance_ratio": "threshold",
    "laplace_vs_gaussian_delta": "threshold",
    "lemma19_exponent": "threshold",
}

__all__ = [
    "METRICS",
    "AutoReason",
    "Candidate",
    "CbNormBounds",
    "Certificate",
    "Choice",
    "DeltaThreshold",
    "GaussianBounds",
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


__getattr__, __dir__ = lazy_attributes(__name__, _WHERE, __all__)
