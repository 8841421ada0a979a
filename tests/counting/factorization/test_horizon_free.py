"""The horizon-free square root: factorization, certified infinite norm, exact
variances, release and stream, statistics."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.integrate import quad

from dpcount.counting import HorizonFreeSqrt
from dpcount.counting.factorization import horizon_free as hf
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients
from dpcount.privacy import Budget, ZeroNoise
from dpcount.privacy.budget import Participation
from dpcount.privacy.calibration import gaussian_sigma

BUDGET = Budget(epsilon=1.0, delta=1e-6)


def test_dense_factorization_is_exact_and_variances_are_its_row_norms() -> None:
    T = 64
    B, C = HorizonFreeSqrt(T, budget=BUDGET, rng=0).dense_factorization()
    np.testing.assert_allclose(B @ C, np.tril(np.ones((T, T))), atol=1e-12)
    np.testing.assert_allclose(hf.variance_coefficients(T), (B * B).sum(axis=1), rtol=1e-12)
    # B = A·C⁻¹ by a triangular solve, independent of the Newton inversion
    direct = np.linalg.solve(C.T, np.tril(np.ones((T, T))).T).T
    np.testing.assert_allclose(B, direct, atol=1e-12)


def test_newton_inverse_matches_the_direct_recursion() -> None:
    n = 1024
    c = hf.encoder_coefficients(n)
    u = np.zeros(n)
    u[0] = 1.0 / c[0]
    for k in range(1, n):
        u[k] = -np.dot(c[1 : k + 1], u[k - 1 :: -1]) / c[0]
    np.testing.assert_allclose(hf._inverse(c), u, rtol=1e-9, atol=1e-15)


def test_tail_lemma_and_calibration() -> None:
    k = np.arange(1, 1 << 16, dtype=np.float64)
    scaled = math.pi * k * sqrt_coefficients(1 << 16)[1:] ** 2
    # the lemma behind the tail bound: π k f(k)² increases and stays below 1
    assert np.all(np.diff(scaled) > 0) and scaled[-1] < 1.0
    bound = hf.encoder_norm_squared()
    mech = HorizonFreeSqrt(1 << 40, budget=BUDGET, rng=0)
    assert mech.privacy is not None
    assert mech.privacy.l2_sensitivity == pytest.approx(math.sqrt(bound), rel=1e-15)
    assert mech.noise_scale == pytest.approx(gaussian_sigma(math.sqrt(bound), 1.0, 1e-6))


@pytest.mark.slow
def test_certified_norm_bounds_the_infinite_column_and_is_tight() -> None:
    bound = hf.encoder_norm_squared()
    n = 1 << 21
    c = hf.encoder_coefficients(n)
    partial = math.fsum((c * c).tolist())
    # the tail beyond n by adaptive quadrature of g(x)²/(πx) in u = ln x, written out
    # here independently of the module's Riemann grid: the bound lies between the two
    a, kappa, e, q, K = hf.HORIZON_FREE_PARAMETERS

    def h(u: float) -> float:
        first = 1.0 + a * np.logaddexp(0.0, u - math.log(kappa))
        second = 1.0 + e * np.logaddexp(0.0, u - math.log(K))
        return float(first**-1.0 * second ** (-2.0 * q) / math.pi)

    tail, err = quad(h, math.log(n - 1), math.inf, limit=500)
    assert partial < bound < partial + tail * (1 + 1e-3) + err


def test_variances_do_not_depend_on_the_horizon() -> None:
    short = HorizonFreeSqrt(100, budget=BUDGET, rng=0)
    huge = HorizonFreeSqrt(1 << 53, budget=BUDGET, rng=0)
    assert short.noise_scale == huge.noise_scale
    assert [huge.variance_at(t) for t in (1, 50, 100)] == [
        short.variance_at(t) for t in (1, 50, 100)
    ]
    assert list(short.iter_variances(90)) == short.variances()[89:].tolist()
    first = list(itertools.islice(huge.iter_variances(1), 5000))
    np.testing.assert_array_equal(first, short.sampler.variance * hf.variance_coefficients(5000))


def test_structure_release_and_stream_agree_across_kernel_growth() -> None:
    x = np.arange(6000) % 5
    mech = HorizonFreeSqrt(1 << 53, budget=BUDGET, rng=0)
    assert np.array_equal(mech.with_sampler(ZeroNoise()).release(x), np.cumsum(x))
    batch = HorizonFreeSqrt(1 << 53, budget=BUDGET, rng=7).release(x)
    stream = HorizonFreeSqrt(1 << 53, budget=BUDGET, rng=7).stream()
    stepped = [stream.update(v) for v in x[:5]] + list(stream.update_many(x[5:]))
    np.testing.assert_allclose(stepped, batch, rtol=1e-9, atol=1e-9)


def test_variance_statistically() -> None:
    mech = HorizonFreeSqrt(1 << 53, budget=BUDGET, rng=np.random.default_rng(3))
    reps = 1000  # independent coordinates of one vector release
    noise = mech.release(np.zeros((40, reps)))
    var = np.array([mech.variance_at(t) for t in (10, 40)])
    emp = noise[[9, 39]].var(axis=1)
    se = var * math.sqrt(2.0 / reps)
    assert np.all(np.abs(emp - var) < 6 * se)
    assert np.all(np.abs(emp - 2 * var) > 6 * se)  # twice the variance would fail


def test_refusals() -> None:
    with pytest.raises(ValueError, match="noise='laplace' is not available for HorizonFreeSqrt"):
        HorizonFreeSqrt(10, budget=BUDGET.replace(noise="laplace"))
    with pytest.raises(ValueError, match="participation must be None"):
        HorizonFreeSqrt(10, budget=BUDGET.replace(participation=Participation(2, 4)))
    with pytest.raises(ValueError, match="need a, kappa, e, K > 0 and q > 1/2"):
        hf.encoder_norm_squared((1.0, 1.0, 1.0, 0.5, 10.0))
