"""Tree mechanisms: exact structure first, then exact error, then the noise statistically."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest

from dpcount.counting import BinaryTree, KaryTree
from dpcount.counting.tree_formulas import (
    claim29_mean_nodes,
    even_offset_total_nodes,
    lemma8_mean_nodes,
    lemma8_mse,
    lemma14_mean_nodes,
    lemma14_mse,
    tree_laplace_node_variance,
)
from dpcount.privacy import ConstantNoise, ZeroNoise, gaussian_sigma, laplace_scale_approximate
from tests.stats import assert_variances_match

CONFIGS = [
    (2, False),
    (3, False),
    (3, True),
    (4, True),
    (5, True),
    (6, False),
    (19, True),
    (20, True),
]
HORIZONS = [1, 2, 9, 13, 40, 121, 200]


# ----------------------------------------------------------------------------- oracle
def algorithm3_terms(k: int, h: int, digits: list[int]) -> list[tuple[tuple[int, int], int]]:
    """Nodes (interval, sign) that Algorithm 3 combines for one step, as written in the paper."""
    p, terms = 0, []
    for level in range(h, 0, -1):
        size = k ** (level - 1)
        d = digits[level - 1]
        for _ in range(abs(d)):
            if d > 0:
                terms.append(((p + 1, p + size), +1))
                p += size
            else:
                terms.append(((p - size + 1, p), -1))
                p -= size
    return terms


def oracle(mech: KaryTree) -> tuple[np.ndarray, np.ndarray]:
    """Dense L (steps x nodes, entries +-1) and R (nodes x steps, 0/1) of Algorithm 3."""
    T, h = mech.horizon, mech.height
    per_step = [
        algorithm3_terms(mech.k, h, mech.digit_system.digits(t, h)) for t in range(1, T + 1)
    ]
    nodes = sorted({node for terms in per_step for node, _ in terms})
    index = {node: j for j, node in enumerate(nodes)}
    L = np.zeros((T, len(nodes)))
    for t, terms in enumerate(per_step):
        for node, sign in terms:
            L[t, index[node]] += sign
    R = np.zeros((len(nodes), T))
    for (a, b), j in index.items():
        R[j, max(a, 1) - 1 : min(b, T)] = 1.0
        assert a >= 1  # Proposition 11: every node lies inside [1, capacity]
    return L, R


@dataclass
class UnitDraw:
    """Sampler whose draw number ``hot`` is 1 and every other draw 0."""

    hot: int
    drawn: int = 0
    variance: float = 0.0
    sizes: list[int] = field(default_factory=list)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(size))
        out = np.zeros(n)
        if self.drawn <= self.hot < self.drawn + n:
            out[self.hot - self.drawn] = 1.0
        self.drawn += n
        return out.reshape(size)


@dataclass
class NanFrom:
    """Sampler whose draws number ``first`` and later are NaN, every other draw 0."""

    first: int
    drawn: int = 0
    variance: float = 0.0

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(size))
        out = np.where(np.arange(self.drawn, self.drawn + n) >= self.first, np.nan, 0.0)
        self.drawn += n
        return out.reshape(size)


def reaching_draws(mech, run) -> int:  # type: ignore[no-untyped-def]
    """m such that no draw numbered m or later reaches the output: every nonzero column
    of the noise map is among the first m draws.

    A stream draws its noise in blocks of 1024 and uses a few of them; probing all 1024
    one unit draw at a time is most of the cost of recovering the map. A NaN draw that
    reaches an output makes it NaN (NaN·0 is NaN too), so "the output is finite when the
    draws from m on are NaN" holds exactly for the m ≥ (last reaching draw) + 1, and is
    found by bisection over the draws counted by a probe run.
    """
    probe = UnitDraw(hot=-1)
    run(mech.with_sampler(probe))
    lo, hi = 0, probe.drawn
    while lo < hi:
        mid = (lo + hi) // 2
        if np.all(np.isfinite(run(mech.with_sampler(NanFrom(mid))))):
            hi = mid
        else:
            lo = mid + 1
    return hi


def recovered_columns(mech: KaryTree, run) -> Counter:  # type: ignore[no-untyped-def]
    """Columns of the noise map L (as tuples), recovered one unit draw at a time (the
    draws that reach the output: :func:`reaching_draws`)."""
    columns: Counter = Counter()
    for j in range(reaching_draws(mech, run)):
        col = run(mech.with_sampler(UnitDraw(hot=j)))
        if np.any(col):
            columns[tuple(col)] += 1
    return columns


def batch(m: KaryTree) -> np.ndarray:
    return m.release(np.zeros(m.horizon))


def stream_steps(m: KaryTree) -> np.ndarray:
    s = m.stream()
    return np.array([s.update(0.0) for _ in range(m.horizon)])


def stream_mixed(m: KaryTree) -> np.ndarray:
    s, out, t, sizes = m.stream(), [], 0, [1, 3, 1, 7, 2, 11]
    while t < m.horizon:
        n = min(sizes[len(out) % len(sizes)], m.horizon - t)
        out.append(np.atleast_1d(s.update(0.0)) if n == 1 else s.update_many(np.zeros(n)))
        t += n
    return np.concatenate(out)


# ----------------------------------------------------------------------------- structure
@pytest.mark.parametrize(("k", "subtract"), CONFIGS)
@pytest.mark.parametrize("T", HORIZONS)
def test_zero_noise_release_is_prefix_sums(k: int, subtract: bool, T: int) -> None:
    x = np.random.default_rng(T).normal(size=T)
    m = KaryTree(T, epsilon=1.0, k=k, subtract=subtract, rng=0).with_sampler(ZeroNoise())
    np.testing.assert_allclose(m.release(x), np.cumsum(x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(stream_steps(m) + np.cumsum(x), np.cumsum(x), atol=0)
    s = m.stream()
    np.testing.assert_allclose([s.update(float(v)) for v in x], np.cumsum(x), atol=1e-12)


@pytest.mark.parametrize(("k", "subtract"), CONFIGS)
@pytest.mark.parametrize("T", HORIZONS)
def test_constant_noise_counts_digit_l1_norm(k: int, subtract: bool, T: int) -> None:
    """With every node noise = 1 the noise at t is the number of nodes summed: ||digits(t)||_1."""
    m = KaryTree(T, epsilon=1.0, k=k, subtract=subtract, rng=0)
    brute = [sum(abs(d) for d in m.digit_system.digits(t, m.height)) for t in range(1, T + 1)]
    c = m.with_sampler(ConstantNoise(1.0))
    for run in (batch, stream_steps, stream_mixed):
        np.testing.assert_array_equal(run(c), brute)
    np.testing.assert_array_equal(m.noise_coefficients(), brute)


@pytest.mark.parametrize(
    ("k", "subtract"), [(2, False), (3, True), (4, True), (5, False), (5, True)]
)
@pytest.mark.parametrize("T", [13, pytest.param(40, marks=pytest.mark.slow)])
def test_noise_map_equals_algorithm3_up_to_signs(k: int, subtract: bool, T: int) -> None:
    """Recovered noise map (batch, stream, mixed chunks) = |L| of the paper's Algorithm 3.

    Algorithm 2 adds every node's noise where Algorithm 3 subtracts some nodes;
    with symmetric i.i.d. noise the two are equal in distribution (Prop. 12), and
    the columns (which steps use each node) must match exactly.
    """
    m = KaryTree(T, epsilon=1.0, k=k, subtract=subtract, rng=0)
    L3, R3 = oracle(m)
    np.testing.assert_array_equal(L3 @ R3, np.tril(np.ones((T, T))))  # the oracle is right
    want = Counter(tuple(np.abs(col)) for col in L3.T)
    for run in (batch, stream_steps, stream_mixed):
        assert recovered_columns(m, run) == want


@pytest.mark.parametrize(("k", "subtract"), CONFIGS)
def test_sensitivity_from_dense_oracle(k: int, subtract: bool) -> None:
    """Each step lies in at most h used nodes (Lemmas 7, 13): max column l1 norm of R <= h."""
    for T in (9, 40, 200):
        m = KaryTree(T, epsilon=1.0, k=k, subtract=subtract, rng=0)
        _, R = oracle(m)
        assert np.abs(R).sum(axis=0).max() <= m.height
        assert m.privacy is not None
        assert m.privacy.l1_sensitivity == m.height
        assert m.noise_scale == pytest.approx(m.height / 1.0)


@pytest.mark.parametrize(("k", "subtract"), [(2, False), (19, True), (5, False), (4, True)])
def test_stream_live_noise_within_lemma17(k: int, subtract: bool) -> None:
    T = 3000
    m = KaryTree(T, epsilon=1.0, k=k, subtract=subtract, rng=1)
    bound = m.live_noise_bound()
    if subtract and k % 2:
        assert bound == m.height * (k - 1) // 2  # Lemma 17
    s = m.stream()
    peak = 0
    for _ in range(T):
        s.update(1.0)
        peak = max(peak, s.live_count())
    assert peak <= bound
    assert peak == bound or m.digit_system.capacity(m.height) > T  # the bound is reached when full
    s = m.stream()
    for _ in range(T // 100):
        s.update_many(np.ones(100))
        assert s.live_count() <= bound


def test_stream_rejects_steps_past_horizon() -> None:
    s = KaryTree(3, epsilon=1.0, rng=0).stream()
    s.update_many([1, 2])
    with pytest.raises(ValueError, match=r"xs has 2 steps but only 1 remain before the horizon 3"):
        s.update_many([1, 2])
    s.update(1.0)
    with pytest.raises(ValueError, match=r"stream is at its horizon \(3 steps released\)"):
        s.update(1.0)


# ----------------------------------------------------------------------------- exact error
@pytest.mark.parametrize("k", [2, 3, 5, 17])
@pytest.mark.parametrize("h", [1, 2, 3, 4])
def test_lemma8_at_full_trees(k: int, h: int) -> None:
    T = k**h - 1
    m = KaryTree(T, epsilon=0.7, k=k, subtract=False, rng=0)
    assert m.height == h
    assert m.mse() == pytest.approx(lemma8_mse(k, h, 0.7), rel=1e-12)
    assert m.mse() == pytest.approx((k - 1) * h**3 / (0.7**2 * (1 - k**-h)), rel=1e-12)


@pytest.mark.parametrize("k", [3, 5, 19])
@pytest.mark.parametrize("h", [1, 2, 3, 4])
def test_lemma14_at_full_trees(k: int, h: int) -> None:
    T = (k**h - 1) // 2
    m = KaryTree(T, epsilon=1.3, k=k, subtract=True, rng=0)
    assert m.height == h
    assert m.mse() == pytest.approx(lemma14_mse(k, h, 1.3), rel=1e-12)
    assert m.mse() == pytest.approx(
        k * (1 - 1 / k**2) * h**3 / (2 * 1.3**2 * (1 - k**-h)), rel=1e-12
    )


@pytest.mark.parametrize("k", [4, 6, 20])
@pytest.mark.parametrize("h", [1, 2, 3])
def test_claim29_even_k(k: int, h: int) -> None:
    T = k * (k**h - 1) // (2 * (k - 1))
    m = KaryTree(T, epsilon=1.0, k=k, subtract=True, rng=0)
    assert m.height == h
    node_var = tree_laplace_node_variance(h, 1.0)
    assert m.mse() == pytest.approx(node_var * even_offset_total_nodes(k, h) / T, rel=1e-12)
    # Claim 29's leading term: the exact mean differs from it by o(h) (here < 1 node).
    assert abs(m.mse() / node_var - claim29_mean_nodes(k, h)) < 1.0


def test_variances_are_node_variance_times_digit_norm() -> None:
    m = KaryTree(1000, epsilon=0.5, k=7, subtract=True, step_sensitivity=3.0, rng=0)
    node_var = tree_laplace_node_variance(m.height, 0.5, 3.0)
    norms = [sum(abs(d) for d in m.digit_system.digits(t, m.height)) for t in range(1, 1001)]
    np.testing.assert_allclose(m.variances(), node_var * np.array(norms), rtol=1e-14)
    assert m.mse() == pytest.approx(float(np.mean(m.variances())), rel=1e-12)
    assert m.max_variance() == pytest.approx(node_var * max(norms), rel=1e-14)


def test_mean_node_formulas_agree() -> None:
    assert lemma8_mean_nodes(2, 5) == pytest.approx(5 / (2 * (1 - 2**-5)))
    assert lemma14_mean_nodes(19, 3) == pytest.approx(19 * 3 / 4 * (1 - 1 / 361) / (1 - 19**-3))


def test_binary_tree_is_k2_without_subtraction() -> None:
    b, k2 = (
        BinaryTree(100, epsilon=1.0, rng=0),
        KaryTree(100, epsilon=1.0, k=2, subtract=False, rng=0),
    )
    assert b.height == k2.height == 7
    np.testing.assert_array_equal(b.variances(), k2.variances())
    assert b.name == "binary"


def test_noise_calibrations() -> None:
    T, eps, delta = 5000, 0.8, 1e-7
    m = KaryTree(T, epsilon=eps, k=19, subtract=True, noise="gaussian", delta=delta, rng=0)
    assert m.noise_scale == pytest.approx(gaussian_sigma(math.sqrt(m.height), eps, delta))
    m = KaryTree(T, epsilon=eps, k=2, subtract=False, noise="laplace", delta=delta, rng=0)
    h = m.height
    assert m.noise_scale == pytest.approx(laplace_scale_approximate(h, math.sqrt(h), eps, delta))
    assert m.privacy is not None and m.privacy.epsilon <= eps


# ----------------------------------------------------------------------------- statistics
@pytest.mark.slow  # statistical; CI runs the slow set
@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": 19, "subtract": True},
        {"k": 2, "subtract": False},
        {"k": 4, "subtract": True, "noise": "gaussian", "delta": 1e-6},
    ],
)
def test_batch_variance_matches_exact(kwargs: dict) -> None:  # type: ignore[type-arg]
    T, reps = 120, 20_000
    m = KaryTree(T, epsilon=1.0, rng=12345, **kwargs)
    x = np.random.default_rng(0).integers(0, 2, size=T).astype(float)
    errors = np.array([m.release(x) for _ in range(reps)]) - np.cumsum(x)
    assert_variances_match(errors, m.variances())


def test_vector_steps_have_independent_coordinates_with_exact_variance() -> None:
    T, d = 150, 20_000
    m = KaryTree(T, epsilon=2.0, k=5, subtract=True, rng=7)
    X = np.random.default_rng(1).integers(0, 3, size=(T, d)).astype(float)
    errors = (m.release(X) - np.cumsum(X, axis=0)).T  # coordinates act as replicates
    assert_variances_match(errors, m.variances())
    corr = np.corrcoef(errors[:, -1], np.roll(errors[:, -1], 1))[0, 1]
    assert abs(corr) < 5.5 / math.sqrt(d)  # neighbouring coordinates are independent


def test_stream_variance_matches_exact() -> None:
    T, reps = 60, 3000
    m = KaryTree(T, epsilon=1.0, k=3, subtract=True, rng=99)
    errors = np.empty((reps, T))
    for r in range(reps):
        s = m.stream()
        errors[r] = [s.update(0.0) for _ in range(T)]
    assert_variances_match(errors, m.variances())


@pytest.mark.slow  # statistical; CI runs the slow set
def test_chunked_stream_variance_matches_exact() -> None:
    T, reps = 60, 3000
    m = KaryTree(T, epsilon=1.0, k=3, subtract=True, rng=98)
    errors = np.empty((reps, T))
    for r in range(reps):
        s = m.stream()
        errors[r] = np.concatenate(
            [s.update_many(np.zeros(7)) for _ in range(8)] + [s.update_many(np.zeros(4))]
        )
    assert_variances_match(errors, m.variances())


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"horizon": 0}, ValueError, r"horizon must be >= 1, got 0"),
        ({"horizon": 10.5}, TypeError, r"horizon must be an integer, got 10\.5"),
        ({"epsilon": -1.0}, ValueError, r"epsilon must be > 0, got -1\.0"),
        ({"k": 1}, ValueError, r"k must be >= 2, got 1"),
        ({"k": 3.0}, TypeError, r"k must be an integer, got 3\.0"),
        ({"subtract": 1}, TypeError, r"subtract must be a bool, got 1"),
        ({"noise": "gaussian"}, ValueError, r"delta must be given for noise='gaussian'"),
        (
            {"noise": "normal"},
            ValueError,
            r"noise must be one of \('laplace', 'gaussian', 'discrete-laplace', "
            r"'discrete-gaussian'\), got 'normal'",
        ),
        ({"delta": 1.5}, ValueError, r"delta must be in \(0, 1\), got 1\.5"),
        ({"step_sensitivity": 0}, ValueError, r"step_sensitivity must be > 0, got 0"),
        ({"rng": "seed"}, TypeError, r"rng must be a numpy.random.Generator"),
    ],
)
def test_constructor_validation(kwargs: dict, exc: type, match: str) -> None:  # type: ignore[type-arg]
    args = {"horizon": 10, "epsilon": 1.0} | kwargs
    with pytest.raises(exc, match=match):
        KaryTree(**args)


@pytest.mark.parametrize(
    ("x", "exc", "match"),
    [
        ([1.0, float("nan")], ValueError, r"x must be finite; step 2 holds nan"),
        ([1.0, float("inf")], ValueError, r"x must be finite; step 2 holds inf"),
        (np.ones(11), ValueError, r"x has 11 steps, more than the horizon 10"),
        ([], ValueError, r"x must contain at least one step, got 0"),
        (np.ones((2, 2, 2)), ValueError, r"x must have shape \(steps,\) or \(steps, d\)"),
        (["a", "b"], TypeError, r"x must hold real numbers"),
        ([1 + 2j], TypeError, r"x must hold real numbers"),
    ],
)
def test_release_validation(x, exc: type, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=match):
        KaryTree(10, epsilon=1.0, rng=0).release(x)


def test_stream_step_validation() -> None:
    s = KaryTree(10, epsilon=1.0, rng=0).stream()
    with pytest.raises(ValueError, match=r"x must be finite, got nan"):
        s.update(float("nan"))
    with pytest.raises(TypeError, match=r"x must be a real number, got '3'"):
        s.update("3")
    assert s.step == 0  # nothing was released by the failed calls
    s.update(1)
    with pytest.raises(ValueError, match=r"x must be finite, got inf"):
        s.update(np.float64("inf"))
    v = KaryTree(10, epsilon=1.0, rng=0).stream()
    v.update(np.ones(3))
    with pytest.raises(ValueError, match=r"x must have shape \(3,\), got shape \(2,\)"):
        v.update(np.ones(2))


@pytest.mark.parametrize(
    ("k", "subtract", "dim"), [(19, True, None), (4, False, None), (5, True, 2)]
)
def test_level_chunks_give_the_unchunked_noise_bit_for_bit(
    k: int, subtract: bool, dim: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """next_many's general levels in chunks of rows (one row, a few rows) give the floats of
    one chunk a level: batch releases and a stream's update_many runs across parents (the
    current parent's live nodes reused in the first chunk), Laplace noise, fixed seed."""
    import dpcount.counting.tree as tree

    def run() -> bytes:
        m = KaryTree(3000, epsilon=1.0, k=k, subtract=subtract, rng=5)
        shape = (3000,) if dim is None else (3000, dim)
        x = np.random.default_rng(6).integers(0, 2, shape).astype(float)
        out = [m.release(x), m.release(x[:777])]
        s = m.stream()
        t = 0
        for n in (1, 7, k - 1, k, 2 * k + 3, 400, 3, 1200):
            out.append(s.update_many(x[t : t + n]))
            t += n
        return b"".join(np.ascontiguousarray(a).tobytes() for a in out)

    monkeypatch.setattr(tree, "_LEVEL_VALUES", 1 << 30)
    whole = run()
    for values in (1, 3 * k * (dim or 1)):
        monkeypatch.setattr(tree, "_LEVEL_VALUES", values)
        assert run() == whole, values
