"""The scaled BLT presets' build (issue 33 item 3): the row profile's backward pass, the
first rows' variances without the whole table, and the exact computations certified at
the functions' largest horizon 2^24 against independent computations (mpmath, extended
precision sums, an FFT of B′'s last row)."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest

from dpcount.counting.factorization import normalized_blt, row_scaled_blt
from dpcount.counting.factorization.normalized_blt import NormalizedBLT
from dpcount.counting.factorization.row_scaled_blt import RowScaledBLT
from dpcount.counting.factorization.scaled import row_weights

THETA = [0.2, 0.6, 0.95, 0.999]
OMEGA = [0.15, 0.1, 0.08, 0.05]
LOGW = (0.3, -0.5, 0.1, -0.05)
GAUSS = {"epsilon": 1.0, "delta": 1e-6}
BIG = 1 << 24
U = 2.0**-53


def block_by_block(profile: row_scaled_blt._RowProfile) -> np.ndarray:
    """The anchors as the construction computed them before its backward pass: each
    block's own filter from the anchor at its right end, right to left."""
    blocks = -(-profile.T // profile.anchor)
    kept, profile._anchors = profile._anchors, np.zeros((blocks, len(profile._rate)))
    q = np.zeros(len(profile._rate))
    for b in range(blocks - 1, -1, -1):
        profile._anchors[b] = q
        q = profile._block(b)[1]
    out, profile._anchors = profile._anchors, kept
    return out


@pytest.mark.parametrize("T", [1, 16, 17, 100, 1000, 1024, 1025])
@pytest.mark.parametrize("span", [16, 64, 1 << 20])
def test_backward_pass_is_the_block_by_block_pass(
    T: int, span: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One filter per pair over spans of columns gives the anchors of the block-by-block
    pass bit for bit (blocks of 16 columns; spans of one block, four, and all)."""
    monkeypatch.setattr(row_scaled_blt, "_SPAN", span)
    profile = row_scaled_blt._RowProfile(np.array(THETA), np.array(OMEGA), LOGW, T, 16)
    want = block_by_block(profile)
    assert profile._anchors.view(np.int64).tolist() == want.view(np.int64).tolist()
    right = 16 * np.arange(1, len(want))  # Q(g₁) > 0 but Q(T − 1) = 0 (w_T = 0)
    assert np.all(profile._anchors[:-1][right < T - 1] > 0)


@pytest.mark.parametrize("cls", [NormalizedBLT, RowScaledBLT])
def test_first_rows_read_the_variance_blocks_without_the_table(
    cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few first steps of a long horizon (their float-safe grids, the std column) read
    the variance recursion's first block (of 1024 steps here, 2^16 shipped) and keep no
    table; every start gives the table's floats bit for bit, and the kept table is read
    once computed."""
    monkeypatch.setattr(normalized_blt, "_BLOCK", 1024)
    monkeypatch.setattr(row_scaled_blt, "_BLOCK", 1024)
    T = 3 * 1024 + 300
    params = {"buffer_decay": THETA, "output_scale": OMEGA}
    if cls is RowScaledBLT:
        params["log_weights"] = list(LOGW)
    m = cls(T, **params, **GAUSS, rng=0)
    m.release(np.ones(5))
    first = list(itertools.islice(m.iter_variances(), 5))
    assert m._coefficients is None and len(first) == 5
    lazy = {s: np.array(list(m.iter_variances(s))) for s in (1, 2, 1024, 1025, 2100, T)}
    blocks = np.concatenate(list(m.iter_variance_blocks(70)))
    assert m._coefficients is None and list(m.iter_variances(T + 1)) == []
    table = m.variances()
    for s, got in lazy.items():
        assert got.view(np.int64).tolist() == table[s - 1 :].view(np.int64).tolist()
    assert blocks.view(np.int64).tolist() == table[69:].view(np.int64).tolist()
    assert np.array_equal(np.array(list(m.iter_variances(7))), table[6:])
    assert list(m.iter_variance_blocks(T + 1)) == [] and list(m.iter_variances(T + 1)) == []


def test_compensated_running_sums_keep_the_tiny_terms() -> None:
    """1 followed by 10⁴ terms of 10⁻¹⁷ (each below half an ulp of 1): the plain running
    sum stays at 1, the compensated one is within an ulp of the exact 1 + k·10⁻¹⁷; and
    on random rows it equals math.fsum's running sums within an ulp."""
    x = np.full(10_001, 1e-17)
    x[0] = 1.0
    exact = 1.0 + 1e-17 * np.arange(10_001)
    plain, accurate = x.copy(), x.copy()
    normalized_blt._plain_running_sums(plain)
    normalized_blt._running_sums(accurate)
    assert np.all(plain == 1.0) and plain[-1] != exact[-1]
    assert np.all(np.abs(accurate - exact) <= np.spacing(exact))
    rows = np.random.default_rng(3).standard_normal((3, 500)) * np.logspace(0, -20, 500)
    want = np.array([[math.fsum(r[: k + 1]) for k in range(500)] for r in rows])
    normalized_blt._running_sums(rows)
    assert np.all(np.abs(rows - want) <= np.spacing(np.abs(want)))


def _square_sum(theta: list[float], omega: list[float], m: int) -> mpmath.mpf:
    """S(m) = Σ_{k<m} c_k² in 50 digits: 1 + Σ_{i,j} ω_iω_j (1 − r^{m−1})/(1 − r), r = θ_iθ_j."""
    total = mpmath.mpf(1)
    for ti, oi in zip(theta, omega, strict=True):
        for tj, oj in zip(theta, omega, strict=True):
            r = mpmath.mpf(ti) * mpmath.mpf(tj)
            total += mpmath.mpf(oi) * mpmath.mpf(oj) * (1 - r ** (m - 1)) / (1 - r)
    return total


def test_normalized_weights_certified_at_the_largest_horizon() -> None:
    """T = 2^24 with the shipped parameters: S(T − j) within 600 ulps of its 50-digit
    value on group boundaries and random columns, every weight above the exact
    √(S(T − j)/S(T)) (so column j of C′ has norm ≤ √S(T), the ℓ₂ sensitivity) and
    within 2^-39 of it (the 2^-40 enlargement, not a looser one)."""
    mpmath.mp.dps = 50
    theta, omega = normalized_blt.shipped_normalized_blt_parameters(BIG)
    th, om = normalized_blt.check_blt_parameters(theta, omega)
    sums = normalized_blt._SquareSums(th, om)
    rng = np.random.default_rng(0)
    js = {0, 1, 511, 512, 513, BIG // 2 - 1, BIG // 2, BIG - 513, BIG - 512, BIG - 1}
    js |= {int(j) for j in rng.integers(0, BIG, 12)}
    total = _square_sum(list(th), list(om), BIG)
    for j in sorted(js):
        exact = _square_sum(list(th), list(om), BIG - j)
        g0 = j - j % 512
        S = float(sums.descending(BIG, g0, min(g0 + 512, BIG))[j - g0])
        assert abs(mpmath.mpf(S) / exact - 1) <= 600 * U, j
        e = float(normalized_blt.normalized_blt_weights(theta, omega, BIG, j, 1)[0])
        ratio = mpmath.sqrt(exact / total)
        assert e >= ratio and (j == 0 or e <= ratio * (1 + 2.0**-39)), j
    assert abs(mpmath.mpf(float(sums(np.array([BIG]))[0])) / total - 1) <= 64 * U


@pytest.mark.slow
def test_normalized_sensitivity_at_the_largest_horizon(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 2^24 (the release's cap lifted here only): ℓ₂ = √S(T)·(1 + 10⁻¹²) above the
    50-digit √S(T), ℓ₁ = √T·ℓ₂ (Cauchy–Schwarz: ‖col‖₁ ≤ √T‖col‖₂)."""
    mpmath.mp.dps = 50
    monkeypatch.setattr(NormalizedBLT, "horizon_limit", BIG)
    m = NormalizedBLT.optimized(BIG, **GAUSS)
    l1, l2 = m._unit_sensitivities()
    exact = mpmath.sqrt(_square_sum(m.buffer_decay.tolist(), m.output_scale.tolist(), BIG))
    assert exact <= l2 <= exact * (1 + 2e-12)
    assert l1 == pytest.approx(4096 * l2, rel=1e-15) and l1 >= 4096 * exact


def _reference_anchors(profile: row_scaled_blt._RowProfile, w2: np.ndarray) -> np.ndarray:
    """Q_p(g₁) for every block by a different algorithm: the sum over each block,
    Σ_i w_{g0+1+i}² r_p^i, as matrix products with the powers of the exact
    r_p = θ_aθ_b (long double, split in two float64 parts), then
    Q(g0) = sum + r_p^anchor·Q(g1) right to left in long double."""
    T, a = profile.T, profile.anchor
    th = np.asarray(profile.theta, dtype=np.longdouble)
    iu, ju = np.triu_indices(len(th))
    r = th[iu] * th[ju]
    powers = r[:, None] ** np.arange(a, dtype=np.longdouble)[None, :]  # (pairs, a)
    hi = powers.astype(np.float64)
    lo = (powers - hi).astype(np.float64)
    blocks = -(-T // a)
    x = np.zeros(blocks * a)
    x[:T] = w2[1 : T + 1]  # w_{j+1}², w_T = 0
    rows = x.reshape(blocks, a)
    sums = (rows @ hi.T).astype(np.longdouble) + rows @ lo.T  # (blocks, pairs)
    out = np.zeros((blocks, len(r)), dtype=np.longdouble)
    ra = powers[:, -1] * r
    for b in range(blocks - 2, -1, -1):
        out[b] = sums[b + 1] + ra * out[b + 1]
    return out


@pytest.fixture(scope="module")
def big_profile() -> row_scaled_blt._RowProfile:
    """The row profile at 2^24 of the shipped parameters (θ, ω kept on it here)."""
    theta, omega, a = row_scaled_blt.shipped_row_scaled_blt_parameters(BIG)
    th, om, logw = row_scaled_blt._validated(theta, omega, a)
    profile = row_scaled_blt._RowProfile(th, om, logw, BIG, row_scaled_blt._ANCHOR)
    profile.theta, profile.omega = th, om  # type: ignore[attr-defined]
    return profile


def _powers_sum(scale: np.ndarray, decay: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """Σ_i scale_i·decay_i^(k−1) for k = k0 … k1 − 1 (numpy's pow, float64)."""
    k = np.arange(k0 - 1, k1 - 1, dtype=np.float64)
    out: np.ndarray = np.power(decay[None, :], k[:, None]) @ scale
    return out


@pytest.mark.slow
def test_row_profile_certified_at_the_largest_horizon(
    big_profile: row_scaled_blt._RowProfile,
) -> None:
    """T = 2^24, the shipped parameters: every anchor Q_p(g₁) (4096 × 36) against the
    blocked sums with the exact ratios, and sampled column norms n_j (block and span
    boundaries, random) against Σ_{i≥j} w_i² c_{i−j}² summed directly in long double,
    c_k from numpy's pow: within T·u (measured 10⁻¹⁰: the rounded ratios fl(r_p)
    raised to the k-th power), inside γ_{3T+40} (module docstring) and so inside the
    ℓ₂ sensitivity's margin (4T + 128)·2⁻⁵³."""
    profile = big_profile
    w = row_weights(BIG, profile.log_weights, np.arange(BIG + 1))
    w[BIG] = 0
    w2 = w * w
    del w
    want = _reference_anchors(profile, w2)
    rel = np.abs(profile._anchors[:-1] / want[:-1] - 1)
    gamma = (3 * BIG + 40) * U / (1 - (3 * BIG + 40) * U)
    # measured 9.9·10⁻¹¹: fl(r_p)^k against the exact r_p^k, k·u/2 for the slow pairs
    assert float(rel.max()) < BIG * U < gamma
    # column norms, each from its own direct sum (c_k in chunks of 2^20)
    th, om = profile.theta, profile.omega  # type: ignore[attr-defined]
    c2 = np.empty(BIG, dtype=np.longdouble)
    c2[0] = 1
    for k0 in range(1, BIG, 1 << 20):
        c = _powers_sum(om, th, k0, min(k0 + (1 << 20), BIG)).astype(np.longdouble)
        c2[k0 : k0 + len(c)] = c * c
    w2l = w2.astype(np.longdouble)
    del w2
    rng = np.random.default_rng(1)
    js = [0, 4095, 4096, BIG - (1 << 20) - 1, BIG - (1 << 20), BIG - 4097, BIG - 1]
    js += [int(j) for j in rng.integers(0, BIG, 3)]
    worst = 0.0
    for j in js:
        exact = np.sqrt(np.dot(w2l[j:BIG], c2[: BIG - j]))
        worst = max(worst, abs(float(profile.norms(j, 1)[0] / exact) - 1))
    assert worst < BIG * U < row_scaled_blt._norm_margin(BIG) / 2


def _last_row_variance(n: np.ndarray, g: np.ndarray, w: np.ndarray | None) -> float:
    """V_T = Σ_j (h(j)/w_j)², h(j) = Σ_{s≥j} n_s g_{s−j} (B′'s last row), by one FFT
    convolution of the reversed weights with the decoder kernel."""
    from scipy import fft

    T = len(n)
    size = fft.next_fast_len(2 * T)
    h = fft.irfft(fft.rfft(n[::-1], size) * fft.rfft(g, size), size)[:T][::-1]
    if w is not None:
        h /= w
    return float(np.dot(h, h))


def _decoder(inv: object, T: int) -> np.ndarray:
    """g_0 = 1, g_k = Σ_i ω′_i λ_i^(k−1) (numpy's pow, in chunks of 2^20)."""
    g = np.ones(T)
    for k0 in range(1, T, 1 << 20):
        k1 = min(k0 + (1 << 20), T)
        g[k0:k1] = _powers_sum(inv.scale, inv.decay, k0, k1)  # type: ignore[attr-defined]
    return g


@pytest.mark.slow
@pytest.mark.parametrize("name", ["normalized-blt", "row-scaled-blt"])
def test_last_variance_at_the_largest_horizon(name: str, request: pytest.FixtureRequest) -> None:
    """V_T at T = 2^24 (the recursion's last step, after 2^24 steps of it) against an
    FFT of B′'s last row from the same weights (n_j or e_j) and the decoder kernel from
    numpy's pow: within 10⁻⁹ (the normalized BLT's compensated sums above 2^22; plain,
    its V_T was 1.6·10⁻⁵ low here)."""
    from dpcount.counting.factorization.blt import blt_inverse

    if name == "normalized-blt":
        theta, omega = normalized_blt.shipped_normalized_blt_parameters(BIG)
        th, om = normalized_blt.check_blt_parameters(theta, omega)
        inv = blt_inverse(th, om)
        last = None
        for _, part in normalized_blt._variance_blocks(th, om, inv, BIG):
            last = part[-1]
        n = normalized_blt.normalized_blt_weights(th, om, BIG)
        w = None
    else:
        profile = request.getfixturevalue("big_profile")
        inv = blt_inverse(profile.theta, profile.omega)
        for _, part in row_scaled_blt._variance_blocks(profile, inv):
            last = part[-1]
        n = profile.norms(0, BIG)
        w = profile.weights(0, BIG)
    want = _last_row_variance(n, _decoder(inv, BIG), w)
    assert last is not None and abs(last / want - 1) < 1e-9


def test_normalized_last_variance_against_the_fft() -> None:
    """The normalized BLT's V_T at 2^18 (shipped parameters) against an FFT of B′'s last
    row: within 10⁻¹⁰ (measured 2.7·10⁻¹¹). Its running sum of G_t = Σ g_k² is
    compensated at every horizon; plain (as before 0.5.0's fix), V_T was 7.2·10⁻⁸ low
    here."""
    from dpcount.counting.factorization.blt import blt_inverse

    T = 1 << 18
    theta, omega = normalized_blt.shipped_normalized_blt_parameters(T)
    th, om = normalized_blt.check_blt_parameters(theta, omega)
    inv = blt_inverse(th, om)
    last = [part[-1] for _, part in normalized_blt._variance_blocks(th, om, inv, T)][-1]
    want = _last_row_variance(
        normalized_blt.normalized_blt_weights(th, om, T), _decoder(inv, T), None
    )
    assert abs(last / want - 1) < 1e-10
