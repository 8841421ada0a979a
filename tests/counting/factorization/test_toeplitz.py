"""Optimized (banded) Toeplitz factorizations: dense oracle, streams, optimizer, bad input."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from dpcount.counting import FactorizationMechanism
from dpcount.counting.checkpoint import load_stream, save_stream
from dpcount.counting.factorization.sqrt_toeplitz import (
    sqrt_coefficients,
    sqrt_l2_norm_squared,
    sqrt_mean_variance_coefficient,
)
from dpcount.counting.factorization.toeplitz import (
    ToeplitzFactorization,
    _LogLoss,
    banded_participation_loss,
    optimize_toeplitz,
    toeplitz_inverse_coefficients,
    toeplitz_losses,
)
from dpcount.counting.registry import CLASSES, build_mechanism
from dpcount.privacy import Budget, GaussianNoise, ZeroNoise
from dpcount.privacy.source import NoiseSource


def dense_encoder(c: np.ndarray, T: int) -> np.ndarray:
    """C[i, j] = c_{i−j} (0 beyond the bands), straight from the definition."""
    C = np.zeros((T, T))
    for j in range(T):
        m = min(len(c), T - j)
        C[j : j + m, j] = c[:m]
    return C


def oracle(c: np.ndarray, T: int) -> FactorizationMechanism:
    """The dense factorization mechanism with R = C and L = A·C⁻¹ by triangular solve."""
    C = dense_encoder(c, T)
    A = np.tril(np.ones((T, T)))
    B = solve_triangular(C.T, A.T, lower=False).T
    return FactorizationMechanism(B, C, epsilon=1.0, delta=1e-6, noise="gaussian")


def random_coefficients(rng: np.random.Generator, kind: int, T: int) -> np.ndarray:
    n = int(rng.integers(1, T + 1))
    if kind == 0:  # the square root's shape, perturbed
        c = sqrt_coefficients(n) * rng.uniform(0.7, 1.3, n)
    elif kind == 1:  # mixed signs, decaying (a stable inverse)
        c = rng.uniform(-1, 1, n) * 0.5 ** np.arange(n)
    else:  # few bands, c_0 not 1
        c = rng.uniform(0.0, 1.0, min(n, 4)) * 0.6 ** np.arange(min(n, 4))
    c[0] = rng.uniform(0.5, 2.0)
    return c


class Recorder:
    """A standard Gaussian sampler that keeps every draw (to rebuild z)."""

    variance = 1.0

    def __init__(self) -> None:
        self.drawn: list[np.ndarray] = []

    def sample(self, rng: np.random.Generator, size: Any) -> np.ndarray:
        out = GaussianNoise(1.0).sample(rng, size)
        self.drawn.append(np.array(out, ndmin=1).reshape(-1, *np.shape(out)[1:]))
        return out


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("kind", range(3))
@pytest.mark.parametrize("T", [1, 2, 5, 64, 300])
def test_exact_forms_match_dense_oracle(kind: int, T: int) -> None:
    rng = np.random.default_rng(100 * kind + T)
    for _ in range(4):
        c = random_coefficients(rng, kind, T)
        m = ToeplitzFactorization(T, coefficients=c, epsilon=1.0, delta=1e-6)
        d = oracle(c, T)
        assert rel(m.noise_scale, d.noise_scale) < 1e-9  # the sensitivity, through σ
        assert rel(m.mse(), d.mse()) < 1e-9
        assert rel(m.max_variance(), d.max_variance()) < 1e-9
        np.testing.assert_allclose(m.noise_coefficients(), d.noise_coefficients(), rtol=1e-9)
        B, C = m.dense_factorization()
        np.testing.assert_array_equal(C, d.R)
        np.testing.assert_allclose(B, d.L, rtol=1e-9, atol=1e-12)


def test_dense_oracle_at_2048_and_a_wrong_answer_is_caught() -> None:
    T = 2048
    c = np.array(optimize_toeplitz(T, objective="mean", bands=512).coefficients)
    m = ToeplitzFactorization(T, coefficients=c, epsilon=1.0, delta=1e-6)
    d = oracle(c, T)
    assert rel(m.noise_scale, d.noise_scale) < 1e-9
    assert rel(m.mse(), d.mse()) < 1e-9
    assert rel(m.max_variance(), d.max_variance()) < 1e-9
    np.testing.assert_allclose(m.noise_coefficients(), d.noise_coefficients(), rtol=1e-9)
    # sharp: a 1e-6 change to one coefficient is detected
    c2 = c.copy()
    c2[3] *= 1 + 1e-6
    assert rel(ToeplitzFactorization(T, coefficients=c2, epsilon=1.0, delta=1e-6).mse(), d.mse())
    assert rel(toeplitz_losses(c2, T).mean_variance * m.sampler.variance, d.mse()) > 1e-9


def test_inverse_coefficients_invert_the_series() -> None:
    rng = np.random.default_rng(3)
    for T in [1, 2, 3, 17, 1000]:
        c = random_coefficients(rng, 1, T)
        C = dense_encoder(c, T)
        dense_inv = solve_triangular(C, np.eye(T), lower=True)[:, 0]
        np.testing.assert_allclose(toeplitz_inverse_coefficients(c, T), dense_inv, atol=1e-12)


@pytest.mark.parametrize("n", [64, 65, 700])
def test_recursion_and_newton_inverses_match_the_dense_inverse(n: int) -> None:
    """n ≤ 64: the recursion; n > 64: Newton's iteration with FFT products."""
    T = 700
    c = sqrt_coefficients(n) * np.random.default_rng(n).uniform(0.8, 1.2, n)
    dense_inv = solve_triangular(dense_encoder(c, T), np.eye(T)[:, 0], lower=True)
    np.testing.assert_allclose(toeplitz_inverse_coefficients(c, T), dense_inv, atol=1e-12)


def test_square_root_coefficients_reproduce_the_sqrt_closed_forms() -> None:
    for T in [1, 10, 1024, 5000]:
        losses = toeplitz_losses(sqrt_coefficients(T), T)
        s = sqrt_l2_norm_squared(T)
        assert rel(losses.sensitivity_squared, s) < 1e-12
        assert rel(losses.max_variance, s) < 1e-10
        assert rel(losses.mean_variance, sqrt_mean_variance_coefficient(T)) < 1e-10


def test_zero_noise_release_and_streams_are_the_prefix_sums() -> None:
    T = 300
    c = sqrt_coefficients(40)
    m = ToeplitzFactorization(T, coefficients=c, epsilon=1.0, delta=1e-6).with_sampler(ZeroNoise())
    x = np.random.default_rng(0).integers(0, 5, T).astype(float)
    np.testing.assert_allclose(m.release(x), np.cumsum(x), atol=1e-9)
    s = m.stream()
    out = [s.update(v) for v in x[:10]]
    out += list(s.update_many(x[10:200]))
    out += [s.update(v) for v in x[200:]]
    np.testing.assert_allclose(out, np.cumsum(x), atol=1e-9)
    xv = np.random.default_rng(1).standard_normal((T, 3))
    sv = m.stream()
    got = np.array([sv.update(row) for row in xv[:7]] + list(sv.update_many(xv[7:])))
    np.testing.assert_allclose(got, np.cumsum(xv, axis=0), atol=1e-9)


@pytest.mark.parametrize(("dim", "bands"), [(None, 5), (3, 5), (None, 600), (2, 600)])
def test_noise_process_is_the_dense_decoder_times_z(dim: int | None, bands: int) -> None:
    """Every schedule of next / next_many gives B z for the z the sampler drew (the
    filter, and the FFT convolution used for scalar streams with > 512 bands)."""
    T = 5000
    c = np.array([1.0, -0.3, 0.2, 0.05, 0.4]) if bands == 5 else sqrt_coefficients(bands)
    m = ToeplitzFactorization(T, coefficients=c, epsilon=1.0, delta=1e-6)
    b = m.decoder_coefficients()
    sampler = Recorder()
    proc = m.noise_process(NoiseSource.generator(sampler, np.random.default_rng(9), dim), dim)
    parts = [np.array([proc.next() for _ in range(5)])]
    parts.append(proc.next_many(4100))
    parts.append(np.array([proc.next() for _ in range(3)]))
    parts.append(proc.next_many(T - 4108))
    got = np.concatenate(parts)
    # the process draws z in step order (scalar streams ahead, in chunks)
    z = np.concatenate(sampler.drawn)[:T]
    # (B z)_t = Σ_s b_{t−s} z_s by direct convolution (not the recursion under test)
    zs = z.reshape(T, -1)
    want = np.stack([np.convolve(b, zs[:, j])[:T] for j in range(zs.shape[1])], axis=1)
    np.testing.assert_allclose(got.reshape(T, -1), want, rtol=1e-9, atol=1e-9)
    assert type(proc).__name__ == (
        "SqrtNoiseProcess" if dim is None and bands > 512 else "ToeplitzNoiseProcess"
    )
    if type(proc).__name__ == "ToeplitzNoiseProcess":
        assert proc.live_count() <= len(c) + 4096


def test_checkpoint_round_trip_continues_exactly(tmp_path: object) -> None:
    T = 800
    c = sqrt_coefficients(30)
    m = ToeplitzFactorization(T, coefficients=c, epsilon=1.0, delta=1e-6, rng=5)
    assert CLASSES[m.config()["class"]] is ToeplitzFactorization
    again = ToeplitzFactorization(**m.config()["kwargs"])
    np.testing.assert_array_equal(again.coefficients, m.coefficients)
    assert again.noise_scale == m.noise_scale
    x = np.ones(T)
    wide = ToeplitzFactorization(T, coefficients=sqrt_coefficients(600), epsilon=1.0, delta=1e-6)
    for mech, kind_dim in [(m, None), (m, 2), (wide, None)]:
        xs = x if kind_dim is None else np.ones((T, kind_dim))
        s = mech.stream()
        s.update_many(xs[:123])
        path = str(tmp_path) + f"/ck{len(mech.coefficients)}-{kind_dim}.json"
        save_stream(s, path)
        ahead = s.update_many(xs[123:])
        restored = load_stream(path, expect=mech)
        np.testing.assert_array_equal(restored.update_many(xs[123:]), ahead)


def test_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(2)
    for T, n, objective in [(64, 64, "mean"), (300, 20, "max"), (1024, 1024, "mean")]:
        f = _LogLoss(T, n, objective)
        x = sqrt_coefficients(n)[1:] * rng.uniform(0.8, 1.2, n - 1)
        _, g = f(x)
        h = 1e-6
        for i in [0, 1, n // 2, n - 2]:
            e = np.zeros(n - 1)
            e[i] = h
            fd = (f(x + e)[0] - f(x - e)[0]) / (2 * h)
            assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_optimizer_beats_square_root_and_blt_at_1024() -> None:
    r = optimize_toeplitz(1024, objective="mean")
    assert r.converged and r.coefficients[0] == 1.0 and r.bands == 1024
    assert r.loss == r.mean_loss
    assert r.loss < 9.343  # sqrt 9.671, 4-buffer BLT 9.347, dense optimum 8.735
    assert r.loss == pytest.approx(toeplitz_losses(r.coefficients, 1024).mean_loss, rel=1e-12)
    assert "ftol" in r.stopping_rule
    again = optimize_toeplitz(1024, objective="mean")
    assert again.coefficients == r.coefficients  # deterministic
    mx = optimize_toeplitz(1024, objective="max")
    assert mx.loss <= toeplitz_losses(sqrt_coefficients(1024), 1024).max_loss * (1 + 1e-12)


def test_banded_optimum_meets_the_multi_participation_targets() -> None:
    """T = 2048, k = 4 participations ≥ 512 apart (jax_privacy banded Toeplitz: 47.40 / 64.37)."""
    T, b, k = 2048, 512, 4
    mean = optimize_toeplitz(T, objective="mean", bands=b)
    mx = optimize_toeplitz(T, objective="max", bands=b)
    assert len(mean.coefficients) == b
    kw = {"participations": k, "min_separation": b}
    mean_loss = banded_participation_loss(mean.coefficients, T, **kw)
    max_loss = banded_participation_loss(mx.coefficients, T, **kw, objective="max")
    assert mean_loss == pytest.approx(k * mean.loss, rel=1e-12)
    assert mean_loss <= 47.40
    assert max_loss <= 64.37


def _brute_force_sensitivity_squared(C: np.ndarray, k: int, b: int) -> float:
    """max over ≤ k steps ≥ b apart and signs of ‖Σ ±C[:, j]‖² (a convex function of the
    per-step changes in [−1, 1], so its maximum is at a vertex)."""
    T = C.shape[1]
    best = 0.0
    for size in range(1, k + 1):
        for cols in itertools.combinations(range(T), size):
            if any(q - p < b for p, q in itertools.pairwise(cols)):
                continue
            for signs in itertools.product([1.0, -1.0], repeat=size - 1):
                v = C[:, cols[0]] + C[:, list(cols[1:])] @ np.array(signs)
                best = max(best, float(v @ v))
    return best


@pytest.mark.parametrize(("T", "n", "k", "b"), [(12, 3, 3, 4), (11, 2, 3, 3), (9, 4, 2, 5)])
def test_participation_loss_matches_brute_force(T: int, n: int, k: int, b: int) -> None:
    rng = np.random.default_rng(T * n)
    c = rng.uniform(-1, 1, n)
    c[0] = 1.0
    C = dense_encoder(c, T)
    brute = _brute_force_sensitivity_squared(C, k, b)
    single = toeplitz_losses(c, T)
    loss = banded_participation_loss(c, T, participations=k, min_separation=b)
    assert brute <= k * single.sensitivity_squared * (1 + 1e-12)
    if (k - 1) * b + n <= T:  # k full columns fit: the bound is exact
        assert brute == pytest.approx(k * single.sensitivity_squared, rel=1e-12)
    assert loss == pytest.approx(brute * single.mean_variance, rel=1e-12)


def test_participation_loss_refuses_overlapping_bands() -> None:
    """With bands > b, k·‖c‖² underestimates: brute force exceeds it, so it is refused."""
    c = np.array([1.0, 0.8, 0.6, 0.4])
    C = dense_encoder(c, 10)
    assert _brute_force_sensitivity_squared(C, 2, 2) > 2 * float(c @ c)
    with pytest.raises(ValueError, match="min_separation=2"):
        banded_participation_loss(c, 10, participations=2, min_separation=2)
    with pytest.raises(ValueError, match="participations=4"):
        banded_participation_loss(c, 10, participations=4, min_separation=4)


@pytest.mark.parametrize(
    ("coefficients", "match"),
    [
        ([0.0, 1.0], r"coefficients\[0\] must be > 0"),
        ([-1.0], r"coefficients\[0\] must be > 0"),
        ([1.0, math.nan], "coefficients must be finite"),
        ([], "coefficients must not be empty"),
        ([[1.0]], "coefficients must be 1-dimensional"),
        ([1.0] * 11, "at most horizon=10"),
        ([1e200], "largest magnitude within"),
        ([1e-200], "largest magnitude within"),
        ([1.0, -3.0] + [0.0] * 8, "stable inverse"),
    ],
)
def test_bad_coefficients_are_refused(coefficients: object, match: str) -> None:
    horizon = 50 if match == "stable inverse" else 10
    with pytest.raises(ValueError, match=match):
        ToeplitzFactorization(horizon, coefficients=coefficients, epsilon=1.0, delta=1e-6)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="coefficients"):
        ToeplitzFactorization(10, coefficients="abc", epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="noise='laplace'"):
        ToeplitzFactorization(10, coefficients=[1.0], epsilon=1.0, noise="laplace")
    with pytest.raises(ValueError, match="bands"):
        optimize_toeplitz(10, bands=11)
    with pytest.raises(ValueError, match="objective"):
        optimize_toeplitz(10, objective="median")
    with pytest.raises(ValueError, match="start must have bands=4"):
        optimize_toeplitz(10, bands=4, start=[1.0, 0.5])
    with pytest.raises(RuntimeError, match="max_iterations=1"):
        optimize_toeplitz(512, max_iterations=1)
    with pytest.raises(ValueError, match="horizon"):
        ToeplitzFactorization.optimized(2**17, epsilon=1.0, delta=1e-6)


def test_optimized_and_registry() -> None:
    m = ToeplitzFactorization.optimized(256, bands=64, epsilon=1.0, delta=1e-6, rng=1)
    r = optimize_toeplitz(256, bands=64)
    assert m.coefficients.tolist() == r.coefficients
    assert "bands=64" in repr(m)
    built = build_mechanism("toeplitz", budget=Budget(epsilon=1.0, delta=1e-6), horizon=256)
    assert isinstance(built, ToeplitzFactorization)
    assert (
        built.mse()
        < build_mechanism("sqrt", budget=Budget(epsilon=1.0, delta=1e-6), horizon=256).mse()
    )


def test_vector_steps_refused_beyond_the_filters_measured_horizon() -> None:
    """The all-pole filter (vector steps) is measured within the float model up to 2^15
    (86.8 > κ/4 at 2^16, seed 3): a vector stream beyond it is refused, naming the dim
    and the horizon; at 2^15 and with scalar steps at 2^15 + 1 it runs."""
    from dpcount.counting.factorization import toeplitz as toeplitz_module

    limit = toeplitz_module.VECTOR_FILTER_MAX_HORIZON
    assert limit == 1 << 15
    c = [1.0, 0.5, 0.25]
    rng = np.random.default_rng(0)
    over = ToeplitzFactorization(limit + 1, coefficients=c, epsilon=1.0, delta=1e-6, rng=0)
    with pytest.raises(ValueError, match=r"dim=3.*up to horizon 32768.*not 32769"):
        over.noise_process(NoiseSource.generator(over.sampler, rng, 3), 3)
    with pytest.raises(ValueError, match=r"dim=3.*not 32769"):
        over.release(np.zeros((limit + 1, 3)))
    assert len(over.release(np.zeros(limit + 1))) == limit + 1
    at = ToeplitzFactorization(limit, coefficients=c, epsilon=1.0, delta=1e-6, rng=0)
    assert at.release(np.zeros((limit, 3))).shape == (limit, 3)
