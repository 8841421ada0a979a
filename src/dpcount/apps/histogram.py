"""Continual histogram with insertions and deletions, and its top-1 statistic.

constant-matters (Fichtenberger, Henzinger, Upadhyay, ICML 2023), App. B.1,
Corollary B.1: the stream of indicator vectors x_t ∈ {−1, 0, 1}^u of the items
inserted (+1) or removed (−1) at step t is summed by a continual counting
mechanism run on all u coordinates at once (M_hist = M_count ⊗ I_u: the same
factorization per coordinate, independent noise per coordinate). The release
at step t is the private histogram h_t ≈ Σ_{i ≤ t} x_i. App. D's *top-1
statistic* is max_j h_t[j], the private frequency of the most frequent item.

Notation (paper → code):

==================  ==============================================
u, 𝒰                ``universe_size``; items are 0, …, u − 1
b                   ``max_items_per_step``
x_t, h_t            ``update(...)`` input / its return value
==================  ==============================================
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    as_array,
    check_index_array,
    check_integer,
    check_iterable,
    check_real,
    check_real_array,
    check_real_dtype,
)
from dpcount.apps._bounds import check_on_out_of_bounds
from dpcount.apps._common import AppBase, AppFields, StreamSensitivity
from dpcount.privacy.budget import Budget
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.privacy.tails import gaussian_two_sided_quantile

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ContinualHistogram",
    "TopItem",
    "histogram_sensitivity",
    "top1_counts",
    "zipf_items",
]


def histogram_sensitivity(
    max_items_per_step: int, max_count_per_item: int = 1
) -> StreamSensitivity:
    """Sensitivity of one histogram step (Corollary B.1, generalized to multiplicities).

    Neighbouring steps differ by at most b item occurrences (inserted or
    removed), at most m of any one item. The change δ ∈ Z^u then has
    ‖δ‖₁ ≤ b and ‖δ‖₂ ≤ √(q·m² + r²) with b = q·m + r (the ℓ₂ norm is largest
    when the b occurrences are packed m per item). With m = 1 (sets, the paper's
    case): ℓ₁ = b and ℓ₂ = √b.

    Args:
        max_items_per_step: b ≥ 1.
        max_count_per_item: m ≥ 1 (values above b act as b).
    """
    b = check_integer("max_items_per_step", max_items_per_step, ge=1)
    m = min(check_integer("max_count_per_item", max_count_per_item, ge=1), b)
    q, r = divmod(b, m)
    return StreamSensitivity(float(b), math.sqrt(q * m * m + r * r))


@dataclass(frozen=True)
class TopItem:
    """An item and its private count in the latest release."""

    item: int
    count: float


def top1_counts(histograms: Any) -> NDArray[np.float64]:
    """App. D's top-1 statistic: the largest count of each histogram (row).

    Args:
        histograms: shape ``(steps, u)`` (private or true histograms).

    Returns:
        shape ``(steps,)``: ``max_j histograms[t, j]``.
    """
    arr = check_real_dtype("histograms", as_array("histograms", histograms))
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(f"histograms must have shape (steps, u) with u >= 1, got {arr.shape}")
    arr = check_real_array("histograms", arr, allow_empty=True)
    top: NDArray[np.float64] = arr.max(axis=1)
    return top


def zipf_items(
    universe_size: int, length: int, exponent: float = 1.0, rng: RNGLike = None
) -> NDArray[np.int64]:
    """A stream of ``length`` items drawn i.i.d. from a Zipf law on ``universe_size`` items.

    P(item j) ∝ (j + 1)^(−exponent), j = 0, …, u − 1 (item 0 is the most frequent):
    the synthetic data of constant-matters App. D (2048 items, u = 20).
    """
    u = check_integer("universe_size", universe_size, ge=1)
    n = check_integer("length", length, ge=1)
    s = check_real("exponent", exponent, ge=0)
    weights = np.arange(1, u + 1, dtype=np.float64) ** (-s)
    return as_generator(rng).choice(u, size=n, p=weights / weights.sum()).astype(np.int64)


class ContinualHistogram(AppBase):
    """Private histogram of a stream of item insertions and deletions (Corollary B.1).

    Each step inserts and/or removes items of the universe {0, …, u − 1}: at most
    ``max_items_per_step`` = b occurrences in total, at most ``max_count_per_item``
    = m of any one item (m = 1, the default and the paper's case, means each step
    is a set). After every step the stream releases the private histogram h_t of
    the items present so far, from a continual counting mechanism run on the u
    coordinates (same factorization, independent noise per coordinate).

    Neighbouring relation (event level): two streams differ at one step, and
    that step's change δ = x_t − x'_t adds or removes at most b item occurrences,
    at most m of any one item (e.g. the step's items are replaced by none).
    Sensitivity passed to the counting mechanism (:func:`histogram_sensitivity`):
    ℓ₁ = b for Laplace noise, ℓ₂ = √b (m = 1) for Gaussian noise.

    Formal guarantee: for that event-level relation the releases of all T steps
    and u items together are ε-DP without a delta and (ε, δ)-DP with one — the
    counting mechanism's guarantee (:attr:`privacy`, :meth:`dp_event`),
    calibrated for the step sensitivity above (default: k-ary tree, k = 19, with
    subtraction, and integer noise, discrete Laplace without a delta, discrete
    Gaussian with one); ``top1``/``topk`` are post-processing. Fichtenberger,
    Henzinger, Upadhyay, "Constant Matters: Fine-grained Error Bound on
    Differentially Private Continual Observation", ICML 2023 (arXiv:2202.11205),
    App. B.1, Corollary B.1.

    Exact error: every coordinate of h_t has variance ``variances()[t − 1]``
    (that of the scalar mechanism), independent across coordinates.

    Input validation: items outside the universe, an item both inserted and
    removed in one step, and a removal that would make a true count negative
    (Corollary B.1 requires Σ_{i ≤ t} x_i ≥ 0) raise ValueError; a rejected step
    is not consumed. A step over the bounds — more than b occurrences, more than
    m of one item — raises ValueError with ``on_out_of_bounds="error"`` (the
    default), or is clipped with ``on_out_of_bounds="clip"``: each item's change
    to [−m, m], then the occurrences kept in item order until b are used (a
    fixed rule that looks at that step only, never silent: ``clipped`` counts
    the clipped steps).

    A refusal is a data-dependent signal the guarantee does not cover
    (:mod:`dpcount.apps._bounds`): a stream that stops at step t reveals that
    step t was invalid; keep such errors with the data holder. With ``"clip"``
    the bounds cannot stop the stream: the clipped steps are within the bounds,
    so the sensitivity and the guarantee are unchanged, for raw streams whose
    clipped steps are neighbours (always when the differing step of one stream
    is empty, e.g. a user's step removed). ``clipped`` is exact and NOT private
    (for the caller only). The non-negativity check is not clipped (it depends
    on the earlier steps, so no per-step rule can replace it) and stays a
    data-dependent refusal.

    Args:
        universe_size: u ≥ 1.
        horizon: T, the number of steps.
        max_items_per_step: b ≥ 1.
        max_count_per_item: m ≥ 1 (multiplicity of one item in one step).
        mechanism: registered counting-mechanism name (default by delta, see above).
        k, subtract: tree options for ``"kary"``.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords:
            ``epsilon`` (ε > 0), ``delta`` (None for pure ε-DP, else δ ∈ (0, 1)),
            ``noise`` (``"laplace"``, ``"gaussian"``, ``"discrete-laplace"`` or
            ``"discrete-gaussian"``; default: integer noise, discrete Gaussian iff
            delta given, on the k-ary tree, since counts are integers, see
            :class:`~dpcount.apps.MechanismChoice`) and ``calibration`` (the
            noise calibration rule). The step sensitivity is computed from b and
            m (a budget that sets one is refused). ``self.budget`` is this
            budget with the noise kind resolved.
        rng: Generator, int seed (research/tests only) or None (OS entropy).
        on_out_of_bounds: ``"error"`` (default) or ``"clip"``, see above.

    Example:
        >>> from dpcount.apps import ContinualHistogram
        >>> from dpcount.privacy import ZeroNoise
        >>> h = ContinualHistogram(4, horizon=3, epsilon=1.0, max_items_per_step=2)
        >>> exact = h.with_sampler(ZeroNoise())
        >>> exact.update([0, 2]).tolist(), exact.update([2], removed=[0]).tolist()
        ([1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 2.0, 0.0])
        >>> exact.top1()
        TopItem(item=2, count=2.0)
    """

    _shown = ("universe_size", "horizon", "max_items_per_step", "max_count_per_item")

    def __init__(
        self,
        universe_size: int,
        horizon: int,
        *,
        max_items_per_step: int = 1,
        max_count_per_item: int = 1,
        on_out_of_bounds: str = "error",
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[AppFields],
    ) -> None:
        user_budget, choice = self._options(
            budget, fields, bounds="max_items_per_step and max_count_per_item"
        )
        self.on_out_of_bounds = check_on_out_of_bounds(on_out_of_bounds)
        self.universe_size = check_integer("universe_size", universe_size, ge=1)
        self.max_items_per_step = check_integer("max_items_per_step", max_items_per_step, ge=1)
        self.max_count_per_item = check_integer("max_count_per_item", max_count_per_item, ge=1)
        self._setup_mechanism(
            choice,
            user_budget,
            histogram_sensitivity(self.max_items_per_step, self.max_count_per_item),
            horizon=horizon,
            rng=rng,
            neighbouring=f"event-level: streams differ at one step by at most "
            f"{self.max_items_per_step} item insertions/removals, at most "
            f"{self.max_count_per_item} of one item",
            integer=True,  # integer-valued stream
        )
        self._reset()

    def _reset(self) -> None:
        self._stream = self.mechanism.stream()
        self._true = np.zeros(self.universe_size, dtype=np.int64)
        self._latest: NDArray[np.float64] | None = None
        #: steps clipped into the bounds so far: exact, NOT private (caller only)
        self.clipped = 0

    @property
    def step(self) -> int:
        """Steps released so far."""
        return self._stream.step

    @property
    def latest(self) -> NDArray[np.float64] | None:
        """The latest private histogram (None before the first step); a copy."""
        return None if self._latest is None else self._latest.copy()

    # -- input --------------------------------------------------------------------
    def indicator(
        self, items: Iterable[int] = (), removed: Iterable[int] = ()
    ) -> NDArray[np.int64]:
        """The step vector x_t for item lists (validated as in :meth:`update`; with
        ``on_out_of_bounds="clip"`` the bounds are applied when the step is released)."""
        u = self.universe_size
        ins = check_index_array("items", check_iterable("items", items), u, one_dimensional=True)
        rem = check_index_array(
            "removed", check_iterable("removed", removed), u, one_dimensional=True
        )
        both = np.intersect1d(ins, rem)
        if both.size:
            raise ValueError(
                f"item {int(both[0])} is both inserted and removed in one step; "
                "give its net change instead"
            )
        x = np.bincount(ins, minlength=u) - np.bincount(rem, minlength=u)
        if self.on_out_of_bounds == "error":
            self._check_rows(x[None, :], "items")
        return x

    def _clip_rows(self, arr: NDArray[Any]) -> tuple[NDArray[np.int64], int]:
        """Every row clipped into the bounds, and how many rows changed: entries to
        [−m, m], then magnitudes kept in item order until their sum reaches b."""
        b, m = self.max_items_per_step, self.max_count_per_item
        x = np.clip(arr, -m, m).astype(np.int64)
        magnitude = np.abs(x)
        before = np.cumsum(magnitude, axis=1) - magnitude  # occurrences of earlier items
        kept: NDArray[np.int64] = np.sign(x) * np.clip(b - before, 0, magnitude)
        return kept, int(np.count_nonzero((kept != arr).any(axis=1)))

    def _check_rows(self, x: NDArray[np.int64], name: str) -> None:
        """Per-step bounds: |x[j]| ≤ m and ‖x‖₁ ≤ b for every row."""
        b, m = self.max_items_per_step, self.max_count_per_item
        # Without removals (the common case) x is its own magnitude: no temporary array.
        # With removals, bound x before taking np.abs (|int64 min| overflows to itself).
        over = None if x.min() >= 0 else (x > m) | (x < -m)
        magnitude = x if over is None or over.any() else np.abs(x)
        too_many = magnitude.max(axis=1) > m if over is None else over.any(axis=1)
        if too_many.any():
            i = int(np.argmax(too_many))
            j = int(np.argmax(magnitude[i] if over is None else over[i]))
            raise ValueError(
                f"{name}: step {self.step + i + 1} changes item {j} by {int(x[i, j])}, more than "
                f"max_count_per_item={m}"
            )
        l1 = magnitude.sum(axis=1)
        if (l1 > b).any():
            i = int(np.argmax(l1 > b))
            raise ValueError(
                f"{name}: step {self.step + i + 1} has {int(l1[i])} item insertions/removals, more "
                f"than max_items_per_step={b}"
            )

    def _check_vectors(self, x: Any, name: str) -> tuple[NDArray[np.int64], int]:
        """The validated steps (clipped with ``on_out_of_bounds="clip"``) and how many
        were clipped."""
        arr = as_array(name, x)
        if arr.ndim != 2 or arr.shape[1] != self.universe_size:
            want = f"({self.universe_size},)" if name == "x" else f"(steps, {self.universe_size})"
            shape = arr.shape[1:] if name == "x" else arr.shape
            raise ValueError(f"{name} must have shape {want}, got shape {shape}")
        if arr.dtype == np.bool_:
            arr = arr.astype(np.int64)
        if np.issubdtype(arr.dtype, np.floating):
            if not np.isfinite(arr).all() or not (arr == np.round(arr)).all():
                bad = np.argwhere(~np.isfinite(arr) | (arr != np.round(arr)))[0]
                raise ValueError(
                    f"{name} must hold integer counts, got {float(arr[tuple(bad)])!r} "
                    f"at step {self.step + int(bad[0]) + 1}, item {int(bad[1])}"
                )
        elif not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{name} must hold integer counts, got dtype {arr.dtype}")
        if self.on_out_of_bounds == "clip":
            return self._clip_rows(arr)  # clips before the cast
        self._check_rows(arr, name)  # before the cast: huge values would wrap in int64
        return arr.astype(np.int64, copy=False), 0

    def _check_nonnegative(self, x: NDArray[np.int64]) -> None:
        if x.min() >= 0:  # insertions only: true counts stay >= 0
            return
        running = self._true + np.cumsum(x, axis=0)
        if (running < 0).any():
            i, j = (int(v) for v in np.argwhere(running < 0)[0])
            raise ValueError(
                f"step {self.step + i + 1} removes item {j} more often than it is present "
                "(true counts must stay >= 0)"
            )

    # -- release ------------------------------------------------------------------
    def update(self, items: Iterable[int] = (), removed: Iterable[int] = ()) -> NDArray[np.float64]:
        """Insert ``items`` and remove ``removed`` (item lists); return the private histogram.

        Repeats of an item count as multiplicity (at most ``max_count_per_item``).
        """
        return self.update_vector(self.indicator(items, removed))

    def update_vector(self, x: Any) -> NDArray[np.float64]:
        """Add one step given as an integer vector of length u (entries in [−m, m])."""
        arr = as_array("x", x)
        if arr.ndim != 1:
            raise ValueError(f"x must have shape ({self.universe_size},), got shape {arr.shape}")
        rows, clipped = self._check_vectors(arr[None, :], "x")
        self._check_nonnegative(rows)
        out: NDArray[np.float64] = np.asarray(
            self._stream.update(rows[0].astype(np.float64)), dtype=np.float64
        )
        self.clipped += clipped
        self._true += rows[0]
        self._latest = out
        return np.array(out)

    def update_many(self, xs: Any) -> NDArray[np.float64]:
        """Add several steps, shape ``(steps, u)``; returns their private histograms."""
        rows, clipped = self._check_vectors(xs, "xs")
        self._check_nonnegative(rows)
        out = self._stream.update_many(rows.astype(np.float64))
        self.clipped += clipped
        self._true += rows.sum(axis=0)
        self._latest = out[-1].copy()
        return out

    # -- queries on the latest release (post-processing) --------------------------
    def _require_release(self) -> NDArray[np.float64]:
        if self._latest is None:
            raise ValueError("no histogram released yet: call update() first")
        return self._latest

    def top1(self) -> TopItem:
        """The item with the largest private count (ties: smallest item) and that count."""
        h = self._require_release()
        j = int(np.argmax(h))
        return TopItem(j, float(h[j]))

    def topk(self, k: int) -> list[TopItem]:
        """The ``k`` items with the largest private counts, largest first (ties: smaller item)."""
        h = self._require_release()
        kk = check_integer("k", k, ge=1, le=self.universe_size)
        order = np.argsort(-h, kind="stable")[:kk]
        return [TopItem(int(j), float(h[j])) for j in order]

    def error_bound(self, beta: float = 1 / 3) -> NDArray[np.float64]:
        """Simultaneous error bound α_t of Corollary B.1, with the exact variance.

        With probability ≥ 1 − β, for all steps t ≤ T and all items j at once,
        |h_t[j] − Σ_{i≤t} x_i[j]| ≤ α_t = √Var_t · z, where P(|N(0,1)| > z) =
        β/(u·T) (a union bound over the u·T released coordinates; each error is
        exactly N(0, Var_t)). Needs Gaussian noise.
        """
        b = check_real("beta", beta, gt=0, lt=1)
        if self.noise != "gaussian":
            raise ValueError(
                f"error_bound needs Gaussian noise (Corollary B.1 is a Gaussian tail bound), "
                f"this histogram uses {self.noise!r} noise"
            )
        z = gaussian_two_sided_quantile(math.log(b) - math.log(self.universe_size * self.horizon))
        return np.sqrt(self.variances()) * z
