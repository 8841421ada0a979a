"""Substring and episode counting (Cor. B.4, B.6); minimal occurrences vs brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcount.apps import (
    EpisodeCounter,
    MinimalOccurrenceCounter,
    SubstringCounter,
    episode_sensitivity,
    substring_sensitivity,
)
from dpcount.privacy import ZeroNoise
from tests.stats import assert_variances_match


def all_words(a: int, ell: int) -> list[tuple[int, ...]]:
    """Words over 0..a-1 of length 1..ell in the apps' layout order."""
    return [w for j in range(1, ell + 1) for w in itertools.product(range(a), repeat=j)]


def brute_minimal_ends(s: list[int], e: tuple[int, ...]) -> list[int]:
    """Number of minimal-occurrence windows of e ending at each position (paper's tuple def.)."""
    # every increasing index tuple i with s[i_k] = e_k (extended letter by letter rather
    # than filtering all C(len(s), len(e)) index tuples: the same list, in the same order)
    occ: list[tuple[int, ...]] = [()]
    for c in e:
        at = [k for k, x in enumerate(s) if x == c]
        occ = [(*i, k) for i in occ for k in at if not i or k > i[-1]]
    windows = set()
    for i in occ:
        dominated = any(
            (i[0] < j[0] and j[-1] <= i[-1]) or (i[0] <= j[0] and j[-1] < i[-1]) for j in occ
        )
        if not dominated:
            windows.add((i[0], i[-1]))
    ends = [0] * len(s)
    for _, end in windows:
        ends[end] += 1
    return ends


def brute_episode_stream(s: list[int], a: int, ell: int) -> np.ndarray:
    return np.array([brute_minimal_ends(s, e) for e in all_words(a, ell)], dtype=float).T


def counter_stream(s: list[int], a: int, ell: int) -> np.ndarray:
    c = MinimalOccurrenceCounter(a, ell)
    return np.array([c.update(x) for x in s], dtype=float)


def substring_stream(s: list[int], a: int, ell: int) -> np.ndarray:
    words = all_words(a, ell)
    return np.array(
        [
            [float(t + 1 >= len(w) and tuple(s[t + 1 - len(w) : t + 1]) == w) for w in words]
            for t in range(len(s))
        ]
    )


@pytest.mark.parametrize(("a", "n"), [(2, 7), (3, 5)])
def test_minimal_occurrences_match_brute_force_exhaustively(a: int, n: int) -> None:
    ell = 3
    for length in range(1, n + 1):
        for s in itertools.product(range(a), repeat=length):
            ends = counter_stream(list(s), a, ell)
            brute = brute_episode_stream(list(s), a, ell)
            np.testing.assert_array_equal(ends, brute, err_msg=str(s))
            assert ends.max() <= 1  # at most one minimal window ends at a letter


def test_minimal_occurrences_on_random_longer_strings() -> None:
    rng = np.random.default_rng(0)
    for _ in range(8):
        s = list(rng.integers(0, 3, size=11))
        c = MinimalOccurrenceCounter(3, 4)
        ends = np.array([c.update(int(x)) for x in s], dtype=float)
        np.testing.assert_array_equal(ends, brute_episode_stream(s, 3, 4))
        np.testing.assert_array_equal(c.counts, ends.sum(axis=0))


def test_zero_noise_substring_counts() -> None:
    text = "abcabbacbcabca" * 2
    sc = SubstringCounter("abc", 3, len(text), epsilon=1.0).with_sampler(ZeroNoise())
    released = np.vstack([sc.update(ch) for ch in text[:10]] + [sc.update_many(text[10:])])
    letters = ["abc".index(ch) for ch in text]
    np.testing.assert_array_equal(released, np.cumsum(substring_stream(letters, 3, 3), axis=0))
    for word in ["a", "bc", "abc", "cab", "bb"]:
        overlapping = sum(text[i : i + len(word)] == word for i in range(len(text)))
        assert sc.count(word) == overlapping
    assert sc.words()[sc.word_index("cab")] == ("c", "a", "b")
    assert sc.dim == 3 + 9 + 27 and len(sc.words()) == sc.dim


def test_zero_noise_episode_counts_with_general_letters() -> None:
    alphabet = ["login", "view", "buy"]
    events = ["login", "view", "view", "buy", "login", "buy", "view", "buy"]
    ec = EpisodeCounter(alphabet, 2, 10, epsilon=1.0, delta=1e-6, mechanism="binary").with_sampler(
        ZeroNoise()
    )
    released = ec.update_many(events)
    codes = [alphabet.index(x) for x in events]
    np.testing.assert_array_equal(released, np.cumsum(brute_episode_stream(codes, 3, 2), axis=0))
    assert ec.count(["login", "buy"]) == 2.0  # windows [1, 4] and [5, 6]
    assert ec.counter.step == 8


def stream_sensitivities(streams: dict[tuple[int, ...], np.ndarray], a: int) -> tuple[float, float]:
    """Largest Γ₁, Γ₂ over all pairs of strings differing in one letter.

    ``streams`` holds every string of one length n over 0..a-1; each string's
    neighbours are found by index, all pairs of one (position, letter shift) at once.
    """
    keys = list(streams)
    index = {s: i for i, s in enumerate(keys)}
    values = np.stack([streams[s] for s in keys])
    letters = np.array(keys)
    w1 = w2 = 0.0
    for p in range(letters.shape[1]):
        for shift in range(1, a):
            changed = letters.copy()
            changed[:, p] = (changed[:, p] + shift) % a  # every c != s[p], over the shifts
            other = np.array([index[tuple(row)] for row in changed.tolist()])
            tv = np.abs(values - values[other]).sum(axis=1)
            w1 = max(w1, float(tv.sum(axis=1).max()))
            w2 = max(w2, float(np.linalg.norm(tv, axis=1).max()))
    return w1, w2


@pytest.mark.parametrize(("a", "n", "ell"), [(2, 8, 1), (2, 8, 3), (3, 6, 2), (3, 6, 3)])
def test_substring_sensitivity_against_brute_force(a: int, n: int, ell: int) -> None:
    strings = list(itertools.product(range(a), repeat=n))
    w1, w2 = stream_sensitivities({s: substring_stream(list(s), a, ell) for s in strings}, a)
    bound = substring_sensitivity(ell)
    assert w1 == bound.l1  # Γ₁ = ℓ(ℓ+1) is attained
    assert w2 <= bound.l2 + 1e-12
    assert w2 > ell  # the paper's ℓ would under-noise


@pytest.mark.parametrize(("a", "n", "ell"), [(2, 8, 2), (2, 8, 3), (3, 6, 2), (3, 6, 3)])
def test_episode_sensitivity_against_brute_force(a: int, n: int, ell: int) -> None:
    strings = list(itertools.product(range(a), repeat=n))
    w1, w2 = stream_sensitivities({s: counter_stream(list(s), a, ell) for s in strings}, a)
    bound = episode_sensitivity(a, ell)
    assert 0 < w1 <= bound.l1 and w2 <= bound.l2 + 1e-12


def test_sensitivity_values_and_calibration() -> None:
    s = substring_sensitivity(3)
    assert (s.l1, s.l2) == (12.0, pytest.approx(math.sqrt(28)))
    e = episode_sensitivity(4, 2)  # N_1 = 2, N_2 = 16 - 4 = 12
    assert (e.l1, e.l2) == (2 * 2 + 12 * 4, pytest.approx(math.sqrt(2 * 4 + 12 * 16)))
    lap = SubstringCounter("abcd", 3, 50, epsilon=1.0)
    assert lap.mechanism.noise_scale == pytest.approx(lap.mechanism.height * 12.0)
    gau = EpisodeCounter("abcd", 2, 50, epsilon=1.0, delta=1e-6, mechanism="kary", noise="gaussian")
    assert gau.mechanism.step_sensitivity == pytest.approx(e.l2)
    assert "differ in one letter" in gau.describe()


def test_episode_noise_variance_matches_exact() -> None:
    T, reps = 8, 120
    ec = EpisodeCounter("abc", 3, T, epsilon=1.0, rng=2)
    text = "abcacbba"
    truth = np.cumsum(brute_episode_stream(["abc".index(c) for c in text], 3, 3), axis=0)
    errors = np.vstack(
        [(ec.with_sampler(ec.mechanism.sampler).update_many(text) - truth).T for _ in range(reps)]
    )
    assert_variances_match(errors, ec.variances())


def test_string_input_errors() -> None:
    sc = SubstringCounter("ab", 2, 3, epsilon=1.0).with_sampler(ZeroNoise())
    with pytest.raises(ValueError, match=r"letter must be in the alphabet \('a', 'b'\), got 'c'"):
        sc.update("c")
    with pytest.raises(ValueError, match=r"letter must be in the alphabet .* got 'c'"):
        sc.update_many("abc")
    assert sc.step == 0
    with pytest.raises(ValueError, match=r"nothing released yet"):
        sc.count("a")
    sc.update_many("ab")
    with pytest.raises(ValueError, match=r"word must have length 1..2, got 'aba' of length 3"):
        sc.count("aba")
    with pytest.raises(ValueError, match=r"2 letter\(s\) would exceed the horizon 3"):
        sc.update_many("ab")
    with pytest.raises(ValueError, match=r"alphabet must have at least 2 letters"):
        SubstringCounter("a", 2, 3, epsilon=1.0)
    with pytest.raises(ValueError, match=r"alphabet must not repeat a letter, got 'a' twice"):
        EpisodeCounter("aba", 2, 3, epsilon=1.0)
    with pytest.raises(TypeError, match=r"alphabet letters must be hashable"):
        EpisodeCounter([["a"], ["b"]], 2, 3, epsilon=1.0)
    with pytest.raises(ValueError, match=r"max_length must be >= 1, got 0"):
        EpisodeCounter("ab", 0, 3, epsilon=1.0)
    with pytest.raises(ValueError, match=r"letter must be <= 1, got 2"):
        MinimalOccurrenceCounter(2, 2).update(2)
