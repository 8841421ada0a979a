"""Bad input to dpcount.ranges: mechanisms, releases, cascade sampling, workloads, metrics."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcount.privacy import ZeroNoise
from dpcount.ranges import (
    MECHANISMS,
    AllRanges,
    CorrelatedPerturbation,
    DenseWorkload,
    RangeWorkload,
    build_mechanism,
    cascade_sample,
    expected_worst_case_error,
    level_profile,
    max_query_variance,
    nodal_level_variances,
    nodal_ranges,
    paper_monte_carlo_errors,
    precision_diagonal,
    precision_max_diag,
    query_variances,
    random_dense_queries,
    split_variances,
    total_squared_error,
    worst_case_expected_error,
)
from tests.properties_support import (
    ScalarCase,
    assert_rejects,
    bad_choice,
    bad_dtype_array,
    bad_integer,
    bad_positive_real,
    bad_probability,
    bad_rng,
    case_params,
    non_finite_array,
    ragged,
)

COVERED = {
    "dpcount.ranges": {
        "AllRanges",
        "CorrelatedPerturbation",
        "DenseWorkload",
        "EigenDesignMechanism",
        "HierarchicalMechanism",
        "IdentityMechanism",
        "RangeWorkload",
        "TreeMechanism",
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
        # release objects, through every mechanism's release() below
        "HistogramRelease",
        "TreeRelease",
        "RangeAnswers",
        "RangeMechanism",
    }
}

N = 8
NAMES = sorted(MECHANISMS)
CALIBRATIONS = ("analytic", "paper", "classic")


def _bad_shape() -> st.SearchStrategy[tuple[Any, type[Exception]]]:
    return st.one_of(
        st.sampled_from([0, -1, (8, 0), (2, 2, 2), (), np.int64(0)]).map(lambda v: (v, ValueError)),
        st.sampled_from([1.5, "8", None, True, ["a"], np.float64(8), (8.0,)]).map(
            lambda v: (v, TypeError)
        ),
    )


CASES = [
    ScalarCase(
        f"{name}",
        lambda name=name, **kw: build_mechanism(name, **kw),
        {"shape": N, "epsilon": 1.0, "delta": 1e-6, "rng": 0},
        {
            "shape": _bad_shape(),
            "epsilon": bad_positive_real(),
            "delta": bad_probability(none_exc=ValueError),
            "calibration": bad_choice(CALIBRATIONS),
            "rng": bad_rng(),
            "noise": bad_choice(("gaussian", "discrete-gaussian")),
        },
        names={"rng": "rng"},
    )
    for name in NAMES
] + [
    ScalarCase(
        "cascade_sample",
        cascade_sample,
        {"shape": N, "sigma": 1.0, "rng": 0},
        {"shape": _bad_shape(), "sigma": bad_positive_real(), "rng": bad_rng()},
        names={"rng": "rng"},
    ),
    ScalarCase("AllRanges", AllRanges, {"n": N}, {"n": bad_integer(1)}),
    ScalarCase("nodal_ranges", nodal_ranges, {"n": N}, {"n": bad_integer(1)}),
    ScalarCase(
        "random_dense_queries",
        random_dense_queries,
        {"n": N, "count": 3, "rng": 0},
        {"n": bad_integer(1), "count": bad_integer(1), "rng": bad_rng()},
        names={"rng": "rng"},
    ),
    ScalarCase("level_profile", level_profile, {"n": N}, {"n": bad_integer(1)}),
    ScalarCase(
        "precision_diagonal",
        precision_diagonal,
        {"n": N, "profile": [1.0] * 4},
        {"n": bad_integer(1)},
    ),
    ScalarCase(
        "AllRanges.sample",
        lambda **kw: AllRanges(N).sample(rng=0, **kw),
        {"size": 3},
        {"size": bad_integer(1)},
    ),
]
CASES += [
    ScalarCase(
        f"{name} (discrete-gaussian)",
        lambda name=name, **kw: build_mechanism(name, noise="discrete-gaussian", **kw),
        {"shape": N, "epsilon": 1.0, "delta": 1e-6, "rng": 0},
        {
            "epsilon": bad_positive_real(),
            "delta": bad_probability(none_exc=ValueError),
            "calibration": bad_choice(("zcdp",)),
        },
    )
    for name in NAMES
    if MECHANISMS[name].supports_discrete_noise
]


@pytest.mark.parametrize(("case", "param"), case_params(CASES))
@settings(max_examples=10)
@given(data=st.data())
def test_bad_scalar_is_refused(case: ScalarCase, param: str, data: st.DataObject) -> None:
    value, exc = data.draw(case.bad[param], label=param)
    case.check(param, value, exc)


_MECHS: dict[str, Any] = {}


def mech(name: str) -> Any:
    if name not in _MECHS:
        _MECHS[name] = build_mechanism(name, N, epsilon=1.0, delta=1e-6, rng=0)
    return _MECHS[name]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=10)
@given(
    bad=st.one_of(
        bad_dtype_array(N),
        st.sampled_from(
            [np.zeros(N - 1), np.zeros((N, 1)), ragged(N), np.full(N, 2**60, dtype=np.int64)]
        ).map(lambda v: (v, ValueError)),
        st.sampled_from(["abc", None]).map(lambda v: (v, TypeError)),
    )
)
def test_release_refuses_bad_data(name: str, bad: tuple[Any, type[Exception]]) -> None:
    x, exc = bad
    assert_rejects(lambda: mech(name).release(x), exc, r"\bx\b")


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=5)
@given(data=st.data())
def test_release_names_the_first_non_finite_cell(name: str, data: st.DataObject) -> None:
    x, index, bad = data.draw(non_finite_array(N))
    err = assert_rejects(lambda: mech(name).release(x), ValueError, r"x must be finite")
    assert f"index {index} holds {bad!r}" in str(err)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=10)
@given(
    x=st.lists(st.integers(-1000, 1000), min_size=N, max_size=N),
    dtype=st.sampled_from([np.int64, np.uint8, np.float32, ">f8", np.int16]),
    lo=st.integers(0, N - 1),
    width=st.integers(0, N - 1),
)
def test_valid_release_is_exact_under_zero_noise(
    name: str, x: list[int], dtype: Any, lo: int, width: int
) -> None:
    data = np.abs(np.array(x)).astype(dtype)
    hi = min(N - 1, lo + width)
    exact = mech(name).with_sampler(ZeroNoise()).release(data)
    assert exact.query(lo, hi) == pytest.approx(float(np.sum(data[lo : hi + 1], dtype=float)))
    assert np.isfinite(exact.range_variance(lo, hi))


BAD_BOUNDS = [
    ((-1, 3), ValueError),
    ((0, N), ValueError),
    ((3, 2), ValueError),
    ((1.5, 3), TypeError),
    (("a", 3), TypeError),
    ((None, 3), TypeError),
    ((True, 3), TypeError),
    ((ragged(2), 3), ValueError),
    (([0, 1, 2], [3, 4]), ValueError),  # do not broadcast
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("method", ["query", "range_variance", "interval"])
@settings(max_examples=8)
@given(bad=st.sampled_from(BAD_BOUNDS))
def test_release_queries_refuse_bad_bounds(
    name: str, method: str, bad: tuple[tuple[Any, Any], type[Exception]]
) -> None:
    (lo, hi), exc = bad
    release = mech(name).release(np.arange(N, dtype=float))
    assert_rejects(lambda: getattr(release, method)(lo, hi), exc, (r"\blo\b", r"\bhi\b"))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=8)
@given(level=st.one_of(bad_probability()))
def test_interval_refuses_a_bad_level(name: str, level: tuple[Any, type[Exception]]) -> None:
    value, exc = level
    release = mech(name).release(np.arange(N, dtype=float))
    assert_rejects(lambda: release.interval(0, 3, level=value), exc, r"level")


BAD_WEIGHTS = [
    (np.ones((2, N - 1)), ValueError),
    (np.ones(N), ValueError),
    ([["a"] * N], TypeError),
    (np.full((2, N), np.nan), ValueError),
    (np.ones((2, N), dtype=complex), TypeError),
    (ragged(2), ValueError),
    (None, TypeError),
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("weights", "exc"), BAD_WEIGHTS)
def test_dense_workloads_refuse_bad_weights(name: str, weights: Any, exc: Any) -> None:
    """Before: strings/ragged lists reached numpy's conversion errors, complex weights lost
    their imaginary part (a ComplexWarning), NaN weights gave NaN variances silently."""
    m = mech(name)
    release = m.release(np.arange(N, dtype=float))
    for call in (lambda: m.query_variance(weights), lambda: release.query_variance(weights)):
        assert_rejects(call, exc, r"weights")
    if name != "tree":  # the tree release answers 0/1 (subset) queries only
        assert_rejects(lambda: release.answer(weights), exc, r"weights")
    n_mismatch = isinstance(weights, np.ndarray) and weights.shape == (2, N - 1)
    if not n_mismatch:  # a DenseWorkload over any n is valid on its own
        assert_rejects(lambda: DenseWorkload(weights), exc, r"weights")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sampler", [None, "zero", 1.0, ZeroNoise])
def test_with_sampler_refuses_a_non_sampler(name: str, sampler: Any) -> None:
    assert_rejects(lambda: mech(name).with_sampler(sampler), TypeError, r"sampler must be")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("rng", "exc"), [(-1, ValueError), ("x", TypeError), (1.5, TypeError)])
def test_with_rng_refuses_a_bad_rng(name: str, rng: Any, exc: Any) -> None:
    assert_rejects(lambda: mech(name).with_rng(rng), exc, r"rng")


METRICS = [
    total_squared_error,
    max_query_variance,
    worst_case_expected_error,
    nodal_level_variances,
    lambda m: query_variances(m, AllRanges(N)),
    lambda m: expected_worst_case_error(m, draws=2, rng=0),
    lambda m: paper_monte_carlo_errors(m, 2, 1, rng=0),
]


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("mechanism", [None, "correlated", 3, CorrelatedPerturbation])
def test_metrics_refuse_a_non_mechanism(metric: Any, mechanism: Any) -> None:
    """Before: AttributeError ('str' object has no attribute 'shape')."""
    assert_rejects(lambda: metric(mechanism), TypeError, r"mechanism must be a RangeMechanism")


@pytest.mark.parametrize(
    ("call", "exc", "name"),
    [
        (lambda m: total_squared_error(m, "all"), TypeError, "workload"),
        (lambda m: max_query_variance(m, AllRanges(N + 1)), ValueError, "workload"),
        (lambda m: expected_worst_case_error(m, draws=1), ValueError, "draws"),
        (lambda m: paper_monte_carlo_errors(m, samples=0), ValueError, "samples"),
        (lambda m: paper_monte_carlo_errors(m, runs=1.5), TypeError, "runs"),
        (lambda m: paper_monte_carlo_errors(m, 2, 1, x=np.zeros(N - 1)), ValueError, r"\bx\b"),
        (lambda m: paper_monte_carlo_errors(m, 2, 1, x=[math.nan] * N), ValueError, r"\bx\b"),
    ],
)
def test_metric_arguments_are_validated(call: Any, exc: Any, name: str) -> None:
    assert_rejects(lambda: call(mech("correlated")), exc, name)


BAD_PROFILES = [
    ("abcd", TypeError),
    (5, TypeError),
    (None, TypeError),
    ([], ValueError),
    ([1.0, math.nan], ValueError),
    ([1.0, -1.0], ValueError),
    ([1.0, 0.2], ValueError),  # v_1 <= v_0/4: no cascade produces it
    ([1.0, "a"], TypeError),
]


@pytest.mark.parametrize(("profile", "exc"), BAD_PROFILES)
def test_profile_helpers_refuse_bad_profiles(profile: Any, exc: Any) -> None:
    """Before: IndexError/TypeError from Python, or silently wrong values (e.g. a negative
    max diag(C^-1) of -0.8 for the profile [-1, 1])."""
    assert_rejects(lambda: split_variances(profile), exc, r"profile")
    assert_rejects(lambda: precision_max_diag([profile]), exc, r"profile")
    assert_rejects(lambda: precision_diagonal(2, profile), exc, r"profile")


@pytest.mark.parametrize(
    ("value", "exc"),
    [
        ([1.0] * 3, ValueError),
        ([1.0, 0.1, 1.0, 1.0], ValueError),
        ("abcd", TypeError),
        ([1.0, "a", 1.0, 1.0], TypeError),
        (np.ones((2, 2)), TypeError),
    ],
)
def test_level_variances_are_validated(value: Any, exc: Any) -> None:
    assert_rejects(
        lambda: CorrelatedPerturbation(N, epsilon=1.0, delta=1e-6, level_variances=value),
        exc,
        "level_variances",
    )
    assert_rejects(lambda: cascade_sample(N, 1.0, 0, level_variances=value), exc, "level_variances")


@pytest.mark.parametrize(
    ("lo", "hi", "exc"),
    [
        ([0, 9], [1, 9], ValueError),
        ([2], [1], ValueError),
        ([0.5], [1], TypeError),
        ("a", [1], TypeError),
        ([0, 1], [1], ValueError),
        (ragged(2), [1], ValueError),
    ],
)
def test_range_workload_is_validated(lo: Any, hi: Any, exc: Any) -> None:
    assert_rejects(lambda: RangeWorkload(N, lo, hi), exc, (r"\blo\b", r"\bhi\b"))


@settings(max_examples=15)
@given(
    n=st.integers(1, 64),
    growth=st.lists(st.floats(0.3, 4.0), min_size=7, max_size=7),
)
def test_valid_profiles_give_finite_positive_precisions(n: int, growth: list[float]) -> None:
    depth = len(level_profile(n)) - 1
    profile = [1.0]
    for g in growth[:depth]:
        profile.append(profile[-1] * g)
    diag = precision_diagonal(n, profile)
    assert diag.shape == (n,) and np.all(np.isfinite(diag)) and np.all(diag > 0)
    assert precision_max_diag([profile]) == pytest.approx(float(diag.max()))
    noise = cascade_sample(n, 1.0, 0, level_variances=profile)
    assert noise.shape == (n,) and np.isfinite(noise).all()
