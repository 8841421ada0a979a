"""The library's own privacy notes: a δ above 1e-3 in the guarantee's text."""

from __future__ import annotations

import pytest

from dpcount.counting import KaryTree
from dpcount.privacy import Budget, data_derived_warning, delta_warning


@pytest.mark.parametrize("delta", [0.5, 0.0011])
def test_describe_says_a_large_delta_gives_little_protection(delta: float) -> None:
    mech = KaryTree(8, epsilon=1.0, delta=delta, noise="gaussian", rng=0)
    assert mech.privacy is not None
    text = mech.privacy.describe()
    assert text.endswith(f"WARNING: {delta_warning(delta)}")
    assert "much smaller than 1 / (the number of people in the data)" in text
    assert mech.privacy.warning == Budget(epsilon=1.0, delta=delta).warning == delta_warning(delta)


@pytest.mark.parametrize("delta", [None, 1e-6, 1e-3])
def test_a_usual_delta_has_no_warning(delta: float | None) -> None:
    mech = KaryTree(8, epsilon=1.0, delta=delta, noise="laplace", rng=0)
    assert mech.privacy is not None
    assert "WARNING" not in mech.privacy.describe() and mech.privacy.warning is None
    assert Budget(epsilon=1.0, delta=delta).warning is None


def test_the_warnings_name_the_parameter_as_the_front_end_spells_it() -> None:
    assert (delta_warning(0.5, parameter="--delta") or "").startswith("--delta 0.5 is above")
    assert (delta_warning(0.5) or "").startswith("delta=0.5 is above")
    assert data_derived_warning(["--start"]).startswith("warning: --start taken from the data")
    with pytest.raises(ValueError, match="names must not be empty"):
        data_derived_warning([])
