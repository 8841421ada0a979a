"""Range-query mechanisms by name (CLI and reproduction scripts)."""

from __future__ import annotations

from typing import Any

from dpcount._validate import check_choice
from dpcount.privacy.rng import RNGLike
from dpcount.ranges.baselines import (
    EigenDesignMechanism,
    HierarchicalMechanism,
    IdentityMechanism,
    TreeMechanism,
    WaveletMechanism,
)
from dpcount.ranges.correlated import CorrelatedPerturbation
from dpcount.ranges.mechanism import RangeMechanism

__all__ = ["MECHANISMS", "build_mechanism"]

MECHANISMS: dict[str, type[RangeMechanism]] = {
    "correlated": CorrelatedPerturbation,
    "identity": IdentityMechanism,
    "tree": TreeMechanism,
    "hierarchical": HierarchicalMechanism,
    "wavelet": WaveletMechanism,
    "eigen": EigenDesignMechanism,
}


def build_mechanism(
    name: str,
    shape: int | tuple[int, ...],
    epsilon: float,
    delta: float,
    calibration: str | None = None,
    rng: RNGLike = None,
    **options: Any,
) -> RangeMechanism:
    """Build the mechanism ``name`` (see :data:`MECHANISMS`) with the common arguments.

    ``calibration=None`` means the noise kind's default (``"analytic"`` for
    ``noise="gaussian"``, ``"zcdp"`` for ``noise="discrete-gaussian"``); ``options``
    (e.g. ``noise=``, ``level_variances=``, ``workload=``) go to the constructor.
    """
    check_choice("mechanism", name, tuple(MECHANISMS))
    return MECHANISMS[name](shape, epsilon, delta, calibration, rng, **options)  # type: ignore[call-arg]
