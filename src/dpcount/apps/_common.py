"""What every app shares: choosing its counting mechanism, its sensitivity, the test hook.

Sensitivity of a vector stream (the one rule every app uses)
-------------------------------------------------------------
An app turns its input into a stream of vectors x_1, …, x_T ∈ R^d and releases
their private prefix sums with a :class:`~dpcount.counting.CountingMechanism`.
Every dpcount counting mechanism perturbs a linear image R·X of the stream
(X the T×d matrix of steps, the same R for every coordinate, noise i.i.d. per
entry) and calibrates the noise to the sensitivities (r₁·Δ₁, r₂·Δ₂) of R·X for
a change of ONE step with ‖δ‖₁ ≤ Δ₁ (Laplace) or ‖δ‖₂ ≤ Δ₂ (Gaussian), where
r₁, r₂ bound the ℓ₁/ℓ₂ norms of R's columns (``_unit_sensitivities``).

In several apps a neighbouring input changes *several* steps (a letter changes
ℓ substring indicators, an edge insertion changes a degree histogram at every
later step). Write the change as a T×d matrix D with columns D_c (coordinate c
over time). Then, by the triangle inequality per coordinate,

* ‖R·D‖₁ = Σ_c ‖R·D_c‖₁ ≤ r₁ · Σ_c ‖D_c‖₁ = r₁ · Γ₁,
* ‖R·D‖_F = (Σ_c ‖R·D_c‖₂²)^½ ≤ r₂ · (Σ_c ‖D_c‖₁²)^½ = r₂ · Γ₂,

so declaring ``step_sensitivity = Γ₁`` (Laplace) or ``Γ₂`` (Gaussian), and
``step_l2_sensitivity = Γ₂`` (Laplace with a delta), calibrates the mechanism
for the multi-step change exactly as for a one-step change of that size. This
is :class:`StreamSensitivity`. For a change confined to one step, Γ₁ and Γ₂ are
that step's ℓ₁ and ℓ₂ norms. Note Γ₂ (ℓ₂ over coordinates of the per-coordinate
total variation) is never larger than Σ_t ‖δ_t‖₂ (Minkowski) and never larger
than Γ₁.

The papers sometimes use the ℓ₂ norm of the whole change, (Σ_{t,c} δ_{t,c}²)^½,
as if it were one step's: that is *not* a valid sensitivity for correlated
mechanisms (R's columns overlap), and dpcount never does it.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_bool, check_choice, check_integer, check_real
from dpcount.counting.base import CountingMechanism
from dpcount.counting.registry import MECHANISMS, default_noise
from dpcount.privacy.budget import Budget, BudgetFields, NoiseKind
from dpcount.privacy.guarantee import PrivacyGuarantee
from dpcount.privacy.noise import NoiseSampler
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.tails import gaussian_two_sided_quantile

__all__ = [
    "DEFAULT_APPROX_MECHANISM",
    "DEFAULT_PURE_MECHANISM",
    "AppBase",
    "AppFields",
    "MechanismChoice",
    "StreamSensitivity",
    "app_budget",
    "gaussian_two_sided_quantile",
]

#: default with a delta on fractional data: the square-root factorization with Gaussian
#: noise (constant-matters); integer data default to the k-ary tree with integer noise
DEFAULT_APPROX_MECHANISM = "sqrt"
#: default without a delta: k-ary tree, k = 19, with subtraction (pure ε-DP); discrete
#: Laplace noise on integer data, Laplace noise otherwise
DEFAULT_PURE_MECHANISM = "kary"


@dataclass(frozen=True)
class StreamSensitivity:
    """Largest change of an app's vector stream between neighbouring inputs.

    Attributes:
        l1: Γ₁ = max Σ_c Σ_t |δ_{t,c}| (used for Laplace noise).
        l2: Γ₂ = max (Σ_c (Σ_t |δ_{t,c}|)²)^½ (used for Gaussian noise, and as the
            ℓ₂ bound of Laplace noise with a delta). Always Γ₂ ≤ Γ₁.

    See the module docstring for why these are the right inputs to a counting
    mechanism's ``step_sensitivity`` even when the change spans several steps.
    """

    l1: float
    l2: float

    def __post_init__(self) -> None:
        l1 = check_real("l1 sensitivity", self.l1, gt=0)
        l2 = check_real("l2 sensitivity", self.l2, gt=0)
        if l2 > l1 * (1.0 + 1e-12):
            raise ValueError(f"l2 sensitivity must be <= l1 sensitivity {l1!r}, got {l2!r}")

    @classmethod
    def scalar(cls, bound: float) -> StreamSensitivity:
        """A scalar stream's: one coordinate whose summed change is at most ``bound``,
        so Γ₁ = Γ₂ = ``bound``."""
        return cls(bound, bound)

    def for_noise(self, noise: str) -> tuple[float, float | None]:
        """``(step_sensitivity, step_l2_sensitivity)`` for the counting mechanism."""
        if noise == "gaussian":
            return self.l2, None
        return self.l1, self.l2


def app_budget(
    budget: Budget | None, fields: dict[str, Any] | BudgetFields, *, owner: str, bounds: str
) -> Budget:
    """The user's budget for an app: ``budget=`` or its keyword fields (:meth:`Budget.resolve`).

    The app computes the step sensitivity from its own bounds (``bounds``, named in
    the error), so a budget that sets ``step_sensitivity`` (≠ 1) or
    ``step_l2_sensitivity`` is refused rather than silently overridden.

    Raises:
        TypeError: as :meth:`Budget.resolve`.
        ValueError: the budget sets a step sensitivity.
    """
    resolved = Budget.resolve(budget, fields, owner=owner)
    for field in ("step_sensitivity", "step_l2_sensitivity"):
        value = getattr(resolved, field)
        if value != (1.0 if field == "step_sensitivity" else None):
            raise ValueError(
                f"{field}={value!r} cannot be set for {owner}: the app computes its step "
                f"sensitivity from {bounds} (leave {field} out of the budget)"
            )
    return resolved


@dataclass(frozen=True)
class MechanismChoice:
    """Which registered counting mechanism an app runs (the noise is in the budget).

    The safe path is the default where the data allow it (docs/safe-noise.md):
    an app whose stream is integer-valued (counts) and whose ℓ₁ sensitivity is a
    whole number gets integer noise — ``"discrete-laplace"`` without delta,
    ``"discrete-gaussian"`` with one — on the k-ary tree, whose release is then an
    exact integer function of the noisy node values, so floating-point rounding
    cannot leak the data. Continuous noise is the default only for fractional
    streams (e.g. :class:`~dpcount.apps.RunningAverage`), or for a named mechanism
    that cannot take integer noise.

    The noise kind and calibration rule come from the app's
    :class:`~dpcount.privacy.Budget` (``budget.noise`` None: the default above,
    else Gaussian when a delta is given and Laplace without).

    Attributes:
        name: a name in :data:`dpcount.counting.registry.MECHANISMS`; ``None``
            picks the default: ``"kary"`` (k = 19 with subtraction) without a
            delta, or with integer noise; else ``"sqrt"`` (square-root
            factorization, Gaussian noise, constant-matters).
        k, subtract: tree options (ignored by mechanisms without them).
    """

    name: str | None = None
    k: int = 19
    subtract: bool = True

    def __post_init__(self) -> None:
        if self.name is not None:
            check_choice("mechanism", self.name, MECHANISMS)
        check_integer("k", self.k, ge=2)
        check_bool("subtract", self.subtract)

    def resolve(
        self, budget: Budget, sensitivity: StreamSensitivity | None = None
    ) -> tuple[str, NoiseKind]:
        """``(mechanism name, noise kind)`` for this budget.

        ``sensitivity``: given by apps whose stream is integer-valued; then integer
        noise is the default when its ℓ₁ bound is a whole number (see the class).
        """
        name, noise = self.name, budget.noise
        delta = budget.delta
        if noise is None and sensitivity is not None:
            chosen = default_noise(name or "kary", delta, sensitivity.l1)
            noise = None if chosen is None else NoiseKind(chosen)
        if name is None:
            discrete = noise is not None and noise.is_discrete
            name = DEFAULT_PURE_MECHANISM if delta is None or discrete else DEFAULT_APPROX_MECHANISM
        if noise is None:
            noise = NoiseKind.LAPLACE if delta is None else NoiseKind.GAUSSIAN
        return name, noise

    def build(
        self,
        *,
        horizon: int,
        budget: Budget,
        rng: RNGLike,
        sensitivity: StreamSensitivity,
        integer: bool = False,
    ) -> tuple[Budget, CountingMechanism]:
        """The app's budget (``budget`` with its noise kind resolved) and the counting
        mechanism built through the registry, calibrated for ``sensitivity``
        (``integer``: the app's stream is integer-valued, see :meth:`resolve`)."""
        name, noise = self.resolve(budget, sensitivity if integer else None)
        resolved = budget.replace(noise=noise)
        step, step_l2 = sensitivity.for_noise(noise.value)
        mechanism = MECHANISMS[name](
            horizon=horizon,
            budget=resolved.replace(step_sensitivity=step, step_l2_sensitivity=step_l2),
            rng=rng,
            k=self.k,
            subtract=self.subtract,
        )
        return resolved, mechanism


class AppFields(BudgetFields, total=False):
    """An app's keyword arguments: its budget's fields
    (:class:`~dpcount.privacy.budget.BudgetFields`) and its counting mechanism
    (:class:`MechanismChoice`): ``mechanism`` (a registered name; None, the default:
    chosen by the budget), ``k`` (default 19) and ``subtract`` (default True), the tree
    options."""

    mechanism: str | None
    k: int
    subtract: bool


#: the keys of :class:`AppFields` that choose the mechanism (the rest build the budget)
_CHOICE_FIELDS = frozenset({"mechanism", "k", "subtract"})

_App = TypeVar("_App", bound="AppBase")


class AppBase:
    """Common surface of the apps: the mechanism, its guarantee, exact variances, test hook.

    Subclasses call :meth:`_setup_mechanism`, which sets ``self.budget`` (the user's
    :class:`~dpcount.privacy.Budget` with the noise kind resolved),
    ``self.mechanism``, ``self.noise``, ``self.sensitivity``, ``self.horizon`` and
    ``self.neighbouring`` (the app's own neighbouring relation, in words), and
    implement :meth:`_reset` (back to step 0).
    """

    budget: Budget
    mechanism: CountingMechanism
    #: the attributes its ``repr`` shows before the budget
    _shown: ClassVar[tuple[str, ...]] = ()
    noise: str
    neighbouring: str
    sensitivity: StreamSensitivity
    horizon: int

    def _options(
        self, budget: Budget | None, fields: AppFields, *, bounds: str
    ) -> tuple[Budget, MechanismChoice]:
        """The user's budget (:func:`app_budget`: ``budget=`` or the budget's fields in
        ``fields``; the app computes its step sensitivity from its ``bounds``) and the
        counting mechanism ``fields`` choose (``mechanism``, ``k``, ``subtract``)."""
        own = {key: value for key, value in fields.items() if key not in _CHOICE_FIELDS}
        user_budget = app_budget(budget, own, owner=type(self).__name__, bounds=bounds)
        default = MechanismChoice()
        choice = MechanismChoice(
            fields.get("mechanism", default.name),
            fields.get("k", default.k),
            fields.get("subtract", default.subtract),
        )
        return user_budget, choice

    def _setup_mechanism(
        self,
        choice: MechanismChoice,
        budget: Budget,
        sensitivity: StreamSensitivity,
        *,
        horizon: int,
        rng: RNGLike,
        neighbouring: str,
        integer: bool = False,
    ) -> None:
        """Build the counting mechanism for ``sensitivity`` and set ``budget``,
        ``mechanism``, ``noise``, ``sensitivity``, ``horizon`` (the mechanism's) and
        ``neighbouring`` (``integer``: the stream is integer-valued, see
        :meth:`MechanismChoice.resolve`)."""
        self.sensitivity = sensitivity
        self.budget, self.mechanism = choice.build(
            horizon=horizon, budget=budget, rng=rng, sensitivity=sensitivity, integer=integer
        )
        assert self.budget.noise is not None  # resolved by MechanismChoice.build
        self.noise = self.budget.noise.value
        self.horizon = self.mechanism.horizon
        self.neighbouring = neighbouring

    def dp_event(self) -> Any:
        """The app's privacy as a dp_accounting ``DpEvent`` (one run of the app).

        The counting mechanism's event (:meth:`CountingMechanism.dp_event`), which
        is calibrated for the app's sensitivity, so it holds for the app's
        neighbouring relation. Compose several apps or mechanisms with
        dp_accounting's accountants. Needs the ``accounting`` extra.

        For Laplace noise the event describes the change as concentrated on one
        step and one coordinate (the mechanism's unit profile times Γ₁). With a
        delta, an app whose change spreads over several coordinates (e.g. a
        histogram with b > 1) was calibrated with its smaller ℓ₂ bound Γ₂
        (count-on-your-elders Theorem 3), so an accountant can report an ε above
        the app's. The event is then pessimistic as long as Laplace noise on
        changes a and c of two coordinates is dominated by one coordinate
        changing by a + c (checked numerically with dp_accounting's PLD, not
        proved here).

        Raises:
            ValueError: the app carries no guarantee (:meth:`with_sampler`).
        """
        if self.mechanism.privacy is None:
            raise ValueError("this copy carries no privacy guarantee (with_sampler), no DpEvent")
        return self.mechanism.dp_event()

    def _reset(self) -> None:
        raise NotImplementedError

    def _structure(self) -> str:
        """The app's structure in its ``repr`` (what comes before its budget): its
        :attr:`_shown` attributes as ``name=value``."""
        return ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._structure()}, budget={self.budget!r}, "
            f"mechanism={self.mechanism!r})"
        )

    @property
    def privacy(self) -> PrivacyGuarantee | None:
        """The guarantee, stated for the app's neighbouring relation (None under a test sampler)."""
        base = self.mechanism.privacy
        if base is None:
            return None
        return dataclasses.replace(base, neighbouring=self.neighbouring)

    def describe(self) -> str:
        """One line: the app, its mechanism and its guarantee."""
        guarantee = "no privacy guarantee" if self.privacy is None else self.privacy.describe()
        return f"{type(self).__name__} over {self.mechanism!r}: {guarantee}"

    def variances(self) -> NDArray[np.float64]:
        """Exact variance of each released coordinate at steps 1..horizon (data-independent)."""
        return self.mechanism.variances()

    def with_sampler(self: _App, sampler: NoiseSampler) -> _App:
        """A fresh copy (at step 0) whose mechanism uses ``sampler`` as is.

        For testing, e.g. with :class:`~dpcount.privacy.ZeroNoise` the app returns
        the exact non-private answer. The copy carries no privacy guarantee.
        """
        clone = copy.copy(self)
        clone.mechanism = self.mechanism.with_sampler(sampler)
        clone._reset()
        return clone
