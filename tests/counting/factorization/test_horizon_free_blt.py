"""The horizon-free BLT: factorization, certified infinite norm, exact variances,
structure, statistics, vector streams, checkpoints and the ratio it is shipped for."""

from __future__ import annotations

import itertools
import math
from typing import Any

import mpmath
import numpy as np
import pytest

from dpcount.counting import HorizonFreeBLT, HorizonFreeGrowingBLT, UnboundedCounter
from dpcount.counting.factorization import horizon_free_blt as hfb
from dpcount.counting.factorization.blt import blt_losses, encoder_coefficients
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients
from dpcount.privacy import Budget, ZeroNoise
from dpcount.privacy.budget import Participation
from dpcount.privacy.calibration import gaussian_sigma

BUDGET = Budget(epsilon=1.0, delta=1e-6)
THETA, OMEGA = hfb.HORIZON_FREE_BLT_PARAMETERS
#: the largest ratio to the plain square root told t over t = 2^4 … 2^24 (docs/unbounded.md)
SHIPPED_RATIO = 1.5603


def _mpmath_norm_squared() -> Any:
    """1 + Σ_{i,j} ω_iω_j/(1 − θ_iθ_j) at 60 digits, independently of the Fractions."""
    with mpmath.workdps(60):
        th = [mpmath.mpf(v) for v in THETA]
        om = [mpmath.mpf(v) for v in OMEGA]
        return 1 + mpmath.fsum(
            om[i] * om[j] / (1 - th[i] * th[j]) for i in range(len(th)) for j in range(len(th))
        )


def test_dense_factorization_is_exact_and_variances_are_its_row_norms() -> None:
    T = 256
    mech = HorizonFreeBLT(T, budget=BUDGET, rng=0)
    B, C = mech.dense_factorization()
    np.testing.assert_allclose(B @ C, np.tril(np.ones((T, T))), atol=1e-9)
    # B = A·C⁻¹ by a triangular solve, independent of the BLT inverse's roots
    direct = np.linalg.solve(C.T, np.tril(np.ones((T, T))).T).T
    np.testing.assert_allclose(B, direct, atol=1e-9)
    var = mech.variances()
    np.testing.assert_allclose(
        var, mech.sampler.variance * (direct * direct).sum(axis=1), rtol=1e-9
    )
    assert [mech.variance_at(t) for t in (1, 100, 256)] == [var[0], var[99], var[255]]


def test_certified_sensitivity_bounds_the_infinite_column() -> None:
    bound = hfb.infinite_sensitivity_squared(THETA, OMEGA)
    exact = _mpmath_norm_squared()
    # above the 60-digit value, by at most one rounding
    assert mpmath.mpf(bound) >= exact and (mpmath.mpf(bound) - exact) / exact < 1e-15
    # above the direct sum of a finite column (every partial sum is below the limit)
    c = encoder_coefficients(np.array(THETA), np.array(OMEGA), 1 << 14)
    assert math.fsum((c * c).tolist()) < bound
    # the mechanism calibrates to it, whatever its horizon
    for horizon in (5, 1 << 53):
        mech = HorizonFreeBLT(horizon, budget=BUDGET, rng=0)
        assert mech.privacy is not None
        assert mech.privacy.l2_sensitivity == pytest.approx(math.sqrt(bound), rel=2e-12)
        assert mech.privacy.l2_sensitivity >= math.sqrt(bound)
        assert mech.noise_scale == pytest.approx(
            gaussian_sigma(math.sqrt(bound), 1.0, 1e-6), rel=1e-9
        )
    # a wrong closed form (the cross terms counted once) falls below the exact value
    th = [mpmath.mpf(v) for v in THETA]
    once = 1 + mpmath.fsum(
        OMEGA[i] * OMEGA[j] / (1 - th[i] * th[j]) for i in range(len(th)) for j in range(i, len(th))
    )
    assert once < exact


def test_infinite_l1_norm_is_c_of_one() -> None:
    with mpmath.workdps(60):
        want = 1 + mpmath.fsum(
            mpmath.mpf(w) / (1 - mpmath.mpf(t)) for t, w in zip(THETA, OMEGA, strict=True)
        )
        got = hfb.infinite_l1_norm(THETA, OMEGA)
        assert mpmath.mpf(got) >= want and (mpmath.mpf(got) - want) / want < 1e-15


def test_structure_without_noise_and_stream_matches_release() -> None:
    x = np.arange(5000) % 5
    mech = HorizonFreeBLT(1 << 53, budget=BUDGET, rng=0)
    assert np.array_equal(mech.with_sampler(ZeroNoise()).release(x), np.cumsum(x))
    batch = HorizonFreeBLT(1 << 53, budget=BUDGET, rng=7).release(x)
    stream = HorizonFreeBLT(1 << 53, budget=BUDGET, rng=7).stream()
    stepped = [stream.update(v) for v in x[:5]] + list(stream.update_many(x[5:]))
    np.testing.assert_allclose(stepped, batch, rtol=1e-9, atol=1e-9)


def test_variances_do_not_depend_on_the_horizon() -> None:
    short = HorizonFreeBLT(100, budget=BUDGET, rng=0)
    huge = HorizonFreeBLT(1 << 53, budget=BUDGET, rng=0)
    assert short.noise_scale == huge.noise_scale
    assert [huge.variance_at(t) for t in (1, 50, 100)] == [
        short.variance_at(t) for t in (1, 50, 100)
    ]
    with pytest.raises(ValueError, match="horizon"):
        huge.noise_coefficients()  # 2^53 values: refused, not allocated


def test_variance_statistically() -> None:
    mech = HorizonFreeBLT(32, budget=BUDGET, rng=np.random.default_rng(3))
    reps = 4000  # independent coordinates of one vector release
    noise = mech.release(np.zeros((32, reps)))
    steps = [1, 8, 32]
    var = np.array([mech.variance_at(t) for t in steps])
    emp = noise[[t - 1 for t in steps]].var(axis=1)
    se = var * math.sqrt(2.0 / reps)
    assert np.all(np.abs(emp - var) < 6 * se)
    assert np.all(np.abs(emp - 1.25 * var) > 6 * se)  # a variance 25% off would fail


def test_vector_stream_holds_n_plus_one_values_per_coordinate() -> None:
    mech = HorizonFreeBLT(1 << 53, budget=BUDGET, rng=1)
    stream = mech.stream()
    for _ in range(64):
        stream.update(np.ones(1000))
    n = len(THETA)
    assert stream._process.live_count() == n + 1  # type: ignore[attr-defined]
    small = HorizonFreeBLT.memory_estimate(1 << 10, dim=1000)
    assert small == HorizonFreeBLT.memory_estimate(1 << 53, dim=1000)  # no horizon term
    assert small.stream < 8 * 1000 * (n + 4) + (1 << 16)


def test_unbounded_inner_checkpoint_continues_bit_for_bit(tmp_path: Any) -> None:
    from dpcount.counting.unbounded import HORIZON_FREE_BLT, load_unbounded, save_unbounded

    x = np.arange(80).reshape(40, 2) % 3
    whole = UnboundedCounter(inner=HORIZON_FREE_BLT, rng=7, budget=BUDGET).stream()
    want = [whole.update(v) for v in x]
    counter = UnboundedCounter(inner=HORIZON_FREE_BLT, rng=7, budget=BUDGET)
    first = counter.stream()
    got = [first.update(v) for v in x[:9]]
    save_unbounded(first, tmp_path / "u.ckpt")
    restored = load_unbounded(tmp_path / "u.ckpt", expect=counter)
    got += [restored.update(v) for v in x[9:]]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert "BLT" in counter.relation and "honaker" in counter.relation


@pytest.mark.parametrize("cut", [0, 5, 7, 8, 21])
def test_unbounded_inner_switches_to_doubling_blocks(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, cut: int
) -> None:
    """With block 0 shortened to steps 1 … 7 (s = 3): the exact structure across the
    switch, the variance as block 0's total plus the Honaker blocks', and checkpoints
    on either side continue bit for bit."""
    from dpcount.counting import Honaker
    from dpcount.counting import unbounded as ub

    monkeypatch.setattr(ub, "HORIZON_FREE_BLT_SPAN_LOG2", 3)
    counter = UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET, rng=4)
    first = counter.block_mechanism(0)
    assert isinstance(first, HorizonFreeGrowingBLT) and first.horizon == 7
    assert isinstance(counter.block_mechanism(3), Honaker)
    assert counter.block_mechanism(3).budget.noise == "gaussian"  # not Honaker's default
    with pytest.raises(ValueError, match="i must be 0 or 3"):
        counter.block_mechanism(1)
    x = np.arange(40) % 3
    assert np.array_equal(counter.with_sampler(ZeroNoise()).release(x), np.cumsum(x))
    v0 = first.max_variance()
    assert v0 == pytest.approx(first.variance_at(7), rel=1e-12)
    assert counter.variance_at(7) == first.variance_at(7)
    assert counter.variance_at(8) == v0 + counter.block_mechanism(3).variance_at(1)
    assert counter.variance_at(21) == (
        v0 + counter.block_mechanism(3).variance_at(8) + counter.block_mechanism(4).variance_at(6)
    )
    assert list(itertools.islice(counter.iter_variances(6), 4)) == [
        counter.variance_at(t) for t in range(6, 10)
    ]
    whole = UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET, rng=4).stream()
    want = [whole.update(v) for v in x[:cut]] + list(whole.update_many(x[cut:]))  # same schedule
    resumed = UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET, rng=4)
    stream = resumed.stream()
    got = [stream.update(v) for v in x[:cut]]
    ub.save_unbounded(stream, tmp_path / "u.ckpt")
    restored = ub.load_unbounded(tmp_path / "u.ckpt", expect=resumed)
    got += list(restored.update_many(x[cut:]))
    np.testing.assert_array_equal(got, want)


def test_refusals() -> None:
    with pytest.raises(ValueError, match="noise='laplace' is not available for HorizonFreeBLT"):
        HorizonFreeBLT(10, budget=BUDGET.replace(noise="laplace"))
    with pytest.raises(ValueError, match="participation must be None"):
        HorizonFreeBLT(10, budget=BUDGET.replace(participation=Participation(2, 4)))
    with pytest.raises(ValueError, match="give both buffer_decay and output_scale"):
        HorizonFreeBLT(10, buffer_decay=[0.5], budget=BUDGET)
    with pytest.raises(ValueError, match="buffer_decay must lie in"):
        hfb.infinite_sensitivity_squared([1.0], [0.1])


def _ratios(steps: list[int]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """‖c‖²·V(t) / (Σ_{k<t} f(k)²)²: the variance at t against the plain square root
    told the horizon t, from the square root's coefficients directly; V(t) by the
    closed form (checked against ``variance_at`` at the first step)."""
    mech = HorizonFreeBLT(1 << 53, budget=BUDGET, rng=0)
    f = sqrt_coefficients(max(steps))
    F = np.cumsum(f * f)
    norm2 = hfb.infinite_sensitivity_squared(THETA, OMEGA)
    V = np.array([blt_losses(THETA, OMEGA, t, mech.inverse).max_variance for t in steps])
    assert V[0] == pytest.approx(mech.variance_at(steps[0]) / mech.sampler.variance, rel=1e-9)
    return np.asarray(norm2 * V / F[np.array(steps) - 1] ** 2)


def test_ratio_to_the_square_root_told_t() -> None:
    r = _ratios([16, 64, 256, 1024, 4096])
    assert np.all(r <= SHIPPED_RATIO) and np.all(r > 1.4), r


@pytest.mark.slow
def test_certified_sensitivity_above_a_long_direct_sum_with_its_tail() -> None:
    """Σ_{k<2^24} c_k² by direct summation plus the tail beyond, bounded above by
    (Σ_i ω_i θ_i^{n−1})²/(1 − θ_max²) (c_k ≤ c_n θ_max^{k−n} for k ≥ n): the
    certified value lies between the partial sum and the partial sum plus that tail."""
    n = 1 << 24
    theta, omega = np.array(THETA), np.array(OMEGA)
    total = 0.0
    parts = []
    for start in range(0, n, 1 << 20):
        k = np.arange(start, start + (1 << 20), dtype=np.float64)
        c = np.exp(np.outer(np.maximum(k - 1, 0), np.log(theta))) @ omega
        c[k == 0] = 1.0
        parts.append(math.fsum((c * c).tolist()))
    total = math.fsum(parts)
    c_n = float(np.sum(omega * theta ** (n - 1)))
    tail = c_n**2 / (1 - theta.max() ** 2)
    bound = hfb.infinite_sensitivity_squared(THETA, OMEGA)
    assert total < bound < total * (1 + 1e-9) + tail


@pytest.mark.slow
def test_ratio_to_the_square_root_told_t_up_to_2_24() -> None:
    steps = sorted({round(2 ** (e / 4)) for e in range(16, 97)})
    r = _ratios(steps)
    assert r.max() <= SHIPPED_RATIO and r.max() > SHIPPED_RATIO - 1e-3, r.max()


def test_default_beats_the_doubling_counters_from_step_4() -> None:
    """The default (block 0: the horizon-free BLT with growing columns) against the
    doubling counters with Honaker and the square root inside (every t in 4 … 2^14
    against five inner mechanisms: docs/unbounded.md)."""
    budget = BUDGET.replace(noise="gaussian")
    free = UnboundedCounter(inner="horizon-free-blt", budget=budget)
    doubling = [UnboundedCounter(inner=name, budget=budget) for name in ("honaker", "sqrt")]
    for t in (4, 7, 8, 9, 16, 100, 1024, 4097, 2**16):
        assert free.variance_at(t) < min(d.variance_at(t) for d in doubling), t
    # a fresh mechanism for a short block wins early (Honaker's doubling at t = 3)
    assert free.variance_at(3) > doubling[0].variance_at(3)
