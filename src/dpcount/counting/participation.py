"""Sensitivity of a linear encoder under (k, b)-participation.

A counting mechanism perturbs C·x for an encoder C (m × T; the right factor R of
its factorization, the node incidence of a tree). Under the schema
:class:`~dpcount.privacy.Participation` (k participations, any two at least b
steps apart) neighbouring streams differ by Δ = Σ_{i∈π} g_i e_iᵀ for a pattern
π ⊆ {0, …, T−1} with |π| ≤ k and |i − j| ≥ b for i ≠ j in π, and per-step changes
g_i with ‖g_i‖ ≤ 1 (unit step sensitivity; the caller multiplies by Δ).

Notation (math → code):

===============================  ===============================================
G = CᵀC (Gram matrix)            ``gram``
H = |G| on the pairs a pattern   ``_reachable_abs``
can hold (i = j or |i−j| ≥ b)
Δ₂² = max_π sup_g ‖Σ g_i C_i‖²   :func:`encoder_sensitivities` (``l2``)
Δ₁ = max_π sup_g ‖Σ g_i C_i‖₁    :func:`encoder_sensitivities` (``l1``)
u_i = H_ii + (k−1 largest        :func:`gram_pattern_bound`
H_ij, |i−j| ≥ b)
===============================  ===============================================

The facts used (each proved in the docstring of the function that uses it, and
checked by brute force over all patterns and sign patterns in
``tests/counting/test_participation.py``):

* ℓ₂: ‖Σ_{i∈π} g_i C_i‖² = Σ_{i,j∈π} g_iᵀg_j G_ij ≤ Σ_{i,j∈π} |G_ij| (Cauchy–Schwarz
  on |g_iᵀg_j| ≤ 1), with equality when G_ij ≥ 0 on π (all g_i equal). So
  max_π Σ_{i,j∈π} H_ij is exact when G ≥ 0 on the reachable pairs and a certified
  upper bound otherwise, for scalar and for vector steps.
* ℓ₁: ‖Σ g_i C_i‖₁ ≤ Σ_{i∈π} ‖C_i‖₁ (triangle inequality), with equality when
  C ≥ 0 (all g_i = e_1).
* Always: Δ₂ ≤ k·max_i ‖C_i‖₂ and Δ₁ ≤ k·max_i ‖C_i‖₁ (triangle inequality); every
  result is the minimum of that and the method's value, never below the truth.
* Lower-triangular Toeplitz C with non-negative, non-increasing coefficients: the
  earliest pattern 0, b, …, (k−1)b is a worst case (Kalinin & Lampert 2024,
  Theorem 2), so Δ₂² = ‖Σ_j C_{jb}‖² exactly in O(kT).

References:
    * C. A. Choquette-Choo, A. Ganesh, R. McKenna, H. B. McMahan, K. Rush,
      A. Thakurta, Z. Xu. "(Amplified) Banded Matrix Factorization: A unified
      approach to private training". NeurIPS 2023. https://arxiv.org/abs/2306.08153
    * N. Kalinin, C. H. Lampert. "Banded Square Root Matrix Factorization for
      Differentially Private Model Training". NeurIPS 2024.
      https://arxiv.org/abs/2405.13763
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_instance, check_integer
from dpcount.counting.digits import DigitSystem
from dpcount.privacy.budget import Participation

__all__ = [
    "DENSE_LIMIT",
    "Sensitivity",
    "SensitivityMethod",
    "complete_blocks",
    "count_patterns",
    "encoder_sensitivities",
    "gram_pattern_bound",
    "iter_patterns",
    "max_pattern_weight",
    "multiplied",
    "toeplitz_sensitivities",
    "tree_gram",
    "tree_sensitivities",
    "tree_sensitivity_lower_bounds",
    "tree_used_blocks",
]

#: largest horizon for which a dense Gram matrix (T × T float64) is formed
DENSE_LIMIT = 4096
#: largest number of patterns enumerated exactly; beyond, the certified Gram bound
BRUTE_FORCE_LIMIT = 20_000
#: relative amount added to computed sensitivities, so floating-point error in the
#: sums (at most a few thousand terms of the same sign per entry) only adds noise
PARTICIPATION_MARGIN = 1e-10


class SensitivityMethod(str, Enum):
    """How a multi-participation sensitivity was obtained."""

    #: k = 1 (or one participation fits): the single-participation sensitivity
    SINGLE = "single"
    #: maximum over every participation pattern (exact when the Gram matrix is ≥ 0)
    BRUTE_FORCE = "brute-force"
    #: Toeplitz with non-negative non-increasing coefficients: the earliest pattern
    #: (Kalinin & Lampert 2024, Thm 2)
    TOEPLITZ_EARLIEST = "toeplitz-earliest"
    #: columns b or more apart have disjoint support (≤ b bands, input perturbation)
    DISJOINT_COLUMNS = "disjoint-columns"
    #: dynamic program over patterns with the per-step bound u_i (certified)
    GRAM_BOUND = "gram-bound"
    #: tree node incidence: pairs b apart share only the levels with blocks > b
    TREE_LEVELS = "tree-levels"
    #: ℓ₁: max over patterns of the sum of column ℓ₁ norms (exact when C ≥ 0 or C ≤ 0)
    COLUMN_NORMS = "column-norms"
    #: k × the single-participation sensitivity (triangle inequality; certified)
    K_TIMES_SINGLE = "k-times-single"

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Sensitivity:
    """A sensitivity for unit step changes under a participation schema.

    Attributes:
        value: the sensitivity (not squared); never below the true value.
        exact: True when ``value`` equals the true sensitivity (up to the margin
            added for floating-point error); False for a certified upper bound.
        method: how it was obtained.
    """

    value: float
    exact: bool
    method: SensitivityMethod

    def describe(self) -> str:
        kind = "exact" if self.exact else "certified upper bound"
        return f"{kind} ({self.method})"


def multiplied(single: float, schema: Participation) -> Sensitivity:
    """k × the single-participation sensitivity: always valid (triangle inequality:
    ‖Σ_{i∈π} g_i C_i‖ ≤ Σ ‖C_i‖ ≤ k·max_i ‖C_i‖, for any norm); ``single`` as given
    for k = 1, else with the relative margin (``single`` may be a rounded sum)."""
    k = schema.max_participations
    if k == 1:
        return Sensitivity(single, True, SensitivityMethod.SINGLE)
    return Sensitivity(_with_margin(k * single), False, SensitivityMethod.K_TIMES_SINGLE)


def _checked(horizon: int, schema: Participation) -> int:
    check_instance("schema", schema, Participation, "a dpcount.privacy.Participation")
    horizon = check_integer("horizon", horizon, ge=1)
    schema.check_horizon(horizon)
    return horizon


def _with_margin(value: float) -> float:
    return value * (1.0 + PARTICIPATION_MARGIN)


def _best_of(candidate: Sensitivity, fallback: Sensitivity) -> Sensitivity:
    """The smaller of two valid upper bounds (exact if either is exact)."""
    if candidate.value <= fallback.value:
        return candidate
    return Sensitivity(fallback.value, fallback.exact or candidate.exact, fallback.method)


# ----------------------------------------------------------------------------- patterns


def count_patterns(horizon: int, schema: Participation) -> int:
    """Number of patterns of exactly k = ``max_participations`` steps among ``horizon``,
    pairwise at least b apart: C(T − (k−1)(b−1), k) (the gaps of b − 1 removed)."""
    T = _checked(horizon, schema)
    k, b = schema.max_participations, schema.min_separation
    return math.comb(T - (k - 1) * (b - 1), k)


def iter_patterns(horizon: int, schema: Participation) -> Iterator[tuple[int, ...]]:
    """Every pattern of exactly k steps (0-based, increasing) pairwise at least b apart.

    Patterns with fewer steps need not be listed: every quantity maximised here is
    a sup over g_i with ‖g_i‖ ≤ 1, and g_i = 0 drops a step.
    """
    T = _checked(horizon, schema)
    k, b = schema.max_participations, schema.min_separation
    for c in itertools.combinations(range(T - (k - 1) * (b - 1)), k):
        yield tuple(v + j * (b - 1) for j, v in enumerate(c))


def max_pattern_weight(
    weights: NDArray[np.float64], schema: Participation
) -> tuple[float, list[int]]:
    """max_π Σ_{i∈π} w_i over patterns, for weights w ≥ 0, and a maximising pattern.

    Dynamic program over steps: best_j(i) = max(best_j(i − 1), w_i + best_{j−1}(i − b)),
    the best weight of at most j steps up to step i; O(k·T) (vectorised per j).
    """
    w = np.asarray(weights, dtype=np.float64)
    T, k, b = len(w), schema.max_participations, schema.min_separation
    prev = np.zeros(T)  # best with 0 steps
    candidates = []
    for _ in range(k):
        shifted = np.zeros(T)
        if b < T:
            shifted[b:] = prev[: T - b]
        cand = w + shifted
        candidates.append(cand)
        prev = np.maximum.accumulate(cand)
    pattern: list[int] = []
    limit = T - 1
    for cand in reversed(candidates):
        if limit < 0:
            break
        i = int(np.argmax(cand[: limit + 1]))
        pattern.append(i)
        limit = i - b
    return float(prev[-1]), sorted(pattern)


# ----------------------------------------------------------------------------- dense


#: rows per block when a T × T array is processed (bounded temporaries)
_ROWS = 256


def _reachable_abs(gram: NDArray[np.float64], b: int) -> tuple[NDArray[np.float64], bool]:
    """Overwrite G with H = |G| on the pairs a pattern can hold (i = j or |i − j| ≥ b),
    0 elsewhere; returns it and whether G ≥ 0 on those pairs. Row blocks, in place."""
    T = gram.shape[0]
    cols = np.arange(T)
    nonneg = True
    for r0 in range(0, T, _ROWS):
        rows = gram[r0 : r0 + _ROWS]
        lag = np.abs(np.arange(r0, r0 + len(rows))[:, None] - cols[None, :])
        unreachable = (lag > 0) & (lag < b)
        rows[unreachable] = 0.0
        nonneg = nonneg and bool(np.all(rows >= 0))
        np.abs(rows, out=rows)
    return gram, nonneg


def _pattern_value(H: NDArray[np.float64], pattern: list[int] | tuple[int, ...]) -> float:
    idx = np.asarray(pattern, dtype=np.intp)
    return float(H[np.ix_(idx, idx)].sum())


def _largest_pattern_value(H: NDArray[np.float64], T: int, schema: Participation) -> float:
    """max over :func:`iter_patterns` of :func:`_pattern_value`, the patterns as rows of
    one index array (8192 patterns at a time): each value is the same sum as
    ``_pattern_value``'s, row by row over the same k × k block (numpy's pairwise sum of
    a contiguous row), so the maximum is the same float."""
    k, b = schema.max_participations, schema.min_separation
    combos = itertools.combinations(range(T - (k - 1) * (b - 1)), k)
    patterns = np.array(list(combos), dtype=np.intp).reshape(-1, k)
    patterns += np.arange(k, dtype=np.intp) * (b - 1)
    best = -math.inf
    for a in range(0, len(patterns), 8192):
        rows = patterns[a : a + 8192]
        block = np.ascontiguousarray(H[rows[:, :, None], rows[:, None, :]])
        best = max(best, float(block.reshape(len(rows), k * k).sum(axis=1).max()))
    return best


def gram_pattern_bound(H: NDArray[np.float64], schema: Participation) -> tuple[float, float]:
    """(upper, lower) bounds on max_π Σ_{i,j∈π} H_ij for H ≥ 0 zero on unreachable pairs.

    Upper: Σ_{i,j∈π} H_ij = Σ_{i∈π} (H_ii + Σ_{j∈π∖i} H_ij) ≤ Σ_{i∈π} u_i, where
    u_i = H_ii + max Σ_{j∈π'} H_ij over sets π' of at most k − 1 steps, pairwise at
    least b apart and at least b from i (π ∖ i is such a set). Each u_i is the
    dynamic program of :func:`max_pattern_weight` on row i (run for all rows at
    once, O(k·T²)), and max_π Σ_{i∈π} u_i is that program on u. Lower: the value
    of the pattern that maximises Σ u_i (a feasible pattern). Equal bounds certify
    the exact maximum.
    """
    k, b = schema.max_participations, schema.min_separation
    diag = np.diag(H).copy()
    if k > 1:
        T = H.shape[0]
        for r0 in range(0, T, _ROWS):  # row blocks: bounded temporaries
            off = H[r0 : r0 + _ROWS].copy()
            n = len(off)
            off[np.arange(n), np.arange(r0, r0 + n)] = 0.0  # |i − j| < b are already 0
            # best[i, j]: the most that at most (layer) steps ≤ j, pairwise b apart and b
            # from i, add to row i. Steps within b of i have weight 0 and, when chosen,
            # only block others, so allowing them keeps the value an upper bound.
            best = np.zeros((n, T))
            for _ in range(k - 1):
                shifted = np.zeros((n, T))
                if b < T:
                    shifted[:, b:] = best[:, : T - b]
                best = np.maximum.accumulate(off + shifted, axis=1)
            diag[r0 : r0 + n] += best[:, -1]
    upper, pattern = max_pattern_weight(diag, schema)
    return upper, _pattern_value(H, pattern)


def encoder_sensitivities(
    encoder: NDArray[np.float64], schema: Participation
) -> tuple[Sensitivity, Sensitivity]:
    """(ℓ₁, ℓ₂) sensitivity of C·x under the schema for unit step changes.

    For a dense encoder C (m × T, T ≤ :data:`DENSE_LIMIT`). ℓ₂ (module docstring):
    max_π Σ_{i,j∈π} H_ij — by enumeration when there are at most
    ``BRUTE_FORCE_LIMIT`` patterns, else the certified bound of
    :func:`gram_pattern_bound` — exact when G ≥ 0 on reachable pairs (and, for the
    bound, when it meets its lower bound). ℓ₁: max_π Σ_{i∈π} ‖C_i‖₁, exact when
    C ≥ 0 or C ≤ 0. Each is the minimum with k × single participation.
    """
    C = np.asarray(encoder, dtype=np.float64)
    if C.ndim != 2:
        raise ValueError(f"encoder must be a 2-D matrix, got shape {C.shape}")
    T = _checked(C.shape[1], schema)
    if T > DENSE_LIMIT:
        raise ValueError(f"encoder has {T} columns; dense sensitivities are for <= {DENSE_LIMIT}")
    col_l1 = np.abs(C).sum(axis=0)
    gram = C.T @ C
    single_l2 = math.sqrt(float(np.max(np.diag(gram))))
    fallback_l1 = multiplied(float(np.max(col_l1)), schema)
    fallback_l2 = multiplied(single_l2, schema)
    if schema.is_single:
        return fallback_l1, fallback_l2
    l1_value, _ = max_pattern_weight(col_l1, schema)
    same_sign = bool(np.all(C >= 0) or np.all(C <= 0))
    l1 = Sensitivity(_with_margin(l1_value), same_sign, SensitivityMethod.COLUMN_NORMS)
    H, nonneg = _reachable_abs(gram, schema.min_separation)
    l2 = _reachable_l2(H, T, schema, nonneg, tolerance=1e-12)
    return _best_of(l1, fallback_l1), _best_of(l2, fallback_l2)


def _reachable_l2(
    H: NDArray[np.float64], T: int, schema: Participation, nonneg: bool, *, tolerance: float
) -> Sensitivity:
    """The ℓ₂ sensitivity from the reachable |Gram| matrix H (:func:`_reachable_abs`):
    the largest pattern value by brute force when there are at most
    :data:`BRUTE_FORCE_LIMIT` patterns, else :func:`gram_pattern_bound`'s upper bound.
    Exact when the Gram matrix is ``nonneg`` (and, for the bound, its lower bound is
    within a relative ``tolerance`` of the upper one)."""
    if count_patterns(T, schema) <= BRUTE_FORCE_LIMIT:
        value = _largest_pattern_value(H, T, schema)
        return Sensitivity(math.sqrt(_with_margin(value)), nonneg, SensitivityMethod.BRUTE_FORCE)
    upper, lower = gram_pattern_bound(H, schema)
    exact = nonneg and lower >= upper * (1.0 - tolerance)
    return Sensitivity(math.sqrt(_with_margin(upper)), exact, SensitivityMethod.GRAM_BOUND)


# ----------------------------------------------------------------------------- Toeplitz


def _is_non_increasing_non_negative(c: NDArray[np.float64]) -> bool:
    return bool(np.all(c >= 0) and np.all(np.diff(c) <= 0))


def toeplitz_sensitivities(
    coefficients: NDArray[np.float64], schema: Participation
) -> tuple[Sensitivity, Sensitivity]:
    """(ℓ₁, ℓ₂) sensitivity of the lower-triangular Toeplitz encoder C[t, i] = c_{t−i}.

    * c ≥ 0 and non-increasing: the earliest pattern 0, b, …, (k−1)b is a worst case
      for ℓ₂ (Kalinin & Lampert 2024, Thm 2, arXiv:2405.13763), so
      Δ₂² = ‖Σ_{j<k} C_{jb}‖², exact, O(kT).
    * c_s = 0 for s ≥ b (at most b bands): columns b or more apart have disjoint
      supports, so G_ij = 0 on reachable pairs i ≠ j and Δ₂² = max_π Σ_{i∈π} G_ii;
      G_ii = Σ_{s<T−i} c_s² is non-increasing in i and the j-th step of a pattern is
      ≥ jb, so the earliest pattern attains it: Σ_{j<k} G_{jb,jb}, exact.
    * ℓ₁ with c ≥ 0: ‖C_i‖₁ = Σ_{s<T−i} c_s is non-increasing in i; by the same
      argument Σ_{j<k} ‖C_{jb}‖₁ is exact (C ≥ 0, module docstring).
    * Otherwise: the dense computation (:func:`encoder_sensitivities`) for
      T ≤ :data:`DENSE_LIMIT`, else k × single participation (certified).
    """
    c = np.asarray(coefficients, dtype=np.float64)
    T = _checked(len(c), schema)
    k, b = schema.max_participations, schema.min_separation
    c2 = c * c
    single_l1 = multiplied(float(np.abs(c).sum()), schema)
    single_l2 = multiplied(math.sqrt(float(c2.sum())), schema)
    if schema.is_single:
        return single_l1, single_l2
    starts = [j * b for j in range(k)]
    if np.all(c >= 0):
        l1: Sensitivity | None = Sensitivity(
            _with_margin(sum(float(c[: T - s].sum()) for s in starts)),
            True,
            SensitivityMethod.TOEPLITZ_EARLIEST,
        )
    else:
        l1 = None
    l2: Sensitivity | None = None
    if _is_non_increasing_non_negative(c):
        v = np.zeros(T)
        for s in starts:
            v[s:] += c[: T - s]
        l2 = Sensitivity(
            math.sqrt(_with_margin(float(v @ v))), True, SensitivityMethod.TOEPLITZ_EARLIEST
        )
    elif not np.any(c[b:]):
        l2 = Sensitivity(
            math.sqrt(_with_margin(sum(float(c2[: T - s].sum()) for s in starts))),
            True,
            SensitivityMethod.DISJOINT_COLUMNS,
        )
    if (l1 is None or l2 is None) and T <= DENSE_LIMIT:
        lag = np.arange(T)[:, None] - np.arange(T)[None, :]
        dense = np.where(lag >= 0, c[np.clip(lag, 0, None)], 0.0)
        d1, d2 = encoder_sensitivities(dense, schema)
        l1 = d1 if l1 is None else l1
        l2 = d2 if l2 is None else l2
    return (
        single_l1 if l1 is None else _best_of(l1, single_l1),
        single_l2 if l2 is None else _best_of(l2, single_l2),
    )


# ----------------------------------------------------------------------------- trees


def tree_used_blocks(system: DigitSystem, horizon: int, height: int) -> list[NDArray[np.bool_]]:
    """Per level ℓ < h: ``used[m]`` for the node covering steps m·k^ℓ + 1 … (m + 1)·k^ℓ
    (1-based) that contain a step ≤ T — whether some release at t ≤ T sums it.

    count-on-your-elders Algorithm 3 (Algorithm 2 with subtraction): at level ℓ the
    release at t, with ancestor q_{ℓ+1} and digit d = d_ℓ(t), adds the nodes
    k·q_{ℓ+1} + j for 0 ≤ j < d (d > 0) or subtracts them for d ≤ j < 0 (d < 0);
    every node lies inside [1, capacity] (Proposition 11). Nodes no release uses never
    enter the output, so they are left out of the encoder.
    """
    T = check_integer("horizon", horizon, ge=1)
    k, low = system.k, system.low
    q = np.arange(1, T + 1, dtype=np.int64)
    out: list[NDArray[np.bool_]] = []
    size = 1
    for _ in range(height):
        d = (q - low) % k + low
        parent = (q - d) // k
        n = (T - 1) // size + 1
        # the nodes of release q are k·parent + [min(d, 0), max(d, 0)): mark the
        # intervals (clipped to the level) with a difference array, O(T) per level
        start = np.clip(k * parent + np.minimum(d, 0), 0, n)
        stop = np.clip(k * parent + np.maximum(d, 0), 0, n)
        keep = start < stop
        marks = np.zeros(n + 1, dtype=np.int64)
        np.add.at(marks, start[keep], 1)
        np.add.at(marks, stop[keep], -1)
        used = np.cumsum(marks[:n]) > 0
        out.append(used)
        q = parent
        size *= k
    return out


def complete_blocks(horizon: int, branching: int, height: int) -> list[NDArray[np.bool_]]:
    """Per level ℓ < h: ``used[m]`` = the node m·k^ℓ + 1 … (m + 1)·k^ℓ lies within [1, T]
    (every complete node: Honaker's estimator uses all of them)."""
    out = []
    size = 1
    for _ in range(height):
        m = np.arange((horizon - 1) // size + 1)
        out.append((m + 1) * size <= horizon)
        size *= branching
    return out


def tree_gram(
    used_blocks: list[NDArray[np.bool_]], branching: int, horizon: int
) -> NDArray[np.float64]:
    """G[s, t] = number of used nodes (``used_blocks[ℓ][m]``, e.g. from
    :func:`tree_used_blocks`) containing both steps s and t (0-based): the Gram matrix
    of the tree's 0/1 node incidence."""
    steps = np.arange(horizon)
    gram = np.zeros((horizon, horizon))
    size = 1
    for used in used_blocks:
        block = steps // size
        for r0 in range(0, horizon, _ROWS):  # row blocks: bounded temporaries
            mine = block[r0 : r0 + _ROWS]
            gram[r0 : r0 + _ROWS] += (mine[:, None] == block[None, :]) & used[mine][:, None]
        size *= branching
    return gram


def _level_counts_value(
    used_blocks: list[NDArray[np.bool_]], branching: int, pattern: list[int]
) -> float:
    """Σ_{i,j∈π} G_ij of :func:`tree_gram` without forming G: per level, each used node
    adds (steps of π it contains)²."""
    steps = np.asarray(pattern, dtype=np.int64)
    total = 0
    size = 1
    for used in used_blocks:
        blocks, counts = np.unique(steps // size, return_counts=True)
        total += int((counts[used[blocks]] ** 2).sum())
        size *= branching
    return float(total)


def tree_sensitivity_lower_bounds(
    horizon: int, system: DigitSystem, height: int, schema: Participation
) -> tuple[float, float]:
    """(ℓ₁, ℓ₂) lower bounds on a k-ary tree's sensitivities under the schema, O(k·T + h·T).

    The encoder is the tree's 0/1 node incidence (:func:`tree_sensitivities`), so its
    Gram matrix G is ≥ 0 and the ℓ₂ value of any feasible pattern π, Σ_{i,j∈π} G_ij, is
    attained (all g_i equal): it is a lower bound on Δ₂². Two patterns are evaluated:
    the one maximising Σ_{i∈π} G_ii (whose value is the exact ℓ₁ sensitivity, since
    G_ii = ‖C_i‖₁ for a 0/1 encoder) and the earliest, 0, b, …, (k − 1)b. For pruning a
    search (:func:`dpcount.analysis.best_k`), never for calibration.
    """
    T = _checked(horizon, schema)
    h = check_integer("height", height, ge=1)
    used = tree_used_blocks(system, T, h)
    diag = np.zeros(T)
    size = 1
    steps = np.arange(T)
    for level in used:
        diag += level[steps // size]
        size *= system.k
    l1, pattern = max_pattern_weight(diag, schema)
    earliest = list(range(0, T, schema.min_separation))[: schema.max_participations]
    l2_sq = max(
        _level_counts_value(used, system.k, pattern),
        _level_counts_value(used, system.k, earliest),
    )
    return l1, math.sqrt(l2_sq)


def tree_sensitivities(
    horizon: int,
    system: DigitSystem,
    height: int,
    schema: Participation,
    *,
    used_blocks: list[NDArray[np.bool_]] | None = None,
) -> tuple[Sensitivity, Sensitivity]:
    """(ℓ₁, ℓ₂) sensitivity of a k-ary tree's node vector under the schema.

    The nodes at level ℓ are aligned blocks of k^ℓ steps (count-on-your-elders §3,
    Proposition 11 for the offset-digit trees); the encoder is the 0/1 incidence of
    the nodes some release uses (:func:`tree_used_blocks`, or ``used_blocks`` for a
    mechanism with its own node set, e.g. :func:`complete_blocks`). It is ≥ 0, so the ℓ₂
    value max_π Σ_{i,j∈π} G_ij and the ℓ₁ value max_π Σ_{i∈π} (nodes containing i)
    are exact (module docstring). For T ≤ :data:`DENSE_LIMIT` the Gram matrix is
    formed (brute force, or the bound of :func:`gram_pattern_bound`, exact when it
    meets its lower bound); beyond, every step lies in at most h nodes and two steps
    b or more apart share a node only at the L_b levels with k^ℓ > b, so
    Δ₁ ≤ k·h and Δ₂² ≤ k·h + k(k − 1)·L_b (certified).
    """
    T = _checked(horizon, schema)
    check_instance("system", system, DigitSystem, "a DigitSystem")
    k = schema.max_participations
    h = check_integer("height", height, ge=1)
    single_l1 = multiplied(float(h), schema)
    single_l2 = multiplied(math.sqrt(h), schema)
    if schema.is_single:
        return single_l1, single_l2
    if T > DENSE_LIMIT:
        shared = sum(1 for level in range(h) if system.k**level > schema.min_separation)
        bound = k * h + k * (k - 1) * shared
        l2 = Sensitivity(math.sqrt(_with_margin(bound)), False, SensitivityMethod.TREE_LEVELS)
        return Sensitivity(float(k * h), False, SensitivityMethod.TREE_LEVELS), _best_of(
            l2, single_l2
        )
    if used_blocks is None:
        used_blocks = tree_used_blocks(system, T, h)
    gram = tree_gram(used_blocks, system.k, T)
    l1_value, _ = max_pattern_weight(np.diag(gram).copy(), schema)  # node counts per step
    # (_reachable_abs overwrites the Gram matrix.)
    l1 = Sensitivity(l1_value, True, SensitivityMethod.COLUMN_NORMS)
    H, _ = _reachable_abs(gram, schema.min_separation)
    # The node incidences are ≥ 0, so the Gram matrix is.
    l2 = _reachable_l2(H, T, schema, True, tolerance=0.0)
    return _best_of(l1, single_l1), _best_of(l2, single_l2)
