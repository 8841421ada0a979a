"""BLT optimizer: loss against the dense oracle, targets, determinism, errors; shipped table."""

from __future__ import annotations

import numpy as np
import pytest

from dpcount.counting import BLT, FactorizationMechanism
from dpcount.counting.factorization.blt import _shipped, blt_losses, shipped_blt_parameters
from dpcount.counting.factorization.optimize import _pack, _unpack, blt_loss, optimize_blt
from dpcount.counting.factorization.sqrt_toeplitz import (
    sqrt_l2_norm_squared,
    sqrt_mean_variance_coefficient,
)


def sqrt_loss(T: int, objective: str) -> float:
    S = sqrt_l2_norm_squared(T)
    return S * (sqrt_mean_variance_coefficient(T) if objective == "mean" else S)


def dense_loss(theta: list[float], omega: list[float], T: int, objective: str) -> float:
    """(largest column norm of C)² × mean or max row norm² of B, from dense matrices."""
    m = BLT(T, buffer_decay=theta, output_scale=omega, epsilon=1.0, delta=1e-6)
    B, C = m.dense_factorization()
    d = FactorizationMechanism(B, C, epsilon=1.0, delta=1e-6, noise="gaussian")
    sens2 = float(np.max((d.R**2).sum(axis=0)))
    rows = d.noise_coefficients()
    return sens2 * float(rows.mean() if objective == "mean" else rows.max())


def test_parameterization_round_trip_and_validity() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(size=8) * 3
        theta, omega = _unpack(v)
        assert np.all((theta > 0) & (theta < 1)) and np.all(omega > 0)
        assert float(np.sum(omega / (1 + theta))) < 1
        np.testing.assert_allclose(_pack(theta, omega), v, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("objective", ["mean", "max"])
def test_loss_matches_dense_oracle(objective: str) -> None:
    theta, omega = [0.2, 0.9, 0.995], [0.3, 0.2, 0.1]
    for T in [1, 7, 300]:
        got = blt_loss(theta, omega, T, objective)
        assert got == pytest.approx(dense_loss(theta, omega, T, objective), rel=1e-9)


@pytest.mark.slow  # statistical; CI runs the slow set
def test_optimizer_reaches_the_published_blt_figure_and_beats_sqrt() -> None:
    """T = 16384, 4 buffers, mean loss: 15.544 (McMahan et al.; the issue's table)."""
    r = optimize_blt(16384, buffers=4, objective="mean")
    assert r.loss <= 15.544 * 1.001
    assert r.loss < sqrt_loss(16384, "mean")
    assert r.loss == pytest.approx(dense_free_loss(r), rel=1e-12)
    again = optimize_blt(16384, buffers=4, objective="mean")
    assert again.buffer_decay == r.buffer_decay and again.output_scale == r.output_scale


def dense_free_loss(r) -> float:  # type: ignore[no-untyped-def]
    return blt_loss(r.buffer_decay, r.output_scale, r.horizon, r.objective)


@pytest.mark.slow  # statistical; CI runs the slow set
def test_optimized_max_loss_at_1024_matches_sqrt_within_0_1_percent() -> None:
    r = optimize_blt(1024, buffers=6, objective="max")
    assert r.loss <= 10.710 * 1.001
    # and the optimum is a real BLT whose dense max loss agrees
    dense = dense_loss(r.buffer_decay, r.output_scale, 1024, "max")
    assert dense == pytest.approx(r.loss, rel=1e-9)


def test_bad_arguments_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="objective"):
        optimize_blt(100, objective="median")
    with pytest.raises(ValueError, match="buffers"):
        optimize_blt(100, buffers=0)
    with pytest.raises(ValueError, match="horizon"):
        optimize_blt(0)
    with pytest.raises(ValueError, match="starts must have 2 buffers"):
        optimize_blt(100, buffers=2, starts=[([0.5], [0.5])])
    with pytest.raises(ValueError, match="buffer_decay"):
        optimize_blt(100, buffers=1, starts=[([1.5], [0.5])])
    with pytest.raises(ValueError, match="max_iterations"):
        optimize_blt(100, max_iterations=0)


def test_non_convergence_is_an_error_naming_max_iterations() -> None:
    with pytest.raises(RuntimeError, match=r"did not converge within max_iterations=1"):
        optimize_blt(4096, buffers=4, objective="mean", max_iterations=1)


# -- the shipped table ----------------------------------------------------------------


def shipped_rows() -> list[tuple[str, str, int, dict[str, object]]]:
    table = _shipped()["objectives"]
    return [
        (objective, n, int(k), row)
        for objective, by_n in table.items()
        for n, rows in by_n.items()
        for k, row in rows.items()
    ]


def test_shipped_table_covers_powers_of_two_to_2_24() -> None:
    table = _shipped()["objectives"]
    assert set(table) == {"mean", "max"}
    for by_n in table.values():
        for rows in by_n.values():
            assert sorted(int(k) for k in rows) == list(range(25))


def test_shipped_losses_are_reproduced_by_the_closed_forms() -> None:
    for objective, _n, k, row in shipped_rows():
        losses = blt_losses(row["buffer_decay"], row["output_scale"], 2**k)
        assert losses.mean_loss == pytest.approx(row["mean_loss"], rel=1e-9), (objective, k)
        assert losses.max_loss == pytest.approx(row["max_loss"], rel=1e-9), (objective, k)


@pytest.mark.parametrize(
    ("T", "objective", "target"),
    [(16384, "mean", 15.544), (16384, "max", 17.265), (1024, "max", 10.710)],
)
def test_shipped_parameters_meet_the_issue_targets(T: int, objective: str, target: float) -> None:
    m = BLT.optimized(T, objective=objective, epsilon=1.0, delta=1e-6)
    loss = m.losses().mean_loss if objective == "mean" else m.losses().max_loss
    assert loss <= target * 1.001


def test_shipped_parameters_at_2_20_against_sqrt() -> None:
    T = 2**20
    mean = BLT.optimized(T, objective="mean", epsilon=1.0, delta=1e-6).losses().mean_loss
    assert mean <= 0.98 * sqrt_loss(T, "mean")
    # The issue's target is "no more than the square root's"; the shipped 8-buffer BLT
    # comes within 0.02% (30.0238 vs 30.0193) but not below: for the max objective at
    # this horizon the square root itself remains the better choice.
    worst = BLT.optimized(T, objective="max", epsilon=1.0, delta=1e-6).losses().max_loss
    assert sqrt_loss(T, "max") <= worst <= 1.0005 * sqrt_loss(T, "max")


def test_optimized_uses_the_next_power_of_two_and_validates() -> None:
    assert shipped_blt_parameters(1000, "mean") == shipped_blt_parameters(1024, "mean")
    assert shipped_blt_parameters(2**30, "max") == shipped_blt_parameters(2**24, "max")
    m = BLT.optimized(1000, objective="max", epsilon=1.0, delta=1e-6)
    assert m.horizon == 1000 and m.losses().max_loss > 0
    with pytest.raises(ValueError, match="objective"):
        BLT.optimized(100, objective="median", epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="buffers must be one of the shipped counts"):
        BLT.optimized(100, buffers=99, epsilon=1.0, delta=1e-6)


# -- the dense optimum ------------------------------------------------------------------


@pytest.mark.parametrize("T", [1, 2, 64])
def test_dense_optimum_is_a_causal_factorization_with_the_stated_loss(T: int) -> None:
    from dpcount.counting.factorization.optimize import optimize_dense

    r = optimize_dense(T)
    # the dense oracle accepts it (L·R = A, causal) and its loss is the stated one
    d = FactorizationMechanism(r.decoder, r.encoder, epsilon=1.0, delta=1e-6, noise="gaussian")
    sens2 = float(np.max((d.R**2).sum(axis=0)))
    assert sens2 == pytest.approx(1.0, rel=1e-12)
    assert sens2 * float(d.noise_coefficients().mean()) == pytest.approx(r.loss, rel=1e-9)
    assert np.allclose(np.triu(r.encoder, 1), 0)
    if T > 1:  # strictly better than the best BLT and the square root
        # the best BLT: the shipped optimize_blt optimum at this power of two (the lower
        # of its 6 and 8 buffers; the same loss as optimize_blt(T, buffers=4) to 1e-12,
        # without the ~1-2 s optimization)
        assert r.loss < blt_loss(*shipped_blt_parameters(T, "mean"), T, "mean")
        assert r.loss < sqrt_loss(T, "mean")


def test_dense_optimum_at_2_is_the_closed_form() -> None:
    """T = 2: X = [[1, r], [r, 1]], tr(AᵀA·X⁻¹)/2 = (3 − 2r)/(2(1 − r²)), minimal at
    r = (3 − √5)/2 with value (3 + √5)/4 = 1.309017 (checked numerically too)."""
    from dpcount.counting.factorization.optimize import optimize_dense

    assert optimize_dense(2, rtol=1e-12).loss == pytest.approx((3 + 5**0.5) / 4, rel=1e-7)


def test_dense_optimum_refuses_what_it_does_not_do() -> None:
    from dpcount.counting.factorization.optimize import optimize_dense

    with pytest.raises(ValueError, match="horizon"):
        optimize_dense(4096)
    with pytest.raises(ValueError, match="objective"):
        optimize_dense(16, objective="max")


def test_dense_multiplier_step_matches_the_dense_matrix_square_root() -> None:
    """The tridiagonal shortcut equals X(v) = V^{−1/2}(V^{1/2}AᵀAV^{1/2})^{1/2}V^{−1/2}
    computed densely (scipy.linalg.sqrtm), and the dual value equals 2·tr(M^{1/2}) − Σv."""
    from scipy.linalg import sqrtm

    from dpcount.counting.factorization.optimize import _dense_multiplier_step

    rng = np.random.default_rng(4)
    for T in [1, 2, 5, 40]:
        v = rng.uniform(0.2, 3.0, T)
        idx = np.arange(T)
        gram = (T - np.maximum.outer(idx, idx)).astype(float)
        s = np.sqrt(v)
        root = np.real(sqrtm(s[:, None] * gram * s[None, :]))
        X = root / s[:, None] / s[None, :]
        lam, _, d = _dense_multiplier_step(v)
        np.testing.assert_allclose(d, np.diag(X), rtol=1e-9)
        assert float(np.sum(1 / np.sqrt(lam))) == pytest.approx(np.trace(root), rel=1e-9)


@pytest.mark.parametrize("T", [2, 16, 200])
def test_dense_optimum_lower_bound_certifies_the_gap(T: int) -> None:
    from dpcount.counting.factorization.optimize import optimize_dense

    r = optimize_dense(T, rtol=1e-6)
    assert r.lower_bound <= r.loss <= r.lower_bound * (1 + 2e-6)
    # the bound holds for other factorizations too (sqrt, BLT)
    assert r.lower_bound < sqrt_loss(T, "mean")
    # and it is not vacuous: it lies above the mean loss of a slightly worse iterate
    coarse = optimize_dense(T, max_iterations=2)
    assert coarse.loss > r.lower_bound and coarse.lower_bound <= r.loss


def test_mean_loss_under_a_max_loss_limit() -> None:
    """The constraint binds (the unconstrained mean optimum's max loss is above it), the
    result meets it by the dense oracle, and its mean loss is between the unconstrained
    optimum and the square root's; a limit below the square root's max loss (which no
    Toeplitz factorization beats) is refused naming the parameter."""
    T, n = 128, 2
    limit = sqrt_loss(T, "max") * 1.01
    free = optimize_blt(T, buffers=n)
    assert free.max_loss > limit
    r = optimize_blt(T, buffers=n, max_loss_limit=limit)
    assert r.objective == "mean" and r.max_loss <= limit
    assert dense_loss(r.buffer_decay, r.output_scale, T, "max") <= limit * (1 + 1e-9)
    assert dense_loss(r.buffer_decay, r.output_scale, T, "mean") == pytest.approx(r.loss, rel=1e-9)
    assert free.mean_loss <= r.mean_loss < sqrt_loss(T, "mean")
    with pytest.raises(RuntimeError, match="max_loss_limit"):
        optimize_blt(T, buffers=n, max_loss_limit=sqrt_loss(T, "max") * 0.99)
    with pytest.raises(ValueError, match="max_loss_limit needs objective='mean'"):
        optimize_blt(T, buffers=n, objective="max", max_loss_limit=limit)
    with pytest.raises(ValueError, match="max_loss_limit must be > 0"):
        optimize_blt(T, buffers=n, max_loss_limit=-1.0)
