"""The contract every counting mechanism satisfies (run over tests/mechanisms.py: the
hand-written variants and every registered class they do not cover, discovered from
the registry; the discovered classes' heavy cases are ``slow``)."""

from __future__ import annotations

import numpy as np
import pytest

from dpcount.privacy import ConstantNoise, ZeroNoise
from tests.mechanisms import DISCOVERED, FACTORIES, reaches
from tests.stats import assert_variances_match

NAMES = sorted(FACTORIES)
HORIZONS = [1, 2, 5, 33, 64, 100]


def _heavy_slow(names: list[str]) -> list[object]:
    """``names`` with the discovered ones marked slow (for a heavy case: their
    row-scaled O(T²) / per-row-norm paths cost seconds at T ≈ 2000)."""
    return [pytest.param(n, marks=pytest.mark.slow) if n in DISCOVERED else n for n in names]


def _slow_at(name: str, T: int, above: int = 1024) -> object:
    """(name, T), slow for a discovered name at T ≥ ``above`` (the quick suite keeps
    their small horizons: the contract's structure shows at T ≤ 33 and the hand-written
    variants cover the larger ones)."""
    if name in DISCOVERED and above <= T:
        return pytest.param(name, T, marks=pytest.mark.slow)
    return (name, T)


def test_every_registered_class_is_held_to_the_contract() -> None:
    """Discovery: the factories build every class the registry names (the suites read
    FACTORIES, so a registry entry alone brings a new class under the contract)."""
    from dpcount.counting.registry import CLASSES

    built = {type(FACTORIES[name](2, 0)).__name__ for name in NAMES}
    assert built == set(CLASSES)


@pytest.mark.parametrize(("name", "T"), [_slow_at(n, T, 64) for n in NAMES for T in HORIZONS])
def test_zero_noise_release_equals_prefix_sums(name: str, T: int) -> None:
    m = FACTORIES[name](T, 0).with_sampler(ZeroNoise())
    rng = np.random.default_rng(T)
    x = rng.normal(size=T)
    np.testing.assert_allclose(m.release(x), np.cumsum(x), atol=1e-9)
    X = rng.integers(-3, 4, size=(T, 3)).astype(float)
    np.testing.assert_allclose(m.release(X), np.cumsum(X, axis=0), atol=1e-9)
    s = m.stream()
    np.testing.assert_allclose([s.update(float(v)) for v in x], np.cumsum(x), atol=1e-9)
    assert m.privacy is None


@pytest.mark.parametrize(("name", "T"), [_slow_at(n, T, 64) for n in NAMES for T in HORIZONS])
def test_constant_noise_is_identical_in_batch_and_stream(name: str, T: int) -> None:
    """With every sample = 1 the noise is Σ_j L[t, j]: batch, steps and chunks must agree."""
    m = FACTORIES[name](T, 0).with_sampler(ConstantNoise(1.0))
    batch = m.release(np.zeros(T))
    s = m.stream()
    steps = np.array([s.update(0.0) for _ in range(T)])
    np.testing.assert_allclose(steps, batch, rtol=1e-12, atol=1e-9)
    s = m.stream()
    chunks, t = [], 0
    for n in [3, 1, 7, 2] * T:
        n = min(n, T - t)
        if n == 0:
            break
        chunks.append(s.update_many(np.zeros(n)))
        t += n
    np.testing.assert_allclose(np.concatenate(chunks), batch, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_exact_error_api(name: str) -> None:
    m = FACTORIES[name](77, 0)
    v = m.variances()
    assert v.shape == (77,) and np.all(v >= 0) and np.all(np.isfinite(v))
    assert m.mse() == pytest.approx(float(v.mean()), rel=1e-12)
    assert m.max_variance() == pytest.approx(float(v.max()), rel=1e-12)
    assert m.privacy is not None and m.privacy.epsilon > 0
    assert m.name in m.describe() or type(m).__name__ in m.describe()


#: the variance test's slow cases: Honaker with integer noise (the tree and the
#: Laplace/Gaussian Honaker cases cover the integer samplers and Honaker's structure
#: in the quick suite; CI runs these)
SLOW_VARIANCE = ("honaker-discrete-gauss", "honaker-discrete-laplace")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n in SLOW_VARIANCE or n in DISCOVERED else n
        for n in NAMES
    ],
)
def test_batch_and_stream_variances_match_exact(name: str) -> None:
    T, reps = 40, 4000
    m = FACTORIES[name](T, 2024)
    errors = m.release(np.zeros((T, reps))).T  # coordinates as replicates
    assert_variances_match(errors, m.variances())
    # each stream draws a block of 1024 samples: with the exact integer samplers 500
    # streams (still rejecting 0.8x the variance at z > 6.7) instead of 1000
    streams = reps // 8 if "discrete" in name else reps // 4
    stream_errors = np.empty((streams, T))
    for r in range(streams):
        s = m.stream()
        stream_errors[r] = [s.update(0.0) for _ in range(T)]
    assert_variances_match(stream_errors, m.variances())


@pytest.mark.parametrize("name", NAMES)
def test_horizon_and_input_errors(name: str) -> None:
    m = FACTORIES[name](4, 0)
    with pytest.raises(ValueError, match=r"x has 5 steps, more than the horizon 4"):
        m.release(np.ones(5))
    with pytest.raises(ValueError, match=r"x must be finite; step 1 holds nan"):
        m.release([float("nan")])
    s = m.stream()
    s.update_many(np.ones(4))
    with pytest.raises(ValueError, match=r"stream is at its horizon"):
        s.update(1.0)


SCHEDULES = [
    [1024, 1024, 52],  # whole computed blocks handed over
    [1, 1023, 1024, 52],
    [5] * 20 + [1] * 7 + [2100 - 107],
    [2099, 1],
]


#: the dense square root at T = 2100 (its O(T²) matrices, ~1.3 s a case) runs in the slow
#: set: the quick suite's dense cases are the small horizons above
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n == "dense-sqrt" else n
        for n in _heavy_slow(NAMES)
    ],
)
@pytest.mark.parametrize(
    "schedule",
    [0, 1] + [pytest.param(i, marks=pytest.mark.slow) for i in range(2, len(SCHEDULES))],
)
def test_block_boundary_schedules_match_batch(name: str, schedule: int) -> None:
    """Chunked streams over block boundaries never reuse or skip noise (constant-noise check)."""
    T = 2100
    assert all(sum(sched) == T for sched in SCHEDULES)
    m = FACTORIES[name](T, 0).with_sampler(ConstantNoise(1.0))
    batch = m.release(np.zeros(T))
    s, parts = m.stream(), []
    for n in SCHEDULES[schedule]:
        if n == 1:
            parts.append(np.atleast_1d(s.update(0.0)))
        else:
            parts.append(s.update_many(np.zeros(n)))
    np.testing.assert_allclose(np.concatenate(parts), batch, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize(
    ("name", "T"),
    [_slow_at(n, T, 100) for n in NAMES for T in [1, 2, 3, 19, 20, 64, 100, 181, 1024, 1025]],
)
def test_variance_at_and_iter_variances_equal_variances_bit_for_bit(name: str, T: int) -> None:
    """The per-step exact variance (finding 8) is the same float as variances()[t - 1]."""
    m = FACTORIES[name](T, 0)
    v = m.variances()
    assert [m.variance_at(t) for t in range(1, T + 1)] == v.tolist()
    assert list(m.iter_variances()) == v.tolist()
    for start in {1, 2, (T + 1) // 2, T, T + 1}:
        if start <= T + 1:
            assert list(m.iter_variances(start)) == v[start - 1 :].tolist()
    with pytest.raises(ValueError, match="t must be"):
        m.variance_at(T + 1)
    with pytest.raises(ValueError, match="t must be"):
        m.variance_at(0)
    with pytest.raises(ValueError, match="start must be"):
        m.iter_variances(T + 2)


# The dense oracle and the column-normalized square root with one weight per column
# (horizon <= 2^14) stop earlier.
@pytest.mark.parametrize(
    "name",
    _heavy_slow(
        [
            n
            for n in NAMES
            if not n.startswith("dense") and n != "normalized-sqrt" and reaches(n, 70_001)
        ]
    ),
)
def test_per_step_variances_at_a_large_awkward_horizon(name: str) -> None:
    """Past the square-root mechanism's summation block (2^16 steps) and the exact table."""
    T = 70_001
    m = FACTORIES[name](T, 0)
    v = m.variances()
    assert list(m.iter_variances()) == v.tolist()
    for t in (1, 1023, 1024, 1025, 65_535, 65_536, 65_537, 65_538, T - 1, T):
        assert m.variance_at(t) == v[t - 1]
    assert list(m.iter_variances(65_537)) == v[65_536:].tolist()


def test_sqrt_running_sum_across_many_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small blocks: the carried sum reproduces np.cumsum's sequential order exactly."""
    import dpcount.counting.factorization.sqrt as sqrt_module

    monkeypatch.setattr(sqrt_module, "_VARIANCE_BLOCK", 7)
    m = FACTORIES["sqrt-gauss"](1500, 0)
    v = m.variances()
    assert list(m.iter_variances()) == v.tolist()
    assert [m.variance_at(t) for t in (1, 7, 8, 14, 15, 1024, 1025, 1500)] == v[
        [0, 6, 7, 13, 14, 1023, 1024, 1499]
    ].tolist()
    assert list(m.iter_variances(9)) == v[8:].tolist()


@pytest.mark.parametrize(
    "name", ["binary", "kary-19-sub", "kary-4-sub-gauss", "kary-5-laplace-delta"]
)
def test_tree_per_step_variances_across_small_blocks(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dpcount.counting.tree as tree_module

    monkeypatch.setattr(tree_module, "_NORM_BLOCK", 7)
    m = FACTORIES[name](1000, 0)
    v = m.variances()
    assert list(m.iter_variances()) == v.tolist()
    for start in (2, 7, 8, 9, 500, 999, 1000):
        assert list(m.iter_variances(start)) == v[start - 1 :].tolist()
