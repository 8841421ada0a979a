"""Balls-in-bins sampling and its Monte Carlo accounting (dpcount.training.balls_in_bins)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpcount.privacy import Budget
from dpcount.training import gaussian_privatizer
from dpcount.training.balls_in_bins import (
    BallsInBinsAccountant,
    MonteCarlo,
    balls_in_bins_batches,
    kl_upper_confidence,
)

ENCODER = np.array([1.0, 0.5, 0.3, 0.2])


def _terms(epsilon: float, losses: np.ndarray) -> np.ndarray:
    return -np.expm1(np.minimum(epsilon - losses, 0.0))


# -- the confidence bound ---------------------------------------------------------------


def test_kl_bound_at_zero_is_exact() -> None:
    """kl(0, u) = −ln(1 − u): the bound at a zero mean is 1 − α^{1/m} (a wrong α or m
    moves it)."""
    m, alpha = 1000, 1e-3
    assert kl_upper_confidence(0.0, m, alpha) == pytest.approx(1 - alpha ** (1 / m), rel=1e-8)
    assert kl_upper_confidence(0.0, m, 1e-2) < 1 - alpha ** (1 / m)


@pytest.mark.parametrize("k", [0, 3, 50, 400])
def test_kl_bound_covers_clopper_pearson(k: int) -> None:
    """For Bernoulli samples the Chernoff-KL bound is at least the exact binomial
    (Clopper-Pearson) upper limit, and not absurdly above it."""
    m, alpha = 1000, 1e-3
    exact = stats.beta.ppf(1 - alpha, k + 1, m - k)
    bound = kl_upper_confidence(k / m, m, alpha)
    assert exact <= bound <= 1.6 * exact + 1e-3


# -- the privacy loss and δ against independent computations ---------------------------


def test_loss_matches_direct_densities() -> None:
    """The Gram-reduced loss equals ln mean_j N(y; C x_j, σ²) / N(y; 0, σ²) computed from
    the dense T-dimensional densities."""
    acc = BallsInBinsAccountant(ENCODER, epochs=2, batches_per_epoch=3)
    T, sigma = 6, 1.3
    C = np.zeros((T, T))
    for i in range(T):
        for j in range(i + 1):
            if i - j < len(ENCODER):
                C[i, j] = ENCODER[i - j]
    y = np.random.default_rng(3).normal(size=(5, T)) * 2
    modes = [C @ (np.arange(T) % 3 == j) for j in range(3)]
    cov = sigma**2 * np.eye(T)
    q = stats.multivariate_normal(np.zeros(T), cov).logpdf(y)
    p = np.array([stats.multivariate_normal(v, cov).logpdf(y) for v in modes])
    direct = np.log(np.exp(p - q).mean(axis=0))
    ours = acc._loss((y @ acc.modes).T, sigma)
    np.testing.assert_allclose(ours, direct, rtol=1e-10, atol=1e-10)


def test_one_bin_is_the_gaussian_mechanism() -> None:
    """b = 1: the pair is the Gaussian mechanism with sensitivity ‖C·1‖, whose δ(ε)
    dp_accounting's PLD computes; the estimate is within 5 SE, and 5 SE rejects the δ of a
    10% smaller σ."""
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import PLDAccountant

    acc = BallsInBinsAccountant(ENCODER, epochs=3, batches_per_epoch=1)
    sigma, eps, m = 3.0, 0.5, 40_000

    def truth(s: float) -> float:
        event = dp_accounting.GaussianDpEvent(s / acc.unsampled_sensitivity)
        pld = PLDAccountant(value_discretization_interval=1e-3).compose(event)
        return float(pld.get_delta(eps))

    exact, bad = truth(sigma), truth(0.9 * sigma)  # the same for both directions
    add, remove = acc.privacy_losses(sigma, m, rng=7)
    for losses in (add, remove):
        x = _terms(eps, losses)
        se = x.std() / math.sqrt(m)
        assert abs(x.mean() - exact) < 5 * se
        assert abs(x.mean() - bad) > 5 * se


def _grid_delta_two_bins(sigma: float, eps: float) -> tuple[float, float]:
    """k = 1, b = 2, C = I: δ of both directions by a fine 2-D grid (trapezoid)."""
    g = np.linspace(-8 * sigma, 1 + 8 * sigma, 801)
    # the densities factor over the axes: 1-D pdfs on the grid, combined as outer products
    # (the same values as the pdfs evaluated on the 801 × 801 meshgrid)
    f0, f1 = stats.norm.pdf(g, 0, sigma), stats.norm.pdf(g, 1, sigma)
    q = np.outer(f0, f0)
    p = 0.5 * np.outer(f1, f0)
    p += 0.5 * np.outer(f0, f1)
    h = g[1] - g[0]
    add = np.maximum(p - math.exp(eps) * q, 0).sum() * h * h
    remove = np.maximum(q - math.exp(eps) * p, 0).sum() * h * h
    return float(add), float(remove)


def test_two_bins_against_grid_integration() -> None:
    """DP-SGD with 2 bins, one epoch: both directions within 5 SE of a deterministic
    2-D integration; a 10% smaller σ's δ is rejected."""
    acc = BallsInBinsAccountant([1.0], epochs=1, batches_per_epoch=2)
    sigma, eps, m = 0.8, 0.5, 40_000
    truth = _grid_delta_two_bins(sigma, eps)
    wrong = _grid_delta_two_bins(0.9 * sigma, eps)
    losses = acc.privacy_losses(sigma, m, rng=11)
    for losses_dir, exact, bad in zip(losses, truth, wrong, strict=True):
        x = _terms(eps, losses_dir)
        se = x.std() / math.sqrt(m)
        assert abs(x.mean() - exact) < 5 * se
        assert abs(x.mean() - bad) > 5 * se


def test_calibration_is_certified_and_amplifies() -> None:
    """The calibrated σ's certificate is ≤ δ, an independent fresh estimate is below δ,
    σ is below the unamplified one, and the certificate states its samples and α."""
    acc = BallsInBinsAccountant(ENCODER, epochs=2, batches_per_epoch=4)
    eps, delta = 1.0, 1e-2
    cert = acc.calibrate(eps, delta, samples=20_000, rng=5)
    assert cert.amplified and cert.delta <= delta and cert.samples == 20_000
    assert cert.noise_multiplier < 0.95 * acc.unsampled_noise_multiplier(eps, delta)
    add, remove = acc.estimate(cert.noise_multiplier, eps, 40_000, rng=99)
    assert max(add, remove) <= delta


def test_too_few_samples_fall_back_to_the_unamplified_sigma() -> None:
    acc = BallsInBinsAccountant(ENCODER, epochs=2, batches_per_epoch=4)
    cert = acc.calibrate(1.0, 1e-5, samples=1000, rng=5)
    assert not cert.amplified and cert.samples == 0
    assert cert.noise_multiplier == acc.unsampled_noise_multiplier(1.0, 1e-5)


def test_encoder_must_be_non_negative() -> None:
    with pytest.raises(ValueError, match="encoder"):
        BallsInBinsAccountant([1.0, -0.1], epochs=2, batches_per_epoch=2)
    with pytest.raises(ValueError, match="encoder"):
        BallsInBinsAccountant([0.0, 1.0], epochs=2, batches_per_epoch=2)


# -- the batches ------------------------------------------------------------------------


def test_batches_partition_the_examples_uniformly() -> None:
    n, b = 40_000, 4
    batches = balls_in_bins_batches(n, b, rng=2)
    assert len(batches.bins) == b
    np.testing.assert_array_equal(np.sort(np.concatenate(batches.bins)), np.arange(n))
    se = math.sqrt(n * (1 / b) * (1 - 1 / b))
    assert all(abs(len(part) - n / b) < 5 * se for part in batches.bins)
    np.testing.assert_array_equal(batches.batch(1), batches.batch(1 + b))
    assert "bins=4" in repr(batches) and "[" not in repr(batches)
    with pytest.raises(ValueError, match="step"):
        batches.batch(0)
    with pytest.raises(TypeError, match="batches_per_epoch"):
        balls_in_bins_batches(10, 2.0)  # type: ignore[arg-type]


# -- the privatizer ---------------------------------------------------------------------

_FAST = MonteCarlo(samples=20_000, rng=3)


def test_privatizer_balls_in_bins_blt() -> None:
    budget = Budget(epsilon=1.0, delta=1e-2)
    fixed = gaussian_privatizer(
        "blt", epochs=2, batches_per_epoch=4, clip_norm=2.0, budget=budget, rng=0
    )
    p = gaussian_privatizer(
        "blt",
        epochs=2,
        batches_per_epoch=4,
        clip_norm=2.0,
        budget=budget,
        rng=0,
        sampling="balls-in-bins",
        monte_carlo=_FAST,
    )
    cert = p.amplification.certificate  # type: ignore[union-attr]
    assert cert.amplified and cert.delta <= 1e-2
    assert cert.noise_multiplier * 2.0 <= p.mechanism.noise_scale < fixed.mechanism.noise_scale
    assert p.noise_multiplier >= cert.noise_multiplier
    with pytest.raises(ValueError, match="dp_accounting event"):
        p.dp_event()
    state = p.init((3,))
    noisy, state = p.privatize(state, np.zeros(3))
    assert np.shape(noisy) == (3,)


def _small_privatizer(args: dict[str, object]) -> object:
    """A privatizer of 2 epochs × 4 batches at (1, 1e-2) with ``args`` (refusal tests)."""
    return gaussian_privatizer(
        epochs=2,
        batches_per_epoch=4,
        clip_norm=1.0,
        budget=Budget(epsilon=1.0, delta=1e-2),
        **args,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mechanism": "binary"}, "Toeplitz encoder"),
        ({"neighbouring": "replace-one"}, "add-remove"),
        ({"sampling": "fixed-batches"}, "monte_carlo"),
    ],
)
def test_privatizer_balls_in_bins_refusals(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {
        "mechanism": "blt",
        "sampling": "balls-in-bins",
        "monte_carlo": _FAST,
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        _small_privatizer(args)


def test_one_bin_calibrates_in_closed_form() -> None:
    acc = BallsInBinsAccountant(ENCODER, epochs=3, batches_per_epoch=1)
    cert = acc.calibrate(1.0, 1e-3, samples=10**6, rng=0)
    assert not cert.amplified and cert.delta == 1e-3
    assert cert.noise_multiplier == acc.unsampled_noise_multiplier(1.0, 1e-3)


def test_privatizer_accounting_renyi_auto_and_monte_carlo() -> None:
    """``accounting="renyi"`` states the deterministic bound's σ; ``"monte-carlo"`` the
    certificate's; ``"auto"`` (the default) the smaller of the two."""
    from dpcount.training import RenyiAllocationAccountant, RenyiCertificate

    budget = Budget(epsilon=1.0, delta=1e-2)
    common: dict[str, object] = {
        "epochs": 2,
        "batches_per_epoch": 8,
        "clip_norm": 2.0,
        "budget": budget,
        "rng": 0,
        "sampling": "balls-in-bins",
    }
    renyi = gaussian_privatizer("input", accounting="renyi", **common)  # type: ignore[arg-type]
    cert = renyi.amplification.certificate  # type: ignore[union-attr]
    assert isinstance(cert, RenyiCertificate) and cert.amplified and cert.delta <= 1e-2
    direct = RenyiAllocationAccountant([1.0], epochs=2, batches_per_epoch=8).calibrate(1.0, 1e-2)
    assert cert.noise_multiplier == direct.noise_multiplier
    assert renyi.mechanism.noise_scale >= 2.0 * cert.noise_multiplier
    mc = gaussian_privatizer(
        "input",
        accounting="monte-carlo",
        monte_carlo=_FAST,
        **common,  # type: ignore[arg-type]
    )
    mc_cert = mc.amplification.certificate  # type: ignore[union-attr]
    assert not isinstance(mc_cert, RenyiCertificate)
    auto = gaussian_privatizer("input", monte_carlo=_FAST, **common)  # type: ignore[arg-type]
    got = auto.amplification.certificate.noise_multiplier  # type: ignore[union-attr]
    assert got == min(cert.noise_multiplier, mc_cert.noise_multiplier)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sampling": "fixed-batches", "accounting": "renyi"}, ValueError, "accounting"),
        ({"accounting": "exact"}, ValueError, "accounting"),
        ({"accounting": ""}, ValueError, "accounting"),
        ({"accounting": 1}, TypeError, "accounting"),
        ({"accounting": "renyi", "monte_carlo": _FAST}, ValueError, "monte_carlo"),
    ],
)
def test_privatizer_accounting_refusals(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    args: dict[str, object] = {"mechanism": "input", "sampling": "balls-in-bins", **kwargs}
    with pytest.raises(error, match=match):
        _small_privatizer(args)
