"""Scaled factorizations: a base encoder with its rows and columns scaled.

A lower-triangular Toeplitz encoder C (the square root's, a BLT's or a banded
Toeplitz one) has columns of unequal norm, and its rows are all treated alike. Both
can be scaled without leaving the factorization A = B·C:

    C′ = diag(w)·C·diag(1/n),   n_j = ‖diag(w)·C[:, j]‖ / ν_j,
    B′ = A·diag(n)·C⁻¹·diag(1/w)    (so B′·C′ = A),

with row weights w (:class:`Rows`) and column norms ν (:class:`Columns`). Column j of
C′ has norm ν_j, so the ℓ₂ sensitivity of C′x is max_j ν_j (single participation),
and the release A x + B′z = B′(C′x + z) is post-processing of the Gaussian mechanism
on C′x (the matrix-factorization mechanism; Denisov et al. 2022). A :class:`Scaled`
mechanism is one such (base, rows, columns) choice, its :class:`Scaling`; the five
registered ones are its presets (:data:`PRESETS`), each keeping the exact fast path
of its base in its own module:

=====================  ================  ==========  =====================================
preset (registry)      base              rows        exact variances, stream
=====================  ================  ==========  =====================================
``normalized-sqrt``    square root       none        O(T²) / O(m·T log T) blocks; FFT
``row-scaled-sqrt``    square root       Chebyshev   O(T²); one FFT per stream
``normalized-blt``     BLT               none        O(T·n); n + 1 values per coordinate
``row-scaled-blt``     BLT               Chebyshev   O(T·n²); n + 1 values per coordinate
``row-scaled-banded``  banded Toeplitz   Chebyshev   O(T²); exact (k, b) sensitivity
=====================  ================  ==========  =====================================

A scaled mechanism is built from its base, the unscaled mechanism object:
``Scaled(base, rows=Rows.CHEBYSHEV, log_weights=a)`` with ``base`` a
:class:`~dpcount.counting.SqrtFactorization`, a :class:`~dpcount.counting.BLT` (its θ,
ω) or a :class:`~dpcount.counting.ToeplitzFactorization` (its coefficients) returns the
preset built with the base's horizon, budget and parameters, and every preset's
:attr:`Scaled.base` is that base again:

=====================  =========================  ====================================
preset (registry)      ``base`` (its parameters)  the preset's own options
=====================  =========================  ====================================
``normalized-sqrt``    ``SqrtFactorization``      ``block_ratio``
``row-scaled-sqrt``    ``SqrtFactorization``      ``log_weights``
``normalized-blt``     ``BLT`` (θ, ω)             —
``row-scaled-blt``     ``BLT`` (θ, ω)             ``log_weights``
``row-scaled-banded``  ``ToeplitzFactorization``  ``log_weights``, ``column_scales``
                       (coefficients)
=====================  =========================  ====================================

``Scaled.of(Base.BLT, rows=Rows.CHEBYSHEV)`` is the preset class of a scaling
(:class:`~dpcount.counting.factorization.row_scaled_blt.RowScaledBLT` here). The
column-normalized presets (rows none) scale every column to the first one's norm (the
base's own sensitivity, unchanged); the row-scaled ones to 1 (or to ``column_scales``
per block of columns, for the banded Toeplitz under a participation schema).

Row weights (:data:`Rows.CHEBYSHEV`): w_t = exp(Σ_m a_m·T_m(y_t)), y_t = 2(t + ½)/T − 1,
T_m the Chebyshev polynomials and ``log_weights`` a_1, a_2, … (:func:`row_weights`).
"""

from __future__ import annotations

import enum
import inspect
from abc import ABCMeta, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, cast

import numpy as np
from numpy.polynomial import chebyshev

from dpcount._validate import as_array, check_choice
from dpcount.counting.base import CountingMechanism
from dpcount.counting.factorization._types import Array
from dpcount.privacy.budget import Budget, BudgetFields, NoiseKind
from dpcount.privacy.rng import RNGLike

__all__ = [
    "PRESETS",
    "UNSCALED",
    "Base",
    "Columns",
    "Rows",
    "Scaled",
    "Scaling",
    "block_values",
    "check_log_weights",
    "row_weights",
]

_E = TypeVar("_E", bound=enum.Enum)

#: largest horizon for :meth:`Scaled.dense_factorization`
DENSE_LIMIT = 4096
#: most Chebyshev coefficients of ln w a mechanism takes
_MAX_LOG_WEIGHTS = 32


class Base(enum.Enum):
    """The encoder C that is scaled."""

    #: the square root A^{1/2}: Toeplitz of f(k) = C(2k, k)/4^k (Fichtenberger,
    #: Henzinger & Upadhyay 2023)
    SQRT = "sqrt"
    #: a buffered linear Toeplitz encoder BLT(θ, ω) (Dvijotham et al. 2024)
    BLT = "blt"
    #: a banded Toeplitz encoder c_0, …, c_{b−1} (Choquette-Choo et al. 2023)
    BANDED_TOEPLITZ = "banded-toeplitz"


class Rows(enum.Enum):
    """How the rows of C are scaled (w)."""

    #: w = 1
    NONE = "none"
    #: w_t = exp(Σ_m a_m·T_m(y_t)) (:func:`row_weights`, ``log_weights`` a)
    CHEBYSHEV = "chebyshev"


class Columns(enum.Enum):
    """How the columns of diag(w)·C are scaled (n)."""

    #: to equal norm: the first column's (rows none) or 1 (row-scaled; per block of
    #: columns with ``column_scales``)
    NORMALIZE = "normalize"


@dataclass(frozen=True)
class Scaling:
    """One choice of base encoder, row and column scaling (a :class:`Scaled` preset)."""

    base: Base
    rows: Rows = Rows.NONE
    columns: Columns = Columns.NORMALIZE


#: the registered presets: registry name -> scaling
PRESETS: dict[str, Scaling] = {
    "normalized-sqrt": Scaling(Base.SQRT),
    "row-scaled-sqrt": Scaling(Base.SQRT, Rows.CHEBYSHEV),
    "normalized-blt": Scaling(Base.BLT),
    "row-scaled-blt": Scaling(Base.BLT, Rows.CHEBYSHEV),
    "row-scaled-banded": Scaling(Base.BANDED_TOEPLITZ, Rows.CHEBYSHEV),
}

#: each base's unscaled mechanism, by registry name (:attr:`Scaled.base`)
UNSCALED: dict[Base, str] = {
    Base.SQRT: "sqrt",
    Base.BLT: "blt",
    Base.BANDED_TOEPLITZ: "toeplitz",
}

#: what ``base`` may be, for the TypeError
_BASE_TYPES = (
    "an unscaled SqrtFactorization, BLT or ToeplitzFactorization, or a Base member or its "
    "value ('sqrt', 'blt', 'banded-toeplitz')"
)
#: the budget's keyword fields (a scaled mechanism built from a base takes the base's)
_BUDGET_FIELDS = frozenset(BudgetFields.__annotations__)


def check_log_weights(log_weights: Any) -> tuple[float, ...]:
    """The Chebyshev coefficients a_1.. of ln w: 1 to 32 finite numbers, |a_m| ≤ 5.

    Raises:
        ValueError: naming ``log_weights``.
    """
    arr = as_array("log_weights", log_weights)
    if arr.ndim != 1 or not 1 <= len(arr) <= _MAX_LOG_WEIGHTS:
        raise ValueError(
            f"log_weights must hold 1 to {_MAX_LOG_WEIGHTS} numbers, got shape {arr.shape}"
        )
    a = np.asarray(arr, dtype=np.float64)
    if not (np.isfinite(a).all() and np.all(np.abs(a) <= 5.0)):
        raise ValueError("log_weights must be finite with |a_m| <= 5")
    return tuple(float(v) for v in a)


def row_weights(T: int, log_weights: tuple[float, ...], k: Any) -> Array:
    """w_k = exp(Σ_m a_m·T_m(y_k)), y_k = 2(k + ½)/T − 1, for the integer array k
    (elementwise: each w_k is the same float whatever array it is computed in)."""
    y = (np.asarray(k, dtype=np.float64) + 0.5) / T * 2 - 1
    out: Array = np.exp(chebyshev.chebval(y, (0.0, *log_weights)))
    return out


def block_values(T: int, scales: tuple[float, ...] | None) -> Array:
    """``scales`` repeated over m = len(scales) consecutive blocks of columns (column j
    in block ⌊j·m/T⌋); all ones for None."""
    if scales is None:
        return np.ones(T)
    return np.asarray(scales, dtype=np.float64)[np.arange(T) * len(scales) // T]


def _member(kind: type[_E], name: str, value: object) -> _E:
    """``value`` as a member of ``kind`` (a member or its value; the error names ``name``)."""
    if isinstance(value, kind):
        return value
    return kind(check_choice(name, value, tuple(str(m.value) for m in kind)))


def gaussian_budget(budget: Budget | None, fields: BudgetFields, owner: str) -> Budget:
    """The budget (or its loose fields), Gaussian noise only (refusals name ``owner``)."""
    return Budget.resolve(budget, fields, owner=owner).gaussian_only(owner)


def _registered(name: str) -> type[CountingMechanism]:
    """The class of the registry name ``name``."""
    from dpcount.counting.registry import REGISTRY  # the one name -> class map

    return next(e.cls for e in REGISTRY if e.name == name)


class _ScaledMeta(ABCMeta):
    """Calling :class:`Scaled` itself builds a preset (:meth:`Scaled.build`); calling a
    preset is its own constructor, unchanged."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is not Scaled:
            return super().__call__(*args, **kwargs)
        if len(args) > 1:
            raise TypeError(f"Scaled() takes one positional argument (base), got {len(args)}")
        return Scaled.build(*args, **kwargs)

    @property
    def __signature__(cls) -> inspect.Signature:
        """What :func:`inspect.signature` shows: :meth:`Scaled.build`'s for
        :class:`Scaled`, a preset's own constructor's (without ``self``) for a preset."""
        if cls is Scaled:
            return inspect.signature(Scaled.build)
        sig = inspect.signature(cls.__init__)  # type: ignore[misc]
        return sig.replace(parameters=list(sig.parameters.values())[1:])


class Scaled(CountingMechanism, metaclass=_ScaledMeta):
    """A base encoder with scaled rows and columns (module docstring); Gaussian noise.

    The presets (:data:`PRESETS`) subclass it with their :attr:`scaling` and provide
    the structure: the column divisors n (:meth:`weights`), the row weights w
    (:meth:`row_weights`, 1 without row scaling), the base encoder's coefficients and
    its inverse's (for :meth:`dense_factorization`), and the exact per-step variances
    of B′ (:meth:`_exact_coefficients`, computed by the preset's own fast path and kept).
    Each preset states its formal guarantee: the ℓ₂ sensitivity is the largest column
    norm of C′ (enlarged by the rounding of n), and the release is post-processing of
    the Gaussian mechanism on C′x.

    ``Scaled(base, rows=..., columns=..., rng=None, **options)`` builds the preset of
    (base, rows, columns) from ``base``, the unscaled mechanism object (its horizon,
    whole budget and parameters) or a :class:`Base` member or its value with
    ``horizon=`` and ``budget=`` (:meth:`build`; the metaclass routes a call of
    :class:`Scaled` itself there, a preset's call is its own constructor); :attr:`base`
    is the way back.
    """

    #: the preset's base, rows and columns
    scaling: ClassVar[Scaling]
    #: the Chebyshev coefficients a_1… of ln w (with :data:`Rows.CHEBYSHEV`)
    log_weights: tuple[float, ...]
    default_noise = NoiseKind.GAUSSIAN
    continuous_noise = frozenset({NoiseKind.GAUSSIAN})

    @classmethod
    def build(
        cls,
        base: CountingMechanism | Base | str,
        *,
        rows: Rows | str = Rows.NONE,
        columns: Columns | str = Columns.NORMALIZE,
        rng: RNGLike = None,
        horizon: int | None = None,
        budget: Budget | None = None,
        **options: Any,
    ) -> Scaled:
        """The preset of (``base``, ``rows``, ``columns``), built (``Scaled(base, ...)``).

        ``base`` is either the unscaled mechanism object — a
        :class:`~dpcount.counting.SqrtFactorization`, a :class:`~dpcount.counting.BLT`
        (its θ, ω) or a :class:`~dpcount.counting.ToeplitzFactorization` (its
        coefficients), exactly those classes — whose horizon, whole budget (schema
        included) and parameters the preset is built with, or a :class:`Base` member or
        its value, with ``horizon=``, ``budget=`` (or its fields) and the preset's
        structure as keywords (``Scaled.of(base, rows=rows)(horizon, ...)``). The
        preset's own options (``log_weights``, ``column_scales``, ``block_ratio``: see
        the module docstring) are ``options``; ``p.scaling_options()`` gives them back,
        so ``Scaled(p.base, rows=p.scaling.rows, **p.scaling_options())`` rebuilds p.
        The preset is built by its own constructor, so its exact variances, stream,
        checkpoints and certified sensitivity are those of the registered preset.

        Randomness: ``rng`` (None: a new OS-entropy generator), never the base's:
        replaying a seeded base's Generator would replay its noise.

        Args:
            base: the unscaled mechanism, or a :class:`Base` member or its value.
            rows: a :class:`Rows` member or its value.
            columns: a :class:`Columns` member or its value.
            rng: Generator, int seed (not for production) or None (OS entropy).
            horizon: T, only with a :class:`Base` member (a mechanism carries its own).
            budget: only with a :class:`Base` member (a mechanism carries its own).
            **options: the preset's own options (and, with a :class:`Base` member, its
                structure, e.g. ``buffer_decay`` and ``output_scale``).

        Raises:
            TypeError: ``base`` of another type (naming ``base``), ``horizon``/``budget``
                or a parameter of the base given beside a base mechanism, no ``horizon``
                with a member.
            ValueError: a scaling that is not a preset (naming the presets), an unknown
                member value, or the preset's own refusal of the base (e.g. a horizon
                above its limit or a noise kind other than Gaussian, naming it).
        """
        if isinstance(base, CountingMechanism):
            return cls._from_mechanism(base, rows, columns, rng, horizon, budget, options)
        if not isinstance(base, (Base, str)):
            raise TypeError(f"base must be {_BASE_TYPES}, got {type(base).__name__}")
        if horizon is None:
            raise TypeError(
                f"Scaled(base={base!r}) needs horizon= (or pass the unscaled mechanism "
                "object as base)"
            )
        preset = cls.of(base, rows=rows, columns=columns)
        return preset(horizon, budget=budget, rng=rng, **options)

    @classmethod
    def _from_mechanism(
        cls,
        base: CountingMechanism,
        rows: Rows | str,
        columns: Columns | str,
        rng: RNGLike,
        horizon: int | None,
        budget: Budget | None,
        options: dict[str, Any],
    ) -> Scaled:
        """The preset built from the unscaled mechanism ``base`` (:meth:`build`)."""
        name = getattr(type(base), "name", None)
        kind = next((k for k, n in UNSCALED.items() if n == name), None)
        if kind is None or type(base) is not _registered(UNSCALED[kind]):
            hint = "; its base is .base" if isinstance(base, Scaled) else ""
            raise TypeError(f"base must be {_BASE_TYPES}, got {type(base).__name__}{hint}")
        given = [k for k, v in (("horizon", horizon), ("budget", budget)) if v is not None]
        given += sorted(_BUDGET_FIELDS & set(options))
        if given:
            raise TypeError(
                f"Scaled(base, ...) takes the horizon and budget from base "
                f"({type(base).__name__}), got {', '.join(given)}: build the base with them"
            )
        structure = {
            k: v
            for k, v in base._config_kwargs().items()
            if k != "horizon" and k not in _BUDGET_FIELDS
        }
        clash = sorted(set(structure) & set(options))
        if clash:
            raise TypeError(
                f"{clash[0]} is a parameter of base ({type(base).__name__}): build the base with it"
            )
        preset = cls.of(kind, rows=rows, columns=columns)
        return preset(base.horizon, budget=base.budget, rng=rng, **structure, **options)

    @staticmethod
    def of(
        base: Base | str,
        *,
        rows: Rows | str = Rows.NONE,
        columns: Columns | str = Columns.NORMALIZE,
    ) -> type[Scaled]:
        """The preset class of (``base``, ``rows``, ``columns``), each a member or its value
        (``Scaled(base, ...)`` builds one).

        Raises:
            ValueError: an unknown value (naming the parameter) or a scaling that is not a
                preset (naming the presets).
            TypeError: a value that is neither a member nor a str.
        """
        scaling = Scaling(
            _member(Base, "base", base),
            _member(Rows, "rows", rows),
            _member(Columns, "columns", columns),
        )
        name = next((n for n, s in PRESETS.items() if s == scaling), None)
        if name is None:
            known = ", ".join(
                f"{n} ({s.base.value}, rows {s.rows.value})" for n, s in PRESETS.items()
            )
            raise ValueError(
                f"no preset scales base {scaling.base.value!r} with rows {scaling.rows.value!r} "
                f"and columns {scaling.columns.value!r}; the presets are {known}"
            )
        return cast("type[Scaled]", _registered(name))

    # -- the base, the way back ---------------------------------------------------------
    @property
    def base(self) -> CountingMechanism:
        """The unscaled mechanism this preset scales (:data:`UNSCALED`): the same
        horizon, budget and base parameters (:meth:`_base_options`), a new object on
        each access with its own OS-entropy generator (never this one's).

        Raises:
            ValueError: the base's own refusal (e.g. banded Toeplitz coefficients whose
                unscaled decoder would overflow float64).
        """
        cls = _registered(UNSCALED[self.scaling.base])
        return cls(self.horizon, budget=self.budget, **self._base_options())

    def _base_options(self) -> dict[str, Any]:
        """The base mechanism's structure keywords (none for the square root)."""
        return {}

    def scaling_options(self) -> dict[str, Any]:
        """This preset's own constructor options, as :meth:`config` holds them
        (``log_weights``, ``column_scales``, ``block_ratio``; not the horizon, the budget
        or the base's parameters): ``Scaled(p.base, rows=p.scaling.rows,
        **p.scaling_options())`` rebuilds p."""
        drop = {"horizon", *_BUDGET_FIELDS, *self._base_options()}
        return {k: v for k, v in self._config_kwargs().items() if k not in drop}

    # -- the structure each preset gives ----------------------------------------------
    @abstractmethod
    def weights(self) -> Array:
        """The column divisors n_0, …, n_{T−1} (C′ = diag(w)·C·diag(1/n))."""

    def row_weights(self) -> Array:
        """The row weights w_0, …, w_{T−1} (all 1 without row scaling)."""
        return np.ones(self.horizon)

    @abstractmethod
    def _encoder_coefficients(self) -> Array:
        """c_0, …, c_{T−1}: the base encoder C's Toeplitz coefficients."""

    @abstractmethod
    def _decoder_kernel(self) -> Array:
        """g_0, …, g_{T−1}: the coefficients of C⁻¹ (lower-triangular Toeplitz)."""

    @abstractmethod
    def _exact_coefficients(self) -> Array:
        """V_t = ‖B′[t, :]‖² for t = 1..T, read-only, computed once by the preset's
        exact fast path and kept."""

    # -- what follows from it ----------------------------------------------------------
    def _config_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = super()._config_kwargs()
        if self.scaling.rows is Rows.CHEBYSHEV:
            kwargs["log_weights"] = list(self.log_weights)
        return kwargs

    def noise_coefficients(self) -> Array:
        """V_t = ‖B′[t, :]‖² for t = 1..T (a copy of the kept values)."""
        out: Array = self._exact_coefficients().copy()
        return out

    def _noise_coefficient_at(self, t: int) -> float:
        return float(self._exact_coefficients()[t - 1])

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        yield from self._exact_coefficients()[start - 1 :].tolist()

    def dense_factorization(self) -> tuple[Array, Array]:
        """(B′, C′) as dense T×T matrices; for T ≤ 4096.

        C′[i, j] = w_i·c_{i−j}/n_j, B′[t, j] = Σ_{s=j}^{t} n_s·g_{s−j}/w_j (i, t ≥ j).
        """
        T = self.horizon
        if T > DENSE_LIMIT:
            raise ValueError(f"dense factorization is for horizon <= {DENSE_LIMIT}, got {T}")
        c, g, n = self._encoder_coefficients(), self._decoder_kernel(), self.weights()
        lag = np.arange(T)[:, None] - np.arange(T)[None, :]
        idx = np.clip(lag, 0, None)
        B = np.cumsum(n[:, None] * np.where(lag >= 0, g[idx], 0.0), axis=0)
        C = np.where(lag >= 0, c[idx], 0.0)
        if self.scaling.rows is not Rows.NONE:
            w = self.row_weights()
            B /= w[None, :]
            C *= w[:, None]
        C /= n[None, :]
        return B, C
