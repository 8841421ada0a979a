"""Binary tree mechanism with Gaussian noise on every node (Dwork, Naor, Pitassi,
Rothblum 2010; Chan, Shi, Song 2011), for static range queries.

Every node of the perfect binary tree over the cells (padded with zero cells to 2^K,
see :mod:`._perfect`) gets its count plus N(0, σ²). A cell lies on K + 1 nodes, so
the ℓ₂ sensitivity is √(K+1) (the number of levels; ℓ₁: K + 1). A range is answered
by the sum of the noisy counts of its canonical decomposition (the fewest nodes
covering it); the answer's variance is exactly σ² × (number of those nodes). The
release is not consistent (answers of overlapping ranges need not agree).

Guarantee: (ε, δ)-DP for histograms differing by at most 1 in one cell.

``noise="discrete-gaussian"``: the node counts of whole-number cells are integers and a
neighbour shifts K + 1 of them by ±1 (ℓ₂ norm √(K+1)); i.i.d. N_Z(0, σ²) added in int64
is ρ-zCDP with ρ = (K+1)/(2σ²) (Canonne, Kamath, Steinke 2020, Thm 14), (ε, δ)-DP by
their Cor. 13. Every node value and every answer is an integer (a sum of noisy node
counts); variances use the exact variance of N_Z(0, σ²).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount.privacy.guarantee import PrivacyGuarantee
from dpcount.ranges._statements import range_statements
from dpcount.ranges.baselines._perfect import PaddedTreeMechanism, level_sums
from dpcount.ranges.mechanism import FloatArray
from dpcount.ranges.release import RangeAnswers, check_weights

__all__ = ["TreeCountModel", "TreeMechanism", "TreeRelease", "canonical_decomposition"]

IntArray = NDArray[np.int64]


def canonical_decomposition(
    depth: int, starts: IntArray, stops: IntArray, node_values: FloatArray | None = None
) -> tuple[FloatArray, IntArray]:
    """Sum of ``node_values`` over, and size of, the canonical decomposition of [a, b).

    Bottom-up on the heap layout (root 1, leaves 2^depth + i), vectorized over ranges;
    with ``node_values=None`` only the number of nodes is meaningful.
    """
    a = np.asarray(starts, dtype=np.int64)
    b = np.asarray(stops, dtype=np.int64)
    shape = np.broadcast_shapes(a.shape, b.shape)
    lo = np.broadcast_to(a, shape).ravel() + (1 << depth)
    hi = np.broadcast_to(b, shape).ravel() + (1 << depth)
    total = np.zeros(lo.shape)
    count = np.zeros(lo.shape, dtype=np.int64)
    for _ in range(depth + 1):
        take = (lo < hi) & ((lo & 1) == 1)
        if node_values is not None:
            total += np.where(take, node_values.take(lo, mode="clip"), 0.0)
        count += take
        lo = lo + take
        take = (lo < hi) & ((hi & 1) == 1)
        hi = hi - take
        if node_values is not None:
            total += np.where(take, node_values.take(hi, mode="clip"), 0.0)
        count += take
        lo >>= 1
        hi >>= 1
    return total.reshape(shape), count.reshape(shape)


def maximal_nodes(depth: int, weights: FloatArray) -> list[NDArray[np.bool_]]:
    """Per depth (root first): the nodes inside a 0/1 query's set whose parent is not."""
    if not np.isin(weights, (0.0, 1.0)).all():
        raise ValueError("the tree mechanism answers 0/1 (subset) queries only")
    rows = weights.shape[0]
    covered = np.zeros((rows, 1 << depth), dtype=bool)
    covered[:, : weights.shape[1]] = weights == 1.0
    levels = [covered]
    for _ in range(depth):
        pairs = levels[0].reshape(rows, -1, 2)
        levels.insert(0, pairs[:, :, 0] & pairs[:, :, 1])
    maximal = [levels[0]]
    for d in range(1, depth + 1):
        maximal.append(levels[d] & ~np.repeat(levels[d - 1], 2, axis=1))
    return maximal


class TreeCountModel:
    """Exact error of the tree mechanism: node variance × number of nodes used."""

    def __init__(self, depth: int, size: int, node_variance: float) -> None:
        self.depth = depth
        self.n = size
        self.node_variance = float(node_variance)

    def range_variance(self, starts: IntArray, stops: IntArray) -> FloatArray:
        count = canonical_decomposition(self.depth, starts, stops)[1]
        return self.node_variance * count.astype(np.float64)

    def query_variance(self, weights: FloatArray) -> FloatArray:
        count = sum(m.sum(axis=1) for m in maximal_nodes(self.depth, weights))
        return self.node_variance * np.asarray(count, dtype=np.float64)

    def all_ranges_total(self) -> float:
        """σ²·Σ_u #{ranges whose decomposition uses u}, in O(n).

        Node u = [s, e) is used by [a, b) iff [a, b) ⊇ u but not u's parent p; with
        c(v) = (s_v + 1)(n − e_v + 1) ranges ⊇ v (0 if v leaves [0, n)), that is
        c(u) − c(p).
        """
        n = self.n
        covers = []
        for d in range(self.depth + 1):
            width = 1 << (self.depth - d)
            s = np.arange(1 << d, dtype=np.float64) * width
            e = s + width
            covers.append(np.where(e <= n, (s + 1.0) * (n - e + 1.0), 0.0))
        total = covers[0].sum()
        for d in range(1, self.depth + 1):
            total += (covers[d] - np.repeat(covers[d - 1], 2)).sum()
        return self.node_variance * float(total)

    def all_ranges_max(self) -> float:
        """σ² × the largest canonical decomposition over all ranges, in O(n log n).

        Crossing the midpoint of a node of width w: a suffix of its left child
        ([a, mid) uses popcount(mid − a) nodes) plus a prefix of its right child
        (popcount(b − mid)), except the whole node (one node).
        """
        n, best = self.n, 1
        for d in range(self.depth):
            width = 1 << (self.depth - d)
            half = width // 2
            for start in sorted({0, (n // width) * width}):
                mid = start + half
                if mid >= n or width == 2:
                    continue
                suffix = _popcount(half)
                right = min(half, n - mid)
                prefix = _popcount(right)
                whole_possible = right == half
                best_here = int(suffix[:-1].max(initial=0) + prefix.max())
                if whole_possible:
                    best_here = max(best_here, int(suffix[-1] + prefix[:-1].max(initial=0)))
                else:
                    best_here = max(best_here, int(suffix[-1] + prefix.max()))
                best = max(best, best_here)
        return self.node_variance * best


def _popcount(m: int) -> IntArray:
    """popcount(L) for L = 1..m."""
    values = np.arange(1, m + 1, dtype=np.int64)
    count = np.zeros(m, dtype=np.int64)
    while values.any():
        count += values & 1
        values >>= 1
    return count


class TreeRelease(RangeAnswers):
    """Binary-tree release: a noisy count for every node of the perfect tree over 2^K cells.

    Not consistent: a range is answered by summing the noisy counts of its canonical
    decomposition. ``node_values`` is the heap array (root at 1, leaves at 2^K + i).
    """

    def __init__(
        self,
        node_values: FloatArray,
        model: TreeCountModel,
        privacy: PrivacyGuarantee | None,
    ) -> None:
        self.node_values = node_values
        self.node_values.flags.writeable = False
        self.depth = model.depth
        self.shape = (model.n,)
        self._model = model
        self.privacy = privacy
        self.mechanism = "tree"

    def __repr__(self) -> str:
        return f"TreeRelease(shape={self.shape}, depth={self.depth})"

    @property
    def values(self) -> FloatArray:
        """The noisy leaf counts (the answers of single-cell ranges)."""
        start = 1 << self.depth
        return self.node_values[start : start + self.shape[0]]

    def _answer(self, *cuts: IntArray) -> FloatArray:
        return canonical_decomposition(self.depth, cuts[0], cuts[1], self.node_values)[0]

    def _variance(self, *cuts: IntArray) -> FloatArray:
        return self._model.range_variance(cuts[0], cuts[1])

    def answer(self, weights: Any) -> FloatArray:
        """Answers of 0/1 queries: sums of the noisy counts of their maximal covered nodes."""
        w = check_weights(weights, self.shape)
        out = np.zeros(w.shape[0])
        for d, mask in enumerate(maximal_nodes(self.depth, w)):
            out += mask @ self.node_values[1 << d : 2 << d]
        return out

    def query_variance(self, weights: Any) -> FloatArray:
        """Exact variance of :meth:`answer`."""
        return self._model.query_variance(check_weights(weights, self.shape))

    def max_abs_range_sum(self) -> float:
        """max over all ranges of |answer|, exactly, in O(n log n).

        A range that is not a whole node crosses the midpoint of exactly one node u:
        its decomposition is the canonical suffix S(a) of u's left child plus the
        canonical prefix P(b) of its right child. S and P are built bottom-up for all
        cells; the best crossing pair per node is a max of S plus a max of P (or the
        min of both), excluding the pair (a, b) = u, which is answered by u's count.
        With x = 0 this is Def. 3.13's inner maximum for one draw.
        """
        n, depth = self.shape[0], self.depth
        t = self.node_values
        width = 1 << depth
        # Whole nodes inside [0, n): at depth d the first ⌊n/2^{K−d}⌋ (at least the leaves).
        best = max(
            float(np.max(np.abs(t[(1 << d) : (1 << d) + (n >> (depth - d))])))
            for d in range(depth + 1)
            if n >> (depth - d)
        )
        # S, P at depth K: one leaf. P's entry for cell i is the prefix ending at i.
        suffix = t[width : 2 * width].copy()
        prefix = suffix.copy()
        real_end = np.arange(width) < n
        for d in range(depth - 1, -1, -1):
            w = 1 << (depth - d)  # node width at depth d
            nodes = t[(1 << d) : (2 << d)]
            children = t[(2 << d) : (4 << d)].reshape(-1, 2)
            s = suffix.reshape(-1, 2, w // 2)
            p = prefix.reshape(-1, 2, w // 2)
            real = real_end.reshape(-1, 2, w // 2)[:, 1, :]
            best = max(best, _crossing(s[:, 0, :], p[:, 1, :], real, w))
            s = s.copy()
            s[:, 0, :] += children[:, 1][:, None]
            s[:, 0, 0] = nodes
            p = p.copy()
            p[:, 1, :] += children[:, 0][:, None]
            p[:, 1, -1] = nodes
            suffix = s.reshape(-1)
            prefix = p.reshape(-1)
        return best


def _crossing(suf: FloatArray, pre: FloatArray, real: NDArray[np.bool_], width: int) -> float:
    """max |S(a) + P(b)| over crossing pairs of each node, excluding the whole node."""
    if width == 2:  # children are leaves: the only crossing pair is the node itself
        return -math.inf
    hi_pre = np.where(real, pre, -np.inf)
    lo_pre = np.where(real, pre, np.inf)
    best = -math.inf
    # a ≠ start with any real b; a = start with b ≠ end (the last, whole, prefix).
    for s_part, p_hi, p_lo in (
        (suf[:, 1:], hi_pre, lo_pre),
        (suf[:, :1], hi_pre[:, :-1], lo_pre[:, :-1]),
    ):
        top = s_part.max(axis=1) + p_hi.max(axis=1)
        bottom = s_part.min(axis=1) + p_lo.min(axis=1)
        vals = np.concatenate((top[np.isfinite(top)], -bottom[np.isfinite(bottom)]))
        if vals.size:
            best = max(best, float(vals.max()))
    return best


@range_statements
class TreeMechanism(PaddedTreeMechanism):
    """Noisy counts on every node of a binary tree (1-D). Arguments as for the others.

    Formal guarantee:
        [range neighbouring relation]

        Every node of the perfect binary tree over the cells (padded with public zero
        cells to 2^K) gets its count plus independent noise; a cell lies on K + 1
        nodes, so the node vector has ℓ₂ sensitivity √(K+1) (ℓ₁: K + 1). Answers are
        sums of noisy node counts: post-processing.

        [range noise kinds: all; Δ₂ = √(K+1)]

        Exact variance: a range's answer has variance v × (the number of nodes of its
        canonical decomposition), v the variance of one node noise (σ², or the exact
        variance of N_Z(0, σ²)).

    References:
        * C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum. "Differential privacy under
          continual observation". STOC 2010.
          https://doi.org/10.1145/1806689.1806787
        * T.-H. H. Chan, E. Shi, D. Song. "Private and continual release of
          statistics". ACM TISSEC 14(3), 2011. https://doi.org/10.1145/2043621.2043626
        * M. Hay, V. Rastogi, G. Miklau, D. Suciu. "Boosting the accuracy of
          differentially private histograms through consistency". PVLDB 3(1–2), 2010.
          https://arxiv.org/abs/0904.0942
        [noise kinds references]
    """

    name = "tree"

    def _release(self, x: FloatArray, rng: np.random.Generator) -> TreeRelease:
        heap = np.zeros(2 << self.depth)
        for d, counts in enumerate(level_sums(x, self.depth)):
            heap[1 << d : 2 << d] = self._noisy(counts, rng)
        model = self.noise_model
        if not isinstance(model, TreeCountModel):  # pragma: no cover - set by _build_model
            raise TypeError("tree mechanism without its count model")
        return TreeRelease(heap, model, self.privacy)

    def _build_model(self) -> TreeCountModel:
        return TreeCountModel(self.depth, self.shape[0], self._sampler.variance)
