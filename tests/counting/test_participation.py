"""Multi-participation sensitivity: every value against brute force over all patterns.

The oracle here is independent of :mod:`dpcount.counting.participation`: it lists
every set of at most k steps pairwise ≥ b apart with ``itertools``, every sign
vector g ∈ {±1}^|π| (a norm of a linear map is convex, so its sup over the box
|g_i| ≤ 1 is at a vertex), and takes the largest ‖C[:, π] g‖ over all of them. The
encoders come from each mechanism's own structure: the right factor R of its dense
factorization, and for the trees the node incidence of Algorithm 3 as written in
the paper (``tests/counting/test_tree.py``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dpcount
from dpcount.counting import (
    BLT,
    BinaryTree,
    CountingMechanism,
    FactorizationMechanism,
    Honaker,
    InputPerturbation,
    KaryTree,
    NormalizedBLT,
    NormalizedSqrtFactorization,
    RowScaledBLT,
    SmoothBinary,
    SqrtFactorization,
    ToeplitzFactorization,
)
from dpcount.counting import participation as part
from dpcount.counting.digits import DigitSystem
from dpcount.counting.participation import (
    SensitivityMethod,
    encoder_sensitivities,
    gram_pattern_bound,
    toeplitz_sensitivities,
    tree_sensitivities,
    tree_sensitivity_lower_bounds,
    tree_used_blocks,
)
from dpcount.privacy import Budget, Participation, gaussian_sigma
from tests.counting.test_tree import oracle as tree_oracle

# ----------------------------------------------------------------------------- oracle


def oracle(C: np.ndarray, k: int, b: int) -> tuple[float, float]:
    """(Δ₁, Δ₂²) by brute force over all patterns of ≤ k steps ≥ b apart and all signs."""
    T = C.shape[1]
    best1 = best2 = 0.0
    for size in range(1, k + 1):
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=size))).T  # size × 2^size
        for pattern in itertools.combinations(range(T), size):
            if any(j - i < b for i, j in itertools.pairwise(pattern)):
                continue
            change = C[:, list(pattern)] @ signs  # m × 2^size: every sign pattern
            best1 = max(best1, float(np.abs(change).sum(axis=0).max()))
            best2 = max(best2, float((change**2).sum(axis=0).max()))
    return best1, best2


def toeplitz(c: np.ndarray) -> np.ndarray:
    T = len(c)
    return np.array([[c[t - i] if t >= i else 0.0 for i in range(T)] for t in range(T)])


def encoder_of(mech: CountingMechanism) -> np.ndarray:
    if isinstance(mech, KaryTree):
        return tree_oracle(mech)[1]
    if isinstance(mech, FactorizationMechanism):
        return mech.R
    return mech.dense_factorization()[1]  # type: ignore[attr-defined, no-any-return]


MECHS: dict[str, Callable[..., CountingMechanism]] = {
    "binary": lambda T, **kw: BinaryTree(T, **kw),
    "kary-3": lambda T, **kw: KaryTree(T, k=3, subtract=False, **kw),
    "kary-3-sub": lambda T, **kw: KaryTree(T, k=3, subtract=True, **kw),
    "kary-4-sub": lambda T, **kw: KaryTree(T, k=4, subtract=True, **kw),
    "honaker": lambda T, **kw: Honaker(T, **kw),
    "smooth-binary": lambda T, **kw: SmoothBinary(T, **kw),
    "input": lambda T, **kw: InputPerturbation(T, **kw),
    "sqrt": lambda T, **kw: SqrtFactorization(T, **kw),
    "blt": lambda T, **kw: BLT(T, buffer_decay=[0.9, 0.5], output_scale=[0.3, 0.2], **kw),
    # banded, not monotone: disjoint columns for b >= 3, the dense value otherwise
    "toeplitz-3-bands": lambda T, **kw: ToeplitzFactorization(
        T, coefficients=[1.0, 0.6, 0.8], **kw
    ),
    "toeplitz-decreasing": lambda T, **kw: ToeplitzFactorization(
        T, coefficients=[1.0, 0.5, 0.3, 0.2, 0.1], **kw
    ),
    # C′ = C·D ≥ 0: Gram ≥ 0, the dense encoder's exact value
    "normalized-sqrt": lambda T, **kw: NormalizedSqrtFactorization(T, **kw),
    "normalized-sqrt-blocks": lambda T, **kw: NormalizedSqrtFactorization(T, block_ratio=1.5, **kw),
    "normalized-blt": lambda T, **kw: NormalizedBLT(
        T, buffer_decay=[0.9, 0.5], output_scale=[0.3, 0.2], **kw
    ),
    "row-scaled-blt": lambda T, **kw: RowScaledBLT(
        T, buffer_decay=[0.9, 0.5], output_scale=[0.3, 0.2], log_weights=[0.3, -0.4], **kw
    ),
}
SCHEMAS = [(2, 1), (2, 3), (3, 2), (3, 4), (4, 3)]
GAUSS = {"epsilon": 1.0, "delta": 1e-6, "noise": "gaussian", "rng": 0}


@pytest.mark.parametrize("name", sorted(MECHS))
@pytest.mark.parametrize(("k", "b"), SCHEMAS)
@pytest.mark.parametrize("T", [9, 12])
def test_mechanism_sensitivity_matches_brute_force(name: str, k: int, b: int, T: int) -> None:
    schema = Participation(max_participations=k, min_separation=b)
    if k > schema.fits(T):
        pytest.skip("schema does not fit")
    mech = MECHS[name](T, participation=schema, **GAUSS)
    assert mech.participation_sensitivities is not None
    s1, s2 = mech.participation_sensitivities
    want1, want2 = oracle(encoder_of(mech), k, b)
    # Never below the truth (the margin only adds).
    assert s1.value >= want1 and s2.value**2 >= want2
    # Every encoder here has a Gram matrix ≥ 0 and is ≥ 0: the values are exact.
    assert s1.exact and s2.exact
    assert s1.value == pytest.approx(want1, rel=1e-9)
    assert s2.value**2 == pytest.approx(want2, rel=1e-9)
    # The calibration uses them.
    assert mech.privacy is not None
    assert mech.privacy.l2_sensitivity == s2.value
    assert mech.noise_scale == gaussian_sigma(s2.value, 1.0, 1e-6)
    assert f"user-level ({k}, {b})-participation" in mech.describe()


def full_tree_encoder(T: int, branching: int, height: int) -> np.ndarray:
    """Rows: every aligned block of branching^level steps (level < height) meeting [1, T]."""
    rows = []
    for level in range(height):
        size = branching**level
        for start in range(0, T, size):
            row = np.zeros(T)
            row[start : start + size] = 1.0
            rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize(("branching", "subtract"), [(2, False), (3, True), (4, True), (5, True)])
@pytest.mark.parametrize("T", [9, 13])
def test_tree_sensitivity_counts_only_the_nodes_releases_use(
    branching: int, subtract: bool, T: int
) -> None:
    mech = KaryTree(T, k=branching, subtract=subtract, epsilon=1.0, rng=0)
    used = tree_oracle(mech)[1]  # the nodes of Algorithm 3's terms, from the paper
    full = full_tree_encoder(T, branching, mech.height)
    for k, b in [(2, 1), (3, 3)]:
        schema = Participation(max_participations=k, min_separation=b)
        s1, s2 = tree_sensitivities(T, mech.digit_system, mech.height, schema)
        want1, want2 = oracle(used, k, b)
        assert s1.value == want1 and s2.value**2 == pytest.approx(want2, rel=1e-9)
        # Counting every level's block (no release sums some of them) would overstate it.
        assert s2.value**2 <= oracle(full, k, b)[1] * (1 + 1e-9)


def _used_blocks_by_digit_loop(system: DigitSystem, T: int, height: int) -> list[np.ndarray]:
    """tree_used_blocks as first written: one pass per digit value j (O(k·T) per level)."""
    k, low = system.k, system.low
    q = np.arange(1, T + 1, dtype=np.int64)
    out, size = [], 1
    for _ in range(height):
        d = (q - low) % k + low
        parent = (q - d) // k
        used = np.zeros((T - 1) // size + 1, dtype=bool)
        for j in range(system.low, system.high + 1):
            take = ((d > 0) & (j >= 0) & (j < d)) | ((d < 0) & (j >= d) & (j < 0))
            m = k * parent[take] + j
            used[m[(m >= 0) & (m < len(used))]] = True
        out.append(used)
        q, size = parent, size * k
    return out


@pytest.mark.parametrize("subtract", [False, True])
def test_used_blocks_interval_marking_matches_the_digit_loop(subtract: bool) -> None:
    for branching in (2, 3, 4, 7, 19, 64):
        system = DigitSystem.for_tree(branching, subtract)
        for T in (1, 2, 5, 17, 64, 100, 343, 1000):
            h = system.height(T)
            got = tree_used_blocks(system, T, h)
            want = _used_blocks_by_digit_loop(system, T, h)
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(("k", "b"), [(2, 3), (3, 9), (8, 4)])
def test_tree_lower_bounds_lie_below_the_exact_sensitivities(k: int, b: int) -> None:
    """The pruning bounds of best_k: ℓ₁ equal to the exact value (a 0/1 encoder), ℓ₂ a
    feasible pattern's value, at most the exact (Gram) value and at least one
    participation's."""
    schema = Participation(max_participations=k, min_separation=b)
    for branching, subtract in [(2, False), (3, True), (5, False), (9, True)]:
        system = DigitSystem.for_tree(branching, subtract)
        for T in (31, 40):
            h = system.height(T)
            l1, l2 = tree_sensitivity_lower_bounds(T, system, h, schema)
            s1, s2 = tree_sensitivities(T, system, h, schema)
            assert s1.exact and l1 == pytest.approx(s1.value, rel=1e-12) and l1 <= s1.value
            assert math.sqrt(h) <= l2 <= s2.value


# ----------------------------------------------------------------------------- Toeplitz


@pytest.mark.parametrize("seed", range(6))
def test_toeplitz_earliest_pattern_theorem_by_brute_force(seed: int) -> None:
    """Kalinin & Lampert 2024, Thm 2, checked rather than trusted: non-negative,
    non-increasing coefficients (random, some with zeros, some flat) and every schema."""
    rng = np.random.default_rng(seed)
    T = 10
    c = np.sort(rng.exponential(size=T))[::-1]
    if seed % 3 == 1:
        c[rng.integers(2, T) :] = 0.0  # banded
    if seed % 3 == 2:
        c[:4] = c[0]  # flat start
    for k, b in SCHEMAS:
        schema = Participation(max_participations=k, min_separation=b)
        s1, s2 = toeplitz_sensitivities(c, schema)
        want1, want2 = oracle(toeplitz(c), k, b)
        assert s2.method == SensitivityMethod.TOEPLITZ_EARLIEST and s2.exact
        assert s2.value**2 == pytest.approx(want2, rel=1e-9) and s2.value**2 >= want2
        assert s1.value == pytest.approx(want1, rel=1e-9) and s1.value >= want1


def earliest_value(c: np.ndarray, k: int, b: int) -> float:
    v = toeplitz(c)[:, [j * b for j in range(k)]].sum(axis=1)
    return float(v @ v)


def test_increasing_coefficients_fall_back_to_the_exact_dense_value() -> None:
    # Coefficients that rise again at lag 5: steps 0 and 5 overlap, 0 and 3 do not, so
    # the earliest pattern (0, 3) is NOT a worst case here (4 < 5).
    c = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    k, b = 2, 3
    _, want2 = oracle(toeplitz(c), k, b)
    assert earliest_value(c, k, b) < want2 * (1 - 1e-3)
    _, s2 = toeplitz_sensitivities(c, Participation(max_participations=k, min_separation=b))
    assert s2.method == SensitivityMethod.BRUTE_FORCE
    assert s2.exact and s2.value**2 == pytest.approx(want2, rel=1e-9)


def test_negative_gram_entries_give_a_certified_bound() -> None:
    # c = (1, -1): columns i and i+1 overlap with opposite signs; b = 1 lets both in.
    c = np.zeros(8)
    c[0], c[1] = 1.0, -1.0
    schema = Participation(max_participations=2, min_separation=1)
    s1, s2 = toeplitz_sensitivities(c, schema)
    want1, want2 = oracle(toeplitz(c), 2, 1)
    assert not s2.exact and not s1.exact
    assert s2.value**2 >= want2 and s1.value >= want1
    # A random signed encoder: never below brute force, flagged as a bound.
    rng = np.random.default_rng(7)
    C = rng.normal(size=(9, 10))
    for k, b in SCHEMAS:
        schema = Participation(max_participations=k, min_separation=b)
        s1, s2 = encoder_sensitivities(C, schema)
        want1, want2 = oracle(C, k, b)
        assert s2.value**2 >= want2 * (1 - 1e-12) and s1.value >= want1 * (1 - 1e-12)
        assert not s2.exact and not s1.exact


def test_blt_with_increasing_encoder_is_not_treated_as_non_increasing() -> None:
    # Valid BLT parameters (Σ ω/(1 + θ) < 1) whose encoder rises: c = 1, 1.5, 1.35, …
    schema = Participation(max_participations=3, min_separation=2)
    mech = BLT(10, buffer_decay=[0.9], output_scale=[1.5], participation=schema, **GAUSS)
    c = mech.dense_factorization()[1][:, 0]
    assert c[1] > c[0]
    assert mech.participation_sensitivities is not None
    s1, s2 = mech.participation_sensitivities
    assert s2.method == SensitivityMethod.BRUTE_FORCE and s2.exact
    want1, want2 = oracle(toeplitz(c), 3, 2)
    assert s2.value**2 == pytest.approx(want2, rel=1e-9) and s2.value**2 >= want2
    assert s1.value == pytest.approx(want1, rel=1e-9) and s1.value >= want1


# ----------------------------------------------------------------------------- large T


@pytest.mark.parametrize(("k", "b"), [(2, 3), (3, 4), (4, 3)])
def test_gram_bound_brackets_the_brute_force_value(
    k: int, b: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(k * 10 + b)
    T = 14
    schema = Participation(max_participations=k, min_separation=b)
    for C in (rng.exponential(size=(6, T)), full_tree_encoder(T, 2, 4)):  # Gram ≥ 0
        _, want2 = oracle(C, k, b)
        H = np.abs(C.T @ C)
        lag = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])
        H[(lag > 0) & (lag < b)] = 0.0
        upper, lower = gram_pattern_bound(H, schema)
        assert lower <= want2 * (1 + 1e-12) and upper >= want2 * (1 - 1e-12)
        # The library's large-T path (the patterns are not enumerated) is never below.
        monkeypatch.setattr(part, "BRUTE_FORCE_LIMIT", 0)
        _, s2 = encoder_sensitivities(C, schema)
        assert s2.method == SensitivityMethod.GRAM_BOUND and s2.value**2 >= want2
        monkeypatch.undo()


def test_tree_gram_bound_certifies_the_exact_value(monkeypatch: pytest.MonkeyPatch) -> None:
    # The large-T path (no enumeration) on a binary tree: its bound meets a feasible
    # pattern, so it is flagged exact, and it equals brute force over Algorithm 3's nodes.
    T, k, b = 64, 3, 16
    mech = BinaryTree(T, epsilon=1.0)
    schema = Participation(max_participations=k, min_separation=b)
    monkeypatch.setattr(part, "BRUTE_FORCE_LIMIT", 0)
    s1, s2 = tree_sensitivities(T, mech.digit_system, mech.height, schema)
    want1, want2 = oracle(tree_oracle(mech)[1], k, b)
    assert s2.method == SensitivityMethod.GRAM_BOUND and s2.exact
    assert s2.value**2 == pytest.approx(want2, rel=1e-9) and s2.value**2 >= want2
    assert s1.value == want1


def test_large_horizons_use_certified_closed_forms() -> None:
    schema = Participation(max_participations=3, min_separation=1000)
    T = 10_000
    s1, s2 = tree_sensitivities(T, BinaryTree(T, epsilon=1.0).digit_system, 14, schema)
    assert s1.value == 42 and not s1.exact  # k·h: some steps lie in fewer used nodes
    # Levels with blocks > 1000: 1024, …, 8192 (4 levels): 3·14 + 6·4 = 66 < 9·14.
    assert not s2.exact and s2.value**2 == pytest.approx(66.0, rel=1e-9)
    sqrt = SqrtFactorization(T, participation=schema, **GAUSS)
    assert sqrt.participation_sensitivities is not None
    assert sqrt.participation_sensitivities[1].exact
    honaker = Honaker(T, participation=schema, **GAUSS)
    assert honaker.participation_sensitivities is not None
    assert honaker.participation_sensitivities[1].value <= 3 * math.sqrt(honaker.height)


# ----------------------------------------------------------------------------- calibration


@pytest.mark.parametrize("name", sorted(MECHS))
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_single_participation_calibration_is_unchanged(name: str, noise: str) -> None:
    if name.startswith(("blt", "toeplitz", "normalized-", "row-scaled-")) and noise == "laplace":
        pytest.skip("BLT and Toeplitz factorizations are calibrated for Gaussian noise only")
    kw = {"epsilon": 0.7, "delta": 1e-6, "noise": noise, "rng": 0}
    base = MECHS[name](40, **kw)
    for schema in (Participation(), Participation(max_participations=1, min_separation=9)):
        mech = MECHS[name](40, participation=schema, **kw)
        assert mech.budget.participation is None
        assert mech.noise_scale == base.noise_scale
        assert mech.privacy == base.privacy


def test_discrete_noise_uses_the_schema_sensitivity() -> None:
    schema = Participation(max_participations=2, min_separation=4)
    mech = KaryTree(16, k=2, subtract=False, epsilon=1.0, delta=1e-6, noise="discrete-gaussian")
    multi = KaryTree(
        16, k=2, subtract=False, epsilon=1.0, delta=1e-6, noise="discrete-gaussian",
        participation=schema,
    )  # fmt: skip
    assert multi.privacy is not None and mech.privacy is not None
    want1, want2 = oracle(tree_oracle(multi)[1], 2, 4)
    assert multi.privacy.l2_sensitivity**2 == pytest.approx(want2, rel=1e-9)
    assert multi.noise_scale > mech.noise_scale
    laplace = KaryTree(16, k=2, subtract=False, epsilon=1.0, noise="discrete-laplace",
                       participation=schema)  # fmt: skip
    assert laplace.privacy is not None and laplace.privacy.l1_sensitivity == want1


def test_refusals_name_the_parameter() -> None:
    schema = Participation(max_participations=3, min_separation=5)
    with pytest.raises(ValueError, match=r"calibration='pld' .* participation=Participation"):
        BinaryTree(20, epsilon=1.0, delta=1e-6, calibration="pld", participation=schema)
    with pytest.raises(ValueError, match=r"max_participations=3 participations at least "):
        BinaryTree(10, epsilon=1.0, participation=schema)


def test_mechanism_with_schema_round_trips_through_its_config() -> None:
    schema = {"max_participations": 3, "min_separation": 5}
    mech = SqrtFactorization(40, epsilon=1.0, delta=1e-6, noise="gaussian", participation=schema)
    config = json.loads(json.dumps(mech.config()))
    assert config["kwargs"]["participation"] == schema
    again = SqrtFactorization(**config["kwargs"])
    assert again.noise_scale == mech.noise_scale and again.budget == mech.budget
    assert dpcount.Participation is Participation
    assert Budget(epsilon=1.0, participation=Participation(3, 5)) == mech.budget.replace(
        delta=None, noise=None
    )


def test_single_participation_values_are_the_column_norms_as_given() -> None:
    rng = np.random.default_rng(3)
    c = np.sort(rng.exponential(size=16))[::-1]
    single = Participation()
    s1, s2 = toeplitz_sensitivities(c, single)
    assert (s1.value, s2.value) == (float(np.abs(c).sum()), math.sqrt(float((c * c).sum())))
    assert s1.method == s2.method == SensitivityMethod.SINGLE and s1.exact and s2.exact
    C = toeplitz(c)
    d1, d2 = encoder_sensitivities(C, single)
    assert d1.value == float(np.abs(C).sum(axis=0).max())
    assert d2.value == math.sqrt(float(np.max(np.diag(C.T @ C))))


def test_row_blocks_do_not_change_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    # T = 600 spans three row blocks of 256: the Gram matrix equals RᵀR of Algorithm 3's
    # nodes, and the bound is the same as computed in one block.
    T = 600
    mech = KaryTree(T, k=3, subtract=True, epsilon=1.0)
    R = tree_oracle(mech)[1]
    used = part.tree_used_blocks(mech.digit_system, T, mech.height)
    np.testing.assert_array_equal(part.tree_gram(used, 3, T), R.T @ R)
    schema = Participation(max_participations=3, min_separation=150)
    monkeypatch.setattr(part, "BRUTE_FORCE_LIMIT", 0)
    blocked = tree_sensitivities(T, mech.digit_system, mech.height, schema)
    rng = np.random.default_rng(1)
    C = rng.normal(size=(5, T))
    blocked_dense = encoder_sensitivities(C, schema)
    monkeypatch.setattr(part, "_ROWS", 10**6)
    assert tree_sensitivities(T, mech.digit_system, mech.height, schema) == blocked
    assert encoder_sensitivities(C, schema) == blocked_dense


def test_checkpoint_round_trips_the_schema(tmp_path: Path) -> None:
    from dpcount.counting.checkpoint import load_stream, save_stream

    schema = Participation(max_participations=2, min_separation=5)
    mech = KaryTree(20, k=3, epsilon=1.0, noise="discrete-laplace", participation=schema, rng=4)
    stream = mech.stream()
    first = [stream.update(1) for _ in range(7)]
    save_stream(stream, tmp_path / "ck")
    rest = [stream.update(1) for _ in range(5)]
    again = load_stream(tmp_path / "ck", expect=mech)
    assert again.mechanism.budget.participation == schema
    assert again.mechanism.noise_scale == mech.noise_scale
    assert [again.update(1) for _ in range(5)] == rest and len(first) == 7


def test_dp_event_uses_the_schema_sensitivity() -> None:
    dp_accounting = pytest.importorskip("dp_accounting")
    schema = Participation(max_participations=2, min_separation=5)
    mech = KaryTree(20, k=3, epsilon=1.0, noise="laplace", participation=schema, rng=0)
    assert mech.privacy is not None
    # One Laplace event at the schema's l1 sensitivity (not one per node of one step).
    want = dp_accounting.LaplaceDpEvent(mech.noise_scale / mech.privacy.l1_sensitivity)
    assert mech.dp_event() == want


def test_banded_encoder_with_rising_coefficients_uses_disjoint_columns() -> None:
    # At most b bands: columns b apart do not overlap, whatever the coefficients' order.
    c = np.zeros(11)
    c[:3] = [0.2, 1.0, 0.5]
    for k, b in [(2, 3), (3, 4), (3, 5), (2, 2)]:
        schema = Participation(max_participations=k, min_separation=b)
        s1, s2 = toeplitz_sensitivities(c, schema)
        want1, want2 = oracle(toeplitz(c), k, b)
        # b = 2 < 3 bands: columns 2 apart overlap (0.2·0.5), so not disjoint.
        method = SensitivityMethod.DISJOINT_COLUMNS if b >= 3 else SensitivityMethod.BRUTE_FORCE
        assert s2.method == method and s2.exact
        assert s2.value**2 == pytest.approx(want2, rel=1e-9) and s2.value**2 >= want2
        assert s1.value == pytest.approx(want1, rel=1e-9) and s1.value >= want1


@pytest.mark.parametrize(("objective", "mean_target", "max_target"), [("mean", 47.40, 64.37)])
def test_banded_toeplitz_meets_the_multi_participation_targets(
    objective: str, mean_target: float, max_target: float
) -> None:
    """Issue #11: T = 2048, (4, 512)-participation, ε = 1, δ = 1e-6 — the 512-band
    optimized Toeplitz factorization calibrated through the schema: sens² = 4·Σc²
    (disjoint columns, exact), and mean/max loss (variance over a sensitivity-1
    Gaussian's) at or below jax_privacy's banded figures 47.40 / 64.37."""
    schema = Participation(max_participations=4, min_separation=512)
    mech = ToeplitzFactorization.optimized(
        2048, objective=objective, bands=512, participation=schema, **GAUSS
    )
    assert mech.participation_sensitivities is not None
    s2 = mech.participation_sensitivities[1]
    assert s2.exact
    assert s2.value**2 == pytest.approx(4 * float(np.sum(mech.coefficients**2)), rel=1e-9)
    unit = (gaussian_sigma(1.0, 1.0, 1e-6)) ** 2
    mean_loss, max_loss = mech.mse() / unit, mech.max_variance() / unit
    assert mean_loss <= mean_target and max_loss <= max_target
    # k × the single-participation sensitivity (what dpcount did before) is 4× the loss
    plain = ToeplitzFactorization(2048, coefficients=mech.coefficients, **GAUSS)
    assert mech.mse() == pytest.approx(4 * plain.mse(), rel=1e-9)
