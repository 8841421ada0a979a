"""Trees with integer noise: integer outputs, exact structure, exact variances, errors."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcount.counting import BinaryTree, KaryTree
from dpcount.privacy import (
    ConstantNoise,
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    discrete_gaussian_sigma,
    discrete_laplace_scale,
)
from tests.stats import assert_variances_match


@dataclass(frozen=True)
class IntegerOnes:
    """Integer sampler whose every draw is 1 (structure test for the integer path)."""

    integer: ClassVar[bool] = True

    @property
    def variance(self) -> float:
        return 0.0

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray[np.int64]:
        return np.ones(size, dtype=np.int64)


@pytest.mark.parametrize(("k", "subtract"), [(2, False), (3, True), (4, True), (19, True)])
def test_integer_structure_is_exact(k: int, subtract: bool) -> None:
    """With every node noise 1, the noise at t is Σ digits: batch, stream, chunks agree as ints."""
    T = 200
    m = KaryTree(T, epsilon=1.0, k=k, subtract=subtract, noise="discrete-laplace", rng=0)
    ones = m.with_sampler(IntegerOnes())
    x = np.random.default_rng(1).integers(-5, 6, size=T)
    # ConstantNoise(1) on the float path gives Σ_j L[t, j] (node noises with sign).
    float_noise = m.with_sampler(ConstantNoise(1.0)).release(np.zeros(T))
    batch = ones.release(x)
    assert batch.dtype == np.int64
    np.testing.assert_array_equal(batch, np.cumsum(x) + float_noise.astype(np.int64))
    s = ones.stream()
    steps = [s.update(int(v)) for v in x]
    assert all(type(v) is int for v in steps)
    np.testing.assert_array_equal(steps, batch)
    s = ones.stream()
    chunks = [s.update_many(x[i : i + 7]) for i in range(0, T, 7)]
    np.testing.assert_array_equal(np.concatenate(chunks), batch)


def test_integer_vector_steps() -> None:
    T, d = 50, 3
    m = KaryTree(T, epsilon=1.0, k=5, noise="discrete-laplace", rng=2).with_sampler(IntegerOnes())
    X = np.random.default_rng(3).integers(0, 4, size=(T, d))
    out = m.release(X)
    assert out.dtype == np.int64 and out.shape == (T, d)
    s = m.stream()
    rows = np.array([s.update(row) for row in X])
    assert rows.dtype == np.int64
    np.testing.assert_array_equal(rows, out)


@pytest.mark.parametrize(
    "factory",
    [
        lambda T: BinaryTree(T, epsilon=1.0, noise="discrete-laplace", rng=7),
        lambda T: KaryTree(
            T, epsilon=0.8, k=5, noise="discrete-laplace", step_sensitivity=2, rng=7
        ),
        lambda T: KaryTree(T, epsilon=1.0, k=19, noise="discrete-gaussian", delta=1e-6, rng=7),
        lambda T: BinaryTree(T, epsilon=2.0, noise="discrete-gaussian", delta=1e-3, rng=7),
    ],
)
def test_variances_are_the_true_discrete_variances(factory) -> None:  # type: ignore[no-untyped-def]
    T, reps = 40, 6000
    m = factory(T)
    errors = m.release(np.zeros((T, reps), dtype=np.int64)).T.astype(np.float64)
    assert_variances_match(errors, m.variances())


def test_calibration_and_guarantee_of_discrete_trees() -> None:
    m = KaryTree(10_000, epsilon=0.7, k=19, noise="discrete-laplace", step_sensitivity=3, rng=0)
    assert isinstance(m.sampler, DiscreteLaplaceNoise)
    assert m.sampler.scale == discrete_laplace_scale(3 * m.height, 0.7)
    assert m.privacy is not None and m.privacy.epsilon <= 0.7
    assert m.privacy.epsilon == pytest.approx(0.7, rel=1e-11)
    g = BinaryTree(1000, epsilon=1.0, delta=1e-6, noise="discrete-gaussian", rng=0)
    assert isinstance(g.sampler, DiscreteGaussianNoise)
    assert g.sampler.sigma == pytest.approx(
        discrete_gaussian_sigma(math.sqrt(g.height), 1.0, 1e-6), rel=1e-7
    )
    assert g.privacy is not None and g.privacy.rho is not None
    assert g.privacy.rho == pytest.approx(g.height / (2 * float(g.sampler.sigma2)), rel=1e-14)
    assert g.privacy.delta <= 1e-6
    # Exact variance of a release = node variance (< sigma^2 summed exactly) × digit count
    assert g.variances()[0] == pytest.approx(g.sampler.variance, rel=1e-15)
    assert g.sampler.variance <= float(g.sampler.sigma2)


def test_float_behaviour_unchanged() -> None:
    m = BinaryTree(20, epsilon=1.0, rng=0)
    out = m.release(np.arange(20))
    assert out.dtype == np.float64
    s = m.stream()
    assert isinstance(s.update(1), float)


def test_discrete_errors() -> None:
    with pytest.raises(ValueError, match=r"step_sensitivity must be a whole number for noise="):
        KaryTree(100, epsilon=1.0, noise="discrete-laplace", step_sensitivity=1.5)
    with pytest.raises(ValueError, match=r"step_sensitivity must be a whole number .*got 0\.5"):
        BinaryTree(100, epsilon=1.0, delta=1e-6, noise="discrete-gaussian", step_sensitivity=0.5)
    m = BinaryTree(10, epsilon=1.0, noise="discrete-laplace", rng=0)
    with pytest.raises(ValueError, match=r"x must hold whole numbers.*step 3 holds 0\.5"):
        m.release([1, 2, 0.5])
    with pytest.raises(ValueError, match=r"step 2 holds 1e\+16"):
        m.release([1.0, 1e16])
    s = m.stream()
    s.update(1)
    with pytest.raises(ValueError, match=r"x must be a whole number .*got 0\.25"):
        s.update(0.25)
    with pytest.raises(ValueError, match=r"xs must hold whole numbers.*step 3 holds 1\.5"):
        s.update_many([1.0, 1.5])

    class NoIntegerTree(KaryTree):
        supports_discrete_noise = False

    with pytest.raises(ValueError, match=r"noise='discrete-laplace' is not available for NoInt"):
        NoIntegerTree(10, epsilon=1.0, noise="discrete-laplace")


def test_cli_discrete_noise_gives_integer_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpcount.cli import main

    src = tmp_path / "in.csv"
    src.write_text("c\n1\n0\n2\n1\n")
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--epsilon", "1", "--noise", "discrete-gaussian", "--delta", "1e-6"]
    assert main([*argv, "--output", str(out)]) == 0
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == 4
    assert all(r.split(",")[1].lstrip("-").isdigit() for r in rows)
    assert "rho=" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("c\n1\n0.5\n")
    assert main(["count", str(bad), "--epsilon", "1", "--noise", "discrete-laplace"]) == 2
    assert "step 2 holds 0.5" in capsys.readouterr().err
