"""The Budget end to end (issue 19): every entry point that used to take ε/δ/noise
loose takes ``budget=``; the loose spelling still works for one release, with a
DeprecationWarning, and gives the same result; both at once is a TypeError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dpcount.analysis import best_k, compare, recommend_mechanism
from dpcount.counting.registry import build_mechanism
from dpcount.privacy import Budget, Participation

#: name -> (call with budget=, the same call spelled loose, its budget)
CALLS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "build_mechanism": (
        lambda b: build_mechanism("kary", horizon=32, budget=b, rng=0, k=4).variances(),
        lambda: build_mechanism("kary", horizon=32, epsilon=1.0, delta=1e-6, rng=0,
                                k=4).variances(),
    ),
    "compare": (
        lambda b: compare(32, budget=b, k_values=range(2, 5)),
        lambda: compare(32, 1.0, 1e-6, k_values=range(2, 5)),
    ),
    "best_k": (
        lambda b: best_k(32, budget=b, k_values=range(2, 5)),
        lambda: best_k(32, 1.0, 1e-6, k_values=range(2, 5)),
    ),
    "recommend_mechanism": (
        lambda b: recommend_mechanism(32, budget=b),
        lambda: recommend_mechanism(32, epsilon=1.0, delta=1e-6),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_loose_spelling_is_deprecated_and_equal(name: str) -> None:
    new, old = CALLS[name]
    with pytest.warns(DeprecationWarning, match=rf"{name}\(epsilon=, delta=\) is deprecated"):
        before = old()
    after = new(Budget(epsilon=1.0, delta=1e-6))
    if hasattr(after, "tolist"):
        assert after.tolist() == before.tolist()
    else:
        assert after == before


def test_build_mechanism_takes_a_budget_with_a_schema() -> None:
    """Issue 19: ``build_mechanism(..., budget=Budget(...))`` raised a TypeError."""
    schema = Participation(max_participations=2, min_separation=4)
    budget = Budget(epsilon=1.0, participation=schema)
    mech = build_mechanism("binary", horizon=16, budget=budget, rng=0)
    assert mech.budget.participation == schema and mech.budget.noise == "discrete-laplace"
    with pytest.raises(TypeError, match=r"build_mechanism\(\) takes either budget= or its fields"):
        build_mechanism("binary", horizon=16, budget=budget, epsilon=1.0)


def test_compare_ranks_every_noise_so_refuses_a_budget_that_names_one() -> None:
    with pytest.raises(ValueError, match="compare ranks every noise kind"):
        compare(16, budget=Budget(epsilon=1.0, noise="laplace"))
    with pytest.raises(TypeError, match=r"compare\(\) takes either budget= or its fields"):
        compare(16, 1.0, budget=Budget(epsilon=1.0))
