"""The embedded engine: private running counts for every key, vectorized over (steps × keys).

Mechanism: the k-ary tree without subtraction (Dwork, Naor, Pitassi, Rothblum 2010
and Chan, Shi, Song 2011 for k = 2; Andersson & Pagh 2023, "count-on-your-elders",
Algorithm 1 for general k). Node (ℓ, m), ℓ = 0..h−1, holds the sum of steps
m·k^ℓ + 1 .. (m+1)·k^ℓ; h = ⌈log_k(T + 1)⌉ so every step s ≤ T is a sum of
complete nodes along its base-k digits d_ℓ(s): the running count of step s adds
d_ℓ(s) nodes of level ℓ, and its noise variance is ‖d(s)‖₁ · Var(node noise),
reported exactly per step. With ``subtract=True`` the digits are the offset digits
of count-on-your-elders (Algorithm 3, Definitions 10 and 28) and a release adds or
subtracts |d_ℓ(s)| nodes per level (:func:`tree_running_counts_subtract`).

Privacy (the neighbouring relation is stated in :mod:`dpcount.keyed.events`): a
neighbouring change touches one step, with per-step sensitivity Δ₁ (ℓ₁ across keys)
and Δ₂ (ℓ₂ across keys). It changes each affected key's node at every level, so
the vector of all node sums of all keys changes by at most ℓ₁ = h·Δ₁ and
ℓ₂ = √h·Δ₂; i.i.d. node noise is calibrated for those by
:func:`dpcount.privacy.calibrate` (each rule cites its theorem there). The running
counts are post-processing of the noisy nodes.

BLT (``kind="blt"``, Gaussian noise): the buffered linear Toeplitz factorization
A = B·C of Dvijotham, McMahan, Pillutla, Steinke, Thakurta 2024 (arXiv:2404.16706;
:mod:`dpcount.counting.blt`), for every key at once: key i releases
C(s) + (B z_i)_s with z_{i,t} ~ N(0, σ²) i.i.d. from PRF position (0, t − 1, i),
computed by the streaming recursion q_j(t) = λ_j q_j(t − 1) + z_t over the inverse
BLT's decays (and the running sum of z), (B z)_t = a·Σz + Σ_j β_j q_j(t): (buffers + 1)
values per key between steps. Privacy: the perturbed vector (C x_i + z_i over all
keys) changes, for a neighbouring change δ of one step j across keys, by
δ_i·C[:, j] for each key; the columns of the lower-triangular Toeplitz C with c_k > 0
are nested, so its ℓ₂ norm is ≤ ‖δ‖₂·‖C[:, 0]‖₂ = Δ₂·√(Σ_{k<T} c_k²) and its ℓ₁ norm ≤
Δ₁·Σ_{k<T} c_k (closed form of :func:`~dpcount.counting.blt.blt_losses`, enlarged by a
relative 1e-12 so rounding only adds noise); σ is calibrated for them by
:func:`dpcount.privacy.calibrate`. Exact variance per step: σ²·Σ_{k<s} b_k².

Noise: node (ℓ, m) of key i gets the noise of PRF position (ℓ, m, i)
(:mod:`dpcount.keyed.prf`), so the output is a function of (secret, data) alone —
not of the key chunking, the partitioning, the engine or retries. Memory is bounded
by chunking over keys: one chunk holds a few (T × chunk) arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.counting.blt import (
    BLTInverse,
    blt_inverse,
    blt_losses,
    decoder_coefficients,
    encoder_coefficients,
    shipped_blt_parameters,
)
from dpcount.counting.digits import DigitSystem
from dpcount.counting.sqrt import SENSITIVITY_MARGIN
from dpcount.keyed.events import Contributions
from dpcount.keyed.prf import (
    PRF_SCHEME,
    PositionPRF,
    keyed_discrete_gaussian,
    keyed_discrete_laplace,
    keyed_gaussian,
    keyed_laplace,
)
from dpcount.privacy.budget import NoiseKind, _Choice
from dpcount.privacy.guarantee import Calibrated, PrivacyGuarantee, calibrate

__all__ = [
    "KeyedKind",
    "KeyedMechanism",
    "blt_running_counts",
    "exact_running",
    "offset_digits",
    "tree_running_counts",
    "tree_running_counts_subtract",
    "window_running_counts",
]

NoiseFn = Callable[[int, int], NDArray[Any]]
#: ``noise(level, node_lo, node_hi)``: noise of nodes node_lo..node_hi−1, shape (nodes, keys)
NodeNoiseFn = Callable[[int, int, int], NDArray[Any]]


def tree_running_counts(counts: NDArray[Any], k: int, height: int, noise: NoiseFn) -> NDArray[Any]:
    """Noisy running counts of every column of ``counts`` (T × keys) with a k-ary tree.

    ``noise(level, n_nodes)`` returns the noise of nodes 0..n_nodes−1 of that level,
    shape (n_nodes, keys). Integer inputs and noise give exact integer outputs.
    """
    horizon, n_keys = counts.shape
    s = np.arange(1, horizon + 1)
    level_sums = counts
    out = np.zeros_like(counts)
    for level in range(height):
        width = k**level
        n_nodes = horizon // width
        if level:
            prev = level_sums[: (level_sums.shape[0] // k) * k]
            level_sums = prev.reshape(-1, k, n_keys).sum(axis=1)
        if n_nodes == 0:
            break
        noisy = level_sums[:n_nodes] + noise(level, n_nodes)
        cum = np.zeros((n_nodes + 1, n_keys), dtype=noisy.dtype)
        np.cumsum(noisy, axis=0, out=cum[1:])
        # step s adds nodes (s // k^(l+1))·k .. s // k^l − 1 of this level
        hi = s // width
        lo = (s // (width * k)) * k
        out += cum[hi] - cum[lo]
    return out


def offset_digits(horizon: int, k: int, low: int, height: int) -> list[NDArray[np.int64]]:
    """Digits d_ℓ(s) ∈ [low, low + k − 1] of s = 1..T, least significant first.

    d = ((q − low) mod k) + low and q ← (q − d)/k, starting from q = s. With low = 0 these
    are the base-k digits; with low < 0 the offset digits of count-on-your-elders
    (Definitions 10 and 28).
    """
    q = np.arange(1, horizon + 1, dtype=np.int64)
    digits = []
    for _ in range(height):
        d = (q - low) % k + low
        digits.append(d)
        q = (q - d) // k
    if q.any():
        raise ValueError(f"height {height} is too small for horizon {horizon}")
    return digits


def tree_running_counts_subtract(
    counts: NDArray[Any], k: int, low: int, height: int, noise: NoiseFn
) -> NDArray[Any]:
    """Running counts plus the noise of the k-ary tree with subtraction (offset digits).

    With offset digits s = Σ d_ℓ k^ℓ and ancestors q_ℓ = Σ_{j≥ℓ} d_j k^{j−ℓ}, the prefix
    1..s is Σ_ℓ sign(d_ℓ)·(level-ℓ nodes k·q_{ℓ+1} + min(d_ℓ, 0) .. k·q_{ℓ+1} + max(d_ℓ, 0) − 1),
    so the release Σ_ℓ sign(d_ℓ)·(node sum + node noise) — a post-processing of the
    noisy nodes, one node per level touched by each step — equals the exact running
    count plus Σ_ℓ sign(d_ℓ)·(sum of those nodes' noise) (count-on-your-elders, Alg. 3;
    subtracted nodes may cover steps after s, whose data enter only through the
    exact running count). ``noise`` as in :func:`tree_running_counts`.
    """
    horizon, n_keys = counts.shape
    out = np.cumsum(counts, axis=0)
    q = np.arange(1, horizon + 1, dtype=np.int64)
    for level in range(height):
        d = (q - low) % k + low
        q = (q - d) // k
        lo = k * q + np.minimum(d, 0)
        hi = k * q + np.maximum(d, 0)
        n_nodes = int(hi.max())
        if n_nodes == 0:
            continue
        cum = np.zeros((n_nodes + 1, n_keys), dtype=out.dtype)
        np.cumsum(noise(level, n_nodes), axis=0, out=cum[1:])
        part = cum[hi] - cum[lo]
        negative = d < 0
        part[negative] = -part[negative]
        out += part
    return out


def exact_running(
    counts: NDArray[Any], base: NDArray[Any] | None, *, overwrite: bool = False
) -> NDArray[Any]:
    """Exact running counts of a window of steps, continuing from ``base``.

    ``counts`` (W × keys) holds the contributions of steps first..first+W−1 and
    ``base`` (keys,) the exact running count of step first−1 (None: 0). Row i is
    (((base + x₀) + x₁) + …) + x_i, added strictly in step order (``np.cumsum`` is a
    sequential accumulation), so a run split at any step gives the same bits as one
    run, for floating-point weights too (0 + x₀ = x₀ exactly). ``overwrite``: compute in
    ``counts``' own memory.
    """
    out = counts if overwrite else np.array(counts, copy=True)
    if base is not None and out.shape[0]:
        out[0] = base + out[0]
    np.cumsum(out, axis=0, out=out)
    return out


def window_running_counts(
    counts: NDArray[Any],
    base: NDArray[Any] | None,
    first: int,
    k: int,
    low: int,
    height: int,
    noise: NodeNoiseFn,
    *,
    overwrite: bool = False,
) -> NDArray[Any]:
    """Private running counts of steps first..first+W−1 (``counts``: W × keys).

    The release of step s is a post-processing of the noisy nodes of its
    decomposition: with digits d_ℓ(s) ∈ [low, low + k − 1] and ancestors q_ℓ
    (:func:`offset_digits`; low = 0 is the plain k-ary tree), it adds sign(d_ℓ)·(sum +
    noise) of the level-ℓ nodes k·q_{ℓ+1} + min(d_ℓ, 0) .. k·q_{ℓ+1} + max(d_ℓ, 0) − 1.
    Their exact sums add up to the exact running count C(s) (the nodes tile 1..s with
    signs; count-on-your-elders Alg. 1 and 3), so the release is C(s) plus
    Σ_ℓ sign(d_ℓ)·(their noise) — and needs of the past only C(first − 1) (``base``),
    not the node sums: noise is a function of the node's position
    (:mod:`dpcount.keyed.prf`). That is what makes resuming across time exact.

    Arithmetic order is a function of s alone (floating point: the signed node noises
    added one by one, level by level and in node order, to 0, then C(s) + that sum;
    integers are exact in any order and are added straight into C(s)), so any window
    split gives the same bits, also for floating-point noise. Only the nodes the
    window touches are drawn: at most W/k^ℓ + k per level. ``overwrite``: compute in
    ``counts``' memory (integers: the result is ``counts``).
    """
    width = counts.shape[0]
    exact = exact_running(counts, base, overwrite=overwrite)
    integer = exact.dtype.kind == "i"
    total = exact if integer else np.zeros_like(exact)
    q = np.arange(first, first + width, dtype=np.int64)
    for level in range(height):
        d = (q - low) % k + low
        q = (q - d) // k
        lo = k * q + np.minimum(d, 0)
        hi = k * q + np.maximum(d, 0)
        a, b = int(lo.min()), int(hi.max())
        if b <= a:
            continue
        drawn = noise(level, a, b)
        negative = d < 0
        for j in range(int(np.abs(d).max())):
            rows = np.flatnonzero(lo + j < hi)  # steps that add a j-th node at this level
            if rows.size == 0:
                continue
            values = drawn[lo[rows] + (j - a)]
            flip = negative[rows]
            if flip.any():
                values[flip] = -values[flip]
            total[rows] += values
    if q.any():
        raise ValueError(f"height {height} is too small for step {first + width - 1}")
    if integer:
        return exact
    out: NDArray[Any] = exact + total
    return out


def blt_running_counts(
    counts: NDArray[np.float64],
    base: NDArray[np.float64] | None,
    z: NDArray[np.float64],
    decay: NDArray[np.float64],
    weight: NDArray[np.float64],
    buffers: NDArray[np.float64] | None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """BLT releases of a window of steps: exact running count + (B z)_s, for each column.

    ``z`` (W × keys): the i.i.d. noise of the window's steps; ``decay`` and ``weight``
    (m,): the recursion q_j(t) = decay_j·q_j(t − 1) + z_t and (B z)_t = Σ_j weight_j·q_j(t)
    (decays λ and 1 — the running sum —, weights β and a); ``buffers`` (m × keys): q(first
    − 1) (None: zero). Returns the releases and q at the window's last step.

    Each q_j is one first-order filter per key (:func:`scipy.signal.lfilter`:
    y_t = z_t + λ·y_{t−1}, element by element), then the weighted sum is taken in buffer
    order: the arithmetic per (key, step) does not depend on the key chunk or on where
    the run was split, so resumed and re-chunked runs give the same bits. The filters
    run on a keys × steps copy (each key's steps contiguous: ~6x faster than filtering
    down the columns).
    """
    from scipy.signal import lfilter

    n_keys = counts.shape[1]
    exact = exact_running(counts, base)
    zt = np.ascontiguousarray(z.T)
    total = np.zeros_like(zt)
    ends = np.empty((len(decay), n_keys))
    for j, (lam, w) in enumerate(zip(decay.tolist(), weight.tolist(), strict=True)):
        start = np.zeros((n_keys, 1)) if buffers is None else lam * buffers[j][:, None]
        y = lfilter([1.0], [1.0, -lam], zt, axis=1, zi=start)[0]
        ends[j] = y[:, -1]
        y *= w
        total += y
    out: NDArray[np.float64] = exact + total.T
    return out, ends


class KeyedKind(_Choice):
    """The keyed mechanism: the k-ary tree (any noise kind) or BLT (Gaussian noise)."""

    TREE = "tree"
    BLT = "blt"


def digit_sums(horizon: int, k: int) -> NDArray[np.int64]:
    """‖d(s)‖₁, the number of nodes summed at step s = 1..T (sum of base-k digits)."""
    s = np.arange(1, horizon + 1, dtype=np.int64)
    total = np.zeros(horizon, dtype=np.int64)
    while s.any():
        total += s % k
        s //= k
    return total


@dataclass(frozen=True)
class KeyedMechanism:
    """The calibrated tree for one keyed run (public configuration only, no secret).

    Args:
        n_keys: size of the public key universe.
        horizon: T, the number of steps.
        k: branching factor (≥ 2).
        noise: a :class:`~dpcount.privacy.NoiseKind`.
        epsilon, delta, calibration: the budget (see :func:`dpcount.privacy.calibrate`).
        l1_step, l2_step: per-step sensitivity across keys (Δ₁, Δ₂).
        neighbouring: text of the neighbouring relation.
        key_block: PRF layout constant B (power of two).
        subtract: the k-ary tree with subtraction (offset digits, count-on-your-elders
            Alg. 3): fewer nodes per release for k ≥ 3.
        kind: :class:`KeyedKind` — the tree, or BLT with the shipped parameters for the
            horizon (Gaussian noise only; ``k`` and ``subtract`` unused; see the module
            docstring for its sensitivity across keys, arXiv:2404.16706).
    """

    n_keys: int
    horizon: int
    k: int
    noise: NoiseKind
    epsilon: float
    delta: float | None
    calibration: str | None
    l1_step: float
    l2_step: float
    neighbouring: str
    key_block: int
    subtract: bool = False
    kind: KeyedKind = KeyedKind.TREE

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", KeyedKind.parse("mechanism", self.kind))
        noise = NoiseKind.parse("noise", self.noise)
        if self.kind is KeyedKind.BLT and noise is not NoiseKind.GAUSSIAN:
            raise ValueError(
                f"noise={noise.value!r} is not available with mechanism='blt': BLT is "
                "calibrated for Gaussian noise only (use noise='gaussian' and a delta)"
            )
        for name in ("n_keys", "horizon"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 2:
            raise ValueError(f"k must be an integer >= 2, got {self.k!r}")
        object.__setattr__(self, "noise", NoiseKind.parse("noise", self.noise))

    @property
    def digit_system(self) -> DigitSystem:
        return DigitSystem.for_tree(self.k, self.subtract)

    @property
    def height(self) -> int:
        """Levels h: ⌈log_k(T + 1)⌉ without subtraction; with it, the smallest h whose
        offset digits reach T (:meth:`~dpcount.counting.digits.DigitSystem.height`)."""
        return self.digit_system.height(self.horizon)

    @cached_property
    def blt(self) -> tuple[NDArray[np.float64], NDArray[np.float64], BLTInverse]:
        """(θ, ω, inverse): the shipped BLT optimized for the horizon (mean loss)."""
        theta, omega = shipped_blt_parameters(self.horizon)
        a, b = np.asarray(theta, dtype=np.float64), np.asarray(omega, dtype=np.float64)
        return a, b, blt_inverse(a, b)

    @property
    def unit_sensitivities(self) -> tuple[float, float]:
        """(ℓ₁, ℓ₂) norms of the perturbed vector's change per unit of step change:
        h and √h for the tree (one node per level); ‖C[:, 0]‖₁ and ‖C[:, 0]‖₂ for BLT
        (closed form for ℓ₂, :func:`~dpcount.counting.blt.blt_losses`; both enlarged
        by a relative 1e-12)."""
        if self.kind is KeyedKind.TREE:
            h = self.height
            return float(h), math.sqrt(h)
        theta, omega, inverse = self.blt
        l1 = math.fsum(encoder_coefficients(theta, omega, self.horizon).tolist())
        l2 = math.sqrt(blt_losses(theta, omega, self.horizon, inverse).sensitivity_squared)
        return l1 * (1 + SENSITIVITY_MARGIN), l2 * (1 + SENSITIVITY_MARGIN)

    @property
    def calibrated(self) -> Calibrated:
        u1, u2 = self.unit_sensitivities
        return calibrate(
            str(self.noise),
            epsilon=self.epsilon,
            delta=self.delta,
            l1_sensitivity=u1 * self.l1_step,
            l2_sensitivity=u2 * self.l2_step,
            calibration=self.calibration,
            neighbouring=self.neighbouring,
        )

    @property
    def privacy(self) -> PrivacyGuarantee:
        return self.calibrated.privacy

    def describe(self) -> str:
        """The guarantee in one line, naming the keyed sampler actually used."""
        import re

        text = re.sub(r"[,;] exact sampler \([^)]*Alg\. 2\)", "", self.privacy.describe())
        if self.kind is KeyedKind.BLT:
            n = len(self.blt[0])
            return (
                f"{text}; BLT with {n} buffers (Dvijotham et al. 2024, arXiv:2404.16706); "
                "noise: floating-point Gaussian (Box-Muller) from AES-CTR PRF bits of "
                "(secret, step, key)"
            )
        sampler = {
            NoiseKind.DISCRETE_LAPLACE: "exact discrete Laplace as the difference of two "
            "geometric variables",
            NoiseKind.DISCRETE_GAUSSIAN: "exact discrete Gaussian by CKS 2020 Alg. 3",
            NoiseKind.LAPLACE: "floating-point Laplace",
            NoiseKind.GAUSSIAN: "floating-point Gaussian (Box-Muller)",
        }[self.noise]
        return f"{text}; noise: {sampler}, from AES-CTR PRF bits of (secret, node, key)"

    @property
    def node_variance(self) -> float:
        return float(self.calibrated.sampler.variance)

    def std(self) -> NDArray[np.float64]:
        """Exact standard deviation of the private count of each step (same for all keys)."""
        if self.kind is KeyedKind.BLT:
            b = decoder_coefficients(self.blt[2], self.horizon)
            blt_std: NDArray[np.float64] = np.sqrt(np.cumsum(b * b) * self.node_variance)
            return blt_std
        digits = offset_digits(self.horizon, self.k, self.digit_system.low, self.height)
        nodes = np.sum(np.abs(np.array(digits)), axis=0)
        out: NDArray[np.float64] = np.sqrt(nodes * self.node_variance)
        return out

    def config(self) -> dict[str, Any]:
        return {
            "scheme": PRF_SCHEME,
            "mechanism": self._mechanism_name(),
            "n_keys": self.n_keys,
            "horizon": self.horizon,
            "k": self.k,
            "noise": str(self.noise),
            "epsilon": self.epsilon,
            "delta": self.delta,
            "calibration": self.calibration,
            "l1_step": self.l1_step,
            "l2_step": self.l2_step,
            "key_block": self.key_block,
        }

    def _mechanism_name(self) -> str:
        if self.kind is KeyedKind.BLT:
            theta, omega, _ = self.blt
            return f"blt:{theta.tolist()}:{omega.tolist()}"
        return "kary-tree-subtraction" if self.subtract else "kary-tree-no-subtraction"

    @property
    def buffers(self) -> int:
        """Noise state values per key between steps (BLT: buffers + 1; tree: 0)."""
        return len(self.blt[0]) + 1 if self.kind is KeyedKind.BLT else 0

    def noise_fn(self, secret: bytes, key_lo: int, key_hi: int) -> NodeNoiseFn:
        """Node noise of keys [key_lo, key_hi): a pure function of (secret, position)."""
        prf = PositionPRF(secret, str(self.noise), self.key_block)
        sampler: Any = self.calibrated.sampler

        def noise(level: int, node_lo: int, node_hi: int) -> NDArray[Any]:
            rect = (level, node_lo, node_hi, key_lo, key_hi)
            if self.noise is NoiseKind.DISCRETE_LAPLACE:
                return keyed_discrete_laplace(prf, rect, Fraction(sampler.scale))
            if self.noise is NoiseKind.DISCRETE_GAUSSIAN:
                return keyed_discrete_gaussian(prf, rect, Fraction(sampler.sigma2))
            if self.noise is NoiseKind.LAPLACE:
                return keyed_laplace(prf, rect, float(sampler.scale))
            return keyed_gaussian(prf, rect, float(sampler.sigma))

        return noise

    def check_window(self, first: int, last: int) -> None:
        if not 1 <= first <= last <= self.horizon:
            raise ValueError(
                f"steps {first}..{last} outside 1..{self.horizon} (the horizon, fixed at the "
                "first run)"
            )

    def counts(
        self, contributions: Contributions, key_lo: int, key_hi: int, first: int, last: int
    ) -> NDArray[Any]:
        """Dense contributions of steps first..last of keys [key_lo, key_hi)."""
        if not 0 <= key_lo < key_hi <= self.n_keys:
            raise ValueError(f"key range [{key_lo}, {key_hi}) outside [0, {self.n_keys})")
        self.check_window(first, last)
        dtype = np.int64 if self.noise.is_discrete else np.float64
        dense = contributions.dense(key_lo, key_hi, last, first)
        out: NDArray[Any] = dense.astype(dtype, copy=False)
        return out

    def release(
        self,
        secret: bytes,
        contributions: Contributions,
        key_lo: int,
        key_hi: int,
        *,
        first: int = 1,
        last: int | None = None,
        base: NDArray[Any] | None = None,
    ) -> NDArray[Any]:
        """Private running counts of keys [key_lo, key_hi) at steps first..last (default
        1..T): shape (last − first + 1, key_hi − key_lo). ``base``: the exact running
        counts of step first − 1 of these keys (from a stored state; None: zero)."""
        if self.kind is KeyedKind.BLT:
            raise ValueError("BLT carries noise state between steps: use release_state")
        return self.release_state(
            secret, contributions, key_lo, key_hi, first=first, last=last, base=base
        )[0]

    def release_state(
        self,
        secret: bytes,
        contributions: Contributions,
        key_lo: int,
        key_hi: int,
        *,
        first: int = 1,
        last: int | None = None,
        base: NDArray[Any] | None = None,
        buffers: NDArray[np.float64] | None = None,
    ) -> tuple[NDArray[Any], NDArray[np.float64] | None]:
        """:meth:`release` and the noise state after step ``last`` (BLT: (buffers + 1) ×
        keys, from ``buffers`` at step first − 1; the tree has none: None)."""
        last = self.horizon if last is None else last
        counts = self.counts(contributions, key_lo, key_hi, first, last)
        if base is not None:
            base = np.asarray(base, dtype=counts.dtype)
            if base.shape != (key_hi - key_lo,):
                raise ValueError(f"base must have shape ({key_hi - key_lo},), got {base.shape}")
        if self.kind is KeyedKind.BLT:
            inv = self.blt[2]
            prf = PositionPRF(secret, "gaussian/blt", self.key_block)
            sigma = float(self.calibrated.sampler.sigma)  # type: ignore[attr-defined]
            z = keyed_gaussian(prf, (0, first - 1, last, key_lo, key_hi), sigma)
            if buffers is not None and buffers.shape != (self.buffers, key_hi - key_lo):
                raise ValueError(f"buffers must have shape ({self.buffers}, {key_hi - key_lo})")
            decay, weight = np.append(inv.decay, 1.0), np.append(inv.beta, inv.a)
            return blt_running_counts(counts, base, z, decay, weight, buffers)
        noise = self.noise_fn(secret, key_lo, key_hi)
        low = self.digit_system.low
        out = window_running_counts(
            counts, base, first, self.k, low, self.height, noise, overwrite=True
        )
        return out, None


def chunk_bounds(n_keys: int, chunk_keys: int) -> list[tuple[int, int]]:
    if isinstance(chunk_keys, bool) or not isinstance(chunk_keys, int) or chunk_keys < 1:
        raise ValueError(f"chunk_keys must be a positive integer, got {chunk_keys!r}")
    return [(lo, min(lo + chunk_keys, n_keys)) for lo in range(0, n_keys, chunk_keys)]


def chunk_frame(
    values: NDArray[Any],
    std: NDArray[np.float64],
    keys: tuple[Any, ...],
    labels: list[str],
    key_lo: int,
    time_label: str = "time",
    first_step: int = 1,
) -> pd.DataFrame:
    """Output rows (key, step, time label, private_count, std), key-major, for one chunk.

    ``values`` holds steps first_step.. (``labels`` and ``std``: one per row of values).

    Key and time label are categorical columns (codes into the chunk's keys and the
    step labels), so building a chunk creates no Python object per row.
    """
    horizon, n = values.shape
    return pd.DataFrame(
        {
            "key": pd.Categorical.from_codes(
                np.repeat(np.arange(n, dtype=np.int32), horizon),
                categories=pd.Index(list(keys[key_lo : key_lo + n]), dtype=object),
            ),
            "step": np.tile(np.arange(first_step, first_step + horizon, dtype=np.int64), n),
            time_label: pd.Categorical.from_codes(
                np.tile(np.arange(horizon, dtype=np.int32), n), categories=labels
            ),
            "private_count": values.T.reshape(-1),
            "std": np.tile(std, n),
        }
    )
