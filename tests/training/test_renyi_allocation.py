"""The sampling-free Rényi accountant of balls-in-bins sampling, against independent
computations: Gauss–Hermite quadrature of the exact mixture pair's moments over the b
inner products, the α = 2 closed form (1/b²)·Σ_{i,j} exp(G_ij/σ²) on a dense Gram
matrix built here, brute force over [b]^α, dp_accounting's RDP conversion, and the
Monte Carlo accountant (consistency)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy.linalg import toeplitz
from scipy.special import logsumexp

from dpcount.training import AllocationAccounting, RenyiAllocationAccountant
from dpcount.training.balls_in_bins import BallsInBinsAccountant


def _dense_gram(encoder: list[float], k: int, b: int) -> np.ndarray:
    """G = VᵀV, V = C·X with C the dense T × T lower-triangular Toeplitz matrix and X
    the T × b participation indicators (independent of the accountant's construction)."""
    T = k * b
    col = np.zeros(T)
    col[: min(len(encoder), T)] = encoder[:T]
    C = np.tril(toeplitz(col))
    X = np.zeros((T, b))
    X[np.arange(T), np.arange(T) % b] = 1.0
    V = C @ X
    return V.T @ V


def _quadrature(G: np.ndarray, sigma: float, power: float) -> float:
    """E_Q[(P/Q)^power] by a Gauss–Hermite product rule over the b inner products
    ⟨y, v_j⟩ = σ·(Lξ)_j (ξ ~ N(0, I_b), G = LLᵀ) under Q."""
    b = G.shape[0]
    L = np.linalg.cholesky(G)
    points = {1: 60, 2: 40, 3: 22}[b]
    x, w = hermegauss(points)
    w = w / w.sum()
    grid = np.array(list(itertools.product(range(points), repeat=b)))
    xi, weight = x[grid], np.prod(w[grid], axis=1)
    dots = xi @ L.T / sigma  # ⟨y, v_j⟩/σ²
    ratio = np.mean(np.exp(dots - np.diag(G) / (2 * sigma**2)), axis=1)
    return float(np.sum(weight * ratio**power))


def _upper(bound: float, truth: float) -> bool:
    """The check: ``bound`` is an upper bound of ``truth`` (to float rounding)."""
    return bound >= truth * (1 - 1e-9)


# (encoder, epochs, bins): T ≤ 6, b ≤ 3
DIAGONAL = [([1.0], 2, 3), ([0.7], 3, 2), ([1.0], 6, 1)]
FULL = [([1.0, 0.5, 0.3], 2, 3), ([1.0, 0.6], 3, 2), ([1.0, 0.4, 0.2, 0.1], 2, 2)]


@pytest.mark.parametrize(("encoder", "k", "b"), DIAGONAL)
def test_exact_for_one_band_against_quadrature(encoder: list[float], k: int, b: int) -> None:
    """One band (diagonal G): the bound IS the mixture pair's moment (Lemma 3.2), so it
    is ≥ the quadrature and a bound 5% too small fails the check."""
    sigma = 2.0
    acc = RenyiAllocationAccountant(encoder, epochs=k, batches_per_epoch=b, max_order=4)
    G = _dense_gram(encoder, k, b)
    moments = np.exp(acc.log_moments(sigma))
    for alpha in (2, 3, 4):
        truth = _quadrature(G, sigma, alpha)
        ours = float(moments[alpha - 2])
        assert _upper(ours, truth)
        assert not _upper(0.95 * ours, truth)
        assert ours == pytest.approx(truth, rel=1e-6)


@pytest.mark.parametrize(("encoder", "k", "b"), FULL)
def test_upper_bound_for_full_encoders(encoder: list[float], k: int, b: int) -> None:
    """A non-banded encoder: ≥ the α = 2 closed form and the α = 3 quadrature, and ≥
    brute force of Lemma 3.2 over [b]^α (α ≤ 5), on a Gram matrix built densely here."""
    sigma = 1.5
    acc = RenyiAllocationAccountant(encoder, epochs=k, batches_per_epoch=b, max_order=5)
    G = _dense_gram(encoder, k, b)
    assert np.allclose(acc.gram, G, rtol=1e-12)
    moments = np.exp(acc.log_moments(sigma))
    closed = float(np.mean(np.exp(G / sigma**2)))
    assert _upper(float(moments[0]), closed)
    assert closed == pytest.approx(_quadrature(G, sigma, 2), rel=1e-8)
    assert _upper(float(moments[1]), _quadrature(G, sigma, 3))
    for alpha in (2, 3, 4, 5):
        terms = [
            sum(G[r[i], r[j]] for i in range(alpha) for j in range(i + 1, alpha)) / sigma**2
            for r in itertools.product(range(b), repeat=alpha)
        ]
        brute = float(np.exp(logsumexp(terms) - alpha * math.log(b)))
        assert _upper(float(moments[alpha - 2]), brute)


@pytest.mark.parametrize(("k", "exact"), [(1, True), (2, False)])
def test_band_one_dynamic_program(k: int, exact: bool) -> None:
    """Band 1 (two bands, b = 4): with one epoch nothing is left out and the dynamic
    program is Lemma 3.2 by brute force over [b]^α (5% less fails); with two epochs the
    wrap-around pair goes through AM–GM and the bound stays ≥ brute force."""
    encoder, b, sigma = [1.0, 0.7], 4, 1.3
    acc = RenyiAllocationAccountant(encoder, epochs=k, batches_per_epoch=b, max_order=5)
    assert acc.band == 1
    G = _dense_gram(encoder, k, b)
    moments = np.exp(acc.log_moments(sigma))
    for alpha in (2, 3, 4, 5):
        terms = [
            sum(G[r[i], r[j]] for i in range(alpha) for j in range(i + 1, alpha)) / sigma**2
            for r in itertools.product(range(b), repeat=alpha)
        ]
        brute = float(np.exp(logsumexp(terms) - alpha * math.log(b)))
        ours = float(moments[alpha - 2])
        assert _upper(ours, brute)
        if exact:
            assert ours == pytest.approx(brute, rel=1e-9)
            assert not _upper(0.95 * ours, brute)
    zero = RenyiAllocationAccountant(encoder, epochs=k, batches_per_epoch=b, band=0)
    assert zero.max_order == 64
    assert acc.truncation == (pytest.approx(0.0, abs=1e-200) if exact else pytest.approx(0.7))
    assert np.all(acc.log_moments(sigma) <= zero.log_moments(sigma)[:4] + 1e-12)


@pytest.mark.parametrize(("encoder", "k", "b"), [*DIAGONAL, *FULL])
def test_removal_direction_against_quadrature(encoder: list[float], k: int, b: int) -> None:
    """D_α(Q‖P) = ln E_Q[(P/Q)^{1−α}]/(α − 1) ≤ the closed form; with one bin the closed
    form is the Gaussian's exactly, and 5% less fails."""
    sigma = 2.0
    acc = RenyiAllocationAccountant(encoder, epochs=k, batches_per_epoch=b, max_order=4)
    G = _dense_gram(encoder, k, b)
    _, remove = acc.renyi(sigma)
    for alpha in (2.0, 3.0, 4.0):
        truth = math.log(_quadrature(G, sigma, 1.0 - alpha)) / (alpha - 1.0)
        ours = float(remove[list(acc.remove_orders).index(alpha)])
        assert _upper(ours, truth)
        if b == 1:
            assert ours == pytest.approx(truth, rel=1e-6)
            assert not _upper(0.95 * ours, truth)


def test_conversion_is_balle_et_al_theorem_21() -> None:
    """The (ε, δ) conversion in the ε form of Balle et al. 2020, Thm 21 (ε = R +
    ln((α−1)/α) − (ln δ + ln α)/(α − 1)), written here: at each direction's best
    order, the returned δ gives back ε (never a smaller δ than the formula's)."""
    acc = RenyiAllocationAccountant([1.0, 0.5], epochs=2, batches_per_epoch=8, max_order=40)
    sigma, eps = 1.2, 1.0
    add, remove = acc.renyi(sigma)
    best = []
    for orders, curve in ((acc.orders, add), (acc.remove_orders, remove)):
        a = np.asarray(orders, dtype=float)
        # the δ solving ε(δ) = eps at every order: ln δ = (α−1)(R − eps + ln(1 − 1/α)) − ln α
        log_delta = (a - 1) * (curve - eps + np.log((a - 1) / a)) - np.log(a)
        eps_back = curve + np.log((a - 1) / a) - (log_delta + np.log(a)) / (a - 1)
        assert np.allclose(eps_back, eps, rtol=0, atol=1e-9)
        best.append(float(np.exp(log_delta.min())))
    ours = acc.delta(sigma, eps)
    assert max(best) <= ours <= max(best) * (1 + 1e-9)
    assert not max(best) <= 0.95 * ours


@pytest.mark.slow
def test_conversion_matches_dp_accounting() -> None:
    """The (ε, δ) conversion of each direction is dp_accounting's RDP conversion (CKS
    Prop. 12) of the same Rényi curve, to float rounding (never below it)."""
    rdp = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    acc = RenyiAllocationAccountant([1.0, 0.5], epochs=2, batches_per_epoch=8, max_order=40)
    sigma, eps = 1.2, 1.0
    add, remove = acc.renyi(sigma)
    theirs = max(
        rdp.compute_delta(list(acc.orders), list(add), eps)[0],
        rdp.compute_delta(list(acc.remove_orders), list(remove), eps)[0],
    )
    ours = acc.delta(sigma, eps)
    assert theirs <= ours <= theirs * (1 + 1e-9)


def test_monte_carlo_consistency() -> None:
    """At the same σ the Monte Carlo estimate of δ is not above the Rényi bound by more
    than 6 standard errors (consistency, not proof), and is below it (amplification
    bounds are not exact)."""
    enc, k, b, eps, m = [1.0, 0.5, 0.25], 2, 8, 1.0, 20_000
    renyi = RenyiAllocationAccountant(enc, epochs=k, batches_per_epoch=b)
    cert = renyi.calibrate(eps, 1e-2)
    mc = BallsInBinsAccountant(enc, epochs=k, batches_per_epoch=b)
    add, remove = mc.estimate(cert.noise_multiplier, eps, m, rng=5)
    estimate = max(add, remove)
    assert estimate - 6 * math.sqrt(estimate / m) <= cert.delta
    assert cert.amplified and cert.delta <= 1e-2


def test_calibration_is_tight_and_monotone() -> None:
    """δ(σ) ≤ target at the chosen σ and > target 0.1% below it; the chosen σ is below
    the unamplified one (DP-SGD, 4 epochs × 50 bins: 1 band, the exact case)."""
    acc = RenyiAllocationAccountant([1.0], epochs=4, batches_per_epoch=50, max_order=32)
    cert = acc.calibrate(2.0, 1e-5)
    assert cert.amplified and cert.truncation < 1e-200
    assert (
        acc.delta(cert.noise_multiplier, 2.0)
        <= 1e-5
        < acc.delta(0.999 * cert.noise_multiplier, 2.0)
    )
    assert cert.noise_multiplier < 0.6 * acc.unsampled_noise_multiplier(2.0, 1e-5)
    deltas = [acc.delta(s, 2.0) for s in (1.0, 1.5, 2.0, 3.0)]
    assert deltas == sorted(deltas, reverse=True)


def test_one_bin_is_the_unamplified_gaussian() -> None:
    acc = RenyiAllocationAccountant([1.0, 0.5], epochs=5, batches_per_epoch=1)
    cert = acc.calibrate(1.0, 1e-6)
    assert not cert.amplified
    assert cert.noise_multiplier == acc.unsampled_noise_multiplier(1.0, 1e-6)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"encoder": [1.0, -0.1]}, ValueError, "encoder"),
        ({"encoder": [0.0, 1.0]}, ValueError, "encoder"),
        ({"max_order": 1}, ValueError, "max_order"),
        ({"band": 2}, ValueError, "band"),
        ({"epochs": 0}, ValueError, "epochs"),
        ({"batches_per_epoch": 1.5}, TypeError, "batches_per_epoch"),
    ],
)
def test_bad_input_names_the_parameter(kwargs: dict, error: type, name: str) -> None:
    args = {"encoder": [1.0], "epochs": 2, "batches_per_epoch": 4, **kwargs}
    with pytest.raises(error, match=name):
        RenyiAllocationAccountant(args.pop("encoder"), **args)


def test_accounting_choices() -> None:
    assert AllocationAccounting.choices() == ("auto", "renyi", "monte-carlo")
