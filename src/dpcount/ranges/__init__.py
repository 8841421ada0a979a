"""Static range queries: correlated input perturbation, baselines and exact error.

Dharangutte, Gao, Gong, Wang, "Differentially Private Range Queries with Correlated
Input Perturbation" (2024, https://arxiv.org/abs/2402.07066). :func:`cascade_sample`
draws the correlated noise (Alg. 1–3);
:class:`CorrelatedPerturbation` releases x + noise with (ε, δ)-DP; the baselines
(:class:`IdentityMechanism`, :class:`TreeMechanism`, :class:`HierarchicalMechanism`,
:class:`WaveletMechanism`, :class:`EigenDesignMechanism`) share its interface; the
metrics (Defs 3.11–3.13) are exact wherever the covariance allows.

Neighbouring relation: histograms differing by at most 1 in one cell (one record
added or removed).
"""

from dpcount.ranges.baselines import (
    EigenDesignMechanism,
    HierarchicalMechanism,
    IdentityMechanism,
    TreeMechanism,
    TreeRelease,
    WaveletMechanism,
)
from dpcount.ranges.calibration import (
    precision_diagonal,
    precision_max_diag,
)
from dpcount.ranges.cascade import cascade_sample, level_profile, split_variances
from dpcount.ranges.correlated import CorrelatedPerturbation
from dpcount.ranges.mechanism import NEIGHBOURING, RangeMechanism
from dpcount.ranges.metrics import (
    MonteCarloEstimate,
    PaperEstimate,
    expected_worst_case_error,
    max_query_variance,
    nodal_level_variances,
    paper_monte_carlo_errors,
    query_variances,
    total_squared_error,
    worst_case_expected_error,
)
from dpcount.ranges.registry import MECHANISMS, build_mechanism
from dpcount.ranges.release import HistogramRelease, RangeAnswers
from dpcount.ranges.workloads import (
    AllRanges,
    DenseWorkload,
    RangeWorkload,
    nodal_ranges,
    random_dense_queries,
)

__all__ = [
    "MECHANISMS",
    "NEIGHBOURING",
    "AllRanges",
    "CorrelatedPerturbation",
    "DenseWorkload",
    "EigenDesignMechanism",
    "HierarchicalMechanism",
    "HistogramRelease",
    "IdentityMechanism",
    "MonteCarloEstimate",
    "PaperEstimate",
    "RangeAnswers",
    "RangeMechanism",
    "RangeWorkload",
    "TreeMechanism",
    "TreeRelease",
    "WaveletMechanism",
    "build_mechanism",
    "cascade_sample",
    "expected_worst_case_error",
    "level_profile",
    "max_query_variance",
    "nodal_level_variances",
    "nodal_ranges",
    "paper_monte_carlo_errors",
    "precision_diagonal",
    "precision_max_diag",
    "query_variances",
    "random_dense_queries",
    "split_variances",
    "total_squared_error",
    "worst_case_expected_error",
]
