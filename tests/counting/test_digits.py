"""Digit systems (Definitions 6, 10, 28) and tree heights against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcount.counting import DigitSystem


def brute_representations(system: DigitSystem, h: int) -> dict[int, tuple[int, ...]]:
    """Every h-digit word in [low, high]^h and the integer it denotes."""
    out: dict[int, tuple[int, ...]] = {}
    for word in itertools.product(range(system.low, system.high + 1), repeat=h):
        value = sum(d * system.k**i for i, d in enumerate(word))
        assert value not in out  # uniqueness of the representation
        out[value] = word
    return out


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("subtract", [False, True])
def test_digits_and_capacity_match_brute_force(k: int, subtract: bool) -> None:
    system = DigitSystem.for_tree(k, subtract)
    for h in (1, 2, 3):
        reps = brute_representations(system, h)
        positive = [v for v in reps if v > 0]
        assert max(positive) == system.capacity(h)
        # every t in 1..capacity is representable, and digits() finds that word
        for t in range(1, system.capacity(h) + 1):
            assert tuple(system.digits(t, h)) == reps[t]


def test_capacities_are_the_papers() -> None:
    for k in (3, 5, 19):
        for h in (1, 2, 5):
            assert DigitSystem.for_tree(k, False).capacity(h) == k**h - 1  # Lemma 8
            assert DigitSystem.for_tree(k, True).capacity(h) == (k**h - 1) // 2  # Lemma 14
    for k in (4, 20):
        for h in (1, 3):
            assert DigitSystem.for_tree(k, True).capacity(h) == k * (k**h - 1) // (
                2 * (k - 1)
            )  # Def 28


@pytest.mark.parametrize("k", [2, 3, 10, 19])
def test_heights_are_the_papers_at_every_boundary(k: int) -> None:
    for h in range(1, 6):
        for T in {k**h - 2, k**h - 1, k**h, (k**h - 1) // 2, (k**h + 1) // 2}:
            if T < 1:
                continue
            # Algorithm 1: h = ceil(log_k(T + 1)), computed exactly with integers
            alg1 = next(j for j in itertools.count(1) if k**j >= T + 1)
            assert DigitSystem.for_tree(k, False).height(T) == alg1
            if k % 2:
                alg2 = next(j for j in itertools.count(1) if k**j >= 2 * T)  # ceil(log_k 2T)
                assert DigitSystem.for_tree(k, True).height(T) == alg2
    # floating point gets exact powers wrong; we must not
    assert math.ceil(math.log(125, 5)) == 4  # the trap: log_5(125) evaluates to 3.0000000000000004
    assert DigitSystem.for_tree(5, False).height(124) == 3


@pytest.mark.parametrize(
    ("k", "subtract"), [(2, False), (3, True), (4, True), (5, False), (19, True)]
)
def test_vectorized_l1_norms(k: int, subtract: bool) -> None:
    system = DigitSystem.for_tree(k, subtract)
    T = 3000
    h = system.height(T)
    brute = [sum(abs(d) for d in system.digits(t, h)) for t in range(1, T + 1)]
    np.testing.assert_array_equal(system.digit_l1_norms(T, h), brute)


@pytest.mark.parametrize("k", [2, 3, 4, 5, 19, 20])
@pytest.mark.parametrize("subtract", [False, True])
def test_closed_form_total_matches_sum(k: int, subtract: bool) -> None:
    system = DigitSystem.for_tree(k, subtract)
    for T in [1, 2, 3, 5, 9, 13, 40, 121, 1000, 4097]:
        h = system.height(T)
        assert system.digit_l1_total(T, h) == int(system.digit_l1_norms(T, h).sum())


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6, 7, 8, 19])
@pytest.mark.parametrize("subtract", [False, True])
def test_digit_l1_norm_matches_the_full_pass(k: int, subtract: bool) -> None:
    """Per-step ‖digits(t)‖₁ (KaryTree.variance_at) against digit_l1_norms and brute force."""
    system = DigitSystem.for_tree(k, subtract)
    for T in [*range(1, 200), 360, 361, 1000, 6858, 6859, 6860, 12_345, 100_001]:
        h = system.height(T)
        norms = system.digit_l1_norms(T, h)
        for t in {1, T, (T + 1) // 2, max(1, T - 1)}:
            assert system.digit_l1_norm(t, h) == norms[t - 1]
            assert system.digit_l1_norm(t, h) == sum(abs(d) for d in system.digits(t, h))


@pytest.mark.parametrize("T", [1, 2, 9, 10, 100, 4095, 4096, 70_001])
def test_kary_max_variance_without_variances(T: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcount.counting import KaryTree

    mechanisms = [
        KaryTree(T, epsilon=1.0, k=k, subtract=s, rng=0)
        for k in (2, 3, 4, 19)
        for s in (False, True)
    ]
    expected = [float(np.max(m.variances())) for m in mechanisms]

    def refuse(self: object) -> None:
        raise AssertionError("variances() computed")

    monkeypatch.setattr(KaryTree, "variances", refuse)
    assert [m.max_variance() for m in mechanisms] == expected


@pytest.mark.parametrize("k", [2, 3, 4, 19])
@pytest.mark.parametrize("subtract", [False, True])
def test_digit_l1_norms_from_a_start(k: int, subtract: bool) -> None:
    system = DigitSystem.for_tree(k, subtract)
    for T in (1, 5, 100, 6859, 10_000):
        h = system.height(T)
        full = system.digit_l1_norms(T, h)
        for start in {1, 2, T // 3 + 1, T}:
            assert system.digit_l1_norms(T, h, start=start).tolist() == full[start - 1 :].tolist()
