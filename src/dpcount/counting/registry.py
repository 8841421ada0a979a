"""The one registry of counting mechanisms: build one by name (the CLI, the advisor,
the apps) or rebuild one by class name (checkpoints)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpcount._validate import check_choice
from dpcount.counting.base import (
    CountingMechanism,
    MemoryEstimate,
    available_memory,
    format_bytes,
    parse_bytes,
)
from dpcount.counting.blt import BLT
from dpcount.counting.dense import DENSE_OPTIMUM_MAX_HORIZON, FactorizationMechanism
from dpcount.counting.honaker import Honaker
from dpcount.counting.input_perturbation import InputPerturbation
from dpcount.counting.normalized_blt import NORMALIZED_BLT_MAX_HORIZON, NormalizedBLT
from dpcount.counting.normalized_sqrt import (
    NORMALIZED_SQRT_BLOCK_MAX_HORIZON,
    NormalizedSqrtFactorization,
)
from dpcount.counting.row_scaled_banded import RowScaledBandedToeplitz
from dpcount.counting.row_scaled_sqrt import ROW_SCALED_MAX_HORIZON, RowScaledSqrtFactorization
from dpcount.counting.smooth_binary import SmoothBinary
from dpcount.counting.sqrt import SqrtFactorization
from dpcount.counting.toeplitz_opt import MAX_OPTIMIZED_HORIZON, ToeplitzFactorization
from dpcount.counting.tree import BinaryTree, KaryTree
from dpcount.privacy.budget import Budget, MissingDeltaError, NoiseKind, accept_participation
from dpcount.privacy.rng import RNGLike

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
    "memory_estimate",
]


@dataclass(frozen=True)
class Entry:
    """One registered counting mechanism.

    Attributes:
        name: the short name (CLI ``--mechanism``, :func:`build_mechanism`), or None
            for a class that is only rebuilt from checkpoints (built from matrices).
        cls: the class.
        factory: how the name builds it, if not the constructor (e.g. BLT with its
            shipped optimized parameters).
        noise: the continuous noise the name defaults to when it is not the class's
            ``default_noise`` (the dense optimum: Gaussian, the loss it minimizes).
        max_horizon: the largest horizon the name builds, None for any (memory
            refusals name only mechanisms that can run at the horizon).
    """

    name: str | None
    cls: type[CountingMechanism]
    factory: Callable[..., CountingMechanism] | None = None
    noise: NoiseKind | None = None
    #: the largest horizon the name builds (its factory's limit), None: any
    max_horizon: int | None = None

    def build(self, **kw: Any) -> CountingMechanism:
        """Build with the common keywords; the tree options ``k``/``subtract`` are
        dropped for mechanisms without them (the binary tree fixes k = 2)."""
        if self.cls is not KaryTree:
            kw.pop("k", None)
            kw.pop("subtract", None)
        if self.cls is not ToeplitzFactorization or kw.get("bands") is None:
            kw.pop("bands", None)  # None: the optimized factorization's full band
        return (self.cls if self.factory is None else self.factory)(**kw)


def _dense_max(**kw: Any) -> CountingMechanism:
    return FactorizationMechanism.optimal(objective="max", **kw)


accept_participation("build_mechanism")  # every counting mechanism calibrates to the schema

#: every counting mechanism dpcount can build by name or rebuild from a checkpoint:
#: the one registry (the CLI, the advisor, the apps and checkpoints read it)
REGISTRY: tuple[Entry, ...] = (
    Entry("binary", BinaryTree),
    Entry("kary", KaryTree),
    Entry("sqrt", SqrtFactorization),
    Entry("honaker", Honaker),
    Entry("smooth-binary", SmoothBinary),
    Entry("input", InputPerturbation),
    Entry("blt", BLT, factory=BLT.optimized),  # shipped mean-optimized parameters
    # mean-optimized coefficients computed on the fly (horizon <= 2^16, ~3 s at 2^16)
    Entry(
        "toeplitz",
        ToeplitzFactorization,
        factory=ToeplitzFactorization.optimized,
        max_horizon=MAX_OPTIMIZED_HORIZON,
    ),
    # exact variances in O(T^2) on first use: horizon <= 2^14
    Entry(
        "normalized-sqrt",
        NormalizedSqrtFactorization,
        max_horizon=NORMALIZED_SQRT_BLOCK_MAX_HORIZON,
    ),
    # column-normalized BLT, shipped mean-optimized parameters: O(buffers) state per coordinate
    Entry(
        "normalized-blt",
        NormalizedBLT,
        factory=NormalizedBLT.optimized,
        max_horizon=NORMALIZED_BLT_MAX_HORIZON,
    ),
    # the dense mean-loss optimum, computed on first use (horizon <= 2048, ~6 s at 1024)
    Entry(
        "dense-optimum",
        FactorizationMechanism,
        factory=FactorizationMechanism.optimal,
        noise=NoiseKind.GAUSSIAN,
        max_horizon=DENSE_OPTIMUM_MAX_HORIZON,
    ),
    # the dense max-loss optimum (certified gap 1e-4): shipped weights for powers of two,
    # optimized on first use otherwise (horizon <= 2048)
    Entry(
        "dense-max-optimum",
        FactorizationMechanism,
        factory=_dense_max,
        noise=NoiseKind.GAUSSIAN,
        max_horizon=DENSE_OPTIMUM_MAX_HORIZON,
    ),
    # row-scaled column-normalized sqrt: exact variances in O(T^2), horizon <= 2^14
    Entry("row-scaled-sqrt", RowScaledSqrtFactorization, max_horizon=ROW_SCALED_MAX_HORIZON),
    # row-scaled banded Toeplitz, b bands for a (k, b) schema: exact sensitivity, T <= 2^14
    Entry(
        "row-scaled-banded",
        RowScaledBandedToeplitz,
        factory=RowScaledBandedToeplitz.optimized,
        max_horizon=ROW_SCALED_MAX_HORIZON,
    ),
)

#: name -> builder taking horizon, the budget keywords (epsilon, delta, noise,
#: calibration, step_sensitivity), rng, and the tree options k and subtract
#: (ignored where meaningless)
MECHANISMS: dict[str, Callable[..., CountingMechanism]] = {
    e.name: e.build for e in REGISTRY if e.name is not None
}

#: class name -> class, for rebuilding a saved mechanism (checkpoints)
CLASSES: dict[str, type[CountingMechanism]] = {e.cls.__name__: e.cls for e in REGISTRY}

#: names whose mechanism accepts integer noise (``supports_discrete_noise``)
DISCRETE_CAPABLE: frozenset[str] = frozenset(
    e.name for e in REGISTRY if e.name is not None and e.cls.supports_discrete_noise
)


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
    e.name
    for e in REGISTRY
    if e.name is not None and e.cls.noise_families() == {NoiseKind.GAUSSIAN}
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
    entry = next(e for e in REGISTRY if e.name == name)
    chosen = str((entry.noise or entry.cls.default_noise).value)
    if chosen == "gaussian" and delta is None:
        if name in GAUSSIAN_ONLY:
            raise MissingDeltaError(
                f"delta must be given for mechanism {name!r}: it is calibrated for Gaussian "
                "noise only, which cannot give pure ε-DP"
            )
        chosen = "laplace"
    return chosen


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
    entry = next(e for e in REGISTRY if e.name == name)
    given = {key: options[key] for key in _MEMORY_OPTIONS if options.get(key) is not None}
    if entry.cls is not KaryTree:
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
