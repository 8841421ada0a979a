"""The dense max-loss optimum (dpcount.counting.factorization.optimize_max) and its certificate."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpcount.analysis.certificates import (
    certified_lower_bound,
    certify,
    counting_nuclear_norm,
    dense_optimum_losses,
    normalized_sqrt_losses,
)
from dpcount.counting import FactorizationMechanism
from dpcount.counting.checkpoint import load_stream, save_stream
from dpcount.counting.factorization.optimize_max import (
    dense_max_factors,
    interpolate_weights,
    max_loss_lower_bound,
    optimize_dense_max,
    shipped_beyond_max_optima,
    shipped_beyond_max_weights,
    shipped_interpolated_max_bounds,
    shipped_max_optima,
    shipped_max_weights,
)
from dpcount.counting.registry import build_mechanism, class_noise
from dpcount.privacy import Budget, Participation
from dpcount.privacy.calibration import gaussian_sigma


def counting(T: int) -> np.ndarray:
    return np.tril(np.ones((T, T)))


def losses(B: np.ndarray, C: np.ndarray) -> tuple[float, float]:
    """(mean, max) loss from the matrices: largest column norm² of C times the mean /
    largest row norm² of B."""
    sens2 = float(np.max(np.sum(C * C, axis=0)))
    rows = np.sum(B * B, axis=1)
    return sens2 * float(rows.mean()), sens2 * float(rows.max())


def svd_bound(u: np.ndarray, p: np.ndarray) -> float:
    """‖diag(√u)·A·diag(√p)‖_*² by a dense SVD, u and p normalized (no tridiagonal)."""
    u, p = u / u.sum(), p / p.sum()
    W = np.sqrt(u)[:, None] * counting(len(u)) * np.sqrt(p)[None, :]
    return float(np.linalg.svd(W, compute_uv=False).sum()) ** 2


def test_lower_bound_equals_a_dense_svd_and_is_below_every_factorization() -> None:
    """max_loss_lower_bound (tridiagonal eigenvalues) against the dense SVD of
    U^{1/2} A P^{1/2}, at random and at optimized weights; weak duality against the
    max loss of several factorizations (identity, square root, dense mean optimum)."""
    rng = np.random.default_rng(7)
    T = 24
    r = optimize_dense_max(T)
    for u in (rng.uniform(0.1, 1.0, T), np.ones(T), r.weights):
        bound = max_loss_lower_bound(u)
        assert bound == pytest.approx(svd_bound(u, u[::-1]), rel=2e-9)  # margin 1e-9
        assert bound <= svd_bound(u, u[::-1])  # rounded down by its margin
        assert bound <= r.loss
    A = counting(T)
    f = np.array([math.comb(2 * k, k) / 4**k for k in range(T)])
    sqrt = np.array([[f[i - j] if i >= j else 0.0 for j in range(T)] for i in range(T)])
    dense = dense_optimum_losses(T)
    assert dense is not None
    for mx in (losses(A, np.eye(T))[1], losses(sqrt, sqrt)[1], dense[1]):
        assert r.lower_bound <= mx
    # the normalization of the weights matters: unnormalized (u = p = 1) the same
    # expression exceeds the optimum, so a bound that forgot it would fail above
    assert float(np.linalg.svd(A, compute_uv=False).sum()) ** 2 > r.loss


def test_the_optimum_is_certified_and_causal() -> None:
    """optimize_dense_max: B·C = A, both lower-triangular, the loss recomputed from the
    matrices, the gap ≤ 10⁻⁴, and the max optimum below every other factorization's
    max loss at T = 64 (dense mean optimum, column-normalized square root)."""
    T = 64
    r = optimize_dense_max(T)
    A = counting(T)
    np.testing.assert_allclose(r.decoder @ r.encoder, A, atol=1e-10)
    assert np.all(np.triu(r.decoder, 1) == 0) and np.all(np.triu(r.encoder, 1) == 0)
    mean, mx = losses(r.decoder, r.encoder)
    assert (r.mean_loss, r.loss) == (pytest.approx(mean, rel=1e-12), pytest.approx(mx, rel=1e-12))
    assert 0 <= r.gap <= 1e-4
    assert r.lower_bound == pytest.approx(svd_bound(r.weights, r.weights[::-1]), rel=1e-9)
    dense = dense_optimum_losses(T)
    assert dense is not None
    assert r.loss < dense[1] and r.loss < normalized_sqrt_losses(T)[1]
    assert r.mean_loss >= dense[0] * (1 - 1e-6)  # the mean optimum is the mean optimum


@pytest.mark.slow
def test_sdp_solver_agrees_with_the_certificate() -> None:
    """An independent derivation: γ₂(A)² as the generic SDP
    min t s.t. [[X₁, A], [Aᵀ, X₂]] ⪰ 0, diag X₁ ≤ t, diag X₂ ≤ t (γ₂(A) = min t,
    Lee–Shraibman–Špalek 2008), solved by cvxpy, lies in [lower bound, loss]."""
    cp = pytest.importorskip("cvxpy")
    T = 12
    r = optimize_dense_max(T, rtol=1e-9)
    A = counting(T)
    Z = cp.Variable((2 * T, 2 * T), symmetric=True)
    t = cp.Variable()
    cons = [Z >> 0, Z[:T, T:] == A, cp.diag(Z) <= t]
    cp.Problem(cp.Minimize(t), cons).solve(solver="CLARABEL")
    sdp = float(t.value) ** 2
    assert sdp == pytest.approx(r.loss, rel=1e-6)
    assert r.lower_bound <= sdp * (1 + 1e-6) and sdp <= r.loss * (1 + 1e-6)
    assert sdp > optimize_dense_max(T, max_iterations=1).lower_bound * 1.001  # not trivial


def test_shipped_weights_rebuild_the_shipped_losses() -> None:
    """The shipped table's figures are those of the factorization rebuilt from the
    shipped weights, and its lower bound that of the weights (T = 2^0..2^7 here; the
    slow test regenerates them)."""
    table = shipped_max_optima()
    assert sorted(table) == list(range(12))
    for k in range(8):
        T = 1 << k
        u = shipped_max_weights(T)
        assert u is not None and len(u) == T and u.sum() == pytest.approx(1.0)
        B, C = dense_max_factors(T)
        mean, mx = losses(B, C)
        row = table[k]
        assert mx == pytest.approx(row["max_loss"], rel=1e-9)
        assert mean == pytest.approx(row["mean_loss"], rel=1e-9)
        assert row["max_lower_bound"] == pytest.approx(max_loss_lower_bound(u), rel=1e-12)
        assert row["max_lower_bound"] <= mx <= row["max_lower_bound"] * (1 + 1e-4)
    assert table[10]["max_loss"] == pytest.approx(8.7711, abs=1e-4)
    assert table[10]["max_lower_bound"] == pytest.approx(8.7703, abs=1e-4)
    assert table[11]["max_loss"] <= table[11]["max_lower_bound"] * (1 + 1e-4)
    assert shipped_max_weights(3) is None and shipped_max_weights(4096) is None


def test_other_horizons_start_from_interpolated_weights() -> None:
    """T not a power of two: optimized from the next power of two's weights; the
    interpolated weights are already a good dual point."""
    T = 24
    B, C = dense_max_factors(T)
    np.testing.assert_allclose(B @ C, counting(T), atol=1e-10)
    mx = losses(B, C)[1]
    start = interpolate_weights(shipped_max_weights(32), T)
    assert max_loss_lower_bound(start) <= mx <= max_loss_lower_bound(start) * 1.01
    with pytest.raises(ValueError, match="horizon"):
        dense_max_factors(2049)
    with pytest.raises(ValueError, match="start must have horizon=24"):
        optimize_dense_max(24, start=np.ones(5))
    with pytest.raises(ValueError, match="weights must be finite and positive"):
        max_loss_lower_bound([1.0, 0.0])


def test_mechanism_registry_sensitivity_and_variances() -> None:
    """``FactorizationMechanism.optimal(T, objective="max")`` (``dense-max-optimum``):
    Gaussian by default, exact max variance = the shipped max loss × a sensitivity-1
    Gaussian's variance; single and (k, b) sensitivities by brute force over the
    neighbours' changes R·(Σ ± e_t)."""
    T = 16
    m = FactorizationMechanism.optimal(T, objective="max", epsilon=1.0, delta=1e-6, rng=0)
    unit = gaussian_sigma(1.0, 1.0, 1e-6) ** 2
    assert m.budget.noise is not None and m.budget.noise.value == "gaussian"
    assert m.max_variance() / unit == pytest.approx(shipped_max_optima()[4]["max_loss"], rel=1e-9)
    built = build_mechanism(
        "dense-max-optimum", horizon=T, budget=Budget(epsilon=1.0, delta=1e-6), rng=0
    )
    assert built.noise_scale == m.noise_scale
    np.testing.assert_array_equal(built.L, m.L)  # type: ignore[attr-defined]
    assert class_noise("dense-max-optimum", 1e-6) == "gaussian"
    R = m.R
    single = max(float(np.linalg.norm(R[:, t])) for t in range(T))
    assert m.privacy is not None and m.privacy.l2_sensitivity == pytest.approx(single, rel=1e-9)
    schema = Participation(max_participations=2, min_separation=5)
    mk = FactorizationMechanism.optimal(
        T, objective="max", epsilon=1.0, delta=1e-6, participation=schema, rng=0
    )
    brute = 0.0
    for s, t in itertools.combinations(range(T), 2):
        if t - s >= 5:
            for sign in (1.0, -1.0):
                brute = max(brute, float(np.linalg.norm(R[:, s] + sign * R[:, t])))
    l2 = mk.participation_sensitivities[1]
    assert l2.value >= brute * (1 - 1e-12)
    if l2.exact:
        assert l2.value == pytest.approx(brute, rel=1e-9)
    with pytest.raises(ValueError, match="objective must be one of"):
        FactorizationMechanism.optimal(T, objective="median", epsilon=1.0, delta=1e-6)


def test_stream_and_checkpoint_follow_the_batch(tmp_path: Path) -> None:
    """The per-step stream equals the batch release with the same seed, and a stream
    restored from a mid-stream checkpoint (save_stream/load_stream, checked against the
    mechanism it should continue) releases the same values."""
    T = 16
    x = np.arange(T, dtype=float) % 3
    kw: dict[str, Any] = {"objective": "max", "epsilon": 1.0, "delta": 1e-6}
    batch = FactorizationMechanism.optimal(T, **kw, rng=3).release(x)
    mech = FactorizationMechanism.optimal(T, **kw, rng=3)
    stream = mech.stream()
    first = [stream.update(float(v)) for v in x[:7]]
    save_stream(stream, tmp_path / "s.ckpt")
    rest = [stream.update(float(v)) for v in x[7:]]
    np.testing.assert_allclose(first + rest, batch, atol=1e-12)
    restored = load_stream(tmp_path / "s.ckpt", expect=mech)
    np.testing.assert_array_equal([restored.update(float(v)) for v in x[7:]], rest)


def test_certified_lower_bounds() -> None:
    """counting_nuclear_norm against a dense SVD; the max bound at 1024 is the shipped
    dual value, below the shipped optimum and above the mean bound; a certificate's
    ratio_to_lower_bound; interpolated bounds for other T below achieved losses."""
    for T in (1, 7, 50):
        svd = float(np.linalg.svd(counting(T), compute_uv=False).sum())
        assert counting_nuclear_norm(T) == pytest.approx(svd, rel=1e-12)
        assert counting_nuclear_norm(T) <= svd
    low = certified_lower_bound(1024, "max")
    assert low is not None and low.value == pytest.approx(8.7703, abs=1e-4)
    mean_low = certified_lower_bound(1024, "mean")
    assert mean_low is not None and mean_low.value < low.value
    assert low.value <= shipped_max_optima()[10]["max_loss"]
    big = certified_lower_bound(1 << 20, "mean")
    assert big is not None and big.value == pytest.approx(26.159, abs=1e-3)  # the issue's
    c = certify(9.490984, 1024, "max")  # the column-normalized square root
    assert c.reference.source == "dense max optimum"
    assert c.ratio_to_lower_bound == pytest.approx(9.490984 / low.value)
    odd = certified_lower_bound(100, "max")
    assert odd is not None and odd.source.startswith("γ₂ dual at interpolated")
    assert odd.value <= optimize_dense_max(100, rtol=1e-3).loss
    assert certified_lower_bound(1 << 27, "max") is None


@pytest.mark.slow
def test_regenerated_chain_matches_the_shipped_table() -> None:
    """benchmarks/make_dense_max_optima.py's chain up to T = 512 gives the shipped
    losses within the certified gap (the figures are deterministic)."""
    u = None
    table = shipped_max_optima()
    for k in range(10):
        T = 1 << k
        r = optimize_dense_max(T, start=None if u is None else interpolate_weights(u, T))
        u = r.weights
        assert r.loss == pytest.approx(table[k]["max_loss"], rel=1e-9)
        assert r.lower_bound == pytest.approx(table[k]["max_lower_bound"], rel=1e-9)


def test_plan_prints_the_loss_over_the_certified_lower_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``dpcount plan``: a ``vs lower bound`` column (each Gaussian row's loss over the
    certified bound, ≥ 1) and the bound named in its legend."""
    from dpcount._cli._report import Column, Kind, shown
    from dpcount.analysis import compare
    from dpcount.cli import main

    assert main(["plan", "--horizon", "64", "--epsilon", "1", "--delta", "1e-6",
                 "--metric", "max_variance"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    bound = certified_lower_bound(64, "max")
    assert bound is not None
    assert "vs lower bound" in out and f"{bound.value:.5g}" in out and "γ₂ dual" in out
    rows = [
        r
        for r in compare(64, budget=Budget(epsilon=1.0, delta=1e-6), metric="max_variance")
        if r.certificate is not None
    ]
    for r in rows:
        ratio = r.certificate.ratio_to_lower_bound  # type: ignore[union-attr]
        assert ratio is not None and ratio >= 1.0
        column = Column("loss_vs_lower_bound", "vs lower bound", Kind.RATIO, precise=True)
        assert shown(column, ratio) in out and len(shown(column, ratio)) == 5  # 1.xyz


def test_the_2_to_the_12_optimum_certifies_beyond_the_dense_mechanism() -> None:
    """The shipped max optimum at T = 4096 (beyond ``dense-max-optimum``'s 2048): its
    weights are a probability vector, its gap is below 10⁻⁴, it is the certified
    bound at 4096, above the mean bound and below the column-normalized square root's
    max loss there, and its interpolations to 2^13, 2^14 are the shipped bounds' source
    (recomputed from the weights: slow)."""
    row = shipped_beyond_max_optima()[12]
    u = shipped_beyond_max_weights()
    assert u.shape == (4096,) and np.all(u > 0) and u.sum() == pytest.approx(1.0)
    assert row["max_lower_bound"] <= row["max_loss"] <= row["max_lower_bound"] * (1 + 1e-4)
    assert row["max_loss"] == pytest.approx(11.52196, abs=1e-5)
    low = certified_lower_bound(4096, "max")
    assert low is not None and low.value == row["max_lower_bound"]
    assert low.source == "γ₂ dual of the 2^12 max optimum (shipped)"
    mean = certified_lower_bound(4096, "mean")
    assert mean is not None and mean.value < low.value < 12.3766  # normalized sqrt: 12.3766
    for k, value in shipped_interpolated_max_bounds().items():
        assert certified_lower_bound(1 << k, "max").value == value  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="horizon"):
        dense_max_factors(4096)  # the mechanism stops at 2048


@pytest.mark.slow
def test_the_shipped_2_to_the_12_figures_recompute_from_its_weights() -> None:
    """The 2^12 optimum's lower bound and the causal factorization's exact max loss,
    rebuilt from the shipped weights; the interpolated 2^13 bound from them; a
    perturbed weight vector gives a different (smaller) bound, so the check can fail."""
    from dpcount.counting.factorization.optimize_max import _causal_factors, _step

    row = shipped_beyond_max_optima()[12]
    u = np.array(shipped_beyond_max_weights())
    assert max_loss_lower_bound(u) == pytest.approx(row["max_lower_bound"], rel=1e-12)
    _, _, kappa, Q = _step(u)
    B, C = _causal_factors(u, kappa, Q)
    mean, mx = losses(B, C)
    assert mx == pytest.approx(row["max_loss"], rel=1e-9)
    assert mean == pytest.approx(row["mean_loss"], rel=1e-9)
    interpolated = shipped_interpolated_max_bounds()
    assert max_loss_lower_bound(interpolate_weights(u, 8192)) == pytest.approx(
        interpolated[13], rel=1e-12
    )
    bumped = u.copy()
    bumped[:2048] *= 1.5
    bumped /= bumped.sum()
    assert max_loss_lower_bound(bumped) < row["max_lower_bound"] * (1 - 1e-4)
