"""Rank every applicable continual-counting mechanism by its exact error.

All figures are exact and data-independent (closed forms, no simulation): the
MSE (mean per-step variance), the largest per-step variance, and a (1 − β)
bound on the largest error over the horizon (:mod:`dpcount.analysis.tails`).
Every candidate is built through :mod:`dpcount.counting.registry`, so a row can be
turned into the mechanism (``build``) or the ``dpcount count`` command
(``command``). Cost: O(log T) per candidate except the tree search
(:func:`~dpcount.analysis.best_k`, O(h·k) per k), so T = 10^8 takes well under a
second.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dpcount._validate import (
    check_choice,
    check_integer,
    check_iterable,
    check_probability,
)
from dpcount.analysis.advisor import TREE_METRICS, best_k
from dpcount.counting.base import CountingMechanism, available_memory, parse_bytes
from dpcount.counting.participation import Sensitivity
from dpcount.counting.registry import (
    CLASSES,
    MECHANISMS,
    REGISTRY,
    Entry,
    build_mechanism,
    capabilities,
    memory_estimate,
)
from dpcount.counting.strategy import Planned
from dpcount.privacy.budget import (
    Budget,
    CalibrationRule,
    NoiseKind,
    Participation,
    accept_participation,
    refuses_loose_budget,
)
from dpcount.privacy.calibration import GAUSSIAN_METHODS, gaussian_sigma
from dpcount.privacy.float_safe import float_delta, float_safety
from dpcount.privacy.guarantee import add_delta
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.tails import gaussian_linf_bound

if TYPE_CHECKING:
    from dpcount.analysis.certificates import Certificate

__all__ = [
    "K_VALUES",
    "METRICS",
    "NORMALIZED_SQRT_COMPARE_LIMIT",
    "ROW_SCALED_COMPARE_LIMIT",
    "Candidate",
    "compare",
]

#: the trees' branching factors ``compare`` searches by default (``k_values``)
K_VALUES = range(2, 65)

accept_participation("compare")  # every row is calibrated to the budget's schema

METRICS = TREE_METRICS
#: largest horizon at which :func:`compare` lists the column-normalized square root: its
#: exact variances are computed on the fly (blocks of ratio 1.1 beyond 2^14; measured
#: 4.4 s at 2^20, 12 s at 2^21 on the 2-core development machine); its declared plan
NORMALIZED_SQRT_COMPARE_LIMIT: int = capabilities("normalized-sqrt").plan.up_to  # type: ignore[union-attr,assignment]
#: largest horizon at which :func:`compare` lists the row-scaled square root (one
#: participation): its exact variances are an O(T²) sum on the fly (≈ 1 s at 4096,
#: ≈ 50 s at its limit 16384, too slow for ``dpcount plan``); its declared plan
ROW_SCALED_COMPARE_LIMIT: int = capabilities("row-scaled-sqrt").plan.up_to  # type: ignore[union-attr,assignment]


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One mechanism with its exact error, as ranked by :func:`compare` (built by
    keyword, its fields in the order below).

    Attributes:
        label: display name (``"kary-19-sub"``, ``"sqrt"``, ...).
        mechanism: registry name (``dpcount count --mechanism``).
        k, subtract: tree options (None for other mechanisms).
        bands: the optimized Toeplitz factorization's bands (None: full band, or
            another mechanism).
        objective: the factorization's ``objective`` preset when not its default
            (``"max"``: the parameters minimizing the largest per-step variance), else
            None.
        stream_bytes, dim: bytes of one stream's noise state for steps of length
            ``dim`` (None: scalar) as the mechanism's class declares it
            (``memory_estimate``).
        noise: ``"laplace"`` or ``"gaussian"``.
        calibration: the rule that set the scale (``pure``, ``theorem3``,
            ``analytic``, ``fhu``, ``classic``).
        horizon, epsilon, delta, step_sensitivity, step_l2_sensitivity, participation:
            the request (delta None: pure ε-DP; step_l2_sensitivity None: the step
            sensitivity; participation None: single participation).
        guaranteed_epsilon, guaranteed_delta: the guarantee actually certified
            (Laplace with Theorem 3 may certify a smaller ε than requested;
            δ = 0 for pure DP).
        sensitivity: with a schema, the exact or certified schema sensitivity this
            row's error holds (else None).
        mse, max_variance: exact.
        linf: (1 − beta) bound on the largest error over the horizon.
        beta: its failure probability.
        metric: the ranking metric; ``value`` is this row's figure for it.
        certificate: Gaussian rows only (None for Laplace): this row's loss — its
            mean (metric ``"mse"``) or largest (otherwise) per-step variance divided by
            the variance of a sensitivity-``step_sensitivity`` Gaussian at the same
            (ε, δ, calibration) — against the best factorization dpcount can compute
            for the horizon and the asymptotic lower bound
            (:mod:`dpcount.analysis.certificates`).
    """

    label: str
    mechanism: str
    k: int | None = None
    subtract: bool | None = None
    bands: int | None = None
    objective: str | None = None
    stream_bytes: int | None = None
    dim: int | None = None
    noise: str
    calibration: str
    horizon: int
    epsilon: float
    delta: float | None
    step_sensitivity: float
    step_l2_sensitivity: float | None = None
    participation: Participation | None = None
    guaranteed_epsilon: float
    guaranteed_delta: float
    sensitivity: Sensitivity | None = None
    mse: float
    max_variance: float
    linf: float
    beta: float
    metric: str
    certificate: Certificate | None

    @property
    def value(self) -> float:
        """This row's figure for the ranking metric."""
        return float(getattr(self, self.metric))

    @property
    def float_delta(self) -> float:
        """What the float-safe release of this row's T·d values adds to δ,
        (1 + e^ε)·T·d·η rounded up (:func:`dpcount.privacy.float_safe.float_delta`;
        the planner lists continuous noise only): the δ ``dpcount count`` states."""
        values = self.horizon * (1 if self.dim is None else self.dim)
        return float_delta(float_safety(self.noise).eta, self.guaranteed_epsilon, values)

    @property
    def release_delta(self) -> float:
        """The certified δ plus :attr:`float_delta`, rounded up: the δ of the release as
        computed (as :attr:`PrivacyGuarantee.total_delta
        <dpcount.privacy.guarantee.PrivacyGuarantee.total_delta>`)."""
        return add_delta(self.guaranteed_delta, self.float_delta)

    @property
    def guarantee(self) -> str:
        """The release's guarantee and how it is made up, e.g. ``"(epsilon=1,
        delta=2.32e-05)-DP as released: (epsilon=1, delta=1e-06)-DP in exact arithmetic
        plus 2.22e-05 for the float-safe release of 1048576 values"`` (Gaussian noise)."""
        exact = (
            f"epsilon={self.guaranteed_epsilon:.6g}-DP"
            if self.guaranteed_delta == 0.0
            else f"(epsilon={self.guaranteed_epsilon:.6g}, delta={self.guaranteed_delta:.3g})-DP"
        )
        values = self.horizon * (1 if self.dim is None else self.dim)
        return (
            f"(epsilon={self.guaranteed_epsilon:.6g}, delta={self.release_delta:.3g})-DP as "
            f"released: {exact} in exact arithmetic plus {self.float_delta:.3g} for the "
            f"float-safe release of {values} values"
        )

    @property
    def budget(self) -> Budget:
        """The budget this row is built with (its noise and non-default rule)."""
        return Budget(
            epsilon=self.epsilon,
            delta=self.delta,
            noise=NoiseKind(self.noise),
            calibration=None
            if self.calibration in ("pure", "theorem3")
            else CalibrationRule(self.calibration),
            step_sensitivity=self.step_sensitivity,
            step_l2_sensitivity=self.step_l2_sensitivity,
            participation=self.participation,
        )

    def _kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"horizon": self.horizon, "budget": self.budget}
        if self.k is not None:
            kw["k"] = self.k
            kw["subtract"] = self.subtract
        if self.bands is not None:
            kw["bands"] = self.bands
        if self.objective is not None:
            kw["objective"] = self.objective
        return kw

    def build(self, rng: RNGLike = None) -> CountingMechanism:
        """The calibrated mechanism of this row (``rng`` as for every mechanism)."""
        return build_mechanism(self.mechanism, rng=rng, **self._kwargs())

    def command(self, noise: str | None = None) -> str:
        """The ``dpcount count`` options that select this mechanism (with ``noise``
        instead of the row's: ``"discrete-laplace"`` for whole-number data)."""
        parts = [f"--mechanism {self.mechanism}"]
        if self.k is not None:
            parts.append(f"--k {self.k}")
            if not self.subtract:
                parts.append("--no-subtract")
        if self.bands is not None:
            parts.append(f"--bands {self.bands}")
        if self.objective is not None:
            parts.append(f"--objective {self.objective}")
        parts.append(f"--epsilon {self.epsilon:g}")
        if self.delta is not None:
            parts.append(f"--delta {self.delta:g}")
        parts.append(f"--noise {self.noise if noise is None else noise}")
        if noise is None and self.calibration not in ("pure", "theorem3", "analytic"):
            parts.append(f"--calibration {self.calibration}")
        if self.step_sensitivity != 1.0:
            parts.append(f"--sensitivity {self.step_sensitivity:g}")
        if self.participation is not None:
            parts.append(f"--participations {self.participation.max_participations}")
            parts.append(f"--min-separation {self.participation.min_separation}")
        return " ".join(parts)


def _row(
    ctx: _Context, label: str, name: str, mech: CountingMechanism, **options: Any
) -> Candidate:
    """The row of ``mech`` built for ``ctx`` (``options``: its k, subtract, bands)."""
    privacy = mech.privacy
    assert privacy is not None  # built by calibrate, never with_sampler
    max_var = mech.max_variance()
    mse = mech.mse()
    certificate = None
    method = privacy.calibration
    gaussian = privacy.noise == "gaussian" and method in GAUSSIAN_METHODS
    b = ctx.budget
    if ctx.certificates and gaussian and b.delta is not None:
        # the certificates import the factorizations they compare with: Gaussian rows only
        from dpcount.analysis.certificates import Certificate, Reference, certify

        # every Gaussian calibration is proportional to the sensitivity, so this is
        # the loss of the factorization whatever (ε, δ); under a schema the variance
        # holds the schema sensitivity, so the loss does too
        step = b.step_sensitivity
        unit = gaussian_sigma(step, b.epsilon, b.delta, method) ** 2  # type: ignore[arg-type]
        objective = "mean" if ctx.metric == "mse" else "max"
        loss = (mse if objective == "mean" else max_var) / unit
        if b.participation is None:
            certificate = certify(loss, mech.horizon, objective)
        else:  # the reference is set once every row is known (compare)
            ref = Reference(mech.horizon, objective, loss, label)
            certificate = Certificate(loss=loss, reference=ref, asymptotic_bound=None)
    sensitivity = None
    if mech.participation_sensitivities is not None:
        s1, s2 = mech.participation_sensitivities
        sensitivity = s2 if privacy.noise.endswith("gaussian") else s1
    return ctx.candidate(
        label,
        name,
        (privacy.noise, privacy.calibration, privacy.epsilon, privacy.delta),
        (mse, max_var, mech.linf_bound(ctx.beta, max_variance=max_var)),
        certificate,
        sensitivity=sensitivity,
        **options,
    )


def _dense_row(ctx: _Context, losses: tuple[float, float], name: str) -> Candidate:
    """A dense optimum's row (``name``: ``dense-optimum`` or ``dense-max-optimum``) from
    its losses (no T×T optimization here): a loss is sens²·‖B[t, :]‖² for the encoder's
    largest column norm sens, and with the analytic Gaussian calibration
    σ = step·sens·σ₁ (σ₁ for sensitivity 1) the variances are (step·σ₁)²·loss."""
    from dpcount.analysis.certificates import certify

    b = ctx.budget
    assert b.delta is not None  # Gaussian rows only
    unit = gaussian_sigma(b.step_sensitivity, b.epsilon, b.delta) ** 2
    mean_loss, max_loss = losses
    mse, max_var = unit * mean_loss, unit * max_loss
    objective = "mean" if ctx.metric == "mse" else "max"
    loss = mean_loss if objective == "mean" else max_loss
    return ctx.candidate(
        name,
        name,
        ("gaussian", "analytic", b.epsilon, b.delta),
        (mse, max_var, gaussian_linf_bound(max_var, ctx.T, ctx.beta)),
        certify(loss, ctx.T, objective) if ctx.certificates else None,
    )


@refuses_loose_budget("epsilon", "delta")
def compare(
    horizon: int,
    *,
    budget: Budget,
    metric: str = "mse",
    beta: float = 0.05,
    k_values: Iterable[int] = K_VALUES,
    dim: int | None = None,
    memory: int | str | None = None,
    certificates: bool = True,
    gaussian: bool = True,
    mechanisms: Iterable[str] | None = None,
) -> tuple[Candidate, ...]:
    """Every applicable mechanism with its exact error, best first.

    Without δ (pure ε-DP) only Laplace noise applies: the best k-ary tree
    with and without subtraction (:func:`~dpcount.analysis.best_k` for ``metric``),
    the binary tree, Honaker Online, the smooth binary mechanism, the square-root
    factorization (ℓ₁-calibrated) and input perturbation. With δ each of
    these appears with Laplace noise calibrated by count-on-your-elders Theorem 3
    and with Gaussian noise (analytic Gaussian mechanism), and the square-root
    factorization also with the ``fhu`` and ``classic`` calibrations when ε < 1; the
    BLT (shipped mean-optimized parameters, :meth:`dpcount.counting.BLT.optimized`)
    and the column-normalized square root
    (:class:`dpcount.counting.NormalizedSqrtFactorization`, one weight per column for
    T ≤ 2^14, geometric blocks beyond; listed for T ≤ 2^21, exact variances computed
    on the fly: ~4 s at T = 2^20) and, for T ≤ 2^16, the full-band mean-optimized
    Toeplitz factorization
    (:meth:`dpcount.counting.ToeplitzFactorization.optimized`, computed on the fly:
    ~0.1 s at T = 2048, ~1.5 s at 16384; skipped beyond 2^16, where BLT's shipped
    parameters cover it), and with one participation the dense mean-loss optimum
    (:meth:`dpcount.counting.FactorizationMechanism.optimal`) for T a power of two
    ≤ 2048 or T ≤ 128 — its losses from
    :func:`~dpcount.analysis.certificates.dense_optimum_losses` (shipped: the same
    deterministic optimization ``build`` runs, 4-22 s at T = 1024-2048; its stream
    holds T×T matrices) — are listed with Gaussian noise only; so are, with one
    participation, the dense max-loss optimum (``dense-max-optimum``,
    :func:`~dpcount.analysis.certificates.dense_max_optimum_losses`: shipped for T a
    power of two ≤ 2048, computed for T ≤ 128; certified within 10⁻⁴ of the best max
    loss) and the row-scaled square root (``row-scaled-sqrt``, exact O(T²) variances
    on the fly for T ≤ :data:`ROW_SCALED_COMPARE_LIMIT` = 4096, ≈ 1 s there). Gaussian rows carry a
    ``certificate``: their loss against the best factorization dpcount can compute
    for the horizon and the asymptotic lower bound
    (:mod:`dpcount.analysis.certificates`).

    By a max metric (``"max_variance"``, ``"linf"``) the BLT, the column-normalized BLT
    and the row-scaled BLT are also listed with their max-objective presets where those
    differ from the mean ones (labels ``"blt (max)"``, ...; ``Candidate.objective ==
    "max"``, ``dpcount count --objective max``): at T = 16384 the row-scaled BLT's max
    loss is 14.921 with them against the column-normalized BLT's 15.646.

    With a (k, b)-participation schema in the budget every row is built with it, so
    its error holds its exact or certified schema sensitivity
    (``Candidate.sensitivity``); for b < T the b-banded mean-optimized Toeplitz
    factorization is added (for at most b bands its sensitivity is exact, k·Σc²,
    Choquette-Choo et al. 2023, arXiv:2306.08153) and, for T ≤ 4096, the row-scaled,
    column-normalized b-banded Toeplitz
    (:class:`~dpcount.counting.RowScaledBandedToeplitz`, exact sensitivity; at
    T = 2048 with (4, 512) its mean loss is 44.848 and max 59.798 against the banded
    Toeplitz's 47.398 / 64.366); the trees' k is the one
    :func:`~dpcount.analysis.best_k` picks for the schema. The certificates'
    reference is then the lowest loss among the Gaussian rows for that schema (the
    dense single-participation optimum is not one for k > 1) and their asymptotic
    bound is None (it is a single-participation statement).

    Args:
        horizon: T ≥ 1.
        budget: a :class:`~dpcount.privacy.Budget` without a noise kind or rule
            (every row has its own): ε, δ, the step sensitivity and the schema.
        metric: ``"mse"``, ``"max_variance"`` or ``"linf"``.
        beta: failure probability of the ℓ∞ bounds.
        k_values: branching factors searched for the trees.
        dim: the length of a vector step (None: scalar steps). Each row's
            ``stream_bytes`` is its class's declared stream state for it.
        memory: with ``dim`` or alone: only mechanisms whose structure and one stream
            fit in ``memory`` (bytes or a size like ``"2GiB"``; None with a ``dim``:
            the machine's available memory) are listed; they are skipped before
            anything is built.
        certificates: False leaves every row's ``certificate`` None: the ranking
            does not read it, and the certificates' references (factorizations
            optimized on the fly) are most of the cost at small horizons
            (:func:`~dpcount.analysis.recommend_mechanism` ranks without them).
        gaussian: False lists the Laplace rows only, also with δ (the rows of the
            full list with ``noise == "laplace"``, in the same order):
            :func:`~dpcount.analysis.recommend_mechanism` when a lower bound on every
            Gaussian row's MSE rules them out (:mod:`dpcount.analysis._floor`).
        mechanisms: registry names: only their rows are listed (the rows of the full
            list with those mechanisms, in the same order); None: every mechanism.
            :func:`~dpcount.analysis.recommend_mechanism` ranks the integer-noise
            mechanisms' Gaussian rows alone when bounds rule the others out.

    Returns:
        Frozen :class:`Candidate` rows sorted by ``metric`` (ties by label).

    Raises:
        ValueError: a bad argument, a budget with a noise kind or rule, or a schema
            whose k participations b apart do not fit in the horizon (naming them).
        TypeError: ``budget`` not a Budget, or its fields given loose or by position
            (removed in 0.5).
    """
    T = check_integer("horizon", horizon, ge=1)
    budget = Budget.check(budget, owner="compare")
    if budget.noise is not None or budget.calibration is not None:
        raise ValueError(
            "compare ranks every noise kind with its own calibration: pass a budget without "
            f"noise/calibration, got {budget!r} (filter the rows by Candidate.noise)"
        )
    check_choice("metric", metric, METRICS)
    b = check_probability("beta", beta)
    if budget.participation is not None:
        budget.participation.check_horizon(T)
    d = None if dim is None else check_integer("dim", dim, ge=1)
    ctx = _Context(
        T=T,
        budget=budget,
        metric=metric,
        beta=b,
        ks=tuple(check_integer("k", k, ge=2) for k in check_iterable("k_values", k_values)),
        dim=d,
        limit=_memory_limit(memory, d),
        certificates=certificates,
    )
    noises = ("laplace",) if budget.delta is None or not gaussian else ("laplace", "gaussian")
    names = set(MECHANISMS)
    if mechanisms is not None:
        names = {
            check_choice("mechanisms", n, MECHANISMS)
            for n in check_iterable("mechanisms", mechanisms)
        }
    rows = [
        row
        for noise in noises
        for entry in REGISTRY
        if entry.name is not None and entry.name in names and _listed(ctx, entry, noise)
        for row in _entry_rows(ctx, entry, noise)
    ]
    if not rows:
        raise ValueError(
            f"no mechanism's structure and stream fit in the memory limit ({memory!r}) at "
            f"horizon {T} with steps of length {d or 1}"
        )
    if budget.participation is not None and certificates:
        rows = _schema_certificates(rows, budget.participation)
    rows.sort(key=rank_key)
    return tuple(rows)


def rank_key(row: Candidate) -> tuple[float, str, str]:
    """The order of :func:`compare`'s rows: by the metric's figure (NaN last), then label
    and noise."""
    return (row.value if math.isfinite(row.value) else math.inf, row.label, row.noise)


def _memory_limit(memory: int | str | None, dim: int | None) -> int | None:
    """The bytes a row's structure and one stream must fit: ``memory``, else with a
    ``dim`` the machine's available memory, else no limit."""
    if memory is not None:
        return parse_bytes("memory", memory)
    return None if dim is None else available_memory()


@dataclass(frozen=True)
class _Context:
    """One :func:`compare` request, validated."""

    T: int
    budget: Budget
    metric: str
    beta: float
    ks: tuple[int, ...]
    dim: int | None
    limit: int | None
    certificates: bool

    @property
    def separation(self) -> int | None:
        """The schema's b when it is below the horizon (banded rows), else None."""
        schema = self.budget.participation
        if schema is None or schema.min_separation >= self.T:
            return None
        return schema.min_separation

    def candidate(
        self,
        label: str,
        name: str,
        guarantee: tuple[str, str, float, float],
        errors: tuple[float, float, float],
        certificate: Certificate | None,
        **options: Any,
    ) -> Candidate:
        """The row of ``name`` for this request: its guarantee (noise, calibration rule,
        certified ε and δ), its errors (MSE, largest variance, ℓ∞ bound), its
        certificate and ``options`` (tree or band options, schema sensitivity)."""
        noise, calibration, guaranteed_epsilon, guaranteed_delta = guarantee
        mse, max_variance, linf = errors
        b = self.budget
        request: dict[str, Any] = {
            "horizon": self.T,
            "epsilon": b.epsilon,
            "delta": b.delta,
            "step_sensitivity": b.step_sensitivity,
            "step_l2_sensitivity": b.step_l2_sensitivity,
            "beta": self.beta,
            "metric": self.metric,
            "participation": b.participation,
        }
        return Candidate(
            label=label,
            mechanism=name,
            k=options.pop("k", None),
            subtract=options.pop("subtract", None),
            noise=noise,
            calibration=calibration,
            guaranteed_epsilon=guaranteed_epsilon,
            guaranteed_delta=guaranteed_delta,
            mse=mse,
            max_variance=max_variance,
            linf=linf,
            certificate=certificate,
            **request,
            **options,
        )

    def stream_bytes(self, name: str, **opts: object) -> int | None:
        """The row's declared stream bytes, or None when it does not fit the limit."""
        estimate = memory_estimate(name, self.T, self.dim, **opts)
        if self.limit is not None and estimate.total > self.limit:
            return None
        return estimate.stream


def _listed(ctx: _Context, entry: Entry, noise: str) -> bool:
    """Whether the planner lists ``entry`` with ``noise``, from its declared capabilities
    and plan (nothing is built): a noise kind it takes, a horizon its builder and the
    plan reach, the schema (or none) its plan is for."""
    caps, plan = entry.capabilities, entry.capabilities.plan
    if plan is None or NoiseKind(noise) not in caps.continuous:
        return False
    if plan.planned is Planned.LOSSES and noise != "gaussian":
        return False  # the shipped losses are ℓ₂ (Gaussian) figures
    limit = plan.up_to if plan.up_to is not None else caps.max_horizon
    if limit is not None and limit < ctx.T:
        return False
    schema = ctx.budget.participation
    if schema is not None and (plan.single or not caps.participation):
        return False
    return not plan.banded or ctx.separation is not None


def _entry_rows(ctx: _Context, entry: Entry, noise: str) -> list[Candidate]:
    """The rows of one listed ``entry`` with ``noise``, as its plan declares."""
    plan = entry.capabilities.plan
    assert entry.name is not None and plan is not None  # _listed
    name = entry.name
    if plan.planned is Planned.TREE_SEARCH:
        return _tree_rows(ctx, name, noise)
    if plan.planned is Planned.LOSSES:
        return _loss_rows(ctx, entry)
    if plan.banded:
        return _built(ctx, f"{name}-b{ctx.separation}", name, noise)
    if plan.calibrations and noise == "gaussian":
        methods = plan.calibrations if ctx.budget.epsilon < 1.0 else plan.calibrations[:1]
        return [r for m in methods for r in _built(ctx, f"{name} ({m})", name, noise, m)]
    rows = _built(ctx, name, name, noise)
    if plan.max_preset and ctx.metric != "mse" and _distinct_max_preset(name, ctx.T):
        rows += _built(ctx, f"{name} (max)", name, noise, objective="max")
    if plan.also_banded and ctx.separation is not None:
        sep = ctx.separation
        rows += _built(ctx, f"{name}-b{sep}", name, noise, bands=sep)
    return rows


def _tree_rows(ctx: _Context, name: str, noise: str) -> list[Candidate]:
    """The best k-ary tree with and without subtraction for the metric and the whole
    budget (its schema and step sensitivity), :func:`~dpcount.analysis.best_k`; k = 2
    without subtraction is the binary tree, listed on its own."""
    rows = []
    for sub in (True, False):
        ks = [k for k in ctx.ks if k >= 3] if sub else list(ctx.ks)  # k = 2 with sub = binary
        if not ks:
            continue
        choice = best_k(
            ctx.T,
            budget=ctx.budget.replace(noise=noise),  # whole: schema and step sensitivity
            subtract=sub,
            k_values=ks,
            metric=ctx.metric,
            beta=ctx.beta,
        )
        if choice.k == 2 and not sub:
            continue  # the binary tree, listed on its own
        label = f"kary-{choice.k}" + ("-sub" if sub else "")
        rows += _built(ctx, label, name, noise, k=choice.k, subtract=sub)
    return rows


def _loss_rows(ctx: _Context, entry: Entry) -> list[Candidate]:
    """A dense optimum's row from its shipped (or, T ≤ 128, computed) losses, when it
    has them at this horizon and fits the memory limit."""
    from dpcount.analysis.certificates import dense_max_optimum_losses, dense_optimum_losses

    name = str(entry.name)
    objective = dict(entry.preset).get("objective", "mean")
    losses = (dense_optimum_losses if objective == "mean" else dense_max_optimum_losses)(ctx.T)
    stream_bytes = None if losses is None else ctx.stream_bytes(name)
    if losses is None or stream_bytes is None:
        return []
    row = _dense_row(ctx, losses, name)
    return [replace(row, stream_bytes=stream_bytes, dim=ctx.dim)]


def _built(
    ctx: _Context,
    label: str,
    name: str,
    noise: str,
    calibration: str | None = None,
    **opts: object,
) -> list[Candidate]:
    """The row of mechanism ``name`` built with ``noise``, ``calibration`` and the
    options ``opts`` ([] when it does not fit the memory limit)."""
    stream_bytes = ctx.stream_bytes(name, **opts)
    if stream_bytes is None:
        return []
    # the registry's builder itself: an analysis allocates no stream, so the
    # build-time memory check (for T·d streams) does not apply here
    b = ctx.budget
    mech = MECHANISMS[name](
        horizon=ctx.T, budget=b.replace(noise=noise, calibration=calibration), rng=0, **opts
    )
    k, sub, bands = opts.get("k"), opts.get("subtract"), opts.get("bands")
    row = _row(
        ctx,
        label,
        name,
        mech,
        k=None if k is None else int(k),  # type: ignore[call-overload]
        subtract=None if sub is None else bool(sub),
        bands=None if bands is None else int(bands),  # type: ignore[call-overload]
    )
    objective = opts.get("objective")
    return [
        replace(
            row,
            stream_bytes=stream_bytes,
            dim=ctx.dim,
            objective=None if objective is None else str(objective),
        )
    ]


def _distinct_max_preset(name: str, horizon: int) -> bool:
    """Whether mechanism ``name``'s max-objective preset has other shipped parameters
    than its default (mean) one at ``horizon`` (else its row would repeat the mean row)."""
    cls = CLASSES[next(e.class_name for e in REGISTRY if e.name == name)]
    shipped = cls.shipped_parameters  # type: ignore[attr-defined]
    return bool(shipped(horizon, "max") != shipped(horizon, "mean"))


def _schema_certificates(rows: list[Candidate], schema: Participation) -> list[Candidate]:
    """Under a schema: every Gaussian row's certificate against the lowest loss among
    the Gaussian rows (the best factorization dpcount computed for this horizon and
    schema), with no asymptotic bound."""
    from dpcount.analysis.certificates import Certificate, Reference

    certified = [r for r in rows if r.certificate is not None]
    if not certified:
        return rows
    best = min(certified, key=lambda r: (r.certificate.loss, r.label))  # type: ignore[union-attr]
    assert best.certificate is not None
    ref = Reference(
        horizon=best.horizon,
        objective=best.certificate.reference.objective,
        loss=best.certificate.loss,
        source=f"{best.label}, {schema.max_participations} participations "
        f"{schema.min_separation} apart",
    )
    return [
        r
        if r.certificate is None
        else replace(r, certificate=Certificate(r.certificate.loss, ref, asymptotic_bound=None))
        for r in rows
    ]
