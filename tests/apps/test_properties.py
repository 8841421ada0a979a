"""Bad input to dpcount.apps: histograms, averages, graphs, strings, local protocols."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcount.apps import (
    ContinualHistogram,
    EpisodeCounter,
    GraphStatistic,
    LocalMedianProtocol,
    MinimalOccurrenceCounter,
    RunningAverage,
    SimpleGraph,
    StreamSensitivity,
    SubstringCounter,
    SyntheticGraph,
    degree_histogram_sensitivity,
    degree_histogram_statistic,
    edge_count_statistic,
    episode_sensitivity,
    histogram_sensitivity,
    local_median,
    local_risk_minimization,
    substring_sensitivity,
    top1_counts,
    triangle_count_sensitivity,
    triangle_count_statistic,
    zipf_items,
)
from dpcount.counting.registry import MECHANISMS
from dpcount.privacy import ZeroNoise
from tests.properties_support import (
    ScalarCase,
    assert_rejects,
    bad_choice,
    bad_integer,
    bad_positive_real,
    bad_probability,
    bad_rng,
    case_params,
    ragged,
)

COVERED = {
    "dpcount.apps": {
        "ContinualHistogram",
        "EpisodeCounter",
        "GraphStatistic",
        "LocalMedianProtocol",
        "MinimalOccurrenceCounter",
        "RunningAverage",
        "SimpleGraph",
        "StreamSensitivity",
        "SubstringCounter",
        "SyntheticGraph",
        "degree_histogram_sensitivity",
        "degree_histogram_statistic",
        "edge_count_statistic",
        "episode_sensitivity",
        "histogram_sensitivity",
        "local_median",
        "local_risk_minimization",
        "substring_sensitivity",
        "top1_counts",
        "triangle_count_sensitivity",
        "triangle_count_statistic",
        "zipf_items",
    }
}

T = 10
COMMON = {
    "epsilon": bad_positive_real(),
    "delta": bad_probability(allow_none=True),
    "mechanism": bad_choice(MECHANISMS),
    "noise": bad_choice(("laplace", "gaussian", "discrete-laplace", "discrete-gaussian")),
    "k": bad_integer(2),
    "subtract": st.sampled_from([1, 0, "yes", 1.0]).map(lambda v: (v, TypeError)),
    "rng": bad_rng(),
}


def _app(name: str, call: Any, valid: dict[str, Any], own: dict[str, Any]) -> ScalarCase:
    return ScalarCase(name, call, {**valid, "rng": 0}, {**COMMON, **own}, names={"rng": "rng"})


CASES = [
    _app(
        "ContinualHistogram",
        ContinualHistogram,
        {"universe_size": 4, "horizon": T, "epsilon": 1.0},
        {
            "universe_size": bad_integer(1),
            "horizon": bad_integer(1),
            "max_items_per_step": bad_integer(1),
            "max_count_per_item": bad_integer(1),
            "on_out_of_bounds": bad_choice(("error", "clip")),
        },
    ),
    _app(
        "RunningAverage",
        RunningAverage,
        {"horizon": T, "epsilon": 1.0, "lower": 0.0, "upper": 1.0},
        {
            "horizon": bad_integer(1),
            "lower": st.sampled_from([math.nan, math.inf, 1.0, 2.0]).map(lambda v: (v, ValueError)),
            "clip": st.sampled_from([1, "yes", None]).map(lambda v: (v, TypeError)),
            "on_out_of_bounds": bad_choice(("error", "clip")),
        },
    ),
    _app(
        "SyntheticGraph",
        SyntheticGraph,
        {"n_vertices": 4, "horizon": T, "epsilon": 1.0},
        {
            "n_vertices": bad_integer(2),
            "horizon": bad_integer(1),
            "max_edges_per_step": bad_integer(1),
            "on_out_of_bounds": bad_choice(("error", "clip")),
        },
    ),
    _app(
        "SubstringCounter",
        SubstringCounter,
        {"alphabet": "ab", "max_length": 2, "horizon": T, "epsilon": 1.0},
        {"max_length": bad_integer(1), "horizon": bad_integer(1)},
    ),
    _app(
        "EpisodeCounter",
        EpisodeCounter,
        {"alphabet": "ab", "max_length": 2, "horizon": T, "epsilon": 1.0},
        {"max_length": bad_integer(1), "horizon": bad_integer(1)},
    ),
    _app(
        "LocalMedianProtocol",
        LocalMedianProtocol,
        {"n_clients": 4, "epsilon": 1.0},
        {
            "n_clients": bad_integer(1),
            "buckets": bad_integer(1).filter(lambda b: b[0] is not None),
            "on_out_of_bounds": bad_choice(("error", "clip")),
        },
    ),
    _app(
        "GraphStatistic",
        GraphStatistic,
        {
            "function": lambda g: g.n_edges,
            "difference_sensitivity": 1.0,
            "n_vertices": 4,
            "horizon": T,
            "epsilon": 1.0,
        },
        {
            "n_vertices": bad_integer(1),
            "horizon": bad_integer(1),
            "difference_sensitivity": bad_positive_real(),
            "difference_l2_sensitivity": bad_positive_real(allow_none=True),
        },
    ),
    _app(
        "edge_count_statistic",
        edge_count_statistic,
        {"n_vertices": 4, "horizon": T, "epsilon": 1.0},
        {"n_vertices": bad_integer(1), "horizon": bad_integer(1)},
    ),
    _app(
        "degree_histogram_statistic",
        degree_histogram_statistic,
        {"n_vertices": 4, "max_degree": 2, "horizon": T, "epsilon": 1.0},
        {"max_degree": bad_integer(1)},
    ),
    _app(
        "triangle_count_statistic",
        triangle_count_statistic,
        {"n_vertices": 4, "max_degree": 2, "horizon": T, "epsilon": 1.0},
        {"max_degree": bad_integer(2)},
    ),
    ScalarCase(
        "histogram_sensitivity",
        histogram_sensitivity,
        {"max_items_per_step": 2},
        {"max_items_per_step": bad_integer(1), "max_count_per_item": bad_integer(1)},
    ),
    ScalarCase(
        "substring_sensitivity",
        substring_sensitivity,
        {"max_length": 2},
        {"max_length": bad_integer(1)},
    ),
    ScalarCase(
        "episode_sensitivity",
        episode_sensitivity,
        {"alphabet_size": 2, "max_length": 2},
        {"alphabet_size": bad_integer(2), "max_length": bad_integer(1)},
    ),
    ScalarCase(
        "degree_histogram_sensitivity",
        degree_histogram_sensitivity,
        {"max_degree": 2},
        {"max_degree": bad_integer(1)},
    ),
    ScalarCase(
        "triangle_count_sensitivity",
        triangle_count_sensitivity,
        {"max_degree": 2},
        {"max_degree": bad_integer(2)},
    ),
    ScalarCase(
        "StreamSensitivity",
        StreamSensitivity,
        {"l1": 2.0, "l2": 1.0},
        {"l1": bad_positive_real(), "l2": bad_positive_real()},
    ),
    ScalarCase(
        "SimpleGraph",
        SimpleGraph,
        {"n_vertices": 4},
        {
            "n_vertices": bad_integer(1),
            "max_degree": bad_integer(1).filter(lambda b: b[0] is not None),
        },
    ),
    ScalarCase(
        "MinimalOccurrenceCounter",
        MinimalOccurrenceCounter,
        {"alphabet_size": 2, "max_length": 2},
        {"alphabet_size": bad_integer(1), "max_length": bad_integer(1)},
    ),
    ScalarCase(
        "zipf_items",
        zipf_items,
        {"universe_size": 5, "length": 3, "rng": 0},
        {
            "universe_size": bad_integer(1),
            "length": bad_integer(1),
            "exponent": st.sampled_from([math.nan, math.inf, -1.0]).map(lambda v: (v, ValueError)),
            "rng": bad_rng(),
        },
        names={"rng": "rng"},
    ),
]


@pytest.mark.parametrize(("case", "param"), case_params(CASES))
@settings(max_examples=8)
@given(data=st.data())
def test_bad_scalar_is_refused(case: ScalarCase, param: str, data: st.DataObject) -> None:
    value, exc = data.draw(case.bad[param], label=param)
    case.check(param, value, exc)


# -- ContinualHistogram ------------------------------------------------------------------


def hist(**kw: Any) -> ContinualHistogram:
    return ContinualHistogram(4, T, epsilon=1.0, max_items_per_step=2, rng=0, **kw)


@settings(max_examples=15)
@given(
    bad=st.sampled_from(
        [
            ([4], ValueError),
            ([-1], ValueError),
            ([0.5], TypeError),
            (["a"], TypeError),
            ("ab", TypeError),
            ([0, 0], ValueError),
            ([[0]], ValueError),
            ([True], TypeError),
            (None, TypeError),
            (3, TypeError),
            ([0, 1, 2], ValueError),
        ]
    )
)
def test_histogram_update_refuses_bad_items(bad: tuple[Any, type[Exception]]) -> None:
    """Before: a non-iterable gave Python's "'int' object is not iterable"."""
    items, exc = bad
    h = hist()
    assert_rejects(lambda: h.update(items), exc, r"items")
    assert h.step == 0  # a refused step is not consumed


@settings(max_examples=15)
@given(
    bad=st.sampled_from(
        [
            (np.ones(3), ValueError),
            (np.ones((1, 4)), ValueError),
            ([1.5, 0, 0, 0], ValueError),
            ([np.nan, 0, 0, 0], ValueError),
            (["a"] * 4, TypeError),
            (np.ones(4, dtype=complex), TypeError),
            ([1e30, 0, 0, 0], ValueError),
            ([2**63, 0, 0, 0], ValueError),
            ([-(2**63), 0, 0, 0], ValueError),
            ([3, 0, 0, 0], ValueError),
            (ragged(4), ValueError),
            ([-1, 0, 0, 0], ValueError),
        ]
    )
)
def test_histogram_update_vector_refuses_bad_vectors(bad: tuple[Any, type[Exception]]) -> None:
    """Before: 1e30 or 2^63 were cast to int64 (a RuntimeWarning, then a wrapped value)."""
    x, exc = bad
    h = hist()
    assert_rejects(lambda: h.update_vector(x), exc, (r"\bx\b", r"removes item"))
    assert h.step == 0


@settings(max_examples=10)
@given(
    bad=st.sampled_from(
        [
            (np.ones((2, 3)), ValueError),
            (np.ones(4), ValueError),
            (np.full((2, 4), 0.5), ValueError),
            (np.array([[np.inf, 0, 0, 0]]), ValueError),
            (np.zeros((11, 4), dtype=int), ValueError),
            (ragged(2), ValueError),
            (np.array([["a"] * 4]), TypeError),
            (np.array([[-1e30, 0, 0, 0]]), ValueError),
            (np.array([[np.iinfo(np.int64).min, 0, 0, 0]]), ValueError),
        ]
    )
)
def test_histogram_update_many_refuses_bad_blocks(bad: tuple[Any, type[Exception]]) -> None:
    xs, exc = bad
    assert_rejects(lambda: hist().update_many(xs), exc, (r"\bxs\b", r"horizon", r"removes"))


@settings(max_examples=10)
@given(steps=st.lists(st.lists(st.integers(0, 3), max_size=2, unique=True), min_size=1, max_size=T))
def test_valid_histogram_is_exact_under_zero_noise(steps: list[list[int]]) -> None:
    h = hist().with_sampler(ZeroNoise())
    counts = np.zeros(4)
    for items in steps:
        out = h.update(items)
        counts[items] += 1
        np.testing.assert_array_equal(out, counts)


@pytest.mark.parametrize(
    ("k", "exc"), [(0, ValueError), (5, ValueError), (1.5, TypeError), ("a", TypeError)]
)
def test_histogram_topk_validates_k(k: Any, exc: Any) -> None:
    h = hist()
    h.update([0])
    assert_rejects(lambda: h.topk(k), exc, r"\bk\b")


def test_histogram_queries_before_a_release_and_bad_beta() -> None:
    assert_rejects(lambda: hist().top1(), ValueError, r"call update\(\) first")
    for beta in (0, 1, math.nan, "a"):
        gauss = ContinualHistogram(4, T, epsilon=1.0, delta=1e-6, rng=0)
        assert_rejects(
            lambda gauss=gauss, beta=beta: gauss.error_bound(beta), (ValueError, TypeError), "beta"
        )


@pytest.mark.parametrize(
    ("value", "exc"),
    [
        (np.ones(3), ValueError),
        ("a", TypeError),
        ([["a"]], TypeError),
        (ragged(2), ValueError),
        (np.array([[np.nan, 1.0]]), ValueError),
        (np.ones((2, 2), dtype=complex), TypeError),
    ],
)
def test_top1_counts_refuses_bad_histograms(value: Any, exc: Any) -> None:
    """Before: a NaN histogram gave NaN silently; strings reached numpy's float()."""
    assert_rejects(lambda: top1_counts(value), exc, r"histograms")


# -- RunningAverage -----------------------------------------------------------------------


@pytest.mark.parametrize("clip", [False, True])
@settings(max_examples=10)
@given(
    bad=st.sampled_from(
        [
            (math.nan, ValueError),
            ("a", TypeError),
            (None, TypeError),
            (True, TypeError),
            ([0.5], TypeError),
            (1j, TypeError),
        ]
    )
)
def test_running_average_update_refuses_bad_values(
    clip: bool, bad: tuple[Any, type[Exception]]
) -> None:
    value, exc = bad
    avg = RunningAverage(T, epsilon=1.0, lower=0.0, upper=1.0, clip=clip, rng=0)
    assert_rejects(lambda: avg.update(value), exc, r"value")


@pytest.mark.parametrize("clip", [False, True])
@settings(max_examples=10)
@given(
    bad=st.sampled_from(
        [
            (np.array([0.5, np.nan]), ValueError),
            ("a", TypeError),
            ([[0.5]], ValueError),
            (ragged(2), ValueError),
            (np.array(["a"]), TypeError),
            (np.ones(2, dtype=complex), TypeError),
            (np.full(T + 1, 0.5), ValueError),
        ]
    )
)
def test_running_average_update_many_refuses_bad_blocks(
    clip: bool, bad: tuple[Any, type[Exception]]
) -> None:
    """Before (clip=True): strings/ragged lists reached numpy's conversion errors and complex
    values lost their imaginary part."""
    values, exc = bad
    avg = RunningAverage(T, epsilon=1.0, lower=0.0, upper=1.0, clip=clip, rng=0)
    assert_rejects(lambda: avg.update_many(values), exc, (r"values", r"\bxs\b"))


def test_running_average_refuses_out_of_range_values_unless_clipping() -> None:
    avg = RunningAverage(T, epsilon=1.0, lower=0.0, upper=1.0, rng=0)
    assert_rejects(lambda: avg.update(1.5), ValueError, r"value must be finite and in \[0, 1\]")
    clipped = RunningAverage(T, epsilon=1.0, lower=0.0, upper=1.0, clip=True).with_sampler(
        ZeroNoise()
    )
    assert clipped.update(1.5) == 1.0


# -- graphs ---------------------------------------------------------------------------------


@settings(max_examples=15)
@given(
    bad=st.sampled_from(
        [
            ([(0, 0, 0.5)], ValueError),
            ([(0, 4, 0.5)], ValueError),
            ([(0, 1, 1.5)], ValueError),
            ([(0, 1, math.nan)], ValueError),
            ([(0, 1)], TypeError),
            ([(0.5, 1, 0.5)], TypeError),
            ([("a", 1, 0.5)], TypeError),
            ([(0, 1, 0.5), (1, 0, 0.2)], ValueError),
            ([(0, 1, 0.5), (1, 2, 0.2)], ValueError),
            ("abc", TypeError),
            (None, TypeError),
            (3, TypeError),
        ]
    )
)
def test_synthetic_graph_update_refuses_bad_edges(bad: tuple[Any, type[Exception]]) -> None:
    edges, exc = bad
    g = SyntheticGraph(4, T, epsilon=1.0, rng=0)
    assert_rejects(lambda: g.update(edges), exc, (r"edge", r"\bu\b", r"\bv\b", r"weight", r"pairs"))
    assert g.step == 0


@pytest.mark.parametrize(
    ("s", "p", "exc"),
    [
        ([0, 1, 2, 3], None, ValueError),
        ([0], [0], ValueError),
        ([4], None, ValueError),
        ([0.5], None, TypeError),
        ("a", None, TypeError),
        ([], None, ValueError),
        (None, None, TypeError),
        (3, None, TypeError),
        ([0], 3, TypeError),
    ],
)
def test_synthetic_graph_cut_refuses_bad_sets(s: Any, p: Any, exc: Any) -> None:
    g = SyntheticGraph(4, T, epsilon=1.0, rng=0)
    g.update([(0, 1, 0.5)])
    assert_rejects(lambda: g.cut(s, p), exc, (r"\bS\b", r"\bP\b"))


@pytest.mark.parametrize(
    ("increments", "exc"),
    [
        (np.ones(6), ValueError),
        (np.ones((1, 5)), ValueError),
        (np.full((1, 6), 0.5), ValueError),
        (np.array([[2.0, 0, 0, 0, 0, 0]]), ValueError),
        (ragged(2), ValueError),
        (np.array([["a"] * 6]), TypeError),
    ],
)
def test_synthetic_graph_update_many_refuses_bad_blocks(increments: Any, exc: Any) -> None:
    assert_rejects(
        lambda: SyntheticGraph(4, T, epsilon=1.0, rng=0).update_many(increments), exc, r"increments"
    )


@pytest.mark.parametrize(
    "function",
    [
        lambda g: "a",
        lambda g: math.nan,
        lambda g: [[1.0]],
        lambda g: None,
        lambda g: 1j,
        lambda g: [[1.0], [1.0, 2.0]],
        lambda g: [1.0, 2.0] if g.n_edges else [1.0],
    ],
)
def test_graph_statistic_refuses_bad_function_outputs(function: Any) -> None:
    def run() -> None:
        stat = GraphStatistic(function, 1.0, n_vertices=4, horizon=T, epsilon=1.0, rng=0)
        stat.update([(0, 1)])

    assert_rejects(run, (ValueError, TypeError), r"function")


@pytest.mark.parametrize(
    ("edges", "exc"),
    [
        ([(0, 0)], ValueError),
        ([(0, 4)], ValueError),
        ([(0,)], TypeError),
        ("ab", TypeError),
        (None, TypeError),
        ([(0, 1), (0, 1)], ValueError),
        (3, TypeError),
    ],
)
def test_graph_statistic_update_refuses_bad_edges(edges: Any, exc: Any) -> None:
    stat = edge_count_statistic(4, T, epsilon=1.0, rng=0)
    assert_rejects(lambda: stat.update(edges), exc, (r"edge", r"\bu\b", r"\bv\b"))
    assert stat.step == 0


def test_graph_statistic_refuses_a_non_callable() -> None:
    for f in (None, "abc", 3):
        assert_rejects(
            lambda f=f: GraphStatistic(f, 1.0, n_vertices=4, horizon=T, epsilon=1.0),
            TypeError,
            r"function must be callable",
        )


# -- strings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [SubstringCounter, EpisodeCounter])
def test_text_apps_refuse_bad_letters_and_words(cls: Any) -> None:
    for alphabet, exc in (
        ("a", ValueError),
        ([], ValueError),
        ("aa", ValueError),
        (3, TypeError),
        ([["a"], ["b"]], TypeError),
    ):
        assert_rejects(lambda a=alphabet: cls(a, 2, T, epsilon=1.0), exc, r"alphabet")
    app = cls("ab", 2, T, epsilon=1.0, rng=0)
    for letter in ("c", "ab", None, 1, ["a"]):
        assert_rejects(lambda x=letter: app.update(x), ValueError, r"letter")
    assert_rejects(lambda: app.update_many("abc"), ValueError, r"letter")
    assert_rejects(lambda: app.update_many(3), TypeError, r"letters")
    assert_rejects(lambda: cls("ab", 2, 3, epsilon=1.0).update_many("abab"), ValueError, r"horizon")
    app.update("a")
    for word, exc in (("", ValueError), ("abc", ValueError), ("c", ValueError), (None, TypeError)):
        assert_rejects(lambda w=word: app.count(w), exc, r"word")


def test_minimal_occurrence_counter_refuses_bad_letters() -> None:
    counter = MinimalOccurrenceCounter(2, 2)
    for letter, exc in ((2, ValueError), (-1, ValueError), (1.5, TypeError), ("a", TypeError)):
        assert_rejects(lambda x=letter: counter.update(x), exc, r"letter")


# -- local protocols --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "exc"),
    [
        (np.full(3, 0.5), ValueError),
        ([0.5, 0.5, 0.5, 1.5], ValueError),
        ([0.5, 0.5, 0.5, math.nan], ValueError),
        ("abcd", TypeError),
        (ragged(4), ValueError),
        (np.ones(4, dtype=complex), TypeError),
    ],
)
def test_local_median_protocol_refuses_bad_data(data: Any, exc: Any) -> None:
    protocol = LocalMedianProtocol(4, epsilon=1.0, rng=0)
    assert_rejects(lambda: protocol.run(data), exc, r"data")


@pytest.mark.parametrize(
    ("buckets", "exc"),
    [
        ([0, 1, 2, 5], ValueError),
        ([-1, 0, 0, 0], ValueError),
        ([0.5, 0, 0, 0], TypeError),
        ([], ValueError),
        ([[0]], ValueError),
        (ragged(2), ValueError),
    ],
)
def test_local_median_protocol_refuses_bad_buckets(buckets: Any, exc: Any) -> None:
    protocol = LocalMedianProtocol(4, epsilon=1.0, rng=0)
    assert_rejects(lambda: protocol.run_buckets(buckets), exc, r"bucket_indices")


@pytest.mark.parametrize(
    ("data", "exc"),
    [
        ([], ValueError),
        ([1.5], ValueError),
        ([math.nan], ValueError),
        ("ab", TypeError),
        (ragged(2), ValueError),
        (np.ones((2, 2)) * 0.5, ValueError),
        (np.array(["a"]), TypeError),
    ],
)
def test_local_median_refuses_bad_data(data: Any, exc: Any) -> None:
    assert_rejects(lambda: local_median(data, epsilon=1.0, rng=0), exc, r"data")


@pytest.mark.parametrize(
    ("data", "exc"),
    [
        ([], ValueError),
        ([math.nan], ValueError),
        ([0.5, math.inf], ValueError),
        ("ab", TypeError),
        (ragged(2), ValueError),
        (np.ones((2, 2)) * 0.5, ValueError),
        (np.array(["a"]), TypeError),
    ],
)
def test_local_risk_minimization_refuses_bad_data(data: Any, exc: Any) -> None:
    """Before: with one bucket, NaN data were accepted and a result returned."""
    assert_rejects(
        lambda: local_risk_minimization(data, lambda t, d: t - d, epsilon=1.0, rng=0), exc, r"data"
    )


@pytest.mark.parametrize(
    ("gradient", "exc"),
    [
        (None, TypeError),
        ("x", TypeError),
        (lambda t, d: "a", TypeError),
        (lambda t, d: (t - d) * 5, ValueError),
        (lambda t, d: d - t, ValueError),
        (lambda t, d: np.ones(3), ValueError),
    ],
)
def test_local_risk_minimization_refuses_bad_gradients(gradient: Any, exc: Any) -> None:
    assert_rejects(
        lambda: local_risk_minimization(np.full(50, 0.5), gradient, epsilon=1.0, rng=0),
        exc,
        r"gradient",
    )


@settings(max_examples=10)
@given(values=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40))
def test_valid_local_median_is_exact_under_zero_noise(values: list[float]) -> None:
    protocol = LocalMedianProtocol(len(values), epsilon=1.0, buckets=4).with_sampler(ZeroNoise())
    result = protocol.run(values)
    buckets = np.minimum(np.floor(np.array(values) * 4), 3)
    # the exact slope of the median objective at each bucket: (2·#{≤ t} − n)/n
    below = np.array([np.sum(buckets <= t) for t in range(4)])
    np.testing.assert_allclose(result.slopes, (2 * below - len(values)) / len(values))
