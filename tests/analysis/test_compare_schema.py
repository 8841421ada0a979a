"""compare / certificates under a (k, b)-participation schema, and the optimized
Toeplitz factorization among the candidates — against brute force over participation
patterns and independent loss computations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpcount.analysis import best_known_loss, compare
from dpcount.counting import BLT
from dpcount.counting.factorization.blt import shipped_blt_parameters
from dpcount.counting.factorization.toeplitz import optimize_toeplitz, toeplitz_losses
from dpcount.privacy import Budget, Participation


def brute_force_l2(C: np.ndarray, k: int, b: int) -> float:
    """max over every pattern of at most k columns pairwise ≥ b apart and every sign
    vector of ‖Σ g_i C[:, i]‖ (the ℓ₂ norm is convex in g, so ±1 vertices suffice)."""
    T = C.shape[1]
    best = 0.0
    for size in range(1, k + 1):
        for pattern in itertools.combinations(range(T), size):
            if any(j - i < b for i, j in itertools.pairwise(pattern)):
                continue
            cols = C[:, list(pattern)]
            for signs in itertools.product((1.0, -1.0), repeat=size - 1):
                g = np.array((1.0, *signs))
                best = max(best, float(np.linalg.norm(cols @ g)))
    return best


def test_compare_under_a_schema_matches_brute_force_over_patterns() -> None:
    T, schema = 24, Participation(max_participations=3, min_separation=8)
    rows = compare(T, budget=Budget(epsilon=1.0, delta=1e-6, participation=schema))
    gaussian = [r for r in rows if r.noise == "gaussian"]
    labels = {r.label for r in gaussian}
    assert {"toeplitz", "toeplitz-b8", "row-scaled-banded-b8", "blt", "sqrt (analytic)"} <= labels
    checked = 0
    for r in gaussian:
        assert r.participation == schema and r.sensitivity is not None
        assert r.certificate is not None and r.certificate.asymptotic_bound is None
        assert r.certificate.ratio_to_asymptotic is None
        mech = r.build(rng=0)
        dense = getattr(mech, "dense_factorization", None)
        if dense is None:  # the trees: their schema sensitivities are tested in counting/
            continue
        B, C = dense()
        sens = brute_force_l2(C, 3, 8)
        # loss = sens² · mean ‖B_t‖² (every Gaussian calibration is linear in the sensitivity)
        want = sens**2 * float(np.mean(np.sum(B * B, axis=1)))
        if r.sensitivity.exact:
            assert r.certificate.loss == pytest.approx(want, rel=1e-8), r.label
        else:
            assert r.certificate.loss >= want * (1 - 1e-12), r.label
        checked += 1
    assert checked >= 6
    # the reference is the best Gaussian row for this schema, not a single-participation one
    best = min(r.certificate.loss for r in gaussian if r.certificate is not None)
    for r in gaussian:
        assert r.certificate is not None
        assert r.certificate.reference.loss == best
        assert r.certificate.ratio_to_best >= 1.0
    assert best > best_known_loss(T, "mean").loss * 2  # 3 participations cost noise
    for r in rows:  # the command reproduces the schema
        assert "--participations 3 --min-separation 8" in r.command()


def test_compare_schema_errors_and_single_participation() -> None:
    with pytest.raises(ValueError, match="max_participations=4 participations at least"):
        compare(
            64,
            budget=Budget(
                epsilon=1.0,
                delta=1e-6,
                participation=Participation(max_participations=4, min_separation=32),
            ),
        )
    with pytest.raises(TypeError, match=r"participation must be a dpcount\.privacy\.Participation"):
        compare(64, budget=Budget(epsilon=1.0, delta=1e-6, participation=(4, 8)))  # type: ignore[arg-type]
    one = compare(
        64,
        budget=Budget(epsilon=1.0, delta=1e-6, participation=Participation(max_participations=1)),
    )
    assert one == compare(64, budget=Budget(epsilon=1.0, delta=1e-6))
    assert all(r.participation is None and r.sensitivity is None for r in one)
    assert not any(r.label.startswith("toeplitz-b") for r in one)  # banded only under a schema
    toep = next(r for r in one if r.label == "toeplitz")
    assert toep.certificate is not None and toep.certificate.asymptotic_bound is not None
    # its loss, independently from the dense matrices of the built mechanism
    B, C = toep.build(rng=0).dense_factorization()  # type: ignore[attr-defined]
    sens2 = float(np.max(np.sum(C * C, axis=0)))
    want = sens2 * float(np.mean(np.sum(B * B, axis=1)))
    assert toep.certificate.loss == pytest.approx(want, rel=1e-9)
    assert want == pytest.approx(optimize_toeplitz(64, objective="mean").mean_loss, rel=1e-9)


def test_best_known_loss_includes_the_optimized_toeplitz() -> None:
    from dpcount.analysis.certificates import _toeplitz_candidate

    T = 32768  # above the one-weight-per-column limit, below 2^16
    ref = best_known_loss(T, "mean")
    opt = optimize_toeplitz(T, objective="mean")
    want = toeplitz_losses(opt.coefficients, T).mean_loss
    assert _toeplitz_candidate(T, "mean")[1] == pytest.approx(want, rel=1e-12)
    # the BLTs shipped at 2^15 (column-normalized, then row-scaled) are lower still
    assert ref.source == "row-scaled blt (mean-optimized)"
    assert ref.loss < want
    for buffers in (6, 8):  # the Toeplitz beats every shipped mean-optimized BLT
        decay, scale = shipped_blt_parameters(T, "mean", buffers)
        blt = BLT(T, buffer_decay=decay, output_scale=scale, epsilon=1.0, delta=1e-6)
        assert want < blt.losses().mean_loss
