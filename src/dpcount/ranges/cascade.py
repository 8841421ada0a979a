"""Cascade Sampling: leaf noise whose every tree node has a prescribed variance.

Dharangutte, Gao, Gong, Wang, "Differentially Private Range Queries with Correlated
Input Perturbation": Algorithm 1 (perfect trees), Algorithm 2 / App. B.1 (general
binary trees; here the balanced tree of :mod:`._tree`), Algorithm 3 / App. B.2 (2-D).

Notation (paper → code):

=====================  ==========================================================
X_⋆, Y_⋆               value of node ⋆; the fresh standard normal drawn at ⋆
X_⋆0, X_⋆1             X_⋆/2 + β_d·Y_⋆ and X_⋆/2 − β_d·Y_⋆ (⋆ at depth d)
√3/2                   β_d for the default profile (every node variance 1)
v_d                    ``level_variances[d]``: variance of every depth-d node / σ²
β_d²                   :func:`split_variances`: v_{d+1} − v_d/4 (must be > 0)
C_k                    covariance of the leaves / σ² (Def. 3.1 for n = 2^k)
=====================  ==========================================================

Utility control (the paper's fifth property): a child of a depth-d node gets
variance v_d/4 + β_d² = v_{d+1}, so any profile with v_{d+1} > v_d/4 is reachable;
the default v ≡ 1 gives β_d = √3/2, the paper's Algorithm 1. Every internal node
equals the sum of its children exactly (consistency), so a node's noise is the sum
of its leaves' noise and has variance σ²·v_depth.

Implementation: level by level, vectorized; the tree is cut into subtrees of about
2^16 leaves that are finished one at a time while in cache, so apart from the output
the memory is O(2^16). Exactly one standard normal is drawn per leaf (the root's
value and one Y per split), so the cost is that of drawing n normals plus about four
in-cache passes. In 2-D (Alg. 3) the Y drawn at a row split is itself a row of
column cascades, so the noise is L₁ Z L₂ᵀ for the two 1-D cascades L₁, L₂ and an
n₁×n₂ matrix Z of i.i.d. normals: its covariance is σ²·C⁽¹⁾⊗C⁽²⁾.

References:
    * P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range
      Queries with Correlated Input Perturbation". 2024.
      https://arxiv.org/abs/2402.07066
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_integer, check_real, check_real_sequence, check_shape
from dpcount.privacy.noise import GaussianNoise, NoiseSampler
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.ranges._tree import BalancedTree, reversal_table

__all__ = [
    "LevelVariances",
    "cascade_sample",
    "level_profile",
    "sample_rows",
    "sample_with",
    "split_variances",
]

LevelVariances = Sequence[float] | None
FloatArray = NDArray[np.float64]

# Elements finished per in-cache block (2^16 float64 = 512 KiB).
_BLOCK = 1 << 16


def level_profile(n: int, level_variances: LevelVariances = None) -> tuple[float, ...]:
    """The validated per-depth variances v_0..v_K (root first) for n leaves, in σ² units.

    Args:
        n: number of leaves; the balanced tree has depth K = ⌈log₂ n⌉.
        level_variances: K + 1 positive numbers, or None for all ones (every node
            variance σ², the paper's C_k).

    Raises:
        ValueError: wrong length, a non-positive level (a zero-variance level would
            release that level exactly, which is not private), or a profile with
            v_{d+1} ≤ v_d/4, which no cascade can produce (β_d² ≤ 0).
    """
    depth = BalancedTree(check_integer("n", n, ge=1)).depth
    if level_variances is None:
        return (1.0,) * (depth + 1)
    profile = _check_cascade_profile("level_variances", level_variances)
    if len(profile) != depth + 1:
        raise ValueError(
            f"level_variances must have {depth + 1} entries (depths 0..{depth} of the balanced "
            f"tree over n={n} leaves), got {len(profile)}"
        )
    return profile


def _check_cascade_profile(name: str, level_variances: object) -> tuple[float, ...]:
    """Positive per-depth variances that a cascade can produce (v_{d+1} > v_d/4)."""
    if isinstance(level_variances, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of numbers, got {level_variances!r}")
    profile = check_real_sequence(name, level_variances, gt=0)
    if not profile:
        raise ValueError(f"{name} must have at least one entry (the root), got none")
    for d in range(len(profile) - 1):
        if not profile[d + 1] > profile[d] / 4.0:
            raise ValueError(
                f"{name}[{d + 1}] must be > {name}[{d}]/4 = "
                f"{profile[d] / 4.0!r} (a child of a depth-{d} node has variance "
                f"v_{d}/4 + beta^2 with beta^2 > 0), got {profile[d + 1]!r}"
            )
    return profile


def split_variances(profile: Sequence[float]) -> tuple[float, ...]:
    """β_d² = v_{d+1} − v_d/4 for d = 0..K−1: the variance of Y's term at a depth-d split."""
    profile = _check_cascade_profile("profile", profile)
    return tuple(profile[d + 1] - profile[d] / 4.0 for d in range(len(profile) - 1))


class _Source(Protocol):
    """Fills arrays with i.i.d. samples (the cascade's only randomness)."""

    def fill(self, out: FloatArray) -> None: ...


class _NormalSource:
    """Standard normals from a Generator, drawn in place."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def fill(self, out: FloatArray) -> None:
        self.rng.standard_normal(out=out)


class _SamplerSource:
    """Samples from a :class:`~dpcount.privacy.noise.NoiseSampler` (e.g. zero or constant)."""

    def __init__(self, sampler: NoiseSampler, rng: np.random.Generator) -> None:
        self.sampler = sampler
        self.rng = rng

    def fill(self, out: FloatArray) -> None:
        out[...] = self.sampler.sample(self.rng, out.shape)


class _SequenceSource:
    """Hands out a given vector in order (tests push unit vectors through the cascade)."""

    def __init__(self, values: FloatArray) -> None:
        self.values = np.asarray(values, dtype=np.float64).ravel()
        self.used = 0

    def fill(self, out: FloatArray) -> None:
        k = out.size
        out[...] = self.values[self.used : self.used + k].reshape(out.shape)
        self.used += k


class _Plan:
    """One axis of a cascade: the tree, the root scale and the split scales (σ included)."""

    def __init__(self, n: int, profile: Sequence[float], scale: float) -> None:
        self.tree = BalancedTree(n)
        self.root_scale = scale * float(np.sqrt(profile[0]))
        self.split_scales = tuple(scale * float(np.sqrt(b)) for b in split_variances(profile))
        self.patterns: dict[tuple[int, bool], _BottomPattern] = {}


class _RowSource:
    """Alg. 3: each Y drawn along axis 0 is a row of independent column cascades."""

    def __init__(self, plan: _Plan, inner: _Source) -> None:
        self.plan = plan
        self.inner = inner

    def fill(self, out: FloatArray) -> None:
        lead, rows, cols = out.shape  # (1, k, n₂): k rows, each a cascade over n₂
        _run(self.plan, self.inner, out.reshape(lead * rows, cols, 1))


@lru_cache(maxsize=64)
def _reversal(bits: int) -> NDArray[np.int64]:
    return reversal_table(bits)


def _split(
    x: FloatArray, beta: float, source: _Source, out: FloatArray | None = None
) -> FloatArray:
    """Children of every node in ``x`` (shape (L, m, T)): X/2 ± β·Y, interleaved."""
    lead, m, trail = x.shape
    y = np.empty_like(x)
    source.fill(y)
    y *= beta
    child = np.empty((lead, 2 * m, trail)) if out is None else out
    pairs = child.reshape(lead, m, 2, trail)
    left, right = pairs[:, :, 0, :], pairs[:, :, 1, :]
    np.multiply(x, 0.5, out=left)
    np.subtract(left, y, out=right)
    left += y
    return child


class _BottomPattern:
    """Which bottom nodes under one depth-``top_depth`` node p are wide, as gather indices.

    Bottom node p·2^h + s (h = K−1−top_depth) is wide iff
    rev_{K−1}(p·2^h + s) = rev_h(s)·2^{top_depth} + rev_{top_depth}(p) < w = n − 2^{K−1},
    i.e. iff rev_h(s) < A, or rev_h(s) = A and rev_{top_depth}(p) < B, where
    (A, B) = divmod(w, 2^{top_depth}). So the pattern is the same for every p up to the
    one node with rev_h(s) = A: two variants, computed once. Leaf ℓ of the subtree is
    ``coef[ℓ]``·X[``node[ℓ]``] + ``sign[ℓ]``·β·Y[``rank[ℓ]``] (coef 1/2 and sign ±1 in a
    wide node, coef 1 and sign 0 for a narrow node, which is itself a leaf).
    """

    def __init__(self, tree: BalancedTree, top_depth: int, low: bool) -> None:
        height = tree.depth - 1 - top_depth
        a, _ = divmod(tree.wide_count, 1 << top_depth)
        rev = _reversal(height)
        wide = (rev < a) | ((rev == a) & low)
        sizes = 1 + wide.astype(np.int64)
        self.wide_count = int(np.count_nonzero(wide))
        self.leaves = int(sizes.sum())
        self.node = np.repeat(np.arange(rev.size, dtype=np.intp), sizes)
        first = np.cumsum(sizes) - sizes  # first leaf of each bottom node
        in_wide = wide[self.node]
        is_right = np.zeros(self.leaves, dtype=bool)
        is_right[first[wide] + 1] = True
        self.coef = np.where(in_wide, 0.5, 1.0)[None, :, None]
        self.sign = np.where(in_wide, np.where(is_right, -1.0, 1.0), 0.0)[None, :, None]
        self.rank = np.maximum(np.cumsum(wide) - 1, 0)[self.node].astype(np.intp)


def _bottom_pattern(plan: _Plan, top_depth: int, top: int) -> _BottomPattern:
    tree = plan.tree
    _, b = divmod(tree.wide_count, 1 << top_depth)
    low = bool(_reversal(top_depth)[top] < b)
    key = (top_depth, low)
    if key not in plan.patterns:
        plan.patterns[key] = _BottomPattern(tree, top_depth, low)
    return plan.patterns[key]


def _split_bottom(
    plan: _Plan, x: FloatArray, top: int, top_depth: int, source: _Source, out: FloatArray
) -> None:
    """Last level of a non-perfect tree: wide bottom nodes split, narrow ones are leaves."""
    pattern = _bottom_pattern(plan, top_depth, top)
    lead, _, trail = x.shape
    np.take(x, pattern.node, axis=1, out=out, mode="clip")
    out *= pattern.coef
    if pattern.wide_count:
        y = np.empty((lead, pattern.wide_count, trail))
        source.fill(y)
        y *= plan.split_scales[plan.tree.depth - 1]
        term = np.take(y, pattern.rank, axis=1, mode="clip")
        term *= pattern.sign
        out += term


def _descend(
    plan: _Plan, x: FloatArray, depth: int, first: int, source: _Source, out: FloatArray
) -> None:
    """Leaves under the depth-``depth`` nodes ``first``, ``first``+1, ... whose values are ``x``."""
    tree = plan.tree
    top_depth, top_first = depth, first
    while depth < tree.depth - 1:
        x = _split(x, plan.split_scales[depth], source)
        depth += 1
    if tree.is_perfect:
        _split(x, plan.split_scales[tree.depth - 1], source, out=out)
    else:
        _split_bottom(plan, x, top_first, top_depth, source, out)


def _run(plan: _Plan, source: _Source, out: FloatArray) -> None:
    """Fill ``out`` (shape (L, n, T), C-contiguous) with L·T independent cascades along axis 1."""
    tree = plan.tree
    lead, n, trail = out.shape
    if tree.depth == 0:
        source.fill(out)
        out *= plan.root_scale
        return
    per_row = n * trail
    if per_row <= _BLOCK:  # whole cascades fit in a block: batch rows
        rows = max(1, _BLOCK // per_row)
        for r0 in range(0, lead, rows):
            block = out[r0 : r0 + rows]
            root = np.empty((block.shape[0], 1, trail))
            source.fill(root)
            root *= plan.root_scale
            _descend(plan, root, 0, 0, source, block)
        return
    # One cascade is larger than a block: finish one subtree of ~_BLOCK leaves at a time.
    height = 0  # subtree height above the bottom nodes
    while height < tree.depth - 1 and (2 << (height + 1)) * trail <= _BLOCK:
        height += 1
    top_depth = tree.depth - 1 - height
    sizes = tree.node_sizes(top_depth)
    for r in range(lead):
        top = np.empty((1, 1, trail))
        source.fill(top)
        top *= plan.root_scale
        for d in range(top_depth):
            top = _split(top, plan.split_scales[d], source)
        offset = 0
        for p in range(1 << top_depth):
            size = int(sizes[p])
            target = out[r : r + 1, offset : offset + size, :]
            _descend(plan, top[:, p : p + 1, :], top_depth, p, source, target)
            offset += size


def _profiles(shape: tuple[int, ...], level_variances: object) -> tuple[tuple[float, ...], ...]:
    """Validated profiles, one per axis (2-D takes a pair of per-axis profiles or None)."""
    if len(shape) == 1:
        return (level_profile(shape[0], level_variances),)  # type: ignore[arg-type]
    if level_variances is None:
        return tuple(level_profile(n) for n in shape)
    if not isinstance(level_variances, (tuple, list)) or len(level_variances) != 2:
        raise TypeError(
            "level_variances for a 2-D shape must be a pair (rows profile, columns profile), "
            f"got {level_variances!r}"
        )
    return tuple(level_profile(n, v) for n, v in zip(shape, level_variances, strict=True))


def _sample(
    shape: tuple[int, ...],
    profiles: Sequence[Sequence[float]],
    scale: float,
    source: _Source,
) -> FloatArray:
    """Cascade noise of ``shape`` (1-D or 2-D) with σ = ``scale`` from ``source``."""
    if len(shape) == 1:
        out = np.empty((1, shape[0], 1))
        _run(_Plan(shape[0], profiles[0], scale), source, out)
        return out.reshape(shape)
    rows, cols = shape
    inner = _RowSource(_Plan(cols, profiles[1], 1.0), source)
    out = np.empty((1, rows, cols))
    _run(_Plan(rows, profiles[0], scale), inner, out)
    return out.reshape(shape)


def sample_rows(
    count: int, n: int, profile: Sequence[float], sigma: float, rng: np.random.Generator
) -> FloatArray:
    """``count`` independent 1-D cascades over n leaves as rows of a (count, n) array."""
    out = np.empty((count, n, 1))
    _run(_Plan(n, profile, sigma), _NormalSource(rng), out)
    return out.reshape(count, n)


def cascade_sample(
    shape: int | tuple[int, ...],
    sigma: float = 1.0,
    rng: RNGLike = None,
    *,
    level_variances: object = None,
) -> FloatArray:
    """Draw leaf noise N(0, σ²·C) by Cascade Sampling (Alg. 1; App. B.1 Alg. 2; App. B.2 Alg. 3).

    Every node of the balanced binary tree over the leaves (left child gets ⌈m/2⌉)
    — the sum of its leaves' noise — has variance σ²·v_depth (σ² for the default
    profile, Theorem 3.3); for n = 2^k the covariance is σ²·C_k of Definition 3.1
    (Proposition 3.5). In 2-D the covariance is σ²·C⁽¹⁾⊗C⁽²⁾ (rows ⊗ columns), so
    every rectangle made of a row node and a column node has variance
    σ²·v⁽¹⁾·v⁽²⁾. Cost O(n): one standard normal per leaf plus a few in-cache
    passes; memory: the output plus O(2^16).

    Args:
        shape: n, (n,) or (n₁, n₂).
        sigma: σ > 0 (a standard deviation).
        rng: Generator, int seed (research only) or None (OS entropy).
        level_variances: per-depth node variances in σ² units, root first (see
            :func:`level_profile`); for 2-D a pair (rows, columns) of such profiles.

    Returns:
        A float64 array of ``shape``.
    """
    dims = check_shape("shape", shape)
    s = check_real("sigma", sigma, gt=0)
    profiles = _profiles(dims, level_variances)
    return _sample(dims, profiles, s, _NormalSource(as_generator(rng)))


def sample_with(
    shape: tuple[int, ...],
    profiles: Sequence[Sequence[float]],
    sampler: NoiseSampler,
    rng: np.random.Generator,
) -> FloatArray:
    """Cascade driven by ``sampler`` (mechanisms call this; GaussianNoise takes the fast path).

    The inputs (root value and every Y) are i.i.d. draws of ``sampler``; with
    ``GaussianNoise(σ)`` this is :func:`cascade_sample` with that σ.
    """
    if isinstance(sampler, GaussianNoise):
        return _sample(shape, profiles, sampler.sigma, _NormalSource(rng))
    return _sample(shape, profiles, 1.0, _SamplerSource(sampler, rng))
