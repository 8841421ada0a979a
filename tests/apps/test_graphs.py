"""SyntheticGraph (Cor. 5.2) and GraphStatistic with its worked examples (Cor. B.3)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import comb
from scipy.stats import norm

from dpcount.apps import (
    GraphStatistic,
    SimpleGraph,
    SyntheticGraph,
    degree_histogram_sensitivity,
    degree_histogram_statistic,
    edge_count_sensitivity,
    edge_count_statistic,
    triangle_count_sensitivity,
    triangle_count_statistic,
)
from dpcount.counting.registry import MECHANISMS
from dpcount.privacy import ZeroNoise
from tests.stats import Z_TOLERANCE, assert_variances_match

# -- synthetic graph ---------------------------------------------------------------


def random_updates(rng: np.random.Generator, n: int, T: int, m: int) -> list[list[tuple]]:
    pairs = list(itertools.combinations(range(n), 2))
    out = []
    for _ in range(T):
        k = int(rng.integers(0, m + 1))
        chosen = rng.choice(len(pairs), size=k, replace=False)
        out.append(
            [(*pairs[i][:: 1 if rng.random() < 0.5 else -1], float(rng.uniform())) for i in chosen]
        )
    return out


@pytest.mark.parametrize(("mechanism", "delta"), [("kary", None), ("binary", 1e-6)])
def test_zero_noise_graph_and_cuts_are_exact(mechanism: str, delta: float | None) -> None:
    n, T, m = 7, 30, 3
    rng = np.random.default_rng(2)
    g = SyntheticGraph(n, T, epsilon=1.0, delta=delta, max_edges_per_step=m, mechanism=mechanism)
    g = g.with_sampler(ZeroNoise())
    truth = np.zeros((n, n))
    updates = random_updates(rng, n, T, m)
    for u_list in updates[:20]:
        g.update(u_list)
        for u, v, w in u_list:
            truth[u, v] += w
            truth[v, u] += w
        np.testing.assert_allclose(g.adjacency(), truth, atol=1e-12)
    block = np.zeros((10, g.n_pairs))
    for r, u_list in enumerate(updates[20:]):
        for u, v, w in u_list:
            block[r, g.pair_index(u, v)] = w
            truth[u, v] += w
            truth[v, u] += w
    g.update_many(block)
    np.testing.assert_allclose(g.adjacency(), truth, atol=1e-12)
    iu = np.triu_indices(n, 1)
    np.testing.assert_allclose(g.weights(), truth[iu], atol=1e-12)
    for s_set, p_set in [([0], None), ([1, 4], [0, 2, 6]), ([3, 2, 5], None)]:
        p_eff = p_set if p_set is not None else [v for v in range(n) if v not in s_set]
        brute = sum(truth[a, b] for a in s_set for b in p_eff)
        assert g.cut(s_set, p_set) == pytest.approx(brute, abs=1e-12)


def test_pair_index_is_row_major_upper_triangle() -> None:
    g = SyntheticGraph(6, 2, epsilon=1.0)
    rows, cols = np.triu_indices(6, 1)
    assert [g.pair_index(int(a), int(b)) for a, b in zip(rows, cols, strict=True)] == list(
        range(15)
    )
    assert g.pair_index(4, 1) == g.pair_index(1, 4)


def test_pair_and_cut_variances_match_exact() -> None:
    n, T, reps = 8, 10, 2500
    g = SyntheticGraph(n, T, epsilon=1.0, delta=1e-6, mechanism="kary", k=3, rng=4)
    pair_err = np.empty((reps, T))
    cut_err = np.empty((reps, T))
    s_set, p_set = [0, 1, 2], [5, 6]
    zeros = np.zeros((T, g.n_pairs))
    idx = [g.pair_index(a, b) for a in s_set for b in p_set]
    for r in range(reps):
        released = g.with_sampler(g.mechanism.sampler).update_many(zeros)
        pair_err[r] = released[:, 7]
        cut_err[r] = released[:, idx].sum(axis=1)
    assert_variances_match(pair_err, g.variances())
    assert_variances_match(cut_err, g.cut_variance(3, 2))


def test_cut_error_bound_scopes() -> None:
    n, T = 10, 16
    g = SyntheticGraph(n, T, epsilon=1.0, delta=1e-6, mechanism="binary", rng=0)
    beta = 0.2
    one = g.cut_error_bound(3, 4, beta=beta, scope="one")
    np.testing.assert_allclose(one, np.sqrt(12 * g.variances()) * norm.isf(beta / 2), rtol=1e-9)
    classes = n * (n - 1) / 2
    beta_all = beta / (T * classes * comb(n, 3) * comb(n - 3, 4))
    all_ = g.cut_error_bound(3, 4, beta=beta)
    np.testing.assert_allclose(
        all_, np.sqrt(12 * g.variances()) * norm.isf(beta_all / 2), rtol=1e-9
    )
    assert (all_ > one).all()
    comp = g.cut_error_bound(3, 7, beta=beta, scope="complement")
    beta_comp = beta / (T * (n - 1) * comb(n, 3))
    np.testing.assert_allclose(
        comp, np.sqrt(21 * g.variances()) * norm.isf(beta_comp / 2), rtol=1e-9
    )
    assert (comp < g.cut_error_bound(3, 7, beta=beta)).all()
    with pytest.raises(ValueError, match=r"p_size must be n_vertices - s_size = 7 .* got 4"):
        g.cut_error_bound(3, 4, scope="complement")
    # Large n works in log space (C(n, n/2) overflows a float).
    big = SyntheticGraph(3000, 4, epsilon=1.0, delta=1e-6, mechanism="binary")
    assert np.isfinite(big.cut_error_bound(1500, 1500)).all()
    with pytest.raises(ValueError, match=r"cut_error_bound needs Gaussian noise"):
        SyntheticGraph(4, 4, epsilon=1.0).cut_error_bound(1, 2)


def test_cut_error_bound_one_has_the_stated_failure_probability() -> None:
    # 2000 runs: the √2-wide bound (twice the variance) misses with probability 0.07, 14.5
    # standard errors from β = 0.2, so the second check rejects it with a wide margin.
    n, T, reps, beta = 6, 8, 2000, 0.2
    g = SyntheticGraph(n, T, epsilon=1.0, delta=1e-6, mechanism="binary", rng=8)
    bound = g.cut_error_bound(2, 3, beta=beta, scope="one")[-1]
    idx = [g.pair_index(a, b) for a in (0, 1) for b in (2, 3, 4)]
    zeros = np.zeros((T, g.n_pairs))
    errors = np.array(
        [g.with_sampler(g.mechanism.sampler).update_many(zeros)[-1, idx].sum() for _ in range(reps)]
    )
    se = math.sqrt(beta * (1 - beta) / reps)
    assert abs(np.mean(np.abs(errors) > bound) - beta) < Z_TOLERANCE * se
    # A bound computed from twice the variance would be rejected.
    assert abs(np.mean(np.abs(errors) > math.sqrt(2) * bound) - beta) > Z_TOLERANCE * se


def test_synthetic_graph_calibration() -> None:
    g = SyntheticGraph(5, 50, epsilon=1.0, delta=None, max_edges_per_step=4)
    assert g.mechanism.noise_scale == pytest.approx(g.mechanism.height * 4 / 1.0)
    h = SyntheticGraph(5, 50, epsilon=1.0, delta=1e-6, max_edges_per_step=4, mechanism="binary")
    assert h.privacy is not None
    assert h.privacy.l2_sensitivity == pytest.approx(math.sqrt(h.mechanism.height) * 2.0)


def test_default_synthetic_graph_with_delta_uses_sqrt() -> None:
    if "sqrt" not in MECHANISMS:
        pytest.skip("sqrt not merged yet")
    g = SyntheticGraph(5, 32, epsilon=1.0, delta=1e-6, rng=0)
    assert g.noise == "gaussian"
    exact = g.with_sampler(ZeroNoise())
    exact.update([(0, 4, 0.25)])
    assert exact.cut([0]) == pytest.approx(0.25)


def test_synthetic_graph_input_errors() -> None:
    g = SyntheticGraph(4, 2, epsilon=1.0, max_edges_per_step=2).with_sampler(ZeroNoise())
    with pytest.raises(ValueError, match=r"weight of edge \(0, 1\) must be <= 1, got 1.5"):
        g.update([(0, 1, 1.5)])
    with pytest.raises(ValueError, match=r"weight of edge \(0, 1\) must be >= 0, got -0.1"):
        g.update([(0, 1, -0.1)])
    with pytest.raises(ValueError, match=r"u and v must differ \(no self-loops\), got u = v = 2"):
        g.update([(2, 2, 0.5)])
    with pytest.raises(ValueError, match=r"v must be <= 3, got 4"):
        g.update([(0, 4, 0.5)])
    with pytest.raises(ValueError, match=r"edge \(1, 0\) appears twice in one update"):
        g.update([(0, 1, 0.5), (1, 0, 0.5)])
    with pytest.raises(
        ValueError, match=r"update 1 changes 3 vertex pairs, more than max_edges_per_step=2"
    ):
        g.update([(0, 1, 0.5), (1, 2, 0.5), (2, 3, 0.5)])
    with pytest.raises(TypeError, match=r"edges\[0\] must be a \(u, v, weight\) triple"):
        g.update([(0, 1)])
    with pytest.raises(ValueError, match=r"increments must be finite and in \[0, 1\], got 2.0"):
        g.update_many(np.full((1, 6), 2.0))
    with pytest.raises(ValueError, match=r"no graph released yet"):
        g.cut([0])
    g.update([])
    with pytest.raises(ValueError, match=r"S and P must be disjoint, both contain vertex 1"):
        g.cut([0, 1], [1, 2])
    with pytest.raises(ValueError, match=r"S must contain at least one vertex"):
        g.cut([])
    with pytest.raises(ValueError, match=r"S must not repeat a vertex"):
        g.cut([0, 0])
    with pytest.raises(ValueError, match=r"V ∖ S = ∅"):
        g.cut([0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"p_size must be <= 1, got 2"):
        g.cut_variance(3, 2)
    g.update([(0, 1, 1.0)])
    with pytest.raises(ValueError, match=r"horizon"):
        g.update([])
    with pytest.raises(ValueError, match=r"n_vertices must be >= 2, got 1"):
        SyntheticGraph(1, 3, epsilon=1.0)


# -- graph statistics ----------------------------------------------------------------


def adjacency_of(n: int, edges: list[tuple[int, int]]) -> np.ndarray:
    a = np.zeros((n, n), dtype=int)
    for u, v in edges:
        a[u, v] = a[v, u] = 1
    return a


def brute_values(name: str, n: int, d: int, steps: list[list[tuple[int, int]]]) -> np.ndarray:
    """f(G_t) for t = 0..T from the adjacency matrix (independent of SimpleGraph)."""
    edges: list[tuple[int, int]] = []
    out = []
    for t in range(len(steps) + 1):
        if t:
            edges = edges + steps[t - 1]
        a = adjacency_of(n, edges)
        if name == "edges":
            out.append([a.sum() / 2])
        elif name == "degrees":
            out.append(np.bincount(a.sum(axis=1), minlength=d + 1))
        else:
            out.append([np.trace(a @ a @ a) / 6])
    return np.array(out, dtype=float)


def random_insertions(rng: np.random.Generator, n: int, d: int, T: int, per_step: int) -> list:
    deg = np.zeros(n, dtype=int)
    present: set[tuple[int, int]] = set()
    steps = []
    for _ in range(T):
        step = []
        for _ in range(int(rng.integers(0, per_step + 1))):
            free = [
                (u, v)
                for u, v in itertools.combinations(range(n), 2)
                if (u, v) not in present and deg[u] < d and deg[v] < d
            ]
            if not free:
                break
            u, v = free[int(rng.integers(len(free)))]
            present.add((u, v))
            deg[u] += 1
            deg[v] += 1
            step.append((u, v) if rng.random() < 0.5 else (v, u))
        steps.append(step)
    return steps


def build(name: str, n: int, d: int, T: int, **kw: object) -> GraphStatistic:
    if name == "edges":
        return edge_count_statistic(n, T, epsilon=1.0, max_degree=d, **kw)
    if name == "degrees":
        return degree_histogram_statistic(n, d, T, epsilon=1.0, **kw)
    return triangle_count_statistic(n, d, T, epsilon=1.0, **kw)


@pytest.mark.parametrize("name", ["edges", "degrees", "triangles"])
@pytest.mark.parametrize("per_step", [1, 3])
def test_zero_noise_statistics_are_exact(name: str, per_step: int) -> None:
    n, d, T = 9, 4, 25
    steps = random_insertions(np.random.default_rng(per_step), n, d, T, per_step)
    stat = build(name, n, d, T).with_sampler(ZeroNoise())
    released = np.array([np.atleast_1d(stat.update(s)) for s in steps])
    np.testing.assert_allclose(released, brute_values(name, n, d, steps)[1:], atol=1e-9)
    assert stat.graph.n_edges == sum(len(s) for s in steps)


def sensitivity_of(name: str) -> object:
    return {
        "edges": lambda d: edge_count_sensitivity(),
        "degrees": degree_histogram_sensitivity,
        "triangles": triangle_count_sensitivity,
    }[name]


@pytest.mark.parametrize("name", ["edges", "degrees", "triangles"])
@pytest.mark.parametrize("d", [2, 3])
def test_example_sensitivities_against_brute_force(name: str, d: int) -> None:
    """Γ₁, Γ₂ of the difference sequences over random pairs of neighbouring streams."""
    n, T = 6, 12
    rng = np.random.default_rng(10 * d)
    bound = sensitivity_of(name)(d)  # type: ignore[operator]
    worst1 = worst2 = 0.0
    for _ in range(150):
        steps = random_insertions(rng, n, d, T, per_step=1)
        diffs = np.diff(brute_values(name, n, d, steps), axis=0)
        for tau, step in enumerate(steps):
            for e in step:
                other = [list(s) for s in steps]
                other[tau] = [x for x in step if x != e]
                delta = diffs - np.diff(brute_values(name, n, d, other), axis=0)
                tv = np.abs(delta).sum(axis=0)  # per-coordinate total variation
                worst1 = max(worst1, float(tv.sum()))
                worst2 = max(worst2, float(np.linalg.norm(tv)))
    assert worst1 <= bound.l1 + 1e-9 and worst2 <= bound.l2 + 1e-9  # type: ignore[attr-defined]
    assert worst1 > 0
    if name == "edges":
        assert (worst1, worst2) == (1.0, 1.0)


def test_statistic_calibration_uses_gamma() -> None:
    sens = degree_histogram_sensitivity(5)
    assert (sens.l1, sens.l2) == (36.0, pytest.approx(math.sqrt(288)))
    lap = degree_histogram_statistic(10, 5, 40, epsilon=1.0)
    assert lap.mechanism.step_sensitivity == 36.0
    gau = degree_histogram_statistic(
        10, 5, 40, epsilon=1.0, delta=1e-6, mechanism="kary", noise="gaussian"
    )
    assert gau.mechanism.step_sensitivity == pytest.approx(math.sqrt(288))
    dg = degree_histogram_statistic(
        10, 5, 40, epsilon=1.0, delta=1e-6
    )  # default: discrete Gaussian
    assert dg.noise == "discrete-gaussian" and dg.mechanism.step_sensitivity == 36.0
    assert dg.mechanism.step_l2_sensitivity == pytest.approx(math.sqrt(288))
    assert "one edge insertion, degrees <= 5" in gau.describe()
    tri = triangle_count_sensitivity(4)
    assert (tri.l1, tri.l2) == (3.0, 3.0)


@pytest.mark.slow  # statistical; CI runs the slow set
def test_statistic_noise_variance_matches_exact() -> None:
    T, reps = 10, 1500
    stat = triangle_count_statistic(6, 3, T, epsilon=1.0, delta=1e-6, mechanism="binary", rng=1)
    steps = random_insertions(np.random.default_rng(0), 6, 3, T, 1)
    truth = brute_values("triangles", 6, 3, steps)[1:, 0]
    errors = np.empty((reps, T))
    for r in range(reps):
        fresh = stat.with_sampler(stat.mechanism.sampler)
        errors[r] = [fresh.update(s) for s in steps]
    assert_variances_match(errors - truth, stat.variances())


def test_graph_statistic_input_errors() -> None:
    stat = degree_histogram_statistic(4, 2, 5, epsilon=1.0).with_sampler(ZeroNoise())
    stat.update([(0, 1), (0, 2)])
    with pytest.raises(ValueError, match=r"gives vertex 0 degree 3, more than max_degree=2"):
        stat.update([(0, 3)])
    with pytest.raises(ValueError, match=r"edge \(1, 0\) is already in the graph"):
        stat.update([(1, 0)])
    with pytest.raises(ValueError, match=r"edge \(2, 2\) is a self-loop"):
        stat.update([(2, 2)])
    with pytest.raises(ValueError, match=r"edge \(3, 1\) appears twice in one step"):
        stat.update([(1, 3), (3, 1)])
    with pytest.raises(TypeError, match=r"edges\[0\] must be a \(u, v\) pair"):
        stat.update([(1, 3, 0.5)])
    assert stat.step == 1 and stat.graph.n_edges == 2
    with pytest.raises(TypeError, match=r"function must be callable"):
        GraphStatistic(3, 1.0, n_vertices=3, horizon=3, epsilon=1.0)  # type: ignore[arg-type]
    calls = iter([1.0, 1.0, np.zeros(2)])
    bad = GraphStatistic(lambda g: next(calls), 1.0, n_vertices=3, horizon=3, epsilon=1.0)
    bad.update([(0, 1)])
    with pytest.raises(
        ValueError, match=r"function must return a real every step, got shape \(2,\)"
    ):
        bad.update([(1, 2)])
    with pytest.raises(ValueError, match=r"difference_sensitivity must be > 0, got 0"):
        GraphStatistic(lambda g: 0.0, 0, n_vertices=3, horizon=3, epsilon=1.0)
    with pytest.raises(ValueError, match=r"max_degree must be >= 2, got 1"):
        triangle_count_statistic(4, 1, 5, epsilon=1.0)
    full = edge_count_statistic(3, 1, epsilon=1.0).with_sampler(ZeroNoise())
    full.update([(0, 1)])
    with pytest.raises(ValueError, match=r"horizon"):
        full.update([(1, 2)])
    assert full.graph.n_edges == 1  # the rejected step did not change the graph


def test_simple_graph_queries() -> None:
    g = SimpleGraph(4)
    g.insert([(0, 1), (1, 2), (2, 0), (2, 3)])
    assert sorted(g.edges()) == [(0, 1), (0, 2), (1, 2), (2, 3)]
    assert g.degrees().tolist() == [2, 2, 3, 1]
    assert g.neighbours(2) == frozenset({0, 1, 3}) and g.has_edge(3, 2)
    assert g.common_neighbours(0, 1) == 1


def test_complement_bound_holds_simultaneously() -> None:
    """All cuts (S, V∖S) and all steps at once: violations happen with probability ≤ β."""
    n, T, reps, beta = 6, 8, 1000, 0.5
    g = SyntheticGraph(n, T, epsilon=1.0, delta=1e-6, mechanism="binary", rng=12)
    subsets = [s for r in range(1, n) for s in itertools.combinations(range(n), r)]
    cross = np.array(
        [
            [float((a in s) != (b in s)) for a, b in itertools.combinations(range(n), 2)]
            for s in subsets
        ]
    )
    bounds = np.array(
        [g.cut_error_bound(len(s), n - len(s), beta=beta, scope="complement") for s in subsets]
    )
    zeros = np.zeros((T, g.n_pairs))
    violated = np.array(
        [
            (
                np.abs(g.with_sampler(g.mechanism.sampler).update_many(zeros) @ cross.T) > bounds.T
            ).any()
            for _ in range(reps)
        ]
    )
    se = math.sqrt(beta * (1 - beta) / reps)
    assert violated.mean() <= beta + Z_TOLERANCE * se
    # Bounds from a quarter of the variance would be violated far more often than β.
    quarter = np.array(
        [
            (
                np.abs(g.with_sampler(g.mechanism.sampler).update_many(zeros) @ cross.T)
                > bounds.T / 2
            ).any()
            for _ in range(200)
        ]
    )
    assert quarter.mean() > beta + Z_TOLERANCE * math.sqrt(beta * (1 - beta) / 200)
