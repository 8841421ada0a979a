"""Choosing a mechanism from its exact, data-independent error."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from dpcount._validate import (
    check_bool,
    check_choice,
    check_instance,
    check_integer,
    check_iterable,
)
from dpcount.analysis.tails import linf_bound
from dpcount.counting.digits import DigitSystem
from dpcount.counting.tree import KaryTree

__all__ = ["TREE_METRICS", "TreeChoice", "best_k", "max_digit_l1_norm", "tree_max_variance"]

TREE_METRICS = ("mse", "max_variance", "linf")


@dataclass(frozen=True)
class TreeChoice:
    """The best k-ary tree for a horizon and budget, with its exact error.

    ``max_variance`` is the exact largest per-step variance (NaN only when built
    by hand without it).
    """

    k: int
    subtract: bool
    height: int
    mse: float
    max_variance: float = math.nan


def max_digit_l1_norm(system: DigitSystem, horizon: int, h: int) -> int:
    """max_{1≤t≤T} ‖digits(t)‖₁ in O(h·k) (the most node noises a release sums).

    Digit strings of h digits in [low, high] are ordered like the integers they
    represent (the lower i digits span fewer than k^i values). A t < T agrees with T
    above some position i, has a smaller digit d there, and is free below. If the
    prefix (T's digits above i, then d) is ≥ 1, t is positive whatever the free
    digits, which each contribute up to M = max(|low|, high); if it is 0, the free
    part must itself be a positive number, whose best is high + (i − 1)·M; a
    negative prefix gives t ≤ 0.
    """
    check_instance("system", system, DigitSystem, "a DigitSystem")
    T = check_integer("horizon", horizon, ge=1)
    h = check_integer("h", h, ge=1)
    if system.capacity(h) < T:
        raise ValueError(
            f"h must be at least {system.height(T)} for horizon {T} with k={system.k} "
            f"(digits in [{system.low}, {system.high}]), got {h}"
        )
    k, low, high = system.k, system.low, system.high
    free = max(-low, high)
    digits = system.digits(T, h)
    best = sum(abs(d) for d in digits)
    prefix_abs = prefix_val = 0
    for i in range(h - 1, -1, -1):
        for d in range(low, digits[i]):
            q = prefix_val * k + d
            if q >= 1:
                best = max(best, prefix_abs + abs(d) + i * free)
            elif q == 0 and i >= 1:
                best = max(best, prefix_abs + high + (i - 1) * free)
        prefix_abs += abs(digits[i])
        prefix_val = prefix_val * k + digits[i]
    return best


def tree_max_variance(mechanism: KaryTree) -> float:
    """Exact largest per-step variance of a k-ary tree, O(h·k) (no O(T) array)."""
    check_instance("mechanism", mechanism, KaryTree, "a KaryTree (or BinaryTree)")
    nodes = max_digit_l1_norm(mechanism.digit_system, mechanism.horizon, mechanism.height)
    return mechanism.sampler.variance * nodes


def best_k(
    horizon: int,
    epsilon: float,
    delta: float | None = None,
    noise: str = "laplace",
    *,
    subtract: bool | None = None,
    k_values: Iterable[int] = range(2, 65),
    calibration: str | None = None,
    metric: str = "mse",
    beta: float = 0.05,
) -> TreeChoice:
    """The (k, subtract) with the lowest exact error at this horizon and budget.

    Exact at the given horizon (not the asymptotic constants of Thm 9 / Cor 15):
    each candidate's MSE is node variance × Σ_t ‖digits(t)‖₁ / T and its largest
    variance node variance × max_t ‖digits(t)‖₁, O(h·k) each.

    Args:
        subtract: restrict to trees with (True) or without (False) subtraction;
            None tries both.
        k_values: candidate branching factors (each ≥ 2).
        metric: ``"mse"``, ``"max_variance"`` or ``"linf"`` (the (1 − β) bound of
            :func:`dpcount.analysis.tails.linf_bound` on the largest error).
        beta: failure probability for ``metric="linf"``.
    """
    horizon = check_integer("horizon", horizon, ge=1)
    check_choice("metric", metric, TREE_METRICS)
    options = (False, True) if subtract is None else (check_bool("subtract", subtract),)
    best: TreeChoice | None = None
    best_score = math.inf
    for k in check_iterable("k_values", k_values):
        check_integer("k", k, ge=2)
        for sub in options:
            if k == 2 and sub and False in options:
                continue  # identical to the binary tree
            m = KaryTree(
                horizon,
                epsilon,
                k=k,
                subtract=sub,
                delta=delta,
                noise=noise,
                rng=0,
                calibration=calibration,
            )
            choice = TreeChoice(k, sub, m.height, m.mse(), tree_max_variance(m))
            if metric == "mse":
                score = choice.mse
            elif metric == "max_variance":
                score = choice.max_variance
            else:
                score = linf_bound(m, beta, max_variance=choice.max_variance)
            if best is None or score < best_score:
                best, best_score = choice, score
    if best is None:
        raise ValueError("k_values must contain at least one value")
    return best
