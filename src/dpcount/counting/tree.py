"""k-ary tree mechanisms, with and without subtraction (count-on-your-elders §3–4).

Notation (paper → code):

| paper | code |
|---|---|
| k | ``k`` (branching) |
| h | ``height``: ⌈log_k(T+1)⌉ (Alg. 1) or ⌈log_k 2T⌉ (Alg. 2) |
| rep_k(t, h), t̂ | :class:`~dpcount.counting.digits.DigitSystem` digits |
| z_p | noise of the node reached at prefix p (Alg. 2 line 11) |
| Lap(h/ε) | node noise; ℓ₁ sensitivity h·Δ, ℓ₂ sensitivity √h·Δ |

How the noise is produced. A node at level ℓ is identified by its parent Q at
level ℓ+1 and a digit j ≠ 0: it is the j-th child to the right of Q's left end
(j > 0, added) or the |j|-th to the left (j < 0, subtracted in Alg. 3, added with a
fresh symmetric sample in Alg. 2 — Proposition 12). The noise of step t with
digits d_ℓ and ancestors q_ℓ is Σ_ℓ C_ℓ(q_{ℓ+1}, d_ℓ) with C(Q, d) the sum of
Q's children's noise for j = 1..d (d > 0) or j = d..−1 (d < 0).

* Batch (``next_many``): one top-down pass over levels. Each level's partial
  noise P_ℓ(q) = P_{ℓ+1}(Q) + C(Q, d) is a (parents × k) array (parent values
  broadcast over the row, C by a cumulative sum along the row) reshaped to the
  contiguous range of ancestors q: O(T) work and ~T samples in total.
* Stream (``next``): a k-ary counter with offset digits. Per level it keeps the
  running sums C(Q, j) for j between 0 and the current digit — exactly the node
  values still in use (Proposition 16), at most h·max(|low|, high) values, i.e.
  h(k−1)/2 for odd k with subtraction (Lemma 17). A node's sample is drawn the
  first time it is used and never again; amortized O(1) levels change per step.

References:
    * J. D. Andersson, R. Pagh, T. A. Steiner, S. Torkamani. "Count on Your
      Elders: Laplace vs Gaussian Noise". FORC 2025 (LIPIcs 329).
      https://arxiv.org/abs/2408.07021
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_int, state_values
from dpcount._validate import check_integer
from dpcount.counting._process import SourcedNoiseProcess
from dpcount.counting._steps import grid_table_bytes
from dpcount.counting.base import (
    CountingMechanism,
    MemoryEstimate,
    buffered_stream_memory,
)
from dpcount.counting.digits import DigitSystem, max_digit_l1_norm
from dpcount.counting.participation import Sensitivity, tree_sensitivities
from dpcount.privacy._statements import noise_statements
from dpcount.privacy.budget import Budget, BudgetFields, Participation
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

# Steps per block of per-step variances (iter_variances): bounded memory.
_NORM_BLOCK = 4096
#: next_many's general levels are computed in chunks of about this many node values
#: (rows × k × dim): a chunk's sums and parent additions while it is in cache. At T = 10^6,
#: k = 19 with subtraction, level 0 took 4.07 ms whole and 3.78 / 3.94 / 3.94 ms in chunks
#: of 4096 / 2048 / 8192 rows (the same floats: the same additions in the same order).
_LEVEL_VALUES = 4096 * 19

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["BinaryTree", "KaryTree", "TreeNoiseProcess"]


def _cumsum_axis1(values: NDArray[Any], out: NDArray[Any]) -> None:
    """``np.cumsum(values, axis=1, out=out)`` by one add per digit: the same additions in
    the same order (so the same bits), but numpy accumulates along a middle axis of a
    (rows, k, dim) array ~50x slower than these k whole-slice adds."""
    out[:, 0] = values[:, 0]
    for j in range(1, values.shape[1]):
        np.add(out[:, j - 1], values[:, j], out=out[:, j])


class TreeNoiseProcess(SourcedNoiseProcess):
    """Noise of the (offset-digit) k-ary tree for one stream; see the module docstring."""

    def __init__(self, system: DigitSystem, height: int, source: NoiseBuffer) -> None:
        super().__init__(system.capacity(height), source)
        self.system = system
        self.height = height
        sampler, dim = source.sampler, source.dim
        # Integer samplers: exact int64 arithmetic (Python ints for scalar streams), so
        # the release S_t + noise is exactly the integer sum of noisy node values.
        self._integer = bool(getattr(sampler, "integer", False))
        self._dtype: type[np.generic] = np.int64 if self._integer else np.float64
        # A step's noise sums at most h·max(|low|, high) samples; samples up to this
        # bound keep it within 2^62 (and the int64 data sums within 2^61), so no int64
        # operation can overflow.
        terms = max(1, height * max(-system.low, system.high))
        self._sample_limit = 2**62 // terms
        self._low, self._high = system.low, system.high
        self._digits = [0] * height
        # Per level: running sums C(Q, 1..d) (d > 0) or C(Q, -1..d) (d < 0) for the
        # current parent Q and digit d; the last one is the level's contribution.
        self._sums: list[list[Any]] = [[] for _ in range(height)]
        # _partial[ℓ] = noise from levels ≥ ℓ at the current step; _partial[h] = 0.
        zero: Any = (0 if self._integer else 0.0) if dim is None else np.zeros(dim, self._dtype)
        self._partial: list[Any] = [zero] * (height + 1)
        self._zero = zero

    def live_count(self) -> int:
        return sum(len(s) for s in self._sums)

    def _checked(self, values: Any) -> Any:
        """Integer samples within the overflow bound (``_sample_limit``), else OverflowError."""
        if self._integer:
            if isinstance(values, np.ndarray):
                # max and min: two reductions without the temporary of |values|
                big = values.size > 0 and max(int(values.max()), -int(values.min())) > (
                    self._sample_limit
                )
            else:
                big = abs(values) > self._sample_limit
            if big:
                raise OverflowError(
                    "an integer noise sample exceeds the int64-safe bound "
                    f"{self._sample_limit} for this tree; use a smaller noise scale"
                )
        return values

    def _take_one(self) -> Any:
        return self._checked(self._buffer.take_one())

    def _take(self, n: int) -> NDArray[Any]:
        return self._checked(self._buffer.take(n))  # type: ignore[no-any-return]

    def next(self) -> Any:
        low, high = self._low, self._high
        digits, sums, partial = self._digits, self._sums, self._partial
        # continuous samples need no overflow check: the buffer's own method
        take = self._take_one if self._integer else self._buffer.take_one
        d = digits[0] + 1
        if d <= high:  # no carry at level 0 (most steps): one level changes
            digits[0] = d
            s = sums[0]
            if d > 0:
                s.append(s[-1] + take() if s else take())
                partial[0] = partial[1] + s[-1]
            else:
                s.pop()
                partial[0] = partial[1] + s[-1] if s else partial[1]
            self._t += 1
            return partial[0]
        level = 0
        while True:
            d = digits[level] + 1
            if d <= high:  # no carry
                digits[level] = d
                s = sums[level]
                if d > 0:
                    s.append(s[-1] + take() if s else take())
                else:
                    s.pop()
                break
            # Carry: a new parent at this level, starting at the lowest digit, whose
            # |low| subtracted children are all in use from now on.
            digits[level] = low
            fresh: list[Any] = []
            for _ in range(-low):
                fresh.append(fresh[-1] + take() if fresh else take())
            sums[level] = fresh
            level += 1
            if level == self.height:
                raise ValueError(f"tree of height {self.height} is full at step {self._t}")
        for j in range(level, -1, -1):
            s = sums[j]
            partial[j] = partial[j + 1] + s[-1] if s else partial[j + 1]
        self._t += 1
        return partial[0]

    def next_many(self, n: int) -> NDArray[np.float64]:
        n = check_integer("n", n, ge=1)
        system, k, low, high = self.system, self.system.k, self.system.low, self.system.high
        h, c0 = self.height, -system.low  # c0: column of digit 0
        t0 = self._t
        if t0 + n > system.capacity(h):
            raise ValueError(
                f"tree of height {h} holds {system.capacity(h)} steps, asked for {t0 + n}"
            )
        now = system.ancestors(t0, h)
        first = system.ancestors(t0 + 1, h)
        last = system.ancestors(t0 + n, h)
        tail: tuple[int, ...] = () if self.dim is None else (self.dim,)
        # Levels whose ancestor stays the same through the chunk add a constant:
        # start below them, from their known partial noise.
        top = h
        while top > 0 and now[top - 1] == last[top - 1]:
            top -= 1
        parent_noise = np.asarray(self._partial[top], dtype=self._dtype).reshape(1, *tail)
        for level in range(top - 1, -1, -1):
            q_first, q_last = first[level + 1], last[level + 1]
            rows = q_last - q_first + 1
            # the samples first, then the level's array: the order glibc's heap reuses
            # best (a release at T = 10^6 faulted ~2300 fresh pages, now ~300-500)
            pos = self._take(rows * high).reshape(rows, high, *tail)
            sums = np.empty((rows, k, *tail), dtype=self._dtype)
            if k == 2 and not c0:  # the binary tree: digit 1 adds one node, z + P at once
                self._binary_level(level, pos, sums, parent_noise, q_first == now[level + 1])
                d_end = last[level] - k * q_last
                start = first[level] - k * q_first
                parent_noise = sums.reshape(rows * k, *tail)[
                    start : start + last[level] - first[level] + 1
                ]
                self._digits[level] = d_end
                # the last parent's digit-1 node (before its parent's noise), if in use
                self._sums[level] = [self._live_node] if d_end > 0 else []
                continue
            row = self._general_level(level, pos, sums, parent_noise, q_first == now[level + 1])
            # State at t0 + n for this level: digit and running sums under the last parent.
            d_end = last[level] - k * q_last
            start = first[level] - (k * q_first + low)
            parent_noise = sums.reshape(rows * k, *tail)[
                start : start + last[level] - first[level] + 1
            ]
            self._digits[level] = d_end
            # copies of the live values only: views would keep the whole row of k alive
            if d_end > 0:
                self._sums[level] = list(row[c0 + 1 : c0 + 1 + d_end].copy())
            elif d_end < 0:
                self._sums[level] = list(row[c0 + d_end : c0][::-1].copy())
            else:
                self._sums[level] = []
        # Refresh the per-level partial noise at the new current step.
        for j in range(top - 1, -1, -1):
            s = self._sums[j]
            self._partial[j] = self._partial[j + 1] + s[-1] if s else self._partial[j + 1]
        self._t = t0 + n
        return np.ascontiguousarray(parent_noise)

    def _general_level(
        self,
        level: int,
        pos: NDArray[Any],
        sums: NDArray[Any],
        parent: NDArray[Any],
        current: bool,
    ) -> NDArray[Any]:
        """:meth:`next_many`'s level for a general digit system: each parent row's node
        running sums (digits above 0 from ``pos``, below 0 from samples drawn here), then
        the parent's noise added, in chunks of rows (each while in cache: the same
        additions in the same order); ``current``: the first parent is the one in use,
        whose live nodes are reused. Returns the last row's running sums before the
        parent's noise (0 at digit 0)."""
        c0, rows, tail = -self.system.low, len(sums), pos.shape[2:]
        neg = self._take(rows * c0).reshape(rows, c0, *tail) if c0 else None
        row = np.empty(0, dtype=self._dtype)
        step = max(1, _LEVEL_VALUES // (sums.shape[1] * (self.dim or 1)))
        for a in range(0, rows, step):
            b = min(rows, a + step)
            part = sums[a:b]
            _cumsum_axis1(pos[a:b], part[:, c0 + 1 :])
            if neg is not None:
                _cumsum_axis1(neg[a:b], part[:, c0 - 1 :: -1])
            if a == 0 and current:
                self._reuse_live(level, sums[0], pos[0])
            if b == rows:  # the last parent's running sums, before its noise
                row = sums[-1].copy()
                row[c0] = 0
            p = parent if len(parent) == 1 else parent[a:b]
            # digit 0 adds no node: the parent's noise (0 + P, as the other digits add
            # theirs; P + 0 before: addition commutes, the same value and sign of zero),
            # then one addition over the whole chunk (three strided ones took 3x longer)
            part[:, c0] = 0
            np.add(part, p[:, None], out=part)
        return row

    def _reuse_live(self, level: int, first: NDArray[Any], pos: NDArray[Any]) -> None:
        """The first parent row of a level is the current parent: its node values in use
        replace the fresh running sums (``pos``: that row's positive-digit samples)."""
        c0 = -self.system.low
        d_now, live = self._digits[level], self._sums[level]
        if d_now > 0:
            first[c0 + 1 : c0 + 1 + d_now] = live
            first[c0 + 1 + d_now :] = live[-1] + np.cumsum(pos[d_now:], axis=0)
        elif d_now < 0:
            first[c0 + d_now : c0][::-1] = live

    def _binary_level(
        self, level: int, pos: NDArray[Any], sums: NDArray[Any], parent: NDArray[Any], current: bool
    ) -> None:
        """:meth:`next_many`'s level for k = 2 without subtraction: column 0 is the parent's
        noise P (+ 0), column 1 is z + P, one addition per node (the general level adds z
        to C = z, then P: the same floats). ``current``: the first parent is the one in
        use, whose digit-1 node (if drawn) is reused. Sets ``_live_node``, the last row's
        digit-1 node before P."""
        np.add(pos[:, 0], parent, out=sums[:, 1])
        self._live_node = pos[-1, 0].copy()
        if current and self._digits[level] > 0:  # the node in use, not the fresh draw
            live = self._sums[level][0]
            sums[0, 1] = live + parent[0]
            if len(sums) == 1:
                self._live_node = live
        np.add(parent, self._dtype(0), out=sums[:, 0])

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What this process needs to continue exactly: the step, its digits, the live
        node sums per level, the partial noise per level and the noise buffer."""
        return self._state(
            digits=list(self._digits),
            sums=[list(s) for s in self._sums],
            partial=list(self._partial),
            buffer=self._buffer.state_dict(),
        )

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same digit system,
        height, sampler and dim), checking every field; see :mod:`dpcount._state`."""
        st, t = self._read_state(state, ("digits", "sums", "partial", "buffer"))
        owner, system, h = self._owner, self.system, self.height
        digits = st["digits"]
        if not isinstance(digits, list) or len(digits) != h:
            raise ValueError(f"corrupt {owner} state: digits must be a list of {h} ints")
        digits = [
            state_int(owner, f"digits[{j}]", d, system.low, system.high)
            for j, d in enumerate(digits)
        ]
        if digits != system.digits(t, h):
            raise ValueError(f"corrupt {owner} state: digits {digits} do not spell step {t}")
        sums_in = st["sums"]
        if not isinstance(sums_in, list) or len(sums_in) != h:
            raise ValueError(f"corrupt {owner} state: sums must be a list of {h} lists")
        sums = [
            state_values(owner, f"sums[{j}]", s, self.dim, abs(digits[j]))
            for j, s in enumerate(sums_in)
        ]
        partial = state_values(owner, "partial", st["partial"], self.dim, h + 1)
        self._buffer.load_state_dict(st["buffer"])
        if self._integer:
            self._check_integer_state(st["buffer"]["pending"], sums, partial)
        self._t, self._digits, self._sums, self._partial = t, digits, sums, partial

    def _check_integer_state(
        self, pending: NDArray[np.int64], sums: list[list[Any]], partial: list[Any]
    ) -> None:
        """Integer streams: the loaded values within the bounds the process keeps (every
        sample within ``_sample_limit``, a node sum of i samples within i times it, the
        partial noise the sum of the levels' last node sums), so no int64 operation of a
        later step can overflow."""
        owner, limit = "TreeNoiseProcess", self._sample_limit

        def peak(value: Any) -> int:
            return (
                int(np.max(np.abs(value), initial=0))
                if isinstance(value, np.ndarray)
                else abs(value)
            )

        if peak(pending) > limit:  # the buffer's checked int64 array
            raise ValueError(f"corrupt {owner} state: a buffered sample exceeds {limit}")
        for j, level in enumerate(sums):
            for i, value in enumerate(level):
                if peak(value) > (i + 1) * limit:
                    raise ValueError(
                        f"corrupt {owner} state: sums[{j}][{i}] exceeds {(i + 1) * limit}"
                    )
        expect: Any = partial[self.height]
        if peak(expect) != 0:
            raise ValueError(f"corrupt {owner} state: partial[{self.height}] must be 0")
        for j in range(self.height - 1, -1, -1):
            if sums[j]:
                expect = expect + sums[j][-1]
            if not np.array_equal(partial[j], expect):
                raise ValueError(
                    f"corrupt {owner} state: partial[{j}] is not the sum of the levels above"
                )


class KaryTree(CountingMechanism):
    """k-ary tree mechanism, optionally with subtraction (count-on-your-elders Alg. 1/2).

    * ``subtract=False``: Algorithm 1, the k-ary tree of height h = ⌈log_k(T+1)⌉;
      k = 2 is the binary tree mechanism.
    * ``subtract=True``: Algorithm 2 with offset digits (Definition 10) for odd
      k ≥ 3, height h = ⌈log_k 2T⌉; for even k the digits of Definition 28
      (App. C); for k = 2 this coincides with Algorithm 1.

    Formal guarantee:
        Neighbouring relation: event level — two streams that differ at one step by
        at most Δ = ``step_sensitivity`` (the ℓ₁ norm of the change for Laplace
        noise, its ℓ₂ norm for Gaussian noise). Every step lies in exactly one node
        of each of the h levels used (count-on-your-elders Lemmas 7, 13), so the node
        vector has ℓ₁ sensitivity h·Δ and ℓ₂ sensitivity √h·Δ
        (:meth:`sensitivity_profile`: h changed nodes); the release is
        post-processing of the noisy node vector. Per noise kind:

        * ``"laplace"``: pure ε-DP with scale λ = hΔ/ε (Laplace mechanism, Dwork,
          McSherry, Nissim, Smith 2006); with a delta, (ε, δ)-DP by
          count-on-your-elders Theorem 3, or with ``calibration="pld"`` by the
          privacy loss distribution of the h changed nodes (``dpcount[accounting]``;
          scalar steps) — whichever valid rule needs the least noise.
        * ``"gaussian"`` (needs delta): (ε, δ)-DP, σ for ℓ₂ sensitivity √h·Δ by the
          analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8; default),
          ``"classic"`` (Dwork & Roth 2014, Thm A.1) or ``"fhu"`` (constant-matters
          eq. 2).
        * ``"discrete-laplace"``: pure ε-DP with ε = hΔ/t exactly (geometric
          mechanism, Ghosh, Roughgarden, Sundararajan 2009; exact sampler of
          Canonne, Kamath, Steinke 2020, Alg. 2); with a delta, Theorem 3 when that
          needs less noise.
        * ``"discrete-gaussian"`` (needs delta): ρ-zCDP with ρ = hΔ²/(2σ²)
          (Canonne, Kamath, Steinke 2020, Thm 14), reported as (ε, δ)-DP by their
          Corollary 13.

        Exact variance: the release at t sums ‖digits(t)‖₁ independent node noises,
        so Var_t = v·‖digits(t)‖₁ with v the variance of one node noise (2λ² for
        Laplace, σ² for Gaussian, the exact variance of the discrete sampler); the
        mean over t equals Lemma 8 at T = k^h − 1, Lemma 14 at T = (k^h − 1)/2 and
        Claim 29's recursion for even k.

    Integer noise (recommended for production; not attackable through
    floating-point rounding, Mironov 2012): node sums of whole-number steps are
    integers, so the discrete kinds apply with a whole-number Δ and the release is
    int64. The continuous kinds use floating-point samplers.

    References:
        * J. D. Andersson, R. Pagh, T. A. Steiner, S. Torkamani. "Count on Your
          Elders: Laplace vs Gaussian Noise". FORC 2025 (LIPIcs 329).
          https://arxiv.org/abs/2408.07021
        * C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum. "Differential privacy under
          continual observation". STOC 2010.
          https://doi.org/10.1145/1806689.1806787
        * T.-H. H. Chan, E. Shi, D. Song. "Private and continual release of
          statistics". ACM TISSEC 14(3), 2011. https://doi.org/10.1145/2043621.2043626
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530
        * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
          Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010

    Args:
        horizon: T, the number of steps (≥ 1).
        epsilon: ε > 0.
        k: branching factor (≥ 2); k = 19 minimizes Lemma 14's leading constant.
        subtract: use offset digits (Algorithm 2).
        delta: None for pure ε-DP, else δ ∈ (0, 1).
        noise: ``"laplace"``, ``"gaussian"``, ``"discrete-laplace"`` or
            ``"discrete-gaussian"``.
        rng: None (cryptographically secure generator keyed from OS entropy; for
            production), or a Generator / int seed (research and tests only).
        step_sensitivity: Δ, the largest change of one step.
        calibration: Gaussian method (``"analytic"``, ``"classic"``, ``"fhu"``);
            ``"theorem3"`` or ``"pld"`` for Laplace noise with a delta.
        step_l2_sensitivity: ℓ₂ bound of one step's change for Laplace noise with a
            delta and vector steps (defaults to ``step_sensitivity``).
    """

    def __init__(
        self,
        horizon: int,
        *,
        k: int = 19,
        subtract: bool = True,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        self.k = check_integer("k", k, ge=2)
        if not isinstance(subtract, bool):
            raise TypeError(f"subtract must be a bool, got {subtract!r}")
        self.subtract = subtract
        super().__init__(horizon, budget=budget, rng=rng, **fields)

    def _set_structure(self, horizon: int) -> None:
        self.digit_system = DigitSystem.for_tree(self.k, self.subtract)
        self.height = self.digit_system.height(check_integer("horizon", horizon, ge=1))

    @property
    def name(self) -> str:  # type: ignore[override]
        if self.k == 2 and not self.subtract:
            return "binary"
        return f"kary-{self.k}" + ("-sub" if self.subtract else "")

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: per level up to max|digit| node sums and one partial sum (h levels),
        the noise buffer and a step's arrays. Structure: the float-safe grid table a
        batch release with continuous noise builds and keeps (the grid changes every
        few steps: up to 16 bytes a step to 2^22 steps, 1/g of every step and the grids;
        beyond, a cost of a release of ≥ T/8 steps, not counted:
        :func:`~dpcount.counting._steps.grid_table_bytes`; none with integer noise,
        which this bound does not tell apart)."""
        k, subtract = options.get("k", 19), options.get("subtract", True)
        system = DigitSystem.for_tree(check_integer("k", k, ge=2), bool(subtract))
        h = system.height(check_integer("horizon", horizon, ge=1))
        stream = buffered_stream_memory(h * max(-system.low, system.high) + h + 1, dim)
        return MemoryEstimate(structure=grid_table_bytes(horizon), stream=stream.stream)

    def _memory_options(self) -> dict[str, Any]:
        return {"k": self.k, "subtract": self.subtract}

    def _repr_fields(self) -> dict[str, object]:
        return {"k": self.k, "subtract": self.subtract, "height": self.height}

    supports_discrete_noise = True
    integer_release = True
    #: every node enters a release with coefficient ±1
    max_noise_coefficient = 1.0

    def _config_kwargs(self) -> dict[str, Any]:
        return {**super()._config_kwargs(), "k": self.k, "subtract": self.subtract}

    def _unit_sensitivities(self) -> tuple[float, float]:
        return float(self.height), float(np.sqrt(self.height))

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """Under (k, b)-participation: the node vector is the 0/1 incidence of the nodes
        (aligned blocks of k^ℓ steps) the releases use, so its Gram matrix is ≥ 0 and
        both values are exact for T ≤ 4096 (certified bounds beyond)
        (:func:`~dpcount.counting.participation.tree_sensitivities`; cached: the same
        tree with Laplace and Gaussian noise, as ``compare`` builds it, forms its Gram
        matrix once)."""
        return _tree_sensitivities(self.horizon, self.digit_system, self.height, schema)

    def sensitivity_profile(self) -> NDArray[np.float64]:
        """A unit change at one step changes one node per level: h ones."""
        return np.ones(self.height)

    def noise_process(self, source: NoiseSource, width: int | None = None) -> TreeNoiseProcess:
        return TreeNoiseProcess(self.digit_system, self.height, NoiseBuffer(source, width))

    def noise_coefficients(self) -> NDArray[np.float64]:
        return self.digit_system.digit_l1_norms(self.horizon, self.height)

    def mse(self) -> float:
        """Exact MSE in O(h·k): node variance × Σ_t ‖digits(t)‖₁ / T."""
        total = self.digit_system.digit_l1_total(self.horizon, self.height)
        return self.sampler.variance * total / self.horizon

    def _noise_coefficient_at(self, t: int) -> float:
        return float(self.digit_system.digit_l1_norm(t, self.height))

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        # Blocks of the top-down pass: integers, so equal to noise_coefficients().
        for a in range(start, self.horizon + 1, _NORM_BLOCK):
            b = min(self.horizon, a + _NORM_BLOCK - 1)
            yield from self.digit_system.digit_l1_norms(b, self.height, start=a).tolist()

    def _iter_noise_coefficient_blocks(self, start: int) -> Iterator[NDArray[np.float64]]:
        # Blocks of 64, 128, … _NORM_BLOCK steps: integers, so any blocking is exact.
        a, n = start, 64
        while a <= self.horizon:
            b = min(self.horizon, a + n - 1)
            yield self.digit_system.digit_l1_norms(b, self.height, start=a)
            a, n = b + 1, min(2 * n, _NORM_BLOCK)

    def max_variance(self) -> float:
        """Exact largest per-step variance in O(h·k): node variance × max_t ‖digits(t)‖₁
        (:func:`~dpcount.counting.digits.max_digit_l1_norm`), no O(T) array."""
        nodes = max_digit_l1_norm(self.digit_system, self.horizon, self.height)
        return self.sampler.variance * nodes

    def live_noise_bound(self) -> int:
        """Most node values a stream holds: h·max(|low|, high) (Lemma 17: h(k−1)/2)."""
        return self.height * max(-self.digit_system.low, self.digit_system.high)


@noise_statements
class BinaryTree(KaryTree):
    """The binary tree mechanism (Dwork, Naor, Pitassi, Rothblum 2010; Chan, Shi, Song 2011).

    Identical to ``KaryTree(k=2, subtract=False)``: height h = ⌈log₂(T+1)⌉, the
    release at t sums the noisy dyadic nodes of t's binary expansion.

    Formal guarantee:
        [neighbouring: event level]

        Every step lies in one node per level, so the node vector has ℓ₁ sensitivity
        Δ₁ = h·Δ and ℓ₂ sensitivity Δ₂ = √h·Δ (count-on-your-elders Lemma 7); the release is
        post-processing of the noisy node vector.

        [noise kinds: all]

        Exact variance: Var_t = v·popcount(t), the number of 1-bits of t, with v
        the variance of one node noise (2λ² for Laplace, σ² for Gaussian, the exact
        variance of the discrete sampler); ``max_variance`` = v·max_{t≤T} popcount(t)
        (= h if T = 2^h − 1, else h − 1).

    References:
        * C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum. "Differential privacy under
          continual observation". STOC 2010.
          https://doi.org/10.1145/1806689.1806787
        * T.-H. H. Chan, E. Shi, D. Song. "Private and continual release of
          statistics". ACM TISSEC 14(3), 2011. https://doi.org/10.1145/2043621.2043626
        [noise kinds references]
    """

    #: the structure options are fixed: the constructor takes the horizon and the budget
    k = 2
    subtract = False
    __init__ = CountingMechanism.__init__

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """The k = 2 tree without subtraction (:meth:`KaryTree.memory_estimate`)."""
        return KaryTree.memory_estimate(horizon, dim, k=2, subtract=False)

    def _repr_fields(self) -> dict[str, object]:
        return {"height": self.height}

    def _config_kwargs(self) -> dict[str, Any]:
        kwargs = super()._config_kwargs()
        del kwargs["k"], kwargs["subtract"]  # fixed by the class
        return kwargs


@lru_cache(maxsize=256)
def _tree_sensitivities(
    horizon: int, system: DigitSystem, height: int, schema: Participation
) -> tuple[Sensitivity, Sensitivity]:
    """:func:`~dpcount.counting.participation.tree_sensitivities` of the tree's own node
    set, cached (frozen arguments and results)."""
    return tree_sensitivities(horizon, system, height, schema)
