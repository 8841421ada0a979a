"""Bad input to dpcount.analysis: advisor, comparison, thresholds, tail bounds, norms."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcount.analysis import (
    asymptotic_lower_bound,
    best_k,
    best_known_loss,
    cb_norm_bounds,
    certify,
    choose,
    compare,
    cor22_variance_ratio,
    laplace_gaussian_variance_ratio,
    laplace_vs_gaussian_delta,
    lemma19_exponent,
    mathias_gamma_hat,
    recommend_mechanism,
)
from dpcount.analysis.recommend import NOISE_KINDS
from dpcount.counting import DigitSystem, KaryTree, max_digit_l1_norm
from dpcount.counting.registry import MECHANISMS
from dpcount.privacy import Budget, ZeroNoise, gaussian_linf_bound, laplace_linf_bound
from tests.properties_support import (
    ScalarCase,
    assert_rejects,
    bad_bool,
    bad_choice,
    bad_integer,
    bad_nonnegative_real,
    bad_positive_real,
    bad_probability,
    case_params,
)

COVERED = {
    "dpcount.analysis": {
        "asymptotic_lower_bound",
        "best_k",
        "best_known_loss",
        "certify",
        "cb_norm_bounds",
        "choose",
        "compare",
        "cor22_variance_ratio",
        "laplace_gaussian_variance_ratio",
        "laplace_vs_gaussian_delta",
        "lemma19_exponent",
        "mathias_gamma_hat",
        "recommend_mechanism",
    },
    "dpcount.privacy": {"gaussian_linf_bound", "laplace_linf_bound"},
    "dpcount.counting": {"max_digit_l1_norm"},
}

POS, PROB = bad_positive_real, bad_probability
KS = range(2, 5)


def _budgeted(fn: Any, fields: tuple[str, ...]) -> Any:
    """``fn`` called with its budget's fields gathered into ``budget=Budget(...)`` (the
    loose spelling was removed in 0.5): the Budget validates them, naming each."""

    def call(**kw: Any) -> Any:
        budget = Budget(**{k: kw.pop(k) for k in fields if k in kw})
        return fn(budget=budget, **kw)

    return call


_BEST_K = _budgeted(best_k, ("epsilon", "delta", "noise"))
_COMPARE = _budgeted(compare, ("epsilon", "delta", "step_sensitivity"))
_RECOMMEND = _budgeted(recommend_mechanism, ("epsilon", "delta", "noise", "step_sensitivity"))

CASES = [
    ScalarCase(
        "choose",
        lambda **kw: choose(budget=Budget(epsilon=1.0), **kw),
        {"horizon": 16},
        {
            # None: a stream of unknown length (the doubling counter)
            "horizon": bad_integer(1).filter(lambda b: b[0] is not None),
            "mechanism": bad_choice(("auto", *MECHANISMS)),
            "whole": bad_bool().filter(lambda b: b[0] is not None),  # None: not known yet
        },
    ),
    ScalarCase(
        "best_k",
        _BEST_K,
        {"horizon": 50, "epsilon": 1.0, "k_values": KS},
        {
            "horizon": bad_integer(1),
            "epsilon": POS(),
            "delta": PROB(allow_none=True),
            "noise": bad_choice(("laplace", "gaussian")),
            "metric": bad_choice(("mse", "max_variance", "linf")),
        },
    ),
    ScalarCase(
        "best_k[linf]",
        _BEST_K,
        {"horizon": 50, "epsilon": 1.0, "k_values": KS, "metric": "linf"},
        {"beta": PROB()},
    ),
    ScalarCase(
        "compare",
        _COMPARE,
        {"horizon": 50, "epsilon": 1.0, "k_values": KS},
        {
            "horizon": bad_integer(1),
            "epsilon": POS(),
            "delta": PROB(allow_none=True),
            "metric": bad_choice(("mse", "max_variance", "linf")),
            "beta": PROB(),
            "step_sensitivity": POS(),
        },
    ),
    ScalarCase(
        "recommend_mechanism",
        _RECOMMEND,
        {"horizon": 50, "epsilon": 1.0},
        {
            "horizon": bad_integer(1),
            "epsilon": POS(),
            "delta": PROB(allow_none=True),
            "noise": bad_choice(NOISE_KINDS),
            "whole": bad_bool(),
            "step_sensitivity": POS(),
        },
    ),
    ScalarCase(
        "asymptotic_lower_bound",
        asymptotic_lower_bound,
        {"horizon": 16},
        {"horizon": bad_integer(1)},
    ),
    ScalarCase(
        "best_known_loss",
        best_known_loss,
        {"horizon": 16, "objective": "max"},
        {"horizon": bad_integer(1), "objective": bad_choice(("mean", "max"))},
    ),
    ScalarCase(
        "certify",
        certify,
        {"loss": 3.0, "horizon": 16, "objective": "mean"},
        {"loss": POS(), "horizon": bad_integer(1), "objective": bad_choice(("mean", "max"))},
    ),
    ScalarCase("cb_norm_bounds", cb_norm_bounds, {"horizon": 16}, {"horizon": bad_integer(1)}),
    ScalarCase(
        "mathias_gamma_hat", mathias_gamma_hat, {"horizon": 16}, {"horizon": bad_integer(1)}
    ),
    ScalarCase(
        "cor22_variance_ratio",
        cor22_variance_ratio,
        {"epsilon": 1.0, "delta": 1e-6},
        {"epsilon": POS(), "delta": PROB()},
    ),
    ScalarCase(
        "laplace_gaussian_variance_ratio",
        laplace_gaussian_variance_ratio,
        {"epsilon": 0.5, "delta": 1e-6},
        {"epsilon": POS(), "delta": PROB(), "method": bad_choice(("classic", "analytic", "fhu"))},
    ),
    ScalarCase(
        "laplace_vs_gaussian_delta",
        laplace_vs_gaussian_delta,
        {"horizon": 64, "epsilon": 1.0, "k": 3},
        {
            "horizon": bad_integer(1),
            "epsilon": POS(),
            "step_sensitivity": POS(),
            "k": bad_integer(2).filter(lambda b: b[0] is not None),  # None: the best k
        },
    ),
    ScalarCase("lemma19_exponent", lemma19_exponent, {"k": 19}, {"k": bad_integer(2)}),
    ScalarCase(
        "gaussian_linf_bound",
        gaussian_linf_bound,
        {"max_variance": 1.0, "horizon": 10, "beta": 0.05},
        {"max_variance": bad_nonnegative_real(), "horizon": bad_integer(1), "beta": PROB()},
    ),
    ScalarCase(
        "laplace_linf_bound",
        laplace_linf_bound,
        {"scale": 1.0, "coefficient_l2_squared": 2.0, "horizon": 10, "beta": 0.05},
        {
            "scale": POS(),
            "coefficient_l2_squared": POS(),
            "horizon": bad_integer(1),
            "beta": PROB(),
            "max_coefficient": POS(),
        },
    ),
    ScalarCase(
        "linf_bound",
        lambda **kw: KaryTree(20, epsilon=1.0, k=3, rng=0).linf_bound(**kw),
        {"beta": 0.05},
        {"beta": PROB(), "max_variance": POS(allow_none=True)},
    ),
    ScalarCase(
        "max_digit_l1_norm",
        max_digit_l1_norm,
        {"system": DigitSystem.for_tree(3, True), "horizon": 10, "h": 3},
        {"horizon": bad_integer(1), "h": bad_integer(1)},
    ),
]


@pytest.mark.parametrize(("case", "param"), case_params(CASES))
@settings(max_examples=10)
@given(data=st.data())
def test_bad_scalar_is_refused(case: ScalarCase, param: str, data: st.DataObject) -> None:
    value, exc = data.draw(case.bad[param], label=param)
    case.check(param, value, exc)


@pytest.mark.parametrize("fn", [best_k, compare], ids=["best_k", "compare"])
@pytest.mark.parametrize(
    ("k_values", "exc"),
    [
        (3, TypeError),
        (None, TypeError),
        ("ab", TypeError),
        ([1], ValueError),
        ([2.5], TypeError),
        ([2, "a"], TypeError),
        ([True], TypeError),
    ],
)
def test_bad_k_values_are_refused(fn: Any, k_values: Any, exc: Any) -> None:
    """Before: a non-iterable gave Python's "'int' object is not iterable"."""
    assert_rejects(
        lambda: fn(50, budget=Budget(epsilon=1.0), k_values=k_values), exc, r"\bk(_values)?\b"
    )


@pytest.mark.parametrize("subtract", [1, "yes", 1.0])
def test_best_k_refuses_a_non_bool_subtract(subtract: Any) -> None:
    assert_rejects(
        lambda: best_k(50, budget=Budget(epsilon=1.0), subtract=subtract, k_values=KS),
        TypeError,
        "subtract",
    )


@pytest.mark.parametrize(
    ("call", "exc", "name"),
    [
        (lambda: max_digit_l1_norm(3, 10, 3), TypeError, "system"),  # type: ignore[arg-type]
        (lambda: max_digit_l1_norm(DigitSystem.for_tree(3, True), 1000, 2), ValueError, r"\bh\b"),
        (
            lambda: KaryTree(8, epsilon=1.0).with_sampler(ZeroNoise()).linf_bound(0.05),
            ValueError,
            "sampler",
        ),
    ],
)
def test_objects_of_the_wrong_kind_are_refused(call: Any, exc: Any, name: str) -> None:
    """Before: AttributeError (None/str mechanism) or a digits error not naming h."""
    assert_rejects(call, exc, name)


@settings(max_examples=15)
@given(horizon=st.integers(1, 5000), eps=st.floats(0.05, 10.0))
def test_valid_advice_is_finite_and_achievable(horizon: int, eps: float) -> None:
    choice = best_k(horizon, budget=Budget(epsilon=eps), k_values=range(2, 9))
    assert math.isfinite(choice.mse) and choice.mse > 0
    m = KaryTree(horizon, epsilon=eps, k=choice.k, subtract=choice.subtract)
    assert m.mse() == pytest.approx(choice.mse, rel=1e-12)
    assert m.max_variance() == pytest.approx(m.max_variance(), rel=1e-12)
