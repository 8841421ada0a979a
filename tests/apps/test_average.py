"""RunningAverage: exact with zero noise, exact variance Var_t/t², bounds enforced."""

from __future__ import annotations

import numpy as np
import pytest

from dpcount.apps import RunningAverage
from dpcount.privacy import ZeroNoise
from tests.stats import assert_variances_match


def test_zero_noise_returns_running_mean() -> None:
    x = np.random.default_rng(0).uniform(-1, 3, size=50)
    avg = RunningAverage(50, epsilon=1.0, lower=-1.0, upper=3.0).with_sampler(ZeroNoise())
    first = [avg.update(float(v)) for v in x[:20]]
    rest = avg.update_many(x[20:])
    expected = np.cumsum(x) / np.arange(1, 51)
    np.testing.assert_allclose(np.concatenate([first, rest]), expected, rtol=1e-12)
    assert avg.step == 50


def test_clip_is_explicit() -> None:
    strict = RunningAverage(5, epsilon=1.0, lower=0.0, upper=1.0).with_sampler(ZeroNoise())
    with pytest.raises(ValueError, match=r"value must be finite and in \[0, 1\], got 1.5"):
        strict.update(1.5)
    with pytest.raises(
        ValueError, match=r"values must be finite and in \[0, 1\], got -0.5 at index 1"
    ):
        strict.update_many([0.5, -0.5])
    assert strict.step == 0
    clipped = RunningAverage(5, epsilon=1.0, lower=0.0, upper=1.0, clip=True).with_sampler(
        ZeroNoise()
    )
    assert clipped.update(1.5) == 1.0
    assert clipped.update(-3) == 0.5
    with pytest.raises(ValueError, match=r"value must be finite"):
        clipped.update(float("nan"))


def test_sensitivity_is_the_width() -> None:
    avg = RunningAverage(100, epsilon=0.5, lower=2.0, upper=7.0)
    assert avg.mechanism.noise_scale == pytest.approx(avg.mechanism.height * 5.0 / 0.5)
    g = RunningAverage(100, epsilon=0.5, delta=1e-6, lower=2.0, upper=7.0, mechanism="binary")
    assert g.privacy is not None and g.privacy.noise == "gaussian"
    assert g.privacy.l2_sensitivity == pytest.approx(np.sqrt(g.mechanism.height) * 5.0)
    assert "one value, both in [2, 7]" in g.describe()


# Runs per case from the power: a 0.8× variance has pooled z ≈ 13 at 3000 Laplace runs
# (heavy tails: e² varies more) and ≈ 16 at 1500 Gaussian runs, far past the 5.5 rejected.
@pytest.mark.parametrize(
    ("mechanism", "delta", "reps"), [("kary", None, 3000), ("binary", 1e-6, 1500)]
)
def test_variance_of_the_mean_matches_exact(mechanism: str, delta: float | None, reps: int) -> None:
    T = 25
    avg = RunningAverage(
        T, epsilon=1.0, delta=delta, lower=0.0, upper=1.0, mechanism=mechanism, rng=9
    )
    x = np.random.default_rng(1).uniform(size=T)
    mean = np.cumsum(x) / np.arange(1, T + 1)
    errors = np.empty((reps, T))
    for r in range(reps):
        errors[r] = avg.with_sampler(avg.mechanism.sampler).update_many(x) - mean
    expected = avg.mechanism.variances() / np.arange(1, T + 1) ** 2
    np.testing.assert_allclose(avg.variances(), expected, rtol=1e-12)
    assert_variances_match(errors, avg.variances())


def test_input_errors() -> None:
    with pytest.raises(ValueError, match=r"upper must be > lower=1.0, got 1.0"):
        RunningAverage(5, epsilon=1.0, lower=1.0, upper=1.0)
    with pytest.raises(TypeError, match=r"clip must be a bool, got 'yes'"):
        RunningAverage(5, epsilon=1.0, lower=0.0, upper=1.0, clip="yes")  # type: ignore[arg-type]
    avg = RunningAverage(2, epsilon=1.0, lower=0.0, upper=1.0)
    with pytest.raises(TypeError, match=r"value must be a real number, got True"):
        avg.update(True)
    with pytest.raises(TypeError, match=r"value must be a real number, got '0.5'"):
        avg.update("0.5")  # type: ignore[arg-type]
    avg.update_many([0.1, 0.2])
    with pytest.raises(ValueError, match=r"horizon"):
        avg.update(0.3)
