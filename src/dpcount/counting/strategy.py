"""What a counting mechanism is and what it can do, declared once.

A :class:`Strategy` is what every counting mechanism implements (release a horizon's
prefix sums, stream them, state its exact error and its memory). Its
:class:`Capabilities` are what choosing one needs to know *before* building it: the
noise kinds it is calibrated for, whether its release is an integer combination of
integer noise, the largest horizon its builder reaches, its options (each an
:class:`Option` with type, bounds and default), its memory, and whether it
calibrates to a (k, b)-participation schema. They are declared once per registered
mechanism in :data:`dpcount.counting.registry.REGISTRY` (import-free: choosing does
not import the factorizations) and read by the registry's builders, checkpoints,
:func:`~dpcount.analysis.compare`, keyed counting, the CLI's choices and the test
suites. A request is asked like dp_accounting's ``supports(event)``:
:meth:`Capabilities.supports` answers from the declaration, never by building a
mechanism and catching its error.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from dpcount.privacy.budget import NoiseKind

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from dpcount.counting.base import CountingStream, MemoryEstimate
    from dpcount.privacy.budget import Budget, Participation
    from dpcount.privacy.guarantee import PrivacyGuarantee

__all__ = [
    "CONTINUOUS",
    "DISCRETE",
    "GAUSSIAN",
    "Capabilities",
    "Option",
    "OptionType",
    "Plan",
    "Planned",
    "Strategy",
]

#: the continuous noise kinds (sensitivity in ℓ₁ for Laplace, ℓ₂ for Gaussian)
CONTINUOUS: frozenset[NoiseKind] = frozenset({NoiseKind.LAPLACE, NoiseKind.GAUSSIAN})
#: the integer noise kinds (Canonne, Kamath & Steinke 2020)
DISCRETE: frozenset[NoiseKind] = frozenset(
    {NoiseKind.DISCRETE_LAPLACE, NoiseKind.DISCRETE_GAUSSIAN}
)
#: Gaussian noise only (a factorization whose sensitivity is an ℓ₂ column norm)
GAUSSIAN: frozenset[NoiseKind] = frozenset({NoiseKind.GAUSSIAN})

#: the largest magnitude of an int option (int64)
_MAX_INT = 1 << 63
#: the longest str option
_MAX_STR = 64


class OptionType(enum.Enum):
    """The type of an :class:`Option`'s value."""

    INT = "int"
    BOOL = "bool"
    FLOAT = "float"
    STR = "str"
    #: a list of finite floats (BLT decays and scales, Toeplitz coefficients, log-weights)
    FLOATS = "floats"
    #: a 2-D float64 array (a dense factorization's L and R)
    MATRIX = "matrix"


@dataclass(frozen=True)
class Option:
    """One option of a mechanism: its name, type, bounds and default.

    Attributes:
        name: the keyword (``"k"``, ``"objective"``, ``"buffer_decay"``).
        type: its :class:`OptionType`.
        default: the value used when it is not given (None: the builder decides).
        low, high: inclusive bounds of an INT/FLOAT value; for FLOATS, the shortest
            and longest list (``high`` None: unbounded).
        choices: the values a STR option takes, its default first.
        memory: whether the class's ``memory_estimate`` reads it.
    """

    name: str
    type: OptionType
    default: Any = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    memory: bool = False

    def describe(self) -> str:
        """The accepted values in words (for messages)."""
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.type is OptionType.FLOATS:
            return f"a list of {int(self.low or 1)} to {self.high} finite floats"
        if self.type is OptionType.MATRIX:
            return "a 2-D float64 array"
        bounds = [f">= {self.low:g}" if self.low is not None else ""]
        bounds.append(f"<= {self.high:g}" if self.high is not None else "")
        return f"{'an' if self.type is OptionType.INT else 'a'} {self.type.value} " + " and ".join(
            b for b in bounds if b
        )

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is of this option's type and within its bounds (None:
        the default)."""
        if value is None:
            return True
        check = _CHECKS[self.type]
        if not check(value, self):
            return False
        return not self.choices or value in self.choices

    def check(self, value: Any, owner: str) -> Any:
        """``value``, or a ValueError naming ``owner`` and the option (TypeError for a
        wrong type)."""
        if self.accepts(value):
            return value
        raise ValueError(f"{self.name} of {owner} must be {self.describe()}, got {value!r:.60}")


def _in_bounds(value: float, option: Option) -> bool:
    low = -math.inf if option.low is None else option.low
    high = math.inf if option.high is None else option.high
    return low <= value <= high


def _check_int(value: Any, option: Option) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and -_MAX_INT <= value < _MAX_INT
        and _in_bounds(value, option)
    )


def _check_float(value: Any, option: Option) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and _in_bounds(value, option)
    )


def _check_floats(value: Any, option: Option) -> bool:
    shortest = 1 if option.low is None else int(option.low)
    longest = math.inf if option.high is None else option.high
    return (
        isinstance(value, list)
        and shortest <= len(value) <= longest
        and all(isinstance(v, float) and math.isfinite(v) for v in value)
    )


def _check_matrix(value: Any, option: Option) -> bool:
    import numpy as np

    return isinstance(value, np.ndarray) and value.dtype == np.float64 and value.ndim == 2


_CHECKS = {
    OptionType.INT: _check_int,
    OptionType.BOOL: lambda value, option: isinstance(value, bool),
    OptionType.FLOAT: _check_float,
    OptionType.STR: lambda value, option: isinstance(value, str) and len(value) <= _MAX_STR,
    OptionType.FLOATS: _check_floats,
    OptionType.MATRIX: _check_matrix,
}


class Planned(enum.Enum):
    """How the planner (:func:`~dpcount.analysis.compare`) computes a mechanism's row."""

    #: built with the registry's builder, its exact error read from it
    BUILT = "built"
    #: the trees: the best branching factor for the metric and schema
    #: (:func:`~dpcount.analysis.best_k`), with and without subtraction
    TREE_SEARCH = "tree-search"
    #: the dense optima: their shipped (or cheaply computed) losses, nothing built
    LOSSES = "losses"


@dataclass(frozen=True)
class Plan:
    """How the planner lists a mechanism (the ``plan`` of its :class:`Capabilities`).

    Attributes:
        planned: how its row is computed.
        up_to: the largest horizon it is listed at (its exact error is computed on the
            fly, about a second there); None: its ``max_horizon``.
        single: listed only without a participation schema (its loss is a
            single-participation statement, or it is not the one to plan a schema with).
        banded: listed only under a schema with separation b < T, banded to b (label
            ``"<name>-b<b>"``); ``also_banded``: listed as usual and, under such a
            schema, also built with ``bands=b``.
        calibrations: the Gaussian calibration rules each listed for ε < 1 (labels
            ``"<name> (<rule>)"``; the first alone otherwise).
        max_preset: by a max metric, also listed with its ``objective="max"`` preset
            where that preset's shipped parameters differ (label ``"<name> (max)"``).
    """

    planned: Planned = Planned.BUILT
    up_to: int | None = None
    single: bool = False
    banded: bool = False
    also_banded: bool = False
    calibrations: tuple[str, ...] = ()
    max_preset: bool = False


@dataclass(frozen=True)
class Capabilities:
    """What a registered mechanism can do, declared without importing it.

    Attributes:
        continuous: the continuous noise kinds it is calibrated for.
        discrete: whether it accepts integer noise (its perturbed vector is an integer
            linear function of the steps, so integer noise is exactly private for
            integer data; Mironov 2012).
        default_noise: the continuous noise used when none is named.
        integer_release: whether its release is an integer combination of the noisy
            vector (integer data plus integer noise give integer outputs).
        max_horizon: the largest horizon its builder reaches (None: any).
        options: the options its builder takes (``k``, ``bands``, ``objective``...).
        saved: the constructor arguments a checkpoint may hold beyond the scalar ones
            (lists and matrices, with their bounds).
        participation: whether it calibrates to a (k, b)-participation schema (the
            horizon-free mechanisms are single-participation only).
        plan: how the planner lists it (None: not listed).
    """

    continuous: frozenset[NoiseKind] = CONTINUOUS
    discrete: bool = False
    default_noise: NoiseKind = NoiseKind.LAPLACE
    integer_release: bool = False
    max_horizon: int | None = None
    options: tuple[Option, ...] = ()
    saved: tuple[Option, ...] = ()
    participation: bool = True
    plan: Plan | None = Plan()

    #: the options a front end may pass to every mechanism: ignored where not declared
    SHARED: ClassVar[frozenset[str]] = frozenset({"k", "subtract", "bands"})

    @property
    def noise(self) -> frozenset[NoiseKind]:
        """Every noise kind it can be calibrated for."""
        return self.continuous | (DISCRETE if self.discrete else frozenset())

    @property
    def gaussian_only(self) -> bool:
        """Whether Gaussian noise is the only kind (it then needs δ)."""
        return self.noise == GAUSSIAN

    def option(self, name: str) -> Option | None:
        """The declared option ``name`` (None: not an option of this mechanism)."""
        return next((o for o in self.options if o.name == name), None)

    def saved_option(self, name: str) -> Option | None:
        """The declared checkpoint argument ``name`` (a list or matrix), or None."""
        return next((o for o in self.saved if o.name == name), None)

    def memory_options(self) -> Iterator[Option]:
        """The options its ``memory_estimate`` reads."""
        return (o for o in self.options if o.memory)

    def unsupported(
        self,
        *,
        noise: NoiseKind | str | None = None,
        delta: float | None = None,
        horizon: int | None = None,
        participation: Participation | None = None,
    ) -> str | None:
        """Why a request is out of this mechanism's reach, or None when it is in it:
        the noise kind (None: its default), pure ε-DP for a Gaussian-only mechanism,
        a horizon beyond its largest, a schema with k > 1 for a single-participation
        one. Read from the declaration; nothing is built."""
        kind = None if noise is None else NoiseKind(noise)
        if kind is not None and kind not in self.noise:
            kinds = ", ".join(sorted(k.value for k in self.noise))
            return f"noise {kind.value!r} is not one of its kinds ({kinds})"
        gaussian = (kind or self.default_noise).value.endswith("gaussian")
        if delta is None and gaussian and (kind is not None or self.gaussian_only):
            return "Gaussian noise needs delta (it cannot give pure ε-DP)"
        if horizon is not None and self.max_horizon is not None and horizon > self.max_horizon:
            return f"horizon {horizon} is above its largest, {self.max_horizon}"
        if participation is not None and not self.participation:
            return "it is calibrated for single participation only"
        return None

    def supports(self, budget: Budget, horizon: int | None = None) -> bool:
        """Whether a mechanism with these capabilities can be built for ``budget``
        (its noise kind, δ and schema) at ``horizon``, as dp_accounting's
        ``supports(event)``: from the declaration, nothing is built."""
        return (
            self.unsupported(
                noise=budget.noise,
                delta=budget.delta,
                horizon=horizon,
                participation=budget.participation,
            )
            is None
        )


@runtime_checkable
class Strategy(Protocol):
    """What every counting mechanism implements
    (:class:`~dpcount.counting.CountingMechanism` is the base of all of them).

    A strategy releases the T prefix sums of its steps with calibrated noise, in one
    batch or as a stream, and states its exact error: ``variances()`` are the
    per-step variances of the released error (data-independent), ``mse()`` their
    mean, ``max_variance()`` their largest. ``config()`` names the class and its
    constructor arguments (checkpoints rebuild it from them), and the class declares
    the bytes it needs (``memory_estimate``) before anything is allocated.
    """

    name: str
    horizon: int

    @property
    def privacy(self) -> PrivacyGuarantee | None:
        """The guarantee of one release (None for a zero/constant-noise test copy)."""
        ...

    def release(self, x: Any) -> NDArray[Any]:
        """The noisy prefix sums of ``x`` (at most ``horizon`` steps)."""
        ...

    def stream(self) -> CountingStream:
        """A stream releasing one prefix sum per step."""
        ...

    def variances(self) -> NDArray[np.float64]:
        """The exact per-step variance of the released error."""
        ...

    def mse(self) -> float:
        """The mean of :meth:`variances`."""
        ...

    def max_variance(self) -> float:
        """The largest of :meth:`variances`."""
        ...

    def config(self) -> dict[str, Any]:
        """The class name and constructor arguments (checkpoints rebuild from them)."""
        ...

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """The bytes it needs at ``horizon`` for steps of length ``dim``."""
        ...
