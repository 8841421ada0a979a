"""k-ary digit systems behind the tree mechanisms (count-on-your-elders §3).

A time step t is written with h digits d_0 … d_{h−1} (least significant first)
from a contiguous range [low, low + k − 1], t = Σ d_ℓ k^ℓ:

* ``low = 0``: ordinary k-ary digits (Definition 6, Algorithm 1);
* ``low = −(k−1)/2``, odd k: offset digits (Definition 10, Algorithm 2);
* ``low = −k/2 + 1``, even k: offset digits for even k (Definition 28, App. C).

|d_ℓ| is the number of tree nodes of level ℓ summed at step t, so the release at t
sums ‖digits(t)‖₁ noise terms. ``q_ℓ(t) = Σ_{j≥ℓ} d_j k^{j−ℓ}`` identifies t's
ancestor at level ℓ; its parent is q_{ℓ+1} and q_ℓ = k·q_{ℓ+1} + d_ℓ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_bool, check_instance, check_integer

__all__ = ["DigitSystem", "max_digit_l1_norm"]


@dataclass(frozen=True)
class DigitSystem:
    """Digits in [low, low + k − 1] with ``−k < low ≤ 0``."""

    k: int
    low: int

    def __post_init__(self) -> None:
        k = check_integer("k", self.k, ge=2)
        check_integer("low", self.low, ge=-(k - 1), le=0)

    @classmethod
    def for_tree(cls, k: int, subtract: bool) -> DigitSystem:
        """The digit system of the k-ary tree with or without subtraction."""
        k = check_integer("k", k, ge=2)
        check_bool("subtract", subtract)
        if not subtract:
            return cls(k, 0)
        return cls(k, -(k - 1) // 2 if k % 2 else -k // 2 + 1)

    @property
    def high(self) -> int:
        return self.low + self.k - 1

    def capacity(self, h: int) -> int:
        """Largest t representable with h digits: high·(k^h − 1)/(k − 1).

        k^h − 1 (Lemma 8), (k^h − 1)/2 for odd k (Lemma 14), k(k^h − 1)/(2(k − 1)) for
        even k (Def. 28).
        """
        return int(self.high * (self.k**h - 1) // (self.k - 1))

    def height(self, horizon: int) -> int:
        """Smallest h ≥ 1 with capacity(h) ≥ horizon, in exact integer arithmetic.

        Equals ⌈log_k(T + 1)⌉ without subtraction and ⌈log_k(2T)⌉ with subtraction
        and odd k (floating-point logarithms are off by one at exact powers).
        """
        h = 1
        while self.capacity(h) < horizon:
            h += 1
        return h

    def digit(self, q: int) -> int:
        """Least significant digit of q."""
        return (q - self.low) % self.k + self.low

    def digits(self, t: int, h: int) -> list[int]:
        """The h digits of t, least significant first."""
        out = []
        for _ in range(h):
            d = self.digit(t)
            out.append(d)
            t = (t - d) // self.k
        if t != 0:
            raise ValueError(f"t={t} does not fit in {h} digits of base {self.k}")
        return out

    def ancestors(self, t: int, h: int) -> list[int]:
        """[q_0(t), q_1(t), …, q_h(t)] with q_0 = t and q_h = 0."""
        out = [t]
        for _ in range(h):
            t = (t - self.digit(t)) // self.k
            out.append(t)
        return out

    def digit_l1_norm(self, t: int, h: int) -> int:
        """‖digits(t)‖₁ in O(h): the number of tree nodes summed at step t."""
        return sum(abs(d) for d in self.digits(t, h))

    def digit_l1_total(self, horizon: int, h: int) -> int:
        """Σ_{t=1}^{horizon} ‖digits(t)‖₁ exactly, in O(h·k) integer arithmetic.

        At level ℓ the lower ℓ digits of t span the contiguous range
        [r_min, r_min + k^ℓ − 1] with r_min = low·(k^ℓ − 1)/(k − 1), so
        q_ℓ(t) = ⌊(t − r_min)/k^ℓ⌋ and each ancestor q covers k^ℓ consecutive
        steps; d_ℓ(t) is the last digit of q, periodic in q with period k.
        """
        k, total = self.k, 0
        cycle = [abs(self.digit(q)) for q in range(k)]  # |digit| by q mod k
        prefix = [0]
        for c in cycle:
            prefix.append(prefix[-1] + c)

        def digit_sum(q_lo: int, q_hi: int) -> int:  # Σ_{q=q_lo}^{q_hi} |digit(q)|
            if q_hi < q_lo:
                return 0
            n = q_hi - q_lo + 1
            full, rest = divmod(n, k)
            start = q_lo % k
            s = full * prefix[k]
            end = start + rest
            s += prefix[min(end, k)] - prefix[start] + (prefix[end - k] if end > k else 0)
            return s

        for level in range(h):
            size = k**level
            r_min = self.low * (size - 1) // (k - 1)
            qa, qb = (1 - r_min) // size, (horizon - r_min) // size
            if qa == qb:
                total += abs(self.digit(qa)) * horizon
                continue
            first_count = (qa * size + r_min + size - 1) - 1 + 1  # steps 1 .. end of qa's block
            last_count = horizon - (qb * size + r_min) + 1
            total += abs(self.digit(qa)) * first_count + abs(self.digit(qb)) * last_count
            total += size * digit_sum(qa + 1, qb - 1)
        return total

    def digit_l1_norms(self, horizon: int, h: int, start: int = 1) -> NDArray[np.float64]:
        """‖digits(t)‖₁ for t = start..horizon, in O(horizon − start + h·k) by a
        top-down pass.

        At level ℓ the children of parent Q are q = k·Q + d, d = low..high, so the
        norms of all ancestors at level ℓ are the parent norms repeated k times plus
        |d| tiled.
        """
        first, last = self.ancestors(start, h), self.ancestors(horizon, h)
        absd = np.abs(np.arange(self.low, self.high + 1, dtype=np.float64))
        norms = np.zeros(1)  # level h: the single ancestor q_h = 0
        for level in range(h - 1, -1, -1):
            parent_lo = first[level + 1]
            children = (norms[:, None] + absd[None, :]).reshape(-1)
            start = first[level] - (self.k * parent_lo + self.low)
            norms = children[start : start + last[level] - first[level] + 1]
        return norms


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
