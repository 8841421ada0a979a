"""Balanced binary trees over n leaves: the left child of a node gets ⌈m/2⌉ of its m leaves.

This is the tree of correlated-input-perturbation App. B.1 for any n. Facts used by
every module of :mod:`dpcount.ranges` (each is checked against a recursive builder in
the tests):

* The depth is K = ⌈log₂ n⌉ (0 for n = 1). Every node at depth d ≤ K−1 has
  q_d = ⌊n/2^d⌋ or q_d + 1 leaves, the larger size exactly for the nodes p with
  rev_d(p) < n mod 2^d (rev_d = bit reversal on d bits). Hence the tree is perfect
  down to depth K−1, whose 2^{K−1} *bottom* nodes hold one leaf (a leaf at depth
  K−1) or two leaves (split once more into leaves at depth K).
* Half-slot coordinates: give each depth-K leaf one slot and each depth-(K−1) leaf
  two, so the 2^K slots form a perfect binary tree in which the node p at depth d
  covers the slots [p·2^{K−d}, (p+1)·2^{K−d}). ``half_positions`` maps a cut j
  (0 ≤ j ≤ n, "before leaf j") to its slot position h(j); for n = 2^K, h(j) = j.
  Under the halving cascade (every split gives each child half of its parent) a
  leaf's share of any ancestor is proportional to its number of slots, which turns
  every exact variance into dyadic arithmetic on h.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from numpy.typing import NDArray

__all__ = ["BalancedTree", "bit_reverse"]

IntArray = NDArray[np.int64]


def bit_reverse(values: IntArray, bits: int) -> IntArray:
    """rev_bits(v) for each v in ``values`` (0 ≤ v < 2^bits)."""
    v = np.asarray(values, dtype=np.int64)
    out = np.zeros_like(v)
    for k in range(bits):
        out |= ((v >> k) & 1) << (bits - 1 - k)
    return out


def reversal_table(bits: int) -> IntArray:
    """rev_bits(i) for i = 0..2^bits − 1, built by doubling in O(2^bits)."""
    table = np.zeros(1, dtype=np.int64)
    for _ in range(bits):
        table = np.concatenate((2 * table, 2 * table + 1))
    return table


class BalancedTree:
    """Shape of the balanced binary tree over ``n`` leaves (see the module docstring)."""

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.depth = 0 if self.n == 1 else (self.n - 1).bit_length()

    def __repr__(self) -> str:
        return f"BalancedTree(n={self.n}, depth={self.depth})"

    @property
    def is_perfect(self) -> bool:
        return self.n == 1 << self.depth

    @property
    def bottom_count(self) -> int:
        """Number of nodes at depth K−1 (n ≥ 2)."""
        return 1 << (self.depth - 1)

    @property
    def wide_count(self) -> int:
        """Number of bottom nodes holding two leaves: n − 2^{K−1} (n ≥ 2)."""
        return self.n - self.bottom_count

    def node_sizes(self, depth: int) -> IntArray:
        """Leaves under each of the 2^depth nodes at ``depth`` ≤ K−1, left to right."""
        q, r = divmod(self.n, 1 << depth)
        return q + (reversal_table(depth) < r).astype(np.int64)

    def node_starts(self, depth: int) -> IntArray:
        """First leaf of each node at ``depth`` ≤ K−1, followed by n (length 2^depth + 1)."""
        out = np.zeros((1 << depth) + 1, dtype=np.int64)
        np.cumsum(self.node_sizes(depth), out=out[1:])
        return out

    @cached_property
    def bottom_starts(self) -> IntArray:
        """First leaf of each bottom node, then n (O(n) memory; cached)."""
        return self.node_starts(self.depth - 1)

    def half_positions(self, cuts: NDArray[np.integer] | int) -> IntArray:
        """Slot position h(j) of each cut 0 ≤ j ≤ n (see the module docstring)."""
        j: IntArray = np.array(cuts, dtype=np.int64)
        if self.is_perfect:  # includes n = 1 (one leaf, one slot)
            return j
        starts = self.bottom_starts
        node = np.searchsorted(starts, j, side="right") - 1
        node = np.minimum(node, self.bottom_count - 1)
        h = 2 * node + (j - starts[node])
        return np.asarray(np.where(j >= self.n, 1 << self.depth, h), dtype=np.int64)

    def leaf_depths(self) -> IntArray:
        """Depth of every leaf, left to right (O(n))."""
        if self.n == 1:
            return np.zeros(1, dtype=np.int64)
        sizes = self.node_sizes(self.depth - 1)
        return np.repeat(np.where(sizes == 2, self.depth, self.depth - 1), sizes)

    def node_ranges(self) -> tuple[IntArray, IntArray, IntArray]:
        """All 2n − 1 nodes as half-open leaf ranges: (start, stop, depth), level by level."""
        starts, stops, depths = [], [], []
        for d in range(self.depth):
            s = self.node_starts(d)
            starts.append(s[:-1])
            stops.append(s[1:])
            depths.append(np.full(1 << d, d, dtype=np.int64))
        # Leaves at depth K (the two halves of every wide bottom node).
        if self.n >= 2:
            s = self.bottom_starts
            wide = np.flatnonzero(np.diff(s) == 2)
            leaf_starts = np.sort(np.concatenate((s[wide], s[wide] + 1)))
            starts.append(leaf_starts)
            stops.append(leaf_starts + 1)
            depths.append(np.full(leaf_starts.size, self.depth, dtype=np.int64))
        else:
            starts.append(np.zeros(1, dtype=np.int64))
            stops.append(np.ones(1, dtype=np.int64))
            depths.append(np.zeros(1, dtype=np.int64))
        return np.concatenate(starts), np.concatenate(stops), np.concatenate(depths)
