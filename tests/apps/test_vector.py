"""Vector steps in the counting core, as the apps rely on them (issue #5 §1).

Checked for explicit mechanisms (k-ary/binary, Laplace and Gaussian): release of
(T, d) and stream updates of length-d vectors equal the prefix sums with zero
noise; batch and stream use the same factorization per coordinate; every
coordinate has the exact scalar variance and coordinates are independent; the
declared step sensitivity is the l1 norm (Laplace) or l2 norm (Gaussian) of
one step's change.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcount.apps._common import MechanismChoice, StreamSensitivity
from dpcount.counting import BinaryTree, CountingMechanism, KaryTree
from dpcount.counting.registry import MECHANISMS
from dpcount.privacy import Budget, ConstantNoise, ZeroNoise, analytic_gaussian_delta
from tests.stats import Z_TOLERANCE, assert_variances_match

CASES = {
    "kary-19-laplace": lambda T, seed: KaryTree(
        T, epsilon=1.0, k=19, rng=seed, step_sensitivity=3.0
    ),
    "binary-gauss": lambda T, seed: BinaryTree(
        T, epsilon=0.5, delta=1e-6, noise="gaussian", rng=seed, step_sensitivity=math.sqrt(3.0)
    ),
    "kary-4-laplace-delta": lambda T, seed: KaryTree(
        T,
        epsilon=1.0,
        k=4,
        delta=1e-8,
        rng=seed,
        step_sensitivity=3.0,
        step_l2_sensitivity=math.sqrt(3),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("T", [1, 7, 40])
def test_zero_noise_vector_stream_and_chunks(name: str, T: int) -> None:
    m = CASES[name](T, 0).with_sampler(ZeroNoise())
    x = np.random.default_rng(T).integers(-2, 3, size=(T, 5)).astype(float)
    s = m.stream()
    np.testing.assert_allclose(np.array([s.update(row) for row in x]), np.cumsum(x, 0))
    s = m.stream()
    first = s.update(list(x[0]))  # a plain list fixes the dimension too
    assert s.dim == 5
    rest = s.update_many(x[1:]) if T > 1 else np.zeros((0, 5))
    np.testing.assert_allclose(np.vstack([first, rest]), np.cumsum(x, 0))


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_factorization_per_coordinate(name: str) -> None:
    """With every sample = 1 each coordinate carries the scalar mechanism's noise."""
    T = 33
    m = CASES[name](T, 0).with_sampler(ConstantNoise(1.0))
    scalar = m.release(np.zeros(T))
    vector = m.release(np.zeros((T, 4)))
    np.testing.assert_allclose(vector, np.repeat(scalar[:, None], 4, axis=1), rtol=1e-12)
    s = m.stream()
    steps = np.array([s.update(np.zeros(4)) for _ in range(T)])
    np.testing.assert_allclose(steps, vector, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vector_variances_and_independence(name: str) -> None:
    T, d = 20, 3000
    m = CASES[name](T, 11)
    noise = m.release(np.zeros((T, d)))  # (T, d): coordinates as replicates
    assert_variances_match(noise.T, m.variances())
    # Independence across coordinates: adjacent coordinates' products have mean 0.
    sd = np.sqrt(m.variances())
    prod = (noise[:, :-1:2] / sd[:, None]) * (noise[:, 1::2] / sd[:, None])
    z = prod.mean(axis=1) / (prod.std(axis=1, ddof=1) / math.sqrt(prod.shape[1]))
    assert np.max(np.abs(z)) < Z_TOLERANCE
    # ...while a fully correlated pair would be rejected.
    same = (noise[:, ::2] / sd[:, None]) ** 2
    z_same = same.mean(axis=1) / (same.std(axis=1, ddof=1) / math.sqrt(same.shape[1]))
    assert np.min(np.abs(z_same)) > Z_TOLERANCE


def test_vector_stream_variances_match_exact() -> None:
    T, d, reps = 12, 200, 20
    m = CASES["binary-gauss"](T, 5)
    errors = []
    for _ in range(reps):
        s = m.stream()
        errors.append(np.array([s.update(np.zeros(d)) for _ in range(T)]).T)
    assert_variances_match(np.vstack(errors), m.variances())


def test_step_sensitivity_is_l1_for_laplace_and_l2_for_gaussian() -> None:
    """Calibration from the declared norms, checked against independent formulas."""
    T, eps = 100, 0.7
    lap = KaryTree(T, epsilon=eps, k=19, step_sensitivity=4.0)
    assert lap.noise_scale == pytest.approx(lap.height * 4.0 / eps, rel=1e-12)
    gau = BinaryTree(T, epsilon=eps, delta=1e-6, noise="gaussian", step_sensitivity=2.0)
    l2 = math.sqrt(gau.height) * 2.0
    assert gau.privacy is not None and gau.privacy.l2_sensitivity == pytest.approx(l2)
    assert analytic_gaussian_delta(gau.noise_scale, l2, eps) <= 1e-6
    assert analytic_gaussian_delta(gau.noise_scale * 0.99, l2, eps) > 1e-6
    lapd = KaryTree(T, epsilon=eps, k=5, delta=1e-6, step_sensitivity=4.0, step_l2_sensitivity=2.0)
    assert lapd.privacy is not None
    assert lapd.privacy.l1_sensitivity == pytest.approx(lapd.height * 4.0)
    assert lapd.privacy.l2_sensitivity == pytest.approx(math.sqrt(lapd.height) * 2.0)


@pytest.mark.parametrize(
    ("name", "noise", "delta"),
    [("kary", "laplace", None), ("binary", "gaussian", 1e-6), ("kary", "laplace", 1e-6)],
)
def test_mechanism_choice_passes_the_right_norm(name: str, noise: str, delta: float | None) -> None:
    sens = StreamSensitivity(9.0, 3.0)
    budget, m = MechanismChoice(name, k=7).build(
        horizon=50, budget=Budget(epsilon=1.0, delta=delta, noise=noise), rng=0, sensitivity=sens
    )
    assert isinstance(m, CountingMechanism)
    assert budget == Budget(epsilon=1.0, delta=delta, noise=noise)
    assert m.budget.noise == noise and m.budget.epsilon == 1.0 and m.budget.delta == delta
    if noise == "gaussian":
        assert m.step_sensitivity == 3.0
    else:
        assert (m.step_sensitivity, m.step_l2_sensitivity) == (9.0, 3.0)


def test_mechanism_choice_defaults_and_errors() -> None:
    pure, approx = Budget(epsilon=1.0), Budget(epsilon=1.0, delta=1e-6)
    assert MechanismChoice().resolve(pure) == ("kary", "laplace")
    assert MechanismChoice().resolve(approx) == ("sqrt", "gaussian")
    assert MechanismChoice("binary").resolve(approx) == ("binary", "gaussian")
    assert MechanismChoice().resolve(approx.replace(noise="laplace")) == ("sqrt", "laplace")
    # integer-valued streams with a whole l1 bound: integer noise on the k-ary tree
    whole, fractional = StreamSensitivity(4.0, 2.0), StreamSensitivity(1.5, 1.5)
    assert MechanismChoice().resolve(pure, whole) == ("kary", "discrete-laplace")
    assert MechanismChoice().resolve(approx, whole) == ("kary", "discrete-gaussian")
    assert MechanismChoice().resolve(approx, fractional) == ("sqrt", "gaussian")
    assert MechanismChoice("sqrt").resolve(approx, whole) == ("sqrt", "gaussian")
    with pytest.raises(ValueError, match=r"mechanism must be one of .*got 'nope'"):
        MechanismChoice("nope")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'noise'"):
        MechanismChoice(noise="laplace")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"subtract must be a bool, got 1"):
        MechanismChoice(subtract=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"l2 sensitivity must be <= l1 sensitivity"):
        StreamSensitivity(1.0, 2.0)
    # a scalar stream: one coordinate, so Γ₁ = Γ₂ (validated like any other)
    assert StreamSensitivity.scalar(2.5) == StreamSensitivity(2.5, 2.5)
    with pytest.raises(ValueError, match=r"l1 sensitivity must be > 0"):
        StreamSensitivity.scalar(0.0)


def test_default_with_delta_is_sqrt_gaussian() -> None:
    if "sqrt" not in MECHANISMS:
        pytest.skip("sqrt not merged yet")
    _, m = MechanismChoice().build(
        horizon=64,
        budget=Budget(epsilon=1.0, delta=1e-6),
        rng=0,
        sensitivity=StreamSensitivity(4.0, 2.0),
    )
    assert m.privacy is not None and m.privacy.noise == "gaussian"
    assert m.step_sensitivity == 2.0
    zero = m.with_sampler(ZeroNoise())
    x = np.random.default_rng(0).integers(0, 2, size=(64, 3)).astype(float)
    np.testing.assert_allclose(zero.release(x), np.cumsum(x, 0), atol=1e-9)
