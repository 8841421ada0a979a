"""Baseline range-query mechanisms with Gaussian noise, same interface as the correlated one.

All give (ε, δ)-DP for histograms differing by at most 1 in one cell, calibrated with
:func:`dpcount.privacy.calibrate` for their ℓ₂ sensitivity, and
every answer's variance is exact.
"""

from dpcount.ranges.baselines.eigen import EigenDesignMechanism
from dpcount.ranges.baselines.hierarchical import HierarchicalMechanism
from dpcount.ranges.baselines.identity import IdentityMechanism
from dpcount.ranges.baselines.tree import TreeMechanism, TreeRelease
from dpcount.ranges.baselines.wavelet import WaveletMechanism

__all__ = [
    "EigenDesignMechanism",
    "HierarchicalMechanism",
    "IdentityMechanism",
    "TreeMechanism",
    "TreeRelease",
    "WaveletMechanism",
]
