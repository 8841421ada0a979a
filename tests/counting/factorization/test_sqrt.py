"""Square-root factorization: closed forms, exact structure, one z, calibration, error."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy.special import ndtri

from dpcount.counting import SqrtFactorization
from dpcount.counting.factorization.sqrt import SENSITIVITY_MARGIN
from dpcount.counting.factorization.sqrt_toeplitz import (
    _f_at,
    causal_convolution,
    psi_bound,
    sqrt_coefficient_block,
    sqrt_coefficients,
    sqrt_l1_norm,
    sqrt_l2_norm_squared,
    sqrt_mean_variance_coefficient,
)
from dpcount.privacy import (
    Budget,
    ZeroNoise,
    fhu_constant,
    gaussian_sigma,
    laplace_scale_approximate,
)
from tests.counting.factorization.test_dense import ArrayDraw, run_mixed

mpmath.mp.dps = 40


def mp_f(k: int) -> mpmath.mpf:
    return mpmath.gamma(k + mpmath.mpf(1) / 2) / (mpmath.sqrt(mpmath.pi) * mpmath.gamma(k + 1))


def central_binomials(n: int) -> list[int]:
    """C(2k, k) for k < n, exactly: C(2k, k) = C(2k − 2, k − 1)·2(2k − 1)/k (an exact
    integer division; math.comb for each k separately costs ~1 s at n = 3000)."""
    out = [1]
    for k in range(1, n):
        out.append(out[-1] * 2 * (2 * k - 1) // k)
    assert all(out[k] == math.comb(2 * k, k) for k in {0, n // 2, n - 1} if k < n)
    return out


# ----------------------------------------------------------------------------- closed forms


def test_coefficients_recurrence_and_exact_values() -> None:
    f = sqrt_coefficients(3000)
    assert f[0] == 1.0 and f[1] == 0.5 and f[2] == 0.375
    # Correctly rounded rationals C(2k, k)/4^k (Python's int division rounds exactly).
    exact = np.array([c / 4**k for k, c in enumerate(central_binomials(3000))])
    np.testing.assert_array_equal(f[:1024], exact[:1024])
    np.testing.assert_allclose(f[1024:], exact[1024:], rtol=2e-15, atol=0)
    # The recurrence of Algorithm 1 holds to rounding.
    k = np.arange(1, 3000)
    np.testing.assert_allclose(f[1:], f[:-1] * (2 * k - 1) / (2 * k), rtol=4e-15)
    for k in [1023, 1024, 1025, 10**5, 10**7, 10**12]:
        assert _f_at(k) == pytest.approx(float(mp_f(k)), rel=2e-15)
    assert sqrt_coefficients(10**5 + 1)[10**5] == _f_at(10**5)


@pytest.mark.parametrize("T", [1, 2, 3, 17, 1023, 1024, 1025, 1500])
def test_norms_match_exact_rational_sums(T: int) -> None:
    # f_k = C(2k, k)/4^k; the sums over the common denominators 4^(T−1) and 16^(T−1)
    # (the same Fractions as summing f_k, f_k², k·f_k², without a gcd per term)
    c, n = central_binomials(T), T - 1
    s = Fraction(sum(x * x * 16 ** (n - k) for k, x in enumerate(c)), 16**n)
    w = Fraction(sum(k * x * x * 16 ** (n - k) for k, x in enumerate(c)), 16**n)
    l1 = Fraction(sum(x * 4 ** (n - k) for k, x in enumerate(c)), 4**n)
    assert sqrt_l2_norm_squared(T) == pytest.approx(float(s), rel=1e-15)
    assert sqrt_l1_norm(T) == pytest.approx(float(l1), rel=1e-15)
    assert sqrt_mean_variance_coefficient(T) == pytest.approx(float(s - w / T), rel=1e-15)


@pytest.mark.parametrize("T", [2**14 + 7, 2**20, 3 * 10**6])
def test_norms_match_direct_sums_at_large_horizons(T: int) -> None:
    f = sqrt_coefficients(T)
    f2 = f * f
    s = math.fsum(f2)
    assert sqrt_l2_norm_squared(T) == pytest.approx(s, rel=1e-14)
    assert sqrt_l1_norm(T) == pytest.approx(math.fsum(f), rel=1e-14)
    mean = s - math.fsum(np.arange(T) * f2) / T
    assert sqrt_mean_variance_coefficient(T) == pytest.approx(mean, rel=1e-13)


def test_norms_at_huge_horizon_match_mpmath() -> None:
    T, a = 10**9, 1024  # far beyond any array: only the closed forms can answer

    def g(k: mpmath.mpf) -> mpmath.mpf:
        return mp_f(k) ** 2

    # Independent reference: exact head + Euler–Maclaurin for the tail with mpmath's
    # quadrature and numerical derivatives.
    head = mpmath.fsum(g(k) for k in range(a))
    cuts = [a, 10**4, 10**5, 10**6, 10**7, 10**8, T]
    tail = mpmath.quad(g, cuts) + (g(a) - g(T)) / 2
    for j in (1, 2, 3):
        b2j = mpmath.bernoulli(2 * j) / mpmath.factorial(2 * j)
        tail += b2j * (mpmath.diff(g, T, 2 * j - 1) - mpmath.diff(g, a, 2 * j - 1))
    assert sqrt_l2_norm_squared(T) == pytest.approx(float(head + tail), rel=1e-14)
    assert sqrt_l1_norm(T) == pytest.approx(float((2 * T - 1) * mp_f(T - 1)), rel=1e-14)


def test_psi_erratum_psi_is_below_the_exact_norm() -> None:
    assert sqrt_l2_norm_squared(2**16) == pytest.approx(4.596, abs=5e-4)
    assert psi_bound(2**16) == pytest.approx(4.396, abs=5e-4)
    # Psi's 2/T term keeps it above S(T) only for T <= 10; from T = 11 on it is below,
    # by a gap that tends to 0.2009.
    assert all(sqrt_l2_norm_squared(T) < psi_bound(T) for T in range(1, 11))
    assert all(sqrt_l2_norm_squared(T) > psi_bound(T) for T in range(11, 3000))
    for T in [2**16, 2**24, 2**40]:
        assert 0.2 < sqrt_l2_norm_squared(T) - psi_bound(T) < 0.201
    g = float(mpmath.euler)
    assert psi_bound(7) == pytest.approx(1 - (1 - g) / math.pi + math.log(7) / math.pi + 2 / 7)


def test_causal_convolution_matches_direct_sums() -> None:
    rng = np.random.default_rng(3)
    k, x = rng.normal(size=50), rng.normal(size=(50, 3))
    full = np.stack([np.convolve(k, x[:, c])[:50] for c in range(3)], axis=1)
    for start, stop in [(0, 50), (0, 1), (10, 11), (17, 50), (49, 50)]:
        np.testing.assert_allclose(causal_convolution(k, x, start, stop), full[start:stop])
        np.testing.assert_allclose(
            causal_convolution(k, x[:, 0], start, stop), full[start:stop, 0], atol=1e-13
        )
    with pytest.raises(ValueError, match=r"need 0 <= start < stop, got start=5, stop=5"):
        causal_convolution(k, x, 5, 5)


def test_kept_kernel_spectra_give_the_same_floats() -> None:
    """The spectra cache (a mechanism's streams and releases transform its kernel once
    per block): the same bytes as without it, when filled and when read."""
    rng = np.random.default_rng(4)
    k, x = rng.normal(size=3000), rng.normal(size=(3000, 2))
    spectra: dict[tuple[int, int], np.ndarray] = {}
    for start, stop in [(0, 3000), (0, 1024), (1024, 2048), (2048, 3000)]:
        for signal in (x, x[:, 1]):
            want = causal_convolution(k, signal, start, stop).tobytes()
            for _ in range(2):  # filled, then read
                got = causal_convolution(k, signal, start, stop, spectra=spectra)
                assert got.tobytes() == want
    assert len(spectra) == 4 and all(not a.flags.writeable for a in spectra.values())
    # a mechanism whose streams and releases read kept spectra, and one that never does
    budget = Budget(epsilon=1.0, delta=1e-6)
    warm, cold = (
        SqrtFactorization(3000, budget=budget, rng=9),
        SqrtFactorization(3000, budget=budget, rng=9),
    )
    xs = rng.normal(size=3000)
    for _ in range(2):
        cold.__dict__.get("_spectra", {}).clear()
        assert warm.release(xs).tobytes() == cold.release(xs).tobytes()
        streams = warm.stream(), cold.stream()
        for i, v in enumerate(xs.tolist()):
            if i % 700 == 0:
                cold.__dict__.get("_spectra", {}).clear()
            assert streams[0].update(v) == streams[1].update(v)
    assert warm.__dict__["_spectra"]


# ----------------------------------------------------------------------------- structure


@pytest.mark.parametrize("T", [1, 2, 3, 64, 512])
def test_L_times_L_is_the_counting_matrix(T: int) -> None:
    L, R = SqrtFactorization(T, epsilon=1.0, delta=1e-6).dense_factorization()
    np.testing.assert_array_equal(L, R)
    np.testing.assert_allclose(L @ L, np.tril(np.ones((T, T))), atol=1e-12)
    np.testing.assert_array_equal(L, np.tril(L))


@pytest.mark.parametrize("T", [1, 5, 100, 2500])
def test_fft_release_equals_dense_product_for_the_same_z(T: int) -> None:
    mech = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=0)
    f = sqrt_coefficients(T)
    z = np.random.default_rng(T).normal(size=(T, 2))
    expected = np.stack([np.convolve(f, z[:, c])[:T] for c in range(2)], axis=1)
    if T <= 512:
        L, _ = mech.dense_factorization()
        np.testing.assert_allclose(L @ z, expected, atol=1e-12)
    x = np.arange(T, dtype=float)
    out = mech.with_sampler(ArrayDraw(z[:, 0])).release(x)
    np.testing.assert_allclose(out - np.cumsum(x), expected[:, 0], atol=1e-10)
    out2 = mech.with_sampler(ArrayDraw(z)).release(np.zeros((T, 2)))
    np.testing.assert_allclose(out2, expected, atol=1e-10)
    # The stream (blocks of 1024, then doubling) and chunked updates see the same z.
    sampler = ArrayDraw(z[:, 0])
    s = mech.with_sampler(sampler).stream()
    steps = np.array([s.update(0.0) for _ in range(T)])
    np.testing.assert_allclose(steps, expected[:, 0], atol=1e-10)
    assert sampler.drawn == T  # z drawn once, never re-drawn
    np.testing.assert_allclose(
        run_mixed(mech.with_sampler(ArrayDraw(z[:, 0]))), expected[:, 0], atol=1e-10
    )
    vs = mech.with_sampler(ArrayDraw(z)).stream()
    rows = np.array([vs.update(np.zeros(2)) for _ in range(T)])
    np.testing.assert_allclose(rows, expected, atol=1e-10)


def test_stream_blocks_double_and_memory_stays_proportional() -> None:
    T = 10_000
    mech = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=1)
    sampler = ArrayDraw(np.zeros(T))
    s = mech.with_sampler(sampler).stream()
    s.update(0.0)
    assert sampler.sizes == [(1024,)]
    for _ in range(1024):
        s.update(0.0)
    assert sampler.sizes == [(1024,), (1024,)]  # block [1024, 2048)
    for _ in range(2048):
        s.update(0.0)
    assert [sz[0] for sz in sampler.sizes] == [1024, 1024, 2048]
    # Memory: z for the computed steps plus unreleased noise, O(t).
    assert s.live_count() <= 2 * 4096 + 4096
    s.update_many(np.zeros(T - s.step))
    assert sum(sz[0] for sz in sampler.sizes) == T


# ----------------------------------------------------------------------------- one z (statistics)


def empirical_cov_z(errors: np.ndarray, s: int, t: int, expected: float) -> float:
    prod = errors[:, s] * errors[:, t]
    return float((prod.mean() - expected) / (prod.std(ddof=1) / math.sqrt(len(prod))))


@pytest.mark.parametrize("path", ["batch", "stream"])
def test_covariance_at_two_times_proves_one_z(path: str) -> None:
    T, reps = 64, 20000
    mech = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=11)
    L, _ = mech.dense_factorization()
    cov = mech.sampler.variance * (L @ L.T)
    if path == "batch":
        errors = mech.release(np.zeros((T, reps))).T
    else:
        s = mech.stream()
        parts = [s.update_many(np.zeros((n, reps))) for n in (1, 9, 30, 24)]
        errors = np.concatenate(parts).T
    for a, b in [(4, 40), (20, 63), (0, 1), (62, 63), (63, 63)]:
        assert abs(empirical_cov_z(errors, a, b, cov[a, b])) < 5.5
        if a != b:
            # A fresh z per round would make different rounds uncorrelated: rejected.
            assert abs(empirical_cov_z(errors, a, b, 0.0)) > 5.5


# ----------------------------------------------------------------------------- calibration


@pytest.mark.parametrize("method", ["analytic", "fhu", "classic"])
def test_gaussian_calibration_uses_the_exact_column_norm(method: str) -> None:
    T = 5000
    m = SqrtFactorization(T, epsilon=0.5, delta=1e-7, calibration=method, rng=0)
    l2 = math.sqrt(sqrt_l2_norm_squared(T)) * (1 + SENSITIVITY_MARGIN)
    assert m.privacy is not None
    assert m.privacy.l2_sensitivity == l2
    assert m.privacy.calibration == method
    assert m.noise_scale == gaussian_sigma(l2, 0.5, 1e-7, method=method)  # type: ignore[arg-type]
    # Calibrating with Psi would under-noise: the exact norm is larger.
    assert m.noise_scale > gaussian_sigma(math.sqrt(psi_bound(T)), 0.5, 1e-7, method=method)  # type: ignore[arg-type]
    if method == "fhu":
        assert m.noise_scale == pytest.approx(fhu_constant(0.5, 1e-7) * l2, rel=1e-15)


def test_laplace_calibrations() -> None:
    T = 3000
    l1 = sqrt_l1_norm(T) * (1 + SENSITIVITY_MARGIN)
    l2 = math.sqrt(sqrt_l2_norm_squared(T)) * (1 + SENSITIVITY_MARGIN)
    pure = SqrtFactorization(T, epsilon=2.0, noise="laplace", rng=0)
    assert pure.noise_scale == l1 / 2.0
    assert pure.privacy is not None and pure.privacy.delta == 0.0
    approx = SqrtFactorization(
        T, epsilon=2.0, delta=1e-9, noise="laplace", step_sensitivity=3.0, rng=0
    )
    assert approx.noise_scale == laplace_scale_approximate(3 * l1, 3 * l2, 2.0, 1e-9)
    assert approx.noise_scale < 3 * pure.noise_scale  # Thm 3 uses the small l2 norm
    assert approx.privacy is not None and approx.privacy.calibration == "theorem3"


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match=r"delta must be given for noise='gaussian'"):
        SqrtFactorization(10, epsilon=1.0)
    with pytest.raises(ValueError, match=r"epsilon must be < 1 for the 'fhu' Gaussian"):
        SqrtFactorization(10, epsilon=1.5, delta=1e-6, calibration="fhu")
    with pytest.raises(ValueError, match=r"calibration must be one of"):
        SqrtFactorization(10, epsilon=0.5, delta=1e-6, calibration="psi")
    with pytest.raises(TypeError, match=r"horizon must be an integer, got 10.0"):
        SqrtFactorization(10.0, epsilon=0.5, delta=1e-6)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"dense factorization is for horizon <= 4096"):
        SqrtFactorization(5000, epsilon=0.5, delta=1e-6).dense_factorization()


# ----------------------------------------------------------------------------- exact error


@pytest.mark.parametrize("T", [1, 2, 77, 1024, 1025, 5000, 100_000])
def test_exact_error_closed_forms(T: int) -> None:
    m = SqrtFactorization(T, epsilon=0.9, delta=1e-6, rng=0)
    f = sqrt_coefficients(T)
    v = m.variances()
    np.testing.assert_allclose(v, m.sampler.variance * np.cumsum(f * f), rtol=1e-14)
    assert np.all(np.diff(v) > 0)
    assert m.mse() == pytest.approx(float(v.mean()), rel=1e-12)
    assert m.max_variance() == pytest.approx(float(v[-1]), rel=1e-13)


def test_linf_bound_is_the_gaussian_union_bound_and_holds() -> None:
    T, reps, beta = 256, 4000, 0.2
    m = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=3)
    b = m.linf_bound(beta)
    exact = math.sqrt(m.max_variance()) * float(-ndtri(beta / (2 * T)))
    assert exact <= b <= exact * (1 + 1e-11)  # the quantile is rounded up (conservative)
    worst = np.abs(m.release(np.zeros((T, reps)))).max(axis=0)
    rate = float(np.mean(worst > b))
    assert rate <= beta  # union bound: valid (and loose)
    # A bound at half the size would be violated most of the time: the check has teeth.
    assert float(np.mean(worst > b / 2)) > beta
    assert m.linf_bound(0.01) > b


def test_linf_bound_laplace_holds() -> None:
    T, reps, beta = 128, 3000, 0.2
    m = SqrtFactorization(T, epsilon=1.0, noise="laplace", rng=4)
    b = m.linf_bound(beta)
    worst = np.abs(m.release(np.zeros((T, reps)))).max(axis=0)
    assert float(np.mean(worst > b)) <= beta
    assert float(np.mean(worst > b / 3)) > beta


def test_paper_theorem_1_2_expression() -> None:
    T = 2**16
    m = SqrtFactorization(T, epsilon=0.8, delta=1e-10, rng=0)
    expected = fhu_constant(0.8, 1e-10) * psi_bound(T) * math.sqrt(math.log(6 * T / 0.05))
    assert m.paper_linf_bound(0.05) == pytest.approx(expected, rel=1e-15)
    with pytest.raises(ValueError, match=r"epsilon must be < 1 for the fhu constant"):
        SqrtFactorization(T, epsilon=1.5, delta=1e-10).paper_linf_bound()
    with pytest.raises(ValueError, match=r"needs an \(epsilon, delta\) guarantee"):
        SqrtFactorization(T, epsilon=0.5, noise="laplace").paper_linf_bound()
    with pytest.raises(ValueError, match=r"beta must be in \(0, 1\), got 2"):
        m.paper_linf_bound(2)


def test_zero_noise_and_describe() -> None:
    m = SqrtFactorization(30, epsilon=1.0, delta=1e-6, rng=0)
    assert "analytic Gaussian" in m.describe()
    x = np.random.default_rng(0).normal(size=(30, 4))
    np.testing.assert_allclose(m.with_sampler(ZeroNoise()).release(x), np.cumsum(x, axis=0))


@pytest.mark.slow
def test_large_horizon_batch_and_stream_use_the_same_convolution() -> None:
    T = 2**21
    m = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=8)
    z = np.random.default_rng(8).normal(size=T)
    batch = m.with_sampler(ArrayDraw(z)).release(np.zeros(T))
    s = m.with_sampler(ArrayDraw(z)).stream()
    head = np.array([s.update(0.0) for _ in range(5000)])
    stream = np.concatenate([head, s.update_many(np.zeros(T - 5000))])
    np.testing.assert_allclose(stream, batch, atol=1e-9)
    # Spot-check against the direct sum N_t = Σ_s f(t − s) z_s.
    f = sqrt_coefficients(T)
    for t in [0, 1000, 2**20, T - 1]:
        assert batch[t] == pytest.approx(math.fsum(f[: t + 1][::-1] * z[: t + 1]), abs=1e-9)


@pytest.mark.parametrize(
    ("a", "b"), [(0, 0), (0, 5), (3, 1024), (1000, 1030), (1024, 1025), (5000, 70_000)]
)
def test_coefficient_block_is_a_slice_of_the_coefficients(a: int, b: int) -> None:
    assert sqrt_coefficient_block(a, b).tolist() == sqrt_coefficients(b)[a:b].tolist()
    with pytest.raises(ValueError, match="b must be"):
        sqrt_coefficient_block(b + 1, b)


def test_exact_tables_equal_math_comb_per_k() -> None:
    """The tables built by the binomial recurrence are the correctly rounded values of
    C(2k, k)/4^k and the three exact sums, as math.comb gives them one k at a time."""
    from dpcount.counting.factorization import sqrt_toeplitz

    f, s, w, l1 = sqrt_toeplitz._exact_tables()
    a = b = c = 0
    for k in range(sqrt_toeplitz._EXACT):
        binom = math.comb(2 * k, k)
        a, b, c = 16 * a + binom**2, 16 * b + k * binom**2, 4 * c + binom
        assert (f[k], s[k], w[k], l1[k]) == (binom / 4**k, a / 16**k, b / 16**k, c / 4**k)


def test_small_tables_are_prefixes_of_the_full_ones() -> None:
    """A small horizon's tables (``_tables_to``, powers of two from 128) hold the full
    tables' first entries bit for bit, and cover the indices asked for."""
    from dpcount.counting.factorization import sqrt_toeplitz

    full = sqrt_toeplitz._exact_tables()
    for n in (0, 1, 100, 128, 129, 700, 1024, 5000):
        small = sqrt_toeplitz._tables_to(n)
        assert small[0].size >= min(n, sqrt_toeplitz._EXACT)
        for got, want in zip(small, full, strict=True):
            assert got.tolist() == want[: got.size].tolist()
    assert sqrt_toeplitz._tables_to(100)[0].size == 128
