"""Choosing a mechanism from its exact, data-independent error."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dpcount._validate import check_integer
from dpcount.counting.tree import KaryTree

__all__ = ["TreeChoice", "best_k"]


@dataclass(frozen=True)
class TreeChoice:
    """The best k-ary tree for a horizon and budget, with its exact MSE."""

    k: int
    subtract: bool
    height: int
    mse: float


def best_k(
    horizon: int,
    epsilon: float,
    delta: float | None = None,
    noise: str = "laplace",
    *,
    subtract: bool | None = None,
    k_values: Iterable[int] = range(2, 65),
    calibration: str | None = None,
) -> TreeChoice:
    """The (k, subtract) with the lowest exact MSE at this horizon and budget.

    Exact at the given horizon (not the asymptotic constants of Thm 9 / Cor 15):
    each candidate's MSE is node variance × Σ_t ‖digits(t)‖₁ / T, O(h·k) each.

    Args:
        subtract: restrict to trees with (True) or without (False) subtraction;
            None tries both.
        k_values: candidate branching factors (each ≥ 2).
    """
    horizon = check_integer("horizon", horizon, ge=1)
    options = (False, True) if subtract is None else (subtract,)
    best: TreeChoice | None = None
    for k in k_values:
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
            mse = m.mse()
            if best is None or mse < best.mse:
                best = TreeChoice(k, sub, m.height, mse)
    if best is None:
        raise ValueError("k_values must contain at least one value")
    return best
