"""The range mechanisms' shared guarantee text (ranges/_statements.py)."""

from __future__ import annotations

import pytest

from dpcount.ranges import (
    CorrelatedPerturbation,
    HierarchicalMechanism,
    IdentityMechanism,
    TreeMechanism,
    WaveletMechanism,
)
from dpcount.ranges._statements import NEIGHBOURING_RELATION, range_statements


@pytest.mark.parametrize(
    ("cls", "sensitivity", "discrete"),
    [
        (IdentityMechanism, "Δ₂ = 1", True),
        (TreeMechanism, "Δ₂ = √(K+1)", True),
        (HierarchicalMechanism, "Δ₂ = √(K+1)", True),
        (WaveletMechanism, "Δ₂ = √(K+1)", True),
        (CorrelatedPerturbation, "Δ₂ = √(‖diag C⁻¹‖_∞)", False),
    ],
)
def test_every_marker_is_expanded(cls: type, sensitivity: str, discrete: bool) -> None:
    doc = " ".join((cls.__doc__ or "").split())
    assert "[" + "range" not in doc and "[noise kinds" not in doc
    assert " ".join(NEIGHBOURING_RELATION.split()) in doc
    assert f"ℓ₂ sensitivity {sensitivity} by the analytic Gaussian mechanism" in doc
    # The shared discrete statement only where the class does not argue its own ρ.
    assert ("ρ = Δ₂²/(2σ²)" in doc) is discrete
    assert "https://arxiv.org/abs/2004.00010" in doc  # the discrete Gaussian's citation


def test_a_missing_marker_is_refused() -> None:
    class NoRelation:
        """Formal guarantee:
        [range noise kinds: all; Δ₂ = 1]
        [noise kinds references]
        """

    with pytest.raises(ValueError, match=r"NoRelation's docstring has no .*neighbouring"):
        range_statements(NoRelation)

    class NoReferences:
        """Formal guarantee:
        [range neighbouring relation]
        [range noise kinds: gaussian; Δ₂ = 1]
        """

    with pytest.raises(ValueError, match=r"NoReferences's docstring has no .*references"):
        range_statements(NoReferences)
