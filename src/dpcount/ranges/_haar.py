"""Unnormalized Haar transform on a balanced binary tree: sums and child differences.

The coefficients of x on the tree of :mod:`._tree` are the total S(root) and, for every
node u that splits, D_u = S(left child) − S(right child), level by level (root first,
left to right; at depth K − 1 only the bottom nodes holding two leaves split). There are
exactly n of them. The inverse gives X_root = total and children (X_u + D_u)/2 and
(X_u − D_u)/2: adding noise to the coefficients and inverting is the halving cascade of
:mod:`._halving` with root variance Var(root noise) and split variance Var(D noise)/4.

For whole-number cells every coefficient is an integer, and a unit change of one cell
changes the total and the D of each of its ancestors by ±1 (integer shifts). With data
accepted by :func:`dpcount.ranges._exact.check_exact_sums` every coefficient is computed
exactly in float64 (each is a signed partial sum of the cells).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount.ranges._tree import BalancedTree

__all__ = ["haar_coefficients", "haar_inverse"]

FloatArray = NDArray[np.float64]


def haar_coefficients(x: FloatArray, tree: BalancedTree) -> list[FloatArray]:
    """[total], then the D_u of the splitting nodes at depths 0..K−1 (see the module doc)."""
    depth = tree.depth
    prefix = np.zeros(tree.n + 1)
    np.cumsum(x, out=prefix[1:])
    out = [prefix[-1:] - prefix[:1]]
    for d in range(depth - 1):  # every depth-d node (d ≤ K − 2) splits into two
        sums = np.diff(prefix[tree.node_starts(d + 1)])
        out.append(sums[0::2] - sums[1::2])
    if depth >= 1:  # bottom nodes: only those holding two leaves split
        starts = tree.bottom_starts
        first = starts[:-1][np.diff(starts) == 2]
        out.append(x[first] - x[first + 1])
    return out


def haar_inverse(coefficients: Sequence[NDArray[Any]], tree: BalancedTree) -> FloatArray:
    """The n leaves from (noisy) coefficients laid out as by :func:`haar_coefficients`."""
    depth = tree.depth
    values: FloatArray = np.array(coefficients[0], dtype=np.float64)
    if depth == 0:
        return values
    for d in range(depth - 1):
        diff = np.asarray(coefficients[d + 1], dtype=np.float64)
        pairs = np.empty((values.size, 2))
        pairs[:, 0] = (values + diff) / 2.0
        pairs[:, 1] = (values - diff) / 2.0
        values = pairs.reshape(-1)
    starts = tree.bottom_starts
    first = starts[:-1]
    wide = np.diff(starts) == 2
    out = np.empty(tree.n)
    out[first[~wide]] = values[~wide]
    diff = np.asarray(coefficients[depth], dtype=np.float64)
    out[first[wide]] = (values[wide] + diff) / 2.0
    out[first[wide] + 1] = (values[wide] - diff) / 2.0
    return out
