"""compare / certificates under a (k, b)-participation schema, and the optimized
Toeplitz factorization among the candidates — against brute force over participation
patterns and independent loss computations."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from dpcount.analysis import best_known_loss, compare
from dpcount.counting import BLT
from dpcount.counting.factorization.blt import shipped_blt_parameters
from dpcount.counting.factorization.toeplitz import optimize_toeplitz, toeplitz_losses
from dpcount.privacy import Budget, Participation


@functools.cache
def _sign_vertices(T: int, k: int, b: int) -> np.ndarray:
    """Every pattern of at most k columns of T pairwise ≥ b apart, with every sign vector
    (first sign +1), as the columns g of a T × M matrix (the same for every C)."""
    vertices = []
    for size in range(1, k + 1):
        for pattern in itertools.combinations(range(T), size):
            if any(j - i < b for i, j in itertools.pairwise(pattern)):
                continue
            for signs in itertools.product((1.0, -1.0), repeat=size - 1):
                g = np.zeros(T)
                g[list(pattern)] = (1.0, *signs)
                vertices.append(g)
    return np.array(vertices).T


def brute_force_l2(C: np.ndarray, k: int, b: int) -> float:
    """max over every pattern of at most k columns pairwise ≥ b apart and every sign
    vector of ‖Σ g_i C[:, i]‖ (the ℓ₂ norm is convex in g, so ±1 vertices suffice)."""
    return float(np.max(np.linalg.norm(C @ _sign_vertices(C.shape[1], k, b), axis=0)))


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


# -- the trees' k under a schema (issue 33, item 1) -------------------------------------


def _exhaustive_k(T: int, budget: Budget, subtract: bool, metric: str) -> tuple[int, float]:
    """(k, score) minimising ``metric`` over every k in 2..64 (ties: the smallest k), each
    tree built with the whole budget: brute force, no pruning."""
    from dpcount.counting import KaryTree

    best = (0, np.inf)
    for k in range(3 if subtract else 2, 65):
        m = KaryTree(T, budget=budget, k=k, subtract=subtract, rng=0)
        score = m.mse() if metric == "mse" else m.max_variance()
        if score < best[1]:
            best = (k, score)
    return best


def _check_tree_rows(T: int, kp: int, b: int, noises: tuple[str, ...]) -> None:
    budget = Budget(
        epsilon=1.0, delta=1e-6, step_sensitivity=2.0, participation=Participation(kp, b)
    )
    rows = {(r.noise, r.subtract): r for r in compare(T, budget=budget, certificates=False)}
    differs = False
    for noise in noises:
        for sub in (True, False):
            k, mse = _exhaustive_k(T, budget.replace(noise=noise), sub, "mse")
            single = _exhaustive_k(T, budget.replace(noise=noise, participation=None), sub, "mse")
            differs = differs or single[0] != k
            row = rows.get((noise, sub if k > 2 else None))  # k = 2 is the binary row
            assert row is not None and row.k in (k, None), (noise, sub, row, k)
            assert row.mse == pytest.approx(mse, rel=1e-12)
    assert differs  # the schema moves the best k of some family: the test can fail


def test_compare_picks_the_best_k_for_the_schema() -> None:
    """Each k-ary row of compare is the best tree of its family for the budget's schema
    and step sensitivity, against building every k (it used to be the best for one
    participation: k = 7, MSE 8,549 where k = 46 gives 6,445 under (8, 64) at T = 1024;
    here k = 15 / 10 where one participation's are 6 / 5)."""
    _check_tree_rows(96, 4, 16, ("gaussian",))


@pytest.mark.slow
@pytest.mark.parametrize(("T", "kp", "b"), [(256, 8, 16), (300, 3, 10), (200, 5, 20)])
def test_compare_picks_the_best_k_for_more_schemas(T: int, kp: int, b: int) -> None:
    _check_tree_rows(T, kp, b, ("laplace", "gaussian"))


@pytest.mark.parametrize(
    ("T", "kp", "b", "metric", "noise"),
    [
        (96, 4, 16, "mse", "gaussian"),
        (96, 4, 16, "mse", "laplace"),
        (128, 6, 12, "max_variance", "gaussian"),
        (96, 4, 16, "max_variance", "discrete-laplace"),
    ],
)
def test_best_k_pruning_matches_the_exhaustive_search(
    T: int, kp: int, b: int, metric: str, noise: str
) -> None:
    """best_k skips trees whose lower bound exceeds the best score: same k and score as
    building every tree."""
    from dpcount.analysis import best_k

    budget = Budget(epsilon=0.5, delta=1e-8, noise=noise, participation=Participation(kp, b))
    for sub in (True, False):
        k, score = _exhaustive_k(T, budget, sub, metric)
        ks = range(3, 65) if sub else range(2, 65)
        choice = best_k(T, budget=budget, subtract=sub, k_values=ks, metric=metric)
        assert (choice.k, getattr(choice, metric)) == (k, score)


def test_auto_takes_the_best_tree_for_the_schema() -> None:
    """count --mechanism auto on whole numbers under a schema takes the tree with the
    schema's best k (it used to take one participation's: MSE 9,833 where 7,413 is
    available at T = 1024 under (8, 64))."""
    from dpcount.analysis.choice import choose

    T, schema = 96, Participation(4, 16)
    budget = Budget(epsilon=4.0, delta=1e-3, participation=schema)  # a Gaussian tree wins
    auto = choose(T, budget=budget, whole=True).auto
    assert auto is not None and auto.candidate is not None
    row = auto.candidate
    assert row.mechanism == "kary" and row.subtract is not None and row.noise == "gaussian"
    k, _ = _exhaustive_k(T, budget.replace(noise=row.noise), row.subtract, "mse")
    assert row.k == k == 15  # one participation's best is 6


def test_rows_rebuild_with_the_requests_l2_step_sensitivity() -> None:
    """A row's budget, and the mechanism it builds, keep the request's ℓ₂ step bound
    (dropping it would calibrate the rebuilt mechanism with Δ₂ = Δ₁)."""
    budget = Budget(epsilon=1.0, delta=1e-6, step_sensitivity=2.0, step_l2_sensitivity=1.5)
    rows = compare(16, budget=budget)
    assert rows
    for row in rows:
        assert row.budget.step_l2_sensitivity == 1.5
    built = rows[0].build(rng=0)
    assert built.privacy is not None and built.privacy.l2_sensitivity == 1.5
