"""Range-query mechanisms by name (CLI and reproduction scripts)."""

from __future__ import annotations

from typing import Any

from dpcount._validate import check_choice
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


def build_mechanism(name: str, shape: int | tuple[int, ...], **options: Any) -> RangeMechanism:
    """Build the mechanism ``name`` (see :data:`MECHANISMS`) for ``shape``.

    ``options`` are the constructor's keywords: the budget (``budget=`` or
    ``epsilon=``, ``delta=``, ``noise=``, ``calibration=``), ``rng=`` and the
    structure's own (``level_variances=``, ``workload=``, ...).
    ``calibration=None`` means the noise kind's default (``"analytic"`` for
    ``noise="gaussian"``, ``"zcdp"`` for ``noise="discrete-gaussian"``).
    """
    check_choice("mechanism", name, tuple(MECHANISMS))
    return MECHANISMS[name](shape, **options)
