"""Keyed noise: a pure function of (secret, label, level, node, key), exact in law."""

from __future__ import annotations

import json
import math
import os
import stat
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from dpcount.keyed.mark import create_secret
from dpcount.keyed.prf import (
    PositionPRF,
    derive_key,
    exact_floor_t_exp,
    keyed_discrete_gaussian,
    keyed_discrete_laplace,
    keyed_gaussian,
    keyed_laplace,
)
from dpcount.keyed.secret import RunSecret
from dpcount.privacy.discrete import (
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace_pmf,
    discrete_laplace_variance,
)

SECRET = bytes(range(32))


def prf(label: str = "test", key_block: int = 8) -> PositionPRF:
    return PositionPRF(SECRET, label, key_block)


# ---------------------------------------------------------------- the PRF layout
def test_rectangle_equals_single_blocks_and_any_subrectangle() -> None:
    p = prf(key_block=8)
    full = p.rectangle(2, 5, 12, 3, 30)  # spans 4 key blocks, partial at both ends
    for node, key in [(5, 3), (5, 29), (11, 8), (7, 15), (11, 29)]:
        assert tuple(int(w) for w in full[node - 5, key - 3]) == p.block(2, node, key)
    assert np.array_equal(p.rectangle(2, 6, 9, 7, 17), full[1:4, 4:14])
    assert np.array_equal(p.rectangle(2, 11, 12, 8, 16), full[6:7, 5:13])


def test_positions_and_labels_give_distinct_words() -> None:
    p = prf()
    blocks = {p.block(lv, n, k) for lv in range(3) for n in range(4) for k in range(20)}
    assert len(blocks) == 3 * 4 * 20
    assert prf("a").block(0, 0, 0) != prf("b").block(0, 0, 0)
    assert PositionPRF(b"y" * 32, "test", 8).block(0, 0, 0) != p.block(0, 0, 0)
    assert derive_key(SECRET, "x") != derive_key(SECRET, "y")


def test_words_are_uniform_bits() -> None:
    w = prf(key_block=1024).rectangle(0, 0, 64, 0, 1024).ravel()
    ones = np.unpackbits(w.view(np.uint8)).mean()
    n_bits = w.size * 64
    assert abs(ones - 0.5) < 4 * 0.5 / math.sqrt(n_bits)


@pytest.mark.parametrize(
    "sampler", ["discrete-laplace", "discrete-gaussian", "laplace", "gaussian"]
)
def test_same_bits_for_any_chunking_and_order(sampler: str) -> None:
    p = prf(sampler, key_block=16)

    def draw(rect: tuple[int, int, int, int, int]) -> np.ndarray:
        if sampler == "discrete-laplace":
            return keyed_discrete_laplace(p, rect, Fraction(7, 2))
        if sampler == "discrete-gaussian":
            return keyed_discrete_gaussian(p, rect, Fraction(9))
        if sampler == "laplace":
            return keyed_laplace(p, rect, 3.5)
        return keyed_gaussian(p, rect, 3.0)

    whole = draw((1, 0, 40, 0, 50))
    rng = np.random.default_rng(3)
    pieces = [
        (n0, n1, k0, k1)
        for n0, n1 in [(0, 13), (13, 14), (14, 40)]
        for k0, k1 in [(0, 7), (7, 33), (33, 50)]
    ]
    rng.shuffle(pieces)
    again = np.zeros_like(whole)
    for n0, n1, k0, k1 in pieces:
        again[n0:n1, k0:k1] = draw((1, n0, n1, k0, k1))
    assert np.array_equal(again, whole)


# ---------------------------------------------------------------- exactness
def _reference_floor(t: Fraction, words: list[int]) -> int:
    """⌊t·(−ln V)⌋ with mpmath at 200 digits, V the midpoint of the words' interval."""
    with mpmath.workdps(200):
        n = len(words)
        big = 0
        for w in words:
            big = (big << 64) | w
        v = (mpmath.mpf(big) + mpmath.mpf(1) / 2) / mpmath.mpf(2) ** (64 * n)
        x = mpmath.mpf(t.numerator) / t.denominator * -mpmath.log(v)
        return int(mpmath.floor(x))


def test_fast_path_floor_matches_high_precision_reference() -> None:
    words = prf().rectangle(0, 0, 50, 0, 8).reshape(-1)
    t = Fraction(37, 3)
    from dpcount.privacy.sampling.exact import _floor_t_exp_fast

    got, undecided = _floor_t_exp_fast(words, t)
    assert not undecided.any()
    ref = [_reference_floor(t, [int(w)]) for w in words]
    assert got.tolist() == ref


def test_fast_path_is_the_same_in_cache_sized_slices_as_word_by_word() -> None:
    """The floors are computed _SLICE words at a time: an array of several slices gives
    each word what it gives alone (zero words, the undecided entries, included)."""
    from dpcount.privacy.sampling.exact import _SLICE, _floor_t_exp_fast

    words = prf().rectangle(0, 0, 2 * _SLICE // 16 + 3, 0, 8).reshape(-1)  # 2 slices + 48
    words[[0, _SLICE - 1, _SLICE, 2 * _SLICE + 1]] = 0
    t = Fraction(37, 3)
    got, undecided = _floor_t_exp_fast(words, t)
    pick = np.r_[0:5, _SLICE - 3 : _SLICE + 3, 2 * _SLICE : words.size]
    alone = [_floor_t_exp_fast(words[i : i + 1], t) for i in pick]
    assert got[pick].tolist() == [int(g[0]) for g, _ in alone]
    assert undecided[pick].tolist() == [bool(u[0]) for _, u in alone]
    assert undecided[[0, _SLICE - 1, _SLICE, 2 * _SLICE + 1]].all()


@pytest.mark.parametrize("t", [Fraction(10), Fraction(37, 3), Fraction(255)])
def test_floor_table_entries_hold_for_every_v_of_their_bucket(t: Fraction) -> None:
    """Each decided entry of the bucket table is the floor of t·(−ln V) for every V of
    its bucket (mpmath, 60 digits, both ends), and the buckets that straddle an integer
    boundary e^{−n/t} are undecided (−1): random buckets and the boundary buckets."""
    from dpcount.privacy.sampling.exact import _MARGIN, _TABLE_BITS, _floor_table

    bits = _TABLE_BITS
    table = _floor_table(t, _MARGIN)
    assert table.shape == (54 << bits,) and (table[: 1 << bits] == -1).all()

    def bucket(a: int) -> tuple[int, int, int]:  # index, L, U of a's bucket
        e = a.bit_length() - 1
        j = ((a - (1 << e)) << bits) >> e
        low = (1 << e) + ((j << e) >> bits)
        return (e + 1) * (1 << bits) + j, low, low + max(1 << max(e - bits, 0), 1)

    rng = np.random.default_rng(5)
    picks = [bucket(int(a)) for a in rng.integers(1, 2**53, 1500)]
    picks += [bucket(int(a)) for a in 2 ** rng.uniform(0, 53, 1500).astype(np.float64)]
    boundary = []
    with mpmath.workdps(60):
        tt = mpmath.mpf(t.numerator) / t.denominator
        for n in range(1, 60):
            a = int(mpmath.floor(mpmath.exp(-mpmath.mpf(n) / tt) * mpmath.mpf(2) ** 53))
            if a >= 1:
                boundary.append(bucket(a))
        decided = 0
        for index, low, high in picks + boundary:
            lo = tt * -mpmath.log(mpmath.mpf(high) / mpmath.mpf(2) ** 53)
            hi = tt * -mpmath.log(mpmath.mpf(low) / mpmath.mpf(2) ** 53)
            constant = int(mpmath.floor(lo)) == int(mpmath.floor(hi))
            if table[index] >= 0:
                decided += 1
                assert constant and table[index] == int(mpmath.floor(hi)), (index, low)
        assert all(table[index] == -1 for index, _, _ in boundary)
    assert decided >= 0.8 * len(picks)  # 87% at t = 255 (the log-uniform picks)


def test_table_path_gives_the_enclosure_samples_bit_for_bit(monkeypatch) -> None:
    """The table stage changes which path decides an entry, never its value: the fast
    path against the enclosure alone on PRF words and edge words (0, powers of two ± 1,
    the largest), for t below, at and above the table's range, and whole samplers."""
    import dpcount.privacy.sampling.exact as prf_module

    edges = [0, 1, 2047, 2048, 2**64 - 1]
    edges += [(1 << (11 + e)) + d for e in range(53) for d in (-1, 0, 1, 2047, 2048)]
    words = np.concatenate([prf().rectangle(0, 0, 4096, 0, 8).ravel(), np.array(edges, np.uint64)])
    for t in (Fraction(1), Fraction(37, 3), Fraction(256), Fraction(10**6, 7), Fraction(1, 999)):
        fast, fast_undecided = prf_module._floor_t_exp_fast(words, t)
        alone, alone_undecided = prf_module._floor_t_exp_enclosed(words, t)
        assert np.array_equal(fast[~alone_undecided], alone[~alone_undecided]), t
        assert not (fast_undecided & ~alone_undecided).any() and (fast[fast_undecided] == 0).all()
    p, rect = prf("discrete-laplace", key_block=8), (0, 0, 512, 0, 16)
    want = keyed_discrete_laplace(p, rect, Fraction(10))
    with monkeypatch.context() as patch:
        patch.setattr(prf_module, "_floor_t_exp_fast", prf_module._floor_t_exp_enclosed)
        assert np.array_equal(keyed_discrete_laplace(p, rect, Fraction(10)), want)


def test_slow_path_decides_near_integer_boundaries_exactly() -> None:
    """Words whose 53-bit enclosure of t·(−ln V) contains an integer: the slow path runs."""
    from dpcount.privacy.sampling.exact import _floor_t_exp_fast

    t = Fraction(10)
    for n_int in (1, 7, 30, 123):
        with mpmath.workdps(60):
            v = mpmath.exp(-mpmath.mpf(n_int) / 10)
            w0 = int(mpmath.floor(v * mpmath.mpf(2) ** 64))
        _, undecided = _floor_t_exp_fast(np.array([w0], dtype=np.uint64), t)
        assert undecided[0]
        for ext in ([0], [2**64 - 1], [2**63, 5], [12345, 2**62]):
            words = [w0, *ext]
            got = exact_floor_t_exp(t, iter(words + [0] * 10))
            # V lies in [w0.ext, w0.ext + 2^-64n): the reference on the same prefix
            assert got == _reference_floor(t, words)
            # V just below e^{-n/t} ⇔ t·(−ln V) just above n
            assert got in (n_int - 1, n_int)


def _two_log_floor(words: np.ndarray, t: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """The 0.4.0-dev fast path (two logarithms, bounds −ln((a+1)/2^53) and −ln(a/2^53)
    each with a relative margin): the reference the one-log enclosure must agree with."""
    import dpcount.privacy.sampling.exact as prf_module

    margin, two53 = prf_module._MARGIN, float(2**53)
    a = (words >> np.uint64(11)).astype(np.float64)
    with np.errstate(divide="ignore"):
        e_lo = -np.log((a + 1.0) / two53) * (1.0 - margin)
        e_hi = -np.log(a / two53) * (1.0 + margin)
    lo, hi = float(t) * e_lo * (1.0 - margin), float(t) * e_hi * (1.0 + margin)
    g = np.floor(lo)
    undecided = ~(hi < g + 1.0)
    g[undecided] = 0.0
    return g.astype(np.int64), undecided


def _boundary_words(t: Fraction, count: int) -> list[int]:
    """Words whose 53-bit prefix puts t·(−ln V) within ~2^-45 of an integer (ambiguous)."""
    out = []
    with mpmath.workdps(60):
        for n_int in range(1, count + 1):
            w0 = int(mpmath.floor(mpmath.exp(-mpmath.mpf(n_int) / t) * mpmath.mpf(2) ** 64))
            out += [w0, w0 - 2048, w0 + 2048]
    return out


def test_one_log_enclosure_gives_the_two_log_samples_bit_for_bit(monkeypatch) -> None:
    """The one-log fast path and the exact fallback give exactly the 0.4.0-dev samples:
    on PRF words, edge words (0, 1, the largest) and words forced ambiguous (integer
    boundaries), fast path against fast path where both decide, and the whole sampler
    against the old one (and against itself with a 2^-12 margin, which sends ~1% of the
    entries to the exact path)."""
    import dpcount.privacy.sampling.exact as prf_module

    t = Fraction(37, 3)
    edges = [0, 1, 2047, 2048, 2**63, 2**64 - 2049, 2**64 - 1, *_boundary_words(t, 12)]
    words = np.concatenate([prf().rectangle(0, 0, 512, 0, 8).ravel(), np.array(edges, np.uint64)])
    new, new_undecided = prf_module._floor_t_exp_fast(words, t)
    old, old_undecided = _two_log_floor(words, t)
    both = ~new_undecided & ~old_undecided
    assert np.array_equal(new[both], old[both])
    assert new_undecided[-len(edges) :].sum() >= 12  # the boundary words are ambiguous
    assert new_undecided.sum() <= old_undecided.sum() + 8  # only a = 0..small widen it
    for i in np.flatnonzero(new_undecided ^ old_undecided):  # decided by one path only
        exact = exact_floor_t_exp(t, iter([int(words[i]), *[0] * 4]))
        assert exact == (old[i] if new_undecided[i] else new[i])
    # whole samplers: new, old fast path, and new with a wide margin (many exact draws)
    p, rect = prf("discrete-laplace", key_block=8), (0, 0, 256, 0, 16)
    want = keyed_discrete_laplace(p, rect, t)
    with monkeypatch.context() as patch:
        patch.setattr(prf_module, "_floor_t_exp_fast", _two_log_floor)
        assert np.array_equal(keyed_discrete_laplace(p, rect, t), want)
    calls = []
    exact = prf_module.exact_floor_t_exp

    def counted(t_: Fraction, stream: object) -> int:
        calls.append(1)
        return exact(t_, stream)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(prf_module, "_MARGIN", 2.0**-12)
        patch.setattr(prf_module, "exact_floor_t_exp", counted)
        assert np.array_equal(keyed_discrete_laplace(p, rect, t), want)
    assert len(calls) >= 20  # the exact path really ran


def test_zero_word_draws_more_bits() -> None:
    assert exact_floor_t_exp(Fraction(1), iter([0, 2**63])) == _reference_floor(
        Fraction(1), [0, 2**63]
    )


# ---------------------------------------------------------------- distributions
def _check_moments(x: np.ndarray, var: float, fourth: float, label: str) -> None:
    n = x.size
    se_mean = math.sqrt(var / n)
    assert abs(x.mean()) < 4 * se_mean, label
    se_var = math.sqrt((fourth - var * var) / n)
    assert abs(x.var() - var) < 4 * se_var, label
    # the tolerance has power: a 2% error in the variance (1% in the scale) is rejected
    assert abs(x.var() - 1.02 * var) > 4 * se_var, label


def test_discrete_laplace_law() -> None:
    t = Fraction(13, 4)
    x = keyed_discrete_laplace(prf("dl", 1024), (0, 0, 500, 0, 1024), t).ravel()
    y = np.arange(-400, 401)
    pmf = discrete_laplace_pmf(y, float(t))
    var = discrete_laplace_variance(float(t))
    assert var == pytest.approx(float(np.dot(pmf, y * y.astype(float))), rel=1e-9)
    _check_moments(x, var, float(np.dot(pmf, y.astype(float) ** 4)), "discrete laplace")
    for v in (0, 1, -3, 8):
        p = float(discrete_laplace_pmf(v, float(t)))
        assert abs((x == v).mean() - p) < 4 * math.sqrt(p * (1 - p) / x.size)


def test_discrete_gaussian_law() -> None:
    s2 = Fraction(20)
    x = keyed_discrete_gaussian(prf("dg", 1024), (3, 0, 300, 0, 1024), s2).ravel()
    y = np.arange(-200, 201)
    pmf = discrete_gaussian_pmf(y, 20.0)
    var = discrete_gaussian_variance(20.0)
    _check_moments(x, var, float(np.dot(pmf, y.astype(float) ** 4)), "discrete gaussian")
    for v in (0, 2, -5):
        p = float(discrete_gaussian_pmf(v, 20.0))
        assert abs((x == v).mean() - p) < 4 * math.sqrt(p * (1 - p) / x.size)


def test_continuous_laws() -> None:
    lap = keyed_laplace(prf("l", 1024), (0, 0, 300, 0, 1024), 2.5).ravel()
    _check_moments(lap, 2 * 2.5**2, 24 * 2.5**4, "laplace")
    gau = keyed_gaussian(prf("g", 1024), (0, 0, 300, 0, 1024), 1.5).ravel()
    _check_moments(gau, 1.5**2, 3 * 1.5**4, "gaussian")


# ---------------------------------------------------------------- the secret file
CONFIG = {"epsilon": 1.0, "noise": "discrete-laplace", "horizon": 10}


def test_secret_file_created_owner_only_and_reloaded(tmp_path) -> None:
    path = tmp_path / "run.key"
    made = create_secret(path, CONFIG)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    raw = bytes.fromhex(json.loads(path.read_text())["secret"])
    assert len(raw) == 32
    again = RunSecret.load(path, CONFIG)
    assert again == made and again.run_id == made.run_id
    assert raw.hex() not in repr(made)
    with pytest.raises(FileExistsError, match="already exists"):
        create_secret(path, CONFIG)


def test_secret_file_refused_when_loose_or_from_another_run(tmp_path) -> None:
    path = tmp_path / "run.key"
    create_secret(path, CONFIG)
    os.chmod(path, 0o644)
    with pytest.raises(PermissionError, match=r"permissions 0644.*chmod 600"):
        RunSecret.load(path, CONFIG)
    os.chmod(path, 0o600)
    with pytest.raises(ValueError, match=r"another run .*differs in: epsilon"):
        RunSecret.load(path, {**CONFIG, "epsilon": 2.0})
    with pytest.raises(FileNotFoundError, match="not found"):
        RunSecret.load(tmp_path / "nope.key", CONFIG)
    (tmp_path / "junk.key").write_text("{}")
    os.chmod(tmp_path / "junk.key", 0o600)
    with pytest.raises(ValueError, match="not a dpcount keyed secret"):
        RunSecret.load(tmp_path / "junk.key", CONFIG)


def test_secret_tampered_config_detected(tmp_path) -> None:
    import json

    path = tmp_path / "run.key"
    create_secret(path, CONFIG)
    body = json.loads(path.read_text())
    body["config"]["epsilon"] = 5.0
    path.write_text(json.dumps(body))
    with pytest.raises(ValueError, match="damaged"):
        RunSecret.load(path, {**CONFIG, "epsilon": 5.0})


def test_prf_blocks_are_standard_aes128() -> None:
    """FIPS-197 Appendix C.1: the words of counter c are AES_K(c as 16 little-endian bytes)."""
    from dpcount.keyed.prf import _aes_raw

    key = int.from_bytes(bytes(range(16)), "little")
    plaintext = bytes.fromhex("00112233445566778899aabbccddeeff")
    words = _aes_raw(key, int.from_bytes(plaintext, "little"), 2)
    assert words.astype("<u8").tobytes().hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"


# ---------------------------------------------------------------- the PRF as words
def test_prf_words_through_a_noise_source_are_the_keyed_samples() -> None:
    """A NoiseSource on PRFWords draws row r for key i at position (0, r, i): in any
    blocks of rows, the same values as the keyed samplers on the whole rectangle."""
    from dpcount.keyed.prf import PRFWords
    from dpcount.privacy import DiscreteGaussianNoise, DiscreteLaplaceNoise, GaussianNoise
    from dpcount.privacy.source import NoiseSource

    p = prf("stream/x", key_block=8)
    cases = [
        (DiscreteLaplaceNoise(Fraction(7, 2)), keyed_discrete_laplace, Fraction(7, 2)),
        (DiscreteGaussianNoise(3.0), keyed_discrete_gaussian, Fraction(9)),
        (GaussianNoise(3.0), keyed_gaussian, 3.0),
    ]
    for sampler, keyed, scale in cases:
        source = NoiseSource(sampler, PRFWords(p, 3, 11), 8)
        got = np.concatenate([source.sample((n, 8)) for n in (1, 6, 2)])
        assert np.array_equal(got, keyed(p, (0, 0, 9, 3, 11), scale))
        assert source.rows_drawn == 9


def test_discrete_gaussian_is_positional_whatever_the_pending_set() -> None:
    """CKS Alg. 3 on the PRF: each position's value is its first accepted trial, so a
    rectangle, its rows one by one and single positions (the sparse per-position reads)
    agree; a sampler that read the wrong trial's or position's words would not."""
    p, s2 = prf("dg", key_block=4), Fraction(5, 2)
    whole = keyed_discrete_gaussian(p, (0, 0, 12, 0, 10), s2)
    rows = np.concatenate([keyed_discrete_gaussian(p, (0, r, r + 1, 0, 10), s2) for r in range(12)])
    assert np.array_equal(whole, rows)
    for node, key in [(0, 0), (5, 7), (11, 9)]:
        one = keyed_discrete_gaussian(p, (0, node, node + 1, key, key + 1), s2)
        assert one[0, 0] == whole[node, key]
    assert not np.array_equal(whole, keyed_discrete_gaussian(prf("dh", 4), (0, 0, 12, 0, 10), s2))
