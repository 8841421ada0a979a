"""The smooth binary mechanism (Andersson & Pagh, NeurIPS 2023).

A binary tree of even height h whose leaves are h-bit numbers; only the leaves
whose index has exactly h/2 one-bits ("balanced") are used. With
b_0 < b_1 < … the balanced numbers in increasing order, the release at step t
is the noisy sum of the dyadic decomposition of the leaf prefix [0, b_t): one
node per 1-bit j of b_t, the node holding leaves with b_t's bits above j and
bit j equal to 0. Every release therefore sums exactly h/2 node noises — the
variance is the same at every step — and h is the smallest even number with
C(h, h/2) > T.

Where the data sits: x_t is stored at leaf b_{t−1}. Then x_t lies in the prefix
[0, b_s) exactly when t ≤ s, so the node sums reproduce every prefix sum, and the
used nodes containing leaf b_{t−1} are the left children on its path at its
h/2 zero bits: the ℓ₁ and ℓ₂² sensitivities of the node vector are (at most)
h/2·Δ and h/2·Δ². (Storing x_t at b_t instead, with the release at t using b_t,
puts x_1 in up to h/2 + 1 used nodes; this is why h needs C(h, h/2) > T, i.e.
T + 1 balanced leaves. The public reference code uses that indexing with
sensitivity h/2 and, moreover, passes the variance h/(4ρ) to numpy's ``normal``
as its standard deviation; both under-noise. dpcount draws from a
:class:`~dpcount.privacy.GaussianNoise` whose parameter is a standard deviation.)

Notation: h = ``height``; b_t = ``_leaf``; node (j, b >> (j+1)).

References:
    * J. D. Andersson, R. Pagh. "A Smooth Binary Mechanism for Efficient
      Private Continual Observation". NeurIPS 2023.
      https://arxiv.org/abs/2306.09666
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_int, state_values
from dpcount._validate import check_integer
from dpcount.counting._process import SourcedNoiseProcess
from dpcount.counting.base import (
    CountingMechanism,
    MemoryEstimate,
    buffered_stream_memory,
)
from dpcount.privacy._statements import noise_statements
from dpcount.privacy.budget import NoiseKind
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    pass

__all__ = [
    "SmoothBinary",
    "SmoothBinaryNoiseProcess",
    "balanced_leaves",
    "next_balanced",
    "smooth_binary_height",
]

# Leaf indices are int64: C(62, 31) − 1 ≈ 4.6e17 steps at most.
_MAX_HEIGHT = 62


def smooth_binary_height(horizon: int) -> int:
    """The smallest even h ≥ 2 with C(h, h/2) > T (T + 1 balanced leaves are needed)."""
    T = check_integer("horizon", horizon, ge=1)
    h = 2
    while math.comb(h, h // 2) <= T:
        h += 2
    if h > _MAX_HEIGHT:
        raise ValueError(f"horizon {T} needs a tree of height {h} > {_MAX_HEIGHT}")
    return h


def next_balanced(b: int) -> int:
    """The next larger integer with the same number of one-bits (Gosper's hack)."""
    low = b & -b
    ripple = b + low
    return ripple | (((ripple ^ b) >> 2) // low)


@lru_cache(maxsize=1)
def _popcount16() -> NDArray[np.uint8]:
    v = np.arange(1 << 16)
    table = np.zeros(1 << 16, dtype=np.uint8)
    for bit in range(16):
        table += ((v >> bit) & 1).astype(np.uint8)
    return table


def _popcount(v: NDArray[np.int64], bits: int) -> NDArray[np.int64]:
    counter = getattr(np, "bitwise_count", None)  # numpy >= 2.0
    if counter is not None:
        return np.asarray(counter(v), dtype=np.int64)
    table = _popcount16()
    out = np.zeros(v.shape, dtype=np.int64)
    for shift in range(0, bits, 16):
        out += table[(v >> shift) & 0xFFFF]
    return out


def balanced_leaves(after: int, n: int, height: int) -> NDArray[np.int64]:
    """The n smallest height-bit integers > ``after`` with height/2 one-bits, in order.

    Scans consecutive integers in chunks with a vectorized popcount; the balanced
    numbers have density ≈ 1/√(π·height/2), so about √(π·h/2)·n integers are read.
    """
    weight = height // 2
    parts: list[NDArray[np.int64]] = []
    found = 0
    start = after + 1
    density = math.comb(height, weight) / 2.0**height
    limit = 1 << height
    while found < n:
        size = min(1 << 22, max(1 << 12, int((n - found) / density * 1.1) + 64))
        stop = min(limit, start + size)
        if start >= stop:
            raise ValueError(f"fewer than {n} balanced leaves of height {height} after {after}")
        v = np.arange(start, stop, dtype=np.int64)
        hit = v[_popcount(v, height) == weight]
        parts.append(hit[: n - found])
        found += min(len(hit), n - found)
        start = stop
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


class SmoothBinaryNoiseProcess(SourcedNoiseProcess):
    """Noise of the smooth binary mechanism for one stream.

    * ``next``: moves the leaf b to the next balanced number (Gosper's hack); the
      nodes at the levels ≤ the highest changed bit that are 1-bits of the new
      leaf are new and get one sample each (amortized O(1) levels per step); the
      others stay. ``_partial[j]`` = Σ of the live node values at levels ≥ j.
    * ``next_many``: the leaves of the chunk (vectorized popcount scan), then a
      top-down pass over their distinct prefixes key = b >> j (sorted, so the
      distinct keys of level j+1 come from those of level j): a node (j, key >> 1)
      for every odd key, D_j(key) = D_{j+1}(key >> 1) + [key odd]·z(node). O(n + h).

    Memory: the current leaf and h/2 node values (×dim).
    """

    def __init__(self, height: int, horizon: int, source: NoiseBuffer) -> None:
        super().__init__(horizon, source)
        self.height = height
        zero: Any = 0.0 if self.dim is None else np.zeros(self.dim)
        self._zero = zero
        self._leaf = (1 << (height // 2)) - 1  # b_0: holds x_1, never released itself
        self._node: list[Any] = [zero] * height  # live node per level (where the bit is 1)
        self._partial: list[Any] = [zero] * (height + 1)

    def live_count(self) -> int:
        return 0 if self._t == 0 else self.height // 2

    def next(self) -> Any:
        if self._t >= self.horizon:
            raise ValueError(f"noise process is at its horizon ({self.horizon} steps)")
        b = self._leaf
        nb = next_balanced(b)
        top = self.height - 1 if self._t == 0 else (b ^ nb).bit_length() - 1
        node, partial, take = self._node, self._partial, self._buffer.take_one
        for j in range(top, -1, -1):
            if (nb >> j) & 1:
                node[j] = take()
                partial[j] = partial[j + 1] + node[j]
            else:
                partial[j] = partial[j + 1]
        self._leaf = nb
        self._t += 1
        return partial[0]

    def next_many(self, n: int) -> NDArray[np.float64]:
        n = check_integer("n", n, ge=1)
        t0 = self._t
        if t0 + n > self.horizon:
            raise ValueError(f"noise process holds {self.horizon} steps, asked for {t0 + n}")
        h = self.height
        tail: tuple[int, ...] = () if self.dim is None else (self.dim,)
        leaves = balanced_leaves(self._leaf, n, h)
        # Distinct prefixes per level, bottom-up.
        keys = [leaves]
        parents: list[NDArray[np.int64]] = []
        for _ in range(h):
            shifted = keys[-1] >> 1
            new = np.empty(len(shifted), dtype=bool)
            new[0] = True
            np.not_equal(shifted[1:], shifted[:-1], out=new[1:])
            parents.append(np.cumsum(new) - 1)
            keys.append(shifted[new])
        # Top-down; keys[h] is [0].
        D: NDArray[np.float64] = np.zeros((1, *tail))
        last_values: list[Any] = [None] * h
        for j in range(h - 1, -1, -1):
            key = keys[j]
            odd = (key & 1).astype(bool)
            vals = np.zeros((len(key), *tail))
            count = int(odd.sum())
            # The first key may be the live node of the current leaf (same node).
            reuse = t0 > 0 and bool(odd[0]) and int(key[0]) == (self._leaf >> j)
            if reuse:
                vals[0] = self._node[j]
            fresh = count - int(reuse)
            if fresh:
                idx = np.flatnonzero(odd)[int(reuse) :]
                vals[idx] = self._buffer.take(fresh)
            last_values[j] = vals[-1]
            D = D[parents[j]] + vals
        # State at the chunk's last leaf.
        b = int(leaves[-1])
        acc: Any = self._zero
        self._partial[h] = acc
        for j in range(h - 1, -1, -1):
            if (b >> j) & 1:
                v = last_values[j]
                self._node[j] = float(v) if self.dim is None else v.copy()
                acc = acc + self._node[j]
            self._partial[j] = acc
        self._leaf = b
        self._t = t0 + n
        return D

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What this process needs to continue exactly: the step, the current leaf, the
        live node per level, their partial sums and the noise buffer."""
        return self._state(
            leaf=self._leaf,
            node=list(self._node),
            partial=list(self._partial),
            buffer=self._buffer.state_dict(),
        )

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same height,
        horizon, sampler and dim), checking every field; see :mod:`dpcount._state`.

        The leaf must be the t-th balanced number after b_0: its rank among the
        h-bit numbers with h/2 one-bits (combinatorial number system) equals t.
        """
        st, t = self._read_state(state, ("leaf", "node", "partial", "buffer"))
        owner, h = self._owner, self.height
        leaf = state_int(owner, "leaf", st["leaf"], 0, (1 << h) - 1)
        bits = [j for j in range(h) if (leaf >> j) & 1]
        rank = sum(math.comb(c, i) for i, c in enumerate(bits, start=1))
        if len(bits) != h // 2 or rank != t:
            raise ValueError(
                f"corrupt {owner} state: leaf {leaf} is not the balanced leaf of step {t}"
            )
        node = state_values(owner, "node", st["node"], self.dim, h)
        partial = state_values(owner, "partial", st["partial"], self.dim, h + 1)
        self._buffer.load_state_dict(st["buffer"])
        self._t, self._leaf, self._node, self._partial = t, leaf, node, partial


@noise_statements
class SmoothBinary(CountingMechanism):
    """Smooth binary mechanism (Andersson & Pagh, NeurIPS 2023), Gaussian noise by default.

    A binary tree of height h, the smallest even number with C(h, h/2) > T, of
    which only the leaves with exactly h/2 one-bits are used (module docstring).

    Formal guarantee:
        [neighbouring: event level]

        Leaf b_{t−1} holds x_t, and the used nodes containing it are the left
        children on its path at its h/2 zero bits, so the node vector has ℓ₁
        sensitivity Δ₁ = (h/2)·Δ and ℓ₂ sensitivity Δ₂ = √(h/2)·Δ (bounds, attained when the
        horizon reaches the last levels; see the module docstring for the leaf indexing
        that makes h/2 — not h/2 + 1 — valid). The release is post-processing of the
        noisy node vector.

        [noise kinds: continuous]

        Exact variance: every release sums exactly h/2 node noises, so Var_t = (h/2)·v at
        every step (v = σ² for Gaussian noise, σ a standard deviation; 2λ² for
        Laplace).

    References:
        * J. D. Andersson, R. Pagh. "A Smooth Binary Mechanism for Efficient
          Private Continual Observation". NeurIPS 2023.
          https://arxiv.org/abs/2306.09666
        * C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum. "Differential privacy under
          continual observation". STOC 2010.
          https://doi.org/10.1145/1806689.1806787
        * T.-H. H. Chan, E. Shi, D. Song. "Private and continual release of
          statistics". ACM TISSEC 14(3), 2011. https://doi.org/10.1145/2043621.2043626
        [noise kinds references]

    Args:
        horizon: T ≥ 1.
        epsilon: ε > 0.
        delta: δ ∈ (0, 1) (needed for Gaussian noise) or None.
        noise: ``"gaussian"`` (default) or ``"laplace"``.
        calibration: Gaussian method (None means ``"analytic"``).
        rng: Generator, int seed (not for production) or None (OS entropy).
        step_sensitivity: Δ.
        step_l2_sensitivity: ℓ₂ bound of a step's change (Laplace with delta, vectors).
    """

    name = "smooth-binary"
    max_noise_coefficient = 1.0

    default_noise = NoiseKind.GAUSSIAN

    def _set_structure(self, horizon: int) -> None:
        self.height = smooth_binary_height(horizon)

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: h node values and h + 1 partial sums, the noise buffer and a step's
        arrays."""
        h = smooth_binary_height(check_integer("horizon", horizon, ge=1))
        return buffered_stream_memory(2 * h + 1, dim)

    def _repr_fields(self) -> dict[str, object]:
        return {"height": self.height}

    def _unit_sensitivities(self) -> tuple[float, float]:
        half = self.height // 2
        return float(half), math.sqrt(half)

    def noise_process(
        self, source: NoiseSource, width: int | None = None
    ) -> SmoothBinaryNoiseProcess:
        return SmoothBinaryNoiseProcess(self.height, self.horizon, NoiseBuffer(source, width))

    def noise_coefficients(self) -> NDArray[np.float64]:
        return np.full(self.horizon, self.height / 2.0)

    def _noise_coefficient_at(self, t: int) -> float:
        return self.height / 2.0

    def mse(self) -> float:
        """Exact MSE = (h/2)·σ² (the variance is the same at every step)."""
        return self.sampler.variance * self.height / 2.0

    def max_variance(self) -> float:
        return self.mse()

    def dense_factorization(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(L, R) over the nodes used by steps 1..T (nodes × T for R); for T ≤ 4096.

        R[node, t] = 1 when leaf b_{t−1} (where x_t sits) lies in the node.
        """
        T = self.horizon
        if T > 4096:
            raise ValueError(f"dense factorization is for horizon <= 4096, got {T}")
        h = self.height
        leaves = [(1 << (h // 2)) - 1]
        for _ in range(T):
            leaves.append(next_balanced(leaves[-1]))
        index: dict[tuple[int, int], int] = {}
        rows: list[list[int]] = []
        for b in leaves[1:]:
            row = []
            for j in range(h):
                if (b >> j) & 1:
                    row.append(index.setdefault((j, b >> (j + 1)), len(index)))
            rows.append(row)
        L = np.zeros((T, len(index)))
        for t, row in enumerate(rows):
            L[t, row] = 1.0
        R = np.zeros((len(index), T))
        for (j, prefix), node in index.items():
            for t in range(T):
                y = leaves[t]
                if (y >> (j + 1)) == prefix and not (y >> j) & 1:
                    R[node, t] = 1.0
        return L, R
