"""Exact error of a *halving cascade*: the noise covariance behind the correlated
mechanism, Privelet (Haar) and Hierarchical (Hay et al.) on their trees.

A halving cascade on a binary tree draws the root's noise with variance r and, at
every split of a depth-d node, gives its children X/2 ± Y with Var(Y) = s_d. The
correlated mechanism is one (r = σ²v_0, s_d = σ²β_d²); so is the reconstruction of
Privelet (r = σ², s_d = σ²/4) and, as a posterior (see
:mod:`dpcount.ranges.baselines.hierarchical`), the least-squares estimate of
Hay et al. on a perfect tree. Node variances: v_{d+1} = v_d/4 + s_d.

Exact variance of a range [a, b) (cuts a < b). Write the noise of the prefix [0, j)
in the independent inputs: the root enters with weight w(j) = h(j)/2^K (h = slot
position, :mod:`._tree`), and the split Y_u of the depth-d node u that contains the
cut strictly inside enters with D_d(j) = tri(frac(h(j)/2^{K−d})), tri(t) = 1 − |2t − 1|
(the share of u's left child before j minus the share of its right child). So

    Var[a, b) = r·(w(b) − w(a))² + Σ_d s_d·T_d,
    T_d = (D_d(b) − D_d(a))²   if a and b cut the same depth-d node,
          D_d(a)² + D_d(b)²     otherwise,

O(K) dyadic arithmetic per range (exact up to the final rounding).

Sum over all ranges: Σ_{0≤a<b≤n} (P(b) − P(a))² = N·Σ_j P(j)² − (Σ_j P(j))² with
N = n + 1 cuts, applied input by input (the inputs are independent): O(n) per depth.

Maximum over all ranges: a range that is not a single leaf crosses the midpoint of
exactly one node u (depth d), as a suffix [a, mid) of its left child and a prefix
[mid, b) of its right child with shares α, γ of those children; then
Var = P(a) + Q(b) + κ_d·α·γ with P, Q the suffix/prefix variances and
κ_d = v_d/2 − 2s_d (twice their covariance per unit share). For each b the best a
is on the upper convex hull of the points (α_a, P(a)), so a hull plus binary search
gives the maximum over u's crossing ranges in O(m log m). Nodes of the same shape at
the same depth have the same crossing ranges up to translation, and each depth has
at most two shapes, so the whole maximum costs O(n log n).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from dpcount.ranges._tree import BalancedTree

__all__ = ["HalvingCascade"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_QUERY_BLOCK = 1 << 15


@dataclass(frozen=True)
class _Shape:
    """A node [start, stop) with midpoint ``mid`` (cells), its slots, and its multiplicity."""

    start: int
    mid: int
    stop: int
    slot_start: int
    slot_width: int
    count: int


def _tri(offset: IntArray, half: int) -> FloatArray:
    """tri(offset / (2·half)) = 1 − |offset/half − 1| for 0 ≤ offset < 2·half."""
    t = offset * (1.0 / half)
    t -= 1.0
    np.abs(t, out=t)
    np.subtract(1.0, t, out=t)
    return np.asarray(t, dtype=np.float64)


def _upper_hull(x: FloatArray, y: FloatArray) -> NDArray[np.intp]:
    """Indices of the upper convex hull of points sorted by strictly increasing x.

    Vectorized passes first drop every point on or below the segment joining its
    current neighbours (such a point is never a hull vertex); a monotone chain
    (Andrew 1979) finishes on the few points left.
    """
    idx = np.arange(x.size)
    while idx.size > 64:
        xs, ys = x[idx], y[idx]
        cross = (xs[1:-1] - xs[:-2]) * (ys[2:] - ys[:-2]) - (ys[1:-1] - ys[:-2]) * (
            xs[2:] - xs[:-2]
        )
        keep = np.ones(idx.size, dtype=bool)
        keep[1:-1] = cross < 0.0
        if keep.all():
            break
        shrunk = idx[keep]
        stalled = shrunk.size > 0.9 * idx.size
        idx = shrunk
        if stalled:
            break
    hull: list[int] = []
    xs_list, ys_list = x[idx].tolist(), y[idx].tolist()
    for i, (xi, yi) in enumerate(zip(xs_list, ys_list, strict=True)):
        while len(hull) >= 2:
            j, k = hull[-2], hull[-1]
            # Drop k if it lies on or below the segment j → i.
            turn = (xs_list[k] - xs_list[j]) * (yi - ys_list[j]) - (ys_list[k] - ys_list[j]) * (
                xi - xs_list[j]
            )
            if turn >= 0.0:
                hull.pop()
            else:
                break
        hull.append(i)
    return idx[np.asarray(hull, dtype=np.intp)]


class HalvingCascade:
    """Exact covariance functionals of a halving cascade (see the module docstring).

    Args:
        tree: the tree the cascade lives on (balanced over ``size`` leaves, or a
            perfect tree over a domain padded with zeros).
        size: the real number of cells n ≤ ``tree.n``; ranges lie in [0, n).
        root_variance: r, the variance of the root's noise.
        split_variances: s_0..s_{K−1}.
    """

    def __init__(
        self,
        tree: BalancedTree,
        size: int,
        root_variance: float,
        split_variances: Sequence[float],
    ) -> None:
        if len(split_variances) != tree.depth:
            raise ValueError(f"need {tree.depth} split variances, got {len(split_variances)}")
        if size > tree.n or (size < tree.n and not tree.is_perfect):
            raise ValueError(f"size {size} does not fit {tree!r}")
        self.tree = tree
        self.n = size
        self.root_variance = float(root_variance)
        self.split_variances = tuple(float(s) for s in split_variances)
        v = [self.root_variance]
        for s in self.split_variances:
            v.append(v[-1] / 4.0 + s)
        self.node_variances = tuple(v)  # by depth, 0..K

    # ---- per range -------------------------------------------------------------

    def range_variance(self, starts: IntArray, stops: IntArray) -> FloatArray:
        """Var of the noise sum over [a, b) for each pair (cuts, 0 ≤ a < b ≤ n)."""
        a = np.asarray(starts, dtype=np.int64)
        b = np.asarray(stops, dtype=np.int64)
        shape = np.broadcast_shapes(a.shape, b.shape)
        a = np.broadcast_to(a, shape).ravel()
        b = np.broadcast_to(b, shape).ravel()
        out = np.empty(a.size)
        for i in range(0, a.size, _QUERY_BLOCK):
            sl = slice(i, i + _QUERY_BLOCK)
            out[sl] = self._variance_block(self._slots_of(a[sl]), self._slots_of(b[sl]))
        return out.reshape(shape)

    def _slots_of(self, cuts: IntArray) -> IntArray:
        if self.tree.is_perfect:
            return cuts
        return self._slot_table[cuts].astype(np.int64)

    @cached_property
    def _slot_table(self) -> NDArray[np.signedinteger]:
        """h(j) for j = 0..n (int32 when it fits), built once on first use."""
        h = self._cut_slots()
        return h.astype(np.int32) if self.tree.depth < 31 else h

    def _variance_block(self, ha: IntArray, hb: IntArray) -> FloatArray:
        depth = self.tree.depth
        share = (hb - ha) * (1.0 / (1 << depth))
        var = self.root_variance * share * share
        for d, s in enumerate(self.split_variances):
            shift = depth - d
            mask = (1 << shift) - 1
            da = _tri(ha & mask, 1 << (shift - 1))
            db = _tri(hb & mask, 1 << (shift - 1))
            same = (ha >> shift) == (hb >> shift)
            diff = db - da
            term = np.where(same, diff * diff, da * da + db * db)
            term *= s
            var += term
        return var

    # ---- dense workloads -------------------------------------------------------

    def query_variance(self, weights: FloatArray) -> FloatArray:
        """Var of w·noise for each row w of ``weights`` (shape (q, n)); O(q·n)."""
        w = np.asarray(weights, dtype=np.float64)
        tree = self.tree
        slots = 1 << tree.depth
        cuts = tree.half_positions(np.arange(self.n + 1))
        leaf_of_slot = np.repeat(np.arange(self.n), np.diff(cuts))
        out = np.empty(w.shape[0])
        rows = max(1, (1 << 22) // slots)
        for r0 in range(0, w.shape[0], rows):
            block = np.zeros((min(rows, w.shape[0] - r0), slots))
            block[:, : leaf_of_slot.size] = w[r0 : r0 + rows][:, leaf_of_slot]
            var = np.zeros(block.shape[0])
            for d in range(tree.depth - 1, -1, -1):  # block holds the depth-(d+1) means
                pairs = block.reshape(block.shape[0], -1, 2)
                coef = pairs[:, :, 0] - pairs[:, :, 1]
                var += self.split_variances[d] * np.einsum("ij,ij->i", coef, coef)
                block = pairs.mean(axis=2)
            var += self.root_variance * block[:, 0] ** 2
            out[r0 : r0 + block.shape[0]] = var
        return out

    # ---- all ranges ------------------------------------------------------------

    def all_ranges_total(self) -> float:
        """Σ over all n(n+1)/2 ranges of the exact variance; O(n), no range listed."""
        tree = self.tree
        depth = tree.depth
        cuts = float(self.n + 1)
        h = self._cut_slots()
        w = h * (1.0 / (1 << depth))
        total = self.root_variance * (cuts * float(w @ w) - float(w.sum()) ** 2)
        for d, s in enumerate(self.split_variances):
            for shape in self._shapes(d):
                # Y of a node enters the prefixes cut strictly inside it (D = 0 elsewhere).
                inner = h[shape.start + 1 : min(shape.stop - 1, self.n) + 1]
                dd = _tri(inner - shape.slot_start, shape.slot_width // 2)
                total += shape.count * s * (cuts * float(dd @ dd) - float(dd.sum()) ** 2)
        return total

    def _cut_slots(self) -> IntArray:
        """h(j) for every cut j = 0..n, in O(n)."""
        tree = self.tree
        if tree.is_perfect:
            return np.arange(self.n + 1, dtype=np.int64)
        wide = tree.node_sizes(tree.depth - 1) == 2
        sizes = 1 + wide.astype(np.int64)
        first = np.repeat(2 * np.arange(wide.size, dtype=np.int64), sizes)
        offset = np.arange(self.n, dtype=np.int64) - np.repeat(tree.bottom_starts[:-1], sizes)
        return np.append(first + offset, 1 << tree.depth)

    def all_ranges_max(self) -> float:
        """max over all n(n+1)/2 ranges of the exact variance; O(n log n)."""
        tree = self.tree
        leaf_depths = {tree.depth} if tree.is_perfect else {tree.depth, tree.depth - 1}
        best = max(self.node_variances[d] for d in leaf_depths)
        for d in range(tree.depth):
            for shape in self._shapes(d):
                best = max(best, self._crossing_max(d, shape))
        return best

    def _shapes(self, d: int) -> list[_Shape]:
        """One node per distinct shape at depth d (with how many nodes share it)."""
        tree = self.tree
        width = 1 << (tree.depth - d)
        found: list[_Shape] = []
        if tree.n == self.n and not tree.is_perfect:
            sizes = tree.node_sizes(d)
            starts = tree.node_starts(d)
            values, first, counts = np.unique(sizes, return_index=True, return_counts=True)
            for size, p, count in zip(
                values.tolist(), first.tolist(), counts.tolist(), strict=True
            ):
                s = int(starts[p])
                found.append(_Shape(s, s + (size + 1) // 2, s + size, p * width, width, count))
            return found
        # Perfect tree over a (possibly padded) domain: full nodes, plus the one cut by n.
        if self.n >= width:
            found.append(_Shape(0, width // 2, width, 0, width, self.n // width))
        if self.n % width:
            s = self.n // width * width
            found.append(_Shape(s, s + width // 2, s + width, s, width, 1))
        return found

    def _crossing_max(self, d: int, shape: _Shape) -> float:
        s, mid, e = shape.start, shape.mid, shape.stop
        stop = min(e, self.n)
        if mid >= stop:
            return -math.inf
        hs = shape.slot_start
        hmid = hs + shape.slot_width // 2
        he = hs + shape.slot_width
        a = np.arange(s, mid, dtype=np.int64)
        b = np.arange(mid + 1, stop + 1, dtype=np.int64)
        suffix = self.range_variance(a, np.full_like(a, mid))
        prefix = self.range_variance(np.full_like(b, mid), b)
        alpha = (hmid - self._slots_of(a)) / (hmid - hs)
        gamma = (self._slots_of(b) - hmid) / (he - hmid)
        kappa = self.node_variances[d] / 2.0 - 2.0 * self.split_variances[d]
        order = np.argsort(alpha, kind="stable")  # α decreases with a: this reverses
        xs, ys = alpha[order], suffix[order]
        hull = _upper_hull(xs, ys)
        hx, hy = xs[hull], ys[hull]
        t = kappa * gamma  # maximize P(a) + t·α(a) for each b
        if hull.size == 1:
            best = hy[0] + t * hx[0]
        else:
            slopes = np.diff(hy) / np.diff(hx)  # decreasing along an upper hull
            k = np.searchsorted(-slopes, t, side="left")
            best = np.full(t.shape, -math.inf)
            for shift in (-1, 0, 1):
                i = np.clip(k + shift, 0, hull.size - 1)
                best = np.maximum(best, hy[i] + t * hx[i])
        return float(np.max(best + prefix))
