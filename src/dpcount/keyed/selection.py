"""Private key selection: keyed counters over an open key set (keys not known in advance).

With ``keys=None`` and ``selection=KeySelection(epsilon=ε_s, delta=δ_s)`` the key
universe is not given. The candidate keys are the keys of the run's *bounded*
contributions (key names come only from the data: a key never seen is never
released); a key is a candidate from f, the step of its first bounded contribution.
A candidate key is released from the first step σ ≥ f at which a separate noisy
running count of it — the **selection counter** — reaches a threshold τ, and from
then on with the run's counting mechanism; its earlier steps are withheld (the
running count of step s ≥ σ still covers all its events since step 1). So the set of
released keys, and the step each one appears at, are themselves private output.

The rule is causal (σ depends on steps ≤ σ only), so it can run in pieces: with
``state=`` (:mod:`dpcount.keyed.state`) or incremental runs
(:mod:`dpcount.keyed.incremental`) the key table, the selection steps and the
selection counter's noise state per key persist, a key gets its noise position when
it is first counted (after the keys of earlier runs, ordered by f then name, so one
run over all the steps places it at the same position), and the runs release
exactly the rows of one run. τ is computed for the whole horizon T, fixed at the
first run.

Notation (math → code):

=====================================  ================================================
ε_c, δ_c (the counting budget)          ``epsilon``, ``delta`` of the run
ε_s, δ_s (the selection budget)         :class:`KeySelection`
m, k, b, c (a unit's bound)             ``max_keys``, ``max_steps``, ``min_separation``,
                                        ``max_weight`` (:mod:`dpcount.keyed.bounds`);
                                        event level: m = k = 1, c = ``max_weight``
C = k·c (one unit's total in one key)   :attr:`SelectionPlan.per_key_total`
N_s = Σ of n_s i.i.d. Lap_Z(t)          the selection counter's noise at step s
(binary tree, n_s nodes)                (:meth:`SelectionPlan.nodes`, ``scale``)
p₁ (per-key crossing bound)             :attr:`SelectionPlan.key_delta`
τ (threshold)                           :attr:`SelectionPlan.threshold`
=====================================  ================================================

The selection counter. The binary tree (:class:`~dpcount.counting.tree.KaryTree`,
k = 2, no subtraction) with exact discrete Laplace noise, calibrated by the tree's own
rules to ε_s under the run's relation (the same step bounds and participation
schema as the counting mechanism, :mod:`dpcount.keyed.bounds`), so the sequence of
noisy running counts of all candidate keys is ε_s-DP. Its noise comes from the keyed
PRF source (:class:`~dpcount.keyed.prf.PRFSource`) under its own key,
HMAC-SHA256(run PRF key, ``"dpcount/keyed/key-selection"``), independent of the
counting noise: a pure function of the secret, the run's configuration, the key's
position and the step, so reruns give the same selection bit for bit.

Calibration of τ (union bound). A key touched by one unit only has running count
c_s ≤ C at every step. Its selection noise at step s is N_s, a sum of n_s i.i.d.
Lap_Z(t) samples (the tree's release adds one noisy node per used node, each node
with coefficient 1). Hence

    P[key ever released] = P[∃ s ≤ T: c_s + N_s ≥ τ] ≤ Σ_{s=1}^{T} P[N_s ≥ τ − C],

and τ = C + x* with x* the least integer whose union sum is ≤ p₁
(:func:`selection_threshold`). P[N_s ≥ x] is computed from Lap_Z(t) = G₁ − G₂ with
G geometric (P[G ≥ g] = q^g, q = e^{−1/t}), so N_s = A − B with A, B i.i.d.
negative binomial NB(n_s, 1 − q): P[A − B ≥ x] = Σ_j P[B = j]·P[A ≥ x + j], summed
for j < J (term by term, or in blocks of t/100 values bounded by their first term when
t ≥ 200) and bounded by P[B ≥ J] beyond (:func:`noise_tail`, an upper bound).

Theorem (the combined guarantee). Neighbouring logs differ in all the events of one
privacy unit, bounded as in :mod:`dpcount.keyed.bounds` (event level: one event).
Let ε = ε_s + ε_c and p₁ = δ_s·e^{−ε}/m. Then the release (the selected keys, their
selection steps and their counts from then on) is (ε_s + ε_c, δ_s + δ_c)-DP, whether
it is made in one run or in several continuing a state.

Proof. Let D′ = D + u. Bounding is per unit (and causal per unit: u's bounded
contributions do not change another unit's), so u's kept contributions touch a set
K_u of at most m keys; f_D(j) (∞ if j ∉ cand(D)) is key j's first counted step, and
f_{D′}(j) = f_D(j) for j ∉ K_u, f_{D′}(j) ≤ f_D(j) for j ∈ K_u. Write P = (selection
counter, counting mechanism) run over all keys (noise i.i.d. per key: the positions
do not look at the noise, so they do not change its law); the release is
F_f(P), a post-processing that depends on the data only through the eligibility
steps f (select the first crossing at a step ≥ f(j), withhold earlier steps).
(i) P(D) and P(D′) differ only by u's contributions, a neighbouring change of both
vector streams: the selection counter is (ε_s, 0)-DP and the counting mechanism
(ε_c, δ_c)-DP for it (their calibrations), with independent noise, so the pair is
(ε, δ_c)-DP (basic composition), and so is F_{f_D}(P(·)), one fixed post-processing.
(ii) Let E be the event that no key j ∈ K_u crosses τ at a step s ∈ [f_{D′}(j),
f_D(j)) under D′. At those steps j's running count under D′ is u's alone (D has none
of j before f_D(j)), so c_s ≤ C, and by the union bound above P[¬E] ≤ |K_u|·p₁ ≤
m·p₁. On E, F_{f_{D′}}(P(D′)) = F_{f_D}(P(D′)) =: G(D′) (no key's first crossing at a
step ≥ f_{D′} lies before f_D). Hence for any set S of outputs:
P[F_{f_{D′}}(P(D′)) ∈ S] ≤ P[G(D′) ∈ S] + P[¬E] ≤ e^ε·P[F_{f_D}(P(D)) ∈ S] + δ_c + m·p₁,
and P[F_{f_D}(P(D)) ∈ S] ≤ e^ε·P[G(D′) ∈ S] + δ_c ≤ e^ε·(P[F_{f_{D′}}(P(D′)) ∈ S] +
m·p₁) + δ_c. With m·p₁ = δ_s·e^{−ε}, both are at most e^ε·P[·] + δ_c + δ_s. Runs
continuing a state compute the same F_f(P) (the same rule, causal, on the same
noise), so the guarantee is the one run's. ∎

This is the threshold-then-release design of DP-SQLP (Zhang, Doroshenko, Kairouz,
Steinke, Thakurta, Ma, Cohen, Apte, Spacek, "Continual Release of Differentially
Private Synthetic Data from Longitudinal Data Collections", arXiv:2303.18086,
its key selection by tree-aggregated thresholding) with the partition-selection
argument of Desfontaines, Voss, Gipson, Mandayam, "Differentially private partition
selection", PoPETs 2022, arXiv:2006.03684 (a partition of one unit is released with
probability ≤ δ; here over all T steps by a union bound, not per release). Gaussian
thresholding (DP-SIPS, Swanberg, Desfontaines, Haney, "DP-SIPS", arXiv:2301.01998)
is not used: the discrete Laplace tree keeps the selection pure-ε.

Limits: the selection needs integer weights and discrete counting noise (a discrete
Laplace threshold on a non-integer count would reveal its fractional part). It runs on
either engine (Dask places the keys as the embedded engine does, then selects each
shard's keys where the shard lies: the same bits), also with ``state=`` (runs
continuing a state: the Dask client places and selects as the embedded engine does,
:func:`dpcount.keyed.job.settle`). ``report`` (candidate and selected
counts, dropped and late events) is exact, not private; the released rows are.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_probability, check_real
from dpcount.keyed.engine import KeyedMechanism, chunk_bounds
from dpcount.keyed.events import Contributions
from dpcount.privacy.budget import Budget, NoiseKind


class _Secret(Protocol):
    @property
    def prf_key(self) -> bytes: ...


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
    "KeySelection",
    "SelectionPlan",
    "keep_mask",
    "noise_tail",
    "select_keys",
    "selection_threshold",
    "union_tail",
]

#: PRF label of the selection counter's key (independent of the counting noise)
SELECTION_LABEL = b"dpcount/keyed/key-selection"

#: relative slack on the floating-point tail sums (SciPy's incomplete beta functions
#: are accurate to ~1e-14 relative)
_TAIL_SLACK = 1e-9


@dataclass(frozen=True)
class KeySelection:
    """The budget of private key selection (an open key set): ``keys=None``.

    Attributes:
        epsilon: ε_s > 0 of the selection counter (added to the counting ε).
        delta: δ_s ∈ (0, 1): the selection's share of δ (added to the counting δ).
            A key touched by one unit only is ever released with probability at most
            δ_s·e^{−ε}/max_keys over the whole run (ε the total), see the module
            docstring.
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_real("selection epsilon", self.epsilon, gt=0))
        object.__setattr__(self, "delta", check_probability("selection delta", self.delta))


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
        selection: the selection budget.
        mechanism: the selection counter (binary tree, discrete Laplace, ε_s).
        per_key_total: C, the most one unit adds to one key's running count.
        max_keys: m (1 at event level).
        epsilon_total: ε = ε_s + ε_c.
        counting_delta: δ_c (None: pure ε_c).
    """

    selection: KeySelection
    mechanism: KeyedMechanism
    per_key_total: int
    max_keys: int
    epsilon_total: float
    counting_delta: float | None = None

    @classmethod
    def make(
        cls,
        selection: KeySelection,
        counting: KeyedMechanism,
        *,
        per_key_total: float,
        max_keys: int,
    ) -> SelectionPlan:
        """The selection counter for the counting mechanism's run (same keys, horizon,
        relation, step bounds and participation; its own ε_s)."""
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
        mech.counting  # noqa: B018  (validates the selection budget now)
        return cls(
            selection,
            mech,
            int(per_key_total),
            max_keys,
            selection.epsilon + counting.epsilon,
            counting.delta,
        )

    @property
    def key_delta(self) -> float:
        """p₁ = δ_s·e^{−ε}/m: the bound on a one-unit key's release probability."""
        return self.selection.delta * math.exp(-self.epsilon_total) / self.max_keys

    def nodes(self) -> NDArray[np.int64]:
        """n_s, the number of noisy nodes the selection counter adds at step s (its
        noise coefficients: each node has coefficient 1)."""
        coefficients = self.mechanism.counting.noise_coefficients()
        out = np.rint(coefficients).astype(np.int64)
        if not np.array_equal(out, coefficients):
            raise AssertionError("the binary tree's noise coefficients are node counts")
        return out

    @property
    def scale(self) -> Fraction:
        sampler = self.mechanism.counting.sampler
        scale: Fraction = sampler.scale  # type: ignore[attr-defined]
        return scale

    @property
    def threshold(self) -> int:
        return _threshold(self)

    def config(self) -> dict[str, Any]:
        return {
            "keys": "open",
            "selection_epsilon": self.selection.epsilon,
            "selection_delta": self.selection.delta,
            "selection_structure": self.mechanism.structure,
        }

    def describe(self) -> str:
        return (
            f"key selection: open key set; a key is released from the first step its "
            f"selection count (binary tree, exact discrete Laplace, epsilon "
            f"{self.selection.epsilon:g}, scale {float(self.scale):.6g}) reaches "
            f"{self.threshold}; a key of one unit is ever released with probability <= "
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


def selection_secret(prf_key: bytes) -> bytes:
    """The selection counter's PRF secret: HMAC-SHA256(run PRF key, label)."""
    return hmac.new(prf_key, SELECTION_LABEL, hashlib.sha256).digest()


@dataclass(frozen=True)
class SelectionOutcome:
    """What the selection did (exact counts: not private, for the operator)."""

    plan: SelectionPlan
    candidates: int
    selected: int

    def summary(self) -> str:
        return (
            f"key selection: {self.candidates} candidate keys in the data, {self.selected} "
            f"released (exact, not private); threshold {self.plan.threshold}; "
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
    step, and the counter continues from their exact sums ``base`` and its
    ``noise_state`` (the rest of the table: keys new in this run, from zero)."""
    plan = job.selection
    if plan is None:
        raise ValueError("select_keys needs a job with selection=")
    mech = plan.mechanism
    first, last, never = job.first, job.until, mech.horizon + 1
    tau = plan.threshold
    secret = selection_secret(job.secret.prf_key)
    n = mech.n_keys
    eligible = np.full(n, never, dtype=np.int64)  # each key's first counted step
    np.minimum.at(eligible, contributions.key, contributions.step)
    eligible[:n_prior] = 0
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


def keep_mask(
    selected: NDArray[np.int64], lo: int, n_steps: int, n: int, first: int
) -> NDArray[np.bool_]:
    """Rows to keep of a key-major chunk (keys lo..lo+n−1, steps first..first+n_steps−1):
    the steps at or after each key's selection step."""
    steps = first + np.arange(n_steps, dtype=np.int64)
    out: NDArray[np.bool_] = (steps[None, :] >= selected[lo : lo + n, None]).reshape(-1)
    return out
