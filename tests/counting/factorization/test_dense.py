"""FactorizationMechanism: validation, and the dense oracle every other mechanism must match.

The oracle check is exact: each mechanism's noise map is recovered column by
column with one-hot samplers (batch, per-step stream and mixed chunks), and its
covariance M Mᵀ must equal L Lᵀ of the mechanism's dense factorization, which in
turn must satisfy L R = A and be causal (FactorizationMechanism validates both);
the mechanism's sensitivities must equal R's column norms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from dpcount.counting import (
    CountingMechanism,
    FactorizationMechanism,
    Honaker,
    InputPerturbation,
    KaryTree,
    SmoothBinary,
    SqrtFactorization,
)
from dpcount.counting.factorization.dense import product_roundoff_bound
from dpcount.privacy import Budget, ConstantNoise, ZeroNoise
from tests.counting.test_tree import UnitDraw, reaching_draws
from tests.counting.test_tree import oracle as tree_oracle
from tests.stats import assert_variances_match

# ----------------------------------------------------------------------------- helpers


@dataclass
class ArrayDraw:
    """Sampler handing out ``values`` in order (then zeros)."""

    values: np.ndarray
    drawn: int = 0
    variance: float = 0.0
    sizes: list[tuple[int, ...]] = field(default_factory=list)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        shape = (size,) if isinstance(size, int) else tuple(size)
        self.sizes.append(shape)
        n = shape[0]
        flat = self.values.reshape(len(self.values), -1)
        out = np.zeros((n, flat.shape[1]))
        take = flat[self.drawn : self.drawn + n]
        out[: len(take)] = take
        self.drawn += n
        return out.reshape(shape)


Run = Callable[[CountingMechanism], np.ndarray]


def run_batch(m: CountingMechanism) -> np.ndarray:
    return m.release(np.zeros(m.horizon))


def run_steps(m: CountingMechanism) -> np.ndarray:
    s = m.stream()
    return np.array([s.update(0.0) for _ in range(m.horizon)])


def run_mixed(m: CountingMechanism) -> np.ndarray:
    s, out, t, sizes = m.stream(), [], 0, [1, 3, 1, 7, 2, 11]
    while t < m.horizon:
        n = min(sizes[len(out) % len(sizes)], m.horizon - t)
        out.append(np.atleast_1d(s.update(0.0)) if n == 1 else s.update_many(np.zeros(n)))
        t += n
    return np.concatenate(out)


RUNS: dict[str, Run] = {"batch": run_batch, "steps": run_steps, "mixed": run_mixed}


def noise_matrix(mech: CountingMechanism, run: Run) -> np.ndarray:
    """The noise map (steps × draws actually used), one unit draw at a time (the draws
    that reach the output: :func:`~tests.counting.test_tree.reaching_draws`)."""
    cols = [run(mech.with_sampler(UnitDraw(hot=j))) for j in range(reaching_draws(mech, run))]
    M = np.column_stack(cols)
    return M[:, np.any(M != 0, axis=0)]


def dense_pair(mech: CountingMechanism) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(mech, KaryTree):
        return tree_oracle(mech)
    return mech.dense_factorization()  # type: ignore[attr-defined, no-any-return]


def oracle_for(mech: CountingMechanism) -> FactorizationMechanism:
    L, R = dense_pair(mech)
    # Offset-digit trees subtract nodes that extend past t (module docstring of dense.py).
    causal = not (isinstance(mech, KaryTree) and mech.subtract)
    fm = FactorizationMechanism(L, R, epsilon=1.0, rng=0, causal=causal)
    assert fm.causal == causal or mech.horizon < 3
    return fm


# ----------------------------------------------------------------------------- oracle

MECHS: dict[str, Callable[[int], CountingMechanism]] = {
    "sqrt": lambda T: SqrtFactorization(T, epsilon=0.5, delta=1e-6, rng=0),
    "honaker": lambda T: Honaker(T, epsilon=1.0, rng=0),
    "smooth-binary": lambda T: SmoothBinary(T, epsilon=1.0, delta=1e-6, rng=0),
    "input": lambda T: InputPerturbation(T, epsilon=1.0, rng=0),
    "binary": lambda T: KaryTree(T, epsilon=1.0, k=2, subtract=False, rng=0),
    "kary-3-sub": lambda T: KaryTree(T, epsilon=1.0, k=3, subtract=True, rng=0),
    "kary-4-sub": lambda T: KaryTree(T, epsilon=1.0, k=4, subtract=True, rng=0),
}


@pytest.mark.parametrize("name", sorted(MECHS))
@pytest.mark.parametrize(
    "T",
    [1, 2, 7, pytest.param(16, marks=pytest.mark.slow), pytest.param(33, marks=pytest.mark.slow)],
)
@pytest.mark.parametrize("mode", sorted(RUNS))
def test_noise_covariance_equals_dense_oracle(name: str, T: int, mode: str) -> None:
    mech = MECHS[name](T)
    fm = oracle_for(mech)  # validates L R = A and causality
    M = noise_matrix(mech, RUNS[mode])
    np.testing.assert_allclose(M @ M.T, fm.L @ fm.L.T, atol=1e-12)
    np.testing.assert_allclose(mech.noise_coefficients(), fm.noise_coefficients(), atol=1e-12)


@pytest.mark.parametrize("name", sorted(MECHS))
@pytest.mark.parametrize("T", [1, 2, 7, 16, 33, 100])
def test_sensitivities_equal_column_norms_of_R(name: str, T: int) -> None:
    mech = MECHS[name](T)
    fm = oracle_for(mech)
    mine, exact = mech._unit_sensitivities(), fm._unit_sensitivities()
    if isinstance(mech, SmoothBinary):
        # h/2 is a bound; it is attained once the horizon uses the top levels.
        assert mine[0] >= exact[0] and mine[1] >= exact[1] * (1 - 1e-15)
    else:
        np.testing.assert_allclose(mine, exact, rtol=2e-12)
        assert mine[0] >= exact[0] and mine[1] >= exact[1]  # never rounded down


@pytest.mark.parametrize("name", sorted(MECHS))
def test_constant_noise_release_is_row_sums_of_L(name: str) -> None:
    mech = MECHS[name](40)
    L, _ = dense_pair(mech)
    if isinstance(mech, KaryTree) and mech.subtract:
        L = np.abs(L)  # Alg. 2 adds subtracted nodes with a fresh symmetric sample (Prop. 12)
    out = mech.with_sampler(ConstantNoise(1.0)).release(np.zeros(40))
    np.testing.assert_allclose(out, L.sum(axis=1), atol=1e-12)


@pytest.mark.parametrize("name", sorted(MECHS))
def test_vector_steps_stream_per_step_and_in_chunks(name: str) -> None:
    T, d = 45, 3
    mech = MECHS[name](T)
    const = mech.with_sampler(ConstantNoise(1.0))
    scalar = const.release(np.zeros(T))
    s = const.stream()
    rows = np.array([s.update(np.zeros(d)) for _ in range(T)])
    np.testing.assert_allclose(rows, np.repeat(scalar[:, None], d, axis=1), atol=1e-12)
    s = const.stream()
    parts = [s.update_many(np.zeros((n, d))) for n in (2, 1, 30, 12)]
    np.testing.assert_allclose(np.concatenate(parts), rows, atol=1e-12)
    # With real noise: per-step vector updates, coordinates as replicates.
    reps = 6000
    s = mech.stream()
    errors = np.array([s.update(np.zeros(reps)) for _ in range(T)]).T
    assert_variances_match(errors, mech.variances())


# --------------------------------------------------------------------- FactorizationMechanism


def test_dense_mechanism_exact_error_and_guarantee() -> None:
    L, R = SqrtFactorization(50, epsilon=1.0, delta=1e-6).dense_factorization()
    fm = FactorizationMechanism(L, R, epsilon=0.7, delta=1e-6, noise="gaussian", rng=1)
    np.testing.assert_allclose(fm.variances(), fm.sampler.variance * (L**2).sum(axis=1))
    np.testing.assert_allclose(np.diag(fm.covariance()), fm.variances())
    l2 = math.sqrt(float((R[:, 0] ** 2).sum()))
    assert fm.privacy is not None
    assert fm.privacy.l2_sensitivity == pytest.approx(l2, rel=1e-15)
    assert fm.privacy.l1_sensitivity == pytest.approx(float(R[:, 0].sum()), rel=1e-15)
    assert fm.max_noise_coefficient == 1.0
    x = np.arange(50.0)
    np.testing.assert_allclose(fm.with_sampler(ZeroNoise()).release(x), np.cumsum(x))


def test_dense_mechanism_statistics_match_covariance() -> None:
    T, reps = 12, 40000
    L, R = Honaker(T, epsilon=1.0).dense_factorization()
    fm = FactorizationMechanism(L, R, epsilon=1.0, rng=5)
    errors = fm.release(np.zeros((T, reps))).T
    assert_variances_match(errors, fm.variances())
    cov = errors.T @ errors / reps
    exact = fm.covariance()
    # the standard error of each product mean: Var(e_i e_j) = E[e_i² e_j²] − E[e_i e_j]²
    # (the population variance of the products, without a reps × T × T array)
    squares = errors**2
    se = np.sqrt((squares.T @ squares / reps - cov**2) / reps)
    assert np.max(np.abs(cov - exact) / se) < 5.5


def test_dense_validation_errors() -> None:
    A = np.tril(np.ones((3, 3)))
    eye = np.eye(3)
    with pytest.raises(ValueError, match=r"R must have shape \(3, 3\) for L of shape \(3, 3\)"):
        FactorizationMechanism(A, np.eye(2), epsilon=1.0)
    with pytest.raises(ValueError, match=r"L must be a non-empty 2-D matrix, got shape \(3,\)"):
        FactorizationMechanism(np.ones(3), eye, epsilon=1.0)
    with pytest.raises(TypeError, match=r"R must hold real numbers"):
        FactorizationMechanism(A, np.array([["a"] * 3] * 3), epsilon=1.0)
    with pytest.raises(ValueError, match=r"L must be finite"):
        FactorizationMechanism(np.full((3, 3), np.nan), eye, epsilon=1.0)
    with pytest.raises(ValueError, match=r"L @ R must equal the lower-triangular all-ones"):
        FactorizationMechanism(eye, eye, epsilon=1.0)
    # L = I, R = A: the right factor measures prefix sums; causal. L = A, R = I: causal.
    FactorizationMechanism(eye, A, epsilon=1.0)
    FactorizationMechanism(A, eye, epsilon=1.0)
    # Relabelling the measurements keeps a pair causal.
    P = np.eye(3)[[2, 1, 0]]
    FactorizationMechanism(A @ P, P, epsilon=1.0)
    # Output 1 = (x1 + x2) − x2 is correct but needs step 2 at step 1: not causal.
    L2, R2 = np.array([[1.0, -1.0], [1.0, 0.0]]), np.array([[1.0, 1.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"not causal: L\[0, 0\] = 1 uses measurement 0, "):
        FactorizationMechanism(L2, R2, epsilon=1.0)
    assert not FactorizationMechanism(L2, R2, epsilon=1.0, causal=False).causal
    with pytest.raises(TypeError, match=r"causal must be a bool, got 1"):
        FactorizationMechanism(A, eye, epsilon=1.0, causal=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"epsilon must be > 0, got -1"):
        FactorizationMechanism(A, eye, epsilon=-1)


# ------------------------------------------------------- L R = A up to rounding only


def test_factorization_off_by_more_than_rounding_is_refused() -> None:
    """Audit finding 6: L = I, R = A/2 with atol=0.5 was certified epsilon=1; the
    release A x + z has l1 sensitivity 8 at scale 4, i.e. it is 2-DP."""
    T = 8
    A = np.tril(np.ones((T, T)))
    with pytest.raises(ValueError, match=r"atol=0\.5 is above the floating-point round-off bound"):
        FactorizationMechanism(np.eye(T), 0.5 * A, epsilon=1.0, atol=0.5)
    with pytest.raises(ValueError, match=r"L @ R must equal .* up to rounding .* deviation 0\.5"):
        FactorizationMechanism(np.eye(T), 0.5 * A, epsilon=1.0)
    # The old default tolerance 1e-9 let a visibly wrong pair through.
    with pytest.raises(ValueError, match=r"atol=1e-09 is above the floating-point round-off"):
        FactorizationMechanism(np.eye(T), A, epsilon=1.0, atol=1e-9)
    with pytest.raises(ValueError, match=r"largest deviation 1e-10"):
        FactorizationMechanism(np.eye(T), A + 1e-10, epsilon=1.0)
    # A smaller atol is the user's choice and is kept (and rebuilt by config()).
    fm = FactorizationMechanism(np.eye(T), A, epsilon=1.0, atol=0.0)
    assert fm.atol == 0.0 and fm.config()["kwargs"]["atol"] == 0.0
    assert FactorizationMechanism(np.eye(T), A, epsilon=1.0).config()["kwargs"]["atol"] is None


@pytest.mark.parametrize("name", ["sqrt", "honaker", "smooth-binary", "input", "kary-3-sub"])
@pytest.mark.parametrize("T", [7, 64, 300])
def test_roundoff_bound_covers_the_package_factorizations(name: str, T: int) -> None:
    """The bound is ≥ 4(m+2)u·max(|L||R|) (computed directly) and every dense
    factorization of the package lies well inside it."""
    L, R = dense_pair(MECHS[name](T))
    m = L.shape[1]
    direct = 4 * (m + 2) * 2.0**-53 * float(np.max(np.abs(L) @ np.abs(R)))
    bound = product_roundoff_bound(L, R)
    assert direct <= bound
    deviation = float(np.max(np.abs(L @ R - np.tril(np.ones((T, T))))))
    assert deviation <= bound / 4
    oracle_for(MECHS[name](T))


def test_optimal_is_the_dense_optimum_as_a_mechanism() -> None:
    """``FactorizationMechanism.optimal`` (registry name ``dense-optimum``): the pair of
    optimize_dense, Gaussian by default, with the optimum's mean loss (the shipped
    table's figure at T = 64) as its exact MSE over a sensitivity-1 Gaussian's."""
    from dpcount.counting.factorization.optimize import optimize_dense
    from dpcount.counting.registry import build_mechanism, class_noise
    from dpcount.privacy.calibration import gaussian_sigma

    T = 64
    m = FactorizationMechanism.optimal(T, epsilon=1.0, delta=1e-6, rng=0)
    r = optimize_dense(T)
    np.testing.assert_array_equal(m.L, r.decoder)
    np.testing.assert_array_equal(m.R, r.encoder)
    assert m.budget.noise is not None and m.budget.noise.value == "gaussian"
    unit = gaussian_sigma(1.0, 1.0, 1e-6) ** 2
    assert m.mse() / unit == pytest.approx(4.409397, rel=1e-6)  # factorization_optima.json
    assert m.mse() / unit == pytest.approx(r.loss, rel=1e-9)
    built = build_mechanism(
        "dense-optimum", budget=Budget(epsilon=1.0, delta=1e-6), horizon=T, rng=0
    )
    assert built.noise_scale == m.noise_scale
    assert class_noise("dense-optimum", 1e-6) == "gaussian"
    assert class_noise("dense-optimum", None) == "laplace"  # pure ε-DP: Laplace on R
    with pytest.raises(ValueError, match="horizon"):
        FactorizationMechanism.optimal(4096, epsilon=1.0, delta=1e-6)
