"""Private key selection: keyed counters over an open key set (keys not known in advance).

With ``keys=None`` and ``selection=KeySelection(epsilon=ε_s, delta=δ_s)`` the key
universe is not given. The candidate keys are the keys of the run's *bounded*
contributions (key names come only from the data: a key never seen is never
released); a key is a candidate from f, the step of its first bounded contribution.
A candidate key is released from its **selection step** σ ≥ f, chosen by a noisy
rule on its exact running count, and from then on with the run's counting
mechanism; its earlier steps are withheld (the running count of step s ≥ σ still
covers all its events since step 1). So the set of released keys, and the step each
one appears at, are themselves private output. Two selectors (:class:`Selector`):

* **sparse vector** (the default): AboveThreshold for monotone queries per key
  (Lyu, Su, Li, "Understanding the Sparse Vector Technique for Differential
  Privacy", PVLDB 2017, arXiv:1603.01699, Alg. 1 with c = 1 and its monotone-query
  remark; Dwork & Roth 2014 §3.6). Key j draws one threshold offset ρ_j ~ Lap_Z(t_ρ)
  and at each checked step s (``every``: every step by default, :func:`check_steps`)
  fresh ν_{j,s} ~ Lap_Z(t_ν); σ_j is the first checked s ≥ f_j with
  c_{j,s} + ν_{j,s} ≥ τ + ρ_j. The calibration (:mod:`dpcount.keyed.sparse_vector`):
  t_ρ = m·C/ε₁, t_ν = m·C/ε₂, ε₁ + ε₂ = ε_s, the split and τ = C + x* chosen by an
  exact search so that B(x*) ≤ p₁ = δ_s/m, B the release bound of a key whose count
  is at most C (:func:`~dpcount.keyed.sparse_vector.release_bound`).
* **tree** (0.4's selector): a binary-tree selection counter (exact discrete Laplace,
  ε_s) and σ_j the first s ≥ f_j at which it reaches τ, union-bounded over the T steps
  with p₁ = δ_s·e^{−ε}/m (:func:`selection_threshold`).

Both rules are causal (σ depends on steps ≤ σ only), so they run in pieces: with
``state=`` (:mod:`dpcount.keyed.state`) or incremental runs
(:mod:`dpcount.keyed.incremental`) the key table, the selection steps (and the tree's
noise state per key) persist, a key gets its noise position when it is first counted
(after the keys of earlier runs, ordered by f then name, so one run over all the
steps places it at the same position), and the runs release exactly the rows of one
run. τ (and the split) are computed for the whole horizon T at the first run and
bound into the run's configuration. The sparse vector's noise is a pure function of
(secret, key position, step) and keeps no state: ρ_j at node 0 and ν_{j,s} at node s
under the PRF key HMAC-SHA256(run PRF key, ``"dpcount/keyed/sparse-vector"``); the
tree's under HMAC-SHA256(run PRF key, ``"dpcount/keyed/key-selection"``). Both are
independent of the counting noise, and reruns give the same selection bit for bit.

Notation (math → code):

=====================================  ================================================
ε_c, δ_c (the counting budget)          ``epsilon``, ``delta`` of the run
ε_s, δ_s (the selection budget)         :class:`KeySelection`
m, k, b, c (a unit's bound)             ``max_keys``, ``max_steps``, ``min_separation``,
                                        ``max_weight`` (:mod:`dpcount.keyed.bounds`);
                                        event level: m = k = 1, c = ``max_weight``
C = k·c (one unit's total in one key)   :attr:`SelectionPlan.per_key_total`
p₁ (per-key release bound)              :attr:`SelectionPlan.key_delta`
τ (threshold)                           :attr:`SelectionPlan.threshold`
ε₁, ε₂ (sparse vector: ρ's and ν's ε)   ``rho_share``·ε_s, the rest
N_s = Σ of n_s i.i.d. Lap_Z(t)          tree: the selection counter's noise at step s
(binary tree, n_s nodes)                (:meth:`SelectionPlan.nodes`, ``scale``)
=====================================  ================================================

Tree calibration (union bound). A key touched by one unit only has running count
c_s ≤ C at every step. Its tree selection noise at step s is N_s, a sum of n_s i.i.d.
Lap_Z(t) samples. Hence P[key ever released] ≤ Σ_{s=1}^{T} P[N_s ≥ τ − C], and
τ = C + x* with x* the least integer whose union sum is ≤ p₁ (:func:`selection_threshold`;
:func:`noise_tail` bounds P[A − B ≥ x] for A, B i.i.d. negative binomial NB(n_s, 1 − q)).

Lemma (monotone AboveThreshold, discrete). One key, checked at a fixed sequence of
steps s_1 < … < s_n with integer queries q_i (its running count at s_i). Let D′ = D + u
with 0 ≤ q_i(D′) − q_i(D) ≤ Δ for every i (monotone: weights are non-negative), ρ ~
Lap_Z(Δ/ε₁′), ν_i ~ Lap_Z(Δ/ε₂′), and σ the first i with q_i + ν_i ≥ τ + ρ (or never).
Then P[σ(D) = o] ≤ e^{ε₁′+ε₂′}·P[σ(D′) = o] and P[σ(D′) = o] ≤ e^{ε₂′}·P[σ(D) = o]
for every outcome o. Proof (Lyu–Su–Li's, with sums for integrals). Write P[σ = ℓ] =
Σ_z P[ρ = z]·Π_{i<ℓ} P[q_i + ν_i < τ + z]·P[q_ℓ + ν_ℓ ≥ τ + z]. Lap_Z(t) has
P[ρ = z] ≤ e^{Δ/t}·P[ρ = z + Δ] and P[ν ≥ y] ≤ e^{Δ/t}·P[ν ≥ y + Δ] (its pmf
p(y + 1) ≥ e^{−1/t}·p(y)). For D → D′ substitute z + Δ: each below-threshold factor
does not decrease (q_i(D′) ≤ q_i(D) + Δ), the crossing factor loses at most e^{ε₂′}
(q_ℓ(D′) ≥ q_ℓ(D)) and ρ's mass at most e^{ε₁′}. For D′ → D keep z: the
below-threshold factors do not decrease (q_i(D) ≤ q_i(D′)), the crossing one loses at
most e^{ε₂′}. "Never" has no crossing factor. ∎ So ν needs scale Δ/ε₂′, not 2Δ/ε₂′
(the monotone case of Lyu–Su–Li's Theorem 2).

Theorem (the combined guarantee). Neighbouring logs differ in all the events of one
privacy unit, bounded as in :mod:`dpcount.keyed.bounds` (event level: one event).
Let ε = ε_s + ε_c. Then the release (the selected keys, their selection steps and
their counts from then on) is (ε_s + ε_c, δ_s + δ_c)-DP, whether it is made in one
run or in several continuing a state, with either selector.

Proof. Let D′ = D + u. Bounding is per unit (and causal per unit: u's bounded
contributions do not change another unit's), so u's kept contributions touch a set
K_u of at most m keys, each key's running count by at most C at every step and
monotonically; f_D(j) (∞ if j ∉ cand(D)) is key j's first counted step, and
f_{D′}(j) = f_D(j) for j ∉ K_u, f_{D′}(j) ≤ f_D(j) for j ∈ K_u. For a fixed
eligibility map f, let G_f(D) be the release computed on D's counts with f in place of
the data's (noise i.i.d. per key: the positions do not look at the noise, so they do
not change its law). The release is O(D) = G_{f_D}(D).
(i) For every fixed f, G_f is (ε, δ_c)-DP for D, D′. Sparse vector: key j's checked
steps ≥ f(j) are a fixed sequence and the lemma applies with Δ = C and
ε₁′ = ε₁/m, ε₂′ = ε₂/m (t_ρ = m·C/ε₁, t_ν = m·C/ε₂); the keys outside K_u have the
same counts, the ≤ m keys of K_u have independent noise, so the selection steps are
(ε_s, 0)-DP. Tree: the selection counter is (ε_s, 0)-DP by its calibration, and the
selection steps are a post-processing of it. The counting mechanism is (ε_c, δ_c)-DP
with independent noise, and the release is a post-processing of both (basic
composition).
(ii) At the steps s ∈ [f_{D′}(j), f_D(j)) of a key j ∈ K_u the count is u's alone
under D′ (at most C) and 0 under D, so a key crossing there under either log does
so with probability ≤ p₁ (the release bound), and such an event for some j ∈ K_u
has probability ≤ m·p₁. Off it, G_{f_{D′}} and G_{f_D} agree on that log (no key's
first crossing at a step ≥ f_{D′}(j) lies before f_D(j)). Hence, for any set S,
P[O(D′) ∈ S] ≤ P[G_{f_D}(D′) ∈ S] + m·p₁ ≤ e^ε·P[O(D) ∈ S] + δ_c + m·p₁ and,
with the hybrid taken on D's side, P[O(D) ∈ S] ≤ P[G_{f_{D′}}(D) ∈ S] + m·p₁ ≤
e^ε·P[O(D′) ∈ S] + δ_c + m·p₁. With m·p₁ = δ_s both are at most e^ε·P[·] + δ_c + δ_s.
(The tree selector keeps 0.4's argument, which took both hybrids on D′'s side and so
needs m·p₁ = δ_s·e^{−ε}; its τ is unchanged.) Runs continuing a state compute the
same G_{f}(D) (the same rule, causal, on the same noise), so the guarantee is the
one run's. ∎

Where this differs from 0.4's argument: step (i) for the sparse vector is not a
post-processing of a DP counter (σ stops at the first crossing and its noise is not
released) but the lemma, composed over the ≤ m keys a unit touches (hence the
per-key ε_s/m and the scales m·C/ε); step (ii) now takes one hybrid on each side,
so p₁ = δ_s/m without 0.4's e^{−ε}; the release bound B is an exact sum over ρ
rather than a union bound over the steps.

This is the threshold-then-release design of DP-SQLP (Zhang, Doroshenko, Kairouz,
Steinke, Thakurta, Ma, Cohen, Apte, Spacek, "Continual Release of Differentially
Private Synthetic Data from Longitudinal Data Collections", arXiv:2303.18086) with the
partition-selection argument of Desfontaines, Voss, Gipson, Mandayam, "Differentially
private partition selection", PoPETs 2022, arXiv:2006.03684 (a partition of one unit
is released with probability ≤ δ; here over all T steps, not per release).

Limits: the selection needs integer weights and discrete counting noise (a discrete
Laplace threshold on a non-integer count would reveal its fractional part). It runs on
either engine (Dask places the keys as the embedded engine does, then selects each
shard's keys where the shard lies: the same bits), also with ``state=`` (runs
continuing a state: the Dask client places and selects as the embedded engine does,
:func:`dpcount.keyed.session.settle`). ``report`` (candidate and selected
counts, dropped and late events) is exact, not private; the released rows are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_probability, check_real
from dpcount.keyed.engine import KeyedMechanism, NoiseLayout, chunk_bounds, exact_running
from dpcount.keyed.events import Contributions
from dpcount.keyed.prf import PRFKey
from dpcount.keyed.secret import Label
from dpcount.keyed.sparse_vector import (
    SparseVectorCalibration,
    SparseVectorNoise,
    calibrate,
    release_profile,
)
from dpcount.privacy.budget import Budget, NoiseKind


class _Secret(Protocol):
    def prf(self, label: Label) -> PRFKey: ...


class _SelectionJob(Protocol):
    """What :func:`select_keys` reads of a :class:`~dpcount.keyed.job.KeyedJob` (a
    protocol: the job module imports this one)."""

    @property
    def selection(self) -> SelectionPlan | None: ...

    @property
    def until(self) -> int: ...

    @property
    def first(self) -> int: ...

    @property
    def keep_state(self) -> bool: ...

    @property
    def secret(self) -> _Secret: ...


__all__ = [
    "KeyOutlook",
    "KeySelection",
    "OpenKeyPlan",
    "SelectionPlan",
    "Selector",
    "check_steps",
    "keep_mask",
    "noise_tail",
    "plan_open_keys",
    "select_keys",
    "selection_threshold",
    "union_tail",
]


#: relative slack on the floating-point tail sums (SciPy's incomplete beta functions
#: are accurate to ~1e-14 relative)
_TAIL_SLACK = 1e-9


class Selector(Enum):
    """How an open key set's keys are selected (module docstring)."""

    #: per-key AboveThreshold for monotone queries (the default)
    SPARSE_VECTOR = "sparse-vector"
    #: 0.4's binary-tree selection counter, union-bounded over the steps
    TREE = "tree"


@dataclass(frozen=True)
class KeySelection:
    """The budget of private key selection (an open key set): ``keys=None``.

    Attributes:
        epsilon: ε_s > 0 of the selection (added to the counting ε).
        delta: δ_s ∈ (0, 1): the selection's share of δ (added to the counting δ).
            A key touched by one unit only is ever released with probability at most
            δ_s/max_keys over the whole run with the sparse vector (δ_s·e^{−ε}/max_keys
            with the tree, ε the total), see the module docstring.
        selector: :class:`Selector` (or its value): the sparse vector (default) or
            0.4's tree.
        every: the sparse vector's check schedule (:func:`check_steps`): None (every
            step, default), a number of steps N (steps N, 2N, … and the last), or a
            calendar step or duration of dated runs ("W-MON", "MS", "7D": the last
            step of each period, and the last step). Fewer checks give a smaller τ.
    """

    epsilon: float
    delta: float
    selector: Selector = Selector.SPARSE_VECTOR
    every: int | str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_real("selection epsilon", self.epsilon, gt=0))
        object.__setattr__(self, "delta", check_probability("selection delta", self.delta))
        try:
            object.__setattr__(self, "selector", Selector(self.selector))
        except ValueError:
            choices = ", ".join(repr(m.value) for m in Selector)
            raise ValueError(f"selector must be one of {choices}, got {self.selector!r}") from None
        every = self.every
        if every is not None:
            if isinstance(every, bool) or not isinstance(every, (int, str)):
                raise TypeError(f"every must be None, an integer or a step, got {every!r}")
            if isinstance(every, str) and every.strip().isdigit():
                every = int(every)
                object.__setattr__(self, "every", every)
            if isinstance(every, int) and every < 1:
                raise ValueError(f"every must be >= 1 steps, got {every!r}")
            if self.selector is Selector.TREE:
                raise ValueError(
                    "every= is a schedule of the sparse-vector selector (the tree selector "
                    "checks every step)"
                )


def check_steps(every: int | str | None, horizon: int, buckets: Any = None) -> NDArray[np.int64]:
    """The sparse vector's checked steps in 1..T (increasing, always with T).

    ``every``: None (every step), N (steps N, 2N, … and T) or a calendar step or
    duration of a dated run's ``buckets`` (:class:`~dpcount.keyed.events.TimeBuckets`):
    the last step of each of its periods (a step s such that a period boundary lies in
    (b_s, b_{s+1}], b_s the start of step s), and T.
    """
    if every is None:
        return np.arange(1, horizon + 1, dtype=np.int64)
    if isinstance(every, int):
        steps = np.arange(every, horizon + 1, every, dtype=np.int64)
    else:
        steps = _calendar_checks(every, horizon, buckets)
    return np.union1d(steps, [horizon]).astype(np.int64)


def _calendar_checks(every: str, horizon: int, buckets: Any) -> NDArray[np.int64]:
    from dpcount._time import parse_step

    period = parse_step(every, "every")
    if period.kind == "number":
        raise ValueError(f"every must be a whole number of steps or a step, got {every!r}")
    if buckets is None or buckets.width.kind == "number":
        raise ValueError(
            f"every={every!r} is a calendar step or duration: it needs dated times (a run "
            "with integer times takes a number of steps)"
        )
    starts = buckets.times(1, horizon + 1).view(np.int64)
    index = period.index(period.floor(int(starts[0])), starts, flag="every")
    out: NDArray[np.int64] = np.flatnonzero(np.diff(index) != 0).astype(np.int64) + 1
    return out


def _between(lo: NDArray[np.int64], hi: NDArray[np.int64], nodes: int, p: float, med: int) -> Any:
    """P[lo ≤ B < hi] for B ~ NB(nodes, p): a difference of cdf values below the median
    and of sf values above it (the smaller side, so small masses keep their accuracy)."""
    from scipy.stats import nbinom

    low = hi - 1 <= med
    below = nbinom.cdf(hi - 1, nodes, p) - nbinom.cdf(lo - 1, nodes, p)
    above = nbinom.sf(lo - 1, nodes, p) - nbinom.sf(hi - 1, nodes, p)
    return np.clip(np.where(low, below, above), 0.0, None)


def noise_tail(nodes: int, scale: Fraction | float, x: int) -> float:
    """An upper bound on P[N ≥ x], N a sum of ``nodes`` i.i.d. Lap_Z(``scale``) samples.

    N = A − B with A, B i.i.d. NB(nodes, 1 − q), q = e^{−1/scale} (each Lap_Z(t) is
    the difference of two geometric variables with P[G ≥ g] = q^g). So

        P[N ≥ x] = Σ_{j ≥ 0} P[B = j]·P[A ≥ x + j]
                 ≤ Σ_{blocks [a, a + w)} P[a ≤ B < a + w]·P[A ≥ x + a] + P[B ≥ J]

    (P[A ≥ x + j] is non-increasing in j), for blocks of w = max(1, ⌊scale/100⌋) values
    (exact terms for scale < 200; a relative overestimate below e^{w/scale} − 1 ≈ 1%
    otherwise) up to J, taken so that P[B ≥ J] ≤ 1e-6 of a lower bound of the sum
    (the sum is at least P[B ≤ med B]·P[A ≥ x + med B] ≥ P[A ≥ x + med B]/2). The
    result is multiplied by 1 + 1e-9 against floating-point error (SciPy's
    incomplete beta functions are accurate to ~1e-14 relative). Exact 1 or 0 for
    ``nodes`` = 0.
    """
    from scipy.stats import nbinom

    if nodes == 0:
        return 1.0 if x <= 0 else 0.0
    t = float(scale)
    p = -math.expm1(-1.0 / t)  # 1 − q
    med = int(nbinom.median(nodes, p))
    head = 0.5 * float(nbinom.sf(x + med - 1, nodes, p))
    target = max(head * 1e-6, 1e-300)
    J = med + 1
    while float(nbinom.sf(J - 1, nodes, p)) > target:  # P[B ≥ J] = sf(J − 1)
        J *= 2
    w = max(1, int(t // 100))
    starts = np.arange(0, J, w, dtype=np.int64)
    ends = np.minimum(starts + w, J)
    mass = _between(starts, ends, nodes, p, med)
    terms = mass * nbinom.sf(x + starts - 1, nodes, p)
    total = float(np.sum(terms)) + float(nbinom.sf(J - 1, nodes, p))
    return min(1.0, total * (1.0 + _TAIL_SLACK))


def union_tail(nodes: NDArray[np.int64], scale: Fraction | float, x: int) -> float:
    """Σ_s P[N_s ≥ x] over the steps (``nodes``[s] = n_s): the union bound on
    P[∃ s: N_s ≥ x]."""
    values, counts = np.unique(nodes, return_counts=True)
    return float(
        sum(int(c) * noise_tail(int(n), scale, x) for n, c in zip(values, counts, strict=True))
    )


def selection_threshold(
    nodes: NDArray[np.int64], scale: Fraction | float, per_key_total: int, key_delta: float
) -> int:
    """τ = C + x*, x* the least integer with Σ_s P[N_s ≥ x*] ≤ p₁ (``key_delta``).

    Then a key whose running count never exceeds C (one unit's) reaches τ at some step
    with probability ≤ p₁ (module docstring).
    """
    if not 0 < key_delta < 1:
        raise ValueError(f"key_delta must be in (0, 1), got {key_delta!r}")
    lo, hi = 0, 1
    while union_tail(nodes, scale, hi) > key_delta:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # union_tail(lo) > p₁ >= union_tail(hi) (lo = 0: tail ~ T/2 > p₁)
        mid = (lo + hi) // 2
        if union_tail(nodes, scale, mid) > key_delta:
            lo = mid
        else:
            hi = mid
    if union_tail(nodes, scale, 0) <= key_delta:  # not reached for p₁ < 1/2
        hi = 0
    return int(per_key_total) + hi


@dataclass(frozen=True)
class SelectionPlan:
    """The public configuration of key selection for one run (no secret, no data).

    Attributes:
        selection: the selection budget, selector and schedule.
        mechanism: the tree selection counter (binary tree, discrete Laplace, ε_s) over
            the run's keys and horizon (the sparse vector uses its key count only).
        per_key_total: C, the most one unit adds to one key's running count.
        max_keys: m (1 at event level).
        epsilon_total: ε = ε_s + ε_c.
        counting_delta: δ_c (None: pure ε_c).
        checks: the sparse vector's checked steps (:func:`check_steps`; None: tree).
        sparse: the sparse vector's calibration (computed once, when the job is made,
            and bound into the run's configuration; None: tree).
    """

    selection: KeySelection
    mechanism: KeyedMechanism
    per_key_total: int
    max_keys: int
    epsilon_total: float
    counting_delta: float | None = None
    checks: tuple[int, ...] | None = None
    sparse: SparseVectorCalibration | None = None

    @classmethod
    def make(
        cls,
        selection: KeySelection,
        counting: KeyedMechanism,
        *,
        per_key_total: float,
        max_keys: int,
        buckets: Any = None,
    ) -> SelectionPlan:
        """The selection for the counting mechanism's run (same keys, horizon,
        relation, step bounds and participation; its own ε_s). ``buckets``: the run's
        time buckets (a calendar schedule needs them)."""
        if not isinstance(selection, KeySelection):
            raise TypeError(
                f"selection must be a dpcount.keyed.selection.KeySelection, got "
                f"{type(selection).__name__}"
            )
        if not counting.noise.is_discrete:
            raise ValueError(
                f"selection= needs discrete counting noise (integer weights), got "
                f"noise={counting.noise.value!r}: a discrete Laplace threshold on a non-integer "
                "count would reveal its fractional part"
            )
        # the counting run's keys, horizon, relation, step bounds and participation, with
        # the selection's pure ε_s and the binary tree (0.3's keyed tree)
        schema = counting.participation
        budget = Budget(selection.epsilon, noise=NoiseKind.DISCRETE_LAPLACE, participation=schema)
        mech = replace(counting, mechanism="tree", budget=budget, k=None, subtract=None, bands=None)
        total = selection.epsilon + counting.epsilon
        checks, sparse = None, None
        if selection.selector is Selector.SPARSE_VECTOR:
            steps = check_steps(selection.every, counting.horizon, buckets)
            checks = tuple(steps.tolist())
            sparse = calibrate(
                epsilon=selection.epsilon,
                key_delta=selection.delta / max_keys,
                checks=len(checks),
                per_key_total=int(per_key_total),
                max_keys=max_keys,
            )
        else:
            mech.counting  # noqa: B018  (validates the selection budget now)
        return cls(
            selection,
            mech,
            int(per_key_total),
            max_keys,
            total,
            counting.delta,
            checks,
            sparse,
        )

    @property
    def selector(self) -> Selector:
        return self.selection.selector

    @property
    def key_delta(self) -> float:
        """p₁: the bound on a one-unit key's release probability (δ_s/m with the sparse
        vector, δ_s·e^{−ε}/m with the tree)."""
        if self.sparse is not None:
            return self.sparse.key_delta
        return self.selection.delta * math.exp(-self.epsilon_total) / self.max_keys

    def nodes(self) -> NDArray[np.int64]:
        """n_s, the number of noisy nodes the tree selection counter adds at step s (its
        noise coefficients: each node has coefficient 1)."""
        coefficients = self.mechanism.counting.noise_coefficients()
        out = np.rint(coefficients).astype(np.int64)
        if not np.array_equal(out, coefficients):
            raise AssertionError("the binary tree's noise coefficients are node counts")
        return out

    @property
    def scale(self) -> Fraction:
        """The tree's node scale."""
        sampler = self.mechanism.counting.sampler
        scale: Fraction = sampler.scale  # type: ignore[attr-defined]
        return scale

    @property
    def threshold(self) -> int:
        if self.sparse is not None:
            return self.sparse.threshold
        return _threshold(self)

    def noise_layout(self, step: int) -> NoiseLayout | None:
        """The per-key noise state a stored run keeps after ``step`` (the sparse vector
        keeps none: its noise is a pure function of the position)."""
        return None if self.sparse is not None else self.mechanism.noise_layout(step)

    def config(self) -> dict[str, Any]:
        common = {
            "keys": "open",
            "selection_epsilon": self.selection.epsilon,
            "selection_delta": self.selection.delta,
        }
        if self.sparse is None:  # 0.4's configuration (its stored states continue)
            return {**common, "selection_structure": self.mechanism.structure}
        sv = self.sparse
        return {
            **common,
            "selector": self.selector.value,
            "selection_every": self.selection.every,
            "selection_checks": sv.checks,
            "selection_threshold": sv.threshold,
            "selection_rho_share": str(sv.rho_share),
        }

    def describe(self) -> str:
        sv = self.sparse
        if sv is None:
            rule = (
                f"selection count (binary tree, exact discrete Laplace, epsilon "
                f"{self.selection.epsilon:g}, scale {float(self.scale):.6g}) reaches "
                f"{self.threshold}"
            )
        else:
            rule = (
                f"noisy count (sparse vector: threshold {sv.threshold} + rho, rho ~ "
                f"discrete Laplace of scale {float(sv.rho_scale):.4g} ({sv.rho_share} of "
                f"epsilon {self.selection.epsilon:g}), fresh noise of scale "
                f"{float(sv.nu_scale):.4g} at each of {sv.checks} checked steps"
                f"{_schedule_text(self.selection.every)}) first reaches it"
            )
        return (
            f"key selection: open key set; a key is released from the first step its "
            f"{rule}; a key of one unit is ever released with probability <= "
            f"{self.key_delta:.3g}; the selected keys are private output; "
            f"selection and counting together: ({self.epsilon_total:g}, "
            f"{self.delta_total:.3g})-DP for logs that differ in one unit"
        )

    @property
    def delta_total(self) -> float:
        """δ_c + δ_s of the combined guarantee."""
        return (0.0 if self.counting_delta is None else self.counting_delta) + self.selection.delta

    def with_keys(self, n_keys: int, key_block: int) -> SelectionPlan:
        return replace(self, mechanism=replace(self.mechanism, n_keys=n_keys, key_block=key_block))


def _schedule_text(every: int | str | None) -> str:
    if every is None:
        return ""
    if isinstance(every, int):
        return f" (every {every} steps)"
    return f" (the last step of each {every})"


def _threshold(plan: SelectionPlan) -> int:
    return _cached_threshold(
        tuple(plan.nodes().tolist()), plan.scale, plan.per_key_total, plan.key_delta
    )


_CACHE: dict[tuple[Any, ...], int] = {}


def _cached_threshold(
    nodes: tuple[int, ...], scale: Fraction, per_key_total: int, key_delta: float
) -> int:
    key = (nodes, scale, per_key_total, key_delta)
    if key not in _CACHE:
        _CACHE[key] = selection_threshold(
            np.asarray(nodes, dtype=np.int64), scale, per_key_total, key_delta
        )
    return _CACHE[key]


@dataclass(frozen=True)
class SelectionOutcome:
    """What the selection did (exact counts: not private, for the operator)."""

    plan: SelectionPlan
    candidates: int
    selected: int

    def summary(self) -> str:
        return (
            f"key selection: {self.candidates} candidate keys in the data, {self.selected} "
            f"released (exact, not private); threshold tau = {self.plan.threshold}; "
            f"{self.plan.describe()}"
        )


def select_keys(
    job: _SelectionJob,
    contributions: Contributions,
    chunk_keys: int,
    *,
    base: NDArray[Any] | None = None,
    noise_state: NDArray[np.uint64] | None = None,
    selected: NDArray[np.int64] | None = None,
    n_prior: int = 0,
) -> tuple[NDArray[np.int64], SelectionOutcome, NDArray[np.uint64] | None]:
    """σ, the selection step of every key of the job's key table (T + 1: never), the
    outcome, and (when the job keeps a state) the selection counter's noise state
    after ``job.until``.

    A key is eligible from the step of its first counted contribution on (the module
    docstring): σ is the first such step s ≤ ``job.until`` at which its noisy
    selection count reaches τ. Continuing a stored state (steps ``job.first``..): the
    ``n_prior`` keys of earlier runs (eligible since then) keep their ``selected``
    step, and the counter continues from their exact sums ``base`` and (tree) its
    ``noise_state`` (the rest of the table: keys new in this run, from zero). The
    sparse vector keeps no noise state (None)."""
    plan = job.selection
    if plan is None:
        raise ValueError("select_keys needs a job with selection=")
    if plan.sparse is not None:
        out = _select_sparse(job, plan, contributions, chunk_keys, base, selected, n_prior)
        return out, SelectionOutcome(plan, len(out), int((out <= job.until).sum())), None
    mech = plan.mechanism
    first, last, never = job.first, job.until, mech.horizon + 1
    tau = plan.threshold
    secret = job.secret.prf(Label.SELECTION)
    n = mech.n_keys
    eligible = _eligible(n, contributions, never, n_prior)
    out = np.full(n, never, dtype=np.int64)
    if selected is not None:
        out[: len(selected)] = selected
    layout = mech.noise_layout(last) if job.keep_state else None
    ends = None if layout is None else np.zeros((layout.rows, n), dtype=np.uint64)
    steps = first + np.arange(last - first + 1, dtype=np.int64)
    for lo, hi in chunk_bounds(n, chunk_keys):
        waiting = (out[lo:hi] > last) & (eligible[lo:hi] <= last)
        if ends is None and not waiting.any():
            continue
        noisy, state = mech.release_with_state(
            secret,
            contributions.for_keys(lo, hi),
            lo,
            hi,
            first=first,
            last=last,
            base=None if base is None else base[lo:hi],
            noise_state=None if noise_state is None else noise_state[:, lo:hi],
            keep_state=ends is not None,
        )
        if ends is not None:
            assert state is not None
            ends[:, lo:hi] = state
        crossed = (noisy >= tau) & (steps[:, None] >= eligible[None, lo:hi])
        hit = crossed.any(axis=0) & waiting
        out[lo:hi] = np.where(hit, first + np.argmax(crossed, axis=0), out[lo:hi])
    outcome = SelectionOutcome(plan, n, int((out <= last).sum()))
    return out, outcome, ends


def _eligible(n: int, contributions: Contributions, never: int, n_prior: int) -> NDArray[np.int64]:
    """Each key's first counted step (0 for the keys of earlier runs, ``never``: none)."""
    eligible = np.full(n, never, dtype=np.int64)
    np.minimum.at(eligible, contributions.key, contributions.step)
    eligible[:n_prior] = 0
    return eligible


def _select_sparse(
    job: _SelectionJob,
    plan: SelectionPlan,
    contributions: Contributions,
    chunk_keys: int,
    base: NDArray[Any] | None,
    selected: NDArray[np.int64] | None,
    n_prior: int,
) -> NDArray[np.int64]:
    """σ of every key by the sparse vector over steps ``job.first``..``job.until``: the
    first checked step s ≥ f with c_s + ν_s ≥ τ + ρ (module docstring), c_s the exact
    running count (continuing ``base``)."""
    assert plan.sparse is not None and plan.checks is not None
    mech = plan.mechanism
    first, last, never = job.first, job.until, mech.horizon + 1
    n = mech.n_keys
    eligible = _eligible(n, contributions, never, n_prior)
    out = np.full(n, never, dtype=np.int64)
    if selected is not None:
        out[: len(selected)] = selected
    checks = np.asarray(plan.checks, dtype=np.int64)
    checks = checks[(checks >= first) & (checks <= last)]
    if len(checks) == 0:
        return out
    noise = SparseVectorNoise(
        job.secret.prf(Label.SPARSE_VECTOR),
        mech.key_block,
        plan.sparse.rho_scale,
        plan.sparse.nu_scale,
    )
    tau = plan.sparse.threshold
    for lo, hi in chunk_bounds(n, chunk_keys):
        waiting = (out[lo:hi] > last) & (eligible[lo:hi] <= last)
        if not waiting.any():
            continue
        dense = contributions.dense(lo, hi, last, first).astype(np.int64)
        start = None if base is None else np.asarray(base[lo:hi], dtype=np.int64)
        counts = exact_running(dense, start, overwrite=True)[checks - first]
        level = tau + noise.rho(lo, hi)
        crossed = (counts + noise.nu(checks, lo, hi) >= level[None, :]) & (
            checks[:, None] >= eligible[None, lo:hi]
        )
        hit = crossed.any(axis=0) & waiting
        out[lo:hi] = np.where(hit, checks[np.argmax(crossed, axis=0)], out[lo:hi])
    return out


def keep_mask(
    selected: NDArray[np.int64], lo: int, n_steps: int, n: int, first: int
) -> NDArray[np.bool_]:
    """Rows to keep of a key-major chunk (keys lo..lo+n−1, steps first..first+n_steps−1):
    the steps at or after each key's selection step."""
    steps = first + np.arange(n_steps, dtype=np.int64)
    out: NDArray[np.bool_] = (steps[None, :] >= selected[lo : lo + n, None]).reshape(-1)
    return out


# --------------------------------------------------------------------------------------
# Planning before reading data
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyOutlook:
    """How a key with ``events`` events spread evenly over the horizon fares (event i
    at step ⌈i·T/n⌉, so its running count at step s is ⌊n·s/T⌋).

    Attributes:
        events: n.
        released: P[the key is selected by step T].
        first_step: the step of its first event.
        expected_step: E[σ | selected] (None: never selected).
        expected_delay: E[σ | selected] − ``first_step`` (None: never selected).
        expected_count: E[c_σ | selected], its exact count when it appears.
    """

    events: int
    released: float
    first_step: int
    expected_step: float | None
    expected_delay: float | None
    expected_count: float | None


@dataclass(frozen=True)
class OpenKeyPlan:
    """The sparse vector's τ for a horizon, budget, bounds and schedule, and how keys of
    a few sizes fare (:func:`plan_open_keys`)."""

    selection: KeySelection
    horizon: int
    per_key_total: int
    max_keys: int
    calibration: SparseVectorCalibration
    keys: tuple[KeyOutlook, ...]

    @property
    def threshold(self) -> int:
        return self.calibration.threshold


def plan_open_keys(
    selection: KeySelection,
    *,
    horizon: int,
    max_weight: int = 1,
    max_keys: int | None = None,
    max_steps: int | None = None,
    min_separation: int = 1,
    buckets: Any = None,
    key_events: tuple[int, ...] = (),
) -> OpenKeyPlan:
    """τ of sparse-vector selection before any data is read, and for each n in
    ``key_events`` the probability that a key with n events spread evenly over the
    horizon is released by the end and its expected delay (:class:`KeyOutlook`).

    Args:
        selection: the selection budget, with the sparse-vector selector.
        horizon: T.
        max_weight: c, an event's (or a unit's per key and step) largest weight.
        max_keys: m, keys per unit over the run (None: event level, m = 1, k = 1).
        max_steps, min_separation: k and b of a unit per key over the run
            (:class:`~dpcount.keyed.bounds.RunBound`; k = T when None).
        buckets: the run's time buckets, for a calendar schedule.
        key_events: the key sizes n to assess.
    """
    from dpcount.keyed.bounds import RunBound

    if not isinstance(selection, KeySelection):
        raise TypeError(f"selection must be a KeySelection, got {type(selection).__name__}")
    if selection.selector is not Selector.SPARSE_VECTOR:
        raise ValueError(
            "plan_open_keys plans the sparse-vector selector (selector='tree' is 0.4's)"
        )
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    if isinstance(max_weight, bool) or not isinstance(max_weight, int) or max_weight < 1:
        raise ValueError(f"max_weight must be a positive integer, got {max_weight!r}")
    m, total = 1, max_weight
    if max_keys is not None:
        bound = RunBound(max_keys, max_steps, min_separation, max_weight)
        m, total = max_keys, int(bound.per_key_total(horizon))
    elif max_steps is not None:
        raise ValueError("max_steps bounds a unit over the run: it needs max_keys")
    checks = check_steps(selection.every, horizon, buckets)
    sv = calibrate(
        epsilon=selection.epsilon,
        key_delta=selection.delta / m,
        checks=len(checks),
        per_key_total=total,
        max_keys=m,
    )
    outlooks = tuple(_outlook(int(n), checks, horizon, sv) for n in key_events)
    return OpenKeyPlan(selection, horizon, total, m, sv, outlooks)


def _outlook(
    n: int, checks: NDArray[np.int64], horizon: int, sv: SparseVectorCalibration
) -> KeyOutlook:
    if n < 1:
        raise ValueError(f"key_events must be positive integers, got {n!r}")
    first = -(-horizon // n)  # ⌈T/n⌉, the step of the first event
    checks = checks[checks >= first]  # a candidate from its first event on
    counts = (n * checks) // horizon
    mass = release_profile(counts, sv.threshold, sv.rho_scale, sv.nu_scale)
    released = float(mass.sum())
    if released <= 0.0:
        return KeyOutlook(n, 0.0, first, None, None, None)
    step = float((mass * checks).sum() / released)
    count = float((mass * counts).sum() / released)
    return KeyOutlook(n, min(released, 1.0), first, step, step - first, count)
