"""The privacy budget as one value, and the closed choices it is made of.

A :class:`Budget` is what a user asks for: ε, an optional δ, the noise kind, the
calibration rule and the bound on one step's (or one cell's) change. It is frozen
and validated on construction, so every mechanism, range mechanism and app takes
the same object and exposes it as ``mech.budget``::

    >>> from dpcount.privacy import Budget
    >>> Budget(epsilon=1.0, delta=1e-6, noise="gaussian")
    Budget(epsilon=1.0, delta=1e-06, noise=gaussian)

The short calls keep working: ``KaryTree(T, epsilon=1.0)`` builds the budget from
its keyword arguments (:meth:`Budget.resolve`). The callables built on the mechanisms
(``build_mechanism``, ``compare``, ``private_counts``, the keyed and training front
doors) take ``budget=`` only: their loose spelling, deprecated in 0.4, was removed in
0.5 and names the replacement (:func:`refuses_loose_budget`).

The closed choices are Enums with one definition each — :class:`NoiseKind`,
:class:`CalibrationRule` and :class:`Neighbouring`. They derive from ``str``, so
``NoiseKind.LAPLACE == "laplace"`` and a plain string is accepted wherever an Enum
is expected.

References:
    The noise kinds and calibration rules a budget names are those of
    :mod:`dpcount.privacy.guarantee`; its References list the works they come from.
    The floating-point caveat of the continuous kinds:

    * I. Mironov. "On significance of the least significant bits for
      differential privacy". ACM CCS 2012. (no link)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ParamSpec, TypedDict, TypeVar

from dpcount._validate import check_integer, check_probability, check_real
from dpcount.privacy.notes import delta_warning

__all__ = [
    "Budget",
    "BudgetFields",
    "CalibrationRule",
    "MissingDeltaError",
    "Neighbouring",
    "NoiseKind",
    "Participation",
    "ParticipationUnsupportedError",
    "accept_participation",
    "refuses_loose_budget",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class MissingDeltaError(ValueError):
    """Gaussian noise (or a Gaussian-only mechanism) was asked for without a δ.

    Attributes:
        parameter: the missing parameter's name (``"delta"``), for front ends that
            spell it differently (the CLI's ``--delta``).
    """

    def __init__(self, message: str, *, parameter: str = "delta") -> None:
        super().__init__(message)
        self.parameter = parameter


class ParticipationUnsupportedError(ValueError):
    """A participation schema with k > 1 was given to a callable that calibrates for
    one participation only (it would understate the privacy loss).

    Attributes:
        owner: the callable's name (e.g. ``"UnboundedCounter"``).
        participation: the schema that was refused.
    """

    def __init__(self, message: str, *, owner: str, participation: Participation) -> None:
        super().__init__(message)
        self.owner = owner
        self.participation = participation


class _Choice(str, Enum):
    """A closed choice spelled as a string (``str(x)`` and f-strings give the value)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def parse(cls, name: str, value: object) -> Any:
        """``value`` as a member of this Enum, or a ValueError naming ``name`` and the choices."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, str):
            raise TypeError(f"{name} must be one of {cls.choices()}, got {value!r}")
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"{name} must be one of {cls.choices()}, got {value!r}") from None

    @classmethod
    def choices(cls) -> tuple[str, ...]:
        return tuple(str(m.value) for m in cls)


class NoiseKind(_Choice):
    """The noise distribution added to the perturbed vector.

    The continuous kinds use floating-point samplers (counting releases are snapped to
    a power-of-two grid and pay a float-safety δ, :mod:`dpcount.privacy.float_safe`,
    Mironov 2012); the discrete kinds are the exact integer
    samplers of Canonne, Kamath & Steinke 2020, for integer perturbed vectors.
    """

    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"
    DISCRETE_LAPLACE = "discrete-laplace"
    DISCRETE_GAUSSIAN = "discrete-gaussian"

    @property
    def is_discrete(self) -> bool:
        return self in (NoiseKind.DISCRETE_LAPLACE, NoiseKind.DISCRETE_GAUSSIAN)

    @property
    def is_gaussian(self) -> bool:
        return self in (NoiseKind.GAUSSIAN, NoiseKind.DISCRETE_GAUSSIAN)


class CalibrationRule(_Choice):
    """The rule that turns (ε, δ, sensitivities) into a noise scale.

    * ``PURE``: Laplace, scale = Δ₁/ε (Dwork, McSherry, Nissim, Smith 2006).
    * ``THEOREM3``: Laplace for (ε, δ)-DP by heterogeneous advanced composition
      (Andersson, Pagh, Steiner, Torkamani, count-on-your-elders, Theorem 3).
    * ``PLD``: Laplace, tight privacy-loss-distribution accounting (dp-accounting).
    * ``ANALYTIC``: Gaussian, Balle & Wang 2018, Theorem 8.
    * ``CLASSIC``: Gaussian, σ = Δ₂√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm A.1).
    * ``FHU``: Gaussian with C_{ε,δ} of Fichtenberger, Henzinger, Upadhyay 2023, eq. (2).
    * ``ZCDP``: discrete Gaussian, ρ-zCDP converted to (ε, δ) (CKS 2020, Thm 14, Cor. 13).
    * ``PAPER``: Gaussian, σ = Δ₂√(2 ln(2/δ))/ε, the tail bound of Dharangutte, Gao,
      Gong, Wang 2024, Thm 3.7 (ε ≤ 1; for comparison with that paper).
    """

    PURE = "pure"
    THEOREM3 = "theorem3"
    PLD = "pld"
    ANALYTIC = "analytic"
    CLASSIC = "classic"
    FHU = "fhu"
    ZCDP = "zcdp"
    PAPER = "paper"


class Neighbouring(_Choice):
    """Which pairs of inputs the guarantee is stated for.

    With a :class:`Participation` schema of k > 1 participations, event level
    becomes user level: two streams differ in at most k steps, any two of them at
    least b steps apart, each by at most the step sensitivity
    (:meth:`Participation.description`).
    """

    #: two streams differ at one step, by at most the step sensitivity (ℓ₁ norm of
    #: the change for Laplace noise, ℓ₂ norm for Gaussian noise)
    EVENT_LEVEL = "event-level"
    #: two histograms differ by at most 1 in one cell (one record added or removed)
    ADD_REMOVE_RECORD = "add-remove-record"

    @property
    def description(self) -> str:
        return _NEIGHBOURING_TEXT[self]


_NEIGHBOURING_TEXT = {
    Neighbouring.EVENT_LEVEL: (
        "event-level: streams differ at one step by at most step_sensitivity "
        "(l1 norm of the change for Laplace noise, l2 norm for Gaussian)"
    ),
    Neighbouring.ADD_REMOVE_RECORD: (
        "add/remove one record (histograms differ by at most 1 in one cell)"
    ),
}


@dataclass(frozen=True)
class Participation:
    """The (k, b)-participation schema: who may contribute to which steps.

    Each user contributes to at most ``max_participations`` = k steps, any two of
    them at least ``min_separation`` = b steps apart (steps i < j with j − i ≥ b;
    b = 1 allows consecutive steps). Neighbouring streams differ in at most k such
    steps, each by at most the step sensitivity (ℓ₁ norm of the change for Laplace
    noise, ℓ₂ norm for Gaussian). k = 1 is single participation, i.e. the
    event-level relation. This is the "(k, b)-participation" of Choquette-Choo,
    Ganesh, McKenna, McMahan, Rush, Thakurta, Xu, "(Amplified) Banded Matrix
    Factorization: A unified approach to private training", NeurIPS 2023,
    https://arxiv.org/abs/2306.08153 (their min-separation b).

    Attributes:
        max_participations: k ≥ 1 (an int).
        min_separation: b ≥ 1 (an int).

    Raises:
        TypeError, ValueError: naming the field, on construction.
    """

    max_participations: int = 1
    min_separation: int = 1

    def __post_init__(self) -> None:
        fix = object.__setattr__
        fix(
            self,
            "max_participations",
            check_integer("max_participations", self.max_participations, ge=1),
        )
        fix(self, "min_separation", check_integer("min_separation", self.min_separation, ge=1))

    @classmethod
    def parse(cls, value: object) -> Participation | None:
        """A schema from a :class:`Participation`, a dict of its fields (the JSON form
        of :meth:`as_dict`) or None (single participation, returned as None)."""
        if value is None or isinstance(value, Participation):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"max_participations", "min_separation"})
            if unknown:
                raise ValueError(
                    f"participation has an unknown field {unknown[0]!r} "
                    "(expected max_participations, min_separation)"
                )
            return cls(**value)
        raise TypeError(
            "participation must be a dpcount.privacy.Participation, a dict with "
            f"max_participations and min_separation, or None, got {value!r}"
        )

    @property
    def is_single(self) -> bool:
        """k = 1: single participation (event level)."""
        return self.max_participations == 1

    def fits(self, horizon: int) -> int:
        """The most participations b apart that fit in ``horizon`` steps: ⌊(T − 1)/b⌋ + 1."""
        return (horizon - 1) // self.min_separation + 1

    def check_horizon(self, horizon: int) -> None:
        """Refuse a schema whose k participations b apart cannot fit in ``horizon`` steps."""
        if self.max_participations > self.fits(horizon):
            raise ValueError(
                f"max_participations={self.max_participations} participations at least "
                f"min_separation={self.min_separation} steps apart do not fit in horizon="
                f"{horizon} steps (at most {self.fits(horizon)} do); lower max_participations"
            )

    def as_dict(self) -> dict[str, int]:
        """``{"max_participations": k, "min_separation": b}`` (JSON-able)."""
        return {
            "max_participations": self.max_participations,
            "min_separation": self.min_separation,
        }

    def description(self) -> str:
        """The neighbouring relation under this schema, in words."""
        if self.is_single:
            return _NEIGHBOURING_TEXT[Neighbouring.EVENT_LEVEL]
        return (
            f"user-level ({self.max_participations}, {self.min_separation})-participation: "
            f"streams differ in at most {self.max_participations} steps, any two at least "
            f"{self.min_separation} steps apart, each by at most step_sensitivity "
            "(l1 norm of the change for Laplace noise, l2 norm for Gaussian)"
        )

    def __repr__(self) -> str:
        return (
            f"Participation(max_participations={self.max_participations}, "
            f"min_separation={self.min_separation})"
        )


class BudgetFields(TypedDict, total=False):
    """The keyword arguments that build a :class:`Budget` (for ``**budget`` signatures)."""

    epsilon: float
    delta: float | None
    noise: NoiseKind | str | None
    calibration: CalibrationRule | str | None
    step_sensitivity: float
    step_l2_sensitivity: float | None
    participation: Participation | dict[str, int] | None


_FIELDS = frozenset(BudgetFields.__annotations__)

#: names of the callables that calibrate to a participation schema (the counting
#: mechanisms register themselves); every other owner refuses a budget with one
_PARTICIPATION_AWARE: set[str] = set()


def accept_participation(owner: str) -> None:
    """Declare that ``owner`` (a class name, as passed to :meth:`Budget.resolve`)
    calibrates to the budget's :class:`Participation` schema. Owners that do not are
    refused a budget with k > 1 — silently calibrating for one participation would
    understate the privacy loss. Called for every counting mechanism class."""
    _PARTICIPATION_AWARE.add(owner)


def refuses_loose_budget(*positional: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate a callable that takes ``budget=Budget(...)`` so that the spelling 0.5
    removed — the budget's fields as keyword arguments, or the fields ``positional``
    (in order) after its positional parameters, as 0.4 accepted them with a
    DeprecationWarning — raises the TypeError of :meth:`Budget.refuse_loose` (naming
    the fields and ``budget=Budget(...)``) instead of Python's bare "unexpected keyword
    argument".
    The signature is unchanged (:func:`inspect.signature` follows ``__wrapped__``).

    Model: scikit-learn's ``_deprecate_positional_args``, one step later.
    """

    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        owner = func.__qualname__.removesuffix(".__init__")
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        taken = sum(p.kind in kinds for p in inspect.signature(func).parameters.values())

        @functools.wraps(func)
        def refusing(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if not _FIELDS.isdisjoint(kwargs):
                Budget.refuse_loose(owner, {k: v for k, v in kwargs.items() if k in _FIELDS})
            extra = args[taken:]
            if extra and len(extra) <= len(positional):
                given = dict(zip(positional, extra, strict=False))
                Budget.refuse_loose(owner, given, by_position=True)
            return func(*args, **kwargs)

        return refusing

    return decorate


def _normal(name: str, value: float) -> float:
    """A positive value that is a normal float: a subnormal one (below 2.2e-308) divides
    to infinity in the calibrations."""
    if value < sys.float_info.min:
        raise ValueError(
            f"{name} must be at least {sys.float_info.min:.17g} (a normal float), got {value!r}"
        )
    return value


@dataclass(frozen=True)
class Budget:
    """A validated privacy budget: what the user asks a mechanism for.

    Attributes:
        epsilon: ε > 0.
        delta: δ ∈ (0, 1), or None for pure ε-DP (Laplace kinds only).
        noise: a :class:`NoiseKind`, or None for the mechanism's default
            (a mechanism resolves it with :meth:`with_default_noise`).
        calibration: a :class:`CalibrationRule`, or None for the noise kind's
            default (see :func:`dpcount.privacy.calibrate`).
        step_sensitivity: the bound Δ on one step's change (ℓ₁ norm for Laplace
            kinds, ℓ₂ norm for Gaussian kinds); for range mechanisms, one cell's.
        step_l2_sensitivity: an ℓ₂ bound on one step's change for Laplace noise
            with a δ on vector steps (defaults to ``step_sensitivity``).
        participation: a :class:`Participation` schema (also accepted as the dict
            ``{"max_participations": k, "min_separation": b}``), or None for single
            participation (event level). A schema with k = 1 is normalised to None
            (the same relation). With k > 1 the guarantee is for neighbours that
            differ in up to k steps b apart (:meth:`Participation.description`).

    Raises:
        TypeError, ValueError: naming the field, on construction.
    """

    epsilon: float
    delta: float | None = None
    noise: NoiseKind | None = None
    calibration: CalibrationRule | None = None
    step_sensitivity: float = 1.0
    step_l2_sensitivity: float | None = None
    participation: Participation | None = None

    def __post_init__(self) -> None:
        fix = object.__setattr__
        schema = Participation.parse(self.participation)
        fix(self, "participation", None if schema is None or schema.is_single else schema)
        fix(self, "epsilon", _normal("epsilon", check_real("epsilon", self.epsilon, gt=0)))
        if self.delta is not None:
            fix(self, "delta", _normal("delta", check_probability("delta", self.delta)))
        if self.noise is not None:
            fix(self, "noise", NoiseKind.parse("noise", self.noise))
        if self.calibration is not None:
            fix(self, "calibration", CalibrationRule.parse("calibration", self.calibration))
        fix(
            self,
            "step_sensitivity",
            _normal(
                "step_sensitivity", check_real("step_sensitivity", self.step_sensitivity, gt=0)
            ),
        )
        if self.step_l2_sensitivity is not None:
            l2 = check_real("step_l2_sensitivity", self.step_l2_sensitivity, gt=0)
            fix(self, "step_l2_sensitivity", _normal("step_l2_sensitivity", l2))
        if self.noise is not None and self.noise.is_gaussian and self.delta is None:
            raise MissingDeltaError(
                f"delta must be given for noise={self.noise.value!r} "
                "(Gaussian noise cannot give pure DP)"
            )

    @classmethod
    def resolve(
        cls, budget: Budget | None, fields: dict[str, Any] | BudgetFields, *, owner: str
    ) -> Budget:
        """The budget from either ``budget=`` or its keyword fields (not both), for the
        callables whose short spelling is their budget's fields (the counting and range
        mechanisms: ``KaryTree(T, epsilon=1.0)``).

        Args:
            budget: a :class:`Budget` or None.
            fields: keyword arguments such as ``epsilon=1.0, delta=1e-6``.
            owner: the callable's name, for error messages.

        Raises:
            TypeError: an unknown keyword, both forms given, neither given, or a
                ``budget`` that is not a :class:`Budget`.
            ValueError: a participation schema with k > 1 for an ``owner`` that does
                not calibrate to one (see :func:`accept_participation`).
        """
        unknown = sorted(set(fields) - _FIELDS)
        if unknown:
            raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
        if budget is None:
            if "epsilon" not in fields:
                raise TypeError(f"{owner}() needs epsilon= (or budget=Budget(epsilon=...))")
            return cls.check(cls(**fields), owner=owner)
        if fields:
            raise TypeError(
                f"{owner}() takes either budget= or its fields "
                f"({', '.join(sorted(fields))}), not both"
            )
        return cls.check(budget, owner=owner)

    @classmethod
    def check(cls, budget: object, *, owner: str) -> Budget:
        """``budget`` as ``owner`` takes it: a :class:`Budget`, with a participation
        schema only if ``owner`` calibrates to one (:func:`accept_participation`).

        Raises:
            TypeError: ``budget`` is not a :class:`Budget`.
            ParticipationUnsupportedError: a schema with k > 1 for an ``owner`` that
                does not calibrate to one.
        """
        if not isinstance(budget, Budget):
            raise TypeError(f"budget must be a dpcount.privacy.Budget, got {type(budget).__name__}")
        if budget.participation is not None and owner not in _PARTICIPATION_AWARE:
            raise ParticipationUnsupportedError(
                f"{owner}() does not calibrate to a participation schema, got "
                f"participation={budget.participation!r}: it assumes single participation "
                "(use a counting mechanism from dpcount.counting, or participation=None)",
                owner=owner,
                participation=budget.participation,
            )
        return budget

    @staticmethod
    def refuse_loose(owner: str, given: Mapping[str, Any], *, by_position: bool = False) -> None:
        """Refuse the budget's fields ``given`` to ``owner`` loose (``epsilon=1.0``) or
        by position where ``budget=Budget(...)`` is the API (0.4 deprecated that
        spelling, 0.5 removed it); nothing when ``given`` is empty.

        Raises:
            TypeError: naming the fields as given and the replacement, with the values.
        """
        if not given:
            return
        if by_position:
            head = f"{owner}() got the budget's fields {', '.join(given)} by position"
        else:
            head = f"{owner}() got an unexpected keyword argument {next(iter(given))!r}"
        fields = ", ".join(f"{name}={value!r}" for name, value in given.items())
        raise TypeError(
            f"{head}: the budget's fields outside budget= were removed in dpcount 0.5 "
            f"(deprecated in 0.4); pass budget=Budget({fields}) instead"
        )

    def replace(self, **changes: Any) -> Budget:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def with_default_noise(self, default: NoiseKind | str) -> Budget:
        """This budget with ``noise`` set to ``default`` if it was None."""
        if self.noise is not None:
            return self
        return self.replace(noise=NoiseKind.parse("noise", default))

    def gaussian_only(self, owner: str) -> Budget:
        """This budget, refused when it names a noise kind other than Gaussian (for the
        factorizations calibrated for Gaussian noise only: BLT, Toeplitz, the
        normalized and row-scaled √A, which check it before computing their structure).

        Raises:
            ValueError: any other noise kind, naming it and ``owner``.
        """
        if self.noise is not None and self.noise != NoiseKind.GAUSSIAN:
            raise ValueError(
                f"noise={self.noise.value!r} is not available for {owner}: it is calibrated "
                "for Gaussian noise only (use noise='gaussian')"
            )
        return self

    @property
    def warning(self) -> str | None:
        """Why this budget is weaker than it looks (δ above 1e-3:
        :func:`dpcount.privacy.notes.delta_warning`), or None."""
        return delta_warning(self.delta)

    @property
    def l2_step(self) -> float:
        """The ℓ₂ bound on one step's change (``step_l2_sensitivity`` or ``step_sensitivity``)."""
        return (
            self.step_sensitivity if self.step_l2_sensitivity is None else self.step_l2_sensitivity
        )

    @property
    def neighbouring(self) -> str:
        """The neighbouring relation in words (event level, or the participation schema)."""
        if self.participation is None:
            return Neighbouring.EVENT_LEVEL.description
        return self.participation.description()

    def as_kwargs(self) -> dict[str, Any]:
        """The fields as plain JSON-able keyword arguments (Enums as strings, the
        participation schema as a dict; omitted when it is single participation, so
        single-participation configs are unchanged)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "participation":
                if value is not None:
                    out[f.name] = value.as_dict()
                continue
            out[f.name] = value.value if isinstance(value, Enum) else value
        return out

    def __repr__(self) -> str:
        parts = [f"epsilon={self.epsilon!r}"]
        if self.delta is not None:
            parts.append(f"delta={self.delta!r}")
        if self.noise is not None:
            parts.append(f"noise={self.noise}")
        if self.calibration is not None:
            parts.append(f"calibration={self.calibration}")
        if self.step_sensitivity != 1.0:
            parts.append(f"step_sensitivity={self.step_sensitivity!r}")
        if self.step_l2_sensitivity is not None:
            parts.append(f"step_l2_sensitivity={self.step_l2_sensitivity!r}")
        if self.participation is not None:
            parts.append(f"participation={self.participation!r}")
        return f"Budget({', '.join(parts)})"
