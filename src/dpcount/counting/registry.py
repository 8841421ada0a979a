"""The one registry of counting mechanisms: build one by name (the CLI, the advisor,
the apps) or rebuild one by class name (checkpoints).

Each :class:`Entry` declares its mechanism's
:class:`~dpcount.counting.strategy.Capabilities` once — noise kinds, integer release,
largest horizon, options, the list arguments a checkpoint may hold, participation
support, how the planner lists it — and everything reads them: the builders here,
:mod:`~dpcount.counting.checkpoint`, :func:`~dpcount.analysis.compare`, keyed counting,
the CLI's choices (:func:`names`) and the test suites (tests/mechanisms.py discovers
every registered class). Adding a mechanism: its module, one entry here, its data
(shipped tables), and one test file of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from dpcount._validate import check_choice, check_integer
from dpcount.counting.base import (
    MemoryEstimate,
    available_memory,
    format_bytes,
    parse_bytes,
)
from dpcount.counting.factorization._precision import SCALED_BLT_LONG_HORIZON
from dpcount.counting.strategy import (
    GAUSSIAN,
    Capabilities,
    Option,
    OptionType,
    Plan,
    Planned,
)
from dpcount.privacy.budget import (
    Budget,
    MissingDeltaError,
    NoiseKind,
    accept_participation,
    refuses_loose_budget,
)
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
    "capabilities",
    "check_memory",
    "class_capabilities",
    "class_noise",
    "default_noise",
    "max_horizon",
    "memory_estimate",
    "names",
    "objectives",
]


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
    """One registered counting mechanism: its name, its class and its
    :class:`~dpcount.counting.strategy.Capabilities`.

    The class is named, not imported (``"tree:KaryTree"``): it is imported when a
    mechanism is built or asked for its memory, so a command that runs one tree does
    not import the factorizations (nor scipy.signal). What choosing a mechanism
    needs to know about it is its ``capabilities``, declared here once; a test checks
    them against the class (its ``noise_families``, its factory's limit).

    Attributes:
        name: the short name (CLI ``--mechanism``, :func:`build_mechanism`), or None
            for a class that is only rebuilt from checkpoints (built from matrices).
        target: ``"module:Class"``, the module inside :mod:`dpcount.counting`.
        capabilities: noise kinds, integer release, largest horizon, options,
            checkpoint arguments, participation support.
        factory: the class method the name builds with, if not the constructor (e.g.
            ``"optimized"``: BLT with its shipped optimized parameters), and
            ``preset`` the keywords it is called with (``(("objective", "max"),)``).
    """

    name: str | None
    target: str
    capabilities: Capabilities = field(default_factory=Capabilities)
    factory: str | None = None
    preset: tuple[tuple[str, Any], ...] = ()

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
        return self.capabilities.option("k") is not None

    @property
    def objectives(self) -> tuple[str, ...]:
        """The values of its ``objective`` option, the default first; () without one."""
        option = self.capabilities.option("objective")
        return () if option is None else option.choices

    def noise_families(self) -> frozenset[NoiseKind]:
        """Every noise kind it can be calibrated for (the class's ``noise_families``)."""
        return self.capabilities.noise

    def memory(self, horizon: int, dim: int | None, options: Mapping[str, Any]) -> MemoryEstimate:
        """Bytes it needs at ``horizon`` for steps of length ``dim`` (None: scalar),
        from the declared memory options given (not None) in ``options``; nothing is
        allocated (the class's :meth:`~CountingMechanism.memory_estimate`)."""
        given = {
            o.name: options[o.name]
            for o in self.capabilities.memory_options()
            if options.get(o.name) is not None
        }
        return self.cls.memory_estimate(horizon, dim, **given)

    def _options(self, kw: dict[str, Any]) -> dict[str, Any]:
        """``kw`` without the shared options it does not declare (the binary tree
        fixes k = 2) nor its declared options given as None with no default; its
        ``objective`` checked against the declared choices."""
        caps = self.capabilities
        for key in Capabilities.SHARED:
            option = caps.option(key)
            if option is None or (option.default is None and kw.get(key) is None):
                kw.pop(key, None)
        objective = kw.pop("objective", None)
        if objective is not None:
            if not self.objectives:
                with_one = ", ".join(e.name for e in REGISTRY if e.objectives and e.name)
                raise ValueError(
                    f"objective is not an option of mechanism {self.name!r} (only of {with_one})"
                )
            check_choice("objective", objective, self.objectives)
            kw["objective"] = objective
        return kw

    def build(self, **kw: Any) -> CountingMechanism:
        """Build with the common keywords; the tree options ``k``/``subtract`` and
        ``bands`` are dropped for mechanisms without them."""
        kw = self._options(kw)
        cls = self.cls
        build = cls if self.factory is None else getattr(cls, self.factory)
        return build(**dict(self.preset), **kw)


#: the ``objective`` option of the shipped/optimized factorizations (mean loss first)
_OBJECTIVE = Option("objective", OptionType.STR, default="mean", choices=("mean", "max"))
#: the trees' options (read by their memory estimate)
_TREE = (
    Option("k", OptionType.INT, default=19, low=2, memory=True),
    Option("subtract", OptionType.BOOL, default=True, memory=True),
)
#: a BLT's buffer count (None: the best shipped count)
_BUFFERS = Option("buffers", OptionType.INT, low=1, memory=True)
#: a BLT's parameters, as a checkpoint holds them
_BLT_SAVED = (
    Option("buffer_decay", OptionType.FLOATS, low=1, high=64),
    Option("output_scale", OptionType.FLOATS, low=1, high=64),
)
#: the row-scaled mechanisms' row log-weights, as a checkpoint holds them
_LOG_WEIGHTS = Option("log_weights", OptionType.FLOATS, low=1, high=32)
#: a dense factorization's matrices
_MATRICES = (Option("L", OptionType.MATRIX), Option("R", OptionType.MATRIX))
#: integer noise, integer release (the trees) / integer noise only (Honaker)
_DISCRETE = Capabilities(discrete=True)


def _gaussian(**declared: Any) -> Capabilities:
    """The capabilities of a factorization calibrated for Gaussian noise only (its
    sensitivity is an ℓ₂ column norm), with the ``declared`` ones."""
    return Capabilities(continuous=GAUSSIAN, default_noise=NoiseKind.GAUSSIAN, **declared)


#: the dense optima: any continuous noise, Gaussian by default (the loss they minimize);
#: planned from their shipped losses, single participation
_DENSE = Capabilities(
    default_noise=NoiseKind.GAUSSIAN,
    max_horizon=2048,  # dense.DENSE_OPTIMUM_MAX_HORIZON
    saved=_MATRICES,
    plan=Plan(Planned.LOSSES, single=True),
)
#: the largest horizon the planner lists the row-scaled square root and banded Toeplitz at
#: (exact O(T^2) variances on the fly: about 1 s at 4096, 50 s at their limit 16384)
_ROW_SCALED_PLAN_LIMIT = 4096


def _blt_preset(name: str, target: str, max_horizon: int, *saved: Option) -> Entry:
    """A scaled BLT preset (:mod:`~dpcount.counting.factorization.scaled`): its shipped
    parameters for the ``objective`` (mean-optimized by default), horizon ≤
    ``max_horizon`` (the float model's, ``blt.FLOAT_MODEL_HORIZONS``;
    ``NORMALIZED_BLT_MAX_HORIZON``, ``ROW_SCALED_BLT_MAX_HORIZON``), the BLT parameters
    and ``saved`` in checkpoints; planned up to its largest horizon."""
    return Entry(
        name,
        target,
        _gaussian(
            max_horizon=max_horizon,
            options=(_OBJECTIVE,),
            saved=(*_BLT_SAVED, *saved),
            plan=Plan(max_preset=True),
        ),
        factory="optimized",
    )


accept_participation("build_mechanism")  # every counting mechanism calibrates to the schema

#: every counting mechanism dpcount can build by name or rebuild from a checkpoint:
#: the one registry (the CLI, the advisor, the apps and checkpoints read it)
REGISTRY: tuple[Entry, ...] = (
    Entry("binary", "tree:BinaryTree", Capabilities(discrete=True, integer_release=True)),
    Entry(
        "kary",
        "tree:KaryTree",
        Capabilities(
            discrete=True,
            integer_release=True,
            options=_TREE,
            plan=Plan(Planned.TREE_SEARCH),
        ),
    ),
    Entry(
        "sqrt",
        "factorization.sqrt:SqrtFactorization",
        Capabilities(
            default_noise=NoiseKind.GAUSSIAN,
            plan=Plan(calibrations=("analytic", "fhu", "classic")),
        ),
    ),
    Entry("honaker", "honaker:Honaker", _DISCRETE),
    Entry(
        "smooth-binary",
        "smooth_binary:SmoothBinary",
        Capabilities(default_noise=NoiseKind.GAUSSIAN),
    ),
    Entry(
        "input",
        "input_perturbation:InputPerturbation",
        Capabilities(max_horizon=1 << 20),  # input_perturbation.INPUT_MAX_HORIZON (float model)
    ),
    # shipped mean-optimized parameters
    Entry(
        "blt",
        "factorization.blt:BLT",
        _gaussian(options=(_OBJECTIVE, _BUFFERS), saved=_BLT_SAVED, plan=Plan(max_preset=True)),
        factory="optimized",
    ),
    # mean-optimized coefficients computed on the fly (horizon <= 2^16, ~3 s at 2^16)
    Entry(
        "toeplitz",
        "factorization.toeplitz:ToeplitzFactorization",
        _gaussian(
            max_horizon=1 << 16,  # factorization.toeplitz.MAX_OPTIMIZED_HORIZON
            options=(_OBJECTIVE, Option("bands", OptionType.INT, low=1, memory=True)),
            saved=(Option("coefficients", OptionType.FLOATS, low=1, high=1 << 24),),
            plan=Plan(also_banded=True),
        ),
        factory="optimized",
    ),
    # normalized-* and row-scaled-*: the presets of factorization.scaled.Scaled (its PRESETS)
    # normalized-sqrt: exact variances on first use, O(T^2) to 2^14, O(blocks T log T) beyond
    Entry(
        "normalized-sqrt",
        "factorization.normalized_sqrt:NormalizedSqrtFactorization",
        _gaussian(
            max_horizon=1 << 22,  # normalized_sqrt.NORMALIZED_SQRT_BLOCK_MAX_HORIZON
            # planned up to 2^21 (its blocks' exact variances: 4.4 s at 2^20, 12 s at 2^21)
            plan=Plan(up_to=1 << 21),
        ),
    ),
    # column-normalized BLT: O(buffers) state per coordinate
    _blt_preset(
        "normalized-blt", "factorization.normalized_blt:NormalizedBLT", SCALED_BLT_LONG_HORIZON
    ),
    # row-scaled, column-normalized BLT: O(buffers) state, its row weights saved too
    _blt_preset(
        "row-scaled-blt",
        "factorization.row_scaled_blt:RowScaledBLT",
        SCALED_BLT_LONG_HORIZON,
        _LOG_WEIGHTS,
    ),
    # the dense mean-loss optimum, computed on first use (horizon <= 2048, ~6 s at 1024)
    Entry("dense-optimum", "factorization.dense:FactorizationMechanism", _DENSE, "optimal"),
    # the dense max-loss optimum (certified gap 1e-4): shipped weights for powers of two,
    # optimized on first use otherwise (horizon <= 2048)
    Entry(
        "dense-max-optimum",
        "factorization.dense:FactorizationMechanism",
        _DENSE,
        factory="optimal",
        preset=(("objective", "max"),),
    ),
    # row-scaled column-normalized sqrt: exact variances in O(T^2), horizon <= 2^14
    Entry(
        "row-scaled-sqrt",
        "factorization.row_scaled_sqrt:RowScaledSqrtFactorization",
        _gaussian(
            max_horizon=16384,  # row_scaled_sqrt.ROW_SCALED_MAX_HORIZON
            saved=(_LOG_WEIGHTS,),
            plan=Plan(up_to=_ROW_SCALED_PLAN_LIMIT, single=True),
        ),
    ),
    # row-scaled banded Toeplitz, b bands for a (k, b) schema: exact sensitivity, T <= 2^13
    Entry(
        "row-scaled-banded",
        "factorization.row_scaled_banded:RowScaledBandedToeplitz",
        _gaussian(
            max_horizon=8192,  # row_scaled_banded.ROW_SCALED_BANDED_MAX_HORIZON (float model)
            saved=(
                _LOG_WEIGHTS,
                Option("coefficients", OptionType.FLOATS, low=1, high=8192),
                Option("column_scales", OptionType.FLOATS, low=1, high=64),
            ),
            plan=Plan(up_to=_ROW_SCALED_PLAN_LIMIT, banded=True),
        ),
        factory="optimized",
    ),
    # the horizon-free square root: no name (UnboundedCounter's inner "horizon-free-sqrt"),
    # rebuilt from checkpoints by class name; single participation
    Entry(
        None,
        "factorization.horizon_free:HorizonFreeSqrt",
        _gaussian(participation=False, plan=None),
    ),
    # the horizon-free BLT: no name (UnboundedCounter's inner "horizon-free-blt")
    Entry(
        None,
        "factorization.horizon_free_blt:HorizonFreeBLT",
        _gaussian(saved=_BLT_SAVED, participation=False, plan=None),
    ),
    # the horizon-free BLT with growing columns: no name (UnboundedCounter's inner
    # "horizon-free-growing-blt")
    Entry(
        None,
        "factorization.horizon_free_growing:HorizonFreeGrowingBLT",
        _gaussian(
            saved=(
                *_BLT_SAVED,
                Option("scale", OptionType.FLOAT),
                Option("head_factors", OptionType.FLOATS, low=0, high=16),
            ),
            participation=False,
            plan=None,
        ),
    ),
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


def _names_where(holds: Callable[[Capabilities], bool]) -> frozenset[str]:
    """The registered names whose capabilities ``holds`` is true of."""
    return frozenset(name for name, e in _BY_NAME.items() if holds(e.capabilities))


#: names whose mechanism accepts integer noise (``supports_discrete_noise``)
DISCRETE_CAPABLE: frozenset[str] = _names_where(lambda caps: caps.discrete)


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
GAUSSIAN_ONLY: frozenset[str] = _names_where(lambda caps: caps.gaussian_only)


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
    chosen = str(entry.capabilities.default_noise.value)
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
    return _BY_NAME[name].capabilities.max_horizon


def capabilities(name: str) -> Capabilities:
    """What mechanism ``name`` can do (:class:`~dpcount.counting.strategy.Capabilities`),
    without importing it."""
    check_choice("mechanism", name, MECHANISMS)
    return _BY_NAME[name].capabilities


def class_capabilities(class_name: str) -> Capabilities:
    """The capabilities registered for class ``class_name`` (its first entry: the
    dense optima share one class), without importing it.

    Raises:
        ValueError: an unregistered class name (TypeError: not a str).
    """
    check_choice("class_name", class_name, tuple(CLASSES))
    return next(e.capabilities for e in REGISTRY if e.class_name == class_name)


def names(horizon: int | None = None) -> tuple[str, ...]:
    """The registered names, sorted (the CLI's ``--mechanism`` choices); with
    ``horizon`` only those whose builder reaches it (their declared ``max_horizon``:
    nothing is imported or built). A budget's support is
    ``capabilities(name).supports(budget, horizon)``."""
    T = None if horizon is None else check_integer("horizon", horizon, ge=1)
    return tuple(
        sorted(
            n
            for n, e in _BY_NAME.items()
            if T is None or e.capabilities.max_horizon is None or e.capabilities.max_horizon >= T
        )
    )


def memory_estimate(
    name: str, horizon: int, dim: int | None = None, **options: Any
) -> MemoryEstimate:
    """Bytes mechanism ``name`` needs at ``horizon`` for steps of length ``dim`` (None:
    scalar), as its class declares (:meth:`CountingMechanism.memory_estimate`); nothing
    is allocated. ``options``: its declared memory options (``k``/``subtract`` for
    kary, default 19, True; ``bands`` for toeplitz; ``buffers`` for the BLTs); the
    others are ignored."""
    check_choice("mechanism", name, MECHANISMS)
    return _BY_NAME[name].memory(horizon, dim, options)


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
        if other is None or other not in names(horizon):
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


@refuses_loose_budget()
def build_mechanism(
    name: str,
    *,
    horizon: int,
    budget: Budget,
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
        **kwargs: structure options (``k``, ``subtract``, ``bands``, ...).

    Raises:
        ValueError: an unknown name, or no noise and no δ for a mechanism whose
            default noise is Gaussian (:class:`~dpcount.privacy.MissingDeltaError`,
            naming ``delta``); the mechanism's own errors otherwise.
        TypeError: ``budget`` not a Budget, or one of its fields given loose
            (``epsilon=``, ...: removed in 0.5,
            :func:`~dpcount.privacy.budget.refuses_loose_budget`).
    """
    check_choice("mechanism", name, MECHANISMS)
    dim, memory = kwargs.pop("dim", None), kwargs.pop("memory", None)
    check_memory(name, horizon, dim=dim, memory=memory, **kwargs)
    resolved = Budget.check(budget, owner="build_mechanism")
    if resolved.noise is None:
        chosen = default_noise(name, resolved.delta, resolved.step_sensitivity)
        resolved = resolved.replace(
            noise=class_noise(name, resolved.delta) if chosen is None else chosen
        )
    mechanism = MECHANISMS[name](horizon=horizon, budget=resolved, rng=rng, **kwargs)
    if memory is not None:
        mechanism.memory_limit = parse_bytes("memory", memory)
    return mechanism
