"""The one registry of counting mechanisms: build one by name (the CLI, the advisor,
the apps) or rebuild one by class name (checkpoints)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from dpcount._validate import check_choice
from dpcount.counting.base import (
    MemoryEstimate,
    available_memory,
    format_bytes,
    parse_bytes,
)
from dpcount.privacy.budget import Budget, MissingDeltaError, NoiseKind, accept_participation
from dpcount.privacy.rng import RNGLike

if TYPE_CHECKING:
    from dpcount.counting.base import CountingMechanism

__all__ = [
    "CLASSES",
    "DISCRETE_CAPABLE",
    "GAUSSIAN_ONLY",
    "MECHANISMS",
    "REGISTRY",
    "Entry",
    "build_mechanism",
    "check_memory",
    "class_noise",
    "default_noise",
    "max_horizon",
    "memory_estimate",
    "objectives",
]

_GAUSSIAN = frozenset({NoiseKind.GAUSSIAN})
_BOTH = frozenset({NoiseKind.LAPLACE, NoiseKind.GAUSSIAN})
_DISCRETE = frozenset({NoiseKind.DISCRETE_LAPLACE, NoiseKind.DISCRETE_GAUSSIAN})


@cache
def _resolve(target: str) -> type[CountingMechanism]:
    """The class ``"module:Class"`` names (``module`` inside :mod:`dpcount.counting`),
    imported on first use."""
    module, _, name = target.partition(":")
    cls: type[CountingMechanism] = getattr(
        importlib.import_module(f"dpcount.counting.{module}"), name
    )
    return cls


@dataclass(frozen=True)
class Entry:
    """One registered counting mechanism.

    The class is named, not imported (``"tree:KaryTree"``): it is imported when a
    mechanism is built or asked for its memory, so a command that runs one tree does
    not import the factorizations (nor scipy.signal). What choosing a mechanism
    needs to know about the class — its noise kinds, its default noise, its largest
    horizon — is stated here; a test checks each statement against the class.

    Attributes:
        name: the short name (CLI ``--mechanism``, :func:`build_mechanism`), or None
            for a class that is only rebuilt from checkpoints (built from matrices).
        target: ``"module:Class"``, the module inside :mod:`dpcount.counting`.
        factory: the class method the name builds with, if not the constructor (e.g.
            ``"optimized"``: BLT with its shipped optimized parameters), and
            ``preset`` the keywords it is called with (``(("objective", "max"),)``).
        noise: the continuous noise the name defaults to when it is not the class's
            ``default_noise`` (the dense optimum: Gaussian, the loss it minimizes).
        max_horizon: the largest horizon the name builds, None for any (memory
            refusals name only mechanisms that can run at the horizon).
        discrete: the class's ``supports_discrete_noise``.
        continuous: the class's ``continuous_noise``.
        default: the class's ``default_noise``.
        objectives: the values of the factory's ``objective`` option (the loss its
            shipped or optimized parameters minimize), the default first; () for a name
            without one. ``build(objective=...)`` passes it on.
    """

    name: str | None
    target: str
    factory: str | None = None
    preset: tuple[tuple[str, Any], ...] = ()
    noise: NoiseKind | None = None
    #: the largest horizon the name builds (its factory's limit), None: any
    max_horizon: int | None = None
    discrete: bool = False
    continuous: frozenset[NoiseKind] = _BOTH
    default: NoiseKind = NoiseKind.LAPLACE
    objectives: tuple[str, ...] = ()

    @property
    def cls(self) -> type[CountingMechanism]:
        """The class (imported on first access)."""
        return _resolve(self.target)

    @property
    def class_name(self) -> str:
        """The class's name, without importing it (checkpoints store it)."""
        return self.target.partition(":")[2]

    @property
    def is_kary(self) -> bool:
        """Whether the name takes the tree options ``k`` and ``subtract``."""
        return self.class_name == "KaryTree"

    def noise_families(self) -> frozenset[NoiseKind]:
        """Every noise kind the class can be calibrated for (its ``noise_families``)."""
        return self.continuous | (_DISCRETE if self.discrete else frozenset())

    def build(self, **kw: Any) -> CountingMechanism:
        """Build with the common keywords; the tree options ``k``/``subtract`` are
        dropped for mechanisms without them (the binary tree fixes k = 2)."""
        if not self.is_kary:
            kw.pop("k", None)
            kw.pop("subtract", None)
        if self.class_name != "ToeplitzFactorization" or kw.get("bands") is None:
            kw.pop("bands", None)  # None: the optimized factorization's full band
        objective = kw.pop("objective", None)
        if objective is not None:
            if not self.objectives:
                with_one = ", ".join(e.name for e in REGISTRY if e.objectives and e.name)
                raise ValueError(
                    f"objective is not an option of mechanism {self.name!r} (only of {with_one})"
                )
            check_choice("objective", objective, self.objectives)
            kw["objective"] = objective
        cls = self.cls
        build = cls if self.factory is None else getattr(cls, self.factory)
        return build(**dict(self.preset), **kw)


def _gaussian_only(name: str | None, target: str, **options: Any) -> Entry:
    """The entry of a factorization calibrated for Gaussian noise only (its
    ``continuous_noise`` and ``default_noise``: its sensitivity is an l2 norm)."""
    return Entry(name, target, continuous=_GAUSSIAN, default=NoiseKind.GAUSSIAN, **options)


#: the ``objective`` values of the shipped/optimized factorizations (mean loss first)
_OBJECTIVES = ("mean", "max")

accept_participation("build_mechanism")  # every counting mechanism calibrates to the schema

#: every counting mechanism dpcount can build by name or rebuild from a checkpoint:
#: the one registry (the CLI, the advisor, the apps and checkpoints read it)
REGISTRY: tuple[Entry, ...] = (
    Entry("binary", "tree:BinaryTree", discrete=True),
    Entry("kary", "tree:KaryTree", discrete=True),
    Entry("sqrt", "factorization.sqrt:SqrtFactorization", default=NoiseKind.GAUSSIAN),
    Entry("honaker", "honaker:Honaker", discrete=True),
    Entry("smooth-binary", "smooth_binary:SmoothBinary", default=NoiseKind.GAUSSIAN),
    Entry("input", "input_perturbation:InputPerturbation"),
    # shipped mean-optimized parameters
    _gaussian_only("blt", "factorization.blt:BLT", factory="optimized", objectives=_OBJECTIVES),
    # mean-optimized coefficients computed on the fly (horizon <= 2^16, ~3 s at 2^16)
    _gaussian_only(
        "toeplitz",
        "factorization.toeplitz:ToeplitzFactorization",
        factory="optimized",
        max_horizon=1 << 16,  # factorization.toeplitz.MAX_OPTIMIZED_HORIZON
        objectives=_OBJECTIVES,
    ),
    # exact variances in O(T^2) on first use: horizon <= 2^14
    _gaussian_only(
        "normalized-sqrt",
        "factorization.normalized_sqrt:NormalizedSqrtFactorization",
        max_horizon=1 << 22,  # normalized_sqrt.NORMALIZED_SQRT_BLOCK_MAX_HORIZON
    ),
    # column-normalized BLT, shipped mean-optimized parameters: O(buffers) state per coordinate
    _gaussian_only(
        "normalized-blt",
        "factorization.normalized_blt:NormalizedBLT",
        factory="optimized",
        max_horizon=1 << 24,  # normalized_blt.NORMALIZED_BLT_MAX_HORIZON
        objectives=_OBJECTIVES,
    ),
    # row-scaled, column-normalized BLT, shipped mean-optimized parameters: O(buffers) state
    _gaussian_only(
        "row-scaled-blt",
        "factorization.row_scaled_blt:RowScaledBLT",
        factory="optimized",
        max_horizon=1 << 24,  # row_scaled_blt.ROW_SCALED_BLT_MAX_HORIZON
        objectives=_OBJECTIVES,
    ),
    # the dense mean-loss optimum, computed on first use (horizon <= 2048, ~6 s at 1024)
    Entry(
        "dense-optimum",
        "factorization.dense:FactorizationMechanism",
        factory="optimal",
        noise=NoiseKind.GAUSSIAN,
        max_horizon=2048,  # dense.DENSE_OPTIMUM_MAX_HORIZON
    ),
    # the dense max-loss optimum (certified gap 1e-4): shipped weights for powers of two,
    # optimized on first use otherwise (horizon <= 2048)
    Entry(
        "dense-max-optimum",
        "factorization.dense:FactorizationMechanism",
        factory="optimal",
        preset=(("objective", "max"),),
        noise=NoiseKind.GAUSSIAN,
        max_horizon=2048,  # dense.DENSE_OPTIMUM_MAX_HORIZON
    ),
    # row-scaled column-normalized sqrt: exact variances in O(T^2), horizon <= 2^14
    _gaussian_only(
        "row-scaled-sqrt",
        "factorization.row_scaled_sqrt:RowScaledSqrtFactorization",
        max_horizon=16384,  # row_scaled_sqrt.ROW_SCALED_MAX_HORIZON
    ),
    # row-scaled banded Toeplitz, b bands for a (k, b) schema: exact sensitivity, T <= 2^14
    _gaussian_only(
        "row-scaled-banded",
        "factorization.row_scaled_banded:RowScaledBandedToeplitz",
        factory="optimized",
        max_horizon=16384,  # row_scaled_sqrt.ROW_SCALED_MAX_HORIZON
    ),
    # the horizon-free square root: no name (UnboundedCounter's inner "horizon-free-sqrt"),
    # rebuilt from checkpoints by class name
    _gaussian_only(None, "factorization.horizon_free:HorizonFreeSqrt"),
    # the horizon-free BLT: no name (UnboundedCounter's inner "horizon-free-blt")
    _gaussian_only(None, "factorization.horizon_free_blt:HorizonFreeBLT"),
)

#: name -> its entry
_BY_NAME: dict[str, Entry] = {e.name: e for e in REGISTRY if e.name is not None}


class _Classes(Mapping[str, "type[CountingMechanism]"]):
    """Class name -> class, each imported when it is looked up."""

    def __init__(self) -> None:
        self._targets = {e.class_name: e.target for e in REGISTRY}

    def __getitem__(self, key: str) -> type[CountingMechanism]:
        return _resolve(self._targets[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def __repr__(self) -> str:
        return f"CLASSES({sorted(self._targets)})"


#: name -> builder taking horizon, the budget keywords (epsilon, delta, noise,
#: calibration, step_sensitivity), rng, and the tree options k and subtract
#: (ignored where meaningless)
MECHANISMS: dict[str, Callable[..., CountingMechanism]] = {
    e.name: e.build for e in REGISTRY if e.name is not None
}

#: class name -> class, for rebuilding a saved mechanism (checkpoints); a class is
#: imported when it is looked up
CLASSES: Mapping[str, type[CountingMechanism]] = _Classes()

#: names whose mechanism accepts integer noise (``supports_discrete_noise``)
DISCRETE_CAPABLE: frozenset[str] = frozenset(name for name, e in _BY_NAME.items() if e.discrete)


def default_noise(name: str, delta: float | None, step_sensitivity: float = 1.0) -> str | None:
    """The safe default noise for mechanism ``name``, or None to keep the class default.

    Integer noise (``"discrete-laplace"`` without delta, ``"discrete-gaussian"`` with
    one) when the mechanism accepts it and ``step_sensitivity`` is a whole number:
    its release is computed from the noisy integer vector only, so floating-point
    rounding cannot leak the data (Mironov 2012). It then needs whole-number
    steps (fractional data raise a ValueError naming ``x``; pass ``noise=`` to use
    continuous noise). Other mechanisms keep their continuous default (None).
    """
    check_choice("mechanism", name, MECHANISMS)
    whole = isinstance(step_sensitivity, (int, float)) and float(step_sensitivity).is_integer()
    if name not in DISCRETE_CAPABLE or not whole:
        return None
    return "discrete-laplace" if delta is None else "discrete-gaussian"


#: names calibrated for Gaussian noise only (they refuse every other noise kind), as
#: their classes declare (``noise_families``)
GAUSSIAN_ONLY: frozenset[str] = frozenset(
    name for name, e in _BY_NAME.items() if e.noise_families() == _GAUSSIAN
)


def class_noise(name: str, delta: float | None) -> str:
    """The continuous noise mechanism ``name`` uses when none is named: its class's
    ``default_noise`` (``"gaussian"`` for BLT, Toeplitz, the square root and the smooth
    binary mechanism; ``"laplace"`` for the others), except ``"laplace"`` without
    ``delta`` (pure ε-DP) for the mechanisms that take it.

    Raises:
        ValueError: an unknown name, or no ``delta`` for a Gaussian-only mechanism
            (BLT, Toeplitz), naming ``delta``.
    """
    check_choice("mechanism", name, MECHANISMS)
    entry = _BY_NAME[name]
    chosen = str((entry.noise or entry.default).value)
    if chosen == "gaussian" and delta is None:
        if name in GAUSSIAN_ONLY:
            raise MissingDeltaError(
                f"delta must be given for mechanism {name!r}: it is calibrated for Gaussian "
                "noise only, which cannot give pure ε-DP"
            )
        chosen = "laplace"
    return chosen


def objectives(name: str) -> tuple[str, ...]:
    """The values mechanism ``name``'s ``objective`` option takes, the default first
    (``("mean", "max")``: the loss its parameters minimize), or () without the option."""
    check_choice("mechanism", name, MECHANISMS)
    return _BY_NAME[name].objectives


def max_horizon(name: str) -> int | None:
    """The largest horizon mechanism ``name`` builds (None: any), without importing it."""
    check_choice("mechanism", name, MECHANISMS)
    return _BY_NAME[name].max_horizon


#: the budget's fields, accepted loose by :func:`build_mechanism` for one more release
_BUDGET_FIELDS = (
    "epsilon",
    "delta",
    "noise",
    "calibration",
    "step_sensitivity",
    "step_l2_sensitivity",
    "participation",
)

#: the structure options each name's memory estimate reads (defaults of its builder)
_MEMORY_OPTIONS = ("k", "subtract", "bands", "buffers")


def memory_estimate(
    name: str, horizon: int, dim: int | None = None, **options: Any
) -> MemoryEstimate:
    """Bytes mechanism ``name`` needs at ``horizon`` for steps of length ``dim`` (None:
    scalar), as its class declares (:meth:`CountingMechanism.memory_estimate`); nothing
    is allocated. ``options``: ``k``/``subtract`` (kary; default 19, True), ``bands``
    (toeplitz), ``buffers`` (blt); the others' are ignored."""
    check_choice("mechanism", name, MECHANISMS)
    entry = _BY_NAME[name]
    given = {key: options[key] for key in _MEMORY_OPTIONS if options.get(key) is not None}
    if not entry.is_kary:
        given.pop("k", None)
        given.pop("subtract", None)
    return entry.cls.memory_estimate(horizon, dim, **given)


def check_memory(
    name: str, horizon: int, *, dim: int | None = None, memory: Any = None, **options: Any
) -> MemoryEstimate:
    """Refuse, before anything is allocated, a mechanism whose structure plus one stream
    would exceed ``memory`` (bytes or a size like ``"2GiB"``; None: the machine's
    available memory). Returns the estimate.

    Raises:
        ValueError: naming the horizon, the need, the limit and the mechanisms that
            would fit (with their stream state).
    """
    estimate = memory_estimate(name, horizon, dim, **options)
    limit = available_memory() if memory is None else parse_bytes("memory", memory)
    if limit is None or estimate.total <= limit:
        return estimate
    fits = []
    for entry in REGISTRY:
        other = entry.name
        if other is None or (entry.max_horizon is not None and horizon > entry.max_horizon):
            continue
        other_estimate = memory_estimate(other, horizon, dim)
        if other_estimate.total <= limit:
            fits.append((other_estimate.total, f"{other} ({format_bytes(other_estimate.total)})"))
    source = "the machine's available memory" if memory is None else "the memory limit"
    steps = "scalar steps" if dim is None else f"steps of length {dim}"
    raise ValueError(
        f"mechanism {name!r} at horizon {horizon} with {steps} needs about "
        f"{format_bytes(estimate.total)} (structure {format_bytes(estimate.structure)}, "
        f"stream state {format_bytes(estimate.stream)}), above {source} "
        f"({format_bytes(limit)}); "
        + (
            "mechanisms that fit at this horizon: " + ", ".join(label for _, label in sorted(fits))
            if fits
            else "no mechanism fits at this horizon"
        )
    )


def build_mechanism(
    name: str,
    *,
    horizon: int,
    budget: Budget | None = None,
    rng: RNGLike = None,
    **kwargs: Any,
) -> CountingMechanism:
    """``build_mechanism("kary", horizon=T, budget=Budget(epsilon=1.0), k=19, ...)``.

    Without a noise kind in the budget the noise is :func:`default_noise`: integer
    noise for the trees and Honaker (whole-number data and sensitivity), else
    :func:`class_noise` (the class default; Gaussian for BLT and Toeplitz, which
    then need δ). ``bands`` (an int) selects the banded optimized Toeplitz
    factorization and is ignored by the other mechanisms, like ``k``/``subtract``.
    Before anything is built, :func:`check_memory` refuses a mechanism whose structure
    and stream (steps of length ``dim``, None: scalar) would exceed ``memory`` (bytes
    or ``"2GiB"``; None: the available memory); ``memory`` also limits its streams.

    Args:
        name: a registry name (:data:`MECHANISMS`).
        horizon: T ≥ 1.
        budget: the :class:`~dpcount.privacy.Budget`.
        rng: None (OS-entropy CSPRNG), or a seed/Generator (research only).
        **kwargs: structure options (``k``, ``subtract``, ``bands``, ...); the
            budget's fields given loose (``epsilon=``, ``delta=``, ``noise=``, ...)
            instead of ``budget=`` are deprecated (DeprecationWarning).

    Raises:
        ValueError: an unknown name, or no noise and no δ for a mechanism whose
            default noise is Gaussian (:class:`~dpcount.privacy.MissingDeltaError`,
            naming ``delta``); the mechanism's own errors otherwise.
        TypeError: ``budget`` and its fields both given, or neither.
    """
    check_choice("mechanism", name, MECHANISMS)
    dim, memory = kwargs.pop("dim", None), kwargs.pop("memory", None)
    options = {key: kwargs.get(key) for key in _MEMORY_OPTIONS}
    check_memory(name, horizon, dim=dim, memory=memory, **options)
    fields = {k: kwargs.pop(k) for k in _BUDGET_FIELDS if k in kwargs}
    if fields.get("noise", "") is None:
        del fields["noise"]  # noise=None: the default, as before
    resolved = Budget.resolve(budget, fields, owner="build_mechanism", deprecated=True)
    if resolved.noise is None:
        chosen = default_noise(name, resolved.delta, resolved.step_sensitivity)
        resolved = resolved.replace(
            noise=class_noise(name, resolved.delta) if chosen is None else chosen
        )
    mechanism = MECHANISMS[name](horizon=horizon, budget=resolved, rng=rng, **kwargs)
    if memory is not None:
        mechanism.memory_limit = parse_bytes("memory", memory)
    return mechanism
