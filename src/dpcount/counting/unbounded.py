"""Continual counting without a horizon: the doubling construction.

Notation (paper → code):

| paper | code |
|---|---|
| block i | steps 2^i … 2^(i+1) − 1 (block 0 is step 1), length 2^i |
| M_i | the inner mechanism for horizon 2^i (:meth:`block_mechanism`) |
| t̃ = t − 2^i + 1 | the local step of t inside its block |
| R_i(s) | M_i's release at its local step s |
| V_i(s) | M_i's exact variance at local step s (``variance_at``) |

The release at step t in block i is ``Σ_{i' < i} R_{i'}(2^{i'}) + R_i(t̃)``: the
totals of the finished blocks, each as its own mechanism released it at its last
step, plus the running block's release. Every block runs a fresh fixed-horizon
mechanism with the *full* budget; the blocks see disjoint steps, so parallel
composition keeps the whole infinite release at the inner guarantee. This is the
doubling idea of Chan, Shi, Song (2011, the "hybrid mechanism"), without its
split of the budget between a logarithmic mechanism for the block sums and a tree
inside each block: here a block's total is read from its own mechanism's last
release, which is post-processing, so no second mechanism and no split is needed.

Error: V(t) = Σ_{i' < i} V_{i'}(2^{i'}) + V_i(t̃) (independent noise), an O(log t)
sum of the inner closed forms; with the binary tree inner, V_{i'}(2^{i'}) is one
node (popcount 1), so the carried error grows like the node variances,
Σ_{i' < i} v·(i' + 1)² for Laplace noise (cubic in log t, as for a known horizon).

Horizon-free: ``inner="horizon-free-blt"`` (the default of ``mechanism="auto"``
without a horizon, Gaussian noise) runs one BLT with growing columns calibrated for the
infinite stream (:mod:`dpcount.counting.factorization.horizon_free_growing`, certified
column norms, 2n + 3 running values per coordinate) as block 0, steps 1 … 2^25 − 1
(its float computation's measured limit), then doubling blocks i ≥ 25 with Honaker
inside (Gaussian noise; the same parallel composition);
``inner="horizon-free-sqrt"`` runs one log-damped square root
(:mod:`dpcount.counting.factorization.horizon_free`, O(t) state) for every step, no blocks.

The known-horizon alternative for every prefix: a BLT (buffered linear Toeplitz)
factorization whose decays are all < 1 has a finite infinite-horizon sensitivity
sqrt(Σ_{t ≥ 0} c_t²), so it can be calibrated once and run forever; but its
per-step variance then grows linearly in t (its noise is not a tree), while the
doubling construction's grows polylogarithmically (Dvijotham, McMahan, Pillutla,
Steinke, Thakurta 2024). See docs/unbounded.md for the trade-off in numbers.

References:
    * T.-H. H. Chan, E. Shi, D. Song. "Private and continual release of
      statistics". ACM TISSEC 14(3), 2011. https://doi.org/10.1145/2043621.2043626
    * C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum. "Differential privacy under
      continual observation". STOC 2010. https://doi.org/10.1145/1806689.1806787
    * K. Dvijotham, H. B. McMahan, K. Pillutla, T. Steinke, A. Thakurta.
      "Efficient and Near-Optimal Noise Generation for Streaming Differential
      Privacy". FOCS 2024. https://arxiv.org/abs/2404.16706
    * F. McSherry. "Privacy integrated queries". SIGMOD 2009 (parallel
      composition, Theorem 4). https://doi.org/10.1145/1559845.1559850
"""

from __future__ import annotations

import copy
import functools
import math
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_choice, check_instance, check_integer
from dpcount.counting._steps import check_stream_array, vector_length
from dpcount.counting.base import (
    MAX_HORIZON,
    NEIGHBOURING,
    CountingMechanism,
    CountingStream,
    ReleaseStream,
)
from dpcount.counting.checkpoint import load_stream, save_stream
from dpcount.counting.registry import MECHANISMS
from dpcount.privacy.budget import Budget, BudgetFields, NoiseKind
from dpcount.privacy.guarantee import PrivacyGuarantee
from dpcount.privacy.noise import NoiseSampler
from dpcount.privacy.rng import RNGLike, as_generator

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "HORIZON_FREE",
    "HORIZON_FREE_BLT",
    "HORIZON_FREE_INNERS",
    "MAX_STEPS",
    "UnboundedCounter",
    "UnboundedStream",
    "block_of",
    "load_unbounded",
    "save_unbounded",
]

#: Largest step: the step counts and every block's horizon stay exact (2^53).
MAX_STEPS = MAX_HORIZON

#: builds the inner mechanism of one block: ``factory(horizon, budget=..., rng=...)``
InnerFactory = Callable[..., CountingMechanism]

#: the inner name of the horizon-free construction: one
#: :class:`~dpcount.counting.factorization.horizon_free.HorizonFreeSqrt` for every step
#: (calibrated for an infinite stream), no doubling blocks
HORIZON_FREE = "horizon-free-sqrt"

#: the inner name of the horizon-free BLT: block 0 is one
#: :class:`~dpcount.counting.factorization.horizon_free_growing.HorizonFreeGrowingBLT`
#: (calibrated for an infinite stream, n + 1 running values per coordinate) for steps
#: 1 … 2^s − 1
#: (s = :data:`HORIZON_FREE_BLT_SPAN_LOG2`), then doubling blocks i ≥ s with Honaker
#: inside, so the error stays polylogarithmic past the BLT's longest time scale
HORIZON_FREE_BLT = "horizon-free-blt"

#: s: the horizon-free BLT's block 0 runs steps 1 … 2^s − 1 (a counter reads it when
#: built; a checkpoint records it and is resumed with its own s). Its variance alone
#: would favour 2^28 (ratio to the plain square root told t 1.30 at 2^26, 1.50 at 2^28:
#: docs/unbounded.md), but its float computation is measured within the float-safe
#: release's model only up to step 2^25 (``horizon_free_growing.FLOAT_MODEL_STEPS``;
#: later steps are refused), so block 0 ends there and the doubling blocks take over.
#: Ending at 2^25 − 1 keeps every t ≤ 2^24 within 1.3× the plain square root told t
#: (block 0 ending at 2^24 − 1 gave 1.89 at t = 2^24 itself: block 0's total plus a
#: fresh Honaker block's first step). Earlier 0.5 development states ended it at 2^22 − 1
#: and 2^24 − 1 (their checkpoints resume with their own span)
HORIZON_FREE_BLT_SPAN_LOG2 = 25

#: the inner names whose block 0 is a horizon-free mechanism
HORIZON_FREE_INNERS = (HORIZON_FREE, HORIZON_FREE_BLT)


def _build_horizon_free(horizon: int, *, budget: Budget, rng: RNGLike) -> CountingMechanism:
    from dpcount.counting.factorization.horizon_free import HorizonFreeSqrt

    return HorizonFreeSqrt(horizon, budget=budget, rng=rng)


def _build_horizon_free_blt(
    horizon: int, *, budget: Budget, rng: RNGLike, block0: int, head: tuple[float, ...] | None
) -> CountingMechanism:
    """Block 0 (horizon ``block0`` = 2^s − 1): the horizon-free BLT with growing columns
    and head factors ``head`` (None: the shipped ones); later blocks (horizons 2^i,
    i ≥ s): Honaker."""
    from dpcount.counting.factorization.horizon_free_growing import HorizonFreeGrowingBLT

    if horizon == block0:
        return HorizonFreeGrowingBLT(horizon, head_factors=head, budget=budget, rng=rng)
    if budget.noise is None:  # Gaussian like block 0 (Honaker's own default differs)
        budget = budget.replace(noise=NoiseKind.GAUSSIAN)
    return MECHANISMS["honaker"](horizon=horizon, budget=budget, rng=rng)


def _block_ids(inner: str, first: int) -> list[int]:
    """Every block there is, in order: 0 alone for the horizon-free square root, else 0
    and the doubling blocks ``first`` … 53."""
    if inner == HORIZON_FREE:
        return [0]
    return [0, *range(first, MAX_STEPS.bit_length())]


def _block_span(inner: str, first: int, i: int) -> int:
    """The number of steps of block i: 2^i (block 0: 2^first − 1), or every step for the
    horizon-free square root."""
    if inner == HORIZON_FREE:
        return MAX_STEPS
    return (1 << first) - 1 if i == 0 else 1 << i


def _locate_in(inner: str, first: int, t: int) -> tuple[int, int]:
    """(block, local step) of step t (block i ≥ ``first`` starts at step 2^i)."""
    if inner == HORIZON_FREE or t < 1 << first:
        return 0, t
    return block_of(t)


def block_of(t: int) -> tuple[int, int]:
    """``(i, local)``: step t ≥ 1 lies in block i (steps 2^i … 2^(i+1) − 1) at local step
    ``t − 2^i + 1``."""
    i = t.bit_length() - 1
    return i, t - (1 << i) + 1


class UnboundedCounter:
    """Private prefix sums for a stream of unknown length (doubling over blocks).

    Block i covers steps 2^i … 2^(i+1) − 1 and runs its own inner mechanism
    (``inner``, any registry name: ``"binary"``, ``"kary"``, ``"honaker"``,
    ``"blt"``, ``"sqrt"``, …) for horizon 2^i with the full budget. The release at
    step t in block i is the sum of the finished blocks' last releases plus block
    i's release at its local step (see the module docstring).

    This class does not subclass :class:`~dpcount.counting.CountingMechanism`: that
    contract is a fixed horizon (``variances()``, ``mse()``, a noise process for T
    steps), which an unbounded counter does not have. It offers the parts that make
    sense without one: ``release``, ``stream``, ``variance_at``,
    ``iter_variances``, ``privacy``, ``describe``, ``with_sampler``.

    Formal guarantee:
        Neighbouring relation: event level, single participation — two streams (finite or
        infinite) that differ at one step t by at most Δ = ``step_sensitivity``. Proof: t
        lies in exactly one block i. Block i's mechanism M_i is (ε, δ)-DP for its own steps
        (its own guarantee, :meth:`block_mechanism` ``(i).privacy``, calibrated for its
        horizon — 2^i, or the infinite stream for a horizon-free block 0 — and checked ≤ the
        budget); every other block's mechanism sees identical data and draws independent
        noise, so its output distribution is the same under both streams. The vector of all
        blocks' outputs is therefore (ε, δ)-DP (parallel composition, McSherry 2009, Theorem
        4: disjoint data, independent randomness), and every release — at every prefix, for
        every length — is a fixed function of those outputs (post-processing, Dwork & Roth
        2014, Proposition 2.1). Integer noise keeps its exactness: with an inner mechanism
        whose release is an integer combination of its noisy vector (the trees), the
        released values are sums of integers, computed exactly (Python ints for scalar
        steps, int64 for vectors).

        Exact variance at step t in block i, local step t̃:
        V(t) = Σ_{i' < i} V_{i'}(its block's length) + V_i(t̃) (:meth:`variance_at`),
        the sum over the blocks before i, with
        V_{i'} the inner mechanism's exact per-step variance; the noises of
        different blocks are independent, so the variances add. It grows with t.

    References:
        * T.-H. H. Chan, E. Shi, D. Song. "Private and continual release of
          statistics". ACM TISSEC 14(3), 2011.
          https://doi.org/10.1145/2043621.2043626
        * C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum. "Differential privacy
          under continual observation". STOC 2010.
          https://doi.org/10.1145/1806689.1806787
        * F. McSherry. "Privacy integrated queries". SIGMOD 2009.
          https://doi.org/10.1145/1559845.1559850
        * C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy".
          Foundations and Trends in Theoretical Computer Science 9(3–4), 2014.
          https://doi.org/10.1561/0400000042

    Args:
        inner: the inner mechanism: a registry name (:data:`dpcount.counting.registry.MECHANISMS`),
            :data:`HORIZON_FREE_BLT` (``"horizon-free-blt"``: block 0 is one
            :class:`~dpcount.counting.HorizonFreeGrowingBLT` calibrated for the infinite stream
            for steps 1 … 2^25 − 1, 2n + 3 running values per coordinate, then doubling
            blocks i ≥ 25 with Honaker inside; Gaussian noise), :data:`HORIZON_FREE`
            (``"horizon-free-sqrt"``: no blocks, one
            :class:`~dpcount.counting.HorizonFreeSqrt` for every step, O(t) state), or a
            callable
            ``factory(horizon, budget=..., rng=...)`` returning a
            :class:`~dpcount.counting.CountingMechanism` for that horizon.
        k: branching factor for ``inner="kary"`` (ignored by the others).
        subtract: offset digits for ``inner="kary"`` (ignored by the others).
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (``epsilon=``, ``delta=``, ``noise=``, ``calibration=``,
            ``step_sensitivity=``); the noise default is the inner class's.
        rng: None (cryptographically secure generator from OS entropy; for
            production), or a Generator / int seed (research and tests only). One
            generator feeds every block, never re-seeded.
    """

    name = "unbounded"

    def __init__(
        self,
        *,
        inner: str | InnerFactory = "binary",
        k: int = 19,
        subtract: bool = True,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        resolved = Budget.resolve(budget, fields, owner="UnboundedCounter")
        self._forever = inner == HORIZON_FREE  # one mechanism, no blocks at all
        if isinstance(inner, str) and inner in HORIZON_FREE_INNERS:
            self.inner: str = inner
            self._factory: InnerFactory = _build_horizon_free  # the BLT's: _start_blocks
            self._named = True
        elif isinstance(inner, str):
            self.inner = check_choice("inner", inner, MECHANISMS)
            k = check_integer("k", k, ge=2)
            if not isinstance(subtract, bool):
                raise TypeError(f"subtract must be a bool, got {subtract!r}")
            build = MECHANISMS[self.inner]

            def factory(horizon: int, *, budget: Budget, rng: RNGLike) -> CountingMechanism:
                return build(horizon=horizon, budget=budget, rng=rng, k=k, subtract=subtract)

            self._factory = factory
            self._named = True
        elif callable(inner):
            self._named = False
            self.inner = getattr(inner, "__name__", type(inner).__name__)
            self._factory = inner
        else:
            raise TypeError(
                f"inner must be a mechanism name {sorted(MECHANISMS)}, {HORIZON_FREE!r}, "
                f"{HORIZON_FREE_BLT!r} or a "
                "callable "
                f"factory(horizon, budget=..., rng=...), got {inner!r}"
            )
        self.k, self.subtract = k, subtract
        self._rng = as_generator(rng)
        self._budget_in = resolved
        self._sampler: NoiseSampler | None = None  # with_sampler (tests)
        self._start_blocks(HORIZON_FREE_BLT_SPAN_LOG2)

    def _start_blocks(self, span_log2: int, head: tuple[float, ...] | None = None) -> None:
        """Build block 0 (and for the horizon-free BLT, whose block 0 covers steps
        1 … 2^s − 1 with s = ``span_log2`` and head factors ``head``, None: the shipped
        ones, the first doubling block: the budget is checked now, not at step 2^s) and
        the guarantee. Called again by :func:`load_unbounded` for a checkpoint that
        recorded another s or no head factors."""
        #: the first doubling block (1; s for the horizon-free BLT)
        self._first = span_log2 if self.inner == HORIZON_FREE_BLT else 1
        if self.inner == HORIZON_FREE_BLT:
            self._factory = functools.partial(
                _build_horizon_free_blt, block0=(1 << span_log2) - 1, head=head
            )
        self._blocks: dict[int, CountingMechanism] = {}
        self._last_variances: dict[int, float] = {}  # block i -> V_i(span of block i)
        first = self.block_mechanism(0)  # validates the budget now, not at step 1
        if self.inner == HORIZON_FREE_BLT:
            self.block_mechanism(self._first)
        #: the budget with the inner class's default noise filled in
        self.budget: Budget = first.budget
        self.step_sensitivity = first.step_sensitivity
        self.privacy: PrivacyGuarantee | None = None
        if first.privacy is not None:
            self.privacy = PrivacyGuarantee(
                epsilon=self.budget.epsilon,
                delta=0.0 if self.budget.delta is None else self.budget.delta,
                noise=first.privacy.noise,
                calibration=self._calibration(first.privacy.calibration),
                # doubling: per block, block_mechanism(i).privacy
                l1_sensitivity=first.privacy.l1_sensitivity if self._forever else math.nan,
                l2_sensitivity=first.privacy.l2_sensitivity if self._forever else math.nan,
                neighbouring=NEIGHBOURING,
                # float-safe continuous noise: stated per value (the stream is open-ended)
                float_eta=first.privacy.float_eta,
            )

    def _calibration(self, first: str) -> str:
        """The guarantee's calibration line (``first``: block 0's)."""
        once = f"{first}, once for the infinite stream (certified column norm)"
        if self._forever:
            return once
        parallel = "parallel composition over the blocks (Chan, Shi, Song 2011)"
        if self.inner == HORIZON_FREE_BLT:
            s = self._first
            return (
                f"block 0 (steps 1 .. 2^{s}-1): the horizon-free BLT, {once}; blocks i >= "
                f"{s}: Honaker calibrated for horizon 2^i; {parallel}"
            )
        return (
            f"each doubling block calibrated for its horizon by its {self.inner} mechanism, "
            + parallel
        )

    def _head(self) -> tuple[float, ...]:
        """Block 0's head factors (inner="horizon-free-blt"; none for the others)."""
        from dpcount.counting.factorization.horizon_free_growing import HorizonFreeGrowingBLT

        first = self.block_mechanism(0)
        return first.head_factors if isinstance(first, HorizonFreeGrowingBLT) else ()

    # -- blocks -----------------------------------------------------------------------
    def block_mechanism(self, i: int) -> CountingMechanism:
        """The inner mechanism of block i (horizon 2^i), built once and cached; for the
        horizon-free inner, the one mechanism (i = 0) for every step.

        Raises:
            ValueError: i outside 0 … 53 (0 for the horizon-free inner), or the inner
                mechanism refuses the budget at this horizon (its message names the
                parameter).
            TypeError: a ``factory`` that does not return a CountingMechanism of
                horizon 2^i.
        """
        i = check_integer("i", i, ge=0, le=0 if self._forever else MAX_STEPS.bit_length() - 1)
        if i not in _block_ids(self.inner, self._first):
            raise ValueError(
                f"i must be 0 or {self._first} … "
                f"{MAX_STEPS.bit_length() - 1} for inner={self.inner!r} (its block 0 covers "
                f"steps 1 … {_block_span(self.inner, self._first, 0)}), got {i}"
            )
        mech = self._blocks.get(i)
        if mech is None:
            horizon = _block_span(self.inner, self._first, i)
            mech = self._factory(horizon, budget=self._budget_in, rng=self._rng)
            if not isinstance(mech, CountingMechanism) or mech.horizon != horizon:
                raise TypeError(
                    f"inner factory must return a CountingMechanism of horizon {horizon}, "
                    f"got {mech!r}"
                )
            if self._sampler is not None:
                mech = mech.with_sampler(self._sampler)
            elif mech.privacy is not None:
                _check_within_budget(mech, self._budget_in, i)
            self._blocks[i] = mech
        return mech

    def _last_variance(self, i: int) -> float:
        """V_i(span of block i): the variance of block i's total as carried into later
        blocks."""
        v = self._last_variances.get(i)
        if v is None:
            mech = self.block_mechanism(i)
            v = mech.variance_at(_block_span(self.inner, self._first, i))
            self._last_variances[i] = v
        return v

    def _carried_variance(self, i: int) -> float:
        """Σ of the carried variances of the blocks before block i, in block order."""
        carried = 0.0
        for j in _block_ids(self.inner, self._first):
            if j >= i:
                break
            carried += self._last_variance(j)
        return carried

    def _next_block(self, i: int) -> int:
        """The block after block i (block 0 after −1)."""
        return 0 if i < 0 else self._first if i == 0 else i + 1

    def _locate(self, t: int) -> tuple[int, int]:
        """(block, local step) of step t."""
        return _locate_in(self.inner, self._first, t)

    # -- exact error ------------------------------------------------------------------
    def variance_at(self, t: int) -> float:
        """Exact variance of the release at step t (1 ≤ t ≤ 2^53).

        V(t) = Σ_{i' < i} V_{i'}(2^{i'}) + V_i(t − 2^i + 1), summed in the order
        i' = 0, 1, …, i − 1, then the running block: O(log t) calls of the inner
        mechanism's ``variance_at`` (the finished blocks' are cached). With the trees
        each call is O(log t), so any t up to 2^53 is instant; BLT and the square
        root sum their coefficients, O(2^i) per block, so O(t) in all.
        """
        t = check_integer("t", t, ge=1, le=MAX_STEPS)
        i, local = self._locate(t)
        return self._carried_variance(i) + self.block_mechanism(i).variance_at(local)

    def iter_variances(self, start: int = 1) -> Iterator[float]:
        """``variance_at(t)`` for t = start, start + 1, … (endless), in memory independent
        of t: one block's running variances at a time."""
        start = check_integer("start", start, ge=1, le=MAX_STEPS)
        i, local = self._locate(start)
        if self._forever:
            yield from self.block_mechanism(0).iter_variances(local)
            return
        while True:
            carried = self._carried_variance(i)
            for v in self.block_mechanism(i).iter_variances(local):
                yield carried + v
            i, local = self._next_block(i), 1
            if i > MAX_STEPS.bit_length() - 1:
                return

    def std_at(self, t: int) -> float:
        """``sqrt(variance_at(t))``."""
        return math.sqrt(self.variance_at(t))

    # -- release ----------------------------------------------------------------------
    def release(self, x: Any) -> NDArray[Any]:
        """All private prefix sums of a finite stream ``x`` of any length.

        Args:
            x: shape ``(n,)`` or ``(n, d)``, finite reals (whole numbers for discrete
                noise), n ≥ 1.

        Returns:
            the same shape: at step t, the finished blocks' last releases plus the
            running block's release; int64 for integer noise on an inner mechanism
            with ``integer_release``, else float64. Each call draws fresh noise.
        """
        arr = check_stream_array("x", x, max_steps=MAX_STEPS, dim=-1)
        n = arr.shape[0]
        parts: list[NDArray[Any]] = []
        carried: Any = 0
        start, i = 0, 0
        while start < n:
            stop = min(n, start + _block_span(self.inner, self._first, i))
            local = self.block_mechanism(i).release(arr[start:stop])
            parts.append(local + carried)
            carried = carried + local[-1]
            start, i = stop, self._next_block(i)
        return np.concatenate(parts)

    def stream(self) -> UnboundedStream:
        """A stream whose :meth:`UnboundedStream.update` returns the private running sum."""
        return UnboundedStream(self)

    # -- composition ------------------------------------------------------------------
    def dp_event(self) -> Any:
        """The whole unbounded release as one dp_accounting ``DpEvent``: the worst block.

        A neighbouring pair differs in one block only (parallel composition), so the
        release is dominated by the block whose event is least private. Steps stop at
        2^53, so there are 54 blocks (0 … 53), all checked: Gaussian noise gives the
        ``GaussianDpEvent`` with the smallest noise multiplier σ_i/Δ₂,i (equal up to
        float rounding across blocks: the analytic calibration is scale-free), the
        discrete Gaussian the ``ZCDpEvent`` with the largest ρ_i. Gaussian events are
        ordered by their multiplier and zCDP events by ρ, so the worst one dominates
        every block. Laplace kinds compose h_i Laplace events per block, which are not
        ordered across blocks: refused (use ``block_mechanism(i).dp_event()``).

        Raises:
            ValueError: no privacy guarantee (:meth:`with_sampler`), or Laplace noise.
        """
        if self.privacy is None:
            raise ValueError("this copy carries no privacy guarantee (with_sampler), no DpEvent")
        noise = self.budget.noise
        assert noise is not None  # filled in by the inner mechanism
        if not noise.is_gaussian:
            raise ValueError(
                f"dp_event needs Gaussian or discrete-Gaussian noise, got noise={noise.value!r}: "
                "the blocks' composed Laplace events are not ordered; use "
                "block_mechanism(i).dp_event() per block"
            )
        events = [self.block_mechanism(i).dp_event() for i in _block_ids(self.inner, self._first)]
        if hasattr(events[0], "rho"):
            return max(events, key=lambda e: e.rho)
        return min(events, key=lambda e: e.noise_multiplier)

    # -- testing hook, description ---------------------------------------------------
    def with_sampler(self, sampler: NoiseSampler) -> UnboundedCounter:
        """A copy whose every block uses ``sampler`` as is (e.g. ``ZeroNoise()``); for
        testing the structure, it carries no privacy guarantee."""
        check_instance("sampler", sampler, NoiseSampler, "a NoiseSampler (e.g. ZeroNoise())")
        clone = copy.copy(self)
        clone._sampler = sampler
        clone._blocks = {i: m.with_sampler(sampler) for i, m in self._blocks.items()}
        clone._last_variances = {}
        clone.privacy = None
        return clone

    def __repr__(self) -> str:
        kary = f", k={self.k}, subtract={self.subtract}" if self.inner == "kary" else ""
        return f"UnboundedCounter(inner={self.inner}{kary}, budget={self.budget!r})"

    @property
    def relation(self) -> str:
        """How the release at step t is formed (one line, for summaries)."""
        if self._forever:
            return (
                "no horizon: one horizon-free square-root factorization (log-damped "
                "coefficients) calibrated for the infinite stream; step t released as "
                "its prefix sum plus its noise at t"
            )
        if self.inner == HORIZON_FREE_BLT:
            s = self._first
            return (
                f"no horizon: steps 1 .. 2^{s}-1 (block 0) released by one horizon-free BLT "
                "factorization calibrated for the infinite stream (n + 1 running values per "
                f"coordinate); from 2^{s}, step t in block i (steps 2^i .. 2^(i+1)-1) as "
                "the finished blocks' last releases plus block i's honaker release (a fresh "
                "mechanism for horizon 2^i, full budget; blocks are disjoint)"
            )
        return (
            "no horizon: step t in block i (steps 2^i .. 2^(i+1)-1) is released as the "
            f"finished blocks' last releases plus block i's {self.inner} release (a fresh "
            "mechanism for horizon 2^i, full budget; blocks are disjoint)"
        )

    def describe(self) -> str:
        """One line: the construction, its guarantee and how its error grows."""
        guarantee = "no privacy guarantee" if self.privacy is None else self.privacy.describe()
        how = (
            "One horizon-free factorization for every step"
            if self._forever
            else f"Release at t in block i = finished blocks' totals + block i's {self.inner} "
            "release"
            if self.inner != HORIZON_FREE_BLT
            else "Release at t = the horizon-free BLT's in block 0, then finished blocks' "
            "totals + block i's honaker release"
        )
        return (
            f"{self!r}: {guarantee}; for every prefix. {how}; exact variance grows with t "
            "(variance_at)"
        )


def _check_within_budget(mech: CountingMechanism, budget: Budget, i: int) -> None:
    """Refuse a block whose certified guarantee exceeds the budget (never expected:
    every mechanism calibrates to at most the requested ε and δ)."""
    priv = mech.privacy
    assert priv is not None  # checked by the caller
    delta = 0.0 if budget.delta is None else budget.delta
    if not (priv.epsilon <= budget.epsilon and priv.delta <= delta):
        raise ValueError(
            f"block {i} ({mech!r}) certifies ({priv.epsilon}, {priv.delta})-DP, beyond the "
            f"budget epsilon={budget.epsilon}, delta={budget.delta}"
        )


class UnboundedStream(ReleaseStream):
    """Step-by-step release of :class:`UnboundedCounter`: one live inner stream at a time
    plus the carried total of the finished blocks."""

    def __init__(self, counter: UnboundedCounter) -> None:
        self.counter = counter
        self._t = 0
        self._block = -1
        self._inner: CountingStream | None = None
        self._carried: Any = 0
        self._last: Any = 0  # the running block's latest release
        self._dim: int | str | None = "unset"

    @property
    def dim(self) -> int | None:
        """The step length (None for scalar steps or before the first step)."""
        return None if self._dim == "unset" else self._dim  # type: ignore[return-value]

    def live_count(self) -> int:
        """Noise values the running block's stream holds for future steps."""
        return 0 if self._inner is None else self._inner.live_count()

    def _room(self) -> CountingStream:
        """The running block's stream, starting the next block when it is full."""
        inner = self._inner
        if inner is None or inner.step == inner.horizon:
            if inner is not None:
                self._carried = self._carried + self._last
            self._block = self.counter._next_block(self._block)
            inner = self.counter.block_mechanism(self._block).stream()
            self._inner = inner
        return inner

    def _check_dim(self, name: str, dim: int | None) -> None:
        if self._dim == "unset":
            self._dim = dim
        elif dim != self._dim:
            want = "scalar steps" if self._dim is None else f"vectors of length {self._dim}"
            got = "a scalar" if dim is None else f"a vector of length {dim}"
            raise ValueError(f"{name} must be {want} like the earlier steps, got {got}")

    def update(self, x: Any) -> Any:
        """Add step ``x`` (a finite real, or a vector) and return the private running sum."""
        if self._t >= MAX_STEPS:
            raise ValueError(f"stream is at its last step ({MAX_STEPS} released)")
        inner = self._room()
        if inner.step == 0 and self._dim != "unset":  # a new block's stream learns the
            self._check_dim("x", vector_length("x", x))  # shape afresh: keep the old one
        local = inner.update(x)
        if self._dim == "unset":
            self._dim = inner.dim
        self._last = local
        self._t += 1
        return self._carried + local

    def update_many(self, xs: Any) -> NDArray[Any]:
        """Add several steps at once (split at block boundaries); returns their private
        running sums."""
        want = -1 if self._dim == "unset" else self._dim
        arr = check_stream_array("xs", xs, max_steps=MAX_STEPS, dim=want, already=self._t)  # type: ignore[arg-type]
        self._check_dim("xs", None if arr.ndim == 1 else arr.shape[1])
        parts: list[NDArray[Any]] = []
        start, n = 0, arr.shape[0]
        while start < n:
            inner = self._room()
            stop = min(n, start + inner.horizon - inner.step)
            local = inner.update_many(arr[start:stop])
            self._last = local[-1].copy() if local.ndim == 2 else local[-1].item()
            self._t += stop - start
            parts.append(local + self._carried)
            start = stop
        return np.concatenate(parts)


# -- checkpoints ------------------------------------------------------------------------
_OWNER = "UnboundedStream"
_KEYS = {"inner", "k", "subtract", "block", "step", "dim", "carried", "last"}
#: saved for inner="horizon-free-blt" only: log2 of block 0's span + 1 (its mechanism is
#: HorizonFreeGrowingBLT for steps 1 … 2^s − 1); a checkpoint without it was saved by a
#: version whose block 0 was HorizonFreeBLT for steps 1 … 2^26 − 1, and is refused
_SPAN_KEY = "block0_span_log2"
#: saved for inner="horizon-free-blt" only: block 0's head factors β_1 … β_k (a list);
#: a checkpoint without it was saved before there were head factors and resumes with
#: none (every β = 1), as that version ran
_HEAD_KEY = "block0_head_factors"


def _plain(value: Any) -> Any:
    """A carried total or release as JSON: Python int/float, or a list for vectors."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def save_unbounded(
    stream: UnboundedStream, path: str | os.PathLike[str], extra: dict[str, Any] | None = None
) -> None:
    """Write a checkpoint of an :class:`UnboundedStream` to ``path`` atomically.

    The file is a :func:`~dpcount.counting.save_stream` checkpoint of the running
    block's inner stream (its mechanism, generator state with its key, noise
    state), whose ``extra`` also holds the doubling state: the inner mechanism's
    name and options, the block, the step, the step length, the carried total of
    the finished blocks and the running block's latest release. The same trust
    model applies: the file is as sensitive as the data, resume it at most once.

    Raises:
        TypeError: ``stream`` is not an UnboundedStream, or ``extra`` not a dict.
        ValueError: the counter's inner mechanism is a custom factory (a checkpoint
            rebuilds it by name), it has no privacy guarantee, or ``extra`` is not
            JSON-able.
    """
    if not isinstance(stream, UnboundedStream):
        raise TypeError(f"stream must be an UnboundedStream, got {type(stream).__name__}")
    counter = stream.counter
    if not counter._named:
        raise ValueError(
            f"cannot checkpoint an UnboundedCounter with inner={counter.inner!r}: a "
            "checkpoint rebuilds the inner mechanism by its registry name"
        )
    inner = stream._inner if stream._inner is not None else counter.block_mechanism(0).stream()
    state = {
        "inner": counter.inner,
        "k": counter.k,
        "subtract": counter.subtract,
        "block": max(stream._block, 0),
        "step": stream._t,
        "dim": stream._dim,
        "carried": _plain(stream._carried),
        "last": _plain(stream._last),
    }
    if counter.inner == HORIZON_FREE_BLT:
        state[_SPAN_KEY] = counter._first
        state[_HEAD_KEY] = list(counter._head())
    save_stream(inner, path, extra={"unbounded": state, "user": extra})


def _restored_value(field: str, value: Any, dim: int | None, integer: bool) -> Any:
    """A carried total or release from the file: a finite real (scalars; 0 before
    any release) or a list of ``dim`` finite reals (int64 values for integer output)."""
    if isinstance(value, list):
        if dim is None or len(value) != dim:
            raise ValueError(f"corrupt {_OWNER} state: {field} must hold {dim} values")
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"corrupt {_OWNER} state: {field} must hold finite reals")
            if integer and not (isinstance(v, int) and abs(v) < 2**62):
                raise ValueError(f"corrupt {_OWNER} state: {field} must hold int64 values")
        return np.array(value, dtype=np.int64 if integer else np.float64)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"corrupt {_OWNER} state: {field} must be a real number or a list")
    if not math.isfinite(value):
        raise ValueError(f"corrupt {_OWNER} state: {field} must be finite")
    if integer and not isinstance(value, int):
        raise ValueError(f"corrupt {_OWNER} state: {field} must be an int (integer output)")
    return value


def load_unbounded(
    path: str | os.PathLike[str], expect: UnboundedCounter | None = None
) -> UnboundedStream:
    """Restore a stream saved with :func:`save_unbounded`; it continues exactly where
    the saved one was (the same outputs for the same inputs, bit for bit), drawing
    every later block's noise from the restored generator. ``stream.extra`` is the
    caller's saved ``extra``.

    Args:
        path: the checkpoint file.
        expect: if given, the counter the caller means to continue: the checkpoint
            must be for the same inner mechanism, options and budget.

    Raises:
        ValueError: naming the file and the problem (everything
            :func:`~dpcount.counting.load_stream` refuses, a missing or inconsistent
            doubling state, or not what ``expect`` describes).
    """
    if expect is not None and not isinstance(expect, UnboundedCounter):
        raise TypeError(f"expect must be an UnboundedCounter or None, got {type(expect).__name__}")
    inner = load_stream(path)
    try:
        return _restore_unbounded(inner, expect)
    except (ValueError, TypeError) as err:
        raise ValueError(f"checkpoint {os.fspath(path)}: {err}") from None


def _saved_state(inner: CountingStream) -> dict[str, Any]:
    """The doubling state saved beside the inner stream, its keys and inner name checked."""
    saved = inner.extra
    if not isinstance(saved, dict) or set(saved) != {"unbounded", "user"}:
        raise ValueError("not an UnboundedStream checkpoint (no doubling state in extra)")
    st = saved["unbounded"]
    if not isinstance(st, dict) or set(st) not in (
        _KEYS,
        _KEYS | {_SPAN_KEY},
        _KEYS | {_SPAN_KEY, _HEAD_KEY},
    ):
        raise ValueError(f"corrupt {_OWNER} state: it must hold {sorted(_KEYS)}")
    if not isinstance(st["inner"], str) or (
        st["inner"] not in MECHANISMS and st["inner"] not in HORIZON_FREE_INNERS
    ):
        raise ValueError(f"corrupt {_OWNER} state: unknown inner mechanism {st['inner']!r:.40}")
    if type(st["k"]) is not int or type(st["subtract"]) is not bool:
        raise ValueError(f"corrupt {_OWNER} state: k must be an int, subtract a bool")
    if st["inner"] == HORIZON_FREE_BLT and _SPAN_KEY not in st:
        raise ValueError(
            f"inner={HORIZON_FREE_BLT!r} checkpoint saved by a dpcount whose block 0 is "
            "another mechanism (HorizonFreeBLT for steps 1 … 2^26 − 1); this one runs "
            "HorizonFreeGrowingBLT in block 0 and would continue with a different noise "
            "process: resume it with the dpcount version that saved it"
        )
    if st["inner"] == HORIZON_FREE_BLT:
        _check_span(st[_SPAN_KEY])
        st = {**st, _HEAD_KEY: _check_head(st.get(_HEAD_KEY, []))}  # the file's dict kept
    if st["inner"] != HORIZON_FREE_BLT and _SPAN_KEY in st:
        raise ValueError(f"corrupt {_OWNER} state: {_SPAN_KEY} for inner={st['inner']!r:.40}")
    return st


def _check_head(head: Any) -> tuple[float, ...]:
    """Recorded head factors this version can continue: none (saved before there were
    head factors, or resumed from such a state) or the shipped ones."""
    from dpcount.counting.factorization.horizon_free_growing import (
        HORIZON_FREE_GROWING_HEAD,
        check_head,
    )

    if not isinstance(head, list):
        raise ValueError(f"corrupt {_OWNER} state: {_HEAD_KEY} {head!r:.40} is not a list")
    try:
        factors = check_head(head)
    except (TypeError, ValueError) as err:
        raise ValueError(f"corrupt {_OWNER} state: {_HEAD_KEY}: {err}") from None
    if factors not in ((), HORIZON_FREE_GROWING_HEAD):
        raise ValueError(
            f"inner={HORIZON_FREE_BLT!r} checkpoint whose block 0 has head factors "
            f"{list(factors)!r:.200} ({_HEAD_KEY}): this dpcount knows only none (states "
            f"saved before head factors) and its own {list(HORIZON_FREE_GROWING_HEAD)}; "
            "resume it with the dpcount version that saved it"
        )
    return factors


def _check_span(span: Any) -> None:
    """A recorded block 0 span s this version can continue: block 0 (steps 1 … 2^s − 1)
    within the growing BLT's measured float limit, ``FLOAT_MODEL_STEPS``."""
    from dpcount.counting.factorization.horizon_free_growing import FLOAT_MODEL_STEPS

    if type(span) is not int:
        raise ValueError(f"corrupt {_OWNER} state: {_SPAN_KEY} {span!r:.20} is not an int")
    if not 1 <= span <= FLOAT_MODEL_STEPS.bit_length() - 1:
        raise ValueError(
            f"inner={HORIZON_FREE_BLT!r} checkpoint whose block 0 is HorizonFreeGrowingBLT "
            f"for steps 1 … 2^{span} − 1 ({_SPAN_KEY} = {span}): this dpcount cannot "
            "continue it (its float computation is measured only to step "
            f"{FLOAT_MODEL_STEPS}, spans 1 … {FLOAT_MODEL_STEPS.bit_length() - 1}); resume "
            "it with the dpcount version that saved it"
        )


def _check_position(st: dict[str, Any], inner: CountingStream) -> None:
    """The saved block, step and vector length agree with the inner stream."""
    block, step, dim = st["block"], st["step"], st["dim"]
    horizon = inner.mechanism.horizon
    first = st.get(_SPAN_KEY, 1)  # the first doubling block
    if (
        type(block) is not int
        or block not in _block_ids(st["inner"], first)
        or horizon != _block_span(st["inner"], first, block)
    ):
        raise ValueError(
            f"corrupt {_OWNER} state: block {block!r:.40} for an inner horizon of {horizon}"
        )
    if type(step) is not int or step != (1 << block) - 1 + inner.step or step > MAX_STEPS:
        raise ValueError(f"corrupt {_OWNER} state: step {step!r:.40} != the inner stream's")
    if dim != "unset" and dim is not None and (type(dim) is not int or dim < 1):
        raise ValueError(f"corrupt {_OWNER} state: dim {dim!r:.40}")
    if (step == 0) != (dim == "unset") or (inner.step > 0 and dim != inner.dim):
        raise ValueError(f"corrupt {_OWNER} state: dim {dim!r:.40} at step {step}")


def _restore_unbounded(inner: CountingStream, expect: UnboundedCounter | None) -> UnboundedStream:
    st = _saved_state(inner)
    _check_position(st, inner)
    block, step, dim = st["block"], st["step"], st["dim"]
    mech = inner.mechanism
    counter = UnboundedCounter(
        inner=st["inner"], k=st["k"], subtract=st["subtract"], budget=mech.budget, rng=mech._rng
    )
    if _SPAN_KEY in st and (st[_SPAN_KEY], st[_HEAD_KEY]) != (counter._first, counter._head()):
        # a span or head saved by another version: honoured (block 0 ends there, its
        # first steps with the saved head factors)
        counter._start_blocks(st[_SPAN_KEY], st[_HEAD_KEY])
    if counter.block_mechanism(block).config() != mech.config():
        raise ValueError(f"corrupt {_OWNER} state: the inner mechanism is not {counter!r}")
    if expect is not None and repr(expect) != repr(counter):
        raise ValueError(f"it holds {counter!r}, expected {expect!r}")
    counter._blocks[block] = mech  # the restored one, with the restored generator
    integer = inner._int_out
    vector_dim = dim if isinstance(dim, int) else None
    stream = UnboundedStream(counter)
    stream._carried = _restored_value("carried", st["carried"], vector_dim, integer)
    stream._last = _restored_value("last", st["last"], vector_dim, integer)
    if block == 0 and step == 0:
        stream._block, stream._inner = -1, None
    else:
        stream._block, stream._inner = block, inner
    stream._t, stream._dim = step, dim
    stream.extra = inner.extra["user"]  # type: ignore[index]
    return stream
