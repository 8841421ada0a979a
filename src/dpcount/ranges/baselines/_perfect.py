"""The baselines' constructors: a shape and a budget, and perfect binary trees over a
domain padded with zeros to 2^K cells (the baselines' trees).

The tree, Hierarchical and Privelet baselines are defined on a perfect binary tree,
as in their papers. For n that is not a power of two the histogram is padded with
public zero cells up to 2^K, K = ⌈log₂ n⌉; nothing is truncated, and only ranges
inside the real n cells are ever answered. Every real cell lies on K + 1 nodes (the
root to its leaf), which fixes the sensitivities.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.rng import RNGLike
from dpcount.ranges._tree import BalancedTree
from dpcount.ranges.mechanism import RangeMechanism

if TYPE_CHECKING:
    from typing_extensions import Unpack

FloatArray = NDArray[np.float64]


def padded_depth(n: int) -> int:
    """K = ⌈log₂ n⌉: the padded tree has 2^K leaves and K + 1 levels."""
    return BalancedTree(n).depth


def level_sums(x: FloatArray, depth: int) -> list[FloatArray]:
    """Node counts per depth (root first) of x padded with zeros to 2^depth cells."""
    leaves = np.zeros(1 << depth)
    leaves[: x.size] = x
    levels = [leaves]
    for _ in range(depth):
        levels.insert(0, levels[0].reshape(-1, 2).sum(axis=1))
    return levels


class ShapeMechanism(RangeMechanism):
    """Base of the mechanisms built from a shape and a budget alone (the baselines).

    A subclass states its sensitivities for the checked shape in
    :meth:`_sensitivities`; the constructor resolves the budget (``budget=`` or its
    fields as keywords), checks the shape against :attr:`max_dims` and calibrates.
    """

    def __init__(
        self,
        shape: int | tuple[int, ...],
        *,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        budget = Budget.resolve(budget, fields, owner=type(self).__name__)
        self.shape = self._check_shape(shape, self.max_dims)
        l2, l1 = self._sensitivities()
        super().__init__(self.shape, budget=budget, rng=rng, l2_sensitivity=l2, l1_sensitivity=l1)

    @abstractmethod
    def _sensitivities(self) -> tuple[float, float]:
        """(ℓ₂, ℓ₁) sensitivity of the perturbed vector for ``self.shape``."""


class PaddedTreeMechanism(ShapeMechanism):
    """Base of the baselines that perturb a perfect tree over the padded domain (1-D).

    Every real cell lies on the K + 1 nodes from the root to its leaf, so a change
    of one cell by 1 changes the node vector by ℓ₂ norm √(K + 1) and ℓ₁ norm K + 1.
    Whole-number cells give whole-number node sums (and Haar differences), so each
    offers the discrete Gaussian.
    """

    supports_discrete_noise = True

    def _sensitivities(self) -> tuple[float, float]:
        self.depth = padded_depth(self.shape[0])
        levels = self.depth + 1
        return math.sqrt(levels), float(levels)

    def _l2_squared(self) -> Fraction:
        """A cell lies on K + 1 nodes, each shifted by ±1: ‖shift‖₂² = K + 1."""
        return Fraction(self.depth + 1)
