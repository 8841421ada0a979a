"""The horizon-free BLT with growing columns: factorization, certified column norms,
exact variances, structure, statistics, vector streams, checkpoints and the ratio it
is shipped for."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest

from dpcount.counting import HorizonFreeGrowingBLT
from dpcount.counting.checkpoint import load_stream, save_stream
from dpcount.counting.factorization import horizon_free_growing as hfg
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients, sqrt_l2_norm_squared
from dpcount.privacy import Budget, ZeroNoise
from dpcount.privacy.budget import Participation
from dpcount.privacy.calibration import gaussian_sigma

BUDGET = Budget(epsilon=1.0, delta=1e-6)
THETA, OMEGA, SCALE = hfg.HORIZON_FREE_GROWING_PARAMETERS
HEAD = hfg.HORIZON_FREE_GROWING_HEAD
#: the largest ratio to the plain square root told t over t = 1 … 2^24, reached at
#: t = 1 … 16 and 19 (docs/unbounded.md: every t ≤ 4096, 2^k ± 1, 3,000 random t)
SHIPPED_RATIO = 1.3294
#: from t = 2^6 on (1.31028 at t = 65; 1.2997 without the head factors, which raise
#: the later steps' variance a little)
LATER_RATIO = 1.3103
DATA = Path(__file__).resolve().parents[2] / "privacy" / "data"


def _columns(head: tuple[float, ...] = HEAD) -> hfg.GrowingColumns:
    return hfg.growing_columns(THETA, OMEGA, SCALE, head)


def test_block_starts() -> None:
    starts = hfg.block_starts()
    assert starts[:17] == (*range(1, 17), 19)
    assert starts[-1] == 1 << 26 and len(starts) == 16 + 88
    assert all(a < b for a, b in itertools.pairwise(starts))
    cols = _columns()
    assert [cols.block_of(t) for t in (1, 16, 18, 19, 1 << 26, 1 << 53)] == [
        0,
        15,
        15,
        16,
        103,
        103,
    ]


def test_dense_factorization_is_exact_and_variances_are_its_row_norms() -> None:
    T = 300
    mech = HorizonFreeGrowingBLT(T, budget=BUDGET, rng=0)
    B, C = mech.dense_factorization()
    A = np.tril(np.ones((T, T)))
    np.testing.assert_allclose(B @ C, A, atol=1e-9)
    # C rebuilt entry by entry from the definition: column s, block b(s) starting at
    # step s_b, ω_i(s) = β_b·ω_i·(K·s_b/(K·s_b + τ_i))^{1/2} (β_b = 1 beyond block 15,
    # which holds steps 16 … 18)
    cols = _columns()
    theta, tau = np.array(THETA), 1.0 / (1.0 - np.array(THETA))
    for s in (1, 2, 16, 17, 19, 40, 299):
        b = cols.block_of(s)
        s_b = cols.starts[b]
        w = (HEAD[b] if s <= 18 else 1.0) * np.array(OMEGA)
        w = w * np.sqrt(SCALE * s_b / (SCALE * s_b + tau))
        lags = np.arange(1, T - s + 1)
        want = [(w * theta ** (k - 1)).sum() for k in lags]
        np.testing.assert_allclose(C[s:, s - 1] * cols.normalizers[b], want, rtol=1e-12)
        assert C[s - 1, s - 1] == 1.0 / cols.normalizers[b]
        nu2 = 1 + sum(w[i] * w[j] / (1 - theta[i] * theta[j]) for i in range(12) for j in range(12))
        assert cols.normalizers[b] ** 2 == pytest.approx(nu2, rel=1e-12)
    var = mech.variances()
    np.testing.assert_allclose(var, mech.sampler.variance * (B * B).sum(axis=1), rtol=1e-10)
    # t = 1: N_1 = ν(1)·z_1, the dense row and the closed form
    assert mech.variance_at(1) == pytest.approx(mech.sampler.variance * B[0, 0] ** 2, rel=1e-12)
    assert mech.variance_at(1) == pytest.approx(
        mech.sampler.variance * cols.normalizers[0] ** 2, rel=1e-12
    )
    assert [mech.variance_at(t) for t in (1, 16, 17, 100, 300)] == [
        var[0],
        var[15],
        var[16],
        var[99],
        var[299],
    ]


def test_variance_at_agrees_with_the_table_across_restart_points() -> None:
    T = (1 << 14) + 40
    table = HorizonFreeGrowingBLT(T, budget=BUDGET, rng=0).noise_coefficients()
    fresh = HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=0)
    for t in (1 << 14, (1 << 14) + 1, T, 2**13 + 1, 4871, 4872):
        assert fresh._noise_coefficient_at(t) == table[t - 1], t
    it = fresh._iter_noise_coefficients((1 << 14) - 2)
    assert [next(it) for _ in range(5)] == table[(1 << 14) - 3 : (1 << 14) + 2].tolist()


def test_every_column_norm_is_at_most_one_in_exact_arithmetic() -> None:
    """Each block's 1 + Σ ω_iω_j/(1 − θ_iθ_j) in Fractions, against ν²: at most 1, and
    not loose (above 1 − 10⁻¹²); the cross terms matter (a norm from the diagonal terms
    alone would leave every column above 1)."""
    cols = _columns()
    th = [Fraction(v) for v in THETA]
    G = [[1 / (1 - a * b) for b in th] for a in th]
    n = len(th)
    for b in sorted({*range(0, 16, 2), *range(0, len(cols.starts), 6)}):  # all: slow test
        w = [Fraction(float(v)) for v in cols.scales[b]]
        diag = sum((w[i] * w[i] * G[i][i] for i in range(n)), Fraction(1))
        cross = sum(
            (2 * w[i] * w[j] * G[i][j] for i in range(n) for j in range(i + 1, n)), Fraction(0)
        )
        nu2 = Fraction(float(cols.normalizers[b])) ** 2
        assert (diag + cross) / nu2 <= 1
        assert (diag + cross) / nu2 > 1 - Fraction(1, 10**12)
        assert cross > 0


def test_mechanism_calibrates_to_the_unit_column() -> None:
    for horizon in (5, 1 << 53):
        mech = HorizonFreeGrowingBLT(horizon, budget=BUDGET, rng=0)
        assert mech.privacy is not None
        assert 1.0 < mech.privacy.l2_sensitivity <= 1.0 + 2e-12
        assert mech.noise_scale == pytest.approx(gaussian_sigma(1.0, 1.0, 1e-6), rel=1e-9)
    # the dense columns (a finite part of each infinite column) lie below 1
    _, C = HorizonFreeGrowingBLT(512, budget=BUDGET, rng=0).dense_factorization()
    assert np.sqrt((C * C).sum(axis=0)).max() < 1.0


def test_infinite_column_against_mpmath() -> None:
    """A late column (block 103) summed at 40 digits over its closed form, and its
    direct partial sum below the closed form."""
    cols = _columns()
    w = cols.scales[-1]
    with mpmath.workdps(40):
        th = [mpmath.mpf(v) for v in THETA]
        om = [mpmath.mpf(float(v)) for v in w]
        exact = 1 + mpmath.fsum(
            om[i] * om[j] / (1 - th[i] * th[j]) for i in range(len(th)) for j in range(len(th))
        )
        assert exact <= mpmath.mpf(float(cols.normalizers[-1])) ** 2
    k = np.arange(1, 1 << 16)
    c = np.exp(np.outer(k - 1, np.log(np.array(THETA)))) @ w
    assert 1 + math.fsum((c * c).tolist()) < float(exact)


def test_structure_without_noise_and_stream_matches_release() -> None:
    x = np.arange(3000) % 5
    mech = HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=0)
    np.testing.assert_allclose(
        mech.with_sampler(ZeroNoise()).release(x), np.cumsum(x), rtol=0, atol=1e-9
    )
    batch = HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=7).release(x)
    stream = HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=7).stream()
    stepped = [stream.update(v) for v in x[:5]] + list(stream.update_many(x[5:]))
    np.testing.assert_array_equal(stepped, batch)
    # vector steps: each coordinate its own stream, exact without noise
    xv = np.arange(600).reshape(300, 2) % 3
    np.testing.assert_allclose(
        mech.with_sampler(ZeroNoise()).release(xv), np.cumsum(xv, axis=0), rtol=0, atol=1e-9
    )


def test_variance_statistically() -> None:
    mech = HorizonFreeGrowingBLT(40, budget=BUDGET, rng=np.random.default_rng(3))
    reps = 4000  # independent coordinates of one vector release
    noise = mech.release(np.zeros((40, reps)))
    steps = [1, 8, 17, 40]
    var = np.array([mech.variance_at(t) for t in steps])
    emp = noise[[t - 1 for t in steps]].var(axis=1)
    se = var * math.sqrt(2.0 / reps)
    assert np.all(np.abs(emp - var) < 6 * se)
    assert np.all(np.abs(emp - 1.25 * var) > 6 * se)  # a variance 25% off would fail


def test_vector_stream_holds_2n_plus_three_values_per_coordinate() -> None:
    mech = HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=1)
    stream = mech.stream()
    for _ in range(20):
        stream.update(np.ones(1000))
    n = len(THETA)
    assert stream._process.live_count() == 2 * n + 3  # type: ignore[attr-defined]
    small = HorizonFreeGrowingBLT.memory_estimate(1 << 10, dim=1000)
    assert small == HorizonFreeGrowingBLT.memory_estimate(1 << 53, dim=1000)  # no horizon term
    assert small.stream < 8 * 1000 * (14 * n + 4) + (1 << 16)  # with the step's temporaries


@pytest.mark.parametrize("shape", [(45,), (45, 2)])
@pytest.mark.parametrize(
    "cut",
    [0, 17, pytest.param(7, marks=pytest.mark.slow), pytest.param(30, marks=pytest.mark.slow)],
)
def test_checkpoint_continues_bit_for_bit(tmp_path: Any, cut: int, shape: tuple[int, ...]) -> None:
    x = np.arange(math.prod(shape)).reshape(shape) % 3
    whole = HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=5).stream()
    want = [whole.update(v) for v in x]
    mech = HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=5)
    first = mech.stream()
    got = [first.update(v) for v in x[:cut]]
    save_stream(first, tmp_path / "g.ckpt")
    restored = load_stream(tmp_path / "g.ckpt", expect=mech)
    got += [restored.update(v) for v in x[cut:]]
    np.testing.assert_array_equal(got, want)
    # scalar steps across the computed chunks: the running sum carries over
    if len(shape) == 1:
        again = HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=5).stream()
        mixed = [again.update(v) for v in x[:3]] + list(again.update_many(x[3:]))
        np.testing.assert_array_equal(mixed, want)


def test_refusals() -> None:
    with pytest.raises(ValueError, match="noise='laplace' is not available"):
        HorizonFreeGrowingBLT(10, budget=BUDGET.replace(noise="laplace"))
    with pytest.raises(ValueError, match="participation must be None"):
        HorizonFreeGrowingBLT(10, budget=BUDGET.replace(participation=Participation(2, 4)))
    with pytest.raises(ValueError, match="give buffer_decay, output_scale and scale"):
        HorizonFreeGrowingBLT(10, buffer_decay=[0.5], output_scale=[0.1], budget=BUDGET)
    with pytest.raises(ValueError, match="scale"):
        HorizonFreeGrowingBLT(10, buffer_decay=[0.5], output_scale=[0.1], scale=0.0, budget=BUDGET)
    with pytest.raises(ValueError, match="buffer_decay must lie in"):
        hfg.growing_columns([1.0], [0.1], 1.0)
    with pytest.raises(ValueError, match="horizon"):
        HorizonFreeGrowingBLT(1 << 53, budget=BUDGET).noise_coefficients()


def _ratios(steps: list[int], head: Any = None) -> np.ndarray[Any, np.dtype[np.float64]]:
    """sens²·V(t) / (Σ_{k<t} f(k)²)²: the variance at t against the plain square root
    told the horizon t (``head``: the head factors, None the shipped)."""
    mech = HorizonFreeGrowingBLT(1 << 53, head_factors=head, budget=BUDGET, rng=0)
    assert mech.privacy is not None
    sens2 = mech.privacy.l2_sensitivity**2
    unit = mech.sampler.variance
    F = np.array([sqrt_l2_norm_squared(t) for t in steps])
    V = np.array([mech.variance_at(t) / unit for t in steps])
    return np.asarray(sens2 * V / F**2)


def _dense_ratios(T: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The same from the dense factorization's rows and the square root's coefficients
    summed directly, t = 1 … T (the sensitivity is 1 by construction)."""
    B, _ = HorizonFreeGrowingBLT(T, budget=BUDGET, rng=0).dense_factorization()
    F = np.cumsum(sqrt_coefficients(T) ** 2)
    return np.asarray((B * B).sum(axis=1) / F**2)


def test_ratio_to_the_square_root_told_t() -> None:
    """Every t ≤ 1024 from the dense rows, t = 1 included, and a few steps beyond by the
    library's variance: at most the shipped figure everywhere, equal to it (within 2·
    10⁻⁴) at every t ≤ 16 where the head factors equalize it, and above 1.25 (a variance
    4% low would fail the second at t = 256). Without the head factors t = 1 is ν(1)²
    = 1.5225, above the issue's 1.5 (this test fails with them all 1)."""
    r = _dense_ratios(1024)
    assert r.max() <= SHIPPED_RATIO and r.min() > 1.25, (r.max(), r.min())
    assert np.all(r[:16] > SHIPPED_RATIO - 2e-4), r[:16]
    assert r[64:].max() <= LATER_RATIO, r[64:].max()
    far = _ratios([4096, 1 << 16, 1 << 20])
    assert np.all(far <= LATER_RATIO) and np.all(far > 1.25), far
    assert _ratios([1, 2], head=()) == pytest.approx([1.5225, 1.3732], abs=1e-4)


@pytest.mark.slow
def test_ratio_to_the_square_root_told_t_up_to_2_24() -> None:
    steps = sorted({round(2 ** (e / 16)) for e in range(0, 16 * 24 + 1)})
    r = _ratios(steps)
    assert r.max() <= SHIPPED_RATIO and r.max() > SHIPPED_RATIO - 2e-4, r.max()
    assert r[steps.index(64) :].max() <= LATER_RATIO


@pytest.mark.slow
def test_ratio_at_every_power_of_two_and_its_neighbours_to_2_24() -> None:
    steps = sorted({v for k in range(1, 25) for v in ((1 << k) - 1, 1 << k, (1 << k) + 1)})
    r = _ratios(steps)
    assert r.max() <= SHIPPED_RATIO, r.max()


def test_head_factors_shrink_the_first_columns_and_keep_them_unit() -> None:
    """Step s ≤ 16 has β_s times the output scales it had without head factors, and ν
    from the same closed form; blocks from step 17 are unchanged."""
    with_head, without = _columns(), _columns(())
    for b in range(16):
        np.testing.assert_array_equal(with_head.scales[b], without.scales[b] * HEAD[b])
        assert with_head.normalizers[b] < without.normalizers[b]
    np.testing.assert_array_equal(with_head.scales[16:], without.scales[16:])
    np.testing.assert_array_equal(with_head.normalizers[16:], without.normalizers[16:])
    assert len(HEAD) == 16 and all(0.79 < b < 0.99 for b in HEAD)
    part = hfg.growing_columns(THETA, OMEGA, SCALE, [0.5])  # one factor: step 1 only
    np.testing.assert_array_equal(part.scales[0], without.scales[0] * 0.5)
    np.testing.assert_array_equal(part.scales[1:], without.scales[1:])


def test_head_factors_defaults_config_and_refusals() -> None:
    shipped = HorizonFreeGrowingBLT(10, budget=BUDGET)
    assert shipped.head_factors == HEAD
    assert shipped.config()["kwargs"]["head_factors"] == list(HEAD)
    rebuilt = HorizonFreeGrowingBLT(**shipped.config()["kwargs"])
    assert rebuilt.variance_at(1) == shipped.variance_at(1)
    # parameters given without head factors: none (as before there were head factors)
    custom = HorizonFreeGrowingBLT(
        10, buffer_decay=THETA, output_scale=OMEGA, scale=SCALE, budget=BUDGET
    )
    assert custom.head_factors == () and custom.variance_at(1) > shipped.variance_at(1)
    assert HorizonFreeGrowingBLT(10, head_factors=(), budget=BUDGET).head_factors == ()
    with pytest.raises(ValueError, match=r"head_factors\[0\] must be"):
        HorizonFreeGrowingBLT(10, head_factors=[1.5], budget=BUDGET)
    with pytest.raises(ValueError, match=r"head_factors\[1\] must be"):
        HorizonFreeGrowingBLT(10, head_factors=[0.9, 0.0], budget=BUDGET)
    with pytest.raises(ValueError, match="at most 16 factors"):
        HorizonFreeGrowingBLT(10, head_factors=[0.9] * 17, budget=BUDGET)
    with pytest.raises(TypeError, match="head_factors must be a sequence"):
        HorizonFreeGrowingBLT(10, head_factors=0.9, budget=BUDGET)
    with pytest.raises(TypeError, match="head_factors\\[0\\] must be a real"):
        HorizonFreeGrowingBLT(10, head_factors=["0.9"], budget=BUDGET)


def test_a_checkpoint_saved_before_head_factors_resumes_bit_for_bit() -> None:
    """A stream saved (step 10) by the code before head factors, whose config has none:
    rebuilt with every β_s = 1, it releases steps 11 … 20 as the uninterrupted stream
    did (recorded in the file); the shipped mechanism would not."""
    restored = load_stream(DATA / "growing_blt_dev.ckpt")
    extra: Any = restored.extra
    assert restored.mechanism.head_factors == ()  # type: ignore[attr-defined]
    assert [float(restored.update(x)) for x in extra["inputs"]] == extra["releases"]
    with pytest.raises(ValueError, match="head_factors"):
        load_stream(
            DATA / "growing_blt_dev.ckpt", expect=HorizonFreeGrowingBLT(1 << 53, budget=BUDGET)
        )


@pytest.mark.slow
def test_every_column_norm_in_exact_arithmetic_all_blocks() -> None:
    cols = _columns()
    th = [Fraction(v) for v in THETA]
    G = [[1 / (1 - a * b) for b in th] for a in th]
    n = len(th)
    for b in range(len(cols.starts)):
        w = [Fraction(float(v)) for v in cols.scales[b]]
        total = Fraction(1) + sum(
            (w[i] * w[j] * G[i][j] for i in range(n) for j in range(n)), Fraction(0)
        )
        assert total <= Fraction(float(cols.normalizers[b])) ** 2, b


@pytest.mark.slow
def test_column_norms_against_a_long_direct_sum_with_its_tail() -> None:
    """Columns of the first, a middle and the last block: Σ_{k<2^24} C[s + k, s]² by
    direct summation, plus the tail beyond bounded by c_n²/(1 − θ_max²) (every term of
    c_k = Σ_i ω_i(s) θ_i^{k−1}/ν(s) is positive and decays at least as fast as θ_max):
    the closed form (the norm the calibration relies on, ≤ 1) lies between them."""
    n = 1 << 24
    cols = _columns()
    theta = np.array(THETA)
    for b in (0, 50, len(cols.starts) - 1):
        w, nu = cols.scales[b], float(cols.normalizers[b])
        parts = [1.0 / nu**2]
        for start in range(1, n, 1 << 20):
            k = np.arange(start, min(n, start + (1 << 20)), dtype=np.float64)
            c = np.exp(np.outer(k - 1, np.log(theta))) @ w / nu
            parts.append(math.fsum((c * c).tolist()))
        total = math.fsum(parts)
        c_n = float(np.sum(w * theta ** (n - 1))) / nu
        tail = c_n**2 / (1 - theta.max() ** 2)
        with mpmath.workdps(40):
            th = [mpmath.mpf(v) for v in THETA]
            om = [mpmath.mpf(float(v)) for v in w]
            closed = (
                1
                + mpmath.fsum(
                    om[i] * om[j] / (1 - th[i] * th[j])
                    for i in range(len(th))
                    for j in range(len(th))
                )
            ) / mpmath.mpf(nu) ** 2
        assert total < closed <= 1 and closed < total * (1 + 1e-9) + tail, b
