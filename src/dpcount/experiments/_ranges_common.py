"""Shared settings of the correlated-input-perturbation reproductions (§4, App. C).

The paper's setup (§4.2): data uniform on {1, ..., 1000}, ε = 0.1, δ = 1e−9, add/remove
neighbours (‖x − x'‖₁ = 1), n ∈ {2^6, ..., 2^15}, EigenDesign only up to n = 2^10.
Every mechanism is calibrated with the same exact (analytic Gaussian) method, so
their ratios depend only on the sensitivities; the paper's Theorem 3.8 σ for the
correlated mechanism is reported next to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount.experiments._framework import ExperimentConfig
from dpcount.ranges import MECHANISMS, RangeMechanism, build_mechanism
from dpcount.ranges.baselines.eigen import MAX_CELLS as EIGEN_MAX_CELLS

__all__ = [
    "COLORS",
    "DELTA",
    "EPSILON",
    "LABELS",
    "MARKERS",
    "BoolArray",
    "FloatArray",
    "eigen_limit",
    "mechanisms_for",
    "uniform_data",
]

EPSILON = 0.1
DELTA = 1e-9

#: the array types the range experiments pass around
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

#: the paper's names for our registry's mechanisms (its legend)
LABELS = {
    "correlated": "Correlated (ours)",
    "identity": "Gaussian",
    "tree": "Binary Tree",
    "hierarchical": "Hierarchical",
    "wavelet": "Wavelet",
    "eigen": "EigenDesign",
}
COLORS = {
    "correlated": "tab:red",
    "identity": "tab:blue",
    "tree": "tab:green",
    "hierarchical": "tab:purple",
    "wavelet": "tab:orange",
    "eigen": "tab:brown",
}
MARKERS = {
    "correlated": "o",
    "identity": "s",
    "tree": "^",
    "hierarchical": "v",
    "wavelet": "D",
    "eigen": "P",
}


def eigen_limit(config: ExperimentConfig) -> int:
    """Largest n for EigenDesign: the paper's 2^10 (a dense eigendecomposition), 2^8 quick."""
    return 256 if config.quick else EIGEN_MAX_CELLS


def mechanisms_for(
    n: int,
    config: ExperimentConfig,
    rng: np.random.Generator,
    eigen_workload: Any = None,
) -> list[RangeMechanism]:
    """Every range mechanism over n cells with the paper's (ε, δ), drawing from ``rng``.

    EigenDesign is built for ``eigen_workload`` (default: all ranges) when
    n ≤ :func:`eigen_limit`.
    """
    out = []
    for name in MECHANISMS:
        if name == "eigen":
            if n > eigen_limit(config):
                continue
            out.append(
                build_mechanism(
                    name, n, epsilon=EPSILON, delta=DELTA, rng=rng, workload=eigen_workload
                )
            )
        else:
            out.append(build_mechanism(name, n, epsilon=EPSILON, delta=DELTA, rng=rng))
    return out


def uniform_data(n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """The paper's data (§4.2): n counts uniform on {1, ..., 1000}."""
    return rng.integers(1, 1001, size=n).astype(np.float64)
