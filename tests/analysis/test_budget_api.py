"""The Budget end to end (issue 19, issue 33): every entry point that took ε/δ/noise
loose in 0.3 takes ``budget=``; 0.4 deprecated the loose spelling and 0.5 removed it,
so it is a TypeError that names the field given and the replacement
``budget=Budget(...)`` (with the values given), keywords and positions alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dpcount.analysis import best_k, compare, recommend_mechanism
from dpcount.counting.registry import build_mechanism
from dpcount.privacy import Budget, Participation

#: name -> the 0.4 loose call (raises before any work), the field it names first and the
#: replacement the message spells
LOOSE: dict[str, tuple[Callable[[], Any], str, str]] = {
    "build_mechanism": (
        lambda: build_mechanism("kary", horizon=32, epsilon=1.0, delta=1e-6, rng=0, k=4),
        "keyword argument 'epsilon'",
        "budget=Budget(epsilon=1.0, delta=1e-06)",
    ),
    "compare": (
        lambda: compare(32, 1.0, 1e-6, k_values=range(2, 5)),
        "fields epsilon, delta by position",
        "budget=Budget(epsilon=1.0, delta=1e-06)",
    ),
    "best_k": (
        lambda: best_k(32, 1.0, 1e-6, "laplace"),
        "fields epsilon, delta, noise by position",
        "budget=Budget(epsilon=1.0, delta=1e-06, noise='laplace')",
    ),
    "recommend_mechanism": (
        lambda: recommend_mechanism(32, epsilon=1.0, delta=1e-6),
        "keyword argument 'epsilon'",
        "budget=Budget(epsilon=1.0, delta=1e-06)",
    ),
    "compare(step_sensitivity=)": (
        lambda: compare(32, step_sensitivity=2.0, budget=Budget(epsilon=1.0)),
        "keyword argument 'step_sensitivity'",
        "budget=Budget(step_sensitivity=2.0)",
    ),
}


@pytest.mark.parametrize("name", sorted(LOOSE))
def test_the_loose_spelling_is_a_type_error_naming_the_replacement(name: str) -> None:
    call, field, replacement = LOOSE[name]
    owner = name.partition("(")[0]
    with pytest.raises(TypeError) as err:
        call()
    text = str(err.value)
    assert text.startswith(f"{owner}() got ") and field in text, text
    assert f"pass {replacement} instead" in text and "removed in dpcount 0.5" in text, text


def test_build_mechanism_takes_a_budget_with_a_schema() -> None:
    """Issue 19: ``build_mechanism(..., budget=Budget(...))`` raised a TypeError."""
    schema = Participation(max_participations=2, min_separation=4)
    budget = Budget(epsilon=1.0, participation=schema)
    mech = build_mechanism("binary", horizon=16, budget=budget, rng=0)
    assert mech.budget.participation == schema and mech.budget.noise == "discrete-laplace"
    with pytest.raises(TypeError, match=r"build_mechanism\(\) got an unexpected keyword .*'eps"):
        build_mechanism("binary", horizon=16, budget=budget, epsilon=1.0)
    with pytest.raises(TypeError, match=r"missing 1 required keyword-only argument: 'budget'"):
        build_mechanism("binary", horizon=16)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"budget must be a dpcount\.privacy\.Budget, got dict"):
        build_mechanism("binary", horizon=16, budget={"epsilon": 1.0})  # type: ignore[arg-type]


def test_compare_ranks_every_noise_so_refuses_a_budget_that_names_one() -> None:
    with pytest.raises(ValueError, match="compare ranks every noise kind"):
        compare(16, budget=Budget(epsilon=1.0, noise="laplace"))
    with pytest.raises(TypeError, match=r"compare\(\) got the budget's fields epsilon by posi"):
        compare(16, 1.0, budget=Budget(epsilon=1.0))  # type: ignore[misc]
