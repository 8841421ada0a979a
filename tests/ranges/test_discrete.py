"""Audit finding 5 for the range mechanisms: ``noise="discrete-gaussian"``.

Structure with zero noise first; then the guarantee against a brute-force computation of
the integer shift of every neighbour (independent reference transforms below); then the
exact variances against Monte Carlo (standard-error tolerances, a wrong variance is
rejected); then the low-bits property: the release is a function of the noisy integer
vector only, so its possible values are the same lattice under every input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcount.cli import main
from dpcount.privacy import DiscreteGaussianNoise, ZeroNoise, zcdp_delta
from dpcount.privacy.discrete import discrete_gaussian_variance
from dpcount.ranges import (
    CorrelatedPerturbation,
    EigenDesignMechanism,
    IdentityMechanism,
    RangeMechanism,
    TreeMechanism,
    build_mechanism,
)
from tests.ranges_reference import build_tree, perfect_tree_nodes
from tests.stats import Z_TOLERANCE, assert_variances_match, pooled_variance_z

NAMES = ["correlated", "hierarchical", "identity", "tree", "wavelet"]
SIZES = [1, 2, 3, 5, 8, 13, 16]
DG = "discrete-gaussian"


def discrete(name: str, n: int, eps: float = 1.0, delta: float = 1e-6, **kw: Any) -> Any:
    return build_mechanism(name, n, epsilon=eps, delta=delta, rng=0, noise=DG, **kw)


# ---- independent references: the integer vector each mechanism perturbs, in draw order ----


def depth_of(n: int) -> int:
    return 0 if n == 1 else (n - 1).bit_length()


def padded(x: NDArray[np.float64]) -> NDArray[np.float64]:
    out = np.zeros(1 << depth_of(x.size))
    out[: x.size] = x
    return out


def ref_tree(x: NDArray[np.float64]) -> list[float]:
    """Every node count of the perfect padded tree, level by level."""
    p = padded(x)
    return [float(p[s:e].sum()) for s, e in perfect_tree_nodes(depth_of(x.size))]


def ref_wavelet(x: NDArray[np.float64]) -> list[float]:
    """Total, then S(left) − S(right) of every internal node of the padded tree."""
    p = padded(x)
    out = [float(p.sum())]
    for s, e in perfect_tree_nodes(depth_of(x.size)):
        if e - s >= 2:
            mid = (s + e) // 2
            out.append(float(p[s:mid].sum() - p[mid:e].sum()))
    return out


def ref_correlated(x: NDArray[np.float64]) -> list[float]:
    """Total, then S(left) − S(right) of every splitting node of the balanced tree
    (left child gets ⌈m/2⌉), by depth then position (the recursive reference builder)."""
    out = [float(x.sum())]
    for s, e, _ in sorted(build_tree(x.size), key=lambda node: (node[2], node[0])):
        if e - s >= 2:
            mid = s + (e - s + 1) // 2
            out.append(float(x[s:mid].sum() - x[mid:e].sum()))
    return out


REFERENCE: dict[str, Callable[[NDArray[np.float64]], list[float]]] = {
    "identity": lambda x: [float(v) for v in x.ravel()],
    "tree": ref_tree,
    "hierarchical": ref_tree,
    "wavelet": ref_wavelet,
    "correlated": ref_correlated,
}


def coordinate_sigma2(mech: Any) -> list[Fraction]:
    """σ_j² of the sampler of each perturbed coordinate, in draw order (exact rationals)."""
    if isinstance(mech, CorrelatedPerturbation):
        root, *splits = mech.level_samplers
        sizes = [len(v) for v in _per_depth_split_counts(mech.shape[0])]
        out = [root.sigma2]
        for s, k in zip(splits, sizes, strict=True):
            out += [s.sigma2] * k
        return out
    return [mech.sampler.sigma2] * len(REFERENCE[mech.name](np.zeros(mech.shape[0])))


def _per_depth_split_counts(n: int) -> list[list[int]]:
    depth = depth_of(n)
    splits: list[list[int]] = [[] for _ in range(depth)]
    for s, e, d in build_tree(n):
        if e - s >= 2:
            splits[d].append(s)
    return splits


class ScriptedNoise:
    """Hands out given integers in order (int64): drives a release with chosen noise."""

    integer: ClassVar[bool] = True
    variance = 0.0

    def __init__(self, values: list[int]) -> None:
        self.values = np.asarray(values, dtype=np.int64)
        self.used = 0

    def sample(self, rng: np.random.Generator, size: Any) -> NDArray[np.int64]:
        k = math.prod(size) if isinstance(size, tuple) else int(size)
        out = self.values[self.used : self.used + k].reshape(size)
        self.used += k
        return out


class BlockSampler:
    """I.i.d. draws of ``inner`` handed out from one large pre-drawn block (same law;
    avoids the exact sampler's per-call overhead in Monte Carlo loops)."""

    integer: ClassVar[bool] = True

    def __init__(self, inner: DiscreteGaussianNoise, rng: np.random.Generator, total: int) -> None:
        self.inner = inner
        self.block = inner.sample(rng, total)
        self.used = 0

    @property
    def variance(self) -> float:
        return self.inner.variance

    def sample(self, rng: np.random.Generator, size: Any) -> NDArray[np.int64]:
        k = math.prod(size) if isinstance(size, tuple) else int(size)
        out = self.block[self.used : self.used + k].reshape(size)
        self.used += k
        if out.size != k:
            raise RuntimeError("block exhausted")
        return out


def monte_carlo_copy(mech: Any, draws: int) -> Any:
    """``mech`` drawing from block samplers with its own laws (one block per sampler)."""
    rng = np.random.default_rng(2024)
    n = mech.shape[0]
    if isinstance(mech, CorrelatedPerturbation):
        blocks = [BlockSampler(s, rng, draws * n) for s in mech.level_samplers]
        return mech.with_level_samplers(blocks)
    return mech.with_sampler(BlockSampler(mech.sampler, rng, draws * 2 * (2 << depth_of(n))))


# ---- structure -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_zero_noise_answers_every_range_exactly(name: str, n: int) -> None:
    x = np.random.default_rng(n).integers(-20, 50, n).astype(float)
    release = discrete(name, n).with_sampler(ZeroNoise()).release(x)
    lo, hi = np.triu_indices(n)
    prefix = np.concatenate(([0.0], np.cumsum(x)))
    np.testing.assert_array_equal(release.query(lo, hi), prefix[hi + 1] - prefix[lo])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_the_perturbed_vector_is_the_reference_integer_vector(name: str, n: int) -> None:
    # Noise z on x and z + f(x) − f(x') on a neighbour x' give bit-identical releases,
    # with f the independent reference: the release depends on the data only through
    # the noisy integer vector f(x) + z.
    rng = np.random.default_rng(100 + n)
    x = rng.integers(0, 30, n).astype(float)
    mech = discrete(name, n)
    f = np.asarray(REFERENCE[name](x), dtype=np.int64)
    z = rng.integers(-9, 10, f.size)
    for cell in range(n):
        for step in (-1.0, 1.0):
            x2 = x.copy()
            x2[cell] += step
            f2 = np.asarray(REFERENCE[name](x2), dtype=np.int64)
            a = mech.with_sampler(ScriptedNoise(z.tolist())).release(x)
            b = mech.with_sampler(ScriptedNoise((z + f - f2).tolist())).release(x2)
            got_a, got_b = (getattr(r, "node_values", r.values) for r in (a, b))
            assert got_a.tobytes() == got_b.tobytes()


def test_identity_two_dimensional() -> None:
    x = np.arange(12.0).reshape(3, 4)
    mech = IdentityMechanism((3, 4), epsilon=1.0, delta=1e-6, noise=DG, rng=1)
    np.testing.assert_array_equal(mech.with_sampler(ZeroNoise()).release(x).values, x)
    values = mech.release(x).values
    np.testing.assert_array_equal(values, np.round(values))
    assert mech.range_variance([0, 0], [2, 3]) == pytest.approx(12 * mech.sampler.variance)


# ---- the guarantee ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 8, 11, 16])
@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.3, 1e-9), (5.0, 1e-3)])
def test_rho_is_the_brute_force_worst_neighbour(
    name: str, n: int, eps: float, delta: float
) -> None:
    mech = discrete(name, n, eps, delta)
    sigma2 = coordinate_sigma2(mech)
    base = np.asarray(REFERENCE[name](np.zeros(n)))
    worst = Fraction(0)
    for cell in range(n):
        e = np.zeros(n)
        e[cell] = 1.0
        shift = np.asarray(REFERENCE[name](e)) - base
        assert set(np.abs(shift).tolist()) <= {0.0, 1.0}  # integer shifts
        rho = sum((Fraction(int(s) ** 2) / (2 * v) for s, v in zip(shift, sigma2, strict=True)))
        worst = max(worst, rho)
    privacy = mech.privacy
    assert privacy.noise == DG and privacy.calibration == "zcdp"
    assert Fraction(privacy.rho) >= worst  # never below the exact ρ
    assert privacy.rho == pytest.approx(float(worst), rel=1e-12)
    assert privacy.delta == pytest.approx(zcdp_delta(privacy.rho, eps), rel=1e-9)
    assert privacy.delta <= delta
    assert privacy.epsilon == eps
    # Not over-noised either: 1% less σ on every coordinate would exceed the budget.
    assert zcdp_delta(float(worst) / 0.99**2, eps) > delta


def test_correlated_levels_follow_the_profile() -> None:
    profile = [2.0, 1.0, 0.5, 0.3]
    mech = CorrelatedPerturbation(8, epsilon=1.0, delta=1e-6, noise=DG, level_variances=profile)
    root, *splits = mech.level_samplers
    assert float(root.sigma2) == pytest.approx(mech.sigma**2 * profile[0], rel=1e-7)
    for d, s in enumerate(splits):
        beta2 = profile[d + 1] - profile[d] / 4.0
        assert float(s.sigma2) == pytest.approx(4.0 * beta2 * mech.sigma**2, rel=1e-7)
    for d in range(4):  # node variances: exact discrete variances of the cascade
        assert mech.node_variance(d) == pytest.approx(mech.sigma**2 * profile[d], rel=1e-6)


# ---- exact variances -------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [5, pytest.param(8, marks=pytest.mark.slow)])
def test_variances_match_monte_carlo(name: str, n: int) -> None:
    mech = discrete(name, n)
    x = np.arange(n, dtype=float)
    lo, hi = np.triu_indices(n)
    prefix = np.concatenate(([0.0], np.cumsum(x)))
    truth = prefix[hi + 1] - prefix[lo]
    mc = monte_carlo_copy(mech, 3000)
    errors = np.stack([mc.release(x).query(lo, hi) - truth for _ in range(3000)])
    np.testing.assert_array_equal(mc.range_variance(lo, hi), mech.range_variance(lo, hi))
    assert_variances_match(errors, mech.range_variance(lo, hi))


@pytest.mark.parametrize(
    ("name", "n", "eps", "delta"),
    [("identity", 6, 8.0, 1e-3), ("correlated", 4, 12.0, 1e-2), ("tree", 4, 20.0, 1e-2)],
)
def test_small_sigma_uses_the_true_discrete_variance(
    name: str, n: int, eps: float, delta: float
) -> None:
    # σ ≈ 0.4–0.5: Var N_Z(0, σ²) is 10–45% below σ²; the exact model must use it.
    mech = discrete(name, n, eps, delta)
    samplers = getattr(mech, "level_samplers", ()) or (mech.sampler,)
    assert all(s.variance < 0.97 * float(s.sigma2) for s in samplers[:1])
    assert samplers[0].variance == discrete_gaussian_variance(float(samplers[0].sigma2))
    x = np.full(n, 3.0)
    lo, hi = np.triu_indices(n)
    mc = monte_carlo_copy(mech, 4000)
    errors = np.stack([mc.release(x).query(lo, hi) - 3.0 * (hi - lo + 1) for _ in range(4000)])
    exact = mech.range_variance(lo, hi)
    assert_variances_match(errors, exact)
    continuous = build_mechanism(name, n, epsilon=eps, delta=delta, rng=0)  # σ² in place of Var N_Z
    naive = continuous.range_variance(lo, hi) * (mech.sigma / continuous.sigma) ** 2
    assert abs(pooled_variance_z(errors, naive)) > Z_TOLERANCE


# ---- low-order bits --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["correlated", "identity", "tree", "wavelet"])
def test_outputs_stay_on_the_lattice_under_both_neighbours(name: str) -> None:
    # The event "a released value is off the lattice" (not an integer for identity and
    # tree, not a multiple of 2^-K for wavelet and correlated) has probability 0 under x
    # and under its neighbour x' = x + e_3. Hierarchical (real least-squares weights) is
    # covered by the bit-identity test above.
    n = 11
    x = np.random.default_rng(5).integers(0, 100, n).astype(float)
    x2 = x.copy()
    x2[3] += 1.0
    mech = discrete(name, n)
    grid = 0 if name in ("identity", "tree") else depth_of(n)
    for data in (x, x2):
        for _ in range(100):
            release = mech.release(data)
            scaled = np.ldexp(getattr(release, "node_values", release.values), grid)
            np.testing.assert_array_equal(scaled, np.round(scaled))


def low_bits_event(values: NDArray[np.float64]) -> NDArray[np.bool_]:
    """|output| < 1/2 and output not a multiple of 2^-53."""
    scaled = np.ldexp(values, 53)
    return (np.abs(values) < 0.5) & (scaled != np.round(scaled))


@pytest.mark.parametrize(("noise", "separates"), [("gaussian", True), (DG, False)])
def test_low_bits_event_separates_neighbours_only_for_continuous_noise(
    noise: str, separates: bool
) -> None:
    # One cell, x = 0 vs its neighbour x' = 1. Continuous noise: x' + z with
    # |x' + z| < 1/2 needs |z| > 1/2, whose float has no bits below 2^-53, so the event
    # is impossible under x' but has probability ~P(|z| < 1/2) under x (the leak of
    # docs/safe-noise.md). Discrete noise: integer outputs, impossible under both.
    # The identity mechanism treats its cells independently, so the 3000 cells of one
    # release are 3000 independent trials of the one-cell neighbours 0 and 1.
    mech = IdentityMechanism(3000, epsilon=1.0, delta=1e-6, noise=noise, rng=3)
    hits = [int(low_bits_event(mech.release(np.full(3000, v)).values).sum()) for v in (0.0, 1.0)]
    assert hits[1] == 0
    assert (hits[0] > 100) == separates and (hits[0] == 0) == (not separates)


# ---- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_fractional_data_are_refused(name: str) -> None:
    x = np.zeros(6)
    x[4] = 2.5
    with pytest.raises(ValueError, match=r"x must hold whole numbers .* index \(4,\) holds 2.5"):
        discrete(name, 6).release(x)


def test_unsupported_combinations_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="grid_bits must be >= 8"):
        EigenDesignMechanism(8, epsilon=1.0, delta=1e-6, noise=DG, grid_bits=7)
    with pytest.raises(ValueError, match="grid_bits must be <= 26"):
        EigenDesignMechanism(8, epsilon=1.0, delta=1e-6, noise=DG, grid_bits=27)
    with pytest.raises(TypeError, match="grid_bits"):
        EigenDesignMechanism(8, epsilon=1.0, delta=1e-6, noise=DG, grid_bits="20")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"noise=.discrete-gaussian. needs a 1-D shape"):
        CorrelatedPerturbation((4, 4), epsilon=1.0, delta=1e-6, noise=DG)
    with pytest.raises(ValueError, match="calibration must be None or 'zcdp'"):
        TreeMechanism(8, epsilon=1.0, delta=1e-6, calibration="analytic", noise=DG)
    with pytest.raises(ValueError, match="calibration='zcdp' is not a Gaussian calibration"):
        TreeMechanism(8, epsilon=1.0, delta=1e-6, calibration="zcdp")
    with pytest.raises(
        ValueError, match=r"noise must be one of \('gaussian', 'discrete-gaussian'\)"
    ):
        TreeMechanism(8, epsilon=1.0, delta=1e-6, noise="laplace")
    assert (
        TreeMechanism(8, epsilon=1.0, delta=1e-6, calibration="zcdp", noise=DG).calibration
        == "zcdp"
    )
    assert TreeMechanism(8, epsilon=1.0, delta=1e-6).calibration == "analytic"


def test_discrete_sampler_is_the_calibrated_one() -> None:
    mech: RangeMechanism = discrete("tree", 16)
    assert isinstance(mech.sampler, DiscreteGaussianNoise)
    assert mech.sigma == mech.sampler.sigma
    assert "noise=discrete-gaussian" in repr(mech)


def test_cli_discrete_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "h.npy", np.arange(10))
    out = tmp_path / "out.npy"
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6", "--seed", "3"]
    assert main([*argv, "--noise", DG, "--mechanism", "identity", "--output", str(out)]) == 0
    values = np.load(out)
    np.testing.assert_array_equal(values, np.round(values))
    assert not np.array_equal(values, np.arange(10))
    assert "rho=" in capsys.readouterr().err.replace("\n", "")
    np.save(tmp_path / "m.npy", np.ones((3, 4), dtype=np.int64))
    argv[1] = str(tmp_path / "m.npy")
    assert main([*argv, "--noise", DG, "--output", str(out)]) == 2
    assert "--noise discrete-gaussian needs a 1-D shape" in capsys.readouterr().err


# ---- EigenDesign: the strategy snapped to the grid 2^-g ------------------------------


@pytest.mark.parametrize(("n", "bits"), [(1, 8), (5, 8), (8, 20), (13, 12)])
def test_eigen_integer_strategy_and_exact_answers(n: int, bits: int) -> None:
    mech = EigenDesignMechanism(n, epsilon=1.0, delta=1e-6, noise=DG, grid_bits=bits, rng=0)
    m = mech._integer_strategy
    # M = round(A·2^g): within half a grid step of the real strategy.
    assert np.max(np.abs(m / 2.0**bits - mech.strategy)) <= 2.0 ** -(bits + 1)
    rng = np.random.default_rng(n)
    x = rng.integers(-(2**40), 2**40, n).astype(float)
    x[0] = float(2**53 - int(np.abs(x[1:]).sum()))  # total |x| exactly 2^53
    rows = [[int(v) for v in row] for row in m.tolist()]
    want = [sum(a * int(b) for a, b in zip(row, x, strict=True)) for row in rows]
    assert mech._exact_answers(x) == want  # exact, no int64 overflow
    zero = mech.with_sampler(ZeroNoise()).release(x).values
    np.testing.assert_allclose(zero, x, rtol=0, atol=1e-6 * 2**53)
    small = np.arange(n, dtype=float)
    np.testing.assert_allclose(mech.with_sampler(ZeroNoise()).release(small).values, small,
                               rtol=0, atol=1e-9)  # fmt: skip


@pytest.mark.parametrize(("n", "bits"), [(1, 8), (6, 10), (16, 20)])
def test_eigen_rho_is_the_brute_force_worst_neighbour(n: int, bits: int) -> None:
    mech = EigenDesignMechanism(n, epsilon=1.0, delta=1e-6, noise=DG, grid_bits=bits)
    sigma2 = mech.sampler.sigma2
    worst = max(
        sum(Fraction(int(v) ** 2) for v in mech._integer_strategy[:, i]) / (2 * sigma2)
        for i in range(n)
    )
    assert Fraction(mech.privacy.rho) >= worst
    assert mech.privacy.rho == pytest.approx(float(worst), rel=1e-12)
    assert mech.privacy.delta <= 1e-6
    assert zcdp_delta(float(worst) / 0.99**2, 1.0) > 1e-6  # not over-noised
    # σ is reported in strategy units: about the continuous σ scaled by the zCDP route.
    assert mech.sigma == pytest.approx(mech.sampler.sigma * 2.0**-bits)


def test_eigen_release_is_a_function_of_the_noisy_integers() -> None:
    n = 7
    mech = EigenDesignMechanism(n, epsilon=1.0, delta=1e-6, noise=DG, grid_bits=12)
    m = mech._integer_strategy
    x = np.random.default_rng(0).integers(0, 30, n).astype(float)
    z = np.random.default_rng(1).integers(-(10**5), 10**5, n)
    for cell in range(n):
        x2 = x.copy()
        x2[cell] -= 1.0
        shift = (m @ (x - x2).astype(np.int64)).tolist()
        a = mech.with_sampler(ScriptedNoise(z.tolist())).release(x).values
        b = mech.with_sampler(ScriptedNoise((z + shift).tolist())).release(x2).values
        assert a.tobytes() == b.tobytes()


def test_eigen_variances_match_monte_carlo() -> None:
    n = 8
    mech = EigenDesignMechanism(n, epsilon=1.0, delta=1e-6, noise=DG, grid_bits=8, rng=0)
    x = np.arange(n, dtype=float)
    lo, hi = np.triu_indices(n)
    prefix = np.concatenate(([0.0], np.cumsum(x)))
    truth = prefix[hi + 1] - prefix[lo]
    mc = mech.with_sampler(BlockSampler(mech.sampler, np.random.default_rng(9), 3000 * n))
    errors = np.stack([mc.release(x).query(lo, hi) - truth for _ in range(3000)])
    assert_variances_match(errors, mech.range_variance(lo, hi))
