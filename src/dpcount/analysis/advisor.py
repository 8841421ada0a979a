"""Choosing a mechanism from its exact, data-independent error."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from dpcount._validate import (
    check_bool,
    check_choice,
    check_integer,
    check_iterable,
)
from dpcount.counting.base import calibrate_budget
from dpcount.counting.digits import DigitSystem, max_digit_l1_norm
from dpcount.counting.participation import DENSE_LIMIT, tree_sensitivity_lower_bounds
from dpcount.counting.tree import KaryTree
from dpcount.privacy.budget import Budget, accept_participation, refuses_loose_budget

accept_participation("best_k")  # the trees calibrate to the budget's schema

__all__ = ["TREE_METRICS", "TreeChoice", "best_k"]

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


@refuses_loose_budget("epsilon", "delta", "noise")
def best_k(
    horizon: int,
    *,
    budget: Budget,
    subtract: bool | None = None,
    k_values: Iterable[int] = range(2, 65),
    metric: str = "mse",
    beta: float = 0.05,
) -> TreeChoice:
    """The (k, subtract) with the lowest exact error at this horizon and budget.

    Exact at the given horizon (not the asymptotic constants of Thm 9 / Cor 15):
    each candidate's MSE is node variance × Σ_t ‖digits(t)‖₁ / T and its largest
    variance node variance × max_t ‖digits(t)‖₁, O(h·k) each. With one participation
    and the MSE or the largest variance, trees of one height share their node noise, so
    one tree per height is built and calibrated (:func:`_best_by_height`: the same
    choice as scoring every tree, tested).

    Args:
        horizon: T ≥ 1.
        budget: a :class:`~dpcount.privacy.Budget`; its noise defaults to Laplace.
        subtract: restrict to trees with (True) or without (False) subtraction;
            None tries both.
        k_values: candidate branching factors (each ≥ 2).
        metric: ``"mse"``, ``"max_variance"`` or ``"linf"`` (the (1 − β) bound of
            :meth:`~dpcount.counting.CountingMechanism.linf_bound` on the largest error).
        beta: failure probability for ``metric="linf"``.
    """
    horizon = check_integer("horizon", horizon, ge=1)
    budget = Budget.check(budget, owner="best_k").with_default_noise("laplace")
    check_choice("metric", metric, TREE_METRICS)
    options = (False, True) if subtract is None else (check_bool("subtract", subtract),)
    trees = []
    for k in check_iterable("k_values", k_values):
        check_integer("k", k, ge=2)
        trees += [(k, sub) for sub in options if not (k == 2 and sub and False in options)]
    if not trees:
        raise ValueError("k_values must contain at least one value")
    if budget.participation is None and metric != "linf":
        found = _best_by_height(horizon, budget, trees, metric)
        if found is not None:
            return found
    bounds = _lower_bounds(horizon, budget, trees, metric)
    best: TreeChoice | None = None
    best_key = (math.inf, len(trees))
    # Increasing lower bound: once one exceeds the best score, so do all later ones.
    for i in sorted(range(len(trees)), key=lambda j: (bounds[j], j)):
        if bounds[i] * (1.0 - _PRUNE_MARGIN) > best_key[0]:
            break
        k, sub = trees[i]
        m = KaryTree(horizon, budget=budget, k=k, subtract=sub, rng=0)
        choice = TreeChoice(k, sub, m.height, m.mse(), m.max_variance())
        if metric == "mse":
            score = choice.mse
        elif metric == "max_variance":
            score = choice.max_variance
        else:
            score = m.linf_bound(beta, max_variance=choice.max_variance)
        if best is None or (score, i) < best_key:  # ties: the first in k_values' order
            best, best_key = choice, (score, i)
    assert best is not None
    return best


#: structure figures below this stay ordered through the score's two roundings
#: (relative gap ≥ 2^−40 between distinct integers, rounding error ≤ 2^−52)
_ORDERED_FIGURES = 1 << 40


def _best_by_height(
    horizon: int, budget: Budget, trees: list[tuple[int, bool]], metric: str
) -> TreeChoice | None:
    """:func:`best_k` for one participation and the MSE or largest variance, building
    one tree per height instead of every tree (the same choice, exactly).

    With one participation a tree's node noise depends on its height h alone: its node
    vector has sensitivities (h·Δ, √h·Δ) and, for the PLD rule, profile h ones
    (:meth:`KaryTree._unit_sensitivities <dpcount.counting.KaryTree>`), so trees of one
    height get the same node variance v from the same calibration. Their scores are v
    times an integer structure figure F (v·L/T with L = Σ_t ‖digits(t)‖₁ for the MSE,
    v·max_t ‖digits(t)‖₁ for the largest variance): floating-point products and
    quotients are non-decreasing in F, and F values that differ (by ≥ 1, F < 2^40) stay
    ordered after rounding. So within a height the least F wins (ties: the first in
    ``trees``' order, as in the full search), and only those trees are built and
    scored, compared as the full search compares them. None when some F reaches
    :data:`_ORDERED_FIGURES` (horizons beyond ~2^30: the full search decides).
    """
    least: dict[int, tuple[int, int]] = {}  # height -> (figure, index of its first tree)
    for i, (k, sub) in enumerate(trees):
        h, figure = tree_structure(horizon, k, sub, metric)
        if figure >= _ORDERED_FIGURES:
            return None
        if h not in least or figure < least[h][0]:
            least[h] = (figure, i)
    best: TreeChoice | None = None
    best_key = (math.inf, len(trees))
    for _, i in least.values():
        k, sub = trees[i]
        m = KaryTree(horizon, budget=budget, k=k, subtract=sub, rng=0)
        choice = TreeChoice(k, sub, m.height, m.mse(), m.max_variance())
        score = choice.mse if metric == "mse" else choice.max_variance
        if best is None or (score, i) < best_key:
            best, best_key = choice, (score, i)
    assert best is not None
    return best


@lru_cache(maxsize=2048)
def tree_structure(horizon: int, k: int, subtract: bool, metric: str = "mse") -> tuple[int, int]:
    """(height h, structure figure F) of the k-ary tree at this horizon, without building
    it: F = Σ_t ‖digits(t)‖₁ (``metric="mse"``; its MSE is node variance × F/T) or
    max_t ‖digits(t)‖₁ (``"max_variance"``; its largest variance is node variance × F),
    exact integers in O(h·k) (:meth:`~dpcount.counting.digits.DigitSystem.digit_l1_total`,
    :func:`~dpcount.counting.digits.max_digit_l1_norm`). Cached: ``compare`` and
    ``recommend_mechanism`` ask for the same trees several times."""
    system = DigitSystem.for_tree(k, subtract)
    h = system.height(horizon)
    if metric == "mse":
        return h, system.digit_l1_total(horizon, h)
    return h, max_digit_l1_norm(system, horizon, h)


#: relative slack of the pruning bound (the Gaussian calibration's root finding and
#: rounding are far below it): a tree is skipped only when clearly worse
_PRUNE_MARGIN = 1e-6


def _lower_bounds(
    horizon: int, budget: Budget, trees: list[tuple[int, bool]], metric: str
) -> list[float]:
    """Per (k, subtract): a lower bound on its score under the budget's schema, to skip
    trees that cannot win (their exact schema sensitivities form a T × T Gram matrix).

    Every calibration's scale is non-decreasing in (Δ₁, Δ₂)
    (:func:`~dpcount.counting.base.calibrate_budget`), so the noise calibrated to lower
    bounds (L₁, L₂) on the schema sensitivities
    (:func:`~dpcount.counting.participation.tree_sensitivity_lower_bounds`) has at most
    the tree's variance, and its MSE or largest variance (the tree's single-participation
    figure per unit variance times it) at most the tree's. Zeros (no pruning) for one
    participation, the ℓ∞ metric, or T > the dense limit (the sensitivities are closed
    forms there).
    """
    schema = budget.participation
    if schema is None or schema.is_single or metric == "linf" or horizon > DENSE_LIMIT:
        return [0.0] * len(trees)
    single = budget.replace(participation=None)
    out = []
    for k, sub in trees:
        m = KaryTree(horizon, budget=single, k=k, subtract=sub, rng=0)
        l1, l2 = tree_sensitivity_lower_bounds(horizon, m.digit_system, m.height, schema)
        lower = calibrate_budget(budget, l1, l2, neighbouring="a lower bound").sampler.variance
        score = m.mse() if metric == "mse" else m.max_variance()
        out.append(score / m.sampler.variance * lower)
    return out
