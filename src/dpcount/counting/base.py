"""The interface every continual-counting mechanism in dpcount implements.

All mechanisms here are linear and unbiased: the release at step t is
``S_t + N_t`` where ``S_t = x_1 + … + x_t`` and ``N = L z`` is correlated noise
that does not depend on the data (``z`` i.i.d. from the calibrated sampler, ``L``
the mechanism's structure). So a mechanism is two things:

* a *structure*: a :class:`NoiseProcess` that yields ``N_1, N_2, …`` one step at
  a time (``next``) or in blocks (``next_many``) holding only the noise it still
  needs, plus the exact per-step coefficients ``Σ_j L[t, j]²``;
* a calibrated :class:`~dpcount.privacy.NoiseSampler` (scale from the structure's
  sensitivities).

``release`` (all steps at once) and ``stream`` (step by step) both run the same
noise process, so their outputs have the same distribution by construction.

Neighbouring relation (event level): two streams differ at one step t, with
``|x_t − x'_t| ≤ step_sensitivity`` (for vector steps: the ℓ₁ norm of the change
when the noise is Laplace, its ℓ₂ norm when Gaussian). With a
:class:`~dpcount.privacy.Participation` schema in the budget (k > 1), they differ
in up to k steps pairwise at least b apart, each by at most ``step_sensitivity``;
the sensitivities are then those of :mod:`dpcount.counting.participation`
(exact, or a certified upper bound, as the guarantee says).

Integer noise (``noise="discrete-laplace"`` / ``"discrete-gaussian"``): a
mechanism opts in with ``supports_discrete_noise = True`` when the vector it
perturbs is an *integer* linear function of the steps (so integer data give an
integer vector and a neighbour changes it by an integer vector), and its release
is post-processing of that vector plus i.i.d. samples from the sampler. Then the
steps must be whole numbers and ``step_sensitivity`` a whole number. If, in
addition, the release is an integer combination of the noisy vector
(``integer_release = True``, e.g. the trees), ``release`` returns int64 and the
stream returns ints, computed in exact integer arithmetic. Otherwise the noise
process must be exact too: it exposes ``denominator`` (an int) and returns the
noise as integer numerators over it; the release ``S_t + numerator/denominator``
is then an exact rational, the estimator applied to the noisy vector, rounded
once to float64 (:func:`exact_quotients`). Either way the output bits are a
function of the noisy vector alone (``S_t + fl(noise)`` would not be: the
rounding of the noise term depends on the noise alone). The continuous kinds are
unchanged (float64).
"""

from __future__ import annotations

import copy
import itertools
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import MAX_EXACT_SUM, check_instance, check_integer, check_real
from dpcount.counting._steps import (
    add_running_sums,
    check_integral_array,
    check_integral_step,
    check_running_sums,
    check_stream_array,
    check_stream_step,
    check_whole_number,
    stream_array_and_bounds,
    vector_length,
)
from dpcount.counting.participation import (
    Sensitivity,
    encoder_sensitivities,
    multiplied,
)
from dpcount.privacy.budget import (
    Budget,
    BudgetFields,
    CalibrationRule,
    Neighbouring,
    NoiseKind,
    Participation,
    accept_participation,
)
from dpcount.privacy.float_safe import (
    SCALAR_ROUNDER,
    FloatSafety,
    GridTable,
    StepGrids,
    float_safety,
    release_grids,
    snap_in_blocks,
    snap_release,
    snap_scalar,
)
from dpcount.privacy.guarantee import Calibrated, PrivacyGuarantee, calibrate
from dpcount.privacy.noise import GaussianNoise, LaplaceNoise, NoiseSampler
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.privacy.source import NoiseSource
from dpcount.privacy.tails import gaussian_linf_bound, laplace_linf_bound

_fmod = math.fmod  # update's fast path: one global read, no attribute

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "NEIGHBOURING",
    "CountingMechanism",
    "CountingStream",
    "MemoryEstimate",
    "NoiseProcess",
    "add_noise",
    "available_memory",
    "exact_quotients",
    "format_bytes",
    "parse_bytes",
]

#: Largest horizon: step counts and digit arithmetic stay exact in float64/int64.
MAX_HORIZON = 2**53

NEIGHBOURING = Neighbouring.EVENT_LEVEL.description


# -- memory ---------------------------------------------------------------------------------
#: bytes of one float64
_F8 = 8
#: bytes a NoiseBuffer holds at its peak for one vector stream: a block of about 2^20
#: values (or one row of ``dim``), twice while the sampler makes a block
_BUFFER_VALUES = 1 << 20


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a mechanism needs, declared by its class from its structure (no allocation).

    Attributes:
        structure: the mechanism object's own arrays (coefficients, kernels, matrices).
        stream: the peak of one stream's noise state for vector steps of length ``dim``
            (scalar steps: ``dim`` 1 plus the blocks computed ahead), including the
            transient arrays of a step.
    """

    structure: int
    stream: int

    @property
    def total(self) -> int:
        """Structure plus one stream."""
        return self.structure + self.stream


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, e.g. ``7.6 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


_UNITS = {"": 1, "B": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4}


def parse_bytes(name: str, value: object) -> int:
    """A memory size: an int of bytes, or a string such as ``"2GiB"``, ``"500 MB"``,
    ``"1.5G"`` (binary units with ``i``, decimal without).

    Raises:
        ValueError: an unreadable or non-positive size, naming ``name``.
        TypeError: neither an int nor a str.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{name} must be bytes (an int) or a size like '2GiB', got {value!r}")
    if isinstance(value, int):
        size = value
    else:
        text = value.strip().upper().replace(" ", "")
        number = text.rstrip("BI")
        unit = number[-1:] if number[-1:] in "KMGT" and number else ""
        number = number[: len(number) - len(unit)]
        binary = "I" in text[len(number) :]
        try:
            amount = float(number)
        except ValueError:
            raise ValueError(
                f"{name} must be a size like '2GiB' or '500MB', got {value!r}"
            ) from None
        scale = 1024 ** "_KMGT".index(unit) if binary and unit else _UNITS[unit]
        if not math.isfinite(amount):
            raise ValueError(f"{name} must be finite, got {value!r}")
        size = int(amount * scale)
    if size < 1:
        raise ValueError(f"{name} must be a positive size, got {value!r}")
    return size


#: a stream state this small is never refused against the machine's memory (its check
#: would cost more than the stream)
_ALWAYS_FITS = 64 * 1024 * 1024


def available_memory() -> int | None:
    """The machine's available memory in bytes: ``MemAvailable`` of /proc/meminfo (Linux),
    else the free physical pages (``os.sysconf``); None where neither is known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def noise_buffer_bytes(dim: int | None) -> int:
    """Peak bytes of a :class:`~dpcount.privacy.noise.NoiseBuffer` (samples drawn ahead).

    A vector sample is handed out as its own copy (``take_one``), so a node value a
    tree keeps does not pin the block it was drawn in: one block, twice while the
    sampler makes the next."""
    if dim is None:
        return 1024 * 32  # 1024 Python floats
    return 2 * _F8 * max(_BUFFER_VALUES, dim)


def step_bytes(dim: int | None) -> int:
    """Transient bytes of one step: the input, the running sum and the returned release."""
    return 3 * _F8 * (1 if dim is None else dim)


def buffered_stream_memory(values: int, dim: int | None) -> MemoryEstimate:
    """The memory of a stream that keeps ``values`` noise values (each a Python int or
    float, 32 bytes, or a row of ``dim`` float64), draws from a
    :class:`~dpcount.privacy.noise.NoiseBuffer` and holds a step's arrays; no
    structure arrays (the trees, Honaker, smooth binary, input perturbation)."""
    value = 32 if dim is None else 8 * dim
    stream = values * value + noise_buffer_bytes(dim) + step_bytes(dim)
    return MemoryEstimate(structure=0, stream=stream)


def exact_quotients(numerators: Any, denominator: int) -> Any:
    """``numerators / denominator`` rounded once to float64 (round-to-nearest-even).

    ``numerators``: a Python int or an object array of Python ints. Fast path: when
    the denominator and every |numerator| are below 2^53 both are exact float64s and
    one IEEE division is correctly rounded; otherwise Python's int / int true
    division, which CPython rounds correctly (``long_true_divide`` in
    Objects/longobject.c).
    """
    if not isinstance(numerators, np.ndarray):
        return numerators / denominator
    flat = numerators.ravel()
    if denominator < 2**53 and all(-(2**53) < v < 2**53 for v in flat):
        return numerators.astype(np.float64) / float(denominator)
    out = np.fromiter((v / denominator for v in flat), dtype=np.float64, count=flat.size)
    return out.reshape(numerators.shape)


def _exact_release(sums: Any, numerators: Any, denominator: int) -> Any:
    """Round ``sums + numerators/denominator`` once (exact-rational noise processes).

    ``numerators``: Python-int numerators (an int or object array), or a batch that
    rounds ``sums + noise`` itself (``add_and_round``, e.g. Honaker's int64 batch),
    to the same bits."""
    if hasattr(numerators, "add_and_round"):
        return numerators.add_and_round(sums)
    sums = sums.astype(object) if isinstance(sums, np.ndarray) else int(sums)
    return exact_quotients(sums * denominator + numerators, denominator)


def add_noise(sums: NDArray[Any], noise: Any, denominator: int | None) -> NDArray[Any]:
    """The release ``sums + noise`` of a block of steps, as every engine computes it.

    Args:
        sums: exact running sums, shape ``(n,)`` or ``(n, dim)``: int64 for an integer
            sampler, else float64.
        noise: the noise process's ``next_many(n)`` for the same steps.
        denominator: :meth:`CountingMechanism._exact_denominator` of the process
            (integer samplers), else None.

    Returns:
        int64 ``sums + noise`` (integer release, exact; ``sums`` is reused); float64
        ``S + numerator/denominator`` rounded once (exact rational noise); or float64
        ``noise + sums``, one rounding per value (continuous noise; ``noise`` is reused).
    """
    if denominator is not None:
        return _exact_release(sums, noise, denominator)  # type: ignore[no-any-return]
    if sums.dtype.kind == "i":
        sums += noise.astype(np.int64)  # integer release: exact int64 arithmetic
        return sums
    noise += sums
    return noise  # type: ignore[no-any-return]


class NoiseProcess(Protocol):
    """Yields a mechanism's correlated noise N_1, N_2, … for one stream.

    The processes here build on :class:`~dpcount.counting._process.SourcedNoiseProcess`
    (made from their structure and a :class:`~dpcount.privacy.noise.NoiseBuffer`: the
    step counter and a checkpoint's ``t`` written once)."""

    @property
    def step(self) -> int:
        """Steps produced so far."""
        ...

    def next(self) -> float | NDArray[np.float64]:
        """Noise for the next step (a float, or shape ``(dim,)`` for vector steps)."""
        ...

    def next_many(self, n: int) -> NDArray[np.float64]:
        """Noise for the next ``n`` steps, shape ``(n,)`` or ``(n, dim)``."""
        ...

    def live_count(self) -> int:
        """How many noise values the process holds for future steps."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything the process needs to continue exactly (for checkpoints): ints,
        floats, numpy scalars and arrays in lists and dicts, never the generator."""
        ...

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into a freshly made process of the same
        structure, sampler and dim; raises ValueError (naming the field) on a bad state."""
        ...


#: Largest horizon for which the default multi-participation sensitivity builds the
#: mechanism's dense factorization (memory and time grow as T²).
_DENSE_FACTORIZATION_LIMIT = 2048

#: Largest variance of one noise sample. The per-step noise coefficients Σ_j L[t, j]² of
#: the structures here are sums of at most h·T ≤ 53·2^53 < 2^59 terms of magnitude ≤ 1
#: (tree nodes, Honaker/smooth-binary estimator weights, √A coefficients, input
#: perturbation's t), below 2^64; FactorizationMechanism refuses larger rows of L. So every
#: exact variance stays below 2^964, their sum over ≤ 2^53 steps (``mse``) below 2^1017,
#: and every noise value (a few dozen standard deviations, ≤ 2^482 each) finite in float64;
#: ``variances`` raises rather than return inf should a structure break the bound.
MAX_SAMPLE_VARIANCE = 2.0**900
#: Largest per-step noise coefficient Σ_j L[t, j]² a structure may have (see above).
MAX_NOISE_COEFFICIENT = 2.0**64
#: Largest horizon whose float-safe grids are kept in one table (8 bytes a step)
_GRID_TABLE_HORIZON = 1 << 22
#: the noise kinds released float-safe (snapped to a grid; the discrete kinds are exact)
_FLOAT_SAFE_NOISE = frozenset({NoiseKind.LAPLACE.value, NoiseKind.GAUSSIAN.value})


def _check_noise_in_range(sampler: NoiseSampler, step_sensitivity: float, epsilon: Any) -> None:
    """Refuse a calibration whose variances would overflow to inf (so no inf is printed
    as a std and no noise value is infinite)."""
    _check_variance(float(sampler.variance), step_sensitivity, epsilon)


def _check_variance(variance: float, step_sensitivity: float, epsilon: Any) -> None:
    if not variance <= MAX_SAMPLE_VARIANCE:
        raise ValueError(
            f"step_sensitivity={step_sensitivity!r} and epsilon={epsilon!r} give a noise "
            f"variance of {variance:.3g} per sample, beyond 2^900: the exact variances and "
            "noise sums would overflow float64 to inf; rescale the data"
        )


def calibrate_budget(
    budget: Budget,
    unit_l1: float,
    unit_l2: float,
    *,
    neighbouring: str,
    profile: NDArray[np.float64] | None = None,
) -> Calibrated:
    """The noise of ``budget`` (its noise kind set) for a perturbed vector whose (ℓ₁, ℓ₂)
    sensitivity for unit step changes is (``unit_l1``, ``unit_l2``): times the step
    sensitivity (ℓ₂: the step's ℓ₂ bound for Laplace noise), by
    :func:`~dpcount.privacy.guarantee.calibrate`. Every mechanism calibrates here; the
    scale is non-decreasing in both sensitivities."""
    noise = budget.noise
    assert noise is not None  # set by with_default_noise
    step = budget.step_sensitivity
    # For Gaussian noise step_sensitivity is an l2 bound, so unit_l1 * it is not an l1
    # bound for vector steps; it is only recorded, never used.
    l1 = unit_l1 * step
    l2 = unit_l2 * (step if noise == NoiseKind.GAUSSIAN else budget.l2_step)
    if not (math.isfinite(l1) and math.isfinite(l2)):  # the scale would be inf too
        _check_variance(math.inf, step, budget.epsilon)
    return calibrate(
        noise.value,
        epsilon=budget.epsilon,
        delta=budget.delta,
        l1_sensitivity=l1,
        l2_sensitivity=l2,
        calibration=None if budget.calibration is None else budget.calibration.value,
        neighbouring=neighbouring,
        profile=profile,
    )


class CountingMechanism(ABC):
    """Base class: validation, calibration, release, stream and exact error.

    Subclasses set their structure, then call ``super().__init__``, and implement
    :meth:`_unit_sensitivities`, :meth:`noise_process` and
    :meth:`noise_coefficients`.
    """

    #: short identifier used by the CLI and comparison tables
    name: str = "mechanism"
    #: the perturbed vector is an integer linear function of the steps, so integer
    #: (discrete) noise is exactly private for integer data (see the module docstring)
    supports_discrete_noise: ClassVar[bool] = False
    #: the release is an integer combination of the noisy vector: integer data plus
    #: integer noise give integer outputs
    integer_release: ClassVar[bool] = False
    #: the largest |coefficient| of one noise sample in a release (for the Laplace
    #: ℓ∞ bound); None where it is unknown
    max_noise_coefficient: float | None = None
    #: the noise kind used when the budget names none
    default_noise: ClassVar[NoiseKind] = NoiseKind.LAPLACE
    #: the continuous noise kinds this class is calibrated for (the discrete ones come
    #: with ``supports_discrete_noise``); read by the registry (:meth:`noise_families`)
    continuous_noise: ClassVar[frozenset[NoiseKind]] = frozenset(
        {NoiseKind.LAPLACE, NoiseKind.GAUSSIAN}
    )

    @classmethod
    def noise_families(cls) -> frozenset[NoiseKind]:
        """Every noise kind this class can be calibrated for, as it declares it."""
        discrete = {NoiseKind.DISCRETE_LAPLACE, NoiseKind.DISCRETE_GAUSSIAN}
        return cls.continuous_noise | (
            frozenset(discrete) if cls.supports_discrete_noise else frozenset()
        )

    #: the memory limit (bytes) a stream's noise state must fit, checked when the stream
    #: starts; None: the machine's available memory (:func:`available_memory`)
    memory_limit: int | None = None

    # -- memory (declared by each class, read by the registry, compare and streams) ----
    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """The bytes a mechanism of this class needs at ``horizon`` for vector steps of
        length ``dim`` (None: scalar steps), from its structure alone: nothing is
        allocated. ``options`` are the structure's (``k``/``subtract`` for trees,
        ``buffers`` for BLT, ``bands`` for Toeplitz); others are ignored.

        Every registered class declares it; a class that does not raises
        NotImplementedError (its streams are then not checked)."""
        raise NotImplementedError(f"{cls.__name__} does not declare its memory")

    def _memory_options(self) -> dict[str, Any]:
        """The structure options :meth:`memory_estimate` needs for this instance."""
        return {}

    def stream_state_bytes(self, dim: int | None = None) -> int:
        """Peak bytes of one stream's noise state for steps of length ``dim``."""
        return type(self).memory_estimate(self.horizon, dim, **self._memory_options()).stream

    def _check_stream_memory(self, dim: int | None) -> None:
        """Refuse, before allocating, a stream whose noise state exceeds the limit."""
        try:
            need = self.stream_state_bytes(dim)
        except NotImplementedError:
            return
        if self.memory_limit is None and need <= _ALWAYS_FITS:
            return  # not worth reading /proc/meminfo at every stream start
        limit = self.memory_limit if self.memory_limit is not None else available_memory()
        if limit is None or need <= limit:
            return
        fits = fitting_mechanisms(self.horizon, dim, limit)
        raise ValueError(
            f"a {type(self).__name__} stream at horizon {self.horizon} with steps of length "
            f"{1 if dim is None else dim} needs about {format_bytes(need)} of noise state, "
            f"above the memory limit {format_bytes(limit)}"
            + (
                f"; mechanisms whose stream fits: {', '.join(fits)}"
                if fits
                else "; no mechanism's stream fits"
            )
        )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Every counting mechanism calibrates to a participation schema (this class's
        # __init__ and _schema_sensitivities), so its Budget.resolve accepts one.
        super().__init_subclass__(**kwargs)
        accept_participation(cls.__name__)

    def __init__(
        self,
        horizon: int,
        *,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        """Validate the horizon, resolve the budget's defaults and calibrate the noise.

        The budget is ``budget=`` or its keyword fields (:meth:`Budget.resolve
        <dpcount.privacy.Budget.resolve>`, which names the class in its errors), so a
        mechanism whose only structure argument is the horizon needs no ``__init__``
        of its own. Subclasses with structure options set them first (the sensitivities
        depend on them), then call this; structure that follows from the horizon alone
        is set by :meth:`_set_structure`, called first.
        """
        self._set_structure(horizon)
        budget = self._accept_budget(Budget.resolve(budget, fields, owner=type(self).__name__))
        self.horizon = check_integer("horizon", horizon, ge=1, le=MAX_HORIZON)
        budget = budget.with_default_noise(self.default_noise)
        noise = budget.noise
        assert noise is not None  # set by with_default_noise
        self.budget: Budget = budget
        self.step_sensitivity = budget.step_sensitivity
        self.step_l2_sensitivity = budget.l2_step
        if noise.is_discrete:
            if not self.supports_discrete_noise:
                raise ValueError(
                    f"noise={noise.value!r} is not available for {type(self).__name__}: its "
                    "perturbed vector is not an integer function of the steps (use 'laplace' "
                    "or 'gaussian')"
                )
            check_whole_number(
                "step_sensitivity",
                self.step_sensitivity,
                reason=f"for noise={noise.value!r} (integer steps change by whole amounts)",
            )
        schema = budget.participation
        if schema is not None:
            schema.check_horizon(self.horizon)
        profile = None
        if budget.calibration == CalibrationRule.PLD:
            if schema is not None:
                raise ValueError(
                    "calibration='pld' is computed for one participation's sensitivity profile; "
                    f"with participation={schema!r} use calibration='theorem3' or Gaussian noise"
                )
            unit = self.sensitivity_profile()
            if unit is None:
                raise ValueError(
                    f"calibration='pld' is not available for {type(self).__name__}: it does not "
                    "provide a sensitivity profile"
                )
            profile = unit * self.step_sensitivity
        if schema is None:
            r1, r2 = self._unit_sensitivities()
            neighbouring = NEIGHBOURING
            self.participation_sensitivities: tuple[Sensitivity, Sensitivity] | None = None
        else:
            s1, s2 = self.participation_sensitivities = self._schema_sensitivities(schema)
            r1, r2 = s1.value, s2.value
            neighbouring = (
                f"{budget.neighbouring}; sensitivity under the schema: "
                f"l1 {s1.describe()}, l2 {s2.describe()}"
            )
        calibrated = calibrate_budget(budget, r1, r2, neighbouring=neighbouring, profile=profile)
        _check_noise_in_range(calibrated.sampler, self.step_sensitivity, budget.epsilon)
        self.sampler: NoiseSampler = calibrated.sampler
        self.privacy = calibrated.privacy
        self.noise_scale: float = calibrated.scale
        self._rng = as_generator(rng)

    # -- the guarantee and the float-safe release --------------------------------------
    @property
    def privacy(self) -> PrivacyGuarantee | None:
        """The guarantee of :meth:`release` over the horizon (scalar steps), None for a
        :meth:`with_sampler` copy.

        For continuous noise it includes the float-safe term
        (:mod:`dpcount.privacy.float_safe`): the exact-real mechanism's (ε, δ) plus
        (1 + e^ε)·T·η in δ (so continuous Laplace is (ε, δ_float)-DP, not pure ε-DP);
        ``privacy.delta`` is the exact-real part, ``privacy.total_delta`` the whole.
        For d-vector steps the release has T·d values:
        ``privacy.with_float_safety(η, T·d)`` states it.
        """
        guarantee = self._privacy
        if guarantee is None or guarantee.noise not in _FLOAT_SAFE_NOISE:
            return guarantee
        cached = self.__dict__.get("_stated_privacy")
        if cached is None:
            cached = guarantee.with_float_safety(float_safety(guarantee.noise).eta, self.horizon)
            self.__dict__["_stated_privacy"] = cached
        return cached

    @privacy.setter
    def privacy(self, guarantee: PrivacyGuarantee | None) -> None:
        self._privacy = guarantee
        self.__dict__.pop("_stated_privacy", None)
        self.__dict__.pop("_grid_table", None)

    @property
    def float_safety(self) -> FloatSafety | None:
        """The per-value bound η of the float-safe release
        (:func:`dpcount.privacy.float_safe.float_safety`); None for integer noise or a
        :meth:`with_sampler` copy (released as computed)."""
        guarantee = self._privacy
        if guarantee is None or guarantee.noise not in _FLOAT_SAFE_NOISE:
            return None
        return float_safety(guarantee.noise)

    def release_grids(self, first: int, n: int) -> NDArray[np.float64] | None:
        """The grids steps first..first + n − 1 are snapped to (the largest power of two
        ≤ std/4 of each step: :func:`~dpcount.privacy.float_safe.release_grids`), or None
        when releases are not snapped (:attr:`float_safety` is None).

        From the horizon's :class:`~dpcount.privacy.float_safe.GridTable` (built once
        from :meth:`variances`, kept) when the horizon is at most 2^22 or the steps are
        at least an eighth of it, else from :meth:`iter_variances`.
        """
        grids = self._grids_of(first, n)
        if isinstance(grids, GridTable):
            return grids.array(first, n)
        return grids

    def _grids_of(self, first: int, n: int) -> GridTable | NDArray[np.float64] | None:
        """The kept grid table (built here when the horizon is at most 2^22 or n ≥ T/8,
        unless these are the first few steps of a long horizon), else the grids of steps
        first..first + n − 1, or None (not snapped).

        The first n steps with 64·n < T are read from :meth:`iter_variances` (the same
        floats) without building the table: a short release from a long horizon (a
        100-row ``dpcount count --horizon 4194304``) would otherwise compute all T
        variances (2.3 s at 2^22 for the BLT, whose ``iter_variances(first)`` is
        O(first), so later steps keep the table)."""
        if self.float_safety is None:
            return None
        table: GridTable | None = self.__dict__.get("_grid_table")
        few_first = first == 1 and 64 * n < self.horizon
        if (
            table is None
            and not few_first
            and (self.horizon <= _GRID_TABLE_HORIZON or 8 * n >= self.horizon)
        ):
            table = GridTable(self.variances())
            self.__dict__["_grid_table"] = table
        if table is not None:
            return table
        v = np.fromiter(itertools.islice(self.iter_variances(first), n), np.float64, count=n)
        return release_grids(np.sqrt(v))  # type: ignore[no-any-return]

    # -- structure (implemented by subclasses) ------------------------------------
    def _accept_budget(self, budget: Budget) -> Budget:
        """The resolved budget, refused (ValueError) where the class cannot calibrate for
        it (a noise kind or a participation schema its guarantee does not cover), before
        the horizon is read; unchanged by default."""
        return budget

    def _set_structure(self, horizon: int) -> None:
        """Set the structure that follows from ``horizon`` (as given: validate it), before
        the budget is read; nothing by default."""
        return None

    @abstractmethod
    def _unit_sensitivities(self) -> tuple[float, float]:
        """(ℓ₁, ℓ₂) sensitivity of the perturbed vector for a unit change at one step."""

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """(ℓ₁, ℓ₂) sensitivity of the perturbed vector for unit step changes under a
        (k, b)-participation schema (:mod:`dpcount.counting.participation`), each never
        below the truth.

        Default: the dense encoder R of :meth:`dense_factorization` when the mechanism
        has one and T ≤ 2048 (building the factorization costs ~2 s and ~0.3 GB there for
        the smooth binary mechanism, ~1 GB at 4096), else k × the single-participation
        sensitivities (triangle inequality, certified).
        Mechanisms with a structure-specific exact form override this.
        """
        r1, r2 = self._unit_sensitivities()
        fallback = (multiplied(r1, schema), multiplied(r2, schema))
        dense = getattr(self, "dense_factorization", None)
        if dense is None or self.horizon > _DENSE_FACTORIZATION_LIMIT:
            return fallback
        _, encoder = dense()
        d1, d2 = encoder_sensitivities(encoder, schema)
        # The unit sensitivities may carry a safety margin the dense values lack: keep the
        # larger single-participation value as the floor of a k = 1 comparison.
        return (
            d1 if d1.value <= fallback[0].value else fallback[0],
            d2 if d2.value <= fallback[1].value else fallback[1],
        )

    @abstractmethod
    def noise_process(self, source: NoiseSource, width: int | None = None) -> NoiseProcess:
        """A fresh noise process for one stream of vector length ``width`` (None: scalar
        steps) drawing every sample from ``source``
        (:class:`~dpcount.privacy.source.NoiseSource` of that width: a Generator's
        words, or the keyed PRF's)."""

    @abstractmethod
    def noise_coefficients(self) -> NDArray[np.float64]:
        """Per-step variance of the noise in units of one sample's variance (length horizon)."""

    def sensitivity_profile(self) -> NDArray[np.float64] | None:
        """Absolute per-coordinate changes of the perturbed vector for a unit change at one
        scalar step (for ``calibration="pld"``); None if the mechanism does not provide it."""
        return None

    def _exact_denominator(self, process: NoiseProcess) -> int | None:
        """For integer samplers: the process's ``denominator`` (exact rational noise), or
        None for an ``integer_release`` mechanism. Anything else would release
        ``S_t + fl(noise)``, whose rounding leaks the data (Mironov 2012): refused."""
        denominator: int | None = getattr(process, "denominator", None)
        if denominator is None and not self.integer_release:
            raise TypeError(
                f"{type(self).__name__} cannot use an integer sampler: its release is neither "
                "an integer combination of the noisy vector nor computed exactly from it"
            )
        return denominator

    def _check_step_shape(self, ndim: int) -> None:
        # The PLD is computed for the scalar-step profile; vector steps are not covered.
        if ndim == 2 and self.privacy is not None and self.privacy.calibration == "pld":
            raise ValueError(
                "calibration='pld' is computed for scalar steps; for vector steps use "
                "calibration='theorem3' (or Gaussian noise)"
            )

    # -- exact error ----------------------------------------------------------------
    def variances(self) -> NDArray[np.float64]:
        """Exact variance of the release at steps 1..horizon (data-independent)."""
        out = self.sampler.variance * self.noise_coefficients()
        if not np.isfinite(out).all():  # not expected: the constructor bounds the variance
            raise ValueError(f"{type(self).__name__}: an exact variance overflows float64")
        return out

    def variance_at(self, t: int) -> float:
        """Exact variance of the release at step ``t`` (1 ≤ t ≤ horizon), equal to
        ``variances()[t - 1]`` bit for bit, without the other steps' variances.

        Closed forms per mechanism: O(log T) for the trees and Honaker, O(1) for
        smooth binary and input perturbation; the square-root factorization sums
        its t coefficients in bounded memory (O(t) time). For a run of consecutive
        steps use :meth:`iter_variances`.
        """
        t = check_integer("t", t, ge=1, le=self.horizon)
        return float(self.sampler.variance * self._noise_coefficient_at(t))

    def iter_variances(self, start: int = 1) -> Iterator[float]:
        """``variances()[start - 1:]``, bit for bit, one step at a time, holding memory
        independent of the horizon (except the dense factorization, which holds T
        values beside its T×T matrix). ``start`` may be horizon + 1 (nothing left)."""
        start = check_integer("start", start, ge=1, le=self.horizon + 1)
        var = self.sampler.variance
        return (float(var * c) for c in self._iter_noise_coefficients(start))

    def iter_variance_blocks(self, start: int = 1) -> Iterator[NDArray[np.float64]]:
        """:meth:`iter_variances` as consecutive float64 arrays, the same floats (a
        stream's float-safe grids read a block at a time, no Python float per step)."""
        start = check_integer("start", start, ge=1, le=self.horizon + 1)
        var = self.sampler.variance
        return (var * block for block in self._iter_noise_coefficient_blocks(start))

    def _iter_noise_coefficient_blocks(self, start: int) -> Iterator[NDArray[np.float64]]:
        """``noise_coefficients()[start - 1:]`` in consecutive arrays: by default
        :meth:`_iter_noise_coefficients` read 64, 128, … 4096 at a time (subclasses that
        compute their coefficients in blocks yield those)."""
        values, n = self._iter_noise_coefficients(start), 64
        while (block := np.fromiter(itertools.islice(values, n), np.float64)).size:
            yield block
            n = min(2 * n, 4096)

    def _noise_coefficient_at(self, t: int) -> float:
        """``noise_coefficients()[t - 1]`` (O(T) here; subclasses give closed forms)."""
        return float(self.noise_coefficients()[t - 1])

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        """``noise_coefficients()[start - 1:]`` one by one (subclasses may run a state)."""
        for t in range(start, self.horizon + 1):
            yield self._noise_coefficient_at(t)

    def mse(self) -> float:
        """Exact mean squared error over the horizon (the mean of :meth:`variances`)."""
        return float(np.mean(self.variances()))

    def max_variance(self) -> float:
        """Exact largest per-step variance over the horizon."""
        return float(np.max(self.variances()))

    def linf_bound(self, beta: float = 0.05, *, max_variance: float | None = None) -> float:
        """A (1 − β) bound on max_{t≤T} |release_t − S_t| (union bound over the T steps).

        Gaussian noise: :func:`~dpcount.privacy.tails.gaussian_linf_bound` with the
        exact largest variance. Laplace noise:
        :func:`~dpcount.privacy.tails.laplace_linf_bound` (a Chernoff bound for
        weighted sums of Laplace variables) with A = max_variance/(2λ²) and
        :attr:`max_noise_coefficient`.

        Args:
            beta: failure probability β ∈ (0, 1).
            max_variance: the exact largest variance if already known (otherwise
                :meth:`max_variance` is called).

        Raises:
            ValueError: a sampler that is neither Gaussian nor Laplace (e.g. after
                ``with_sampler(ZeroNoise())``), or Laplace noise on a mechanism whose
                largest coefficient is unknown.
        """
        sampler = self.sampler
        if not isinstance(sampler, (GaussianNoise, LaplaceNoise)):
            raise ValueError(f"linf bounds need Gaussian or Laplace noise, got sampler {sampler!r}")
        v = (
            self.max_variance()
            if max_variance is None
            else check_real("max_variance", max_variance, gt=0)
        )
        if isinstance(sampler, GaussianNoise):
            return gaussian_linf_bound(v, self.horizon, beta)
        if self.max_noise_coefficient is None:
            raise ValueError(
                f"no Laplace tail bound for {self!r}: its largest noise coefficient is unknown "
                "(set max_noise_coefficient)"
            )
        return laplace_linf_bound(
            sampler.scale, v / sampler.variance, self.horizon, beta, self.max_noise_coefficient
        )

    # -- release --------------------------------------------------------------------
    def release(self, x: Any) -> NDArray[Any]:
        """Release all private prefix sums of ``x`` at once.

        Args:
            x: shape ``(n,)`` or ``(n, d)`` with ``1 <= n <= horizon``, finite reals
                (whole numbers for discrete noise).

        Returns:
            array of the same shape: ``cumsum(x) + noise``; float64, or int64 for
            discrete noise on a mechanism with ``integer_release``.

        Each call draws fresh noise: releasing the same data twice spends the
        privacy budget twice.

        Raises:
            ValueError: bad data (see :func:`~dpcount.counting._steps.check_stream_array`),
                or, for continuous noise, a running sum of magnitude ≥ 2^53 (the first
                such step is named): below it integer data are summed exactly, so the
                float release is a rounding (post-processing) of S_t + N_t; see
                :func:`~dpcount.counting._steps.check_running_sums`.
        """
        arr, bounds = stream_array_and_bounds("x", x, max_steps=self.horizon, dim=-1)
        self._check_step_shape(arr.ndim)
        dim = None if arr.ndim == 1 else arr.shape[1]
        integer = getattr(self.sampler, "integer", False)
        if integer:
            ints = check_integral_array("x", arr)
            process = self.noise_process(NoiseSource.generator(self.sampler, self._rng, dim), dim)
            out = process.next_many(arr.shape[0])
            isums = np.cumsum(ints, axis=0)
            return add_noise(isums, out, self._exact_denominator(process))
        # Noise first: holding the sums while drawing it was slower at T = 10^6 (median of
        # 12 interleaved runs on a loaded machine).
        source = NoiseSource.generator(self.sampler, self._rng, dim)
        out = self.noise_process(source, dim).next_many(arr.shape[0])
        # out += cumsum(x) in cache-sized blocks, each sum checked (exact sums for integer
        # data; nothing released else): no array of sums, the same floats and errors.
        add_running_sums("x", out, arr, grid=self._grids_of(1, arr.shape[0]), bounds=bounds)
        return out

    def stream(self) -> CountingStream:
        """A stream that releases one private prefix sum per :meth:`CountingStream.update`."""
        return CountingStream(self)

    # -- rebuilding (checkpoints) ----------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The constructor call that rebuilds this mechanism (used by checkpoints).

        Returns:
            ``{"class": class name, "kwargs": {...}}``: the arguments as given
            (horizon, the fields of :attr:`budget` and the structure's own options),
            without ``rng``. Values are JSON-able, except numpy arrays for
            :class:`~dpcount.counting.FactorizationMechanism`'s ``L`` and ``R``.
        """
        return {"class": type(self).__name__, "kwargs": self._config_kwargs()}

    def _config_kwargs(self) -> dict[str, Any]:
        """Constructor keyword arguments except ``rng``; subclasses add their structure's."""
        return {"horizon": self.horizon, **self.budget.as_kwargs()}

    # -- composition ----------------------------------------------------------------
    def dp_event(self) -> Any:
        """This mechanism's privacy as a dp_accounting ``DpEvent`` (one release).

        Compose several releases with dp_accounting's accountants, e.g.
        ``PLDAccountant().compose(a.dp_event()).compose(b.dp_event())``. Gaussian
        noise gives a ``GaussianDpEvent``, the discrete Gaussian a ``ZCDpEvent``
        (RDP accountant), Laplace kinds the composition of one Laplace event per
        coordinate of :meth:`sensitivity_profile` (or one event at the ℓ₁
        sensitivity); see :func:`dpcount.privacy.accounting.dp_event`. Needs the
        ``accounting`` extra. The event is the exact-real mechanism's: a float-safe
        continuous-noise release adds ``privacy.float_delta`` ((1 + e^ε)·n·η for its n
        values, :mod:`dpcount.privacy.float_safe`) to the δ an accountant reports.

        Raises:
            ValueError: the mechanism carries no guarantee (:meth:`with_sampler`).
        """
        from dpcount.privacy.accounting import dp_event

        if self.privacy is None:
            raise ValueError("this copy carries no privacy guarantee (with_sampler), no DpEvent")
        # A profile is one participation's; under a schema, one event at the l1 sensitivity.
        unit = None if self.budget.participation is not None else self.sensitivity_profile()
        return dp_event(
            noise=self.privacy.noise,
            scale=self.noise_scale,
            l1_sensitivity=self.privacy.l1_sensitivity,
            l2_sensitivity=self.privacy.l2_sensitivity,
            rho=self.privacy.rho,
            profile=None if unit is None else unit * self.step_sensitivity,
        )

    # -- testing hook ---------------------------------------------------------------
    def with_sampler(self, sampler: NoiseSampler) -> CountingMechanism:
        """A copy using ``sampler`` as is (e.g. :class:`~dpcount.privacy.ZeroNoise`).

        For testing the structure; the copy carries no privacy guarantee
        (``privacy`` is None).
        """
        check_instance("sampler", sampler, NoiseSampler, "a NoiseSampler (e.g. ZeroNoise())")
        clone = copy.copy(self)
        clone.sampler = sampler
        clone.privacy = None
        clone.noise_scale = float("nan")
        return clone

    def _repr_fields(self) -> dict[str, object]:
        """Structure fields shown by ``repr`` between the horizon and the noise scale."""
        return {}

    def __repr__(self) -> str:
        fields = "".join(f"{key}={value}, " for key, value in self._repr_fields().items())
        return (
            f"{type(self).__name__}(horizon={self.horizon}, {fields}"
            f"budget={self.budget!r}, noise_scale={self.noise_scale:.6g})"
        )

    def describe(self) -> str:
        """One line: the mechanism and its guarantee."""
        guarantee = "no privacy guarantee" if self.privacy is None else self.privacy.describe()
        return f"{self!r}: {guarantee}"


def _concrete_classes() -> list[type[CountingMechanism]]:
    out: list[type[CountingMechanism]] = []
    todo = list(CountingMechanism.__subclasses__())
    while todo:
        cls = todo.pop(0)
        todo.extend(cls.__subclasses__())
        if not getattr(cls, "__abstractmethods__", None) and cls not in out:
            out.append(cls)
    return out


def fitting_mechanisms(horizon: int, dim: int | None, limit: int) -> list[str]:
    """Class names of the defined mechanisms whose structure plus stream at ``horizon``
    (default options) fits in ``limit`` bytes, with their stream state, smallest first."""
    rows = []
    for cls in _concrete_classes():
        try:
            estimate = cls.memory_estimate(horizon, dim)
        except (TypeError, ValueError, NotImplementedError):
            continue  # needs options to say (e.g. a dense factorization's shape)
        if estimate.total <= limit:
            rows.append((estimate.stream, f"{cls.__name__} ({format_bytes(estimate.stream)})"))
    return [label for _, label in sorted(rows)]


class ReleaseStream:
    """What the step-by-step streams share: the count of released steps and the
    checkpoint's ``extra``."""

    _t: int
    #: the ``extra`` dict of the checkpoint this stream was loaded from (else None)
    extra: dict[str, Any] | None = None

    @property
    def step(self) -> int:
        """Number of steps released so far."""
        return self._t


class CountingStream(ReleaseStream):
    """Step-by-step release: ``update(x_t)`` returns the private prefix sum at t.

    The noise process is created at the first update, for scalar steps or for
    vectors of the first step's length.
    """

    def __init__(self, mechanism: CountingMechanism) -> None:
        self.mechanism = mechanism
        self.horizon = mechanism.horizon
        self._process: NoiseProcess | None = None
        self._dim: int | None = None
        self._integer: bool = bool(getattr(mechanism.sampler, "integer", False))
        self._int_out = self._integer and mechanism.integer_release
        self._sum: Any = 0 if self._integer else 0.0
        self._denominator: int | None = None  # set at _start for exact rational noise
        self._snapped = mechanism.float_safety is not None  # float-safe (continuous noise)
        self._grids: StepGrids | None = None  # the grids of the steps to come
        self._work: NDArray[np.float64] | None = None  # the vector snap's scratch
        self._spare: NDArray[np.float64] | None = None  # the vector sum's other array
        #: (the sums array they bound, least, largest, steps since exact) or None
        self._bounds: tuple[Any, float, float, int] | None = None
        # update's fast path (scalar float-safe float steps): it snaps to _g, the grid
        # of a run of steps taken from _grids up to step _g_end, the next run popped
        # from _runs (the grids' own list) while the step count is below _fast_end
        # (the horizon once a scalar float-safe step ran, else 0); it pops the noise
        # with _pop (the process's ``handout`` list's pop, refilled by _refill =
        # process.next; or process.next itself, _refill None)
        self._fast_end = 0
        self._runs: list[tuple[float, int]] = []
        self._pop: Any = None
        self._refill: Any = None
        self._g = 0.0
        self._g_end = 0
        # steps below _safe_end take the unchecked fast path (_arm): the process with a
        # hand-out list (_listed) has noise for them within 2^50·g; _cg is g's rounder
        self._cg = 0.0
        self._safe_end = 0
        self._listed: Any = None
        self._t = 0

    @property
    def dim(self) -> int | None:
        return self._dim

    def live_count(self) -> int:
        """Noise values the stream holds for future steps."""
        return 0 if self._process is None else self._process.live_count()

    def _start(self, dim: int | None) -> NoiseProcess:
        self.mechanism._check_step_shape(1 if dim is None else 2)
        self.mechanism._check_stream_memory(dim)
        self._dim = dim
        if dim is not None:
            self._sum = np.zeros(dim, dtype=np.int64 if self._integer else np.float64)
        m = self.mechanism
        self._process = m.noise_process(NoiseSource.generator(m.sampler, m._rng, dim), dim)
        if self._integer:
            self._denominator = m._exact_denominator(self._process)
        return self._process

    def _step_grid_source(self, first: int) -> StepGrids:
        """The grids of the steps to come, the next one being step ``first``, with the
        fast path's unused run given back."""
        grids = self._grids
        if grids is None:
            # from where the stream is (after a checkpoint: where it resumed), a block
            # at a time: a live stream never computes the whole horizon's variances
            grids = self._grids = StepGrids(self.mechanism.iter_variance_blocks(first))
            self._runs = grids.runs
        elif self._g_end >= first:  # the fast path's run still covers first.._g_end
            grids.give_back(self._g, self._g_end - first + 1)
        self._g_end = self._safe_end = 0
        return grids

    def _next_grid(self) -> float:
        """The float-safe grid of the one step just counted."""
        return self._step_grid_source(self._t).next()

    def _step_grids(self, n: int) -> NDArray[np.float64]:
        """The float-safe grids of the ``n`` steps just counted (self._t is their last)."""
        return self._step_grid_source(self._t - n + 1).take(n)

    def _next_run(self) -> float:
        """The grid of the step just counted, taking the run of steps that share it for
        the fast path (nothing of an earlier run is left: its end was reached)."""
        g, n = self._step_grid_source(self._t).run()
        self._g, self._g_end = g, self._t + n - 1
        return g

    def _arm(self) -> None:
        """Let the fast path's steps skip the rounding's range check, up to the end of
        the run and of the process's hand-out list (``handout_end``), when the grid g
        is a power of two in [2^-1003, 2^970) and every value the list was filled with
        has |N| < 2^50·g (``handout_bound``), else until the next run or refill
        (``_safe_end`` 0).

        :func:`snap_scalar`'s rounding R_g(r) = fl(fl(r/g + C) − C)·g (C = 1.5·2^52,
        for |r/g| < 2^51) is then computed as fl(fl(r + C·g) − C·g) (``_cg`` = C·g):
        with |r| = |fmod(S, g) + N| < 2^51·g, scaling by a power of two is exact and
        commutes with rounding while the values stay normal and finite, so the floats
        are the same, with a division, a product and the check fewer.
        """
        listed, g = self._listed, self._g
        if (
            listed is not None
            and listed.handout_bound < g * 1125899906842624.0  # 2^50·g
            and math.frexp(g)[0] == 0.5
            and 2.0**-1003 <= g < 2.0**970
        ):
            self._cg = g * SCALAR_ROUNDER
            self._safe_end = min(self._g_end, listed.handout_end)
        else:
            self._safe_end = 0

    def _enter_fast_path(self, process: NoiseProcess) -> None:
        """Take update's fast path from the next step on, popping the noise from the
        process's hand-out list (refilled by ``process.next``) when it has one, else
        calling ``process.next``."""
        handout = getattr(process, "handout", None)
        self._pop = process.next if handout is None else handout.pop
        self._refill = None if handout is None else process.next
        self._listed = None if handout is None else process
        self._fast_end = self.horizon

    def update(self, x: Any) -> Any:
        """Add step ``x`` (a finite real, or a vector) and return the private running sum."""
        t = self._t
        if type(x) is float:  # a scalar float-safe stream's float step: the fast path
            if t < self._safe_end:  # the run's grid, noise in the range of the rounding
                new_sum = self._sum + x
                # ±MAX_EXACT_SUM (also refuses an infinite or NaN x): else the general
                # path, which raises (literal constants: a global costs a lookup per step)
                if -9007199254740992.0 < new_sum < 9007199254740992.0:
                    self._sum = new_sum
                    self._t = t + 1
                    pop = self._pop  # the hand-out list's pop (not empty before _safe_end)
                    lo = _fmod(new_sum, self._g)
                    cg = self._cg  # snap_scalar written out, scaled by g (_arm)
                    return (new_sum - lo) + (((lo + pop()) + cg) - cg)
                return self._update(x)
            if t < self._g_end:  # in the run of steps that share the grid _g
                g = self._g
            elif t < self._fast_end and (runs := self._runs):  # the next run
                g, n = runs.pop()
                self._g, self._g_end = g, t + n
                if self._listed is not None:  # a process with a hand-out list
                    self._arm()
            else:
                return self._update(x)
            new_sum = self._sum + x
            if -9007199254740992.0 < new_sum < 9007199254740992.0:  # as above
                self._sum = new_sum
                self._t = t + 1
                pop = self._pop  # process.next, or its hand-out list's pop
                try:
                    noise = pop()
                except IndexError:
                    if self._refill is None:  # process.next's own error
                        raise
                    noise = self._refill()  # the hand-out list ran empty: refilled
                    self._arm()
                # snap_scalar(new_sum, noise, g) written out (a call costs what it
                # computes), with SCALAR_ROUNDER_RANGE and SCALAR_ROUNDER
                lo = _fmod(new_sum, g)
                q = (lo + noise) / g
                if -2251799813685248.0 < q < 2251799813685248.0:
                    return (new_sum - lo) + ((q + 6755399441055744.0) - 6755399441055744.0) * g
                return snap_scalar(new_sum, noise, g)
        return self._update(x)

    def _update(self, x: Any) -> Any:
        """:meth:`update` except its fast path."""
        if self._t >= self.horizon:
            raise ValueError(
                f"stream is at its horizon ({self.horizon} steps released); "
                "no further steps can be released"
            )
        process = self._process
        if self._integer:
            return self._update_integer(x)
        if process is not None and self._dim is not None:
            return self._update_vector(x, process, self._dim)
        if type(x) is float and self._dim is None and math.isfinite(x):
            value: Any = x
        elif process is None:
            value = check_stream_step("x", x, vector_length("x", x))
        else:
            value = check_stream_step("x", x, self._dim)
        if process is not None and self._dim is None:  # scalar steps: one comparison
            new_sum = self._sum + value
            if not -9007199254740992.0 < new_sum < 9007199254740992.0:  # ±MAX_EXACT_SUM
                check_running_sums("x", np.array([new_sum]), already=self._t)
            self._sum = new_sum
            self._t += 1
            if self._snapped:  # from the next step on: update's fast path
                g = self._next_run()
                self._enter_fast_path(process)
                noise = process.next()
                self._arm()
                return snap_scalar(new_sum, noise, g)  # type: ignore[arg-type]
            return new_sum + process.next()
        # the first step (later ones took a branch above)
        scalar = np.ndim(value) == 0
        check_running_sums("x", np.reshape(value, (1,) if scalar else (1, -1)))
        process = self._start(None if scalar else len(value))
        self._sum = self._sum + value  # 0 + x: a zero step's sum is +0.0
        self._t += 1
        if self._snapped:
            noise = process.next()
            if not np.ndim(noise):
                return snap_release(self._sum, noise, self._next_grid())
            # written to a new array (the process's noise may be a view of its state),
            # with the snap's scratch kept by the stream (fresh arrays fault their pages)
            d = int(np.size(noise))
            work = self._work
            if work is None:
                work = self._work = np.empty((2, d))
            out = np.empty(d)
            g = self._next_grid()  # the sums were checked below 2^53
            return snap_release(
                self._sum, noise, g, work=work, out=out, known=(None, MAX_EXACT_SUM)
            )
        return self._sum + process.next()

    def _update_vector(self, x: Any, process: NoiseProcess, dim: int) -> Any:
        """:meth:`update` of a continuous-noise vector step after the first: the sum is
        written to the stream's spare array (the two alternate), its least and largest
        values check it (and x's finiteness: a NaN or inf fails them too, and is then
        named by the full check) and the snap reuses the least. A process with a fused
        vector step (``next_finished``) takes :meth:`_update_fused` when bounds on the
        sums show every new sum inside ±2^53."""
        value = check_stream_step("x", x, dim, finite=False)
        fused = getattr(process, "next_finished", None) if self._snapped else None
        if fused is not None:
            released = self._update_fused(value, fused, dim)  # type: ignore[arg-type]
            if released is not None:
                return released
        spare = self._spare
        if spare is None:
            spare = np.empty(dim)
        with np.errstate(over="ignore", invalid="ignore"):  # refused just below
            new_sum = np.add(self._sum, value, out=spare)
        low, high = float(new_sum.min()), float(new_sum.max())
        if not (low > -9007199254740992.0 and high < 9007199254740992.0):  # ±MAX_EXACT_SUM
            check_stream_step("x", x, dim)  # a NaN or inf step: named
            check_running_sums("x", np.reshape(new_sum, (1, -1)), already=self._t)
        self._spare, self._sum = self._sum, new_sum
        self._bounds = (new_sum, low, high, 0)
        self._t += 1
        noise = process.next()
        if not self._snapped:
            return new_sum + noise
        # into the noise's own array when the process hands out a new one, else a new
        # array (the noise may be a view of the process's state); the snap's scratch is
        # kept by the stream (fresh arrays fault their pages)
        out = noise if getattr(process, "fresh_vectors", False) else np.empty(dim)
        work = self._work
        if work is None:
            work = self._work = np.empty((2, dim))
        g = self._next_grid()  # the sums were checked below 2^53
        return snap_release(new_sum, noise, g, work=work, out=out, known=(low, MAX_EXACT_SUM))

    #: a fused vector step recomputes its bounds on the sums exactly every this many steps
    _EXACT_BOUNDS_EVERY = 16

    def _update_fused(self, value: NDArray[np.float64], fused: Any, dim: int) -> Any:
        """A float-safe vector step through the process's fused step: the new sums are
        added and snapped column block by column block as the process computes each
        block's noise (all in cache), or None (nothing done) when the sums' bounds do
        not show them inside ±2^53 (or the process does not fuse this step).

        Bounds: with L ≤ S ≤ H (the current sums, kept from the last step) and x's
        least and largest values, every new sum fl(S + x) lies in [fl(L + min x),
        fl(H + max x)] (rounding is monotone), so the check passes before anything is
        drawn, and the lower bound serves the snap as its least sum (a bound below every
        sum gives the same floats). They are carried from step to step and recomputed
        exactly, from the blocks while in cache, every :data:`_EXACT_BOUNDS_EVERY` steps.
        """
        old = self._sum
        bounds = self._bounds
        if bounds is None or bounds[0] is not old:  # e.g. after update_many or a checkpoint
            bounds = (old, float(old.min()), float(old.max()), 0)
        low = bounds[1] + float(value.min())  # Python floats: NaN / inf refused below
        high = bounds[2] + float(value.max())
        if not (low > -9007199254740992.0 and high < 9007199254740992.0):  # ±MAX_EXACT_SUM
            return None  # the full check (NaN, inf or a sum too large: named)
        new = self._spare
        if new is None:
            new = np.empty(dim)
        work = self._work
        if work is None:
            work = self._work = np.empty((2, dim))
        self._t += 1
        g = self._next_grid()  # every new sum is inside ±2^53 (the bounds)
        snap = snap_in_blocks(new, g, work, known=(low, MAX_EXACT_SUM))
        exact = bounds[3] + 1 >= self._EXACT_BOUNDS_EVERY
        lows: list[float] = []
        highs: list[float] = []

        def finish(start: int, block: NDArray[np.float64]) -> None:
            stop = start + len(block)
            part = np.add(old[start:stop], value[start:stop], out=new[start:stop])
            if exact:
                lows.append(float(part.min()))
                highs.append(float(part.max()))
            snap(start, block)

        try:
            released = fused(finish)
        except BaseException:
            self._t -= 1
            self._grids.give_back(g, 1)  # type: ignore[union-attr]  # not used
            raise
        if released is None:  # not fused: nothing was drawn or summed
            self._t -= 1
            self._grids.give_back(g, 1)  # type: ignore[union-attr]
            return None
        self._spare, self._sum = old, new
        if exact:
            self._bounds = (new, min(lows), max(highs), 0)
        else:
            self._bounds = (new, low, high, bounds[3] + 1)
        return released

    def _update_integer(self, x: Any) -> Any:
        """``update`` for discrete noise: whole-number steps, integer sums."""
        process = self._process
        if process is None:
            value = check_stream_step("x", x, vector_length("x", x))
        else:
            value = check_stream_step("x", x, self._dim)
        value = check_integral_step("x", value, offset=self._sum, already=self._t)
        if process is None:
            process = self._start(None if np.ndim(value) == 0 else len(value))
        self._sum = self._sum + value
        self._t += 1
        noise = process.next()
        if self._denominator is not None:  # exact rational noise: round once
            return _exact_release(self._sum, noise, self._denominator)
        if self._dim is None:
            return self._sum + int(noise)
        return self._sum + np.asarray(noise).astype(np.int64)

    def update_many(self, xs: Any) -> NDArray[Any]:
        """Add several steps at once (vectorized); returns their private running sums."""
        process = self._process
        if process is None:
            arr = check_stream_array("xs", xs, max_steps=self.horizon, dim=-1)
            process = self._start(None if arr.ndim == 1 else arr.shape[1])
        else:
            arr = check_stream_array(
                "xs", xs, max_steps=self.horizon, dim=self._dim, already=self._t
            )
        if self._integer:
            isums = np.cumsum(
                check_integral_array("xs", arr, already=self._t, offset=self._sum), axis=0
            )
            isums += self._sum
            self._sum = isums[-1].copy() if self._dim is not None else int(isums[-1])
            self._t += arr.shape[0]
            noise = process.next_many(arr.shape[0])
            if self._denominator is not None:  # exact rational noise: round once
                return _exact_release(isums, noise, self._denominator)  # type: ignore[no-any-return]
            isums += noise.astype(np.int64)  # integer release: exact int64 arithmetic
            return isums
        with np.errstate(over="ignore"):  # an overflow to inf is refused just below
            sums = np.cumsum(arr, axis=0)
            sums += self._sum
        check_running_sums("xs", sums, already=self._t)
        self._sum = sums[-1].copy() if self._dim is not None else float(sums[-1])
        self._t += arr.shape[0]
        out = process.next_many(arr.shape[0])
        if self._snapped:
            grids = self._step_grids(arr.shape[0])
            return snap_release(sums, out, grids if arr.ndim == 1 else grids[:, None])  # type: ignore[no-any-return]
        out += sums
        return out
