"""Input perturbation: Var_t = tσ², both noises, and its place as the local baseline."""

from __future__ import annotations

import numpy as np
import pytest

from dpcount.counting import InputPerturbation
from dpcount.privacy import ConstantNoise
from tests.stats import assert_variances_match, variance_z_scores


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_variance_grows_linearly_and_matches_statistically(noise: str) -> None:
    T, reps = 30, 60000
    delta = 1e-6 if noise == "gaussian" else None
    m = InputPerturbation(T, epsilon=1.0, delta=delta, noise=noise, rng=7)
    var = m.sampler.variance
    np.testing.assert_allclose(m.variances(), var * np.arange(1, T + 1))
    assert m.mse() == pytest.approx(var * (T + 1) / 2)
    assert m.max_variance() == var * T
    batch = m.release(np.zeros((T, reps))).T
    assert_variances_match(batch, m.variances())
    s = m.stream()
    stream = np.concatenate([s.update_many(np.zeros((n, reps // 4))) for n in (1, 10, 19)]).T
    z = variance_z_scores(stream, m.variances())
    assert np.max(np.abs(z)) < 5.5
    assert np.max(np.abs(variance_z_scores(stream, 0.8 * m.variances()))) > 5.5


def test_sensitivity_is_one_step() -> None:
    m = InputPerturbation(10**6, epsilon=2.0, step_sensitivity=3.0)
    assert m.noise_scale == 1.5  # Laplace(Δ/ε), independent of the horizon
    L, R = InputPerturbation(5, epsilon=1.0).dense_factorization()
    np.testing.assert_array_equal(L @ R, np.tril(np.ones((5, 5))))


def test_constant_noise_is_a_ramp() -> None:
    m = InputPerturbation(7, epsilon=1.0).with_sampler(ConstantNoise(1.0))
    np.testing.assert_array_equal(m.release(np.zeros(7)), np.arange(1.0, 8.0))
    s = m.stream()
    assert [s.update(0.0) for _ in range(3)] == [1.0, 2.0, 3.0]
    assert s.live_count() == 1
