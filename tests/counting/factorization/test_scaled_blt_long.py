"""The scaled BLTs' long forms (horizons above 2^16 / 2^17): the error-free chunk products
and double-double tables against exact rational arithmetic, the noise against the dense
decoder, checkpoints, and the horizon at which each process switches to them."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpcount.counting import NormalizedBLT, RowScaledBLT, load_stream, save_stream
from dpcount.counting.factorization import normalized_blt as nb
from dpcount.counting.factorization import row_scaled_blt as rb
from dpcount.counting.factorization.blt import blt_inverse, check_float_model
from dpcount.counting.registry import max_horizon
from dpcount.privacy.source import NoiseSource
from tests.counting.factorization import test_row_scaled_blt as row_tests
from tests.counting.factorization.test_normalized_blt import OMEGA, THETA, _oracle_1100
from tests.counting.factorization.test_normalized_sqrt import RecordingSampler

GAUSS = {"epsilon": 1.0, "delta": 1e-6}
U = 2.0**-53


def _exact_product(a: np.ndarray, b: np.ndarray) -> list[list[Fraction]]:
    fa = [[Fraction(v) for v in row] for row in a.tolist()]
    fb = [[Fraction(v) for v in row] for row in b.tolist()]
    return [
        [sum((x * fb[k][j] for k, x in enumerate(row)), Fraction(0)) for j in range(b.shape[1])]
        for row in fa
    ]


@pytest.mark.parametrize("k", [8, 32])
def test_split_products_are_exact_to_far_below_one_rounding(k: int) -> None:
    """The long forms' split products (``_grid_split`` of the rows, ``_fixed_split`` of a
    table b + b_lo, ``_split_bits`` of k): a = a₁ + a₂ exactly, a₁ @ b₁ is the exact
    rational product (as one float product, and as a column block of a wider one),
    and a₁ @ b₁ + [a₂ | a₁] @ [b; b₂′] is within k·2^-22·u of a @ (b + b_lo) relative
    to the array's scale (one grid for all rows; a zero row included), where the float
    product, or one that drops b_lo, errs by ≈ u·|a||b| (so the bound can fail)."""
    rng = np.random.default_rng(7 + k)
    a = rng.normal(size=(6, k)) * np.array([1.0, 0.3, 2.0, 0.0, 0.7, 3.0])[:, None]
    b = rng.uniform(-1.0, 1.0, size=(k, 5)) * 0.9
    b_lo = b * U * rng.uniform(-1.0, 1.0, size=b.shape)
    bits_a, bits_b = nb._split_bits(k)
    left = np.empty((6, 2 * k))
    nb._grid_split(a, bits_a, left[:, k:], left[:, :k])
    np.testing.assert_array_equal(left[:, k:] + left[:, :k], a)
    b1, b2 = nb._fixed_split(b, b_lo, bits_b)
    exact = left[:, k:] @ b1
    wide = left[:, k:] @ np.concatenate([b1, rng.normal(size=(k, 3))], axis=1)
    np.testing.assert_array_equal(wide[:, :5], exact)
    want_exact = _exact_product(left[:, k:], b1)
    rest = left @ np.concatenate([b, b2])
    fb = [
        [Fraction(x) + Fraction(y) for x, y in zip(r, rl, strict=True)]
        for r, rl in zip(b.tolist(), b_lo.tolist(), strict=True)
    ]
    plain, missed = 0.0, 0.0
    scale = float(np.max(np.abs(a)))
    for r in range(a.shape[0]):
        for j in range(b.shape[1]):
            assert Fraction(exact[r, j]) == want_exact[r][j]
            want = sum((Fraction(x) * fb[i][j] for i, x in enumerate(a[r].tolist())), Fraction(0))
            err = abs(Fraction(exact[r, j]) + Fraction(rest[r, j]) - want)
            assert err <= Fraction(k * 2.0**-22 * U * scale)
            plain = max(plain, float(abs(Fraction(float(a[r] @ b[:, j])) - want)) / scale)
            high = _exact_product(a[r : r + 1], b[:, j : j + 1])[0][0]
            missed = max(missed, float(abs(high - want)) / scale)
    assert plain > k * 2.0**-22 * U  # the float product is not that close
    assert missed > k * 2.0**-22 * U  # b_lo matters at this bound


def test_add_product_error_is_dekkers_two_product() -> None:
    """out += a·b − fl(a·b) exactly (rationals), the same floats as
    :func:`_two_product_error`, for magnitudes far apart and a broadcast b."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=(3, 50)) * np.exp2(rng.integers(-40, 40, size=(3, 50)))
    b = rng.uniform(0.1, 3.0, size=50)
    p = a * b
    start = rng.normal(size=(3, 50)) * 1e-20
    out = start.copy()
    nb._add_product_error(a.copy(), b, p, out)
    direct = nb._two_product_error(a, np.broadcast_to(b, a.shape), p)
    np.testing.assert_array_equal(out, start + direct)
    for r in range(3):
        for t in range(50):
            exact = Fraction(a[r, t]) * Fraction(b[t]) - Fraction(p[r, t])
            assert Fraction(direct[r, t]) == exact
    assert np.any(direct != 0.0)  # the products do round


@pytest.mark.parametrize("K", [1, 5])
def test_block_sums_end_pair_and_low_parts(K: int) -> None:
    """``_block_sums`` with ``low`` and ``end``: the pair after the last block is within
    4u² of start + Σ rows + Σ low (exact rationals), and every value within 2u of its
    exact prefix sum plus its block's low parts (≤ 32 of them) and the block's partial
    sums' roundings (γ_32 of its steps, as without ``low``); the values without
    ``low`` are the same floats as before. A dropped low part errs by ≈ u·|step|."""
    rng = np.random.default_rng(K)
    R, b = 2, nb._PARTIAL
    rows = rng.normal(size=(R, K, b))
    low = rows * U * rng.uniform(-1.0, 1.0, size=rows.shape)
    start = np.array([3.0, -1e3]) + rng.normal(size=R)
    plain = np.empty((R, K, b))
    nb._block_sums(rows.copy(), start, plain)
    got = np.empty((R, K, b))
    end = nb._block_sums(rows.copy(), start, got, end=True)
    np.testing.assert_array_equal(got, plain)
    assert end is not None
    got = np.empty((R, K, b))
    end = nb._block_sums(rows.copy(), start, got, end=True, low=low.reshape(R, K * b))
    assert end is not None
    for r in range(R):
        exact = Fraction(start[r])
        for k in range(K):
            for j in range(b):
                exact += Fraction(rows[r, k, j]) + Fraction(low[r, k, j])
                slack = sum((abs(Fraction(v)) for v in low[r, k, : j + 1].tolist()), Fraction(0))
                slack += Fraction(b * U) * Fraction(float(np.sum(np.abs(rows[r, k, : j + 1]))))
                err = abs(Fraction(got[r, k, j]) - exact)
                assert err <= Fraction(2 * U) * abs(exact) + slack
        total = Fraction(end[0][r]) + Fraction(end[1][r])
        scale = abs(Fraction(start[r])) + Fraction(float(np.sum(np.abs(rows[r]))))
        assert abs(total - exact) <= Fraction(4 * U * U) * scale
        assert abs(Fraction(end[1][r])) <= Fraction(U) * abs(Fraction(end[0][r]))


def test_long_w_returns_a_renormalized_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    """w = hi + lo from :meth:`_long_w` has |lo| ≤ ulp(hi)/2 (TwoSum), for full chunks
    and a remainder, scalar and 3 streams: the low parts' running sum rounds at u²."""
    _long(monkeypatch)
    m = NormalizedBLT(1100, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=3)
    for R in (1, 3):
        width = None if R == 1 else R
        proc = m.noise_process(
            NoiseSource.generator(m.sampler, np.random.default_rng(1), width), width
        )
        x = np.random.default_rng(R).normal(size=(R, 1100))
        hi, lo = proc._long_w(x)
        assert np.all(np.abs(lo) <= np.spacing(np.abs(hi)) / 2)
        assert np.any(lo != 0.0)


def test_long_tables_are_the_exact_decays_tables() -> None:
    """G, P, F as pairs are within 64u² (relative to 1) of their values for the exact
    decays λ_i = 1 − d_i (rationals), where the float tables (exp-based powers) are
    only u-close."""
    inv = blt_inverse(np.array(THETA), np.array(OMEGA))
    c = 32
    G, G_lo, P, P_lo, F, F_lo = nb._long_tables(inv.decay, inv.one_minus_decay, inv.scale, c)
    lam = [1 - Fraction(d) for d in inv.one_minus_decay.tolist()]
    om = [Fraction(w) for w in inv.scale.tolist()]
    power = [[lam_i**j for lam_i in lam] for j in range(c + 1)]
    g = [Fraction(1)]
    g += [sum(o * p for o, p in zip(om, power[k - 1], strict=True)) for k in range(1, c)]
    bound = Fraction(64 * U * U)
    for t in range(c):
        for s in range(c):
            want = g[t - s] if t >= s else Fraction(0)
            assert abs(Fraction(G[t, s]) + Fraction(G_lo[t, s]) - want) <= bound
    for i in range(len(lam)):
        for s in range(c):
            want = power[c - 1 - s][i]
            assert abs(Fraction(P[i, s]) + Fraction(P_lo[i, s]) - want) <= bound
            assert abs(Fraction(F[s, i]) + Fraction(F_lo[s, i]) - om[i] * power[s][i]) <= bound
    mats = nb.NormalizedBLTNoiseProcess._chunk_matrices  # the float tables, for contrast
    proc = NormalizedBLT(64, buffer_decay=THETA, output_scale=OMEGA, **GAUSS).noise_process(
        NoiseSource.generator(RecordingSampler(), np.random.default_rng(0))  # type: ignore[arg-type]
    )
    G_float = mats(proc, c)[0]
    assert max(abs(Fraction(G_float[t, 0]) - g[t]) for t in range(c)) > bound


def _long(monkeypatch: pytest.MonkeyPatch, above: int = 512) -> None:
    monkeypatch.setattr(nb.NormalizedBLTNoiseProcess, "long_above", above)
    monkeypatch.setattr(rb.RowScaledBLTNoiseProcess, "long_above", above)


@pytest.mark.parametrize("piece", [None, 1024])
def test_long_forms_apply_the_decoder(monkeypatch: pytest.MonkeyPatch, piece: int | None) -> None:
    """With the long forms from T = 1100 on, scalar and vector blocks (one, several, of
    1 step, ≥ 32 chunks and fewer, a remainder chunk) release B′z for the z they drew;
    in one piece or in pieces of 1024 steps (the buffers and the sum carried across)."""
    _long(monkeypatch)
    if piece is not None:
        monkeypatch.setattr(nb, "_LONG_PIECE", piece)
    T = 1100  # 34 chunks of 32 and a remainder of 12
    B = _oracle_1100()
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=3)
    for dim, sizes in (
        (None, (T,)),
        (None, (1, 640, 459)),
        (None, (1030, 70)),
        (1, (T,)),
        (3, (1, 640, 459)),
        (2, (7, 1030, 63)),
    ):
        rec = RecordingSampler()
        proc = m.with_sampler(rec).noise_process(  # type: ignore[arg-type]
            NoiseSource.generator(rec, np.random.default_rng(0), dim), dim
        )
        assert proc._long
        out = np.concatenate([np.reshape(proc.next_many(k), (k, -1)) for k in sizes])
        z = np.concatenate([np.reshape(a, (-1, out.shape[1])) for a in rec.draws])
        np.testing.assert_allclose(out, B @ z, rtol=1e-12, atol=1e-12)
        assert not np.allclose(out, np.cumsum(z, axis=0), rtol=1e-3)  # not the plain sum


def test_row_scaled_long_forms_apply_the_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The row-scaled BLT's process (input z/w, column norms as weights) in the long
    forms: B′z of the dense row-scaled oracle, scalar and vector."""
    _long(monkeypatch, 64)
    T = 160
    B, _ = row_tests.oracle(T)
    m = RowScaledBLT(T, **row_tests.PARAMS, **GAUSS, rng=11)
    for dim in (None, 2):
        rec = RecordingSampler()
        proc = m.with_sampler(rec).noise_process(  # type: ignore[arg-type]
            NoiseSource.generator(rec, np.random.default_rng(0), dim), dim
        )
        assert proc._long
        out = np.concatenate([np.reshape(proc.next_many(k), (k, -1)) for k in (1, 100, 59)])
        z = np.concatenate([np.reshape(a, (-1, out.shape[1])) for a in rec.draws])
        np.testing.assert_allclose(out, B @ z, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dim", [None, 2])
def test_long_forms_continue_a_checkpoint_bit_for_bit(
    tmp_path: Path, dim: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The long forms keep no state beyond the checkpointed buffers and sum."""
    _long(monkeypatch)
    T = 3000
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=5)
    xs = np.ones(T) if dim is None else np.ones((T, dim))
    s = m.stream()
    s.update_many(xs[:2100])
    path = tmp_path / "ck.json"
    save_stream(s, path)
    ahead = list(s.update_many(xs[2100:]))
    back = list(load_stream(path, expect=m).update_many(xs[2100:]))
    np.testing.assert_array_equal(np.array(back), np.array(ahead))


@pytest.mark.parametrize(("cls", "before"), [(NormalizedBLT, 1 << 16), (RowScaledBLT, 1 << 17)])
def test_long_forms_start_above_the_limits_measured_before_them(cls: type, before: int) -> None:
    """Up to 2^16 / 2^17 the blocks are computed as before (bit for bit: the release
    digests of benchmarks/bench_scaled_batch.py), beyond in the long forms."""
    for T, long in ((before, False), (before + 1, True)):
        mech = cls.optimized(T, **GAUSS)
        proc = mech.noise_process(NoiseSource.generator(mech.sampler, np.random.default_rng(0)))
        assert proc._long is long


@pytest.mark.parametrize("name", ["normalized-blt", "row-scaled-blt"])
def test_blocks_beyond_the_new_limit_are_refused_naming_it(name: str) -> None:
    """2^24 for both (the float model measured ≤ 5.2 there, every block path, seeds
    1–3): the registry's largest horizon, and a block path beyond it refused naming the
    mechanism and horizon."""
    limit = 1 << 24
    assert max_horizon(name) == limit
    check_float_model(name, "block", limit, None)
    check_float_model(name, "block", limit, 3)
    with pytest.raises(ValueError, match=f"{name}: noise at horizon {limit + 1} \\(dim 3"):
        check_float_model(name, "block", limit + 1, 3)
    with pytest.raises(ValueError, match=f"horizon must be <= {limit}, got {limit + 1}"):
        (NormalizedBLT if name == "normalized-blt" else RowScaledBLT).optimized(limit + 1, **GAUSS)


@pytest.mark.parametrize("K", [40, 1100, 33000])  # two, three and four levels of 32 chunks
def test_across_levels_is_the_buffer_recursion(K: int) -> None:
    """``across_levels`` against the recursion p(k) = ρ·p(k − 1) + E(k − 1) in long double
    with ρ = (1 − d)^c, two streams: within 64 ulps of the buffers' size, with partial
    super-chunks at every level; ρ off by 10^-12 in the reference is caught."""
    decay = np.array([0.1, 0.9, 0.999, 0.99999])
    d = np.array([0.9, 0.1, 0.001, 0.00001])  # 1 − decay, as given
    c, n = 8, len(decay)
    E = np.random.default_rng(5).standard_normal((n, 2, K))
    start = np.array([[1.0, 0.0], [-2.0, 0.5], [30.0, 1.0], [4.0, -3.0]])
    prev, end = nb.across_levels(E, start, c, lambda size: nb._level_matrices(decay, d, size))

    def reference(skew: float) -> np.ndarray:
        ld = np.longdouble
        rho = ((ld(1) - d.astype(ld)) ** c * ld(1 + skew))[:, None]
        p = np.empty((n, 2, K + 1), dtype=ld)
        p[..., 0] = start
        for k in range(K):
            p[..., k + 1] = rho * p[..., k] + E[..., k].astype(ld)
        return p

    want = reference(0.0)
    scale = np.max(np.abs(want.astype(np.float64)), axis=2, keepdims=True)
    got = np.concatenate([prev, end[..., None]], axis=2)
    assert np.all(np.abs(got - want.astype(np.float64)) <= 64 * U * scale)
    wrong = reference(1e-12).astype(np.float64)
    assert not np.all(np.abs(got - wrong) <= 64 * U * scale)


@pytest.mark.parametrize("K", [40, 1100])  # two and three levels of 32 chunks
def test_across_levels_exact_leaves_no_rounding(K: int) -> None:
    """``across_levels_exact``: the first stream's buffers plus the second's are the
    recursion p(k) = ρ·p(k − 1) + E(k − 1) (both streams' E, ρ = (1 − d)^c) in 60-digit
    arithmetic to 2^-58 of the buffers' size (≈ u²-level: the rests' roundings); the
    float ``across_levels`` (≈ u·|p|, shared by the chunks after a carry) fails it."""
    import mpmath

    decay = np.array([0.1, 0.9, 0.999, 0.99999])
    d = np.array([0.9, 0.1, 0.001, 0.00001])  # 1 − decay, as given
    c, n = 8, len(decay)
    E = np.random.default_rng(5).standard_normal((n, 2, K))
    E[:, 1] *= 2.0**-30  # the second stream: the rests
    start = np.array([[1.0, 0.0], [-2.0, 2.0**-31], [30.0, 2.0**-29], [4.0, -(2.0**-30)]])
    with mpmath.workdps(60):
        want = np.empty((n, K + 1), dtype=np.longdouble)
        for i in range(n):
            rho = (1 - mpmath.mpf(float(d[i]))) ** c
            p = mpmath.mpf(float(start[i, 0])) + mpmath.mpf(float(start[i, 1]))
            want[i, 0] = np.longdouble(float(p))
            for k in range(K):
                p = rho * p + mpmath.mpf(float(E[i, 0, k])) + mpmath.mpf(float(E[i, 1, k]))
                hi = float(p)
                want[i, k + 1] = np.longdouble(hi) + np.longdouble(float(p - hi))
    scale = np.max(np.abs(want.astype(np.float64)), axis=1, keepdims=True)

    def error(prev: np.ndarray, end: np.ndarray) -> np.ndarray:
        got = [np.concatenate([prev[:, j], end[:, j, None]], axis=1) for j in (0, 1)]
        total = got[0].astype(np.longdouble) + got[1].astype(np.longdouble)
        return np.abs(total - want).astype(np.float64) / scale  # type: ignore[no-any-return]

    exact = nb.across_levels_exact(E, start, c, lambda size: nb._exact_level_matrices(d, size))
    assert np.max(error(*exact)) <= 2.0**-58
    rounded = nb.across_levels(E, start, c, lambda size: nb._level_matrices(decay, d, size))
    assert np.max(error(*rounded)) > 2.0**-58


@pytest.mark.parametrize("dim", [None, 2])
def test_long_forms_checkpoint_their_pairs(
    dim: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The long forms' buffers and sum are pairs between calls: the checkpoint holds
    their low parts (not all zero), a process restored from it continues the noise bit
    for bit, and one restored without them does not (the low parts are used)."""
    _long(monkeypatch)
    m = NormalizedBLT(3000, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=5)
    rng = np.random.default_rng(1)
    proc = m.noise_process(NoiseSource.generator(m.sampler, rng, dim), dim)
    proc.next_many(2100)
    st = proc.state_dict()
    assert np.any(st["p_lo"] != 0.0) and np.any(st["sum_lo"] != 0.0)
    saved = rng.bit_generator.state
    ahead = proc.next_many(900)
    outs = []
    for state in (st, {**st, "p_lo": 0.0 * st["p_lo"], "sum_lo": 0.0 * st["sum_lo"]}):
        again = np.random.default_rng()
        again.bit_generator.state = saved
        fresh = m.noise_process(NoiseSource.generator(m.sampler, again, dim), dim)
        fresh.load_state_dict(state)
        outs.append(fresh.next_many(900))
    np.testing.assert_array_equal(outs[0], ahead)
    assert not np.array_equal(outs[1], ahead)
    with pytest.raises(ValueError, match="p_lo"):
        fresh.load_state_dict({k: v for k, v in st.items() if k != "p_lo"})
